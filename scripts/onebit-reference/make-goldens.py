#!/usr/bin/env python3
"""Write the 1-bit compressed all-reduce / 1-bit Adam / 0/1 Adam / 1-bit LAMB
goldens from the plain numpy references (onebit_reference.py,
zero_one_adam.py, onebit_lamb.py), after running their self-checks.

  python make-goldens.py [--out-dir DIR] [--no-deepspeed]

Writes DIR/compressed-allreduce.json, DIR/onebit-adam.json,
DIR/zero-one-adam.json and DIR/onebit-lamb.json (default DIR:
test/Runtime/Inputs/onebit at the repository root). Needs numpy only; if
torch and deepspeed import, it also runs ds_crosscheck.py (DeepSpeed's own
compressed_allreduce, OnebitAdam.step, ZeroOneAdam.step and OnebitLamb.step
on p CPU/gloo processes) and compares. See README.md.
"""

import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import onebit_reference as ref  # noqa: E402
import onebit_lamb  # noqa: E402
import zero_one_adam  # noqa: E402

F32 = np.float32
SEED = 20210202  # arXiv 2102.02888


class HpFloat(float):
    """A hyper-parameter written as the Python double it is (not float32)."""


def fl(v):
    return repr(float(F32(v)))


def vec(a):
    """A float32 vector as a JSON array text, each value exactly a float32."""
    return "[" + ", ".join(fl(v) for v in np.asarray(a, dtype=F32).ravel()) + "]"


def dump(obj, indent=0):
    """Deterministic JSON writer: numpy float32 arrays go through vec()."""
    pad = " " * indent
    if isinstance(obj, np.ndarray):
        return vec(obj)
    if isinstance(obj, dict):
        items = [f'{pad}  {json.dumps(k)}: {dump(v, indent + 2)}' for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, (list, tuple)):
        if all(isinstance(x, np.ndarray) for x in obj) and obj:
            return "[" + ", ".join(vec(x) for x in obj) + "]"
        if all(not isinstance(x, (dict, list, tuple, np.ndarray)) for x in obj):
            return "[" + ", ".join(dump(x) for x in obj) + "]"
        return "[\n" + ",\n".join(pad + "  " + dump(x, indent + 2) for x in obj) + "\n" + pad + "]"
    if isinstance(obj, HpFloat):
        return repr(float(obj))
    if isinstance(obj, (np.floating, float)):
        return fl(obj)
    if isinstance(obj, (bool, np.bool_)):
        return "true" if obj else "false"
    if isinstance(obj, (int, np.integer)):
        return str(int(obj))
    return json.dumps(obj)


# ------------------------------------------------------------- cases

def allreduce_cases():
    """(name, p, n, rounds, error_init, zeros) -- see README.md."""
    cases = []
    for p in (1, 2, 4):
        for n in (8, 37, 64):
            cases.append((f"p{p}-n{n}-zero-err", p, n, 3, "zero", False))
        cases.append((f"p{p}-n37-rand-err", p, 37, 3, "random", False))
    # larger sizes, trimmed to keep the file under ~3 MB
    cases.append(("p1-n1000-zero-err", 1, 1000, 3, "zero", False))
    cases.append(("p2-n1000-rand-err", 2, 1000, 3, "random", False))
    cases.append(("p4-n1000-rand-err", 4, 1000, 2, "random", False))
    cases.append(("p1-n37-exact-zeros", 1, 37, 3, "zero", True))
    cases.append(("p2-n37-exact-zeros", 2, 37, 3, "zero", True))
    cases.append(("p4-n37-exact-zeros", 4, 37, 3, "zero", True))
    cases.append(("p2-n4099-zero-err", 2, 4099, 1, "zero", False))
    cases.append(("p1-n4099-rand-err", 1, 4099, 1, "random", False))
    return cases


