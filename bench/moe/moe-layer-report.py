#!/usr/bin/env python3
# ===- bench/moe/moe-layer-report.py - MoE vs dense MLP from dsc-run traces -=== #
#
# Reads the Chrome traces (dsc-run --trace) of an MoE GPT and of a dense GPT of
# the same shape and active MLP FLOPs, written by bench-moe-layer.sh, and
# prints per step (median over the steps after the warm-up, over all repeats):
# the MLP sub-block's forward + backward time of each (every instruction of
# the forward_backward program whose name, the layer prefix the importer gave
# it, contains ".mlp."), their ratio (per repeat, the two models run back to
# back, then the median and range over repeats), the MoE MLP's time by class,
# its share of the step, the GEMMs' rate against the same-run sgemm ceiling,
# and the optimizer's time on the MLP parameters apart (the MoE has E/k times
# the dense MLP's parameters).
#
# The plan parsing, the event-to-instruction match and the GEMM FLOPs
# (2*batch*m*n*k of each Matmul the plan holds: the experts' batched
# [E, C, h] x [E, h, f] products and their fused weight gradients alike) come
# from bench/train-step/kernel-classes.py.
#
# Usage: moe-layer-report.py --warmup W --sgemm GFLOPS --threads T
#            MOE_PLAN_GENERIC.mlir DENSE_PLAN_GENERIC.mlir
#            --moe TRACE... --dense TRACE...   (repeat i of each, in order)
# (metrics files MOE_TRACE.jsonl beside each trace, if present, give the
# expert load). Standard library only.
# ===----------------------------------------------------------------------=== #
import argparse
import importlib.util
import json
import os
import re
import statistics
import sys

_spec = importlib.util.spec_from_file_location(
    "kernel_classes",
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "train-step",
                 "kernel-classes.py"))
kc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(kc)

# MoE MLP classes, by the instruction's opcode (the trace event's category)
# and the last component of its name. Order is the print order.
CLASSES = [
    ("router GEMM", lambda op, n: op == "Matmul" and n == "router"),
    ("route + route grad", lambda op, n: op in ("MoeRoute", "MoeRouteGrad")),
    ("dispatch/combine/gates grad",
     lambda op, n: op in ("MoeDispatch", "MoeCombine", "MoeDispatchScaled",
                          "MoeCombineSum", "MoeGatesGrad")),
    ("expert GEMMs", lambda op, n: op == "Matmul" and n.startswith("experts.")),
    ("all-to-all (ep > 1)", lambda op, n: op == "AllToAll"),
    ("dense GEMMs", lambda op, n: op == "Matmul" and n in ("fc", "proj")),
    ("GELU + grad", lambda op, n: op.startswith("Gelu")),
    ("adds (residual, router dx)", lambda op, n: op == "Add"),
]
FWD_BWD = "forward_backward"


def classify(op, name):
    tail = name.split(".mlp.", 1)[1]
    for label, test in CLASSES:
        if test(op, tail):
            return label
    return "other"


def model_shape(plan_generic):
    """The plan's dsc.model dictionary as {key: int}."""
    text = open(plan_generic).read()
    m = re.search(r"dsc\.model = \{([^}]*)\}", text)
    shape = {k: int(v) for k, v in re.findall(r"(\w+) = (\d+) : i64",
                                              m.group(1))} if m else {}
    # dsc.model leaves out an MLP width that is the default 4h: read it from
    # the first layer's fc weight, [h, f] or [E, h, f].
    w = re.search(r'sym_name = "h\.0\.mlp\.(?:experts\.)?fc\.weight".*?'
                  r"type = tensor<(?:\d+x)*?(\d+)x[a-z]", text)
    if w:
        shape["ffn_hidden_size"] = int(w.group(1))
    return shape


def read_steps(trace, plan_generic, warmup):
    """[(step ms, {class: ms}, mlp optimizer ms, {class: GFLOP})] of the
    steps after warmup; and the number of .mlp. events whose opcode does not
    match the plan."""
    symbols, programs = kc.parse_plan(plan_generic)
    with open(trace) as f:
        iters, insts = kc.read_trace(json.load(f))
    out, mismatches = [], 0
    for it in iters[warmup:]:
        lo, hi = it["ts"], it["ts"] + it["dur"]
        acc, gflop, opt = {}, {}, 0.0
        for e in insts:
            if not lo <= e["ts"] < hi or ".mlp." not in e["name"]:
                continue
            op = kc.plan_op(e, programs)
            if op is None:
                mismatches += 1
            if e["args"]["program"] != FWD_BWD:
                opt += e["dur"] / 1e3
                continue
            c = classify(kc.kernel_class(e), e["name"])
            acc[c] = acc.get(c, 0.0) + e["dur"] / 1e3
            if op is not None:
                gflop[c] = gflop.get(c, 0.0) + \
                    kc.cost(op[0], op[1], symbols, None)[1] / 1e9
        out.append((it["dur"] / 1e3, acc, opt, gflop))
    return out, mismatches


