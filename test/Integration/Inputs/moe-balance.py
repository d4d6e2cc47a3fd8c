#!/usr/bin/env python3
"""Checks an MoE run's --log-json metrics: the loss fell, and the mean
over the last N steps of the step's largest expert load over the mean
load (expert_load_imbalance, 1 = balanced) is within a bound.

usage: moe-balance.py METRICS.jsonl --last N (--at-most B | --at-least B)
Prints "OK loss A -> B, expert load max/mean over the last N steps X".
"""

import json
import sys


def main(argv):
    path, last = argv[0], int(argv[argv.index("--last") + 1])
    rows = [json.loads(line) for line in open(path) if line.strip()]
    if len(rows) < last:
        sys.exit(f"{path}: {len(rows)} steps, fewer than {last}")
    first, final = rows[0]["lm_loss"], rows[-1]["lm_loss"]
    if not final < first:
        sys.exit(f"{path}: the loss did not fall ({first} -> {final})")
    loads = [r["expert_load_imbalance"] for r in rows[-last:]]
    mean = sum(loads) / len(loads)
    if "--at-most" in argv:
        bound = float(argv[argv.index("--at-most") + 1])
        if mean > bound:
            sys.exit(f"{path}: expert load max/mean {mean:.3f} > {bound}")
    if "--at-least" in argv:
        bound = float(argv[argv.index("--at-least") + 1])
        if mean < bound:
            sys.exit(f"{path}: expert load max/mean {mean:.3f} < {bound}")
    print(f"OK loss {first:.3f} -> {final:.3f}, expert load max/mean over "
          f"the last {last} steps {mean:.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
