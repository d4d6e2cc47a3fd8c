//===- ForwardPart.cpp - the forward ops of a forward_backward --*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//

#include "dsc/Transforms/ForwardPart.h"

#include "dsc/Dialect/Dsc/IR/DscOps.h"
#include "dsc/Dialect/Dsc/IR/DscPrograms.h"
#include "dsc/Transforms/TransformerLayers.h"

using namespace mlir;
using namespace mlir::dsc;

FailureOr<size_t> mlir::dsc::countForwardOps(ModuleOp module, func::FuncOp fb,
                                             StringRef pass) {
  auto forward = lookupProgram<func::FuncOp>(module, ProgramRole::Forward,
                                             getPipelineStage(fb));
  if (!forward || forward.isExternal())
    return fb.emitError(pass)
           << ": @" << fb.getSymName()
           << " has no forward program to tell its forward ops by";
  if (!fb.getBody().hasOneBlock())
    return fb.emitError(pass)
           << ": @" << fb.getSymName() << " must have a single block";
  auto fbOps = fb.getBody().front().without_terminator();
  auto it = fbOps.begin();
  size_t count = 0;
  for (Operation &op : forward.getBody().front().without_terminator()) {
    if (it == fbOps.end() || it->getName() != op.getName())
      return fb.emitError(pass)
             << ": the ops of @" << fb.getSymName()
             << " do not begin with those of @" << forward.getSymName()
             << " (op " << count << "); the pass runs directly after "
             << "--dsc-autodiff";
    ++it;
    ++count;
  }
  return count;
}

FailureOr<func::FuncOp> mlir::dsc::forwardLossFunction(ModuleOp module,
                                                       llvm::StringRef name,
                                                       llvm::StringRef pass,
                                                       llvm::StringRef rewrite,
                                                       bool singleBlock) {
  if (!getProgramOps(module, ProgramRole::ForwardBackward).empty())
    return module.emitError(pass)
           << " " << rewrite << " and must run before --dsc-autodiff";
  auto loss = module.lookupSymbol<func::FuncOp>(name);
  if (!loss || loss.isExternal() ||
      (singleBlock && !loss.getBody().hasOneBlock()))
    return module.emitError(pass)
           << ": no " << (singleBlock ? "single-block " : "") << "function @"
           << name << " computing the loss";
  return loss;
}

bool mlir::dsc::isParameterCopy(Operation *op) {
  while (op && isa<CopyToParallelOp, CastOp>(op))
    op = op->getOperand(0).getDefiningOp();
  return op && isa<GetParameterOp>(op);
}

bool mlir::dsc::isReadAgain(Operation *op) {
  return isRematerialized(op) || isParameterCopy(op);
}
