#!/usr/bin/env python3
"""Plain-numpy reference for DeepSpeed's 0/1 Adam (Lu et al. 2022, "Maximizing
Communication Efficiency for Large-scale Training via 0/1 Adam",
arXiv 2202.06009), class ZeroOneAdam.

Written from DeepSpeed's own code (commit recorded in README.md):
  deepspeed/runtime/fp16/onebit/zoadam.py   ZeroOneAdam.__init__ / step
  deepspeed/runtime/comm/compressed.py      CompressedBackend.compressed_allreduce
  deepspeed/runtime/fp16/fused_optimizer.py initialize_optimizer_states
  deepspeed/runtime/engine.py               enable_backward_allreduce, allreduce_bucket
Where the paper and the code differ, this file follows the code (README.md
lists the differences).

Same conventions as onebit_reference.py: float32, one rounding per torch
operation in torch's order, fma where torch's CPU kernels fuse (add_ with
alpha, addcmul_), 2-norms accumulated in float64 (via onebit_reference.norm2,
swappable), the IEEE float32 sqrt (onebit_reference.sqrt32, swappable).
"""

import numpy as np

import onebit_reference as ref

F32 = np.float32


def zero_one_adam_steps(params0, grads_per_rank_per_step, lr, betas, eps, weight_decay,
                        var_freeze_step, var_update_scaler, local_step_scaler, local_step_clipper,
                        steps, init_step=True):
    """DeepSpeed ZeroOneAdam.step semantics for one parameter tensor (the
    FP16_Optimizer flattens a parameter group into one fp32 tensor) on p
    ranks, including the engine's gradient all-reduce, which the optimizer
    switches on and off (`deepspeed.enable_backward_allreduce`).

    params0: float32 vector (n elements).
    grads_per_rank_per_step[k][r]: rank r's local gradient at real step k.
    init_step: model FP16_Optimizer.initialize_optimizer_states()'s extra
        step() with zero gradients: state['step'] becomes 1, nothing else
        survives it (its compressed all-reduce of a zero buffer is a no-op,
        its errors are popped, and the next call re-creates errors, counters
        and momentum_accumulator). Without it, the first real call is the
        initialization call (no update) -- modelled too.

    Real step with state['step'] = s (= k+1 with the init step), all float32:
      stage 1 (freeze_key False):
        grad g = engine's mean (sum in rank order, * 1/p) if the all-reduce
                 flag is on, else each rank's own g_r
        if s % var_interval == 0:   ("var" step; the flag is then always on)
            v = fma((1-b2)*g, g, v*b2) ; m = fma(1-b1, g, m*b1)
        else:                       ("onebit" step; flag off)
            p > 1: m = fma(1-b1, C(g_r), m*b1), C = compressed all-reduce of
                   the local gradients with the persistent worker/server errors
            p = 1: m unchanged (DeepSpeed guards the whole branch by size > 1)
        u = m / (sqrt(v) + eps) [+ wd*x] ; x = x + (-lr)*u
        var policy: if s % var_interval == 0: var_counter += 1, and when it
        reaches var_update_scaler it resets and var_interval doubles;
        flag for the next step = ((s+1) % var_interval == 0)
      after the step: if s > var_freeze_step: freeze_key = True, flag off
        for good, both errors zeroed (once).
      stage 2 (freeze_key True), every rank with its own g_r, x_r, m_r, cb_r:
        m_r = fma(1-b1, g_r, m_r*b1) ; lrs += lr (Python double)
        u = m_r / (sqrt(v) + eps) [+ wd*x_r] ; t = (-lr)*u ; x_r += t ; cb_r += t
        if s % local_step_interval == 0:  ("sync" step)
            x_r = x_r + (-cb_r) ; cb_r = cb_r * (sqrt(v) + eps)
            p > 1: cb = C(cb_r) (same on all ranks)
            m_r = 0 + (-1)*(cb / f32(lrs)) ; x_r = x_r + cb / (sqrt(v) + eps)
            cb_r = 0 ; lrs = 0
        else: "local" step
        local_step_counter += 1; when it reaches local_step_scaler it resets
        and local_step_interval = min(local_step_clipper, 2*local_step_interval)
    Returns a dict (see make-goldens.py for the recorded fields).
    """
    b1, b2 = betas
    fb1, fb2 = F32(b1), F32(b2)
    om1, om2 = F32(1 - b1), F32(1 - b2)
    feps, fwd, fmlr = F32(eps), F32(weight_decay), F32(-lr)
    p = len(grads_per_rank_per_step[0])
    x0 = np.asarray(params0, dtype=F32).copy()
    n = x0.size
    npad = ref.padded_size(n, p)
    xs = [x0.copy() for _ in range(p)]        # per-rank params (equal in stage 1)
    ms = [np.zeros(n, F32) for _ in range(p)]  # per-rank exp_avg
    cbs = [np.zeros(n, F32) for _ in range(p)]  # momentum_accumulator
    v = np.zeros(n, F32)                       # exp_avg_sq (identical on all ranks)
    we = [np.zeros(npad, F32) for _ in range(p)]
    se = [np.zeros(npad // p, F32) for _ in range(p)]
    state_step = 0
    var_interval, var_counter = 1, 0
    local_interval, local_counter = 1, 0
    lrs = 0
    freeze_key = False
    reinit_errors = False
    allreduce_flag = True  # engine.enable_backward_allreduce starts True
    history, stages, flags, lrs_hist, intervals = [], [], [], [], []

    def compress(vecs):
        nonlocal we, se
        padded = [np.concatenate([np.asarray(a, F32), np.zeros(npad - n, F32)]) for a in vecs]
        res, we, se, _ = ref.compressed_allreduce(padded, we, se)
        return res[0][:n].copy()

    calls = [None] * steps
    if init_step:
        calls = ["init"] + calls
    initialized = False
    real = 0
    for call in calls:
        if not initialized:
            # initialization call: state['step'] = 1, no update, no policy;
            # errors popped; the next call re-creates errors, counters, lrs
            # and momentum_accumulator (all zero / 1).
            state_step += 1
            if call is None:
                history.append([x.copy() for x in xs])
                stages.append("init")
                flags.append(allreduce_flag)
                lrs_hist.append(0.0)
                intervals.append((var_interval, local_interval))
                real += 1
            initialized = True
            continue
        grads = [np.asarray(g, dtype=F32) for g in grads_per_rank_per_step[real]]
        flags.append(allreduce_flag)
        if allreduce_flag:
            g = grads[0].copy()
            for r in range(1, p):
                g = (g + grads[r]).astype(F32)
            g = (g * F32(1.0 / p)).astype(F32)
            rank_grads = [g] * p
        else:
            rank_grads = grads
        state_step += 1
        s = state_step
        intervals.append((var_interval, local_interval))
        if not freeze_key:
            if s % var_interval == 0:
                # the flag is always on here (it was set to (s % var_interval
                # == 0) at the end of the previous step), so every rank has
                # the same mean gradient
                assert allreduce_flag
                g = rank_grads[0]
                v = ref.fma32((om2 * g).astype(F32), g, (v * fb2).astype(F32))
                m = ref.fma32(om1, g, (ms[0] * fb1).astype(F32))
                ms = [m.copy() for _ in range(p)]
                stages.append("var")
            else:
                if p > 1:
                    go = compress(rank_grads)
                    m = ref.fma32(om1, go, (ms[0] * fb1).astype(F32))
                    ms = [m.copy() for _ in range(p)]
                stages.append("onebit")
        else:
            ms = [ref.fma32(om1, rank_grads[r], (ms[r] * fb1).astype(F32)) for r in range(p)]
            lrs += lr
        denom = (ref.sqrt32(v) + feps).astype(F32)
        for r in range(p):
            upd = (ms[r] / denom).astype(F32)
            if weight_decay > 0.0:
                upd = (upd + (fwd * xs[r]).astype(F32)).astype(F32)
            t = (fmlr * upd).astype(F32)
            xs[r] = (xs[r] + t).astype(F32)
            if freeze_key:
                cbs[r] = (cbs[r] + t).astype(F32)
        if freeze_key:
            if s % local_interval == 0:
                for r in range(p):
                    xs[r] = (xs[r] + (-cbs[r])).astype(F32)
                    cbs[r] = (cbs[r] * denom).astype(F32)
                if p > 1:
                    cb = compress(cbs)
                    cbs = [cb.copy() for _ in range(p)]
                for r in range(p):
                    y = (cbs[r] / F32(lrs)).astype(F32)
                    ms[r] = np.where(y == 0, F32(0.0), -y).astype(F32)  # zero_().add_(y, alpha=-1)
                    xs[r] = (xs[r] + (cbs[r] / denom).astype(F32)).astype(F32)
                    cbs[r] = np.zeros(n, F32)
                lrs_hist.append(lrs)
                lrs = 0
                stages.append("sync")
            else:
                lrs_hist.append(lrs)
                stages.append("local")
        else:
            lrs_hist.append(0.0)
        # interval policies
        if not freeze_key:
            if s % var_interval == 0:
                var_counter += 1
                if var_counter == var_update_scaler:
                    var_counter = 0
                    var_interval *= 2
            allreduce_flag = (s + 1) % var_interval == 0
        else:
            local_counter += 1
            if local_counter == local_step_scaler:
                local_counter = 0
                local_interval = min(local_step_clipper, local_interval * 2)
        history.append([x.copy() for x in xs])
        real += 1
        # end of step()
        if s > var_freeze_step:
            freeze_key = True
            allreduce_flag = False
        if freeze_key and not reinit_errors:
            we = [np.zeros(npad, F32) for _ in range(p)]
            se = [np.zeros(npad // p, F32) for _ in range(p)]
            reinit_errors = True

    return dict(params=history, stages=stages, allreduce=flags, lrs=lrs_hist, intervals=intervals,
                exp_avg=ms, exp_avg_sq=v, momentum_accumulator=cbs, worker_errors=we, server_errors=se,
                padded_size=npad, final=dict(step=state_step, var_interval=var_interval, var_counter=var_counter,
                                             local_step_interval=local_interval,
                                             local_step_counter=local_counter, lrs=lrs,
                                             freeze_key=freeze_key))
