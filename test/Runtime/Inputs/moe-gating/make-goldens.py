#!/usr/bin/env python3
"""Reference goldens for dsc's MoE gating kernels, produced by DeepSpeed's own code.

What it calls
-------------
The gating functions of ``deepspeed.moe.sharded_moe`` exactly as installed, with
no patching:

  * ``top1gating(logits, capacity_factor, min_capacity, noisy_gate_policy=None,
    drop_tokens=..., use_rts=False)``
  * ``top2gating(logits, capacity_factor, min_capacity, drop_tokens=...,
    top2_2nd_expert_sampling=False)``
  * ``topkgating(logits, k, capacity_factor, min_capacity, drop_tokens=...,
    drop_policy="probs"|"position")``  for k = 2 and k = 3

Only deterministic modes are used (no random token selection, no Gumbel
noise, no 2nd-expert sampling).  No ep_group, no mpu: a single process,
torch.distributed is never initialized (this DeepSpeed version does not need it
for these calls).

Every case is run twice: once with the default dense outputs
(``l_aux, combine_weights[T,E,C], dispatch_mask[T,E,C], exp_counts[E]``) and
once with ``sparse_routes=True`` (DeepSpeed's own per-route
``indices/locations/gates`` tensors of shape [k, T]).  The sparse triples in the
goldens are derived generically from the dense ``dispatch_mask`` /
``combine_weights`` and then checked against the ``sparse_routes`` outputs, so
both APIs agree on every file written.

Gradients: with a fixed seeded tensor R of shape combine_weights.shape,
``loss = (combine_weights * R).sum() + 0.01 * l_aux`` is back-propagated to the
float32 logits; the goldens store d_logits and, for every kept route, the value
R[t, e, slot] (R is zero-weighted everywhere else, so those values are all a
re-implementation needs to rebuild the loss).

Versions used when the committed files were generated
-----------------------------------------------------
  python 3.11.7, torch 2.15.0+cu132 (a CUDA wheel, but every tensor here is on the
  CPU and no GPU was present), numpy 2.4.6,
  deepspeed 0.19.8 (installed from PyPI with DS_BUILD_OPS=0, CPU accelerator).
The script records the versions it actually ran with in every JSON file.

How to rerun
------------
  python3 -m venv /tmp/ds-venv
  /tmp/ds-venv/bin/pip install torch numpy          # CPU execution is enough
  DS_BUILD_OPS=0 /tmp/ds-venv/bin/pip install deepspeed==0.19.8
  /tmp/ds-venv/bin/python test/Runtime/Inputs/moe-gating/make-goldens.py

It rewrites top1.json, top2.json and topk.json next to itself.  Output is
deterministic for a given torch/deepspeed version (fixed seeds, CPU, one thread).
See README.md in this folder for the field-by-field description.
"""

import inspect
import json
import os
import platform
import sys

os.environ.setdefault("DS_ACCELERATOR", "cpu")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import deepspeed  # noqa: E402
from deepspeed.moe import sharded_moe  # noqa: E402

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

HERE = os.path.dirname(os.path.abspath(__file__))
L_AUX_COEFF = 0.01

# (T, E, capacity_factor, min_capacity, expert_bias)
# expert_bias is added to the logits of expert 0 to make the load skewed.
CASES = [
    (16, 4, 1.0, 1, 0.0),
    (16, 4, 0.5, 2, 0.0),    # forces token dropping
    (12, 3, 1.25, 4, 0.0),
    (32, 8, 1.0, 0, 0.0),
    (16, 4, 0.5, 6, 0.0),    # min_capacity (6) > ceil(T/E*cf) (2)
    (24, 4, 1.0, 1, 1.5),    # skewed load: expert 0 is popular
]


def f32(x):
    """Shortest decimal that round-trips to the same float32 value."""
    return float(str(np.float32(x)))


def make_logits(case_id, T, E, bias):
    # Logits are multiples of 1/64 so they are exact in float32 and short in JSON.
    g = torch.Generator().manual_seed(1000 + case_id)
    x = torch.randn(T, E, generator=g, dtype=torch.float32) * 1.5
    x = torch.round(x * 64.0) / 64.0
    x[:, 0] += bias
    return x


