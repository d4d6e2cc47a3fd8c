#!/usr/bin/env bash
#===- bench/train-step/bench-fuse.sh - --dsc-fuse on and off, per class ---===#
#
# Compiles GPT-2 small as bench-train-step.sh does, twice: with the default
# --dsc-compile (--dsc-fuse on) and with `fuse=0` (every fusion off, the
# older matmul_accumulate rule included), then trains each plan STEPS steps
# with `dsc-run --trace`, REPEATS times, alternating (ABBA: fused first in odd
# repeats, unfused first in even ones), and prints per repeat and over the
# repeats (median, range) the ms/step of the kernel classes the fusion rules
# touch (kernel-classes.py's classes: the trace events' opcodes; BiasAdd split
# into the MLP fc bias add that bias_gelu absorbs and the others), the whole
# step, and the paired fused - unfused differences. The sgemm ceiling
# (dsc-bench-kernels) is measured before and after. A report, not a test.
# Usage: bench-fuse.sh [REPEATS=5] [STEPS=6] [SEQ=64] [BATCH=4]
# The step's threads: OMP_NUM_THREADS, else nproc (as bench-train-step.sh).
#
#===-----------------------------------------------------------------------===#
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=../gpt2-small-shape.sh
source "$ROOT/bench/gpt2-small-shape.sh"
BIN="${DSC_BUILD_DIR:-$ROOT/build}/bin"
REPEATS="${1:-5}"
STEPS="${2:-6}"
SEQ="${3:-64}"
BATCH="${4:-4}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

gpt2_small_at "$SEQ" "$BATCH" "$WORK/gpt2.yml"
"$BIN/dsc-translate" --import-neox "$WORK/gpt2.yml" -o "$WORK/graph.mlir"
for v in fused unfused; do
  opts="steps=$STEPS warmup=1"
  [ "$v" = unfused ] && opts="$opts fuse=0"
  "$BIN/dsc-opt" "$WORK/graph.mlir" --dsc-compile="$opts" -o "$WORK/$v.mlir"
  "$BIN/dsc-opt" "$WORK/$v.mlir" --mlir-print-op-generic -o "$WORK/$v-generic.mlir"
  "$BIN/dsc-translate" --dsc-to-plan "$WORK/$v.mlir" -o "$WORK/$v.plan"
done

ceiling() {
  "$BIN/dsc-bench-kernels" --filter __none__ --min-time 0.5 2>&1 |
    awk '/ceiling, start\)/ && /%$/ {print $(NF-1)}' | head -1
}
run() {  # run VARIANT REPEAT
  "$BIN/dsc-run" "$WORK/$1.plan" --steps "$STEPS" --log-interval 1 \
    --log-json "$WORK/$1-$2.jsonl" --trace "$WORK/$1-$2.trace.json" \
    > "$WORK/$1-$2.log" 2>&1
}
CEIL_START="$(ceiling)"
echo "start $(date -u +%H:%M:%S) UTC, $(uptime | sed 's/.*load/load/')"
for r in $(seq 1 "$REPEATS"); do
  if [ $((r % 2)) -eq 1 ]; then run fused "$r"; run unfused "$r"
  else run unfused "$r"; run fused "$r"; fi
done
echo "end   $(date -u +%H:%M:%S) UTC, $(uptime | sed 's/.*load/load/')"
CEIL_END="$(ceiling)"

python3 - "$ROOT/bench/train-step/kernel-classes.py" "$WORK" "$REPEATS" \
  "$CEIL_START" "$CEIL_END" "${OMP_NUM_THREADS:-$(nproc)}" <<'PY'
import importlib.util, json, statistics, sys
spec = importlib.util.spec_from_file_location("kernel_classes", sys.argv[1])
kc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(kc)
work, repeats = sys.argv[2], int(sys.argv[3])
print(f"sgemm ceiling: {sys.argv[4]} GFLOP/s before, {sys.argv[5]} after; "
      f"{sys.argv[6]} threads")
