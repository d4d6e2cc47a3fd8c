//===- InferenceCost.cpp - pricing an inference plan ----------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//

#include "dsc/Analysis/InferenceCost.h"

#include "dsc/Analysis/Collectives.h"

#include <algorithm>
#include <cmath>

using namespace mlir::dsc::analysis;

namespace {

int64_t kvHeadsOf(const ModelShape &m) {
  return m.numKvHeads > 0 ? m.numKvHeads : m.numHeads;
}

double gemmEfficiency(const ClusterSpec &c, double m, double n, double k) {
  auto f = [&](double d) { return d / (d + c.calibration.gemmHalfDim); };
  return c.calibration.gemmMaxEfficiency * f(m) * f(n) * f(k);
}

/// The tensor-parallel group's all-reduce of `bytes` (one node: NVLink).
double allReduce(const ClusterSpec &c, int64_t tp, double bytes) {
  if (tp <= 1)
    return 0;
  Link link = linkFor(c, placeGroup(1, tp, c.gpusPerNode));
  return collectiveTime(CollectiveKind::AllReduce, tp, bytes, link);
}

} // namespace

std::string mlir::dsc::analysis::checkInferencePlan(const ModelShape &model,
                                                    const ClusterSpec &cluster,
                                                    const InferencePlan &plan) {
  if (plan.tp < 1 || plan.batch < 1 || plan.context < 1 || plan.prompt < 1 ||
      plan.prompt > plan.context)
    return "tp, batch, context and prompt must be positive, the prompt at "
           "most the context";
  if (plan.tp > cluster.gpusPerNode)
    return "tp=" + std::to_string(plan.tp) + " spans more than a node's " +
           std::to_string(cluster.gpusPerNode) + " GPUs";
  if (model.numHeads % plan.tp || kvHeadsOf(model) % plan.tp)
    return "tp=" + std::to_string(plan.tp) + " does not divide the " +
           std::to_string(model.numHeads) + " heads and " +
           std::to_string(kvHeadsOf(model)) + " kv heads";
  return {};
}

InferenceEstimate
mlir::dsc::analysis::estimateInference(const ModelShape &model,
                                       const ClusterSpec &cluster,
                                       const InferencePlan &plan) {
  InferenceEstimate e;
  const double tp = double(plan.tp), b = double(plan.batch);
  const double bpe = double(plan.bytesPerElement);
  const double params =
      model.parameters > 0 ? model.parameters : model.approxParameters();
  const double l = double(model.numLayers), h = double(model.hiddenSize);
  const double headDim = h / double(model.numHeads);
  e.weightBytes = params * bpe / tp;
  e.kvBytesPerToken = 2 * l * double(kvHeadsOf(model)) / tp * headDim * bpe;
  e.kvBytesPerSequence = e.kvBytesPerToken * double(plan.context);
  e.usableBytes = cluster.gpu.memoryBytes - cluster.calibration.reservedBytes;
  e.largestBatch =
      e.usableBytes > e.weightBytes
          ? int64_t((e.usableBytes - e.weightBytes) / e.kvBytesPerSequence)
          : 0;

  const double bandwidth = cluster.gpu.memoryBandwidth;
  const double peak = cluster.gpu.peak16BitFlops;
  // Decode: every weight once, every sequence's cache at the full context.
  e.decodeMemorySeconds =
      (e.weightBytes + b * e.kvBytesPerSequence) /
      (bandwidth * cluster.calibration.memoryBoundEfficiency);
  e.decodeComputeSeconds =
      (2 * params / tp * b + 4 * b * double(plan.context) * h / tp * l) /
      (peak * gemmEfficiency(cluster, b, h / tp, h));
  // Two all-reduces per layer of the rows, and the logits' gather.
  e.decodeCommSeconds = 2 * l * allReduce(cluster, plan.tp, b * h * bpe);
  e.decodeSeconds = std::max(e.decodeMemorySeconds, e.decodeComputeSeconds) +
                    e.decodeCommSeconds;
  e.decodeFloorSeconds =
      e.weightBytes / bandwidth + 2 * l * allReduce(cluster, plan.tp, h * bpe);
  e.tokensPerSecond = b / e.decodeSeconds;
  // Prefill of one prompt: the products and the causal attention (half of
  // the p x p scores).
  const double p = double(plan.prompt);
  e.prefillSeconds = (2 * params / tp * p + 2 * p * p * h / tp * l) /
                         (peak * gemmEfficiency(cluster, p, h / tp, h)) +
                     2 * l * allReduce(cluster, plan.tp, p * h * bpe);
  return e;
}

std::vector<InferenceChoice>
mlir::dsc::analysis::searchInference(const ModelShape &model,
                                     const ClusterSpec &cluster,
                                     InferencePlan base, bool throughput) {
  std::vector<InferenceChoice> choices;
  for (int64_t tp = 1; tp <= cluster.gpusPerNode; tp *= 2) {
    InferencePlan plan = base;
    plan.tp = tp;
    plan.batch = 1;
    if (!checkInferencePlan(model, cluster, plan).empty())
      continue;
    InferenceEstimate e = estimateInference(model, cluster, plan);
    if (e.largestBatch < 1)
      continue;
    if (throughput) {
      plan.batch = e.largestBatch;
      e = estimateInference(model, cluster, plan);
    }
    choices.push_back({plan, e});
  }
  // Latency: the fastest step; throughput: the most tokens/s per GPU.
  std::stable_sort(choices.begin(), choices.end(),
                   [&](const InferenceChoice &a, const InferenceChoice &c) {
                     if (throughput)
                       return a.estimate.tokensPerSecond / double(a.plan.tp) >
                              c.estimate.tokensPerSecond / double(c.plan.tp);
                     return a.estimate.decodeSeconds < c.estimate.decodeSeconds;
                   });
  return choices;
}
