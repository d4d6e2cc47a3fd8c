//===- Offload.cpp - --dsc-offload ------------------------------*- C++ -*-===//
//
// ZeRO-Offload and ZeRO-Infinity: the AdamW states move to host memory or
// NVMe, the update runs there on a master copy of each parameter, and
// explicit dsc.transfer ops carry gradients down and updated parameters up;
// ZeRO-3 chunks may live there too, fetched one gather ahead of each use
// (see the pass description in Passes.td).
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscAttrNames.h"
#include "dsc/Dialect/Dsc/IR/DscOps.h"
#include "dsc/Dialect/Dsc/IR/DscPrograms.h"
#include "dsc/Transforms/Passes.h"
#include "dsc/Transforms/PlanOptions.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/ScopeExit.h"

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCOFFLOADPASS
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

/// One offloaded update: the parameter, its device gradient, and the copies
/// and moments in the offload tier.
struct OffloadedUpdate {
  AdamWOp update;
  FlatSymbolRefAttr param, grad, master, gradCopy, expAvg, expAvgSq;
  /// The mesh and axes of a ZeRO-sharded update (null when whole): the
  /// copies are this rank's chunk.
  FlatSymbolRefAttr mesh;
  ArrayAttr shardAxes;
  /// Whether the device gradient / parameter are whole while the copies
  /// are a chunk (then their transfer moves the chunk).
  bool gradChunked = false, paramChunked = false;
  /// A ZeRO-3 chunk offloaded with params=: updated in place where it
  /// lives (`master` is the parameter itself).
  bool paramOffloaded = false;
};

