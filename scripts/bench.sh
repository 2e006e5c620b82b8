#!/usr/bin/env bash
# Side-by-side training throughput: dpfl (plain build and GOEXPERIMENT=simd
# build) against the PyTorch reference ../shared/bench/torch_fedavg.py on
# the same job (MODEL=mlp: MLP 784-200-200-10; MODEL=cnn: the CNN of Reddi
# et al. 2021, Table 4; MODEL=logreg; batch 20, SGD, per-client clip, one
# thread each), interleaved and repeated REPS times in one run so that
# load from other processes hits all three alike. Prints each run's
# examples/s, then the median of each and the ratios of medians.
#
#   scripts/bench.sh                  # REPS=3 ROUNDS=10 COHORT=100 POPULATION=1000
#   MODEL=cnn scripts/bench.sh        # REPS=3 ROUNDS=1 COHORT=20 (~1,200 examples a run)
#   REPS=5 ROUNDS=20 scripts/bench.sh
#   PROFILE=/tmp/simd.pprof scripts/bench.sh   # CPU profile of the last simd run
#   ISA=avx2 MODEL=cnn scripts/bench.sh          # both sides limited to AVX2 + FMA
#
# ISA=avx2 measures an AVX2-only machine on an AVX-512 one, for both
# programs alike: dpfl through DPFL_SIMD=avx2 (its AVX2 kernels, and no
# AVX-512 in secure aggregation), PyTorch through OPENBLAS_CORETYPE=Haswell
# (OpenBLAS's AVX2 kernels for the dense layers) and ONEDNN_MAX_CPU_ISA=AVX2
# (oneDNN's convolutions); torch 1.13's own ATen kernels use AVX2 on either.
# Without it, DPFL_SIMD=avx2 alone would set dpfl's AVX2 path against a
# PyTorch that still uses AVX-512. The header prints what each library chose.
#
# The CNN costs ~60× the MLP's flops per example, so its defaults train one
# round of 20 clients: ~2–4 s of training per program, next to fixed costs
# that no longer depend on the job's size (torch's start-up and its test
# evaluation after every round, ~15 s a run; dpfl's final evaluation, ~5 s).
# One repetition then takes about 50 s.
#
# Needs Fashion-MNIST and python3-torch (installed with apt-get when run
# as root and missing; CI does not run this script).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
REPS=${REPS:-3}
MODEL=${MODEL:-mlp}
if [ "$MODEL" = cnn ]; then
  ROUNDS=${ROUNDS:-1}
  COHORT=${COHORT:-20}
else
  ROUNDS=${ROUNDS:-10}
  COHORT=${COHORT:-100}
fi
POPULATION=${POPULATION:-${CLIENTS:-1000}}  # CLIENTS: the old name, for one release
TORCH=${TORCH:-../shared/bench/torch_fedavg.py}
DATA=/usr/share/datasets/fashion-mnist

need=()
[ -f "$DATA/train-images-idx3-ubyte.gz" ] || need+=(dataset-fashion-mnist)
/usr/bin/python3 -c 'import torch' 2>/dev/null || need+=(python3-torch)
# Debian's torch calls whatever libblas.so.3 the alternatives select; with
# only the reference (netlib) BLAS it runs ~10× slower than with OpenBLAS,
# which would make the comparison meaningless.
ls /usr/lib/x86_64-linux-gnu/openblas-*/libblas.so.3 >/dev/null 2>&1 || need+=(libopenblas0-openmp)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq "${need[@]}" >/dev/null || { apt-get update -qq && apt-get install -y -qq "${need[@]}" >/dev/null; }
  else
    echo "missing: ${need[*]} (apt-get install ${need[*]})" >&2; exit 1
  fi
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/bench-plain" ./cmd/dpfl-bench
GOEXPERIMENT=simd go build -o "$tmp/bench-simd" ./cmd/dpfl-bench

cpus=$(nproc --all)
case "${ISA:-native}" in
  native) ;;
  avx2) export DPFL_SIMD=avx2 OPENBLAS_CORETYPE=Haswell ONEDNN_MAX_CPU_ISA=AVX2 ;;
  *) echo "ISA=$ISA: want native or avx2" >&2; exit 2 ;;
