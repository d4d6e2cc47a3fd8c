//===- Moe.cu - Mixture-of-Experts routing, dispatch, combine on CUDA -----===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The CPU MoE kernels (lib/Runtime/Cpu/MoeKernels.cpp, contract in
// MoeKernels.h) on the device, making the same routing decisions: choices,
// probabilities and ranks are computed in double from the same logits, and
// every step the CPU kernel runs in one fixed order is either run in that
// order here or replaced by an order-free equivalent (integer counts, stable
// sorts, integer prefix sums). No float atomics anywhere.
//
// Where the CPU kernel is sequential:
//  - slot positions (a pair's rank at its expert in slot order): a stable
//    radix sort of the pairs by expert, in slot order, gives every expert's
//    pairs in slot order, so a pair's position is its index in its segment;
//  - Probability/Random drops of an over-full expert: each pair counts the
//    pairs of its expert that outrank it, O(n_e) per pair and O(sum n_e^2)
//    in all (n_e <= tokens); cheap at the capacities MoE layers use, but a
//    segmented sort would scale better for experts with very many pairs;
//  - the aux loss: P_e's partial sums over the CPU's 64-token blocks in
//    token order, then per expert over blocks, then over experts, in one
//    thread each, as the CPU adds them;
//  - combine and the route VJP need each token's slots in ascending order:
//    a stable radix sort of (token, slot) builds that inverse map.
//
//===----------------------------------------------------------------------===//

#include "CudaSupport.cuh"

#include "dsc/Runtime/MoeKernels.h"

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <cfloat>
#include <climits>

// Not `using namespace dsc::rt`: its `cuda` would make libcu++'s `::cuda`
// ambiguous in nvcc's generated stubs for the cub kernels.
using dsc::rt::MoeAuxCounts;
using dsc::rt::MoeDrop;
using dsc::rt::MoeNormalize;
using dsc::rt::MoeRouting;
using dsc::rt::MoeSlotOrder;
using dsc::rt::uniformDraw;
using namespace dsc::rt::cuda;
using namespace dsc::rt::cuda::detail;

