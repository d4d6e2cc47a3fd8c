#!/usr/bin/env python3
"""Plain-numpy reference for DeepSpeed's 1-bit LAMB (Li et al. 2021, "1-bit
LAMB: Communication Efficient Large-Scale Large-Batch Training with LAMB's
Convergence Speed", arXiv 2104.06069), class OnebitLamb.

Written from DeepSpeed's own code (commit recorded in README.md):
  deepspeed/runtime/fp16/onebit/lamb.py       OnebitLamb.__init__ / step
  deepspeed/runtime/comm/compressed.py        CompressedBackend.compressed_allreduce
  deepspeed/runtime/fp16/unfused_optimizer.py initialize_optimizer_states
  deepspeed/runtime/engine.py                 enable_backward_allreduce, allreduce_bucket
Where the paper and the code differ, this file follows the code (README.md
lists the differences).

Same conventions as onebit_reference.py: float32, one rounding per torch
operation in torch's order, fma where torch's CPU kernels fuse. Python-float
quantities of the code (lamb coefficients, their moving average, the scaling
coefficients, the factor) are Python doubles here too. Norms: the
compression's rms scales and the momentum scales use onebit_reference.norm2
(torch.linalg.norm / vector_norm), the trust-ratio norms use norm_sumsq below
(x.pow(2).sum().sqrt()); both default to a float64-accumulated 2-norm rounded
once to float32 (swappable, see make-goldens.py).
"""

import numpy as np

import onebit_reference as ref

F32 = np.float32

# x.pow(2).sum().sqrt() (float32 in torch); float64-accumulated here.
norm_sumsq = ref.norm2_f64


