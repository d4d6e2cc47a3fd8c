//===- CostModel.h - Step time and memory of a parallel plan ----*- C++ -*-===//
//
// Part of the dsc project.
//
//===----------------------------------------------------------------------===//
//
// An analytical model of one training step of a GPT under a 3D-parallel
// plan: compute over an achievable-efficiency curve, alpha-beta collectives
// placed on the node layout, pipeline bubble, overlap, and memory per tier.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_ANALYSIS_COSTMODEL_H
#define DSC_ANALYSIS_COSTMODEL_H

#include "dsc/Analysis/ClusterSpec.h"
#include "dsc/Analysis/MemoryModel.h"
#include "dsc/Analysis/ModelShape.h"
#include "dsc/Analysis/ParallelPlan.h"
#include "dsc/Support/PipelineStep.h"

#include <string>
#include <vector>

namespace mlir::dsc::analysis {

/// Seconds of one step, by where they go. The parts add up to `total`:
/// compute + tpComm + epComm + ppComm + zeroComm + bubble are the
/// pipeline's (m + p - 1) slots of the slowest stage; dpComm, optimizer and
/// offload follow the last micro-batch.
struct StepTimeBreakdown {
  double compute = 0;   // GEMMs + memory-bound kernels, all micro-batches
  double recompute = 0; // the part of `compute` that re-runs forwards
  double tpComm = 0;    // tensor-parallel collectives (not overlapped)
  double epComm = 0;    // expert-parallel all-to-alls (not overlapped)
  double ppComm = 0;    // pipeline send/recv
  double zeroComm = 0;  // per-micro-batch ZeRO-2/3 traffic left exposed
  double bubble = 0;    // (p - 1) idle slots of the slowest stage
  double dpComm = 0;    // end-of-step gradient/parameter traffic exposed
  double optimizer = 0; // Adam on the GPU
  double offload = 0;   // PCIe transfers + CPU Adam (+ NVMe) when offloaded
  double total = 0;
};

/// Peak bytes per GPU (the most loaded pipeline stage) and per tier.
struct MemoryBreakdown {
  ModelStateBytes states; // on the device (optimizer part is 0 if offloaded)
  double activations = 0;
  double temporaries = 0; // logits, ZeRO-3 gathered layers
  double reserved = 0;    // calibration.reservedBytes
  double device = 0;      // sum of the above: what must fit
  /// Pipelined: `device` of each pipeline rank (rank r keeps its stage's
  /// micro-batches in flight: 1F1B's min(p - r, m), GPipe's m; the last
  /// the logits); `device` is the largest. Empty without pipeline stages.
  std::vector<double> devicePerPipelineRank;
  double host = 0; // offloaded states per GPU
  double nvme = 0; // offloaded states per GPU when the host is full
};

/// Bytes each GPU sends per step (nccl-tests bus bytes), by axis; `ep` is
/// the MoE layers' all-to-alls.
struct CommVolume {
  double tp = 0, dp = 0, pp = 0, ep = 0;
  double total() const { return tp + dp + pp + ep; }
};

/// A step of DeepSpeed's 1-bit Adam after its warm-up (docs/onebit.md), on
/// the same plan: the gradients' data-parallel all-reduce gives way to a
/// compressed all-reduce of the momentum per parameter tensor (an
/// all-to-all of the sign chunks and an all-gather of the servers' signs,
/// 1 bit an element, plus a scale each), run after the backward (the
/// momentum needs the whole gradient) and so not overlapped, and to the
/// compression's passes over the momentum and its errors.
struct CompressedStepEstimate {
  /// Why the compressed step does not apply to the plan (ZeRO-3,
  /// offload, one data-parallel rank); empty when it does.
  std::string whyNot;
  double warmUp = 0;      // a warm-up step's seconds (the plan's step at
                          // zero=0; under ZeRO-1/2 the gradients stay whole)
  double total = 0;       // the compressed step's seconds
  double collectives = 0; // compressed all-reduces per step (tensors or
                          // buckets: onebit-bucket-bytes)
  double dpComm = 0;      // the compressed all-reduces, exposed
  double compress = 0;    // the worker and server compression, memory-bound
  double dpBytes = 0;     // bytes one rank sends per step for them
};

struct PlanEstimate {
  ParallelPlan plan;
  StepTimeBreakdown time;
  MemoryBreakdown memory;
  CommVolume comm;
  /// Achieved FLOP/s per GPU as Megatron-LM logs it (counts recompute).
  double flopsPerGpu = 0;
  /// Model FLOP/s per GPU: 3x forward FLOPs per step over the step time.
  double modelFlopsPerGpu = 0;
  /// Model FLOPs utilization: 3x forward FLOPs (no recompute) over peak.
  double mfu = 0;
  /// (p - 1) / m, Narayanan et al.'s bubble time fraction.
  double bubbleFraction = 0;
  /// The same plan's step under 1-bit Adam after its warm-up (the step
  /// above is its warm-up's: an AdamW step's traffic).
  CompressedStepEstimate compressed;
  bool fits = false;
  /// Why the plan does not fit (empty if it fits).
  std::string whyNot;
};

class CostModel {
public:
  CostModel(ModelShape model, ClusterSpec cluster);

