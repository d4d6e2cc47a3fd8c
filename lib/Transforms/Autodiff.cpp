//===- Autodiff.cpp - --dsc-autodiff ----------------------------*- C++ -*-===//
//
// Reverse-mode differentiation of a loss function: clones it as
// @forward_backward and appends, in reverse program order, each op's
// vector-Jacobian product (DifferentiableOpInterface), accumulating
// parameter gradients into dsc.state buffers.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscAttrNames.h"
#include "dsc/Dialect/Dsc/IR/DscOps.h"
#include "dsc/Dialect/Dsc/IR/DscPrograms.h"
#include "dsc/Transforms/Passes.h"
#include "dsc/Transforms/PlanOptions.h"
#include "dsc/Transforms/TransformerLayers.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/ScopeExit.h"

#include <cmath>

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCAUTODIFFPASS
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

/// A loss the backward can seed: a cross-entropy's, one that joins
/// auxiliary losses to it (dsc.auxiliary_loss), or a scalar sum of one and
/// other scalars (what dsc-gradcheck differentiates).
bool isLossValue(Value value) {
  Operation *def = value.getDefiningOp();
  if (auto aux = dyn_cast_or_null<AuxiliaryLossOp>(def))
    return isLossValue(aux.getLoss());
  if (auto add = dyn_cast_or_null<AddOp>(def))
    return cast<RankedTensorType>(add.getType()).getRank() == 0 &&
           (isLossValue(add.getLhs()) || isLossValue(add.getRhs()));
  return isa_and_nonnull<CrossEntropyOp, VocabParallelCrossEntropyOp>(def);
}

/// Name of the gradient state of parameter `param`.
std::string gradientName(StringRef param) { return ("grad." + param).str(); }

