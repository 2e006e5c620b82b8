#!/usr/bin/env bash
# The main job: build dpfl, start dpfl-server on loopback with a fresh
# database, submit the demo DP-FedAvg job (examples/demo-job.json) through
# dpfl-client, watch it, print test accuracy and (ε, δ), stop the server.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
DATA_DIR=${DPFL_DATA_DIR:-/usr/share/datasets/fashion-mnist}
PORT=${DPFL_DEMO_PORT:-18080}
JOB=${DPFL_DEMO_JOB:-examples/demo-job.json}

if [ ! -f "$DATA_DIR/train-images-idx3-ubyte.gz" ]; then
  if [ "$DATA_DIR" = /usr/share/datasets/fashion-mnist ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== installing Fashion-MNIST (Debian package dataset-fashion-mnist)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq dataset-fashion-mnist
  else
    echo "Fashion-MNIST not found in $DATA_DIR." >&2
    echo "Install it with: sudo apt-get install dataset-fashion-mnist   (or set DPFL_DATA_DIR to a folder holding the four IDX .gz files)" >&2
    exit 1
  fi
fi

echo "== building"
# The fast build (README, "Performance and the SIMD build"): GOEXPERIMENT=simd
# where the toolchain has it (Go ≥ 1.26 on amd64), the portable build otherwise.
if [ "$(go env GOARCH)" = amd64 ] && GOEXPERIMENT=simd go list simd/archsimd >/dev/null 2>&1; then
  GOEXPERIMENT=simd go build -o bin/ ./cmd/dpfl-server ./cmd/dpfl-client
else
  go build -o bin/ ./cmd/dpfl-server ./cmd/dpfl-client
fi

work=$(mktemp -d)
export DPFL_TOKEN=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
export DPFL_SERVER=http://127.0.0.1:$PORT
bin/dpfl-server --addr 127.0.0.1:$PORT --db "$work/dpfl.db" --data-dir "$DATA_DIR" 2>"$work/server.log" &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 50); do
  bin/dpfl-client list >/dev/null 2>&1 && break
  kill -0 $server 2>/dev/null || { cat "$work/server.log" >&2; exit 1; }
  sleep 0.2
done
echo "== dpfl-server on $DPFL_SERVER (db $work/dpfl.db); submitting $JOB"
start=$(date +%s.%N)
bin/dpfl-client submit --file "$JOB" --watch
echo "== wall time $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')s"