def onebit_lamb_steps(params0, grads_per_rank_per_step, lr, betas, eps, weight_decay, freeze_step,
                      steps, max_coeff=10.0, min_coeff=0.01, coeff_beta=0.9, factor_max=4.0,
                      factor_min=0.5, factor_threshold=0.1, init_step=True):
    """DeepSpeed OnebitLamb.step semantics for T parameter tensors (the
    FP16_UnfusedOptimizer keeps one fp32 tensor per parameter) in one group,
    on p ranks, including the engine's gradient all-reduce (warm-up only).

    params0: list of T float32 vectors (sizes n_t).
    grads_per_rank_per_step[k][r][t]: rank r's local gradient of tensor t at
        real step k.
    init_step: model FP16_UnfusedOptimizer.initialize_optimizer_states()'s
        extra step() with zero gradients: state['step'] = 1 for every tensor,
        the fused momentum buffer is built, nothing else (its compressed
        all-reduce of zeros is a no-op, its errors are dropped). Without it,
        the first real call is that initialization call (no update).

    Returns a dict (see make-goldens.py for the recorded fields).
    """
    b1, b2 = betas
    fb1, fb2 = F32(b1), F32(b2)
    om1, om2 = F32(1 - b1), F32(1 - b2)
    feps, fwd = F32(eps), F32(weight_decay)
    p = len(grads_per_rank_per_step[0])
    T = len(params0)
    xs = [np.asarray(a, dtype=F32).copy() for a in params0]
    sizes = [x.size for x in xs]
    offs = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
    ntot = int(offs[-1])
    npad = ref.padded_size(ntot, p)  # corrected_tensor_size of the flattened momenta
    flat = np.zeros(npad, F32)       # exp_avg_flat: the exp_avg's are views into it
    v = [np.zeros(nt, F32) for nt in sizes]      # exp_avg_sq
    vf = [np.zeros(nt, F32) for nt in sizes]     # exp_avg_sq_fresh
    step = [0] * T
    lcf = [0.0] * T        # lamb_coeff_freeze (Python double)
    last_factor = [1.0] * T
    scaling = None         # scaling_coeff per tensor (Python double), set at the first compressed step
    momentum_scales = None
    we = [np.zeros(npad, F32) for _ in range(p)]
    se = [np.zeros(npad // p, F32) for _ in range(p)]
    freeze_key = False
    history, stages, coeffs, factors = [], [], [], []

    def m_of(buf, t):
        return buf[offs[t]:offs[t + 1]]

    def trust_norm(a):
        return F32(norm_sumsq(np.asarray(a, F32)))

    calls = [None] * steps
    if init_step:
        calls = ["init"] + calls
    initialized = False
    real = 0
    for call in calls:
        if not initialized:
            # initialization call: every state['step'] = 1, no update.
            step = [s + 1 for s in step]
            if call is None:
                history.append([x.copy() for x in xs])
                stages.append("init")
                coeffs.append([])
                factors.append([])
                real += 1
            initialized = True
            continue
        grads = [[np.asarray(g, dtype=F32) for g in gr] for gr in grads_per_rank_per_step[real]]
        if not freeze_key:
            # ---- warm-up: LAMB on the engine's mean gradient
            step_coeffs = []
            for t in range(T):
                g = grads[0][t].copy()
                for r in range(1, p):
                    g = (g + grads[r][t]).astype(F32)
                g = (g * F32(1.0 / p)).astype(F32)
                step[t] += 1
                m = ref.fma32(om1, g, (m_of(flat, t) * fb1).astype(F32))
                flat[offs[t]:offs[t + 1]] = m
                v[t] = ref.fma32((om2 * g).astype(F32), g, (v[t] * fb2).astype(F32))
                if step[t] == freeze_step:
                    vf[t] = v[t].copy()
                x = xs[t]
                wn = trust_norm(x)
                upd = (m / (ref.sqrt32(v[t]) + feps).astype(F32)).astype(F32)
                if weight_decay > 0.0:
                    upd = (upd + (fwd * x).astype(F32)).astype(F32)
                un = trust_norm(upd)
                c = 1.0
                if wn != 0 and un != 0:
                    c = float(F32(wn / un))
                    if c > max_coeff:
                        c = max_coeff
                    if c < min_coeff:
                        c = min_coeff
                if c != 1.0:
                    lcf[t] = coeff_beta * lcf[t] + (1 - coeff_beta) * c
                step_coeffs.append(c)
                xs[t] = (x + (F32(-lr * c) * upd).astype(F32)).astype(F32)
            stages.append("warmup")
            coeffs.append(step_coeffs)
            factors.append([])
            # the stage check uses the last tensor's state['step']
            if step[T - 1] >= freeze_step:
                freeze_key = True
        else:
            # ---- compression stage
            last = [m_of(flat, t).copy() for t in range(T)]
            if scaling is None:
                momentum_scales = [float(ref.rms_scale(last[t])) for t in range(T)]
                united = sum(momentum_scales) / len(momentum_scales)
                scaling = [united / s for s in momentum_scales]
            flats = []
            for r in range(p):
                fr = flat.copy()  # the pad tail keeps the last all-reduced values
                for t in range(T):
                    m = ref.fma32(om1, grads[r][t], (last[t] * fb1).astype(F32))
                    fr[offs[t]:offs[t + 1]] = (m * F32(scaling[t])).astype(F32)
                flats.append(fr)
            for t in range(T):
                step[t] += 1
            if p > 1:
                res, we, se, _ = ref.compressed_allreduce(flats, we, se)
                flat = res[0].copy()
            else:
                flat = flats[0]
            step_coeffs, step_factors = [], []
            for t in range(T):
                m = (m_of(flat, t) / F32(scaling[t])).astype(F32)
                flat[offs[t]:offs[t + 1]] = m
                gr = ((m - (last[t] * fb1).astype(F32)).astype(F32) / om1).astype(F32)
                vf[t] = ref.fma32((om2 * gr).astype(F32), gr, (vf[t] * fb2).astype(F32))
                denom = (ref.sqrt32(v[t]) + feps).astype(F32)
                up = (m / denom).astype(F32)
                x = xs[t]
                if weight_decay > 0.0:
                    upd = (up + (fwd * x).astype(F32)).astype(F32)
                else:
                    upd = up
                un = trust_norm(upd)
                denom_real = (ref.sqrt32(vf[t]) + feps).astype(F32)
                factor = float(np.max((denom / denom_real).astype(F32)))
                if weight_decay > 0.0:
                    ratio = min(1.0, float(F32(trust_norm(up) / un)))
                    factor = factor * ratio + (1.0 - ratio)
                if factor > factor_max:
                    factor = factor_max
                if factor < factor_min:
                    factor = factor_min
                if factor > last_factor[t] * (1.0 + factor_threshold):
                    factor = last_factor[t] * (1.0 + factor_threshold)
                if factor < last_factor[t] * (1.0 - factor_threshold):
                    factor = last_factor[t] * (1.0 - factor_threshold)
                last_factor[t] = factor
                c = lcf[t] * factor
                step_coeffs.append(c)
                step_factors.append(factor)
                xs[t] = (x + (F32(-lr * c) * upd).astype(F32)).astype(F32)
            stages.append("compressed")
            coeffs.append(step_coeffs)
            factors.append(step_factors)
        history.append([x.copy() for x in xs])
        real += 1

    return dict(params=history, stages=stages, lamb_coeffs=coeffs, factors=factors,
                exp_avg=[m_of(flat, t).copy() for t in range(T)], exp_avg_flat=flat,
                exp_avg_sq=v, exp_avg_sq_fresh=vf, lamb_coeff_freeze=lcf, last_factor=last_factor,
                scaling_coeff=scaling, momentum_scales=momentum_scales, step=step,
                worker_errors=we, server_errors=se, padded_size=npad, total_size=ntot)
