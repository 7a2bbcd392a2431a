#!/usr/bin/env bash
# gpu-check.sh: the CUDA backend's device check, for a machine with one
# NVIDIA GPU (and its driver), which may lack Go.
#
#   scripts/gpu-check.sh [FIXTURES]   run the check
#   scripts/gpu-check.sh --build DIR  build the test binaries into DIR, then stop
#
# The check runs three test binaries built with -tags cuda: cuda.test
# (gpu/cuda's device tests: the operations against gpu/ref, the memory
# check and accounting), model.test (TestParity and TestGGUFParity, whose
# backends include the CUDA device in that build, against the shared
# fixtures) and engine.test (BenchmarkCUDADecode and BenchmarkCUDAPrefill:
# tokens/s on smollm2-135m shapes at batch 1, 8 and 64, decode with the
# bandwidth it achieves). It takes them from $TROUPE_GPU_CHECK_BIN (default
# bin/gpu-check in the repository; `task gpu:build-check` puts them there),
# else builds them when go is on the PATH. FIXTURES defaults to
# $TROUPE_FIXTURES, else ../shared/fixtures beside the repository; missing
# fixtures fail the check (CI=true). It prints each command it runs and
# exits non-zero on any failure. The steps' time limits add up to 7.5
# minutes (a build, when one is needed, comes on top).
set -euo pipefail

readonly max_binary_bytes=$((64 << 20)) # what a device machine takes back and forth
readonly device_limit=60                 # seconds, each step
readonly parity_limit=210
readonly bench_limit=180
# The test binaries and their packages.
binaries=(model.test engine.test cuda.test)
declare -A package=([model.test]=./model [engine.test]=./engine [cuda.test]=./gpu/cuda)

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
exec 3>&1 # the terminal's stdout, for what run_in says while the output goes to a log

say() { printf 'gpu-check: %s\n' "$*"; }
die() {
  printf 'gpu-check: FAIL: %s\n' "$*" >&2
  exit 1
}

# cuda_headers sets CPATH and LIBRARY_PATH for cgo when they are unset:
# a CUDA toolkit's, else the stubs .ci/run caches.
cuda_headers() {
  [[ -n ${CPATH:-} ]] && return 0
  local d
  for d in /usr/local/cuda "${TROUPE_CUDA_STUBS:-$HOME/.cache/troupe/cuda-11.8}"; do
    if [[ -f $d/include/cuda.h ]]; then
      export CPATH=$d/include
      if [[ -d $d/lib64/stubs ]]; then
        export LIBRARY_PATH=$d/lib64/stubs
      else
        export LIBRARY_PATH=$d/lib
      fi
      return 0
    fi
  done
  die "no cuda.h: set CPATH and LIBRARY_PATH (see gpu/cuda/doc.go)"
}

# build DIR: the test binaries, stripped, each checked against the size limit.
build() {
  local dir=$1 pkg bin size
  command -v go >/dev/null || die "go is not on the PATH: cannot build the test binaries"
  cuda_headers
  mkdir -p "$dir"
  for bin in "${binaries[@]}"; do
    pkg=${package[$bin]}
    say "building $dir/$bin: go test -c -tags cuda -ldflags='-s -w' $pkg"
    (cd "$repo" && go test -c -tags cuda -ldflags='-s -w' -o "$dir/$bin" "$pkg") || die "building $bin"
    size=$(wc -c <"$dir/$bin")
    ((size < max_binary_bytes)) || die "$dir/$bin is $size bytes, over the $max_binary_bytes-byte limit"
    say "$dir/$bin: $((size >> 20)) MiB"
  done
}

if [[ ${1:-} == --build ]]; then
  [[ -n ${2:-} ]] || die "usage: $0 --build DIR"
  mkdir -p "$2"
  build "$(cd "$2" && pwd)"
  exit 0
fi

fixtures=${1:-${TROUPE_FIXTURES:-$repo/../shared/fixtures}}
[[ -d $fixtures ]] || die "fixtures not found at $fixtures (pass FIXTURES or set TROUPE_FIXTURES)"
fixtures=$(cd "$fixtures" && pwd)
export TROUPE_FIXTURES=$fixtures CI=true
say "fixtures: $TROUPE_FIXTURES"

