//===- MoeKernels.h - Mixture-of-Experts routing, dispatch, combine -*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The CPU kernels of an MoE layer, in the layout the dsc graph uses (see
// docs/moe.md):
//
//   logits [T, E]  the router's x · Wg, one row per token (T tokens, E
//                  experts), always read in the kernel's float type;
//   slots  [E, C]  i32: slot c of expert e holds token slots[e*C + c], or -1
//                  when empty. An expert's filled slots are 0 .. n_e - 1;
//   gates  [E, C]  the combine weight of each slot (0 where empty);
//   xe     [E, C, H] the experts' input rows, dispatched from x [T, H].
//
// moeRoute reproduces DeepSpeed's top1gating / top2gating / topkgating
// (deepspeed/moe/sharded_moe.py, checked against goldens made by DeepSpeed
// itself: test/Runtime/Inputs/moe-gating) and Mixtral's router
// (transformers' MixtralSparseMoeBlock) through the options below; see
// that folder's README for the reference formulas. Two departures: exact
// logit ties go to the lower expert (torch.topk, in DeepSpeed's top-k,
// picks the higher), and top-1 without RTS keeps the first tokens (DeepSpeed
// keeps a torch.topk tie-order set).
//
// The conventions of CpuKernels.h hold: raw contiguous row-major pointers,
// float and double instantiations, no throwing, deterministic results
// (every reduction in a fixed order), `accumulate` adds into the output.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_MOEKERNELS_H
#define DSC_RUNTIME_MOEKERNELS_H

#include <cstdint>

namespace dsc::rt {

/// How the chosen gates become combine weights.
enum class MoeNormalize : int64_t {
  /// The softmax probability itself (DeepSpeed top-1).
  None = 0,
  /// p / max(sum of the token's *kept* choices' p, eps), eps = FLT_EPSILON
  /// (DeepSpeed top-2 and top-k: renormalized after dropping, so a token
  /// whose other choice was dropped gets weight 1).
  AfterDrop = 1,
  /// p / (sum of the token's k chosen p), before dropping (Mixtral: the
  /// softmax over the chosen k; a dropped choice just loses its share).
  BeforeDrop = 2,
};

/// Which (token, choice) pairs an over-full expert keeps.
enum class MoeDrop : int64_t {
  /// The first `capacity` in slot order (DeepSpeed top-2, top-k
  /// "position"; for top-1 without RTS, DeepSpeed keeps a torch.topk
  /// tie-order set instead, which dsc does not imitate).
  Position = 0,
  /// The `capacity` pairs of largest probability, ties to the lower token
  /// (top-k "probs", Megatron's drop policy "probs").
  Probability = 1,
  /// The `capacity` pairs of largest random draw (DeepSpeed's random token
  /// selection, RTS, for top-1), ties to the lower token.
  Random = 2,
};

/// The order an expert's slots are handed out in.
enum class MoeSlotOrder : int64_t {
  /// By token; a token's choices together (DeepSpeed top-k, Mixtral).
  TokenMajor = 0,
  /// Every token's first choice, then every token's second, ... (DeepSpeed
  /// top-2: an expert's first-choice tokens take its first slots).
  ChoiceMajor = 1,
};

/// Which choices count in the load-balancing loss's token fraction f_e.
enum class MoeAuxCounts : int64_t {
  /// First choices only (DeepSpeed top-1 and top-2).
  FirstChoice = 0,
  /// All k choices (DeepSpeed top-k, Switch/Mixtral/Megatron).
  AllChoices = 1,
};

/// One routing decision's shape and rules.
struct MoeRouting {
  int64_t tokens = 0;   ///< T
  int64_t experts = 0;  ///< E
  int64_t topK = 1;     ///< k, 1 <= k <= E
  int64_t capacity = 0; ///< C, slots per expert
  /// false: nothing may drop; the caller sized C >= T (no expert can get
  /// more than T pairs: a token's k choices are distinct experts).
  bool dropTokens = true;
  MoeNormalize normalize = MoeNormalize::None;
  MoeDrop drop = MoeDrop::Position;
  MoeSlotOrder order = MoeSlotOrder::TokenMajor;
  MoeAuxCounts auxCounts = MoeAuxCounts::FirstChoice;
  /// aux = auxCoeff * l_aux + zCoeff * z with
  ///   p = softmax(logits) per token (row),
  ///   P_e = mean over tokens of p[t, e],
  ///   f_e = (pairs (t, choice) counted by auxCounts that chose e, before
  ///         dropping) / T,
  ///   l_aux = E * sum_e P_e * f_e   (the f_e carry no gradient),
  ///   z = mean over tokens of logsumexp(logits[t, :])^2 (the router
  ///       z-loss of ST-MoE, Zoph et al. 2022).
  double auxCoeff = 0.0;
  double zCoeff = 0.0;
};

/// Routes T tokens: softmax per row of logits [T, E]; each token's k
/// choices are its k largest probabilities in descending order (ties to
/// the lower expert index, as argmax); slots handed out in `order`; pairs
/// beyond capacity dropped by `drop` (`draws` [T, E] uniform in [0, 1),
/// only read by MoeDrop::Random); kept pairs' weights by `normalize`.
/// Writes slots [E, C] (-1 where empty), gates [E, C] (0 where empty),
/// *aux (see MoeRouting) and, when `loads` is given, loads [E]: per expert
/// the (token, choice) pairs that chose it before any dropping, all k
/// choices counted (the balance the load-balancing loss trains towards).
/// Returns the number of dropped (token, choice) pairs.
template <typename T>
int64_t moeRoute(const MoeRouting &r, const T *logits, const float *draws,
                 int32_t *slots, T *gates, T *aux, int64_t *loads = nullptr);

/// The vector-Jacobian product of moeRoute with respect to logits, for the
/// slots it returned: dGates [E, C] the gradient of the gates, dAux that
/// of *aux. Recomputes the softmax and the pre-drop choices (for f_e and
/// BeforeDrop's denominators) from logits. Slots that are -1 contribute
/// nothing.
template <typename T>
void moeRouteBackward(const MoeRouting &r, const T *logits,
                      const int32_t *slots, const T *dGates, T dAux,
                      T *dLogits, bool accumulate);

/// xe [slotCount, H]: row s = (gates ? gates[s] : 1) * x[slots[s], :], or
/// zeros where slots[s] is -1. x is [tokens, H]. Returns the number of
/// slots naming a token outside [0, tokens) (their rows are zeroed).
template <typename T>
int64_t moeDispatch(const T *x, const int32_t *slots, const T *gates, T *xe,
                    int64_t slotCount, int64_t hidden, int64_t tokens);

/// y [tokens, H]: row t = sum over the slots s naming t, in ascending s, of
/// (gates ? gates[s] : 1) * ye[s, :] (zeros for a token no slot names);
/// `accumulate` adds that into y. With gates it is the MoE layer's combine;
/// without, the gradient of moeDispatch. Returns the number of slots
/// naming a token outside [0, tokens) (skipped).
template <typename T>
int64_t moeCombine(const T *ye, const int32_t *slots, const T *gates, T *y,
                   int64_t slotCount, int64_t hidden, int64_t tokens,
                   bool accumulate);

/// The gradient of moeCombine's gates: dGates[s] = dot(ye[s, :],
/// dy[slots[s], :]), 0 where slots[s] is -1 (or out of range).
template <typename T>
void moeGatesGrad(const T *ye, const int32_t *slots, const T *dy, T *dGates,
                  int64_t slotCount, int64_t hidden, int64_t tokens,
                  bool accumulate);

} // namespace dsc::rt

#endif // DSC_RUNTIME_MOEKERNELS_H
