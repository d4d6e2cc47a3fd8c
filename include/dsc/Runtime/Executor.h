//===- Executor.h - Runs a plan's programs on a backend ---------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The coordinator of the parts that run a plan on one rank, each owning its
// state, with its header in lib/Runtime/Exec: arenas and tiers, mesh groups,
// the step runner and its communication lane, the pipelined step, the token
// feed, loss scaling, checkpoint I/O. None calls back into the coordinator.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_EXECUTOR_H
#define DSC_RUNTIME_EXECUTOR_H

#include "dsc/Runtime/Backend.h"
#include "dsc/Runtime/InstructionEvent.h"
#include "dsc/Runtime/LossScaler.h"
#include "dsc/Runtime/NvmeStore.h"
#include "dsc/Runtime/StepResult.h"
#include "dsc/Runtime/TokenSchedule.h"
#include "dsc/Runtime/TransferStats.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dsc::rt {

class Arenas;
class CheckpointIO;
class Collectives;
class LossScaling;
class MeshGroups;
class PipelineStep;
class ProgramRunner;
class RunContext;
class TierTransfers;
class TokenFeed;
class ZeroOneAdamStageCursor;

class Executor final {
public:
  /// Validates the plan, prepares `backend` (default: the CPU's), allocates
  /// and initializes; a mesh needs `world` (not owned) of exactly its ranks,
  /// every one constructing its executor (groups are split). Throws Error.
  explicit Executor(Plan plan, uint64_t seed = 1234,
                    Communicator *world = nullptr,
                    std::unique_ptr<Backend> backend = nullptr);
  ~Executor(); // not copyable: it owns its parts

  const Plan &plan() const { return thePlan; }
  Backend &backend() const { return *backendImpl; }
  uint64_t allocatedBytes(uint32_t arena) const; // an nvme arena: its file's
  /// Scratch outside the arenas (the backend's, the collectives' staging).
  uint64_t scratchBytes() const;
  /// Zeroes the arenas, draws the initializers (Initializers.h), step 1.
  void initialize(uint64_t seed);

  /// The ids; tokens() and targets() only on host memory (else Error).
  void setTokens(const int32_t *data, size_t count);
  void setTargets(const int32_t *data, size_t count);
  int32_t *tokens();
  int32_t *targets();
  void setGradientSeed(double scale); // the backward's seed, if any

  /// Runs program `name`; Error for an unknown one or a bad run-time input.
  void runProgram(const std::string &name);
  using BatchFill = std::function<void(int64_t microBatch, int32_t *tokens,
                                       int32_t *targets)>;
  /// One training step: `fill` writes each micro-batch's ids, then
  /// forward_backward, then optimizer; a pipelined plan runs this rank's
  /// step program (every rank of the pp group calls it alike).
  StepResult trainStep(const BatchFill &fill, int64_t microBatches);

  double loss() const;
  double gradNorm() const; // NaN when the plan has none
  /// Whether optimizer step `optimizerStep` (1-based) runs a 1-bit
  /// optimizer's "optimizer.compressed" instead of "optimizer".
  bool compressesAt(int64_t optimizerStep) const;
  /// The program optimizer step `optimizerStep` (1-based) runs on a plan
  /// without pipelines, and the buffers of its gradient norm and learning
  /// rate (-1: none): "optimizer", a 1-bit optimizer's compressed one from
  /// its freeze step on, or 0/1 Adam's program of the step's kind.
  struct OptimizerProgram {
    std::string name;
    int64_t gradNorm = -1, learningRate = -1;
  };
  OptimizerProgram optimizerAt(int64_t optimizerStep) const;
  double learningRate() const; // NaN when the plan has none
  int64_t step() const;        // the 1-based step the next update performs
  void setStep(int64_t step);
  /// Iterations done: the optimizer steps plus the steps loss scaling
  /// skipped, this run's and (after loadCheckpoint) the checkpoint's, in
  /// whatever precision either ran.
  int64_t iterationsDone() const;
  /// Mixed into the dropout seeds with the step and the run's seed.
  void setMicroBatch(int64_t index);
  uint64_t dropoutSeed(int64_t instructionSeed) const;
  void setBaseLearningRate(double lr); // rescaleLearningRates (Plan.h)
  /// Megatron-DeepSpeed's token-based learning rate (TokenSchedule.h):
  /// checks `schedule` against the plan (Error naming the key), then every
  /// LearningRate instruction reads the tokens consumed instead of steps.
  void setTokenSchedule(const TokenSchedule &schedule);
  /// Counts a finished step's `tokens` (countStepTokens); from the first
  /// call on, checkpoints record the counts.
  void countTokens(int64_t tokens, bool stepped);
  const TokenCounts &tokenCounts() const;
  /// Whether the last loadCheckpoint found token counts to restore.
  bool restoredTokenCounts() const { return tokensRestored; }