namespace {

/// The CPU kernel's token block for P_e's partial sums (MoeKernels.cpp).
constexpr int64_t kTokenBlock = 64;
/// DeepSpeed's float32 eps in the AfterDrop denominator, as on the CPU.
constexpr double kNormalizeEps = FLT_EPSILON;
constexpr int kThreads = 256;

//===----------------------------------------------------------------------===//
// Scalar helpers, the CPU kernel's in device code
//===----------------------------------------------------------------------===//

template <typename T> __device__ __forceinline__ double toD(T x) {
  return double(toF(x));
}
/// One rounding from double to T (the CPU kernel's T(double)).
template <typename T> __device__ __forceinline__ T fromD(double x);
template <> __device__ __forceinline__ float fromD<float>(double x) {
  return float(x);
}
template <> __device__ __forceinline__ __nv_bfloat16 fromD(double x) {
  return __double2bfloat16(x);
}
template <> __device__ __forceinline__ __half fromD(double x) {
  return __double2half(x);
}

/// NaN sorts as -inf, so the choice and drop orders are total.
__device__ __forceinline__ double choiceKey(double v) {
  return isnan(v) ? -double(INFINITY) : v;
}

/// Larger logit first, ties to the lower expert (the CPU's choiceBefore).
template <typename T>
__device__ __forceinline__ bool choiceBefore(const T *row, int64_t a,
                                             int64_t b) {
  const double ka = choiceKey(toD(row[a])), kb = choiceKey(toD(row[b]));
  return ka > kb || (ka == kb && a < b);
}

/// The softmax statistics of one row, in double, in the CPU's order.
struct RowStats {
  double max;
  double sum;
  __device__ double prob(double x) const { return exp(x - max) / sum; }
  __device__ double logSumExp() const { return max + log(sum); }
};

template <typename T>
__device__ RowStats rowStats(const T *row, int64_t experts) {
  // std::max(m, v): a NaN v leaves m, as on the CPU.
  double m = -double(INFINITY);
  for (int64_t e = 0; e < experts; ++e) {
    const double v = toD(row[e]);
    m = m < v ? v : m;
  }
  double s = 0;
  for (int64_t e = 0; e < experts; ++e)
    s += exp(toD(row[e]) - m);
  return {m, s};
}

/// The random drop policy's draw for index t * E + e: the CPU backend's
/// (SplitMix64.h's uniformDraw), so both backends drop the same pairs.
__device__ __forceinline__ float moeDraw(uint64_t key, uint64_t i) {
  return uniformDraw(key, i);
}

/// Bits a radix sort needs for keys in [0, maxKey].
int keyBits(uint64_t maxKey) {
  int bits = 1;
  while (bits < 64 && (maxKey >> bits) != 0)
    ++bits;
  return bits;
}

/// Sub-allocations of one stream-ordered block, 256-byte aligned: laid out
/// once without a base to size it, then again over the allocation.
struct Carve {
  char *base = nullptr;
  size_t used = 0;
  template <typename U> U *take(int64_t n) {
    U *p = base ? reinterpret_cast<U *>(base + used) : nullptr;
    used += (size_t(std::max<int64_t>(n, 1)) * sizeof(U) + 255) & ~size_t(255);
    return p;
  }
};

#define DSC_MOE_LAUNCHED()                                                     \
  do {                                                                         \
    if (cudaError_t e_ = cudaGetLastError())                                   \
      return e_;                                                               \
  } while (0)

//===----------------------------------------------------------------------===//
// Routing kernels
//===----------------------------------------------------------------------===//

template <typename T>
__global__ void fillSlotsKernel(int32_t *slots, T *gates, int64_t n) {
  GRID_STRIDE(s, n) {
    slots[s] = -1;
    gates[s] = fromF<T>(0.0f);
  }
}

/// Per token: its k choices (the CPU's chooseExperts: each pick the first
/// expert after the previous in choice order) and, where asked, their
/// probabilities and the row's softmax statistics.
template <typename T>
__global__ void chooseKernel(const T *logits, int64_t nT, int64_t nE, int64_t k,
                             int32_t *choice, double *choiceP, double *rowMax,
                             double *rowSum) {
  GRID_STRIDE(t, nT) {
    const T *row = logits + t * nE;
    int32_t *ch = choice + t * k;
    int64_t prev = -1;
    for (int64_t j = 0; j < k; ++j) {
      int64_t best = -1;
      for (int64_t e = 0; e < nE; ++e) {
        if (prev >= 0 && !choiceBefore(row, prev, e))
          continue;
        if (best < 0 || choiceBefore(row, e, best))
          best = e;
      }
      ch[j] = int32_t(best);
      prev = best;
    }
    if (!choiceP)
      continue;
    const RowStats st = rowStats(row, nE);
    rowMax[t] = st.max;
    rowSum[t] = st.sum;
    for (int64_t j = 0; j < k; ++j)
      choiceP[t * k + j] = st.prob(toD(row[ch[j]]));
  }
}

/// Per expert, the pairs that count in f_e (an integer sum: any order).
__global__ void countChoicesKernel(const int32_t *choice, int64_t nT, int64_t k,
                                   int64_t counted,
                                   unsigned long long *counts) {
  GRID_STRIDE(i, nT * counted) {
    const int64_t t = i / counted, j = i % counted;
    atomicAdd(counts + choice[t * k + j], 1ull);
  }
}

/// The CPU's per-block partial sums: p[:, e] over each 64-token block in
/// token order (one thread per (block, expert)), and lse^2 (expert nE).
template <typename T>
__global__ void blockSumsKernel(const T *logits, const double *rowMax,
                                const double *rowSum, int64_t nT, int64_t nE,
                                int64_t nBlocks, double *blockP,
                                double *blockZ) {
  GRID_STRIDE(i, nBlocks * (nE + 1)) {
    const int64_t b = i / (nE + 1), e = i % (nE + 1);
    const int64_t end = min(nT, (b + 1) * kTokenBlock);
    double sum = 0;
    for (int64_t t = b * kTokenBlock; t < end; ++t) {
      const RowStats st{rowMax[t], rowSum[t]};
      if (e == nE) {
        const double lse = st.logSumExp();
        sum += lse * lse;
      } else {
        sum += st.prob(toD(logits[t * nE + e]));
      }
    }
    if (e == nE)
      blockZ[b] = sum;
    else
      blockP[b * nE + e] = sum;
  }
}

/// aux = auxCoeff * l_aux + zCoeff * z, one block: each expert's P_e over
/// the blocks in order, then thread 0 over experts and blocks in order.
template <typename T>
__global__ void auxKernel(const double *blockP, const double *blockZ,
                          const unsigned long long *counts, int64_t nT,
                          int64_t nE, int64_t nBlocks, double auxCoeff,
                          double zCoeff, double *term, T *aux) {
  for (int64_t e = threadIdx.x; e < nE; e += blockDim.x) {
    double pe = 0;
    for (int64_t b = 0; b < nBlocks; ++b)
      pe += blockP[b * nE + e];
    term[e] = (pe / double(nT)) * (double(counts[e]) / double(nT));
  }
  __syncthreads();
  if (threadIdx.x != 0)
    return;
  double lAux = 0, z = 0;
  for (int64_t e = 0; e < nE; ++e)
    lAux += term[e];
  lAux *= double(nE);
  for (int64_t b = 0; b < nBlocks; ++b)
    z += blockZ[b];
  z /= double(nT);
  *aux = fromD<T>(auxCoeff * lAux + zCoeff * z);
}

/// The pairs in slot order, keyed by expert, for the stable sort by expert.
__global__ void slotOrderKernel(const int32_t *choice, int64_t nT, int64_t k,
                                bool choiceMajor, int64_t nPairs,
                                uint32_t *keys, int32_t *pairs) {
  GRID_STRIDE(i, nPairs) {
    const int64_t p = choiceMajor ? (i % nT) * k + i / nT : i;
    keys[i] = uint32_t(choice[p]);
    pairs[i] = int32_t(p);
  }
}

/// Each key's segment [begin, end) in a sorted key array (begin and end
/// zeroed first, so absent keys get empty segments).
__global__ void segmentsKernel(const uint32_t *keys, int64_t n, int32_t *begin,
                               int32_t *end) {
  GRID_STRIDE(i, n) {
    const uint32_t key = keys[i];
    if (i == 0 || keys[i - 1] != key)
      begin[key] = int32_t(i);
    if (i == n - 1 || keys[i + 1] != key)
      end[key] = int32_t(i + 1);
  }
}

/// The CPU moeRoute's loads: every expert's pairs (all k choices) before
/// dropping.
__global__ void loadsKernel(const int32_t *begin, const int32_t *end,
                            int64_t nE, int64_t *loads) {
  GRID_STRIDE(e, nE) { loads[e] = int64_t(end[e]) - int64_t(begin[e]); }
}

/// Drop by position: a pair's position at its expert is its index in the
/// expert's segment; it is kept iff it is below capacity.
__global__ void positionSlotsKernel(const uint32_t *keys, const int32_t *pairs,
                                    const int32_t *begin, int64_t n,
                                    int64_t cap, int32_t *slotOf) {
  GRID_STRIDE(i, n) {
    const int64_t j = i - begin[keys[i]];
    slotOf[pairs[i]] = j < cap ? int32_t(j) : -1;
  }
}

/// Each sorted pair's drop score: its probability or its draw.
__global__ void scoreKernel(const int32_t *pairs, const int32_t *choice,
                            const double *choiceP, int64_t n, int64_t nE,
                            int64_t k, bool byDraw, uint64_t drawKey,
                            double *score) {
  GRID_STRIDE(i, n) {
    const int64_t p = pairs[i];
    const double s =
        byDraw ? double(moeDraw(drawKey, uint64_t((p / k) * nE + choice[p])))
               : choiceP[p];
    score[i] = choiceKey(s);
  }
}

/// Keep a pair of an over-full expert iff fewer than `cap` of its expert's
/// pairs outrank it (higher score, ties to the lower pair index, which is
/// the lower token): the CPU's nth_element partition, as a count.
__global__ void keepByScoreKernel(const uint32_t *keys, const int32_t *pairs,
                                  const double *score, const int32_t *begin,
                                  const int32_t *end, int64_t n, int64_t cap,
                                  int32_t *keep) {
  GRID_STRIDE(i, n) {
    const uint32_t e = keys[i];
    const int64_t b = begin[e], en = end[e];
    if (en - b <= cap) {
      keep[i] = 1;
      continue;
    }
    const double sp = score[i];
    const int32_t p = pairs[i];
    int64_t above = 0;
    for (int64_t q = b; q < en; ++q) {
      const double sq = score[q];
      above += (sq > sp || (sq == sp && pairs[q] < p)) ? 1 : 0;
    }
    keep[i] = above < cap ? 1 : 0;
  }
}

/// Kept pairs renumbered in slot order: their rank among their expert's
/// kept pairs, from the exclusive prefix sum of the keep flags.
__global__ void renumberKernel(const uint32_t *keys, const int32_t *pairs,
                               const int32_t *begin, const int32_t *keep,
                               const int32_t *keptBefore, int64_t n,
                               int32_t *slotOf) {
  GRID_STRIDE(i, n) {
    slotOf[pairs[i]] =
        keep[i] ? keptBefore[i] - keptBefore[begin[keys[i]]] : -1;
  }
}

/// Per token: its kept pairs' slots and weights (the CPU's last loop).
template <typename T>
__global__ void weightsKernel(const int32_t *choice, const double *choiceP,
                              const int32_t *slotOf, int64_t nT, int64_t k,
                              int64_t cap, MoeNormalize normalize,
                              int32_t *slots, T *gates,
                              unsigned long long *dropped) {
  GRID_STRIDE(t, nT) {
    const int32_t *ch = choice + t * k;
    const double *pc = choiceP + t * k;
    const int32_t *so = slotOf + t * k;
    double keptSum = 0, allSum = 0;
    for (int64_t j = 0; j < k; ++j) {
      allSum += pc[j];
      if (so[j] >= 0)
        keptSum += pc[j];
    }
    double denom = 1.0;
    if (normalize == MoeNormalize::AfterDrop)
      denom = keptSum < kNormalizeEps ? kNormalizeEps : keptSum; // std::max
    else if (normalize == MoeNormalize::BeforeDrop)
      denom = allSum;
    unsigned long long lost = 0;
    for (int64_t j = 0; j < k; ++j) {
      if (so[j] < 0) {
        ++lost;
        continue;
      }
      const int64_t s = int64_t(ch[j]) * cap + so[j];
      slots[s] = int32_t(t);
      gates[s] = fromD<T>(pc[j] / denom);
    }
    if (lost && dropped)
      atomicAdd(dropped, lost);
  }
}

//===----------------------------------------------------------------------===//
// The inverse map token -> its slots in ascending order
//===----------------------------------------------------------------------===//

/// Keys token + 1 (0 for empty or bad slots, which sort first and are
/// skipped), values the slot; counts the bad ones.
__global__ void tokenKeysKernel(const int32_t *slots, int64_t slotCount,
                                int64_t tokens, uint32_t *keys, int32_t *values,
                                unsigned long long *bad) {
  GRID_STRIDE(s, slotCount) {
    const int64_t t = slots[s];
    const bool valid = t >= 0 && t < tokens;
    keys[s] = valid ? uint32_t(t + 1) : 0u;
    values[s] = int32_t(s);
    if (t != -1 && !valid && bad)
      atomicAdd(bad, 1ull);
  }
}

/// Token t's slots are sorted[begin[t + 1], end[t + 1]), ascending (the
/// sort is stable).
struct TokenSlots {
  const int32_t *sorted = nullptr;
  const int32_t *begin = nullptr;
  const int32_t *end = nullptr;
};

/// Scratch of buildTokenSlots, carved from `c`.
struct TokenSlotsScratch {
  uint32_t *keysIn, *keysOut;
  int32_t *valuesIn, *valuesOut, *begin, *end;
  void carve(Carve &c, int64_t slotCount, int64_t tokens) {
    keysIn = c.take<uint32_t>(slotCount);
    keysOut = c.take<uint32_t>(slotCount);
    valuesIn = c.take<int32_t>(slotCount);
    valuesOut = c.take<int32_t>(slotCount);
    begin = c.take<int32_t>(tokens + 1);
    end = c.take<int32_t>(tokens + 1);
  }
};

size_t tokenSortBytes(int64_t slotCount, int64_t tokens, cudaStream_t stream) {
  size_t bytes = 0;
  cub::DeviceRadixSort::SortPairs(nullptr, bytes, (const uint32_t *)nullptr,
                                  (uint32_t *)nullptr, (const int32_t *)nullptr,
                                  (int32_t *)nullptr, int(slotCount), 0,
                                  keyBits(uint64_t(tokens)), stream);
  return bytes;
}

cudaError_t buildTokenSlots(const int32_t *slots, int64_t slotCount,
                            int64_t tokens, const TokenSlotsScratch &s,
                            void *cubTemp, size_t cubBytes,
                            unsigned long long *bad, TokenSlots &out,
                            cudaStream_t stream) {
  if (cudaError_t e = cudaMemsetAsync(
          s.begin, 0, sizeof(int32_t) * size_t(tokens + 1), stream))
    return e;
  if (cudaError_t e = cudaMemsetAsync(
          s.end, 0, sizeof(int32_t) * size_t(tokens + 1), stream))
    return e;
  out = {s.valuesOut, s.begin, s.end};
  if (slotCount == 0)
    return cudaSuccess;
  tokenKeysKernel<<<gridFor(slotCount), kThreads, 0, stream>>>(
      slots, slotCount, tokens, s.keysIn, s.valuesIn, bad);
  DSC_MOE_LAUNCHED();
  if (cudaError_t e = cub::DeviceRadixSort::SortPairs(
          cubTemp, cubBytes, s.keysIn, s.keysOut, s.valuesIn, s.valuesOut,
          int(slotCount), 0, keyBits(uint64_t(tokens)), stream))
    return e;
  segmentsKernel<<<gridFor(slotCount), kThreads, 0, stream>>>(
      s.keysOut, slotCount, s.begin, s.end);
  DSC_MOE_LAUNCHED();
  return cudaSuccess;
}

//===----------------------------------------------------------------------===//
// Route backward
//===----------------------------------------------------------------------===//

/// d aux / d p[:, e] = dAux * auxCoeff * E * f_e / T, as the CPU writes it.
template <typename T>
__global__ void auxGradKernel(const unsigned long long *counts, const T *dAux,
                              int64_t nT, int64_t nE, double auxCoeff,
                              double *dpAux) {
  GRID_STRIDE(e, nE) {
    const double dA = dAux ? toD(*dAux) : 0.0;
    dpAux[e] = dA * auxCoeff * double(nE) * double(counts[e]) /
               (double(nT) * double(nT));
  }
}

/// Per token, the CPU kernel's formulas: its slots (ascending) mark its
/// kept choices and sum their gate gradients, then the normalization's and
/// the softmax's VJPs.
template <typename T>
__global__ void
routeBackwardKernel(const T *logits, const int32_t *choice, TokenSlots bySlot,
                    const T *dGates, const T *dAux, const double *dpAux,
                    int64_t nT, int64_t nE, int64_t k, int64_t cap,
                    MoeNormalize normalize, double zCoeff, char *kept,
                    double *dGate, T *dLogits, bool acc) {
  GRID_STRIDE(t, nT) {
    const T *row = logits + t * nE;
    const int32_t *ch = choice + t * k;
    char *kp = kept + t * k;
    double *dg = dGate + t * k;
    for (int64_t j = 0; j < k; ++j) {
      kp[j] = 0;
      dg[j] = 0.0;
    }
    for (int64_t i = bySlot.begin[t + 1]; i < bySlot.end[t + 1]; ++i) {
      const int64_t s = bySlot.sorted[i], e = s / cap;
      for (int64_t j = 0; j < k; ++j)
        if (ch[j] == e) {
          kp[j] = 1;
          dg[j] += dGates ? toD(dGates[s]) : 0.0;
          break;
        }
    }
    const RowStats st = rowStats(row, nE);
    if (normalize != MoeNormalize::None) {
      double keptSum = 0, allSum = 0, gp = 0;
      for (int64_t j = 0; j < k; ++j) {
        const double p = st.prob(toD(row[ch[j]]));
        allSum += p;
        if (kp[j]) {
          keptSum += p;
          gp += dg[j] * p;
        }
      }
      const bool after = normalize == MoeNormalize::AfterDrop;
      const double denom =
          after ? (keptSum < kNormalizeEps ? kNormalizeEps : keptSum) : allSum;
      const bool variable = !after || keptSum >= kNormalizeEps;
      const double shared = variable ? gp / (denom * denom) : 0.0;
      for (int64_t j = 0; j < k; ++j) {
        const double own = kp[j] ? dg[j] / denom : 0.0;
        const bool inDenom = after ? kp[j] != 0 : true;
        dg[j] = own - (inDenom ? shared : 0.0);
      }
    } else {
      for (int64_t j = 0; j < k; ++j)
        if (!kp[j])
          dg[j] = 0.0;
    }
    auto dProb = [&](int64_t e) {
      const double d = dpAux[e];
      for (int64_t j = 0; j < k; ++j)
        if (ch[j] == e)
          return d + dg[j];
      return d;
    };
    double dot = 0;
    for (int64_t e = 0; e < nE; ++e)
      dot += st.prob(toD(row[e])) * dProb(e);
    const double dA = dAux ? toD(*dAux) : 0.0;
    const double dz = dA * zCoeff * 2.0 / double(nT) * st.logSumExp();
    T *out = dLogits + t * nE;
    for (int64_t e = 0; e < nE; ++e) {
      const double v = st.prob(toD(row[e])) * (dProb(e) - dot + dz);
      out[e] = acc ? fromF<T>(toF(out[e]) + float(v)) : fromD<T>(v);
    }
  }
}

//===----------------------------------------------------------------------===//
// Dispatch, combine, gates gradient
//===----------------------------------------------------------------------===//

/// One block per slot row (grid-strided).
template <typename T>
__global__ void dispatchKernel(const T *x, const int32_t *slots, const T *gates,
                               T *xe, int64_t slotCount, int64_t hidden,
                               int64_t tokens, unsigned long long *bad) {
  for (int64_t s = blockIdx.x; s < slotCount; s += gridDim.x) {
    const int64_t t = slots[s];
    T *dst = xe + s * hidden;
    if (t < 0 || t >= tokens) {
      for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x)
        dst[c] = fromF<T>(0.0f);
      if (t != -1 && bad && threadIdx.x == 0)
        atomicAdd(bad, 1ull);
      continue;
    }
    const T *src = x + t * hidden;
    if (!gates) {
      for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x)
        dst[c] = src[c];
      continue;
    }
    const float g = toF(gates[s]);
    for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x)
      dst[c] = fromF<T>(g * toF(src[c]));
  }
}