def summarize(traces, plan, warmup):
    """Per repeat: list of steps; plus all steps pooled."""
    runs, bad = [], 0
    for t in traces:
        steps, mism = read_steps(t, plan, warmup)
        bad += mism
        runs.append(steps)
    return runs, [s for r in runs for s in r], bad


def med(xs):
    return statistics.median(xs) if xs else 0.0


def all_to_all_ms(traces, warmup):
    """Per step after warmup: (ms in AllToAll collectives, step ms) of the
    trace's rank (expert parallelism's dispatch and combine exchanges)."""
    out = []
    for t in traces:
        with open(t) as f:
            d = json.load(f)
        events = d["traceEvents"] if isinstance(d, dict) else d
        steps = [e for e in events if e.get("cat") == "step"]
        a2a = [e for e in events if e.get("cat") == "AllToAll"]
        for it in steps[warmup:]:
            lo, hi = it["ts"], it["ts"] + it["dur"]
            ms = sum(e["dur"] for e in a2a if lo <= e["ts"] < hi) / 1e3
            out.append((ms, it["dur"] / 1e3))
    return out


def load_imbalance(traces, warmup):
    vals = []
    for t in traces:
        m = os.path.splitext(t)[0] + ".jsonl"
        if os.path.exists(m):
            rows = [json.loads(l) for l in open(m) if l.strip()]
            vals += [r["expert_load_imbalance"] for r in rows[warmup:]
                     if "expert_load_imbalance" in r]
    return vals


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--sgemm", type=float, default=0.0)
    ap.add_argument("--threads", default="?")
    ap.add_argument("--ep", type=int, default=1)
    ap.add_argument("moe_plan")
    ap.add_argument("dense_plan")
    ap.add_argument("--moe", nargs="+", required=True, metavar="TRACE")
    ap.add_argument("--dense", nargs="+", required=True, metavar="TRACE")
    a = ap.parse_args()
    moe_traces, dense_traces = a.moe, a.dense
    if len(moe_traces) != len(dense_traces):
        sys.exit("moe-layer-report.py: one dense trace per MoE trace")
    ms, ds = model_shape(a.moe_plan), model_shape(a.dense_plan)
    moe_runs, moe_all, bad_m = summarize(moe_traces, a.moe_plan, a.warmup)
    dense_runs, dense_all, bad_d = summarize(dense_traces, a.dense_plan,
                                             a.warmup)
    mlp = lambda s: sum(s[1].values())

    moe_mlp = med([mlp(s) for s in moe_all])
    dense_mlp = med([mlp(s) for s in dense_all])
    moe_step = med([s[0] for s in moe_all])
    dense_step = med([s[0] for s in dense_all])
    # Each repeat ran the two models back to back: the ratio per repeat sees
    # the same machine load on both sides.
    ratios = [med([mlp(s) for s in m]) / med([mlp(s) for s in d])
              for m, d in zip(moe_runs, dense_runs) if m and d]
    moe_opt = med([s[2] for s in moe_all])
    dense_opt = med([s[2] for s in dense_all])

    print(f"MoE:   h={ms['hidden_size']} layers={ms['num_layers']} "
          f"b*s={ms['micro_batch_size']}*{ms['seq_length']} "
          f"experts={ms['num_experts']} top-{ms['moe_top_k']} "
          f"expert width f={ms['ffn_hidden_size']} capacity C={ms['moe_capacity']} "
          f"(E*C = {ms['num_experts'] * ms['moe_capacity']} slots for "
          f"{ms['moe_top_k'] * ms['micro_batch_size'] * ms['seq_length']} "
          f"token choices); params {ms['parameters']:,}")
    print(f"dense: same, MLP width {ds['ffn_hidden_size']}; params "
          f"{ds['parameters']:,}")
    print(f"{len(moe_runs)} repeats x {len(moe_all) // max(len(moe_runs), 1)} "
          f"steps after {a.warmup} warm-up steps; {a.threads} thread(s); "
          f"medians over all those steps")
    print()
    print(f"MLP fwd+bwd  MoE   {moe_mlp:8.1f} ms/step  "
          f"({100 * moe_mlp / moe_step:4.1f}% of its {moe_step:.1f} ms step)")
    print(f"MLP fwd+bwd  dense {dense_mlp:8.1f} ms/step  "
          f"({100 * dense_mlp / dense_step:4.1f}% of its {dense_step:.1f} ms step)")
    print(f"MoE / dense MLP: {med(ratios):.3f}  (median of {len(ratios)} "
          f"repeats; range {min(ratios):.3f}-{max(ratios):.3f})   goal <= 1.3: "
          f"{'met' if med(ratios) <= 1.3 else 'NOT met'}")
    print(f"  pooled medians: {moe_mlp / dense_mlp:.3f}")
    print(f"optimizer on the MLP parameters (AdamW, not in the ratio): "
          f"MoE {moe_opt:.1f} ms/step, dense {dense_opt:.1f} ms/step; "
          f"with it, MoE / dense = {(moe_mlp + moe_opt) / (dense_mlp + dense_opt):.3f}")
    print()

    labels = [c for c, _ in CLASSES] + ["other"]
    # Forward and backward GEMM FLOPs of one step, from the plan's Matmuls.
    gflop = {"expert GEMMs": med([s[3].get("expert GEMMs", 0.0)
                                  for s in moe_all]),
             "dense GEMMs": med([s[3].get("dense GEMMs", 0.0)
                                 for s in dense_all])}
    hdr = f"{'MLP class':<30}{'MoE ms':>9}{'share':>8}{'dense ms':>10}   GEMM rate"
    print(hdr)
    print("-" * (len(hdr) + 28))
    for c in labels:
        m = med([s[1].get(c, 0.0) for s in moe_all])
        d = med([s[1].get(c, 0.0) for s in dense_all])
        if m == 0 and d == 0:
            continue
        rate = ""
        if c in gflop:
            t = m if c == "expert GEMMs" else d
            r = gflop[c] / (t / 1e3) if t > 0 else 0.0
            rate = f"   {gflop[c]:.2f} GFLOP, {r:.1f} GFLOP/s"
            if a.sgemm > 0:
                rate += f" = {100 * r / a.sgemm:.1f}% of sgemm"
        print(f"{c:<30}{m:>9.1f}{100 * m / moe_mlp if moe_mlp else 0:>7.1f}%"
              f"{d:>10.1f}{rate}")
    print("-" * (len(hdr) + 28))
    # Where the MoE's extra time goes: the GEMMs' difference (same FLOPs at
    # capacity factor 1, in E smaller products), the classes only the MoE
    # has, and the rest (GELU and adds, which both have).
    cls = lambda runs, c: med([s[1].get(c, 0.0) for s in runs])
    gemm_diff = cls(moe_all, "expert GEMMs") - cls(dense_all, "dense GEMMs")
    moe_only = sum(cls(moe_all, c) for c in
                   ("router GEMM", "route + route grad",
                    "dispatch/combine/gates grad"))
    print(f"MoE - dense MLP = {moe_mlp - dense_mlp:+.1f} ms/step: expert GEMMs "
          f"- dense GEMMs {gemm_diff:+.1f}, MoE-only (router, route, "
          f"dispatch/combine) {moe_only:+.1f}, the rest "
          f"{moe_mlp - dense_mlp - gemm_diff - moe_only:+.1f}")
    if a.sgemm > 0:
        print(f"sgemm 2048^3 ceiling, same run, {a.threads} thread(s): "
              f"{a.sgemm:.1f} GFLOP/s (best of before and after)")
    imb = load_imbalance(moe_traces, a.warmup)
    if imb:
        print(f"expert load max/mean before dropping (median): {med(imb):.2f} "
              f"(capacity factor {ms['num_experts'] * ms['moe_capacity'] / (ms['moe_top_k'] * ms['micro_batch_size'] * ms['seq_length']):.2f}: "
              f"the busiest expert drops what exceeds C; its empty slots are "
              f"zero rows the GEMMs still multiply)")
    # Expert parallelism: the dispatch's and the combine's all-to-alls (and
    # their gradients') on the communication lane, against the step.
    a2a = all_to_all_ms(moe_traces, a.warmup)
    if any(ms > 0 for ms, _ in a2a):
        share = med([ms / step for ms, step in a2a])
        print(f"all-to-all (ep={a.ep}): {med([ms for ms, _ in a2a]):.1f} "
              f"ms/step, {100 * share:.1f}% of the step (medians, rank 0's "
              f"trace)")
    else:
        print("all-to-all share of the step: 0 (ep=1: every expert on every "
              "rank; EP=2 bench-moe-layer.sh splits them)")
    if bad_m or bad_d:
        print(f"warning: {bad_m + bad_d} .mlp. trace events did not match a "
              f"plan op")


if __name__ == "__main__":
    main()