struct DscOffloadPass
    : PlanReadingPass<DscOffloadPass,
                      mlir::dsc::impl::DscOffloadPassBase<DscOffloadPass>> {
  using PlanReadingPass::PlanReadingPass;

  static ArrayRef<PlanAlias> planAliases() {
    static const PlanAlias aliases[] = {{"optimizer", "offload-optimizer"},
                                        {"params", "offload-params"}};
    return aliases;
  }

  /// The plan knobs this pass builds (readPlan, at the start of a run).
  std::string optimizer;
  std::string params;
  bool dpu{};
  std::string nvmePath;
  int64_t nvmeBlockBytes{};
  int64_t nvmeQueueDepth{};
  int64_t deviceMemory{};
  bool prefetch{};
  int64_t zeroStage{};
  int64_t persistenceThreshold{};
  /// --dsc-fuse runs after this pass (--dsc-compile): the device peaks it
  /// measures are the fused programs', whose saved attention statistics
  /// live from the forward to the backward.
  bool fuse{};

  void runOnOperation() override {
    ModuleOp module = getOperation();
    const ::dsc::ParallelPlan plan = readPlan(module);
    {
      optimizer = ::dsc::offloadTierName(plan.offloadOptimizer);
      params = ::dsc::offloadTierName(plan.offloadParams);
      dpu = plan.delayedUpdate;
      nvmePath = plan.nvmePath;
      nvmeBlockBytes = plan.nvmeBlockBytes;
      nvmeQueueDepth = plan.nvmeQueueDepth;
      deviceMemory = plan.deviceMemory;
      prefetch = plan.prefetch;
      zeroStage = plan.zeroStage;
      persistenceThreshold = plan.persistenceThreshold;
      fuse = plan.fuse;
    }
    // The plan's tiers (its parser refuses any other): none keeps the
    // states on the device.
    const MemoryTier tier = memoryTierOf(plan.offloadOptimizer);
    const MemoryTier paramsTier = memoryTierOf(plan.offloadParams);
    if (paramsTier != MemoryTier::Device && tier == MemoryTier::Device) {
      module.emitError("--dsc-offload: params=")
          << params
          << " needs optimizer=host or nvme: an offloaded chunk is updated "
             "where it lives";
      return signalPassFailure();
    }
    // NVMe masters would be read twice a step; an offloaded chunk, updated
    // in place, has no copy a step behind.
    if (dpu && (tier != MemoryTier::Host || paramsTier != MemoryTier::Device)) {
      module.emitError("--dsc-offload: dpu=1 (the delayed parameter update) "
                       "needs optimizer=host and params=none, got optimizer=")
          << optimizer << " params=" << params;
      return signalPassFailure();
    }
    Tiers tiers{tier, paramsTier};
    // ZeRO-3 that chunked nothing because every parameter is within the
    // persistence threshold (a small model) has no parameter to offload:
    // DeepSpeed keeps such parameters whole on the device and trains, and so
    // does dsc, saying so.
    auto withinThreshold = [&](ParameterOp param) {
      return param.getNumElements() <= persistenceThreshold;
    };
    if (tiers.params != MemoryTier::Device && zeroStage == 3 &&
        persistenceThreshold > 0 && !hasChunks(module) &&
        llvm::all_of(module.getOps<ParameterOp>(), withinThreshold)) {
      module.emitWarning("--dsc-offload: params=")
          << stringifyMemoryTier(tiers.params)
          << " has nothing to offload: every parameter has at most "
             "persistence-threshold="
          << persistenceThreshold
          << " elements, so ZeRO-3 keeps it whole on the device (DeepSpeed's "
             "stage3_param_persistence_threshold); lower the threshold to "
             "offload them";
      tiers.params = MemoryTier::Device;
      params = "none";
    }
    // A budget without a tier named: the least offload that fits it.
    if (deviceMemory > 0 && tier == MemoryTier::Device) {
      FailureOr<Tiers> fitting = leastOffloadThatFits(module);
      if (failed(fitting))
        return signalPassFailure();
      tiers = *fitting;
    } else if (deviceMemory > 0) {
      FailureOr<int64_t> peak = devicePeak(module, tiers);
      if (failed(peak))
        return signalPassFailure();
      if (*peak > deviceMemory) {
        module.emitError("--dsc-offload: device-memory=")
            << int64_t(deviceMemory) << " bytes: with optimizer=" << optimizer
            << " params=" << params << " the device peak is " << *peak
            << " bytes";
        return signalPassFailure();
      }
    }
    // The module's plan says what was built: the tiers a budget chose
    // (offload() records those it builds, with the NVMe lane's knobs).
    if (std::optional<::dsc::ParallelPlan> recorded = getModulePlan(module)) {
      ::dsc::ParallelPlan built = *recorded;
      built.offloadOptimizer = offloadTierOf(tiers.optimizer);
      built.offloadParams = offloadTierOf(tiers.params);
      if (built != *recorded)
        setModulePlan(module, built);
    }
    if (tiers.optimizer == MemoryTier::Device) {
      if (!nvmePath.empty()) {
        module.emitError("--dsc-offload: nvme-path is set but nothing is "
                         "offloaded to nvme");
        return signalPassFailure();
      }
      return;
    }
    if (!tiers.uses(MemoryTier::Nvme) && !nvmePath.empty()) {
      module.emitError("--dsc-offload: nvme-path is set but optimizer=")
          << stringifyMemoryTier(tiers.optimizer)
          << " params=" << tierName(tiers.params) << " keep nothing on nvme";
      return signalPassFailure();
    }
    if (nvmeBlockBytes < 4096 || nvmeBlockBytes > (int64_t(1) << 30) ||
        nvmeQueueDepth < 1 || nvmeQueueDepth > 4096) {
      module.emitError("--dsc-offload: nvme-block-bytes must be in [4096, "
                       "2^30] and nvme-queue-depth in [1, 4096], got ")
          << int64_t(nvmeBlockBytes) << " and " << int64_t(nvmeQueueDepth);
      return signalPassFailure();
    }
    if (failed(offload(module, tiers)))
      return signalPassFailure();
  }

  /// Where the optimizer (states, update) and ZeRO-3 chunks live; Device
  /// is none.
  struct Tiers {
    MemoryTier optimizer, params;
    bool uses(MemoryTier t) const { return optimizer == t || params == t; }
  };

  static MemoryTier memoryTierOf(::dsc::OffloadTier tier) {
    switch (tier) {
    case ::dsc::OffloadTier::None:
      return MemoryTier::Device;
    case ::dsc::OffloadTier::Host:
      return MemoryTier::Host;
    case ::dsc::OffloadTier::Nvme:
      return MemoryTier::Nvme;
    }
    return MemoryTier::Device;
  }

  static ::dsc::OffloadTier offloadTierOf(MemoryTier tier) {
    switch (tier) {
    case MemoryTier::Device:
      return ::dsc::OffloadTier::None;
    case MemoryTier::Host:
      return ::dsc::OffloadTier::Host;
    case MemoryTier::Nvme:
      return ::dsc::OffloadTier::Nvme;
    }
    return ::dsc::OffloadTier::None;
  }

  static StringRef tierName(MemoryTier tier) {
    return tier == MemoryTier::Device ? "none" : stringifyMemoryTier(tier);
  }

  /// The device arena's peak bytes of `module` with its optimizer in
  /// `tier`: the memory planner's, run on a copy nested in the module (a
  /// pass may run a pipeline only on what it holds) and dropped after.
  FailureOr<int64_t> devicePeak(ModuleOp module, Tiers tiers) {
    ModuleOp copy = cast<ModuleOp>(module->clone());
    module.getBody()->push_back(copy);
    // The copy's rewrite is not the pass's work: its statistics stay.
    const uint64_t offloaded = numOffloaded, transfers = numTransfers,
                   fetches = numFetches;
    auto drop = llvm::make_scope_exit([&] {
      copy.erase();
      numOffloaded = unsigned(offloaded);
      numTransfers = unsigned(transfers);
      numFetches = unsigned(fetches);
    });
    if (tiers.optimizer != MemoryTier::Device && failed(offload(copy, tiers)))
      return failure();
    OpPassManager planner(ModuleOp::getOperationName());
    // The copy carries the module's plan (prefetch included).
    if (fuse)
      planner.addPass(createDscFusePass());
    planner.addPass(createDscPlanMemoryPass());
    if (failed(runPipeline(planner, copy)))
      return failure();
    auto memory = copy->getAttrOfType<DictionaryAttr>(kMemoryAttr);
    return cast<IntegerAttr>(memory.get("arena_bytes")).getInt();
  }

  /// none, then the optimizer in the host tier, then (ZeRO-3) the chunks
  /// there too (NVMe holds what the host would: the device peak is the
  /// host's): the first whose device peak fits device-memory.
  FailureOr<Tiers> leastOffloadThatFits(ModuleOp module) {
    const Tiers none{MemoryTier::Device, MemoryTier::Device},
        optimizerOnHost{MemoryTier::Host, MemoryTier::Device},
        allOnHost{MemoryTier::Host, MemoryTier::Host};
    FailureOr<int64_t> onDevice = devicePeak(module, none);
    if (failed(onDevice))
      return failure();
    if (*onDevice <= deviceMemory)
      return none;
    FailureOr<int64_t> offloaded = devicePeak(module, optimizerOnHost);
    if (failed(offloaded))
      return failure();
    if (*offloaded <= deviceMemory)
      return optimizerOnHost;
    StringRef smallest = "optimizer=host";
    if (hasChunks(module)) {
      offloaded = devicePeak(module, allOnHost);
      if (failed(offloaded))
        return failure();
      if (*offloaded <= deviceMemory)
        return allOnHost;
      smallest = "optimizer=host params=host";
    }
    module.emitError("--dsc-offload: device-memory=")
        << int64_t(deviceMemory)
        << " bytes does not fit: the smallest device peak "
        << "offload reaches is " << *offloaded << " bytes (" << smallest << "; "
        << *onDevice
        << " without offload); the rest are activations, gradients and "
           "parameters (recompute=full, tp, pp or ZeRO-3 shrink those)";
    return failure();
  }

  static bool hasChunks(ModuleOp module) {
    return llvm::any_of(module.getOps<ParameterOp>(),
                        [](ParameterOp p) { return p.isChunked(); });
  }

  /// Places `module`'s AdamW states and update in `tiers.optimizer` (host
  /// or nvme) and its ZeRO-3 chunks in `tiers.params`.
  LogicalResult offload(ModuleOp module, Tiers tiers) {
    const MemoryTier tier = tiers.optimizer;
    // One optimizer program, or one per pipeline stage (each rank runs its
    // stages' own).
    SmallVector<func::FuncOp> programs;
    for (Operation *op : getProgramOps(module, ProgramRole::Optimizer))
      programs.push_back(cast<func::FuncOp>(op));
    if (programs.empty())
      return module.emitError("--dsc-offload needs an optimizer program; "
                              "run --dsc-optimizer first");
    for (func::FuncOp program : programs)
      if (!program.getOps<SgdOp>().empty())
        return module.emitError("--dsc-offload: the offloaded update is "
                                "AdamW (DeepSpeed's CPU Adam); optimizer=sgd "
                                "is not offloaded");
    if (!getProgramOps(module, ProgramRole::CompressedOptimizer).empty())
      return module.emitError("--dsc-offload: the offloaded update is AdamW "
                              "(DeepSpeed's CPU Adam); optimizer=onebit_adam "
                              "and onebit_lamb are not offloaded (DeepSpeed's "
                              "1-bit optimizers have no offload either)");
    if (module->hasAttr(kPipelineAttr) &&
        (tiers.params != MemoryTier::Device || dpu))
      return module.emitError("--dsc-offload: with pipeline stages only the "
                              "optimizer is offloaded yet (")
             << (dpu ? "dpu=1" : "params=") << " is not built there)";

    if (tiers.params != MemoryTier::Device) {
      if (!hasChunks(module))
        return module.emitError("--dsc-offload: params=")
               << stringifyMemoryTier(tiers.params)
               << " offloads ZeRO-3 chunks and no parameter is one; "
                  "compile with zero=3 (DeepSpeed's offload_param is "
                  "stage 3's), whose persistence threshold keeps "
                  "parameters of at most that many elements whole";
      for (ParameterOp param : module.getOps<ParameterOp>())
        if (param.isChunked())
          param.setTier(tiers.params);
      for (auto func : module.getOps<func::FuncOp>())
        fetchAhead(func);
    }

    SymbolTable symbols(module);
    SmallVector<OffloadedUpdate> allUpdates;
    for (func::FuncOp program : programs) {
      SmallVector<OffloadedUpdate> updates;
      for (AdamWOp adam : program.getOps<AdamWOp>())
        updates.push_back(declareCopies(adam, symbols, tier));
      if (updates.empty())
        continue;
      rewriteOptimizer(program, updates, tier);
      if (dpu)
        delayUpdates(program, updates);
      allUpdates.append(updates.begin(), updates.end());
    }
    if (allUpdates.empty())
      return success();
    buildInitialize(module, programs.back(), allUpdates, tier);

    // The module's plan says what was built, whatever keys this run was
    // given: the tiers and the NVMe lane's knobs, which the lowering reads.
    ::dsc::ParallelPlan built =
        getModulePlan(module).value_or(::dsc::ParallelPlan());
    built.offloadOptimizer = offloadTierOf(tier);
    built.offloadParams = offloadTierOf(tiers.params);
    built.nvmePath = nvmePath;
    if (tiers.uses(MemoryTier::Nvme)) {
      built.nvmeBlockBytes = nvmeBlockBytes;
      built.nvmeQueueDepth = nvmeQueueDepth;
    }
    setModulePlan(module, built);
    numOffloaded += allUpdates.size();
    return success();
  }

  /// In `func`, each gather of an offloaded chunk gathers from a fetched
  /// copy, fetched before the previous such gather (one ahead: the next
  /// layer's chunk moves while this one is gathered and used).
  void fetchAhead(func::FuncOp func) {
    SmallVector<GatherParameterOp> gathers;
    func.walk([&](GatherParameterOp gather) {
      auto param = SymbolTable::lookupNearestSymbolFrom<ParameterOp>(
          gather, gather.getNameAttr());
      if (param && param.getTier() != MemoryTier::Device)
        gathers.push_back(gather);
    });
    for (auto [index, gather] : llvm::enumerate(gathers)) {
      GatherParameterOp before = gathers[index == 0 ? 0 : index - 1];
      // A gather inside a nested region (a pipeline stage) is fetched in
      // its own block.
      if (before->getBlock() != gather->getBlock())
        before = gather;
      OpBuilder builder(before);
      auto param = SymbolTable::lookupNearestSymbolFrom<ParameterOp>(
          gather, gather.getNameAttr());
      auto fetch = FetchParameterOp::create(
          builder, gather.getLoc(), param.getType(), gather.getNameAttr());
      gather.getChunkMutable().assign(fetch.getResult());
      ++numFetches;
    }
  }

  /// Moves `adam`'s moments to `tier` and declares the master and gradient
  /// copies beside them (of the moments' type: whole, or this rank's chunk).
  /// An offloaded chunk has no master: it is updated where it lives.
  OffloadedUpdate declareCopies(AdamWOp adam, SymbolTable &symbols,
                                MemoryTier tier) {
    OffloadedUpdate u;
    u.update = adam;
    u.param = adam.getParamAttr();
    u.grad = adam.getGradAttr();
    u.expAvg = adam.getExpAvgAttr();
    u.expAvgSq = adam.getExpAvgSqAttr();
    u.mesh = adam.getMeshAttr();
    u.shardAxes = adam.getShardAxesAttr();
    auto expAvg = symbols.lookup<StateOp>(u.expAvg.getValue());
    auto expAvgSq = symbols.lookup<StateOp>(u.expAvgSq.getValue());
    expAvg.setTier(tier);
    expAvgSq.setTier(tier);
    RankedTensorType type = expAvg.getTensorType();
    auto param = symbols.lookup<ParameterOp>(u.param.getValue());
    auto grad = symbols.lookup<StateOp>(u.grad.getValue());
    u.paramChunked = param.getNumElements() != type.getNumElements();
    u.gradChunked =
        grad.getTensorType().getNumElements() != type.getNumElements();
    u.paramOffloaded = param.getTier() != MemoryTier::Device;

    OpBuilder builder(expAvg);
    auto declare = [&](StringRef prefix, StateKind kind, MemoryTier where) {
      auto state = StateOp::create(builder, adam.getLoc(),
                                   (prefix + u.param.getValue()).str(), type,
                                   kind, u.param.getValue());
      state.setTier(where);
      // A copy's name is derived, so a clash means the input already has
      // one: the symbol table renames it rather than shadowing.
      symbols.insert(state);
      return FlatSymbolRefAttr::get(state.getSymNameAttr());
    };
    u.master = u.paramOffloaded
                   ? u.param
                   : declare("offload.master.", StateKind::Master, tier);
    // The gradient is read once per step, where the update runs; on NVMe
    // it would only be written and read back.
    u.gradCopy =
        declare("offload.grad.", StateKind::GradientCopy, MemoryTier::Host);
    return u;
  }

  /// `dsc.transfer source to destination`, chunked over the update's ZeRO
  /// group when one side is the chunk of the other.
  void transfer(OpBuilder &builder, Location loc, FlatSymbolRefAttr source,
                FlatSymbolRefAttr destination, const OffloadedUpdate &u,
                bool chunked) {
    TransferOp::create(builder, loc, source, destination,
                       chunked ? u.mesh : FlatSymbolRefAttr(),
                       chunked ? u.shardAxes : ArrayAttr());
    ++numTransfers;
  }

  static ArrayAttr symbolList(Builder &b, ArrayRef<FlatSymbolRefAttr> symbols) {
    return b.getArrayAttr(
        SmallVector<Attribute>(symbols.begin(), symbols.end()));
  }

  void rewriteOptimizer(func::FuncOp program,
                        MutableArrayRef<OffloadedUpdate> updates,
                        MemoryTier tier) {
    MLIRContext *context = program.getContext();
    OpBuilder builder(context);
    // The gradients move down before the norm, which then runs over the
    // copies where the update runs (ZeRO-Offload's CPU-side norm).
    Operation *firstUse = updates.front().update.getOperation();
    if (auto clips = program.getOps<ClipGradNormOp>(); !clips.empty())
      firstUse = *clips.begin();
    builder.setInsertionPoint(firstUse);
    llvm::DenseMap<Attribute, Attribute> copyOf;
    for (OffloadedUpdate &u : updates) {
      transfer(builder, u.update.getLoc(), u.grad, u.gradCopy, u,
               u.gradChunked);
      copyOf[u.grad] = u.gradCopy;
    }
    for (ClipGradNormOp clip : program.getOps<ClipGradNormOp>()) {
      SmallVector<Attribute> grads;
      for (Attribute grad : clip.getGradients())
        grads.push_back(copyOf.lookup(grad) ? copyOf.lookup(grad) : grad);
      clip.setGradientsAttr(builder.getArrayAttr(grads));
    }

    // What each update swaps: its NVMe states (the master or offloaded
    // chunk, the moments).
    SymbolTable symbols(program->getParentOfType<ModuleOp>());
    auto swapped = [&](const OffloadedUpdate &u) {
      SmallVector<FlatSymbolRefAttr> names;
      for (FlatSymbolRefAttr name : {u.master, u.expAvg, u.expAvgSq}) {
        Operation *decl = symbols.lookup(name.getValue());
        auto state = dyn_cast<StateOp>(decl);
        MemoryTier where =
            state ? state.getTier() : cast<ParameterOp>(decl).getTier();
        if (where == MemoryTier::Nvme)
          names.push_back(name);
      }
      return symbolList(builder, names);
    };
    auto swapIn = [&](const OffloadedUpdate &u, Location loc) {
      if (ArrayAttr names = swapped(u); !names.empty())
        SwapInOp::create(builder, loc, names);
    };
    AdamWOp first = updates.front().update;
    builder.setInsertionPoint(first);
    swapIn(updates.front(), first.getLoc());
    for (auto [index, u] : llvm::enumerate(updates)) {
      AdamWOp adam = u.update;
      // Prefetch: the next parameter's states are read while this one
      // updates.
      builder.setInsertionPoint(adam);
      if (index + 1 < updates.size())
        swapIn(updates[index + 1], adam.getLoc());
      adam.setParamAttr(u.master);
      adam.setGradAttr(u.gradCopy);
      adam.removeMeshAttr();
      adam.removeShardAxesAttr();
      builder.setInsertionPointAfter(adam);
      if (!u.paramOffloaded)
        transfer(builder, adam.getLoc(), u.master, u.param, u, u.paramChunked);
      if (ArrayAttr names = swapped(u); !names.empty())
        SwapOutOp::create(builder, adam.getLoc(), names);
    }
  }

  /// ZeRO-Offload's delayed parameter update: the updates move after the
  /// rest of the program (each parameter's transfer then reads its master
  /// before this step's update) and a dsc.overlap_next_step, so they run
  /// beside the next step's forward and backward.
  void delayUpdates(func::FuncOp program, ArrayRef<OffloadedUpdate> updates) {
    Operation *terminator = program.getBody().front().getTerminator();
    OpBuilder builder(terminator);
    OverlapNextStepOp::create(builder, terminator->getLoc());
    for (const OffloadedUpdate &u : updates)
      u.update->moveBefore(terminator);
  }

  /// @initialize: each master from its parameter.
  void buildInitialize(ModuleOp module, func::FuncOp after,
                       ArrayRef<OffloadedUpdate> updates, MemoryTier tier) {
    OpBuilder builder(module.getContext());
    builder.setInsertionPointAfter(after);
    Location loc = after.getLoc();
    auto func = func::FuncOp::create(builder, loc, "initialize",
                                     builder.getFunctionType({}, {}));
    setProgramRole(func, ProgramRole::Initialize);
    SymbolTable(module).insert(func);
    builder.setInsertionPointToStart(func.addEntryBlock());
    for (const OffloadedUpdate &u : updates) {
      if (u.paramOffloaded)
        continue; // no master: the chunk is what the update reads
      ArrayAttr master = symbolList(builder, {u.master});
      if (tier == MemoryTier::Nvme)
        SwapInOp::create(builder, loc, master);
      transfer(builder, loc, u.param, u.master, u, u.paramChunked);
      if (tier == MemoryTier::Nvme)
        SwapOutOp::create(builder, loc, master);
    }
    func::ReturnOp::create(builder, loc);
  }
};

} // namespace