/// One block per token row: its slots' rows in ascending slot order, in
/// fp32 (the CPU's order, so fp32 data give the CPU's sums).
template <typename T>
__global__ void combineKernel(const T *ye, TokenSlots bySlot, const T *gates,
                              T *y, int64_t tokens, int64_t hidden, bool acc) {
  for (int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    const int64_t b = bySlot.begin[t + 1], end = bySlot.end[t + 1];
    T *dst = y + t * hidden;
    for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x) {
      float v = acc ? toF(dst[c]) : 0.0f;
      for (int64_t i = b; i < end; ++i) {
        const int64_t s = bySlot.sorted[i];
        const float g = gates ? toF(gates[s]) : 1.0f;
        v += g * toF(ye[s * hidden + c]);
      }
      dst[c] = fromF<T>(v);
    }
  }
}

/// One warp per slot: the dot product in double, lane-strided partials
/// reduced by a fixed shuffle tree.
template <typename T>
__global__ void gatesGradKernel(const T *ye, const int32_t *slots, const T *dy,
                                T *dGates, int64_t slotCount, int64_t hidden,
                                int64_t tokens, bool acc) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x >> 5);
  for (int64_t s = int64_t(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
       s < slotCount; s += warps) {
    const int64_t t = slots[s];
    double d = 0;
    if (t >= 0 && t < tokens) {
      const T *a = ye + s * hidden;
      const T *b = dy + t * hidden;
      for (int64_t c = lane; c < hidden; c += 32)
        d += toD(a[c]) * toD(b[c]);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
      d += __shfl_xor_sync(0xffffffffu, d, o);
    if (lane == 0)
      dGates[s] = acc ? fromF<T>(toF(dGates[s]) + float(d)) : fromD<T>(d);
  }
}

unsigned rowBlocks(int64_t rows) {
  return unsigned(std::clamp<int64_t>(rows, 1, 65535 * 16));
}

} // namespace

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

