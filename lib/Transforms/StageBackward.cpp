//===- StageBackward.cpp - --dsc-stage-backward -----------------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// A pipeline stage's forward runs when the schedule says (its output goes
// to the next stage) and its backward micro-batches later. --dsc-autodiff
// writes the backward as forward_backward: a clone of the forward, then the
// backward ops, so without this pass a stage computes its forward twice.
// Here each stage but the last keeps what its backward reads instead:
//
//   func.func @loss.stage0(%x) -> (%out, %r0, %r1, ...)      (forward)
//   func.func @backward.stage0(%x, %dout, %r0, %r1, ...) -> %dx
//
// The forward returns, after its output, the values its backward reads
// (the residuals: activations, as --dsc-recompute left them; parameter
// reads, constants and parameter copies are taken again instead); the
// backward takes them after the output's gradient and has no forward ops.
// The runtime keeps each micro-batch's residuals from its forward to its
// backward. The last stage runs its forward and backward together, as
// before.
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

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCSTAGEBACKWARDPASS
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

struct DscStageBackwardPass
    : mlir::dsc::impl::DscStageBackwardPassBase<DscStageBackwardPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<PipelineShape> shape = getPipelineShape(module);
    if (!shape)
      return;
    for (int64_t k = 0; k + 1 < shape->stages; ++k) {
      auto forward =
          lookupProgram<func::FuncOp>(module, ProgramRole::Forward, k);
      auto fb =
          lookupProgram<func::FuncOp>(module, ProgramRole::ForwardBackward, k);
      if (!forward || !fb) {
        module.emitError("--dsc-stage-backward: stage ")
            << k << " has no " << (forward ? "forward_backward" : "forward")
            << " program (run --dsc-pipeline and --dsc-autodiff before)";
        return signalPassFailure();
      }
      if (fb.getNumArguments() != 2 || forward.getNumResults() != 1) {
        fb.emitError("--dsc-stage-backward: stage ")
            << k << " is split already, or its programs are not "
            << "(input) -> output and (input, output gradient) -> input "
               "gradient";
        return signalPassFailure();
      }
      FailureOr<size_t> forwardOps =
          countForwardOps(module, fb, "--dsc-stage-backward");
      if (failed(forwardOps) || failed(split(forward, fb, *forwardOps)))
        return signalPassFailure();
      ++numSplit;
    }
  }

  LogicalResult split(func::FuncOp forward, func::FuncOp fb,
                      size_t forwardOps) {
    Block &body = fb.getBody().front();
    SmallVector<Operation *> ops;
    for (Operation &op : body.without_terminator())
      ops.push_back(&op);
    SmallVector<Operation *> forwardCopy;
    for (Operation &op : forward.getBody().front().without_terminator())
      forwardCopy.push_back(&op);
    llvm::DenseSet<Operation *> inForward(ops.begin(),
                                          ops.begin() + forwardOps);
    auto readByBackward = [&](Value value) {
      return llvm::any_of(value.getUsers(), [&](Operation *user) {
        return !inForward.contains(body.findAncestorOpInBlock(*user));
      });
    };

    // The residuals, in program order, and the forward program's values
    // they are (its ops are the forward part's, one for one).
    SmallVector<Value> residuals, kept;
    llvm::SetVector<Operation *> takenAgain;
    for (size_t i = 0; i < forwardOps; ++i)
      for (auto [index, result] : llvm::enumerate(ops[i]->getResults())) {
        if (!readByBackward(result))
          continue;
        if (isReadAgain(ops[i])) {
          takenAgain.insert(ops[i]);
          continue;
        }
        residuals.push_back(result);
        kept.push_back(forwardCopy[i]->getResult(index));
      }

    // The forward returns them after its output (a copy when the output
    // itself is one: a program's results are distinct buffers).
    auto ret = cast<func::ReturnOp>(forward.getBody().front().getTerminator());
    OpBuilder b(ret);
    SmallVector<Value> results(ret.getOperands());
    for (Value value : kept)
      results.push_back(
          llvm::is_contained(results, value)
              ? ReshapeOp::create(b, value.getLoc(), value.getType(), value)
                    .getResult()
              : value);
    func::ReturnOp::create(b, ret.getLoc(), results);
    ret.erase();
    forward.setType(b.getFunctionType(forward.getArgumentTypes(),
                                      ValueRange(results).getTypes()));

    // The backward takes them after the output's gradient; what is taken
    // again is cloned in front of the first backward op, with the chain of
    // parameter copies it reads.
    Operation *firstBackward =
        forwardOps < ops.size() ? ops[forwardOps] : body.getTerminator();
    OpBuilder front(firstBackward);
    IRMapping again;
    llvm::SetVector<Operation *> chain;
    for (Operation *op : takenAgain) {
      SmallVector<Operation *> stack = {op};
      while (!stack.empty()) {
        Operation *next = stack.pop_back_val();
        if (!chain.insert(next))
          continue;
        for (Value operand : next->getOperands())
          if (Operation *def = operand.getDefiningOp();
              def && inForward.contains(def))
            stack.push_back(def);
      }
    }
    // Clone in program order so that operands come first.
    SmallVector<Operation *> ordered(chain.begin(), chain.end());
    llvm::sort(ordered, [&](Operation *a, Operation *c) {
      return a->isBeforeInBlock(c);
    });
    for (Operation *op : ordered)
      front.clone(*op, again);
    for (Operation *op : takenAgain)
      for (Value result : op->getResults())
        result.replaceUsesWithIf(again.lookup(result), [&](OpOperand &use) {
          return !inForward.contains(
              body.findAncestorOpInBlock(*use.getOwner()));
        });
    for (Value residual : residuals) {
      BlockArgument arg =
          body.addArgument(residual.getType(), residual.getLoc());
      residual.replaceUsesWithIf(arg, [&](OpOperand &use) {
        return !inForward.contains(body.findAncestorOpInBlock(*use.getOwner()));
      });
    }
    for (Operation *op : llvm::reverse(ArrayRef(ops).take_front(forwardOps))) {
      if (!op->use_empty())
        return op->emitOpError("--dsc-stage-backward: a forward value of @")
               << fb.getSymName() << " is still read after the split";
      op->erase();
    }
    fb.setType(b.getFunctionType(body.getArgumentTypes(),
                                 fb.getFunctionType().getResults()));
    fb.setSymName(("backward.stage" + Twine(*getPipelineStage(fb))).str());
    return success();
  }
};

} // namespace
