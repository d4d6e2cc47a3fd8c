//===- Executor.cpp - Runs a plan's programs on a backend -----------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The plan's meaning on one rank: arenas, initialization, programs, steps,
// mesh groups and the collectives' buckets. Compute instructions and memory
// go to the Backend (Backend.h); the plan was validated before any of this
// runs, so the code here trusts shapes and ids.
//
//===----------------------------------------------------------------------===//

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

using namespace dsc::rt;

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// A uniform double in (0, 1) from 53 random bits; never 0, so log() is safe.
double uniformOpen(uint64_t bits) {
  return (double(bits >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

/// Element i of N(0, 1) for stream `key`: Box-Muller over two counter-based
/// uniforms, a pure function of (key, i).
double normalAt(uint64_t key, uint64_t i) {
  double u1 = uniformOpen(splitmix64(key ^ splitmix64(2 * i)));
  double u2 = uniformOpen(splitmix64(key ^ splitmix64(2 * i + 1)));
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

/// The mesh-axes mask an instruction works over, or 0 when it has none.
int64_t groupMaskOf(const Instruction &inst) {
  if (isCollective(inst.opcode) || isVocabParallel(inst.opcode) ||
      inst.opcode == Opcode::GlobalNormClipParts)
    return inst.ints[0];
  if (inst.opcode == Opcode::AdamWShard)
    return inst.ints[1];
  return 0;
}

} // namespace

//===----------------------------------------------------------------------===//
// Construction, arenas, initialization
//===----------------------------------------------------------------------===//

Executor::Executor(Plan plan, uint64_t seed, Communicator *world,
                   std::unique_ptr<Backend> backendToUse)
    : thePlan(std::move(plan)), backendImpl(std::move(backendToUse)) {
  validatePlan(thePlan);
  if (!backendImpl)
    backendImpl = createCpuBackend();

  // The mesh against the world, before anything is allocated.
  const int64_t meshSize = meshRanks(thePlan.mesh);
  if (thePlan.mesh.empty()) {
    if (world && world->size() != 1)
      throw Error("the plan has no mesh (it runs on one rank) but the "
                  "communicator has " +
                  std::to_string(world->size()) + " ranks");
  } else if (!world) {
    throw Error("the plan's mesh " + meshString(thePlan.mesh) + " needs " +
                std::to_string(meshSize) +
                " ranks, but the executor was given no communicator");
  } else if (world->size() != meshSize) {
    throw Error("the plan's mesh " + meshString(thePlan.mesh) + " needs " +
                std::to_string(meshSize) + " ranks, but the communicator has " +
                std::to_string(world->size()));
  }
  worldComm = world;

  // What the backend supports and its scratch, then the arenas.
  backendImpl->prepare(thePlan);
  arenas.assign(thePlan.arenas.size(), nullptr);
  try {
    for (size_t a = 0; a < thePlan.arenas.size(); ++a) {
      const Arena &arena = thePlan.arenas[a];
      arenas[a] = static_cast<uint8_t *>(backendImpl->allocate(
          arena.bytes, arena.tier,
          "arena " + std::to_string(a) + " (" + tierName(arena.tier) + ", " +
              std::to_string(arena.bytes) + " bytes)"));
    }
    // A reduce-scatter's result is staged outside its input (the
    // communicators' buffers must not overlap): one staging area for the
    // largest chunk.
    for (const Program &prog : thePlan.programs)
      for (const Instruction &inst : prog.instructions)
        if (inst.opcode == Opcode::ReduceScatter ||
            inst.opcode == Opcode::ReduceScatterAccumulate)
          for (uint32_t id : inst.inputs)
            stagingSize = std::max(stagingSize, thePlan.buffers[id].bytes);
    staging = static_cast<uint8_t *>(backendImpl->allocate(
        stagingSize, Tier::Device,
        "reduce-scatter staging (" + std::to_string(stagingSize) + " bytes)"));
  } catch (...) {
    releaseMemory();
    throw;
  }
  startNs = double(std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::steady_clock::now().time_since_epoch())
                       .count());
  // The mesh coordinates first: sharded parameters initialize by them.
  setUpMesh(world);
  initialize(seed);
  setOverlapCommunication(backendImpl->overlapsByDefault());
  for (const Buffer &b : thePlan.buffers)
    if (b.dtype == DType::F16) {
      scaler.emplace();
      break;
    }
}

void Executor::setUpMesh(Communicator *world) {
  if (thePlan.mesh.empty())
    return;
  coords = dsc::rt::meshCoordinates(thePlan.mesh, world->rank());
  // A device backend's collectives move its memory: split its world.
  backendWorld = backendImpl->makeWorld(*world);
  Communicator *splitFrom = backendWorld ? backendWorld.get() : world;
  // Every rank has the same plan, so every rank splits the same masks in
  // the same (ascending) order, as split's collective contract needs.
  std::set<int64_t> masks;
  // A pipeline's stages exchange activations over the pp group.
  if (!thePlan.stages.empty()) {
    const int64_t axis = findMeshAxis(thePlan.mesh, "pp");
    ppMask = int64_t(1) << axis;
    stageIndex = coords[axis];
    masks.insert(ppMask);
  }
  for (const Program &prog : thePlan.programs)
    for (const Instruction &inst : prog.instructions)
      if (int64_t mask = groupMaskOf(inst))
        masks.insert(mask);
  for (int64_t mask : masks) {
    // The color numbers the rank's coordinates on the axes outside the
    // mask (row-major); ranks agreeing there form one group, ordered by
    // world rank.
    int64_t color = 0;
    for (size_t a = 0; a < thePlan.mesh.size(); ++a)
      if (!(mask >> a & 1))
        color = color * thePlan.mesh[a].size + coords[a];
    std::unique_ptr<Communicator> group =
        splitFrom->split(int(color), splitFrom->rank());
    if (!group)
      throw Error("splitting the group of mesh axes mask " +
                  std::to_string(mask) + " returned no communicator");
    groups[mask] = std::move(group);
  }
}

Communicator *Executor::group(int64_t axes) const {
  auto it = groups.find(axes);
  return it == groups.end() ? nullptr : it->second.get();
}

CommStats Executor::collectiveStats() const {
  CommStats total;
  for (const auto &[mask, comm] : groups)
    total += comm->stats();
  return total;
}

Executor::~Executor() {
  releaseMemory();
  // The groups were split from the backend's world: free them first.
  groups.clear();
  backendImpl->forgetWorld();
  backendWorld.reset();
}

void Executor::releaseMemory() {
  // Collectives or device work may be in flight on these buffers.
  try {
    backendImpl->waitCollectives();
    backendImpl->synchronize();
  } catch (const Error &) {
    // Destruction goes on; the failure was or will be reported elsewhere.
  }
  for (uint8_t *a : arenas)
    backendImpl->release(a);
  arenas.clear();
  for (uint8_t *s : stash)
    backendImpl->release(s);
  stash.clear();
  backendImpl->release(staging);
  staging = nullptr;
}

uint64_t Executor::allocatedBytes(uint32_t arena) const {
  if (arena >= arenas.size())
    throw Error("arena " + std::to_string(arena) + " does not exist (" +
                std::to_string(arenas.size()) + " arenas)");
  return arenas[arena] ? thePlan.arenas[arena].bytes : 0;
}

double Executor::nowUs() const {
  double ns = double(std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::steady_clock::now().time_since_epoch())
                         .count());
  return (ns - startNs) / 1000.0;
}

void Executor::initialize(uint64_t newSeed) {
  seed = newSeed;
  currentStep = 1;
  microBatch = 0;
  for (size_t a = 0; a < arenas.size(); ++a)
    if (arenas[a])
      backendImpl->fillZero(arenas[a], thePlan.arenas[a].bytes);
  // Values are drawn on the host and copied in, so every backend starts
  // from the same bits.
  std::vector<uint8_t> host;
  for (uint32_t id = 0; id < thePlan.buffers.size(); ++id) {
    const Buffer &b = thePlan.buffers[id];
    if (b.init.kind == InitKind::None || b.init.kind == InitKind::Zeros)
      continue;
    BufferView view = buffer(id);
    const int64_t n = view.size();
    const bool normal = b.init.kind == InitKind::Normal;
    const double value = b.init.kind == InitKind::Ones ? 1.0 : b.init.value;
    const double stddev = b.init.std;
    const uint64_t key = splitmix64(
        seed ^
        splitmix64(fnv1a64(reinterpret_cast<const uint8_t *>(b.name.data()),
                           b.name.size())));
    // A rank's part of a sharded parameter draws the whole parameter's
    // values at its elements' whole indices.
    const bool sharded = normal && !b.layout.isWhole();
    std::optional<ShardIndexer> indexer;
    if (sharded)
      indexer.emplace(b.layout, n, thePlan.mesh, coords);
    host.resize(b.bytes);
    auto fill = [&](auto *p) {
      using T = std::remove_pointer_t<decltype(p)>;
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i) {
        const int64_t at = sharded ? indexer->wholeIndex(i) : i;
        p[i] = normal ? T(stddev * normalAt(key, uint64_t(at))) : T(value);
      }
    };
    if (b.dtype == DType::F32)
      fill(reinterpret_cast<float *>(host.data()));
    else if (b.dtype == DType::F64)
      fill(reinterpret_cast<double *>(host.data()));
    else if (b.dtype == DType::I32 && !normal)
      std::fill_n(reinterpret_cast<int32_t *>(host.data()), n, int32_t(value));
    else if (b.dtype == DType::BF16 || b.dtype == DType::F16) {
      // Drawn in f32, then rounded: the values an f32 master would cast to.
      std::vector<float> wide(static_cast<size_t>(n));
      fill(wide.data());
      convertFloats(wide.data(), DType::F32, host.data(), b.dtype, n);
    } else
      throw Error("buffer '" + b.name + "': cannot initialize " +
                  std::string(dtypeName(b.dtype)) + " buffers");
    if (view.data)
      backendImpl->copyIn(view.data, host.data(), b.bytes);
  }
}