# The classes --dsc-fuse's rules touch. BiasAdd is split by shape: the MLP's
# fc bias add (its result typed as a GELU's or bias_gelu's result, b*s*4h:
# the one bias_gelu absorbs) and the others (QKV, attention and MLP output
# projections), which stay. "GELU group": the MLP fc bias add, Gelu and
# GeluGrad (fuse=0) against BiasGelu and BiasGeluGrad (fused).
FC = "BiasAdd(fc)"
CLASSES = [FC, "BiasAdd", "Gelu", "GeluGrad", "BiasGelu", "BiasGeluGrad",
           "BiasGrad", "Accumulate", "Matmul"]
GELU = [FC, "Gelu", "GeluGrad", "BiasGelu", "BiasGeluGrad"]
# Untouched by either rule, the same instructions in both plans: what they
# vary by is the run-to-run noise of small kernels.
CONTROL = ["BiasAdd", "BiasGrad"]


def out_dims(line):
    outs = kc.split_signature(line)[2]
    got = kc.shapes(outs)
    return tuple(got[0][0]) if got else None


def measure(variant, r):
    """{row: ms/step} (median of the steps after the first) and
    {class: instructions per step} of one run."""
    symbols, programs = kc.parse_plan(f"{work}/{variant}-generic.mlir")
    gelu_shapes = {out_dims(line) for ops in programs.values()
                   for op, line in ops if op in ("dsc.gelu", "dsc.bias_gelu")}
    with open(f"{work}/{variant}-{r}.trace.json") as f:
        iters, insts = kc.read_trace(json.load(f))
    per_step = []
    for it in iters:
        lo, hi = it["ts"], it["ts"] + it["dur"]
        acc = {}
        for e in insts:
            if not lo <= e["ts"] < hi:
                continue
            op = kc.plan_op(e, programs)
            assert op, f"trace event {e} does not match the plan"
            c = kc.kernel_class(e)
            if c == "BiasAdd" and out_dims(op[1]) in gelu_shapes:
                c = FC
            a = acc.setdefault(c, [0.0, 0])
            a[0] += e["dur"] / 1e3
            a[1] += 1
        per_step.append((it["dur"] / 1e3, acc))
    use = per_step[1:] or per_step
    row = {c: statistics.median(a.get(c, [0.0])[0] for _, a in use)
           for c in CLASSES}
    row["GELU group"] = statistics.median(
        sum(a.get(c, [0.0])[0] for c in GELU) for _, a in use)
    row["control"] = statistics.median(
        sum(a.get(c, [0.0])[0] for c in CONTROL) for _, a in use)
    row["step"] = statistics.median(s for s, _ in use)
    count = {c: use[-1][1].get(c, [0, 0])[1] for c in CLASSES}
    return row, count


rows = CLASSES + ["GELU group", "control", "step"]
res = {v: [measure(v, r) for r in range(1, repeats + 1)]
       for v in ("fused", "unfused")}
PER = ["GELU group", "control", "Accumulate", "Matmul", "step"]
print("control: BiasAdd (other) + BiasGrad, the same in both plans")
print("\nper repeat, ms/step (fused / unfused):")
print(f"{'repeat':<8}" + "".join(f"{r:>22}" for r in PER))
for i in range(repeats):
    f, u = res["fused"][i][0], res["unfused"][i][0]
    print(f"{i + 1:<8}" + "".join(f"{f[r]:>10.1f} / {u[r]:<9.1f}"
                                  for r in PER))
print(f"\nover {repeats} repeats: median (range) of each run's median step "
      f"after the first; n = instructions per step")
hdr = (f"{'class':<12}{'n':>9}  {'fused ms/step':<26}{'fuse=0 ms/step':<26}"
       f"{'fused - fuse=0 (paired)':<26}")
print(hdr)
print("-" * len(hdr))
def mr(xs):
    return f"{statistics.median(xs):7.1f} ({min(xs):.1f} to {max(xs):.1f})"
for r in rows:
    fx = [m[0][r] for m in res["fused"]]
    ux = [m[0][r] for m in res["unfused"]]
    d = [a - b for a, b in zip(fx, ux)]
    n = (f"{res['fused'][0][1][r]}/{res['unfused'][0][1][r]}"
         if r in CLASSES else "")
    print(f"{r:<12}{n:>9}  {mr(fx):<26}{mr(ux):<26}{mr(d):<26}")
PY
