#!/usr/bin/env python3
"""Checks two dsc-run metrics files (JSON lines) of the same run: the loss
falls (the last step well below the first and below a bound) and both runs
logged identical losses (determinism for a fixed seed).

usage: check_training.py RUN1.jsonl RUN2.jsonl MAX_FINAL_LOSS MIN_DROP
"""
import json
import sys


def losses(path):
    with open(path) as f:
        return [json.loads(line)["lm_loss"] for line in f if line.strip()]


def main():
    first, second = losses(sys.argv[1]), losses(sys.argv[2])
    max_final, min_drop = float(sys.argv[3]), float(sys.argv[4])
    ok = True
    print(f"steps: {len(first)}; loss {first[0]:.4f} -> {first[-1]:.4f}")
    if first[-1] > max_final:
        print(f"FAIL: final loss {first[-1]:.4f} is above {max_final}")
        ok = False
    if first[0] - first[-1] < min_drop:
        print(f"FAIL: the loss fell by {first[0] - first[-1]:.4f} < {min_drop}")
        ok = False
    if first != second:
        diff = next(i for i, (a, b) in enumerate(zip(first, second)) if a != b) \
            if len(first) == len(second) else min(len(first), len(second))
        print(f"FAIL: the two runs differ from step {diff + 1}")
        ok = False
    else:
        print("identical losses in both runs")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