//===----------------------------------------------------------------------===//
// Buffers and well-known values
//===----------------------------------------------------------------------===//

BufferView Executor::buffer(uint32_t id) {
  if (id >= thePlan.buffers.size())
    throw Error("buffer " + std::to_string(id) + " does not exist (" +
                std::to_string(thePlan.buffers.size()) + " buffers)");
  const Buffer &b = thePlan.buffers[id];
  return {&b, arenas[b.arena] ? arenas[b.arena] + b.offset : nullptr};
}

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
  if (v.data)
    backendImpl->copyOut(host.data(), v.data, v.desc->bytes);
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = loadAsDouble(host.data(), v.desc->dtype, int64_t(i));
  return out;
}

double Executor::readScalar(uint32_t id) const {
  const Buffer &b = thePlan.buffers[id];
  uint8_t bytes[8] = {};
  backendImpl->copyOut(bytes, arenas[b.arena] + b.offset,
                       std::min<uint64_t>(b.bytes, sizeof bytes));
  return loadAsDouble(bytes, b.dtype, 0);
}

void Executor::writeScalar(uint32_t id, double value) {
  const Buffer &b = thePlan.buffers[id];
  uint8_t bytes[8] = {};
  convertFloats(&value, DType::F64, bytes, b.dtype, 1);
  backendImpl->copyIn(arenas[b.arena] + b.offset, bytes,
                      std::min<uint64_t>(b.bytes, sizeof bytes));
}

