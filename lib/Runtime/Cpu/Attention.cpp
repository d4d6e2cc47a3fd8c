//===- Attention.cpp - Fused self-attention forward and backward ----------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Multi-head attention on [B, S, H] q/k/v, FlashAttention-style: per head and
// block of query rows, scores live only in a per-thread scratch block.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/CpuKernels.h"

#include "KernelSupport.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <omp.h>
#include <vector>

using namespace dsc::rt;
using detail::fastExp;
using detail::gemm;

namespace {
// Query rows per block: a [rowBlock, <= S] scores block stays in L2, and
// with a causal mask the keys past the block's last row are never
// multiplied, which halves the FLOPs of a dense S x S product. 128 beat 32
// and 64 on GPT-2 shapes (hd = 64): the GEMMs get a longer M.
constexpr int64_t kDefaultRowBlock = 128;

int64_t rowBlockOf(const AttentionShape &s) {
  return std::max<int64_t>(1, s.rowBlock > 0 ? s.rowBlock : kDefaultRowBlock);
}

int64_t slotSize(const AttentionShape &s) {
  return 2 * std::min(rowBlockOf(s), s.seq) * s.seq;
}

/// Threads to use: at most one per head and, with caller scratch, one per
/// scratch slot (0 when it has no room).
int teamSize(const AttentionShape &s, const void *scratch,
             int64_t scratchSize) {
  int64_t limit = std::min<int64_t>(s.batch * s.heads, omp_get_max_threads());
  if (scratch) {
    const int64_t slot = slotSize(s);
    limit = std::min(limit, slot > 0 ? scratchSize / slot : 0);
  }
  return int(std::max<int64_t>(limit, 0));
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

/// The per-(batch, head) view both kernels share.
struct Head {
  int64_t off;      // element offset of the head's [S, hd] columns
  uint64_t maskRow; // dropout index of (i = 0, j = 0) of this head
};

Head headOf(const AttentionShape &s, int64_t bh) {
  const int64_t b = bh / s.heads, h = bh % s.heads;
  const int64_t total = s.totalHeads ? s.totalHeads : s.heads;
  Head r;
  r.off = b * s.seq * s.hidden + h * s.headDim();
  r.maskRow = uint64_t(((s.batchOffset + b) * total + s.headOffset + h) *
                       s.seq * s.seq);
  return r;
}

/// row[j] *= keep(j) / (1 - p) for j < n: the attention-dropout mask of
/// query row i, recomputed from the counter-based RNG.
template <typename T>
void applyDropout(T *row, int64_t n, uint64_t key, uint64_t index0,
                  uint64_t threshold, T inv) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j)
    row[j] = detail::dropoutKeepBit(key, index0 + uint64_t(j), threshold)
                 ? row[j] * inv
                 : T(0);
}
} // namespace

int64_t dsc::rt::attentionScratchSize(const AttentionShape &s, int threads) {
  return int64_t(std::max(threads, 1)) * slotSize(s);
}

template <typename T>
bool dsc::rt::attentionForward(const T *q, const T *k, const T *v, T *out,
                               T *lse, T *scratch, int64_t scratchSize,
                               const AttentionShape &s) {
  const int threads = teamSize(s, scratch, scratchSize);
  if (threads < 1)
    return false;
  std::vector<T> own;
  if (!scratch) {
    own.resize(attentionScratchSize(s, threads));
    scratch = own.data();
  }
  detail::pinBlasThreads();
  const int64_t S = s.seq, H = s.hidden, hd = s.headDim(), rb = rowBlockOf(s);
  const T scale = T(1) / std::sqrt(T(hd));
  const bool drop = s.dropout > 0.0f;
  const uint64_t key = detail::dropoutKey(s.seed),
                 thr = detail::dropoutThreshold(s.dropout);
  const T inv = s.dropout < 1.0f ? T(1) / (T(1) - T(s.dropout)) : T(0);
  const int64_t heads = s.batch * s.heads;
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t bh = 0; bh < heads; ++bh) {
    const Head hv = headOf(s, bh);
    T *p = scratch + omp_get_thread_num() * slotSize(s);
    for (int64_t r0 = 0; r0 < S; r0 += rb) {
      const int64_t r1 = std::min(S, r0 + rb), rows = r1 - r0;
      const int64_t cols = s.causal ? r1 : S;
      // Scores of rows [r0, r1) against keys [0, cols), leading dim cols.
      gemm(false, true, rows, cols, hd, scale, q + hv.off + r0 * H, H,
           k + hv.off, H, T(0), p, cols);
      for (int64_t i = r0; i < r1; ++i) {
        T *row = p + (i - r0) * cols;
        const int64_t n = s.causal ? i + 1 : S, lo = s.firstKey(i);
        T l = softmaxPrefix(row + lo, n - lo);
        if (lse)
          lse[bh * S + i] = l;
        std::memset(row, 0, sizeof(T) * lo);
        std::memset(row + n, 0, sizeof(T) * (cols - n));
        if (drop)
          applyDropout(row, n, key, hv.maskRow + uint64_t(i * S), thr, inv);
      }
      gemm(false, false, rows, hd, cols, T(1), p, cols, v + hv.off, H, T(0),
           out + hv.off + r0 * H, H);
    }
  }
  return true;
}

