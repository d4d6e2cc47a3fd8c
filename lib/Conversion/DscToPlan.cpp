//===- DscToPlan.cpp - lower a planned module to a runtime plan -*- C++ -*-===//
//
// Walks the memory-planned programs and emits one runtime instruction per
// op, with the shapes the executor checks and the attributes each opcode
// takes (dsc/Runtime/Instructions.def), through the typed ops:: structs.
//
//===----------------------------------------------------------------------===//

#include "dsc/Conversion/DscToPlan.h"
#include "dsc/Dialect/Dsc/IR/DscAttrNames.h"
#include "dsc/Dialect/Dsc/IR/DscOps.h"
#include "dsc/Dialect/Dsc/IR/DscPrograms.h"
#include "dsc/Runtime/Instructions.h"
#include "dsc/Support/PipelineScheduleKind.h"
#include "dsc/Support/PipelineSlots.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"

#include <limits>
#include <map>
#include <type_traits>
#include <vector>

using namespace mlir;
using namespace mlir::dsc;

namespace {

/// 0/1 Adam's programs besides `optimizer`, in rt::kZeroOneAdamPrograms'
/// order.
constexpr ProgramRole kZeroOneAdamRoles[3] = {ProgramRole::OnebitStepOptimizer,
                                              ProgramRole::LocalStepOptimizer,
                                              ProgramRole::SyncStepOptimizer};

/// Which of them `role` is (an index into both), or -1.
int zeroOneAdamKind(std::optional<ProgramRole> role) {
  for (int k = 0; k < 3; ++k)
    if (role == kZeroOneAdamRoles[k])
      return k;
  return -1;
}

FailureOr<rt::DType> dtypeOf(Type type) {
  Type element = cast<RankedTensorType>(type).getElementType();
  if (element.isF32())
    return rt::DType::F32;
  if (element.isF64())
    return rt::DType::F64;
  if (element.isInteger(32))
    return rt::DType::I32;
  if (element.isBF16())
    return rt::DType::BF16;
  if (element.isF16())
    return rt::DType::F16;
  return failure();
}

/// The op's layer-style name (`h.3.mlp.fc`) for traces and errors.
std::string nameOf(Location loc) {
  if (auto named = dyn_cast<NameLoc>(loc))
    return named.getName().str();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations())
      if (std::string name = nameOf(inner); !name.empty())
        return name;
  return {};
}

/// The slots a step instruction names (PipelineSlots.h's order).
void setSlots(rt::ops::PipelineForward &op, const std::array<int64_t, 3> &s) {
  op.slot = s[::dsc::kActivationSlots];
}
void setSlots(rt::ops::PipelineBackward &op, const std::array<int64_t, 3> &s) {
  op.slot = s[::dsc::kActivationSlots];
  op.gradientSlot = s[::dsc::kGradientSlots];
  op.weightSlot = s[::dsc::kWeightSlots];
}
void setSlots(rt::ops::PipelineBackwardWeight &op,
              const std::array<int64_t, 3> &s) {
  op.slot = s[::dsc::kWeightSlots];
}

/// A Matmul instruction's attributes for operands of shapes `lhs` and `rhs`
/// and a product of shape `out` (dsc.matmul and dsc.matmul_accumulate).
rt::ops::Matmul matmulOf(ArrayRef<int64_t> lhs, ArrayRef<int64_t> rhs,
                         ArrayRef<int64_t> out, bool transposeLhs,
                         bool transposeRhs) {
  rt::ops::Matmul matmul;
  matmul.batch = 1;
  for (int64_t d : out.drop_back(2))
    matmul.batch *= d;
  matmul.m = out[out.size() - 2];
  matmul.n = out.back();
  matmul.k = lhs[lhs.size() - (transposeLhs ? 2 : 1)];
  matmul.transA = transposeLhs;
  matmul.transB = transposeRhs;
  matmul.broadcastB = rhs.size() == 2 && lhs.size() > 2;
  return matmul;
}

/// The routing attributes dsc.moe_route and dsc.moe_route_grad share, as
/// the MoeRoute and MoeRouteGrad instructions hold them.
template <typename RouteOp, typename Instruction>
void moeRoutingOf(RouteOp op, Instruction &r) {
  r.topK = op.getTopK();
  r.capacity = op.getCapacity();
  r.dropTokens = op.getDropTokens();
  r.normalize = int64_t(op.getNormalize());
  r.drop = int64_t(op.getDropPolicy());
  r.order = int64_t(op.getSlotOrder());
  r.auxCounts = int64_t(op.getAuxCounts());
  r.seed = op.getSeed();
  r.auxCoeff = op.getAuxCoeff().convertToDouble();
  r.zCoeff = op.getZCoeff().convertToDouble();
}

class PlanBuilder {
public:
  explicit PlanBuilder(ModuleOp module) : module(module) {
    // A pipeline stage seeds its MoE auxiliary losses with a constant 1/m
    // (--dsc-autodiff): the loss's seed must stay what was compiled too, so
    // the plan gets no runtime-written gradient seed (and refuses another
    // micro-batch count).
    module.walk([&](StageAuxiliaryLossOp) { bakedSeeds = true; });
  }

  FailureOr<rt::Plan> build();

private:
  /// A buffer for `type` at `offset` of the `tier` arena of memory domain
  /// `domain` (a pipeline rank's, -1: the shared one; by default the
  /// program being lowered's); persistent ones are shared by offset.
  FailureOr<uint32_t> addBuffer(Location loc, Type type, int64_t offset,
                                rt::BufferRole role, const std::string &name,
                                rt::BufferInit init = {},
                                MemoryTier tier = MemoryTier::Device,
                                std::optional<int64_t> domain = std::nullopt);
  /// The arenas --dsc-plan-memory planned: one per tier used, and
  /// pipelined, one per tier each pipeline rank and the shared domain use.
  LogicalResult buildArenas(DictionaryAttr memory);
  /// dsc.swap_in / dsc.swap_out: a Transfer per state between its NVMe
  /// buffer and its host staging, which the state's symbol names between
  /// the two.
  LogicalResult lowerSwap(Operation *op, rt::Program &program);
  LogicalResult lowerProgram(func::FuncOp func, StringRef programName);
  /// The tokens' [batch, seq] from `tokensUser`'s first argument.
  LogicalResult setDataShape(func::FuncOp tokensUser);
  /// The programs and the boundary buffers of each pipeline stage.
  LogicalResult buildStages(PipelineAttr pipeline);
  /// Pipeline rank `rank`'s pipeline_step program `func` as the plan
  /// program `programName`, its messages on its stages' boundary buffers.
  LogicalResult lowerStep(func::FuncOp func, const PipelineShape &shape,
                          int64_t rank, StringRef programName);
  LogicalResult lowerOp(Operation &op, rt::Instruction &inst, bool &skip);
  uint32_t declBuffer(FlatSymbolRefAttr name) {
    return declBuffers.lookup(name.getAttr());
  }
  /// The plan's bit mask of mesh axes `axes` (op's mesh must be the plan's).
  FailureOr<int64_t> axesMaskOf(Operation *op, FlatSymbolRefAttr mesh,
                                ArrayAttr axes) {
    if (!meshOp || mesh.getValue() != meshOp.getSymName())
      return op->emitOpError("runs over a mesh the plan does not have");
    int64_t mask = 0;
    for (StringRef axis : axes.getAsValueRange<StringAttr>())
      mask |= int64_t(1) << *meshOp.getAxisIndex(axis);
    return mask;
  }
  /// An optimizer update's instruction: `Whole`, or with the op's shard
  /// axes (ZeRO) `Shard` with their mask; `fill` sets the fields both take.
  template <typename Whole, typename Shard, typename UpdateOp, typename Fill>
  LogicalResult encodeUpdate(UpdateOp op, rt::Instruction &inst, Fill fill) {
    if (!op.getShardAxesAttr()) {
      Whole whole;
      fill(whole);
      whole.encode(inst);
      return success();
    }
    FailureOr<int64_t> mask =
        axesMaskOf(op, op.getMeshAttr(), op.getShardAxesAttr());
    if (failed(mask))
      return failure();
    Shard shard;
    fill(shard);
    shard.axes = *mask;
    shard.encode(inst);
    return success();
  }
  /// The mask of the mesh axes that split an attention's heads (0: none),
  /// or what `what` names (a sequence-parallel dropout's tokens).
  FailureOr<int64_t> headAxesMaskOf(Operation *op, ArrayAttr axes,
                                    StringRef what = "splits its heads") {
    if (!axes)
      return 0;
    if (!meshOp)
      return op->emitOpError(what) << " over mesh axes but the module has "
                                   << "no dsc.mesh";
    int64_t mask = 0;
    for (StringRef axis : axes.getAsValueRange<StringAttr>()) {
      std::optional<unsigned> index = meshOp.getAxisIndex(axis);
      if (!index)
        return op->emitOpError(what)
               << " over mesh axis '" << axis << "' that @"
               << meshOp.getSymName() << " does not have";
      mask |= int64_t(1) << *index;
    }
    return mask;
  }
  /// The parameter a gradient state belongs to.
  ParameterOp paramOfGradient(Attribute name) {
    auto grad =
        module.lookupSymbol<StateOp>(cast<FlatSymbolRefAttr>(name).getValue());
    return module.lookupSymbol<ParameterOp>(grad.getOf());
  }
  /// The mask of the mesh axes that split `param` (tensor slicing).
  int64_t splitMaskOf(ParameterOp param) {
    int64_t mask = 0;
    for (int64_t m : layoutOf(param, param.getNumElements()).viewSplit)
      mask |= m;
    return mask;
  }
  bool anySplitGradient(ClipGradNormOp clip) {
    if (clip->hasAttr(kPipelineLocalAttr))
      return true;
    return llvm::any_of(clip.getGradients(), [&](Attribute name) {
      return splitMaskOf(paramOfGradient(name)) != 0;
    });
  }
  /// The global norm when some gradients are tensor-sliced parts (and
  /// maybe ZeRO chunks): GlobalNormClipParts over every axis involved.
  LogicalResult lowerNormOfParts(ClipGradNormOp clip, rt::Instruction &inst) {
    int64_t zeroMask = 0;
    if (clip.getShardedAttr()) {
      FailureOr<int64_t> mask =
          axesMaskOf(clip, clip.getMeshAttr(), clip.getShardAxesAttr());
      if (failed(mask))
        return failure();
      zeroMask = *mask;
    }
    rt::ops::GlobalNormClipParts norm;
    norm.maxNorm = clip.getMaxNormAttr().getValueAsDouble();
    int64_t axes = 0;
    // A pipeline stage's own gradients are parts of the model's split over
    // pp (each stage holds others); shared ones are whole on every stage.
    auto local = clip->getAttrOfType<DenseBoolArrayAttr>(kPipelineLocalAttr);
    int64_t ppMask = 0;
    if (local) {
      std::optional<unsigned> axis =
          meshOp ? meshOp.getAxisIndex("pp") : std::nullopt;
      if (!axis)
        return clip.emitOpError("is a pipeline stage's norm but the plan's "
                                "mesh has no 'pp' axis");
      ppMask = int64_t(1) << *axis;
      axes |= ppMask;
    }
    for (auto [index, name] : llvm::enumerate(clip.getGradients())) {
      ParameterOp param = paramOfGradient(name);
      auto grad = module.lookupSymbol<StateOp>(
          cast<FlatSymbolRefAttr>(name).getValue());
      bool sharded =
          clip.getShardedAttr() && clip.getShardedAttr().asArrayRef()[index];
      int64_t splitAxes = splitMaskOf(param);
      // A ZeRO chunk spans the data-parallel axes that replicate the
      // parameter: an expert's is over edp, not ep, which splits it.
      int64_t chunkAxes = sharded ? zeroMask & ~splitAxes : 0;
      // The buffer is the chunk when it is a dp-th of the parameter
      // (ZeRO-2) or the parameter is a chunk itself (ZeRO-3).
      bool inBuffer =
          grad.getTensorType().getNumElements() != param.getNumElements() ||
          layoutOf(param, param.getNumElements()).chunkAxes != 0;
      if (local && local.asArrayRef()[index])
        splitAxes |= ppMask;
      rt::appendNormPart(norm, {chunkAxes, inBuffer, splitAxes});
      axes |= chunkAxes | splitAxes;
    }
    norm.axes = axes | zeroMask;
    norm.encode(inst);
    return success();
  }

