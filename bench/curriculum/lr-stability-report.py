#!/usr/bin/env python3
"""Summarizes dsc-run --log-json files of lr-stability.sh, one line each:
the first step whose loss is not finite, the largest ratio of a step's loss
to the best loss before it (steps after the 30-step warm-up, losses at the
run's final sequence length only: a curriculum's shorter lengths have other
losses), and the mean loss of the last 20 steps.

usage: lr-stability-report.py RUN.jsonl...
"""

import json
import math
import sys


def summarize(path):
    try:
        with open(path) as f:
            rows = [json.loads(line) for line in f if line.startswith("{")]
    except OSError as e:
        return f"{path}: cannot read ({e.strerror})"
    if not rows:
        return f"{path}: no steps logged"
    final_length = rows[-1].get("curriculum_seqlen")
    first_bad = None
    best = math.inf
    spike, spike_at = 0.0, None
    for row in rows:
        step, loss = row["iteration"], row.get("lm_loss")
        if loss is None or not math.isfinite(loss):
            first_bad = first_bad or step
            continue
        full = row.get("curriculum_seqlen") == final_length
        if step > 30 and full and best < math.inf and loss / best > spike:
            spike, spike_at = loss / best, step
        if full:
            best = min(best, loss)
    tail = [r["lm_loss"] for r in rows[-20:]
            if r.get("lm_loss") is not None and math.isfinite(r["lm_loss"])]
    mean = sum(tail) / len(tail) if tail else math.nan
    return (f"{path}: {len(rows)} steps, first non-finite loss "
            f"{first_bad if first_bad else 'none'}, largest jump x{spike:.3f}"
            f"{f' at step {spike_at}' if spike_at else ''}, "
            f"last 20 steps' mean loss {mean:.4f}")


if __name__ == "__main__":
    for p in sys.argv[1:]:
        print(summarize(p))