template <typename T>
cudaError_t dsc::rt::cuda::moeRoute(const MoeRouting &r, const T *logits,
                                    uint64_t seed, int32_t *slots, T *gates,
                                    T *aux, int64_t *dropped, int64_t *loads,
                                    cudaStream_t stream) {
  const int64_t nT = std::max<int64_t>(r.tokens, 0);
  const int64_t nE = std::max<int64_t>(r.experts, 0);
  const int64_t cap = std::max<int64_t>(r.capacity, 0);
  const int64_t k = std::clamp<int64_t>(r.topK, 0, nE);
  const int64_t nPairs = nT * k;
  if (nPairs > INT32_MAX || nE * cap > INT32_MAX || nE > INT32_MAX)
    return cudaErrorInvalidValue;
  auto *droppedCount = reinterpret_cast<unsigned long long *>(dropped);
  if (dropped)
    if (cudaError_t e = cudaMemsetAsync(dropped, 0, sizeof(int64_t), stream))
      return e;
  // Loads stay zero without pairs; else the expert segments' sizes.
  if (loads)
    if (cudaError_t e =
            cudaMemsetAsync(loads, 0, sizeof(int64_t) * size_t(nE), stream))
      return e;
  if (nE * cap > 0) {
    fillSlotsKernel<<<gridFor(nE * cap), kThreads, 0, stream>>>(slots, gates,
                                                                nE * cap);
    DSC_MOE_LAUNCHED();
  }
  if (nT == 0 || nE == 0)
    return aux ? cudaMemsetAsync(aux, 0, sizeof(T), stream) : cudaSuccess;

  // Without dropTokens the caller sized C to fit: what still does not fit
  // drops by position, counted, as on the CPU.
  const bool byPosition = !r.dropTokens || r.drop == MoeDrop::Position;
  const int64_t nBlocks = (nT + kTokenBlock - 1) / kTokenBlock;
  const int64_t scored = byPosition ? 0 : nPairs;
  size_t cubBytes = 0, scanBytes = 0;
  const int expertBits = keyBits(uint64_t(nE - 1));
  cub::DeviceRadixSort::SortPairs(nullptr, cubBytes, (const uint32_t *)nullptr,
                                  (uint32_t *)nullptr, (const int32_t *)nullptr,
                                  (int32_t *)nullptr, int(nPairs), 0,
                                  expertBits, stream);
  cub::DeviceScan::ExclusiveSum(nullptr, scanBytes, (const int32_t *)nullptr,
                                (int32_t *)nullptr, int(scored), stream);
  cubBytes = std::max(cubBytes, scanBytes);

  struct {
    int32_t *choice, *pairsIn, *pairsOut, *begin, *end, *slotOf, *keep,
        *keptBefore;
    uint32_t *keysIn, *keysOut;
    double *choiceP, *rowMax, *rowSum, *blockP, *blockZ, *term, *score;
    unsigned long long *counts;
    void *cub;
  } s;
  auto layout = [&](Carve &c) {
    s.choice = c.take<int32_t>(nPairs);
    s.choiceP = c.take<double>(nPairs);
    s.rowMax = c.take<double>(nT);
    s.rowSum = c.take<double>(nT);
    s.counts = c.take<unsigned long long>(nE);
    s.term = c.take<double>(nE);
    s.blockP = c.take<double>(nBlocks * nE);
    s.blockZ = c.take<double>(nBlocks);
    s.keysIn = c.take<uint32_t>(nPairs);
    s.keysOut = c.take<uint32_t>(nPairs);
    s.pairsIn = c.take<int32_t>(nPairs);
    s.pairsOut = c.take<int32_t>(nPairs);
    s.begin = c.take<int32_t>(nE);
    s.end = c.take<int32_t>(nE);
    s.slotOf = c.take<int32_t>(nPairs);
    s.score = c.take<double>(scored);
    s.keep = c.take<int32_t>(scored);
    s.keptBefore = c.take<int32_t>(scored);
    s.cub = c.take<char>(int64_t(cubBytes));
  };
  Carve sizing;
  layout(sizing);
  Carve carve;
  if (cudaError_t e =
          cudaMallocAsync((void **)&carve.base, sizing.used, stream))
    return e;
  layout(carve);

  auto run = [&]() -> cudaError_t {
    chooseKernel<<<gridFor(nT), kThreads, 0, stream>>>(
        logits, nT, nE, k, s.choice, s.choiceP, s.rowMax, s.rowSum);
    DSC_MOE_LAUNCHED();

    // The losses, from pre-drop counts.
    if (aux) {
      const int64_t counted =
          std::min<int64_t>(r.auxCounts == MoeAuxCounts::AllChoices ? k : 1, k);
      if (cudaError_t e = cudaMemsetAsync(
              s.counts, 0, sizeof(unsigned long long) * size_t(nE), stream))
        return e;
      if (counted > 0) {
        countChoicesKernel<<<gridFor(nT * counted), kThreads, 0, stream>>>(
            s.choice, nT, k, counted, s.counts);
        DSC_MOE_LAUNCHED();
      }
      blockSumsKernel<<<gridFor(nBlocks * (nE + 1)), kThreads, 0, stream>>>(
          logits, s.rowMax, s.rowSum, nT, nE, nBlocks, s.blockP, s.blockZ);
      DSC_MOE_LAUNCHED();
      auxKernel<<<1, kThreads, 0, stream>>>(s.blockP, s.blockZ, s.counts, nT,
                                            nE, nBlocks, r.auxCoeff, r.zCoeff,
                                            s.term, aux);
      DSC_MOE_LAUNCHED();
    }

    if (nPairs > 0) {
      // Every expert's pairs in slot order: a stable sort by expert.
      slotOrderKernel<<<gridFor(nPairs), kThreads, 0, stream>>>(
          s.choice, nT, k, r.order == MoeSlotOrder::ChoiceMajor, nPairs,
          s.keysIn, s.pairsIn);
      DSC_MOE_LAUNCHED();
      if (cudaError_t e = cub::DeviceRadixSort::SortPairs(
              s.cub, cubBytes, s.keysIn, s.keysOut, s.pairsIn, s.pairsOut,
              int(nPairs), 0, expertBits, stream))
        return e;
      if (cudaError_t e =
              cudaMemsetAsync(s.begin, 0, sizeof(int32_t) * size_t(nE), stream))
        return e;
      if (cudaError_t e =
              cudaMemsetAsync(s.end, 0, sizeof(int32_t) * size_t(nE), stream))
        return e;
      segmentsKernel<<<gridFor(nPairs), kThreads, 0, stream>>>(
          s.keysOut, nPairs, s.begin, s.end);
      DSC_MOE_LAUNCHED();
      if (loads) {
        loadsKernel<<<gridFor(nE), kThreads, 0, stream>>>(s.begin, s.end, nE,
                                                          loads);
        DSC_MOE_LAUNCHED();
      }
      if (byPosition) {
        positionSlotsKernel<<<gridFor(nPairs), kThreads, 0, stream>>>(
            s.keysOut, s.pairsOut, s.begin, nPairs, cap, s.slotOf);
        DSC_MOE_LAUNCHED();
      } else {
        scoreKernel<<<gridFor(nPairs), kThreads, 0, stream>>>(
            s.pairsOut, s.choice, s.choiceP, nPairs, nE, k,
            r.drop == MoeDrop::Random, dropoutKey(seed), s.score);
        DSC_MOE_LAUNCHED();
        keepByScoreKernel<<<gridFor(nPairs), kThreads, 0, stream>>>(
            s.keysOut, s.pairsOut, s.score, s.begin, s.end, nPairs, cap,
            s.keep);
        DSC_MOE_LAUNCHED();
        if (cudaError_t e = cub::DeviceScan::ExclusiveSum(
                s.cub, cubBytes, s.keep, s.keptBefore, int(nPairs), stream))
          return e;
        renumberKernel<<<gridFor(nPairs), kThreads, 0, stream>>>(
            s.keysOut, s.pairsOut, s.begin, s.keep, s.keptBefore, nPairs,
            s.slotOf);
        DSC_MOE_LAUNCHED();
      }
    }

    weightsKernel<<<gridFor(nT), kThreads, 0, stream>>>(
        s.choice, s.choiceP, s.slotOf, nT, k, cap, r.normalize, slots, gates,
        droppedCount);
    DSC_MOE_LAUNCHED();
    return cudaSuccess;
  };
  const cudaError_t e = run();
  const cudaError_t freed = cudaFreeAsync(carve.base, stream);
  return e ? e : freed;
}