  /// An instruction whose only attribute is the group `axes` it runs over
  /// (the vocabulary-parallel ops).
  template <typename Instr>
  LogicalResult lowerOverGroup(Operation *op, FlatSymbolRefAttr mesh,
                               ArrayAttr axes, rt::Instruction &inst,
                               Instr instr = {}) {
    FailureOr<int64_t> mask = axesMaskOf(op, mesh, axes);
    if (failed(mask))
      return failure();
    instr.axes = *mask;
    instr.encode(inst);
    return success();
  }
  /// A chunked collective (sequence parallelism's gather, reduce-scatter
  /// and chunk) over its op's group. The plan's chunks are contiguous runs
  /// of a buffer's flattened elements: a split along `dim` of `chunk`'s
  /// type is that only when every dimension before it is 1.
  template <typename Instr, typename Op>
  LogicalResult lowerChunked(Op op, Value chunk, IntegerAttr dim,
                             rt::Instruction &inst, Instr instr = {}) {
    auto type = cast<RankedTensorType>(chunk.getType());
    for (int64_t d = 0; d < dim.getInt(); ++d)
      if (type.getDimSize(d) != 1)
        return op->emitOpError("splits ")
               << type << " along dimension " << dim.getInt()
               << ", but dimension " << d << " before it is "
               << type.getDimSize(d)
               << ", not 1: the plan's chunks are contiguous (reshape so "
                  "that the split dimension leads)";
    return lowerOverGroup(op, op.getMeshAttr(), op.getMeshAxes(), inst, instr);
  }
  /// An in-place collective over the named parameters or states (the
  /// outputs are the inputs) over the group of `axes`, with `reduction`
  /// when Instr reduces.
  template <typename Instr>
  LogicalResult lowerInPlaceCollective(Operation *op, rt::Instruction &inst,
                                       FlatSymbolRefAttr mesh, ArrayAttr axes,
                                       ArrayAttr buffers,
                                       std::optional<ReductionKind> reduction) {
    FailureOr<int64_t> mask = axesMaskOf(op, mesh, axes);
    if (failed(mask))
      return failure();
    for (Attribute name : buffers)
      inst.inputs.push_back(declBuffer(cast<FlatSymbolRefAttr>(name)));
    inst.outputs = inst.inputs;
    Instr instr;
    instr.axes = *mask;
    if constexpr (std::is_same_v<Instr, rt::ops::AllReduce> ||
                  std::is_same_v<Instr, rt::ops::ReduceScatter>)
      instr.reduce = static_cast<int64_t>(*reduction);
    instr.encode(inst);
    return success();
  }

  /// The part of the whole parameter `param` (or of its state, which has
  /// `elements` elements) a rank's buffer holds: the parameter's layout,
  /// and a chunk over dp when ZeRO made the buffer a dp-th of it.
  rt::ShardLayout layoutOf(ParameterOp param, int64_t elements) {
    rt::ShardLayout layout;
    auto maskOf = [&](ArrayRef<StringRef> axes) {
      int64_t mask = 0;
      for (StringRef axis : axes)
        mask |= int64_t(1) << *meshOp.getAxisIndex(axis);
      return mask;
    };
    int64_t paramElements = param.getNumElements();
    ArrayRef<int64_t> wholeShape = param.getTensorType().getShape();
    if (ShardLayoutAttr attr = param.getLayoutAttr()) {
      layout.view.assign(attr.getView().begin(), attr.getView().end());
      for (unsigned d = 0; d < attr.getView().size(); ++d)
        layout.viewSplit.push_back(maskOf(attr.getAxesOfDim(d)));
      layout.chunkAxes = maskOf(attr.getChunkAxisNames());
      wholeShape = attr.getShape().empty() ? attr.getView() : attr.getShape();
    }
    // A ZeRO-1/2 state is a chunk of its parameter over the data-parallel
    // axes that replicate it (a ZeRO-3 parameter's states are chunks
    // already, as it is).
    if (elements != paramElements && meshOp)
      layout.chunkAxes |= maskOf(replicatingDataAxes(meshOp, param));
    if (!layout.isWhole())
      layout.shape.assign(wholeShape.begin(), wholeShape.end());
    return layout;
  }

  /// A 1-bit optimizer's error feedback (n elements on each rank) differs
  /// on every rank of a pipeline stage (another data-parallel index, or
  /// another part of a tensor-sliced member of the bucket): the whole is
  /// [G, n], row i the error of the stage's i-th rank, so a checkpoint
  /// keeps every rank's.
  rt::ShardLayout errorLayoutOf(int64_t elements) {
    int64_t mask = 0, ranks = 1;
    if (meshOp)
      for (auto [index, size] : llvm::enumerate(meshOp.getShape()))
        if (index != meshOp.getAxisIndex("pp")) {
          mask |= int64_t(1) << index;
          ranks *= size;
        }
    rt::ShardLayout layout;
    if (ranks == 1)
      return layout;
    layout.view = {ranks, elements};
    layout.viewSplit = {mask, 0};
    layout.shape = {ranks, elements};
    return layout;
  }

  /// Instructions an op needs before its own (a copy into the buffer an
  /// in-place collective then works on).
  SmallVector<rt::Instruction> prelude;

  ModuleOp module;
  /// Whether some backward's seed is a baked constant (above).
  bool bakedSeeds = false;
  rt::Plan plan;
  llvm::DenseMap<Value, uint32_t> valueBuffers;
  llvm::DenseMap<Attribute, uint32_t> declBuffers;
  /// Each swapped-in state's NVMe buffer while its symbol names the host
  /// staging.
  llvm::DenseMap<Attribute, uint32_t> swappedOut;
  /// The plan arena of each (tier, memory domain) the module uses: a
  /// pipeline rank's (>= 0), the shared one (-1), or -2 - k for the k-th
  /// set of ranks of `dsc.memory`'s `shared_by_ranks`.
  std::map<std::pair<MemoryTier, int64_t>, uint32_t> arenaOf;
  /// The domain of each `shared_by_ranks` set.
  std::map<std::vector<int64_t>, int64_t> setDomains;
  /// The memory domain of the program being lowered: its pipeline rank, or
  /// -1 (shared).
  int64_t currentDomain = -1;
  std::map<std::pair<uint32_t, int64_t>, uint32_t> persistentByOffset;
  func::FuncOp currentFunc;
  MeshOp meshOp;
  /// The pipeline stage whose programs are being lowered, or null.
  rt::PipelineStage *currentStage = nullptr;
  /// Micro-batches per step (--dsc-autodiff records them).
  int64_t microbatches = 1;
};

FailureOr<uint32_t> PlanBuilder::addBuffer(Location loc, Type type,
                                           int64_t offset, rt::BufferRole role,
                                           const std::string &name,
                                           rt::BufferInit init, MemoryTier tier,
                                           std::optional<int64_t> domain) {
  bool persistent = role != rt::BufferRole::Temporary;
  const int64_t d = domain.value_or(currentDomain);
  auto arena = arenaOf.find({tier, d});
  if (arena == arenaOf.end())
    return emitError(loc, "the memory plan has no ")
           << stringifyMemoryTier(tier) << " arena "
           << (d == -1 ? std::string("shared by the pipeline ranks")
               : d < 0 ? std::string("shared by a set of pipeline ranks")
                       : "of pipeline rank " + std::to_string(d))
           << " for '" << name << "'";
  if (persistent)
    if (auto it = persistentByOffset.find({arena->second, offset});
        it != persistentByOffset.end())
      return it->second;
  FailureOr<rt::DType> dtype = dtypeOf(type);
  if (failed(dtype))
    return emitError(loc, "the runtime has no element type for ") << type;
  auto tensor = cast<RankedTensorType>(type);
  rt::Buffer buffer;
  buffer.name = name;
  buffer.arena = arena->second;
  buffer.offset = offset;
  buffer.dtype = *dtype;
  buffer.shape.assign(tensor.getShape().begin(), tensor.getShape().end());
  buffer.bytes = tensor.getNumElements() * rt::dtypeSize(*dtype);
  buffer.role = role;
  buffer.init = init;
  plan.buffers.push_back(std::move(buffer));
  uint32_t id = plan.buffers.size() - 1;
  if (persistent)
    persistentByOffset[{arena->second, offset}] = id;
  return id;
}

LogicalResult PlanBuilder::lowerSwap(Operation *op, rt::Program &program) {
  const bool in = isa<SwapInOp>(op);
  ArrayAttr states =
      in ? cast<SwapInOp>(op).getStates() : cast<SwapOutOp>(op).getStates();
  auto offsets = op->getAttrOfType<DenseI64ArrayAttr>(kOffsetsAttr);
  if (in && (!offsets || offsets.size() != int64_t(states.size())))
    return op->emitOpError("has no planned staging; run --dsc-plan-memory");
  for (auto [index, attr] : llvm::enumerate(states)) {
    auto name = cast<FlatSymbolRefAttr>(attr);
    rt::Instruction inst;
    inst.name = (in ? "swap_in." : "swap_out.") + name.getValue().str();
    if (in) {
      if (swappedOut.count(name.getAttr()))
        return op->emitOpError("swaps in '")
               << name << "' again before swapping it out";
      Operation *decl = module.lookupSymbol(name.getAttr());
      Type type = isa<ParameterOp>(decl) ? cast<ParameterOp>(decl).getType()
                                         : cast<StateOp>(decl).getType();
      FailureOr<uint32_t> staging = addBuffer(
          op->getLoc(), type, offsets[index], rt::BufferRole::Temporary,
          (currentFunc.getSymName() + ".staging." + name.getValue()).str(), {},
          MemoryTier::Host);
      if (failed(staging))
        return failure();
      uint32_t file = declBuffer(name);
      swappedOut[name.getAttr()] = file;
      declBuffers[name.getAttr()] = *staging;
      inst.inputs = {file};
      inst.outputs = {*staging};
    } else {
      auto it = swappedOut.find(name.getAttr());
      if (it == swappedOut.end())
        return op->emitOpError("swaps out '")
               << name << "', which is not swapped in";
      inst.inputs = {declBuffer(name)};
      inst.outputs = {it->second};
      declBuffers[name.getAttr()] = it->second;
      swappedOut.erase(it);
    }
    rt::ops::Transfer().encode(inst);
    program.instructions.push_back(std::move(inst));
  }
  return success();
}

