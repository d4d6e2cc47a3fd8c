//===- ExecutorStep.cpp - Programs, micro-batches and the training step ---===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The executor's step driver: running a program (its collectives launched
// beside compute where the schedule allows), a timed run for traces, the
// non-pipelined training step over micro-batches with the backward's seed
// and the fp16 loss scaler, the data each rank takes, and dispatching one
// instruction to the collectives or the backend.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/CommLane.h"
#include "dsc/Runtime/Executor.h"

#include "dsc/Runtime/Backend.h"
#include "dsc/Runtime/CpuKernels.h"
#include "dsc/Runtime/FloatConvert.h"
#include "dsc/Runtime/InstructionArgs.h"
#include "dsc/Runtime/PlanIO.h"
#include "dsc/Runtime/ShardLayout.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>
#include <set>
#include <utility>

using namespace dsc::rt;

void Executor::runProgram(const std::string &name) {
  const Program *prog = thePlan.findProgram(name);
  if (!prog) {
    std::string have;
    for (const Program &p : thePlan.programs)
      have += (have.empty() ? "'" : ", '") + p.name + "'";
    throw Error("the plan has no program '" + name + "' (it has " +
                (have.empty() ? std::string("none") : have) + ")");
  }
  // Only the next step's forward and backward run beside an overlapped
  // update: it touches host-tier states they do not (the plan verifier
  // checks); everything else may read or write them.
  if (name != "forward_backward")
    waitForOverlapped();
  if (instructionHook) {
    runTimed(*prog);
    return;
  }
  const CommSchedule &schedule = commScheduleOf(*prog);
  // Launched collectives not yet waited for, oldest first, with the bytes
  // they read and write.
  struct InFlight {
    uint64_t ticket;
    const std::vector<ByteRange> *ranges;
  };
  std::vector<InFlight> inFlight;
  auto waitThrough = [&](size_t k) { // waits for inFlight[0..k]
    backendImpl->waitCollective(inFlight[k].ticket);
    inFlight.erase(inFlight.begin(), inFlight.begin() + ptrdiff_t(k) + 1);
  };
  // NVMe reads and writes queued on the NVMe lane, likewise: a swap-in
  // runs beside the update before it (the prefetch the compiler placed).
  std::vector<InFlight> ioInFlight;
  // Waits for the newest NVMe transfer whose bytes `ranges` touch (the
  // lane completes in order).
  auto waitForLane = [&](const std::vector<ByteRange> &ranges) {
    for (size_t k = ioInFlight.size(); k-- > 0;)
      if (overlaps(*ioInFlight[k].ranges, ranges)) {
        nvmeLane->wait(ioInFlight[k].ticket);
        ioInFlight.erase(ioInFlight.begin(),
                         ioInFlight.begin() + ptrdiff_t(k) + 1);
        return;
      }
  };
  auto waitAll = [&] {
    backendImpl->waitCollectives();
    inFlight.clear();
    if (nvmeLane)
      nvmeLane->waitAll();
    ioInFlight.clear();
  };
  try {
    for (size_t i = 0; i < prog->instructions.size(); ++i) {
      // Collectives hoisted to here go first: their operands are final,
      // once the NVMe lane has written what they read (a fetched chunk).
      for (size_t j : schedule.launchAt[i]) {
        waitForLane(schedule.ranges[j]);
        inFlight.push_back(
            {backendImpl->launchCollective([this, prog, j] {
               runInstruction(*prog, j);
             }),
             &schedule.ranges[j]});
      }
      const Instruction &inst = prog->instructions[i];
      if (isCollective(inst.opcode))
        continue; // launched above, at or before its place
      if (inst.opcode == Opcode::OverlapNextStep) {
        // The delayed parameter update: the rest runs beside the next
        // step's forward and backward.
        waitAll();
        launchOverlapped(*prog, i + 1);
        return;
      }
      if (schedule.usesCommunicator[i]) {
        // It calls a group itself: nothing else may be on the lane.
        waitAll();
      } else {
        // Wait for the newest launch whose bytes this instruction touches
        // (launches complete in order).
        for (size_t k = inFlight.size(); k-- > 0;)
          if (overlaps(*inFlight[k].ranges, schedule.ranges[i])) {
            waitThrough(k);
            break;
          }
      }
      if (nvmeLane && onNvmeLane(*prog, i)) {
        // The lane runs its I/O in order; compute waits below for what
        // it touches.
        ioInFlight.push_back(
            {launchNvmeTransfer(*prog, i), &schedule.ranges[i]});
        continue;
      }
      waitForLane(schedule.ranges[i]);
      runInstruction(*prog, i);
    }
    waitAll();
  } catch (...) {
    // The lane's launches were made on every rank alike: let them finish
    // (or fail) before the arenas they use may go.
    try {
      backendImpl->waitCollectives();
    } catch (...) {
    }
    try {
      if (nvmeLane)
        nvmeLane->waitAll();
    } catch (...) {
    }
    throw;
  }
}

