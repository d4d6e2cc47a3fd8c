//===- Executor.cpp - Runs a plan's programs on a backend -----------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The coordinator: it builds the parts in dependency order, hands each what
// it needs, and sequences a training step (the micro-batches, then the
// update every step ends with). What each part does lives in its own file:
// Arenas, MeshGroups, RunContext, TierTransfers, Collectives, ProgramRunner,
// TokenFeed, LossScaling, PipelineStep, CheckpointIO, Initializers.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/Executor.h"

#include "Arenas.h"
#include "CheckpointIO.h"
#include "Collectives.h"
#include "Initializers.h"
#include "LossScaling.h"
#include "MeshGroups.h"
#include "PipelineStep.h"
#include "ProgramRunner.h"
#include "RunContext.h"
#include "TierTransfers.h"
#include "TokenFeed.h"

#include "dsc/Runtime/FloatConvert.h"
#include "dsc/Runtime/PlanIO.h"
#include "dsc/Runtime/ZeroOneAdam.h"

#include <chrono>
#include <cmath>

using namespace dsc::rt;

//===----------------------------------------------------------------------===//
// Construction
//===----------------------------------------------------------------------===//

Executor::Executor(Plan plan, uint64_t seed, Communicator *world,
                   std::unique_ptr<Backend> backendToUse)
    : thePlan(std::move(plan)), backendImpl(std::move(backendToUse)) {
  validatePlan(thePlan);
  if (!backendImpl)
    backendImpl = createCpuBackend();
  // The mesh against the world, before anything is allocated.
  MeshGroups::checkWorld(thePlan, world);
  // What the backend supports and its scratch, then the arenas.
  backendImpl->prepare(thePlan);
  Backend &b = *backendImpl;
  arenas = std::make_unique<Arenas>(thePlan, b, world ? world->rank() : 0);
  // The mesh coordinates before initialize: sharded parameters draw by them.
  mesh = std::make_unique<MeshGroups>(thePlan, world, b);
  context = std::make_unique<RunContext>(thePlan, *arenas, *mesh);
  tiers = std::make_unique<TierTransfers>(thePlan, *arenas, b, *mesh);
  collectives = std::make_unique<Collectives>(thePlan, *arenas, b, *mesh);
  runner = std::make_unique<ProgramRunner>(thePlan, b, *arenas, *mesh, *context,
                                           *collectives, *tiers);
  feed = std::make_unique<TokenFeed>(thePlan, b, *arenas);
  scaling = std::make_unique<LossScaling>(thePlan);
  pipeline = std::make_unique<PipelineStep>(thePlan, b, *arenas, *mesh,
                                            *context, *runner, *feed);
  checkpoints = std::make_unique<CheckpointIO>(thePlan, *mesh);
  if (const ZeroOneAdamPlan &zo = thePlan.zeroOneAdam; zo.enabled) {
    ZeroOneAdamConfig policy;
    policy.varFreezeStep = zo.varFreezeStep;
    policy.varUpdateScaler = zo.varUpdateScaler;
    policy.localStepScaler = zo.localStepScaler;
    policy.localStepClipper = zo.localStepClipper;
    zeroOneAdamStages = std::make_unique<ZeroOneAdamStageCursor>(policy);
  }
  initialize(seed);
  setOverlapCommunication(backendImpl->overlapsByDefault());
}

Executor::~Executor() {
  // The delayed update first, then whatever the backend still runs on the
  // memory the parts are about to release.
  runner.reset();
  try {
    backendImpl->waitCollectives();
    backendImpl->synchronize();
  } catch (const Error &) {
    // Destruction goes on; the failure was or will be reported elsewhere.
  }
  checkpoints.reset();
  pipeline.reset();
  tiers.reset(); // its NVMe lane, idle between programs
  arenas.reset();
  // The groups were split from the backend's world, which goes after them.
  mesh.reset();
}

