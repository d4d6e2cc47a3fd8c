#!/usr/bin/env python3
"""Cross-check of onebit_reference.py against DeepSpeed's own code, on CPU
(called by make-goldens.py when torch and deepspeed import).

Runs, in p processes joined by a torch.distributed gloo group, DeepSpeed's
unmodified (read from git at DS_COMMIT, since the installed wheel lacks them)
  deepspeed/runtime/comm/compressed.py  CompressedBackend.compressed_allreduce
  deepspeed/runtime/fp16/onebit/adam.py OnebitAdam.step
  deepspeed/runtime/fp16/onebit/zoadam.py ZeroOneAdam.step
  deepspeed/runtime/fp16/onebit/lamb.py OnebitLamb.step
with only what needs a GPU replaced:
  * CompressedBackend.__init__ (it JIT-builds the XPU packbits op) and its
    pack/unpack (XPU kernels) -> numpy packbits/unpackbits with the NCCL
    backend's bit rule, bit = x.sign().add_(1).bool() (x >= 0), big-endian
    bits (cupy.packbits' default), as NcclBackend does with cupy;
  * compressed.py's all_gather of the 0-dim scales is given a (1,)-shaped
    view (gloo refuses the shape mismatch NCCL accepts; values untouched);
  * the engine: a stub with mpu=None, local_rank=rank, and the engine's
    gradient all-reduce (whenever enable_backward_allreduce is on: 1-bit
    Adam's and 1-bit LAMB's warm-up, 0/1 Adam's var steps) replaced by the
    ranks' gradients summed in rank order then * (1/p).
It also makes the one optimizer.step() with zero gradients that
FP16_Optimizer.initialize_optimizer_states() makes at construction.

DeepSpeed's outputs are compared (a) with the goldens, giving the largest
difference relative to the vector's magnitude and the number of result sign
disagreements, and (b) with the reference re-run with torch's float32 CPU
2-norm and sqrt swapped in, which must be bit-identical.
"""

import os
import pickle
import socket
import sys
import tempfile
import warnings

import numpy as np

F32 = np.float32

# The DeepSpeed sources cross-checked: the commit README.md names. The
# deepspeed 0.19.8 wheel in the venv lacks runtime/comm/{compressed,utils}.py
# and runtime/fp16/onebit/, so they are loaded from a git checkout of
# DeepSpeed at this commit (ONEBIT_DS_GIT_DIR) on top of the installed package.
DS_COMMIT = "edaa7221267243c7be7fb49c5d5f5c4fb97b4641"
DS_GIT_DIR = os.environ.get("ONEBIT_DS_GIT_DIR", "/work/.mirror/deepspeedai+DeepSpeed/repo")
DS_FILES = {
    "deepspeed.runtime.comm.utils": "deepspeed/runtime/comm/utils.py",
    "deepspeed.runtime.comm.compressed": "deepspeed/runtime/comm/compressed.py",
    "deepspeed.runtime.fp16.onebit.adam": "deepspeed/runtime/fp16/onebit/adam.py",
    "deepspeed.runtime.fp16.onebit.zoadam": "deepspeed/runtime/fp16/onebit/zoadam.py",
    "deepspeed.runtime.fp16.onebit.lamb": "deepspeed/runtime/fp16/onebit/lamb.py",
}


def fetch_ds_sources(dest):
    import subprocess
    paths = {}
    for mod, path in DS_FILES.items():
        src = subprocess.run(["git", f"--git-dir={DS_GIT_DIR}", "show", f"{DS_COMMIT}:{path}"],
                             check=True, capture_output=True).stdout
        fn = os.path.join(dest, mod + ".py")
        with open(fn, "wb") as f:
            f.write(src)
        paths[mod] = fn
    return paths