  BufferView buffer(const std::string &name); // Error naming it when absent
  BufferView buffer(uint32_t id);
  /// A float buffer's values as doubles, wherever it lives.
  std::vector<double> read(const std::string &name);

  /// Checkpoints (docs/checkpoints.md): every rank calls these alike.
  std::string saveCheckpoint(const std::string &dir,
                             int64_t consumedSamples = 0, int64_t keep = 0);
  /// saveCheckpoint's halves, to save beside training: the snapshot (its
  /// host bytes), then the commit (nullopt: not all written, ask later).
  uint64_t beginCheckpoint(const std::string &dir, int64_t consumedSamples,
                           int64_t keep, bool async);
  std::optional<std::string> finishCheckpoint(bool wait);
  bool checkpointInFlight() const;
  /// Restores any plan's checkpoint of this model; the consumed samples.
  int64_t loadCheckpoint(const std::string &path);
  /// What the last loadCheckpoint started afresh instead of restoring (a
  /// 1-bit optimizer's errors saved by another group size), for the log.
  const std::vector<std::string> &loadWarnings() const {
    return lastLoadWarnings;
  }

  bool scalesLoss() const; // f16 plans (LossScaling.h)
  void setLossScalerConfig(const LossScalerConfig &cfg);
  const DynamicLossScaler *lossScaler() const;

  int64_t stage() const; // the rank's (first) pipeline stage, or -1
  Communicator *world() const;
  const std::vector<int64_t> &meshCoordinates() const;
  Communicator *group(int64_t axes) const; // null when not split
  const TransferStats &transferStats() const;
  const NvmeStore *nvmeStore(uint32_t arena) const;
  CommStats collectiveStats() const; // the plan's groups, summed

  /// Collectives beside compute (default: the backend's); the same bits.
  void setOverlapCommunication(bool on);
  bool overlapsCommunication() const;
  /// Per collective of program `name`: (its index, where it is launched).
  std::vector<std::pair<size_t, size_t>>
  collectiveLaunchPoints(const std::string &name);

  /// Called after each instruction with its timing; none by default.
  void setInstructionHook(InstructionHook hook);
  double nowUs() const; // since construction, on the executor's clock

private:
  std::vector<std::string> lastLoadWarnings;
  /// Skipped steps the loaded checkpoint counted that this run's scaler
  /// does not hold (an fp16 run resumed without loss scaling, or with a
  /// scaler started afresh).
  int64_t skippedBeforeThisScaler = 0;
  /// Tokens are counted (countTokens) or were restored from a checkpoint.
  bool tokensCounted = false, tokensRestored = false;
  /// Every step's update: the overflow vote, `optimizer`, norm, rate, bytes.
  void finishStep(StepResult &r, const std::string &optimizer,
                  int64_t gradNormId, int64_t lrId, uint64_t sentBefore);

  Plan thePlan;
  std::unique_ptr<Backend> backendImpl;
  std::unique_ptr<Arenas> arenas;
  std::unique_ptr<MeshGroups> mesh;
  std::unique_ptr<RunContext> context;
  std::unique_ptr<TierTransfers> tiers;
  std::unique_ptr<Collectives> collectives;
  std::unique_ptr<ProgramRunner> runner;
  std::unique_ptr<TokenFeed> feed;
  std::unique_ptr<LossScaling> scaling;
  std::unique_ptr<PipelineStep> pipeline;
  std::unique_ptr<CheckpointIO> checkpoints;
  /// The loss buffer of the last training step's program (a curriculum's
  /// length's); -1: the plan's.
  int64_t lossBuffer = -1;
  /// 0/1 Adam's policy as the run advances (optimizerAt); null without it.
  std::unique_ptr<ZeroOneAdamStageCursor> zeroOneAdamStages;
};

} // namespace dsc::rt

#endif // DSC_RUNTIME_EXECUTOR_H
