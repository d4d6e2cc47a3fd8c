//===- MoeKernels.cpp - MoE routing, dispatch, combine and their VJPs -----===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The CPU MoE kernels of MoeKernels.h: DeepSpeed-compatible top-k routing
// with capacity dropping, its gradient, and the slot gather/scatter.
//
// The routing works in double whatever T is: softmax, the normalizations and
// the losses are O(T*E) next to the experts' GEMMs, the float results are
// rounded once, and both instantiations make the same routing decisions.
// Choices, slots and drops depend only on the logits (and draws), never on the
// thread count: the per-token work runs in parallel, and every cross-token step
// (slot counters, per-expert sums over fixed token blocks) runs in one fixed
// order.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/MoeKernels.h"

#include "KernelSupport.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <omp.h>
#include <vector>

using namespace dsc::rt;

namespace {

/// Tokens per block of the per-expert probability sums: the blocks' partial
/// sums are added in block order, so P_e does not depend on the threads.
constexpr int64_t kTokenBlock = 64;

/// DeepSpeed's `torch.finfo(torch.float32).eps` in the AfterDrop
/// denominator, whatever the kernel's type.
constexpr double kNormalizeEps = FLT_EPSILON;

/// The comparison key of a logit: NaN sorts as -inf, so the choice order is
/// a total order and always names k distinct experts in range.
inline double choiceKey(double v) {
  return std::isnan(v) ? -std::numeric_limits<double>::infinity() : v;
}

/// Whether expert a comes before expert b in a token's choice order: larger
/// logit first (softmax is monotone, so that is the larger probability),
/// ties to the lower index, as argmax (DeepSpeed top-1, top-2). DeepSpeed's
/// topkgating uses torch.topk, which on CPU can prefer the higher index
/// among equal logits; like top-1's tie-ordered drops, that is not imitated.
template <typename T>
inline bool choiceBefore(const T *row, int64_t a, int64_t b) {
  double ka = choiceKey(double(row[a])), kb = choiceKey(double(row[b]));
  return ka > kb || (ka == kb && a < b);
}

/// Token t's k choices, in descending order: each pick is the first expert
/// after the previous pick in choice order. O(k*E) with no scratch.
template <typename T>
void chooseExperts(const T *row, int64_t experts, int64_t k, int32_t *choice) {
  int64_t prev = -1;
  for (int64_t j = 0; j < k; ++j) {
    int64_t best = -1;
    for (int64_t e = 0; e < experts; ++e) {
      if (prev >= 0 && !choiceBefore(row, prev, e))
        continue;
      if (best < 0 || choiceBefore(row, e, best))
        best = e;
    }
    choice[j] = int32_t(best);
    prev = best;
  }
}

/// One row's softmax statistics: the max and the sum of exp(x - max).
struct RowStats {
  double max;
  double sum;
  double prob(double x) const { return std::exp(x - max) / sum; }
  double logSumExp() const { return max + std::log(sum); }
};

template <typename T> RowStats rowStats(const T *row, int64_t experts) {
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t e = 0; e < experts; ++e)
    m = std::max(m, double(row[e]));
  double s = 0;
  for (int64_t e = 0; e < experts; ++e)
    s += std::exp(double(row[e]) - m);
  return {m, s};
}

/// k clamped to [0, E]: a token's choices are distinct experts.
int64_t effectiveTopK(const MoeRouting &r) {
  return std::clamp<int64_t>(r.topK, 0, std::max<int64_t>(r.experts, 0));
}

/// The pair (t, j) at position i of the slot order, as an index t*k + j.
inline int64_t pairAt(const MoeRouting &r, int64_t k, int64_t i) {
  if (r.order == MoeSlotOrder::ChoiceMajor)
    return (i % r.tokens) * k + i / r.tokens;
  return i;
}

/// Per expert, the number of pairs that count in f_e (before dropping).
void countChoices(const MoeRouting &r, int64_t k, const int32_t *choice,
                  std::vector<int64_t> &counts) {
  counts.assign(r.experts, 0);
  int64_t counted = r.auxCounts == MoeAuxCounts::AllChoices ? k : 1;
  counted = std::min(counted, k);
  for (int64_t t = 0; t < r.tokens; ++t)
    for (int64_t j = 0; j < counted; ++j)
      ++counts[choice[t * k + j]];
}

} // namespace

