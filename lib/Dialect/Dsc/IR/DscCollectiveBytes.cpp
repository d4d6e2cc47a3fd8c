//===- DscCollectiveBytes.cpp - bytes a plan's collectives move -*- C++ -*-===//
//
// The per-rank, per-step bytes of a compiled module's collectives under the
// ring algorithms, computed once for the plan summary and the plan file with
// the formulas the runtime counts by (dsc/Support/CollectiveBytes.h).
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscOps.h"
#include "dsc/Dialect/Dsc/IR/DscPrograms.h"
#include "dsc/Support/CollectiveBytes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace mlir::dsc;

namespace {

int64_t bytesOfType(RankedTensorType type) {
  return type.getNumElements() * ((type.getElementTypeBitWidth() + 7) / 8);
}

/// Ranks in one group of `axes` of `mesh` (verified ops name valid axes).
int64_t groupSize(Operation *op, FlatSymbolRefAttr meshName, ArrayAttr axes) {
  auto mesh = SymbolTable::lookupNearestSymbolFrom<MeshOp>(op, meshName);
  int64_t n = 1;
  for (StringRef axis : axes.getAsValueRange<StringAttr>())
    n *= mesh.getShape()[*mesh.getAxisIndex(axis)];
  return n;
}

/// The name of the module's mesh (a clip without ZeRO names none).
StringAttr meshOf(Operation *op) {
  auto module = op->getParentOfType<ModuleOp>();
  for (auto mesh : module.getOps<MeshOp>())
    return mesh.getSymNameAttr();
  return {};
}

/// Bytes of the parameters and states `names` refers to.
int64_t bytesOfSymbols(Operation *op, ArrayAttr names) {
  int64_t bytes = 0;
  for (Attribute name : names) {
    Operation *decl =
        SymbolTable::lookupNearestSymbolFrom(op, cast<FlatSymbolRefAttr>(name));
    if (auto param = dyn_cast_or_null<ParameterOp>(decl))
      bytes += bytesOfType(param.getTensorType());
    else if (auto state = dyn_cast_or_null<StateOp>(decl))
      bytes += bytesOfType(state.getTensorType());
  }
  return bytes;
}

} // namespace

SmallVector<StringRef> mlir::dsc::getNormAxes(ClipGradNormOp clip) {
  llvm::SetVector<StringRef> axes;
  if (clip->hasAttr(kPipelineLocalAttr))
    axes.insert("pp");
  if (ArrayAttr shard = clip.getShardAxesAttr())
    for (StringRef axis : shard.getAsValueRange<StringAttr>())
      axes.insert(axis);
  for (Attribute name : clip.getGradients()) {
    auto state = dyn_cast_or_null<StateOp>(SymbolTable::lookupNearestSymbolFrom(
        clip, cast<FlatSymbolRefAttr>(name)));
    auto param =
        state
            ? dyn_cast_or_null<ParameterOp>(
                  SymbolTable::lookupNearestSymbolFrom(clip, state.getOfAttr()))
            : ParameterOp();
    if (!param || !param.getLayoutAttr())
      continue;
    for (unsigned d = 0; d < param.getLayoutAttr().getView().size(); ++d)
      for (StringRef axis : param.getLayoutAttr().getAxesOfDim(d))
        axes.insert(axis);
  }
  return SmallVector<StringRef>(axes.begin(), axes.end());
}

CollectiveBytes mlir::dsc::collectiveBytesPerStep(ModuleOp module,
                                                  int64_t microbatches,
                                                  bool compressed) {
  return collectiveBytesPerStep(module, microbatches,
                                compressed ? ProgramRole::CompressedOptimizer
                                           : ProgramRole::Optimizer);
}

