//===- PlanPrinter.cpp - A plan as readable text --------------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// `dsc-run --print-plan`: one line per arena, buffer and instruction, so a
// plan file can be read, diffed and FileCheck-ed without the compiler.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/PlanIO.h"

#include <sstream>

using namespace dsc::rt;

namespace {

std::string bufferRef(const Plan &plan, uint32_t id) {
  std::string s = "%" + std::to_string(id);
  if (id < plan.buffers.size() && !plan.buffers[id].name.empty())
    s += " '" + plan.buffers[id].name + "'";
  return s;
}

} // namespace

std::string dsc::rt::formatPlan(const Plan &plan) {
  std::ostringstream os;
  os << "plan version " << plan.version << ": vocab " << plan.vocabSize
     << ", sequence " << plan.seqLength << ", micro-batch "
     << plan.microBatchSize << " x " << plan.microBatches << "\n";
  if (!plan.mesh.empty())
    os << "mesh: " << meshString(plan.mesh) << " (" << meshRanks(plan.mesh)
       << " ranks)\n";
  if (plan.compressionFromStep > 0 && plan.stages.empty())
    os << "1-bit optimizer: 'optimizer.compressed' from step "
       << plan.compressionFromStep << "\n";
  for (size_t k = 0; k < plan.stages.size(); ++k) {
    const PipelineStage &st = plan.stages[k];
    os << "stage " << k << " (" << ::dsc::pipelineScheduleName(plan.schedule)
       << "): programs '" << st.forward << "', '" << st.forwardBackward
       << "', '" << st.optimizer << "', step '" << st.step << "'; input %"
       << st.input;
    if (st.output >= 0)
      os << ", output %" << st.output << ", output grad %" << st.outputGrad;
    if (st.inputGrad >= 0)
      os << ", input grad %" << st.inputGrad;
    if (st.loss >= 0)
      os << ", loss %" << st.loss;
    if (!st.residuals.empty())
      os << ", " << st.residuals.size() << " residuals";
    if (!st.compressedOptimizer.empty())
      os << ", from step " << plan.compressionFromStep << " '"
         << st.compressedOptimizer << "'";
    if (!st.backwardWeight.empty())
      os << ", weight gradients '" << st.backwardWeight << "' ("
         << st.weightStash.size() << " kept from the backward)";
    for (auto [name, bank] :
         {std::make_pair("activation", &st.activationSlots),
          std::make_pair("gradient", &st.gradientSlots),
          std::make_pair("weight", &st.weightSlots)})
      if (bank->stride > 0)
        os << "; " << name << " slots " << bank->slots << " x "
           << bank->stride << " bytes at " << bank->offset;
    os << "\n";
  }
  os << "well-known: tokens %" << plan.tokens << ", targets %" << plan.targets
     << ", loss %" << plan.loss;
  if (plan.gradNorm >= 0)
    os << ", gradNorm %" << plan.gradNorm;
  if (plan.learningRate >= 0)
    os << ", learningRate %" << plan.learningRate;
  if (plan.gradientSeed >= 0)
    os << ", gradientSeed %" << plan.gradientSeed;
  os << "\n";
  for (const CurriculumLength &c : plan.curriculum) {
    os << "curriculum: sequence " << c.seqLength << " from step " << c.fromStep
       << " (" << c.rows << " rows, "
       << (c.reshape ? "seqlen_reshape" : "seqlen_truncate") << "): ";
    if (!c.program.empty())
      os << "program '" << c.program << "'";
    else if (c.stages.empty())
      os << "the plan's stages";
    else
      for (size_t k = 0; k < c.stages.size(); ++k)
        os << (k ? ", " : "") << "stage " << k << " '" << c.stages[k].forward
           << "', '" << c.stages[k].forwardBackward << "'"
           << (c.stages[k].step.empty() ? ""
                                        : ", step '" + c.stages[k].step + "'");
    os << ", tokens %" << c.tokens << ", targets %" << c.targets << ", loss %"
       << c.loss;
    if (c.gradientSeed >= 0)
      os << ", gradientSeed %" << c.gradientSeed;
    os << ", " << c.flopsPerMicroBatch << " FLOPs per micro-batch, "
       << c.collectiveBytesPerStep << " collective bytes per step\n";
  }
  for (size_t a = 0; a < plan.arenas.size(); ++a) {
    os << "arena " << a << ": " << tierName(plan.arenas[a].tier) << ", "
       << plan.arenas[a].bytes << " bytes";
    if (plan.arenas[a].pipelineRank >= 0)
      os << ", pipeline rank " << plan.arenas[a].pipelineRank;
    if (a < plan.summary.peakBytesPerArena.size())
      os << " (planned peak " << plan.summary.peakBytesPerArena[a] << ")";
    os << "\n";
  }
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    const Buffer &b = plan.buffers[i];
    os << "%" << i << " '" << b.name << "': " << roleName(b.role) << " "
       << dtypeName(b.dtype) << " " << shapeString(b.shape) << " at arena "
       << b.arena << " [" << b.offset << ", " << b.offset + b.bytes << ")";
    switch (b.init.kind) {
    case InitKind::None:
      break;
    case InitKind::Zeros:
      os << " init zeros";
      break;
    case InitKind::Ones:
      os << " init ones";
      break;
    case InitKind::Normal:
      os << " init normal(std " << b.init.std << ")";
      break;
    case InitKind::Constant:
      os << " init constant(" << b.init.value << ")";
      break;
    }
    if (!b.layout.view.empty()) {
      os << " part of view " << shapeString(b.layout.view) << " split";
      for (int64_t mask : b.layout.viewSplit)
        os << " " << mask;
    }
    if (b.layout.chunkAxes)
      os << " chunk of axes " << b.layout.chunkAxes;
    os << "\n";
  }
  for (const Program &p : plan.programs) {
    os << "program '" << p.name << "' (" << p.instructions.size()
       << " instructions)\n";
    for (size_t i = 0; i < p.instructions.size(); ++i) {
      const Instruction &inst = p.instructions[i];
      os << "  " << i << " " << opcodeName(inst.opcode) << " '" << inst.name
         << "' in(";
      for (size_t k = 0; k < inst.inputs.size(); ++k)
        os << (k ? ", " : "") << bufferRef(plan, inst.inputs[k]);
      os << ") out(";
      for (size_t k = 0; k < inst.outputs.size(); ++k)
        os << (k ? ", " : "") << bufferRef(plan, inst.outputs[k]);
      os << ")";
      if (!inst.ints.empty()) {
        os << " ints(";
        for (size_t k = 0; k < inst.ints.size(); ++k)
          os << (k ? " " : "") << inst.ints[k];
        os << ")";
      }
      if (!inst.floats.empty()) {
        os << " floats(";
        for (size_t k = 0; k < inst.floats.size(); ++k)
          os << (k ? " " : "") << inst.floats[k];
        os << ")";
      }
      os << "\n";
    }
  }
  os << "summary: " << plan.summary.flopsPerMicroBatch
     << " FLOPs per micro-batch, " << plan.summary.collectiveBytesPerStep
     << " collective bytes per step\n";
  return os.str();
}
