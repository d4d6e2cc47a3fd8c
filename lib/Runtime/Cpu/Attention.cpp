//===- Attention.cpp - Fused causal self-attention forward and backward ---===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Multi-head causal attention on [B, S, H] q/k/v: per (batch, head) two GEMMs
// read the head's columns in place (leading dimension H), no head transposes.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/CpuKernels.h"

#include "KernelSupport.h"

#include <cmath>
#include <cstring>

using namespace dsc::rt;
using detail::gemm;

// The (batch, head) loop is serial and each GEMM uses OpenBLAS's threads;
// the row-wise softmax between them is OpenMP-parallel. Nesting OpenMP
// around a pthreads OpenBLAS would oversubscribe the cores.

template <typename T>
void dsc::rt::attentionForward(const T *q, const T *k, const T *v, T *out,
                               T *probs, const AttentionShape &s) {
  const int64_t S = s.seq, H = s.hidden, hd = s.headDim();
  const T scale = T(1) / std::sqrt(T(hd));
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t off = b * S * H + h * hd;
      T *p = probs + (b * s.heads + h) * S * S;
      gemm(false, true, S, S, hd, scale, q + off, H, k + off, H, T(0), p, S);
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < S; ++i) {
        T *row = p + i * S;
        detail::softmaxRow(row, row, i + 1);
        std::memset(row + i + 1, 0, sizeof(T) * (S - i - 1));
      }
      gemm(false, false, S, hd, S, T(1), p, S, v + off, H, T(0), out + off, H);
    }
  }
}

template <typename T>
void dsc::rt::attentionBackward(const T *q, const T *k, const T *v,
                                const T *probs, const T *dOut, T *dq, T *dk,
                                T *dv, T *scratch, const AttentionShape &s,
                                bool accumulate) {
  const int64_t S = s.seq, H = s.hidden, hd = s.headDim();
  const T scale = T(1) / std::sqrt(T(hd));
  const T beta = accumulate ? T(1) : T(0);
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t off = b * S * H + h * hd;
      const T *p = probs + (b * s.heads + h) * S * S;
      const T *dO = dOut + off;
      // dV = P^T dO.
      if (dv)
        gemm(true, false, S, hd, S, T(1), p, S, dO, H, beta, dv + off, H);
      if (!dq && !dk)
        continue;
      // dP = dO V^T, then dS = P * (dP - rowsum(P * dP)) in place; the
      // masked entries have P = 0 and so dS = 0 there.
      T *dS = scratch;
      gemm(false, true, S, S, hd, T(1), dO, H, v + off, H, T(0), dS, S);
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < S; ++i) {
        const T *pr = p + i * S;
        T *dr = dS + i * S;
        T dot = 0;
#pragma omp simd reduction(+ : dot)
        for (int64_t j = 0; j <= i; ++j)
          dot += pr[j] * dr[j];
#pragma omp simd
        for (int64_t j = 0; j <= i; ++j)
          dr[j] = pr[j] * (dr[j] - dot);
        std::memset(dr + i + 1, 0, sizeof(T) * (S - i - 1));
      }
      // scores = scale * Q K^T, so dQ = scale * dS K and dK = scale * dS^T Q.
      if (dq)
        gemm(false, false, S, hd, S, scale, dS, S, k + off, H, beta, dq + off,
             H);
      if (dk)
        gemm(true, false, S, hd, S, scale, dS, S, q + off, H, beta, dk + off,
             H);
    }
  }
}

#define INSTANTIATE(T)                                                         \
  template void dsc::rt::attentionForward<T>(                                  \
      const T *, const T *, const T *, T *, T *, const AttentionShape &);      \
  template void dsc::rt::attentionBackward<T>(                                 \
      const T *, const T *, const T *, const T *, const T *, T *, T *, T *,    \
      T *, const AttentionShape &, bool);
DSC_RT_INSTANTIATE_FLOAT_DOUBLE(INSTANTIATE)
