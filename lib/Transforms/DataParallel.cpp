//===- DataParallel.cpp - --dsc-data-parallel -------------------*- C++ -*-===//
//
// Data parallelism at the gradient-accumulation boundary: the optimizer
// program first averages the accumulated gradients over the dp axis, in
// buckets of contiguous gradients.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscOps.h"
#include "dsc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCDATAPARALLELPASS
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

int64_t bytesOf(RankedTensorType type) {
  return type.getNumElements() * ((type.getElementTypeBitWidth() + 7) / 8);
}

struct DscDataParallelPass
    : mlir::dsc::impl::DscDataParallelPassBase<DscDataParallelPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (dp < 1) {
      module.emitError("--dsc-data-parallel: dp must be >= 1, got ")
          << dp.getValue();
      return signalPassFailure();
    }
    if (zero < 0 || zero > 2) {
      module.emitError("--dsc-data-parallel: ZeRO stage ")
          << zero.getValue() << " is not implemented yet; use zero=0, 1 or 2";
      return signalPassFailure();
    }
    if (bucketBytes < 1) {
      module.emitError("--dsc-data-parallel: bucket-bytes must be >= 1");
      return signalPassFailure();
    }
    FailureOr<MeshOp> mesh = getOrCreateMesh(module);
    if (failed(mesh))
      return signalPassFailure();
    // One optimizer, or one per pipeline stage (--dsc-pipeline), each over
    // the gradients its stage holds.
    SmallVector<func::FuncOp> optimizers;
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal() &&
          (func.getSymName() == "optimizer" ||
           (func->hasAttr("dsc.stage") &&
            func.getSymName().starts_with("optimizer."))))
        optimizers.push_back(func);
    if (optimizers.empty()) {
      module.emitError("--dsc-data-parallel: no @optimizer; run "
                       "--dsc-autodiff and --dsc-optimizer first");
      return signalPassFailure();
    }
    if (zero == 2 && optimizers.front()->hasAttr("dsc.stage")) {
      module.emitError("--dsc-data-parallel: zero=2 with pipeline stages is "
                       "not implemented yet; use zero=0 or 1");
      return signalPassFailure();
    }
    for (func::FuncOp optimizer : optimizers)
      if (failed(replicate(module, *mesh, optimizer)))
        return signalPassFailure();
  }

  /// Averages (or, with ZeRO, reduce-scatters) over dp the gradients that
  /// `optimizer` clips and updates.
  LogicalResult replicate(ModuleOp module, MeshOp mesh,
                          func::FuncOp optimizer) {
    llvm::StringSet<> ownGradients;
    optimizer.walk([&](ZeroOp zeroOp) {
      for (Attribute name : zeroOp.getStates())
        ownGradients.insert(cast<FlatSymbolRefAttr>(name).getValue());
    });
    // ZeRO-1 shards the update of every AdamW parameter that dp divides;
    // their gradients are reduce-scattered (each rank needs only its
    // chunk), the others all-reduced.
    llvm::StringSet<> shardedParams;
    if (zero >= 1) {
      for (Operation &op : optimizer.getBody().front()) {
        if (isa<SgdOp>(op)) {
          return op.emitOpError("--dsc-data-parallel: ZeRO-1 shards AdamW "
                                "state; SGD is not supported");
        }
        if (auto adam = dyn_cast<AdamWOp>(op)) {
          auto param = module.lookupSymbol<ParameterOp>(adam.getParam());
          if (param.getNumElements() % dp == 0)
            shardedParams.insert(adam.getParam());
        }
      }
    }

    // Buckets of consecutive gradients of one kind, each at most
    // bucketBytes (a single larger gradient is a bucket of its own).
    SmallVector<SmallVector<Attribute>> reduceBuckets, scatterBuckets;
    int64_t reduceFilled = 0, scatterFilled = 0;
    for (auto state : module.getOps<StateOp>()) {
      if (state.getKind() != StateKind::Gradient ||
          !ownGradients.contains(state.getSymName()))
        continue;
      bool sharded = shardedParams.contains(state.getOf());
      // ZeRO-2 reduce-scatters these in the backward of every micro-batch.
      if (sharded && zero == 2)
        continue;
      auto &buckets = sharded ? scatterBuckets : reduceBuckets;
      int64_t &filled = sharded ? scatterFilled : reduceFilled;
      int64_t bytes = bytesOf(state.getTensorType());
      if (buckets.empty() || filled + bytes > bucketBytes) {
        buckets.emplace_back();
        filled = 0;
      }
      buckets.back().push_back(FlatSymbolRefAttr::get(state.getSymNameAttr()));
      filled += bytes;
    }
    if (reduceBuckets.empty() && scatterBuckets.empty() &&
        shardedParams.empty()) {
      return optimizer.emitError(
          "--dsc-data-parallel: no gradient states to reduce");
    }

    OpBuilder b(optimizer.getBody());
    b.setInsertionPointToStart(&optimizer.getBody().front());
    // After a pipeline's sum over pp of gradients several stages share
    // (--dsc-optimizer), so the dp collectives see whole sums.
    for (Operation &op : optimizer.getBody().front())
      if (auto reduce = dyn_cast<AllReduceStatesOp>(op);
          reduce && llvm::is_contained(
                        reduce.getMeshAxes().getAsValueRange<StringAttr>(),
                        "pp"))
        b.setInsertionPointAfter(reduce);
    auto meshRef = FlatSymbolRefAttr::get(mesh.getSymNameAttr());
    ArrayAttr axes = b.getStrArrayAttr({"dp"});
    for (ArrayRef<Attribute> bucket : scatterBuckets) {
      auto scatter = ReduceScatterStatesOp::create(
          b, optimizer.getLoc(), b.getArrayAttr(bucket), meshRef, axes);
      scatter.setReduction(ReductionKind::Average);
      ++numBuckets;
    }
    for (ArrayRef<Attribute> bucket : reduceBuckets) {
      auto reduce = AllReduceStatesOp::create(
          b, optimizer.getLoc(), b.getArrayAttr(bucket), meshRef, axes);
      reduce.setReduction(ReductionKind::Average);
      ++numBuckets;
    }
    if (zero == 2 && failed(shardGradients(module, meshRef, shardedParams)))
      return failure();
    if (zero >= 1 && !shardedParams.empty()) {
      // The norm of partially valid gradients is summed over the group.
      optimizer.walk([&](ClipGradNormOp clip) {
        SmallVector<bool> flags;
        for (Attribute name : clip.getGradients()) {
          auto state = module.lookupSymbol<StateOp>(
              cast<FlatSymbolRefAttr>(name).getValue());
          flags.push_back(shardedParams.contains(state.getOf()));
        }
        clip.setMeshAttr(meshRef);
        clip.setShardAxesAttr(axes);
        clip.setShardedAttr(b.getDenseBoolArrayAttr(flags));
      });
      if (failed(
              shardOptimizerStates(module, optimizer, meshRef, shardedParams)))
        return failure();
    }
    return success();
  }

  /// ZeRO-2: the gradients of sharded parameters become rank-1 shards, and
  /// the backward reduce-scatters each micro-batch's gradient into them.
  LogicalResult shardGradients(ModuleOp module, FlatSymbolRefAttr meshRef,
                               const llvm::StringSet<> &shardedParams) {
    auto fb = module.lookupSymbol<func::FuncOp>("forward_backward");
    if (!fb)
      return module.emitError("--dsc-data-parallel: zero=2 needs "
                              "@forward_backward; run --dsc-autodiff first");
    SymbolTable symbols(module);
    Builder attrs(module.getContext());
    ArrayAttr axes = attrs.getStrArrayAttr({"dp"});
    llvm::StringSet<> shardedStates;
    for (auto state : llvm::make_early_inc_range(module.getOps<StateOp>())) {
      if (state.getKind() != StateKind::Gradient ||
          !shardedParams.contains(state.getOf()))
        continue;
      RankedTensorType type = state.getTensorType();
      OpBuilder b(state);
      auto shard =
          StateOp::create(b, state.getLoc(), state.getSymName(),
                          RankedTensorType::get({type.getNumElements() / dp},
                                                type.getElementType()),
                          state.getKind(), state.getOf());
      shardedStates.insert(state.getSymName());
      symbols.erase(state);
      symbols.insert(shard);
    }
    SmallVector<AccumulateOp> accumulates;
    fb.walk([&](AccumulateOp acc) {
      if (shardedStates.contains(acc.getState()))
        accumulates.push_back(acc);
    });
    for (AccumulateOp acc : accumulates) {
      OpBuilder b(acc);
      auto scatter = ReduceScatterAccumulateOp::create(
          b, acc.getLoc(), acc.getValue(), acc.getStateAttr(), meshRef, axes);
      scatter.setReduction(ReductionKind::Average);
      acc.erase();
    }
    return success();
  }

  /// ZeRO-1: shards every AdamW update's moments over dp and gathers the
  /// updated parameters after the last update.
  LogicalResult shardOptimizerStates(ModuleOp module, func::FuncOp optimizer,
                                     FlatSymbolRefAttr meshRef,
                                     const llvm::StringSet<> &shardedParams) {
    SymbolTable symbols(module);
    Builder attrs(module.getContext());
    ArrayAttr axes = attrs.getStrArrayAttr({"dp"});
    SmallVector<ParameterOp> sharded;
    Operation *lastUpdate = nullptr;
    for (Operation &op : optimizer.getBody().front()) {
      auto adam = dyn_cast<AdamWOp>(op);
      if (!adam)
        continue;
      lastUpdate = adam;
      auto param = symbols.lookup<ParameterOp>(adam.getParam());
      int64_t n = param.getNumElements();
      if (!shardedParams.contains(adam.getParam()))
        continue; // Odd-sized: keep a replicated update.
      auto shardType = RankedTensorType::get(
          {n / dp}, param.getTensorType().getElementType());
      for (StringRef name : {adam.getExpAvg(), adam.getExpAvgSq()}) {
        auto state = symbols.lookup<StateOp>(name);
        OpBuilder b(state);
        auto shard = StateOp::create(b, state.getLoc(), name, shardType,
                                     state.getKind(), state.getOf());
        symbols.erase(state);
        symbols.insert(shard);
      }
      adam.setMeshAttr(meshRef);
      adam.setShardAxesAttr(axes);
      sharded.push_back(param);
      ++numShardedParams;
    }
    if (!lastUpdate)
      return success(); // No optimizer state to shard.

    // Gather in buckets of at most bucketBytes, in update order.
    OpBuilder b(lastUpdate->getContext());
    b.setInsertionPointAfter(lastUpdate);
    SmallVector<Attribute> bucket;
    int64_t filled = 0;
    auto flush = [&] {
      if (bucket.empty())
        return;
      AllGatherStatesOp::create(b, optimizer.getLoc(), b.getArrayAttr(bucket),
                                meshRef, axes);
      bucket.clear();
      filled = 0;
    };
    for (ParameterOp param : sharded) {
      int64_t bytes = bytesOf(param.getTensorType());
      if (!bucket.empty() && filled + bytes > bucketBytes)
        flush();
      bucket.push_back(FlatSymbolRefAttr::get(param.getSymNameAttr()));
      filled += bytes;
    }
    flush();
    return success();
  }

  /// The module's mesh (which must have a dp axis of size dp), or a new
  /// one-axis mesh.
  FailureOr<MeshOp> getOrCreateMesh(ModuleOp module) {
    auto meshes = module.getOps<MeshOp>();
    if (!meshes.empty()) {
      MeshOp mesh = *meshes.begin();
      std::optional<unsigned> axis = mesh.getAxisIndex("dp");
      if (!axis || mesh.getShape()[*axis] != dp) {
        mesh.emitError("--dsc-data-parallel: mesh @")
            << mesh.getSymName() << " needs a 'dp' axis of size "
            << dp.getValue();
        return failure();
      }
      return mesh;
    }
    OpBuilder b(module.getContext());
    b.setInsertionPointToStart(module.getBody());
    return MeshOp::create(b, module.getLoc(), "mesh", b.getStrArrayAttr({"dp"}),
                          b.getDenseI64ArrayAttr({dp}));
  }
};

} // namespace
