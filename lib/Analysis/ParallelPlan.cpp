//===- ParallelPlan.cpp - One point of the parallelization space ----------===//
//
// Part of the dsc project.
//
//===----------------------------------------------------------------------===//
//
// Printing of plans; kept apart so reports, diagnostics and tests agree on
// one spelling.
//
//===----------------------------------------------------------------------===//

#include "dsc/Analysis/ParallelPlan.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir::dsc::analysis;

std::string ParallelPlan::str() const {
  std::string s =
      llvm::formatv("dp={0} tp={1} pp={2} zero={3} b={4} m={5}", dp, tp, pp,
                    zeroStage, microBatchSize, numMicroBatches);
  if (pp > 1)
    s += std::string(" ") + scheduleName(schedule);
  if (virtualStages > 1)
    s += llvm::formatv(" v={0}", virtualStages).str();
  if (tp > 1 && sequenceParallel)
    s += " sp";
  if (recompute)
    s += " recompute";
  if (offloadOptimizer)
    s += " offload";
  if (offloadParams)
    s += " offload-params";
  if (delayedUpdate)
    s += " dpu";
  if (fp32)
    s += " fp32";
  return s;
}

std::vector<std::string>
mlir::dsc::analysis::planChanges(const ParallelPlan &from,
                                 const ParallelPlan &to) {
  std::vector<std::string> changes;
  auto number = [&](const char *knob, int64_t a, int64_t b) {
    if (a != b)
      changes.push_back(llvm::formatv("{0} {1} -> {2}", knob, a, b));
  };
  auto flag = [&](const char *knob, bool a, bool b) {
    if (a != b)
      changes.push_back(llvm::formatv("{0} {1} -> {2}", knob, a ? "on" : "off",
                                      b ? "on" : "off"));
  };
  number("dp", from.dp, to.dp);
  number("tp", from.tp, to.tp);
  number("pp", from.pp, to.pp);
  number("zero", from.zeroStage, to.zeroStage);
  number("micro-batch size", from.microBatchSize, to.microBatchSize);
  number("micro-batches", from.numMicroBatches, to.numMicroBatches);
  if (from.pp > 1 && to.pp > 1 && from.schedule != to.schedule)
    changes.push_back(llvm::formatv("schedule {0} -> {1}",
                                    scheduleName(from.schedule),
                                    scheduleName(to.schedule)));
  number("virtual stages", from.virtualStages, to.virtualStages);
  flag("recompute", from.recompute, to.recompute);
  flag("sequence parallelism", from.sequenceParallel && from.tp > 1,
       to.sequenceParallel && to.tp > 1);
  flag("optimizer offload", from.offloadOptimizer, to.offloadOptimizer);
  flag("parameter offload", from.offloadParams, to.offloadParams);
  flag("delayed parameter update", from.delayedUpdate, to.delayedUpdate);
  return changes;
}
