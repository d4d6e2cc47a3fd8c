#!/usr/bin/env python3
"""Record the fp16 loss scale DeepSpeed's own code uses at each optimizer
step, for fixed overflow sequences, under both of the engine's rules, as
golden files for test/Runtime/LossScalerTest.cpp (a developer runs this by
hand, never CI: it needs DeepSpeed and torch, see README.md).

DeepSpeed 0.19.8's engine scales an fp16 loss in one of two places:

  * without ZeRO (zero_optimization.stage 0) it wraps the optimizer in
    FP16_Optimizer (deepspeed/runtime/fp16/fused_optimizer.py) or, for an
    optimizer that is not FusedAdam, FP16_UnfusedOptimizer
    (unfused_optimizer.py); both own `_update_scale(skip)`, with the same
    body: no hysteresis, the scale floored at min_loss_scale. Here
    FP16_Optimizer._update_scale runs unbound on a stub carrying exactly
    what it reads: `loss_scale_config` (DeepSpeed's LossScaleConfig, built
    as engine._configure_fp16_optimizer builds it) and `verbose`.
    FP16_UnfusedOptimizer._update_scale is run beside it and must agree.
  * with ZeRO 1 and 2 DeepSpeedZeroOptimizer (zero/stage_1_and_2.py), and
    stage 3 (zero/stage3.py), build a DynamicLossScaler through
    CreateLossScaler (fp16/loss_scaler.py) and call its update_scale. Here
    CreateLossScaler builds it from the same arguments.

Both read their settings from DeepSpeedFP16Config(**ds_config["fp16"])
.dynamic_loss_scale_args(), as the engine does.

Per step k (1-based) the scale read before the update is the scale that
step's backward used; the step is skipped when it overflowed (the engine
skips the optimizer step and passes the overflow to the update). When
DynamicLossScaler raises (an overflow at the minimum scale with the
hysteresis spent), the case records that step as "raised_at" and ends
there: DeepSpeed's run would stop.

It writes OUT/<case>.json: the fp16 section, the overflowing steps, the
versions that made it and, per rule ("fused", "dynamic"), "scale" and
"skipped" for steps 1..N (fewer when it raised).

usage: loss-scale-goldens.py [--out test/Runtime/Inputs/loss-scale]
                             [--steps 60] [--only CASE]
"""

import argparse
import json
import os
import sys
import types

os.environ.setdefault("DS_ACCELERATOR", "cpu")
os.environ.setdefault("DS_BUILD_OPS", "0")
for key, value in {"MASTER_ADDR": "localhost", "MASTER_PORT": "29556",
                   "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0",
                   "LOCAL_SIZE": "1"}.items():
    os.environ.setdefault(key, value)

import deepspeed  # noqa: E402
import torch  # noqa: E402
from deepspeed.runtime.fp16.fused_optimizer import FP16_Optimizer  # noqa
from deepspeed.runtime.fp16.loss_scaler import (  # noqa: E402
    CreateLossScaler, LossScaleConfig, LossScaleProfile)
from deepspeed.runtime.fp16.unfused_optimizer import (  # noqa: E402
    FP16_UnfusedOptimizer)
from deepspeed.runtime.precision_config import (  # noqa: E402
    DeepSpeedFP16Config)

BURST = [3, 4, 5, 20, 21]
SCATTERED = [2, 4, 6, 9, 13, 14, 30, 32, 41, 42, 43, 58]


def case(fp16, overflows):
    section = {"enabled": True, "loss_scale": 0}
    section.update(fp16)
    return {"fp16": section, "overflow_steps": overflows}


CASES = {
    # No overflow: the scale grows every window after the first.
    "clean-window5": case({"initial_scale_power": 8, "loss_scale_window": 5,
                           "hysteresis": 2}, []),
    # A burst of three, a pair: hysteresis 2 and 3, refilled on growth only
    # or on every clean step.
    "burst-window4-h2": case({"initial_scale_power": 16,
                              "loss_scale_window": 4, "hysteresis": 2},
                             BURST),
    "burst-window4-h3": case({"initial_scale_power": 16,
                              "loss_scale_window": 4, "hysteresis": 3},
                             BURST),
    "burst-window4-h2-consecutive": case(
        {"initial_scale_power": 16, "loss_scale_window": 4, "hysteresis": 2,
         "consecutive_hysteresis": True}, BURST),
    "burst-window4-h3-consecutive": case(
        {"initial_scale_power": 16, "loss_scale_window": 4, "hysteresis": 3,
         "consecutive_hysteresis": True}, BURST),
    # Scattered overflows, some a clean step apart (where refilling the
    # hysteresis on every clean step differs from refilling it on growth),
    # some a window apart.
    "scattered-window3-h1": case({"initial_scale_power": 12,
                                  "loss_scale_window": 3, "hysteresis": 1},
                                 SCATTERED),
    "scattered-window3-h2": case({"initial_scale_power": 12,
                                  "loss_scale_window": 3, "hysteresis": 2},
                                 SCATTERED),
    "scattered-window3-h2-consecutive": case(
        {"initial_scale_power": 12, "loss_scale_window": 3, "hysteresis": 2,
         "consecutive_hysteresis": True}, SCATTERED),
    # Overflows down to min_loss_scale 4 from 2^4: FP16_Optimizer stays at
    # the minimum, DynamicLossScaler raises once the hysteresis is spent
    # there.
    "min-scale-h2": case({"initial_scale_power": 4, "loss_scale_window": 8,
                          "hysteresis": 2, "min_loss_scale": 4},
                         [5, 6, 7, 8, 9, 10, 11, 30]),
    "min-scale-h1": case({"initial_scale_power": 4, "loss_scale_window": 8,
                          "hysteresis": 1, "min_loss_scale": 4},
                         [2, 3, 20, 21, 22, 23, 24]),
    # At the minimum with hysteresis left: DynamicLossScaler spends it
    # first; clean windows between overflows keep it from raising.
    "min-scale-recovers": case({"initial_scale_power": 3,
                                "loss_scale_window": 4, "hysteresis": 2,
                                "min_loss_scale": 4},
                               [2, 3, 10, 16, 17, 30, 31, 45]),
}