template <typename T>
cudaError_t dsc::rt::cuda::moeRouteBackward(
    const MoeRouting &r, const T *logits, const int32_t *slots, const T *dGates,
    const T *dAux, T *dLogits, bool accumulate, cudaStream_t stream) {
  const int64_t nT = std::max<int64_t>(r.tokens, 0);
  const int64_t nE = std::max<int64_t>(r.experts, 0);
  const int64_t cap = std::max<int64_t>(r.capacity, 0);
  const int64_t k = std::clamp<int64_t>(r.topK, 0, nE);
  const int64_t nPairs = nT * k, slotCount = nE * cap;
  if (nT == 0 || nE == 0)
    return cudaSuccess;
  if (nPairs > INT32_MAX || slotCount > INT32_MAX || nT >= INT32_MAX)
    return cudaErrorInvalidValue;
  const size_t cubBytes = tokenSortBytes(slotCount, nT, stream);

  struct {
    int32_t *choice;
    unsigned long long *counts;
    double *dpAux, *dGate;
    char *kept;
    TokenSlotsScratch tokens;
    void *cub;
  } s;
  auto layout = [&](Carve &c) {
    s.choice = c.take<int32_t>(nPairs);
    s.counts = c.take<unsigned long long>(nE);
    s.dpAux = c.take<double>(nE);
    s.dGate = c.take<double>(nPairs);
    s.kept = c.take<char>(nPairs);
    s.tokens.carve(c, slotCount, nT);
    s.cub = c.take<char>(int64_t(cubBytes));
  };
  Carve sizing;
  layout(sizing);
  Carve carve;
  if (cudaError_t e =
          cudaMallocAsync((void **)&carve.base, sizing.used, stream))
    return e;
  layout(carve);

  auto run = [&]() -> cudaError_t {
    chooseKernel<<<gridFor(nT), kThreads, 0, stream>>>(
        logits, nT, nE, k, s.choice, nullptr, nullptr, nullptr);
    DSC_MOE_LAUNCHED();
    const int64_t counted =
        std::min<int64_t>(r.auxCounts == MoeAuxCounts::AllChoices ? k : 1, k);
    if (cudaError_t e = cudaMemsetAsync(
            s.counts, 0, sizeof(unsigned long long) * size_t(nE), stream))
      return e;
    if (counted > 0) {
      countChoicesKernel<<<gridFor(nT * counted), kThreads, 0, stream>>>(
          s.choice, nT, k, counted, s.counts);
      DSC_MOE_LAUNCHED();
    }
    auxGradKernel<<<gridFor(nE), kThreads, 0, stream>>>(s.counts, dAux, nT, nE,
                                                        r.auxCoeff, s.dpAux);
    DSC_MOE_LAUNCHED();
    TokenSlots bySlot;
    if (cudaError_t e = buildTokenSlots(slots, slotCount, nT, s.tokens, s.cub,
                                        cubBytes, nullptr, bySlot, stream))
      return e;
    routeBackwardKernel<<<gridFor(nT), kThreads, 0, stream>>>(
        logits, s.choice, bySlot, dGates, dAux, s.dpAux, nT, nE, k, cap,
        r.normalize, r.zCoeff, s.kept, s.dGate, dLogits, accumulate);
    DSC_MOE_LAUNCHED();
    return cudaSuccess;
  };
  const cudaError_t e = run();
  const cudaError_t freed = cudaFreeAsync(carve.base, stream);
  return e ? e : freed;
}

