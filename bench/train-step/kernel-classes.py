#!/usr/bin/env python3
# ===- bench/train-step/kernel-classes.py - per-kernel-class roofline ------=== #
#
# Groups one dsc-run's Chrome trace (--trace) by kernel class (the trace
# event's name: the runtime opcode), sums the time per class per step and
# prints, per class, ms/step, its share of the step, and either the achieved
# bandwidth as a fraction of a STREAM-like triad (memory-bound classes) or the
# achieved FLOP rate as a fraction of the sgemm ceiling (Matmul, Attention,
# AttentionGrad), both measured in the same run by bench-train-step.sh.
#
# Bytes and FLOPs come from the compiled plan printed in MLIR's generic form
# (dsc-opt PLAN --mlir-print-op-generic): the trace's args {program, index}
# name the index-th instruction of that program, which is the index-th op of
# the function that is not a view (dsc.get_parameter, dsc.reshape) or the
# return; the script checks that each event's name matches that op.
#
# Bytes model (STREAM's accounting: no write-allocate traffic): each
# instruction moves its operands' and results' bytes as typed, except
#   dsc.embedding       reads only the gathered rows of the table,
#   dsc.accumulate      reads its input and the state, writes the state (3x),
#   dsc.adamw           reads param, grad, m, v and writes param, m, v (7x),
#   dsc.clip_grad_norm  reads every gradient, and reads and writes them again
#                       when it scales them (grad norm > max_norm, from the
#                       run's --log-json metrics),
#   dsc.zero            writes every state it names.
# A kernel that rereads an input (a blocked reduction, the attention
# backward's recomputation) moves more than this, one that writes part of its
# output (slice_grad into a shared buffer) less: the GB/s are lower bounds
# under this model, not measured traffic.
# FLOPs: a Matmul does 2*sqrt(|A||B||C|) (= 2MNK for any transposition);
# Attention does the causal useful 2*b*s^2*h (QK^T and PV, half of 4bs^2h),
# AttentionGrad twice that (no credit for recomputing the probabilities).
#
# Usage: kernel-classes.py PLAN_GENERIC.mlir TRACE.json METRICS.jsonl
#            TRIAD_GBS SGEMM_GFLOPS [THREADS]
# Standard library only.
# ===----------------------------------------------------------------------=== #
import json
import math
import re
import statistics
import sys

ELT = {"f32": 4, "i32": 4, "f16": 2, "bf16": 2, "i64": 8, "f64": 8, "i8": 1,
       "i1": 1}
TENSOR = re.compile(r"tensor<((?:\d+x)*)([a-z]+\d*)>")
VIEWS = {"dsc.get_parameter", "dsc.reshape"}
COMPUTE = {"Matmul", "Attention", "AttentionGrad"}


def tensors(text):
    """[(numel, bytes)] of the tensor types in text."""
    out = []
    for dims, elt in TENSOR.findall(text):
        n = 1
        for d in dims.split("x"):
            if d:
                n *= int(d)
        out.append((n, n * ELT.get(elt, 4)))
    return out


# Ops whose runtime opcode is not the CamelCase of their name.
OPCODE = {"adamw": "AdamW", "clip_grad_norm": "GlobalNormClip",
          "matmul_accumulate": "Matmul"}


def camel(op):
    return OPCODE.get(op) or "".join(p.capitalize() for p in op.split("_"))


def parse_plan(path):
    """Returns ({symbol: bytes}, {program: [(opname, line)]})."""
    symbols, programs, current = {}, {}, None
    sym = re.compile(r'sym_name = "([^"]+)"')
    for line in open(path):
        s = line.strip()
        if s.startswith('"func.func"'):
            m = sym.search(s)
            current = m.group(1) if m else None
            programs[current] = []
            continue
        if s.startswith('"dsc.parameter"') or s.startswith('"dsc.state"'):
            m = sym.search(s)
            t = re.search(r"type = (tensor<[^>]*>)", s)
            if m and t:
                symbols[m.group(1)] = tensors(t.group(1))[0][1]
            continue
        if current is None:
            continue
        m = re.match(r'(?:%\S+ = )?"([a-z_]+\.[a-z_0-9]+)"', s)
        if not m:
            continue
        op = m.group(1)
        if op in VIEWS or not op.startswith("dsc."):
            continue
        programs[current].append((op, s))
    return symbols, programs


