#!/usr/bin/env python3
"""Plain-numpy reference for DeepSpeed's 1-bit compressed all-reduce and
1-bit Adam (Tang et al. 2021, "1-bit Adam: Communication Efficient
Large-Scale Training with Adam's Convergence Speed").

Written from DeepSpeed's own code (commit recorded in README.md):
  deepspeed/runtime/comm/nccl.py        NcclBackend.compressed_allreduce
  deepspeed/runtime/comm/compressed.py  CompressedBackend.compressed_allreduce
  deepspeed/runtime/fp16/onebit/adam.py OnebitAdam.__init__ / step
  deepspeed/runtime/fp16/fused_optimizer.py  initialize_optimizer_states
  deepspeed/runtime/compression/cupy.py CupyBackend.compress_by_chunk
Where the paper and the code differ, this file follows the code.

All arithmetic is float32, one rounding per torch operation, in the order
torch applies them. The only deliberate deviation from "what torch on a GPU
does bit for bit" is the 2-norm: it is accumulated in float64 and rounded
once to float32 (torch's own reduction order is backend-dependent); see
README.md.  No torch here: this file is meant to read as the algorithm.
"""

from math import gcd

import numpy as np

F32 = np.float32


# ---------------------------------------------------------------- helpers

def padded_size(n, p):
    """OnebitAdam's `corrected_tensor_size` for a parameter of n elements on
    p ranks: divider = p*8/gcd(p,8) = lcm(p, 8); the flattened momentum is
    zero-padded up to a multiple of p * divider (= p * lcm(p, 8))."""
    divider = p * 8 // gcd(p, 8)
    m = p * divider
    if n % m != 0:
        n += m - n % m
    return n


def sign_pm1(x):
    """DeepSpeed's `x.sign().add_(1).bool().float().add_(-0.5).mul_(2.0)`:
    sign(x)+1 is 0 only for x < 0, so x >= 0 (including +0.0 and -0.0) maps
    to +1 and x < 0 to -1 (NaN -> +1, since bool(NaN) is True). This is also
    the bit the packers send: 1 <=> x >= 0."""
    x = np.asarray(x, dtype=F32)
    return np.where(x < 0, F32(-1.0), F32(1.0)).astype(F32)


def rms_scale(v):
    """`torch.linalg.norm(v) / np.sqrt(v.numel())` in float32.
    The norm is accumulated in float64 and rounded once to float32; the
    divisor np.sqrt(numel) is a float64 scalar that torch casts to float32."""
    v = np.asarray(v, dtype=F32)
    return F32(norm2(v) / F32(np.sqrt(v.size)))


def norm2_f64(v):
    """The 2-norm of a float32 vector: sum of squares in float64, sqrt in
    float64, rounded once to float32."""
    return F32(np.sqrt(np.sum(np.asarray(v, dtype=F32).astype(np.float64) ** 2)))