namespace {
/// The step an overlapped update's instructions read (Executor::step on
/// its thread): the one its optimizer program ran in.
thread_local int64_t overlappedStep = 0;
} // namespace

int64_t Executor::step() const {
  return overlappedStep ? overlappedStep : currentStep;
}

void Executor::launchOverlapped(const Program &prog, size_t from) {
  waitForOverlapped();
  // A device backend's instructions share its stream and its pinned
  // scalar slots (the learning rate is read through them): there the
  // update runs in order (the same numerics, no overlap).
  if (!backendImpl->hostAddressable()) {
    for (size_t i = from; i < prog.instructions.size(); ++i)
      runInstruction(prog, i);
    return;
  }
  const int64_t stepOfUpdate = currentStep;
  overlapped = std::thread([this, &prog, from, stepOfUpdate] {
    overlappedStep = stepOfUpdate;
    try {
      for (size_t i = from; i < prog.instructions.size(); ++i)
        runInstruction(prog, i);
      backendImpl->synchronize();
    } catch (...) {
      overlappedError = std::current_exception();
    }
    overlappedStep = 0;
  });
}

void Executor::waitForOverlapped() {
  if (overlapped.joinable())
    overlapped.join();
  if (std::exception_ptr error = std::exchange(overlappedError, nullptr))
    std::rethrow_exception(error);
}

void Executor::runTimed(const Program &prog) {
  // One instruction at a time, each timed to its completion.
  for (size_t i = 0; i < prog.instructions.size(); ++i) {
    const Instruction &inst = prog.instructions[i];
    Communicator *comm =
        isCollective(inst.opcode) ? group(groupAxesOf(inst)) : nullptr;
    uint64_t sentBefore = comm ? comm->stats().totalSent() : 0;
    backendImpl->synchronize();
    double t0 = nowUs();
    if (comm)
      backendImpl->waitCollective(backendImpl->launchCollective(
          [&] { runInstruction(prog, i); }));
    else
      runInstruction(prog, i);
    backendImpl->synchronize();
    double t1 = nowUs();
    InstructionEvent event{&prog, i, &inst, t0, t1 - t0, 0};
    if (comm) {
      event.stream = 1;
      event.collective = true;
      event.bytesSent = comm->stats().totalSent() - sentBefore;
    }
    instructionHook(event);
  }
}

StepResult Executor::trainStep(
    const std::function<void(int64_t, int32_t *, int32_t *)> &fill,
    int64_t microBatches) {
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
  if (!thePlan.stages.empty())
    return trainPipelineStep(fill, microBatches);
  double lossSum = 0;
  const uint64_t sentBefore = collectiveStats().totalSent();
  setGradientSeed(lossSeed(microBatches));
  const int64_t firstMicroBatch = firstMicroBatchOfRank(microBatches);
  for (int64_t m = 0; m < microBatches; ++m) {
    setMicroBatch(firstMicroBatch + m);
    fillBatch(fill, m);
    runProgram("forward_backward");
    lossSum += loss();
  }
  StepResult r;
  r.loss = lossSum / double(microBatches);
  const auto updateStart = std::chrono::steady_clock::now();
  const bool apply = unscaleOrSkip(r);
  if (apply)
    runProgram("optimizer");
  r.gradNorm = apply ? gradNorm() : std::nan("");
  r.optimizerMs = std::chrono::duration<double, std::milli>(
                      std::chrono::steady_clock::now() - updateStart)
                      .count();
  r.learningRate = learningRate();
  r.collectiveBytesSent = collectiveStats().totalSent() - sentBefore;
  // A skipped step is no optimizer step: the schedule and Adam's bias
  // corrections do not advance (DeepSpeed's behaviour).
  if (apply)
    ++currentStep;
  return r;
}

double Executor::lossSeed(int64_t microBatches) const {
  return (scaler ? scaler->scale() : 1.0) / double(microBatches);
}

