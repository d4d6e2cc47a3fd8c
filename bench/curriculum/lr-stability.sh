#!/usr/bin/env bash
#===- bench/curriculum/lr-stability.sh - learning rate against curriculum --===#
#
# Part of the dsc project: a declarative graph compiler for parallel training.
#
# Li et al. 2022 (DeepSpeed's sequence-length curriculum) train GPT-2 stably
# at learning rates where the baseline spikes or diverges. This trains one
# small GPT (4 layers, width 128, 128 tokens, byte vocabulary, micro-batch
# 16, the bundled corpus) STEPS steps with and without the curriculum
# (fixed_linear 8 -> 128 tokens over the first CURRICULUM steps,
# difficulty_step 8), at each learning rate given (warm-up 30 steps, then
# the default decay; gradient clipping 1.0), and prints per run the first
# non-finite loss, the largest loss jump over the best loss so far at full
# length, and the mean loss of the last 20 steps (every run is at full
# length by then). One thread per process; never in CI.
#
# usage: bench/curriculum/lr-stability.sh [STEPS=300 (> 30)] [CURRICULUM=150] LR...
#
#===------------------------------------------------------------------------===#
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
STEPS=${1:-300}
CURRICULUM=${2:-150}
shift 2 || true
LRS=("$@")
[[ ${#LRS[@]} -gt 0 ]] || LRS=(4e-3 1.6e-2 6.4e-2 0.256)
export PATH=$ROOT/build/bin:$PATH OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
OUT=$(mktemp -d /tmp/dsc-lr-stability.XXXXXX)
cat >"$OUT/base.yml" <<'YML'
{
  "num-layers": 4,
  "hidden-size": 128,
  "num-attention-heads": 4,
  "seq-length": 128,
  "max-position-embeddings": 128,
  "vocab-size": 256,
  "train_micro_batch_size_per_gpu": 16,
  "norm": "layernorm",
  "activation": "gelu",
  "bias-gelu-fusion": true,
  "pos-emb": "learned",
  "init_method_std": 0.02,
  "hidden-dropout": 0.0,
  "attention-dropout": 0.0,
}
YML
sed "s/^}\$/  \"curriculum_learning\": {\"enabled\": true, \"curriculum_type\": \"seqlen\", \"min_difficulty\": 8, \"max_difficulty\": 128, \"schedule_type\": \"fixed_linear\", \"schedule_config\": {\"total_curriculum_step\": $CURRICULUM, \"difficulty_step\": 8}},\n}/" \
  "$OUT/base.yml" >"$OUT/curriculum.yml"
for lr in "${LRS[@]}"; do
  for run in base curriculum; do
    dsc-run "$OUT/$run.yml" --steps "$STEPS" --lr "$lr" --compile "warmup=30" \
      --log-json "$OUT/$run-$lr.jsonl" >"$OUT/$run-$lr.log" 2>&1 ||
      { tail -3 "$OUT/$run-$lr.log" >&2; exit 1; }
  done
done
cd "$OUT" && python3 "$ROOT/bench/curriculum/lr-stability-report.py" base-*.jsonl curriculum-*.jsonl
echo "logs in $OUT"