def make_r(case_id, shape):
    g = torch.Generator().manual_seed(2000 + case_id)
    return torch.randn(*shape, generator=g, dtype=torch.float32)


def raw_choices(fn, logits, k):
    """Per-token expert choices before any capacity dropping, in DeepSpeed's order.

    These repeat the selection expressions of sharded_moe.py (argmax of the
    softmax; for top2 the argmax of the logits with the first choice masked to
    -inf; torch.topk(gates, k) for topk).  They are cross-checked against
    DeepSpeed's own sparse_routes indices for every kept route.
    """
    gates = torch.softmax(logits, dim=1)
    if fn == "top1gating":
        return torch.argmax(gates, dim=1).unsqueeze(1)
    if fn == "top2gating":
        i1 = torch.argmax(gates, dim=1)
        masked = logits.masked_fill(torch.nn.functional.one_hot(i1, logits.shape[1]).bool(), float("-inf"))
        i2 = torch.argmax(masked, dim=1)
        return torch.stack([i1, i2], dim=1)
    return torch.topk(gates, k=k, dim=1)[1]


def call(fn, logits, k, cf, min_cap, kwargs, sparse):
    f = getattr(sharded_moe, fn)
    if fn == "topkgating":
        return f(logits, k, cf, min_cap, **kwargs, sparse_routes=sparse)
    return f(logits, cf, min_cap, **kwargs, sparse_routes=sparse)


def run_case(case_id, fn, T, E, cf, min_cap, bias, k, kwargs):
    logits0 = make_logits(case_id, T, E, bias)

    # Dense call with autograd.
    logits = logits0.clone().requires_grad_(True)
    l_aux, combine_weights, dispatch_mask, exp_counts = call(fn, logits, k, cf, min_cap, kwargs, sparse=False)
    capacity = int(combine_weights.shape[2])
    R = make_r(case_id, combine_weights.shape)
    loss = (combine_weights * R).sum() + L_AUX_COEFF * l_aux
    loss.backward()
    d_logits = logits.grad.detach().clone()
    assert torch.equal(logits.detach(), logits0), "DeepSpeed mutated the logits"

    # Sparse-routes call (DeepSpeed's own per-route outputs), no grad needed.
    with torch.no_grad():
        s_l_aux, s_capacity, s_num_experts, s_idx, s_loc, s_gates, s_counts = call(fn, logits0.clone(), k, cf, min_cap,
                                                                                  kwargs, sparse=True)
    assert int(s_capacity) == capacity, (int(s_capacity), capacity)
    assert int(s_num_experts) == E
    assert torch.equal(s_counts, exp_counts)
    assert torch.allclose(s_l_aux, l_aux.detach(), rtol=0, atol=0)

    raw = raw_choices(fn, logits0, k)
    cw = combine_weights.detach()
    dm = dispatch_mask

    routes = []
    for t in range(T):
        nz = dm[t].nonzero().tolist()            # generic: [(e, c), ...]
        by_expert = {e: c for e, c in nz}
        assert len(by_expert) == len(nz), f"token {t}: expert used twice"
        token_routes = []
        for j in range(k):
            e = int(raw[t, j])
            if e in by_expert:
                c = by_expert.pop(e)
                w = float(cw[t, e, c])
                token_routes.append({"expert": e, "slot": c, "weight": f32(w), "r": f32(R[t, e, c])})
            else:
                token_routes.append({"expert": e, "slot": -1, "weight": 0.0})
            # Cross-check with DeepSpeed's sparse_routes outputs.
            si, sl, sg = int(s_idx[j, t]), int(s_loc[j, t]), float(s_gates[j, t])
            if token_routes[-1]["slot"] >= 0:
                assert si == e and sl == token_routes[-1]["slot"], (fn, t, j, si, sl, token_routes[-1])
                assert np.float32(sg) == np.float32(token_routes[-1]["weight"]), (sg, token_routes[-1])
            else:
                assert si == -1 and sg == 0.0, (fn, t, j, si, sl, sg)
        assert not by_expert, f"token {t}: dispatch entries not explained by the raw choices: {by_expert}"
        routes.append(token_routes)

    # Sanity: kept slots < capacity, no (expert, slot) used twice.
    used = set()
    for t, tr in enumerate(routes):
        for r in tr:
            if r["slot"] >= 0:
                assert 0 <= r["slot"] < capacity
                key = (r["expert"], r["slot"])
                assert key not in used, (fn, key)
                used.add(key)

    args = {"capacity_factor": cf, "min_capacity": min_cap, **kwargs}
    if fn == "topkgating":
        args = {"k": k, **args}
    return {
        "name": f"{fn}-case{case_id}-k={k}-" + "-".join(f"{a}={v}" for a, v in kwargs.items()),
        "function": fn,
        "args": args,
        "T": T,
        "E": E,
        "k": k,
        "expert0_bias": bias,
        "logits": [[f32(v) for v in row] for row in logits0.tolist()],
        "capacity": capacity,
        "l_aux": f32(l_aux.item()),
        "l_aux_dtype": str(l_aux.dtype).replace("torch.", ""),
        "exp_counts": [int(v) for v in exp_counts.tolist()],
        "exp_counts_dtype": str(exp_counts.dtype).replace("torch.", ""),
        "raw_experts": raw.tolist(),
        "routes": routes,
        "num_kept": sum(1 for tr in routes for r in tr if r["slot"] >= 0),
        # top1gating with use_rts=False picks the kept tokens of an over-full expert with
        # torch.topk over a 0/1 mask: which tokens win is torch's tie order, not token order.
        "kept_set_tie_dependent": bool(fn == "top1gating" and kwargs.get("drop_tokens")
                                       and any(int(n) > capacity for n in exp_counts.tolist())),
        "loss": f32(loss.item()),
        "l_aux_coeff": L_AUX_COEFF,
        "d_logits": [[f32(v) for v in row] for row in d_logits.tolist()],
    }


