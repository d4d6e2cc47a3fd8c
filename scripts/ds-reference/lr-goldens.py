#!/usr/bin/env python3
"""Record the learning rate DeepSpeed's engine uses at each optimizer step,
for each ds_config scheduler dsc reads, as golden files for dsc's tests (a
developer runs this by hand, never CI: it needs DeepSpeed and torch, see
README.md).

For each case it builds a ds_config (fp32, one rank, a torch Adam from the
config) and trains a tiny torch model with deepspeed.initialize for --steps
optimizer steps (engine.backward(loss); engine.step()). The rate a step used
is optimizer.param_groups[0]["lr"] read just before that engine.step(): the
engine's step runs the optimizer and only then steps the scheduler. The
script does not take that on trust; it checks it each step:

  * the rate read after engine.step() is the next step's rate, never this
    one's (unless the schedule is flat there);
  * a second run of the same scheduler drives a plain torch SGD (no
    momentum, no weight decay), passed as the client optimizer, and
    recovers the rate each step applied from the update itself: the
    weight is zeroed just before engine.step() (and its old value added
    back after), so lr = -weight / grad holds to fp32 rounding. It must
    equal the rate read before the step within 1e-6 relative, be nearer to
    it than to the rate read after, and the rates must be the Adam run's.

It writes OUT/<case>.json: the ds_config to give dsc-run --deepspeed, the
versions that made it, and "learning_rate": the rates of steps 1..N; with
OneCycle's cycle_momentum also "beta1" and "beta2", Adam's betas each step
used (param_groups[0]["betas"] read just before that engine.step(), which
is what torch's Adam reads in it).

usage: lr-goldens.py [--out test/Integration/Inputs/ds-goldens/lr]
                     [--steps 60] [--only CASE]
"""

import argparse
import copy
import json
import os
import sys

os.environ.setdefault("DS_ACCELERATOR", "cpu")
os.environ.setdefault("DS_BUILD_OPS", "0")
for key, value in {"MASTER_ADDR": "localhost", "MASTER_PORT": "29555",
                   "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0",
                   "LOCAL_SIZE": "1"}.items():
    os.environ.setdefault(key, value)

import deepspeed  # noqa: E402
import torch  # noqa: E402

# The micro-batch of test/Integration/Inputs/tp-1layer.yml, the model the
# test trains (dsc-run wants the ds_config to agree with it).
BATCH = 2


def base(optimizer_lr=1e-3):
    return {
        "train_batch_size": BATCH,
        "train_micro_batch_size_per_gpu": BATCH,
        # Stated: DeepSpeed 0.19's default is 1.0, and a clipped update
        # would hide the rate it applied.
        "gradient_clipping": 0.0,
        "optimizer": {"type": "Adam",
                      "params": {"lr": optimizer_lr, "torch_adam": True}},
    }


def case(scheduler, params, optimizer_lr=1e-3):
    config = base(optimizer_lr)
    config["scheduler"] = {"type": scheduler, "params": params}
    return config


# Names are the golden files' names. Warm-ups long enough to be seen, decays
# that end within the run, cycles that turn more than once.
CASES = {
    "warmup-log": case("WarmupLR", {
        "warmup_min_lr": 1e-5, "warmup_max_lr": 1e-3,
        "warmup_num_steps": 20, "warmup_type": "log"}),
    "warmup-linear": case("WarmupLR", {
        "warmup_min_lr": 2e-4, "warmup_max_lr": 1e-3,
        "warmup_num_steps": 20, "warmup_type": "linear"}),
    "warmup-decay-log": case("WarmupDecayLR", {
        "warmup_min_lr": 1e-5, "warmup_max_lr": 1e-3,
        "warmup_num_steps": 16, "warmup_type": "log",
        "total_num_steps": 60}),
    "warmup-decay-linear": case("WarmupDecayLR", {
        "warmup_min_lr": 0, "warmup_max_lr": 1e-3,
        "warmup_num_steps": 4, "warmup_type": "linear",
        "total_num_steps": 60}),
    "warmup-decay-one": case("WarmupDecayLR", {
        "warmup_min_lr": 0, "warmup_max_lr": 1e-3,
        "warmup_num_steps": 1, "warmup_type": "linear",
        "total_num_steps": 60}),
    "warmup-cosine-log": case("WarmupCosineLR", {
        "warmup_min_ratio": 0.1, "cos_min_ratio": 0.1,
        "warmup_num_steps": 12, "warmup_type": "log",
        "total_num_steps": 60}),
    "warmup-cosine-linear": case("WarmupCosineLR", {
        "warmup_min_ratio": 0.0, "cos_min_ratio": 0.0001,
        "warmup_num_steps": 10, "warmup_type": "linear",
        "total_num_steps": 60}, optimizer_lr=6e-4),
    "one-cycle": case("OneCycle", {
        "cycle_min_lr": 1e-4, "cycle_max_lr": 1e-3,
        "cycle_first_step_size": 15, "cycle_second_step_size": 10,
        "decay_step_size": 5, "decay_lr_rate": 0.5,
        "cycle_momentum": False}),
    "one-cycle-stairs": case("OneCycle", {
        "cycle_min_lr": 1e-4, "cycle_max_lr": 1e-3,
        "cycle_first_step_size": 12, "cycle_second_step_size": 8,
        "cycle_first_stair_count": 4, "cycle_second_stair_count": 2,
        "decay_step_size": 4, "decay_lr_rate": 0.25,
        "cycle_momentum": False}),
    # cycle_momentum (DeepSpeed's default): Adam's betas become
    # (momentum, 0.99), the momentum falling as the rate rises; then a
    # decay of both after the cycle.
    "one-cycle-momentum": case("OneCycle", {
        "cycle_min_lr": 1e-4, "cycle_max_lr": 1e-3,
        "cycle_first_step_size": 15, "cycle_second_step_size": 10,
        "decay_step_size": 5, "decay_lr_rate": 0.5,
        "cycle_momentum": True, "cycle_min_mom": 0.85,
        "cycle_max_mom": 0.95, "decay_mom_rate": 0.01}),
    "one-cycle-momentum-stairs": case("OneCycle", {
        "cycle_min_lr": 1e-4, "cycle_max_lr": 1e-3,
        "cycle_first_step_size": 12, "cycle_second_step_size": 8,
        "cycle_first_stair_count": 4, "cycle_second_stair_count": 2,
        "cycle_momentum": True}),
    "range-test": case("LRRangeTest", {
        "lr_range_test_min_lr": 1e-4, "lr_range_test_step_size": 7,
        "lr_range_test_step_rate": 0.5}),
    "range-test-stairs": case("LRRangeTest", {
        "lr_range_test_min_lr": 1e-4, "lr_range_test_step_size": 7,
        "lr_range_test_step_rate": 0.5, "lr_range_test_staircase": True}),
}


