#!/usr/bin/env python3
"""Checks a tensor-parallel plan's summary (dsc-opt --dsc-plan-summary)
against Megatron-LM's analysis, computed here from the model's shape alone.

Parameters per rank: tensor slicing splits, per layer, the QKV weight and
bias (3h^2 + 3h), the attention projection (h^2), the MLP's two weights and
first bias (8h^2 + 4h), and the vocabulary's tables (V*h, twice untied);
the layer norms, the row-parallel biases and the position table stay whole:
  psi_rank = (L(12h^2 + 7h) + V*h*(1 or 2)) / tp + L*6h + 2h + P*h.
Gradients are psi_rank elements, the Adam moments 2*psi_rank.

All-reduce bytes per rank per step (fp32 activations, f64 per-token
values): per micro-batch, every layer all-reduces two [b, s, h] tensors
forward (after the row-parallel products) and two backward (the
gradients of the column-parallel inputs) -- Megatron's four -- and the
vocabulary adds two more (the embedding's lookup forward, the LM head
input's gradient backward); the vocabulary-parallel cross-entropy
all-reduces 3 f64 per token forward and 2 backward; the gradient norm one
f64 per step. Each all-reduce of S bytes costs rank 0 2S - chunk(0) -
chunk(1) on the ring (2(tp-1)/tp * S when tp divides it).

usage: check_tp_formulas.py SUMMARY.json L H V S P B TIED TP MICROBATCHES
"""
import json
import sys

s = json.load(open(sys.argv[1]))
L, h, V, seq, P, b, tied, tp, m = (int(x) for x in sys.argv[2:11])


def ring(nbytes, esize):
    """Bytes rank 0 sends in a ring all-reduce of nbytes over tp ranks."""
    n = nbytes // esize
    chunk = lambda c: (n // tp + (1 if c < n % tp else 0)) * esize
    return 2 * nbytes - chunk(0) - chunk(1)


split = L * (12 * h * h + 7 * h) + V * h * (1 if tied else 2)
whole = L * 6 * h + 2 * h + P * h
psi_rank = split // tp + whole
tokens = b * seq
per_micro = (4 * L + 2) * ring(4 * tokens * h, 4) + \
    3 * ring(8 * tokens, 8) + 2 * ring(8 * tokens, 8)
want = {
    "parameters": psi_rank,
    "gradient_elements": psi_rank,
    "optimizer_state_elements": 2 * psi_rank,
}
ok = True
for key, value in want.items():
    status = "ok" if s[key] == value else "MISMATCH"
    ok &= s[key] == value
    print(f"{key}: {s[key]} want {value} {status}")
got = s["collective_bytes_per_step"]["all_reduce"]
value = m * per_micro + ring(8, 8)
status = "ok" if got == value else "MISMATCH"
ok &= got == value
print(f"all_reduce: {got} want {value} {status}")
print(f"L={L} h={h} V={V} tp={tp} microbatches={m}: "
      f"{'all match' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
