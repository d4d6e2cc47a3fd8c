//===- PipelineStep.h - One rank's part of a pipelined step -----*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The pipeline's messages and what waits for them: the rank's step program
// as the compiler scheduled it (--dsc-pipeline-schedule) and proved free of
// deadlock, run in order over the rank's stages. What a micro-batch keeps
// (its stage input and residuals until its backward, the gradient received
// until then, zero-bubble the weight stash) lives in the slots of the
// arena the step names; each message is received in place, in its slot,
// and sent from where it was written. It decides nothing and copies
// nothing.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_LIB_RUNTIME_EXEC_PIPELINESTEP_H
#define DSC_LIB_RUNTIME_EXEC_PIPELINESTEP_H

#include "Arenas.h"
#include "MeshGroups.h"
#include "ProgramRunner.h"
#include "RunContext.h"
#include "TokenFeed.h"

#include <cstdint>
#include <utility>
#include <vector>

namespace dsc::rt {

class PipelineStep {
public:
  PipelineStep(const Plan &plan, Backend &backend, Arenas &arenas,
               const MeshGroups &mesh, RunContext &context,
               ProgramRunner &runner, TokenFeed &feed)
      : plan(plan), backend(backend), arenas(arenas), mesh(mesh),
        context(context), runner(runner), feed(feed) {}
  PipelineStep(const PipelineStep &) = delete;
  PipelineStep &operator=(const PipelineStep &) = delete;

  /// Whether this rank holds the last stage, the one computing the loss.
  bool holdsLoss() const;
  /// Runs this rank's step program, which schedules the plan's
  /// micro-batches (their numbers for dropout start at `firstMicroBatch`);
  /// the last stage's backward is seeded with `backwardSeed`; a
  /// curriculum's `length` (null without one) chooses the stages and cuts
  /// the samples. Returns the loss summed over the micro-batches (0 on a
  /// rank without the last stage).
  double run(const TokenFeed::Fill &fill, int64_t firstMicroBatch,
             double backwardSeed, const CurriculumLength *length);

private:
  const Plan &plan;
  Backend &backend;
  Arenas &arenas;
  const MeshGroups &mesh;
  RunContext &context;
  ProgramRunner &runner;
  TokenFeed &feed;
};

} // namespace dsc::rt

#endif // DSC_LIB_RUNTIME_EXEC_PIPELINESTEP_H
