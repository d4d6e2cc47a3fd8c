//===- Executor.h - Runs a plan's programs on a backend ---------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The executor owns one allocation per plan arena, fills the parameters from
// a seed, and runs programs by handing each compute instruction to its
// Backend (Backend.h): the CPU kernels on host memory by default, or the
// CUDA kernels on device memory (CudaBackend.h). Collectives, steps,
// micro-batches and pipeline schedules are the executor's, whatever the
// backend.
//
// A plan with a mesh (Plan::mesh) runs on every rank of a Communicator, one
// Executor per rank: the executor derives the rank's mesh coordinates from
// its world rank, splits one group communicator per distinct `axes` mask of
// its collectives at construction (every rank constructs its executor, so
// the splits match), and runs AllReduce over them, one call per bucket of
// buffers contiguous in their arena.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_EXECUTOR_H
#define DSC_RUNTIME_EXECUTOR_H

#include "dsc/Runtime/Backend.h"
#include "dsc/Runtime/Communicator.h"
#include "dsc/Runtime/Error.h"
#include "dsc/Runtime/LossScaler.h"
#include "dsc/Runtime/NvmeStore.h"
#include "dsc/Runtime/Plan.h"

#include <cmath>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace dsc::rt {

/// One executed instruction, for a Chrome trace. Times are microseconds on
/// the steady clock since the executor was constructed.
struct InstructionEvent {
  const Program *program = nullptr;
  size_t index = 0;
  const Instruction *instruction = nullptr;
  double startUs = 0, durationUs = 0;
  /// The lane it ran on: 0 is the compute stream, 1 communication
  /// (collectives; on the CPU they run in turn with compute).
  int stream = 0;
  /// A collective (AllReduce, ...); then `bytesSent` is what this rank sent.
  bool collective = false;
  uint64_t bytesSent = 0;
};
using InstructionHook = std::function<void(const InstructionEvent &)>;

/// What trainStep reports.
struct StepResult {
  double loss = 0; // mean over the micro-batches
  /// False on a pipeline stage other than the last, which computes no loss
  /// (then `loss` is 0).
  bool hasLoss = true;
  double gradNorm = 0;     // NaN when the plan computes none
  double learningRate = 0; // NaN when the plan has no lr buffer
  /// Bytes this rank sent in the plan's collectives during the step (the
  /// communicators' counters: measured under threads, the ring model under
  /// MPI); compare with PlanSummary::collectiveBytesPerStep.
  uint64_t collectiveBytesSent = 0;
  /// Dynamic loss scaling (plans computing in f16): the scale this step's
  /// backward used (NaN without scaling), whether its gradients overflowed
  /// and the step was skipped (then gradNorm is NaN: no optimizer ran), and
  /// the steps skipped so far.
  double lossScale = std::nan("");
  bool skipped = false;
  int64_t skippedSteps = 0;
  /// Wall milliseconds of the step's update: the overflow check, the
  /// optimizer program and reading its norm (the rest of the step is the
  /// forward and backward), for DeepSpeed's wall_clock_breakdown.
  double optimizerMs = 0;
};

/// A checkpoint saved beside training (Checkpoint.cpp).
struct PendingCheckpoint;
/// A worker thread that runs work in order beside compute (CommLane.h).
class CommLane;

class Executor final : public InstructionContext {
public:
  /// Validates the plan (validatePlan), checks that `backend` (default: the
  /// CPU's) supports it, allocates the arenas and scratch, and initializes
  /// with `seed`. A plan with a mesh needs `world` (not
  /// owned; it must outlive the executor) spanning exactly the mesh's ranks;
  /// the constructor then splits the groups its collectives use, a
  /// collective call every rank makes. A plan without a mesh takes no world
  /// or a one-rank one. Throws Error.
  explicit Executor(Plan plan, uint64_t seed = 1234,
                    Communicator *world = nullptr,
                    std::unique_ptr<Backend> backend = nullptr);
  ~Executor();
  Executor(const Executor &) = delete;
  Executor &operator=(const Executor &) = delete;

