//===- DscPrograms.cpp - training programs by role --------------*- C++ -*-===//
//
// Reads and writes the `dsc.program` and `dsc.stage` attributes that tell a
// module's training programs apart.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscPrograms.h"

#include "mlir/IR/BuiltinAttributes.h"

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
