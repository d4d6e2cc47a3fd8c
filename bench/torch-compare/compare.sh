#!/usr/bin/env bash
#===- bench/torch-compare/compare.sh - dsc vs PyTorch, GPT-2 small step ---===#
#
# Runs GPT-2 small's fp32 training step (forward, backward, global-norm
# clipping at 1.0, AdamW) back to back in PyTorch eager, in torch.compile and
# in dsc (bench/train-step/bench-train-step.sh) on the same shapes and thread
# count, and prints ms/step, the ratios dsc/eager and dsc/compile, and each
# process's peak resident memory measured by the same tool (/usr/bin/time -v,
# "Maximum resident set size"). PyTorch lives in a throw-away virtual
# environment (TORCH_VENV, default /tmp/torch-venv), created and filled from
# the package index on the first run. A report, not a test: never run in CI.
#
# Usage: compare.sh [SEQS="64 1024"] [BATCH=4]
#   OMP_NUM_THREADS  threads for both (default nproc); torch.set_num_threads
#                    gets the same number
#   TORCH_VENV       the virtual environment (kept between runs)
#   TORCH_PIP_ARGS   extra pip arguments for installing torch (e.g. another
#                    index with a CPU-only build); default: plain "torch"
#   LOG_DIR          where every run's full output goes (default: a new
#                    directory under /tmp, printed at the end)
#
#===-----------------------------------------------------------------------===#
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SEQS="${1:-64 1024}"
BATCH="${2:-4}"
THREADS="${OMP_NUM_THREADS:-$(nproc)}"
export OMP_NUM_THREADS="$THREADS"
VENV="${TORCH_VENV:-/tmp/torch-venv}"
LOG="${LOG_DIR:-$(mktemp -d /tmp/torch-compare.XXXXXX)}"
mkdir -p "$LOG"

if [ ! -x /usr/bin/time ]; then
  echo "compare.sh: installing GNU time for /usr/bin/time -v" >&2
  apt-get update -qq && apt-get install -y -qq time >/dev/null
fi
if ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
  echo "compare.sh: creating $VENV and installing torch (a few GiB)" >&2
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  # shellcheck disable=SC2086
  "$VENV/bin/pip" install -q ${TORCH_PIP_ARGS:-} torch numpy
fi
PY="$VENV/bin/python"

maxrss() { awk -F': ' '/Maximum resident set size/ {printf "%.0f", $2 / 1024}' "$1"; }

echo "machine: $(nproc) CPUs, $(lscpu | awk -F': *' '/Model name/ {print $2; exit}'), $(free -g | awk '/Mem:/ {print $2}') GiB"
echo "torch: $("$PY" -c 'import torch; print(torch.__version__)'), threads: $THREADS"
# The interpreter with torch imported and nothing else: the floor of the
# torch processes' RSS.
/usr/bin/time -v -o "$LOG/time-import.txt" "$PY" -c \
  "import torch; torch.set_num_threads($THREADS); (torch.ones(8) + 1).sum()"
IMPORT_RSS="$(maxrss "$LOG/time-import.txt")"

ROWS=()
for S in $SEQS; do
  if [ "$S" -ge 512 ]; then DSC_STEPS=3; WARMUP=1; else DSC_STEPS=4; WARMUP=2; fi
  TORCH_STEPS=$((DSC_STEPS - 1))  # dsc reports the median of all but the first
  echo
  echo "=== s=$S b=$BATCH  ($(uptime | sed 's/.*load/load/'))"
  for MODE in eager compile; do
    /usr/bin/time -v -o "$LOG/time-$MODE-$S.txt" "$PY" \
      "$ROOT/bench/torch-compare/gpt2_step.py" --mode "$MODE" --seq "$S" \
      --batch "$BATCH" --steps "$TORCH_STEPS" --warmup "$WARMUP" \
      --threads "$THREADS" > "$LOG/$MODE-$S.out" 2> "$LOG/$MODE-$S.err"
    grep '^RESULT' "$LOG/$MODE-$S.out"
    echo "  max RSS $(maxrss "$LOG/time-$MODE-$S.txt") MiB   ($(uptime | sed 's/.*load/load/'))"
  done
  "$ROOT/bench/train-step/bench-train-step.sh" "$S" "$DSC_STEPS" "$BATCH" \
    > "$LOG/dsc-$S.out" 2>&1
  cat "$LOG/dsc-$S.out"
  echo "  ($(uptime | sed 's/.*load/load/'))"
  DSC_MS="$(awk '/^ms\/step/ {print $(NF - 2)}' "$LOG/dsc-$S.out")"
  DSC_RSS="$(awk '/^dsc-run max RSS/ {print $4}' "$LOG/dsc-$S.out")"
  EAGER_MS="$(sed -n 's/.*ms_per_step=\([0-9.]*\).*/\1/p' "$LOG/eager-$S.out")"
  COMPILE_MS="$(sed -n 's/.*ms_per_step=\([0-9.]*\).*/\1/p' "$LOG/compile-$S.out")"
  COMPILE_FIRST="$(sed -n 's/.*first_step_ms=\([0-9.]*\).*/\1/p' "$LOG/compile-$S.out")"
  ROWS+=("$S $DSC_MS $EAGER_MS $COMPILE_MS $COMPILE_FIRST $DSC_RSS $(maxrss "$LOG/time-eager-$S.txt") $(maxrss "$LOG/time-compile-$S.txt")")
done

echo
echo "GPT-2 small fp32, b=$BATCH, $THREADS threads; ms/step = median after warm-up"
echo "max RSS: /usr/bin/time -v of each process (python with torch imported alone: $IMPORT_RSS MiB)"
printf '%6s %10s %10s %12s %10s %12s | %9s %9s %11s\n' s dsc eager compile dsc/eager dsc/compile \
  "dsc RSS" "eager RSS" "compile RSS"
for r in "${ROWS[@]}"; do
  # shellcheck disable=SC2086
  set -- $r
  awk -v s="$1" -v d="$2" -v e="$3" -v c="$4" -v rd="$6" -v re="$7" -v rc="$8" 'BEGIN {
    printf "%6d %10.1f %10.1f %12.1f %10.2f %12.2f | %5d MiB %5d MiB %7d MiB\n",
      s, d, e, c, d / e, d / c, rd, re, rc }'
  echo "       (torch.compile's first step, compiling: $5 ms)"
done
echo "full output: $LOG"
