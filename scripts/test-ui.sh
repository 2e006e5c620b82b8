#!/usr/bin/env bash
# The web dashboard's browser test (cmd/dpfl-server/ui_browser_test.go):
# headless Chromium, driven by chromedp, against a real dpfl-server
# running a small DP job on Fashion-MNIST. Installs Debian's chromium (and
# dataset-fashion-mnist) with apt-get when run as root and missing, then
# runs TestUIAssets and TestUIBrowser with DPFL_UI_TEST=1. Exits non-zero
# when anything fails.
#
#   bash scripts/test-ui.sh
#   DPFL_UI_SCREENSHOT=docs/dashboard.png bash scripts/test-ui.sh   # keep the screenshot
#   DPFL_CHROMIUM=/path/to/chrome bash scripts/test-ui.sh            # another browser
set -euo pipefail
# A relative screenshot path is relative to where the script was started.
if [ -n "${DPFL_UI_SCREENSHOT:-}" ]; then
  case "$DPFL_UI_SCREENSHOT" in
    /*) ;;
    *) DPFL_UI_SCREENSHOT="$PWD/$DPFL_UI_SCREENSHOT" ;;
  esac
  mkdir -p "$(dirname "$DPFL_UI_SCREENSHOT")"
  export DPFL_UI_SCREENSHOT
fi
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
export DEBIAN_FRONTEND=noninteractive
DATA_DIR=/usr/share/datasets/fashion-mnist

apt_install() {
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== installing $* (apt-get)"
    apt-get update -qq && apt-get install -y -qq "$@"
  else
    return 1
  fi
}

if [ -z "${DPFL_CHROMIUM:-}" ] && ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
  apt_install chromium || true # the test says what is missing
fi
if [ ! -f "$DATA_DIR/train-images-idx3-ubyte.gz" ]; then
  apt_install dataset-fashion-mnist || true # the test says what is missing
fi
if [ -n "${DPFL_CHROMIUM:-}" ]; then
  echo "== browser: $DPFL_CHROMIUM"
elif command -v chromium >/dev/null; then
  echo "== browser: $(chromium --version 2>/dev/null || echo chromium)"
fi

DPFL_UI_TEST=1 go test ./cmd/dpfl-server/ -run '^(TestUIAssets|TestUIBrowser)$' -count=1 -v
if [ -n "${DPFL_UI_SCREENSHOT:-}" ]; then
  echo "== screenshot: $DPFL_UI_SCREENSHOT"
fi