def dynamic_args(fp16):
    return DeepSpeedFP16Config(**fp16).dynamic_loss_scale_args()


def fused_run(fp16, overflows, steps, update):
    """`update` (FP16_Optimizer's or FP16_UnfusedOptimizer's _update_scale)
    unbound on a stub with a LossScaleConfig built as
    DeepSpeedEngine._configure_fp16_optimizer builds it for FusedAdam."""
    config = DeepSpeedFP16Config(**fp16)
    stub = types.SimpleNamespace(
        loss_scale_config=LossScaleConfig(
            low_precision_dtype=torch.float16,
            dynamic_loss_scale=True,
            static_loss_scale=config.loss_scale,
            dynamic_loss_args=config.dynamic_loss_scale_args(),
            profile=LossScaleProfile.FUSED,
            initial_dynamic_scale=config.initial_dynamic_scale()),
        verbose=False)
    scale, skipped = [], []
    for step in range(1, steps + 1):
        skip = step in overflows
        scale.append(float(stub.loss_scale_config.cur_scale))
        skipped.append(skip)
        update(stub, skip)
    return {"scale": scale, "skipped": skipped, "raised_at": None}


def dynamic_run(fp16, overflows, steps):
    scaler = CreateLossScaler(dtype=torch.float16, static_loss_scale=0,
                              dynamic_scaling=True,
                              dynamic_loss_args=dynamic_args(fp16))
    assert type(scaler).__name__ == "DynamicLossScaler", type(scaler)
    scale, skipped = [], []
    for step in range(1, steps + 1):
        skip = step in overflows
        scale.append(float(scaler.cur_scale))
        skipped.append(skip)
        try:
            scaler.update_scale(skip)
        except Exception as error:  # DeepSpeed raises a bare Exception
            if "minimum" not in str(error):
                raise
            return {"scale": scale, "skipped": skipped, "raised_at": step}
    return {"scale": scale, "skipped": skipped, "raised_at": None}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="test/Runtime/Inputs/loss-scale")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--only")
    args = parser.parse_args()
    deepspeed.init_distributed(dist_backend="gloo")
    os.makedirs(args.out, exist_ok=True)
    for name, spec in CASES.items():
        if args.only and name != args.only:
            continue
        fp16, overflows = spec["fp16"], spec["overflow_steps"]
        fused = fused_run(fp16, overflows, args.steps,
                          FP16_Optimizer._update_scale)
        unfused = fused_run(fp16, overflows, args.steps,
                            FP16_UnfusedOptimizer._update_scale)
        if fused != unfused:
            sys.exit(f"{name}: FP16_Optimizer and FP16_UnfusedOptimizer "
                     "disagree")
        dynamic = dynamic_run(fp16, overflows, args.steps)
        if len(set(fused["scale"])) < 2:
            sys.exit(f"{name}: the scale never changes")
        golden = {
            "provenance": "scripts/ds-reference/loss-scale-goldens.py: the "
                          "loss scale of each step (read before the update) "
                          "and whether it was skipped, from DeepSpeed's "
                          "FP16_Optimizer._update_scale (zero 0, 'fused') "
                          "and DynamicLossScaler.update_scale (ZeRO, "
                          "'dynamic')",
            "deepspeed": deepspeed.__version__,
            "torch": torch.__version__.split("+")[0],
            "fp16": fp16,
            "overflow_steps": overflows,
            "fused": fused,
            "dynamic": dynamic,
        }
        path = os.path.join(args.out, name + ".json")
        with open(path, "w") as f:
            json.dump(golden, f, indent=1)
            f.write("\n")
        raised = dynamic["raised_at"]
        print(f"{name}: fused ends at {fused['scale'][-1]:g}, dynamic "
              + (f"raises at step {raised}" if raised
                 else f"ends at {dynamic['scale'][-1]:g}"))


if __name__ == "__main__":
    main()