CollectiveBytes mlir::dsc::collectiveBytesPerStep(ModuleOp module,
                                                  int64_t microbatches,
                                                  ProgramRole optimizerRole) {
  // Ring algorithms over n ranks (dsc/Support/CollectiveBytes.h, the
  // formulas the runtime's communicators count by): rank 0's bytes sent. An
  // all-reduce of S bytes sends 2(n-1)/n*S, 2S - chunk(0) - chunk(1) when n
  // does not divide the elements; a reduce-scatter or an all-gather
  // (n-1)/n*S. A step runs the forward_backward program once per
  // micro-batch and the optimizer once (dsc.program); other functions (the
  // evaluation loss) are not part of it.
  CollectiveBytes total;
  auto sent = [](::dsc::CollectiveKind kind, int64_t n, int64_t bytes,
                 int64_t elementSize) {
    return int64_t(::dsc::ringBytesSent(kind, uint64_t(bytes),
                                        size_t(elementSize), n, /*rank=*/0));
  };
  auto allReduce = [&](int64_t times, int64_t n, int64_t bytes,
                       int64_t elementSize = 4) {
    total.allReduce +=
        times * sent(::dsc::CollectiveKind::AllReduce, n, bytes, elementSize);
  };
  auto reduceScatter = [&](int64_t times, int64_t n, int64_t bytes) {
    total.reduceScatter +=
        times * sent(::dsc::CollectiveKind::ReduceScatter, n, bytes, 1);
  };
  auto allGather = [&](int64_t times, int64_t n, int64_t bytes) {
    total.allGather +=
        times * sent(::dsc::CollectiveKind::AllGather, n, bytes, 1);
  };
  auto count = [&](Operation *op, int64_t times) {
    if (auto reduce = dyn_cast<AllReduceStatesOp>(op)) {
      int64_t n = groupSize(op, reduce.getMeshAttr(), reduce.getMeshAxes());
      allReduce(times, n, bytesOfSymbols(op, reduce.getStates()));
    } else if (auto reduce = dyn_cast<AllReduceOp>(op)) {
      int64_t n = groupSize(op, reduce.getMeshAttr(), reduce.getMeshAxes());
      auto type = cast<RankedTensorType>(reduce.getType());
      allReduce(times, n, bytesOfType(type),
                (type.getElementTypeBitWidth() + 7) / 8);
    } else if (auto loss = dyn_cast<VocabParallelCrossEntropyOp>(op)) {
      // Three all-reduces of one f64 per token (max, sum, target logit).
      int64_t n = groupSize(op, loss.getMeshAttr(), loss.getMeshAxes());
      auto targets = cast<RankedTensorType>(loss.getTargets().getType());
      allReduce(3 * times, n, targets.getNumElements() * 8, 8);
    } else if (auto grad = dyn_cast<VocabParallelCrossEntropyGradOp>(op)) {
      // Two: the max and the sum again.
      int64_t n = groupSize(op, grad.getMeshAttr(), grad.getMeshAxes());
      auto targets = cast<RankedTensorType>(grad.getTargets().getType());
      allReduce(2 * times, n, targets.getNumElements() * 8, 8);
    } else if (auto clip = dyn_cast<ClipGradNormOp>(op)) {
      // A norm over parts all-reduces one f64 partial sum.
      SmallVector<StringRef> axes = getNormAxes(clip);
      if (axes.empty())
        return;
      Builder b(op->getContext());
      int64_t n =
          groupSize(op,
                    clip.getMeshAttr() ? clip.getMeshAttr()
                                       : FlatSymbolRefAttr::get(meshOf(op)),
                    b.getStrArrayAttr(axes));
      allReduce(times, n, 8, 8);
    } else if (auto scatter = dyn_cast<ReduceScatterStatesOp>(op)) {
      int64_t n = groupSize(op, scatter.getMeshAttr(), scatter.getMeshAxes());
      reduceScatter(times, n, bytesOfSymbols(op, scatter.getStates()));
    } else if (auto scatter = dyn_cast<ReduceScatterAccumulateOp>(op)) {
      int64_t n = groupSize(op, scatter.getMeshAttr(), scatter.getMeshAxes());
      reduceScatter(
          times, n,
          bytesOfType(cast<RankedTensorType>(scatter.getValue().getType())));
    } else if (auto gather = dyn_cast<AllGatherStatesOp>(op)) {
      int64_t n = groupSize(op, gather.getMeshAttr(), gather.getMeshAxes());
      allGather(times, n, bytesOfSymbols(op, gather.getBuffers()));
    } else if (auto scatter = dyn_cast<ReduceScatterOp>(op)) {
      // Sequence parallelism: the whole partial sum is scattered.
      int64_t n = groupSize(op, scatter.getMeshAttr(), scatter.getMeshAxes());
      reduceScatter(
          times, n,
          bytesOfType(cast<RankedTensorType>(scatter.getInput().getType())));
    } else if (auto gather = dyn_cast<AllGatherOp>(op)) {
      int64_t n = groupSize(op, gather.getMeshAttr(), gather.getMeshAxes());
      allGather(times, n,
                bytesOfType(cast<RankedTensorType>(gather.getType())));
    } else if (auto exchange = dyn_cast<AllToAllOp>(op)) {
      // Expert parallelism: each rank keeps its own part of its input.
      int64_t n = groupSize(op, exchange.getMeshAttr(), exchange.getMeshAxes());
      total.allToAll += times * sent(::dsc::CollectiveKind::AllToAll, n,
                                     bytesOfType(cast<RankedTensorType>(
                                         exchange.getInput().getType())),
                                     1);
    } else if (auto reduce = dyn_cast<CompressedAllReduceStatesOp>(op)) {
      int64_t n = groupSize(op, reduce.getMeshAttr(), reduce.getMeshAxes());
      int64_t elements = 0;
      for (Attribute name : reduce.getStates())
        if (auto state = SymbolTable::lookupNearestSymbolFrom<StateOp>(
                op, cast<FlatSymbolRefAttr>(name)))
          elements += state.getTensorType().getNumElements();
      total.compressedAllReduce +=
          times * int64_t(::dsc::compressedAllReduceBytesSent(elements, n));
    } else if (auto gather = dyn_cast<GatherParameterOp>(op)) {
      // ZeRO-3: each rank sends its chunk to the n-1 others.
      int64_t n = groupSize(op, gather.getMeshAttr(), gather.getMeshAxes());
      allGather(times, n,
                bytesOfType(cast<RankedTensorType>(gather.getType())));
    }
  };
  // A pipelined module: rank 0 runs stage 0 (interleaved: stages 0, P,
  // 2P, ...), each stage's forward and backward once per micro-batch
  // (their collectives as written: a backward that computes the forward
  // again, not split by --dsc-stage-backward, runs the forward's tensor
  // slicing all-reduces a second time; zero-bubble, the weight-gradient
  // part runs apart, once per micro-batch too), its optimizer once, and sends
  // each stage's activation up and input gradient down once per micro-batch
  // (what comes back is received, not sent). The last stage's forward runs
  // inside its backward and is never on rank 0 when there are two ranks.
  std::optional<PipelineShape> shape = getPipelineShape(module);
  if (!shape) {
    Operation *fbOp = lookupProgramOp(module, ProgramRole::ForwardBackward);
    Operation *optOp = lookupProgramOp(module, optimizerRole);
    for (auto [func, times] :
         {std::pair<Operation *, int64_t>{fbOp, microbatches}, {optOp, 1}})
      if (func)
        func->walk([&, times = times](Operation *op) { count(op, times); });
    return total;
  }
  for (auto func : module.getOps<FunctionOpInterface>()) {
    std::optional<int64_t> stage = getPipelineStage(func);
    std::optional<ProgramRole> role = getProgramRole(func);
    if (!stage || !role || shape->rankOf(*stage) != 0)
      continue;
    if (*role == optimizerRole) {
      func->walk([&](Operation *op) { count(op, 1); });
      continue;
    }
    if (*role != ProgramRole::Forward &&
        *role != ProgramRole::ForwardBackward &&
        *role != ProgramRole::BackwardWeight)
      continue;
    func->walk([&](Operation *op) { count(op, microbatches); });
    if (*role != ProgramRole::ForwardBackward)
      continue;
    // (input, output gradient or targets, residuals...): the input is the
    // activation received (its gradient goes back down), the output
    // gradient has the activation's shape sent up.
    auto args = func.getArgumentTypes();
    auto isFloat = [](Type t) {
      return !cast<RankedTensorType>(t).getElementType().isInteger(32);
    };
    if (*stage + 1 < shape->stages && args.size() >= 2 && isFloat(args[1]))
      total.pointToPoint +=
          microbatches * bytesOfType(cast<RankedTensorType>(args[1]));
    if (*stage > 0 && !args.empty() && isFloat(args[0]))
      total.pointToPoint +=
          microbatches * bytesOfType(cast<RankedTensorType>(args[0]));
  }
  return total;
}
