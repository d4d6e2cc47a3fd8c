#!/usr/bin/env python3
"""Compares the per-step losses of dsc-run --log-json files.

usage: compare-losses.py REFERENCE.jsonl OTHER.jsonl... [--steps N] [--rtol R]

Every OTHER must have the REFERENCE's iterations (N of them when --steps is
given) and an lm_loss within R (default 1e-4) relative of the REFERENCE's
at each. Prints one line per file, exits 1 on the first disagreement.
"""

import json
import sys


def losses(path):
    out = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except ValueError as e:
                sys.exit(f"{path}:{n}: not JSON: {e}")
            out[record["iteration"]] = record["lm_loss"]
    return out


def main(argv):
    steps, rtol, files = None, 1e-4, []
    i = 0
    while i < len(argv):
        if argv[i] == "--steps":
            steps = int(argv[i + 1])
            i += 2
        elif argv[i] == "--rtol":
            rtol = float(argv[i + 1])
            i += 2
        else:
            files.append(argv[i])
            i += 1
    if len(files) < 2:
        sys.exit(__doc__)
    ref = losses(files[0])
    if steps is not None and len(ref) != steps:
        sys.exit(f"{files[0]}: {len(ref)} steps, expected {steps}")
    for path in files[1:]:
        other = losses(path)
        if sorted(other) != sorted(ref):
            sys.exit(f"{path}: iterations {sorted(other)} differ from "
                     f"{files[0]}'s {sorted(ref)}")
        worst = 0.0
        for it in sorted(ref):
            a, b = ref[it], other[it]
            if a is None or b is None:
                sys.exit(f"{path}: iteration {it}: loss is not finite")
            rel = abs(a - b) / max(abs(a), 1e-30)
            if rel > rtol:
                sys.exit(f"{path}: iteration {it}: loss {b!r} differs from "
                         f"{a!r} by {rel:.3g} relative (> {rtol:g})")
            worst = max(worst, rel)
        print(f"OK {len(ref)} steps, max relative difference {worst:.3g}")


if __name__ == "__main__":
    main(sys.argv[1:])
