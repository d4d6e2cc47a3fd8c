#!/usr/bin/env python3
"""The learning rate DeepSpeed's schedulers give each step, against the
`learning_rate` a dsc-run JSON-lines log recorded.

usage: deepspeed-lr.py LOG.jsonl SCHEDULER PARAMS_JSON [--rtol 1e-6]

SCHEDULER is WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle or
LRRangeTest; PARAMS_JSON their
`params` as a ds_config.json spells them (WarmupCosineLR also takes "lr",
the optimizer's learning rate it scales). Written from the formulas of
deepspeed/runtime/lr_schedules.py: DeepSpeed's engine builds the scheduler
at last_batch_iteration = -1, which sets the rate of step 1, and steps it
once after each optimizer step, so step k >= 2 (1-based) runs at
last_batch_iteration = k - 2. deepspeed-lr-goldens.test checks these
formulas against the rates DeepSpeed 0.19.8's engine used
(Inputs/ds-goldens/lr). Prints "OK n steps" or the first step that differs.
"""
import json
import math
import sys


def warmup_gamma(i, warmup_steps, warmup_type):
    # DeepSpeed never warms up over fewer than two steps.
    w = max(2, warmup_steps)
    if warmup_type == "log":
        return math.log(i + 1) / math.log(w)
    return i / w


# The Warmup* schedules below take i = last_batch_iteration; at -1 (step 1)
# WarmupLR and WarmupDecayLR give warmup_min_lr, WarmupCosineLR 0.


def warmup_lr(i, p):
    lo, hi = p.get("warmup_min_lr", 0.0), p.get("warmup_max_lr", 0.001)
    if i < 0:
        return lo
    w = max(2, p.get("warmup_num_steps", 1000))
    gamma = warmup_gamma(i, w, p.get("warmup_type", "log")) if i < w else 1.0
    return lo + (hi - lo) * gamma


def warmup_decay_lr(i, p):
    lo, hi = p.get("warmup_min_lr", 0.0), p.get("warmup_max_lr", 0.001)
    if i < 0:
        return lo
    w = max(2, p.get("warmup_num_steps", 1000))
    total = p["total_num_steps"]
    if i < w:
        gamma = warmup_gamma(i, w, p.get("warmup_type", "log"))
    else:
        gamma = max(0.0, (total - i) / max(1.0, total - w))
    return lo + (hi - lo) * gamma


def warmup_cosine_lr(i, p):
    if i < 0:
        return 0.0
    w = max(2, p.get("warmup_num_steps", 1000))
    total = p["total_num_steps"]
    warm_min = p.get("warmup_min_ratio", 0.0)
    cos_min = p.get("cos_min_ratio", 0.0001)
    if i < w:
        ratio = warmup_gamma(i, w, p.get("warmup_type", "log"))
        ratio = warm_min + ratio * (1.0 - warm_min)
    else:
        done = i - w + 1
        span = total - w
        ratio = (1 + math.cos(math.pi * done / span)) / 2
        ratio = max(0.0, cos_min + (1.0 - cos_min) * ratio)
    return p["lr"] * ratio


def one_cycle_lr(i, p):
    """OneCycle (cycle_momentum false). Its constructor sets cycle_min_lr;
    each step() then sets get_lr() at the new last_batch_iteration, so step
    k runs at the rate its (k-1)th step() set: i = k - 1 step() calls."""
    lo, hi = p["cycle_min_lr"], p["cycle_max_lr"]
    if i == 0:
        return lo
    last = i - 1  # last_batch_iteration after i step() calls
    first = float(p.get("cycle_first_step_size", 2000))
    second = float(p.get("cycle_second_step_size", first))
    total = first + second
    if last < total:
        batch = last + 1
        cycle = math.floor(1 + batch / total)
        x = 1.0 + batch / total - cycle
        ratio = first / total
        if x <= ratio:
            scale = x / ratio
            stairs = p.get("cycle_first_stair_count", 0)
        else:
            scale = (x - 1) / (ratio - 1)
            stairs = p.get("cycle_second_stair_count",
                           p.get("cycle_first_stair_count", 0))
        if stairs > 0:
            offset = batch % total
            if offset <= first:
                position = offset * stairs / first
            else:
                position = (total - offset) * stairs / second
            scale = math.floor(position) / stairs
        return lo + (hi - lo) * scale
    rate = p.get("decay_lr_rate", 0.0)
    size = p.get("decay_step_size", 0)
    if math.isclose(rate, 0) or math.isclose(size, 0):
        return lo
    return lo / (1 + rate * (last - total + 1) / size)


def range_test_lr(i, p):
    """LRRangeTest: its constructor sets the minimum; step() then sets
    min * (1 + rate * interval) at the new last_batch_iteration."""
    lo = p.get("lr_range_test_min_lr", 1e-3)
    if i == 0:
        return lo
    last = i - 1
    size = p.get("lr_range_test_step_size", 2000)
    interval = (last + 1) / size
    if p.get("lr_range_test_staircase", False):
        interval = math.floor(interval)
    return lo * (1 + p.get("lr_range_test_step_rate", 1.0) * interval)


# Each schedule as a function of the 1-based step. OneCycle and LRRangeTest
# above count step() calls themselves (their step 1 is also the
# constructor's rate).
SCHEDULERS = {"WarmupLR": lambda k, p: warmup_lr(k - 2, p),
              "WarmupDecayLR": lambda k, p: warmup_decay_lr(k - 2, p),
              "WarmupCosineLR": lambda k, p: warmup_cosine_lr(k - 2, p),
              "OneCycle": lambda k, p: one_cycle_lr(k - 1, p),
              "LRRangeTest": lambda k, p: range_test_lr(k - 1, p)}


def main():
    args = sys.argv[1:]
    rtol = 1e-6
    if "--rtol" in args:
        k = args.index("--rtol")
        rtol = float(args[k + 1])
        del args[k:k + 2]
    if len(args) != 3 or args[1] not in SCHEDULERS:
        sys.exit(__doc__)
    log, name, params = args[0], args[1], json.loads(args[2])
    schedule = SCHEDULERS[name]
    steps = [json.loads(line) for line in open(log) if line.strip()]
    for record in steps:
        k = record["iteration"]
        want = schedule(k, params)
        got = record["learning_rate"]
        if abs(got - want) > rtol * max(abs(want), 1e-12):
            print(f"{log}: step {k}: learning rate {got!r}, {name} gives "
                  f"{want!r}")
            return 1
    print(f"OK {len(steps)} steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