def signature(line):
    cut = line.rfind(" : (")
    sig = line[cut + 3:] if cut >= 0 else ""
    arrow = sig.rfind(") -> ")
    ins = sig[1:arrow] if arrow >= 0 else sig
    outs = sig[arrow + 5:] if arrow >= 0 else ""
    return tensors(ins), tensors(outs)


def symrefs(line, key):
    m = re.search(key + r" = \[([^\]]*)\]", line)
    if m:
        return re.findall(r"@([\w.]+)", m.group(1))
    m = re.search(key + r" = @([\w.]+)", line)
    return [m.group(1)] if m else []


def cost(op, line, symbols, grad_norm):
    """(bytes, flops) of one instruction."""
    ins, outs = signature(line)
    name = op[len("dsc."):]
    if name == "matmul" and len(ins) >= 2 and outs:
        flops = 2 * math.sqrt(ins[0][0] * ins[1][0] * outs[0][0])
        return sum(b for _, b in ins + outs), flops
    if name == "matmul_accumulate" and len(ins) >= 2:
        # --dsc-fuse's product added into its state: C read and written.
        state = sum(symbols.get(p, 0) for p in symrefs(line, "state"))
        elem = ins[0][1] / ins[0][0] if ins[0][0] else 4
        flops = 2 * math.sqrt(ins[0][0] * ins[1][0] * (state / elem))
        return sum(b for _, b in ins) + 2 * state, flops
    if name in ("attention", "attention_grad") and ins:
        # q: [b, s, h]; the FLOPs need s, which the type spells.
        dims = re.findall(r"tensor<((?:\d+x)+)", line[line.rfind(" : ("):])
        shape = [int(d) for d in dims[0].split("x") if d]
        b, s, h = shape[0], shape[1], shape[-1]
        flops = 2 * b * s * s * h * (2 if name == "attention_grad" else 1)
        return sum(bt for _, bt in ins + outs), flops
    if name == "embedding" and len(ins) >= 2 and outs:
        rows_bytes = outs[0][1]  # the gathered rows are the output's size
        return rows_bytes + ins[1][1] + outs[0][1], 0.0
    if name == "accumulate":
        return 3 * sum(b for _, b in ins), 0.0
    if name == "adamw":
        return 7 * sum(symbols.get(p, 0) for p in symrefs(line, "param")), 0.0
    if name == "clip_grad_norm":
        g = sum(symbols.get(p, 0) for p in symrefs(line, "gradients"))
        m = re.search(r"max_norm = ([-+.\deE]+)", line)
        max_norm = float(m.group(1)) if m else 0.0
        clipped = max_norm > 0 and (grad_norm is None or grad_norm > max_norm)
        return (3 if clipped else 1) * g, 0.0
    if name == "zero":
        return sum(symbols.get(p, 0) for p in symrefs(line, "states")), 0.0
    return sum(b for _, b in ins + outs), 0.0


