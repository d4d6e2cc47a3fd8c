#!/usr/bin/env bash
#===- bench/inference/bench-decode.sh - GPT-2 small generation ------------===#
#
# GPT-2 small (examples/configs/gpt2-small.yml, 1024 positions) compiled
# into an inference plan, random weights, greedy generation of NEW tokens
# after PROMPT-token prompts:
#   batch 1:  decode tokens/s and ms per forward, against the memory-
#             bandwidth floor measured in the same run (each decode forward
#             reads every weight once: weight bytes / the STREAM triad's
#             GB/s, bench/train-step/triad.cpp, best of before and after);
#   batch 32: decode tokens/s (32 sequences per forward);
# and, when HF_PYTHON names a Python with torch and transformers, the same
# prompts through transformers' generate (hf_generate.py) on the same thread
# count, with the ratio dsc / transformers. A report, not a test.
# Usage: bench-decode.sh [NEW=64] [PROMPT=32]
#   OMP_NUM_THREADS  threads for both (default nproc)
#
#===-----------------------------------------------------------------------===#
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=../gpt2-small-shape.sh
source "$ROOT/bench/gpt2-small-shape.sh"
BIN="${DSC_BUILD_DIR:-$ROOT/build}/bin"
NEW="${1:-64}"
PROMPT="${2:-32}"
THREADS="${OMP_NUM_THREADS:-$(nproc)}"
export OMP_NUM_THREADS="$THREADS"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

gpt2_small_at 1024 1 "$WORK/gpt2.yml"
"$BIN/dsc-translate" --import-neox "$WORK/gpt2.yml" -o "$WORK/graph.mlir"
python3 - "$WORK" "$PROMPT" <<'PY'
import random, sys
work, length = sys.argv[1], int(sys.argv[2])
random.seed(1)
line = lambda: " ".join(str(random.randrange(50257)) for _ in range(length)) + "\n"
open(f"{work}/batch1.txt", "w").write(line())
open(f"{work}/batch32.txt", "w").write("".join(line() for _ in range(32)))
PY
${CXX:-g++} -O3 -march=native -fopenmp "$ROOT/bench/train-step/triad.cpp" \
  -o "$WORK/triad"
triad() { "$WORK/triad" "$THREADS" | awk '{split($3, a, "="); print a[2]}'; }

run() { # BATCH SEQUENCES BUDGET
  "$BIN/dsc-generate" "$WORK/graph.mlir" --sample-input-file "$WORK/batch$1.txt" \
    --prompt-ids --maximum-tokens "$NEW" --print-stats \
    --compile "max-sequences=$2 token-budget=$3 max-context=1024" \
    2> "$WORK/stats$1.txt" > /dev/null
}
BW1="$(triad)"
run 1 1 64
run 32 32 256
BW2="$(triad)"
BW="$(printf '%s\n%s\n' "$BW1" "$BW2" | sort -g | tail -1)"

python3 - "$WORK" "$BW" "$THREADS" <<'PY'
import re, sys
work, bw, threads = sys.argv[1], float(sys.argv[2]), sys.argv[3]
def stats(batch):
    text = open(f"{work}/stats{batch}.txt").read()
    m = re.search(r"decode ([\d.]+) s for (\d+) tokens \(([\d.]+) tokens/s, "
                  r"([\d.]+) ms per forward\); weights (\d+) bytes", text)
    return float(m[1]), int(m[2]), float(m[3]), float(m[4]), int(m[5])
_, _, tps1, ms1, weights = stats(1)
floor_ms = weights / (bw * 1e9) * 1e3
print(f"threads {threads}, triad {bw:.1f} GB/s, weights {weights / 1e6:.1f} MB")
print(f"batch 1:  {tps1:.1f} tokens/s, {ms1:.1f} ms per decode forward; "
      f"bandwidth floor {floor_ms:.1f} ms -> {100 * floor_ms / ms1:.0f}% of it")
_, _, tps32, ms32, _ = stats(32)
print(f"batch 32: {tps32:.1f} tokens/s, {ms32:.1f} ms per decode forward")
open(f"{work}/dsc.txt", "w").write(f"{tps1} {tps32}\n")
PY

if [ -n "${HF_PYTHON:-}" ]; then
  for b in 1 32; do
    "$HF_PYTHON" "$ROOT/bench/inference/hf_generate.py" "$WORK/batch$b.txt" \
      "$NEW" "$THREADS" | tee "$WORK/hf$b.txt"
  done
  python3 - "$WORK" <<'PY'
import re, sys
work = sys.argv[1]
dsc = [float(x) for x in open(f"{work}/dsc.txt").read().split()]
for i, b in enumerate((1, 32)):
    hf = float(re.search(r"tokens_per_s=([\d.]+)", open(f"{work}/hf{b}.txt").read())[1])
    print(f"batch {b}: dsc {dsc[i]:.1f} vs transformers {hf:.1f} tokens/s -> "
          f"dsc/transformers {dsc[i] / hf:.2f}")
PY
fi