//===----------------------------------------------------------------------===//
// moeRoute
//===----------------------------------------------------------------------===//

template <typename T>
int64_t dsc::rt::moeRoute(const MoeRouting &r, const T *logits,
                          const float *draws, int32_t *slots, T *gates,
                          T *aux, int64_t *loads) {
  const int64_t nT = std::max<int64_t>(r.tokens, 0);
  const int64_t nE = std::max<int64_t>(r.experts, 0);
  const int64_t cap = std::max<int64_t>(r.capacity, 0);
  const int64_t k = effectiveTopK(r);
  for (int64_t s = 0; s < nE * cap; ++s) {
    slots[s] = -1;
    gates[s] = T(0);
  }
  if (loads)
    std::fill(loads, loads + nE, int64_t(0));
  if (nT == 0 || nE == 0) {
    if (aux)
      *aux = T(0);
    return 0;
  }
  const int64_t nPairs = nT * k;

  // Per token (in parallel): choices, their probabilities, and the blocks'
  // partial sums of p[:, e] and of lse^2.
  std::vector<int32_t> choice(nPairs);
  std::vector<double> choiceP(nPairs);
  const int64_t nBlocks = (nT + kTokenBlock - 1) / kTokenBlock;
  std::vector<double> blockP(nBlocks * nE, 0.0), blockZ(nBlocks, 0.0);
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < nBlocks; ++b) {
    double *pSum = blockP.data() + b * nE;
    for (int64_t t = b * kTokenBlock; t < std::min(nT, (b + 1) * kTokenBlock);
         ++t) {
      const T *row = logits + t * nE;
      RowStats st = rowStats(row, nE);
      for (int64_t e = 0; e < nE; ++e)
        pSum[e] += st.prob(double(row[e]));
      double lse = st.logSumExp();
      blockZ[b] += lse * lse;
      chooseExperts(row, nE, k, choice.data() + t * k);
      for (int64_t j = 0; j < k; ++j)
        choiceP[t * k + j] = st.prob(double(row[choice[t * k + j]]));
    }
  }

  // The loads a router asks of its experts, all choices before dropping.
  if (loads)
    for (int32_t e : choice)
      ++loads[e];

  // The losses, from pre-drop counts.
  if (aux) {
    std::vector<int64_t> counts;
    countChoices(r, k, choice.data(), counts);
    double lAux = 0, z = 0;
    for (int64_t e = 0; e < nE; ++e) {
      double pe = 0;
      for (int64_t b = 0; b < nBlocks; ++b)
        pe += blockP[b * nE + e];
      lAux += (pe / double(nT)) * (double(counts[e]) / double(nT));
    }
    lAux *= double(nE);
    for (int64_t b = 0; b < nBlocks; ++b)
      z += blockZ[b];
    z /= double(nT);
    *aux = T(r.auxCoeff * lAux + r.zCoeff * z);
  }

  // Each pair's position at its expert in slot order, counting every pair
  // before it (kept or not): DeepSpeed's cumsum over the pre-drop mask
  // (top-k), and top-2's loc2 = count1[e2] + rank under ChoiceMajor.
  std::vector<int32_t> slotOf(nPairs);
  std::vector<int64_t> load(nE, 0);
  for (int64_t i = 0; i < nPairs; ++i) {
    int64_t p = pairAt(r, k, i);
    slotOf[p] = int32_t(load[choice[p]]++);
  }

  // Without draws, MoeDrop::Random has nothing to rank by: keep by position.
  bool byPosition = !r.dropTokens || r.drop == MoeDrop::Position ||
                    (r.drop == MoeDrop::Random && !draws);
  if (byPosition) {
    // A pair is kept iff every pair before it fits, so its position is
    // also its rank among the kept pairs. Without dropTokens the caller
    // sized C to fit everything; what still does not fit drops, counted.
    for (int64_t p = 0; p < nPairs; ++p)
      if (slotOf[p] >= cap)
        slotOf[p] = -1;
  } else {
    // Per expert, its pairs in slot order (a CSR by expert), the C of
    // largest score kept (ties to the lower token: a token names an expert
    // at most once, so the order is total), then slots = rank among the kept
    // pairs in slot order.
    std::vector<int64_t> begin(nE + 1, 0);
    for (int64_t e = 0; e < nE; ++e)
      begin[e + 1] = begin[e] + load[e];
    std::vector<int64_t> members(nPairs), ranked(nPairs);
    for (int64_t p = 0; p < nPairs; ++p)
      members[begin[choice[p]] + slotOf[p]] = p;
    bool byDraw = r.drop == MoeDrop::Random;
    auto score = [&](int64_t p) -> double {
      int64_t t = p / k;
      // NaN (from NaN logits or draws) ranks last, keeping the order total.
      return choiceKey(byDraw ? double(draws[t * nE + choice[p]]) : choiceP[p]);
    };
#pragma omp parallel for schedule(static)
    for (int64_t e = 0; e < nE; ++e) {
      int64_t n = load[e];
      int64_t *m = members.data() + begin[e];
      if (n <= cap)
        continue;
      int64_t *rk = ranked.data() + begin[e];
      std::copy(m, m + n, rk);
      std::nth_element(rk, rk + cap, rk + n, [&](int64_t a, int64_t b) {
        double sa = score(a), sb = score(b);
        return sa > sb || (sa == sb && a < b);
      });
      // Mark the dropped ones, then renumber the kept in slot order.
      for (int64_t i = cap; i < n; ++i)
        slotOf[rk[i]] = -1;
      int32_t next = 0;
      for (int64_t i = 0; i < n; ++i)
        if (slotOf[m[i]] >= 0)
          slotOf[m[i]] = next++;
    }
  }

  // Weights, per token.
  int64_t dropped = 0;