def _load_ds_sources(paths):
    import importlib.util
    import deepspeed.ops.op_builder as ob
    if not hasattr(ob, "PackbitsBuilder"):
        ob.PackbitsBuilder = None  # compressed.py imports it; only __init__ uses it (replaced)
    import types
    if "deepspeed.runtime.fp16.onebit" not in sys.modules:
        # an empty package (its __init__ also imports lamb/zoadam, not needed)
        pkg = types.ModuleType("deepspeed.runtime.fp16.onebit")
        pkg.__path__ = []
        sys.modules[pkg.__name__] = pkg
        sys.modules["deepspeed.runtime.fp16"].onebit = pkg
    for mod in DS_FILES:  # order: utils, compressed, onebit.adam, onebit.zoadam, onebit.lamb
        if mod in sys.modules:
            continue
        spec = importlib.util.spec_from_file_location(mod, paths[mod])
        m = importlib.util.module_from_spec(spec)
        sys.modules[mod] = m
        spec.loader.exec_module(m)
        parent, _, leaf = mod.rpartition(".")
        setattr(sys.modules[parent], leaf, m)


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _worker(rank, p, port, jobs, outdir, ds_paths):
    warnings.filterwarnings("ignore")
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(p), LOCAL_RANK=str(rank), DS_ACCELERATOR="cpu")
    import logging
    import torch
    import deepspeed
    import deepspeed.comm as dist
    import deepspeed.runtime.comm
    import deepspeed.runtime.fp16
    _load_ds_sources(ds_paths)
    import deepspeed.runtime.comm.compressed as cmod
    from deepspeed.utils import logger
    logger.setLevel(logging.ERROR)
    deepspeed.init_distributed(dist_backend="gloo", auto_mpi_discovery=False, verbose=False,
                               rank=rank, world_size=p)

    class CpuCompressedBackend(cmod.CompressedBackend):

        def __init__(self, mpu=None):
            self.world_group = dist.new_group(ranks=range(dist.get_world_size()))
            self.size = dist.get_world_size(group=self.world_group)
            self.rank = dist.get_rank(group=self.world_group)

        def pack(self, buffer, size):
            bits = buffer.float().sign().add_(1).bool().numpy()
            return torch.from_numpy(np.packbits(bits)).reshape(size, -1)

        def unpack(self, buffer, size, dtype):
            bits = np.unpackbits(buffer.numpy())
            return torch.from_numpy(bits).float().add_(-0.5).mul_(2.0).reshape(size, -1).to(dtype)

    class GlooDist:
        """deepspeed.comm as compressed.py sees it, except that all_gather
        views a 0-dim input as shape (1,): NCCL accepts the 0-dim worker and
        server scales gathered into shape-(1,) buffers, gloo insists on equal
        shapes. Values are untouched."""

        def __getattr__(self, name):
            return getattr(dist, name)

        def all_gather(self, tensor_list, tensor, group=None, async_op=False):
            if tensor.dim() == 0 and tensor_list and tensor_list[0].dim() == 1:
                tensor = tensor.reshape(1)
            return dist.all_gather(tensor_list, tensor, group=group, async_op=async_op)

    cmod.dist = GlooDist()
    cmod.CompressedBackend = CpuCompressedBackend  # adam.py imports it from the module at call time
    from deepspeed.runtime.fp16.onebit.adam import OnebitAdam

    out = dict(allreduce={}, adam={})
    backend = CpuCompressedBackend()
    for case in jobs["allreduce"]:
        n, npad, c = case["n"], case["padded_n"], case["chunk"]
        rec0 = case["rounds"][0]
        we = torch.from_numpy(rec0["worker_errors_in"][rank].copy())
        se = torch.from_numpy(rec0["server_errors_in"][rank].copy())
        got = []
        for rec in case["rounds"]:
            # feed DeepSpeed the *unpadded* buffer: it pads with zeros itself
            buf = torch.from_numpy(rec["inputs"][rank][:n].copy())
            res = backend.compressed_allreduce(buf, we, se, rank)
            got.append(dict(result=res.numpy().copy(), we=we.numpy().copy(), se=se.numpy().copy()))
        out["allreduce"][case["name"]] = got

    for case in jobs["adam"]:
        hp = jobs["hp"]
        prm = torch.nn.Parameter(torch.from_numpy(case["params0"].copy()))
        stub = type("Engine", (), {})()
        stub.mpu = None
        stub.local_rank = rank
        stub.enable_backward_allreduce = True
        opt = OnebitAdam([prm], deepspeed=stub, lr=hp["lr"], freeze_step=hp["freeze_step"],
                         betas=hp["betas"], eps=hp["eps"], weight_decay=float(case["weight_decay"]),
                         comm_backend_name="compressed")
        prm.grad = torch.zeros_like(prm)  # FP16_Optimizer.initialize_optimizer_states
        opt.step()
        prm.grad = None
        hist = []
        for k in range(hp["steps"]):
            gs = [torch.from_numpy(g.copy()) for g in case["grads"][k]]
            if not opt.adam_freeze_key:
                g = gs[0].clone()
                for r in range(1, p):
                    g = g + gs[r]
                g.mul_(1.0 / p)
            else:
                g = gs[rank]
            prm.grad = g
            opt.step()
            hist.append(prm.detach().numpy().copy())
        st = opt.state[prm]
        out["adam"][case["name"]] = dict(
            params=hist, exp_avg=st["exp_avg"].numpy().copy(), exp_avg_sq=st["exp_avg_sq"].numpy().copy(),
            we=st["worker_error"].numpy().copy() if "worker_error" in st else None,
            se=st["server_error"].numpy().copy() if "server_error" in st else None)
    def engine_stub():
        stub = type("Engine", (), {})()
        stub.mpu = None
        stub.local_rank = rank
        stub.enable_backward_allreduce = True  # DeepSpeedEngine.__init__
        return stub

    def engine_grad(stub, gs):
        """The engine's gradient all-reduce when enabled (allreduce_bucket:
        sum -- in rank order here -- then * 1/p), else the local gradient."""
        if not stub.enable_backward_allreduce:
            return gs[rank].clone()
        g = gs[0].clone()
        for r in range(1, p):
            g = g + gs[r]
        return g.mul_(1.0 / p)

    import contextlib
    import io
    from deepspeed.runtime.fp16.onebit.zoadam import ZeroOneAdam
    from deepspeed.runtime.fp16.onebit.lamb import OnebitLamb
    out["zoa"] = {}
    for case in jobs.get("zoa", []):
        hp = jobs["zoa_hp"]
        prm = torch.nn.Parameter(torch.from_numpy(case["params0"].copy()))
        stub = engine_stub()
        with contextlib.redirect_stdout(io.StringIO()):  # its progress prints
            opt = ZeroOneAdam([prm], deepspeed=stub, lr=hp["lr"], betas=hp["betas"], eps=hp["eps"],
                              weight_decay=float(case["weight_decay"]), var_freeze_step=hp["var_freeze_step"],
                              var_update_scaler=hp["var_update_scaler"], local_step_scaler=hp["local_step_scaler"],
                              local_step_clipper=hp["local_step_clipper"], comm_backend_name="compressed")
            prm.grad = torch.zeros_like(prm)  # FP16_Optimizer.initialize_optimizer_states
            opt.step()
            prm.grad = None
            hist, flags = [], []
            for k in range(hp["steps"]):
                gs = [torch.from_numpy(g.copy()) for g in case["grads"][k]]
                flags.append(bool(stub.enable_backward_allreduce))
                prm.grad = engine_grad(stub, gs)
                opt.step()
                hist.append(prm.detach().numpy().copy())
        st = opt.state[prm]
        out["zoa"][case["name"]] = dict(
            params=hist, allreduce=flags, exp_avg=st["exp_avg"].numpy().copy(),
            exp_avg_sq=st["exp_avg_sq"].numpy().copy(), cb=st["momentum_accumulator"].numpy().copy(),
            we=st["worker_error"].numpy().copy(), se=st["server_error"].numpy().copy(),
            final=dict(step=st["step"], var_interval=st["var_interval"], var_counter=st["var_counter"],
                       local_step_interval=st["local_step_interval"],
                       local_step_counter=st["local_step_counter"], lrs=float(st["lrs"]),
                       freeze_key=bool(opt.freeze_key)))

    out["lamb"] = {}
    for case in jobs.get("lamb", []):
        hp = jobs["lamb_hp"]
        prms = [torch.nn.Parameter(torch.from_numpy(x.copy())) for x in case["params0"]]
        stub = engine_stub()
        with contextlib.redirect_stdout(io.StringIO()):
            opt = OnebitLamb(prms, deepspeed=stub, lr=hp["lr"], freeze_step=hp["freeze_step"], betas=hp["betas"],
                             eps=hp["eps"], weight_decay=float(case["weight_decay"]), max_coeff=hp["max_coeff"],
                             min_coeff=hp["min_coeff"], comm_backend_name="compressed", coeff_beta=hp["coeff_beta"],
                             factor_max=hp["factor_max"], factor_min=hp["factor_min"],
                             factor_threshold=hp["factor_threshold"])
            for q in prms:  # FP16_UnfusedOptimizer.initialize_optimizer_states
                q.grad = torch.zeros_like(q)
            opt.step()
            for q in prms:
                q.grad = None
            hist, coeffs, factors = [], [], []
            for k in range(hp["steps"]):
                allred = bool(stub.enable_backward_allreduce)
                for t, q in enumerate(prms):
                    q.grad = engine_grad(stub, [torch.from_numpy(g[t].copy()) for g in case["grads"][k]])
                opt.step()
                hist.append([q.detach().numpy().copy() for q in prms])
                coeffs.append([float(c) for c in opt.get_lamb_coeffs()])
                factors.append([float(opt.state[q]["last_factor"]) for q in prms] if not allred else [])
        sts = [opt.state[q] for q in prms]
        out["lamb"][case["name"]] = dict(
            params=hist, lamb_coeffs=coeffs, factors=factors,
            exp_avg=[st["exp_avg"].numpy().copy() for st in sts], exp_avg_flat=opt.exp_avg_flat[0].numpy().copy(),
            exp_avg_sq=[st["exp_avg_sq"].numpy().copy() for st in sts],
            exp_avg_sq_fresh=[st["exp_avg_sq_fresh"].numpy().copy() for st in sts],
            lamb_coeff_freeze=[float(st["lamb_coeff_freeze"]) for st in sts],
            last_factor=[float(st["last_factor"]) for st in sts],
            scaling_coeff=[float(st["scaling_coeff"]) for st in sts],
            we=opt.worker_errors[0].numpy().copy(), se=opt.server_errors[0].numpy().copy())

    with open(os.path.join(outdir, f"rank{rank}.pkl"), "wb") as f:
        pickle.dump(out, f)
    dist.barrier()


