//===- Executor.cpp - Runs a plan's programs on the CPU -------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Binds each plan instruction to a CPU kernel call over arena memory. The
// plan was validated before any of this runs, so the code here trusts shapes
// and ids and checks only what only run time can know (token ids).
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/Executor.h"

#include "dsc/Runtime/CpuKernels.h"
#include "dsc/Runtime/PlanIO.h"
#include "dsc/Runtime/ShardLayout.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <new>
#include <optional>
#include <set>

using namespace dsc::rt;

namespace {

constexpr std::align_val_t kArenaAlign{64};

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

int64_t rowsOf(const Buffer &b) {
  int64_t cols = b.shape.empty() ? 1 : b.shape.back();
  return cols ? numElements(b.shape) / cols : 0;
}
int64_t lastDim(const Buffer &b) {
  return b.shape.empty() ? 1 : b.shape.back();
}
int64_t product(const std::vector<int64_t> &shape, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i)
    p *= shape[i];
  return p;
}

bool isFloatOp(Opcode op) { return op != Opcode::Zero; }

bool isCollective(Opcode op) {
  return op == Opcode::AllReduce || op == Opcode::AllGather ||
         op == Opcode::ReduceScatter ||
         op == Opcode::ReduceScatterAccumulate ||
         op == Opcode::GatherParameter;
}

/// Ops that communicate inside their kernel over the group of ints[0].
bool isVocabParallel(Opcode op) {
  return op == Opcode::VocabParallelEmbedding ||
         op == Opcode::VocabParallelEmbeddingGrad ||
         op == Opcode::VocabParallelCrossEntropy ||
         op == Opcode::VocabParallelCrossEntropyGrad;
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

/// The hyper-parameters of an AdamW/AdamWShard instruction (floats:
/// beta1 beta2 eps wd) at learning rate `lr`.
AdamWConfig adamConfigOf(const Instruction &inst, double lr) {
  AdamWConfig cfg;
  cfg.lr = lr;
  cfg.beta1 = inst.floats[0];
  cfg.beta2 = inst.floats[1];
  cfg.eps = inst.floats[2];
  cfg.weightDecay = inst.floats[3];
  return cfg;
}

/// The norm sqrt(sumOfSquares), after scaling the valid parts `held` of
/// the gradients when it exceeds maxNorm > 0 (the sharded norms' end).
template <typename T>
double clipHeld(double sumOfSquares, double maxNorm,
                const std::vector<std::pair<T *, int64_t>> &held) {
  double norm = std::sqrt(sumOfSquares);
  if (maxNorm > 0 && std::isfinite(norm)) {
    double scale = clipScale(norm, maxNorm);
    if (scale < 1.0)
      for (auto [data, count] : held)
        scaleForward(data, data, count, T(scale));
  }
  return norm;
}

/// The kernel's view of an Attention/AttentionGrad instruction; `seed` is
/// the dropout seed of this run.
AttentionShape attentionShapeOf(const Plan &plan, const Instruction &inst,
                                uint64_t seed,
                                const std::vector<int64_t> &coords) {
  const Buffer &q = plan.buffers[inst.inputs[0]];
  AttentionShape s;
  s.batch = q.shape[0];
  s.seq = q.shape[1];
  s.hidden = q.shape[2];
  s.heads = inst.ints[0];
  s.causal = inst.ints[1] != 0;
  s.dropout = float(inst.floats[0]);
  s.seed = seed;
  // Heads split over a group: this rank's are those at its index.
  if (int64_t axes = inst.ints[3]) {
    s.headOffset = groupIndex(plan.mesh, coords, axes) * s.heads;
    s.totalHeads = groupSize(plan.mesh, axes) * s.heads;
  }
  return s;
}

} // namespace

//===----------------------------------------------------------------------===//
// Construction, arenas, initialization
//===----------------------------------------------------------------------===//

