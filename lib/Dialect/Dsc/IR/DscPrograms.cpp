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
    if (auto f = dyn_cast<PipelineForwardOp>(op)) {
      s.kind = Kind::Forward;
      s.microBatch = int64_t(f.getMicrobatch());
      chunk = chunkOfCallee(f.getCalleeAttr());
    } else if (auto b = dyn_cast<PipelineBackwardOp>(op)) {
      s.kind = Kind::Backward;
      s.microBatch = int64_t(b.getMicrobatch());
      chunk = chunkOfCallee(b.getCalleeAttr());
    } else if (auto w = dyn_cast<PipelineBackwardWeightOp>(op)) {
      s.kind = Kind::BackwardWeight;
      s.microBatch = int64_t(w.getMicrobatch());
      chunk = chunkOfCallee(w.getCalleeAttr());
    } else if (auto send = dyn_cast<PipelineSendOp>(op)) {
      s.kind = Kind::Send;
      s.microBatch = int64_t(send.getMicrobatch());
      s.peer = int64_t(send.getPeer());
      s.gradient = send.getMessage() == PipelineMessage::Gradient;
      chunk = send.getChunk().value_or(0);
    } else if (auto recv = dyn_cast<PipelineRecvOp>(op)) {
      s.kind = Kind::Recv;
      s.microBatch = int64_t(recv.getMicrobatch());
      s.peer = int64_t(recv.getPeer());
      s.gradient = recv.getMessage() == PipelineMessage::Gradient;
      chunk = recv.getChunk().value_or(0);
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
