#!/usr/bin/env bash
#===- scripts/run-main.sh - the main job on the embedded default ----------===#
#
# Sets up (scripts/setup.sh), imports the bundled example GPT config, checks
# and prints the graph's model statistics and a summary of its IR.
#
#===-----------------------------------------------------------------------===#
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${DSC_BUILD_DIR:-$ROOT/build}"
"$ROOT/scripts/setup.sh" "$BUILD" >/dev/null
BIN="$BUILD/bin"
CONFIG="${1:-$ROOT/examples/configs/gpt-tiny.yml}"
OUT="${DSC_OUT_DIR:-$BUILD/main}"
mkdir -p "$OUT"

echo "== dsc: importing $CONFIG"
"$BIN/dsc-translate" --import-neox "$CONFIG" --mlir-print-debuginfo -o "$OUT/model.mlir"
echo "== graph IR written to $OUT/model.mlir; it verifies and round-trips:"
"$BIN/dsc-opt" "$OUT/model.mlir" -o "$OUT/model.roundtrip.mlir"
"$BIN/dsc-opt" "$OUT/model.roundtrip.mlir" -o "$OUT/model.roundtrip2.mlir"
cmp "$OUT/model.roundtrip.mlir" "$OUT/model.roundtrip2.mlir" && echo "   round trip: identical"
sed -n '1,6p' "$OUT/model.roundtrip.mlir" | cut -c1-160
echo "   ..."
"$BIN/dsc-opt" "$OUT/model.mlir" --dsc-print-model-stats -o /dev/null