Executor::Executor(Plan plan, uint64_t seed, Communicator *world)
    : thePlan(std::move(plan)) {
  validatePlan(thePlan);
  threads = std::max(1, omp_get_max_threads());

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

  // What the CPU backend supports, and the scratch each instruction needs.
  int64_t scratchElems = 0;
  for (const Program &prog : thePlan.programs) {
    for (size_t i = 0; i < prog.instructions.size(); ++i) {
      const Instruction &inst = prog.instructions[i];
      auto fail = [&](const std::string &msg) {
        throw Error("program '" + prog.name + "' instruction " +
                    std::to_string(i) + " '" + inst.name + "' (" +
                    opcodeName(inst.opcode) + "): " + msg);
      };
      auto checkFloat = [&](uint32_t id) {
        DType t = thePlan.buffers[id].dtype;
        if (t == DType::BF16 || t == DType::F16)
          fail(std::string("the CPU backend runs f32 and f64 buffers, not ") +
               dtypeName(t) + " (buffer '" + thePlan.buffers[id].name + "')");
      };
      if (isFloatOp(inst.opcode)) {
        for (uint32_t id : inst.inputs)
          checkFloat(id);
        for (uint32_t id : inst.outputs)
          checkFloat(id);
      }
      // Only attention needs scratch: the other backward kernels recompute
      // their statistics in place when given no saved ones.
      int64_t need = 0;
      if (inst.opcode == Opcode::Attention ||
          inst.opcode == Opcode::AttentionGrad)
        need =
            attentionScratchSize(attentionShapeOf(thePlan, inst, 0, {}), threads);
      scratchElems = std::max(scratchElems, need);
    }
  }
  // Sized for f64, the widest float the CPU backend runs.
  scratchSize = uint64_t(scratchElems) * sizeof(double);

  // Linux overcommits: an arena larger than the machine would "allocate"
  // and then die in initialize()'s memset. Refuse it by name instead.
  uint64_t total = scratchSize;
  for (const Arena &a : thePlan.arenas)
    total += a.bytes;
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
  if (pages > 0 && pageSize > 0 &&
      total / uint64_t(pageSize) > uint64_t(pages)) {
    std::string arenaList;
    for (size_t a = 0; a < thePlan.arenas.size(); ++a)
      arenaList += (a ? ", " : "") + std::string("arena ") + std::to_string(a) +
                   " (" + tierName(thePlan.arenas[a].tier) + ") " +
                   std::to_string(thePlan.arenas[a].bytes);
    throw Error("the plan needs " + std::to_string(total) + " bytes (" +
                arenaList + ", scratch " + std::to_string(scratchSize) +
                ") but this machine has " +
                std::to_string(uint64_t(pages) * uint64_t(pageSize)) +
                " bytes of memory");
  }

  arenas.reserve(thePlan.arenas.size());
  // A plan can ask for more than the machine has: say which allocation.
  std::string what = "scratch (" + std::to_string(scratchSize) + " bytes)";
  try {
    if (scratchSize)
      scratch =
          static_cast<uint8_t *>(::operator new(scratchSize, kArenaAlign));
    for (size_t a = 0; a < thePlan.arenas.size(); ++a) {
      const Arena &arena = thePlan.arenas[a];
      what = "arena " + std::to_string(a) + " (" + tierName(arena.tier) + ", " +
             std::to_string(arena.bytes) + " bytes)";
      arenas.push_back(arena.bytes ? static_cast<uint8_t *>(::operator new(
                                         arena.bytes, kArenaAlign))
                                   : nullptr);
    }
  } catch (const std::bad_alloc &) {
    releaseMemory();
    throw Error("cannot allocate " + what + ": out of memory");
  }
  startNs = double(std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::steady_clock::now().time_since_epoch())
                       .count());
  // The mesh coordinates first: sharded parameters initialize by them.
  setUpMesh(world);
  initialize(seed);
}