template <typename T>
bool dsc::rt::attentionBackward(const T *q, const T *k, const T *v,
                                const T *lse, const T *dOut, T *dq, T *dk,
                                T *dv, T *scratch, int64_t scratchSize,
                                const AttentionShape &s,
                                AccumulateMask accumulate) {
  const int threads = teamSize(s, scratch, scratchSize);
  if (threads < 1)
    return false;
  std::vector<T> own;
  if (!scratch) {
    own.resize(attentionScratchSize(s, threads));
    scratch = own.data();
  }
  detail::pinBlasThreads();
  const int64_t S = s.seq, H = s.hidden, hd = s.headDim(), rb = rowBlockOf(s);
  const T scale = T(1) / std::sqrt(T(hd));
  const bool drop = s.dropout > 0.0f;
  const uint64_t key = detail::dropoutKey(s.seed),
                 thr = detail::dropoutThreshold(s.dropout);
  const T inv = s.dropout < 1.0f ? T(1) / (T(1) - T(s.dropout)) : T(0);
  const int64_t heads = s.batch * s.heads;
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t bh = 0; bh < heads; ++bh) {
    const Head hv = headOf(s, bh);
    const int64_t off = hv.off;
    const T *dO = dOut + off;
    T *p = scratch + omp_get_thread_num() * slotSize(s);
    T *dS = p + slotSize(s) / 2;
    // dK and dV sum over query-row blocks, in block order; start from zero
    // unless accumulating.
    for (int64_t r = 0; r < S; ++r) {
      if (dk && !accumulate[1])
        std::memset(dk + off + r * H, 0, sizeof(T) * hd);
      if (dv && !accumulate[2])
        std::memset(dv + off + r * H, 0, sizeof(T) * hd);
    }
    for (int64_t r0 = 0; r0 < S; r0 += rb) {
      const int64_t r1 = std::min(S, r0 + rb), rows = r1 - r0;
      const int64_t cols = s.causal ? r1 : S;
      // P = softmax of the scores again (from lse when saved), 0 outside
      // the causal prefix (and before a sliding window).
      gemm(false, true, rows, cols, hd, scale, q + off + r0 * H, H, k + off, H,
           T(0), p, cols);
      for (int64_t i = r0; i < r1; ++i) {
        T *row = p + (i - r0) * cols;
        const int64_t n = s.causal ? i + 1 : S, lo = s.firstKey(i);
        if (lse) {
          const T li = lse[bh * S + i];
#pragma omp simd
          for (int64_t j = lo; j < n; ++j)
            row[j] = fastExp(row[j] - li);
        } else {
          (void)softmaxPrefix(row + lo, n - lo);
        }
        std::memset(row, 0, sizeof(T) * lo);
        std::memset(row + n, 0, sizeof(T) * (cols - n));
      }
      // dV[0:cols] += dropout(P)^T dO[r0:r1]; dS's slot holds dropout(P)
      // until the dP GEMM overwrites it.
      if (dv) {
        const T *pd = p;
        if (drop) {
          std::memcpy(dS, p, sizeof(T) * rows * cols);
          for (int64_t i = r0; i < r1; ++i)
            applyDropout(dS + (i - r0) * cols, s.causal ? i + 1 : S, key,
                         hv.maskRow + uint64_t(i * S), thr, inv);
          pd = dS;
        }
        gemm(true, false, cols, hd, rows, T(1), pd, cols, dO + r0 * H, H, T(1),
             dv + off, H);
      }
      if (!dq && !dk)
        continue;
      // dP = dropout'(dO V^T); dS = P * (dP - rowsum(P * dP)).
      gemm(false, true, rows, cols, hd, T(1), dO + r0 * H, H, v + off, H, T(0),
           dS, cols);
      for (int64_t i = r0; i < r1; ++i) {
        const int64_t n = s.causal ? i + 1 : S;
        const T *pr = p + (i - r0) * cols;
        T *dr = dS + (i - r0) * cols;
        if (drop)
          applyDropout(dr, n, key, hv.maskRow + uint64_t(i * S), thr, inv);
        T dot = 0;
#pragma omp simd reduction(+ : dot)
        for (int64_t j = 0; j < n; ++j)
          dot += pr[j] * dr[j];
#pragma omp simd
        for (int64_t j = 0; j < n; ++j)
          dr[j] = pr[j] * (dr[j] - dot);
        std::memset(dr + n, 0, sizeof(T) * (cols - n));
      }
      // scores = scale * Q K^T: dQ = scale * dS K, dK = scale * dS^T Q.
      if (dq)
        gemm(false, false, rows, hd, cols, scale, dS, cols, k + off, H,
             accumulate[0] ? T(1) : T(0), dq + off + r0 * H, H);
      if (dk)
        gemm(true, false, cols, hd, rows, scale, dS, cols, q + off + r0 * H, H,
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
      T *, int64_t, const AttentionShape &, AccumulateMask);
DSC_RT_INSTANTIATE_FLOAT_DOUBLE(INSTANTIATE)