def fma32(a, b, c):
    """Correctly rounded float32 a*b + c (one rounding, like a fused
    multiply-add) for float32 a, b, c. a*b is exact in float64; the float64
    sum is made round-to-odd (TwoSum error as sticky bit) so that the final
    rounding to float32 is correct."""
    a = np.asarray(a, dtype=F32).astype(np.float64)
    b = np.asarray(b, dtype=F32).astype(np.float64)
    c = np.asarray(c, dtype=F32).astype(np.float64)
    prod = a * b                        # exact: 24 + 24 bits <= 53
    s = prod + c
    bb = s - prod
    err = (prod - (s - bb)) + (c - bb)  # s + err == prod + c exactly
    even = (s.view(np.int64) & 1) == 0
    fix = (err != 0) & even
    s = np.where(fix, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
    return s.astype(F32)


def sqrt32_ieee(v):
    """IEEE (correctly rounded) float32 square root."""
    return np.sqrt(np.asarray(v, dtype=F32)).astype(F32)


# The square root used by the Adam update (swappable like norm2).
sqrt32 = sqrt32_ieee


# The norm used by rms_scale. ds_crosscheck.py swaps in torch's float32 CPU
# norm to show that everything else is bit-identical to DeepSpeed.
norm2 = norm2_f64


def packbits_signs(v):
    """Bits as NCCL/cupy pack them: bit = (v >= 0), big-endian in each byte
    (cupy.packbits default). Only used to show/verify the wire format."""
    return np.packbits((np.asarray(v, dtype=F32) >= 0) | np.isnan(v))


def unpackbits_signs(b, n):
    """`(unpackbits(b) - 0.5) * 2` -> +-1.0 float32, first n elements."""
    bits = np.unpackbits(np.asarray(b, dtype=np.uint8))[:n]
    return ((bits.astype(F32) - F32(0.5)) * F32(2.0)).astype(F32)


# ------------------------------------------------- compressed all-reduce

def compressed_allreduce(xs, worker_errors, server_errors):
    """One call of DeepSpeed's compressed_allreduce on p ranks at once.

    xs:            list of p float32 vectors, all of the padded length n
                   (n % p == 0 and n/p % 8 == 0, see padded_size).
    worker_errors: list of p float32 vectors of length n.
    server_errors: list of p float32 vectors of length n/p (rank j's is the
                   error of the chunk j it serves).
    Returns (results, new_worker_errors, new_server_errors, info), results
    being p identical vectors of length n; info has the scales and signs.
    Inputs are not modified.
    """
    p = len(xs)
    n = len(xs[0])
    assert n % p == 0 and (n // p) % 8 == 0, (n, p)
    c = n // p

    # ---- worker side (every rank)
    comp = []
    w_scale = []
    w_sign = []
    new_we = []
    for r in range(p):
        x = (np.asarray(xs[r], dtype=F32) + np.asarray(worker_errors[r], dtype=F32)).astype(F32)
        s = rms_scale(x)
        sg = sign_pm1(x)
        new_we.append((x - (s * sg).astype(F32)).astype(F32))
        comp.append(x)
        w_scale.append(s)
        w_sign.append(sg)

    # ---- phase 1: all-to-all of sign chunks, all-gather of worker scales.
    # Server j receives chunk j of every rank i's signs and every scale_i.
    # compensated_server_m = sum_i sign_i[chunk j] * (scale_i * (1/p)),
    # scale_i * (1/p) rounded to float32 first, sum over i in rank order.
    inv_p = F32(1.0 / p)
    s_scale = []
    s_sign = []
    new_se = []
    for j in range(p):
        acc = None
        for i in range(p):
            term = (w_sign[i][j * c:(j + 1) * c] * F32(w_scale[i] * inv_p)).astype(F32)
            acc = term if acc is None else (acc + term).astype(F32)
        m = (acc + np.asarray(server_errors[j], dtype=F32)).astype(F32)
        ss = rms_scale(m)
        sg = sign_pm1(m)
        new_se.append((m - (ss * sg).astype(F32)).astype(F32))
        s_scale.append(ss)
        s_sign.append(sg)

    # ---- phase 2: all-gather of server signs and scales; every rank ends
    # with the concatenation over j of server_scale_j * sign_j.
    result = np.concatenate([(s_sign[j] * s_scale[j]).astype(F32) for j in range(p)]).astype(F32)
    results = [result.copy() for _ in range(p)]
    info = dict(worker_scales=w_scale, server_scales=s_scale, compensated=comp)
    return results, new_we, new_se, info


# ------------------------------------------------------------ 1-bit Adam

def onebit_adam_steps(params0, grads_per_rank_per_step, lr, betas, eps,
                      weight_decay, freeze_step, steps, init_step=True):
    """DeepSpeed OnebitAdam.step semantics for one parameter tensor on p ranks.

    params0: float32 vector (n elements, unpadded).
    grads_per_rank_per_step[k][r]: rank r's local gradient at real step k
        (k = 0 .. steps-1).
    init_step: model the extra optimizer.step() with zero gradients that
        DeepSpeed's FP16_Optimizer.initialize_optimizer_states() makes at
        construction. OnebitAdam's first step() call only initializes state
        (no update) but increments state['step'] to 1; hence, with it, real
        step k (1-based) runs with state['step'] = k+1 and the first
        compressed real step is k = freeze_step (freeze_step-1 exact steps,
        min. 1). Without it, the first real call is swallowed as the
        initialization call (no update) -- modelled here as well.

    Per real step (all float32):
      warm-up (exact) stage, grad g = (sum_r g_r) * (1/p) (engine all-reduce):
        m = fma((1-b1), g, m*b1) ;  v = fma((1-b2)*g, g, v*b2)
      compressed stage, each rank r with its own g_r:
        m_r = fma((1-b1), g_r, m*b1) ; m = compressed_allreduce(m_r) if p > 1
        (v frozen; errors zero-initialised when the stage starts; p == 1
        does no all-reduce at all, as DeepSpeed skips it for size == 1)
      both stages:
        u = m / (sqrt(v) + eps) ; if wd > 0: u = u + wd*x ; x = x + (-lr)*u
      (no bias correction; eps outside the sqrt; L2-style weight decay added
       to the update, not to the gradient). The stage switches after the
      step where state['step'] >= freeze_step.
    Returns a dict (see make-goldens.py for the recorded fields).
    """
    b1, b2 = betas
    fb1, fb2 = F32(b1), F32(b2)
    om1, om2 = F32(1 - b1), F32(1 - b2)
    feps, fwd, fmlr = F32(eps), F32(weight_decay), F32(-lr)
    p = len(grads_per_rank_per_step[0])
    x = np.asarray(params0, dtype=F32).copy()
    n = x.size
    npad = padded_size(n, p)
    m = np.zeros(n, F32)
    v = np.zeros(n, F32)
    state_step = 0
    freeze_key = False
    we = se = None
    history, stages = [], []

    calls = [None] * steps
    if init_step:
        calls = ["init"] + calls
    initialized = False
    real = 0
    for call in calls:
        state_step += 1
        if not initialized:
            # initialization call: state created, no update, no stage check.
            # (its compressed all-reduce of all-zero momentum is a no-op.)
            if call is None:
                history.append(x.copy())
                stages.append("init")
                real += 1
            initialized = True
            continue
        grads = [np.asarray(g, dtype=F32) for g in grads_per_rank_per_step[real]]
        if not freeze_key:
            g = grads[0].copy()
            for r in range(1, p):
                g = (g + grads[r]).astype(F32)
            g = (g * F32(1.0 / p)).astype(F32)
            # exp_avg.mul_(beta1).add_(1 - beta1, grad): self + alpha*other, fused
            m = fma32(om1, g, (m * fb1).astype(F32))
            # exp_avg_sq.mul_(beta2).addcmul_(1 - beta2, grad, grad):
            # self + (value*t1)*t2, the last multiply-add fused
            v = fma32((om2 * g).astype(F32), g, (v * fb2).astype(F32))
            stages.append("exact")
        else:
            if we is None:
                we = [np.zeros(npad, F32) for _ in range(p)]
                se = [np.zeros(npad // p, F32) for _ in range(p)]
            ms = [fma32(om1, grads[r], (m * fb1).astype(F32)) for r in range(p)]
            if p > 1:
                padded = [np.concatenate([mr, np.zeros(npad - n, F32)]) for mr in ms]
                res, we, se, _ = compressed_allreduce(padded, we, se)
                m = res[0][:n].copy()
            else:
                m = ms[0]
            stages.append("compressed")
        upd = (m / ((sqrt32(v) + feps).astype(F32))).astype(F32)
        if weight_decay > 0.0:
            upd = (upd + (fwd * x).astype(F32)).astype(F32)
        x = (x + (fmlr * upd).astype(F32)).astype(F32)
        history.append(x.copy())
        real += 1
        if not freeze_key and state_step >= freeze_step:
            freeze_key = True

    return dict(params=history, stages=stages, exp_avg=m, exp_avg_sq=v,
                worker_errors=we if we is not None else [np.zeros(npad, F32) for _ in range(p)],
                server_errors=se if se is not None else [np.zeros(npad // p, F32) for _ in range(p)],
                padded_size=npad)
