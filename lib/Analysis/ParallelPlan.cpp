//===- ParallelPlan.cpp - One point of the parallelization space ----------===//
//
// Part of the dsc project.
//
//===----------------------------------------------------------------------===//
//
// What changes between two plans, in the search's terms (the plan's own
// textual form is dsc/Support/ParallelPlan.h's).
//
//===----------------------------------------------------------------------===//

#include "dsc/Analysis/ParallelPlan.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir::dsc::analysis;

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
  number("ep", from.ep, to.ep);
  number("zero", from.zeroStage, to.zeroStage);
  number("micro-batch size", from.microBatchSize, to.microBatchSize);
  number("micro-batches", from.numMicroBatches, to.numMicroBatches);
  if (from.pp > 1 && to.pp > 1 && from.schedule != to.schedule)
    changes.push_back(llvm::formatv("schedule {0} -> {1}",
                                    scheduleName(from.schedule),
                                    scheduleName(to.schedule)));
  number("virtual stages", from.virtualStages, to.virtualStages);
  flag("recompute", from.fullRecompute(), to.fullRecompute());
  flag("sequence parallelism", from.sequenceParallel && from.tp > 1,
       to.sequenceParallel && to.tp > 1);
  flag("optimizer offload", from.offloadsOptimizer(), to.offloadsOptimizer());
  flag("parameter offload", from.offloadsParams(), to.offloadsParams());
  flag("delayed parameter update", from.delayedUpdate, to.delayedUpdate);
  return changes;
}
