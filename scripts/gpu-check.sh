#!/usr/bin/env bash
#===- scripts/gpu-check.sh - CUDA backend check on a lent GPU --------------===#
#
# Part of the dsc project: a declarative graph compiler for parallel training.
#
# On a lent GPU machine (CUDA, cmake, a C++ compiler; no network, no MLIR):
# the CUDA tests (each kernel against its CPU twin, the executor on the CUDA
# backend against the CPU backend on the gpt-tiny plans, the NCCL
# communicator), then the compiled GPT-2-small plans through the executor
# (bf16, TF32, fp32) and the raw-kernel GPT-2-small bf16 step, each beside a
# cuBLASLt GEMM ceiling measured in the same run.
#
# The binaries are built on the CPU machine and carried (DSC_GPU_PREBUILT=1,
# scripts/gpu-bundle.sh): the runtime's build needs LLVM's Support library,
# which the GPU machine lacks, and a build would spend most of a short lease.
# Without DSC_GPU_PREBUILT it configures bench/cuda as a runtime-only project
# and builds the targets itself (where LLVM is installed). Dependencies the
# machine lacks come from <repo>/.gpudeps (scripts/gpu-deps.sh); NCCL from
# NCCL_ROOT, else the CUDA toolkit, else the PyTorch wheel's nvidia/nccl.
#
# Logs go to <build>/logs; with $OUT set, the summary and an archive of the
# logs (logs.tgz) go there too, refreshed after each step.
#
# Env: DSC_GPU_BUILD (build dir), DSC_CUDA_ARCH (default: detected, else 90),
#      DSC_BENCH_BATCHES (default 4,8,16), DSC_BENCH_STEPS (default 10),
#      JOBS (default nproc, at most 16), DSC_GPU_PREBUILT (1: use $BUILD/bin),
#      DSC_TEST_TIMEOUT (seconds per test binary, default 150),
#      DSC_GPU_PROFILE (1: kernel times of the bf16 step under ncu).
# Exit status: 0 all tests passed and the bench ran; 1 otherwise.
#
#===------------------------------------------------------------------------===#
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${DSC_GPU_BUILD:-$ROOT/build-gpu-check}
LOGS=$BUILD/logs
rm -rf "$LOGS"
mkdir -p "$BUILD" "$LOGS"
JOBS=${JOBS:-$(nproc)}
((JOBS > 16)) && JOBS=16
START=$(date +%s)
STATUS=0

say() { echo "[gpu-check +$(($(date +%s) - START))s] $*" | tee -a "$LOGS/summary.txt"; }
# The device tool returns at most 8 files from $OUT: the summary, and every
# log in one archive, refreshed after each step (a run cut off by its time
# limit still returns what it did).
publish() {
  [[ -n ${OUT:-} ]] || return 0
  cp "$LOGS/summary.txt" "$OUT/summary.txt"
  tar -czf "$OUT/logs.tgz" -C "$LOGS" .
}
fail() { say "FAILED: $*"; STATUS=1; }

say "root $ROOT, build $BUILD, logs $LOGS, jobs $JOBS, $(date -u +%FT%TZ)"
export PATH=/usr/local/cuda/bin:$PATH
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if command -v nvidia-smi >/dev/null; then
  nvidia-smi >"$LOGS/nvidia-smi.txt" 2>&1
  say "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"
  CAP=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
fi
ARCH=${DSC_CUDA_ARCH:-${CAP:-90}}
command -v nvcc >/dev/null || { say "no nvcc on PATH or in /usr/local/cuda/bin"; exit 1; }
say "nvcc: $(nvcc --version | tail -1)"
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
EXTRA=()
if [[ -d $ROOT/.gpudeps ]]; then
  EXTRA+=(-DCMAKE_PREFIX_PATH="$ROOT/.gpudeps")
  export LD_LIBRARY_PATH=$ROOT/.gpudeps/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  say "dependencies from $ROOT/.gpudeps"
