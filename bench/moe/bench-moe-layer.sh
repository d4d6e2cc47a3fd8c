#!/usr/bin/env bash
#===- bench/moe/bench-moe-layer.sh - MoE MLP vs dense MLP of equal FLOPs --===#
#
# Builds two GPT-NeoX configs of one shape that differ only in the MLP: an
# MoE GPT (DeepSpeed's top-2 gate over 8 experts of width f, token dropping
# at capacity factor 1, so the experts multiply E*C = k*b*s rows) and a dense
# GPT whose MLP is 2f wide (the same active GEMM FLOPs per token); compiles
# each with --dsc-compile (names kept: --mlir-print-debuginfo), trains each
# STEPS steps with dsc-run --trace, REPEATS times, the two back to back, and
# prints (moe-layer-report.py) the MLP sub-block's ms/step of each (every
# ".mlp." instruction of the forward and backward), their ratio, the MoE
# MLP's breakdown by class and share of the step, and the GEMM rates against
# an OpenBLAS sgemm ceiling measured in the same run. A report, not a test.
# Usage: bench-moe-layer.sh [REPEATS=5] [STEPS=6] [WARMUP=2]
# Threads: OMP_NUM_THREADS, else 1 (the ceiling runs at the same count).
# MOE_CAPACITY_FACTOR (default 1.0): above 1 the experts multiply that many
# times the dense MLP's rows (the capacity padding's cost).
# EP (default 1): above 1 both models train on EP thread ranks (dp=EP) and
# the MoE one splits its experts over them (ep=EP): the report adds the
# all-to-all's share of the step (rank 0's trace).
#
#===-----------------------------------------------------------------------===#
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD_BIN="${DSC_BUILD_DIR:-$ROOT/build}/bin"
REPEATS="${1:-5}"
STEPS="${2:-6}"
WARMUP="${3:-2}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
# A private copy of the tools, taken under the build lock: the build tree is
# shared, and a relink in the middle of the repeats would end the run.
BIN="$WORK/bin"
mkdir -p "$BIN"
flock /tmp/dsc-build.lock cp "$BUILD_BIN/dsc-translate" "$BUILD_BIN/dsc-opt" \
  "$BUILD_BIN/dsc-run" "$BUILD_BIN/dsc-bench-kernels" "$BIN/"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
export OPENBLAS_NUM_THREADS="$OMP_NUM_THREADS"

# Shared shape; vocabulary 256 (the embedded byte-level corpus) so that the
# logits do not swamp the step.
shape='"num_layers": 2, "hidden_size": 512, "num_attention_heads": 8,
  "seq_length": 256, "max_position_embeddings": 256, "vocab_size": 256,
  "train_micro_batch_size_per_gpu": 4, "use_bias_in_mlp": false'
cat > "$WORK/moe.json" <<EOF
{ $shape, "intermediate_size": 1024,
  "moe_type": "deepspeed", "moe_num_experts": 8, "moe_top_k": 2,
  "moe_use_residual": false, "moe_token_dropping": true,
  "moe_train_capacity_factor": ${MOE_CAPACITY_FACTOR:-1.0} }
EOF
cat > "$WORK/dense.json" <<EOF
{ $shape, "intermediate_size": 2048 }
EOF

for m in moe dense; do
  "$BIN/dsc-translate" --import-neox "$WORK/$m.json" --mlir-print-debuginfo \
    -o "$WORK/$m-graph.mlir"
  # The locations carry each op's layer-prefix name into the plan and trace.
  plan="steps=$STEPS warmup=1"
  if [ "${EP:-1}" -gt 1 ]; then
    plan="$plan dp=$EP"
    [ "$m" = moe ] && plan="$plan ep=$EP"
  fi
  "$BIN/dsc-opt" "$WORK/$m-graph.mlir" --dsc-compile="$plan" \
    --mlir-print-debuginfo -o "$WORK/$m-plan.mlir"
  "$BIN/dsc-opt" "$WORK/$m-plan.mlir" --mlir-print-op-generic \
    -o "$WORK/$m-generic.mlir"
done

ceiling() {
  local c
  c="$("$BIN/dsc-bench-kernels" --filter __none__ --min-time 0.5 2>&1 |
    awk '/ceiling, start\)/ && /%$/ {print $(NF-1)}' | head -1)"
  [ -n "$c" ] || { echo "bench-moe-layer.sh: no sgemm ceiling from dsc-bench-kernels" >&2; exit 1; }
  echo "$c"
}
LOAD_START="$(cut -d' ' -f1-3 /proc/loadavg)"
CEIL_START="$(ceiling)"
for r in $(seq "$REPEATS"); do
  for m in moe dense; do
    "$BIN/dsc-run" "$WORK/$m-plan.mlir" --np "${EP:-1}" --steps "$STEPS" --log-interval "$STEPS" \
      --log-json "$WORK/$m-$r.jsonl" --trace "$WORK/$m-$r.json" \
      > "$WORK/$m-$r.log" 2>&1 ||
      { echo "bench-moe-layer.sh: dsc-run $m failed:" >&2; tail -5 "$WORK/$m-$r.log" >&2; exit 1; }
  done
done
CEIL_END="$(ceiling)"
CEIL="$(awk -v a="$CEIL_START" -v b="$CEIL_END" 'BEGIN {print (a > b ? a : b)}')"

MOE_TRACES=() DENSE_TRACES=()
for r in $(seq "$REPEATS"); do
  MOE_TRACES+=("$WORK/moe-$r.json") DENSE_TRACES+=("$WORK/dense-$r.json")
done
echo "load average: $LOAD_START at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end"
python3 "$ROOT/bench/moe/moe-layer-report.py" --warmup "$WARMUP" \
  --sgemm "$CEIL" --threads "$OMP_NUM_THREADS" --ep "${EP:-1}" \
  "$WORK/moe-generic.mlir" "$WORK/dense-generic.mlir" \
  --moe "${MOE_TRACES[@]}" --dense "${DENSE_TRACES[@]}"
echo "sgemm ceiling before/after: $CEIL_START / $CEIL_END GFLOP/s"
