#!/usr/bin/env python3
# ===- bench/train-step/kernel-classes.py - per-kernel-class roofline ------=== #
#
# Groups one dsc-run's Chrome trace (--trace) by kernel class (the trace
# event's category, `cat`: the runtime opcode; its `name` is the
# instruction's layer-prefix name when the plan kept MLIR locations, else the
# opcode again), sums the time per class per step and prints, per class,
# ms/step, its share of the step, and either the achieved bandwidth as a
# fraction of a STREAM-like triad (memory-bound classes) or the achieved FLOP
# rate as a fraction of the sgemm ceiling (Matmul, Attention, AttentionGrad),
# both measured in the same run by bench-train-step.sh.
#
# Bytes and FLOPs come from the compiled plan printed in MLIR's generic form
# (dsc-opt PLAN --mlir-print-op-generic): the trace's args {program, index}
# name the index-th instruction of that program, which is the index-th op of
# the function that is not a view (dsc.get_parameter, dsc.reshape) or the
# return; the script checks that each event's opcode is one that op lowers
# to (DscToPlan.cpp's lowerOp: dsc.gelu runs as Gelu or GeluExact, ...).
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
# FLOPs: a Matmul does 2*batch*m*n*k, its Instructions.def ints as
# DscToPlan.cpp's matmulOf sets them from the op's types (dsc.matmul and
# dsc.matmul_accumulate); Attention does the causal useful 2*b*s^2*h (QK^T
# and PV, half of 4bs^2h), AttentionGrad twice that (no credit for
# recomputing the probabilities).
#
# Usage: kernel-classes.py PLAN_GENERIC.mlir TRACE.json METRICS.jsonl
#            TRIAD_GBS SGEMM_GFLOPS [THREADS]
#        kernel-classes.py --self-test
# Standard library only; bench/moe/moe-layer-report.py imports it.
# ===----------------------------------------------------------------------=== #
import json
import re
import statistics
import sys

ELT = {"f32": 4, "i32": 4, "f16": 2, "bf16": 2, "i64": 8, "f64": 8, "i8": 1,
       "i1": 1}
TENSOR = re.compile(r"tensor<((?:\d+x)*)([a-z]+\d*)>")
VIEWS = {"dsc.get_parameter", "dsc.reshape"}
COMPUTE = {"Matmul", "Attention", "AttentionGrad"}


def numel(dims):
    n = 1
    for d in dims:
        n *= d
    return n


def shapes(text):
    """[(dims, bytes)] of the tensor types in text."""
    out = []
    for dims, elt in TENSOR.findall(text):
        shape = [int(d) for d in dims.split("x") if d]
        out.append((shape, numel(shape) * ELT.get(elt, 4)))
    return out


def tensors(text):
    """[(numel, bytes)] of the tensor types in text."""
    return [(numel(shape), nbytes) for shape, nbytes in shapes(text)]


# The runtime opcodes of each op whose opcode is not the CamelCase of its
# name, or that lowers to one of several by its attributes (DscToPlan.cpp's
# lowerOp); the first is the usual one.
OPCODES = {
    "adamw": ("AdamW", "AdamWShard"),
    "clip_grad_norm": ("GlobalNormClip",),
    "matmul_accumulate": ("Matmul",),
    "gelu": ("Gelu", "GeluExact"),
    "gelu_grad": ("GeluGrad", "GeluExactGrad"),
    "moe_dispatch": ("MoeDispatch", "MoeDispatchScaled"),
    "moe_combine": ("MoeCombine", "MoeCombineSum"),
    "dropout": ("Dropout", "DropoutChunk"),
    "auxiliary_loss": ("Copy",),
    "copy_to_parallel": ("Copy",),
    "all_gather": ("GatherChunks",),
    "reduce_scatter": ("ReduceScatterChunks",),
    "scatter_to_parallel": ("TakeChunk",),
    "all_gather_states": ("AllGather",),
    "reduce_scatter_states": ("ReduceScatter",),
    "all_reduce_states": ("AllReduce",),
    "fetch_parameter": ("Transfer",),
    "swap_in": ("Transfer",),
    "swap_out": ("Transfer",),
}


