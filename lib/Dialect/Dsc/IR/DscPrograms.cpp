//===- DscPrograms.cpp - training programs by role --------------*- C++ -*-===//
//
// Reads and writes the `dsc.program` and `dsc.stage` attributes that tell a
// module's training programs apart.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscPrograms.h"

#include "dsc/Dialect/Dsc/IR/DscOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace mlir::dsc;

std::optional<ProgramRole> mlir::dsc::getProgramRole(Operation *func) {
  if (auto role = func->getAttrOfType<ProgramRoleAttr>(kProgramAttr))
    return role.getValue();
  return std::nullopt;
}

void mlir::dsc::setProgramRole(Operation *func, ProgramRole role) {
  func->setAttr(kProgramAttr, ProgramRoleAttr::get(func->getContext(), role));
}

std::optional<int64_t> mlir::dsc::getPipelineStage(Operation *func) {
  if (auto stage = func->getAttrOfType<IntegerAttr>(kStageAttr))
    return stage.getInt();
  return std::nullopt;
}

Operation *mlir::dsc::lookupProgramOp(Operation *module, ProgramRole role,
                                      std::optional<int64_t> stage) {
  for (Operation *func : getProgramOps(module, role))
    if (getPipelineStage(func) == stage)
      return func;
  return nullptr;
}

SmallVector<Operation *> mlir::dsc::getProgramOps(Operation *module,
                                                  ProgramRole role) {
  SmallVector<Operation *> programs;
  for (Region &region : module->getRegions())
    for (Block &block : region)
      for (Operation &op : block)
        if (getProgramRole(&op) == role)
          programs.push_back(&op);
  return programs;
}

PipelineAttr mlir::dsc::getPipelineAttr(Operation *module) {
  return module->getAttrOfType<PipelineAttr>(kPipelineAttr);
}

std::optional<PipelineShape> mlir::dsc::getPipelineShape(Operation *module) {
  PipelineAttr pipeline = getPipelineAttr(module);
  if (!pipeline)
    return std::nullopt;
  return PipelineShape{pipeline.getStages(), pipeline.getVirtualStages()};
}

std::optional<std::vector<::dsc::PipelineStepOp>>
mlir::dsc::readPipelineStep(Operation *step, const PipelineShape &shape) {
  using Kind = ::dsc::PipelineStepOp::Kind;
  std::vector<::dsc::PipelineStepOp> ops;
  if (step->getNumRegions() != 1 || step->getRegion(0).empty())
    return std::nullopt;
  auto chunkOfCallee = [&](FlatSymbolRefAttr callee) -> std::optional<int64_t> {
    Operation *func = SymbolTable::lookupNearestSymbolFrom(step, callee);
    std::optional<int64_t> stage = func ? getPipelineStage(func) : std::nullopt;
    if (!stage)
      return std::nullopt;
    return shape.chunkOf(*stage);
  };
  for (Operation &op : step->getRegion(0).front()) {
    if (op.hasTrait<OpTrait::IsTerminator>())
      continue;
    ::dsc::PipelineStepOp s;
    std::optional<int64_t> chunk;
    // A forward, backward or weight-gradient part: its callee's chunk. A
    // send or receive: the message's.
    auto call = [&](auto callOp, Kind kind) {
      s.kind = kind;
      s.microBatch = int64_t(callOp.getMicrobatch());
      chunk = chunkOfCallee(callOp.getCalleeAttr());
    };
    auto message = [&](auto messageOp, Kind kind) {
      s.kind = kind;
      s.microBatch = int64_t(messageOp.getMicrobatch());
      s.peer = int64_t(messageOp.getPeer());
      s.gradient = messageOp.getMessage() == PipelineMessage::Gradient;
      chunk = messageOp.getChunk().value_or(0);
    };
    if (auto f = dyn_cast<PipelineForwardOp>(op)) {
      call(f, Kind::Forward);
    } else if (auto b = dyn_cast<PipelineBackwardOp>(op)) {
      call(b, Kind::Backward);
    } else if (auto w = dyn_cast<PipelineBackwardWeightOp>(op)) {
      call(w, Kind::BackwardWeight);
    } else if (auto send = dyn_cast<PipelineSendOp>(op)) {
      message(send, Kind::Send);
    } else if (auto recv = dyn_cast<PipelineRecvOp>(op)) {
      message(recv, Kind::Recv);
    } else {
      return std::nullopt;
    }
    if (!chunk)
      return std::nullopt;
    s.chunk = *chunk;
    ops.push_back(s);
  }
  return ops;
}