def make_allreduce(rng):
    out = []
    for name, p, n, rounds, err_init, zeros in allreduce_cases():
        npad = ref.padded_size(n, p)
        c = npad // p
        if err_init == "zero":
            we = [np.zeros(npad, F32) for _ in range(p)]
            se = [np.zeros(c, F32) for _ in range(p)]
        else:
            we = [(F32(0.1) * rng.standard_normal(npad)).astype(F32) for _ in range(p)]
            se = [(F32(0.05) * rng.standard_normal(c)).astype(F32) for _ in range(p)]
        recs = []
        for rnd in range(rounds):
            xs = []
            for r in range(p):
                x = np.zeros(npad, F32)
                x[:n] = (rng.standard_normal(n) * (1.0 + r)).astype(F32)
                if zeros:
                    # exact zeros in x (errors are zero in round 0, so x+err is
                    # exactly +0.0 there): pins sign(0) = +1.
                    x[: n : 3] = F32(0.0)
                    if r == 0 and rnd == 0:
                        x[:n] = F32(0.0)  # an all-zero rank: scale 0
                xs.append(x)
            res, we2, se2, info = ref.compressed_allreduce(xs, we, se)
            for r in range(1, p):
                assert np.array_equal(res[r], res[0])
            recs.append(dict(inputs=xs, worker_errors_in=we, server_errors_in=se,
                             worker_scales=[F32(s) for s in info["worker_scales"]],
                             server_scales=[F32(s) for s in info["server_scales"]],
                             result=res[0], worker_errors_out=we2, server_errors_out=se2))
            we, se = we2, se2
        out.append(dict(name=name, p=p, n=n, padded_n=npad, chunk=c, rounds=recs))
    return out


def adam_cases():
    cases = []
    for p in (1, 2, 4):
        for n in (37, 64):
            cases.append((f"p{p}-n{n}", p, n, 0.0))
    cases.append(("p2-n37-wd0.01", 2, 37, 0.01))
    cases.append(("p4-n64-wd0.01", 4, 64, 0.01))
    return cases


ADAM_HP = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, freeze_step=5, steps=20)


def adam_inputs(rng, p, n, steps):
    x0 = rng.standard_normal(n).astype(F32)
    # per-rank gradients: a shared component plus rank noise, fresh each step
    grads = []
    for k in range(steps):
        common = rng.standard_normal(n)
        grads.append([(0.5 * common + 0.5 * rng.standard_normal(n)).astype(F32) for _ in range(p)])
    return x0, grads


def make_adam(rng):
    out = []
    for name, p, n, wd in adam_cases():
        x0, grads = adam_inputs(rng, p, n, ADAM_HP["steps"])
        r = ref.onebit_adam_steps(x0, grads, ADAM_HP["lr"], ADAM_HP["betas"], ADAM_HP["eps"], wd,
                                  ADAM_HP["freeze_step"], ADAM_HP["steps"])
        out.append(dict(name=name, p=p, n=n, padded_n=r["padded_size"], weight_decay=HpFloat(wd),
                        weight_decay_f32=F32(wd),
                        params0=x0, grads=[list(g) for g in grads], stages=r["stages"],
                        params=r["params"], exp_avg=r["exp_avg"], exp_avg_sq=r["exp_avg_sq"],
                        worker_errors=r["worker_errors"], server_errors=r["server_errors"]))
    return out


# ------------------------------------------------------- 0/1 Adam goldens

ZOA_HP = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, var_freeze_step=12, var_update_scaler=2,
              local_step_scaler=2, local_step_clipper=4, steps=20)
# The schedule those settings give (real steps, 1-based; init step on), worked
# by hand from zoadam.py -- make-goldens.py asserts the reference agrees:
ZOA_SCHEDULE = {1: "var", 2: "var", 3: "var", 4: "onebit", 5: "var", 6: "onebit", 7: "var", 8: "onebit",
                9: "onebit", 10: "onebit", 11: "var", 12: "onebit", 13: "sync", 14: "sync", 15: "sync",
                16: "local", 17: "local", 18: "local", 19: "sync", 20: "local"}


def zoa_cases():
    # n = 37 needs padding for every p (40, 48, 64); 64 (p = 2) and 32 (p = 4)
    # do not; trimmed to keep the file near 400 KB (params are per rank)
    return [("p1-n37", 1, 37, 0.0), ("p2-n37", 2, 37, 0.0), ("p2-n64", 2, 64, 0.0),
            ("p4-n37-wd0.01", 4, 37, 0.01), ("p4-n32", 4, 32, 0.0)]


def q256(a):
    """Gradients rounded to multiples of 1/256: exact float32 values with
    short decimal forms (keeps the goldens small)."""
    return (np.round(np.asarray(a, np.float64) * 256.0) / 256.0).astype(F32)