bool Executor::unscaleOrSkip(StepResult &r) {
  if (!scaler)
    return true;
  const double used = scaler->scale();
  std::vector<std::pair<float *, int64_t>> grads;
  double sum = 0;
  for (uint32_t id = 0; id < thePlan.buffers.size(); ++id) {
    const Buffer &b = thePlan.buffers[id];
    if (b.role != BufferRole::Gradient || !b.bytes)
      continue;
    if (b.dtype != DType::F32)
      throw Error("loss scaling: gradient '" + b.name + "' is " +
                  dtypeName(b.dtype) + "; f16 plans keep f32 gradients");
    grads.push_back({buffer(id).as<float>(), numElements(b.shape)});
    sum += backendImpl->sumOfSquares(grads.back().first, grads.back().second);
  }
  // One overflow anywhere skips the step everywhere, as DeepSpeed
  // all-reduces its overflow flag.
  int32_t overflow = std::isfinite(sum) ? 0 : 1;
  if (worldComm && worldComm->size() > 1)
    worldComm->allReduce(&overflow, 1, DType::I32, ReduceOp::Max);
  const LossScaleEvent event = scaler->update(overflow != 0);
  r.lossScale = used;
  r.skippedSteps = scaler->skippedSteps();
  if (event == LossScaleEvent::SkippedAtMin)
    throw Error("loss scaling: the gradients overflow at the minimum loss "
                "scale " +
                std::to_string(used) + " (step " +
                std::to_string(currentStep) +
                "): training diverged (try a lower --lr)");
  if (overflow) {
    r.skipped = true;
    for (auto [data, count] : grads)
      backendImpl->fillZero(data, uint64_t(count) * sizeof(float));
    return false;
  }
  for (auto [data, count] : grads)
    backendImpl->scale(data, count, 1.0 / used);
  return true;
}

int64_t Executor::firstMicroBatchOfRank(int64_t microBatches) const {
  // Data-parallel rank d trains the step's micro-batches [d*M, (d+1)*M):
  // dropout draws the masks one rank draws for those (Plan::mesh).
  const int64_t dpAxis = findMeshAxis(thePlan.mesh, "dp");
  return dpAxis >= 0 ? coords[dpAxis] * microBatches : 0;
}

void Executor::fillBatch(
    const std::function<void(int64_t, int32_t *, int32_t *)> &fill,
    int64_t microBatchInStep) {
  // Host memory: `fill` writes the buffers themselves.
  if (backendImpl->hostAddressable()) {
    fill(microBatchInStep, tokens(), targets());
    return;
  }
  // Device memory: `fill` writes host mirrors of the buffers (copyIds keeps
  // them equal; read once, the first time), which are then copied in.
  const BufferView tok = buffer(thePlan.tokens), tgt = buffer(thePlan.targets);
  if (hostTokens.empty() || hostTargets.empty()) {
    hostTokens.resize(size_t(tok.size()));
    hostTargets.resize(size_t(tgt.size()));
    backendImpl->copyOut(hostTokens.data(), tok.data, tok.desc->bytes);
    backendImpl->copyOut(hostTargets.data(), tgt.data, tgt.desc->bytes);
  }
  fill(microBatchInStep, hostTokens.data(), hostTargets.data());
  setTokens(hostTokens.data(), hostTokens.size());
  setTargets(hostTargets.data(), hostTargets.size());
}

void Executor::runInstruction(const Program &prog, size_t index) {
  const Instruction &inst = prog.instructions[index];
  switch (inst.opcode) {
  case Opcode::AllReduce:
    runAllReduce(prog, index);
    return;
  case Opcode::AllGather:
  case Opcode::GatherParameter:
  case Opcode::GatherChunks:
    runAllGather(prog, index);
    return;
  case Opcode::ReduceScatter:
  case Opcode::ReduceScatterAccumulate:
  case Opcode::ReduceScatterChunks:
    runReduceScatter(prog, index);
    return;
  case Opcode::PipelineForward:
  case Opcode::PipelineBackward:
  case Opcode::PipelineBackwardWeight:
  case Opcode::PipelineSend:
  case Opcode::PipelineRecv:
    throw instructionError(prog, index,
                           "a pipeline stage's step runs in trainStep, "
                           "not as a program");
  case Opcode::Transfer:
    runTransfer(prog, index);
    return;
  case Opcode::OverlapNextStep:
    // Run in order (a traced run times each instruction): nothing to do.
    return;
  case Opcode::Zero:
    for (uint32_t id : inst.outputs) {
      BufferView v = buffer(id);
      if (v.data)
        backendImpl->fillZero(v.data, v.desc->bytes);
    }
    return;
  default:
    backendImpl->run(*this, prog, index);
  }
}

namespace {

/// A Transfer instruction's two sides resolved against the arenas: the
/// bytes, where they start in each, and the NVMe file on either side.
struct TransferSides {
  Tier from = Tier::Device, to = Tier::Device;
  uint64_t bytes = 0, xAt = 0, yAt = 0;
  uint32_t xArena = 0, yArena = 0;
  NvmeStore *source = nullptr, *destination = nullptr;
};

} // namespace

