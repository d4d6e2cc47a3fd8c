//===- DscScheduleOps.cpp - a pipeline stage's step as ops ----------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Verifiers of the pipeline_step ops: a forward or backward names its own
// stage's program of that role, and a message goes to the neighbour its
// direction implies (activations to k+1, gradients to k-1).
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscOps.h"
#include "dsc/Dialect/Dsc/IR/DscPrograms.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;
using namespace mlir::dsc;

/// The pipeline stage of the function around `op`, or an error.
static FailureOr<int64_t> enclosingStage(Operation *op) {
  auto func = op->getParentOfType<func::FuncOp>();
  std::optional<int64_t> stage = func ? getPipelineStage(func) : std::nullopt;
  if (!stage)
    return op->emitOpError("must be inside a pipeline stage's program (a "
                           "function with dsc.stage)");
  return *stage;
}

/// `callee` must be the enclosing stage's program of `role`.
static LogicalResult verifyStageCallee(Operation *op,
                                       SymbolTableCollection &tables,
                                       FlatSymbolRefAttr callee,
                                       ProgramRole role) {
  FailureOr<int64_t> stage = enclosingStage(op);
  if (failed(stage))
    return failure();
  auto func = tables.lookupNearestSymbolFrom<func::FuncOp>(op, callee);
  if (!func)
    return op->emitOpError("callee ") << callee << " is not a function";
  if (getPipelineStage(func) != *stage || getProgramRole(func) != role)
    return op->emitOpError("callee ")
           << callee << " must be stage " << *stage << "'s "
           << stringifyProgramRole(role) << " program";
  return success();
}

LogicalResult
PipelineForwardOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyStageCallee(*this, tables, getCalleeAttr(),
                           ProgramRole::Forward);
}

LogicalResult
PipelineBackwardOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyStageCallee(*this, tables, getCalleeAttr(),
                           ProgramRole::ForwardBackward);
}

/// A message goes between neighbours: an activation from k to k+1, a
/// gradient from k to k-1. `towardsPeer` says whether this stage sends.
static LogicalResult verifyNeighbour(Operation *op, PipelineMessage message,
                                     int64_t peer, int64_t microbatch,
                                     Type payload, bool sends) {
  if (microbatch < 0)
    return op->emitOpError("microbatch must be >= 0, got ") << microbatch;
  if (!isa<RankedTensorType>(payload))
    return op->emitOpError("payload must be a ranked tensor type, got ")
           << payload;
  FailureOr<int64_t> stage = enclosingStage(op);
  if (failed(stage))
    return failure();
  // Activations flow to higher stages, gradients to lower ones.
  const bool upward = message == PipelineMessage::Activation;
  const int64_t expected = (upward == sends) ? *stage + 1 : *stage - 1;
  if (peer != expected)
    return op->emitOpError("stage ")
           << *stage << (sends ? " sends " : " receives ")
           << stringifyPipelineMessage(message) << "s "
           << (sends ? "to" : "from") << " stage " << expected << ", not "
           << peer;
  return success();
}

LogicalResult PipelineSendOp::verify() {
  return verifyNeighbour(*this, getMessage(), getPeer(), getMicrobatch(),
                         getPayload(), /*sends=*/true);
}

LogicalResult PipelineRecvOp::verify() {
  return verifyNeighbour(*this, getMessage(), getPeer(), getMicrobatch(),
                         getPayload(), /*sends=*/false);
}