def small_inputs(rng, p, sizes, steps):
    """params0 per tensor, grads[k][r][t]: 0.5*common + 0.5*rank noise,
    fresh each step, rounded to multiples of 1/256."""
    x0 = [rng.standard_normal(nt).astype(F32) for nt in sizes]
    grads = []
    for k in range(steps):
        common = [rng.standard_normal(nt) for nt in sizes]
        grads.append([[q256(0.5 * common[t] + 0.5 * rng.standard_normal(nt)) for t, nt in enumerate(sizes)]
                      for _ in range(p)])
    return x0, grads


def run_zoa(x0, grads, wd, hp=ZOA_HP, steps=None):
    return zero_one_adam.zero_one_adam_steps(
        x0, grads, hp["lr"], hp["betas"], hp["eps"], wd, hp["var_freeze_step"], hp["var_update_scaler"],
        hp["local_step_scaler"], hp["local_step_clipper"], steps or hp["steps"])


def make_zoa(rng):
    out = []
    for name, p, n, wd in zoa_cases():
        x0, g3 = small_inputs(rng, p, [n], ZOA_HP["steps"])
        grads = [[gr[0] for gr in gk] for gk in g3]
        r = run_zoa(x0[0], grads, wd)
        assert r["stages"] == [ZOA_SCHEDULE[k + 1] for k in range(ZOA_HP["steps"])], r["stages"]
        fin = r["final"]
        out.append(dict(name=name, p=p, n=n, padded_n=r["padded_size"], weight_decay=HpFloat(wd),
                        weight_decay_f32=F32(wd), params0=x0[0], grads=[list(g) for g in grads],
                        stages=r["stages"], allreduce=r["allreduce"],
                        var_interval=[iv[0] for iv in r["intervals"]],
                        local_step_interval=[iv[1] for iv in r["intervals"]],
                        lrs=[HpFloat(v) for v in r["lrs"]],
                        params=[list(h) for h in r["params"]],
                        exp_avg=list(r["exp_avg"]), exp_avg_sq=r["exp_avg_sq"],
                        momentum_accumulator=list(r["momentum_accumulator"]),
                        worker_errors=list(r["worker_errors"]), server_errors=list(r["server_errors"]),
                        final_state=dict(step=fin["step"], var_interval=fin["var_interval"],
                                         var_counter=fin["var_counter"],
                                         local_step_interval=fin["local_step_interval"],
                                         local_step_counter=fin["local_step_counter"],
                                         lrs=HpFloat(fin["lrs"]), freeze_key=fin["freeze_key"])))
    return out


# ---------------------------------------------------- 1-bit LAMB goldens

# DeepSpeed's defaults except freeze_step (100000), and factor_min (0.5) and
# factor_threshold (0.1), tightened so that both factor clamps act in 20 steps
LAMB_HP = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, freeze_step=6, steps=20, max_coeff=10.0,
               min_coeff=0.01, coeff_beta=0.9, factor_max=4.0, factor_min=0.95, factor_threshold=0.02)
# parameter tensors of a case: sizes, and a scale per tensor for params0 (x100
# drives the trust ratio above max_coeff, x0.002 below min_coeff)
# ("pad": 71 elements, padded to 72 / 80 / 96 for p = 1 / 2 / 4; "nopad": 32)
LAMB_SHAPES = {"pad": ((37, 13, 21), (1.0, 100.0, 0.002)), "nopad": ((24, 8), (1.0, 1.0))}


def lamb_cases():
    return [("p1-pad", 1, "pad", 0.0), ("p2-pad", 2, "pad", 0.0), ("p4-pad", 4, "pad", 0.0),
            ("p2-pad-wd0.01", 2, "pad", 0.01), ("p4-nopad", 4, "nopad", 0.0)]


def run_lamb(x0, grads, wd, hp=LAMB_HP, freeze_step=None, steps=None):
    return onebit_lamb.onebit_lamb_steps(
        x0, grads, hp["lr"], hp["betas"], hp["eps"], wd, freeze_step or hp["freeze_step"], steps or hp["steps"],
        max_coeff=hp["max_coeff"], min_coeff=hp["min_coeff"], coeff_beta=hp["coeff_beta"],
        factor_max=hp["factor_max"], factor_min=hp["factor_min"], factor_threshold=hp["factor_threshold"])


