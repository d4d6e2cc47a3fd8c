//===- Executor.cpp - Runs a plan's programs on a backend -----------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The plan's meaning on one rank, part one: construction, the mesh groups,
// arenas, initialization and the dropout streams, buffers and well-known
// values. Running programs and steps is ExecutorStep.cpp, the collectives
// ExecutorCollectives.cpp, the pipelined step PipelineSchedule.cpp,
// checkpoints Checkpoint.cpp. Compute instructions and memory go to the
// Backend (Backend.h); the plan was validated before any of this runs, so
// the code here trusts shapes and ids.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/Executor.h"
#include "dsc/Runtime/CommLane.h"
#include "PendingCheckpoint.h"

#include "dsc/Runtime/Backend.h"
#include "dsc/Runtime/CpuKernels.h"
#include "dsc/Runtime/FloatConvert.h"
#include "dsc/Runtime/InstructionArgs.h"
#include "dsc/Runtime/PlanIO.h"
#include "dsc/Runtime/ShardLayout.h"
#include "dsc/Runtime/SplitMix64.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>
#include <set>

using namespace dsc::rt;

namespace {

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
    openNvmeArenas(world);
    for (size_t a = 0; a < thePlan.arenas.size(); ++a) {
      const Arena &arena = thePlan.arenas[a];
      if (arena.tier == Tier::Nvme)
        continue; // a file (openNvmeArenas)
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

void Executor::openNvmeArenas(Communicator *world) {
  for (size_t a = 0; a < thePlan.arenas.size(); ++a) {
    const Arena &arena = thePlan.arenas[a];
    if (arena.tier != Tier::Nvme)
      continue;
    if (thePlan.nvmePath.empty())
      throw Error("the plan keeps " + std::to_string(arena.bytes) +
                  " bytes in the nvme tier (arena " + std::to_string(a) +
                  ") but names no directory for them: compile with "
                  "nvme-path=DIR or run dsc-run with --nvme-path DIR");
    // One file per rank and arena: ranks may share the directory.
    const int rank = world ? world->rank() : 0;
    NvmeOptions lane;
    lane.blockBytes = thePlan.nvmeBlockBytes;
    lane.queueDepth = int(thePlan.nvmeQueueDepth);
    nvmeFiles[uint32_t(a)] =
        std::make_unique<NvmeStore>(thePlan.nvmePath,
                                    "dsc-rank" + std::to_string(rank) +
                                        "-arena" + std::to_string(a) + ".swap",
                                    arena.bytes, lane);
  }
  if (!nvmeFiles.empty())
    nvmeLane = std::make_unique<CommLane>();
}

const NvmeStore *Executor::nvmeStore(uint32_t arena) const {
  auto it = nvmeFiles.find(arena);
  return it == nvmeFiles.end() ? nullptr : it->second.get();
}

void Executor::readBytes(uint32_t id, void *dst) {
  waitForOverlapped(); // its states, final
  const Buffer &b = thePlan.buffers[id];
  if (auto it = nvmeFiles.find(b.arena); it != nvmeFiles.end())
    it->second->read(b.offset, dst, b.bytes);
  else if (arenas[b.arena])
    backendImpl->copyOut(dst, arenas[b.arena] + b.offset, b.bytes);
}

void Executor::writeBytes(uint32_t id, const void *src) {
  waitForOverlapped();
  const Buffer &b = thePlan.buffers[id];
  if (auto it = nvmeFiles.find(b.arena); it != nvmeFiles.end())
    it->second->write(b.offset, src, b.bytes);
  else if (arenas[b.arena])
    backendImpl->copyIn(arenas[b.arena] + b.offset, src, b.bytes);
}

void Executor::runInitializeProgram() {
  if (thePlan.findProgram("initialize"))
    runProgram("initialize");
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
      if (int64_t mask = groupAxesOf(inst))
        masks.insert(mask);
      else if (inst.opcode == Opcode::Transfer &&
               ops::Transfer::decode(inst).axes != 0)
        masks.insert(ops::Transfer::decode(inst).axes); // a chunk's index
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
  try {
    waitForOverlapped();
  } catch (...) {
    // Destruction goes on; a failed update was reported by the step that
    // waited for it, or the run is ending on another error.
  }
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
  for (auto &[bytes, slot] : stash)
    backendImpl->release(slot);
  stash.clear();
  backendImpl->release(staging);
  staging = nullptr;
}

uint64_t Executor::allocatedBytes(uint32_t arena) const {
  if (arena >= arenas.size())
    throw Error("arena " + std::to_string(arena) + " does not exist (" +
                std::to_string(arenas.size()) + " arenas)");
  if (auto it = nvmeFiles.find(arena); it != nvmeFiles.end())
    return it->second->size(); // the file's bytes
  return arenas[arena] ? thePlan.arenas[arena].bytes : 0;
}

double Executor::nowUs() const {
  double ns = double(std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::steady_clock::now().time_since_epoch())
                         .count());
  return (ns - startNs) / 1000.0;
}

void Executor::initialize(uint64_t newSeed) {
  waitForOverlapped();
  seed = newSeed;
  currentStep = 1;
  microBatch = 0;
  for (size_t a = 0; a < arenas.size(); ++a)
    if (arenas[a])
      backendImpl->fillZero(arenas[a], thePlan.arenas[a].bytes);
  // The nvme files start as zeros; a second initialize zeroes them again.
  if (initialized)
    for (auto &[a, file] : nvmeFiles) {
      std::vector<uint8_t> zeros(std::min<uint64_t>(file->size(), 1 << 20));
      for (uint64_t at = 0; at < file->size(); at += zeros.size())
        file->write(at, zeros.data(),
                    std::min<uint64_t>(zeros.size(), file->size() - at));
    }
  initialized = true;
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
    writeBytes(id, host.data());
  }
  runInitializeProgram();
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
  readBytes(uint32_t(thePlan.findBuffer(name)), host.data());
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
        return first.shape[0] * groupSize(thePlan.mesh, groupAxesOf(inst));
      case Opcode::VocabParallelCrossEntropy:
      case Opcode::VocabParallelCrossEntropyGrad:
        return lastDim(first) * groupSize(thePlan.mesh, groupAxesOf(inst));
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

void Executor::setGradientSeed(double scale) {
  if (thePlan.gradientSeed >= 0)
    writeScalar(uint32_t(thePlan.gradientSeed), scale);
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
        ops::LearningRate sched = ops::LearningRate::decode(inst);
        const double base = sched.base;
        const double ratio = base > 0 ? lr / base : 0.0;
        sched.base = lr;
        sched.warmupStart = base > 0 ? sched.warmupStart * ratio : 0.0;
        sched.decayEnd = base > 0 ? sched.decayEnd * ratio : 0.0;
        sched.encode(inst);
        found = true;
      } else if (inst.opcode == Opcode::CyclicLearningRate) {
        // The base is OneCycle's peak, LRRangeTest's start; the other
        // bound keeps its ratio to it.
        if (!(lr > 0))
          throw Error("a cyclic learning rate needs a base rate > 0, got " +
                      std::to_string(lr));
        ops::CyclicLearningRate sched = ops::CyclicLearningRate::decode(inst);
        const double base = sched.kind == 1 ? sched.maxLr : sched.minLr;
        const double ratio = lr / base;
        sched.minLr *= ratio;
        sched.maxLr *= ratio;
        sched.encode(inst);
        found = true;
      }
  if (!found)
    throw Error("the plan has no LearningRate instruction whose rate could "
                "be set");
}

uint64_t Executor::dropoutSeed(int64_t instructionSeed) const {
  return dropoutStreamSeed(seed, currentStep, microBatch, instructionSeed);
}
