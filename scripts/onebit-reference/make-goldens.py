#!/usr/bin/env python3
"""Write the 1-bit compressed all-reduce / 1-bit Adam goldens from the plain
numpy reference in onebit_reference.py, after running its self-checks.

  python make-goldens.py [--out-dir DIR] [--no-deepspeed]

Writes DIR/compressed-allreduce.json and DIR/onebit-adam.json (default DIR:
test/Runtime/Inputs/onebit at the repository root). Needs numpy only; if
torch and deepspeed import, it also runs ds_crosscheck.py (DeepSpeed's own
compressed_allreduce and OnebitAdam.step on p CPU/gloo processes) and
compares. See README.md.
"""

import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import onebit_reference as ref  # noqa: E402

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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out-dir", default=os.path.join(HERE, "..", "..", "test", "Runtime", "Inputs", "onebit"))
    ap.add_argument("--no-deepspeed", action="store_true")
    args = ap.parse_args()

    checks = self_checks(np.random.default_rng(SEED + 1))
    for c in checks:
        print("self-check:", c)

    ar = make_allreduce(np.random.default_rng(SEED))
    ad = make_adam(np.random.default_rng(SEED + 2))

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
    for fname, doc in (("compressed-allreduce.json", ar_doc), ("onebit-adam.json", ad_doc)):
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
        ar_t = make_allreduce(np.random.default_rng(SEED))
        ad_t = make_adam(np.random.default_rng(SEED + 2))
        ref.norm2 = ref.norm2_f64
        ref.sqrt32 = ref.sqrt32_ieee
        ok = ds_crosscheck.run(ar, ad, ADAM_HP, ar_t, ad_t)
        if not ok:
            sys.exit(1)


if __name__ == "__main__":
    main()