FailureOr<rt::Plan> PlanBuilder::build() {
  auto memory = module->getAttrOfType<DictionaryAttr>(kMemoryAttr);
  if (!memory)
    return module.emitError("lowering to a plan needs a memory-planned module;"
                            " run --dsc-plan-memory (or --dsc-compile) first");
  if (failed(buildArenas(memory)))
    return failure();
  // The NVMe lane as --dsc-offload built it (recorded on the module's plan).
  if (auto recorded = module->getAttrOfType<ParallelPlanAttr>(kPlanAttr)) {
    const ::dsc::ParallelPlan &built = recorded.getPlan();
    plan.nvmePath = built.nvmePath;
    if (built.offloadOptimizer == ::dsc::OffloadTier::Nvme ||
        built.offloadParams == ::dsc::OffloadTier::Nvme) {
      plan.nvmeBlockBytes = uint64_t(built.nvmeBlockBytes);
      plan.nvmeQueueDepth = built.nvmeQueueDepth;
    }
  }

  // The mesh the collectives run over (one-rank plans have none).
  for (auto mesh : module.getOps<MeshOp>()) {
    if (!plan.mesh.empty())
      return mesh.emitError("a plan supports one mesh");
    for (auto [name, size] : llvm::zip(
             mesh.getAxes().getAsValueRange<StringAttr>(), mesh.getShape()))
      plan.mesh.push_back({name.str(), size});
    meshOp = mesh;
  }

  // Declarations, in the arenas of the pipeline rank that holds them.
  auto domainOf = [&](Operation *decl) -> int64_t {
    if (auto rank = decl->getAttrOfType<IntegerAttr>(kPipelineRankAttr))
      return rank.getInt();
    if (auto ranks =
            decl->getAttrOfType<DenseI64ArrayAttr>(kPipelineRanksAttr)) {
      auto it = setDomains.find(std::vector<int64_t>(ranks.asArrayRef().begin(),
                                                     ranks.asArrayRef().end()));
      // Unknown: no arena has this domain, which addBuffer names.
      return it == setDomains.end() ? std::numeric_limits<int64_t>::min()
                                    : it->second;
    }
    return -1;
  };
  for (Operation &op : module.getBody()->getOperations()) {
    if (auto param = dyn_cast<ParameterOp>(op)) {
      rt::BufferInit init;
      InitAttr attr = param.getInit();
      switch (attr.getKind()) {
      case InitKind::Zeros:
        init.kind = rt::InitKind::Zeros;
        break;
      case InitKind::Ones:
        init.kind = rt::InitKind::Ones;
        break;
      case InitKind::Normal:
      case InitKind::ScaledNormal:
        init.kind = rt::InitKind::Normal;
        init.std = attr.getEffectiveStd();
        break;
      }
      FailureOr<uint32_t> id =
          addBuffer(param.getLoc(), param.getType(),
                    cast<IntegerAttr>(param->getAttr(kOffsetAttr)).getInt(),
                    rt::BufferRole::Parameter, param.getSymName().str(), init,
                    param.getTier(), domainOf(param));
      if (failed(id))
        return failure();
      plan.buffers[*id].layout = layoutOf(param, param.getNumElements());
      declBuffers[param.getSymNameAttr()] = *id;
    } else if (auto cache = dyn_cast<KvCacheOp>(op)) {
      rt::BufferInit init;
      init.kind = rt::InitKind::Zeros;
      FailureOr<uint32_t> id =
          addBuffer(cache.getLoc(), cache.getType(),
                    cast<IntegerAttr>(cache->getAttr(kOffsetAttr)).getInt(),
                    rt::BufferRole::KvCache, cache.getSymName().str(), init);
      if (failed(id))
        return failure();
      declBuffers[cache.getSymNameAttr()] = *id;
    } else if (auto state = dyn_cast<StateOp>(op)) {
      rt::BufferInit init;
      init.kind = rt::InitKind::Zeros;
      const StateKind kind = state.getKind();
      rt::BufferRole role =
          kind == StateKind::Gradient ? rt::BufferRole::Gradient
          : kind == StateKind::Master || kind == StateKind::GradientCopy
              ? rt::BufferRole::OffloadCopy
          : kind == StateKind::WorkerError || kind == StateKind::ServerError ||
                  kind == StateKind::CompressionPad
              ? rt::BufferRole::CompressionError
              : rt::BufferRole::OptimizerState;
      FailureOr<uint32_t> id = addBuffer(
          state.getLoc(), state.getType(),
          cast<IntegerAttr>(state->getAttr(kOffsetAttr)).getInt(), role,
          state.getSymName().str(), init, state.getTier(), domainOf(state));
      if (failed(id))
        return failure();
      if (auto param = module.lookupSymbol<ParameterOp>(state.getOf()))
        // A tensor's 1-bit LAMB coefficients and 0/1 Adam's sum of
        // learning rates are whole on every rank.
        plan.buffers[*id].layout =
            kind == StateKind::WorkerError || kind == StateKind::ServerError ||
                    kind == StateKind::CompressionPad
                ? errorLayoutOf(state.getTensorType().getNumElements())
            : kind == StateKind::LambCoefficients ||
                    kind == StateKind::LearningRateSum
                ? rt::ShardLayout()
                : layoutOf(param, state.getTensorType().getNumElements());
      declBuffers[state.getSymNameAttr()] = *id;
    }
  }

  if (auto m = module->getAttrOfType<IntegerAttr>(kMicrobatchesAttr))
    microbatches = std::max<int64_t>(1, m.getInt());
  plan.microBatches = microbatches;

  auto prefill = lookupProgram<func::FuncOp>(module, ProgramRole::Prefill);
  auto decode = lookupProgram<func::FuncOp>(module, ProgramRole::Decode);
  if (prefill || decode) {
    // An inference plan (--dsc-inference-programs): its two programs, and
    // no training program.
    if (!prefill || !decode)
      return module.emitError("an inference plan needs a prefill and a "
                              "decode program (dsc.program)");
    for (auto [func, name] :
         {std::make_pair(prefill, "prefill"), std::make_pair(decode, "decode")})
      if (failed(lowerProgram(func, name)))
        return failure();
    decode.walk([&](CostOpInterface op) {
      plan.summary.flopsPerMicroBatch += op.getCost().matmulFlops;
    });
  } else if (PipelineAttr pipeline = getPipelineAttr(module)) {
    if (failed(buildStages(pipeline)))
      return failure();
  } else {
    // The shape of the data comes from the training program's inputs.
    auto fb = lookupProgram<func::FuncOp>(module, ProgramRole::ForwardBackward);
    auto opt = lookupProgram<func::FuncOp>(module, ProgramRole::Optimizer);
    auto loss = lookupProgram<func::FuncOp>(module, ProgramRole::Forward);
    if (!fb || !opt || !loss)
      return module.emitError("lowering to a plan needs a forward, a "
                              "forward_backward and an optimizer program "
                              "(dsc.program); run --dsc-autodiff and "
                              "--dsc-optimizer first");
    if (fb.getNumArguments() != 2)
      return fb.emitError("@forward_backward must take (tokens, targets)");
    if (failed(setDataShape(fb)))
      return failure();
    for (auto [func, name] : {std::make_pair(loss, "forward"),
                              std::make_pair(fb, "forward_backward"),
                              std::make_pair(opt, "optimizer")})
      if (failed(lowerProgram(func, name)))
        return failure();
    // A 1-bit optimizer's step after its warm-up.
    if (auto compressed = lookupProgram<func::FuncOp>(
            module, ProgramRole::CompressedOptimizer)) {
      auto from = compressed->getAttrOfType<IntegerAttr>(kFromStepAttr);
      if (!from)
        return compressed.emitError("a compressed_optimizer program needs "
                                    "dsc.from_step, the first step it runs");
      plan.compressionFromStep = from.getInt();
      if (failed(lowerProgram(compressed, rt::kCompressedOptimizerProgram)))
        return failure();
    }
    // 0/1 Adam's other steps; its policy picks one per step.
    if (auto policy = module->getAttrOfType<DictionaryAttr>(kZeroOneAdamAttr)) {
      rt::ZeroOneAdamPlan &zo = plan.zeroOneAdam;
      zo.enabled = true;
      auto get = [&](StringRef key) {
        return cast<IntegerAttr>(policy.get(key)).getInt();
      };
      zo.varFreezeStep = get("var_freeze_step");
      zo.varUpdateScaler = get("var_update_scaler");
      zo.localStepScaler = get("local_step_scaler");
      zo.localStepClipper = get("local_step_clipper");
      for (int k = 0; k < 3; ++k) {
        const ProgramRole role = kZeroOneAdamRoles[k];
        auto func = lookupProgram<func::FuncOp>(module, role);
        if (!func)
          return module.emitError("a module with dsc.zero_one_adam needs a ")
                 << stringifyProgramRole(role) << " program";
        // A onebit or sync step averages over the data-parallel group
        // (--dsc-data-parallel); without one it would be a different
        // optimizer (DeepSpeed's skips the onebit momentum on one rank).
        if (role != ProgramRole::LocalStepOptimizer &&
            func.getOps<CompressedAllReduceStatesOp>().empty())
          return func.emitError("0/1 Adam's ")
                 << stringifyProgramRole(role)
                 << " program averages nothing: 0/1 Adam needs data "
                    "parallelism (dp >= 2, --dsc-data-parallel)";
        if (failed(lowerProgram(func, rt::kZeroOneAdamPrograms[k])))
          return failure();
        zo.collectiveBytes[k] = uint64_t(
            collectiveBytesPerStep(module, microbatches, role).total());
      }
    }
    // Model FLOPs of one micro-batch's forward and backward.
    fb.walk([&](CostOpInterface op) {
      plan.summary.flopsPerMicroBatch += op.getCost().matmulFlops;
    });
  }
  // --dsc-offload's masters, filled from the parameters (every stage's,
  // on every rank: the arenas hold every stage's buffers).
  if (auto init = lookupProgram<func::FuncOp>(module, ProgramRole::Initialize))
    if (failed(lowerProgram(init, "initialize")))
      return failure();
  // The data's vocabulary: the tokenizer's, when the model pads it (no
  // token id names a padding row).
  if (auto model = module->getAttrOfType<DictionaryAttr>(kModelAttr)) {
    if (auto vocab = model.getAs<IntegerAttr>("vocab_size"))
      plan.vocabSize = vocab.getInt();
    if (auto tokenizer = model.getAs<IntegerAttr>("tokenizer_vocab_size"))
      plan.vocabSize = tokenizer.getInt();
  }

  plan.summary.collectiveBytesPerStep =
      collectiveBytesPerStep(module, microbatches).total();
  if (plan.compressionFromStep > 0)
    plan.summary.collectiveBytesPerCompressedStep =
        collectiveBytesPerStep(module, microbatches, /*compressed=*/true)
            .total();
  if (plan.vocabSize == 0)
    return module.emitError("cannot tell the vocabulary size: the module has "
                            "no dsc.model attribute");
  return std::move(plan);
}

LogicalResult PlanBuilder::buildArenas(DictionaryAttr memory) {
  // One arena per tier the memory plan used: the device's, then the
  // offload tiers'; pipelined, the shared domain's (when it holds
  // anything), each set of ranks' (likewise), then each pipeline rank's.
  auto add = [&](DictionaryAttr domain, int64_t rank, bool always) {
    for (auto [tier, key] : {std::make_tuple(MemoryTier::Device, "arena_bytes"),
                             std::make_tuple(MemoryTier::Host, "host_bytes"),
                             std::make_tuple(MemoryTier::Nvme, "nvme_bytes")}) {
      auto bytes = domain.getAs<IntegerAttr>(key);
      if (!bytes || (!always && bytes.getInt() == 0))
        continue;
      arenaOf[{tier, rank}] = plan.arenas.size();
      rt::Arena arena;
      arena.tier = tier == MemoryTier::Device ? rt::Tier::Device
                   : tier == MemoryTier::Host ? rt::Tier::Host
                                              : rt::Tier::Nvme;
      arena.bytes = static_cast<uint64_t>(bytes.getInt());
      arena.pipelineRank = rank < 0 ? -1 : rank;
      plan.arenas.push_back(arena);
      plan.summary.peakBytesPerArena.push_back(bytes.getInt());
    }
  };
  auto ranks = memory.getAs<ArrayAttr>("pipeline_ranks");
  if (!ranks) {
    add(memory, -1, true);
    return success();
  }
  auto shared = memory.getAs<DictionaryAttr>("shared");
  if (!shared)
    return module.emitError("dsc.memory lists the pipeline ranks' memory but "
                            "not what they share");
  add(shared, -1, false);
  // Sets of ranks' shared arenas: -1 in the plan like the shared one; the
  // runtime allocates them on the ranks whose stages' programs use them
  // (rt::arenaHolders).
  if (auto sets = memory.getAs<ArrayAttr>("shared_by_ranks"))
    for (auto [k, entry] : llvm::enumerate(sets)) {
      auto dict = dyn_cast<DictionaryAttr>(entry);
      auto set = dict ? dict.getAs<DenseI64ArrayAttr>("ranks") : nullptr;
      if (!set)
        return module.emitError("dsc.memory's shared_by_ranks entry ")
               << k << " is not a dictionary with its 'ranks'";
      const int64_t domain = -2 - int64_t(k);
      setDomains[std::vector<int64_t>(set.asArrayRef().begin(),
                                      set.asArrayRef().end())] = domain;
      add(dict, domain, false);
    }
  for (auto [rank, domain] : llvm::enumerate(ranks)) {
    auto dict = dyn_cast<DictionaryAttr>(domain);
    if (!dict)
      return module.emitError("dsc.memory's pipeline rank ")
             << rank << " is not a dictionary";
    add(dict, int64_t(rank), true);
  }
  return success();
}

