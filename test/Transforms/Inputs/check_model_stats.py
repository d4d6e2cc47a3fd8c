#!/usr/bin/env python3
"""Checks dsc-opt --dsc-print-model-stats="format=json" against closed forms.

The oracle is independent of dsc: Megatron-LM's parameter count
12·l·h²(1 + 13/(12h) + (V+s)/(12·l·h)) + 2h (+ V·h untied) and forward FLOPs
24·b·s·l·h²(1 + s/(6h)) + 2·b·s·h·V, computed here in exact integer
arithmetic from the shape given on the command line.

usage: check_model_stats.py STATS.json l h s V b tied(0|1) [P]
(P, the position-table rows, defaults to s)
"""
import json
import sys
from fractions import Fraction


def main():
    stats = json.load(open(sys.argv[1]))
    l, h, s, V, b, tied = (int(x) for x in sys.argv[2:8])
    P = int(sys.argv[8]) if len(sys.argv) > 8 else s
    params = Fraction(12 * l * h * h) * (1 + Fraction(13, 12 * h) +
                                         Fraction(V + P, 12 * l * h)) + 2 * h
    if not tied:
        params += V * h
    flops = Fraction(24 * b * s * l * h * h) * (1 + Fraction(s, 6 * h)) \
        + 2 * b * s * h * V
    assert params.denominator == 1 and flops.denominator == 1
    ok = True
    for key, want in (("parameters", int(params)),
                      ("forward_flops", int(flops))):
        got = stats[key]
        status = "ok" if got == want else "MISMATCH"
        print(f"{key}: got {got} want {want} {status}")
        ok &= got == want
    # The per-layer breakdown must add up to the totals.
    for key in ("parameters", "forward_flops"):
        total = sum(layer[key] for layer in stats["layers"])
        if total != stats[key]:
            print(f"layers' {key} sum to {total}, total says {stats[key]}")
            ok = False
    blocks = [x for x in stats["layers"] if x["name"].startswith("h.")]
    if len(blocks) != l:
        print(f"expected {l} transformer blocks in the breakdown, got {len(blocks)}")
        ok = False
    print(f"billions of parameters: {float(params) / 1e9:.4f}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