if command -v nvidia-smi >/dev/null; then
  say "GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -n 1)"
else
  say "nvidia-smi not found; going on (the test binaries find the GPU through libcuda.so.1)"
fi

bindir=${TROUPE_GPU_CHECK_BIN:-$repo/bin/gpu-check}
have=1
for bin in "${binaries[@]}"; do
  [[ -x $bindir/$bin ]] || have=0
done
if ((have)); then
  say "using the prebuilt test binaries in $bindir"
else
  say "no prebuilt test binaries in $bindir: building them"
  bindir=$(mktemp -d)
  trap 'rm -rf "$bindir"' EXIT
  build "$bindir"
fi

# run_in DIR LIMIT CMD...: print and run CMD in DIR under a time limit.
run_in() {
  local dir=$1 limit=$2
  shift 2
  say "running (in $dir, at most ${limit}s): $*" >&3
  (cd "$dir" && timeout "$limit" "$@")
}

workdir() { # the package's folder when the repository is here (its testdata)
  if [[ -d $repo/$1 ]]; then echo "$repo/$1"; else echo "$bindir"; fi
}

log=$(mktemp)
status=0
run_in "$(workdir gpu/cuda)" "$device_limit" "$bindir/cuda.test" -test.run '^Test(MatMul|Ops|Attention|Memory)$' -test.v -test.count 1 -test.timeout "$((device_limit - 10))s" >"$log" 2>&1 || status=$?
grep -E -- '--- (PASS|FAIL|SKIP)|^(ok|FAIL|PASS)|panic' "$log" || true
if ((status != 0)); then
  tail -n 60 "$log"
  rm -f "$log"
  die "gpu/cuda's tests (exit status $status)"
fi
passed=$(grep -cE -- '^--- PASS: Test(MatMul|Ops|Attention|Memory) ' "$log" || true)
if ((passed != 4)); then
  grep -E -A2 -- '--- SKIP' "$log" || true
  rm -f "$log"
  die "gpu/cuda's device tests: $passed of 4 passed (skipped for want of a usable CUDA device, or a binary built without -tags cuda)"
fi
rm -f "$log"

log=$(mktemp)
status=0
run_in "$(workdir model)" "$parity_limit" "$bindir/model.test" -test.run '^(TestParity|TestGGUFParity)$' -test.v -test.count 1 \
  -test.timeout "$((parity_limit - 10))s" >"$log" 2>&1 || status=$?
cuda_pass=$(grep -cE -- '--- PASS: Test[A-Za-z]*Parity/.*/cuda ' "$log" || true)
cuda_fail=$(grep -cE -- '--- FAIL: Test[A-Za-z]*Parity/.*/cuda ' "$log" || true)
say "parity: $cuda_pass model checks passed on the CUDA device, $cuda_fail failed"
grep -E -- '--- FAIL|^(ok|FAIL|PASS)|operations on the host|panic' "$log" || true
if ((status != 0)); then
  tail -n 60 "$log"
  rm -f "$log"
  die "parity tests (exit status $status)"
fi
rm -f "$log"
((cuda_pass > 0)) || die "no parity check ran on the CUDA device (binary built without -tags cuda?)"

log=$(mktemp)
status=0
run_in "$(workdir engine)" "$bench_limit" "$bindir/engine.test" -test.run '^$' -test.bench '^BenchmarkCUDA(Decode|Prefill)$' \
  -test.benchtime 3x -test.timeout "$((bench_limit - 10))s" 2>&1 | tee "$log" || status=$?
results=$(grep -cE '^BenchmarkCUDA(Decode|Prefill)/.* tok/s' "$log" || true)
rm -f "$log"
((status == 0)) || die "benchmarks (exit status $status)"
((results == 12)) || die "benchmarks: $results results with tok/s, want 12 (decode and prefill, 2 precisions, 3 batch sizes)"
say "PASS: parity on the CUDA device, $results benchmark results"