  const Plan &plan() const override { return thePlan; }
  /// Bytes allocated for arena `arena` (an nvme arena's: its file's):
  /// equals the plan's arena size.
  uint64_t allocatedBytes(uint32_t arena) const;
  /// Scratch outside the arenas (the backend's, e.g. the CPU attention's
  /// per-thread blocks, and the reduce-scatter staging), not in the plan's
  /// peak.
  uint64_t scratchBytes() const {
    return backendImpl->scratchBytes() + stagingSize;
  }
  Backend &backend() const { return *backendImpl; }

  /// Zeroes every arena, then fills each buffer with an initializer:
  /// Normal draws N(0, std^2) from a counter-based generator keyed by
  /// (seed, FNV-1a of the buffer's name, element index), so the values do not
  /// depend on the thread count, the buffer order or the arena layout.
  /// Resets the step to 1.
  void initialize(uint64_t seed);

  /// Copy a [microBatchSize, seqLength] batch into the well-known buffers.
  void setTokens(const int32_t *data, size_t count);
  void setTargets(const int32_t *data, size_t count);
  /// The buffers themselves, for a host-addressable backend (throws Error
  /// on another).
  int32_t *tokens();
  int32_t *targets();
  /// Writes the plan's gradientSeed constant (if any): the backward's seed.
  /// It starts at its compiled value; trainStep sets 1/microBatches, so any
  /// micro-batch count averages the gradients.
  void setGradientSeed(double scale);

  /// Runs program `name`. Throws Error for an unknown program or a bad
  /// input found at run time (a token id outside the vocab).
  void runProgram(const std::string &name);
  /// One training step: for each of `microBatches` micro-batches, `fill`
  /// writes tokens and targets, then forward_backward runs; then optimizer
  /// runs and the step advances. A pipelined plan (Plan::stages) runs this
  /// rank's stage in the plan's schedule instead: every rank of the pp
  /// group calls trainStep with the same micro-batch count; `fill` is
  /// called on the first stage before a micro-batch's forward (tokens) and
  /// on the last before its backward (targets).
  StepResult
  trainStep(const std::function<void(int64_t microBatch, int32_t *tokens,
                                     int32_t *targets)> &fill,
            int64_t microBatches);

  /// The loss buffer's value (after forward_backward or forward).
  double loss() const;
  /// The gradNorm/learningRate buffers' values; NaN when absent.
  double gradNorm() const;
  double learningRate() const;

  /// The 1-based training step that the next optimizer run performs;
  /// LearningRate and AdamW read it (the updates a delayed parameter update
  /// runs beside the next step read the step they belong to).
  int64_t step() const override;
  void setStep(int64_t step) { currentStep = step; }
  /// Mixed into dropout seeds with the step, so each micro-batch draws a
  /// fresh mask that its backward reproduces. trainStep numbers the step's
  /// micro-batches across data-parallel ranks (rank d's m-th is d*M + m),
  /// so dp ranks draw the masks one rank taking all dp*M draws.
  void setMicroBatch(int64_t index) { microBatch = index; }
  /// The dropout seed of an instruction with seed `instructionSeed` in the
  /// current step and micro-batch (the backends' Dropout and Attention).
  uint64_t dropoutSeed(int64_t instructionSeed) const override;
  /// Replaces every LearningRate instruction's base lr (dsc-run --lr); the
  /// warmup start and decay end scale with it. A CyclicLearningRate's base
  /// is OneCycle's peak (LRRangeTest's start), the other bound scaling with
  /// it. Throws Error if the plan has neither instruction.
  void setBaseLearningRate(double lr);

  /// A buffer by name (parameters, their state, well-known buffers); throws
  /// Error naming it when absent.
  BufferView buffer(const std::string &name);
  BufferView buffer(uint32_t id) override;
  /// A float buffer's values as doubles (tests, checkpoints).
  std::vector<double> read(const std::string &name);