def opcodes(op):
    """The runtime opcodes op ("dsc.gelu" or "gelu") can run as."""
    name = op[len("dsc."):] if op.startswith("dsc.") else op
    return OPCODES.get(name) or ("".join(p.capitalize()
                                         for p in name.split("_")),)


def kernel_class(event):
    """An instruction event's kernel class: its opcode, named or not."""
    return event.get("cat") or event["name"]


def parse_plan(path):
    """Returns ({symbol: bytes}, {program: [(opname, line)]})."""
    with open(path) as f:
        return parse_plan_lines(f)


def parse_plan_lines(lines):
    symbols, programs, current = {}, {}, None
    sym = re.compile(r'sym_name = "([^"]+)"')
    for line in lines:
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


def split_signature(line):
    """(attributes, operand types, result types) text of a generic op."""
    cut = line.rfind(" : (")
    if cut < 0:
        return line, "", ""
    sig = line[cut + 3:]
    arrow = sig.rfind(") -> ")
    ins = sig[1:arrow] if arrow >= 0 else sig
    outs = sig[arrow + 5:] if arrow >= 0 else ""
    return line[:cut], ins, outs


def signature(line):
    _, ins, outs = split_signature(line)
    return tensors(ins), tensors(outs)


def symrefs(line, key):
    m = re.search(key + r" = \[([^\]]*)\]", line)
    if m:
        return re.findall(r"@([\w.]+)", m.group(1))
    m = re.search(key + r" = @([\w.]+)", line)
    return [m.group(1)] if m else []


def matmul_dims(line):
    """Matmul's (batch, m, n, k) for a dsc.matmul or dsc.matmul_accumulate
    line, as DscToPlan.cpp's matmulOf sets them: the batch is the product of
    the product's leading dims (the lhs's), m x n its last two, k the lhs's
    contracted dim."""
    attrs, ins, _ = split_signature(line)
    (lhs, _), (rhs, _) = shapes(ins)[:2]
    ta = re.search(r"\btranspose_lhs\b", attrs) is not None
    tb = re.search(r"\btranspose_rhs\b", attrs) is not None
    batch = numel(lhs[:-2])
    m = lhs[-1] if ta else lhs[-2]
    k = lhs[-2] if ta else lhs[-1]
    n = rhs[-2] if tb else rhs[-1]
    return batch, m, n, k


def cost(op, line, symbols, grad_norm):
    """(bytes, flops) of one instruction."""
    ins, outs = signature(line)
    name = op[len("dsc."):]
    if name == "matmul" and len(ins) >= 2 and outs:
        batch, m, n, k = matmul_dims(line)
        return sum(b for _, b in ins + outs), 2.0 * batch * m * n * k
    if name == "matmul_accumulate" and len(ins) >= 2:
        # --dsc-fuse's product added into its state: C read and written.
        state = sum(symbols.get(p, 0) for p in symrefs(line, "state"))
        batch, m, n, k = matmul_dims(line)
        return sum(b for _, b in ins) + 2 * state, 2.0 * batch * m * n * k
    if name in ("attention", "attention_grad") and ins:
        # q: [b, s, h]; the FLOPs need s, which the type spells.
        shape = shapes(split_signature(line)[1])[0][0]
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


def read_trace(trace):
    """(step events by start, instruction events) of a parsed trace."""
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    iters = sorted((e for e in events if e.get("cat") == "step"),
                   key=lambda e: e["ts"])
    insts = [e for e in events if "program" in e.get("args", {})]
    return iters, insts


def plan_op(event, programs):
    """The plan's (opname, line) that an instruction event ran, or None when
    the op at its {program, index} does not lower to its opcode."""
    ops = programs.get(event["args"]["program"], [])
    idx = event["args"]["index"]
    if idx < len(ops) and kernel_class(event) in opcodes(ops[idx][0]):
        return ops[idx]
    return None