def main():
    plan, trace, metrics = sys.argv[1], sys.argv[2], sys.argv[3]
    triad, sgemm = float(sys.argv[4]), float(sys.argv[5])
    threads = sys.argv[6] if len(sys.argv) > 6 else "?"
    symbols, programs = parse_plan(plan)
    steps_m = [json.loads(l) for l in open(metrics) if l.strip()]
    events = [e for e in json.load(open(trace))["traceEvents"]
              if e.get("ph") == "X"]
    iters = sorted((e for e in events if e.get("cat") == "step"),
                   key=lambda e: e["ts"])
    insts = [e for e in events if "args" in e and "program" in e["args"]]

    # Per step: class -> [ms, bytes, flops, count].
    per_step, mismatches = [], 0
    for k, it in enumerate(iters):
        lo, hi = it["ts"], it["ts"] + it["dur"]
        gn = steps_m[k].get("grad_norm") if k < len(steps_m) else None
        acc = {}
        for e in insts:
            if not lo <= e["ts"] < hi:
                continue
            prog, idx = e["args"]["program"], e["args"]["index"]
            ops = programs.get(prog, [])
            nbytes = flops = 0.0
            if idx < len(ops) and camel(ops[idx][0][len("dsc."):]) == e["name"]:
                nbytes, flops = cost(ops[idx][0], ops[idx][1], symbols, gn)
            else:
                mismatches += 1
            a = acc.setdefault(e["name"], [0.0, 0.0, 0.0, 0])
            a[0] += e["dur"] / 1e3
            a[1] += nbytes
            a[2] += flops
            a[3] += 1
        per_step.append((it["dur"] / 1e3, acc))

    # The first step pays page faults on a fresh arena: report the rest.
    use = per_step[1:] or per_step
    step_ms = statistics.median(s for s, _ in use)
    classes = sorted({c for _, a in use for c in a})
    rows = []
    for c in classes:
        ms = statistics.median(a.get(c, [0.0])[0] for _, a in use)
        last = use[-1][1].get(c, [0.0, 0.0, 0.0, 0])
        rows.append((c, ms, last[1], last[2], last[3]))
    rows.sort(key=lambda r: -r[1])

    print(f"per-kernel-class time (median of {len(use)} traced steps after "
          f"the first; step {step_ms:.1f} ms, {threads} threads)")
    print(f"ceilings, same run: triad {triad:.1f} GB/s, "
          f"sgemm {sgemm:.1f} GFLOP/s")
    hdr = (f"{'class':<22}{'n/step':>7}{'ms/step':>10}{'share':>8}"
           f"{'MB/inst':>9}{'GB|GFLOP':>10}{'rate':>8}  fraction")
    print(hdr)
    print("-" * len(hdr))
    tot_ms = tot_mem_ms = tot_mem_b = 0.0
    for c, ms, nbytes, flops, n in rows:
        tot_ms += ms
        share = 100 * ms / step_ms
        per = f"{nbytes / max(n, 1) / 1e6:>9.2f}"
        if c in COMPUTE:
            rate = flops / (ms / 1e3) / 1e9 if ms > 0 else 0
            print(f"{c:<22}{n:>7}{ms:>10.1f}{share:>7.1f}%{per}"
                  f"{flops / 1e9:>10.2f}{rate:>8.1f}  {100 * rate / sgemm:5.1f}% of sgemm "
                  f"(GFLOP/s)")
        else:
            rate = nbytes / (ms / 1e3) / 1e9 if ms > 0 else 0
            tot_mem_ms += ms
            tot_mem_b += nbytes
            print(f"{c:<22}{n:>7}{ms:>10.1f}{share:>7.1f}%{per}"
                  f"{nbytes / 1e9:>10.3f}{rate:>8.1f}  {100 * rate / triad:5.1f}% of triad "
                  f"(GB/s)")
    print("-" * len(hdr))
    mem_rate = tot_mem_b / (tot_mem_ms / 1e3) / 1e9 if tot_mem_ms else 0
    print(f"{'memory-bound, all':<22}{'':>7}{tot_mem_ms:>10.1f}"
          f"{100 * tot_mem_ms / step_ms:>7.1f}%{'':>9}{tot_mem_b / 1e9:>10.3f}"
          f"{mem_rate:>8.1f}  {100 * mem_rate / triad:5.1f}% of triad")
    print(f"{'kernels, all':<22}{'':>7}{tot_ms:>10.1f}"
          f"{100 * tot_ms / step_ms:>7.1f}%   (the rest: between kernels)")
    print("MB/inst: bytes moved per instruction under the model above; a "
          "class whose\nworking set fits in the caches can beat the DRAM "
          "triad.")
    if mismatches:
        print(f"warning: {mismatches} trace events did not match the plan's "
              f"ops; their bytes and FLOPs are counted as 0")


if __name__ == "__main__":
    main()
