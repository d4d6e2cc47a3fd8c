//===- ModelShape.h - GPT shape and FLOP accounting -------------*- C++ -*-===//
//
// Part of the dsc project.
//
//===----------------------------------------------------------------------===//
//
// The handful of numbers the cost model needs to know about a GPT-style
// model, and Megatron-LM's FLOP accounting over them.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_ANALYSIS_MODELSHAPE_H
#define DSC_ANALYSIS_MODELSHAPE_H

#include <cstdint>
#include <string>

namespace mlir::dsc::analysis {

/// A decoder-only transformer as Megatron-LM describes it: l layers of
/// attention + 4h MLP, hidden size h, a heads, sequence s, vocabulary V.
/// `parameters` (Psi) is kept explicitly because importers know it exactly
/// (tied embeddings, biases, padding), while the closed form below is only
/// Narayanan et al.'s approximation.
struct ModelShape {
  std::string name = "gpt";
  int64_t numLayers = 0;      // l
  int64_t hiddenSize = 0;     // h
  int64_t numHeads = 0;       // a
  int64_t seqLength = 0;      // s
  int64_t vocabSize = 0;      // V
  int64_t microBatchSize = 1; // b the importer chose; the search varies it
  double parameters = 0;      // Psi
  /// The family's departures from GPT-2's block (0: as GPT-2): the MLP's
  /// width f (4h), key/value heads (a; fewer under grouped-query
  /// attention) and whether the MLP is gated (SwiGLU: a 2f first
  /// projection).
  int64_t ffnHiddenSize = 0;
  int64_t numKvHeads = 0;
  bool gatedMlp = false;
  /// Mixture of Experts (0 experts: dense): every moeExpertInterval-th
  /// layer's MLP is numExperts experts, each computing moeCapacity rows
  /// per micro-batch of microBatchSize sequences (the capacity scales with
  /// the micro-batch), plus a router of 2 b s h E FLOPs.
  int64_t numExperts = 0;
  int64_t moeExpertInterval = 1;
  int64_t moeCapacity = 0;

  /// Narayanan et al. (SC'21) eq. (2): P = 12 l h^2 (1 + 13/(12h) +
  /// (V + s)/(12 l h)).
  double approxParameters() const;

  /// The MLP's width f (4h unless the family sets it).
  double ffnWidth() const;
  /// MoE layers: the layers whose index is a multiple of moeExpertInterval
  /// (0, I, 2I, ...), ceil(l / I) of them; 0 for a dense model.
  int64_t numMoeLayers() const;
  /// MoE layers among the `count` layers from layer `first`.
  int64_t numMoeLayersIn(int64_t first, int64_t count) const;
  /// The experts' parameters, part of `parameters`: per MoE layer E bias-free
  /// experts of h x (2f gated, else f) and f x h. Expert parallelism splits
  /// these over ep (the routers stay with the dense parameters).
  double expertParameters() const;

  /// Forward FLOPs of one micro-batch of `b` sequences, Megatron's
  /// accounting (matmuls only): 24 b s l h^2 (1 + s/(6h)) + 2 b s h V for
  /// GPT-2's block; in general per layer 2bsh (h + 2 kv d) for q, k, v,
  /// 2bsh^2 for the output projection, 2bsh (2f or f) + 2bsfh for the MLP
  /// and 4bs^2h for attention (docs/model-families.md). An MoE layer's MLP
  /// computes its experts' capacity rows instead of the bs tokens, and
  /// adds its router's (docs/moe.md).
  double forwardFlops(int64_t b) const;

  /// Training FLOPs of one micro-batch: 3x forward (forward + backward with
  /// two matmuls per forward matmul), 4x with full activation recompute.
  double trainingFlops(int64_t b, bool recompute) const;

  /// Returns an empty string when the shape is usable, else what is wrong.
  std::string validate() const;

  /// GPT-3 175B (Brown et al. 2020): l=96, h=12288, a=96, s=2048, V=51200.
  static ModelShape gpt3_175B();
  /// A shape built from (l, h, a, s, V) with Psi from approxParameters().
  static ModelShape gpt(std::string name, int64_t l, int64_t h, int64_t a,
                        int64_t s, int64_t v);
};

} // namespace mlir::dsc::analysis

#endif // DSC_ANALYSIS_MODELSHAPE_H
