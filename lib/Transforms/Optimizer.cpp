//===- Optimizer.cpp - --dsc-optimizer --------------------------*- C++ -*-===//
//
// Emits @optimizer: the learning-rate schedule, global gradient clipping, one
// AdamW, SGD, 1-bit Adam or 1-bit LAMB update per parameter over explicit
// dsc.state moments, and the zeroing of the accumulated gradients; for the
// 1-bit optimizers also @optimizer.compressed, their step after the warm-up,
// and for 0/1 Adam its onebit, local and sync steps.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscAttrNames.h"
#include "dsc/Dialect/Dsc/IR/DscOps.h"
#include "dsc/Dialect/Dsc/IR/DscPrograms.h"
#include "dsc/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <map>

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCOPTIMIZERPASS
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

struct DscOptimizerPass
    : mlir::dsc::impl::DscOptimizerPassBase<DscOptimizerPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(refuseRemovedScheduleOption(module, "--dsc-optimizer",
                                           removedSchedule)))
      return signalPassFailure();
    std::optional<LrSchedule> kind = symbolizeLrSchedule(lrSchedule);
    cyclic = symbolizeCyclicLrSchedule(lrSchedule);
    if (cyclic) {
      if (failed(checkCyclicOptions(module)))
        return signalPassFailure();
      kind = LrSchedule::Constant;
    }
    if (cycleMomentum &&
        (cyclic != CyclicLrSchedule::OneCycle || optimizer != "adamw")) {
      module.emitError("--dsc-optimizer: cycle-momentum cycles AdamW's beta1 "
                       "with OneCycle's learning rate: it needs "
                       "lr-schedule=one_cycle and optimizer=adamw, got "
                       "lr-schedule=")
          << lrSchedule << ", optimizer=" << optimizer;
      return signalPassFailure();
    }
    if (!kind) {
      module.emitError("--dsc-optimizer: unknown schedule '")
          << lrSchedule
          << "'; expected constant, warmup, warmup_linear, warmup_cosine, "
             "range_test, one_cycle (DeepSpeed's) or annealing_constant, "
             "annealing_linear, annealing_cosine, annealing_exponential "
             "(GPT-NeoX's)";
      return signalPassFailure();
    }
    if (LearningRateOp::decaysAfterWarmup(*kind) && totalSteps <= warmup) {
      module.emitError("--dsc-optimizer: schedule '")
          << lrSchedule << "' decays after the warmup, so total-steps ("
          << totalSteps.getValue() << ") must exceed warmup ("
          << warmup.getValue() << ")";
      return signalPassFailure();
    }
    if (warmupType != "linear" && warmupType != "log") {
      module.emitError("--dsc-optimizer: unknown warmup-type '")
          << warmupType << "'; expected linear or log (DeepSpeed's "
          << "warmup_type)";
      return signalPassFailure();
    }
    if (LearningRateOp::isAnnealing(*kind) &&
        (warmupStart != 0.0 || warmupType == "log")) {
      module.emitError("--dsc-optimizer: schedule '")
          << lrSchedule
          << "' (GPT-NeoX's AnnealingLR) warms up linearly from 0, so "
             "warmup-start and warmup-type=log do not apply to it";
      return signalPassFailure();
    }
    if (!(warmupStart >= 0.0 && warmupStart <= lr)) {
      module.emitError("--dsc-optimizer: warmup-start must be in [0, lr = ")
          << lr.getValue() << "], got " << warmupStart.getValue();
      return signalPassFailure();
    }
    if (optimizer != "adamw" && optimizer != "sgd" &&
        optimizer != "onebit_adam" && optimizer != "onebit_lamb" &&
        optimizer != "zero_one_adam") {
      module.emitError("--dsc-optimizer: unknown optimizer '")
          << optimizer
          << "'; expected adamw, sgd, onebit_adam, onebit_lamb or "
             "zero_one_adam";
      return signalPassFailure();
    }
    if (optimizer == "zero_one_adam" && failed(checkZeroOneAdam(module)))
      return signalPassFailure();
    if (compresses() && freezeStep < 1) {
      module.emitError("--dsc-optimizer: optimizer=")
          << optimizer
          << " needs freeze-step >= 1 (the first step that compresses), got "
          << freezeStep.getValue();
      return signalPassFailure();
    }
    if (optimizer == "onebit_lamb" && failed(checkLamb(module)))
      return signalPassFailure();
    SymbolTable symbolTable(module);
    OpBuilder decls(module.getContext());
    symbols = &symbolTable;
    declBuilder = &decls;
    if (!getProgramOps(module, ProgramRole::Optimizer).empty() ||
        symbols->lookup("optimizer")) {
      module.emitError("--dsc-optimizer: the module already has an "
                       "@optimizer function");
      return signalPassFailure();
    }

    // Gradient states in declaration order (autodiff's order of first use,
    // reversed), which fixes the order of the norm's reduction.
    SmallVector<StateOp> gradients;
    for (Operation &op : module.getBody()->getOperations()) {
      if (auto state = dyn_cast<StateOp>(op);
          state && state.getKind() == StateKind::Gradient)
        gradients.push_back(state);
      if (isa<ParameterOp, StateOp>(op))
        lastDecl = &op;
    }
    if (gradients.empty()) {
      module.emitError("--dsc-optimizer: no gradient states; run "
                       "--dsc-autodiff first");
      return signalPassFailure();
    }
    declBuilder->setInsertionPointAfter(lastDecl);

    // Pipeline stages (--dsc-pipeline): one optimizer per pp rank over the
    // gradients its stages' backwards accumulate. Interleaved, a rank holds
    // several stages and clips them by one norm, so they share it.
    const std::optional<PipelineShape> shape = getPipelineShape(module);
    std::map<int64_t, llvm::StringSet<>> ranks;
    for (Operation *func :
         getProgramOps(module, ProgramRole::ForwardBackward)) {
      std::optional<int64_t> stage = getPipelineStage(func);
      if (!stage)
        continue;
      llvm::StringSet<> &accumulated =
          ranks[shape ? shape->rankOf(*stage) : *stage];
      func->walk([&](AccumulateOp acc) { accumulated.insert(acc.getState()); });
    }
    SmallVector<std::pair<int64_t, llvm::StringSet<>>> stages;
    for (auto &[rank, accumulated] : ranks)
      stages.push_back({rank, std::move(accumulated)});
    if (stages.empty()) {
      emitOptimizer("optimizer", gradients, gradients, {}, {}, std::nullopt);
      if (compresses())
        emitOptimizer("optimizer.compressed", gradients, gradients, {}, {},
                      std::nullopt, ProgramRole::CompressedOptimizer);
      if (optimizer == "zero_one_adam")
        for (auto [name, role] :
             {std::make_pair("optimizer.onebit",
                             ProgramRole::OnebitStepOptimizer),
              std::make_pair("optimizer.local",
                             ProgramRole::LocalStepOptimizer),
              std::make_pair("optimizer.sync", ProgramRole::SyncStepOptimizer)})
          emitOptimizer(name, gradients, gradients, {}, {}, std::nullopt, role);
      return;
    }

    // A gradient accumulated by several stages (a tied embedding, read by
    // the first and the last) is a sum of the stages' parts: every stage
    // adds it over pp, counts it once in the norm and updates its copy.
    llvm::StringMap<int> owners;
    for (auto &[k, accumulated] : stages)
      for (auto &entry : accumulated)
        ++owners[entry.getKey()];
    SmallVector<StateOp> shared;
    for (StateOp grad : gradients)
      if (owners.lookup(grad.getSymName()) > 1)
        shared.push_back(grad);
    // Shared gradients are summed over the mesh's pp axis.
    if (!shared.empty()) {
      auto meshes = module.getOps<MeshOp>();
      if (meshes.empty() || !(*meshes.begin()).getAxisIndex("pp")) {
        shared.front().emitError("--dsc-optimizer: gradient @")
            << shared.front().getSymName()
            << " is accumulated by several pipeline stages and must be "
               "summed over the mesh axis 'pp', but the module has no "
               "dsc.mesh with a 'pp' axis (run --dsc-declare-mesh or "
               "--dsc-pipeline first)";
        return signalPassFailure();
      }
    }
    for (auto &[k, accumulated] : stages) {
      SmallVector<StateOp> normed, updated;
      SmallVector<bool> local;
      for (StateOp grad : gradients) {
        bool mine = accumulated.contains(grad.getSymName());
        bool isShared = owners.lookup(grad.getSymName()) > 1;
        if (!mine && !isShared)
          continue;
        normed.push_back(grad);
        local.push_back(mine && !isShared);
        if (mine)
          updated.push_back(grad);
      }
      emitOptimizer(("optimizer.stage" + Twine(k)).str(), normed, updated,
                    local, shared, k);
      // 1-bit Adam and LAMB: each pipeline rank compresses over its stage's
      // data-parallel group.
      if (compresses())
        emitOptimizer(("optimizer.compressed.stage" + Twine(k)).str(), normed,
                      updated, local, shared, k,
                      ProgramRole::CompressedOptimizer);
    }
  }

  /// Emits `name`: the learning rate, the norm and clipping of `normed`, an
  /// update of each of `updated`'s parameters, and the zeroing of `normed`.
  /// For pipeline stage `stage`: first the `shared` gradients are summed
  /// over pp, and `local[i]` marks the gradients only this stage holds, so
  /// the lowering sums the norm over the stages (`dsc.pipeline_local` on the
  /// clip).
  /// With `role` compressed_optimizer, 1-bit Adam's step after its warm-up
  /// instead: `dsc.adam_momentum` and `dsc.frozen_adam` per parameter, run
  /// from optimizer step freeze-step on; with 0/1 Adam's other roles, its
  /// onebit, local or sync step (emitZeroOneAdam).
  void emitOptimizer(StringRef name, ArrayRef<StateOp> normed,
                     ArrayRef<StateOp> updated, ArrayRef<bool> local,
                     ArrayRef<StateOp> shared, std::optional<int64_t> stage,
                     ProgramRole role = ProgramRole::Optimizer) {
    const bool compressed = role == ProgramRole::CompressedOptimizer;
    ModuleOp module = getOperation();
    MLIRContext *context = module.getContext();
    auto kind = symbolizeLrSchedule(lrSchedule).value_or(LrSchedule::Constant);
    OpBuilder b(context);
    b.setInsertionPointToEnd(module.getBody());
    Location loc = module.getLoc();
    // Scalars are f32 (f64 for f64 models, which the gradient checks use).
    StateOp first = normed.front();
    Type element = first.getTensorType().getElementType();
    auto scalar = RankedTensorType::get(
        {}, element.isF64() ? element : Type(b.getF32Type()));
    // The gradient norm and the learning rate, for the step log; with
    // cycle-momentum (no pipelines) also the step's beta1.
    const bool reportsBeta1 = cycleMomentum && !stage;
    SmallVector<Type> results = {scalar, scalar};
    if (reportsBeta1)
      results.push_back(scalar);
    auto func =
        func::FuncOp::create(b, loc, name, b.getFunctionType({}, results));
    setProgramRole(func, role);
    if (compressed)
      func->setAttr(kFromStepAttr, b.getI64IntegerAttr(firstCompressedStep()));
    if (stage)
      func->setAttr(kStageAttr, b.getI64IntegerAttr(*stage));
    b.setInsertionPointToStart(func.addEntryBlock());

    if (!shared.empty()) {
      MeshOp mesh = *module.getOps<MeshOp>().begin();
      SmallVector<Attribute> refs;
      for (StateOp grad : shared)
        refs.push_back(FlatSymbolRefAttr::get(grad.getSymNameAttr()));
      auto reduce = AllReduceStatesOp::create(
          b, loc, b.getArrayAttr(refs),
          FlatSymbolRefAttr::get(mesh.getSymNameAttr()),
          b.getStrArrayAttr({"pp"}));
      reduce.setReduction(ReductionKind::Sum);
    }

    Value lr;
    if (cyclic) {
      const double second = cycleFall();
      const int64_t secondStairs = cycleFallStairs();
      const bool oneCycle = *cyclic == CyclicLrSchedule::OneCycle;
      lr = CyclicLearningRateOp::create(
          b, loc, scalar, CyclicLrScheduleAttr::get(context, *cyclic),
          b.getF64FloatAttr(oneCycle ? minLr.getValue() : this->lr.getValue()),
          b.getF64FloatAttr(this->lr), b.getF64FloatAttr(cycleFirstSize),
          b.getF64FloatAttr(second), b.getI64IntegerAttr(cycleFirstStairs),
          b.getI64IntegerAttr(secondStairs), b.getF64FloatAttr(cycleDecaySize),
          b.getF64FloatAttr(cycleRate),
          cycleStaircase ? b.getUnitAttr() : UnitAttr());
    } else {
      lr = LearningRateOp::create(
          b, loc, scalar, LrScheduleAttr::get(context, kind),
          b.getF64FloatAttr(this->lr), b.getF64FloatAttr(minLr),
          b.getI64IntegerAttr(warmup), b.getI64IntegerAttr(totalSteps),
          b.getF64FloatAttr(warmupStart),
          warmupType == "log" ? b.getUnitAttr() : UnitAttr());
    }
    // OneCycle's cycle_momentum: beta1 over the same cycle.
    Value scheduledBeta1;
    if (cycleMomentum) {
      const double second = cycleFall();
      const int64_t secondStairs = cycleFallStairs();
      scheduledBeta1 = CyclicMomentumOp::create(
          b, loc, scalar, b.getF64FloatAttr(cycleMinMom),
          b.getF64FloatAttr(cycleMaxMom), b.getF64FloatAttr(cycleFirstSize),
          b.getF64FloatAttr(second), b.getI64IntegerAttr(cycleFirstStairs),
          b.getI64IntegerAttr(secondStairs), b.getF64FloatAttr(cycleDecaySize),
          b.getF64FloatAttr(decayMomRate));
    }
    SmallVector<Attribute> gradientRefs;
    for (StateOp grad : normed)
      gradientRefs.push_back(FlatSymbolRefAttr::get(grad.getSymNameAttr()));
    ArrayAttr gradientList = b.getArrayAttr(gradientRefs);
    auto clip = ClipGradNormOp::create(
        b, loc, scalar, gradientList, b.getF64FloatAttr(clipGradNorm),
        /*mesh=*/FlatSymbolRefAttr(), /*shard_axes=*/ArrayAttr(),
        /*sharded=*/DenseBoolArrayAttr());
    if (stage)
      clip->setAttr(kPipelineLocalAttr, b.getDenseBoolArrayAttr(local));
    Value norm = clip.getResult();

    if (role != ProgramRole::Optimizer && optimizer == "zero_one_adam") {
      emitZeroOneAdam(b, updated, lr, role);
      ZeroOp::create(b, loc, gradientList);
      if (role == ProgramRole::SyncStepOptimizer)
        ZeroOp::create(b, loc, b.getArrayAttr({learningRateSum()}));
      func::ReturnOp::create(b, loc, ValueRange{norm, lr});
      return;
    }
    if (optimizer == "onebit_lamb") {
      emitLamb(b, updated, lr, compressed);
      ZeroOp::create(b, loc, gradientList);
      func::ReturnOp::create(b, loc, ValueRange{norm, lr});
      return;
    }
    for (StateOp grad : updated) {
      // Megatron-LM and nanoGPT decay matrices only, not biases and norms.
      bool decay = grad.getTensorType().getRank() >= 2;
      auto gradRef = FlatSymbolRefAttr::get(grad.getSymNameAttr());
      if (optimizer == "onebit_adam" || optimizer == "zero_one_adam") {
        // DeepSpeed's OnebitAdam (and ZeroOneAdam) decays every parameter by
        // its group's weight_decay; dsc keeps Megatron's split (matrices only).
        FlatSymbolRefAttr m = declareState(grad, "adam.m.", StateKind::ExpAvg);
        FlatSymbolRefAttr v =
            declareState(grad, "adam.v.", StateKind::ExpAvgSq);
        const double wd = decay ? weightDecay : 0.0;
        if (compressed) {
          // Every moment first (the updates follow below): their compressed
          // all-reduce goes between.
          AdamMomentumOp::create(b, grad.getLoc(), m, gradRef,
                                 b.getF64FloatAttr(beta1));
        } else {
          OnebitAdamOp::create(b, grad.getLoc(), grad.getOfAttr(), gradRef, m,
                               v, lr, b.getF64FloatAttr(beta1),
                               b.getF64FloatAttr(beta2), b.getF64FloatAttr(eps),
                               b.getF64FloatAttr(wd),
                               /*mesh=*/FlatSymbolRefAttr(),
                               /*shard_axes=*/ArrayAttr());
        }
      } else if (optimizer == "adamw") {
        FlatSymbolRefAttr m = declareState(grad, "adam.m.", StateKind::ExpAvg);
        FlatSymbolRefAttr v =
            declareState(grad, "adam.v.", StateKind::ExpAvgSq);
        // With a scheduled beta1, `beta1` records the first step's.
        AdamWOp::create(b, grad.getLoc(), grad.getOfAttr(), gradRef, m, v, lr,
                        scheduledBeta1,
                        b.getF64FloatAttr(scheduledBeta1
                                              ? cycleMinMom.getValue()
                                              : beta1.getValue()),
                        b.getF64FloatAttr(beta2), b.getF64FloatAttr(eps),
                        b.getF64FloatAttr(decay ? weightDecay : 0.0),
                        /*mesh=*/FlatSymbolRefAttr(),
                        /*shard_axes=*/ArrayAttr());
      } else {
        FlatSymbolRefAttr buf =
            declareState(grad, "sgd.momentum.", StateKind::Momentum);
        SgdOp::create(b, grad.getLoc(), grad.getOfAttr(), gradRef, buf, lr,
                      b.getF64FloatAttr(momentum),
                      b.getF64FloatAttr(decay ? weightDecay : 0.0),
                      nesterov ? b.getUnitAttr() : UnitAttr());
      }
    }
    if (compressed)
      for (StateOp grad : updated) {
        const bool decay = grad.getTensorType().getRank() >= 2;
        FrozenAdamOp::create(b, grad.getLoc(), grad.getOfAttr(),
                             declareState(grad, "adam.m.", StateKind::ExpAvg),
                             declareState(grad, "adam.v.", StateKind::ExpAvgSq),
                             lr, b.getF64FloatAttr(eps),
                             b.getF64FloatAttr(decay ? weightDecay : 0.0),
                             /*mesh=*/FlatSymbolRefAttr(),
                             /*shard_axes=*/ArrayAttr());
      }
    ZeroOp::create(b, loc, gradientList);
    SmallVector<Value> returned = {norm, lr};
    if (reportsBeta1)
      returned.push_back(scheduledBeta1);
    func::ReturnOp::create(b, loc, returned);
  }

  /// OneCycle's fall and its stairs: DeepSpeed's defaults make the fall as
  /// long as the rise, its stairs as many.
  double cycleFall() const {
    return cycleSecondSize < 0 ? cycleFirstSize.getValue()
                               : cycleSecondSize.getValue();
  }
  int64_t cycleFallStairs() const {
    return cycleSecondStairs < 0 ? cycleFirstStairs.getValue()
                                 : cycleSecondStairs.getValue();
  }

  /// A 1-bit optimizer: a warm-up program and a compressed one.
  bool compresses() const {
    return optimizer == "onebit_adam" || optimizer == "onebit_lamb";
  }
  /// The compressed program's first optimizer step. DeepSpeed's 1-bit LAMB
  /// leaves its warm-up only after a warm-up step (the wrapper's empty
  /// step counts as step 1), so it compresses from step 2 at the earliest.
  int64_t firstCompressedStep() const {
    return optimizer == "onebit_lamb" ? std::max<int64_t>(2, freezeStep)
                                      : freezeStep.getValue();
  }

  /// 0/1 Adam's policy (recorded on the module for the lowering: each
  /// step's program follows from it) and the plans it is built for: data
  /// parallelism (its compressed averages and local steps are over dp) and
  /// tensor slicing, without pipelines or expert parallelism.
  LogicalResult checkZeroOneAdam(ModuleOp module) {
    auto fail = [&]() {
      return module.emitError("--dsc-optimizer: optimizer=zero_one_adam: ");
    };
    if (varFreezeStep < 0)
      return fail() << "var-freeze-step must be >= 0, got "
                    << varFreezeStep.getValue();
    for (auto [name, value] :
         {std::make_pair("var-update-scaler", varUpdateScaler.getValue()),
          std::make_pair("local-step-scaler", localStepScaler.getValue()),
          std::make_pair("local-step-clipper", localStepClipper.getValue())})
      if (value < 1)
        return fail() << name << " must be >= 1, got " << value;
    // dp >= 2 is --dsc-data-parallel's to check (the mesh may not have a
    // dp axis yet); the lowering refuses a onebit step it did not average.
    for (MeshOp mesh : module.getOps<MeshOp>())
      for (StringRef axis : {"pp", "ep"})
        if (std::optional<unsigned> index = mesh.getAxisIndex(axis);
            index && mesh.getShape()[*index] > 1)
          return fail() << axis << "=" << mesh.getShape()[*index]
                        << ": not built for 0/1 Adam yet (use dp and tp)";
    Builder b(module.getContext());
    module->setAttr(
        kZeroOneAdamAttr,
        b.getDictionaryAttr(
            {b.getNamedAttr("var_freeze_step",
                            b.getI64IntegerAttr(varFreezeStep)),
             b.getNamedAttr("var_update_scaler",
                            b.getI64IntegerAttr(varUpdateScaler)),
             b.getNamedAttr("local_step_scaler",
                            b.getI64IntegerAttr(localStepScaler)),
             b.getNamedAttr("local_step_clipper",
                            b.getI64IntegerAttr(localStepClipper))}));
    return success();
  }

  /// 0/1 Adam's steps other than its variance steps (`role`), as
  /// DeepSpeed's zoadam.py orders them per parameter:
  /// - onebit: m from the gradient's compressed average
  ///   (`dsc.adam_momentum`; --dsc-data-parallel inserts the average
  ///   before it), then the frozen-variance update;
  /// - local: m from the rank's own gradient, Σlr += lr, and the update
  ///   added to the accumulator too;
  /// - sync: a local step, then each parameter rewound, the accumulators'
  ///   compressed average (--dsc-data-parallel), and m and the parameter
  ///   re-estimated from it; the caller zeroes Σlr after.
  void emitZeroOneAdam(OpBuilder &b, ArrayRef<StateOp> updated, Value lr,
                       ProgramRole role) {
    auto f64 = [&](double x) { return b.getF64FloatAttr(x); };
    auto decayOf = [&](StateOp grad) {
      return grad.getTensorType().getRank() >= 2 ? weightDecay.getValue() : 0.0;
    };
    auto m = [&](StateOp grad) {
      return declareState(grad, "adam.m.", StateKind::ExpAvg);
    };
    auto v = [&](StateOp grad) {
      return declareState(grad, "adam.v.", StateKind::ExpAvgSq);
    };
    auto accumulator = [&](StateOp grad) {
      return declareState(grad, "zoadam.accumulator.",
                          StateKind::MomentumAccumulator);
    };
    for (StateOp grad : updated) {
      (void)m(grad), (void)v(grad);
      if (role != ProgramRole::OnebitStepOptimizer)
        (void)accumulator(grad);
      AdamMomentumOp::create(b, grad.getLoc(), m(grad),
                             FlatSymbolRefAttr::get(grad.getSymNameAttr()),
                             f64(beta1));
    }
    if (role == ProgramRole::OnebitStepOptimizer) {
      for (StateOp grad : updated)
        FrozenAdamOp::create(b, grad.getLoc(), grad.getOfAttr(), m(grad),
                             v(grad), lr, f64(eps), f64(decayOf(grad)),
                             /*mesh=*/FlatSymbolRefAttr(),
                             /*shard_axes=*/ArrayAttr());
      return;
    }
    AddLearningRateOp::create(b, b.getUnknownLoc(), learningRateSum(), lr);
    for (StateOp grad : updated)
      ZeroOneAdamUpdateOp::create(b, grad.getLoc(), grad.getOfAttr(), m(grad),
                                  v(grad), accumulator(grad), lr, f64(eps),
                                  f64(decayOf(grad)));
    if (role != ProgramRole::SyncStepOptimizer)
      return;
    for (StateOp grad : updated)
      ZeroOneAdamRewindOp::create(b, grad.getLoc(), grad.getOfAttr(),
                                  accumulator(grad), v(grad), f64(eps));
    for (StateOp grad : updated)
      ZeroOneAdamResyncOp::create(b, grad.getLoc(), grad.getOfAttr(), m(grad),
                                  accumulator(grad), v(grad), learningRateSum(),
                                  f64(eps));
  }

  /// 0/1 Adam's Σlr since the last sync, declared on first use (a state
  /// names a parameter: the first one's).
  FlatSymbolRefAttr learningRateSum() {
    static constexpr llvm::StringLiteral name = "zoadam.lr_sum";
    if (auto existing = symbols->lookup<StateOp>(name))
      return FlatSymbolRefAttr::get(existing.getSymNameAttr());
    ParameterOp first = *getOperation().getOps<ParameterOp>().begin();
    auto state =
        StateOp::create(*declBuilder, first.getLoc(), name,
                        RankedTensorType::get({1}, declBuilder->getF64Type()),
                        StateKind::LearningRateSum, first.getSymName());
    symbols->insert(state);
    return FlatSymbolRefAttr::get(state.getSymNameAttr());
  }

  /// 1-bit LAMB's options, and the plans its trust ratio allows: it needs
  /// each parameter whole (its norm), so no tensor or expert slicing.
  LogicalResult checkLamb(ModuleOp module) {
    auto fail = [&]() {
      return module.emitError("--dsc-optimizer: optimizer=onebit_lamb: ");
    };
    if (!(minCoeff > 0 && maxCoeff >= minCoeff))
      return fail() << "needs 0 < min-coeff <= max-coeff, got min-coeff = "
                    << minCoeff.getValue()
                    << ", max-coeff = " << maxCoeff.getValue();
    if (!(coeffBeta >= 0 && coeffBeta <= 1))
      return fail() << "coeff-beta must be in [0, 1], got "
                    << coeffBeta.getValue();
    if (!(factorMin > 0 && factorMax >= factorMin))
      return fail() << "needs 0 < factor-min <= factor-max, got factor-min = "
                    << factorMin.getValue()
                    << ", factor-max = " << factorMax.getValue();
    if (!(factorThreshold >= 0 && factorThreshold <= 1))
      return fail() << "factor-threshold must be in [0, 1], got "
                    << factorThreshold.getValue();
    for (MeshOp mesh : module.getOps<MeshOp>())
      for (StringRef axis : {"tp", "ep"})
        if (std::optional<unsigned> index = mesh.getAxisIndex(axis);
            index && mesh.getShape()[*index] > 1)
          return fail() << axis << "=" << mesh.getShape()[*index]
                        << " slices parameters over ranks, but LAMB's trust "
                           "ratio is each whole parameter's norm: not built "
                           "yet (use dp and pp)";
    for (ParameterOp param : module.getOps<ParameterOp>())
      if (!param.getTensorType().getElementType().isF32())
        return fail() << "parameter '@" << param.getSymName() << "' is "
                      << param.getType()
                      << "; 1-bit LAMB's states are f32 (use precision=fp32)";
    return success();
  }

  /// 1-bit LAMB's updates of `updated`'s parameters: the warm-up's
  /// dsc.onebit_lamb, or after it the scaling coefficients (once), each
  /// tensor's scaled local momentum, and the frozen updates (the momenta's
  /// compressed all-reduce goes between: --dsc-data-parallel).
  void emitLamb(OpBuilder &b, ArrayRef<StateOp> updated, Value lr,
                bool compressed) {
    auto f64 = [&](double x) { return b.getF64FloatAttr(x); };
    auto coefficientsOf = [&](StateOp grad) {
      std::string name = ("lamb.coeffs." + grad.getOf()).str();
      if (auto existing = symbols->lookup<StateOp>(name))
        return FlatSymbolRefAttr::get(existing.getSymNameAttr());
      auto state =
          StateOp::create(*declBuilder, grad.getLoc(), name,
                          RankedTensorType::get({5}, declBuilder->getF64Type()),
                          StateKind::LambCoefficients, grad.getOf());
      symbols->insert(state);
      return FlatSymbolRefAttr::get(state.getSymNameAttr());
    };
    // DeepSpeed's OnebitLamb decays every parameter by its group's
    // weight_decay; dsc keeps Megatron's split (matrices only).
    auto decayOf = [&](StateOp grad) {
      return grad.getTensorType().getRank() >= 2 ? weightDecay.getValue() : 0.0;
    };
    if (!compressed) {
      for (StateOp grad : updated) {
        // Declared in this order (call arguments have none).
        FlatSymbolRefAttr m = declareState(grad, "adam.m.", StateKind::ExpAvg);
        FlatSymbolRefAttr v =
            declareState(grad, "adam.v.", StateKind::ExpAvgSq);
        FlatSymbolRefAttr coefficients = coefficientsOf(grad);
        OnebitLambOp::create(b, grad.getLoc(), grad.getOfAttr(),
                             FlatSymbolRefAttr::get(grad.getSymNameAttr()), m,
                             v, coefficients, lr, f64(beta1), f64(beta2),
                             f64(eps), f64(decayOf(grad)), f64(maxCoeff),
                             f64(minCoeff), f64(coeffBeta));
      }
      return;
    }
    SmallVector<Attribute> coefficients, moments, variances, fresh;
    for (StateOp grad : updated) {
      coefficients.push_back(coefficientsOf(grad));
      moments.push_back(declareState(grad, "adam.m.", StateKind::ExpAvg));
      variances.push_back(declareState(grad, "adam.v.", StateKind::ExpAvgSq));
      fresh.push_back(
          declareState(grad, "lamb.v_fresh.", StateKind::ExpAvgSqFresh));
    }
    // DeepSpeed copies the fresh variance at its freeze step, inside a
    // warm-up step: with freeze_step < 2 there is none, and it starts from
    // zeros.
    LambFreezeOp::create(b, b.getUnknownLoc(), b.getArrayAttr(coefficients),
                         b.getArrayAttr(moments), b.getArrayAttr(variances),
                         b.getArrayAttr(fresh),
                         freezeStep >= 2 ? b.getUnitAttr() : UnitAttr());
    for (StateOp grad : updated)
      LambMomentumOp::create(
          b, grad.getLoc(), declareState(grad, "adam.m.", StateKind::ExpAvg),
          FlatSymbolRefAttr::get(grad.getSymNameAttr()),
          declareState(grad, "lamb.m_last.", StateKind::ExpAvgLast),
          coefficientsOf(grad), f64(beta1));
    for (StateOp grad : updated)
      FrozenLambOp::create(
          b, grad.getLoc(), grad.getOfAttr(),
          declareState(grad, "adam.m.", StateKind::ExpAvg),
          declareState(grad, "lamb.m_last.", StateKind::ExpAvgLast),
          declareState(grad, "adam.v.", StateKind::ExpAvgSq),
          declareState(grad, "lamb.v_fresh.", StateKind::ExpAvgSqFresh),
          coefficientsOf(grad), lr, f64(beta1), f64(beta2), f64(eps),
          f64(decayOf(grad)), f64(factorMax), f64(factorMin),
          f64(factorThreshold));
  }

  /// range_test and one_cycle's options, checked before any op is built.
  LogicalResult checkCyclicOptions(ModuleOp module) {
    auto fail = [&](const Twine &why) {
      module.emitError("--dsc-optimizer: ") << lrSchedule << ": " << why;
      return failure();
    };
    if (!(cycleFirstSize > 0))
      return fail("cycle-first-size must be > 0");
    if (cycleSecondSize < 0 && cycleSecondSize != -1)
      return fail("cycle-second-size must be >= 0 (or -1: the first's)");
    if (cycleFirstStairs < 0 || cycleSecondStairs < -1)
      return fail("stair counts must be >= 0");
    if (!(cycleDecaySize >= 0))
      return fail("cycle-decay-size must be >= 0");
    if (!(lr > 0))
      return fail("lr must be > 0");
    if (cycleMomentum &&
        !(cycleMinMom > 0 && cycleMinMom <= cycleMaxMom && cycleMaxMom < 1))
      return fail("cycle-momentum needs 0 < cycle-min-mom <= cycle-max-mom < "
                  "1 (beta1), got " +
                  std::to_string(cycleMinMom.getValue()) + " and " +
                  std::to_string(cycleMaxMom.getValue()));
    if (*cyclic == CyclicLrSchedule::OneCycle && !(minLr > 0 && minLr <= lr))
      return fail("one_cycle rises from min-lr to lr: min-lr must be in (0, "
                  "lr = " +
                  std::to_string(lr.getValue()) + "]");
    return success();
  }

  /// The state `prefix<param>` of `grad`'s parameter, declared on first use
  /// (two stages updating a tied parameter share its declaration: each rank
  /// holds only its stage's copy).
  FlatSymbolRefAttr declareState(StateOp grad, StringRef prefix,
                                 StateKind stateKind) {
    std::string name = (prefix + grad.getOf()).str();
    if (auto existing = symbols->lookup<StateOp>(name))
      return FlatSymbolRefAttr::get(existing.getSymNameAttr());
    auto state = StateOp::create(*declBuilder, grad.getLoc(), name,
                                 grad.getType(), stateKind, grad.getOf());
    symbols->insert(state);
    return FlatSymbolRefAttr::get(state.getSymNameAttr());
  }

  // Valid during runOnOperation.
  SymbolTable *symbols = nullptr;
  OpBuilder *declBuilder = nullptr;
  /// lr-schedule=range_test|one_cycle: DeepSpeed's cyclic schedules.
  std::optional<CyclicLrSchedule> cyclic;
  Operation *lastDecl = nullptr;
};

} // namespace
