#!/usr/bin/env bash
#===- bench/train-step/bench-train-step.sh - GPT-2 small training step ----===#
#
# Compiles GPT-2 small (12 layers, h=768, 12 heads, V=50304) at one sequence
# length with --dsc-compile, trains a few steps with dsc-run, and reports
# ms/step and the achieved model FLOP/s as a fraction of the OpenBLAS sgemm
# ceiling measured in the same run. The same run also measures a STREAM-like
# triad (triad.cpp, built here with g++) at 1 thread and at the step's thread
# count, records a Chrome trace of every step, and prints per kernel class
# (kernel-classes.py) the ms/step, share of the step, and the achieved GB/s as
# a fraction of the triad, or GFLOP/s as a fraction of the sgemm ceiling for
# the matmul and attention classes; and dsc-run's peak resident memory
# (/usr/bin/time -v, when it is there). A report, not a test.
# Usage: bench-train-step.sh [SEQ=1024] [STEPS=3] [BATCH=4]
# The step's threads: OMP_NUM_THREADS, else nproc.
#
#===-----------------------------------------------------------------------===#
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=../gpt2-small-shape.sh
source "$ROOT/bench/gpt2-small-shape.sh"
BIN="${DSC_BUILD_DIR:-$ROOT/build}/bin"
SEQ="${1:-1024}"
STEPS="${2:-3}"
BATCH="${3:-4}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

gpt2_small_at "$SEQ" "$BATCH" "$WORK/gpt2.yml"
"$BIN/dsc-translate" --import-neox "$WORK/gpt2.yml" -o "$WORK/graph.mlir"
"$BIN/dsc-opt" "$WORK/graph.mlir" --dsc-compile="steps=$STEPS warmup=1" -o "$WORK/plan.mlir"
"$BIN/dsc-opt" "$WORK/plan.mlir" --dsc-plan-summary -o /dev/null > "$WORK/summary.json"
"$BIN/dsc-translate" --dsc-to-plan "$WORK/plan.mlir" -o "$WORK/model.plan"

THREADS="${OMP_NUM_THREADS:-$(nproc)}"
# The triad: built on the spot so that nothing outside bench/ has to know it.
${CXX:-g++} -O3 -march=native -fopenmp "$ROOT/bench/train-step/triad.cpp" \
  -o "$WORK/triad"
triad() {
  # One line per thread count: "triad threads=T GB/s=X ...".
  OMP_NUM_THREADS="$THREADS" "$WORK/triad" 1 "$THREADS"
}
"$BIN/dsc-opt" "$WORK/plan.mlir" --mlir-print-op-generic -o "$WORK/plan-generic.mlir"

ceiling() {
  "$BIN/dsc-bench-kernels" --filter __none__ --min-time 0.5 2>&1 |
    awk '/ceiling, start\)/ && /%$/ {print $(NF-1)}' | head -1
}
TIMEV=()
if [ -x /usr/bin/time ]; then TIMEV=(/usr/bin/time -v -o "$WORK/time.txt"); fi
triad > "$WORK/triad-start.txt"
CEIL_START="$(ceiling)"
"${TIMEV[@]}" "$BIN/dsc-run" "$WORK/model.plan" --steps "$STEPS" --log-interval 1 \
  --log-json "$WORK/metrics.jsonl" --trace "$WORK/trace.json" > "$WORK/run.log" 2>&1
CEIL_END="$(ceiling)"
triad > "$WORK/triad-end.txt"
# Best of the two measurements, per thread count.
TRIAD1="$(cat "$WORK"/triad-*.txt | awk '$2 == "threads=1" {split($3, a, "="); if (a[2] > m) m = a[2]} END {print m}')"
TRIADT="$(cat "$WORK"/triad-*.txt | awk -v t="threads=$THREADS" '$2 == t {split($3, a, "="); if (a[2] > m) m = a[2]} END {print m}')"

python3 - "$WORK/summary.json" "$WORK/metrics.jsonl" "$CEIL_START" "$CEIL_END" \
  "$SEQ" "$BATCH" <<'PY'
import json, statistics, sys
summary = json.load(open(sys.argv[1]))
steps = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
ceiling = max(float(sys.argv[3]), float(sys.argv[4]))  # GFLOP/s, best of two
seq, batch = int(sys.argv[5]), int(sys.argv[6])
# The first step pays page faults on a fresh arena; report the rest.
times = [s["elapsed_time_per_iteration_ms"] for s in steps[1:]] or \
        [steps[0]["elapsed_time_per_iteration_ms"]]
ms = statistics.median(times)
flops = summary["flops_per_step"]
achieved = flops / (ms / 1e3) / 1e9
print(f"GPT-2 small  b={batch} s={seq}  params={summary['parameters']:,}")
print(f"model FLOPs/step (fwd+bwd, Megatron accounting): {flops / 1e9:.1f} GFLOP")
print(f"planned device bytes: {summary['bytes']['device']['peak'] / 2**30:.2f} GiB")
print(f"ms/step (median of {len(times)}): {ms:.1f}   tokens/s: {batch * seq / (ms / 1e3):.0f}")
print(f"achieved: {achieved:.1f} GFLOP/s   sgemm ceiling (same run): {ceiling:.1f} GFLOP/s")
print(f"fraction of ceiling: {100 * achieved / ceiling:.1f}%")
print(f"loss: {steps[0]['lm_loss']:.4f} -> {steps[-1]['lm_loss']:.4f}")
PY
echo "triad (same run, best of before and after): ${TRIAD1} GB/s at 1 thread, ${TRIADT} GB/s at $THREADS threads"
echo "  before: $(awk '{printf "%s %s  ", $2, $3}' "$WORK/triad-start.txt")after: $(awk '{printf "%s %s  ", $2, $3}' "$WORK/triad-end.txt")"
if [ -f "$WORK/time.txt" ]; then
  awk -F': ' '/Maximum resident set size/ {printf "dsc-run max RSS: %.0f MiB (%s KiB, /usr/bin/time -v)\n", $2 / 1024, $2}' "$WORK/time.txt"
fi
echo
python3 "$ROOT/bench/train-step/kernel-classes.py" "$WORK/plan-generic.mlir" \
  "$WORK/trace.json" "$WORK/metrics.jsonl" "$TRIADT" \
  "$(awk -v a="$CEIL_START" -v b="$CEIL_END" 'BEGIN {print (a > b ? a : b)}')" "$THREADS"