  /// Saves a sharded checkpoint (docs/checkpoints.md): the parameters and
  /// optimizer state, the step, `consumedSamples`, the seed and the loss
  /// scaler, into `dir`/step-N (N: iterations done). Every rank of the world
  /// calls it; each writes only the pieces of its buffers no lower rank
  /// holds. Written into a temporary directory, fsynced, renamed into place,
  /// then `dir`/latest names it; then only the newest `keep` steps are kept
  /// (0: all). Returns the step directory. Throws Error on every rank when
  /// any rank fails (the previous checkpoints stay as they were).
  std::string saveCheckpoint(const std::string &dir,
                             int64_t consumedSamples = 0, int64_t keep = 0);
  /// The two halves of saveCheckpoint, for saving beside training
  /// (--save-async). beginCheckpoint, at a step boundary: creates the
  /// temporary directory and copies this rank's pieces into host memory
  /// (its one cost to training); with `async` a thread of its own then
  /// writes and fsyncs the file while the next steps train, else it is
  /// written before the call returns. Returns the snapshot's host bytes on
  /// this rank. At most one save is in flight: Error if one is.
  uint64_t beginCheckpoint(const std::string &dir, int64_t consumedSamples,
                           int64_t keep, bool async);
  /// Commits the save in flight: the ranks share their pieces' offsets and
  /// checksums, rank 0 writes the manifest and renames the step into place
  /// (saveCheckpoint's commit). With `wait` it waits for every rank's
  /// writer; without, it commits only when all have finished (one small
  /// all-reduce) and otherwise returns nullopt, to be asked again at a
  /// later step boundary. Returns the step directory once committed. Every
  /// rank calls it at the same points; a failure on any rank throws on all.
  std::optional<std::string> finishCheckpoint(bool wait);
  bool checkpointInFlight() const { return pendingSave != nullptr; }
  /// Restores a checkpoint saved by any plan of the same model (the mesh,
  /// ZeRO stage, rank count, memory layout and float precision may differ):
  /// `path` is a step directory or a directory whose `latest` names one.
  /// Each rank reads only the pieces that overlap its own buffers. Zeroes
  /// the gradients; returns the consumed-sample count. Every rank calls it;
  /// it checks everything (the manifest, the files, the checksums, on every
  /// rank) before any rank changes anything, and throws Error naming the
  /// file and the tensor at fault.
  int64_t loadCheckpoint(const std::string &path);

  /// Whether the plan trains with dynamic loss scaling: it computes in f16
  /// (--dsc-compile precision=fp16), whose 5-bit exponent underflows small
  /// gradients. DeepSpeed's DynamicLossScaler with its defaults
  /// (LossScaler.h): trainStep seeds the backward with scale/M, checks the
  /// gradients for inf/nan over every rank, and either skips the step
  /// (gradients zeroed, no optimizer step, the scale lowered after the
  /// hysteresis) or unscales them and runs the optimizer.
  bool scalesLoss() const { return scaler.has_value(); }
  /// Replaces the dynamic loss scaler's settings (a config's fp16 section)
  /// before the first step or a checkpoint's load; no effect on a plan that
  /// does not scale its loss.
  void setLossScalerConfig(const LossScalerConfig &cfg) {
    scalerConfig = cfg;
    if (scaler)
      scaler.emplace(cfg);
  }
  const DynamicLossScaler *lossScaler() const {
    return scaler ? &*scaler : nullptr;
  }

  /// This rank's coordinate on the mesh axis "pp" (its pipeline stage; its
  /// first stage when interleaved), or -1 for a plan without stages.
  int64_t stage() const { return stageIndex; }

  /// The world communicator (null for a one-rank plan run without one).
  Communicator *world() const { return worldComm; }
  /// This rank's coordinates on the plan's mesh (empty without a mesh).
  const std::vector<int64_t> &meshCoordinates() const override {
    return coords;
  }
  /// The group of the ranks differing from this one only on the axes in
  /// `axes` (a mask over Plan::mesh), as split at construction; null when
  /// no collective of the plan uses that mask.
  Communicator *group(int64_t axes) const;
  /// group(axes) for instruction `index` of `prog` (the backends' ops that
  /// use a group); an unsplit mask is an error naming the instruction.
  Communicator &requireGroup(const Program &prog, size_t index,
                             int64_t axes) const override;
  /// Bytes the plan's Transfer instructions moved, by source and
  /// destination tier ([from][to], Tier's values), and their wall time.
  struct TransferStats {
    uint64_t bytes[3][3] = {};
    double seconds[3][3] = {};
  };
  const TransferStats &transferStats() const { return transfers; }
  /// The NVMe arena `arena`'s file, or null (not an nvme arena).
  const NvmeStore *nvmeStore(uint32_t arena) const;
  /// The plan's collectives' counters: the sum over the groups (the world
  /// communicator's own traffic, e.g. dsc-run's loss average, is not in it).
  CommStats collectiveStats() const;

