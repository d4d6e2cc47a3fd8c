//===- DataParallel.cpp - --dsc-data-parallel -------------------*- C++ -*-===//
//
// Data parallelism at the gradient-accumulation boundary: the optimizer
// program first averages the accumulated gradients over the dp axis, in
// buckets of contiguous gradients. ZeRO stages 1-3 shard the optimizer
// states, then the gradients, then the parameters themselves over dp.
//
// ZeRO-3 on one parameter, before and after (dp = 2):
//
//   dsc.parameter @w : tensor<16x8xf32> init = ...
//   func.func @forward_backward(...) {
//     %w = dsc.get_parameter @w : tensor<16x8xf32>
//     ... forward uses of %w ... %loss = dsc.cross_entropy ...
//     ... backward uses of %w ...
//     dsc.accumulate %gw into @grad.w : tensor<16x8xf32>
//
//   dsc.parameter @w : tensor<64xf32> init = ...
//       layout = <view = [16, 8], split = [[], []], chunk = ["dp"]>
//   func.func @forward_backward(...) {
//     %w0 = dsc.gather_parameter @w on @mesh axes = ["dp"] : tensor<16x8xf32>
//     ... forward uses of %w0 ... %loss = dsc.cross_entropy ...
//     %w1 = dsc.gather_parameter @w on @mesh axes = ["dp"] : tensor<16x8xf32>
//     ... backward uses of %w1 ...
//     dsc.reduce_scatter_accumulate %gw into @grad.w on @mesh axes = ["dp"]
//         reduction = avg : tensor<16x8xf32>
//
// (under mixed precision each gather is followed by its own dsc.cast to
// bf16, which the uses of that phase read) and the AdamW update of @w runs
// on the chunks (parameter, gradient and
// moments all of 64 elements) with nothing gathered after it.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscAttrNames.h"
#include "dsc/Dialect/Dsc/IR/DscOps.h"
#include "dsc/Dialect/Dsc/IR/DscPrograms.h"
#include "dsc/Support/CollectiveBytes.h"
#include "dsc/Transforms/Passes.h"
#include "dsc/Transforms/PlanOptions.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringMap.h"
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
    : PlanReadingPass<
          DscDataParallelPass,
          mlir::dsc::impl::DscDataParallelPassBase<DscDataParallelPass>> {
  using PlanReadingPass::PlanReadingPass;

  /// The plan knobs this pass builds (readPlan, at the start of a run).
  int64_t dp{};
  int64_t bucketBytes{};
  int64_t onebitBucketBytes{};
  int64_t zero{};
  int64_t persistenceThreshold{};

  /// Parameters whose states (and, for ZeRO-3, themselves) an earlier
  /// stage's optimizer sharded in this run: a tied embedding is updated by
  /// the first and the last pipeline stage and must be sharded once.
  llvm::StringSet<> processed;
  /// Parameters any stage's optimizer shards (ZeRO), whose gradients are
  /// shards on every stage that holds them.
  llvm::StringSet<> shardedAnywhere;
  /// Parameters whose 1-bit Adam updates ZeRO-1/2 shard (the variance and
  /// the update; shardOnebitUpdates).
  llvm::StringSet<> onebitSharded;
  MeshOp meshOp;

  /// The data-parallel axes over which `param` is replicated: all of them,
  /// less ep for an expert weight (expert parallelism split it), whose
  /// gradient is averaged over edp only.
  ArrayAttr axesOf(ParameterOp param) {
    return Builder(param.getContext())
        .getStrArrayAttr(replicatingDataAxes(meshOp, param));
  }
  /// The size of the group of axesOf(param).
  int64_t groupOf(ParameterOp param) {
    return meshAxesSize(meshOp, replicatingDataAxes(meshOp, param));
  }
  ParameterOp paramOf(StateOp state) {
    return SymbolTable::lookupNearestSymbolFrom<ParameterOp>(state,
                                                             state.getOfAttr());
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    {
      const ::dsc::ParallelPlan plan = readPlan(module);
      dp = plan.dp;
      bucketBytes = plan.bucketBytes;
      onebitBucketBytes = plan.onebitBucketBytes;
      zero = plan.zeroStage;
      persistenceThreshold = plan.persistenceThreshold;
    }
    // dp >= 1, zero in 0-3 and bucket-bytes >= 1: the plan's parser's.
    // With expert parallelism the data-parallel group is two axes (edp x
    // ep, --dsc-declare-mesh); otherwise the one axis dp.
    FailureOr<MeshOp> mesh = failure();
    auto meshes = module.getOps<MeshOp>();
    if (!meshes.empty() && (*meshes.begin()).getAxisIndex("ep")) {
      mesh = *meshes.begin();
      if (meshAxesSize(*mesh, dataParallelAxes(*mesh)) != dp) {
        SmallVector<StringRef> axes = dataParallelAxes(*mesh);
        mesh->emitError("--dsc-data-parallel: the mesh's data-parallel axes "
                        "edp=")
            << meshAxesSize(*mesh, axes[0])
            << " x ep=" << meshAxesSize(*mesh, axes[1]) << " are not dp=" << dp;
        return signalPassFailure();
      }
    } else {
      mesh = getOrCreateMeshWithAxis(module, "dp", dp, "dsc-data-parallel");
    }
    if (failed(mesh))
      return signalPassFailure();
    meshOp = *mesh;
    // One optimizer, or one per pipeline stage (--dsc-pipeline), each over
    // the gradients its stage holds.
    SmallVector<func::FuncOp> optimizers;
    for (Operation *op : getProgramOps(module, ProgramRole::Optimizer))
      if (auto func = dyn_cast<func::FuncOp>(op); func && !func.isExternal())
        optimizers.push_back(func);
    if (optimizers.empty()) {
      module.emitError("--dsc-data-parallel: no @optimizer; run "
                       "--dsc-autodiff and --dsc-optimizer first");
      return signalPassFailure();
    }
    processed.clear();
    onebitSharded.clear();
    // The parameters some optimizer shards (ZeRO): a pipeline stage that
    // only shares a tied parameter's gradient (its all-reduce over pp)
    // holds the same shard of it.
    shardedAnywhere.clear();
    if (zero >= 1)
      for (func::FuncOp optimizer : optimizers)
        optimizer.walk([&](AdamWOp adam) {
          auto param = module.lookupSymbol<ParameterOp>(adam.getParam());
          if (param && isShardable(param))
            shardedAnywhere.insert(adam.getParam());
        });
    if (zero > 0 &&
        !getProgramOps(module, ProgramRole::LocalStepOptimizer).empty()) {
      module.emitError("--dsc-data-parallel: zero=")
          << zero
          << " with optimizer=zero_one_adam: not built (0/1 Adam's local "
             "steps keep each rank's whole momentum and parameters; DeepSpeed "
             "refuses ZeRO with it too)";
      return signalPassFailure();
    }
    for (func::FuncOp optimizer : optimizers)
      if (failed(replicate(module, *mesh, optimizer)))
        return signalPassFailure();
    for (Operation *op :
         getProgramOps(module, ProgramRole::CompressedOptimizer))
      if (failed(compressMoments(module, *mesh, cast<func::FuncOp>(op))))
        return signalPassFailure();
    for (ProgramRole role :
         {ProgramRole::OnebitStepOptimizer, ProgramRole::LocalStepOptimizer,
          ProgramRole::SyncStepOptimizer})
      for (Operation *op : getProgramOps(module, role))
        if (failed(compressZeroOneAdam(module, *mesh, cast<func::FuncOp>(op),
                                       role)))
          return signalPassFailure();
    if (zero == 2 && !onebitSharded.empty())
      module.emitWarning("--dsc-data-parallel: zero=2 with "
                         "optimizer=onebit_adam keeps the gradients whole "
                         "(the compression phase's momentum reads each "
                         "rank's whole gradient): it shards the variance and "
                         "the update as zero=1 does");
  }

  /// 1-bit Adam after its warm-up (--dsc-optimizer's compressed_optimizer):
  /// the gradients stay each rank's own; the moments built from them are
  /// averaged by compressed all-reduces over each parameter's group, before
  /// the frozen-variance updates read them, each with error-feedback states
  /// of DeepSpeed's padded sizes. Each moment alone (DeepSpeed's fp32
  /// OnebitAdam: one scale per tensor), or with onebit-bucket-bytes the
  /// moments of one group and weight-decay class in buckets of at most that
  /// size, each compressed as one vector (DeepSpeed's fp16 optimizer hands
  /// 1-bit Adam each parameter group flattened): fewer collectives, one
  /// scale for the bucket.
  LogicalResult compressMoments(ModuleOp module, MeshOp mesh,
                                func::FuncOp optimizer) {
    SmallVector<FrozenLambOp> lambUpdates(optimizer.getOps<FrozenLambOp>());
    if (!lambUpdates.empty())
      return fuseLambMoments(module, mesh, lambUpdates);
    SmallVector<FrozenAdamOp> updates(optimizer.getOps<FrozenAdamOp>());
    if (updates.empty())
      return optimizer.emitError("--dsc-data-parallel: a compressed_optimizer "
                                 "program without dsc.frozen_adam or "
                                 "dsc.frozen_lamb updates");
    if (!onebitSharded.empty() &&
        failed(shardOnebitUpdates<FrozenAdamOp>(
            module, optimizer, FlatSymbolRefAttr::get(mesh.getSymNameAttr()))))
      return failure();
    SmallVector<std::pair<ParameterOp, StateOp>> moments;
    for (FrozenAdamOp update : updates) {
      auto param = module.lookupSymbol<ParameterOp>(update.getParam());
      if (!param)
        return update.emitOpError("--dsc-data-parallel: '@")
               << update.getParam() << "' is not a dsc.parameter";
      moments.push_back(
          {param, module.lookupSymbol<StateOp>(update.getExpAvg())});
    }
    OpBuilder b(updates.front());
    compressedAverages(module, mesh, b, optimizer.getLoc(), moments, "onebit.");
    return success();
  }

  /// Compressed averages of `states` (each of its parameter), inserted at
  /// `b`: each state alone (DeepSpeed's fp32 OnebitAdam and ZeroOneAdam:
  /// one scale per tensor), or with onebit-bucket-bytes the states of one
  /// group and weight-decay class in buckets of at most that size, each
  /// compressed as one vector (DeepSpeed's fp16 optimizer hands them each
  /// parameter group flattened): fewer collectives, one scale for the
  /// bucket. Each bucket's error feedback: states `<prefix>worker_error.`
  /// and `<prefix>server_error.` + its first parameter, of DeepSpeed's
  /// padded sizes. A parameter alone in its group has nothing to average.
  void compressedAverages(ModuleOp module, MeshOp mesh, OpBuilder &b,
                          Location loc,
                          ArrayRef<std::pair<ParameterOp, StateOp>> states,
                          StringRef prefix) {
    struct Bucket {
      SmallVector<Attribute> states;
      ParameterOp first;
      int64_t elements = 0, group = 1;
    };
    // Buckets by group axes and weight-decay class.
    llvm::MapVector<std::pair<Attribute, unsigned>, SmallVector<Bucket>> byAxes;
    for (auto [param, state] : states) {
      const int64_t group = groupOf(param);
      if (group == 1)
        continue;
      const int64_t n = state.getTensorType().getNumElements();
      // DeepSpeed's parameter groups (GPT-NeoX's, Megatron's): matrices,
      // which decay, apart from biases and norms, which do not (the
      // optimizer's rule).
      const unsigned matrix = param.getTensorType().getRank() >= 2 ? 1 : 0;
      SmallVector<Bucket> &buckets = byAxes[{axesOf(param), matrix}];
      if (buckets.empty() ||
          4 * (buckets.back().elements + n) > onebitBucketBytes)
        buckets.push_back({{}, param, 0, group});
      buckets.back().states.push_back(
          FlatSymbolRefAttr::get(state.getSymNameAttr()));
      buckets.back().elements += n;
    }
    auto meshRef = FlatSymbolRefAttr::get(mesh.getSymNameAttr());
    for (auto &[key, buckets] : byAxes) {
      for (Bucket &bucket : buckets) {
        const int64_t padded =
            ::dsc::onebitPaddedSize(bucket.elements, bucket.group);
        FlatSymbolRefAttr worker = declareCompressionState(
            module, bucket.first, (prefix + "worker_error.").str(),
            StateKind::WorkerError, padded);
        FlatSymbolRefAttr server = declareCompressionState(
            module, bucket.first, (prefix + "server_error.").str(),
            StateKind::ServerError, padded / bucket.group);
        CompressedAllReduceStatesOp::create(
            b, loc, b.getArrayAttr(bucket.states), worker, server, meshRef,
            cast<ArrayAttr>(key.first));
        ++numBuckets;
      }
    }
  }

  /// 0/1 Adam's steps other than its variance steps: a onebit step
  /// averages the gradients, compressed, before the momenta read them; a
  /// sync step the accumulators, between the rewinds and the resyncs, with
  /// error feedback of its own (DeepSpeed zeroes the errors when the
  /// variance freezes: the sync's start from zero). A local step
  /// communicates nothing.
  LogicalResult compressZeroOneAdam(ModuleOp module, MeshOp mesh,
                                    func::FuncOp optimizer, ProgramRole role) {
    if (role == ProgramRole::LocalStepOptimizer)
      return success();
    SmallVector<std::pair<ParameterOp, StateOp>> states;
    Operation *anchor = nullptr;
    if (role == ProgramRole::OnebitStepOptimizer) {
      for (AdamMomentumOp momentum : optimizer.getOps<AdamMomentumOp>()) {
        auto grad = module.lookupSymbol<StateOp>(momentum.getGrad());
        states.push_back({paramOf(grad), grad});
        if (!anchor)
          anchor = momentum;
      }
    } else {
      for (ZeroOneAdamRewindOp rewind :
           optimizer.getOps<ZeroOneAdamRewindOp>()) {
        states.push_back(
            {module.lookupSymbol<ParameterOp>(rewind.getParam()),
             module.lookupSymbol<StateOp>(rewind.getAccumulator())});
        anchor = rewind;
      }
    }
    for (auto [param, state] : states)
      if (groupOf(param) < 2)
        return optimizer.emitError("--dsc-data-parallel: 0/1 Adam averages "
                                   "over data parallelism, but '@")
               << param.getSymName()
               << "' has no other replica (dp >= 2 without expert "
                  "parallelism; with one rank DeepSpeed's own skips the "
                  "compressed steps' momentum update: use adamw)";
    if (!anchor)
      return optimizer.emitError("--dsc-data-parallel: 0/1 Adam's ")
             << stringifyProgramRole(role) << " program has nothing to "
             << "average";
    OpBuilder b(anchor);
    if (role == ProgramRole::SyncStepOptimizer)
      b.setInsertionPointAfter(anchor);
    compressedAverages(module, mesh, b, optimizer.getLoc(), states,
                       role == ProgramRole::OnebitStepOptimizer ? "onebit."
                                                                : "zoadam.");
    return success();
  }

  /// A 1-bit optimizer's f32 state of `n` elements declared after the
  /// module's last declaration: `prefix` + `param`'s name, the errors (or
  /// pad) of a bucket that starts with `param` (a state names a
  /// parameter); another program's bucket that starts with the same
  /// parameter (a tied embedding on two pipeline stages) gets states of its
  /// own, suffixed.
  FlatSymbolRefAttr declareCompressionState(ModuleOp module, ParameterOp param,
                                            StringRef prefix, StateKind kind,
                                            int64_t n) {
    SymbolTable symbols(module);
    Operation *lastDecl = nullptr;
    for (Operation &op : module.getBody()->getOperations())
      if (isa<ParameterOp, StateOp>(op))
        lastDecl = &op;
    OpBuilder decls(module.getContext());
    decls.setInsertionPointAfter(lastDecl);
    std::string name = (prefix + param.getSymName()).str();
    for (int suffix = 1; symbols.lookup(name); ++suffix)
      name = (prefix + param.getSymName() + "." + Twine(suffix)).str();
    auto state = StateOp::create(decls, param.getLoc(), name,
                                 RankedTensorType::get({n}, decls.getF32Type()),
                                 kind, param.getSymName());
    return FlatSymbolRefAttr::get(state.getSymNameAttr());
  }

  /// 1-bit LAMB after its warm-up: every moment of the program's group in
  /// one fused buffer, as DeepSpeed flattens them (one scale for all; the
  /// scaling coefficients even out their magnitudes first), followed by a
  /// pad state of DeepSpeed's padding: its buffer keeps the last compressed
  /// average there, and the next compression reads it back.
  LogicalResult fuseLambMoments(ModuleOp module, MeshOp mesh,
                                MutableArrayRef<FrozenLambOp> updates) {
    SmallVector<Attribute> moments;
    ParameterOp first;
    int64_t elements = 0, group = 1;
    Attribute axes;
    for (FrozenLambOp update : updates) {
      auto param = module.lookupSymbol<ParameterOp>(update.getParam());
      if (!param)
        return update.emitOpError("--dsc-data-parallel: '@")
               << update.getParam() << "' is not a dsc.parameter";
      if (!first) {
        first = param;
        group = groupOf(param);
        axes = axesOf(param);
      } else if (axesOf(param) != axes) {
        return update.emitOpError("--dsc-data-parallel: 1-bit LAMB fuses "
                                  "every moment into one buffer, but '@")
               << param.getSymName() << "' is averaged over " << axesOf(param)
               << " and '@" << first.getSymName() << "' over " << axes;
      }
      moments.push_back(update.getExpAvgAttr());
      elements += module.lookupSymbol<StateOp>(update.getExpAvg())
                      .getTensorType()
                      .getNumElements();
    }
    if (group == 1)
      return success();
    auto declare = [&](StringRef prefix, StateKind kind, int64_t n) {
      return declareCompressionState(module, first, prefix, kind, n);
    };
    const int64_t padded = ::dsc::onebitPaddedSize(elements, group);
    if (padded > elements)
      moments.push_back(declare("lamb.momentum_pad.", StateKind::CompressionPad,
                                padded - elements));
    FlatSymbolRefAttr worker =
        declare("onebit.worker_error.", StateKind::WorkerError, padded);
    FlatSymbolRefAttr server =
        declare("onebit.server_error.", StateKind::ServerError, padded / group);
    OpBuilder b(updates.front());
    CompressedAllReduceStatesOp::create(
        b, updates.front().getLoc(), b.getArrayAttr(moments), worker, server,
        FlatSymbolRefAttr::get(mesh.getSymNameAttr()), cast<ArrayAttr>(axes));
    ++numBuckets;
    return success();
  }

  /// Whether expert parallelism leaves `param` alone in its group (experts
  /// with ep = dp): nothing to average or shard. (dp=1 ZeRO still shards
  /// over its group of one, as DeepSpeed's engine does on one rank.)
  bool aloneInGroup(ParameterOp param) { return dp > 1 && groupOf(param) == 1; }
  /// Whether ZeRO shards `param`: its elements divide over its group (an
  /// odd size keeps a replicated update) and, under ZeRO-3, it is larger
  /// than the persistence threshold (DeepSpeed keeps small parameters
  /// whole: gathering them costs more than it saves).
  bool isShardable(ParameterOp param) {
    const int64_t n = param.getNumElements(), group = groupOf(param);
    return !aloneInGroup(param) && n % group == 0 &&
           !(zero == 3 && n <= persistenceThreshold);
  }

  /// Averages (or, with ZeRO, reduce-scatters) over each parameter's
  /// data-parallel group the gradients that `optimizer` clips and updates.
  LogicalResult replicate(ModuleOp module, MeshOp mesh,
                          func::FuncOp optimizer) {
    llvm::StringSet<> ownGradients;
    optimizer.walk([&](ZeroOp zeroOp) {
      for (Attribute name : zeroOp.getStates())
        ownGradients.insert(cast<FlatSymbolRefAttr>(name).getValue());
    });
    // ZeRO-1 shards the update of every AdamW parameter that dp divides;
    // their gradients are reduce-scattered (each rank needs only its
    // chunk), the others all-reduced. ZeRO-3 chunks these parameters.
    llvm::StringSet<> shardedParams;
    if (zero >= 1) {
      for (Operation &op : optimizer.getBody().front()) {
        if (isa<SgdOp>(op)) {
          return op.emitOpError("--dsc-data-parallel: zero=")
                 << zero
                 << " shards AdamW state; SGD is not supported (use zero=0 "
                    "or the adamw optimizer)";
        }
        if (isa<OnebitLambOp>(op))
          return op.emitOpError("--dsc-data-parallel: zero=")
                 << zero
                 << " with optimizer=onebit_lamb: not built (LAMB's trust "
                    "ratio needs each whole parameter and its update; "
                    "DeepSpeed refuses ZeRO with 1-bit LAMB too): use zero=0";
        if (auto adam = dyn_cast<OnebitAdamOp>(op)) {
          if (zero == 3)
            return adam.emitOpError("--dsc-data-parallel: optimizer="
                                    "onebit_adam supports ZeRO stages 1 and "
                                    "2, not zero=3 (its compression phase "
                                    "reads every parameter whole)");
          auto param = module.lookupSymbol<ParameterOp>(adam.getParam());
          if (processed.contains(adam.getParam()) || isShardable(param))
            onebitSharded.insert(adam.getParam());
        }
        if (auto adam = dyn_cast<AdamWOp>(op)) {
          auto param = module.lookupSymbol<ParameterOp>(adam.getParam());
          // A parameter another stage's optimizer also updates (a tied
          // embedding) was sharded by the first one already.
          bool seen = processed.contains(adam.getParam());
          if (zero == 3 && param.isChunked() && !seen)
            return param.emitOpError("--dsc-data-parallel: parameter '@")
                   << param.getSymName()
                   << "' is a ZeRO-3 chunk already; run zero=3 once";
          if (seen || isShardable(param))
            shardedParams.insert(adam.getParam());
        }
      }
    }

    // Buckets of consecutive gradients of one kind and one group, each at
    // most bucketBytes (a single larger gradient is a bucket of its own).
    struct Buckets {
      SmallVector<SmallVector<Attribute>> reduce, scatter;
      int64_t reduceFilled = 0, scatterFilled = 0;
    };
    llvm::MapVector<Attribute, Buckets> byGroup;
    bool anyReduced = false;
    for (auto state : module.getOps<StateOp>()) {
      if (state.getKind() != StateKind::Gradient ||
          !ownGradients.contains(state.getSymName()))
        continue;
      // An expert's gradient when edp is one rank: nothing to average.
      if (aloneInGroup(paramOf(state)))
        continue;
      Buckets &group = byGroup[axesOf(paramOf(state))];
      auto &reduceBuckets = group.reduce;
      auto &scatterBuckets = group.scatter;
      int64_t &reduceFilled = group.reduceFilled;
      int64_t &scatterFilled = group.scatterFilled;
      bool sharded = shardedParams.contains(state.getOf());
      // ZeRO-2/3 reduce-scatter these in the backward of every micro-batch
      // (a stage that only shares the gradient of a tied parameter another
      // stage updates gets the reduced shard from the sum over pp).
      if ((sharded || shardedAnywhere.contains(state.getOf())) && zero >= 2)
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
      anyReduced = true;
    }
    if (!anyReduced && shardedParams.empty() && onebitSharded.empty()) {
      return optimizer.emitError(
          "--dsc-data-parallel: no gradient states to reduce");
    }

    OpBuilder b(optimizer.getBody());
    b.setInsertionPointToStart(&optimizer.getBody().front());
    // After a pipeline's sum over pp of gradients several stages share
    // (--dsc-optimizer), so the dp collectives see whole sums.
    for (Operation &op : optimizer.getBody().front())
      if (auto reduce = dyn_cast<AllReduceStatesOp>(op);
          reduce &&
          llvm::is_contained(reduce.getMeshAxes().getAsValueRange<StringAttr>(),
                             "pp"))
        b.setInsertionPointAfter(reduce);
    auto meshRef = FlatSymbolRefAttr::get(mesh.getSymNameAttr());
    ArrayAttr axes = b.getStrArrayAttr(dataParallelAxes(mesh));
    for (auto &[groupAxes, group] : byGroup) {
      for (ArrayRef<Attribute> bucket : group.scatter) {
        auto scatter = ReduceScatterStatesOp::create(
            b, optimizer.getLoc(), b.getArrayAttr(bucket), meshRef,
            cast<ArrayAttr>(groupAxes));
        scatter.setReduction(ReductionKind::Average);
        ++numBuckets;
      }
    }
    for (auto &[groupAxes, group] : byGroup) {
      for (ArrayRef<Attribute> bucket : group.reduce) {
        auto reduce = AllReduceStatesOp::create(b, optimizer.getLoc(),
                                                b.getArrayAttr(bucket), meshRef,
                                                cast<ArrayAttr>(groupAxes));
        reduce.setReduction(ReductionKind::Average);
        ++numBuckets;
      }
    }
    if (zero >= 2 && failed(shardGradients(module, meshRef, shardedParams)))
      return failure();
    if (!onebitSharded.empty() &&
        failed(shardOnebitUpdates<OnebitAdamOp>(module, optimizer, meshRef)))
      return failure();
    if (zero >= 1 && !shardedParams.empty()) {
      // The norm of partially valid gradients is summed over the group.
      optimizer.walk([&](ClipGradNormOp clip) {
        SmallVector<bool> flags;
        for (Attribute name : clip.getGradients()) {
          auto state = module.lookupSymbol<StateOp>(
              cast<FlatSymbolRefAttr>(name).getValue());
          flags.push_back(
              shardedParams.contains(state.getOf()) ||
              (zero >= 2 && shardedAnywhere.contains(state.getOf())));
        }
        clip.setMeshAttr(meshRef);
        clip.setShardAxesAttr(axes);
        clip.setShardedAttr(b.getDenseBoolArrayAttr(flags));
      });
      if (failed(
              shardOptimizerStates(module, optimizer, meshRef, shardedParams)))
        return failure();
    }
    if (zero == 3) {
      chunkParameters(module, shardedParams);
      gatherParameterReads(module, meshRef, shardedParams);
    }
    for (const auto &name : shardedParams)
      processed.insert(name.getKey());
    for (const auto &name : onebitSharded)
      processed.insert(name.getKey());
    return success();
  }

  /// ZeRO-1/2 under 1-bit Adam: each update of `Update` (the warm-up's
  /// dsc.onebit_adam or the compression's dsc.frozen_adam) of a parameter
  /// in onebitSharded keeps the variance's and the parameter's chunk of
  /// this rank only; the updated parameters are gathered after the last
  /// update. The gradients and the momentum stay whole: the compression
  /// phase's local momentum reads each rank's whole gradient, so ZeRO-2
  /// shards no more than ZeRO-1 here (--dsc-data-parallel warns).
  template <typename Update>
  LogicalResult shardOnebitUpdates(ModuleOp module, func::FuncOp optimizer,
                                   FlatSymbolRefAttr meshRef) {
    SymbolTable symbols(module);
    SmallVector<ParameterOp> sharded;
    Operation *lastUpdate = nullptr;
    for (Update update : optimizer.getOps<Update>()) {
      lastUpdate = update;
      if (!onebitSharded.contains(update.getParam()))
        continue;
      auto param = symbols.lookup<ParameterOp>(update.getParam());
      auto variance = symbols.lookup<StateOp>(update.getExpAvgSq());
      const int64_t chunk = param.getNumElements() / groupOf(param);
      // Another program (the other phase, or a stage sharing a tied
      // parameter) shrank the shared variance already.
      if (variance.getTensorType().getNumElements() != chunk) {
        OpBuilder b(variance);
        auto shard = StateOp::create(
            b, variance.getLoc(), variance.getSymName(),
            RankedTensorType::get({chunk},
                                  variance.getTensorType().getElementType()),
            variance.getKind(), variance.getOf());
        symbols.erase(variance);
        symbols.insert(shard);
        ++numShardedParams;
      }
      update.setMeshAttr(meshRef);
      update.setShardAxesAttr(axesOf(param));
      sharded.push_back(param);
    }
    if (lastUpdate && !sharded.empty())
      gatherUpdatedParameters(optimizer, lastUpdate, meshRef, sharded);
    return success();
  }

  /// ZeRO-3: each sharded parameter keeps only its chunk, a rank-1 tensor
  /// of numel/dp elements whose layout says which part of the whole it is,
  /// so that every rank initializes it from the one-rank run's values.
  void chunkParameters(ModuleOp module,
                       const llvm::StringSet<> &shardedParams) {
    SymbolTable symbols(module);
    MLIRContext *ctx = module.getContext();
    Builder attrs(ctx);
    for (auto param :
         llvm::make_early_inc_range(module.getOps<ParameterOp>())) {
      if (!shardedParams.contains(param.getSymName()) ||
          processed.contains(param.getSymName()))
        continue;
      RankedTensorType type = param.getTensorType();
      // Tensor slicing made the parameter a box of a larger view already:
      // keep the box and chunk it; otherwise the view is the whole shape.
      ShardLayoutAttr layout = param.getLayoutAttr();
      SmallVector<int64_t> view, shape;
      ArrayAttr split;
      if (layout) {
        view.assign(layout.getView().begin(), layout.getView().end());
        shape.assign(layout.getShape().begin(), layout.getShape().end());
        split = layout.getSplit();
      } else {
        view.assign(type.getShape().begin(), type.getShape().end());
        split = attrs.getArrayAttr(
            SmallVector<Attribute>(type.getRank(), attrs.getArrayAttr({})));
      }
      auto chunked =
          ShardLayoutAttr::get(ctx, view, split, axesOf(param), shape);
      OpBuilder b(param);
      auto chunk = ParameterOp::create(
          b, param.getLoc(), param.getSymName(),
          RankedTensorType::get({type.getNumElements() / groupOf(param)},
                                type.getElementType()),
          param.getInit(), chunked);
      symbols.erase(param);
      symbols.insert(chunk);
      ++numChunkedParams;
    }
  }

  /// ZeRO-3: every read of a chunked parameter becomes a gather right before
  /// its first use; in @forward_backward the backward (the ops after the
  /// loss autodiff seeds) gathers again before its first use, so the
  /// forward's copy dies after its last forward use and the memory planner
  /// reuses its bytes, as DeepSpeed's stage 3 fetches and releases.
  void gatherParameterReads(ModuleOp module, FlatSymbolRefAttr meshRef,
                            const llvm::StringSet<> &shardedParams) {
    SymbolTable symbols(module);
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      Block &top = func.getBody().front();
      Operation *lossOp = nullptr;
      if (getProgramRole(func) == ProgramRole::ForwardBackward &&
          !getPipelineStage(func))
        if (auto ret = dyn_cast<func::ReturnOp>(top.getTerminator());
            ret && ret.getNumOperands() > 0)
          lossOp = ret.getOperand(0).getDefiningOp();
      if (lossOp)
        lossOp = top.findAncestorOpInBlock(*lossOp);
      SmallVector<GetParameterOp> reads;
      func.walk([&](GetParameterOp read) {
        if (shardedParams.contains(read.getName()))
          reads.push_back(read);
      });
      for (GetParameterOp read : reads) {
        Block *block = read->getBlock();
        // Mixed precision reads a parameter through a dsc.cast to bf16: the
        // cast's users are the read's, and each phase's gather gets its own
        // cast, so the bf16 copy is released with the f32 one.
        struct Use {
          OpOperand *operand;
          CastOp via; // The cast of the read it reads through, or null.
        };
        SmallVector<Use> leaves;
        SmallVector<CastOp> casts;
        for (OpOperand &use : read.getResult().getUses()) {
          auto cast = dyn_cast<CastOp>(use.getOwner());
          if (!cast || cast->getBlock() != block) {
            leaves.push_back({&use, nullptr});
            continue;
          }
          casts.push_back(cast);
          for (OpOperand &castUse : cast.getResult().getUses())
            leaves.push_back({&castUse, cast});
        }
        // Uses by phase (0 forward, 1 backward) and each phase's first user
        // in the read's block.
        SmallVector<Use> uses[2];
        Operation *first[2] = {nullptr, nullptr};
        for (Use use : leaves) {
          Operation *owner = use.operand->getOwner();
          Operation *user = block->findAncestorOpInBlock(*owner);
          Operation *topUser = top.findAncestorOpInBlock(*owner);
          int phase = lossOp && topUser && lossOp->isBeforeInBlock(topUser);
          uses[phase].push_back(use);
          if (!first[phase] || user->isBeforeInBlock(first[phase]))
            first[phase] = user;
        }
        for (int phase : {0, 1}) {
          if (!first[phase])
            continue;
          OpBuilder b(first[phase]);
          auto gather = GatherParameterOp::create(
              b, read.getLoc(), read.getType(), read.getNameAttr(), meshRef,
              axesOf(symbols.lookup<ParameterOp>(read.getName())),
              /*chunk=*/Value());
          llvm::DenseMap<Operation *, Value> recast;
          for (Use use : uses[phase]) {
            Value value = gather.getResult();
            if (use.via) {
              Value &cast = recast[use.via];
              if (!cast)
                cast = CastOp::create(b, use.via.getLoc(), use.via.getType(),
                                      gather.getResult());
              value = cast;
            }
            use.operand->set(value);
          }
          ++numGathers;
        }
        for (CastOp cast : casts)
          if (cast->use_empty())
            cast.erase();
        read.erase();
      }
    }
  }

  /// ZeRO-2/3: the gradients of sharded parameters become rank-1 shards, and
  /// the backward reduce-scatters each micro-batch's gradient into them.
  LogicalResult shardGradients(ModuleOp module, FlatSymbolRefAttr meshRef,
                               const llvm::StringSet<> &shardedParams) {
    // @forward_backward, or one per pipeline stage.
    SmallVector<func::FuncOp> backwards;
    for (Operation *op : getProgramOps(module, ProgramRole::ForwardBackward))
      if (auto func = dyn_cast<func::FuncOp>(op))
        backwards.push_back(func);
    if (backwards.empty())
      return module.emitError("--dsc-data-parallel: zero=")
             << zero << " needs @forward_backward; run --dsc-autodiff first";
    SymbolTable symbols(module);
    llvm::StringMap<ArrayAttr> shardedStates;
    for (auto state : llvm::make_early_inc_range(module.getOps<StateOp>())) {
      if (state.getKind() != StateKind::Gradient ||
          !shardedParams.contains(state.getOf()) ||
          processed.contains(state.getOf()))
        continue;
      RankedTensorType type = state.getTensorType();
      ParameterOp param = paramOf(state);
      OpBuilder b(state);
      auto shard = StateOp::create(
          b, state.getLoc(), state.getSymName(),
          RankedTensorType::get({type.getNumElements() / groupOf(param)},
                                type.getElementType()),
          state.getKind(), state.getOf());
      shardedStates[state.getSymName()] = axesOf(param);
      symbols.erase(state);
      symbols.insert(shard);
    }
    SmallVector<AccumulateOp> accumulates;
    for (func::FuncOp fb : backwards)
      fb.walk([&](AccumulateOp acc) {
        if (shardedStates.contains(acc.getState()))
          accumulates.push_back(acc);
      });
    for (AccumulateOp acc : accumulates) {
      OpBuilder b(acc);
      auto scatter = ReduceScatterAccumulateOp::create(
          b, acc.getLoc(), acc.getValue(), acc.getStateAttr(), meshRef,
          shardedStates.lookup(acc.getState()));
      scatter.setReduction(ReductionKind::Average);
      acc.erase();
    }
    return success();
  }

  /// ZeRO-1/2: shards every AdamW update's moments over dp and gathers the
  /// updated parameters after the last update. ZeRO-3 shards the moments
  /// the same way, but its parameters are chunks too: the update is a plain
  /// AdamW of chunk-sized buffers and nothing is gathered after it.
  LogicalResult shardOptimizerStates(ModuleOp module, func::FuncOp optimizer,
                                     FlatSymbolRefAttr meshRef,
                                     const llvm::StringSet<> &shardedParams) {
    SymbolTable symbols(module);
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
          {n / groupOf(param)}, param.getTensorType().getElementType());
      for (StringRef name : {adam.getExpAvg(), adam.getExpAvgSq()}) {
        if (processed.contains(adam.getParam()))
          break; // Shared with another stage's update: shrunk already.
        auto state = symbols.lookup<StateOp>(name);
        OpBuilder b(state);
        auto shard = StateOp::create(b, state.getLoc(), name, shardType,
                                     state.getKind(), state.getOf());
        symbols.erase(state);
        symbols.insert(shard);
      }
      ++numShardedParams;
      if (zero == 3)
        continue;
      adam.setMeshAttr(meshRef);
      adam.setShardAxesAttr(axesOf(param));
      sharded.push_back(param);
    }
    if (!lastUpdate || sharded.empty())
      return success(); // No optimizer state to shard.
    gatherUpdatedParameters(optimizer, lastUpdate, meshRef, sharded);
    return success();
  }

  /// After `lastUpdate`, all-gathers the `sharded` parameters each rank
  /// updated a chunk of, in buckets of at most bucketBytes of one group, in
  /// update order.
  void gatherUpdatedParameters(func::FuncOp optimizer, Operation *lastUpdate,
                               FlatSymbolRefAttr meshRef,
                               ArrayRef<ParameterOp> sharded) {
    OpBuilder b(lastUpdate->getContext());
    b.setInsertionPointAfter(lastUpdate);
    struct Bucket {
      SmallVector<Attribute> params;
      int64_t filled = 0;
    };
    llvm::MapVector<Attribute, Bucket> open;
    auto flush = [&](Attribute axes, Bucket &bucket) {
      if (bucket.params.empty())
        return;
      AllGatherStatesOp::create(b, optimizer.getLoc(),
                                b.getArrayAttr(bucket.params), meshRef,
                                cast<ArrayAttr>(axes));
      bucket = Bucket();
    };
    for (ParameterOp param : sharded) {
      ArrayAttr axes = axesOf(param);
      Bucket &bucket = open[axes];
      int64_t bytes = bytesOf(param.getTensorType());
      if (!bucket.params.empty() && bucket.filled + bytes > bucketBytes)
        flush(axes, bucket);
      bucket.params.push_back(FlatSymbolRefAttr::get(param.getSymNameAttr()));
      bucket.filled += bytes;
    }
    for (auto &[axes, bucket] : open)
      flush(axes, bucket);
  }
};

} // namespace