fi
if [[ -z ${NCCL_ROOT:-} && ! -e /usr/local/cuda/include/nccl.h ]]; then
  for PY in python3 /opt/torch/.venv/bin/python3; do
    NCCL_ROOT=$("$PY" -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__) if nvidia.nccl.__file__ else list(nvidia.nccl.__path__)[0])' 2>/dev/null) && break
  done
  if [[ -z ${NCCL_ROOT:-} || ! -e $NCCL_ROOT/include/nccl.h ]]; then
    NCCL_ROOT=$(dirname "$(dirname "$(find /opt /usr/local /usr/lib -name nccl.h -path '*include*' 2>/dev/null | head -1)")" 2>/dev/null)
  fi
fi
if [[ -n ${NCCL_ROOT:-} ]]; then
  say "NCCL from $NCCL_ROOT ($(ls "$NCCL_ROOT"/lib 2>/dev/null | tr '\n' ' '))"
  EXTRA+=(-DNCCL_ROOT="$NCCL_ROOT")
  # The wheel ships libnccl.so.2 only: give the linker its unversioned name.
  if [[ ! -e $NCCL_ROOT/lib/libnccl.so && -e $NCCL_ROOT/lib/libnccl.so.2 ]]; then
    mkdir -p "$BUILD/nccl-link"
    ln -sf "$NCCL_ROOT/lib/libnccl.so.2" "$BUILD/nccl-link/libnccl.so"
    EXTRA+=(-DDSC_NCCL_LIBRARY="$BUILD/nccl-link/libnccl.so")
  fi
  export LD_LIBRARY_PATH=$NCCL_ROOT/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi

