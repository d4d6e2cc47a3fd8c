//===- CpuBackend.cpp - Plan instructions on the CPU kernels --------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Binds each compute instruction to a CPU kernel call over host memory. The
// plan was validated before any of this runs, so the code here trusts shapes
// and ids and checks only what only run time can know (token ids).
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/ArenaHolders.h"
#include "dsc/Runtime/Backend.h"
#include "dsc/Runtime/CommLane.h"
#include "dsc/Runtime/CpuAdam.h"
#include "dsc/Runtime/CpuKernels.h"
#include "dsc/Runtime/FloatConvert.h"
#include "dsc/Runtime/InferenceKernels.h"
#include "dsc/Runtime/InstructionArgs.h"
#include "dsc/Runtime/OnebitAdam.h"
#include "dsc/Runtime/OnebitLamb.h"
#include "dsc/Runtime/ShardLayout.h"
#include "dsc/Runtime/SplitMix64.h"
#include "dsc/Runtime/ZeroOneAdam.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <new>

using namespace dsc::rt;

namespace {

constexpr std::align_val_t kAlign{64};

/// A 1-bit LAMB instruction's Adam hyper-parameters (OnebitLamb's and
/// FrozenLamb's, which share their names).
template <typename Op> OnebitLambConfig lambAdamConfig(const Op &op) {
  OnebitLambConfig config;
  config.beta1 = op.beta1;
  config.beta2 = op.beta2;
  config.eps = op.eps;
  config.weightDecay = op.wd;
  return config;
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

class CpuBackend final : public Backend {
public:
  ~CpuBackend() override {
    if (scratch)
      ::operator delete(scratch, kAlign);
  }
  const char *name() const override { return "cpu"; }
  bool hostAddressable() const override { return true; }
  void prepare(const Plan &plan) override;
  uint64_t scratchBytes() const override { return scratchSize; }

  void *allocate(uint64_t bytes, Tier, const std::string &what) override {
    if (!bytes)
      return nullptr;
    try {
      return ::operator new(bytes, kAlign);
    } catch (const std::bad_alloc &) {
      throw Error("cannot allocate " + what + ": out of memory");
    }
  }
  void release(void *memory) override {
    if (memory)
      ::operator delete(memory, kAlign);
  }
  void fillZero(void *memory, uint64_t bytes) override {
    if (bytes)
      std::memset(memory, 0, bytes);
  }
  void copyIn(void *dst, const void *src, uint64_t bytes) override {
    if (bytes)
      std::memmove(dst, src, bytes);
  }
  void copyOut(void *dst, const void *src, uint64_t bytes) override {
    if (bytes)
      std::memmove(dst, src, bytes);
  }
  void copy(void *dst, const void *src, uint64_t bytes) override {
    if (bytes && dst != src)
      std::memmove(dst, src, bytes);
  }
  void accumulate(DType dtype, void *acc, const void *x,
                  int64_t count) override {
    if (dtype == DType::F64)
      addForward(static_cast<double *>(acc), static_cast<const double *>(x),
                 static_cast<double *>(acc), count);
    else
      addForward(static_cast<float *>(acc), static_cast<const float *>(x),
                 static_cast<float *>(acc), count);
  }

  double sumOfSquares(const float *x, int64_t count) override {
    return dsc::rt::sumOfSquares(&x, &count, 1);
  }
  void scale(DType dtype, void *x, int64_t count, double factor) override {
    switch (dtype) {
    case DType::F32:
      scaleForward(static_cast<float *>(x), static_cast<float *>(x), count,
                   float(factor));
      return;
    case DType::F64:
      scaleForward(static_cast<double *>(x), static_cast<double *>(x), count,
                   factor);
      return;
    case DType::BF16:
    case DType::F16: {
      // Through f32, as the bf16 and f16 kernels compute.
      auto *h = static_cast<uint16_t *>(x);
      const bool bf = dtype == DType::BF16;
      const float f = float(factor);
      for (int64_t i = 0; i < count; ++i)
        h[i] = bf ? floatToBf16(bf16ToFloat(h[i]) * f)
                  : floatToF16(f16ToFloat(h[i]) * f);
      return;
    }
    default:
      throw Error(std::string("the CPU backend does not scale ") +
                  dtypeName(dtype));
    }
  }

  // Overlap: a worker thread per rank (CommLane.h) runs the collectives.
  void setOverlap(bool on) override {
    if (!on)
      lane.reset();
    else if (!lane)
      lane = std::make_unique<CommLane>();
  }
  uint64_t launchCollective(const std::function<void()> &issue) override {
    if (!lane) {
      issue();
      return 0;
    }
    return lane->launch(issue);
  }
  void waitCollective(uint64_t ticket) override {
    if (lane && ticket)
      lane->wait(ticket);
  }
  void waitCollectives() override {
    if (lane)
      lane->waitAll();
  }

  void run(InstructionContext &ex, const Program &prog, size_t index) override;

private:
  template <typename T>
  void execute(InstructionContext &ex, const Program &prog, size_t index);
  /// The operand's memory as the kernels see it: its f32 staging copy when
  /// it is bf16 or f16, else the buffer itself.
  BufferView view(InstructionContext &ex, uint32_t id) {
    BufferView v = ex.buffer(id);
    if (auto it = staged.find(id); it != staged.end())
      v.data = it->second.data();
    return v;
  }

  /// f32 copies of this instruction's 16-bit operands, by buffer id; one
  /// set per thread (a delayed parameter update runs its instructions on
  /// a thread of its own beside the next step's).
  inline static thread_local std::map<uint32_t, std::vector<float>> staged;

  int threads = 1;
  std::unique_ptr<CommLane> lane;
  uint8_t *scratch = nullptr;
  uint64_t scratchSize = 0;
};

} // namespace

void CpuBackend::run(InstructionContext &ex, const Program &prog,
                     size_t index) {
  const Plan &plan = ex.plan();
  const Instruction &inst = prog.instructions[index];
  if (inst.opcode == Opcode::Cast) {
    const Buffer &x = plan.buffers[inst.inputs[0]];
    const Buffer &y = plan.buffers[inst.outputs[0]];
    convertFloats(ex.buffer(inst.inputs[0]).data, x.dtype,
                  ex.buffer(inst.outputs[0]).data, y.dtype,
                  numElements(x.shape));
    return;
  }
  if (inst.opcode == Opcode::Copy) {
    // Bytes of one dtype (validatePlan): no staging, whatever the dtype.
    copy(ex.buffer(inst.outputs[0]).data, ex.buffer(inst.inputs[0]).data,
         plan.buffers[inst.inputs[0]].bytes);
    return;
  }
  if (inst.opcode == Opcode::TakeChunk) {
    // This rank's chunk of the replicated input, bytes of one dtype: no
    // staging either (the verifier checked that the chunks make the input).
    Communicator &comm =
        ex.requireGroup(prog, index, ops::TakeChunk::decode(inst).axes);
    const uint64_t bytes = plan.buffers[inst.outputs[0]].bytes;
    copy(ex.buffer(inst.outputs[0]).data,
         ex.buffer(inst.inputs[0]).data + bytes * uint64_t(comm.rank()), bytes);
    return;
  }
  // Every op runs on the dtype of its first float operand (validatePlan
  // made them agree; a loss scalar may be wider). Layout ops on i32 move
  // bits like f32. bf16 and f16 operands run through the f32 kernels on
  // staged copies, rounded back when written: the f32-accumulate-then-
  // round numerics of a GPU's 16-bit kernels.
  auto is16 = [](DType t) { return t == DType::BF16 || t == DType::F16; };
  staged.clear();
  auto stage = [&](uint32_t id) {
    const Buffer &b = plan.buffers[id];
    if (!is16(b.dtype) || staged.count(id))
      return;
    std::vector<float> &copy = staged[id];
    copy.resize(size_t(numElements(b.shape)));
    convertFloats(ex.buffer(id).data, b.dtype, copy.data(), DType::F32,
                  int64_t(copy.size()));
  };
  // Outputs too: kernels that accumulate read them.
  for (uint32_t id : inst.inputs)
    stage(id);
  for (uint32_t id : inst.outputs)
    stage(id);
  // The instruction's float type: its first float output's, or input's
  // (an MoE router's first output is its i32 slots).
  auto floatType = [&]() {
    for (const std::vector<uint32_t> *ids : {&inst.outputs, &inst.inputs})
      for (uint32_t id : *ids)
        if (plan.buffers[id].dtype != DType::I32)
          return plan.buffers[id].dtype;
    return DType::F32;
  };
  if (floatType() == DType::F64)
    execute<double>(ex, prog, index);
  else
    execute<float>(ex, prog, index);
  auto writeBack = [&](uint32_t id) {
    if (auto it = staged.find(id); it != staged.end())
      convertFloats(it->second.data(), DType::F32, ex.buffer(id).data,
                    plan.buffers[id].dtype, int64_t(it->second.size()));
  };
  for (uint32_t id : inst.outputs)
    writeBack(id);
  // The norms clip their inputs in place.
  if (inst.opcode == Opcode::GlobalNormClip ||
      inst.opcode == Opcode::GlobalNormClipParts)
    for (uint32_t id : inst.inputs)
      writeBack(id);
  staged.clear();
}

void CpuBackend::prepare(const Plan &plan) {
  threads = std::max(1, omp_get_max_threads());
  // Only attention needs scratch: the other backward kernels recompute
  // their statistics in place when given no saved ones. (bf16 and f16
  // operands are staged through f32 at run time.)
  int64_t scratchElems = 0;
  const std::vector<int64_t> origin(plan.mesh.size(), 0);
  for (const Program &prog : plan.programs) {
    for (size_t i = 0; i < prog.instructions.size(); ++i) {
      const Instruction &inst = prog.instructions[i];
      if (inst.opcode == Opcode::Attention ||
          inst.opcode == Opcode::AttentionGrad ||
          inst.opcode == Opcode::AttentionLse ||
          inst.opcode == Opcode::AttentionGradLse)
        scratchElems =
            std::max(scratchElems,
                     attentionScratchSize(
                         attentionShapeOf(plan, inst, 0, origin), threads));
    }
  }
  // Sized for f64, the widest float the CPU backend runs.
  scratchSize = uint64_t(scratchElems) * sizeof(double);

  // Linux overcommits: an arena larger than the machine would "allocate"
  // and then die in initialize()'s memset. Refuse it by name instead.
  // A pipeline rank allocates its own arenas and the shared ones its
  // stages use (arenaHolders): the largest rank's must fit.
  const std::vector<std::vector<bool>> holders = arenaHolders(plan);
  std::map<size_t, uint64_t> perRank;
  for (size_t a = 0; a < plan.arenas.size(); ++a)
    for (size_t r = 0; r < holders[a].size(); ++r)
      if (holders[a][r])
        perRank[r] += plan.arenas[a].bytes;
  uint64_t largestRank = 0;
  for (const auto &[rank, bytes] : perRank)
    largestRank = std::max(largestRank, bytes);
  uint64_t total = scratchSize + largestRank;
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
  if (pages > 0 && pageSize > 0 &&
      total / uint64_t(pageSize) > uint64_t(pages)) {
    std::string arenaList;
    for (size_t a = 0; a < plan.arenas.size(); ++a)
      arenaList += (a ? ", " : "") + std::string("arena ") + std::to_string(a) +
                   " (" + tierName(plan.arenas[a].tier) + ") " +
                   std::to_string(plan.arenas[a].bytes);
    throw Error("the plan needs " + std::to_string(total) + " bytes (" +
                arenaList + ", scratch " + std::to_string(scratchSize) +
                ") but this machine has " +
                std::to_string(uint64_t(pages) * uint64_t(pageSize)) +
                " bytes of memory");
  }
  if (scratchSize)
    scratch = static_cast<uint8_t *>(
        allocate(scratchSize, Tier::Host,
                 "scratch (" + std::to_string(scratchSize) + " bytes)"));
}

template <typename T>
void CpuBackend::execute(InstructionContext &ex, const Program &prog,
                         size_t index) {
  const Plan &thePlan = ex.plan();
  const std::vector<int64_t> &coords = ex.meshCoordinates();
  auto buffer = [&](uint32_t id) { return view(ex, id); };
  auto requireGroup = [&](const Program &p, size_t i,
                          int64_t axes) -> Communicator & {
    return ex.requireGroup(p, i, axes);
  };
  const Instruction &inst = prog.instructions[index];
  auto fail = [&](const std::string &msg) {
    throw instructionError(prog, index, msg);
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
                      ops::EmbeddingGrad::decode(inst).accumulate != 0);
    break;
  }
  case Opcode::PositionEmbedding: {
    const ops::PositionEmbedding pe = ops::PositionEmbedding::decode(inst);
    positionEmbeddingForward(in(0), out(0), pe.batch, pe.seq, inB(0).shape[1]);
    break;
  }
  case Opcode::PositionEmbeddingGrad: {
    const auto pg = ops::PositionEmbeddingGrad::decode(inst);
    positionEmbeddingBackward(in(0), out(0), pg.batch, pg.seq, outB(0).shape[0],
                              outB(0).shape[1], pg.accumulate != 0);
    break;
  }
  case Opcode::Matmul: {
    matmulForward(in(0), in(1), out(0), matmulShapeOf(inst),
                  ops::Matmul::decode(inst).accumulate != 0);
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
  case Opcode::GeluExact:
    geluExactForward(in(0), out(0), numElements(inB(0).shape));
    break;
  case Opcode::BiasGelu:
    biasGeluForward(in(0), in(1), out(0), rowsOf(inB(0)), lastDim(inB(0)),
                    ops::BiasGelu::decode(inst).exact != 0);
    break;
  case Opcode::MoeRoute: {
    const ops::MoeRoute op = ops::MoeRoute::decode(inst);
    const MoeRouting r = moeRoutingOf(inst, inB(0), outB(0));
    // The random drop policy's draws, a pure function of the seed, the
    // step and the (token, expert) pair, as dropout's mask is.
    std::vector<float> draws;
    if (r.drop == MoeDrop::Random) {
      draws.resize(size_t(r.tokens * r.experts));
      const uint64_t key = dropoutKey(ex.dropoutSeed(op.seed));
      for (size_t i = 0; i < draws.size(); ++i)
        draws[i] = uniformDraw(key, i);
    }
    std::vector<int64_t> loads(size_t(r.experts));
    const int64_t dropped =
        moeRoute(r, in(0), draws.empty() ? nullptr : draws.data(),
                 buffer(inst.outputs[0]).template as<int32_t>(), out(1), out(2),
                 loads.data());
    if (!r.dropTokens && dropped)
      fail(std::to_string(dropped) + " (token, expert) pairs did not fit "
                                     "although the router drops none");
    ex.noteExpertLoads(prog, index, loads.data(), r.experts);
    break;
  }
  case Opcode::MoeRouteGrad: {
    moeRouteBackward(moeRoutingOf(inst, inB(0), inB(1)), in(0), ids(1), in(2),
                     in(3)[0], out(0), /*accumulate=*/false);
    break;
  }
  case Opcode::MoeDispatch:
  case Opcode::MoeDispatchScaled: {
    const bool scaled = inst.opcode == Opcode::MoeDispatchScaled;
    const int64_t slotCount = numElements(inB(1).shape);
    if (moeDispatch(in(0), ids(1), scaled ? in(2) : nullptr, out(0), slotCount,
                    lastDim(inB(0)), rowsOf(inB(0))))
      fail("a slot names a token outside [0, " +
           std::to_string(rowsOf(inB(0))) + ")");
    break;
  }
  case Opcode::MoeCombine:
  case Opcode::MoeCombineSum: {
    const bool weighted = inst.opcode == Opcode::MoeCombine;
    const bool accumulate =
        (weighted ? ops::MoeCombine::decode(inst).accumulate
                  : ops::MoeCombineSum::decode(inst).accumulate) != 0;
    const int64_t slotCount = numElements(inB(1).shape);
    if (moeCombine(in(0), ids(1), weighted ? in(2) : nullptr, out(0), slotCount,
                   lastDim(outB(0)), rowsOf(outB(0)), accumulate))
      fail("a slot names a token outside [0, " +
           std::to_string(rowsOf(outB(0))) + ")");
    break;
  }
  case Opcode::MoeGatesGrad:
    moeGatesGrad(in(0), ids(1), in(2), out(0), numElements(inB(1).shape),
                 lastDim(inB(2)), rowsOf(inB(2)),
                 ops::MoeGatesGrad::decode(inst).accumulate != 0);
    break;
  case Opcode::Swiglu:
    swigluForward(in(0), out(0), rowsOf(inB(0)), lastDim(outB(0)));
    break;
  case Opcode::SwigluGrad:
    swigluBackward(in(0), in(1), out(0), rowsOf(inB(0)), lastDim(inB(1)));
    break;
  case Opcode::RepeatHeads: {
    const ops::RepeatHeads rh = ops::RepeatHeads::decode(inst);
    repeatHeadsForward(in(0), out(0), rowsOf(inB(0)),
                       lastDim(inB(0)) / rh.headDim, rh.headDim, rh.repeats);
    break;
  }
  case Opcode::RepeatHeadsGrad: {
    const ops::RepeatHeadsGrad rh = ops::RepeatHeadsGrad::decode(inst);
    repeatHeadsBackward(in(0), out(0), rowsOf(outB(0)),
                        lastDim(outB(0)) / rh.headDim, rh.headDim, rh.repeats);
    break;
  }
  case Opcode::Rotary: {
    const ops::Rotary ro = ops::Rotary::decode(inst);
    const std::vector<int64_t> &shape = inB(0).shape;
    rotaryForward(in(0), out(0), rowsOf(inB(0)), shape[shape.size() - 2],
                  lastDim(inB(0)), ro.headDim, ro.rotaryDims, ro.base,
                  bool(ro.inverse));
    break;
  }
  case Opcode::PagedAttention: {
    const ops::PagedAttention pa = ops::PagedAttention::decode(inst);
    const Buffer &cache = outB(1), &table = inB(5);
    PagedCacheShape shape;
    shape.rows = numElements(inB(3).shape);
    shape.heads = pa.heads;
    shape.kvHeads = pa.kvHeads;
    shape.headDim = lastDim(inB(0)) / pa.heads;
    shape.window = pa.window;
    shape.blocks = cache.shape[0];
    shape.blockSize = cache.shape[2];
    shape.sequences = table.shape[0];
    shape.tableWidth = table.shape[1];
    if (std::string why = pagedAttention(in(0), in(1), in(2), ids(3), ids(4),
                                         ids(5), out(0), out(1), shape);
        !why.empty())
      fail(why);
    break;
  }
  case Opcode::RotaryAt: {
    const ops::RotaryAt ro = ops::RotaryAt::decode(inst);
    rotaryAt(in(0), ids(1), out(0), rowsOf(inB(0)), lastDim(inB(0)), ro.headDim,
             ro.rotaryDims, ro.base);
    break;
  }
  case Opcode::PositionEmbeddingAt:
    if (std::string why =
            positionEmbeddingAt(in(0), ids(1), out(0), rowsOf(outB(0)),
                                inB(0).shape[0], lastDim(outB(0)));
        !why.empty())
      fail(why);
    break;
  case Opcode::GatherRows:
    if (std::string why = gatherRows(in(0), ids(1), out(0), rowsOf(outB(0)),
                                     rowsOf(inB(0)), lastDim(outB(0)));
        !why.empty())
      fail(why);
    break;
  case Opcode::Sample:
    if (std::string why =
            sampleTokens(in(0), buffer(inst.inputs[1]).template as<float>(),
                         buffer(inst.inputs[2]).template as<float>(),
                         buffer(inst.outputs[0]).template as<int32_t>(),
                         inB(0).shape[1], inB(0).shape[0], lastDim(inB(0)),
                         ops::Sample::decode(inst).classes);
        !why.empty())
      fail(why);
    break;
  case Opcode::LayerNorm:
    layerNormForward<T>(in(0), in(1), in(2), out(0), nullptr, nullptr,
                        rowsOf(inB(0)), lastDim(inB(0)),
                        T(ops::LayerNorm::decode(inst).eps));
    break;
  case Opcode::RmsNorm: {
    const ops::RmsNorm rn = ops::RmsNorm::decode(inst);
    rmsNormForward<T>(in(0), in(1), out(0), rowsOf(inB(0)), lastDim(inB(0)),
                      T(rn.eps), rn.epsOutside);
    break;
  }
  case Opcode::Softmax:
    softmaxForward(in(0), out(0), rowsOf(inB(0)), lastDim(inB(0)));
    break;
  case Opcode::Attention:
  case Opcode::AttentionGrad:
  case Opcode::AttentionLse:
  case Opcode::AttentionGradLse: {
    // The backward recomputes the probabilities block by block from q and
    // k. AttentionLse writes the rows' logsumexp; AttentionGradLse's saved
    // output and logsumexp go unread here: the CPU kernel's row term is
    // rowsum(P * dP), and it keeps normalizing each row itself, so that the
    // fused plan trains as the unfused one bit for bit (the saved logsumexp
    // would spare one pass over a row's scores, a few percent of the
    // backward; CUDA, which ran the whole forward again, reads both).
    AttentionShape s = attentionShapeOf(
        thePlan, inst, ex.dropoutSeed(attentionSeedOf(inst)), coords);
    int64_t workSize = int64_t(scratchSize / sizeof(T));
    const bool forward =
        inst.opcode == Opcode::Attention || inst.opcode == Opcode::AttentionLse;
    T *lse = inst.opcode == Opcode::AttentionLse ? out(1) : nullptr;
    bool ok = forward ? attentionForward<T>(in(0), in(1), in(2), out(0), lse,
                                            scr, workSize, s)
                      : attentionBackward<T>(in(0), in(1), in(2), nullptr,
                                             in(3), out(0), out(1), out(2), scr,
                                             workSize, s, AccumulateMask(0));
    if (!ok)
      fail("attention scratch of " + std::to_string(workSize) +
           " elements is too small");
    break;
  }
  case Opcode::CrossEntropy: {
    int64_t vocab = lastDim(inB(0)), rows = rowsOf(inB(0));
    const int64_t classes = ops::CrossEntropy::decode(inst).classes;
    checkIds(ids(1), rows, classColumns(vocab, 0, classes), "target id");
    *out(0) =
        crossEntropyForward<T>(in(0), ids(1), nullptr, rows, vocab, classes);
    break;
  }
  case Opcode::CrossEntropyGrad: {
    int64_t vocab = lastDim(inB(0)), rows = rowsOf(inB(0));
    const int64_t classes = ops::CrossEntropyGrad::decode(inst).classes;
    checkIds(ids(1), rows, classColumns(vocab, 0, classes), "target id");
    crossEntropyBackward<T>(in(0), ids(1), nullptr, *in(2), out(0), rows, vocab,
                            false, classes);
    break;
  }
  case Opcode::Copy:
    if (in(0) != out(0))
      std::memmove(out(0), in(0), inB(0).bytes);
    break;
  case Opcode::TakeChunk:
    fail("the backend copies the chunk before dispatching");
    break;
  case Opcode::Transpose: {
    const Permutation p = permutationOf(inst);
    transposeForward(in(0), out(0), inB(0).shape.data(), p.perm, p.rank);
    break;
  }
  case Opcode::Slice: {
    const std::vector<int64_t> offsets = ops::Slice::decode(inst).offsets;
    sliceForward(in(0), out(0), inB(0).shape.data(), outB(0).shape.data(),
                 offsets.data(), int(offsets.size()));
    break;
  }
  case Opcode::SliceGrad: {
    const std::vector<int64_t> offsets = ops::SliceGrad::decode(inst).offsets;
    sliceBackward(in(0), out(0), outB(0).shape.data(), inB(0).shape.data(),
                  offsets.data(), int(offsets.size()), false);
    break;
  }
  case Opcode::Concat: {
    const Buffer &y = outB(0);
    size_t dim = size_t(ops::Concat::decode(inst).dim);
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
  case Opcode::Dropout: {
    const ops::Dropout dr = ops::Dropout::decode(inst);
    dropoutForward(in(0), out(0), numElements(inB(0).shape), float(dr.p),
                   ex.dropoutSeed(dr.seed));
    break;
  }
  case Opcode::DropoutChunk: {
    const ops::DropoutChunk dr = ops::DropoutChunk::decode(inst);
    const int64_t n = numElements(inB(0).shape);
    Communicator &comm = requireGroup(prog, index, dr.axes);
    dropoutForward(in(0), out(0), n, float(dr.p), ex.dropoutSeed(dr.seed),
                   uint64_t(n) * uint64_t(comm.rank()));
    break;
  }
  case Opcode::BiasGrad:
    biasAddBackward<T>(in(0), nullptr, out(0), rowsOf(inB(0)), lastDim(inB(0)),
                       ops::BiasGrad::decode(inst).accumulate != 0);
    break;
  case Opcode::GeluGrad:
    geluBackward(in(0), in(1), out(0), numElements(inB(0).shape), false);
    break;
  case Opcode::GeluExactGrad:
    geluExactBackward(in(0), in(1), out(0), numElements(inB(0).shape), false);
    break;
  case Opcode::BiasGeluGrad:
    biasGeluBackward(in(0), in(1), in(2), out(0), rowsOf(inB(0)),
                     lastDim(inB(0)),
                     ops::BiasGeluGrad::decode(inst).exact != 0, false);
    break;
  case Opcode::SoftmaxGrad:
    softmaxBackward(in(0), in(1), out(0), rowsOf(inB(0)), lastDim(inB(0)),
                    false);
    break;
  case Opcode::LayerNormGrad: {
    // No saved statistics: the kernel recomputes mean and rstd per row.
    const ops::LayerNormGrad lg = ops::LayerNormGrad::decode(inst);
    layerNormBackward<T>(in(0), in(1), nullptr, nullptr, in(2), out(0), out(1),
                         out(2), rowsOf(inB(0)), lastDim(inB(0)), T(lg.eps),
                         AccumulateMask(lg.accumulate));
    break;
  }
  case Opcode::RmsNormGrad: {
    const ops::RmsNormGrad rg = ops::RmsNormGrad::decode(inst);
    rmsNormBackward<T>(in(0), in(1), in(2), out(0), out(1), rowsOf(inB(0)),
                       lastDim(inB(0)), T(rg.eps), rg.epsOutside,
                       AccumulateMask(rg.accumulate));
    break;
  }
  case Opcode::Accumulate:
    addForward(out(0), in(0), out(0), numElements(inB(0).shape));
    break;
  case Opcode::Cast:
    fail("the backend converts before dispatching a cast");
    break;
  case Opcode::Zero:
  case Opcode::Transfer:
  case Opcode::OverlapNextStep:
  case Opcode::AllReduce:
  case Opcode::AllGather:
  case Opcode::ReduceScatter:
  case Opcode::ReduceScatterAccumulate:
  case Opcode::GatherParameter:
  case Opcode::GatherChunks:
  case Opcode::ReduceScatterChunks:
  case Opcode::AllToAll:
  case Opcode::CompressedAllReduce:
  case Opcode::PipelineForward:
  case Opcode::PipelineBackward:
  case Opcode::PipelineBackwardWeight:
  case Opcode::PipelineSend:
  case Opcode::PipelineRecv:
    fail("the executor runs this instruction, not the backend");
    break;
  case Opcode::GlobalNormClipParts: {
    // Each gradient's valid elements, weighted by 1/(its copies in the
    // group): a part held by R ranks of the group is counted R times by
    // the all-reduce.
    const ops::GlobalNormClipParts op = ops::GlobalNormClipParts::decode(inst);
    const std::vector<NormPart> parts = normParts(op);
    Communicator &comm = requireGroup(prog, index, op.axes);
    double sum = 0;
    std::vector<std::pair<T *, int64_t>> held;
    for (size_t i = 0; i < inst.inputs.size(); ++i) {
      const int64_t chunkAxes = parts[i].chunkAxes;
      const int64_t splitAxes = parts[i].splitAxes;
      const bool inBuffer = parts[i].inBuffer;
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
      sum += dsc::rt::sumOfSquares(&ptr, &count, 1) / copies;
      held.push_back({data, count});
    }
    comm.allReduce(&sum, 1, DType::F64, ReduceOp::Sum);
    *out(0) = T(clipHeld(sum, op.maxNorm, held));
    break;
  }
  case Opcode::VocabParallelEmbedding:
  case Opcode::VocabParallelEmbeddingGrad: {
    // This rank's rows of the vocabulary: ids map to local rows, the
    // others to -1, which the kernels skip (zeros forward, nothing back).
    const bool fwd = inst.opcode == Opcode::VocabParallelEmbedding;
    Communicator &comm =
        requireGroup(prog, index,
                     fwd ? ops::VocabParallelEmbedding::decode(inst).axes
                         : ops::VocabParallelEmbeddingGrad::decode(inst).axes);
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
      embeddingBackward(
          in(0), local.data(), out(0), n, rows, hidden,
          ops::VocabParallelEmbeddingGrad::decode(inst).accumulate != 0);
    break;
  }
  case Opcode::VocabParallelCrossEntropy:
  case Opcode::VocabParallelCrossEntropyGrad: {
    // Megatron's three reductions per token: the max, the sum of
    // exponentials (and, forward, the target's logit), in f64.
    const bool forward = inst.opcode == Opcode::VocabParallelCrossEntropy;
    const int64_t axes =
        forward ? ops::VocabParallelCrossEntropy::decode(inst).axes
                : ops::VocabParallelCrossEntropyGrad::decode(inst).axes;
    const int64_t classes =
        forward ? ops::VocabParallelCrossEntropy::decode(inst).classes
                : ops::VocabParallelCrossEntropyGrad::decode(inst).classes;
    Communicator &comm = requireGroup(prog, index, axes);
    const int64_t cols = lastDim(inB(0)), rows = rowsOf(inB(0));
    const int64_t begin = cols * comm.rank();
    checkIds(ids(1), rows, classColumns(cols * comm.size(), 0, classes),
             "target id");
    std::vector<double> max(rows), sumExp(rows), target(rows);
    vocabShardRowMax(in(0), rows, cols, begin, classes, max.data());
    comm.allReduce(max.data(), rows, DType::F64, ReduceOp::Max);
    vocabShardRowSums(in(0), ids(1), max.data(), rows, cols, begin, classes,
                      sumExp.data(), target.data());
    comm.allReduce(sumExp.data(), rows, DType::F64, ReduceOp::Sum);
    if (forward) {
      comm.allReduce(target.data(), rows, DType::F64, ReduceOp::Sum);
      double total = 0; // row order: independent of threads and ranks
      for (int64_t r = 0; r < rows; ++r)
        total += max[r] + std::log(sumExp[r]) - target[r];
      *out(0) = T(total / double(rows));
    } else {
      for (int64_t r = 0; r < rows; ++r)
        max[r] += std::log(sumExp[r]); // the logsumexp
      vocabShardCrossEntropyBackward(in(0), ids(1), max.data(), *in(2), out(0),
                                     rows, cols, begin, classes, false);
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
    double norm = std::sqrt(
        dsc::rt::sumOfSquares(ptrs.data(), sizes.data(), int(ptrs.size())));
    *out(0) = T(norm);
    const double maxNorm = ops::GlobalNormClip::decode(inst).maxNorm;
    if (maxNorm > 0 && std::isfinite(norm)) {
      double scale = clipScale(norm, maxNorm);
      if (scale < 1.0)
        for (size_t i = 0; i < ptrs.size(); ++i)
          scaleForward(in(i), in(i), sizes[i], T(scale));
    }
    break;
  }
  case Opcode::LearningRate:
    *out(0) = T(ex.learningRate(ops::LearningRate::decode(inst)));
    break;
  case Opcode::CyclicMomentum: {
    const ops::CyclicMomentum m = ops::CyclicMomentum::decode(inst);
    *out(0) = T(cyclicMomentum(m.firstStairs, m.secondStairs, m.minMom,
                               m.maxMom, m.firstSize, m.secondSize, m.decaySize,
                               m.rate, ex.step()));
    break;
  }
  case Opcode::CyclicLearningRate:
    *out(0) =
        T(cyclicLearningRate(ops::CyclicLearningRate::decode(inst), ex.step()));
    break;
  case Opcode::AdamW:
  case Opcode::AdamWScheduledBeta1: {
    AdamWConfig cfg = adamConfigOf(inst, double(*in(1)));
    // OneCycle's cycle_momentum: the step's beta1.
    if (inst.opcode == Opcode::AdamWScheduledBeta1)
      cfg.beta1 = double(*in(2));
    // States in host memory (--dsc-offload) take ZeRO-Offload's vectorized
    // CPU Adam, the ISA this CPU has.
    if constexpr (std::is_same_v<T, float>)
      if (thePlan.arenas[thePlan.buffers[inst.outputs[0]].arena].tier ==
          Tier::Host) {
        static const CpuIsa isa = detectCpuIsa();
        cpuAdamW(out(0), in(0), out(1), out(2), numElements(inB(0).shape), cfg,
                 ex.step(), adamDecayOf(inst), nullptr, isa);
        break;
      }
    adamwStep(out(0), in(0), out(1), out(2), numElements(inB(0).shape), cfg,
              ex.step(), adamDecayOf(inst));
    break;
  }
  case Opcode::AdamWShard:
  case Opcode::AdamWShardScheduledBeta1: {
    // Update only this rank's chunk of the flattened parameter; m and v
    // are that chunk's moments.
    const bool scheduled = inst.opcode == Opcode::AdamWShardScheduledBeta1;
    Communicator *comm = &requireGroup(
        prog, index,
        scheduled ? ops::AdamWShardScheduledBeta1::decode(inst).axes
                  : ops::AdamWShard::decode(inst).axes);
    const int64_t chunk = numElements(thePlan.buffers[inst.outputs[1]].shape);
    const int64_t offset = chunk * comm->rank();
    // A ZeRO-2 gradient is this rank's chunk already.
    const int64_t gradOffset = numElements(inB(0).shape) == chunk ? 0 : offset;
    AdamWConfig cfg = adamConfigOf(inst, double(*in(1)));
    if (scheduled)
      cfg.beta1 = double(*in(2));
    adamwStep(out(0) + offset, in(0) + gradOffset, out(1), out(2), chunk, cfg,
              ex.step(), adamDecayOf(inst));
    break;
  }
  case Opcode::Sgd: {
    sgdStep(out(0), in(0), out(1), numElements(inB(0).shape),
            sgdConfigOf(inst, double(*in(1))));
    break;
  }
  // 1-bit Adam: f32 states (the plan verifier's dtype rule).
  case Opcode::OnebitAdam:
    if constexpr (std::is_same_v<T, float>) {
      const ops::OnebitAdam op = ops::OnebitAdam::decode(inst);
      const int64_t n = numElements(inB(0).shape);
      onebitAdamMoments(out(1), out(2), in(0), n, op.beta1, op.beta2);
      frozenAdamUpdate(out(0), out(1), out(2), n, double(*in(1)), op.eps,
                       op.wd);
    } else {
      fail("1-bit Adam runs on f32 states");
    }
    break;
  // ZeRO-1/2 under 1-bit Adam: v is this rank's chunk of the flattened
  // parameter, m whole; the warm-up updates m whole, then v and the
  // parameter at the chunk.
  case Opcode::OnebitAdamShard:
    if constexpr (std::is_same_v<T, float>) {
      const ops::OnebitAdamShard op = ops::OnebitAdamShard::decode(inst);
      const int64_t chunk = numElements(thePlan.buffers[inst.outputs[2]].shape);
      const int64_t offset = chunk * requireGroup(prog, index, op.axes).rank();
      adamMomentum(out(1), in(0), numElements(inB(0).shape), op.beta1);
      onebitAdamVariance(out(2), in(0) + offset, chunk, op.beta2);
      frozenAdamUpdate(out(0) + offset, out(1) + offset, out(2), chunk,
                       double(*in(1)), op.eps, op.wd);
    } else {
      fail("1-bit Adam runs on f32 states");
    }
    break;
  case Opcode::FrozenAdamShard:
    if constexpr (std::is_same_v<T, float>) {
      const ops::FrozenAdamShard op = ops::FrozenAdamShard::decode(inst);
      const int64_t chunk = numElements(thePlan.buffers[inst.inputs[1]].shape);
      const int64_t offset = chunk * requireGroup(prog, index, op.axes).rank();
      frozenAdamUpdate(out(0) + offset, in(0) + offset, in(1), chunk,
                       double(*in(2)), op.eps, op.wd);
    } else {
      fail("1-bit Adam runs on f32 states");
    }
    break;
  case Opcode::AdamMomentum:
    if constexpr (std::is_same_v<T, float>)
      adamMomentum(out(0), in(0), numElements(inB(0).shape),
                   ops::AdamMomentum::decode(inst).beta1);
    else
      fail("1-bit Adam runs on f32 states");
    break;
  case Opcode::FrozenAdam:
    if constexpr (std::is_same_v<T, float>) {
      const ops::FrozenAdam op = ops::FrozenAdam::decode(inst);
      frozenAdamUpdate(out(0), in(0), in(1), numElements(inB(0).shape),
                       double(*in(2)), op.eps, op.wd);
    } else {
      fail("1-bit Adam runs on f32 states");
    }
    break;
  // 0/1 Adam: f32 states, the f64 sum of learning rates since the sync.
  case Opcode::ZeroOneAdamUpdate:
    if constexpr (std::is_same_v<T, float>) {
      const ops::ZeroOneAdamUpdate op = ops::ZeroOneAdamUpdate::decode(inst);
      zeroOneAdamUpdate(out(0), out(1), in(0), in(1), numElements(inB(0).shape),
                        double(*in(2)), op.eps, op.wd);
    } else {
      fail("0/1 Adam runs on f32 states");
    }
    break;
  case Opcode::AddLearningRate: {
    // DeepSpeed adds the group's lr, a Python float; the plan's is the
    // step's scalar. The instruction runs as f64 (its output's dtype), so
    // the f32 learning rate is read at its own type.
    const BufferView lr = buffer(inst.inputs[0]);
    const double step = thePlan.buffers[inst.inputs[0]].dtype == DType::F64
                            ? lr.template as<double>()[0]
                            : double(lr.template as<float>()[0]);
    buffer(inst.outputs[0]).template as<double>()[0] += step;
    break;
  }
  case Opcode::ZeroOneAdamRewind:
    if constexpr (std::is_same_v<T, float>)
      zeroOneAdamRewind(out(0), out(1), in(0), numElements(inB(0).shape),
                        ops::ZeroOneAdamRewind::decode(inst).eps);
    else
      fail("0/1 Adam runs on f32 states");
    break;
  case Opcode::ZeroOneAdamResync:
    if constexpr (std::is_same_v<T, float>)
      zeroOneAdamResync(out(0), out(1), out(2), in(0),
                        numElements(inB(0).shape),
                        buffer(inst.inputs[1]).template as<double>()[0],
                        ops::ZeroOneAdamResync::decode(inst).eps);
    else
      fail("0/1 Adam runs on f32 states");
    break;
  // 1-bit LAMB: f32 states, each tensor's f64 coefficients (LambCoefficient).
  case Opcode::OnebitLamb:
    if constexpr (std::is_same_v<T, float>) {
      const ops::OnebitLamb op = ops::OnebitLamb::decode(inst);
      double *c = buffer(inst.outputs[3]).template as<double>();
      OnebitLambConfig config = lambAdamConfig(op);
      config.maxCoeff = op.maxCoeff;
      config.minCoeff = op.minCoeff;
      config.coeffBeta = op.coeffBeta;
      onebitLambWarmup(out(0), out(1), out(2), in(0), numElements(inB(0).shape),
                       double(*in(1)), c[kLambCoeffFreeze], config);
    } else {
      fail("1-bit LAMB runs on f32 states");
    }
    break;
  case Opcode::LambFreezeScale:
    if constexpr (std::is_same_v<T, float>) {
      double *c = buffer(inst.outputs[1]).template as<double>();
      if (c[kLambFrozen] == 0.0) {
        const int64_t n = numElements(inB(0).shape);
        c[kLambMomentumScale] = lambMomentumScale(in(0), n);
        if (ops::LambFreezeScale::decode(inst).copyVariance)
          std::copy(in(1), in(1) + n, out(0));
      }
    } else {
      fail("1-bit LAMB runs on f32 states");
    }
    break;
  case Opcode::LambScalingCoeffs:
    if constexpr (std::is_same_v<T, double>) {
      std::vector<double> scales;
      bool frozen = true;
      for (size_t o = 0; o < inst.outputs.size(); ++o) {
        scales.push_back(out(o)[kLambMomentumScale]);
        frozen = frozen && out(o)[kLambFrozen] != 0.0;
      }
      if (!frozen) {
        const std::vector<double> coeffs = lambScalingCoeffs(scales);
        for (size_t o = 0; o < inst.outputs.size(); ++o) {
          out(o)[kLambScalingCoeff] = coeffs[o];
          out(o)[kLambLastFactor] = 1.0;
          out(o)[kLambFrozen] = 1.0;
        }
      }
    } else {
      fail("1-bit LAMB's coefficients are f64");
    }
    break;
  case Opcode::LambMomentum:
    if constexpr (std::is_same_v<T, float>) {
      const double *c = buffer(inst.inputs[1]).template as<double>();
      lambLocalMomentum(out(0), out(1), in(0), numElements(inB(0).shape),
                        ops::LambMomentum::decode(inst).beta1,
                        c[kLambScalingCoeff]);
    } else {
      fail("1-bit LAMB runs on f32 states");
    }
    break;
  case Opcode::FrozenLamb:
    if constexpr (std::is_same_v<T, float>) {
      const ops::FrozenLamb op = ops::FrozenLamb::decode(inst);
      double *c = buffer(inst.outputs[3]).template as<double>();
      OnebitLambConfig config = lambAdamConfig(op);
      config.factorMax = op.factorMax;
      config.factorMin = op.factorMin;
      config.factorThreshold = op.factorThreshold;
      frozenLambUpdate(out(0), out(1), in(0), in(1), out(2),
                       numElements(inB(0).shape), double(*in(2)),
                       c[kLambCoeffFreeze], c[kLambScalingCoeff],
                       c[kLambLastFactor], config);
    } else {
      fail("1-bit LAMB runs on f32 states");
    }
    break;
  }
}

std::unique_ptr<Backend> dsc::rt::createCpuBackend() {
  return std::make_unique<CpuBackend>();
}
