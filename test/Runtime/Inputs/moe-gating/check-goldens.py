#!/usr/bin/env python3
"""Re-derives top1.json / top2.json / topk.json from the formulas in README.md.

An independent re-implementation (plain torch, no DeepSpeed import) of the
gating rules as README.md states them.  It checks every golden case: capacity,
exp_counts, the per-route (expert, slot, weight), l_aux, and d_logits (by
autograd through this re-implementation).  A pass means README.md describes
what DeepSpeed did.  For top1 cases flagged kept_set_tie_dependent, which
tokens an over-full expert keeps is taken from the golden (DeepSpeed decides it
by torch.topk tie order); everything else is recomputed.

Run:  python3 test/Runtime/Inputs/moe-gating/check-goldens.py   (needs torch)
"""

import json
import math
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
EPS = torch.finfo(torch.float32).eps


def rank_in_token_order(choice, kept, E):
    """slot of each kept (t, j): number of earlier kept entries with the same expert,
    scanning tokens in order and, within a token, choices in order."""
    T, k = choice.shape
    seen = [0] * E
    slot = [[-1] * k for _ in range(T)]
    for t in range(T):
        for j in range(k):
            if kept[t][j]:
                e = int(choice[t, j])
                slot[t][j] = seen[e]
                seen[e] += 1
    return slot


def derive(case):
    fn, T, E, k, a = case["function"], case["T"], case["E"], case["k"], case["args"]
    logits = torch.tensor(case["logits"], dtype=torch.float32, requires_grad=True)
    gates = torch.softmax(logits, dim=1)
    g = gates.detach()
    cf, min_cap, drop = a["capacity_factor"], a["min_capacity"], a["drop_tokens"]

    if fn == "top1gating":
        choice = torch.argmax(g, dim=1).unsqueeze(1)
    elif fn == "top2gating":
        e1 = torch.argmax(g, dim=1)
        masked = logits.detach().clone()
        masked[torch.arange(T), e1] = float("-inf")
        choice = torch.stack([e1, torch.argmax(masked, dim=1)], dim=1)
    else:
        choice = torch.topk(g, k=k, dim=1)[1]

    counts = [0] * E
    for t in range(T):
        for j in range(k):
            counts[int(choice[t, j])] += 1
    first_counts = [0] * E
    for t in range(T):
        first_counts[int(choice[t, 0])] += 1

    # l_aux
    me = gates.mean(dim=0)
    if fn == "topkgating":
        ce = torch.tensor(counts, dtype=torch.float32) / T
        l_aux = (me * ce).mean() * E * E / k
    else:
        ce = torch.tensor(first_counts, dtype=torch.float32) / T
        l_aux = (me * ce).sum() * E

    # capacity
    mult = {"top1gating": 1, "top2gating": 2, "topkgating": k}[fn]
    if drop:
        capacity = max(math.ceil(T / E * (cf * mult)), min_cap)
    else:
        capacity = max(counts)
        if fn == "top1gating":
            capacity = min(capacity, T)

    # kept choices and slots
    kept = [[True] * k for _ in range(T)]
    if fn == "top1gating":
        slot = rank_in_token_order(choice, kept, E)
        if drop:
            if case["kept_set_tie_dependent"]:
                kept = [[r["slot"] >= 0 for r in tr] for tr in case["routes"]]
            else:
                kept = [[slot[t][0] < capacity] for t in range(T)]
            slot = rank_in_token_order(choice, kept, E)
    elif fn == "top2gating":
        seen1, seen2 = [0] * E, [0] * E
        slot = [[0, 0] for _ in range(T)]
        for t in range(T):
            e1, e2 = int(choice[t, 0]), int(choice[t, 1])
            slot[t][0] = seen1[e1]
            seen1[e1] += 1
            slot[t][1] = first_counts[e2] + seen2[e2]   # offset by ALL first choices of e2
            seen2[e2] += 1
        if drop:
            kept = [[slot[t][j] < capacity for j in range(2)] for t in range(T)]
        slot = [[slot[t][j] if kept[t][j] else -1 for j in range(2)] for t in range(T)]
    else:
        pos = rank_in_token_order(choice, kept, E)      # joint cumsum over all k choices
        if drop and a.get("drop_policy", "probs") == "probs":
            sel = min(capacity, T)
            for e in range(E):
                users = [(float(g[t, e]), t, j) for t in range(T) for j in range(k) if int(choice[t, j]) == e]
                users.sort(key=lambda x: -x[0])
                for _, t, j in users[sel:]:
                    kept[t][j] = False
            pos = rank_in_token_order(choice, kept, E)
        elif drop:
            kept = [[pos[t][j] < capacity for j in range(k)] for t in range(T)]
        slot = [[pos[t][j] if kept[t][j] else -1 for j in range(k)] for t in range(T)]

    if fn == "top1gating":
        slot = [[slot[t][0] if kept[t][0] else -1] for t in range(T)]

    # weights
    sel_g = torch.stack([gates[torch.arange(T), choice[:, j]] for j in range(k)], dim=1)
    keptm = torch.tensor(kept, dtype=torch.float32)
    sel_g = sel_g * keptm
    if fn == "top1gating":
        w = sel_g
    else:
        w = sel_g / torch.clamp(sel_g.sum(dim=1, keepdim=True), min=EPS)

    # loss and gradient
    r = torch.tensor([[rt.get("r", 0.0) for rt in tr] for tr in case["routes"]], dtype=torch.float32)
    loss = (w * r).sum() + case["l_aux_coeff"] * l_aux
    loss.backward()
    return choice, counts, capacity, slot, w.detach(), l_aux.item(), logits.grad


def close(a, b, tol):
    return abs(a - b) <= tol * max(1.0, abs(b))


def main():
    bad = 0
    n = 0
    for name in ("top1", "top2", "topk"):
        with open(os.path.join(HERE, f"{name}.json")) as fh:
            data = json.load(fh)
        for case in data["cases"]:
            n += 1
            choice, counts, capacity, slot, w, l_aux, dl = derive(case)
            errs = []
            if choice.tolist() != case["raw_experts"]:
                errs.append("raw_experts")
            if counts != case["exp_counts"]:
                errs.append(f"exp_counts {counts} != {case['exp_counts']}")
            if capacity != case["capacity"]:
                errs.append(f"capacity {capacity} != {case['capacity']}")
            for t, tr in enumerate(case["routes"]):
                for j, rt in enumerate(tr):
                    if rt["expert"] != int(choice[t, j]) or rt["slot"] != slot[t][j]:
                        errs.append(f"t{t} j{j}: golden {rt} vs slot {slot[t][j]}")
                    if not close(float(w[t, j]), rt["weight"], 1e-6):
                        errs.append(f"t{t} j{j}: weight {float(w[t, j])} != {rt['weight']}")
            if not close(l_aux, case["l_aux"], 1e-6):
                errs.append(f"l_aux {l_aux} != {case['l_aux']}")
            gd = torch.tensor(case["d_logits"])
            if not torch.allclose(dl, gd, rtol=1e-5, atol=1e-6):
                errs.append(f"d_logits max diff {float((dl - gd).abs().max())}")
            if errs:
                bad += 1
                print(f"FAIL {case['name']}: " + "; ".join(errs[:5]))
    print(f"{n - bad} passed, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