LogicalResult PlanBuilder::setDataShape(func::FuncOp tokensUser) {
  auto tokensType = cast<RankedTensorType>(tokensUser.getArgument(0).getType());
  if (tokensType.getRank() != 2 || !tokensType.getElementType().isInteger(32))
    return tokensUser.emitError("tokens must be an i32 [batch, seq] tensor");
  plan.microBatchSize = tokensType.getDimSize(0);
  plan.seqLength = tokensType.getDimSize(1);
  return success();
}

LogicalResult PlanBuilder::buildStages(PipelineAttr pipeline) {
  const std::optional<PipelineShape> shape = getPipelineShape(module);
  plan.schedule = pipeline.getSchedule();
  if (std::optional<llvm::APFloat> bubble = pipeline.getBubble())
    plan.summary.pipelineBubble = bubble->convertToDouble();
  const int64_t numStages = shape->stages, ranks = shape->ranks();
  uint64_t flops = 0;
  // Every stage's compute programs first; then each rank's optimizer and
  // step (interleaved, a rank's step moves the boundaries of all of its
  // stages).
  for (int64_t k = 0; k < numStages; ++k) {
    auto fwd = lookupProgram<func::FuncOp>(module, ProgramRole::Forward, k);
    auto fb =
        lookupProgram<func::FuncOp>(module, ProgramRole::ForwardBackward, k);
    if (!fwd || !fb)
      return module.emitError("lowering pipeline stage ")
             << k << " needs its forward and forward_backward programs "
             << "(dsc.program, dsc.stage = " << k
             << "); run --dsc-pipeline and --dsc-autodiff";
    if (k == 0 && failed(setDataShape(fwd)))
      return failure();
    std::string prefix = ("stage" + Twine(k) + ".").str();
    rt::PipelineStage stage;
    stage.forward = prefix + "forward";
    // A split stage's backward (--dsc-stage-backward) computes no forward.
    stage.forwardBackward = prefix + (fb.getSymName().starts_with("backward.")
                                          ? "backward"
                                          : "forward_backward");
    // Zero-bubble: the backward's weight-gradient part, run apart.
    auto weight =
        lookupProgram<func::FuncOp>(module, ProgramRole::BackwardWeight, k);
    if (weight)
      stage.backwardWeight = prefix + "backward_weight";
    currentStage = &stage;
    currentDomain = shape->rankOf(k);
    for (auto [func, name] : {std::make_pair(fwd, stage.forward),
                              std::make_pair(fb, stage.forwardBackward),
                              std::make_pair(weight, stage.backwardWeight)})
      if (func && failed(lowerProgram(func, name)))
        return failure();
    currentStage = nullptr;
    currentDomain = -1;
    // A value kept from one program for another is one buffer: the memory
    // plan put both ends at one offset.
    auto keptBuffer = [&](Value out, Value in, const char *what,
                          unsigned i) -> FailureOr<int64_t> {
      const uint32_t a = valueBuffers.lookup(out), b = valueBuffers.lookup(in);
      if (a != b)
        return fb.emitError("stage ")
               << k << "'s " << what << " " << i
               << " is two buffers (the memory plan puts what one program "
                  "keeps for another where the other reads it); run "
                  "--dsc-plan-memory";
      return int64_t(a);
    };
    // What B keeps for W: its last results, W's arguments, in order.
    if (weight) {
      Operation *ret = fb.getBody().front().getTerminator();
      auto kept = fb->getAttrOfType<IntegerAttr>(kWeightStashAttr);
      if (!kept || kept.getInt() != int64_t(weight.getNumArguments()))
        return fb.emitError("stage ")
               << k << "'s backward keeps " << (kept ? kept.getInt() : 0)
               << " values (dsc.weight_stash) "
               << "but its weight-gradient part takes "
               << weight.getNumArguments();
      const unsigned first = ret->getNumOperands() - unsigned(kept.getInt());
      for (unsigned i = 0; i < weight.getNumArguments(); ++i) {
        FailureOr<int64_t> id =
            keptBuffer(ret->getOperand(first + i), weight.getArgument(i),
                       "weight stash value", i);
        if (failed(id))
          return failure();
        stage.weightStash.push_back(*id);
      }
    }
    bool last = k + 1 == numStages;
    stage.input = valueBuffers.lookup(fwd.getArgument(0));
    if (!last) {
      Operation *ret = fwd.getBody().front().getTerminator();
      stage.output = valueBuffers.lookup(ret->getOperand(0));
      stage.outputGrad = valueBuffers.lookup(fb.getArgument(1));
      // The residuals a split backward reads (--dsc-stage-backward): the
      // forward's results after its output, the backward's arguments after
      // the output's gradient, in the same order.
      if (ret->getNumOperands() != fb.getNumArguments() - 1)
        return fb.emitError("stage ")
               << k << "'s forward returns " << ret->getNumOperands() - 1
               << " residuals but its backward takes "
               << fb.getNumArguments() - 2;
      for (unsigned i = 1; i < ret->getNumOperands(); ++i) {
        FailureOr<int64_t> id = keptBuffer(
            ret->getOperand(i), fb.getArgument(i + 1), "residual", i - 1);
        if (failed(id))
          return failure();
        stage.residuals.push_back(*id);
      }
    }
    if (valueBuffers.lookup(fwd.getArgument(0)) !=
        valueBuffers.lookup(fb.getArgument(0)))
      return fb.emitError("stage ")
             << k << "'s forward and backward read their input from two "
             << "buffers; run --dsc-plan-memory";
    // The banks of slots the memory plan laid out for what it keeps.
    auto banks = fwd->getAttrOfType<DictionaryAttr>(kSlotBanksAttr);
    if (!banks)
      return fwd.emitError("stage ")
             << k << "'s forward has no dsc.slot_banks; run --dsc-plan-memory";
    for (auto [name, bank] :
         {std::make_pair("activation", &stage.activationSlots),
          std::make_pair("gradient", &stage.gradientSlots),
          std::make_pair("weight", &stage.weightSlots)})
      if (auto fields = banks.getAs<DenseI64ArrayAttr>(name)) {
        bank->offset = uint64_t(fields[0]);
        bank->stride = uint64_t(fields[1]);
        bank->slots = fields[2];
      }
    plan.stages.push_back(std::move(stage));
    // Model FLOPs: the stages' backwards together are the model's once.
    for (func::FuncOp func : {fb, weight})
      if (func)
        func.walk(
            [&](CostOpInterface op) { flops += op.getCost().matmulFlops; });
  }
  for (int64_t r = 0; r < ranks; ++r) {
    auto opt = lookupProgram<func::FuncOp>(module, ProgramRole::Optimizer, r);
    if (!opt)
      return module.emitError("lowering pipeline rank ")
             << r << " needs its optimizer program (dsc.program, dsc.stage "
             << "= " << r << "); run --dsc-optimizer";
    auto step =
        lookupProgram<func::FuncOp>(module, ProgramRole::PipelineStep, r);
    if (!step)
      return module.emitError("lowering pipeline stage ")
             << r << " needs its pipeline_step program (the schedule); run "
             << "--dsc-pipeline-schedule";
    rt::PipelineStage &stage = plan.stages[size_t(r)];
    std::string prefix = ("stage" + Twine(r) + ".").str();
    stage.optimizer = prefix + "optimizer";
    stage.step = prefix + "step";
    currentStage = &stage;
    currentDomain = r;
    if (failed(lowerProgram(opt, stage.optimizer)))
      return failure();
    // A 1-bit optimizer's step after its warm-up, on this rank's stage's
    // data-parallel group.
    if (auto compressed = lookupProgram<func::FuncOp>(
            module, ProgramRole::CompressedOptimizer, r)) {
      auto from = compressed->getAttrOfType<IntegerAttr>(kFromStepAttr);
      if (!from)
        return compressed.emitError("a compressed_optimizer program needs "
                                    "dsc.from_step, the first step it runs");
      plan.compressionFromStep = from.getInt();
      stage.compressedOptimizer = prefix + rt::kCompressedOptimizerProgram;
      if (failed(lowerProgram(compressed, stage.compressedOptimizer)))
        return failure();
    }
    currentStage = nullptr;
    currentDomain = -1;
    if (failed(lowerStep(step, *shape, r, stage.step)))
      return failure();
  }
  // A rank's other stages report its optimizer's norm and learning rate.
  for (int64_t k = ranks; k < numStages; ++k) {
    const rt::PipelineStage &own = plan.stages[size_t(k % ranks)];
    plan.stages[size_t(k)].gradNorm = own.gradNorm;
    plan.stages[size_t(k)].learningRate = own.learningRate;
    plan.stages[size_t(k)].compressedGradNorm = own.compressedGradNorm;
    plan.stages[size_t(k)].compressedLearningRate = own.compressedLearningRate;
  }
  // What one rank runs, on average over the ranks (Megatron's per-GPU
  // model FLOPs).
  plan.summary.flopsPerMicroBatch = flops / uint64_t(ranks);
  // The well-known scalars: the last stage's (every rank's norm and
  // learning rate are equal).
  const rt::PipelineStage &last = plan.stages.back();
  plan.loss = uint32_t(last.loss);
  plan.gradNorm = last.gradNorm;
  plan.learningRate = last.learningRate;
  plan.compressedGradNorm = last.compressedGradNorm;
  plan.compressedLearningRate = last.compressedLearningRate;
  return success();
}

