//===- DscCollectiveBytes.cpp - bytes a plan's collectives move -*- C++ -*-===//
//
// The per-rank, per-step bytes of a compiled module's collectives under the
// ring algorithms, computed once for the plan summary and the plan file.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscOps.h"

#include "mlir/IR/SymbolTable.h"

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

CollectiveBytes mlir::dsc::collectiveBytesPerStep(ModuleOp module,
                                                  int64_t microbatches) {
  // Ring algorithms over n ranks: an all-reduce of S bytes sends 2(n-1)/n*S
  // per rank, a reduce-scatter or an all-gather (n-1)/n*S.
  CollectiveBytes total;
  module.walk([&](Operation *op) {
    if (auto reduce = dyn_cast<AllReduceStatesOp>(op)) {
      int64_t n = groupSize(op, reduce.getMeshAttr(), reduce.getMeshAxes());
      total.allReduce +=
          2 * (n - 1) * bytesOfSymbols(op, reduce.getStates()) / n;
    } else if (auto clip = dyn_cast<ClipGradNormOp>(op)) {
      // A sharded norm all-reduces one f64 partial sum.
      if (!clip.getShardedAttr())
        return;
      int64_t n = groupSize(op, clip.getMeshAttr(), clip.getShardAxesAttr());
      total.allReduce += 2 * (n - 1) * 8 / n;
    } else if (auto scatter = dyn_cast<ReduceScatterStatesOp>(op)) {
      int64_t n = groupSize(op, scatter.getMeshAttr(), scatter.getMeshAxes());
      total.reduceScatter +=
          (n - 1) * bytesOfSymbols(op, scatter.getStates()) / n;
    } else if (auto scatter = dyn_cast<ReduceScatterAccumulateOp>(op)) {
      // In the backward: once per micro-batch.
      int64_t n = groupSize(op, scatter.getMeshAttr(), scatter.getMeshAxes());
      total.reduceScatter +=
          microbatches * (n - 1) *
          bytesOfType(cast<RankedTensorType>(scatter.getValue().getType())) / n;
    } else if (auto gather = dyn_cast<AllGatherStatesOp>(op)) {
      int64_t n = groupSize(op, gather.getMeshAttr(), gather.getMeshAxes());
      total.allGather += (n - 1) * bytesOfSymbols(op, gather.getBuffers()) / n;
    }
  });
  return total;
}