esac
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
blas=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3)
# The same job in each program's flag names: dpfl's, and the reference's.
args=(--population "$POPULATION" --cohort-size "$COHORT" --rounds "$ROUNDS" --batch 20 --epochs 1 --lr 0.05 --clip-norm 1 --noise-multiplier 1 --model "$MODEL")
targs=(--clients "$POPULATION" --cohort "$COHORT" --rounds "$ROUNDS" --batch 20 --epochs 1 --lr 0.05 --clip 1 --z 1 --model "$MODEL")
echo "# $(date -u +%FT%TZ) $cpus CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | xargs)), load: $(cut -d' ' -f1-3 /proc/loadavg); $(go version); torch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)') with $blas"
# What each program's kernels will use, as the libraries themselves report it.
torchisa=$(/usr/bin/python3 - <<'PY' 2>/dev/null || echo unknown
import ctypes, torch
blas = ctypes.CDLL('/usr/lib/x86_64-linux-gnu/libblas.so.3')
name = getattr(blas, 'openblas_get_corename', None)
core = 'not OpenBLAS'
if name is not None:
    name.restype = ctypes.c_char_p
    core = name().decode()
print('OpenBLAS core %s, oneDNN max ISA %s' % (core, __import__('os').environ.get('ONEDNN_MAX_CPU_ISA', 'all')))
PY
)
echo "# ISA=${ISA:-native}: dpfl DPFL_SIMD=${DPFL_SIMD:-auto}; torch: $torchisa"
echo "# job: ${args[*]}; one thread each (torch --threads 1, GOMAXPROCS=1 --workers 1)"
echo "# wall: examples per wall-second of the rounds; cpu: per CPU-second of the process (torch through scripts/torch_cputime.py)"
field() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p"; }
declare -a T P S TC PC SC
for r in $(seq "$REPS"); do
  /usr/bin/python3 "$TORCH" "${targs[@]}" --threads 1 > "$tmp/torch.$r"
  /usr/bin/python3 scripts/torch_cputime.py "$TORCH" "${targs[@]}" --threads 1 > "$tmp/torchcpu.$r"
  GOMAXPROCS=1 "$tmp/bench-plain" "${args[@]}" --workers 1 > "$tmp/plain.$r"
  prof=()
  [ -n "${PROFILE:-}" ] && [ "$r" = "$REPS" ] && prof=(--cpuprofile "$PROFILE")
  GOMAXPROCS=1 "$tmp/bench-simd" "${args[@]}" --workers 1 "${prof[@]}" > "$tmp/simd.$r"
  T+=("$(grep RESULT "$tmp/torch.$r" | field examples_per_s)")
  TC+=("$(grep RESULT "$tmp/torchcpu.$r" | field examples_per_s)")
  P+=("$(grep RESULT "$tmp/plain.$r" | field examples_per_s)")
  PC+=("$(grep RESULT "$tmp/plain.$r" | field examples_per_cpu_s)")
  S+=("$(grep RESULT "$tmp/simd.$r" | field examples_per_s)")
  SC+=("$(grep RESULT "$tmp/simd.$r" | field examples_per_cpu_s)")
  printf 'rep %d examples/s  wall: torch %s  dpfl-plain %s  dpfl-simd %s   cpu: torch %s  dpfl-plain %s  dpfl-simd %s\n' \
    "$r" "${T[-1]}" "${P[-1]}" "${S[-1]}" "${TC[-1]}" "${PC[-1]}" "${SC[-1]}"
done
echo "# final test accuracy (last rep): torch $(grep -o 'test_acc=[0-9.]*' "$tmp/torch.$REPS" | tail -1) plain $(grep -o 'test_acc=[0-9.]*' "$tmp/plain.$REPS" | tail -1) simd $(grep -o 'test_acc=[0-9.]*' "$tmp/simd.$REPS" | tail -1)"
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
for kind in wall cpu; do
  if [ $kind = wall ]; then mt=$(median "${T[@]}"); mp=$(median "${P[@]}"); ms=$(median "${S[@]}")
  else mt=$(median "${TC[@]}"); mp=$(median "${PC[@]}"); ms=$(median "${SC[@]}"); fi
  awk -v k=$kind -v t="$mt" -v p="$mp" -v s="$ms" 'BEGIN {printf "median %s examples/s: torch %s  dpfl-plain %s  dpfl-simd %s   ratio vs torch: plain %.2fx  simd %.2fx\n", k, t, p, s, p/t, s/t}'
done
