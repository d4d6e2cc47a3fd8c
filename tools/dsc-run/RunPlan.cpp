//===- RunPlan.cpp - dsc-run's driver: load a plan and train --------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The training loop around the executor: a seeded batch sampler over the
// chosen token source, micro-batches per step, Megatron-style log lines,
// JSON-lines metrics and a Chrome trace with one lane per stream. A plan
// with a mesh runs one such loop per rank (threads or MPI processes), each
// rank with its own executor and arenas; rank 0 prints and writes the
// metrics, every rank writes its own trace.
//
//===----------------------------------------------------------------------===//

#include "RunPlan.h"

#include "ChromeTrace.h"
#include "Evaluation.h"
#include "Metrics.h"
#include "PeerWatch.h"

#include "dsc/Runtime/ArenaHolders.h"
#include "dsc/Runtime/Checkpoint.h"
#include "dsc/Runtime/CudaBackend.h"
#include "dsc/Runtime/Data.h"
#include "dsc/Runtime/Executor.h"
#include "dsc/Runtime/MpiCommunicator.h"
#include "dsc/Runtime/PlanIO.h"
#include "dsc/Runtime/RankDiscovery.h"
#include "dsc/Runtime/TcpCommunicator.h"
#include "dsc/Runtime/TcpStore.h"
#include "dsc/Runtime/ThreadCommunicator.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <thread>

using namespace dsc::run;
using namespace dsc::rt;

Plan dsc::run::loadPlan(const std::string &input) {
  return readPlanFile(input);
}

namespace {

std::string humanBytes(uint64_t bytes) {
  char buf[32];
  if (bytes >= (1ull << 30))
    std::snprintf(buf, sizeof(buf), "%.2f GiB", double(bytes) / (1ull << 30));
  else if (bytes >= (1ull << 20))
    std::snprintf(buf, sizeof(buf), "%.2f MiB", double(bytes) / (1ull << 20));
  else if (bytes >= (1ull << 10))
    std::snprintf(buf, sizeof(buf), "%.2f KiB", double(bytes) / (1ull << 10));
  else
    std::snprintf(buf, sizeof(buf), "%llu B", (unsigned long long)bytes);
  return buf;
}

/// A fraction to three places ("0.375").
std::string fraction(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f", v);
  return buf;
}

/// This rank's index among the ranks of its machine: the launcher's local
/// rank under mpirun/srun, the thread index for in-process ranks.
int localRank(Communicator *world) {
  for (const char *name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                           "SLURM_LOCALID", "LOCAL_RANK"})
    if (const char *v = std::getenv(name))
      return std::atoi(v);
  return world ? world->rank() : 0;
}

/// The backend --backend names; null for the CPU (the executor's default).
std::unique_ptr<Backend> makeBackend(const RunOptions &options,
                                     Communicator *world) {
  if (options.backend != "cuda")
    return nullptr;
  if (!haveCudaBackend())
    return createCudaBackend({}); // throws, saying why there is none
  const int devices = cudaDeviceCount();
  if (devices == 0)
    throw Error("--backend cuda: no CUDA device is visible to this process");
  CudaBackendOptions cuda;
  cuda.device = localRank(world) % devices;
  cuda.tf32 = options.tf32;
  return createCudaBackend(cuda);
}

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

/// The bytes the Transfer instructions of a step move on rank 0, by source
/// and destination tier, as the plan says: the optimizer's (or its
/// pipeline stages') once, the training program's (fetches of offloaded
/// ZeRO-3 chunks) once per micro-batch.
std::array<std::array<uint64_t, 3>, 3> plannedTransferBytes(const Plan &plan) {
  std::array<std::array<uint64_t, 3>, 3> bytes{};
  auto add = [&](const std::string &name, uint64_t times) {
    if (const Program *prog = plan.findProgram(name))
      for (const Instruction &inst : prog->instructions)
        if (inst.opcode == Opcode::Transfer) {
          const Buffer &x = plan.buffers[inst.inputs[0]],
                       &y = plan.buffers[inst.outputs[0]];
          bytes[uint32_t(plan.arenas[x.arena].tier)]
               [uint32_t(plan.arenas[y.arena].tier)] +=
              times * std::min(x.bytes, y.bytes);
        }
  };
  add("optimizer", 1);
  add("forward_backward", uint64_t(std::max<int64_t>(plan.microBatches, 1)));
  // A pipeline's optimizers run per stage: rank 0's stages (0, P, 2P, ...).
  for (size_t k = 0; k < plan.stages.size(); ++k)
    if (int64_t(k) % plan.pipelineRanks() == 0)
      add(plan.stages[k].optimizer, 1);
  return bytes;
}