  /// Runs collectives beside compute (Backend::launchCollective): each is
  /// launched as soon as the instructions before it no longer touch its
  /// bytes, and an instruction that touches them waits for it. Needs groups
  /// whose communicators may be called from another thread. The default is
  /// the backend's (Backend::overlapsByDefault: on for CUDA, off for the
  /// CPU, whose lane would compete with the kernels for the same cores);
  /// off runs every collective in its place. Results are the same bits
  /// either way (each group's collectives keep their order).
  void setOverlapCommunication(bool on);
  bool overlapsCommunication() const { return overlap; }
  /// For each collective of program `name`, in order: (its index, the
  /// index of the instruction before which it is launched).
  std::vector<std::pair<size_t, size_t>>
  collectiveLaunchPoints(const std::string &name);

  /// Called after each instruction with its timing; none by default (no
  /// clock reads when unset). Timed programs run one instruction at a time.
  void setInstructionHook(InstructionHook hook) {
    instructionHook = std::move(hook);
  }
  /// Microseconds since construction on the executor's clock.
  double nowUs() const;

private:
  void runInstruction(const Program &prog, size_t index);
  /// runProgram with the instruction hook: one instruction at a time.
  void runTimed(const Program &prog);
  void releaseMemory();

  /// Bytes [begin, end) of an arena (-1: the reduce-scatter staging).
  struct ByteRange {
    int64_t arena;
    uint64_t begin, end;
  };
  /// Where a program's collectives are launched, and what its
  /// instructions touch.
  struct CommSchedule {
    std::vector<std::vector<size_t>> launchAt; // collectives to launch
                                               // before instruction i
    std::vector<bool> usesCommunicator;        // calls a group inside
    std::vector<std::vector<ByteRange>> ranges;
  };
  std::vector<ByteRange> rangesOf(const Instruction &inst) const;
  static bool overlaps(const std::vector<ByteRange> &a,
                       const std::vector<ByteRange> &b);
  const CommSchedule &commScheduleOf(const Program &prog);
  /// The vocabulary size the instructions reading id buffer `ids` assume
  /// (0 when none reads it).
  int64_t vocabularyReading(uint32_t ids) const;
  /// setTokens/setTargets: checks the count (and, on a device backend, the
  /// ids) and copies them in.
  void copyIds(uint32_t id, const int32_t *data, size_t count,
               const char *what);
  /// Host-addressable view of an i32 buffer (tokens(), targets()).
  int32_t *hostView(uint32_t id);
  double readScalar(uint32_t id) const;
  void writeScalar(uint32_t id, double value);
  /// The backward's seed for `microBatches` micro-batches: 1/M, times the
  /// loss scale when scaling.
  double lossSeed(int64_t microBatches) const;
  /// Before the optimizer of a scaled step: checks the gradients (every
  /// rank agrees), updates the scaler, and unscales them (true) or zeroes
  /// them for a skipped step (false). Fills `r`'s scaling fields.
  bool unscaleOrSkip(StepResult &r);
  /// Calls `fill` for micro-batch `microBatchInStep` on the tokens and
  /// targets buffers (host memory) or on their host mirrors, then copied in
  /// (device memory).
  void fillBatch(const std::function<void(int64_t, int32_t *, int32_t *)> &fill,
                 int64_t microBatchInStep);
  /// The number, in the whole step, of this rank's first micro-batch: its
  /// data-parallel coordinate times `microBatches`.
  int64_t firstMicroBatchOfRank(int64_t microBatches) const;
  /// Throws Error naming the program, the instruction and `msg`.
  [[noreturn]] void failAt(const Program &prog, size_t index,
                           const std::string &msg) const;
  void runAllReduce(const Program &prog, size_t index);
  void runAllGather(const Program &prog, size_t index);
  void runReduceScatter(const Program &prog, size_t index);
  void runTransfer(const Program &prog, size_t index);
  /// Whether instruction `index` of `prog` reads or writes an NVMe file
  /// from or to host-addressable memory: runProgram runs it on the NVMe
  /// lane beside compute.
  bool onNvmeLane(const Program &prog, size_t index) const;
  /// Whether arena `arena`'s memory is host memory a host thread may read
  /// and write (every arena of a host backend; the host tier's on a GPU).
  bool hostReachable(uint32_t arena) const;
  /// runTransfer's I/O queued on the NVMe lane; returns its ticket.
  uint64_t launchNvmeTransfer(const Program &prog, size_t index);
  /// Buffer `id`'s bytes into host memory `dst` / from `src`, wherever the
  /// buffer lives (an NVMe buffer through its file).
  void readBytes(uint32_t id, void *dst);
  void writeBytes(uint32_t id, const void *src);
  /// Runs the plan's "initialize" program, if it has one (after the
  /// parameters are initialized or loaded).
  void runInitializeProgram();
  /// The delayed parameter update (OverlapNextStep): runs instructions
  /// [from, end) of `prog` on a host thread beside what follows.
  void launchOverlapped(const Program &prog, size_t from);
  /// Waits for the overlapped update, if one runs; rethrows its error.
  void waitForOverlapped();
  /// Opens the nvme arenas' files under Plan::nvmePath.
  void openNvmeArenas(Communicator *world);
  void setUpMesh(Communicator *world);
  /// trainStep of a pipelined plan (PipelineSchedule.cpp).
  StepResult trainPipelineStep(
      const std::function<void(int64_t, int32_t *, int32_t *)> &fill,
      int64_t microBatches);

