//===- ForwardPart.h - the forward ops of a forward_backward ----*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// --dsc-autodiff writes a forward_backward program as a clone of its
// forward program followed by the backward. The passes that tell the two
// parts apart (activation recompute, the stage backward's split) count the
// forward part by this one rule, and agree on which forward values are
// activations (kept for the backward) and which are weights.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_TRANSFORMS_FORWARDPART_H
#define DSC_TRANSFORMS_FORWARDPART_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringRef.h"

namespace mlir::dsc {

/// How many of `fb`'s first ops are its forward: those of the forward
/// program of its stage, which --dsc-autodiff cloned; an error naming
/// `pass` when they are not (a pass ran in between that rewrote them).
FailureOr<size_t> countForwardOps(ModuleOp module, func::FuncOp fb,
                                  llvm::StringRef pass);

/// The loss function `name` of a forward graph, for a pass that rewrites
/// it before --dsc-autodiff (tensor slicing, expert parallelism, the
/// pipeline cut). Errors on `module`: "<pass> <rewrite> and must run before
/// --dsc-autodiff" once a forward_backward program exists, and "<pass>: no
/// [single-block ]function @<name> computing the loss".
FailureOr<func::FuncOp>
forwardLossFunction(ModuleOp module, llvm::StringRef name, llvm::StringRef pass,
                    llvm::StringRef rewrite, bool singleBlock = false);

/// A copy of a parameter (sequence parallelism reads the norms' weights
/// through dsc.copy_to_parallel; mixed precision casts them): a weight, not
/// an activation.
bool isParameterCopy(Operation *op);

/// What a program split from a backward reads again rather than receives
/// (--dsc-stage-backward, --dsc-split-weight-gradient): parameter reads,
/// constants and copies of parameters.
bool isReadAgain(Operation *op);

} // namespace mlir::dsc

#endif // DSC_TRANSFORMS_FORWARDPART_H