#pragma omp parallel for schedule(static) reduction(+ : dropped)
  for (int64_t t = 0; t < nT; ++t) {
    const int32_t *ch = choice.data() + t * k;
    const double *pc = choiceP.data() + t * k;
    const int32_t *so = slotOf.data() + t * k;
    double keptSum = 0, allSum = 0;
    for (int64_t j = 0; j < k; ++j) {
      allSum += pc[j];
      if (so[j] >= 0)
        keptSum += pc[j];
    }
    double denom = 1.0;
    if (r.normalize == MoeNormalize::AfterDrop)
      denom = std::max(keptSum, kNormalizeEps);
    else if (r.normalize == MoeNormalize::BeforeDrop)
      denom = allSum;
    for (int64_t j = 0; j < k; ++j) {
      if (so[j] < 0) {
        ++dropped;
        continue;
      }
      int64_t s = int64_t(ch[j]) * cap + so[j];
      slots[s] = int32_t(t);
      gates[s] = T(pc[j] / denom);
    }
  }
  return dropped;
}

//===----------------------------------------------------------------------===//
// moeRouteBackward
//===----------------------------------------------------------------------===//

template <typename T>
void dsc::rt::moeRouteBackward(const MoeRouting &r, const T *logits,
                               const int32_t *slots, const T *dGates, T dAux,
                               T *dLogits, bool accumulate) {
  const int64_t nT = std::max<int64_t>(r.tokens, 0);
  const int64_t nE = std::max<int64_t>(r.experts, 0);
  const int64_t cap = std::max<int64_t>(r.capacity, 0);
  const int64_t k = effectiveTopK(r);
  if (nT == 0 || nE == 0)
    return;
  const int64_t nPairs = nT * k;

  std::vector<int32_t> choice(nPairs);
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < nT; ++t)
    chooseExperts(logits + t * nE, nE, k, choice.data() + t * k);

  // d aux / d p[t, e] = auxCoeff * E * f_e / T (f_e constant).
  std::vector<int64_t> counts;
  countChoices(r, k, choice.data(), counts);
  std::vector<double> dpAux(nE);
  const double dA = double(dAux);
  for (int64_t e = 0; e < nE; ++e)
    dpAux[e] = dA * r.auxCoeff * double(nE) * double(counts[e]) /
               (double(nT) * double(nT));
  const double dzScale = dA * r.zCoeff * 2.0 / double(nT);

  // Each kept pair's gate gradient, found through the slots; a slot naming
  // an expert its token did not choose cannot come from moeRoute and is
  // skipped.
  std::vector<char> kept(nPairs, 0);
  std::vector<double> dGate(nPairs, 0.0);
  for (int64_t s = 0; s < nE * cap; ++s) {
    int64_t t = slots[s];
    if (t < 0 || t >= nT)
      continue;
    int64_t e = s / cap;
    for (int64_t j = 0; j < k; ++j)
      if (choice[t * k + j] == e) {
        kept[t * k + j] = 1;
        dGate[t * k + j] += dGates ? double(dGates[s]) : 0.0;
        break;
      }
  }

  // Per token: d p through the normalization into dGate (now d p of each
  // choice), then the softmax's VJP.
  detail::dispatchAccumulate(accumulate, [&](auto accTag) {
    constexpr bool Acc = decltype(accTag)::value;
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < nT; ++t) {
      const T *row = logits + t * nE;
      const int32_t *ch = choice.data() + t * k;
      const char *kp = kept.data() + t * k;
      double *dg = dGate.data() + t * k;
      RowStats st = rowStats(row, nE);

      if (r.normalize != MoeNormalize::None) {
        // w_j = p_j / D for kept j: d p_i = [i kept] g_i / D
        //   - [D depends on p_i] sum_{kept j} g_j p_j / D^2.
        double keptSum = 0, allSum = 0, gp = 0;
        for (int64_t j = 0; j < k; ++j) {
          double p = st.prob(double(row[ch[j]]));
          allSum += p;
          if (kp[j]) {
            keptSum += p;
            gp += dg[j] * p;
          }
        }
        bool after = r.normalize == MoeNormalize::AfterDrop;
        // torch.clamp(min=eps) passes the gradient where S >= eps; below,
        // the denominator is the constant eps.
        double denom = after ? std::max(keptSum, kNormalizeEps) : allSum;
        bool variable = !after || keptSum >= kNormalizeEps;
        double shared = variable ? gp / (denom * denom) : 0.0;
        for (int64_t j = 0; j < k; ++j) {
          double own = kp[j] ? dg[j] / denom : 0.0;
          // AfterDrop's D sums the kept choices only; BeforeDrop's all k.
          bool inDenom = after ? kp[j] != 0 : true;
          dg[j] = own - (inDenom ? shared : 0.0);
        }
      } else {
        for (int64_t j = 0; j < k; ++j)
          if (!kp[j])
            dg[j] = 0.0;
      }

      auto dProb = [&](int64_t e) {
        double d = dpAux[e];
        for (int64_t j = 0; j < k; ++j)
          if (ch[j] == e)
            return d + dg[j];
        return d;
      };
      double dot = 0;
      for (int64_t e = 0; e < nE; ++e)
        dot += st.prob(double(row[e])) * dProb(e);
      double dz = dzScale * st.logSumExp();
      T *out = dLogits + t * nE;
      for (int64_t e = 0; e < nE; ++e) {
        double p = st.prob(double(row[e]));
        detail::put<Acc>(out + e, T(p * (dProb(e) - dot + dz)));
      }
    }
  });
}

