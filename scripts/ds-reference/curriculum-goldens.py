#!/usr/bin/env python3
"""Record the sequence length DeepSpeed's own curriculum scheduler gives at
each global step, as golden files for test/Runtime/CurriculumScheduleTest.cpp
(a developer runs this by hand, never CI: it needs DeepSpeed, see README.md).

DeepSpeed's CurriculumScheduler (deepspeed/runtime/data_pipeline/
curriculum_scheduler.py) is stateful: `update_difficulty(step)` replaces the
current difficulty with `get_difficulty(step)` only while the current one is
below `max_difficulty`, and returns it. Who calls it, and at which step:

  * DeepSpeed 0.19.8 (the one installed here) refuses the legacy top-level
    `curriculum_learning` block ("has been removed"); the scheduler is built
    per metric of `data_efficiency.data_sampling.curriculum_learning` by
    DeepSpeedDataSampler, whose `get_next_global_batch` increments
    `curriculum_step` (0 at the start) and then calls `update_difficulty`:
    the first global batch is evaluated at 1.
  * DeepSpeed up to 0.19.6 (and GPT-NeoX's DeeperSpeed) built it from the
    top-level block less `enabled`, and the engine's `forward` called
    `update_difficulty(global_steps + 1)` before each training forward,
    handing the result to the model as `curriculum_seqlen`: again 1 for the
    first step.

0.19.8 also changed the rounding: after flooring to a multiple of
difficulty_step it raises the value to the first multiple at or above
min_difficulty (0.19.6 could give 0, or a length below min_difficulty).

Here a fresh scheduler is updated in order at steps 0..N (0 included: the
value there is what a scheduler updated at 0 gives; it changes no later
step) and every returned difficulty is recorded, the stateful value a run
reads. Each case also records the stateless `get_difficulty(step)`, so a
reader sees where the two differ.

It writes OUT/<case>.json: the `curriculum_learning` block, the versions
that made it, "steps" (0..N) and "difficulty" / "stateless" per step.

usage: curriculum-goldens.py [--out test/Runtime/Inputs/curriculum]
                             [--only CASE]
"""

import argparse
import json
import os
import sys

os.environ.setdefault("DS_ACCELERATOR", "cpu")
os.environ.setdefault("DS_BUILD_OPS", "0")

import deepspeed  # noqa: E402
from deepspeed.runtime.data_pipeline.constants import (  # noqa: E402
    CURRICULUM_LEARNING_CURRENT_DIFFICULTY)
from deepspeed.runtime.data_pipeline.curriculum_scheduler import (  # noqa
    CurriculumScheduler)


def linear(min_d, max_d, step, total):
    return {"min_difficulty": min_d, "max_difficulty": max_d,
            "schedule_type": "fixed_linear",
            "schedule_config": {"total_curriculum_step": total,
                                "difficulty_step": step}}


def root(min_d, max_d, step, total, degree):
    cfg = linear(min_d, max_d, step, total)
    cfg["schedule_type"] = "fixed_root"
    cfg["schedule_config"]["root_degree"] = degree
    return cfg


# Each case: (name, the curriculum_learning block less enabled and
# curriculum_type, last step recorded).
CASES = [
    ("fixed-linear", linear(8, 64, 8, 100), 120),
    # 10 is not a multiple of 8: rounded down to a multiple of
    # difficulty_step it would start at 8, below min; 0.19.8 starts at 16.
    ("fixed-linear-min-not-multiple", linear(10, 64, 8, 100), 120),
    # min below difficulty_step: rounded down it would be 0.
    ("fixed-linear-min-below-step", linear(4, 64, 8, 100), 120),
    # 60 is not a multiple of 8: the schedule reaches 56 at T and 60 only
    # once the unclamped value passes 64, after T.
    ("fixed-linear-max-not-multiple", linear(8, 60, 8, 100), 130),
    # min == max: the scheduler is at max from the start and never updates
    # (0.19.8's stateless value agrees: its floor keeps 60 from rounding
    # down to 56).
    ("fixed-linear-min-equals-max", linear(60, 60, 8, 10), 20),
    ("fixed-root-2", root(8, 64, 8, 100, 2), 120),
    ("fixed-root-3", root(8, 64, 8, 100, 3), 120),
    ("fixed-discrete", {"min_difficulty": 16, "max_difficulty": 64,
                        "schedule_type": "fixed_discrete",
                        "schedule_config": {"difficulty": [16, 32, 64],
                                            "max_step": [30, 60]}}, 80),
]


def run_case(block, last):
    scheduler = CurriculumScheduler(dict(block))
    stateful, stateless = [], []
    for step in range(last + 1):
        stateless.append(int(scheduler.get_difficulty(step)))
        stateful.append(int(scheduler.update_difficulty(step)))
        if stateful[-1] != scheduler.state[CURRICULUM_LEARNING_CURRENT_DIFFICULTY]:
            sys.exit("update_difficulty returned something other than the "
                     "current difficulty at step %d" % step)
    # The run must climb to max_difficulty, or the golden tests only the
    # ramp's start.
    if stateful[-1] != block["max_difficulty"]:
        sys.exit("the case ends at %d, below max_difficulty %d: record "
                 "more steps" % (stateful[-1], block["max_difficulty"]))
    return stateful, stateless


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.path.normpath(os.path.join(
        os.path.dirname(__file__), "..", "..", "test", "Runtime", "Inputs",
        "curriculum")))
    parser.add_argument("--only")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name, block, last in CASES:
        if args.only and name != args.only:
            continue
        stateful, stateless = run_case(block, last)
        config = {"enabled": True, "curriculum_type": "seqlen"}
        config.update(block)
        golden = {
            "curriculum_learning": config,
            "made_with": {"deepspeed": deepspeed.__version__,
                          "python": "%d.%d" % sys.version_info[:2]},
            "steps": list(range(last + 1)),
            "difficulty": stateful,
            "stateless": stateless,
        }
        path = os.path.join(args.out, name + ".json")
        with open(path, "w") as f:
            json.dump(golden, f, indent=1)
            f.write("\n")
        print("%s: %d steps, %d..%d" % (path, last + 1, stateful[0],
                                       stateful[-1]))


if __name__ == "__main__":
    main()
