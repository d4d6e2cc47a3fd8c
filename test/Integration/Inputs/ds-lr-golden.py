#!/usr/bin/env python3
"""A dsc-run learning-rate log against a golden DeepSpeed's engine wrote
(Inputs/ds-goldens/lr/*.json, made by scripts/ds-reference/lr-goldens.py).

usage: ds-lr-golden.py config GOLDEN          print the golden's ds_config
       ds-lr-golden.py check GOLDEN LOG.jsonl compare each step's rate
       ds-lr-golden.py log GOLDEN             the golden as a --log-json
                                              log (for deepspeed-lr.py)

`check` compares the `learning_rate` of each step of a --log-json log with
the rate DeepSpeed's step of the same number used, within 1e-9 relative.
An fp32 plan keeps its rate in an fp32 scalar, and torch's fp32 Adam
applies DeepSpeed's rate as an fp32 scalar too, so the golden rounded to
fp32 is also accepted. A golden of OneCycle with cycle_momentum also has
"beta1", Adam's beta1 each step used, compared with the log's "beta1"
the same way (dsc keeps it in an fp32 scalar too). The log must have every
step of the golden. Prints
"OK n steps", or the first step that differs and, when there is one, the
DeepSpeed step whose rate dsc's equals.
"""
import json
import struct
import sys

RTOL = 1e-9


def fp32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def same(got, want):
    if abs(got - want) <= RTOL * abs(want):
        return True
    return abs(got - fp32(want)) <= RTOL * abs(want)


def check(golden, log):
    want = golden["learning_rate"]
    steps = [json.loads(line) for line in open(log) if line.strip()]
    got = {r["iteration"]: r["learning_rate"] for r in steps}
    if sorted(got) != list(range(1, len(want) + 1)):
        print(f"{log}: steps {sorted(got)[:3]}... of {len(got)}, the golden "
              f"has steps 1-{len(want)}")
        return 1
    for key in ("beta1",) if "beta1" in golden else ():
        have = {r["iteration"]: r.get(key) for r in steps}
        for k in range(1, len(want) + 1):
            if have[k] is None or not same(have[k], golden[key][k - 1]):
                print(f"{log}: step {k}: {key} {have[k]!r}, DeepSpeed "
                      f"{golden['deepspeed']} used {golden[key][k - 1]!r}")
                return 1
    for k in range(1, len(want) + 1):
        if not same(got[k], want[k - 1]):
            near = [j for j in range(1, len(want) + 1)
                    if same(got[k], want[j - 1])]
            where = (f" (DeepSpeed's step {', '.join(map(str, near[:3]))})"
                     if near else "")
            print(f"{log}: step {k}: learning rate {got[k]!r}, DeepSpeed "
                  f"{golden['deepspeed']} used {want[k - 1]!r}{where}")
            return 1
    print(f"OK {len(want)} steps" +
          (" (learning rate and beta1)" if "beta1" in golden else ""))
    return 0


def main():
    args = sys.argv[1:]
    if len(args) == 2 and args[0] == "config":
        print(json.dumps(json.load(open(args[1]))["ds_config"], indent=1))
        return 0
    if len(args) == 2 and args[0] == "log":
        for k, lr in enumerate(json.load(open(args[1]))["learning_rate"]):
            print(json.dumps({"iteration": k + 1, "learning_rate": lr}))
        return 0
    if len(args) == 3 and args[0] == "check":
        return check(json.load(open(args[1])), args[2])
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main())
