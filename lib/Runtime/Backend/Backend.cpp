//===- Backend.cpp - What every backend shares ----------------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The parts of Backend.h that are no backend's own: the interfaces' anchors,
// the host-memory default of makeWorld, and the error that names an
// instruction. Both backends and the executor link this library, and no
// backend links the executor.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/Backend.h"
#include "dsc/Runtime/Instructions.h"

using namespace dsc::rt;

Backend::~Backend() = default;
InstructionContext::~InstructionContext() = default;

double InstructionContext::learningRate(const ops::LearningRate &lr) const {
  return scheduledLearningRate(lr, step());
}

void InstructionContext::noteExpertLoads(const Program &, size_t,
                                         const int64_t *, int64_t) {}

std::unique_ptr<Communicator> Backend::makeWorld(Communicator &) {
  return nullptr;
}

Error dsc::rt::instructionError(const Program &prog, size_t index,
                                const std::string &msg) {
  const Instruction &inst = prog.instructions[index];
  return Error("program '" + prog.name + "' instruction " +
               std::to_string(index) + " '" + inst.name + "' (" +
               opcodeName(inst.opcode) + "): " + msg);
}
