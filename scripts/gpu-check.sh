#!/usr/bin/env bash
#===- scripts/gpu-check.sh - CUDA backend check on a lent GPU --------------===#
#
# Part of the dsc project: a declarative graph compiler for parallel training.
#
# On a fresh GPU machine (CUDA + cmake + a C++ compiler, OpenBLAS/OpenMP and
# GTest from the distro; no network, no MLIR needed): configures the
# runtime-only build (bench/cuda as the project root), builds only the CUDA
# targets, runs the CUDA tests (label `cuda`: kernels vs. the CPU kernels, the
# NCCL communicator, the executor on the CUDA backend vs. the CPU backend) and
# the loss scaler's, then the GPT-2-small bf16 training-step benchmark and
# the compiled GPT-2-small plans through the executor (bf16, TF32, fp32), and prints
# their tables. Full logs go to $OUT when
# set (else <build>/logs). Budget: < 8 min on an H200 including the build.
#
# Env: DSC_GPU_BUILD (build dir), DSC_CUDA_ARCH (default: detected, else 90),
#      DSC_BENCH_BATCHES (default 4,8,16), DSC_BENCH_STEPS (default 10),
#      JOBS (default nproc, at most 16).
# Exit status: 0 all tests passed and the bench ran; 1 otherwise.
#
#===------------------------------------------------------------------------===#
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${DSC_GPU_BUILD:-$ROOT/build-gpu-check}
LOGS=${OUT:-$BUILD/logs}
mkdir -p "$BUILD" "$LOGS"
JOBS=${JOBS:-$(nproc)}
((JOBS > 16)) && JOBS=16
START=$(date +%s)
STATUS=0

say() { echo "[gpu-check +$(($(date +%s) - START))s] $*" | tee -a "$LOGS/summary.txt"; }
fail() { say "FAILED: $*"; STATUS=1; }

say "root $ROOT, build $BUILD, logs $LOGS, jobs $JOBS, $(date -u +%FT%TZ)"
export PATH=/usr/local/cuda/bin:$PATH
if command -v nvidia-smi >/dev/null; then
  nvidia-smi >"$LOGS/nvidia-smi.txt" 2>&1
  say "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"
  CAP=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
fi
ARCH=${DSC_CUDA_ARCH:-${CAP:-90}}
command -v nvcc >/dev/null || { say "no nvcc on PATH or in /usr/local/cuda/bin"; exit 1; }
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)

# 1. Configure: runtime only (no MLIR), one GPU arch.
say "configure (CUDA arch $ARCH)"
if ! cmake "${GEN[@]}" -S "$ROOT/bench/cuda" -B "$BUILD" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$ARCH" \
    >"$LOGS/configure.log" 2>&1; then
  fail "configure (see $LOGS/configure.log)"
  tail -20 "$LOGS/configure.log"
  exit 1
fi

# 2. Build only what runs below.
TARGETS=(dsc-bench-cuda-gpt2 dsc-bench-cuda-executor)
grep -q "GTest not found" "$LOGS/configure.log" ||
  TARGETS+=(DscCudaKernelTests DscLossScalerTest DscNcclCommunicatorTests
            DscCudaBackendTests)
say "build ${TARGETS[*]}"
if ! cmake --build "$BUILD" -j "$JOBS" --target "${TARGETS[@]}" \
    >"$LOGS/build.log" 2>&1; then
  fail "build (see $LOGS/build.log)"
  grep -E "error|Error" "$LOGS/build.log" | head -20
  exit 1
fi
say "build done"

# 3. CUDA tests (each gtest case is a ctest test; label `cuda`).
if [[ ${#TARGETS[@]} -gt 1 ]]; then
  say "ctest: label cuda and the loss scaler"
  (cd "$BUILD" && ctest -R '^cuda\.|LossScaler' --output-on-failure \
    --timeout 300 -j 1) \
    >"$LOGS/ctest.log" 2>&1 || fail "CUDA tests (see $LOGS/ctest.log)"
  grep -E "tests passed|tests failed|\*\*\*Failed|Not Run" "$LOGS/ctest.log" |
    tee -a "$LOGS/summary.txt"
  SKIPPED=$(grep -c "\*\*\*Skipped" "$LOGS/ctest.log")
  # On a GPU machine a skipped CUDA test means the device was not usable.
  ((SKIPPED > 0)) && fail "$SKIPPED CUDA tests skipped (no usable device)"
  # The full gtest output of each CUDA test binary, for the record.
  "$BUILD/bin/DscCudaKernelTests" >"$LOGS/kernel-tests.log" 2>&1
  DSC_NCCL_TIMEOUT_S=60 "$BUILD/bin/DscNcclCommunicatorTests" \
    >"$LOGS/nccl-tests.log" 2>&1
  DSC_NCCL_TIMEOUT_S=60 "$BUILD/bin/DscCudaBackendTests" \
    >"$LOGS/backend-tests.log" 2>&1
else
  fail "GTest missing: CUDA tests not built"
fi

# 4. GPT-2-small bf16 training step.
BATCHES=${DSC_BENCH_BATCHES:-4,8,16}
STEPS=${DSC_BENCH_STEPS:-10}
say "bench: batches $BATCHES, $STEPS timed steps each"
timeout 300 "$BUILD/bin/dsc-bench-cuda-gpt2" --batches "$BATCHES" \
  --steps "$STEPS" >"$LOGS/bench.log" 2>&1
case $? in
0) ;;
77) fail "no CUDA device: bench skipped (this script needs a GPU)" ;;
124) fail "bench timed out after 300 s (see $LOGS/bench.log)" ;;
*) fail "bench (see $LOGS/bench.log)" ;;
esac
echo
cat "$LOGS/bench.log" | tee -a "$LOGS/summary.txt"
echo

# 5. The product path: the compiled GPT-2-small plans through the executor
#    on the CUDA backend: bf16 mixed precision (the MFU target's path), f32
#    with TF32 GEMMs, f32.
for RUN in "bf16 gpt2-small-bf16.plan" "tf32 gpt2-small.plan --tf32" \
           "fp32 gpt2-small.plan"; do
  set -- $RUN
  NAME=$1 PLAN=$2
  shift 2
  say "executor bench $NAME"
  timeout 240 "$BUILD/bin/dsc-bench-cuda-executor" \
    "$ROOT/bench/cuda/$PLAN" --steps "$STEPS" "$@" \
    >"$LOGS/executor-bench-$NAME.log" 2>&1
  case $? in
  0) cat "$LOGS/executor-bench-$NAME.log" | tee -a "$LOGS/summary.txt" ;;
  77) fail "no CUDA device: executor bench skipped" ;;
  124) fail "executor bench timed out (see $LOGS/executor-bench-$NAME.log)" ;;
  *) fail "executor bench (see $LOGS/executor-bench-$NAME.log)"
     tail -5 "$LOGS/executor-bench-$NAME.log" ;;
  esac
done
say "done in $(($(date +%s) - START)) s, status $STATUS"
exit $STATUS
