#!/usr/bin/env python3
"""The learning rate GPT-NeoX gives each iteration, against the
`learning_rate` a dsc-run JSON-lines log recorded.

usage: neox-lr.py LOG.jsonl PARAMS_JSON [--rtol 1e-6]

PARAMS_JSON holds the config's keys as GPT-NeoX reads them: "lr" (its
optimizer.params.lr), "train_iters", optionally "lr_decay_iters",
"lr_decay_style" (default "linear"), "warmup" (default 0.01) and "min_lr"
(default 0).

Written from megatron/training.py (get_learning_rate_scheduler: the
decay runs over lr_decay_iters, else train_iters; the warmup is the
fraction `warmup` of them) and megatron/learning_rates.py (AnnealingLR:
built at num_iters 0, stepped after each optimizer step; DeepSpeed does
not step it on a step the fp16 loss scaler skips). Prints "OK n steps" or
the first step that differs.
"""
import json
import math
import sys


class NeoXSchedule:
    """GPT-NeoX's AnnealingLR, as a stepped object."""

    def __init__(self, p):
        self.start = p["lr"]
        self.min_lr = p.get("min_lr", 0.0)
        self.style = p.get("lr_decay_style", "linear")
        iters = p.get("lr_decay_iters") or p["train_iters"]
        self.end = max(1, iters)
        self.warmup = p.get("warmup", 0.01) * self.end
        self.n = 0

    def rate(self):
        n, w = self.n, self.warmup
        if w > 0 and n <= w:
            return self.start * max(1, n) / w
        m, e = n - w, self.end - w
        if self.style == "linear":
            value = self.start * (e - m) / e
        elif self.style == "cosine":
            value = self.min_lr + (self.start - self.min_lr) / 2.0 * (
                math.cos(math.pi * m / e) + 1)
        elif self.style == "exponential":
            value = self.start * math.exp(-0.693 * m / e)
        else:
            value = self.start
        return max(value, self.min_lr)

    def step(self):
        self.n += 1


def main():
    args = sys.argv[1:]
    rtol = 1e-6
    if "--rtol" in args:
        i = args.index("--rtol")
        rtol = float(args[i + 1])
        del args[i:i + 2]
    log, params = args[0], json.loads(args[1])
    schedule = NeoXSchedule(params)
    skipped_before = 0
    count = 0
    with open(log) as f:
        for line in f:
            row = json.loads(line)
            skipped = row.get("skipped_iterations", 0)
            if skipped > skipped_before:
                # The loss scaler skipped this step: no optimizer step, the
                # schedule stays.
                skipped_before = skipped
                continue
            want = schedule.rate()
            got = row["learning_rate"]
            if abs(got - want) > rtol * abs(want):
                print("iteration %d: learning rate %.9g, GPT-NeoX's %.9g" %
                      (row["iteration"], got, want))
                return 1
            schedule.step()
            count += 1
    if count == 0:
        print("no steps in %s" % log)
        return 1
    print("OK %d steps" % count)
    return 0


if __name__ == "__main__":
    sys.exit(main())