def make_lamb(rng):
    out = []
    for name, p, shape, wd in lamb_cases():
        sizes, scales = LAMB_SHAPES[shape]
        x0, grads = small_inputs(rng, p, sizes, LAMB_HP["steps"])
        x0 = [(x * F32(s)).astype(F32) for x, s in zip(x0, scales)]
        r = run_lamb(x0, grads, wd)
        fs = LAMB_HP["freeze_step"]
        assert r["stages"] == ["warmup"] * (fs - 1) + ["compressed"] * (LAMB_HP["steps"] - fs + 1), r["stages"]
        out.append(dict(name=name, p=p, sizes=list(sizes), total_n=r["total_size"], padded_n=r["padded_size"],
                        weight_decay=HpFloat(wd), weight_decay_f32=F32(wd),
                        params0=list(x0), grads=[[list(gt) for gt in gk] for gk in grads],
                        stages=r["stages"],
                        lamb_coeffs=[[HpFloat(c) for c in cs] for cs in r["lamb_coeffs"]],
                        factors=[[HpFloat(c) for c in cs] for cs in r["factors"]],
                        params=[list(h) for h in r["params"]],
                        exp_avg=list(r["exp_avg"]), exp_avg_flat=r["exp_avg_flat"],
                        exp_avg_sq=list(r["exp_avg_sq"]), exp_avg_sq_fresh=list(r["exp_avg_sq_fresh"]),
                        momentum_scales=[HpFloat(c) for c in r["momentum_scales"]],
                        scaling_coeff=[HpFloat(c) for c in r["scaling_coeff"]],
                        lamb_coeff_freeze=[HpFloat(c) for c in r["lamb_coeff_freeze"]],
                        last_factor=[HpFloat(c) for c in r["last_factor"]],
                        step=r["step"],
                        worker_errors=list(r["worker_errors"]), server_errors=list(r["server_errors"])))
    return out


# --------------------------------------------------------- self-checks

def self_checks(rng):
    results = []
    worst_ulp = 0
    # 1. p = 1, zero errors: result == scale * sign(x), scale = ||x||/sqrt(n)
    for n in (8, 40, 1000):
        x = rng.standard_normal(n).astype(F32)
        x[0] = F32(0.0)
        res, we, se, info = ref.compressed_allreduce([x], [np.zeros(n, F32)], [np.zeros(n, F32)])
        s = F32(np.linalg.norm(x.astype(np.float64)) / np.sqrt(n))
        # signs exact, sign(0) = +1, one magnitude for all elements
        assert np.array_equal(np.sign(res[0]), np.where(x >= 0, 1.0, -1.0)), "p=1 signs"
        assert res[0][0] > 0, "sign(0) = +1"
        assert np.all(np.abs(res[0]) == np.abs(res[0][0]))
        # the server stage re-compresses the already 1-bit vector s*sign(x):
        # its scale rms(s*sign(x)) equals s up to float32 rounding of the
        # norm and the division, and the server error is that difference.
        s2 = np.abs(res[0][0])
        ulp = abs(int(F32(s2).view(np.int32)) - int(F32(s).view(np.int32)))
        assert ulp <= 2, ulp
        sw = info["worker_scales"][0]
        assert np.all(np.abs(se[0]) == np.abs(F32(sw - s2)))
        worst_ulp = max(worst_ulp, ulp)
    results.append("p=1 compressed all-reduce with zero errors == rms(x)*sign(x) (signs exact, sign(0)=+1, "
                   f"magnitude within {worst_ulp} ulp of rms(x); server error = that rounding difference): OK")

    # 2. packing round trip and the padding rule
    for p, n, want in ((1, 37, 40), (2, 37, 48), (4, 37, 64), (3, 37, 72), (8, 100, 128), (4, 64, 64), (16, 1, 256)):
        assert ref.padded_size(n, p) == want, (p, n, ref.padded_size(n, p))
    x = rng.standard_normal(64).astype(F32)
    x[5] = F32(0.0)
    assert np.array_equal(ref.unpackbits_signs(ref.packbits_signs(x), 64), ref.sign_pm1(x))
    results.append("padded_size table and packbits/unpackbits round trip: OK")

    # 3. exact stage == plain numpy Adam without bias correction on the mean gradient
    for p in (1, 2, 4):
        for wd in (0.0, 0.01):
            n = 37
            x0, grads = adam_inputs(rng, p, n, 6)
            fs = 7  # never reaches the compressed stage in 6 steps
            r = ref.onebit_adam_steps(x0, grads, 1e-3, (0.9, 0.999), 1e-8, wd, fs, 6)
            x = x0.astype(np.float64)
            m = np.zeros(n)
            v = np.zeros(n)
            for k in range(6):
                g = np.mean(np.asarray(grads[k], dtype=np.float64), axis=0)
                m = 0.9 * m + 0.1 * g
                v = 0.999 * v + 0.001 * g * g
                u = m / (np.sqrt(v) + 1e-8) + wd * x
                x = x - 1e-3 * u
                rel = np.max(np.abs(r["params"][k] - x) / (np.abs(x) + 1e-6))
                assert rel < 1e-5, (p, wd, k, rel)
            assert r["stages"] == ["exact"] * 6
            # and the same steps with freeze_step 5 agree before the switch
            r5 = ref.onebit_adam_steps(x0, grads, 1e-3, (0.9, 0.999), 1e-8, wd, 5, 6)
            assert r5["stages"] == ["exact"] * 4 + ["compressed"] * 2, r5["stages"]
            for k in range(4):
                assert np.array_equal(r5["params"][k], r["params"][k])
    results.append("exact stage == float64 numpy Adam (no bias correction, mean gradient) to rel 1e-5, "
                   "p in {1,2,4}, wd in {0, 0.01}; freeze_step 5 -> stages exact x4 then compressed: OK")

    # 4. p > 1: results identical on all ranks, error feedback identity
    #    worker: x + e_in == scale*sign + e_out exactly-ish (float32 rounding)
    xs = [rng.standard_normal(64).astype(F32) for _ in range(4)]
    we = [np.zeros(64, F32) for _ in range(4)]
    se = [np.zeros(16, F32) for _ in range(4)]
    res, we2, se2, info = ref.compressed_allreduce(xs, we, se)
    mean = np.mean(np.asarray(xs, dtype=np.float64), axis=0)
    # 1-bit compression of a mean: correlation with the true mean is strongly positive
    assert np.corrcoef(res[0], mean)[0, 1] > 0.5
    results.append("p=4 result correlates with the true mean (corr > 0.5): OK")
    return results


