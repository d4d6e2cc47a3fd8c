//===- DscScheduleOps.cpp - a pipeline stage's step as ops ----------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Verifiers of the pipeline_step ops: a forward or backward names its own
// stage's program of that role (interleaved: one of its rank's stages'),
// and a message goes to the neighbour its direction implies (activations to
// k+1, gradients to k-1).
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscOps.h"
#include "dsc/Dialect/Dsc/IR/DscPrograms.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

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

/// The pipeline shape of the module around `op` (one stage per rank
/// without one).
static PipelineShape shapeAround(Operation *op) {
  if (auto module = op->getParentOfType<ModuleOp>())
    if (std::optional<PipelineShape> shape = getPipelineShape(module))
      return *shape;
  return PipelineShape{};
}

/// `callee` must be a program of `role` of a stage the enclosing step's
/// rank holds: its own stage, or interleaved one of r, r+P, ...
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
  const PipelineShape shape = shapeAround(op);
  std::optional<int64_t> calleeStage = getPipelineStage(func);
  const bool held = shape.virtualStages == 1
                        ? calleeStage == *stage
                        : calleeStage && *calleeStage >= 0 &&
                              *calleeStage < shape.stages &&
                              shape.rankOf(*calleeStage) == *stage;
  if (!held || getProgramRole(func) != role) {
    if (shape.virtualStages == 1)
      return op->emitOpError("callee ")
             << callee << " must be stage " << *stage << "'s "
             << stringifyProgramRole(role) << " program";
    return op->emitOpError("callee ")
           << callee << " must be the " << stringifyProgramRole(role)
           << " program of a stage pp rank " << *stage << " holds (" << *stage
           << " + " << shape.ranks() << "c for chunk c < "
           << shape.virtualStages << ")";
  }
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

LogicalResult
PipelineBackwardWeightOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyStageCallee(*this, tables, getCalleeAttr(),
                           ProgramRole::BackwardWeight);
}

/// A message goes between neighbouring stages: an activation from s to
/// s+1, a gradient from s to s-1, `peer` being the other stage's pp rank.
/// `sends` says whether this stage sends.
static LogicalResult verifyNeighbour(Operation *op, PipelineMessage message,
                                     std::optional<int64_t> chunk, int64_t peer,
                                     int64_t microbatch, Type payload,
                                     bool sends) {
  if (microbatch < 0)
    return op->emitOpError("microbatch must be >= 0, got ") << microbatch;
  if (!isa<RankedTensorType>(payload))
    return op->emitOpError("payload must be a ranked tensor type, got ")
           << payload;
  FailureOr<int64_t> rank = enclosingStage(op);
  if (failed(rank))
    return failure();
  // Activations flow to higher stages, gradients to lower ones.
  const bool upward = message == PipelineMessage::Activation;
  const int64_t step = (upward == sends) ? 1 : -1;
  const PipelineShape shape = shapeAround(op);
  if (shape.virtualStages == 1) {
    if (chunk)
      return op->emitOpError("names chunk ")
             << *chunk << ", but the pipeline is not interleaved";
    const int64_t expected = *rank + step;
    if (peer != expected)
      return op->emitOpError("stage ")
             << *rank << (sends ? " sends " : " receives ")
             << stringifyPipelineMessage(message) << "s "
             << (sends ? "to" : "from") << " stage " << expected << ", not "
             << peer;
    return success();
  }
  if (!chunk || *chunk < 0 || *chunk >= shape.virtualStages)
    return op->emitOpError("in an interleaved pipeline must name its chunk "
                           "0 <= c < ")
           << shape.virtualStages;
  const int64_t stage = *chunk * shape.ranks() + *rank;
  const int64_t other = stage + step;
  if (other < 0 || other >= shape.stages)
    return op->emitOpError("stage ")
           << stage << " (rank " << *rank << " chunk " << *chunk << ") has no "
           << (step > 0 ? "next" : "previous") << " stage to "
           << (sends ? "send " : "receive ")
           << stringifyPipelineMessage(message) << "s "
           << (sends ? "to" : "from");
  if (peer != shape.rankOf(other))
    return op->emitOpError("stage ")
           << stage << " (rank " << *rank << " chunk " << *chunk << ")"
           << (sends ? " sends " : " receives ")
           << stringifyPipelineMessage(message) << "s "
           << (sends ? "to" : "from") << " stage " << other << " on rank "
           << shape.rankOf(other) << ", not rank " << peer;
  return success();
}

LogicalResult PipelineSendOp::verify() {
  return verifyNeighbour(*this, getMessage(), getChunk(), getPeer(),
                         getMicrobatch(), getPayload(), /*sends=*/true);
}

LogicalResult PipelineRecvOp::verify() {
  return verifyNeighbour(*this, getMessage(), getChunk(), getPeer(),
                         getMicrobatch(), getPayload(), /*sends=*/false);
}