  const ModelShape &model() const { return modelShape; }
  const ClusterSpec &cluster() const { return clusterSpec; }

  /// Empty if the plan is structurally valid for this model (divisibility,
  /// tp within a node), else a sentence saying what does not divide.
  std::string checkPlan(const ParallelPlan &plan) const;

  /// Memory only: cheap, used by the search to prune before pricing time.
  MemoryBreakdown memory(const ParallelPlan &plan) const;

  /// Full estimate. `plan` must pass checkPlan.
  PlanEstimate estimate(const ParallelPlan &plan) const;

  /// Compute seconds of one micro-batch on each pipeline stage (pp x
  /// virtual-stages of them, stage c*pp + r for rank r's chunk c), for the
  /// schedule simulation (dsc/Support/PipelineSimulation.h): a chunk's
  /// layers' forward and backward (with recompute, the recomputed forward),
  /// the last stage's output layer; under ZB-H1 the backward is split into
  /// B and W, W being half the backward's GEMMs. Messages are not in it.
  std::vector<::dsc::PipelineStageTimes>
  pipelineStageTimes(const ParallelPlan &plan) const;

  /// Achievable fraction of peak for an (m x k) * (k x n) GEMM:
  /// gemmMaxEfficiency * f(m) f(n) f(k) with f(d) = d / (d + gemmHalfDim).
  double gemmEfficiency(double m, double n, double k) const;

  /// Seconds of `batch` such GEMMs at 16-bit.
  double gemmTime(double m, double n, double k, double batch = 1) const;

  /// Forward seconds of one transformer layer for one micro-batch on one
  /// tp rank: the six GEMMs of attention + MLP and the memory-bound kernels.
  double layerForwardTime(int64_t b, int64_t t, bool sequenceParallel) const;

  /// Forward seconds of one MoE layer for one micro-batch on one rank of
  /// an expert group of `ep`: the attention as in layerForwardTime, the
  /// router (b s x h x E), and the rank's E/ep experts as batched GEMMs on
  /// ep C rows each (E C rows in all, C scaled from the model's micro-batch
  /// to b), whole on every tp rank; the memory-bound traffic of
  /// moeActivationBytesPerLayer. Equal to layerForwardTime for a dense
  /// model.
  double moeLayerForwardTime(int64_t b, int64_t t, int64_t ep) const;

  /// Seconds of one of an MoE layer's all-to-alls for one micro-batch: the
  /// dispatched [E, C, h] (4 bytes an element in fp32 plans, else 2) over
  /// the plan's ep ranks; 0 at ep = 1 or for a dense model.
  double allToAllTime(const ParallelPlan &plan) const;

  /// ZeRO-3 all-gathers (and reduce-scatters) one layer issues per pass on
  /// a tp rank: one per parameter tensor of more than
  /// `persistenceThreshold` elements (the rest stay whole on every rank,
  /// DeepSpeed's stage3_param_persistence_threshold): 12 for GPT-2's block
  /// at threshold 0, 4 (the matrices) at DeepSpeed's default of 1e5 for
  /// h = 12288.
  int64_t zero3CollectivesPerLayer(int64_t t,
                                   int64_t persistenceThreshold) const;

  /// Forward seconds of the output projection and cross-entropy.
  double logitsForwardTime(int64_t b, int64_t t) const;

private:
  /// Forward seconds of `layers` consecutive layers of which `moeLayers`
  /// are MoE layers.
  double layersForwardTime(double layers, double moeLayers, int64_t b,
                           int64_t t, bool sequenceParallel, int64_t ep) const;
  /// The MoE layers' all-to-all bytes: E C h elements of the plan's
  /// precision, C scaled to the plan's micro-batch.
  double allToAllBytes(const ParallelPlan &plan) const;
  /// MoE layers of the pipeline rank that holds the most (over its
  /// virtual-stage chunks; all of them without a pipeline): that rank's
  /// experts, compute and activations are the ones priced.
  int64_t busiestRankMoeLayers(const ParallelPlan &plan) const;

  ModelShape modelShape;
  ClusterSpec clusterSpec;
};

} // namespace mlir::dsc::analysis

#endif // DSC_ANALYSIS_COSTMODEL_H