int64_t Executor::vocabularyReading(uint32_t ids) const {
  // The vocabulary of the first instruction that reads `ids` as token or
  // target ids (a vocabulary-parallel one holds 1/group of it).
  for (const Program &prog : thePlan.programs)
    for (const Instruction &inst : prog.instructions) {
      if (inst.inputs.size() < 2 || inst.inputs[1] != ids)
        continue;
      const Buffer &first = thePlan.buffers[inst.inputs[0]];
      switch (inst.opcode) {
      case Opcode::Embedding:
        return first.shape[0];
      case Opcode::CrossEntropy:
      case Opcode::CrossEntropyGrad:
        return lastDim(first);
      case Opcode::VocabParallelEmbedding:
        return first.shape[0] * groupSize(thePlan.mesh, inst.ints[0]);
      case Opcode::VocabParallelCrossEntropy:
      case Opcode::VocabParallelCrossEntropyGrad:
        return lastDim(first) * groupSize(thePlan.mesh, inst.ints[0]);
      default:
        break;
      }
    }
  return 0;
}

void Executor::copyIds(uint32_t id, const int32_t *data, size_t count,
                       const char *what) {
  BufferView v = buffer(id);
  if (int64_t(count) != v.size())
    throw Error(std::string("set") + what + ": got " + std::to_string(count) +
                " ids for a buffer of " + std::to_string(v.size()));
  // The CPU kernels check ids where they read them and name the
  // instruction; a device backend's are checked here, on the host, so the
  // error names the position without a wait.
  if (!backendImpl->hostAddressable())
    if (int64_t vocab = vocabularyReading(id))
      for (size_t i = 0; i < count; ++i)
        if (data[i] < 0 || data[i] >= vocab)
          throw Error("buffer '" + v.desc->name + "': id " +
                      std::to_string(data[i]) + " at position " +
                      std::to_string(i) + " is outside the vocabulary [0, " +
                      std::to_string(vocab) + ")");
  backendImpl->copyIn(v.data, data, count * sizeof(int32_t));
  // A device backend's host mirror (fillBatch) follows the buffer.
  if (!backendImpl->hostAddressable()) {
    std::vector<int32_t> &mirror =
        id == thePlan.tokens ? hostTokens : hostTargets;
    if (mirror.data() != data)
      mirror.assign(data, data + count);
  }
}

