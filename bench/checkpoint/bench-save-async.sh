#!/usr/bin/env bash
#===- bench/checkpoint/bench-save-async.sh - what a checkpoint costs ------===#
#
# GPT-2 small (124M) on the CPU, one rank: the median step time with no
# save, with --save-async every step, and with a synchronous save every
# step, each as a ratio to the no-save run measured in the same script (the
# ceiling here is training without checkpoints). Also checks that the async
# and sync saves wrote the same files. A report, not a test.
# Usage: bench-save-async.sh [SEQ=1024] [STEPS=8] [BATCH=1] [DIR=a temp dir]
# DIR holds two checkpoints of 1.5 GB each (the newest step only).
#
#===-----------------------------------------------------------------------===#
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=../gpt2-small-shape.sh
source "$ROOT/bench/gpt2-small-shape.sh"
BIN="${DSC_BUILD_DIR:-$ROOT/build}/bin"
SEQ="${1:-1024}"
STEPS="${2:-8}"
BATCH="${3:-1}"
WORK="${4:-$(mktemp -d)}"
mkdir -p "$WORK"
trap 'rm -rf "$WORK"/{sync,async,*.plan,*.mlir,*.yml}' EXIT

gpt2_small_at "$SEQ" "$BATCH" "$WORK/gpt2.yml"
"$BIN/dsc-translate" --import-neox "$WORK/gpt2.yml" -o "$WORK/graph.mlir"
"$BIN/dsc-opt" "$WORK/graph.mlir" --dsc-compile="steps=$STEPS warmup=1" -o "$WORK/plan.mlir"
"$BIN/dsc-translate" --dsc-to-plan "$WORK/plan.mlir" -o "$WORK/model.plan"

run() { # name, extra flags...
  local name="$1"; shift
  "$BIN/dsc-run" "$WORK/model.plan" --steps "$STEPS" --log-interval 1 \
    --log-json "$WORK/$name.jsonl" "$@" > "$WORK/$name.log" 2>&1
}
# Interleaved, so that a noisy neighbour hits all three alike.
run none
run async --save "$WORK/async" --save-interval 1 --keep 1 --save-async
run sync --save "$WORK/sync" --save-interval 1 --keep 1
grep -h "save-async: a snapshot" "$WORK/async.log" || true
if diff -r "$WORK/sync" "$WORK/async" > /dev/null; then
  echo "files: the async save's equal the sync save's (diff -r)"
else
  echo "files: the async save's DIFFER from the sync save's"; exit 1
fi

python3 - "$WORK" "$SEQ" "$BATCH" <<'PY'
import json, statistics, sys
work, seq, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def median_ms(name):
    steps = [json.loads(l) for l in open(f"{work}/{name}.jsonl") if l.strip()]
    # A step's cost is its compute plus what its boundary spent on the
    # checkpoint (checkpoint_ms: the save, or the async snapshot and
    # commit). The first step pays page faults on a fresh arena, the last
    # waits for the final write: both left out.
    return statistics.median(s["elapsed_time_per_iteration_ms"] +
                             s.get("checkpoint_ms", 0.0) for s in steps[1:-1])
none, async_, sync = (median_ms(n) for n in ("none", "async", "sync"))
print(f"GPT-2 small b={batch} s={seq}, one rank, CPU")
print(f"ms/step (median, steps 2..): no save {none:.0f}, "
      f"--save-async every step {async_:.0f}, sync save every step {sync:.0f}")
print(f"--save-async / no save: {async_ / none:.3f}   sync / no save: {sync / none:.3f}")
PY