def tally(iters, insts, symbols, programs, metrics):
    """Per step: (step ms, {class: [ms, bytes, flops, count]}); and the
    number of events that did not match their plan op."""
    per_step, mismatches = [], 0
    for k, it in enumerate(iters):
        lo, hi = it["ts"], it["ts"] + it["dur"]
        gn = metrics[k].get("grad_norm") if k < len(metrics) else None
        acc = {}
        for e in insts:
            if not lo <= e["ts"] < hi:
                continue
            op = plan_op(e, programs)
            nbytes = flops = 0.0
            if op:
                nbytes, flops = cost(op[0], op[1], symbols, gn)
            else:
                mismatches += 1
            a = acc.setdefault(kernel_class(e), [0.0, 0.0, 0.0, 0])
            a[0] += e["dur"] / 1e3
            a[1] += nbytes
            a[2] += flops
            a[3] += 1
        per_step.append((it["dur"] / 1e3, acc))
    return per_step, mismatches


def report(per_step, mismatches, triad, sgemm, threads):
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


# A two-program plan in generic form, as dsc-opt prints one, and a trace of
# two steps over it: the experts' batched GEMM [E, C, h] x [E, h, f], its
# fused weight gradient (transposed lhs, into a state) and a broadcast GEMM
# [b, s, h] x [h, f], with an exact GELU (opcode GeluExact) between.
SELF_TEST_PLAN = """\
"builtin.module"() ({
  "dsc.parameter"() <{sym_name = "w", tier = 0 : i32, type = tensor<4x8x16xf32>}> : () -> ()
  "dsc.parameter"() <{sym_name = "d", tier = 0 : i32, type = tensor<16x8xf32>}> : () -> ()
  "dsc.state"() <{sym_name = "grad.w", tier = 0 : i32, type = tensor<4x8x16xf32>}> : () -> ()
  "func.func"() <{function_type = (tensor<4x32x8xf32>) -> tensor<f32>, sym_name = "forward_backward"}> ({
  ^bb0(%arg0: tensor<4x32x8xf32>):
    %0 = "dsc.get_parameter"() <{name = @w}> : () -> tensor<4x8x16xf32>
    %1 = "dsc.matmul"(%arg0, %0) {dsc.offsets = array<i64: 0>} : (tensor<4x32x8xf32>, tensor<4x8x16xf32>) -> tensor<4x32x16xf32>
    %2 = "dsc.gelu"(%1) <{exact}> {dsc.offsets = array<i64: 8192>} : (tensor<4x32x16xf32>) -> tensor<4x32x16xf32>
    %3 = "dsc.get_parameter"() <{name = @d}> : () -> tensor<16x8xf32>
    %4 = "dsc.matmul"(%2, %3) {dsc.offsets = array<i64: 16384>} : (tensor<4x32x16xf32>, tensor<16x8xf32>) -> tensor<4x32x8xf32>
    "dsc.matmul_accumulate"(%arg0, %2) <{state = @grad.w, transpose_lhs}> : (tensor<4x32x8xf32>, tensor<4x32x16xf32>) -> ()
    "func.return"(%4) : (tensor<4x32x8xf32>) -> ()
  }) : () -> ()
  "func.func"() <{function_type = () -> (), sym_name = "optimizer"}> ({
    "dsc.zero"() <{states = [@grad.w]}> : () -> ()
    "func.return"() : () -> ()
  }) : () -> ()
}) : () -> ()
"""


def self_test_trace(named):
    """Two steps over SELF_TEST_PLAN; `named`: the instructions carry layer
    prefixes (a plan compiled keeping locations), else only their opcode."""
    insts = [("h.0.mlp.experts.fc", "Matmul", "forward_backward", 0),
             ("h.0.mlp.experts.gelu", "GeluExact", "forward_backward", 1),
             ("h.0.mlp.proj", "Matmul", "forward_backward", 2),
             ("h.0.mlp.experts.fc.weight", "Matmul", "forward_backward", 3),
             ("grad.w", "Zero", "optimizer", 0)]
    events = [{"name": "process_name", "ph": "M", "pid": 0, "args": {}}]
    for step in range(2):
        t0 = 1000.0 * step
        events.append({"name": f"iteration {step + 1}", "cat": "step",
                       "ph": "X", "pid": 0, "tid": 0, "ts": t0,
                       "dur": 900.0})
        for i, (name, opcode, prog, idx) in enumerate(insts):
            events.append({"name": name if named else opcode, "cat": opcode,
                           "ph": "X", "pid": 0, "tid": 0,
                           "ts": t0 + 100.0 * (i + 1), "dur": 50.0,
                           "args": {"program": prog, "index": idx}})
    return {"traceEvents": events}