void Executor::setTokens(const int32_t *data, size_t count) {
  copyIds(thePlan.tokens, data, count, "Tokens");
}

void Executor::setTargets(const int32_t *data, size_t count) {
  copyIds(thePlan.targets, data, count, "Targets");
}

int32_t *Executor::tokens() { return hostView(thePlan.tokens); }
int32_t *Executor::targets() { return hostView(thePlan.targets); }

int32_t *Executor::hostView(uint32_t id) {
  if (!backendImpl->hostAddressable())
    throw Error("buffer '" + thePlan.buffers[id].name + "' is in " +
                backendImpl->name() +
                " memory: use setTokens/setTargets to write it");
  return buffer(id).as<int32_t>();
}

void Executor::setLossScale(double scale) {
  if (thePlan.lossScale >= 0)
    writeScalar(uint32_t(thePlan.lossScale), scale);
}

double Executor::loss() const { return readScalar(thePlan.loss); }
double Executor::gradNorm() const {
  if (thePlan.gradNorm < 0)
    return std::nan("");
  return readScalar(uint32_t(thePlan.gradNorm));
}
double Executor::learningRate() const {
  if (thePlan.learningRate < 0)
    return std::nan("");
  return readScalar(uint32_t(thePlan.learningRate));
}

void Executor::setBaseLearningRate(double lr) {
  if (!(lr >= 0) || !std::isfinite(lr))
    throw Error("learning rate " + std::to_string(lr) +
                " must be finite and >= 0");
  bool found = false;
  for (Program &prog : thePlan.programs)
    for (Instruction &inst : prog.instructions)
      if (inst.opcode == Opcode::LearningRate) {
        double base = inst.floats[0];
        double ratio = base > 0 ? lr / base : 0.0;
        inst.floats[0] = lr;
        inst.floats[1] = base > 0 ? inst.floats[1] * ratio : 0.0;
        inst.floats[2] = base > 0 ? inst.floats[2] * ratio : 0.0;
        found = true;
      }
  if (!found)
    throw Error("the plan has no LearningRate instruction whose rate could "
                "be set");
}

//===----------------------------------------------------------------------===//
// Running
//===----------------------------------------------------------------------===//