void Executor::setUpMesh(Communicator *world) {
  if (thePlan.mesh.empty())
    return;
  coords = dsc::rt::meshCoordinates(thePlan.mesh, world->rank());
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
        world->split(int(color), world->rank());
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

Executor::~Executor() { releaseMemory(); }

void Executor::releaseMemory() {
  for (uint8_t *a : arenas)
    if (a)
      ::operator delete(a, kArenaAlign);
  arenas.clear();
  if (scratch)
    ::operator delete(scratch, kArenaAlign);
  scratch = nullptr;
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
      std::memset(arenas[a], 0, thePlan.arenas[a].bytes);
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
    auto fill = [&](auto *p) {
      using T = std::remove_pointer_t<decltype(p)>;
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i) {
        const int64_t at = sharded ? indexer->wholeIndex(i) : i;
        p[i] = normal ? T(stddev * normalAt(key, uint64_t(at))) : T(value);
      }
    };
    if (b.dtype == DType::F32)
      fill(view.as<float>());
    else if (b.dtype == DType::F64)
      fill(view.as<double>());
    else if (b.dtype == DType::I32 && !normal)
      std::fill_n(view.as<int32_t>(), n, int32_t(value));
    else
      throw Error("buffer '" + b.name + "': the CPU backend cannot " +
                  "initialize " + dtypeName(b.dtype) + " buffers");
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
  switch (v.desc->dtype) {
  case DType::F32:
    std::copy_n(v.as<float>(), out.size(), out.begin());
    break;
  case DType::F64:
    std::copy_n(v.as<double>(), out.size(), out.begin());
    break;
  case DType::I32:
    std::copy_n(v.as<int32_t>(), out.size(), out.begin());
    break;
  default:
    throw Error("buffer '" + name + "': cannot read " +
                dtypeName(v.desc->dtype) + " values on the CPU");
  }
  return out;
}

static double readScalar(const BufferView &v) {
  return v.desc->dtype == DType::F64 ? *v.as<double>() : double(*v.as<float>());
}
static void writeScalar(const BufferView &v, double x) {
  if (v.desc->dtype == DType::F64)
    *v.as<double>() = x;
  else
    *v.as<float>() = float(x);
}

void Executor::setTokens(const int32_t *data, size_t count) {
  BufferView v = buffer(thePlan.tokens);
  if (int64_t(count) != v.size())
    throw Error("setTokens: got " + std::to_string(count) +
                " tokens for a buffer of " + std::to_string(v.size()));
  std::copy_n(data, count, v.as<int32_t>());
}

void Executor::setTargets(const int32_t *data, size_t count) {
  BufferView v = buffer(thePlan.targets);
  if (int64_t(count) != v.size())
    throw Error("setTargets: got " + std::to_string(count) +
                " targets for a buffer of " + std::to_string(v.size()));
  std::copy_n(data, count, v.as<int32_t>());
}

int32_t *Executor::tokens() { return buffer(thePlan.tokens).as<int32_t>(); }
int32_t *Executor::targets() { return buffer(thePlan.targets).as<int32_t>(); }

void Executor::setLossScale(double scale) {
  if (thePlan.lossScale >= 0)
    writeScalar(buffer(uint32_t(thePlan.lossScale)), scale);
}