  Plan thePlan;
  std::unique_ptr<Backend> backendImpl;
  /// The optimizer's tail of a delayed parameter update while it runs, and
  /// what it failed with.
  std::thread overlapped;
  std::exception_ptr overlappedError;
  /// Each arena's memory; null for an nvme arena, whose bytes are a file.
  std::vector<uint8_t *> arenas;
  /// The nvme arenas' files, by arena index, and the lane that reads and
  /// writes them beside compute (the only caller of the stores while a
  /// program runs).
  std::map<uint32_t, std::unique_ptr<NvmeStore>> nvmeFiles;
  std::unique_ptr<CommLane> nvmeLane;
  TransferStats transfers;
  /// Whether initialize() ran before (the nvme files then hold data).
  bool initialized = false;
  /// Receives a reduce-scatter's chunk (backend memory).
  uint8_t *staging = nullptr;
  uint64_t stagingSize = 0;
  /// A device backend's host copies of the tokens and targets buffers.
  std::vector<int32_t> hostTokens, hostTargets;
  bool overlap = false;
  std::optional<DynamicLossScaler> scaler;
  /// The scaler's settings (setLossScalerConfig), kept for a checkpoint's
  /// load.
  LossScalerConfig scalerConfig;
  std::map<const Program *, CommSchedule> commSchedules;
  int64_t currentStep = 1;
  int64_t microBatch = 0;
  uint64_t seed = 0;
  double startNs = 0;
  InstructionHook instructionHook;
  Communicator *worldComm = nullptr;
  /// The backend's world (NCCL over `worldComm`), when it has one; the
  /// groups are split from it.
  std::unique_ptr<Communicator> backendWorld;
  std::vector<int64_t> coords;
  /// Group communicators by `axes` mask.
  std::map<int64_t, std::unique_ptr<Communicator>> groups;
  /// Pipelining: this rank's coordinate on the pp axis (its first stage),
  /// the mask of the pp axis, and the stash: backend memory slots, kept
  /// across steps, for the stage inputs of the micro-batches between
  /// forward and backward and the messages received before the forward or
  /// backward that reads them (bytes, slot).
  int64_t stageIndex = -1;
  int64_t ppMask = 0;
  std::vector<std::pair<size_t, uint8_t *>> stash;
  /// The checkpoint save in flight (Checkpoint.cpp), or null.
  std::unique_ptr<PendingCheckpoint> pendingSave;
  /// The last asynchronous snapshot's host buffers, filled again by the
  /// next (SafetensorsWriter::reuseStorage).
  std::vector<std::vector<uint8_t>> snapshotStorage;
};

} // namespace dsc::rt

#endif // DSC_RUNTIME_EXECUTOR_H
