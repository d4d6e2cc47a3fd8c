#!/usr/bin/env bash
#===- scripts/run-main.sh - the main job on the embedded default ----------===#
#
# Sets up (scripts/setup.sh), imports the bundled example GPT config,
# compiles it into a training plan, prints the plan summary, and trains it
# on the CPU on the embedded corpus.
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
mkdir -p "$OUT"

echo "== dsc: importing $CONFIG"
"$BIN/dsc-translate" --import-neox "$CONFIG" --mlir-print-debuginfo -o "$OUT/model.mlir"
"$BIN/dsc-opt" "$OUT/model.mlir" --dsc-print-model-stats -o /dev/null

echo "== compiling: autodiff, AdamW with warmup + cosine decay, memory plan"
"$BIN/dsc-opt" "$OUT/model.mlir" \
  --dsc-compile="steps=$STEPS lr=2e-3 min-lr=2e-4 warmup=20" -o "$OUT/plan.mlir"
echo "== plan summary"
"$BIN/dsc-opt" "$OUT/plan.mlir" --dsc-plan-summary -o /dev/null
"$BIN/dsc-translate" --dsc-to-plan "$OUT/plan.mlir" -o "$OUT/model.plan"

echo "== training $STEPS steps on the embedded corpus (CPU)"
"$BIN/dsc-run" "$OUT/model.plan" --steps "$STEPS" --log-interval 10 \
  --log-json "$OUT/metrics.jsonl" --trace "$OUT/trace.json" "$@"
echo "== metrics: $OUT/metrics.jsonl  trace (chrome://tracing): $OUT/trace.json"
