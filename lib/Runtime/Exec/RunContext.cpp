//===- RunContext.cpp - What a backend may ask while it runs --------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The step a delayed update's instructions read, the learning rate by
// steps or tokens, and the dropout streams.
//
//===----------------------------------------------------------------------===//

#include "RunContext.h"

#include "dsc/Runtime/Instructions.h"
#include "dsc/Runtime/SplitMix64.h"

#include <algorithm>
#include <cmath>

using namespace dsc::rt;

namespace {
/// The step an overlapped update's instructions read (RunContext::step on
/// its thread): the one its optimizer program ran in.
thread_local int64_t overlappedStep = 0;
} // namespace

void RunContext::setThreadStep(int64_t step) { overlappedStep = step; }

int64_t RunContext::step() const {
  return overlappedStep ? overlappedStep : currentStep;
}

double RunContext::learningRate(const ops::LearningRate &lr) const {
  return tokenSchedule
             ? tokenLearningRate(lr, *tokenSchedule, tokenCounts, step())
             : scheduledLearningRate(lr, step());
}

uint64_t RunContext::dropoutSeed(int64_t instructionSeed) const {
  return dropoutStreamSeed(runSeed, currentStep, microBatch, instructionSeed);
}

void RunContext::noteExpertLoads(const Program &prog, size_t index,
                                 const int64_t *loads, int64_t experts) {
  std::vector<int64_t> &sum = expertLoads[{&prog, index}];
  sum.resize(size_t(experts), 0);
  for (int64_t e = 0; e < experts; ++e)
    sum[size_t(e)] += loads[e];
}

double RunContext::expertLoadImbalance() const {
  double worst = std::nan("");
  for (const auto &[router, loads] : expertLoads) {
    int64_t total = 0, most = 0;
    for (int64_t load : loads) {
      total += load;
      most = std::max(most, load);
    }
    if (total == 0)
      continue;
    const double ratio = double(most) * double(loads.size()) / double(total);
    worst = std::isnan(worst) ? ratio : std::max(worst, ratio);
  }
  return worst;
}