LogicalResult PlanBuilder::lowerStep(func::FuncOp func,
                                     const PipelineShape &shape, int64_t rank,
                                     StringRef programName) {
  rt::Program program;
  program.name = programName.str();
  auto stageOf = [&](std::optional<int64_t> chunk) {
    return chunk.value_or(0) * shape.ranks() + rank;
  };
  // The slot each micro-batch's kept values use, by the memory plan's rule
  // (it sized the banks with it). A step the rule cannot follow (edited by
  // hand) is lowered as written, with the slots as far as the rule got (-1
  // past that): the op checks below and validatePlan name what is wrong.
  std::optional<std::vector<::dsc::PipelineStepOp>> ops =
      readPipelineStep(func, shape);
  const ::dsc::PipelineSlots slots =
      ops ? ::dsc::assignPipelineSlots(
                *ops, rank, shape.ranks(), shape.stages - 1,
                plan.schedule == ::dsc::PipelineScheduleKind::ZeroBubbleH1)
          : ::dsc::PipelineSlots();
  auto slotsAt = [&](size_t i) {
    return i < slots.slotOf.size() ? slots.slotOf[i]
                                   : std::array<int64_t, 3>{-1, -1, -1};
  };
  size_t index = 0;
  // A forward, backward or weight-gradient part: the callee's stage and
  // the micro-batch.
  auto stageCall = [&](auto callOp, auto encoded, rt::Instruction &inst) {
    auto callee = module.lookupSymbol<func::FuncOp>(callOp.getCallee());
    encoded.stage = callee ? getPipelineStage(callee).value_or(-1) : -1;
    encoded.microBatch = int64_t(callOp.getMicrobatch());
    setSlots(encoded, slotsAt(index));
    encoded.encode(inst);
    inst.name = callOp.getCallee().str();
    return encoded.stage;
  };
  for (Operation &op : func.getBody().front().without_terminator()) {
    rt::Instruction inst;
    int64_t buffer = 0; // a message's boundary buffer
    int64_t stage = rank;
    if (auto forward = dyn_cast<PipelineForwardOp>(op)) {
      stage = stageCall(forward, rt::ops::PipelineForward(), inst);
    } else if (auto backward = dyn_cast<PipelineBackwardOp>(op)) {
      stage = stageCall(backward, rt::ops::PipelineBackward(), inst);
    } else if (auto weight = dyn_cast<PipelineBackwardWeightOp>(op)) {
      stage = stageCall(weight, rt::ops::PipelineBackwardWeight(), inst);
    } else if (auto send = dyn_cast<PipelineSendOp>(op)) {
      const bool activation = send.getMessage() == PipelineMessage::Activation;
      stage = stageOf(send.getChunk());
      if (stage >= int64_t(plan.stages.size()))
        return op.emitOpError("names stage ")
               << stage << " of " << plan.stages.size();
      rt::ops::PipelineSend m;
      m.stage = stage;
      m.peer = int64_t(send.getPeer());
      m.microBatch = int64_t(send.getMicrobatch());
      m.encode(inst);
      const rt::PipelineStage &st = plan.stages[size_t(stage)];
      buffer = activation ? st.output : st.inputGrad;
      inst.inputs.push_back(uint32_t(buffer));
      inst.name = (activation ? "send activation " : "send gradient ") +
                  std::to_string(m.microBatch);
    } else if (auto recv = dyn_cast<PipelineRecvOp>(op)) {
      const bool activation = recv.getMessage() == PipelineMessage::Activation;
      stage = stageOf(recv.getChunk());
      if (stage >= int64_t(plan.stages.size()))
        return op.emitOpError("names stage ")
               << stage << " of " << plan.stages.size();
      rt::ops::PipelineRecv m;
      m.stage = stage;
      m.peer = int64_t(recv.getPeer());
      m.microBatch = int64_t(recv.getMicrobatch());
      m.slot = slotsAt(
          index)[activation ? ::dsc::kActivationSlots : ::dsc::kGradientSlots];
      m.encode(inst);
      const rt::PipelineStage &st = plan.stages[size_t(stage)];
      buffer = activation ? st.input : st.outputGrad;
      inst.outputs.push_back(uint32_t(buffer));
      inst.name = (activation ? "recv activation " : "recv gradient ") +
                  std::to_string(m.microBatch);
    } else {
      return op.emitOpError("cannot be lowered in a pipeline_step program "
                            "(only dsc.pipeline_forward, _backward, "
                            "_backward_weight, _send and _recv)");
    }
    if (stage < 0)
      return op.emitOpError("calls a function that is no pipeline stage's");
    // The op's verifier allows only neighbours; a stage without the
    // message's buffer (-1) means the stages and the step disagree.
    if (buffer < 0)
      return op.emitOpError("moves a boundary buffer that stage ")
             << stage << " does not have";
    program.instructions.push_back(std::move(inst));
    ++index;
  }
  plan.programs.push_back(std::move(program));
  return success();
}

LogicalResult PlanBuilder::lowerProgram(func::FuncOp func,
                                        StringRef programName) {
  currentFunc = func;
  auto inputOffsets = func->getAttrOfType<DenseI64ArrayAttr>(kInputOffsetsAttr);
  if (!inputOffsets)
    return func.emitError("function was not memory-planned");
  const std::optional<ProgramRole> funcRole = getProgramRole(func);
  const bool inference =
      funcRole == ProgramRole::Prefill || funcRole == ProgramRole::Decode;
  for (BlockArgument arg : func.getArguments()) {
    if (inference) {
      // The request's inputs, by name: the driver fills them.
      auto input =
          func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kInputAttr);
      if (!input)
        return func.emitError("an inference program's argument ")
               << arg.getArgNumber() << " has no " << kInputAttr;
      FailureOr<uint32_t> id = addBuffer(
          arg.getLoc(), arg.getType(), inputOffsets[arg.getArgNumber()],
          rt::BufferRole::Input, (programName + "." + input.getValue()).str());
      if (failed(id))
        return failure();
      valueBuffers[arg] = *id;
      continue;
    }
    // Token ids come first, targets after; a pipeline stage's float
    // arguments are its input activation and its output's gradient.
    bool isFloat =
        !cast<RankedTensorType>(arg.getType()).getElementType().isInteger(32);
    bool isTokens = !isFloat && arg.getArgNumber() == 0;
    rt::BufferRole role = isFloat    ? rt::BufferRole::Boundary
                          : isTokens ? rt::BufferRole::Tokens
                                     : rt::BufferRole::Targets;
    // A split stage backward (--dsc-stage-backward) takes the forward's
    // residuals after the output's gradient.
    std::string name =
        isTokens                  ? "tokens"
        : !isFloat                ? "targets"
        : arg.getArgNumber() == 0 ? (programName + ".input").str()
        : arg.getArgNumber() == 1
            ? (programName + ".output_grad").str()
            : (programName + ".residual." + Twine(arg.getArgNumber() - 2))
                  .str();
    // A weight-gradient part takes only what its backward kept for it.
    if (getProgramRole(func) == ProgramRole::BackwardWeight) {
      role = rt::BufferRole::Boundary;
      name = (programName + ".kept." + Twine(arg.getArgNumber())).str();
      isFloat = true;
      isTokens = false;
    }
    if (isFloat && !currentStage)
      return func.emitError("a program's float arguments must be pipeline "
                            "boundaries (only stage functions have them)");
    FailureOr<uint32_t> id =
        addBuffer(arg.getLoc(), arg.getType(), inputOffsets[arg.getArgNumber()],
                  role, name);
    if (failed(id))
      return failure();
    valueBuffers[arg] = *id;
    if (!isFloat)
      (isTokens ? plan.tokens : plan.targets) = *id;
  }

  // Results and constants are persistent; name them for the executor.
  Block &block = func.getBody().front();
  Operation *terminator = block.getTerminator();
  llvm::DenseMap<Value, std::pair<rt::BufferRole, std::string>> special;
  std::optional<ProgramRole> role = getProgramRole(func);
  // A backward's last results its weight-gradient part takes.
  unsigned firstKept = terminator->getNumOperands();
  if (auto kept = func->getAttrOfType<IntegerAttr>(kWeightStashAttr))
    firstKept -= unsigned(kept.getInt());
  for (auto [index, result] : llvm::enumerate(terminator->getOperands())) {
    bool scalar =
        cast<RankedTensorType>(result.getType()).getNumElements() == 1;
    if (currentStage && index >= firstKept) {
      special[result] = {
          rt::BufferRole::Boundary,
          (programName + ".kept." + Twine(index - firstKept)).str()};
      continue;
    }
    if (currentStage) {
      // A stage's results: its output activation or evaluation loss
      // (forward), its loss and input gradient (backward), the norm and
      // learning rate (optimizer).
      std::string stageName = programName.str();
      if (role == ProgramRole::Optimizer)
        special[result] = {rt::BufferRole::Scalar,
                           stageName +
                               (index == 0 ? ".grad_norm" : ".learning_rate")};
      else if (role == ProgramRole::CompressedOptimizer)
        special[result] = {rt::BufferRole::Scalar,
                           stageName + (index == 0 ? ".compressed_grad_norm"
                                                   : ".compressed_lr")};
      else if (role == ProgramRole::Forward)
        special[result] =
            scalar && index == 0
                ? std::make_pair(rt::BufferRole::Scalar,
                                 stageName + ".eval_loss")
                : std::make_pair(rt::BufferRole::Boundary,
                                 index == 0 ? stageName + ".output"
                                            : stageName + ".residual." +
                                                  std::to_string(index - 1));
      else
        special[result] =
            scalar ? std::make_pair(rt::BufferRole::Loss, stageName + ".loss")
                   : std::make_pair(rt::BufferRole::Boundary,
                                    stageName + ".input_grad");
      continue;
    }
    if (inference)
      special[result] = {rt::BufferRole::Output,
                         (programName + ".next_tokens").str()};
    else if (role == ProgramRole::ForwardBackward)
      special[result] = {rt::BufferRole::Loss, "loss"};
    else if (role == ProgramRole::Forward)
      special[result] = {rt::BufferRole::Scalar, "eval_loss"};
    else if (role == ProgramRole::CompressedOptimizer)
      special[result] = {rt::BufferRole::Scalar,
                         index == 0 ? "compressed.grad_norm"
                                    : "compressed.learning_rate"};
    else if (zeroOneAdamKind(role) >= 0)
      special[result] = {
          rt::BufferRole::Scalar,
          (programName + (index == 0 ? ".grad_norm" : ".learning_rate")).str()};
    else
      special[result] = {rt::BufferRole::Scalar, index == 0   ? "grad_norm"
                                                 : index == 1 ? "learning_rate"
                                                              : "beta1"};
  }

  rt::Program program;
  program.name = programName.str();
  unsigned tempIndex = 0;
  for (Operation &op : block.without_terminator()) {
    auto offsets = op.getAttrOfType<DenseI64ArrayAttr>(kOffsetsAttr);
    if (op.getNumResults() && !offsets)
      return op.emitOpError("has no planned offsets; run --dsc-plan-memory");
    // Result buffers.
    for (auto [i, result] : llvm::enumerate(op.getResults())) {
      if (auto read = dyn_cast<GetParameterOp>(op)) {
        valueBuffers[result] = declBuffer(read.getNameAttr());
        continue;
      }
      rt::BufferRole role = rt::BufferRole::Temporary;
      std::string name;
      rt::BufferInit init;
      if (auto it = special.find(result); it != special.end()) {
        role = it->second.first;
        name = it->second.second;
      } else if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
        auto splat = dyn_cast<SplatElementsAttr>(constant.getValue());
        if (!splat || !isa<FloatType>(splat.getElementType()))
          return op.emitOpError("only float splat constants can be lowered");
        role = rt::BufferRole::Constant;
        name = (programName + ".constant" + Twine(tempIndex++)).str();
        init.kind = rt::InitKind::Constant;
        init.value = splat.getSplatValue<APFloat>().convertToDouble();
      } else {
        std::string where = nameOf(op.getLoc());
        name = (programName + "." + (where.empty() ? "tmp" : where) + "." +
                Twine(tempIndex++))
                   .str();
      }
      FailureOr<uint32_t> id = addBuffer(op.getLoc(), result.getType(),
                                         offsets[i], role, name, init);
      if (failed(id))
        return failure();
      valueBuffers[result] = *id;
      if (currentStage) {
        if (role == rt::BufferRole::Loss)
          currentStage->loss = *id;
        else if (StringRef(name).ends_with(".compressed_grad_norm"))
          currentStage->compressedGradNorm = *id;
        else if (StringRef(name).ends_with(".compressed_lr"))
          currentStage->compressedLearningRate = *id;
        else if (StringRef(name).ends_with(".grad_norm"))
          currentStage->gradNorm = *id;
        else if (StringRef(name).ends_with(".learning_rate"))
          currentStage->learningRate = *id;
        else if (StringRef(name).ends_with(".input_grad"))
          currentStage->inputGrad = *id;
      } else if (role == rt::BufferRole::Loss)
        plan.loss = *id;
      else if (name == "grad_norm")
        plan.gradNorm = *id;
      else if (name == "learning_rate")
        plan.learningRate = *id;
      else if (name == "beta1")
        plan.beta1 = *id;
      else if (name == "compressed.grad_norm")
        plan.compressedGradNorm = *id;
      else if (name == "compressed.learning_rate")
        plan.compressedLearningRate = *id;
      else if (const int k = zeroOneAdamKind(getProgramRole(func));
               k >= 0 && name == (programName + ".grad_norm").str())
        plan.zeroOneAdam.gradNorm[k] = *id;
      else if (k >= 0 && name == (programName + ".learning_rate").str())
        plan.zeroOneAdam.learningRate[k] = *id;
    }

    if (isa<SwapInOp, SwapOutOp>(op)) {
      if (failed(lowerSwap(&op, program)))
        return failure();
      continue;
    }
    // One compressed all-reduce of the bucket: its errors, then its states.
    if (auto reduce = dyn_cast<CompressedAllReduceStatesOp>(op)) {
      FailureOr<int64_t> mask =
          axesMaskOf(reduce, reduce.getMeshAttr(), reduce.getMeshAxes());
      if (failed(mask))
        return failure();
      rt::Instruction inst;
      inst.name =
          ("compressed_all_reduce." + reduce.getWorkerErrorAttr().getValue())
              .str();
      inst.outputs = {declBuffer(reduce.getWorkerErrorAttr()),
                      declBuffer(reduce.getServerErrorAttr())};
      for (Attribute x : reduce.getStates())
        inst.outputs.push_back(declBuffer(cast<FlatSymbolRefAttr>(x)));
      rt::ops::CompressedAllReduce collective;
      collective.axes = *mask;
      collective.encode(inst);
      program.instructions.push_back(std::move(inst));
      continue;
    }
    rt::Instruction inst;
    inst.name = nameOf(op.getLoc());
    bool skip = false;
    if (failed(lowerOp(op, inst, skip)))
      return failure();
    if (skip)
      continue;
    if (inst.inputs.empty())
      for (Value operand : op.getOperands())
        inst.inputs.push_back(valueBuffers.lookup(operand));
    if (inst.outputs.empty())
      for (Value result : op.getResults())
        inst.outputs.push_back(valueBuffers.lookup(result));
    for (rt::Instruction &before : prelude)
      program.instructions.push_back(std::move(before));
    prelude.clear();
    program.instructions.push_back(std::move(inst));
  }
  plan.programs.push_back(std::move(program));
  return success();
}