template <typename T>
cudaError_t dsc::rt::cuda::moeDispatch(const T *x, const int32_t *slots,
                                       const T *gates, T *xe, int64_t slotCount,
                                       int64_t hidden, int64_t tokens,
                                       int64_t *badCount, cudaStream_t stream) {
  if (badCount)
    if (cudaError_t e = cudaMemsetAsync(badCount, 0, sizeof(int64_t), stream))
      return e;
  if (slotCount <= 0)
    return cudaSuccess;
  dispatchKernel<<<rowBlocks(slotCount), kThreads, 0, stream>>>(
      x, slots, gates, xe, slotCount, hidden, tokens,
      reinterpret_cast<unsigned long long *>(badCount));
  return cudaGetLastError();
}

template <typename T>
cudaError_t dsc::rt::cuda::moeCombine(const T *ye, const int32_t *slots,
                                      const T *gates, T *y, int64_t slotCount,
                                      int64_t hidden, int64_t tokens,
                                      bool accumulate, int64_t *badCount,
                                      cudaStream_t stream) {
  if (badCount)
    if (cudaError_t e = cudaMemsetAsync(badCount, 0, sizeof(int64_t), stream))
      return e;
  slotCount = std::max<int64_t>(slotCount, 0);
  tokens = std::max<int64_t>(tokens, 0);
  if (slotCount > INT32_MAX || tokens >= INT32_MAX)
    return cudaErrorInvalidValue;
  const size_t cubBytes = tokenSortBytes(slotCount, tokens, stream);
  struct {
    TokenSlotsScratch tokens;
    void *cub;
  } s;
  auto layout = [&](Carve &c) {
    s.tokens.carve(c, slotCount, tokens);
    s.cub = c.take<char>(int64_t(cubBytes));
  };
  Carve sizing;
  layout(sizing);
  Carve carve;
  if (cudaError_t e =
          cudaMallocAsync((void **)&carve.base, sizing.used, stream))
    return e;
  layout(carve);
  auto run = [&]() -> cudaError_t {
    TokenSlots bySlot;
    if (cudaError_t e = buildTokenSlots(
            slots, slotCount, tokens, s.tokens, s.cub, cubBytes,
            reinterpret_cast<unsigned long long *>(badCount), bySlot, stream))
      return e;
    if (tokens == 0)
      return cudaSuccess;
    combineKernel<<<rowBlocks(tokens), kThreads, 0, stream>>>(
        ye, bySlot, gates, y, tokens, hidden, accumulate);
    DSC_MOE_LAUNCHED();
    return cudaSuccess;
  };
  const cudaError_t e = run();
  const cudaError_t freed = cudaFreeAsync(carve.base, stream);
  return e ? e : freed;
}