/// The sides of Transfer `index` of `prog` (a chunk at this rank's index in
/// its group).
static TransferSides
resolveTransfer(const Plan &plan, const Program &prog, size_t index,
                const std::map<uint32_t, std::unique_ptr<NvmeStore>> &files,
                const std::function<int(int64_t)> &groupRank) {
  const Instruction &inst = prog.instructions[index];
  const ops::Transfer move = ops::Transfer::decode(inst);
  const Buffer &x = plan.buffers[inst.inputs[0]];
  const Buffer &y = plan.buffers[inst.outputs[0]];
  TransferSides t;
  t.bytes = std::min(x.bytes, y.bytes);
  t.xAt = x.offset;
  t.yAt = y.offset;
  if (move.chunk != 0)
    (move.chunk == 1 ? t.xAt : t.yAt) +=
        uint64_t(groupRank(move.axes)) * t.bytes;
  t.xArena = x.arena;
  t.yArena = y.arena;
  t.from = plan.arenas[x.arena].tier;
  t.to = plan.arenas[y.arena].tier;
  if (auto it = files.find(x.arena); it != files.end())
    t.source = it->second.get();
  if (auto it = files.find(y.arena); it != files.end())
    t.destination = it->second.get();
  return t;
}

bool Executor::onNvmeLane(const Program &prog, size_t index) const {
  const Instruction &inst = prog.instructions[index];
  if (inst.opcode != Opcode::Transfer)
    return false;
  // The memory side must be host memory the lane's thread may touch.
  const Buffer &x = thePlan.buffers[inst.inputs[0]];
  const Buffer &y = thePlan.buffers[inst.outputs[0]];
  const bool xFile = nvmeFiles.count(x.arena), yFile = nvmeFiles.count(y.arena);
  if (xFile == yFile)
    return false;
  const uint32_t memory = xFile ? y.arena : x.arena;
  return hostReachable(memory);
}

bool Executor::hostReachable(uint32_t arena) const {
  return backendImpl->hostAddressable() ||
         thePlan.arenas[arena].tier == Tier::Host;
}

uint64_t Executor::launchNvmeTransfer(const Program &prog, size_t index) {
  const TransferSides t =
      resolveTransfer(thePlan, prog, index, nvmeFiles, [&](int64_t axes) {
        return requireGroup(prog, index, axes).rank();
      });
  // A device backend's kernels issued before (the update of a staged
  // state in pinned memory) finish before the lane reads their bytes.
  backendImpl->synchronize();
  transfers.bytes[uint32_t(t.from)][uint32_t(t.to)] += t.bytes;
  double *seconds = &transfers.seconds[uint32_t(t.from)][uint32_t(t.to)];
  uint8_t *memory =
      t.source ? arenas[t.yArena] + t.yAt : arenas[t.xArena] + t.xAt;
  return nvmeLane->launch([t, memory, seconds, &prog, index] {
    const auto start = std::chrono::steady_clock::now();
    try {
      if (t.source)
        t.source->read(t.xAt, memory, t.bytes);
      else
        t.destination->write(t.yAt, memory, t.bytes);
    } catch (const Error &e) {
      throw instructionError(prog, index, e.what());
    }
    // Only the lane writes the NVMe directions' seconds while it runs.
    *seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
  });
}

void Executor::runTransfer(const Program &prog, size_t index) {
  const TransferSides t =
      resolveTransfer(thePlan, prog, index, nvmeFiles, [&](int64_t axes) {
        return requireGroup(prog, index, axes).rank();
      });
  // What was issued before may still read or write these bytes.
  backendImpl->waitCollectives();
  backendImpl->synchronize();
  const auto start = std::chrono::steady_clock::now();
  try {
    if (!t.source && !t.destination) {
      if (backendImpl->hostAddressable())
        std::memcpy(arenas[t.yArena] + t.yAt, arenas[t.xArena] + t.xAt,
                    t.bytes);
      else
        backendImpl->copy(arenas[t.yArena] + t.yAt, arenas[t.xArena] + t.xAt,
                          t.bytes);
    } else {
      // One side is a file; the other is memory, read through host memory
      // when the backend's is not (the device tier of a GPU).
      const uint32_t memArena = t.source ? t.yArena : t.xArena;
      uint8_t *memory = arenas[memArena] + (t.source ? t.yAt : t.xAt);
      const bool direct = hostReachable(memArena);
      std::vector<uint8_t> bounce(direct ? 0 : t.bytes);
      uint8_t *host = direct ? memory : bounce.data();
      if (t.source) {
        t.source->read(t.xAt, host, t.bytes);
        if (!direct)
          backendImpl->copyIn(memory, host, t.bytes);
      } else {
        if (!direct)
          backendImpl->copyOut(host, memory, t.bytes);
        t.destination->write(t.yAt, host, t.bytes);
      }
    }
  } catch (const Error &e) {
    throw instructionError(prog, index, e.what());
  }
  backendImpl->synchronize();
  transfers.bytes[uint32_t(t.from)][uint32_t(t.to)] += t.bytes;
  transfers.seconds[uint32_t(t.from)][uint32_t(t.to)] +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
}

void Executor::failAt(const Program &prog, size_t index,
                      const std::string &msg) const {
  throw instructionError(prog, index, msg);
}