//===----------------------------------------------------------------------===//
// Dispatch, combine, gates gradient
//===----------------------------------------------------------------------===//

namespace {
/// A slot names no token (-1, empty) or token t; anything else is bad.
inline bool isBadSlot(int64_t t, int64_t tokens) {
  return t != -1 && (t < 0 || t >= tokens);
}
} // namespace

template <typename T>
int64_t dsc::rt::moeDispatch(const T *x, const int32_t *slots, const T *gates,
                             T *xe, int64_t slotCount, int64_t hidden,
                             int64_t tokens) {
  int64_t bad = 0;
#pragma omp parallel for schedule(static) reduction(+ : bad)
  for (int64_t s = 0; s < slotCount; ++s) {
    int64_t t = slots[s];
    T *dst = xe + s * hidden;
    if (t < 0 || t >= tokens) {
      std::memset(dst, 0, sizeof(T) * hidden);
      bad += isBadSlot(t, tokens) ? 1 : 0;
      continue;
    }
    const T *src = x + t * hidden;
    if (!gates) {
      std::memcpy(dst, src, sizeof(T) * hidden);
      continue;
    }
    T g = gates[s];
#pragma omp simd
    for (int64_t c = 0; c < hidden; ++c)
      dst[c] = g * src[c];
  }
  return bad;
}