LogicalResult PlanBuilder::lowerOp(Operation &op, rt::Instruction &inst,
                                   bool &skip) {
  namespace ops = rt::ops;
  auto shapeOf = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getShape();
  };
  auto f64 = [](FloatAttr attr) { return attr.getValueAsDouble(); };
  // dsc.attention and its gradient and fused forms share their attributes
  // and the instructions' fields.
  auto encodeAttention = [&](auto at, auto fields) -> LogicalResult {
    FailureOr<int64_t> heads = headAxesMaskOf(at, at.getHeadAxesAttr());
    if (failed(heads))
      return failure();
    fields.heads = at.getNumHeadsAttr().getInt();
    fields.causal = at.getCausal();
    fields.seed = at.getSeedAttr().getInt();
    fields.headAxes = *heads;
    fields.window = at.getWindow();
    fields.dropout = f64(at.getDropoutAttr());
    fields.encode(inst);
    return success();
  };
  return llvm::TypeSwitch<Operation *, LogicalResult>(&op)
      .Case<GetParameterOp, arith::ConstantOp, StageAuxiliaryLossOp>([&](auto) {
        skip = true;
        return success();
      })
      .Case<EmbeddingOp>([&](auto) {
        ops::Embedding().encode(inst);
        return success();
      })
      .Case<PagedAttentionOp>([&](PagedAttentionOp pa) {
        ops::PagedAttention attention;
        attention.heads = int64_t(pa.getNumHeads());
        attention.kvHeads = int64_t(pa.getNumKvHeads());
        attention.window = int64_t(pa.getWindow());
        attention.encode(inst);
        for (Value operand : pa->getOperands())
          inst.inputs.push_back(valueBuffers.lookup(operand));
        inst.outputs = {valueBuffers.lookup(pa.getResult()),
                        declBuffer(pa.getCacheAttr())};
        return success();
      })
      .Case<RotaryAtOp>([&](RotaryAtOp ro) {
        ops::RotaryAt rotary;
        rotary.headDim = int64_t(ro.getHeadDim());
        rotary.rotaryDims = int64_t(ro.getRotaryDims());
        rotary.base = f64(ro.getBaseAttr());
        rotary.encode(inst);
        return success();
      })
      .Case<PositionEmbeddingAtOp>([&](auto) {
        ops::PositionEmbeddingAt().encode(inst);
        return success();
      })
      .Case<GatherRowsOp>([&](auto) {
        ops::GatherRows().encode(inst);
        return success();
      })
      .Case<SampleOp>([&](SampleOp sample) {
        ops::Sample s;
        s.classes = int64_t(sample.getClasses());
        s.encode(inst);
        return success();
      })
      .Case<PositionEmbeddingOp>([&](PositionEmbeddingOp pos) {
        ArrayRef<int64_t> shape = shapeOf(pos.getResult());
        ops::PositionEmbedding pe;
        pe.batch = shape[0];
        pe.seq = shape[1];
        pe.encode(inst);
        return success();
      })
      .Case<MatmulOp>([&](MatmulOp mm) {
        matmulOf(shapeOf(mm.getLhs()), shapeOf(mm.getRhs()),
                 shapeOf(mm.getResult()), mm.getTransposeLhs(),
                 mm.getTransposeRhs())
            .encode(inst);
        return success();
      })
      .Case<AddOp>([&](auto) {
        ops::Add().encode(inst);
        return success();
      })
      .Case<MulOp>([&](auto) {
        ops::Mul().encode(inst);
        return success();
      })
      .Case<BiasAddOp>([&](auto) {
        ops::BiasAdd().encode(inst);
        return success();
      })
      .Case<GeluOp>([&](GeluOp gelu) {
        if (gelu.getExact())
          ops::GeluExact().encode(inst);
        else
          ops::Gelu().encode(inst);
        return success();
      })
      .Case<BiasGeluOp>([&](BiasGeluOp fused) {
        ops::BiasGelu op;
        op.exact = fused.getExact();
        op.encode(inst);
        return success();
      })
      .Case<SwigluOp>([&](auto) {
        ops::Swiglu().encode(inst);
        return success();
      })
      .Case<MoeRouteOp>([&](MoeRouteOp route) {
        ops::MoeRoute r;
        moeRoutingOf(route, r);
        r.encode(inst);
        return success();
      })
      .Case<MoeRouteGradOp>([&](MoeRouteGradOp grad) {
        ops::MoeRouteGrad r;
        moeRoutingOf(grad, r);
        r.encode(inst);
        return success();
      })
      .Case<MoeDispatchOp>([&](MoeDispatchOp dispatch) {
        if (dispatch.getGates())
          ops::MoeDispatchScaled().encode(inst);
        else
          ops::MoeDispatch().encode(inst);
        return success();
      })
      .Case<MoeCombineOp>([&](MoeCombineOp combine) {
        if (combine.getGates())
          ops::MoeCombine().encode(inst);
        else
          ops::MoeCombineSum().encode(inst);
        return success();
      })
      .Case<MoeGatesGradOp>([&](auto) {
        ops::MoeGatesGrad().encode(inst);
        return success();
      })
      .Case<AuxiliaryLossOp>([&](AuxiliaryLossOp aux) {
        // The reported loss is the language model's; the auxiliary losses
        // only join its gradient (their operands are not read here).
        inst.inputs = {valueBuffers.lookup(aux.getLoss())};
        ops::Copy().encode(inst);
        return success();
      })
      .Case<SwigluGradOp>([&](auto) {
        ops::SwigluGrad().encode(inst);
        return success();
      })
      .Case<RepeatHeadsOp>([&](RepeatHeadsOp rh) {
        ops::RepeatHeads repeat;
        repeat.headDim = rh.getHeadDim();
        repeat.repeats = rh.getRepeats();
        repeat.encode(inst);
        return success();
      })
      .Case<RepeatHeadsGradOp>([&](RepeatHeadsGradOp rh) {
        ops::RepeatHeadsGrad repeat;
        repeat.headDim = rh.getHeadDim();
        repeat.repeats = rh.getRepeats();
        repeat.encode(inst);
        return success();
      })
      .Case<RotaryOp>([&](RotaryOp ro) {
        ops::Rotary rotary;
        rotary.headDim = ro.getHeadDim();
        rotary.rotaryDims = ro.getRotaryDims();
        rotary.inverse = ro.getInverse();
        rotary.base = f64(ro.getBaseAttr());
        rotary.encode(inst);
        return success();
      })
      .Case<LayerNormOp>([&](LayerNormOp ln) {
        ops::LayerNorm norm;
        norm.eps = f64(ln.getEpsilonAttr());
        norm.encode(inst);
        return success();
      })
      .Case<RmsNormOp>([&](RmsNormOp rn) {
        ops::RmsNorm norm;
        norm.eps = f64(rn.getEpsilonAttr());
        norm.epsOutside = rn.getEpsilonOutsideSqrt();
        norm.encode(inst);
        return success();
      })
      .Case<SoftmaxOp>([&](auto) {
        ops::Softmax().encode(inst);
        return success();
      })
      .Case<AttentionOp>(
          [&](AttentionOp at) { return encodeAttention(at, ops::Attention()); })
      .Case<AttentionLseOp>([&](AttentionLseOp at) {
        return encodeAttention(at, ops::AttentionLse());
      })
      .Case<CrossEntropyOp>([&](CrossEntropyOp op) {
        ops::CrossEntropy loss;
        loss.classes = op.getClasses();
        loss.encode(inst);
        return success();
      })
      .Case<CopyToParallelOp>([&](CopyToParallelOp enter) {
        // Identity forward: a view unless the planner had to copy.
        uint32_t in = valueBuffers.lookup(enter.getInput());
        uint32_t out = valueBuffers.lookup(enter.getResult());
        skip = plan.buffers[in].offset == plan.buffers[out].offset;
        ops::Copy().encode(inst);
        return success();
      })
      .Case<AllReduceOp>([&](AllReduceOp reduce) -> LogicalResult {
        // In place on the result's buffer, after a copy when the planner
        // did not give the result its input's bytes.
        FailureOr<int64_t> mask =
            axesMaskOf(reduce, reduce.getMeshAttr(), reduce.getMeshAxes());
        if (failed(mask))
          return failure();
        uint32_t in = valueBuffers.lookup(reduce.getInput());
        uint32_t out = valueBuffers.lookup(reduce.getResult());
        if (plan.buffers[in].offset != plan.buffers[out].offset) {
          rt::Instruction copy;
          ops::Copy().encode(copy);
          copy.name = inst.name;
          copy.inputs = {in};
          copy.outputs = {out};
          prelude.push_back(std::move(copy));
        }
        ops::AllReduce allReduce;
        allReduce.axes = *mask;
        allReduce.reduce = static_cast<int64_t>(reduce.getReduction());
        allReduce.encode(inst);
        inst.inputs = inst.outputs = {out};
        return success();
      })
      .Case<AllGatherOp>([&](AllGatherOp op) {
        return lowerChunked<ops::GatherChunks>(op, op.getInput(),
                                               op.getGatherDimAttr(), inst);
      })
      .Case<AllToAllOp>([&](AllToAllOp op) {
        // The dims before the split (concat) dim are the outer runs of the
        // send (receive) blocks.
        auto outer = [](Value v, int64_t dim) {
          ArrayRef<int64_t> shape =
              cast<RankedTensorType>(v.getType()).getShape();
          int64_t n = 1;
          for (int64_t d = 0; d < dim; ++d)
            n *= shape[d];
          return n;
        };
        ops::AllToAll exchange;
        exchange.sendOuter = outer(op.getInput(), op.getSplitDim());
        exchange.recvOuter = outer(op.getResult(), op.getConcatDim());
        exchange.scale =
            op.getScaleAttr() ? op.getScaleAttr().getValueAsDouble() : 1.0;
        return lowerOverGroup(op, op.getMeshAttr(), op.getMeshAxes(), inst,
                              exchange);
      })
      .Case<ReduceScatterOp>([&](ReduceScatterOp op) {
        ops::ReduceScatterChunks scatter;
        scatter.reduce = static_cast<int64_t>(op.getReduction());
        return lowerChunked(op, op.getResult(), op.getScatterDimAttr(), inst,
                            scatter);
      })
      .Case<ScatterToParallelOp>([&](ScatterToParallelOp op) {
        return lowerChunked<ops::TakeChunk>(op, op.getResult(), op.getDimAttr(),
                                            inst);
      })
      .Case<VocabParallelEmbeddingOp>(
          [&](VocabParallelEmbeddingOp op) -> LogicalResult {
            return lowerOverGroup<ops::VocabParallelEmbedding>(
                op, op.getMeshAttr(), op.getMeshAxes(), inst);
          })
      .Case<VocabParallelEmbeddingGradOp>(
          [&](VocabParallelEmbeddingGradOp op) -> LogicalResult {
            return lowerOverGroup<ops::VocabParallelEmbeddingGrad>(
                op, op.getMeshAttr(), op.getMeshAxes(), inst);
          })
      .Case<VocabParallelCrossEntropyOp>(
          [&](VocabParallelCrossEntropyOp op) -> LogicalResult {
            ops::VocabParallelCrossEntropy loss;
            loss.classes = op.getClasses();
            return lowerOverGroup(op, op.getMeshAttr(), op.getMeshAxes(), inst,
                                  loss);
          })
      .Case<VocabParallelCrossEntropyGradOp>(
          [&](VocabParallelCrossEntropyGradOp op) -> LogicalResult {
            if (auto constant = op.getGrad().getDefiningOp<arith::ConstantOp>();
                constant && !bakedSeeds)
              plan.gradientSeed = valueBuffers.lookup(constant.getResult());
            ops::VocabParallelCrossEntropyGrad grad;
            grad.classes = op.getClasses();
            return lowerOverGroup(op, op.getMeshAttr(), op.getMeshAxes(), inst,
                                  grad);
          })
      .Case<ReshapeOp>([&](ReshapeOp reshape) {
        // A view shares its input's bytes: nothing to run.
        uint32_t in = valueBuffers.lookup(reshape.getInput());
        uint32_t out = valueBuffers.lookup(reshape.getResult());
        skip = plan.buffers[in].offset == plan.buffers[out].offset;
        ops::Copy().encode(inst);
        return success();
      })
      .Case<TransposeOp>([&](TransposeOp tr) {
        ops::Transpose transpose;
        transpose.permutation.assign(tr.getPermutation().begin(),
                                     tr.getPermutation().end());
        transpose.encode(inst);
        return success();
      })
      .Case<SliceOp>([&](SliceOp sl) {
        ops::Slice slice;
        slice.offsets.assign(sl.getOffsets().begin(), sl.getOffsets().end());
        slice.encode(inst);
        return success();
      })
      .Case<ConcatOp>([&](ConcatOp cc) {
        ops::Concat concat;
        concat.dim = cc.getDimAttr().getInt();
        concat.encode(inst);
        return success();
      })
      .Case<DropoutOp>([&](DropoutOp dr) -> LogicalResult {
        if (ArrayAttr shard = dr.getShardAxesAttr()) {
          FailureOr<int64_t> mask =
              headAxesMaskOf(dr, shard, "splits its tokens");
          if (failed(mask))
            return failure();
          ops::DropoutChunk dropout;
          dropout.seed = dr.getSeedAttr().getInt();
          dropout.p = f64(dr.getPAttr());
          dropout.axes = *mask;
          dropout.encode(inst);
          return success();
        }
        ops::Dropout dropout;
        dropout.seed = dr.getSeedAttr().getInt();
        dropout.p = f64(dr.getPAttr());
        dropout.encode(inst);
        return success();
      })
      .Case<CastOp>([&](auto) {
        // The dtypes are the buffers' (fp32 master weight -> bf16 copy, bf16
        // gradient -> fp32).
        ops::Cast().encode(inst);
        return success();
      })
      .Case<EmbeddingGradOp>([&](auto) {
        ops::EmbeddingGrad().encode(inst);
        return success();
      })
      .Case<PositionEmbeddingGradOp>([&](PositionEmbeddingGradOp pg) {
        ArrayRef<int64_t> shape = shapeOf(pg.getGrad());
        ops::PositionEmbeddingGrad grad;
        grad.batch = shape[0];
        grad.seq = shape[1];
        grad.encode(inst);
        return success();
      })
      .Case<BiasGradOp>([&](auto) {
        ops::BiasGrad().encode(inst);
        return success();
      })
      .Case<GeluGradOp>([&](GeluGradOp grad) {
        if (grad.getExact())
          ops::GeluExactGrad().encode(inst);
        else
          ops::GeluGrad().encode(inst);
        return success();
      })
      .Case<BiasGeluGradOp>([&](BiasGeluGradOp fused) {
        ops::BiasGeluGrad op;
        op.exact = fused.getExact();
        op.encode(inst);
        return success();
      })
      .Case<LayerNormGradOp>([&](LayerNormGradOp lg) {
        ops::LayerNormGrad grad;
        grad.eps = f64(lg.getEpsilonAttr());
        grad.encode(inst);
        return success();
      })
      .Case<RmsNormGradOp>([&](RmsNormGradOp rg) {
        ops::RmsNormGrad grad;
        grad.eps = f64(rg.getEpsilonAttr());
        grad.epsOutside = rg.getEpsilonOutsideSqrt();
        grad.encode(inst);
        return success();
      })
      .Case<SoftmaxGradOp>([&](auto) {
        ops::SoftmaxGrad().encode(inst);
        return success();
      })
      .Case<AttentionGradOp>([&](AttentionGradOp ag) {
        return encodeAttention(ag, ops::AttentionGrad());
      })
      .Case<AttentionGradLseOp>([&](AttentionGradLseOp ag) {
        return encodeAttention(ag, ops::AttentionGradLse());
      })
      .Case<CrossEntropyGradOp>([&](CrossEntropyGradOp cg) {
        ops::CrossEntropyGrad grad;
        grad.classes = cg.getClasses();
        grad.encode(inst);
        if (auto constant = cg.getGrad().getDefiningOp<arith::ConstantOp>();
            constant && !bakedSeeds)
          plan.gradientSeed = valueBuffers.lookup(constant.getResult());
        return success();
      })
      .Case<SliceGradOp>([&](SliceGradOp sg) {
        ops::SliceGrad grad;
        grad.offsets.assign(sg.getOffsets().begin(), sg.getOffsets().end());
        grad.encode(inst);
        return success();
      })
      .Case<MatmulAccumulateOp>([&](MatmulAccumulateOp mm) {
        // The product written into its state as the GEMM computes it.
        FailureOr<SmallVector<int64_t>> out =
            matmulShape(mm, mm.getLhs(), mm.getRhs(), mm.getTransposeLhs(),
                        mm.getTransposeRhs());
        if (failed(out))
          return failure();
        ops::Matmul matmul =
            matmulOf(shapeOf(mm.getLhs()), shapeOf(mm.getRhs()), *out,
                     mm.getTransposeLhs(), mm.getTransposeRhs());
        matmul.accumulate = 1;
        matmul.encode(inst);
        inst.inputs = {valueBuffers.lookup(mm.getLhs()),
                       valueBuffers.lookup(mm.getRhs())};
        inst.outputs = {declBuffer(mm.getStateAttr())};
        return success();
      })
      .Case<AccumulateOp>([&](AccumulateOp acc) {
        ops::Accumulate().encode(inst);
        inst.inputs = {valueBuffers.lookup(acc.getValue())};
        inst.outputs = {declBuffer(acc.getStateAttr())};
        return success();
      })
      .Case<LearningRateOp>([&](LearningRateOp lr) {
        rt::LrScheduleKind kind = rt::LrScheduleKind::Constant;
        switch (lr.getSchedule()) {
        case LrSchedule::Constant:
          kind = rt::LrScheduleKind::Constant;
          break;
        case LrSchedule::WarmupConstant:
          kind = rt::LrScheduleKind::WarmupConstant;
          break;
        case LrSchedule::WarmupLinear:
          kind = rt::LrScheduleKind::WarmupLinearDecay;
          break;
        case LrSchedule::WarmupCosine:
          kind = rt::LrScheduleKind::WarmupCosineDecay;
          break;
        case LrSchedule::AnnealingConstant:
          kind = rt::LrScheduleKind::AnnealingConstant;
          break;
        case LrSchedule::AnnealingLinear:
          kind = rt::LrScheduleKind::AnnealingLinear;
          break;
        case LrSchedule::AnnealingCosine:
          kind = rt::LrScheduleKind::AnnealingCosine;
          break;
        case LrSchedule::AnnealingExponential:
          kind = rt::LrScheduleKind::AnnealingExponential;
          break;
        }
        // Warmup from `warmup_start`, linear or logarithmic; decay ends at
        // `min`.
        ops::LearningRate rate;
        rate.kind = static_cast<int64_t>(kind);
        rate.warmup = lr.getWarmupAttr().getInt();
        rate.total = lr.getTotalAttr().getInt();
        rate.warmupLog = lr.getLogWarmup();
        rate.base = f64(lr.getBaseAttr());
        rate.warmupStart = f64(lr.getWarmupStartAttr());
        rate.decayEnd = f64(lr.getMinAttr());
        rate.encode(inst);
        inst.inputs = {};
        return success();
      })
      .Case<CyclicLearningRateOp>([&](CyclicLearningRateOp lr) {
        ops::CyclicLearningRate rate;
        rate.kind = lr.getSchedule() == CyclicLrSchedule::OneCycle ? 1 : 0;
        rate.firstStairs = lr.getFirstStairs();
        rate.secondStairs = lr.getSecondStairs();
        rate.staircase = lr.getStaircase();
        rate.minLr = f64(lr.getMinAttr());
        rate.maxLr = f64(lr.getMaxAttr());
        rate.firstSize = f64(lr.getFirstSizeAttr());
        rate.secondSize = f64(lr.getSecondSizeAttr());
        rate.decaySize = f64(lr.getDecaySizeAttr());
        rate.rate = f64(lr.getRateAttr());
        rate.encode(inst);
        inst.inputs = {};
        return success();
      })
      .Case<ClipGradNormOp>([&](ClipGradNormOp clip) -> LogicalResult {
        for (Attribute grad : clip.getGradients())
          inst.inputs.push_back(declBuffer(cast<FlatSymbolRefAttr>(grad)));
        // A norm over parts of gradients (ZeRO chunks, tensor-sliced or
        // pipeline-stage parts) is summed over the ranks holding them.
        if (clip.getShardedAttr() || anySplitGradient(clip))
          return lowerNormOfParts(clip, inst);
        ops::GlobalNormClip norm;
        norm.maxNorm = f64(clip.getMaxNormAttr());
        norm.encode(inst);
        return success();
      })
      .Case<AdamWOp>([&](AdamWOp adam) -> LogicalResult {
        inst.inputs = {declBuffer(adam.getGradAttr()),
                       valueBuffers.lookup(adam.getLr())};
        inst.outputs = {declBuffer(adam.getParamAttr()),
                        declBuffer(adam.getExpAvgAttr()),
                        declBuffer(adam.getExpAvgSqAttr())};
        // AdamW and ZeRO's AdamWShard take the same hyper-parameters.
        auto fill = [&](auto &step) {
          step.beta1 = f64(adam.getBeta1Attr());
          step.beta2 = f64(adam.getBeta2Attr());
          step.eps = f64(adam.getEpsAttr());
          step.wd = f64(adam.getWeightDecayAttr());
          step.decay = step.wd > 0.0;
        };
        if (Value beta1 = adam.getScheduledBeta1()) {
          // OneCycle's cycle_momentum: the step's beta1 is an input.
          inst.inputs.push_back(valueBuffers.lookup(beta1));
          return encodeUpdate<ops::AdamWScheduledBeta1,
                              ops::AdamWShardScheduledBeta1>(adam, inst, fill);
        }
        return encodeUpdate<ops::AdamW, ops::AdamWShard>(adam, inst, fill);
      })
      .Case<CyclicMomentumOp>([&](CyclicMomentumOp mom) {
        ops::CyclicMomentum m;
        m.firstStairs = mom.getFirstStairs();
        m.secondStairs = mom.getSecondStairs();
        m.minMom = f64(mom.getMinAttr());
        m.maxMom = f64(mom.getMaxAttr());
        m.firstSize = f64(mom.getFirstSizeAttr());
        m.secondSize = f64(mom.getSecondSizeAttr());
        m.decaySize = f64(mom.getDecaySizeAttr());
        m.rate = f64(mom.getRateAttr());
        m.encode(inst);
        inst.inputs = {};
        return success();
      })
      .Case<OnebitAdamOp>([&](OnebitAdamOp adam) -> LogicalResult {
        inst.inputs = {declBuffer(adam.getGradAttr()),
                       valueBuffers.lookup(adam.getLr())};
        inst.outputs = {declBuffer(adam.getParamAttr()),
                        declBuffer(adam.getExpAvgAttr()),
                        declBuffer(adam.getExpAvgSqAttr())};
        // OnebitAdam and ZeRO's OnebitAdamShard take the same floats.
        return encodeUpdate<ops::OnebitAdam, ops::OnebitAdamShard>(
            adam, inst, [&](auto &step) {
              step.beta1 = f64(adam.getBeta1Attr());
              step.beta2 = f64(adam.getBeta2Attr());
              step.eps = f64(adam.getEpsAttr());
              step.wd = f64(adam.getWeightDecayAttr());
            });
      })
      .Case<AdamMomentumOp>([&](AdamMomentumOp momentum) {
        inst.inputs = {declBuffer(momentum.getGradAttr())};
        inst.outputs = {declBuffer(momentum.getExpAvgAttr())};
        ops::AdamMomentum step;
        step.beta1 = f64(momentum.getBeta1Attr());
        step.encode(inst);
        return success();
      })
      .Case<FrozenAdamOp>([&](FrozenAdamOp adam) -> LogicalResult {
        inst.inputs = {declBuffer(adam.getExpAvgAttr()),
                       declBuffer(adam.getExpAvgSqAttr()),
                       valueBuffers.lookup(adam.getLr())};
        inst.outputs = {declBuffer(adam.getParamAttr())};
        return encodeUpdate<ops::FrozenAdam, ops::FrozenAdamShard>(
            adam, inst, [&](auto &step) {
              step.eps = f64(adam.getEpsAttr());
              step.wd = f64(adam.getWeightDecayAttr());
            });
      })
      .Case<ZeroOneAdamUpdateOp>([&](ZeroOneAdamUpdateOp update) {
        inst.inputs = {declBuffer(update.getExpAvgAttr()),
                       declBuffer(update.getExpAvgSqAttr()),
                       valueBuffers.lookup(update.getLr())};
        inst.outputs = {declBuffer(update.getParamAttr()),
                        declBuffer(update.getAccumulatorAttr())};
        ops::ZeroOneAdamUpdate step;
        step.eps = f64(update.getEpsAttr());
        step.wd = f64(update.getWeightDecayAttr());
        step.encode(inst);
        return success();
      })
      .Case<AddLearningRateOp>([&](AddLearningRateOp add) {
        inst.inputs = {valueBuffers.lookup(add.getLr())};
        inst.outputs = {declBuffer(add.getSumAttr())};
        ops::AddLearningRate().encode(inst);
        return success();
      })
      .Case<ZeroOneAdamRewindOp>([&](ZeroOneAdamRewindOp rewind) {
        inst.inputs = {declBuffer(rewind.getExpAvgSqAttr())};
        inst.outputs = {declBuffer(rewind.getParamAttr()),
                        declBuffer(rewind.getAccumulatorAttr())};
        ops::ZeroOneAdamRewind step;
        step.eps = f64(rewind.getEpsAttr());
        step.encode(inst);
        return success();
      })
      .Case<ZeroOneAdamResyncOp>([&](ZeroOneAdamResyncOp resync) {
        inst.inputs = {declBuffer(resync.getExpAvgSqAttr()),
                       declBuffer(resync.getLrSumAttr())};
        inst.outputs = {declBuffer(resync.getParamAttr()),
                        declBuffer(resync.getExpAvgAttr()),
                        declBuffer(resync.getAccumulatorAttr())};
        ops::ZeroOneAdamResync step;
        step.eps = f64(resync.getEpsAttr());
        step.encode(inst);
        return success();
      })
      .Case<OnebitLambOp>([&](OnebitLambOp lamb) {
        inst.inputs = {declBuffer(lamb.getGradAttr()),
                       valueBuffers.lookup(lamb.getLr())};
        inst.outputs = {declBuffer(lamb.getParamAttr()),
                        declBuffer(lamb.getExpAvgAttr()),
                        declBuffer(lamb.getExpAvgSqAttr()),
                        declBuffer(lamb.getCoefficientsAttr())};
        ops::OnebitLamb step;
        step.beta1 = f64(lamb.getBeta1Attr());
        step.beta2 = f64(lamb.getBeta2Attr());
        step.eps = f64(lamb.getEpsAttr());
        step.wd = f64(lamb.getWeightDecayAttr());
        step.maxCoeff = f64(lamb.getMaxCoeffAttr());
        step.minCoeff = f64(lamb.getMinCoeffAttr());
        step.coeffBeta = f64(lamb.getCoeffBetaAttr());
        step.encode(inst);
        return success();
      })
      .Case<LambFreezeOp>([&](LambFreezeOp freeze) {
        // Each tensor's momentum scale (and fresh variance), then the
        // scaling coefficients over all of them.
        for (auto [c, m, v, vf] :
             llvm::zip(freeze.getCoefficients(), freeze.getExpAvg(),
                       freeze.getExpAvgSq(), freeze.getFresh())) {
          rt::Instruction scale;
          ops::LambFreezeScale op;
          op.copyVariance = freeze.getCopyVariance();
          op.encode(scale);
          scale.name = inst.name;
          scale.inputs = {declBuffer(cast<FlatSymbolRefAttr>(m)),
                          declBuffer(cast<FlatSymbolRefAttr>(v))};
          scale.outputs = {declBuffer(cast<FlatSymbolRefAttr>(vf)),
                           declBuffer(cast<FlatSymbolRefAttr>(c))};
          prelude.push_back(std::move(scale));
        }
        ops::LambScalingCoeffs().encode(inst);
        for (Attribute c : freeze.getCoefficients())
          inst.outputs.push_back(declBuffer(cast<FlatSymbolRefAttr>(c)));
        return success();
      })
      .Case<LambMomentumOp>([&](LambMomentumOp momentum) {
        inst.inputs = {declBuffer(momentum.getGradAttr()),
                       declBuffer(momentum.getCoefficientsAttr())};
        inst.outputs = {declBuffer(momentum.getExpAvgAttr()),
                        declBuffer(momentum.getLastAttr())};
        ops::LambMomentum step;
        step.beta1 = f64(momentum.getBeta1Attr());
        step.encode(inst);
        return success();
      })
      .Case<FrozenLambOp>([&](FrozenLambOp lamb) {
        inst.inputs = {declBuffer(lamb.getLastAttr()),
                       declBuffer(lamb.getExpAvgSqAttr()),
                       valueBuffers.lookup(lamb.getLr())};
        inst.outputs = {declBuffer(lamb.getParamAttr()),
                        declBuffer(lamb.getExpAvgAttr()),
                        declBuffer(lamb.getFreshAttr()),
                        declBuffer(lamb.getCoefficientsAttr())};
        ops::FrozenLamb step;
        step.beta1 = f64(lamb.getBeta1Attr());
        step.beta2 = f64(lamb.getBeta2Attr());
        step.eps = f64(lamb.getEpsAttr());
        step.wd = f64(lamb.getWeightDecayAttr());
        step.factorMax = f64(lamb.getFactorMaxAttr());
        step.factorMin = f64(lamb.getFactorMinAttr());
        step.factorThreshold = f64(lamb.getFactorThresholdAttr());
        step.encode(inst);
        return success();
      })
      .Case<SgdOp>([&](SgdOp sgd) {
        inst.inputs = {declBuffer(sgd.getGradAttr()),
                       valueBuffers.lookup(sgd.getLr())};
        inst.outputs = {declBuffer(sgd.getParamAttr()),
                        declBuffer(sgd.getMomentumBufferAttr())};
        ops::Sgd step;
        step.nesterov = sgd.getNesterov();
        step.momentum = f64(sgd.getMomentumAttr());
        step.wd = f64(sgd.getWeightDecayAttr());
        step.encode(inst);
        return success();
      })
      .Case<TransferOp>([&](TransferOp transfer) -> LogicalResult {
        uint32_t x = declBuffer(transfer.getSourceAttr()),
                 y = declBuffer(transfer.getDestinationAttr());
        inst.inputs = {x};
        inst.outputs = {y};
        ops::Transfer move;
        if (transfer.getChunkAxesAttr()) {
          FailureOr<int64_t> mask = axesMaskOf(transfer, transfer.getMeshAttr(),
                                               transfer.getChunkAxesAttr());
          if (failed(mask))
            return failure();
          move.axes = *mask;
          move.chunk = plan.buffers[x].bytes > plan.buffers[y].bytes ? 1 : 2;
        }
        move.encode(inst);
        return success();
      })
      .Case<ZeroOp>([&](ZeroOp zero) {
        ops::Zero().encode(inst);
        for (Attribute state : zero.getStates())
          inst.outputs.push_back(declBuffer(cast<FlatSymbolRefAttr>(state)));
        inst.inputs = {};
        return success();
      })
      .Case<AllGatherStatesOp>([&](AllGatherStatesOp gather) {
        return lowerInPlaceCollective<ops::AllGather>(
            gather, inst, gather.getMeshAttr(), gather.getMeshAxes(),
            gather.getBuffers(), std::nullopt);
      })
      .Case<ReduceScatterStatesOp>([&](ReduceScatterStatesOp scatter) {
        return lowerInPlaceCollective<ops::ReduceScatter>(
            scatter, inst, scatter.getMeshAttr(), scatter.getMeshAxes(),
            scatter.getStates(), scatter.getReduction());
      })
      .Case<AllReduceStatesOp>([&](AllReduceStatesOp reduce) {
        return lowerInPlaceCollective<ops::AllReduce>(
            reduce, inst, reduce.getMeshAttr(), reduce.getMeshAxes(),
            reduce.getStates(), reduce.getReduction());
      })
      .Case<GatherParameterOp>([&](GatherParameterOp gather) -> LogicalResult {
        // ZeRO-3: the chunk gathers into the op's temporary result.
        FailureOr<int64_t> mask =
            axesMaskOf(gather, gather.getMeshAttr(), gather.getMeshAxes());
        if (failed(mask))
          return failure();
        ops::GatherParameter gatherParam;
        gatherParam.axes = *mask;
        gatherParam.encode(inst);
        // An offloaded chunk gathers from its fetched device copy.
        inst.inputs = {gather.getChunk()
                           ? valueBuffers.lookup(gather.getChunk())
                           : declBuffer(gather.getNameAttr())};
        return success();
      })
      .Case<OverlapNextStepOp>([&](OverlapNextStepOp) {
        ops::OverlapNextStep().encode(inst);
        inst.inputs = {};
        inst.outputs = {};
        return success();
      })
      .Case<FetchParameterOp>([&](FetchParameterOp fetch) -> LogicalResult {
        // The chunk's bytes into the op's device temporary, which carries
        // the chunk's layout for the gather that reads it.
        inst.inputs = {declBuffer(fetch.getNameAttr())};
        inst.outputs = {valueBuffers.lookup(fetch.getResult())};
        plan.buffers[inst.outputs[0]].layout =
            plan.buffers[inst.inputs[0]].layout;
        ops::Transfer().encode(inst);
        return success();
      })
      .Case<ReduceScatterAccumulateOp>(
          [&](ReduceScatterAccumulateOp scatter) -> LogicalResult {
            FailureOr<int64_t> mask = axesMaskOf(scatter, scatter.getMeshAttr(),
                                                 scatter.getMeshAxes());
            if (failed(mask))
              return failure();
            ops::ReduceScatterAccumulate accumulate;
            accumulate.axes = *mask;
            accumulate.reduce = static_cast<int64_t>(scatter.getReduction());
            accumulate.encode(inst);
            inst.inputs = {valueBuffers.lookup(scatter.getValue())};
            inst.outputs = {declBuffer(scatter.getStateAttr())};
            return success();
          })
      .Default([&](Operation *other) {
        return other->emitOpError("has no runtime instruction; it cannot be "
                                  "lowered to a plan");
      });
}

} // namespace

FailureOr<rt::Plan> mlir::dsc::lowerToPlan(ModuleOp module) {
  return PlanBuilder(module).build();
}