class Tiny(torch.nn.Module):
    def __init__(self, dtype):
        super().__init__()
        self.linear = torch.nn.Linear(4, 1, dtype=dtype)

    def forward(self, x, y):
        return ((self.linear(x) - y) ** 2).mean()


def batches(dtype):
    gen = torch.Generator().manual_seed(0)
    while True:
        x = torch.randn(BATCH, 4, generator=gen, dtype=dtype)
        yield x, x.sum(dim=1, keepdim=True)


def train(config, steps, client_sgd):
    """Rates read before and after each engine.step(), and, with a client
    SGD, the rate each update applied."""
    # DeepSpeed's engine reduces fp16, bf16 and fp32 gradients only.
    dtype = torch.float32
    torch.manual_seed(0)
    model = Tiny(dtype)
    config = copy.deepcopy(config)
    optimizer = None
    if client_sgd:
        lr = config.pop("optimizer")["params"]["lr"]
        optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    engine, opt, _, sched = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), config=config,
        optimizer=optimizer, dist_init_required=True)
    assert sched is not None, "the engine built no scheduler"
    before, after, applied, betas = [], [], [], []
    data = batches(dtype)
    for _ in range(steps):
        x, y = next(data)
        loss = engine(x, y)
        engine.backward(loss)
        weight = engine.module.linear.weight
        old, grad = weight.detach().clone(), weight.grad.detach().clone()
        if client_sgd:
            # From zero the update is -lr * grad rounded once.
            with torch.no_grad():
                weight.zero_()
        before.append(opt.param_groups[0]["lr"])
        # What torch's Adam reads in this step (absent for SGD).
        betas.append(opt.param_groups[0].get("betas"))
        engine.step()
        after.append(opt.param_groups[0]["lr"])
        if client_sgd:
            k = torch.argmax(grad.abs())
            update = weight.detach().flatten()[k].item()
            applied.append(-update / grad.flatten()[k].item())
            with torch.no_grad():
                weight.add_(old)
    engine.destroy()
    return before, after, applied, betas


def close(a, b, rtol):
    return abs(a - b) <= rtol * max(abs(a), abs(b), 1e-300)


def record(name, config, steps):
    before, after, _, betas = train(config, steps, client_sgd=False)
    sgd_before, _, applied, _ = train(config, steps, client_sgd=True)
    for k in range(steps):
        step = k + 1
        if before[k] != sgd_before[k]:
            sys.exit(f"{name}: step {step}: Adam's rate {before[k]!r}, "
                     f"SGD's {sgd_before[k]!r}")
        if not close(applied[k], before[k], 1e-6) or (
                abs(applied[k] - after[k]) < abs(applied[k] - before[k])):
            sys.exit(f"{name}: step {step}: the update applied "
                     f"{applied[k]!r}; the rate read before the step is "
                     f"{before[k]!r}, after it {after[k]!r}")
        if k + 1 < steps and after[k] != before[k + 1]:
            sys.exit(f"{name}: step {step}: the rate after it "
                     f"{after[k]!r} is not step {step + 1}'s "
                     f"{before[k + 1]!r}")
    moved = sum(1 for k in range(steps) if after[k] != before[k])
    if moved == 0:
        sys.exit(f"{name}: the rate never changed")
    golden = {
        "provenance": (
            "scripts/ds-reference/lr-goldens.py: the rate DeepSpeed's "
            "engine used at each optimizer step (param_groups[0]['lr'] "
            "before engine.step(), checked against the update a client "
            "SGD applied)"),
        "deepspeed": deepspeed.__version__,
        "torch": torch.__version__.split("+")[0],
        "ds_config": config,
        "steps": steps,
        "learning_rate": before,
    }
    # The momentum OneCycle sets: Adam's betas each step used.
    if config["scheduler"]["params"].get("cycle_momentum"):
        golden["beta1"] = [float(b[0]) for b in betas]
        golden["beta2"] = [float(b[1]) for b in betas]
        if len(set(golden["beta1"])) < 3:
            sys.exit(f"{name}: beta1 hardly moved: {golden['beta1'][:5]}")
    return golden


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "test",
        "Integration", "Inputs", "ds-goldens", "lr"))
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--only", action="append")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name, config in CASES.items():
        if args.only and name not in args.only:
            continue
        golden = record(name, config, args.steps)
        path = os.path.join(args.out, name + ".json")
        with open(path, "w") as f:
            json.dump(golden, f, indent=1)
            f.write("\n")
        lrs = golden["learning_rate"]
        print(f"{name}: steps 1-3 {lrs[0]:.6e} {lrs[1]:.6e} {lrs[2]:.6e}, "
              f"step {args.steps} {lrs[-1]:.6e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