def self_checks_zoa_lamb(rng):
    results = []
    lr, (b1, b2), eps = 1e-3, (0.9, 0.999), 1e-8
    # 5. 0/1 Adam, variance updated every step and never frozen
    #    (var_update_scaler huge, var_freeze_step > steps): every step is a
    #    "var" step with the mean gradient, i.e. 1-bit Adam's exact stage, bit
    #    for bit.
    hp = dict(ZOA_HP, var_update_scaler=10**9, var_freeze_step=100)
    for p in (1, 2, 4):
        for wd in (0.0, 0.01):
            x0, g3 = small_inputs(rng, p, [37], 8)
            grads = [[gr[0] for gr in gk] for gk in g3]
            z = run_zoa(x0[0], grads, wd, hp=hp, steps=8)
            a = ref.onebit_adam_steps(x0[0], grads, lr, (b1, b2), eps, wd, 100, 8)
            assert z["stages"] == ["var"] * 8 and all(z["allreduce"])
            for k in range(8):
                for r in range(p):
                    assert np.array_equal(z["params"][k][r], a["params"][k]), (p, wd, k)
    results.append("0/1 Adam with var_update_scaler = inf, var_freeze_step > steps == 1-bit Adam's exact "
                   "stage bit for bit (p in {1,2,4}, wd in {0, 0.01}): OK")

    # 6. 0/1 Adam, p = 1, the goldens' schedule: no compression, so it must
    #    equal a float64 Adam (no bias correction) in which v and m update on
    #    "var" steps, m does not update on "onebit" steps (size-1 guard),
    #    v is frozen in stage 2, and a sync replaces m by the mean of the
    #    momenta (+ wd * x * (sqrt(v)+eps), the weight decay the accumulator
    #    carried) since the previous sync and leaves x where the local steps
    #    put it.
    for wd in (0.0, 0.01):
        x0, g3 = small_inputs(rng, 1, [64], 20)
        grads = [[gr[0] for gr in gk] for gk in g3]
        z = run_zoa(x0[0], grads, wd)
        assert z["stages"] == [ZOA_SCHEDULE[k + 1] for k in range(20)]
        x = x0[0].astype(np.float64)
        m = np.zeros(64)
        v = np.zeros(64)
        since = []
        for k in range(20):
            st = ZOA_SCHEDULE[k + 1]
            g = np.asarray(grads[k][0], np.float64)
            if st == "var":
                v = b2 * v + (1 - b2) * g * g
                m = b1 * m + (1 - b1) * g
            elif st in ("local", "sync"):
                m = b1 * m + (1 - b1) * g
                # what the accumulator holds, times sqrt(v)+eps, per lr:
                # the weight decay term leaks into the synced momentum
                since.append(m + wd * x * (np.sqrt(v) + eps))
            x = x - lr * (m / (np.sqrt(v) + eps) + wd * x)
            if st == "sync":
                m = np.mean(since, axis=0)
                since = []
            rel = np.max(np.abs(z["params"][k][0] - x)) / np.max(np.abs(x))
            assert rel < 1e-5, (wd, k, rel)
        assert np.max(np.abs(z["exp_avg"][0] - m)) / np.max(np.abs(m)) < 1e-5
    results.append("0/1 Adam p=1 == float64 model (var steps update m,v; onebit steps leave m; stage 2 frozen v, "
                   "sync replaces m by the interval's mean of m + wd*x*(sqrt(v)+eps)) to rel 1e-5, wd in {0, 0.01}: OK")

    # 7. 0/1 Adam, p in {2,4}: stage 1 keeps all ranks bit-identical; local
    #    steps make them differ; a sync brings them back together up to
    #    float32 rounding of x + t1 + ... - (t1 + ...).
    for p in (2, 4):
        x0, g3 = small_inputs(rng, p, [37], 20)
        grads = [[gr[0] for gr in gk] for gk in g3]
        z = run_zoa(x0[0], grads, 0.0)
        for k in range(20):
            st = ZOA_SCHEDULE[k + 1]
            xs = z["params"][k]
            spread = max(np.max(np.abs(xs[r] - xs[0])) for r in range(p)) / np.max(np.abs(xs[0]))
            if st in ("var", "onebit"):
                assert spread == 0.0, (p, k)
            elif st == "sync":
                assert spread < 1e-6, (p, k, spread)
            else:
                assert spread > 1e-6, (p, k, spread)
    results.append("0/1 Adam p in {2,4}: ranks bit-identical in stage 1, apart after local steps, within "
                   "1e-6 (rounding) after each sync: OK")

    # 8. 1-bit LAMB warm-up == float64 LAMB (no bias correction, trust ratio
    #    ||x||/||u|| clamped to [min_coeff, max_coeff]) on the mean gradient,
    #    and lamb_coeff_freeze == the 0.9-EMA of the coefficients (from 0).
    sizes, scales = LAMB_SHAPES["pad"]
    for p in (1, 2, 4):
        for wd in (0.0, 0.01):
            x0, grads = small_inputs(rng, p, sizes, 8)
            x0 = [(x * F32(s)).astype(F32) for x, s in zip(x0, scales)]
            r = run_lamb(x0, grads, wd, freeze_step=100, steps=8)
            assert r["stages"] == ["warmup"] * 8
            for t in range(len(sizes)):
                x = x0[t].astype(np.float64)
                m = np.zeros(sizes[t])
                v = np.zeros(sizes[t])
                ema = 0.0
                for k in range(8):
                    g = np.mean([np.asarray(grads[k][q][t], np.float64) for q in range(p)], axis=0)
                    m = b1 * m + (1 - b1) * g
                    v = b2 * v + (1 - b2) * g * g
                    u = m / (np.sqrt(v) + eps) + wd * x
                    c = min(max(np.linalg.norm(x) / np.linalg.norm(u), 0.01), 10.0)
                    assert abs(r["lamb_coeffs"][k][t] - c) <= 1e-5 * c, (p, wd, t, k)
                    if r["lamb_coeffs"][k][t] != 1.0:  # (1 - 0.9 in double, as the code)
                        ema = 0.9 * ema + (1 - 0.9) * r["lamb_coeffs"][k][t]
                    x = x - lr * c * u
                    rel = np.max(np.abs(r["params"][k][t] - x)) / np.max(np.abs(x))
                    assert rel < 1e-5, (p, wd, t, k, rel)
                assert r["lamb_coeff_freeze"][t] == ema
            cs = np.asarray(r["lamb_coeffs"])
            assert np.all(cs[:, 1] == 10.0) and np.all(cs[:, 2] == 0.01), cs  # both clamps exercised
    results.append("1-bit LAMB warm-up == float64 LAMB (clamped trust ratio, no bias correction) to rel 1e-5, "
                   "lamb_coeff_freeze == EMA(0.9) of the coefficients, both clamps hit, p in {1,2,4}, "
                   "wd in {0, 0.01}: OK")

    # 9. 1-bit LAMB p = 1 with the goldens' freeze_step: the compression stage
    #    compresses nothing, so the momentum is the float64 EMA of the
    #    gradients (the scaling coefficient multiplies and divides it back);
    #    exp_avg_sq stays as after real step freeze_step-1 (bit-equal to a
    #    warm-up-only run); factors obey the clamps.
    x0, grads = small_inputs(rng, 1, sizes, 20)
    x0 = [(x * F32(s)).astype(F32) for x, s in zip(x0, scales)]
    r = run_lamb(x0, grads, 0.0)
    w = run_lamb(x0, grads, 0.0, freeze_step=100, steps=LAMB_HP["freeze_step"] - 1)
    fs = LAMB_HP["freeze_step"]
    assert r["stages"] == ["warmup"] * (fs - 1) + ["compressed"] * (21 - fs)
    for t in range(len(sizes)):
        assert np.array_equal(r["exp_avg_sq"][t], w["exp_avg_sq"][t])
        assert np.array_equal(r["exp_avg_sq_fresh"][t][:0], w["exp_avg_sq"][t][:0])
        m = np.zeros(sizes[t])
        for k in range(20):
            m = b1 * m + (1 - b1) * np.asarray(grads[k][0][t], np.float64)
        assert np.max(np.abs(r["exp_avg"][t] - m)) / np.max(np.abs(m)) < 1e-5
        last = 1.0
        for k in range(fs - 1, 20):
            f = r["factors"][k][t]
            th = LAMB_HP["factor_threshold"]
            assert LAMB_HP["factor_min"] <= f <= LAMB_HP["factor_max"], (t, k, f)
            assert last * (1 - th) <= f <= last * (1 + th), (t, k, f, last)
            assert r["lamb_coeffs"][k][t] == r["lamb_coeff_freeze"][t] * f
            last = f
    results.append("1-bit LAMB p=1: momentum == float64 EMA of the gradients (rel 1e-5), exp_avg_sq frozen "
                   f"after real step {fs - 1}, factors within [factor_min, factor_max] and +-factor_threshold "
                   "per step, "
                   "coefficient == lamb_coeff_freeze * factor: OK")
    return results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out-dir", default=os.path.join(HERE, "..", "..", "test", "Runtime", "Inputs", "onebit"))
    ap.add_argument("--no-deepspeed", action="store_true")
    args = ap.parse_args()

    checks = self_checks(np.random.default_rng(SEED + 1))
    checks += self_checks_zoa_lamb(np.random.default_rng(SEED + 5))
    for c in checks:
        print("self-check:", c)

    ar = make_allreduce(np.random.default_rng(SEED))
    ad = make_adam(np.random.default_rng(SEED + 2))
    zo = make_zoa(np.random.default_rng(SEED + 3))
    lb = make_lamb(np.random.default_rng(SEED + 4))

    os.makedirs(args.out_dir, exist_ok=True)
    ar_doc = dict(format="dsc-onebit-compressed-allreduce-v1",
                  generator="scripts/onebit-reference/make-goldens.py",
                  seed=SEED, cases=ar)
    ad_doc = dict(format="dsc-onebit-adam-v1",
                  generator="scripts/onebit-reference/make-goldens.py",
                  seed=SEED + 2,
                  # the hyper-parameters as given (Python doubles) ...
                  lr=HpFloat(ADAM_HP["lr"]), beta1=HpFloat(ADAM_HP["betas"][0]),
                  beta2=HpFloat(ADAM_HP["betas"][1]), eps=HpFloat(ADAM_HP["eps"]),
                  freeze_step=ADAM_HP["freeze_step"], steps=ADAM_HP["steps"], init_step=True,
                  # ... and the float32 constants torch multiplies with (1 - beta
                  # is computed in double, then rounded: not 1 - f32(beta))
                  f32_constants=dict(beta1=F32(ADAM_HP["betas"][0]), one_minus_beta1=F32(1 - ADAM_HP["betas"][0]),
                                     beta2=F32(ADAM_HP["betas"][1]), one_minus_beta2=F32(1 - ADAM_HP["betas"][1]),
                                     eps=F32(ADAM_HP["eps"]), neg_lr=F32(-ADAM_HP["lr"])),
                  cases=ad)
    zo_doc = dict(format="dsc-zero-one-adam-v1",
                  generator="scripts/onebit-reference/make-goldens.py",
                  seed=SEED + 3,
                  lr=HpFloat(ZOA_HP["lr"]), beta1=HpFloat(ZOA_HP["betas"][0]),
                  beta2=HpFloat(ZOA_HP["betas"][1]), eps=HpFloat(ZOA_HP["eps"]),
                  var_freeze_step=ZOA_HP["var_freeze_step"], var_update_scaler=ZOA_HP["var_update_scaler"],
                  local_step_scaler=ZOA_HP["local_step_scaler"], local_step_clipper=ZOA_HP["local_step_clipper"],
                  steps=ZOA_HP["steps"], init_step=True,
                  f32_constants=dict(beta1=F32(ZOA_HP["betas"][0]), one_minus_beta1=F32(1 - ZOA_HP["betas"][0]),
                                     beta2=F32(ZOA_HP["betas"][1]), one_minus_beta2=F32(1 - ZOA_HP["betas"][1]),
                                     eps=F32(ZOA_HP["eps"]), neg_lr=F32(-ZOA_HP["lr"])),
                  cases=zo)
    lb_doc = dict(format="dsc-onebit-lamb-v1",
                  generator="scripts/onebit-reference/make-goldens.py",
                  seed=SEED + 4,
                  lr=HpFloat(LAMB_HP["lr"]), beta1=HpFloat(LAMB_HP["betas"][0]),
                  beta2=HpFloat(LAMB_HP["betas"][1]), eps=HpFloat(LAMB_HP["eps"]),
                  freeze_step=LAMB_HP["freeze_step"], steps=LAMB_HP["steps"], init_step=True,
                  max_coeff=HpFloat(LAMB_HP["max_coeff"]), min_coeff=HpFloat(LAMB_HP["min_coeff"]),
                  coeff_beta=HpFloat(LAMB_HP["coeff_beta"]), factor_max=HpFloat(LAMB_HP["factor_max"]),
                  factor_min=HpFloat(LAMB_HP["factor_min"]), factor_threshold=HpFloat(LAMB_HP["factor_threshold"]),
                  f32_constants=dict(beta1=F32(LAMB_HP["betas"][0]), one_minus_beta1=F32(1 - LAMB_HP["betas"][0]),
                                     beta2=F32(LAMB_HP["betas"][1]), one_minus_beta2=F32(1 - LAMB_HP["betas"][1]),
                                     eps=F32(LAMB_HP["eps"])),
                  cases=lb)
    for fname, doc in (("compressed-allreduce.json", ar_doc), ("onebit-adam.json", ad_doc),
                       ("zero-one-adam.json", zo_doc), ("onebit-lamb.json", lb_doc)):
        path = os.path.join(args.out_dir, fname)
        text = dump(doc) + "\n"
        json.loads(text)  # must parse
        with open(path, "w") as f:
            f.write(text)
        print(f"wrote {os.path.normpath(path)} ({len(text)} bytes)")

    if not args.no_deepspeed:
        try:
            import torch  # noqa: F401
            import deepspeed  # noqa: F401
        except Exception as e:  # pragma: no cover
            print("deepspeed cross-check skipped:", e)
            return
        import ds_crosscheck
        # the same cases, recomputed with torch's own float32 CPU 2-norm
        import torch
        # and torch's float32 CPU sqrt (not correctly rounded: 1 ulp off for
        # some inputs); all else unchanged
        ref.norm2 = lambda v: torch.linalg.norm(torch.from_numpy(np.ascontiguousarray(v, dtype=F32))).numpy()
        ref.sqrt32 = lambda v: torch.from_numpy(np.ascontiguousarray(v, dtype=F32)).sqrt().numpy()
        # 1-bit LAMB's trust-ratio norms are x.pow(2).sum().sqrt()
        onebit_lamb.norm_sumsq = lambda v: torch.from_numpy(np.ascontiguousarray(v, dtype=F32)).pow(2).sum().sqrt().numpy()
        ar_t = make_allreduce(np.random.default_rng(SEED))
        ad_t = make_adam(np.random.default_rng(SEED + 2))
        zo_t = make_zoa(np.random.default_rng(SEED + 3))
        lb_t = make_lamb(np.random.default_rng(SEED + 4))
        ref.norm2 = ref.norm2_f64
        ref.sqrt32 = ref.sqrt32_ieee
        onebit_lamb.norm_sumsq = ref.norm2_f64
        ok = ds_crosscheck.run(ar, ad, ADAM_HP, ar_t, ad_t, zoa=(zo, ZOA_HP, zo_t), lamb=(lb, LAMB_HP, lb_t))
        if not ok:
            sys.exit(1)


if __name__ == "__main__":
    main()