void Executor::initialize(uint64_t newSeed) {
  runner->waitForOverlapped();
  context->restart(newSeed);
  arenas->zeroAll();
  writeInitialValues(thePlan, mesh->coordinates(), newSeed, *arenas);
  if (thePlan.findProgram("initialize"))
    runner->run("initialize");
}

uint64_t Executor::allocatedBytes(uint32_t arena) const {
  return arenas->allocatedBytes(arena);
}

uint64_t Executor::scratchBytes() const {
  return backendImpl->scratchBytes() + arenas->stagingBytes();
}

//===----------------------------------------------------------------------===//
// Data, programs and steps
//===----------------------------------------------------------------------===//

void Executor::setTokens(const int32_t *data, size_t count) {
  feed->set(thePlan.tokens, data, count, "Tokens");
}

void Executor::setTargets(const int32_t *data, size_t count) {
  feed->set(thePlan.targets, data, count, "Targets");
}

int32_t *Executor::tokens() { return feed->hostView(thePlan.tokens); }
int32_t *Executor::targets() { return feed->hostView(thePlan.targets); }

void Executor::setGradientSeed(double scale) {
  if (thePlan.gradientSeed >= 0)
    arenas->writeScalar(uint32_t(thePlan.gradientSeed), scale);
}

void Executor::runProgram(const std::string &name) { runner->run(name); }

StepResult Executor::trainStep(const BatchFill &fill, int64_t microBatches) {
  if (microBatches < 1)
    throw Error("trainStep needs at least one micro-batch");
  // Without a gradientSeed buffer the backward's seed is baked into the plan
  // for its own micro-batch count; another count would scale the gradients.
  if (thePlan.gradientSeed < 0 && microBatches != thePlan.microBatches)
    throw Error("the plan was compiled for " +
                std::to_string(thePlan.microBatches) +
                " micro-batches per step and has no gradientSeed buffer, so it "
                "cannot run " +
                std::to_string(microBatches));
  // A pipeline's step programs schedule the compiled micro-batch count.
  if (!thePlan.stages.empty() && microBatches != thePlan.microBatches)
    throw Error("the plan's pipeline schedule was compiled for " +
                std::to_string(thePlan.microBatches) +
                " micro-batches per step; it cannot run " +
                std::to_string(microBatches) + " (compile with microbatches=" +
                std::to_string(microBatches) + ")");
  const uint64_t sentBefore = collectiveStats().totalSent();
  // Data-parallel rank d trains the step's micro-batches [d*M, (d+1)*M):
  // dropout draws the masks one rank draws for those (Plan::mesh).
  const int64_t firstMicroBatch = mesh->dataParallelIndex() * microBatches;
  const double seed = scaling->backwardSeed(microBatches);
  StepResult r;
  // A curriculum's step trains at its length: that length's programs on
  // its own ids (its samples cut to it), seed and loss; everything else is
  // shared.
  const CurriculumLength *length = thePlan.curriculumAt(step());
  r.sequenceLength = length ? length->seqLength : thePlan.seqLength;
  r.rows = length ? length->rows : thePlan.microBatchSize;
  if (!thePlan.stages.empty()) {
    // The optimizer is every length's: the plan's stage's.
    const PipelineStage &own = thePlan.stages[size_t(mesh->stage())];
    r.hasLoss = pipeline->holdsLoss();
    const double lossSum = pipeline->run(fill, firstMicroBatch, seed, length);
    r.loss = r.hasLoss ? lossSum / double(microBatches) : 0.0;
    if (compressesAt(step()))
      finishStep(r, own.compressedOptimizer, own.compressedGradNorm,
                 own.compressedLearningRate, sentBefore);
    else
      finishStep(r, own.optimizer, own.gradNorm, own.learningRate, sentBefore);
    return r;
  }
  double lossSum = 0;
  lossBuffer = length ? length->loss : thePlan.loss;
  if (length && length->gradientSeed >= 0)
    arenas->writeScalar(uint32_t(length->gradientSeed), seed);
  else
    setGradientSeed(seed);
  context->clearExpertLoads();
  for (int64_t m = 0; m < microBatches; ++m) {
    setMicroBatch(firstMicroBatch + m);
    feed->fillAt(fill, m, length);
    runner->run(length ? length->program : "forward_backward");
    lossSum += loss();
  }
  r.loss = lossSum / double(microBatches);
  // A 1-bit optimizer's steps from its freeze step on run its compressed
  // program, 0/1 Adam's the program of the step's kind: the same on every
  // rank, from the step number alone.
  const OptimizerProgram optimizer = optimizerAt(step());
  finishStep(r, optimizer.name, optimizer.gradNorm, optimizer.learningRate,
             sentBefore);
  return r;
}