/// One line of the offload transfers per step, measured on this rank
/// since `before` over `steps` steps against the plan's, and the NVMe
/// lane's bandwidth; nothing for a plan without transfers.
void logTransfers(std::ostream &log, const Executor &ex,
                  const TransferStats &before, int64_t steps) {
  const auto planned = plannedTransferBytes(ex.plan());
  const TransferStats &now = ex.transferStats();
  std::string line;
  for (uint32_t from = 0; from < 3; ++from)
    for (uint32_t to = 0; to < 3; ++to) {
      if (!planned[from][to])
        continue;
      const uint64_t moved = now.bytes[from][to] - before.bytes[from][to];
      const double seconds = now.seconds[from][to] - before.seconds[from][to];
      char rate[48] = "";
      if (seconds > 0)
        std::snprintf(rate, sizeof(rate), ", %.0f MB/s",
                      double(moved) / seconds / 1e6);
      line += std::string(line.empty() ? "" : "; ") + tierName(Tier(from)) +
              " -> " + tierName(Tier(to)) + ": measured " +
              std::to_string(moved / uint64_t(std::max<int64_t>(steps, 1))) +
              ", planned " + std::to_string(planned[from][to]) + rate;
    }
  if (line.empty())
    return;
  log << "dsc-run: offload transfer bytes per step (rank 0): " << line << "\n";
  for (uint32_t a = 0; a < ex.plan().arenas.size(); ++a)
    if (const NvmeStore *file = ex.nvmeStore(a))
      log << "dsc-run: nvme arena " << a << ": '" << file->path() << "' ("
          << humanBytes(file->size()) << ", " << file->engine()
          << (file->directIo() ? ", O_DIRECT" : ", page cache") << ", "
          << humanBytes(ex.plan().nvmeBlockBytes) << " x "
          << ex.plan().nvmeQueueDepth << " in flight)\n";
}

/// What a curriculum length trains in, for the log: its training step
/// program, or a pipelined plan's stage programs at that length.
std::string trainedBy(const CurriculumLength &length) {
  if (!length.program.empty())
    return length.program;
  if (length.stages.empty())
    return "the plan's stage programs";
  return "stage programs '*.seq" + std::to_string(length.seqLength) + "'";
}

} // namespace

std::string dsc::run::traceFileOfRank(const std::string &path, int rank) {
  if (rank == 0)
    return path;
  std::string tag = ".rank" + std::to_string(rank);
  size_t slash = path.find_last_of('/');
  size_t dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash) ||
      dot == (slash == std::string::npos ? 0 : slash + 1))
    return path + tag;
  return path.substr(0, dot) + tag + path.substr(dot);
}