struct DscAutodiffPass
    : PlanReadingPass<DscAutodiffPass,
                      mlir::dsc::impl::DscAutodiffPassBase<DscAutodiffPass>> {
  using PlanReadingPass::PlanReadingPass;

  /// The plan knobs this pass builds (readPlan, at the start of a run).
  int64_t microbatches{};

  void runOnOperation() override {
    ModuleOp module = getOperation();
    {
      const ::dsc::ParallelPlan plan = readPlan(module);
      microbatches = plan.numMicroBatches;
    }
    SymbolTable symbols(module);
    // microbatches >= 1: the plan's parser's.
    // A pipelined graph (--dsc-pipeline) has one forward program per stage,
    // with `dsc.stage = k`; each gets its own backward.
    SmallVector<func::FuncOp> stages;
    for (Operation *op : getProgramOps(module, ProgramRole::Forward))
      if (auto func = dyn_cast<func::FuncOp>(op); func && getPipelineStage(func))
        stages.push_back(func);
    auto loss = symbols.lookup<func::FuncOp>(funcName);
    if (!loss && stages.empty()) {
      module.emitError("--dsc-autodiff: no function @")
          << funcName << " to differentiate";
      return signalPassFailure();
    }
    if (!getProgramOps(module, ProgramRole::ForwardBackward).empty() ||
        symbols.lookup("forward_backward")) {
      (loss ? loss : stages.front())
          .emitError("--dsc-autodiff: the module already has a "
                     "@forward_backward function");
      return signalPassFailure();
    }
    // The function differentiated is the evaluation (forward) program.
    if (loss) {
      setProgramRole(loss, ProgramRole::Forward);
      if (failed(differentiate(loss, "forward_backward", symbols)))
        return signalPassFailure();
    }
    for (func::FuncOp stage : stages) {
      int64_t k = *getPipelineStage(stage);
      if (failed(differentiate(stage,
                               ("forward_backward.stage" + Twine(k)).str(),
                               symbols)))
        return signalPassFailure();
    }
    // The micro-batches per step the seed averages over, for the per-step
    // totals of collectives that run once per micro-batch (ZeRO-2) and for
    // the lowering.
    module->setAttr(kMicrobatchesAttr,
                    IntegerAttr::get(IntegerType::get(&getContext(), 64),
                                     static_cast<int64_t>(microbatches)));
  }

  /// Emits `fbName`, the backward of `loss`. A pipeline stage
  /// (`dsc.stage = k`) that returns an activation instead of the loss is a
  /// vector-Jacobian product: `(input, d output) -> d input` (stage 0 takes
  /// the tokens and returns nothing); the last stage returns the loss and,
  /// when it has an activation input, that input's gradient too. The
  /// backward begins with a clone of the stage's forward;
  /// --dsc-stage-backward later makes the forward keep what the backward
  /// reads instead.
  LogicalResult differentiate(func::FuncOp loss, StringRef fbName,
                              SymbolTable &symbols) {
    if (!loss.getBody().hasOneBlock())
      return loss.emitError("--dsc-autodiff: @")
             << loss.getSymName() << " must have a single block";
    auto ret = cast<func::ReturnOp>(loss.getBody().front().getTerminator());
    auto stageAttr = loss->getAttrOfType<IntegerAttr>(kStageAttr);
    bool returnsLoss = ret.getNumOperands() == 1 &&
                       isLossValue(ret.getOperand(0));
    if (!returnsLoss && !(stageAttr && ret.getNumOperands() == 1))
      return loss.emitError("--dsc-autodiff: @")
             << loss.getSymName() << " must return one value, the result of a "
             << "dsc.cross_entropy or dsc.vocab_parallel_cross_entropy, "
             << "or of a dsc.auxiliary_loss of one"
             << " (or, as a pipeline stage, its output activation)";
    // A stage after the first receives its input activation as argument 0.
    bool hasActivationInput = stageAttr && stageAttr.getInt() > 0;

    // Clone the loss function; differentiate the clone.
    OpBuilder moduleBuilder(loss);
    moduleBuilder.setInsertionPointAfter(loss);
    auto fb = cast<func::FuncOp>(moduleBuilder.clone(*loss));
    fb.setSymName(fbName);
    setProgramRole(fb, ProgramRole::ForwardBackward);
    symbols.insert(fb);

    Block &body = fb.getBody().front();
    auto fbReturn = cast<func::ReturnOp>(body.getTerminator());
    OpBuilder b(fbReturn);
    Value lossValue = fbReturn.getOperand(0);
    llvm::DenseMap<Value, Value> grads;
    if (returnsLoss) {
      auto lossType = cast<RankedTensorType>(lossValue.getType());
      Value seed = arith::ConstantOp::create(
          b, lossValue.getLoc(),
          DenseElementsAttr::get(lossType,
                                 b.getFloatAttr(lossType.getElementType(),
                                                1.0 / double(microbatches))));
      grads[lossValue] = seed;
    } else {
      // The output's gradient comes from the next stage.
      BlockArgument outputGrad =
          body.addArgument(lossValue.getType(), lossValue.getLoc());
      grads[lossValue] = outputGrad;
    }
    auto addGrad = [&](Value value, Value grad) {
      auto [it, inserted] = grads.try_emplace(value, grad);
      if (!inserted) {
        it->second = AddOp::create(b, grad.getLoc(), it->second, grad);
        ++numGradientOps;
      }
    };
    // A pipeline stage's MoE auxiliary losses (dsc.stage_auxiliary_loss)
    // get the loss's seed here: the last stage's own, another stage a 1/m
    // of its own (the plan then has no runtime-written seed).
    for (auto sink : llvm::make_early_inc_range(
             body.getOps<StageAuxiliaryLossOp>())) {
      for (Value aux : sink.getAux()) {
        Value seed;
        if (returnsLoss && aux.getType() == lossValue.getType()) {
          seed = grads.lookup(lossValue);
        } else {
          auto type = cast<RankedTensorType>(aux.getType());
          seed = arith::ConstantOp::create(
              b, aux.getLoc(),
              DenseElementsAttr::get(
                  type, b.getFloatAttr(type.getElementType(),
                                       1.0 / double(microbatches))));
        }
        addGrad(aux, seed);
      }
    }

    // Where new dsc.state declarations go: after the last module-level
    // parameter or state, so that the module keeps reading top to bottom.
    ModuleOp module = getOperation();
    Operation *lastDecl = nullptr;
    for (Operation &op : module.getBody()->getOperations())
      if (isa<ParameterOp, StateOp>(op))
        lastDecl = &op;

    SmallVector<Operation *> forwardOps;
    for (Operation &op : body.without_terminator())
      forwardOps.push_back(&op);

    for (Operation *op : llvm::reverse(forwardOps)) {
      SmallVector<Value> resultGrads;
      bool any = false;
      for (Value result : op->getResults()) {
        Value grad = grads.lookup(result);
        resultGrads.push_back(grad);
        any |= static_cast<bool>(grad);
      }
      if (!any)
        continue;

      // The ops made for `op` (its gradient's, their sums, the
      // accumulation) sit in its transformer layer, as they sit at its
      // location.
      Operation *before = fbReturn->getPrevNode();
      llvm::scope_exit inLayer([&] {
        inheritTransformerLayer(op, std::next(before->getIterator()),
                                fbReturn->getIterator());
      });
      if (auto read = dyn_cast<GetParameterOp>(op)) {
        if (failed(accumulateIntoState(read, resultGrads[0], symbols, b,
                                       lastDecl)))
          return failure();
        continue;
      }
      auto differentiable = dyn_cast<DifferentiableOpInterface>(op);
      if (!differentiable)
        return op->emitOpError("is on the path to the loss but has no "
                               "differentiation rule");
      // A result that does not reach the loss contributes a zero gradient;
      // only ops with one result (or all results reached) are supported.
      // Integer results (an MoE router's slots) have no gradient.
      for (auto [result, grad] : llvm::zip(op->getResults(), resultGrads))
        if (!grad && !isa<IntegerType>(getElementTypeOrSelf(result.getType())))
          return op->emitOpError("result #")
                 << cast<OpResult>(result).getResultNumber()
                 << " does not reach the loss while another result does; "
                    "this is not supported yet";
      size_t opsBefore = body.getOperations().size();
      SmallVector<Value> operandGrads;
      if (failed(differentiable.buildVJP(b, resultGrads, operandGrads)))
        return failure();
      if (operandGrads.size() != op->getNumOperands())
        return op->emitOpError("differentiation rule returned ")
               << operandGrads.size() << " gradients for "
               << op->getNumOperands() << " operands";
      numGradientOps += body.getOperations().size() - opsBefore;
      for (auto [operand, grad] : llvm::zip(op->getOperands(), operandGrads))
        if (grad)
          addGrad(operand, grad);
    }
    if (!stageAttr)
      return success();

    // A stage's results: the loss (last stage), then d input (not stage 0).
    SmallVector<Value> results;
    if (returnsLoss)
      results.push_back(lossValue);
    if (hasActivationInput) {
      Value inputGrad = grads.lookup(body.getArgument(0));
      if (!inputGrad || isa<BlockArgument>(inputGrad))
        return loss.emitError("--dsc-autodiff: stage @")
               << loss.getSymName()
               << "'s input activation gets no computed gradient";
      results.push_back(inputGrad);
    }
    fbReturn->setOperands(results);
    SmallVector<Type> resultTypes;
    for (Value v : results)
      resultTypes.push_back(v.getType());
    fb.setFunctionType(
        FunctionType::get(fb.getContext(), body.getArgumentTypes(), resultTypes));
    return success();
  }

  /// dsc.accumulate of a parameter read's gradient into @grad.<name>,
  /// declaring the state on first use.
  LogicalResult accumulateIntoState(GetParameterOp read, Value grad,
                                    SymbolTable &symbols, OpBuilder &b,
                                    Operation *&lastDecl) {
    std::string name = gradientName(read.getName());
    auto state = symbols.lookup<StateOp>(name);
    if (!state) {
      if (symbols.lookup(name))
        return read.emitOpError("cannot create gradient state @")
               << name << ": the symbol exists and is not a dsc.state";
      OpBuilder declBuilder(getOperation().getContext());
      if (lastDecl)
        declBuilder.setInsertionPointAfter(lastDecl);
      else
        declBuilder.setInsertionPointToStart(getOperation().getBody());
      state = StateOp::create(declBuilder, read.getLoc(), name, read.getType(),
                              StateKind::Gradient, read.getName());
      symbols.insert(state);
      lastDecl = state;
      ++numParameters;
    }
    AccumulateOp::create(b, read.getLoc(), grad,
                         FlatSymbolRefAttr::get(state.getSymNameAttr()));
    return success();
  }
};

} // namespace