void Executor::finishStep(StepResult &r, const std::string &optimizer,
                          int64_t gradNormId, int64_t lrId,
                          uint64_t sentBefore) {
  auto scalar = [&](int64_t id) {
    return id < 0 ? std::nan("") : arenas->readScalar(uint32_t(id));
  };
  const auto updateStart = std::chrono::steady_clock::now();
  const bool apply = scaling->unscaleOrSkip(thePlan, *arenas, *backendImpl,
                                            mesh->world(), step(), r);
  if (apply)
    runner->run(optimizer);
  r.gradNorm = apply ? scalar(gradNormId) : std::nan("");
  r.optimizerMs = std::chrono::duration<double, std::milli>(
                      std::chrono::steady_clock::now() - updateStart)
                      .count();
  r.learningRate = scalar(lrId);
  if (thePlan.beta1 >= 0)
    r.beta1 = scalar(thePlan.beta1);
  r.collectiveBytesSent = collectiveStats().totalSent() - sentBefore;
  r.expertLoadImbalance = context->expertLoadImbalance();
  // A skipped step is no optimizer step: the schedule and Adam's bias
  // corrections do not advance (DeepSpeed's behaviour).
  if (apply)
    setStep(step() + 1);
}

double Executor::loss() const {
  return arenas->readScalar(lossBuffer < 0 ? thePlan.loss
                                           : uint32_t(lossBuffer));
}

bool Executor::compressesAt(int64_t optimizerStep) const {
  return thePlan.compressionFromStep > 0 &&
         optimizerStep >= thePlan.compressionFromStep;
}

Executor::OptimizerProgram Executor::optimizerAt(int64_t optimizerStep) const {
  const ZeroOneAdamPlan &zo = thePlan.zeroOneAdam;
  if (zeroOneAdamStages && optimizerStep >= 1) {
    const ZeroOneAdamStage stage = zeroOneAdamStages->stageAt(optimizerStep);
    const int k = stage == ZeroOneAdamStage::Onebit  ? 0
                  : stage == ZeroOneAdamStage::Local ? 1
                  : stage == ZeroOneAdamStage::Sync  ? 2
                                                     : -1;
    if (k >= 0)
      return {kZeroOneAdamPrograms[k], zo.gradNorm[k], zo.learningRate[k]};
  }
  if (compressesAt(optimizerStep))
    return {kCompressedOptimizerProgram, thePlan.compressedGradNorm,
            thePlan.compressedLearningRate};
  return {"optimizer", thePlan.gradNorm, thePlan.learningRate};
}

double Executor::gradNorm() const {
  // The last step's: the program it ran (a 1-bit optimizer's compressed
  // one once it has run, 0/1 Adam's of its kind).
  const int64_t id = optimizerAt(step() - 1).gradNorm;
  if (id < 0)
    return std::nan("");
  return arenas->readScalar(uint32_t(id));
}

double Executor::learningRate() const {
  const int64_t id = optimizerAt(step() - 1).learningRate;
  if (id < 0)
    return std::nan("");
  return arenas->readScalar(uint32_t(id));
}

int64_t Executor::step() const { return context->step(); }
void Executor::setStep(int64_t step) { context->setStep(step); }
void Executor::setMicroBatch(int64_t index) { context->setMicroBatch(index); }

uint64_t Executor::dropoutSeed(int64_t instructionSeed) const {
  return context->dropoutSeed(instructionSeed);
}