namespace {

/// The iteration at which DSC_FAIL_RANK_AT=R:N makes world rank R fail (a
/// test of failure handling: an MPI rank SIGKILLs itself, a thread rank
/// throws), or -1. It fires on the first attempt only: a run that
/// dsc-launch --max-restarts restarted (TORCHELASTIC_RESTART_COUNT > 0, as
/// torchrun numbers its restarts) resumes past the failure instead of
/// failing there again.
int64_t injectedFailureAt(int worldRank, int worldSize) {
  const char *text = std::getenv("DSC_FAIL_RANK_AT");
  if (!text || !*text)
    return -1;
  if (const char *restart = std::getenv("TORCHELASTIC_RESTART_COUNT"))
    if (std::atoi(restart) > 0)
      return -1;
  long long rank = -1, iteration = -1;
  char tail = 0;
  if (std::sscanf(text, "%lld:%lld%c", &rank, &iteration, &tail) != 2 ||
      rank < 0 || iteration < 1)
    throw Error(std::string("DSC_FAIL_RANK_AT='") + text +
                "' is not RANK:ITERATION");
  if (rank >= worldSize)
    throw Error(std::string("DSC_FAIL_RANK_AT='") + text + "' names rank " +
                std::to_string(rank) + " but the run has " +
                std::to_string(worldSize) + " ranks");
  return rank == worldRank ? iteration : -1;
}

/// One rank's training run; `world` is null for a one-rank plan without a
/// mesh. Only world rank 0 writes to `out` and the JSON lines; every rank
/// writes its pieces of a checkpoint.
int runRank(Plan plan, const RunOptions &options, std::ostream &out,
            RunResult *result, Communicator *world, const RunHooks &hooks,
            bool processPerRank) {
  const int worldRank = world ? world->rank() : 0;
  const int worldSize = world ? world->size() : 1;
  const bool primary = worldRank == 0;
  std::ostream nullOut(nullptr);
  std::ostream &log = primary ? out : nullOut;
  const int64_t microBatches =
      options.microBatches ? options.microBatches : plan.microBatches;

  // Data first: a vocab mismatch is reported before any memory is touched.
  std::unique_ptr<TokenSource> source =
      openTokenSource(options.data, plan.vocabSize);
  if (source->vocabSize() > plan.vocabSize)
    throw Error("the data's vocabulary (" +
                std::to_string(source->vocabSize()) + " tokens, " +
                source->describe() + ") does not fit the model's (" +
                std::to_string(plan.vocabSize) + " tokens, plan '" +
                options.input + "')");
  BatchSampler sampler(*source, plan.microBatchSize, plan.seqLength,
                       options.seed, plan.vocabSize);
  // Held-out data, read as the training data is (docs/training.md).
  checkEvaluation(options, plan);
  struct HeldOut {
    std::unique_ptr<TokenSource> source;
    std::unique_ptr<BatchSampler> sampler;
  };
  auto openHeldOut = [&](const std::string &path, const std::string &names) {
    HeldOut held;
    if (path.empty())
      return held;
    try {
      held.source = openTokenSource(path, plan.vocabSize);
      if (held.source->vocabSize() > plan.vocabSize)
        throw Error("its vocabulary (" +
                    std::to_string(held.source->vocabSize()) +
                    " tokens) does not fit the model's (" +
                    std::to_string(plan.vocabSize) + ")");
      held.sampler = std::make_unique<BatchSampler>(
          *held.source, plan.microBatchSize, plan.seqLength, options.seed,
          plan.vocabSize);
    } catch (const Error &e) {
      throw Error(names + " '" + path + "': " + e.what());
    }
    return held;
  };
  HeldOut valid =
      openHeldOut(options.validData, "--valid-data (valid_data_paths)");
  HeldOut test = openHeldOut(options.testData, "--test-data (test_data_paths)");

  // Outputs next: an unwritable path fails before training, not after.
  std::ofstream json;
  if (primary && !options.logJson.empty()) {
    json.open(options.logJson, std::ios::trunc);
    if (!json)
      throw Error("cannot open --log-json file '" + options.logJson +
                  "': " + std::strerror(errno));
  }

  if (primary && !options.save.empty()) {
    prepareCheckpointDirectory(options.save);
    // Saves a kill or a failure cut short leave their temporary files:
    // nothing names them, so they are this run's to reclaim.
    std::vector<std::string> reclaimed = reclaimUnfinishedSaves(options.save);
    if (!reclaimed.empty()) {
      std::string names;
      for (const std::string &name : reclaimed)
        names += (names.empty() ? "" : ", ") + name;
      log << "dsc-run: reclaimed " << reclaimed.size()
          << " unfinished checkpoint save" << (reclaimed.size() > 1 ? "s" : "")
          << " in '" << options.save << "': " << names << "\n";
    }
  }

  if (!options.nvmePath.empty())
    plan.nvmePath = options.nvmePath;
  Executor ex(std::move(plan), options.seed, world,
              makeBackend(options, world));
  const Plan &p = ex.plan();
  if (options.overlapComm)
    ex.setOverlapCommunication(*options.overlapComm);
  if (options.lossScaler)
    ex.setLossScalerConfig(*options.lossScaler);
  if (options.learningRate)
    ex.setBaseLearningRate(*options.learningRate);
  if (options.lrDecayTokens) {
    TokenSchedule schedule;
    schedule.decayTokens = *options.lrDecayTokens;
    schedule.warmupTokens = options.lrWarmupTokens;
    ex.setTokenSchedule(schedule);
  }
  // Tokens consumed are counted on every run (checkpoints keep them); the
  // log and metrics show them where they change something.
  const bool countsTokens =
      options.lrDecayTokens || options.trainTokens || !p.curriculum.empty();

  // The data-parallel coordinate: rank d of D takes micro-batches
  // [d*M, (d+1)*M) of each step's D*M (Plan::mesh).
  // With expert parallelism the data-parallel group is the axes edp x ep.
  const DataParallelPlace dataPlace =
      dataParallelPlace(p.mesh, ex.meshCoordinates());
  const int64_t dpSize = dataPlace.size;
  const int64_t dpRank = dataPlace.index;

  log << "dsc-run: plan '" << options.input << "': vocab " << p.vocabSize
      << ", sequence " << p.seqLength << ", micro-batch " << p.microBatchSize
      << " x " << microBatches << " per step, " << p.buffers.size()
      << " buffers\n";
  if (!p.mesh.empty())
    log << "dsc-run: mesh " << meshString(p.mesh) << " on " << worldSize
        << " ranks (" << world->backendName() << "); each of the " << dpSize
        << " data-parallel ranks trains " << microBatches
        << " micro-batches of the step's " << dpSize * microBatches << "\n";
  if (!p.stages.empty()) {
    const int64_t ranks = p.pipelineRanks();
    const int64_t chunks =
        int64_t(p.stages.size()) / std::max<int64_t>(ranks, 1);
    log << "dsc-run: " << p.stages.size() << " pipeline stages";
    if (chunks > 1)
      log << " (" << chunks << " per rank on " << ranks << " ranks)";
    // The papers' bubbles: (1/v)(P-1)/M interleaved; zero-bubble ZB-H1's
    // (P-1)(F+B-W) is a third of 1F1B's (P-1)(F+B+W) when the forward,
    // activation- and weight-gradient parts take equal times.
    const bool zeroBubble = p.schedule == PipelineSchedule::ZeroBubbleH1;
    const int64_t divisor = zeroBubble ? 3 : chunks;
    log << ", schedule " << ::dsc::pipelineScheduleName(p.schedule)
        << " (bubble "
        << (divisor > 1 ? "(1/" + std::to_string(divisor) + ")(" : "")
        << ranks - 1 << "/" << microBatches << (divisor > 1 ? ")" : "")
        << " of the step's stage time with equal stages"
        << (zeroBubble ? " and equal F, B and W" : "") << "; "
        << fraction(p.summary.pipelineBubble)
        << " as the compiler simulated it with the stages' costs)\n";
  }
  log << "dsc-run: data: " << source->describe() << " (" << source->size()
      << " tokens, " << sampler.numWindows() << " samples per epoch)\n";
  // A shared arena that only some pipeline ranks' stages use is theirs.
  const std::vector<std::vector<bool>> holders = arenaHolders(p);
  auto sharedBy = [&](uint32_t a) {
    std::string ranks;
    size_t count = 0;
    for (size_t r = 0; r < holders[a].size(); ++r)
      if (holders[a][r]) {
        ranks += (count++ ? "," : "") + std::to_string(r);
      }
    return count < holders[a].size() ? ", pipeline ranks " + ranks
                                     : std::string();
  };
  for (uint32_t a = 0; a < p.arenas.size(); ++a) {
    log << "dsc-run: arena " << a << " (" << tierName(p.arenas[a].tier)
        << (p.arenas[a].pipelineRank >= 0
                ? ", pipeline rank " + std::to_string(p.arenas[a].pipelineRank)
                : sharedBy(a))
        << "): allocated " << ex.allocatedBytes(a) << " bytes ("
        << humanBytes(ex.allocatedBytes(a)) << ")";
    if (a < p.summary.peakBytesPerArena.size())
      log << ", planned peak " << p.summary.peakBytesPerArena[a] << " bytes";
    log << (p.mesh.empty() ? "" : " per rank") << "\n";
  }
  if (result) {
    result->losses.clear();
    result->allocatedBytesPerArena.clear();
    result->collectiveBytesPerStep.clear();
    for (uint32_t a = 0; a < p.arenas.size(); ++a)
      result->allocatedBytesPerArena.push_back(ex.allocatedBytes(a));
  }

  std::unique_ptr<ChromeTrace> trace;
  const std::string tracePath =
      options.trace.empty() ? "" : traceFileOfRank(options.trace, worldRank);
  if (!tracePath.empty()) {
    trace = std::make_unique<ChromeTrace>("dsc-run rank " +
                                          std::to_string(worldRank));
    trace->nameLane(0, "compute");
    if (!p.mesh.empty())
      trace->nameLane(1, "communication");
    // Offload's transfers between tiers, beside compute.
    trace->nameLane(2, "transfers");
    ex.setInstructionHook([&](const InstructionEvent &e) {
      const Instruction &inst = *e.instruction;
      std::string opcode = opcodeName(inst.opcode);
      std::string args = "\"program\": " + jsonString(e.program->name) +
                         ", \"index\": " + std::to_string(e.index);
      if (e.collective)
        args += ", \"bytes_sent\": " + std::to_string(e.bytesSent);
      const bool transfer = inst.opcode == Opcode::Transfer;
      if (transfer) {
        const Buffer &x = p.buffers[inst.inputs[0]],
                     &y = p.buffers[inst.outputs[0]];
        args += ", \"bytes\": " + std::to_string(std::min(x.bytes, y.bytes)) +
                ", \"from\": \"" + tierName(p.arenas[x.arena].tier) +
                "\", \"to\": \"" + tierName(p.arenas[y.arena].tier) + "\"";
      }
      trace->add(inst.name.empty() ? opcode : inst.name, opcode,
                 transfer ? 2 : e.stream, e.startUs, e.durationUs, args);
    });
  }

  // Where the run is, for the message of a failure; under mpirun a watch
  // names a rank that dies rather than waiting on it.
  RunProgress progress(options.save);
  std::unique_ptr<PeerWatch> watch;
  if (processPerRank && world && worldSize > 1)
    watch = std::make_unique<PeerWatch>(*world, progress);

  int64_t consumed = 0, firstIteration = 1;
  std::error_code noError;
  if (!options.load.empty() && options.loadIfPresent &&
      !std::filesystem::exists(options.load + "/latest", noError) &&
      !std::filesystem::exists(options.load + "/manifest.json", noError)) {
    log << "dsc-run: no checkpoint in '" << options.load
        << "' (the config's load) yet: training from scratch, as GPT-NeoX "
           "does\n";
  } else if (!options.load.empty()) {
    consumed = ex.loadCheckpoint(options.load);
    const std::string step = resolveCheckpointStep(options.load);
    progress.setCheckpoint(step, step);
    // Iterations are optimizer steps plus the steps loss scaling skipped
    // (a skipped step does not advance the optimizer's step), in this run
    // or the checkpoint's, whatever precision it ran in.
    firstIteration = ex.iterationsDone() + 1;
    if (firstIteration > options.steps && !options.evalOnly)
      throw Error("checkpoint '" + options.load + "' has done " +
                  std::to_string(firstIteration - 1) +
                  " steps already; --steps " + std::to_string(options.steps) +
                  " is the total to reach");
    if (options.evalOnly)
      log << "dsc-run: --eval-only: evaluating '" << options.load
          << "' (iteration " << firstIteration - 1 << ")\n";
    else
      log << "dsc-run: resumed from '" << options.load << "' at iteration "
          << firstIteration << " (" << consumed << " samples"
          << (countsTokens && ex.restoredTokenCounts()
                  ? ", " + std::to_string(ex.tokenCounts().consumed) + " tokens"
                  : std::string())
          << " consumed)\n";
    // Without its counts a token schedule would restart at 0 tokens.
    if ((options.lrDecayTokens || options.trainTokens) &&
        !ex.restoredTokenCounts() && firstIteration > 1)
      throw Error(
          "checkpoint '" + options.load +
          "' records no consumed tokens (saved by a run that did "
          "not count them), which " +
          (options.lrDecayTokens ? "--lr-decay-tokens" : "--train-tokens") +
          " needs to resume");
    if (options.trainTokens && !options.evalOnly &&
        ex.tokenCounts().consumed >= *options.trainTokens)
      throw Error("checkpoint '" + options.load + "' has consumed " +
                  std::to_string(ex.tokenCounts().consumed) +
                  " tokens already; --train-tokens " +
                  std::to_string(*options.trainTokens) +
                  " is the total to reach");
    for (const std::string &warning : ex.loadWarnings())
      log << "dsc-run: warning: " << warning << "\n";
  }

  // Consumed samples count the whole data-parallel step; throughput is this
  // rank's (Megatron's per-GPU TFLOP/s).
  const int64_t samplesPerStep = p.microBatchSize * microBatches * dpSize;
  const double flopsPerStep =
      double(p.summary.flopsPerMicroBatch) * double(microBatches);
  const auto runStart = std::chrono::steady_clock::now();
  // The initialize program's (and a load's) transfers are not the steps'.
  // (An evaluation's transfers are added to it: they are not the steps'.)
  TransferStats transfersBefore = ex.transferStats();
  TransferStats transfersSoFar = transfersBefore;
  double intervalSeconds = 0, intervalLoss = 0, intervalOptimizerMs = 0;
  double intervalFlops = 0;
  // Curriculum learning: the length the last step trained at (0: none yet).
  int64_t lastSequenceLength = 0;
  int64_t intervalSteps = 0;
  uint64_t lastCollectiveBytes = 0;
  // What the compiler planned for that step (a curriculum's: its length's).
  uint64_t lastPlannedBytes = p.summary.collectiveBytesPerStep;
  // 1-bit Adam: the last step of each phase (warm-up, compression).
  std::optional<uint64_t> lastWarmupBytes, lastCompressedBytes;
  // 0/1 Adam: the last step of each kind, by the optimizer program it ran.
  std::map<std::string, uint64_t> lastBytesByProgram;
  bool reportedSnapshot = false;
  // GPT-NeoX's evaluate_and_print_results: the log's box and a JSON line.
  // The test set is evaluated once, from its start (NeoX's test iterator
  // is not shifted on resume).
  auto evaluate = [&](int64_t at, bool onTest) {
    const std::string what = onTest ? "test" : "validation";
    const TransferStats movedBefore = ex.transferStats();
    const double loss =
        evaluateLoss(ex, onTest ? *test.sampler : *valid.sampler, world,
                     onTest ? 0 : evaluationWindow(at, options.evalInterval),
                     options.evalIters, microBatches, dpSize, dpRank);
    // Offload's per-step transfer figures stay the training steps' own.
    const TransferStats &moved = ex.transferStats();
    for (uint32_t from = 0; from < 3; ++from)
      for (uint32_t to = 0; to < 3; ++to) {
        transfersBefore.bytes[from][to] +=
            moved.bytes[from][to] - movedBefore.bytes[from][to];
        transfersBefore.seconds[from][to] +=
            moved.seconds[from][to] - movedBefore.seconds[from][to];
      }
    transfersSoFar = moved;
    log << formatEvaluationLog(what, at, loss) << std::endl;
    if (json.is_open())
      json << formatEvaluationJson(what, at, loss) << std::endl;
  };
  if (options.evalOnly) {
    if (valid.sampler)
      evaluate(firstIteration - 1, false);
    if (test.sampler)
      evaluate(firstIteration - 1, true);
    watch.reset();
    if (json.is_open()) {
      json.close();
      if (!json)
        throw Error("cannot write --log-json file '" + options.logJson + "'");
    }
    return 0;
  }
  const int64_t failAt = injectedFailureAt(worldRank, worldSize);
  int64_t iteration = firstIteration;
  // The last iteration: --steps', or the one that reaches --train-tokens.
  int64_t lastIteration = options.steps;
  try {
    for (; iteration <= options.steps; ++iteration) {
      progress.setIteration(iteration);
      if (hooks.beforeStep)
        hooks.beforeStep(worldRank, iteration);
      if (iteration == failAt) {
        if (processPerRank)
          std::raise(SIGKILL);
        throw Error("failure injected by DSC_FAIL_RANK_AT");
      }
      const int64_t firstSample =
          consumed + dpRank * microBatches * p.microBatchSize;
      const double traceStart = ex.nowUs();
      const auto t0 = std::chrono::steady_clock::now();
      const bool compressedStep = ex.compressesAt(ex.step());
      const std::string optimizerProgram = ex.optimizerAt(ex.step()).name;
      // A curriculum's step FLOPs are its length's.
      const CurriculumLength *length = p.curriculumAt(ex.step());
      const double stepFlops =
          length ? double(length->flopsPerMicroBatch) * double(microBatches)
                 : flopsPerStep;
      StepResult r = ex.trainStep(
          [&](int64_t m, int32_t *tokens, int32_t *targets) {
            sampler.sample(firstSample + m * p.microBatchSize, p.microBatchSize,
                           tokens, targets);
          },
          microBatches);
      // The step's loss is the mean over every rank's micro-batches; in a
      // pipeline only the last stage's ranks (one per dp x tp coordinate)
      // compute it.
      if (world && worldSize > 1 && p.stages.empty()) {
        world->allReduce(&r.loss, 1, DType::F64, ReduceOp::Avg);
      } else if (world && worldSize > 1) {
        double sum[2] = {r.hasLoss ? r.loss : 0.0, r.hasLoss ? 1.0 : 0.0};
        world->allReduce(sum, 2, DType::F64, ReduceOp::Sum);
        r.loss = sum[0] / sum[1];
      }
      const double seconds = secondsSince(t0);
      if (trace)
        trace->add("iteration " + std::to_string(iteration), "step", 0,
                   traceStart, ex.nowUs() - traceStart);
      lastCollectiveBytes = r.collectiveBytesSent;
      if (length)
        lastPlannedBytes = length->collectiveBytesPerStep;
      // A skipped step (fp16 overflow) runs no optimizer program.
      if (!r.skipped) {
        (compressedStep ? lastCompressedBytes : lastWarmupBytes) =
            r.collectiveBytesSent;
        lastBytesByProgram[optimizerProgram] = r.collectiveBytesSent;
      }
      if (result) {
        result->losses.push_back(r.loss);
        result->collectiveBytesPerStep.push_back(r.collectiveBytesSent);
      }

      consumed += samplesPerStep;
      // Megatron-DeepSpeed's consumed_train_tokens: the step's length times
      // its samples (under seqlen_reshape, times the rows its samples were
      // cut into); a token schedule's counters advance with it.
      const int64_t stepTokens =
          samplesPerStep / p.microBatchSize * r.rows * r.sequenceLength;
      ex.countTokens(stepTokens, !r.skipped);
      // Megatron-DeepSpeed's loop stops once consumed_train_tokens reaches
      // train_tokens (tested before each step, as here after each).
      const bool tokensReached =
          options.trainTokens &&
          ex.tokenCounts().consumed >= *options.trainTokens;
      if (tokensReached)
        lastIteration = iteration;
      const bool lastStep = iteration == lastIteration;

      StepMetrics m;
      m.iteration = iteration;
      m.iterations = options.steps;
      m.consumedSamples = consumed;
      if (countsTokens)
        m.consumedTokens = ex.tokenCounts().consumed;
      m.msPerIteration = seconds * 1e3;
      m.tflops = seconds > 0 ? stepFlops / seconds / 1e12 : 0.0;
      if (!p.curriculum.empty()) {
        m.curriculumSeqLength = r.sequenceLength;
        m.tokensPerStep = stepTokens;
        // Each switch of program, in the log and on the trace's step lane.
        if (r.sequenceLength != lastSequenceLength) {
          log << "dsc-run: curriculum: iteration " << iteration
              << " trains at sequence length " << r.sequenceLength << " ("
              << trainedBy(*length) << ", " << m.tokensPerStep
              << " tokens per step)" << std::endl;
          if (trace)
            trace->add("curriculum seqlen " +
                           std::to_string(r.sequenceLength),
                       "curriculum", 0, traceStart, 0);
        }
        lastSequenceLength = r.sequenceLength;
      }
      m.learningRate = r.learningRate;
      m.beta1 = r.beta1;
      m.loss = r.loss;
      m.gradNorm = r.gradNorm;
      m.expertLoadImbalance = r.expertLoadImbalance;
      if (ex.scalesLoss()) {
        m.lossScale = r.lossScale;
        m.skippedIterations = r.skippedSteps;
      }
      if (!p.mesh.empty())
        m.collectiveBytes = int64_t(r.collectiveBytesSent);
      if (options.wallClockBreakdown) {
        m.optimizerMs = r.optimizerMs;
        m.forwardBackwardMs = std::max(0.0, seconds * 1e3 - r.optimizerMs);
      }
      // Offload's bytes between tiers this step, by direction.
      const TransferStats &moved = ex.transferStats();
      for (uint32_t from = 0; from < 3; ++from)
        for (uint32_t to = 0; to < 3; ++to)
          if (uint64_t bytes =
                  moved.bytes[from][to] - transfersSoFar.bytes[from][to])
            m.transfers.push_back(
                {std::string(tierName(Tier(from))) + "_to_" +
                     tierName(Tier(to)),
                 bytes,
                 moved.seconds[from][to] - transfersSoFar.seconds[from][to]});
      transfersSoFar = moved;

      // The log line averages time and loss over its interval, as Megatron.
      intervalSeconds += seconds;
      intervalOptimizerMs += r.optimizerMs;
      intervalLoss += r.loss;
      intervalFlops += stepFlops;
      ++intervalSteps;
      if (iteration % options.logInterval == 0 || lastStep) {
        StepMetrics avg = m;
        avg.msPerIteration = intervalSeconds / double(intervalSteps) * 1e3;
        avg.tflops =
            intervalSeconds > 0
                ? intervalFlops / intervalSeconds / 1e12
                : 0.0;
        avg.loss = intervalLoss / double(intervalSteps);
        if (options.wallClockBreakdown) {
          avg.optimizerMs = intervalOptimizerMs / double(intervalSteps);
          avg.forwardBackwardMs =
              std::max(0.0, avg.msPerIteration - avg.optimizerMs);
        }
        log << formatLogLine(avg) << std::endl;
        intervalSeconds = intervalLoss = intervalOptimizerMs = 0;
        intervalFlops = 0;
        intervalSteps = 0;
      }
      // Megatron stops on a NaN loss or grad norm; so do we, after logging
      // the step (and before a checkpoint could save the damage). Every rank
      // sees the same averaged loss and grad norm, so all stop here.
      // (A step skipped by loss scaling has no grad norm: no optimizer ran.)
      if (!std::isfinite(r.loss) ||
          (p.gradNorm >= 0 && !r.skipped && !std::isfinite(r.gradNorm))) {
        if (intervalSteps)
          log << formatLogLine(m) << std::endl;
        if (json.is_open())
          json << formatJsonLine(m) << std::endl;
        throw Error(
            std::string(!std::isfinite(r.loss) ? "lm loss" : "grad norm") +
            " is " +
            std::to_string(!std::isfinite(r.loss) ? r.loss : r.gradNorm) +
            ": training diverged (try a lower --lr)");
      }
      // Every rank saves the pieces it is the first to hold. An asynchronous
      // save is committed at the first step boundary where every rank's
      // files are written (or before the next save: one in flight).
      const auto saveStart = std::chrono::steady_clock::now();
      const bool saving = ex.checkpointInFlight();
      if (saving)
        if (std::optional<std::string> step = ex.finishCheckpoint(false))
          progress.setSaved(*step);
      if (!options.save.empty() &&
          ((options.saveInterval && iteration % options.saveInterval == 0) ||
           lastStep)) {
        if (options.saveAsync) {
          if (ex.checkpointInFlight())
            progress.setSaved(*ex.finishCheckpoint(true));
          const uint64_t bytes =
              ex.beginCheckpoint(options.save, consumed, options.keep, true);
          if (!reportedSnapshot)
            log << "dsc-run: --save-async: a snapshot holds " << bytes
                << " bytes (" << humanBytes(bytes)
                << ") of host memory on rank 0, one in flight\n";
          reportedSnapshot = true;
        } else {
          progress.setSaved(
              ex.saveCheckpoint(options.save, consumed, options.keep));
        }
        m.checkpointMs = secondsSince(saveStart) * 1e3;
      } else if (saving) {
        m.checkpointMs = secondsSince(saveStart) * 1e3;
      }
      // Flushed a step at a time: a killed run keeps every finished
      // step's metrics.
      if (json.is_open())
        json << formatJsonLine(m) << std::endl;
      // After the step, as GPT-NeoX's train loop; the last step evaluates
      // once (NeoX would evaluate the next window again after its loop).
      if (options.evalInterval > 0 &&
          (iteration % options.evalInterval == 0 || lastStep))
        evaluate(iteration, false);
      if (tokensReached) {
        log << "dsc-run: train_tokens " << *options.trainTokens
            << " reached at iteration " << iteration << " ("
            << ex.tokenCounts().consumed << " tokens consumed)" << std::endl;
        break;
      }
    }
    iteration = lastIteration; // the last save belongs to the last step
    if (test.sampler)
      evaluate(iteration, true);
    if (ex.checkpointInFlight())
      progress.setSaved(*ex.finishCheckpoint(true));
  } catch (const Error &e) {
    // Name the iteration and what to resume from (a thread rank's failure
    // reaches the user through runRanks with this text).
    throw Error("iteration " + std::to_string(iteration) + ": " + e.what() +
                "; " + progress.resumeAdvice());
  }
  watch.reset();
  if (json.is_open()) {
    json.close();
    if (!json)
      throw Error("cannot write --log-json file '" + options.logJson + "'");
  }
  if (trace)
    trace->write(tracePath);
  if (!p.mesh.empty() && p.compressionFromStep > 0) {
    // Each phase's last step against its plan.
    CommStats stats = ex.collectiveStats();
    auto measured = [](const std::optional<uint64_t> &bytes) {
      return bytes ? std::to_string(*bytes) : std::string("(none run)");
    };
    log << "dsc-run: collective bytes per step (rank 0): warm-up measured "
        << measured(lastWarmupBytes) << ", planned "
        << p.summary.collectiveBytesPerStep << "; compressed (from step "
        << p.compressionFromStep << ") measured "
        << measured(lastCompressedBytes) << ", planned "
        << p.summary.collectiveBytesPerCompressedStep
        << "; in all: " << formatCommStats(stats) << "\n";
  } else if (!p.mesh.empty() && p.zeroOneAdam.enabled) {
    // Each kind of step's last against its plan.
    log << "dsc-run: collective bytes per step (rank 0):";
    const char *kinds[4] = {"variance", "onebit", "local", "sync"};
    for (int k = 0; k < 4; ++k) {
      const std::string program =
          k == 0 ? std::string("optimizer") : kZeroOneAdamPrograms[k - 1];
      auto seen = lastBytesByProgram.find(program);
      log << (k ? ";" : "") << " " << kinds[k] << " measured "
          << (seen == lastBytesByProgram.end() ? std::string("(none run)")
                                               : std::to_string(seen->second))
          << ", planned "
          << (k == 0 ? p.summary.collectiveBytesPerStep
                     : p.zeroOneAdam.collectiveBytes[k - 1]);
    }
    log << "; in all: " << formatCommStats(ex.collectiveStats()) << "\n";
  } else if (!p.mesh.empty()) {
    CommStats stats = ex.collectiveStats();
    log << "dsc-run: collective bytes per step (rank 0): measured "
        << lastCollectiveBytes << ", planned " << lastPlannedBytes
        << "; in all: " << formatCommStats(stats) << "\n";
  }
  logTransfers(log, ex, transfersBefore, lastIteration - firstIteration + 1);
  char tail[128];
  std::snprintf(tail, sizeof(tail), "dsc-run: %lld steps in %.2f s",
                (long long)(lastIteration - firstIteration + 1),
                secondsSince(runStart));
  log << tail;
  if (trace)
    log << "; trace (" << trace->size() << " events) in '" << options.trace
        << "'" << (worldSize > 1 ? " (rank 0; the others beside it)" : "");
  if (!options.logJson.empty())
    log << "; metrics in '" << options.logJson << "'";
  if (!options.save.empty())
    log << "; checkpoint in '" << options.save << "'";
  log << "\n";
  return 0;
}

/// "the plan's mesh dp=2 needs 2 ranks, got --np 4".
void checkRankCount(const Plan &plan, int64_t ranks, const std::string &got) {
  const int64_t need = meshRanks(plan.mesh);
  if (need == ranks)
    return;
  if (plan.mesh.empty())
    throw Error("the plan has no mesh, so it runs on 1 rank, got " + got +
                " (compile it with --compile \"dp=" + std::to_string(ranks) +
                "\")");
  throw Error("the plan's mesh " + meshString(plan.mesh) + " needs " +
              std::to_string(need) + " ranks, got " + got);
}

} // namespace