double Executor::loss() const {
  return readScalar(const_cast<Executor *>(this)->buffer(thePlan.loss));
}
double Executor::gradNorm() const {
  if (thePlan.gradNorm < 0)
    return std::nan("");
  return readScalar(
      const_cast<Executor *>(this)->buffer(uint32_t(thePlan.gradNorm)));
}
double Executor::learningRate() const {
  if (thePlan.learningRate < 0)
    return std::nan("");
  return readScalar(
      const_cast<Executor *>(this)->buffer(uint32_t(thePlan.learningRate)));
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
  for (size_t i = 0; i < prog->instructions.size(); ++i) {
    if (!instructionHook) {
      runInstruction(*prog, i);
      continue;
    }
    const Instruction &inst = prog->instructions[i];
    Communicator *comm =
        isCollective(inst.opcode) ? group(inst.ints[0]) : nullptr;
    uint64_t sentBefore = comm ? comm->stats().totalSent() : 0;
    double t0 = nowUs();
    runInstruction(*prog, i);
    double t1 = nowUs();
    InstructionEvent event{prog, i, &inst, t0, t1 - t0, 0};
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
  setLossScale(1.0 / double(microBatches));
  const int64_t firstMicroBatch = firstMicroBatchOfRank(microBatches);
  for (int64_t m = 0; m < microBatches; ++m) {
    setMicroBatch(firstMicroBatch + m);
    fill(m, tokens(), targets());
    runProgram("forward_backward");
    lossSum += loss();
  }
  runProgram("optimizer");
  StepResult r;
  r.loss = lossSum / double(microBatches);
  r.gradNorm = gradNorm();
  r.learningRate = learningRate();
  r.collectiveBytesSent = collectiveStats().totalSent() - sentBefore;
  ++currentStep;
  return r;
}

int64_t Executor::firstMicroBatchOfRank(int64_t microBatches) const {
  // Data-parallel rank d trains the step's micro-batches [d*M, (d+1)*M):
  // dropout draws the masks one rank draws for those (Plan::mesh).
  const int64_t dpAxis = findMeshAxis(thePlan.mesh, "dp");
  return dpAxis >= 0 ? coords[dpAxis] * microBatches : 0;
}

uint64_t Executor::runSeed(int64_t instructionSeed) const {
  // A fresh dropout mask per (seed, step, micro-batch); the backward, run in
  // the same program, derives the same one.
  return splitmix64(uint64_t(instructionSeed) ^
                    splitmix64(seed ^ splitmix64(uint64_t(currentStep) * 1024 +
                                                 uint64_t(microBatch))));
}

void Executor::runInstruction(const Program &prog, size_t index) {
  const Instruction &inst = prog.instructions[index];
  // Zero works on bytes; every other op on the dtype of its first float
  // operand (validatePlan made them agree). Layout ops on i32 move bits
  // like f32.
  if (inst.opcode == Opcode::AllReduce) {
    runAllReduce(prog, index);
    return;
  }
  if (inst.opcode == Opcode::AllGather ||
      inst.opcode == Opcode::GatherParameter) {
    runAllGather(prog, index);
    return;
  }
  if (inst.opcode == Opcode::ReduceScatter ||
      inst.opcode == Opcode::ReduceScatterAccumulate) {
    runReduceScatter(prog, index);
    return;
  }
  if (inst.opcode == Opcode::Zero) {
    for (uint32_t id : inst.outputs) {
      BufferView v = buffer(id);
      if (v.data)
        std::memset(v.data, 0, v.desc->bytes);
    }
    return;
  }
  DType t =
      thePlan.buffers[inst.outputs.empty() ? inst.inputs[0] : inst.outputs[0]]
          .dtype;
  if (t == DType::F64)
    execute<double>(prog, index);
  else
    execute<float>(prog, index);
}

void Executor::failAt(const Program &prog, size_t index,
                      const std::string &msg) const {
  const Instruction &inst = prog.instructions[index];
  throw Error("program '" + prog.name + "' instruction " +
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
  // this rank's chunk into a staging copy, then put it in place.
  std::vector<uint8_t> staging;
  if (inst.opcode == Opcode::ReduceScatterAccumulate) {
    // ZeRO-2: reduce the micro-batch's gradient and add this rank's chunk
    // into its shard-sized accumulator.
    const Buffer &x = thePlan.buffers[inst.inputs[0]];
    const Buffer &shard = thePlan.buffers[inst.outputs[0]];
    const size_t chunk = size_t(numElements(shard.shape));
    staging.resize(chunk * dtypeSize(x.dtype));
    try {
      comm->reduceScatter(arenas[x.arena] + x.offset, staging.data(), chunk,
                          x.dtype, op);
    } catch (const Error &e) {
      fail(e.what());
    }
    uint8_t *acc = arenas[shard.arena] + shard.offset;
    if (x.dtype == DType::F64)
      addForward(reinterpret_cast<double *>(acc),
                 reinterpret_cast<const double *>(staging.data()),
                 reinterpret_cast<double *>(acc), int64_t(chunk));
    else
      addForward(reinterpret_cast<float *>(acc),
                 reinterpret_cast<const float *>(staging.data()),
                 reinterpret_cast<float *>(acc), int64_t(chunk));
    return;
  }
  for (uint32_t id : inst.inputs) {
    const Buffer &b = thePlan.buffers[id];
    const size_t chunk = size_t(numElements(b.shape)) / size_t(comm->size());
    const size_t chunkBytes = chunk * dtypeSize(b.dtype);
    uint8_t *base = arenas[b.arena] + b.offset;
    staging.resize(chunkBytes);
    try {
      comm->reduceScatter(base, staging.data(), chunk, b.dtype, op);
    } catch (const Error &e) {
      fail(e.what());
    }
    std::memcpy(base + chunkBytes * comm->rank(), staging.data(), chunkBytes);
  }
}

template <typename T>
void Executor::execute(const Program &prog, size_t index) {
  const Instruction &inst = prog.instructions[index];
  const std::vector<int64_t> &ints = inst.ints;
  auto fail = [&](const std::string &msg) {
    throw Error("program '" + prog.name + "' instruction " +
                std::to_string(index) + " '" + inst.name + "' (" +
                opcodeName(inst.opcode) + "): " + msg);
  };
  auto inB = [&](size_t i) -> const Buffer & {
    return thePlan.buffers[inst.inputs[i]];
  };
  auto outB = [&](size_t i) -> const Buffer & {
    return thePlan.buffers[inst.outputs[i]];
  };
  auto in = [&](size_t i) { return buffer(inst.inputs[i]).template as<T>(); };
  auto out = [&](size_t i) { return buffer(inst.outputs[i]).template as<T>(); };
  auto ids = [&](size_t i) {
    return buffer(inst.inputs[i]).template as<int32_t>();
  };
  T *scr = reinterpret_cast<T *>(scratch);
  auto checkIds = [&](const int32_t *p, int64_t n, int64_t vocab,
                      const char *what) {
    for (int64_t i = 0; i < n; ++i)
      if (p[i] < 0 || p[i] >= vocab)
        fail(std::string(what) + " " + std::to_string(p[i]) + " at position " +
             std::to_string(i) + " is outside the vocabulary [0, " +
             std::to_string(vocab) + ")");
  };

  switch (inst.opcode) {
  case Opcode::Embedding: {
    const Buffer &table = inB(0);
    int64_t n = numElements(inB(1).shape);
    int64_t vocab = table.shape[0], hidden = table.shape[1];
    if (embeddingForward(in(0), ids(1), out(0), n, vocab, hidden) != 0)
      checkIds(ids(1), n, vocab, "token id");
    break;
  }
  case Opcode::EmbeddingGrad: {
    const Buffer &table = outB(0);
    int64_t n = numElements(inB(1).shape);
    checkIds(ids(1), n, table.shape[0], "token id");
    embeddingBackward(in(0), ids(1), out(0), n, table.shape[0], table.shape[1],
                      ints[0] != 0);
    break;
  }
  case Opcode::PositionEmbedding:
    positionEmbeddingForward(in(0), out(0), ints[0], ints[1], inB(0).shape[1]);
    break;
  case Opcode::PositionEmbeddingGrad:
    positionEmbeddingBackward(in(0), out(0), ints[0], ints[1], outB(0).shape[0],
                              outB(0).shape[1], ints[2] != 0);
    break;
  case Opcode::Matmul: {
    MatmulShape s;
    s.batch = ints[0];
    s.m = ints[1];
    s.n = ints[2];
    s.k = ints[3];
    s.transA = ints[4];
    s.transB = ints[5];
    s.broadcastB = ints[6];
    matmulForward(in(0), in(1), out(0), s, ints[7] != 0);
    break;
  }
  case Opcode::Add:
    addForward(in(0), in(1), out(0), numElements(inB(0).shape));
    break;
  case Opcode::Mul:
    mulForward(in(0), in(1), out(0), numElements(inB(0).shape));
    break;
  case Opcode::BiasAdd:
    biasAddForward(in(0), in(1), out(0), rowsOf(inB(0)), lastDim(inB(0)));
    break;
  case Opcode::Gelu:
    geluForward(in(0), out(0), numElements(inB(0).shape));
    break;
  case Opcode::LayerNorm:
    layerNormForward<T>(in(0), in(1), in(2), out(0), nullptr, nullptr,
                        rowsOf(inB(0)), lastDim(inB(0)), T(inst.floats[0]));
    break;
  case Opcode::Softmax:
    softmaxForward(in(0), out(0), rowsOf(inB(0)), lastDim(inB(0)));
    break;
  case Opcode::Attention:
  case Opcode::AttentionGrad: {
    // The backward recomputes the probabilities block by block (from q, k
    // and a recomputed logsumexp); the forward keeps nothing.
    AttentionShape s =
        attentionShapeOf(thePlan, inst, runSeed(ints[2]), coords);
    int64_t workSize = int64_t(scratchSize / sizeof(T));
    bool ok = inst.opcode == Opcode::Attention
                  ? attentionForward<T>(in(0), in(1), in(2), out(0), nullptr,
                                        scr, workSize, s)
                  : attentionBackward<T>(in(0), in(1), in(2), nullptr, in(3),
                                         out(0), out(1), out(2), scr, workSize,
                                         s, AccumulateMask(0));
    if (!ok)
      fail("attention scratch of " + std::to_string(workSize) +
           " elements is too small");
    break;
  }
  case Opcode::CrossEntropy: {
    int64_t vocab = lastDim(inB(0)), rows = rowsOf(inB(0));
    checkIds(ids(1), rows, vocab, "target id");
    *out(0) = crossEntropyForward<T>(in(0), ids(1), nullptr, rows, vocab);
    break;
  }
  case Opcode::CrossEntropyGrad: {
    int64_t vocab = lastDim(inB(0)), rows = rowsOf(inB(0));
    checkIds(ids(1), rows, vocab, "target id");
    crossEntropyBackward<T>(in(0), ids(1), nullptr, *in(2), out(0), rows, vocab,
                            false);
    break;
  }
  case Opcode::Copy:
    if (in(0) != out(0))
      std::memmove(out(0), in(0), inB(0).bytes);
    break;
  case Opcode::Transpose: {
    int perm[kMaxRank];
    for (size_t i = 0; i < ints.size(); ++i)
      perm[i] = int(ints[i]);
    transposeForward(in(0), out(0), inB(0).shape.data(), perm,
                     int(ints.size()));
    break;
  }
  case Opcode::Slice:
    sliceForward(in(0), out(0), inB(0).shape.data(), outB(0).shape.data(),
                 ints.data(), int(ints.size()));
    break;
  case Opcode::SliceGrad:
    sliceBackward(in(0), out(0), outB(0).shape.data(), inB(0).shape.data(),
                  ints.data(), int(ints.size()), false);
    break;
  case Opcode::Concat: {
    const Buffer &y = outB(0);
    size_t dim = size_t(ints[0]);
    std::vector<const T *> ins;
    std::vector<int64_t> dims;
    for (size_t i = 0; i < inst.inputs.size(); ++i) {
      ins.push_back(in(i));
      dims.push_back(inB(i).shape[dim]);
    }
    concatForward(ins.data(), dims.data(), int(ins.size()), out(0),
                  product(y.shape, 0, dim),
                  product(y.shape, dim + 1, y.shape.size()));
    break;
  }
  case Opcode::Dropout:
    dropoutForward(in(0), out(0), numElements(inB(0).shape),
                   float(inst.floats[0]), runSeed(ints[0]));
    break;
  case Opcode::BiasGrad:
    biasAddBackward<T>(in(0), nullptr, out(0), rowsOf(inB(0)), lastDim(inB(0)),
                       ints[0] != 0);
    break;
  case Opcode::GeluGrad:
    geluBackward(in(0), in(1), out(0), numElements(inB(0).shape), false);
    break;
  case Opcode::SoftmaxGrad:
    softmaxBackward(in(0), in(1), out(0), rowsOf(inB(0)), lastDim(inB(0)),
                    false);
    break;
  case Opcode::LayerNormGrad:
    // No saved statistics: the kernel recomputes mean and rstd per row.
    layerNormBackward<T>(in(0), in(1), nullptr, nullptr, in(2), out(0), out(1),
                         out(2), rowsOf(inB(0)), lastDim(inB(0)),
                         T(inst.floats[0]), AccumulateMask(uint32_t(ints[0])));
    break;
  case Opcode::Accumulate:
    addForward(out(0), in(0), out(0), numElements(inB(0).shape));
    break;
  case Opcode::Zero:
  case Opcode::AllReduce:
  case Opcode::AllGather:
  case Opcode::ReduceScatter:
  case Opcode::ReduceScatterAccumulate:
  case Opcode::GatherParameter:
    break; // handled in runInstruction
  case Opcode::GlobalNormClipParts: {
    // Each gradient's valid elements, weighted by 1/(its copies in the
    // group): a part held by R ranks of the group is counted R times by
    // the all-reduce.
    Communicator &comm = requireGroup(prog, index, ints[0]);
    double sum = 0;
    std::vector<std::pair<T *, int64_t>> held;
    for (size_t i = 0; i < inst.inputs.size(); ++i) {
      const int64_t chunkAxes = ints[3 * i + 1], splitAxes = ints[3 * i + 3];
      const bool inBuffer = ints[3 * i + 2] != 0;
      int64_t count = numElements(inB(i).shape);
      T *data = in(i);
      if (chunkAxes && !inBuffer) {
        count /= groupSize(thePlan.mesh, chunkAxes);
        data += count * groupIndex(thePlan.mesh, coords, chunkAxes);
      }
      const int64_t parts = groupSize(thePlan.mesh, chunkAxes) *
                            groupSize(thePlan.mesh, splitAxes);
      const double copies = double(comm.size()) / double(parts);
      const T *ptr = data;
      sum += sumOfSquares(&ptr, &count, 1) / copies;
      held.push_back({data, count});
    }
    comm.allReduce(&sum, 1, DType::F64, ReduceOp::Sum);
    *out(0) = T(clipHeld(sum, inst.floats[0], held));
    break;
  }
  case Opcode::VocabParallelEmbedding:
  case Opcode::VocabParallelEmbeddingGrad: {
    // This rank's rows of the vocabulary: ids map to local rows, the
    // others to -1, which the kernels skip (zeros forward, nothing back).
    Communicator &comm = requireGroup(prog, index, ints[0]);
    const bool fwd = inst.opcode == Opcode::VocabParallelEmbedding;
    const Buffer &table = fwd ? inB(0) : outB(0);
    const int64_t rows = table.shape[0], hidden = table.shape[1];
    const int64_t vocab = rows * comm.size(), begin = rows * comm.rank();
    const int64_t n = numElements(inB(1).shape);
    checkIds(ids(1), n, vocab, "token id");
    std::vector<int32_t> local(n);
    for (int64_t i = 0; i < n; ++i) {
      int64_t row = int64_t(ids(1)[i]) - begin;
      local[i] = row >= 0 && row < rows ? int32_t(row) : -1;
    }
    if (fwd)
      embeddingForward(in(0), local.data(), out(0), n, rows, hidden);
    else
      embeddingBackward(in(0), local.data(), out(0), n, rows, hidden,
                        ints[1] != 0);
    break;
  }
  case Opcode::VocabParallelCrossEntropy:
  case Opcode::VocabParallelCrossEntropyGrad: {
    // Megatron's three reductions per token: the max, the sum of
    // exponentials (and, forward, the target's logit), in f64.
    Communicator &comm = requireGroup(prog, index, ints[0]);
    const int64_t cols = lastDim(inB(0)), rows = rowsOf(inB(0));
    const int64_t begin = cols * comm.rank();
    checkIds(ids(1), rows, cols * comm.size(), "target id");
    std::vector<double> max(rows), sumExp(rows), target(rows);
    vocabShardRowMax(in(0), rows, cols, max.data());
    comm.allReduce(max.data(), rows, DType::F64, ReduceOp::Max);
    vocabShardRowSums(in(0), ids(1), max.data(), rows, cols, begin,
                      sumExp.data(), target.data());
    comm.allReduce(sumExp.data(), rows, DType::F64, ReduceOp::Sum);
    if (inst.opcode == Opcode::VocabParallelCrossEntropy) {
      comm.allReduce(target.data(), rows, DType::F64, ReduceOp::Sum);
      double total = 0; // row order: independent of threads and ranks
      for (int64_t r = 0; r < rows; ++r)
        total += max[r] + std::log(sumExp[r]) - target[r];
      *out(0) = T(total / double(rows));
    } else {
      for (int64_t r = 0; r < rows; ++r)
        max[r] += std::log(sumExp[r]); // the logsumexp
      vocabShardCrossEntropyBackward(in(0), ids(1), max.data(), *in(2),
                                     out(0), rows, cols, begin, false);
    }
    break;
  }
  case Opcode::GlobalNormClip: {
    std::vector<const T *> ptrs;
    std::vector<int64_t> sizes;
    for (size_t i = 0; i < inst.inputs.size(); ++i) {
      ptrs.push_back(in(i));
      sizes.push_back(numElements(inB(i).shape));
    }
    double norm =
        std::sqrt(sumOfSquares(ptrs.data(), sizes.data(), int(ptrs.size())));
    *out(0) = T(norm);
    double maxNorm = inst.floats[0];
    if (maxNorm > 0 && std::isfinite(norm)) {
      double scale = clipScale(norm, maxNorm);
      if (scale < 1.0)
        for (size_t i = 0; i < ptrs.size(); ++i)
          scaleForward(in(i), in(i), sizes[i], T(scale));
    }
    break;
  }
  case Opcode::LearningRate:
    *out(0) = T(scheduledLearningRate(
        LrScheduleKind(ints[0]), ints[1], ints[2], ints[3] != 0, inst.floats[0],
        inst.floats[1], inst.floats[2], currentStep));
    break;
  case Opcode::AdamW: {
    AdamWConfig cfg = adamConfigOf(inst, double(*in(1)));
    adamwStep(out(0), in(0), out(1), out(2), numElements(inB(0).shape), cfg,
              currentStep, ints[0] != 0);
    break;
  }
  case Opcode::AdamWShard: {
    // Update only this rank's chunk of the flattened parameter; m and v
    // are that chunk's moments.
    Communicator *comm = &requireGroup(prog, index, ints[1]);
    const int64_t chunk = numElements(thePlan.buffers[inst.outputs[1]].shape);
    const int64_t offset = chunk * comm->rank();
    // A ZeRO-2 gradient is this rank's chunk already.
    const int64_t gradOffset = numElements(inB(0).shape) == chunk ? 0 : offset;
    AdamWConfig cfg = adamConfigOf(inst, double(*in(1)));
    adamwStep(out(0) + offset, in(0) + gradOffset, out(1), out(2), chunk, cfg,
              currentStep, ints[0] != 0);
    break;
  }
  case Opcode::Sgd: {
    SgdConfig cfg;
    cfg.lr = double(*in(1));
    cfg.momentum = inst.floats[0];
    cfg.weightDecay = inst.floats[1];
    cfg.nesterov = ints[0] != 0;
    sgdStep(out(0), in(0), out(1), numElements(inB(0).shape), cfg);
    break;
  }
  }
}
