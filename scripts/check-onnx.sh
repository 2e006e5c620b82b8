#!/usr/bin/env bash
# The ONNX export's check with Debian's python3-onnx (issue 17): writes
# the ONNX and safetensors files of fl/model's logreg, mlp and cnn
# (briefly trained on Fashion-MNIST) with a sample privacy certificate,
# plus Fashion-MNIST test images and dpfl's own forward outputs on them
# (go run ./export/internal/onnxcheck), then runs scripts/check_onnx.py:
# onnx.checker.check_model on each file, the graph evaluated with numpy
# from the ONNX weights and compared with dpfl's outputs (max |Δ| < 1e-5),
# and the safetensors file against the ONNX one. Installs python3-onnx and
# python3-numpy with apt-get when run as root and missing. Exits non-zero
# when anything fails.
#
#   bash scripts/check-onnx.sh
#   KEEP=/tmp/onnx bash scripts/check-onnx.sh   # keep the files there
#   PYTHON=python3 bash scripts/check-onnx.sh   # another interpreter with onnx
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
export DEBIAN_FRONTEND=noninteractive
export PYTHONDONTWRITEBYTECODE=1
DATA_DIR=${DPFL_DATA_DIR:-/usr/share/datasets/fashion-mnist}
IMAGES=${IMAGES:-16}

# Debian's python3, where python3-onnx and python3-numpy install, unless
# $PYTHON names another.
if [ -z "${PYTHON:-}" ]; then
  if [ -x /usr/bin/python3 ]; then PYTHON=/usr/bin/python3; else PYTHON=python3; fi
fi
missing=()
"$PYTHON" -c 'import numpy' 2>/dev/null || missing+=(python3-numpy)
"$PYTHON" -c 'import onnx' 2>/dev/null || missing+=(python3-onnx)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== installing ${missing[*]} (apt-get)"
    apt-get update -qq && apt-get install -y -qq python3 "${missing[@]}" >/dev/null
    PYTHON=/usr/bin/python3
  else
    echo "check-onnx: $PYTHON cannot import ${missing[*]#python3-}; install ${missing[*]} (apt-get, as root)" >&2
    exit 1
  fi
fi

if [ -n "${KEEP:-}" ]; then
  dir=$KEEP
  mkdir -p "$dir"
else
  dir=$(mktemp -d)
  trap 'rm -rf "$dir"' EXIT
fi
echo "== writing the models and dpfl's outputs ($dir)"
go run ./export/internal/onnxcheck -out "$dir" -data "$DATA_DIR" -images "$IMAGES"
echo "== checking them with $("$PYTHON" -c 'import onnx; print("onnx", onnx.__version__)') ($PYTHON)"
"$PYTHON" scripts/check_onnx.py "$dir"
