//===- ModelShape.cpp - GPT shape and FLOP accounting ---------------------===//
//
// Part of the dsc project.
//
//===----------------------------------------------------------------------===//
//
// Megatron-LM's closed-form parameter and FLOP counts. Only matmul FLOPs are
// counted, as in the papers whose MFU numbers the reports are compared with.
//
//===----------------------------------------------------------------------===//

#include "dsc/Analysis/ModelShape.h"

#include <string>

using namespace mlir::dsc::analysis;

double ModelShape::approxParameters() const {
  double l = numLayers, h = hiddenSize, s = seqLength, v = vocabSize;
  return 12.0 * l * h * h *
         (1.0 + 13.0 / (12.0 * h) + (v + s) / (12.0 * l * h));
}

double ModelShape::ffnWidth() const {
  return ffnHiddenSize ? double(ffnHiddenSize) : 4.0 * double(hiddenSize);
}

int64_t ModelShape::numMoeLayers() const {
  if (numExperts <= 0 || moeExpertInterval < 1)
    return 0;
  return (numLayers + moeExpertInterval - 1) / moeExpertInterval;
}

int64_t ModelShape::numMoeLayersIn(int64_t first, int64_t count) const {
  if (numExperts <= 0 || moeExpertInterval < 1 || count <= 0)
    return 0;
  // Multiples of the interval in [first, first + count).
  auto upTo = [&](int64_t end) {
    return (end + moeExpertInterval - 1) / moeExpertInterval;
  };
  return upTo(first + count) - upTo(first);
}

double ModelShape::expertParameters() const {
  const double h = double(hiddenSize), f = ffnWidth();
  return double(numMoeLayers()) * double(numExperts) *
         (h * (gatedMlp ? 2.0 * f : f) + f * h);
}

double ModelShape::forwardFlops(int64_t b) const {
  double bd = b, s = seqLength, l = numLayers, h = hiddenSize, v = vocabSize;
  double f = ffnHiddenSize ? double(ffnHiddenSize) : 4.0 * h;
  double kv = (numKvHeads ? double(numKvHeads) : double(numHeads)) * h /
              double(numHeads);
  // Per token row of the MLP: the first projection and the second.
  const double mlpPerRow = 2.0 * h * (gatedMlp ? 2.0 * f : f) + 2.0 * f * h;
  double perLayer = 2.0 * bd * s * h * (h + 2.0 * kv) + 2.0 * bd * s * h * h +
                    bd * s * mlpPerRow + 4.0 * bd * s * s * h;
  double moe = 0;
  if (numExperts > 0) {
    const double moeLayers =
        double((numLayers + moeExpertInterval - 1) / moeExpertInterval);
    // The experts' rows scale with the micro-batch from the importer's.
    const double rows =
        double(numExperts) * double(moeCapacity) * bd / double(microBatchSize);
    moe = moeLayers * (rows * mlpPerRow - bd * s * mlpPerRow +
                       2.0 * bd * s * h * double(numExperts));
  }
  return l * perLayer + moe + 2.0 * bd * s * h * v;
}

double ModelShape::trainingFlops(int64_t b, bool recompute) const {
  return (recompute ? 4.0 : 3.0) * forwardFlops(b);
}

std::string ModelShape::validate() const {
  auto positive = [](const char *what, int64_t v) -> std::string {
    if (v > 0)
      return "";
    return std::string(what) + " must be positive, got " + std::to_string(v);
  };
  for (auto [what, v] :
       {std::pair<const char *, int64_t>{"num_layers", numLayers},
        {"hidden_size", hiddenSize},
        {"num_attention_heads", numHeads},
        {"seq_length", seqLength},
        {"vocab_size", vocabSize},
        {"micro_batch_size", microBatchSize}})
    if (std::string err = positive(what, v); !err.empty())
      return err;
  if (hiddenSize % numHeads != 0)
    return "hidden_size " + std::to_string(hiddenSize) +
           " is not a multiple of num_attention_heads " +
           std::to_string(numHeads);
  if (!(parameters > 0))
    return "parameters must be positive";
  if (numExperts < 0 ||
      (numExperts > 0 && (moeExpertInterval < 1 || moeCapacity < 1)))
    return "an MoE model needs num_experts >= 1, moe_expert_interval >= 1 "
           "and moe_capacity >= 1, got " +
           std::to_string(numExperts) + ", " +
           std::to_string(moeExpertInterval) + " and " +
           std::to_string(moeCapacity);
  return "";
}

ModelShape ModelShape::gpt(std::string name, int64_t l, int64_t h, int64_t a,
                           int64_t s, int64_t v) {
  ModelShape m;
  m.name = std::move(name);
  m.numLayers = l;
  m.hiddenSize = h;
  m.numHeads = a;
  m.seqLength = s;
  m.vocabSize = v;
  m.parameters = m.approxParameters();
  return m;
}

ModelShape ModelShape::gpt3_175B() {
  return gpt("GPT-3 175B", 96, 12288, 96, 2048, 51200);
}