void Executor::setTokenSchedule(const TokenSchedule &schedule) {
  context->setTokenSchedule(schedule, checkTokenSchedule(thePlan, schedule));
}

void Executor::countTokens(int64_t tokens, bool stepped) {
  tokensCounted = true;
  countStepTokens(context->tokens(), context->schedule(),
                  context->warmupSteps(), tokens, stepped, step() - 1);
}

const TokenCounts &Executor::tokenCounts() const { return context->tokens(); }

void Executor::setBaseLearningRate(double lr) {
  rescaleLearningRates(thePlan, lr);
}

//===----------------------------------------------------------------------===//
// Buffers
//===----------------------------------------------------------------------===//

BufferView Executor::buffer(uint32_t id) { return arenas->view(id); }

BufferView Executor::buffer(const std::string &name) {
  int64_t id = thePlan.findBuffer(name);
  if (id < 0)
    throw Error("the plan has no buffer named '" + name + "'");
  return buffer(uint32_t(id));
}

std::vector<double> Executor::read(const std::string &name) {
  BufferView v = buffer(name);
  std::vector<double> out(size_t(v.size()));
  std::vector<uint8_t> host(v.desc->bytes);
  runner->waitForOverlapped(); // its states, final
  arenas->readBytes(uint32_t(thePlan.findBuffer(name)), host.data());
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = loadAsDouble(host.data(), v.desc->dtype, int64_t(i));
  return out;
}

//===----------------------------------------------------------------------===//
// Checkpoints and loss scaling
//===----------------------------------------------------------------------===//

std::string Executor::saveCheckpoint(const std::string &dir,
                                     int64_t consumedSamples, int64_t keep) {
  beginCheckpoint(dir, consumedSamples, keep, /*async=*/false);
  return *finishCheckpoint(/*wait=*/true);
}

uint64_t Executor::beginCheckpoint(const std::string &dir,
                                   int64_t consumedSamples, int64_t keep,
                                   bool async) {
  const DynamicLossScaler *scaler = scaling->current();
  CheckpointStamp stamp;
  // Iterations count the skipped steps too; optimizer steps do not.
  stamp.optimizerSteps = step() - 1;
  stamp.iteration = iterationsDone();
  stamp.seed = context->seed();
  if (scaler)
    stamp.lossScaler = scaler->state();
  if (tokensCounted)
    stamp.tokens = context->tokens();
  runner->waitForOverlapped();
  return checkpoints->begin(
      dir, consumedSamples, keep, async, stamp,
      [this](uint32_t id, void *dst) { arenas->readBytes(id, dst); });
}

std::optional<std::string> Executor::finishCheckpoint(bool wait) {
  return checkpoints->finish(wait);
}

bool Executor::checkpointInFlight() const { return checkpoints->inFlight(); }

