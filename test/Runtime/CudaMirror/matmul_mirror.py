#!/usr/bin/env python3
# matmul_mirror.py - the row-major to cuBLASLt mapping, checked in numpy.
#
# Part of the dsc project. Mirrors lib/Runtime/Cuda/Matmul.cu (gemm and
# matmulBackward) with cuBLASLt's column-major, strided-batch semantics
# emulated on flat arrays; all 8 transpose/broadcast variants, overwrite and
# accumulate. A manual check for machines without a GPU (needs numpy); not
# part of ctest.
import numpy as np
def lt(opA, A, Arows, Acols, Astride, opB, B, Brows, Bcols, Bstride, C, Crows, Ccols, Cstride, batch, alpha, beta):
    # column-major matrices in flat arrays, ld = rows
    for i in range(batch):
        a = A[i*Astride:i*Astride+Arows*Acols].reshape(Acols, Arows).T
        b = B[i*Bstride:i*Bstride+Brows*Bcols].reshape(Bcols, Brows).T
        if opA: a = a.T
        if opB: b = b.T
        c = C[i*Cstride:i*Cstride+Crows*Ccols].reshape(Ccols, Crows).T.copy()
        c = alpha*(a@b) + beta*c
        C[i*Cstride:i*Cstride+Crows*Ccols] = c.T.reshape(-1)
class S:
    def __init__(s, batch, m, n, k, ta=False, tb=False, bc=False):
        s.batch, s.m, s.n, s.k, s.transA, s.transB, s.broadcastB = batch, m, n, k, ta, tb, bc
def gemm(a, b, c, s, alpha, beta):
    batch, m = s.batch, s.m
    if s.broadcastB and not s.transA and batch > 1:
        m *= batch; batch = 1
    n, k = s.n, s.k
    lt(s.transB, b, k if s.transB else n, n if s.transB else k, 0 if s.broadcastB else k*n,
       s.transA, a, m if s.transA else k, k if s.transA else m, m*k,
       c, n, m, m*n, batch, alpha, beta)
def backward(a, b, dC, dA, dB, s, acc):
    beta = 1.0 if acc else 0.0
    B, m, n, k = s.batch, s.m, s.n, s.k
    if dA is not None:
        if not s.transA:
            gemm(dC, b, dA, S(B, m, k, n, False, not s.transB, s.broadcastB), 1, beta)
        elif not s.broadcastB:
            gemm(b, dC, dA, S(B, k, m, n, s.transB, True, False), 1, beta)
        else:
            for i in range(B):
                v = dA[i*k*m:(i+1)*k*m]
                gemm(b, dC[i*m*n:(i+1)*m*n], v, S(1, k, m, n, s.transB, True), 1, beta)
                dA[i*k*m:(i+1)*k*m] = v
    if dB is None: return
    if not s.broadcastB:
        if not s.transB: gemm(a, dC, dB, S(B, k, n, m, not s.transA, False), 1, beta)
        else: gemm(dC, a, dB, S(B, n, k, m, True, s.transA), 1, beta)
        return
    if not s.transA:
        if not s.transB: gemm(a, dC, dB, S(1, k, n, B*m, True, False), 1, beta)
        else: gemm(dC, a, dB, S(1, n, k, B*m, True, False), 1, beta)
        return
    for i in range(B):
        bi = beta if i == 0 else 1.0
        if not s.transB: gemm(a[i*m*k:(i+1)*m*k], dC[i*m*n:(i+1)*m*n], dB, S(1, k, n, m), 1, bi)
        else: gemm(dC[i*m*n:(i+1)*m*n], a[i*m*k:(i+1)*m*k], dB, S(1, n, k, m, True, True), 1, bi)
rng = np.random.default_rng(0)
for var in range(8):
    s = S(3, 5, 6, 4, bool(var & 1), bool(var & 2), bool(var & 4))
    nb = 1 if s.broadcastB else s.batch
    A = rng.standard_normal((s.batch, s.k, s.m) if s.transA else (s.batch, s.m, s.k))
    Bm = rng.standard_normal((nb, s.n, s.k) if s.transB else (nb, s.k, s.n))
    opA = A.transpose(0, 2, 1) if s.transA else A
    opB = Bm.transpose(0, 2, 1) if s.transB else Bm
    if s.broadcastB: opB = np.repeat(opB, s.batch, 0)
    C = opA @ opB
    dC = rng.standard_normal(C.shape)
    for acc in (False, True):
        c0 = rng.standard_normal(C.shape)
        c = c0.reshape(-1).copy()
        gemm(A.reshape(-1), Bm.reshape(-1), c, s, 1, 1.0 if acc else 0.0)
        want = C + (c0 if acc else 0)
        assert np.allclose(c.reshape(C.shape), want), ("fwd", var, acc)
        dA0 = rng.standard_normal(A.shape); dB0 = rng.standard_normal(Bm.shape)
        dA = dA0.reshape(-1).copy(); dB = dB0.reshape(-1).copy()
        backward(A.reshape(-1), Bm.reshape(-1), dC.reshape(-1), dA, dB, s, acc)
        gopA = dC @ opB.transpose(0, 2, 1)
        gopB = opA.transpose(0, 2, 1) @ dC
        wA = gopA.transpose(0, 2, 1) if s.transA else gopA
        wB = gopB.transpose(0, 2, 1) if s.transB else gopB
        if s.broadcastB: wB = wB.sum(0, keepdims=True)
        assert np.allclose(dA.reshape(A.shape), wA + (dA0 if acc else 0)), ("dA", var, acc)
        assert np.allclose(dB.reshape(Bm.shape), wB + (dB0 if acc else 0)), ("dB", var, acc)
print("matmul mapping ok for all 8 variants, overwrite and accumulate")