template <typename T>
int64_t dsc::rt::moeCombine(const T *ye, const int32_t *slots, const T *gates,
                            T *y, int64_t slotCount, int64_t hidden,
                            int64_t tokens, bool accumulate) {
  if (tokens <= 0)
    return std::count_if(slots, slots + slotCount,
                         [&](int32_t t) { return isBadSlot(t, tokens); });
  // The inverse map token -> its slots in ascending order (a CSR), so each
  // output row has one owner and sums its slots in a fixed order.
  std::vector<int64_t> begin(tokens + 1, 0);
  int64_t bad = 0;
  for (int64_t s = 0; s < slotCount; ++s) {
    int64_t t = slots[s];
    if (t >= 0 && t < tokens)
      ++begin[t + 1];
    else if (isBadSlot(t, tokens))
      ++bad;
  }
  for (int64_t t = 0; t < tokens; ++t)
    begin[t + 1] += begin[t];
  std::vector<int64_t> bySlot(begin[tokens]);
  {
    std::vector<int64_t> next(begin.begin(), begin.end() - 1);
    for (int64_t s = 0; s < slotCount; ++s) {
      int64_t t = slots[s];
      if (t >= 0 && t < tokens)
        bySlot[next[t]++] = s;
    }
  }
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tokens; ++t) {
    T *dst = y + t * hidden;
    if (!accumulate)
      std::memset(dst, 0, sizeof(T) * hidden);
    for (int64_t i = begin[t]; i < begin[t + 1]; ++i) {
      int64_t s = bySlot[i];
      const T *src = ye + s * hidden;
      T g = gates ? gates[s] : T(1);
#pragma omp simd
      for (int64_t c = 0; c < hidden; ++c)
        dst[c] += g * src[c];
    }
  }
  return bad;
}

template <typename T>
void dsc::rt::moeGatesGrad(const T *ye, const int32_t *slots, const T *dy,
                           T *dGates, int64_t slotCount, int64_t hidden,
                           int64_t tokens, bool accumulate) {
  detail::dispatchAccumulate(accumulate, [&](auto accTag) {
    constexpr bool Acc = decltype(accTag)::value;
#pragma omp parallel for schedule(static)
    for (int64_t s = 0; s < slotCount; ++s) {
      int64_t t = slots[s];
      if (t < 0 || t >= tokens) {
        detail::put<Acc>(dGates + s, T(0));
        continue;
      }
      const T *a = ye + s * hidden;
      const T *b = dy + t * hidden;
      double d = 0;
      for (int64_t c = 0; c < hidden; ++c)
        d += double(a[c]) * double(b[c]);
      detail::put<Acc>(dGates + s, T(d));
    }
  });
}

#define INSTANTIATE(T)                                                         \
  template int64_t dsc::rt::moeRoute<T>(const MoeRouting &, const T *,         \
                                        const float *, int32_t *, T *, T *,    \
                                        int64_t *);                            \
  template void dsc::rt::moeRouteBackward<T>(const MoeRouting &, const T *,    \
                                             const int32_t *, const T *, T,    \
                                             T *, bool);                       \
  template int64_t dsc::rt::moeDispatch<T>(                                    \
      const T *, const int32_t *, const T *, T *, int64_t, int64_t, int64_t);  \
  template int64_t dsc::rt::moeCombine<T>(const T *, const int32_t *,          \
                                          const T *, T *, int64_t, int64_t,    \
                                          int64_t, bool);                      \
  template void dsc::rt::moeGatesGrad<T>(const T *, const int32_t *,           \
                                         const T *, T *, int64_t, int64_t,     \
                                         int64_t, bool);
DSC_RT_INSTANTIATE_FLOAT_DOUBLE(INSTANTIATE)