def _ulps(a, b):
    a = np.asarray(a, F32).view(np.int32).astype(np.int64)
    b = np.asarray(b, F32).view(np.int32).astype(np.int64)
    a = np.where(a < 0, -(a & 0x7FFFFFFF), a)
    b = np.where(b < 0, -(b & 0x7FFFFFFF), b)
    return int(np.max(np.abs(a - b))) if a.size else 0


def _rel(a, b):
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-6))) if a.size else 0.0


def _nerr(a, b, scale=None):
    """max |a - b| / scale, scale defaulting to max |b| (0 when all-zero)."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    d = float(np.max(np.abs(a - b))) if a.size else 0.0
    m = scale if scale is not None else (float(np.max(np.abs(b))) if b.size else 0.0)
    return d / m if m > 0 else d


def _compare(pairs):
    """-> (bit-identical?, worst normalised difference)"""
    exact, worst = True, 0.0
    for a, b, *scale in pairs:
        if not np.array_equal(np.asarray(a, F32), np.asarray(b, F32)):
            exact = False
        worst = max(worst, _nerr(a, b, *scale))
    return exact, worst


def _ar_pairs(case, got, r):
    n = case["n"]
    pairs = []
    for rec, g in zip(case["rounds"], got):
        # errors are compared relative to the round's result magnitude (the
        # server error is ~0 for p = 1: a 0-2 ulp difference of two scales)
        big = float(np.max(np.abs(rec["result"])))
        pairs += [(g["result"], rec["result"][:n]), (g["we"], rec["worker_errors_out"][r], big),
                  (g["se"], rec["server_errors_out"][r], big)]
    return pairs


def _adam_pairs(case, g, r):
    pairs = [(a, b) for a, b in zip(g["params"], case["params"])]
    pairs += [(g["exp_avg"], case["exp_avg"]), (g["exp_avg_sq"], case["exp_avg_sq"])]
    we = g["we"] if g["we"] is not None else np.zeros_like(case["worker_errors"][r])
    se = g["se"] if g["se"] is not None else np.zeros_like(case["server_errors"][r])
    pairs += [(we, case["worker_errors"][r]), (se, case["server_errors"][r])]
    return pairs


def _zoa_pairs(case, g, r):
    pairs = [(a, b[r]) for a, b in zip(g["params"], case["params"])]
    pairs += [(g["exp_avg"], case["exp_avg"][r]), (g["exp_avg_sq"], case["exp_avg_sq"]),
              (g["cb"], case["momentum_accumulator"][r]),
              (g["we"], case["worker_errors"][r]), (g["se"], case["server_errors"][r])]
    return pairs


def _zoa_meta_equal(case, g):
    """the engine flag per step and the final counters/lrs: exact"""
    fin = {k: (float(v) if k == "lrs" else v) for k, v in case["final_state"].items()}
    return list(case["allreduce"]) == g["allreduce"] and fin == g["final"]


def _lamb_pairs(case, g, r):
    pairs = []
    for a, b in zip(g["params"], case["params"]):
        pairs += list(zip(a, b))
    for key in ("exp_avg", "exp_avg_sq", "exp_avg_sq_fresh"):
        pairs += list(zip(g[key], case[key]))
    pairs += [(g["exp_avg_flat"], case["exp_avg_flat"]),
              (g["we"], case["worker_errors"][r]), (g["se"], case["server_errors"][r])]
    return pairs


def _lamb_doubles(case, g):
    """-> (all Python-double quantities equal?, worst relative difference)"""
    exact, worst = True, 0.0
    for key in ("lamb_coeffs", "factors", "lamb_coeff_freeze", "last_factor", "scaling_coeff"):
        fa, fb = case[key], g[key]
        if key in ("lamb_coeffs", "factors"):  # [steps][tensors]
            if [len(x) for x in fa] != [len(x) for x in fb]:
                return False, float("inf")
            fa = [x for row in fa for x in row]
            fb = [x for row in fb for x in row]
        if len(fa) != len(fb):
            return False, float("inf")
        for x, y in zip(fa, fb):
            x, y = float(x), float(y)
            if x != y:
                exact = False
                worst = max(worst, abs(x - y) / max(abs(x), 1e-30))
    return exact, worst


def run(ar_cases, adam_cases, hp, ar_torchnorm, adam_torchnorm, zoa=None, lamb=None):
    """zoa / lamb: (golden cases, hyper-parameters, torch-norm rerun cases)."""
    """Run DeepSpeed on the goldens' inputs; compare its outputs (a) with the
    goldens (float64-accumulated norm) and (b) with the same reference run
    with torch's float32 CPU norm (ar_torchnorm/adam_torchnorm), which must be
    bit-identical."""
    import torch.multiprocessing as mp
    ok = True
    summary = []
    srcdir = tempfile.mkdtemp(prefix="onebit-ds-src-")
    try:
        ds_paths = fetch_ds_sources(srcdir)
    except Exception as e:
        print(f"deepspeed cross-check skipped: cannot read DeepSpeed {DS_COMMIT} from {DS_GIT_DIR}: {e}")
        return True
    print(f"deepspeed cross-check: DeepSpeed sources from {DS_GIT_DIR} at {DS_COMMIT}")
    for p in (1, 2, 4):
        jobs = dict(allreduce=[c for c in ar_cases if c["p"] == p],
                    adam=[c for c in adam_cases if c["p"] == p],
                    hp=dict(lr=hp["lr"], betas=hp["betas"], eps=hp["eps"],
                            freeze_step=hp["freeze_step"], steps=hp["steps"]))
        if zoa is not None:
            jobs["zoa"] = [c for c in zoa[0] if c["p"] == p]
            jobs["zoa_hp"] = dict(zoa[1])
        if lamb is not None:
            jobs["lamb"] = [c for c in lamb[0] if c["p"] == p]
            jobs["lamb_hp"] = dict(lamb[1])
        with tempfile.TemporaryDirectory() as td:
            mp.spawn(_worker, args=(p, _free_port(), jobs, td, ds_paths), nprocs=p, join=True)
            outs = []
            for r in range(p):
                with open(os.path.join(td, f"rank{r}.pkl"), "rb") as f:
                    outs.append(pickle.load(f))
        tn_ar = {c["name"]: c for c in ar_torchnorm}
        tn_ad = {c["name"]: c for c in adam_torchnorm}
        for case in jobs["allreduce"]:
            ex_g, worst_g, ex_t, sign_mis = True, 0.0, True, 0
            for r in range(p):
                got = outs[r]["allreduce"][case["name"]]
                e, w = _compare(_ar_pairs(case, got, r))
                ex_g, worst_g = ex_g and e, max(worst_g, w)
                e, _ = _compare(_ar_pairs(tn_ar[case["name"]], got, r))
                ex_t = ex_t and e
                for rec, g in zip(case["rounds"], got):
                    sign_mis += int(np.sum(np.sign(g["result"]) != np.sign(rec["result"][:case["n"]])))
            summary.append(f"allreduce   {case['name']:20s}: vs goldens "
                           f"{'bit-identical' if ex_g else f'max |d|/max|result| {worst_g:.1e}'}, "
                           f"result sign mismatches {sign_mis}; with torch's norm+sqrt "
                           f"{'bit-identical' if ex_t else 'DIFFERENT'}")
            ok = ok and ex_t and sign_mis == 0
        for case in jobs["adam"]:
            ex_g, worst_g, ex_t = True, 0.0, True
            for r in range(p):
                g = outs[r]["adam"][case["name"]]
                e, w = _compare(_adam_pairs(case, g, r))
                ex_g, worst_g = ex_g and e, max(worst_g, w)
                e, _ = _compare(_adam_pairs(tn_ad[case["name"]], g, r))
                ex_t = ex_t and e
            summary.append(f"onebit-adam {case['name']:20s}: vs goldens "
                           f"{'bit-identical' if ex_g else f'max |d|/max|ref| {worst_g:.1e}'}; "
                           f"with torch's norm+sqrt {'bit-identical' if ex_t else 'DIFFERENT'}")
            ok = ok and ex_t
        for case in jobs.get("zoa", []):
            ex_g, worst_g, ex_t, meta = True, 0.0, True, True
            tn = {c["name"]: c for c in zoa[2]}[case["name"]]
            for r in range(p):
                g = outs[r]["zoa"][case["name"]]
                e, w = _compare(_zoa_pairs(case, g, r))
                ex_g, worst_g = ex_g and e, max(worst_g, w)
                e, _ = _compare(_zoa_pairs(tn, g, r))
                ex_t = ex_t and e
                meta = meta and _zoa_meta_equal(case, g)
            summary.append(f"0/1 Adam    {case['name']:20s}: vs goldens "
                           f"{'bit-identical' if ex_g else f'max |d|/max|ref| {worst_g:.1e}'}; "
                           f"with torch's norm+sqrt {'bit-identical' if ex_t else 'DIFFERENT'}; "
                           f"all-reduce flags and final counters {'equal' if meta else 'DIFFERENT'}")
            ok = ok and ex_t and meta
        for case in jobs.get("lamb", []):
            ex_g, worst_g, ex_t = True, 0.0, True
            dx_g, dw_g, dx_t = True, 0.0, True
            tn = {c["name"]: c for c in lamb[2]}[case["name"]]
            for r in range(p):
                g = outs[r]["lamb"][case["name"]]
                e, w = _compare(_lamb_pairs(case, g, r))
                ex_g, worst_g = ex_g and e, max(worst_g, w)
                e, _ = _compare(_lamb_pairs(tn, g, r))
                ex_t = ex_t and e
                e, w = _lamb_doubles(case, g)
                dx_g, dw_g = dx_g and e, max(dw_g, w)
                e, _ = _lamb_doubles(tn, g)
                dx_t = dx_t and e
            summary.append(f"1-bit LAMB  {case['name']:20s}: vs goldens "
                           f"{'bit-identical' if ex_g else f'max |d|/max|ref| {worst_g:.1e}'}, coefficients "
                           f"{'equal' if dx_g else f'max rel {dw_g:.1e}'}; with torch's norms+sqrt "
                           f"{'bit-identical' if ex_t and dx_t else 'DIFFERENT'}")
            ok = ok and ex_t and dx_t
    for line in summary:
        print("deepspeed cross-check:", line)
    print("deepspeed cross-check:", "PASS" if ok else "FAIL")
    return ok


if __name__ == "__main__":
    sys.exit("run make-goldens.py")