int dsc::run::runPlan(Plan plan, const RunOptions &options, std::ostream &out,
                      RunResult *result, Communicator *world,
                      const RunHooks &hooks) {
  for (const char *name : {"forward_backward", "optimizer"})
    if (plan.stages.empty() && !plan.findProgram(name))
      throw Error("plan '" + options.input + "' has no '" + name +
                  "' program, so it cannot train");
  if (world) {
    if (options.np && options.np != world->size())
      throw Error("--np " + std::to_string(options.np) +
                  " disagrees with the " + world->backendName() + " world of " +
                  std::to_string(world->size()) +
                  " ranks (under mpirun, -np sets the rank count)");
    checkRankCount(plan, world->size(),
                   std::to_string(world->size()) + " " + world->backendName() +
                       " ranks");
    return runRank(std::move(plan), options, out, result, world, hooks,
                   /*processPerRank=*/true);
  }
  const int64_t ranks = options.np ? options.np : 1;
  checkRankCount(plan, ranks,
                 options.np ? "--np " + std::to_string(options.np)
                            : std::string("1 (no --np)"));
  if (plan.mesh.empty())
    return runRank(std::move(plan), options, out, result, nullptr, hooks,
                   /*processPerRank=*/true);

  // One thread per rank, each with its own executor; the kernels' OpenMP
  // threads share the cores.
  const int threadsPerRank =
      std::max(1, int(std::thread::hardware_concurrency()) / int(ranks));
  runRanks(
      int(ranks),
      [&](Communicator &comm) {
        omp_set_num_threads(threadsPerRank);
        runRank(plan, options, out, comm.rank() == 0 ? result : nullptr, &comm,
                hooks, /*processPerRank=*/false);
      },
      ThreadWorldOptions::fromEnvironment());
  return 0;
}

