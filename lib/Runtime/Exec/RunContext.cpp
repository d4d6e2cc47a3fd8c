//===- RunContext.cpp - What a backend may ask while it runs --------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The step a delayed update's instructions read, and the dropout streams.
//
//===----------------------------------------------------------------------===//

#include "RunContext.h"

#include "dsc/Runtime/SplitMix64.h"

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

uint64_t RunContext::dropoutSeed(int64_t instructionSeed) const {
  return dropoutStreamSeed(runSeed, currentStep, microBatch, instructionSeed);
}
