//===- InferenceCost.h - pricing an inference plan --------------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// What --dsc-compile-inference's plan costs on a cluster (docs/cost-model.md,
// "Inference"): a decode step reads every weight of the rank once and each
// sequence's keys and values, so its floor is the weight bytes over the
// memory bandwidth plus the two all-reduces per layer of tensor slicing;
// its compute is 2 P b / tp FLOPs at the GEMM efficiency of b rows; a
// prefill of p tokens is 2 P p / tp plus the causal attention's FLOPs; the
// largest batch is what the device memory holds beside the weights, in KV
// cache bytes per sequence at the longest context.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_ANALYSIS_INFERENCECOST_H
#define DSC_ANALYSIS_INFERENCECOST_H

#include "dsc/Analysis/ClusterSpec.h"
#include "dsc/Analysis/ModelShape.h"

#include <string>
#include <vector>

namespace mlir::dsc::analysis {

/// An inference plan's knobs.
struct InferencePlan {
  int64_t tp = 1;
  int64_t batch = 1;      // sequences decoding together
  int64_t context = 2048; // tokens of each sequence (its KV cache)
  int64_t prompt = 512;   // a prompt's tokens (the prefill priced)
  int64_t bytesPerElement = 2;
};

struct InferenceEstimate {
  double weightBytes = 0;        // per GPU
  double kvBytesPerToken = 0;    // per GPU, all layers, keys and values
  double kvBytesPerSequence = 0; // at the plan's context
  double usableBytes = 0;        // device memory less the reserved
  /// Sequences at the plan's context that fit beside the weights (0: the
  /// weights alone do not fit).
  int64_t largestBatch = 0;
  /// One decode step of `batch` sequences: its parts and the whole
  /// (max(memory, compute) + all-reduces).
  double decodeMemorySeconds = 0, decodeComputeSeconds = 0,
         decodeCommSeconds = 0, decodeSeconds = 0;
  /// Weight bytes / bandwidth + the two all-reduces per layer of one row:
  /// no decode step at batch 1 is faster.
  double decodeFloorSeconds = 0;
  double tokensPerSecond = 0; // batch / decodeSeconds
  double prefillSeconds = 0;  // one prompt
};

/// Why `plan` cannot run `model` on `cluster` (heads or kv heads not
/// divisible by tp, tp beyond a node, non-positive numbers), or empty.
std::string checkInferencePlan(const ModelShape &model,
                               const ClusterSpec &cluster,
                               const InferencePlan &plan);

/// The estimate; `plan` must pass checkInferencePlan.
InferenceEstimate estimateInference(const ModelShape &model,
                                    const ClusterSpec &cluster,
                                    const InferencePlan &plan);

/// The tp (1, 2, 4, ... within a node, dividing the heads) that serves
/// best: the lowest decode latency at batch 1 (`throughput` false), or the
/// most tokens per second per GPU at the largest batch that fits.
struct InferenceChoice {
  InferencePlan plan;
  InferenceEstimate estimate;
};
std::vector<InferenceChoice> searchInference(const ModelShape &model,
                                             const ClusterSpec &cluster,
                                             InferencePlan base,
                                             bool throughput);

} // namespace mlir::dsc::analysis

#endif // DSC_ANALYSIS_INFERENCECOST_H
