#!/usr/bin/env bash
# The Python client's tests (clients/python/tests) against a real
# dpfl-server: build dpfl-server into a temporary directory, make sure
# Debian's python3 and python3-numpy are there (installed with apt-get when
# run as root and missing), and run the tests with DPFL_SERVER_BIN set.
# Exits non-zero when anything fails.
#
#   bash scripts/test-python.sh
#   PYTHON=python3.12 bash scripts/test-python.sh   # another interpreter
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
export DEBIAN_FRONTEND=noninteractive
export PYTHONDONTWRITEBYTECODE=1
DATA_DIR=${DPFL_DATA_DIR:-/usr/share/datasets/fashion-mnist}

apt_install() {
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== installing $* (apt-get)"
    apt-get update -qq && apt-get install -y -qq "$@"
  else
    return 1
  fi
}

# Debian's python3 (where python3-numpy installs numpy), unless $PYTHON
# names another.
if [ -z "${PYTHON:-}" ]; then
  if [ ! -x /usr/bin/python3 ] && ! command -v python3 >/dev/null; then
    apt_install python3 python3-numpy || { echo "python3 not found; install it (apt-get install python3 python3-numpy)" >&2; exit 1; }
  fi
  if [ -x /usr/bin/python3 ]; then PYTHON=/usr/bin/python3; else PYTHON=python3; fi
fi
if ! "$PYTHON" -c 'import numpy' 2>/dev/null; then
  if [ "$PYTHON" = /usr/bin/python3 ] && apt_install python3-numpy; then
    :
  else
    echo "== note: numpy is not importable by $PYTHON; the client then gives models as lists (the tests cover that path)"
  fi
fi

if [ ! -f "$DATA_DIR/train-images-idx3-ubyte.gz" ] && [ "$DATA_DIR" = /usr/share/datasets/fashion-mnist ]; then
  apt_install dataset-fashion-mnist || true # the tests say what is missing
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "== building dpfl-server into $work"
go build -o "$work/dpfl-server" ./cmd/dpfl-server

echo "== $("$PYTHON" --version 2>&1) ($PYTHON), numpy: $("$PYTHON" -c 'import numpy; print(numpy.__version__)' 2>/dev/null || echo none)"
DPFL_SERVER_BIN="$work/dpfl-server" DPFL_DATA_DIR="$DATA_DIR" \
  "$PYTHON" -m unittest discover -s clients/python/tests -v
