#!/usr/bin/env python3
"""Checks the activation bytes dsc plans per transformer layer against
Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
Transformer Models", Sec. 4) on a model shape, for recompute none,
selective and full, without and with tensor slicing.

The paper counts, per layer and micro-batch (s sequence, b batch, h
hidden, a heads, t tensor-parallel ranks), 16-bit values and 1-byte
dropout masks:
  none       sbh (10 + 24/t + 5as/(ht))
  selective  sbh (10 + 24/t)
  sequence parallelism with selective  sbh 34/t
  full       2sbh (the layer's input), 2sbh/t with sequence parallelism
Of the 10 replicated bytes per sbh, 8 are values (the two layer norms'
inputs, the QKV and MLP inputs) and 2 the two dropout masks; the 24/t are
values (Q, K, V, the projection's input, the MLP's 4h pre- and
post-activation); 5as/h is the attention core (scores 2, mask 1,
dropout output 2 per as^2 b).

dsc's element sizes: fp32 values are 4 bytes; a dropout mask is 0 bytes
(it is a pure function of the seed, step and micro-batch, drawn again in
the backward); dsc.attention keeps no s x s value (its backward recomputes
the core, as FlashAttention does), so none plans what the paper calls
selective. In fp32 that is:
  none = selective  sbh (16 + 48/t)
  sequence-parallel sbh 64/t (none or selective)
  full              4sbh, 4sbh/t with sequence parallelism
The per-layer figure is the difference of dsc.saved_activation_bytes
(the bytes of forward values the backward reads, per rank) between the
model with 2 layers and with 1.

The memory planner must turn this into memory: on the 2-layer model the
forward_backward program's planned peak with full recompute is lower than
without by at least the saved bytes' difference less one layer's (the
layer the backward recomputes at a time).

usage: check_activation_forms.py DSC_TRANSLATE DSC_OPT WORKDIR S B H A TP DROPOUT
"""
import json
import os
import re
import subprocess
import sys

translate, opt, work = sys.argv[1:4]
s, b, h, a, t = (int(x) for x in sys.argv[4:9])
dropout = float(sys.argv[9])


def compile_model(layers, recompute, sp=False):
    config = {
        "num_layers": layers, "hidden_size": h, "num_attention_heads": a,
        "seq_length": s, "max_position_embeddings": s, "vocab_size": 256,
        "make_vocab_size_divisible_by": 1,
        "train_micro_batch_size_per_gpu": b,
        "hidden_dropout": dropout, "attention_dropout": dropout,
    }
    path = os.path.join(work, f"s{s}b{b}h{h}a{a}L{layers}.json")
    with open(path, "w") as f:
        json.dump(config, f)
    # Name locations tell the layers; text keeps them with debug info.
    module = subprocess.run([translate, "--import-neox", path,
                             "--mlir-print-debuginfo"],
                            check=True, capture_output=True, text=True).stdout
    compiled = subprocess.run(
        [opt, f"--dsc-compile=tp={t} recompute={recompute}"
              + (" sequence-parallel=1" if sp else "")],
        input=module, check=True, capture_output=True, text=True).stdout
    found = re.findall(r"func\.func @forward_backward\(.*"
                       r"dsc\.saved_activation_bytes = (\d+)", compiled)
    peak = re.findall(r"dsc\.program_peaks = \{forward_backward = (\d+)",
                      compiled)
    if len(found) != 1 or len(peak) != 1:
        sys.exit(f"no one @forward_backward with saved bytes and peak")
    return int(found[0]), int(peak[0])


def saved_bytes(layers, recompute, sp=False):
    return compile_model(layers, recompute, sp)[0]


sbh = s * b * h
expected = {
    "none": sbh * (16 + 48 // t),
    "selective": sbh * (16 + 48 // t),
    "full": 4 * sbh,
}
cases = [(mode, False, want) for mode, want in expected.items()]
if t > 1:
    cases += [("none", True, sbh * 64 // t), ("selective", True, sbh * 64 // t),
              ("full", True, 4 * sbh // t)]
failures = 0
for mode, sp, want in cases:
    got = saved_bytes(2, mode, sp) - saved_bytes(1, mode, sp)
    status = "ok" if got == want else "MISMATCH"
    failures += got != want
    print(f"s={s} b={b} h={h} a={a} t={t} recompute={mode}"
          f"{' sequence-parallel' if sp else ''}: "
          f"{got} bytes per layer, formula {want}: {status}")
(saved_none, peak_none), (saved_full, peak_full) = (
    compile_model(2, "none"), compile_model(2, "full"))
floor = (saved_none - saved_full) - expected["none"]
ok = peak_none - peak_full >= floor
failures += not ok
print(f"planned peak of forward_backward: none {peak_none}, full {peak_full}, "
      f"lower by {peak_none - peak_full} >= {floor}: "
      f"{'ok' if ok else 'MISMATCH'}")
print("all match" if not failures else f"{failures} mismatches")