void Executor::runProgram(const std::string &name) {
  const Program *prog = thePlan.findProgram(name);
  if (!prog) {
    std::string have;
    for (const Program &p : thePlan.programs)
      have += (have.empty() ? "'" : ", '") + p.name + "'";
    throw Error("the plan has no program '" + name + "' (it has " +
                (have.empty() ? std::string("none") : have) + ")");
  }
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
  auto waitAll = [&] {
    backendImpl->waitCollectives();
    inFlight.clear();
  };
  try {
    for (size_t i = 0; i < prog->instructions.size(); ++i) {
      // Collectives hoisted to here go first: their operands are final.
      for (size_t j : schedule.launchAt[i])
        inFlight.push_back(
            {backendImpl->launchCollective([this, prog, j] {
               runInstruction(*prog, j);
             }),
             &schedule.ranges[j]});
      const Instruction &inst = prog->instructions[i];
      if (isCollective(inst.opcode))
        continue; // launched above, at or before its place
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
    throw;
  }
}

void Executor::runTimed(const Program &prog) {
  // One instruction at a time, each timed to its completion.
  for (size_t i = 0; i < prog.instructions.size(); ++i) {
    const Instruction &inst = prog.instructions[i];
    Communicator *comm =
        isCollective(inst.opcode) ? group(inst.ints[0]) : nullptr;
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

std::vector<Executor::ByteRange>
Executor::rangesOf(const Instruction &inst) const {
  std::vector<ByteRange> ranges;
  auto add = [&](uint32_t id) {
    const Buffer &b = thePlan.buffers[id];
    if (b.bytes)
      ranges.push_back({int64_t(b.arena), b.offset, b.offset + b.bytes});
  };
  for (uint32_t id : inst.inputs)
    add(id);
  for (uint32_t id : inst.outputs)
    add(id);
  // A reduce-scatter also writes the staging area (arena -1).
  if (inst.opcode == Opcode::ReduceScatter ||
      inst.opcode == Opcode::ReduceScatterAccumulate)
    ranges.push_back({-1, 0, stagingSize});
  return ranges;
}

bool Executor::overlaps(const std::vector<ByteRange> &a,
                        const std::vector<ByteRange> &b) {
  for (const ByteRange &x : a)
    for (const ByteRange &y : b)
      if (x.arena == y.arena && x.begin < y.end && y.begin < x.end)
        return true;
  return false;
}

const Executor::CommSchedule &Executor::commScheduleOf(const Program &prog) {
  auto it = commSchedules.find(&prog);
  if (it != commSchedules.end())
    return it->second;
  const size_t n = prog.instructions.size();
  CommSchedule s;
  s.launchAt.assign(n, {});
  s.usesCommunicator.assign(n, false);
  s.ranges.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const Instruction &inst = prog.instructions[i];
    s.ranges[i] = rangesOf(inst);
    // Ops that call a group from inside their kernel.
    s.usesCommunicator[i] = isVocabParallel(inst.opcode) ||
                            inst.opcode == Opcode::GlobalNormClipParts;
  }
  // Each collective is launched as early as it can be: after the last
  // compute instruction before it that touches its bytes or calls a
  // communicator, and not before the collective before it was launched
  // (the lane runs launches in order, so every group sees its collectives
  // in program order on every rank). All ranks compute the same points
  // from the same plan.
  size_t previousLaunch = 0;
  for (size_t j = 0; j < n; ++j) {
    if (!isCollective(prog.instructions[j].opcode))
      continue;
    size_t at = j;
    if (overlap)
      while (at > previousLaunch) {
        const size_t p = at - 1;
        // An earlier collective is on the lane before this one: only
        // compute can conflict.
        if (!isCollective(prog.instructions[p].opcode) &&
            (s.usesCommunicator[p] || overlaps(s.ranges[p], s.ranges[j])))
          break;
        at = p;
      }
    s.launchAt[at].push_back(j);
    previousLaunch = at;
  }
  return commSchedules.emplace(&prog, std::move(s)).first->second;
}

std::vector<std::pair<size_t, size_t>>
Executor::collectiveLaunchPoints(const std::string &name) {
  const Program *prog = thePlan.findProgram(name);
  if (!prog)
    throw Error("the plan has no program '" + name + "'");
  const CommSchedule &s = commScheduleOf(*prog);
  std::vector<std::pair<size_t, size_t>> points;
  for (size_t at = 0; at < s.launchAt.size(); ++at)
    for (size_t j : s.launchAt[at])
      points.push_back({j, at});
  return points;
}

void Executor::setOverlapCommunication(bool on) {
  // Only where every group may be called from the backend's lane (MPI
  // initialized for one thread only may not).
  bool can = on && worldComm && !groups.empty();
  for (const auto &[mask, comm] : groups)
    can = can && comm->callableFromAnyThread();
  overlap = can;
  backendImpl->setOverlap(overlap);
  commSchedules.clear();
}

StepResult Executor::trainStep(
    const std::function<void(int64_t, int32_t *, int32_t *)> &fill,
    int64_t microBatches) {
  if (microBatches < 1)
    throw Error("trainStep needs at least one micro-batch");
  // Without a lossScale buffer the backward's seed is baked into the plan
  // for its own micro-batch count; another count would scale the gradients.
  if (thePlan.lossScale < 0 && microBatches != thePlan.microBatches)
    throw Error("the plan was compiled for " +
                std::to_string(thePlan.microBatches) +
                " micro-batches per step and has no lossScale buffer, so it "
                "cannot run " +
                std::to_string(microBatches));
  if (!thePlan.stages.empty())
    return trainPipelineStep(fill, microBatches);
  double lossSum = 0;
  const uint64_t sentBefore = collectiveStats().totalSent();
  setLossScale(lossSeed(microBatches));
  const int64_t firstMicroBatch = firstMicroBatchOfRank(microBatches);
  for (int64_t m = 0; m < microBatches; ++m) {
    setMicroBatch(firstMicroBatch + m);
    fillBatch(fill, m);
    runProgram("forward_backward");
    lossSum += loss();
  }
  StepResult r;
  r.loss = lossSum / double(microBatches);
  const bool apply = unscaleOrSkip(r);
  if (apply)
    runProgram("optimizer");
  r.gradNorm = apply ? gradNorm() : std::nan("");
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

uint64_t Executor::dropoutSeed(int64_t instructionSeed) const {
  // A fresh dropout mask per (seed, step, micro-batch); the backward, run in
  // the same program, derives the same one.
  return splitmix64(uint64_t(instructionSeed) ^
                    splitmix64(seed ^ splitmix64(uint64_t(currentStep) * 1024 +
                                                 uint64_t(microBatch))));
}

void Executor::runInstruction(const Program &prog, size_t index) {
  const Instruction &inst = prog.instructions[index];
  switch (inst.opcode) {
  case Opcode::AllReduce:
    runAllReduce(prog, index);
    return;
  case Opcode::AllGather:
  case Opcode::GatherParameter:
    runAllGather(prog, index);
    return;
  case Opcode::ReduceScatter:
  case Opcode::ReduceScatterAccumulate:
    runReduceScatter(prog, index);
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

void Executor::failAt(const Program &prog, size_t index,
                      const std::string &msg) const {
  throw instructionError(prog, index, msg);
}

Error dsc::rt::instructionError(const Program &prog, size_t index,
                                const std::string &msg) {
  const Instruction &inst = prog.instructions[index];
  return Error("program '" + prog.name + "' instruction " +
               std::to_string(index) + " '" + inst.name + "' (" +
               opcodeName(inst.opcode) + "): " + msg);
}

Communicator &Executor::requireGroup(const Program &prog, size_t index,
                                     int64_t axes) const {
  Communicator *comm = group(axes);
  if (!comm)
    failAt(prog, index, "no group for mesh axes mask " + std::to_string(axes));
  return *comm;
}

void Executor::runAllReduce(const Program &prog, size_t index) {
  const Instruction &inst = prog.instructions[index];
  Communicator *comm = &requireGroup(prog, index, inst.ints[0]);
  const ReduceOp op = ReduceOp(inst.ints[1]);
  auto fail = [&](const std::string &msg) { failAt(prog, index, msg); };
  // Runs of buffers contiguous in one arena, in operand order, are one
  // bucket and one call.
  const std::vector<uint32_t> &ids = inst.inputs;
  for (size_t i = 0; i < ids.size();) {
    const Buffer &first = thePlan.buffers[ids[i]];
    uint64_t end = first.offset + first.bytes;
    size_t j = i + 1;
    for (; j < ids.size(); ++j) {
      const Buffer &next = thePlan.buffers[ids[j]];
      if (next.arena != first.arena || next.offset != end ||
          next.dtype != first.dtype)
        break;
      end += next.bytes;
    }
    const uint64_t bytes = end - first.offset;
    if (bytes) {
      try {
        comm->allReduce(arenas[first.arena] + first.offset,
                        size_t(bytes / dtypeSize(first.dtype)), first.dtype,
                        op);
      } catch (const Error &e) {
        fail(e.what());
      }
    }
    i = j;
  }
}

void Executor::runAllGather(const Program &prog, size_t index) {
  const Instruction &inst = prog.instructions[index];
  Communicator *comm = &requireGroup(prog, index, inst.ints[0]);
  auto fail = [&](const std::string &msg) { failAt(prog, index, msg); };
  if (inst.opcode == Opcode::GatherParameter) {
    // ZeRO-3: the parameter's chunk into a separate temporary; the chunk
    // itself stays, since the optimizer updates it in place.
    const Buffer &chunk = thePlan.buffers[inst.inputs[0]];
    const Buffer &whole = thePlan.buffers[inst.outputs[0]];
    try {
      comm->allGather(arenas[chunk.arena] + chunk.offset,
                      arenas[whole.arena] + whole.offset,
                      size_t(numElements(chunk.shape)), chunk.dtype);
    } catch (const Error &e) {
      fail(e.what());
    }
    return;
  }
  // Each buffer gathers in place: this rank's chunk is already where the
  // gathered buffer wants it (the send block aliases its block of recv).
  for (uint32_t id : inst.inputs) {
    const Buffer &b = thePlan.buffers[id];
    const size_t chunk = size_t(numElements(b.shape)) / size_t(comm->size());
    uint8_t *base = arenas[b.arena] + b.offset;
    try {
      comm->allGather(base + chunk * dtypeSize(b.dtype) * comm->rank(), base,
                      chunk, b.dtype);
    } catch (const Error &e) {
      fail(e.what());
    }
  }
}

void Executor::runReduceScatter(const Program &prog, size_t index) {
  const Instruction &inst = prog.instructions[index];
  Communicator *comm = &requireGroup(prog, index, inst.ints[0]);
  auto fail = [&](const std::string &msg) { failAt(prog, index, msg); };
  const ReduceOp op = ReduceOp(inst.ints[1]);
  // The communicator's send and receive buffers must not overlap: receive
  // this rank's chunk into the staging area, then put it in place.
  if (inst.opcode == Opcode::ReduceScatterAccumulate) {
    // ZeRO-2: reduce the micro-batch's gradient and add this rank's chunk
    // into its shard-sized accumulator.
    const Buffer &x = thePlan.buffers[inst.inputs[0]];
    const Buffer &shard = thePlan.buffers[inst.outputs[0]];
    const size_t chunk = size_t(numElements(shard.shape));
    try {
      comm->reduceScatter(arenas[x.arena] + x.offset, staging, chunk, x.dtype,
                          op);
    } catch (const Error &e) {
      fail(e.what());
    }
    backendImpl->accumulate(x.dtype, arenas[shard.arena] + shard.offset,
                            staging, int64_t(chunk));
    return;
  }
  for (uint32_t id : inst.inputs) {
    const Buffer &b = thePlan.buffers[id];
    const size_t chunk = size_t(numElements(b.shape)) / size_t(comm->size());
    const size_t chunkBytes = chunk * dtypeSize(b.dtype);
    uint8_t *base = arenas[b.arena] + b.offset;
    try {
      comm->reduceScatter(base, staging, chunk, b.dtype, op);
    } catch (const Error &e) {
      fail(e.what());
    }
    backendImpl->copy(base + chunkBytes * comm->rank(), staging, chunkBytes);
  }
}
