//===- PipelineStep.h - One rank's part of a pipelined step -----*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The pipeline's messages and what waits for them: the rank's step program
// as the compiler scheduled it (--dsc-pipeline-schedule) and proved free of
// deadlock, run in order over the rank's stages. It keeps each micro-batch's
// stage input (and residuals) until its backward, zero-bubble what the
// backward keeps for its weight-gradient part, and each message received
// until the forward or backward that reads it, in slots of backend memory
// it owns across steps. It decides nothing.
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
  /// Releases the slots.
  ~PipelineStep();
  PipelineStep(const PipelineStep &) = delete;
  PipelineStep &operator=(const PipelineStep &) = delete;

  /// Whether this rank holds the last stage, the one computing the loss.
  bool holdsLoss() const;
  /// Runs this rank's step program, which schedules the plan's
  /// micro-batches (their numbers for dropout start at `firstMicroBatch`);
  /// the last stage's backward is seeded with `backwardSeed`. Returns the
  /// loss summed over the micro-batches (0 on a rank without the last
  /// stage).
  double run(const TokenFeed::Fill &fill, int64_t firstMicroBatch,
             double backwardSeed);

private:
  const Plan &plan;
  Backend &backend;
  Arenas &arenas;
  const MeshGroups &mesh;
  RunContext &context;
  ProgramRunner &runner;
  TokenFeed &feed;
  /// Backend memory slots (bytes, slot), kept across steps: the buffers,
  /// hence their sizes, are the same every step.
  std::vector<std::pair<size_t, uint8_t *>> slots;
};

} // namespace dsc::rt

#endif // DSC_LIB_RUNTIME_EXEC_PIPELINESTEP_H
