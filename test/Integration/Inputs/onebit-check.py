#!/usr/bin/env python3
"""Checks of a 1-bit Adam or 1-bit LAMB run (train-onebit*.test).

usage: onebit-check.py converge BASELINE.jsonl ONEBIT.jsonl --last N --above F
           the mean lm_loss of ONEBIT's last N steps is at most F (a
           fraction, 0.02 = 2%) above BASELINE's (AdamW, or the optimizer
           never compressing)
       onebit-check.py resumed STRAIGHT.jsonl RESUMED.jsonl
           every iteration of RESUMED has STRAIGHT's lm_loss exactly (a run
           resumed from a checkpoint in the middle of STRAIGHT)
       onebit-check.py bytes LOG --at-most F
           dsc-run's "collective bytes per step" line of a 1-bit plan: each
           phase measured = planned, and the compressed step's bytes at most
           F of the warm-up's
Prints one line; exits 1 when the check fails.
"""

import json
import re
import sys


def losses(path):
    with open(path) as f:
        return [json.loads(line)["lm_loss"] for line in f if line.strip()]


def converge(adamw, onebit, last, above):
    a, b = losses(adamw)[-last:], losses(onebit)[-last:]
    if len(a) != last or len(b) != last:
        sys.exit(f"FAIL: fewer than {last} steps")
    ma, mb = sum(a) / last, sum(b) / last
    ratio = mb / ma - 1
    verdict = "OK" if ratio <= above else "FAIL"
    print(f"{verdict}: the 1-bit run's last {last} steps {mb:.4f}, the "
          f"baseline's "
          f"{ma:.4f}: {100 * ratio:+.1f}% (at most {100 * above:+.1f}%)")
    return verdict == "OK"


def resumed(straight, resumed_path):
    def by_iteration(path):
        with open(path) as f:
            return {r["iteration"]: r["lm_loss"]
                    for r in map(json.loads, filter(str.strip, f))}
    a, b = by_iteration(straight), by_iteration(resumed_path)
    if not b or any(i not in a for i in b):
        print(f"FAIL: {resumed_path}'s iterations are not all in {straight}")
        return False
    differ = [i for i in sorted(b) if a[i] != b[i]]
    first, last = min(b), max(b)
    if differ:
        i = differ[0]
        print(f"FAIL: iteration {i}: resumed {b[i]!r}, straight {a[i]!r}")
        return False
    print(f"OK resumed {len(b)} steps ({first}-{last}) bit-equal to the "
          f"straight run")
    return True


def bytes_line(log, at_most):
    text = open(log).read()
    m = re.search(r"warm-up measured (\d+), planned (\d+); compressed "
                  r"\(from step \d+\) measured (\d+), planned (\d+)", text)
    if not m:
        sys.exit("FAIL: no 1-bit collective bytes line in " + log)
    wm, wp, cm, cp = map(int, m.groups())
    fraction = cm / wm
    ok = wm == wp and cm == cp and fraction <= at_most
    print(f"{'OK' if ok else 'FAIL'}: warm-up {wm} B (planned {wp}), "
          f"compressed {cm} B (planned {cp}): 1/{wm / cm:.1f} of the "
          f"warm-up's (at most 1/{1 / at_most:.0f})")
    return ok


def main(argv):
    if argv[:1] == ["converge"] and len(argv) == 7:
        ok = converge(argv[1], argv[2], int(argv[4]), float(argv[6]))
    elif argv[:1] == ["resumed"] and len(argv) == 3:
        ok = resumed(argv[1], argv[2])
    elif argv[:1] == ["bytes"] and len(argv) == 4:
        ok = bytes_line(argv[1], float(argv[3]))
    else:
        sys.exit(__doc__)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