def main():
    has_topk = hasattr(sharded_moe, "topkgating")
    top2_params = inspect.signature(sharded_moe.top2gating).parameters
    topk_params = inspect.signature(sharded_moe.topkgating).parameters if has_topk else {}

    meta = {
        "generator": "test/Runtime/Inputs/moe-gating/make-goldens.py",
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "deepspeed": deepspeed.__version__,
        "source": "deepspeed/moe/sharded_moe.py",
        "loss": "loss = sum(combine_weights * R) + l_aux_coeff * l_aux; d_logits = dloss/dlogits",
    }

    out = {"top1": [], "top2": [], "topk": []}
    for cid, (T, E, cf, mc, bias) in enumerate(CASES):
        for drop in (True, False):
            kw = {"noisy_gate_policy": None, "drop_tokens": drop, "use_rts": False}
            out["top1"].append(run_case(cid, "top1gating", T, E, cf, mc, bias, 1, kw))

            kw = {"drop_tokens": drop}
            if "top2_2nd_expert_sampling" in top2_params:
                kw["top2_2nd_expert_sampling"] = False
            out["top2"].append(run_case(cid, "top2gating", T, E, cf, mc, bias, 2, kw))

            if has_topk:
                for k in (2, 3):
                    if k > E:
                        continue
                    policies = ["probs", "position"] if (drop and "drop_policy" in topk_params) else [None]
                    for pol in policies:
                        kw = {"drop_tokens": drop}
                        if pol is not None:
                            kw["drop_policy"] = pol
                        out["topk"].append(run_case(cid, "topkgating", T, E, cf, mc, bias, k, kw))

    for name, cases in out.items():
        if not cases:
            continue
        path = os.path.join(HERE, f"{name}.json")
        with open(path, "w") as fh:
            json.dump({"meta": meta, "cases": cases}, fh, separators=(",", ":"))
            fh.write("\n")
        print(f"wrote {path}: {len(cases)} cases, {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    sys.exit(main())
