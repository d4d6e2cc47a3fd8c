#!/usr/bin/env python3
"""Compares dsc-run's validation losses (--log-json lines with "eval").

usage: eval-check.py same TRAIN.jsonl EVAL.jsonl ITERATION [RELTOL [KIND]]
  the training run's validation (or KIND: test) loss at ITERATION equals
  the eval-only run's (relative difference <= RELTOL, default 1e-6), and
  each line's perplexity is exp(its loss)
usage: eval-check.py training WITH.jsonl WITHOUT.jsonl
  the training steps' losses of the run with evaluation equal those of
  the run without, bit for bit; only the first has validation lines
"""
import json
import math
import sys


def lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def evals(path, kind="validation"):
    found = {}
    for line in lines(path):
        if line.get("eval") == kind:
            if not math.isclose(line["lm_loss_ppl"], math.exp(line["lm_loss"]),
                                rel_tol=1e-12):
                sys.exit(f"{path}: perplexity {line['lm_loss_ppl']} is not "
                         f"exp({line['lm_loss']})")
            found[line["iteration"]] = line["lm_loss"]
    return found


mode = sys.argv[1]
if mode == "same":
    at = int(sys.argv[4])
    tol = float(sys.argv[5]) if len(sys.argv) > 5 else 1e-6
    kind = sys.argv[6] if len(sys.argv) > 6 else "validation"
    train, alone = evals(sys.argv[2], kind), evals(sys.argv[3], kind)
    if at not in train or at not in alone:
        sys.exit(f"no validation loss at iteration {at}: {train} / {alone}")
    rel = abs(train[at] - alone[at]) / abs(alone[at])
    if rel > tol:
        sys.exit(f"iteration {at}: training logged {train[at]!r}, the "
                 f"eval-only run {alone[at]!r} (relative {rel:.3g} > {tol})")
    print(f"OK iteration {at}: {kind} loss {train[at]:.6f} both, "
          f"relative difference {rel:.3g}; evaluated at {sorted(train)}")
elif mode == "training":
    def steps(path):
        return [l["lm_loss"] for l in lines(path) if "eval" not in l]
    a, b = steps(sys.argv[2]), steps(sys.argv[3])
    if a != b:
        sys.exit(f"training losses differ with evaluation: {a} vs {b}")
    if not evals(sys.argv[2]) or evals(sys.argv[3]):
        sys.exit("expected validation lines in the first run only")
    print(f"OK {len(a)} training losses bit for bit with and without "
          f"evaluation")
else:
    sys.exit(__doc__)
