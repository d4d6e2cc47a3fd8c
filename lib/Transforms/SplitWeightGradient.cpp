//===- SplitWeightGradient.cpp - --dsc-split-weight-gradient ----*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Zero-bubble pipeline schedules (Qi et al. 2024, "Zero Bubble Pipeline
// Parallelism") run a stage's backward in two parts: B, the gradient of the
// stage input, which the previous stage waits for, and W, the gradients of
// the stage's weights, which nobody waits for and so fills the bubble.
// dsc owns autodiff, so the split is one of the backward graph, not of
// hand-written layers: B is every op the backward's results (the input
// gradient, the last stage's loss) depend on, W every other op (the
// weight gradients' matmuls and their accumulation):
//
//   func.func @backward.stage1(%x, %dy, %r...) -> (%dx, %s0, %s1, ...)
//       attributes {dsc.weight_stash = N}                           (B)
//   func.func @backward_weight.stage1(%s0, %s1, ...)                (W)
//
// B returns, after its own results, the values W reads from it (its
// arguments and its values: the activations the weight gradients need and
// the output gradients flowing through the stage); parameter reads and
// constants W takes again instead. The runtime keeps each micro-batch's
// values from its B to its W, as it keeps the residuals from forward to
// backward.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscAttrNames.h"
#include "dsc/Dialect/Dsc/IR/DscOps.h"
#include "dsc/Dialect/Dsc/IR/DscPrograms.h"
#include "dsc/Transforms/ForwardPart.h"
#include "dsc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

#include <functional>

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCSPLITWEIGHTGRADIENTPASS
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

struct DscSplitWeightGradientPass
    : mlir::dsc::impl::DscSplitWeightGradientPassBase<
          DscSplitWeightGradientPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<PipelineShape> shape = getPipelineShape(module);
    if (!shape) {
      module.emitError("--dsc-split-weight-gradient: the module has no ")
          << kPipelineAttr
          << " (a zero-bubble schedule splits pipeline stages' backwards; "
             "run --dsc-pipeline first)";
      return signalPassFailure();
    }
    for (int64_t k = 0; k < shape->stages; ++k) {
      auto fb =
          lookupProgram<func::FuncOp>(module, ProgramRole::ForwardBackward, k);
      if (!fb) {
        module.emitError("--dsc-split-weight-gradient: stage ")
            << k << " has no forward_backward program (run --dsc-autodiff "
            << "before)";
        return signalPassFailure();
      }
      if (fb->hasAttr(kWeightStashAttr) ||
          lookupProgram<func::FuncOp>(module, ProgramRole::BackwardWeight, k)) {
        fb.emitError("--dsc-split-weight-gradient: stage ")
            << k << "'s backward is split already";
        return signalPassFailure();
      }
      split(fb, k);
      ++numSplit;
    }
  }

  void split(func::FuncOp fb, int64_t stage) {
    Block &body = fb.getBody().front();
    Operation *ret = body.getTerminator();

    // B: what the results depend on.
    llvm::DenseSet<Operation *> inB;
    SmallVector<Operation *> stack;
    auto need = [&](Value value) {
      if (Operation *def = value.getDefiningOp())
        if (Operation *op = body.findAncestorOpInBlock(*def);
            op && inB.insert(op).second)
          stack.push_back(op);
    };
    for (Value result : ret->getOperands())
      need(result);
    while (!stack.empty()) {
      Operation *op = stack.pop_back_val();
      op->walk([&](Operation *nested) {
        for (Value operand : nested->getOperands())
          need(operand);
      });
    }
    SmallVector<Operation *> weightOps;
    for (Operation &op : body.without_terminator())
      if (!inB.contains(&op))
        weightOps.push_back(&op);
    llvm::DenseSet<Operation *> inW(weightOps.begin(), weightOps.end());

    // What W reads from B: taken again, or kept (in the order W first
    // reads them).
    llvm::SetVector<Value> stash;
    llvm::SetVector<Operation *> again;
    std::function<void(Value)> read = [&](Value value) {
      if (auto arg = dyn_cast<BlockArgument>(value)) {
        if (arg.getOwner() == &body)
          stash.insert(value);
        return;
      }
      Operation *def = body.findAncestorOpInBlock(*value.getDefiningOp());
      if (!def || inW.contains(def))
        return;
      if (!isReadAgain(def)) {
        stash.insert(value);
        return;
      }
      if (again.contains(def))
        return;
      for (Value operand : def->getOperands())
        read(operand);
      again.insert(def);
    };
    for (Operation *op : weightOps)
      op->walk([&](Operation *nested) {
        for (Value operand : nested->getOperands())
          read(operand);
      });

    // W: its own function after B, taking the kept values.
    OpBuilder b(fb->getContext());
    b.setInsertionPointAfter(fb);
    SmallVector<Type> stashTypes;
    for (Value value : stash)
      stashTypes.push_back(value.getType());
    auto weight = func::FuncOp::create(
        b, fb.getLoc(), ("backward_weight.stage" + Twine(stage)).str(),
        b.getFunctionType(stashTypes, {}));
    setProgramRole(weight, ProgramRole::BackwardWeight);
    weight->setAttr(kStageAttr, b.getI64IntegerAttr(stage));
    Block *weightBody = weight.addEntryBlock();
    b.setInsertionPointToEnd(weightBody);
    auto weightRet = func::ReturnOp::create(b, fb.getLoc());
    IRMapping mapping;
    for (auto [value, arg] : llvm::zip(stash, weightBody->getArguments()))
      mapping.map(value, arg);
    // Taken again in the order B computed them (operands first).
    SmallVector<Operation *> ordered(again.begin(), again.end());
    llvm::sort(ordered, [](Operation *x, Operation *y) {
      return x->isBeforeInBlock(y);
    });
    b.setInsertionPoint(weightRet);
    for (Operation *op : ordered)
      b.clone(*op, mapping);
    for (Operation *op : weightOps) {
      op->moveBefore(weightRet);
      op->walk([&](Operation *nested) {
        for (OpOperand &operand : nested->getOpOperands())
          if (Value mapped = mapping.lookupOrNull(operand.get()))
            operand.set(mapped);
      });
    }

    // B returns the kept values after its results: a copy of each of its
    // arguments and of a value it returns already (a program's results are
    // buffers of their own).
    b.setInsertionPoint(ret);
    SmallVector<Value> results(ret->getOperands());
    for (Value value : stash) {
      const bool copy =
          isa<BlockArgument>(value) || llvm::is_contained(results, value);
      results.push_back(
          copy ? ReshapeOp::create(b, value.getLoc(), value.getType(), value)
                     .getResult()
               : value);
    }
    func::ReturnOp::create(b, ret->getLoc(), results);
    ret->erase();
    fb.setType(b.getFunctionType(fb.getArgumentTypes(),
                                 ValueRange(results).getTypes()));
    fb->setAttr(kWeightStashAttr, b.getI64IntegerAttr(int64_t(stash.size())));
  }
};

} // namespace