int dsc::run::dscRunMain(const std::vector<std::string> &args,
                         std::ostream &out, std::ostream &err,
                         const PlanLoader &loader) {
  // Under mpirun this process is one rank of the MPI world; destroyed last,
  // after every executor's groups (it finalizes MPI).
  std::unique_ptr<Communicator> mpiWorld;
  std::string message;
  try {
    RunOptions options = parseRunOptions(args);
    if (options.help) {
      out << usage();
      return 0;
    }
    // Which rank the launcher made this process: MPI's variables decide,
    // the others (torchrun's, Slurm's) must agree; several processes
    // without MPI meet through a TCP store at MASTER_ADDR:MASTER_PORT.
    const Launch launch = discoverLaunch();
    if (launch.tcp) {
      RendezvousOptions meet;
      meet.host = launch.masterAddr;
      meet.port = launch.masterPort;
      meet.rank = int(launch.rank);
      meet.size = int(launch.size);
      meet.timeout = RendezvousOptions::timeoutFromEnvironment();
      mpiWorld = createTcpWorldCommunicator(
          TcpStore::rendezvous(meet),
          ThreadWorldOptions::fromEnvironment().timeout);
    } else if (launch.mpi) {
      mpiWorld = createMpiWorldCommunicator(nullptr, nullptr);
      checkLaunchAgainstMpi(launch, mpiWorld->rank(), mpiWorld->size());
    }
    if (mpiWorld) {
      // One process per rank: share the node's cores among its processes
      // unless the user chose (OMP_NUM_THREADS).
      if (!std::getenv("OMP_NUM_THREADS")) {
        const char *local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
        if (!local)
          local = std::getenv("LOCAL_WORLD_SIZE"); // torchrun's
        int perNode = local ? std::atoi(local) : mpiWorld->size();
        omp_set_num_threads(
            std::max(1, int(std::thread::hardware_concurrency()) /
                            std::max(1, perNode)));
      }
    }
    Plan plan = loader ? loader(options) : loadPlan(options.input);
    // The loader printed the configuration; nothing was compiled.
    if (options.printConfig)
      return 0;
    if (options.printPlan) {
      if (!mpiWorld || mpiWorld->rank() == 0)
        out << formatPlan(plan);
      return 0;
    }
    if (!options.writePlan.empty()) {
      if (!mpiWorld || mpiWorld->rank() == 0) {
        writePlanFile(plan, options.writePlan);
        out << "dsc-run: wrote the plan to '" << options.writePlan
            << "' (dsc-run runs it)\n";
      }
      return 0;
    }
    return runPlan(std::move(plan), options, out, nullptr, mpiWorld.get());
  } catch (const Error &e) {
    message = e.what();
  } catch (const std::bad_alloc &) {
    message = "out of memory";
  } catch (const std::exception &e) {
    message = e.what();
  }
  if (mpiWorld && mpiWorld->size() > 1) {
    // The other ranks may be blocked in a collective with this one: end the
    // job, naming this rank (MPI_Abort; does not return).
    // One write: the ranks share the launcher's stderr, and pieces of two
    // ranks' lines would interleave.
    err << ("dsc-run: error: rank " + std::to_string(mpiWorld->rank()) + ": " +
            message + "\n")
        << std::flush;
    try {
      mpiWorld->abort(message);
    } catch (...) {
    }
    return 1;
  }
  err << "dsc-run: error: " << message << std::endl;
  return 1;
}
