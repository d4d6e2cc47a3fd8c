//===- Optimizer.cpp - --dsc-optimizer --------------------------*- C++ -*-===//
//
// Emits @optimizer: the learning-rate schedule, global gradient clipping, one
// AdamW or SGD update per parameter over explicit dsc.state moments, and the
// zeroing of the accumulated gradients.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscOps.h"
#include "dsc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

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
    std::optional<LrSchedule> kind = symbolizeLrSchedule(schedule);
    if (!kind) {
      module.emitError("--dsc-optimizer: unknown schedule '")
          << schedule
          << "'; expected constant, warmup, warmup_linear or warmup_cosine";
      return signalPassFailure();
    }
    if ((*kind == LrSchedule::WarmupLinear ||
         *kind == LrSchedule::WarmupCosine) &&
        totalSteps <= warmup) {
      module.emitError("--dsc-optimizer: schedule '")
          << schedule << "' decays after the warmup, so total-steps ("
          << totalSteps.getValue() << ") must exceed warmup ("
          << warmup.getValue() << ")";
      return signalPassFailure();
    }
    if (optimizer != "adamw" && optimizer != "sgd") {
      module.emitError("--dsc-optimizer: unknown optimizer '")
          << optimizer << "'; expected adamw or sgd";
      return signalPassFailure();
    }
    SymbolTable symbols(module);
    if (symbols.lookup("optimizer")) {
      module.emitError("--dsc-optimizer: the module already has an "
                       "@optimizer function");
      return signalPassFailure();
    }

    // Gradient states in declaration order (autodiff's order of first use,
    // reversed), which fixes the order of the norm's reduction.
    SmallVector<StateOp> gradients;
    Operation *lastDecl = nullptr;
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

    MLIRContext *context = module.getContext();
    OpBuilder declBuilder(context);
    declBuilder.setInsertionPointAfter(lastDecl);
    auto declareState = [&](StateOp grad, StringRef prefix,
                            StateKind stateKind) -> FlatSymbolRefAttr {
      std::string name = (prefix + grad.getOf()).str();
      auto state = StateOp::create(declBuilder, grad.getLoc(), name,
                                   grad.getType(), stateKind, grad.getOf());
      symbols.insert(state);
      return FlatSymbolRefAttr::get(state.getSymNameAttr());
    };

    OpBuilder b(context);
    b.setInsertionPointToEnd(module.getBody());
    Location loc = module.getLoc();
    // Scalars are f32 (f64 for f64 models, which the gradient checks use).
    Type element = gradients.front().getTensorType().getElementType();
    auto scalar = RankedTensorType::get(
        {}, element.isF64() ? element : Type(b.getF32Type()));
    auto func = func::FuncOp::create(b, loc, "optimizer",
                                     b.getFunctionType({}, {scalar, scalar}));
    b.setInsertionPointToStart(func.addEntryBlock());

    Value lr = LearningRateOp::create(
        b, loc, scalar, LrScheduleAttr::get(context, *kind),
        b.getF64FloatAttr(this->lr), b.getF64FloatAttr(minLr),
        b.getI64IntegerAttr(warmup), b.getI64IntegerAttr(totalSteps));
    SmallVector<Attribute> gradientRefs;
    for (StateOp grad : gradients)
      gradientRefs.push_back(FlatSymbolRefAttr::get(grad.getSymNameAttr()));
    ArrayAttr gradientList = b.getArrayAttr(gradientRefs);
    Value norm = ClipGradNormOp::create(
        b, loc, scalar, gradientList, b.getF64FloatAttr(clipGradNorm),
        /*mesh=*/FlatSymbolRefAttr(), /*shard_axes=*/ArrayAttr(),
        /*sharded=*/DenseBoolArrayAttr());

    for (StateOp grad : gradients) {
      // Megatron-LM and nanoGPT decay matrices only, not biases and norms.
      bool decay = grad.getTensorType().getRank() >= 2;
      auto gradRef = FlatSymbolRefAttr::get(grad.getSymNameAttr());
      if (optimizer == "adamw") {
        FlatSymbolRefAttr m = declareState(grad, "adam.m.", StateKind::ExpAvg);
        FlatSymbolRefAttr v =
            declareState(grad, "adam.v.", StateKind::ExpAvgSq);
        AdamWOp::create(b, grad.getLoc(), grad.getOfAttr(), gradRef, m, v, lr,
                        b.getF64FloatAttr(beta1), b.getF64FloatAttr(beta2),
                        b.getF64FloatAttr(eps),
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
    ZeroOp::create(b, loc, gradientList);
    func::ReturnOp::create(b, loc, ValueRange{norm, lr});
  }
};

} // namespace
