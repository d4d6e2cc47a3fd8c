//===- ParallelPlan.h - One point of the parallelization space --*- C++ -*-===//
//
// Part of the dsc project.
//
//===----------------------------------------------------------------------===//
//
// The knobs a user of Megatron-LM/DeepSpeed sets by hand, gathered in one
// value type that the cost model prices and the search enumerates.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_ANALYSIS_PARALLELPLAN_H
#define DSC_ANALYSIS_PARALLELPLAN_H

#include "dsc/Support/PipelineScheduleKind.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mlir::dsc::analysis {

/// The pipeline schedule: the compiler's kind
/// (dsc/Support/PipelineScheduleKind.h), so a plan the search picks lowers
/// to the schedule the runtime runs.
using PipelineSchedule = ::dsc::PipelineScheduleKind;

/// Returns "gpipe", "1f1b", "interleaved-1f1b" or "zb-h1" (the spelling used
/// in reports and attributes).
inline const char *scheduleName(PipelineSchedule s) {
  return ::dsc::pipelineScheduleName(s);
}

/// A 3D-parallel training plan. Ranks are laid out as Megatron-LM orders
/// them: tp innermost, then dp, then pp, i.e.
/// rank = tpRank + tp * (dpRank + dp * ppRank).
struct ParallelPlan {
  int64_t dp = 1;
  int64_t tp = 1;
  int64_t pp = 1;
  /// ZeRO stage 0-3 along the dp axis.
  int zeroStage = 0;
  int64_t microBatchSize = 1;
  /// Micro-batches per step per data-parallel replica (gradient accumulation
  /// steps); global batch = dp * microBatchSize * numMicroBatches.
  int64_t numMicroBatches = 1;
  PipelineSchedule schedule = PipelineSchedule::OneFOneB;
  /// Model chunks per pipeline rank (interleaved 1F1B's v; 1 otherwise).
  int64_t virtualStages = 1;
  /// Full activation recompute (checkpoint every layer input).
  bool recompute = false;
  /// Megatron sequence parallelism in the tp group (only meaningful if tp>1).
  bool sequenceParallel = false;
  /// ZeRO-Offload of optimizer states (and the gradient partition) to host
  /// memory, or to NVMe when the host cannot hold them.
  bool offloadOptimizer = false;
  /// ZeRO-Infinity's parameter offload: ZeRO-3's parameter chunks live
  /// with the optimizer states and are fetched to the device for each
  /// gather (needs zeroStage 3 and offloadOptimizer).
  bool offloadParams = false;
  /// ZeRO-Offload's delayed parameter update (dpu=1): the host's update
  /// runs beside the next step's forward and backward (needs optimizer
  /// offload to host memory, no parameter offload). It changes the
  /// numerics (gradients a step stale), so the search never picks it; the
  /// estimate prices it when asked.
  bool delayedUpdate = false;
  /// Element sizes: false for mixed precision (16-bit parameters,
  /// gradients and activations, the papers' forms), true for an fp32 plan
  /// as --dsc-compile builds it by default (MemoryModel.h's fp32 forms).
  bool fp32 = false;

  int64_t numGpus() const { return dp * tp * pp; }
  int64_t globalBatch() const { return dp * microBatchSize * numMicroBatches; }

  /// Short human form, e.g. "dp=8 tp=8 pp=16 zero=1 b=1 m=192 1f1b".
  std::string str() const;
};

/// What turns plan `from` into plan `to`, one knob a line in the search's
/// terms ("pp 16 -> 4", "recompute on -> off"); empty when they are equal.
std::vector<std::string> planChanges(const ParallelPlan &from,
                                     const ParallelPlan &to);

} // namespace mlir::dsc::analysis

#endif // DSC_ANALYSIS_PARALLELPLAN_H