# 1-2. Configure and build only what runs below, unless DSC_GPU_PREBUILT=1
#      says $BUILD already holds them (built on the CPU machine with the same
#      CUDA, carried over: the build is most of a short device lease).
# (The loss scaler's test is host-only and needs LLVM's JSON: CI runs it.)
TESTS=(DscCudaKernelTests DscCudaBackendTests DscNcclCommunicatorTests)
if [[ ${DSC_GPU_PREBUILT:-0} == 1 ]]; then
  say "prebuilt binaries in $BUILD/bin"
  MISSING=$(ldd "$BUILD"/bin/* 2>/dev/null | grep "not found" | sort -u)
  [[ -n $MISSING ]] && fail "libraries not found: $MISSING"
else
  say "configure (CUDA arch $ARCH)"
  if ! cmake "${GEN[@]}" -S "$ROOT/bench/cuda" -B "$BUILD" \
      -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$ARCH" \
      "${EXTRA[@]}" >"$LOGS/configure.log" 2>&1; then
    fail "configure (see $LOGS/configure.log)"
    tail -20 "$LOGS/configure.log"
    exit 1
  fi
  TARGETS=(dsc-bench-cuda-gpt2 dsc-bench-cuda-executor)
  grep -q "GTest not found" "$LOGS/configure.log" || TARGETS+=("${TESTS[@]}")
  say "build ${TARGETS[*]}"
  if ! cmake --build "$BUILD" -j "$JOBS" --target "${TARGETS[@]}" \
      >"$LOGS/build.log" 2>&1; then
    fail "build (see $LOGS/build.log)"
    grep -E "error|Error" "$LOGS/build.log" | head -20
    exit 1
  fi
  say "build done"
fi

# 3. The CUDA tests, each binary once (a process per gtest case, as ctest
#    runs them, would spend the lease on CUDA context start-ups). A skipped
#    case on a GPU machine means the device was not usable: a failure here.
TEST_TIMEOUT=${DSC_TEST_TIMEOUT:-150}
for T in "${TESTS[@]}"; do
  if [[ ! -x $BUILD/bin/$T ]]; then
    fail "$T not built"
    continue
  fi
  say "test $T"
  DSC_NCCL_TIMEOUT_S=60 timeout "$TEST_TIMEOUT" "$BUILD/bin/$T" \
    --gtest_output="xml:$LOGS/$T.xml" >"$LOGS/$T.log" 2>&1
  RC=$?
  grep -E "^\[  (PASSED|FAILED|SKIPPED) +\]|tests? ran" "$LOGS/$T.log" |
    tee -a "$LOGS/summary.txt"
  ((RC == 124)) && fail "$T timed out after $TEST_TIMEOUT s"
  ((RC == 77)) && fail "$T: no usable CUDA device"
  ((RC != 0 && RC != 124 && RC != 77)) && fail "$T exit $RC (see $T.log)"
  # Cases that need a second GPU skip on a one-GPU machine, saying so;
  # any other skip is a failure.
  OTHER=$(grep -A1 ": Skipped$" "$LOGS/$T.log" | grep -v -e ": Skipped$" -e "^--" |
          grep -vc -e "two GPUs" -e "two CUDA devices")
  ((OTHER > 0)) && fail "$T: $OTHER cases skipped for another reason than a second GPU"
  publish
done

# 4. The product path first: the compiled GPT-2-small plans through the executor
#    on the CUDA backend: bf16 mixed precision (the MFU target's path), f32
#    with TF32 GEMMs, f32.
STEPS=${DSC_BENCH_STEPS:-10}
for RUN in "bf16 gpt2-small-bf16.plan" "tf32 gpt2-small.plan --tf32" \
           "fp32 gpt2-small.plan"; do
  set -- $RUN
  NAME=$1 PLAN=$2
  shift 2
  say "executor bench $NAME"
  timeout 120 "$BUILD/bin/dsc-bench-cuda-executor" \
    "$ROOT/bench/cuda/$PLAN" --steps "$STEPS" "$@" \
    >"$LOGS/executor-bench-$NAME.log" 2>&1
  case $? in
  0) cat "$LOGS/executor-bench-$NAME.log" | tee -a "$LOGS/summary.txt" ;;
  77) fail "no CUDA device: executor bench skipped" ;;
  124) fail "executor bench timed out (see $LOGS/executor-bench-$NAME.log)" ;;
  *) fail "executor bench (see $LOGS/executor-bench-$NAME.log)"
     tail -5 "$LOGS/executor-bench-$NAME.log" ;;
  esac
  publish
done
# 5. GPT-2-small bf16 training step from the raw kernels, beside a cuBLASLt
#    GEMM ceiling measured in the same run.
BATCHES=${DSC_BENCH_BATCHES:-4,8,16}
say "bench: batches $BATCHES, $STEPS timed steps each"
timeout 150 "$BUILD/bin/dsc-bench-cuda-gpt2" --batches "$BATCHES" \
  --steps "$STEPS" >"$LOGS/bench.log" 2>&1
case $? in
0) ;;
77) fail "no CUDA device: bench skipped (this script needs a GPU)" ;;
124) fail "bench timed out after 150 s (see $LOGS/bench.log)" ;;
*) fail "bench (see $LOGS/bench.log)" ;;
esac
echo
cat "$LOGS/bench.log" | tee -a "$LOGS/summary.txt"
echo

# 6. Where the bf16 step's time goes (DSC_GPU_PROFILE=1; Nsight Compute,
#    which reads GPU time on Firecracker machines): each kernel's GPU time
#    over one step after a warm-up one, and the executor bench with the SIMT
#    attention for comparison.
if [[ ${DSC_GPU_PROFILE:-0} == 1 ]]; then
  if command -v ncu >/dev/null; then
    say "ncu: kernel times of one bf16 executor step"
    timeout 240 ncu --clock-control none --metrics gpu__time_duration.sum \
      --print-summary per-kernel --csv \
      "$BUILD/bin/dsc-bench-cuda-executor" \
      "$ROOT/bench/cuda/gpt2-small-bf16.plan" --steps 1 --warmup 1 \
      >"$LOGS/ncu-bf16.csv" 2>"$LOGS/ncu-bf16.err" ||
      fail "ncu (see ncu-bf16.err)"
  else
    say "no ncu on this machine: no kernel times"
  fi
  say "executor bench bf16 with DSC_ATTENTION_SIMT=1"
  DSC_ATTENTION_SIMT=1 timeout 120 "$BUILD/bin/dsc-bench-cuda-executor" \
    "$ROOT/bench/cuda/gpt2-small-bf16.plan" --steps "$STEPS" \
    >"$LOGS/executor-bench-bf16-simt.log" 2>&1
  cat "$LOGS/executor-bench-bf16-simt.log" | tee -a "$LOGS/summary.txt"
  publish
fi

say "done in $(($(date +%s) - START)) s, status $STATUS"
publish
exit $STATUS