def self_test():
    symbols, programs = parse_plan_lines(SELF_TEST_PLAN.splitlines())
    assert [op for op, _ in programs["forward_backward"]] == [
        "dsc.matmul", "dsc.gelu", "dsc.matmul", "dsc.matmul_accumulate"], \
        programs
    # Fix 2: 2*batch*m*n*k from the Matmul instruction's ints, not
    # 2*sqrt(|A||B||C|) (sqrt(batch) = 2 times too many for E = 4).
    fb = programs["forward_backward"]
    assert matmul_dims(fb[0][1]) == (4, 32, 16, 8)
    assert matmul_dims(fb[2][1]) == (4, 32, 8, 16)  # broadcast B
    assert matmul_dims(fb[3][1]) == (4, 8, 16, 32)  # lhs^T, into the state
    experts = 2 * 4 * 32 * 16 * 8
    assert cost(*fb[0], symbols, None) == (4 * (4 * 32 * 8 + 4 * 8 * 16 +
                                                4 * 32 * 16), experts)
    assert cost(*fb[2], symbols, None)[1] == 2 * 4 * 32 * 8 * 16
    assert cost(*fb[3], symbols, None) == (
        4 * (4 * 32 * 8 + 4 * 32 * 16) + 2 * 4 * 4 * 8 * 16,
        2 * 4 * 8 * 16 * 32)
    # Fix 1: the same classes, counts, bytes and FLOPs with and without
    # names, every event matched to its op (GeluExact to dsc.gelu).
    results = []
    for named in (False, True):
        iters, insts = read_trace(self_test_trace(named))
        per_step, mismatches = tally(iters, insts, symbols, programs, [])
        assert mismatches == 0, (named, mismatches)
        assert len(per_step) == 2
        results.append(per_step)
    assert results[0] == results[1], results
    acc = results[1][-1][1]
    assert sorted(acc) == ["GeluExact", "Matmul", "Zero"], sorted(acc)
    assert acc["Matmul"][3] == 3
    assert acc["Matmul"][2] == experts + 2 * (2 * 4 * 32 * 8 * 16)
    assert acc["Zero"][1] == 4 * 4 * 8 * 16
    # An event whose opcode is not its op's still counts as a mismatch.
    trace = self_test_trace(True)
    trace["traceEvents"][3]["cat"] = "Softmax"
    iters, insts = read_trace(trace)
    assert tally(iters, insts, symbols, programs, [])[1] == 1
    print("kernel-classes.py: self-test passed")


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return
    if len(sys.argv) < 6:
        sys.exit("usage: kernel-classes.py PLAN_GENERIC.mlir TRACE.json "
                 "METRICS.jsonl TRIAD_GBS SGEMM_GFLOPS [THREADS] | --self-test")
    plan, trace, metrics = sys.argv[1], sys.argv[2], sys.argv[3]
    triad, sgemm = float(sys.argv[4]), float(sys.argv[5])
    threads = sys.argv[6] if len(sys.argv) > 6 else "?"
    symbols, programs = parse_plan(plan)
    with open(metrics) as f:
        steps_m = [json.loads(l) for l in f if l.strip()]
    with open(trace) as f:
        iters, insts = read_trace(json.load(f))
    per_step, mismatches = tally(iters, insts, symbols, programs, steps_m)
    report(per_step, mismatches, triad, sgemm, threads)


if __name__ == "__main__":
    main()