int64_t Executor::loadCheckpoint(const std::string &path) {
  RestoredCheckpoint restored = checkpoints->load(
      path, scaling->enabled() ? &scaling->config() : nullptr);
  runner->waitForOverlapped();
  lastLoadWarnings = std::move(restored.warnings);
  // The seed drives dropout and the data order: another one is the user's
  // call, but not a silent one.
  if (restored.manifest.seed != context->seed())
    lastLoadWarnings.push_back(
        "checkpoint '" + path + "' was saved by a run with seed " +
        std::to_string(restored.manifest.seed) + "; this run's seed is " +
        std::to_string(context->seed()) +
        ", so dropout and the data order differ from that run's from here "
        "(pass --seed " +
        std::to_string(restored.manifest.seed) + " to continue it)");
  for (const auto &[id, bytes] : restored.buffers)
    if (!bytes.empty())
      arenas->writeBytes(id, bytes.data());
  // Gradients are zero between steps; a checkpoint is taken between steps.
  for (uint32_t i = 0; i < thePlan.buffers.size(); ++i)
    if (thePlan.buffers[i].role == BufferRole::Gradient && buffer(i).data)
      backendImpl->fillZero(buffer(i).data, thePlan.buffers[i].bytes);
  // A plan without loss scaling ignores a saved scaler (an fp16 run
  // resumed in bf16 or fp32); a scaling plan without one starts afresh.
  scaling->restart(restored.manifest.lossScaler);
  setStep(restored.manifest.optimizerSteps + 1);
  tokensRestored = restored.manifest.tokens.has_value();
  tokensCounted = tokensRestored;
  context->tokens() = restored.manifest.tokens.value_or(TokenCounts());
  // 0/1 Adam past its variance freeze: each rank's local steps leave its
  // parameters, momentum and accumulator its own (after a sync they still
  // differ by rounding), and a checkpoint holds rank 0's, as DeepSpeed's
  // does. Say so: the run goes on from rank 0's state, not bit for bit.
  const ZeroOneAdamPlan &zo = thePlan.zeroOneAdam;
  if (zo.enabled &&
      restored.manifest.optimizerSteps > std::max<int64_t>(1, zo.varFreezeStep))
    lastLoadWarnings.push_back(
        "checkpoint '" + path +
        "' was taken after 0/1 Adam's variance froze "
        "(step " +
        std::to_string(std::max<int64_t>(1, zo.varFreezeStep)) +
        "): its local steps keep each rank's parameters, momentum and "
        "accumulator apart, and the checkpoint holds rank 0's (as "
        "DeepSpeed's does), so every rank continues from rank 0's state; "
        "the run is not bit-for-bit the one that saved it (a checkpoint up "
        "to the freeze is)");
  const DynamicLossScaler *scaler = scaling->current();
  skippedBeforeThisScaler = restored.manifest.iteration -
                            restored.manifest.optimizerSteps -
                            (scaler ? scaler->skippedSteps() : 0);
  // Offload's masters are not saved: they are their parameters' copies.
  if (thePlan.findProgram("initialize"))
    runner->run("initialize");
  return restored.manifest.consumedSamples;
}

int64_t Executor::iterationsDone() const {
  const DynamicLossScaler *scaler = scaling->current();
  return step() - 1 + (scaler ? scaler->skippedSteps() : 0) +
         skippedBeforeThisScaler;
}

bool Executor::scalesLoss() const { return scaling->enabled(); }

void Executor::setLossScalerConfig(const LossScalerConfig &cfg) {
  scaling->setConfig(cfg);
}

const DynamicLossScaler *Executor::lossScaler() const {
  return scaling->current();
}

//===----------------------------------------------------------------------===//
// The mesh, communication and tiers
//===----------------------------------------------------------------------===//

int64_t Executor::stage() const { return mesh->stage(); }
Communicator *Executor::world() const { return mesh->world(); }

const std::vector<int64_t> &Executor::meshCoordinates() const {
  return mesh->coordinates();
}

Communicator *Executor::group(int64_t axes) const { return mesh->group(axes); }

const TransferStats &Executor::transferStats() const { return tiers->stats(); }

const NvmeStore *Executor::nvmeStore(uint32_t arena) const {
  return arenas->nvmeStore(arena);
}

CommStats Executor::collectiveStats() const { return mesh->stats(); }

void Executor::setOverlapCommunication(bool on) { collectives->setOverlap(on); }

bool Executor::overlapsCommunication() const {
  return collectives->overlapping();
}

std::vector<std::pair<size_t, size_t>>
Executor::collectiveLaunchPoints(const std::string &name) {
  const Program *prog = thePlan.findProgram(name);
  if (!prog)
    throw Error("the plan has no program '" + name + "'");
  const CollectiveSchedule &s = collectives->scheduleOf(*prog);
  std::vector<std::pair<size_t, size_t>> points;
  for (size_t at = 0; at < s.launchAt.size(); ++at)
    for (size_t j : s.launchAt[at])
      points.push_back({j, at});
  return points;
}

void Executor::setInstructionHook(InstructionHook hook) {
  runner->setHook(std::move(hook));
}

double Executor::nowUs() const { return runner->nowUs(); }
