//===- RunContext.h - What a backend may ask while it runs ------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The InstructionContext the executor hands its backend: the plan, buffers
// through the arenas, the mesh's groups, and the counters that only the
// training loop moves (the optimizer step, the micro-batch, the seed), which
// this part owns.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_LIB_RUNTIME_EXEC_RUNCONTEXT_H
#define DSC_LIB_RUNTIME_EXEC_RUNCONTEXT_H

#include "Arenas.h"
#include "MeshGroups.h"

#include "dsc/Runtime/Backend.h"
#include "dsc/Runtime/TokenSchedule.h"

#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

namespace dsc::rt {

class RunContext final : public InstructionContext {
public:
  RunContext(const Plan &plan, const Arenas &arenas, const MeshGroups &mesh)
      : thePlan(plan), arenas(arenas), mesh(mesh) {}

  const Plan &plan() const override { return thePlan; }
  BufferView buffer(uint32_t id) override { return arenas.view(id); }
  const std::vector<int64_t> &meshCoordinates() const override {
    return mesh.coordinates();
  }
  Communicator &requireGroup(const Program &prog, size_t index,
                             int64_t axes) const override {
    return mesh.require(prog, index, axes);
  }
  /// The step the next optimizer run performs; on the thread of a delayed
  /// parameter update, the step that update belongs to.
  int64_t step() const override;
  /// By tokens when a token schedule is set.
  double learningRate(const ops::LearningRate &lr) const override;
  uint64_t dropoutSeed(int64_t instructionSeed) const override;

  /// Sums the loads per router (by its program and index) over the
  /// step's micro-batches.
  void noteExpertLoads(const Program &prog, size_t index,
                       const int64_t *loads, int64_t experts) override;
  /// Forgets the loads noted so far (at the start of a step).
  void clearExpertLoads() { expertLoads.clear(); }
  /// The largest, over the routers noted since, of an expert's load over
  /// the mean load of its router's experts (1: perfectly balanced); NaN
  /// when none was.
  double expertLoadImbalance() const;

  void setStep(int64_t step) { currentStep = step; }
  void setMicroBatch(int64_t index) { microBatch = index; }
  uint64_t seed() const { return runSeed; }
  /// A fresh run from `seed`: step 1, micro-batch 0.
  void restart(uint64_t seed) {
    runSeed = seed;
    currentStep = 1;
    microBatch = 0;
  }
  /// Marks the calling thread as running the update of `step` (0: none).
  static void setThreadStep(int64_t step);

  /// The token schedule (none: by steps), its warm-up steps, and the
  /// tokens consumed, which the training loop counts after each step.
  void setTokenSchedule(const TokenSchedule &schedule, int64_t warmupSteps) {
    tokenSchedule = schedule;
    tokenWarmupSteps = warmupSteps;
  }
  const TokenSchedule *schedule() const {
    return tokenSchedule ? &*tokenSchedule : nullptr;
  }
  int64_t warmupSteps() const { return tokenWarmupSteps; }
  TokenCounts &tokens() { return tokenCounts; }
  const TokenCounts &tokens() const { return tokenCounts; }

private:
  const Plan &thePlan;
  const Arenas &arenas;
  const MeshGroups &mesh;
  int64_t currentStep = 1;
  int64_t microBatch = 0;
  uint64_t runSeed = 0;
  std::optional<TokenSchedule> tokenSchedule;
  int64_t tokenWarmupSteps = 0;
  TokenCounts tokenCounts;
  std::map<std::pair<const Program *, size_t>, std::vector<int64_t>>
      expertLoads;
};

} // namespace dsc::rt

#endif // DSC_LIB_RUNTIME_EXEC_RUNCONTEXT_H
