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
  if (tp > 1 && sequenceParallel)
    s += " sp";
  if (recompute)
    s += " recompute";
  if (offloadOptimizer)
    s += " offload";
  return s;
}
