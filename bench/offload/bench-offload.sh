#!/usr/bin/env bash
#===- bench/offload/bench-offload.sh - ZeRO-Offload and the NVMe tier -----===#
#
# A report, not a test (docs/offload.md): in one run,
#   1. the NVMe lane (io_uring, O_DIRECT, DeepSpeed's 1 MiB x 8) against a
#      plain sequential O_DIRECT write and read of the same bytes on the same
#      file system (dsc-bench-nvme; goal >= 70 %);
#   2. the CPU Adam on host-resident states against a STREAM triad measured
#      before and after it (dsc-bench-kernels --filter "cpu adam"; goal
#      >= 70 %);
#   3. GPT-2 small's training step with its optimizer on the device, in
#      host memory and on NVMe (dsc-run --compile offload-optimizer=...),
#      with the delayed parameter update (dpu=1), and ZeRO-3 with its
#      parameter chunks in host memory and on NVMe (offload-params=):
#      ms/step, the transfer bytes per step measured against planned, the
#      device arena, and the per-step losses, which must agree with the
#      device run's (all but the DPU run's, whose gradients are a step
#      stale).
# Usage: bench-offload.sh [NVME_DIR=$TMPDIR] [SEQ=256] [STEPS=4] [BATCH=1]
#
#===-----------------------------------------------------------------------===#
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=../gpt2-small-shape.sh
source "$ROOT/bench/gpt2-small-shape.sh"
BIN="${DSC_BUILD_DIR:-$ROOT/build}/bin"
NVME="${1:-${TMPDIR:-/tmp}}"
SEQ="${2:-256}"
STEPS="${3:-4}"
BATCH="${4:-1}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

echo "== 1. NVMe lane against plain O_DIRECT ($NVME)"
"$BIN/dsc-bench-nvme" "$NVME" --bytes $((512 << 20)) --swaps 64

echo
echo "== 2. CPU Adam against the STREAM triad"
OMP_NUM_THREADS="${OMP_NUM_THREADS:-$(nproc)}" \
  "$BIN/dsc-bench-kernels" --params 20000000 --filter "cpu adam"

echo
echo "== 3. GPT-2 small, b=$BATCH s=$SEQ, $STEPS steps: optimizer on the device, host, NVMe; DPU; ZeRO-3 parameters on host, NVMe"
gpt2_small_at "$SEQ" "$BATCH" "$WORK/gpt2.yml"
mkdir -p "$WORK/nvme"
declare -A COMPILE=(
  [none]="offload-optimizer=none"
  [host]="offload-optimizer=host"
  [nvme]="offload-optimizer=nvme nvme-path=$WORK/nvme"
  [dpu]="offload-optimizer=host dpu=1"
  [z3-params-host]="zero=3 offload-optimizer=host offload-params=host"
  [z3-params-nvme]="zero=3 offload-optimizer=nvme offload-params=nvme nvme-path=$WORK/nvme"
)
for run in none host nvme dpu z3-params-host z3-params-nvme; do
  "$BIN/dsc-run" "$WORK/gpt2.yml" --steps "$STEPS" --log-interval 1 \
    --compile "warmup=1 ${COMPILE[$run]}" \
    --log-json "$WORK/$run.jsonl" > "$WORK/$run.log" 2>&1
done

python3 - "$WORK" <<'PY'
import json, re, statistics, sys
work = sys.argv[1]
runs = {}
for tier in ("none", "host", "nvme", "dpu", "z3-params-host", "z3-params-nvme"):
    steps = [json.loads(l) for l in open(f"{work}/{tier}.jsonl") if l.strip()]
    log = open(f"{work}/{tier}.log").read()
    device = int(re.search(r"arena 0 \(device\): allocated (\d+)", log).group(1))
    transfers = re.search(r"offload transfer bytes per step \(rank 0\): (.*)", log)
    # The first step pays page faults on fresh arenas; of the rest the
    # fastest (these machines are shared: the median swings by a fifth).
    ms = min(s["elapsed_time_per_iteration_ms"] for s in steps[1:])
    runs[tier] = (ms, device, [s["lm_loss"] for s in steps], transfers)
base = runs["none"][0]
for tier, (ms, device, losses, transfers) in runs.items():
    print(f"{tier:14s} {ms:9.1f} ms/step (best) ({ms / base:5.2f}x)  device arena "
          f"{device / 2**30:6.3f} GiB  losses {losses[0]:.6f} -> {losses[-1]:.6f}")
    if transfers:
        print(f"{'':15s}{transfers.group(1)}")
worst = max(abs(a - b) / abs(a)
            for t in ("host", "nvme", "z3-params-host", "z3-params-nvme")
            for a, b in zip(runs["none"][2], runs[t][2]))
print(f"largest relative loss difference against the device run: {worst:.3g}"
      " (the DPU run's gradients are a step stale: not compared)")
PY
