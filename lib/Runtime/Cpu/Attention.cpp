//===- Attention.cpp - Fused causal self-attention forward and backward ---===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Multi-head causal attention on [B, S, H] q/k/v, FlashAttention-style: per
// head and block of query rows, scores live only in a per-thread scratch.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/CpuKernels.h"

#include "KernelSupport.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <omp.h>

using namespace dsc::rt;
using detail::fastExp;
using detail::gemm;

// Query rows per block: a [kRowBlock, <= S] scores block stays in L2, and
// keys past the block's last row (all masked) are never multiplied, which
// halves the FLOPs of a dense S x S product.
static constexpr int64_t kRowBlock = 64;

namespace {
int64_t slotSize(const AttentionShape &s) {
  return 2 * std::min(kRowBlock, s.seq) * s.seq;
}

/// Threads to use: one per head at most, and no more than scratch slots.
int teamSize(const AttentionShape &s, int64_t scratchSize) {
  const int64_t slot = slotSize(s);
  const int64_t slots = slot > 0 ? scratchSize / slot : 0;
  return int(std::min<int64_t>(
      {slots, s.batch * s.heads, int64_t(omp_get_max_threads())}));
}

/// Softmax of row[0, n) in place; returns its logsumexp.
template <typename T> T softmaxPrefix(T *row, int64_t n) {
  T mx = row[0];
#pragma omp simd reduction(max : mx)
  for (int64_t j = 1; j < n; ++j)
    mx = row[j] > mx ? row[j] : mx;
  T sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n; ++j) {
    T e = fastExp(row[j] - mx);
    row[j] = e;
    sum += e;
  }
  const T inv = T(1) / sum;
#pragma omp simd
  for (int64_t j = 0; j < n; ++j)
    row[j] *= inv;
  return mx + std::log(sum);
}
} // namespace

int64_t dsc::rt::attentionScratchSize(const AttentionShape &s, int threads) {
  return int64_t(std::max(threads, 1)) * slotSize(s);
}

template <typename T>
bool dsc::rt::attentionForward(const T *q, const T *k, const T *v, T *out,
                               T *lse, T *scratch, int64_t scratchSize,
                               const AttentionShape &s) {
  const int threads = teamSize(s, scratchSize);
  if (threads < 1)
    return false;
  detail::pinBlasThreads();
  const int64_t S = s.seq, H = s.hidden, hd = s.headDim();
  const T scale = T(1) / std::sqrt(T(hd));
  const int64_t heads = s.batch * s.heads;
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t bh = 0; bh < heads; ++bh) {
    const int64_t b = bh / s.heads, h = bh % s.heads;
    const int64_t off = b * S * H + h * hd;
    T *p = scratch + omp_get_thread_num() * slotSize(s);
    T *l = lse + bh * S;
    for (int64_t r0 = 0; r0 < S; r0 += kRowBlock) {
      const int64_t r1 = std::min(S, r0 + kRowBlock), rows = r1 - r0;
      // Scores of rows [r0, r1) against keys [0, r1), leading dimension r1.
      gemm(false, true, rows, r1, hd, scale, q + off + r0 * H, H, k + off, H,
           T(0), p, r1);
      for (int64_t i = r0; i < r1; ++i) {
        T *row = p + (i - r0) * r1;
        l[i] = softmaxPrefix(row, i + 1);
        std::memset(row + i + 1, 0, sizeof(T) * (r1 - i - 1));
      }
      gemm(false, false, rows, hd, r1, T(1), p, r1, v + off, H, T(0),
           out + off + r0 * H, H);
    }
  }
  return true;
}

template <typename T>
bool dsc::rt::attentionBackward(const T *q, const T *k, const T *v,
                                const T *lse, const T *dOut, T *dq, T *dk,
                                T *dv, T *scratch, int64_t scratchSize,
                                const AttentionShape &s, bool accumulate) {
  const int threads = teamSize(s, scratchSize);
  if (threads < 1)
    return false;
  detail::pinBlasThreads();
  const int64_t S = s.seq, H = s.hidden, hd = s.headDim();
  const T scale = T(1) / std::sqrt(T(hd));
  const int64_t heads = s.batch * s.heads;
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t bh = 0; bh < heads; ++bh) {
    const int64_t b = bh / s.heads, h = bh % s.heads;
    const int64_t off = b * S * H + h * hd;
    const T *l = lse + bh * S;
    const T *dO = dOut + off;
    T *p = scratch + omp_get_thread_num() * slotSize(s);
    T *dS = p + slotSize(s) / 2;
    // dK and dV sum over query-row blocks, in block order; start from zero
    // unless accumulating.
    if (!accumulate)
      for (int64_t r = 0; r < S; ++r) {
        if (dk)
          std::memset(dk + off + r * H, 0, sizeof(T) * hd);
        if (dv)
          std::memset(dv + off + r * H, 0, sizeof(T) * hd);
      }
    for (int64_t r0 = 0; r0 < S; r0 += kRowBlock) {
      const int64_t r1 = std::min(S, r0 + kRowBlock), rows = r1 - r0;
      // P = exp(scores - lse) on the causal prefix, 0 above the diagonal.
      gemm(false, true, rows, r1, hd, scale, q + off + r0 * H, H, k + off, H,
           T(0), p, r1);
      for (int64_t i = r0; i < r1; ++i) {
        T *row = p + (i - r0) * r1;
        const T li = l[i];
#pragma omp simd
        for (int64_t j = 0; j <= i; ++j)
          row[j] = fastExp(row[j] - li);
        std::memset(row + i + 1, 0, sizeof(T) * (r1 - i - 1));
      }
      // dV[0:r1] += P^T dO[r0:r1].
      if (dv)
        gemm(true, false, r1, hd, rows, T(1), p, r1, dO + r0 * H, H, T(1),
             dv + off, H);
      if (!dq && !dk)
        continue;
      // dP = dO V^T; dS = P * (dP - rowsum(P * dP)); dS = 0 where P = 0.
      gemm(false, true, rows, r1, hd, T(1), dO + r0 * H, H, v + off, H, T(0),
           dS, r1);
      for (int64_t i = r0; i < r1; ++i) {
        const T *pr = p + (i - r0) * r1;
        T *dr = dS + (i - r0) * r1;
        T dot = 0;
#pragma omp simd reduction(+ : dot)
        for (int64_t j = 0; j <= i; ++j)
          dot += pr[j] * dr[j];
#pragma omp simd
        for (int64_t j = 0; j <= i; ++j)
          dr[j] = pr[j] * (dr[j] - dot);
        std::memset(dr + i + 1, 0, sizeof(T) * (r1 - i - 1));
      }
      // scores = scale * Q K^T: dQ = scale * dS K, dK = scale * dS^T Q.
      if (dq)
        gemm(false, false, rows, hd, r1, scale, dS, r1, k + off, H,
             accumulate ? T(1) : T(0), dq + off + r0 * H, H);
      if (dk)
        gemm(true, false, r1, hd, rows, scale, dS, r1, q + off + r0 * H, H,
             T(1), dk + off, H);
    }
  }
  return true;
}

#define INSTANTIATE(T)                                                         \
  template bool dsc::rt::attentionForward<T>(const T *, const T *, const T *,  \
                                             T *, T *, T *, int64_t,           \
                                             const AttentionShape &);          \
  template bool dsc::rt::attentionBackward<T>(                                 \
      const T *, const T *, const T *, const T *, const T *, T *, T *, T *,    \
      T *, int64_t, const AttentionShape &, bool);
DSC_RT_INSTANTIATE_FLOAT_DOUBLE(INSTANTIATE)
