#!/usr/bin/env bash
#===- scripts/run-main.sh - the main job on the embedded default ----------===#
#
# Sets up (scripts/setup.sh), imports the bundled example GPT config,
# compiles it into a parallel training plan (data parallel x tensor slicing
# with ZeRO, DSC_PLAN to change it), prints the plan summary, and trains it
# on the CPU on the embedded corpus with one in-process rank per mesh rank.
# Usage: scripts/run-main.sh [CONFIG] [extra dsc-run flags]
#
#===-----------------------------------------------------------------------===#
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${DSC_BUILD_DIR:-$ROOT/build}"
"$ROOT/scripts/setup.sh" "$BUILD" >/dev/null
BIN="$BUILD/bin"
CONFIG="${1:-$ROOT/examples/configs/gpt-tiny.yml}"
shift || true
OUT="${DSC_OUT_DIR:-$BUILD/main}"
STEPS="${DSC_STEPS:-200}"
# The parallel plan and its rank count (dp * tp).
PLAN="${DSC_PLAN-dp=2 tp=2 zero=3}"
RANKS="${DSC_RANKS:-4}"
mkdir -p "$OUT"

echo "== dsc: importing $CONFIG"
"$BIN/dsc-translate" --import-neox "$CONFIG" --mlir-print-debuginfo -o "$OUT/model.mlir"
"$BIN/dsc-opt" "$OUT/model.mlir" --dsc-print-model-stats -o /dev/null

echo "== compiling ($PLAN): tensor slicing, autodiff, AdamW with warmup +"
echo "   cosine decay, data parallelism with ZeRO, memory plan"
"$BIN/dsc-opt" "$OUT/model.mlir" \
  --dsc-compile="$PLAN steps=$STEPS lr=2e-3 min-lr=2e-4 warmup=20" -o "$OUT/plan.mlir"
echo "== plan summary"
"$BIN/dsc-opt" "$OUT/plan.mlir" --dsc-plan-summary -o /dev/null
"$BIN/dsc-translate" --dsc-to-plan "$OUT/plan.mlir" -o "$OUT/model.plan"

echo "== training $STEPS steps on the embedded corpus (CPU, $RANKS in-process ranks)"
"$BIN/dsc-run" "$OUT/model.plan" --np "$RANKS" --steps "$STEPS" --log-interval 10 \
  --log-json "$OUT/metrics.jsonl" --trace "$OUT/trace.json" "$@"
echo "== metrics: $OUT/metrics.jsonl  trace (chrome://tracing): $OUT/trace.json"