template <typename T>
cudaError_t dsc::rt::cuda::moeGatesGrad(const T *ye, const int32_t *slots,
                                        const T *dy, T *dGates,
                                        int64_t slotCount, int64_t hidden,
                                        int64_t tokens, bool accumulate,
                                        cudaStream_t stream) {
  if (slotCount <= 0)
    return cudaSuccess;
  constexpr int kWarps = kThreads / 32;
  gatesGradKernel<<<rowBlocks((slotCount + kWarps - 1) / kWarps), kThreads, 0,
                    stream>>>(ye, slots, dy, dGates, slotCount, hidden, tokens,
                              accumulate);
  return cudaGetLastError();
}

#define INSTANTIATE(T)                                                         \
  template cudaError_t dsc::rt::cuda::moeRoute<T>(                             \
      const MoeRouting &, const T *, uint64_t, int32_t *, T *, T *, int64_t *, \
      int64_t *, cudaStream_t);                                                \
  template cudaError_t dsc::rt::cuda::moeRouteBackward<T>(                     \
      const MoeRouting &, const T *, const int32_t *, const T *, const T *,    \
      T *, bool, cudaStream_t);                                                \
  template cudaError_t dsc::rt::cuda::moeDispatch<T>(                          \
      const T *, const int32_t *, const T *, T *, int64_t, int64_t, int64_t,   \
      int64_t *, cudaStream_t);                                                \
  template cudaError_t dsc::rt::cuda::moeCombine<T>(                           \
      const T *, const int32_t *, const T *, T *, int64_t, int64_t, int64_t,   \
      bool, int64_t *, cudaStream_t);                                          \
  template cudaError_t dsc::rt::cuda::moeGatesGrad<T>(                         \
      const T *, const int32_t *, const T *, T *, int64_t, int64_t, int64_t,   \
      bool, cudaStream_t);
DSC_CUDA_INSTANTIATE_ALL(INSTANTIATE)
