//===- PipelineStep.cpp - One rank's part of a pipelined step -------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The step program's pipeline instructions, one case each, over the slots
// the plan planned for what a later instruction reads.
//
//===----------------------------------------------------------------------===//

#include "PipelineStep.h"

#include "dsc/Runtime/Instructions.h"

#include <functional>
#include <string>

using namespace dsc::rt;

bool PipelineStep::holdsLoss() const {
  const int64_t S = int64_t(plan.stages.size());
  return (S - 1) % plan.pipelineRanks() == mesh.stage();
}

double PipelineStep::run(const TokenFeed::Fill &fill, int64_t firstMicroBatch,
                         double backwardSeed, const CurriculumLength *length) {
  // A curriculum's shorter length trains in its own stages (the plan's
  // optimizers), on samples cut to it.
  const std::vector<PipelineStage> &stages =
      length && !length->stages.empty() ? length->stages : plan.stages;
  const int64_t gradientSeed =
      length ? length->gradientSeed : plan.gradientSeed;
  const int64_t S = int64_t(stages.size());
  const int64_t P = plan.pipelineRanks();
  const int64_t r = mesh.stage();
  const PipelineStage &own = stages[size_t(r)];
  Communicator &pp = mesh.pipelineGroup();
  // The pp group is ordered by world rank, and the pp coordinate grows
  // with the world rank when the other coordinates are fixed.
  if (pp.rank() != int(r) || pp.size() != int(P))
    throw Error("the pp group of pipeline rank " + std::to_string(r) +
                " is rank " + std::to_string(pp.rank()) + " of " +
                std::to_string(pp.size()));

  // The last stage's backward seeds the loss gradient with 1/M, so the
  // accumulated gradients are the mean over the step's micro-batches
  // (trainStep checked that the plan can take M).
  if ((S - 1) % P == r && gradientSeed >= 0)
    arenas.writeScalar(uint32_t(gradientSeed), backwardSeed);

  // What each micro-batch keeps lives in the slot the step names: point
  // the stage's kept buffers at it (validatePlan checked that no two
  // micro-batches in flight share a slot and that the slots fit their
  // banks). Nothing is copied.
  std::vector<std::vector<int64_t>> activations(static_cast<size_t>(S)),
      gradients(static_cast<size_t>(S));
  for (int64_t k = r; k < S; k += P) {
    activations[size_t(k)] = stages[size_t(k)].activationBuffers();
    gradients[size_t(k)] = stages[size_t(k)].gradientBuffers();
  }
  auto useActivations = [&](int64_t stage, int64_t slot) {
    arenas.setSlot(activations[size_t(stage)], slot,
                   stages[size_t(stage)].activationSlots.stride);
  };
  auto useGradients = [&](int64_t stage, int64_t slot) {
    arenas.setSlot(gradients[size_t(stage)], slot,
                   stages[size_t(stage)].gradientSlots.stride);
  };
  auto useWeightStash = [&](int64_t stage, int64_t slot) {
    const PipelineStage &st = stages[size_t(stage)];
    arenas.setSlot(st.weightStash, slot, st.weightSlots.stride);
  };

  double lossSum = 0;
  // The step program, as the compiler scheduled it (validatePlan checked
  // its stages, messages' buffers and peers, and its micro-batch order).
  // The verified order pairs every send with its receive, so the transport
  // needs no tag to tell them apart.
  constexpr int kTag = 0;
  const Program &step = *plan.findProgram(own.step);
  // A message on the trace's communication lane, with the bytes it sent.
  auto timedMessage = [&](size_t index, const std::function<void()> &move) {
    if (!runner.instructionHook()) {
      move();
      return;
    }
    const uint64_t before = pp.stats().totalSent();
    InstructionEvent event;
    event.program = &step;
    event.index = index;
    event.instruction = &step.instructions[index];
    event.startUs = runner.nowUs();
    move();
    event.durationUs = runner.nowUs() - event.startUs;
    event.stream = 1;
    event.collective = true;
    event.bytesSent = pp.stats().totalSent() - before;
    runner.instructionHook()(event);
  };
  for (size_t i = 0; i < step.instructions.size(); ++i) {
    const Instruction &inst = step.instructions[i];
    switch (inst.opcode) {
    case Opcode::PipelineForward: {
      const ops::PipelineForward f = ops::PipelineForward::decode(inst);
      const PipelineStage &st = stages[size_t(f.stage)];
      context.setMicroBatch(firstMicroBatch + f.microBatch);
      useActivations(f.stage, f.slot);
      // Stage 0 loads its tokens into the slot; the others' activation was
      // received into it.
      if (f.stage == 0)
        feed.fillAt(fill, f.microBatch, length);
      // The last stage's forward is part of its backward; another stage's
      // forward also writes the residuals its backward reads.
      if (f.stage != S - 1)
        runner.run(st.forward);
      break;
    }
    case Opcode::PipelineBackward: {
      const ops::PipelineBackward b = ops::PipelineBackward::decode(inst);
      const PipelineStage &st = stages[size_t(b.stage)];
      const bool last = b.stage == S - 1;
      context.setMicroBatch(firstMicroBatch + b.microBatch);
      useActivations(b.stage, b.slot);
      if (last)
        feed.fillAt(fill, b.microBatch, length);
      else
        useGradients(b.stage, b.gradientSlot);
      if (!st.backwardWeight.empty())
        useWeightStash(b.stage, b.weightSlot);
      runner.run(st.forwardBackward);
      if (last)
        lossSum += arenas.readScalar(uint32_t(st.loss));
      break;
    }
    case Opcode::PipelineBackwardWeight: {
      const ops::PipelineBackwardWeight w =
          ops::PipelineBackwardWeight::decode(inst);
      const PipelineStage &st = stages[size_t(w.stage)];
      context.setMicroBatch(firstMicroBatch + w.microBatch);
      useWeightStash(w.stage, w.slot);
      runner.run(st.backwardWeight);
      break;
    }
    case Opcode::PipelineSend: {
      const ops::PipelineSend send = ops::PipelineSend::decode(inst);
      BufferView x = arenas.view(inst.inputs[0]);
      timedMessage(i, [&] {
        pp.send(x.data, size_t(x.size()), x.desc->dtype, int(send.peer), kTag);
      });
      break;
    }
    case Opcode::PipelineRecv: {
      const ops::PipelineRecv recv = ops::PipelineRecv::decode(inst);
      // Into its slot, where the forward or backward reads it (the input
      // or the output's gradient: validatePlan checked which).
      if (int64_t(inst.outputs[0]) == stages[size_t(recv.stage)].outputGrad)
        useGradients(recv.stage, recv.slot);
      else
        useActivations(recv.stage, recv.slot);
      BufferView x = arenas.view(inst.outputs[0]);
      timedMessage(i, [&] {
        pp.recv(x.data, size_t(x.size()), x.desc->dtype, int(recv.peer), kTag);
      });
      break;
    }
    default:
      throw Error("pipeline rank " + std::to_string(r) + "'s step program '" +
                  step.name + "' instruction " + std::to_string(i) + " (" +
                  opcodeName(inst.opcode) +
                  ") is not a pipeline-step "
                  "instruction");
    }
  }
  return lossSum;
}
