//===- PipelineSchedule.cpp - a pipelined training step ---------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// One rank's part of a pipelined step: its stage's step program, the
// schedule the compiler wrote (--dsc-pipeline-schedule) and
// --dsc-verify-collectives proved free of deadlock, run in order. The
// executor decides nothing here: it keeps the stage input of each
// micro-batch in flight until the micro-batch's backward, loads the data
// on the first and last stages, and moves the messages over the pp group.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/Executor.h"
#include "dsc/Runtime/Instructions.h"

#include <algorithm>
#include <deque>
#include <functional>

using namespace dsc::rt;

StepResult Executor::trainPipelineStep(
    const std::function<void(int64_t, int32_t *, int32_t *)> &fill,
    int64_t microBatches) {
  const int64_t M = microBatches;
  const int64_t P = int64_t(thePlan.stages.size());
  const int64_t k = stageIndex;
  const PipelineStage &st = thePlan.stages[size_t(k)];
  const bool first = k == 0, last = k == P - 1;
  Communicator &pp = *group(ppMask);
  // The pp group is ordered by world rank, and the pp coordinate grows
  // with the world rank when the other coordinates are fixed.
  if (pp.rank() != int(k) || pp.size() != int(P))
    throw Error("the pp group of stage " + std::to_string(k) + " is rank " +
                std::to_string(pp.rank()) + " of " + std::to_string(pp.size()));

  // The last stage's backward seeds the loss gradient with 1/M, so the
  // accumulated gradients are the mean over the step's micro-batches
  // (trainStep checked that the plan can take M).
  if (last)
    setGradientSeed(lossSeed(M));

  BufferView input = buffer(uint32_t(st.input));

  // Stage inputs of the micro-batches whose backward has not run, oldest
  // first: the backward recomputes the stage's forward from its input.
  const size_t inputBytes = input.desc->bytes;
  std::deque<std::pair<int64_t, size_t>> inFlight; // micro-batch, slot
  std::vector<size_t> freeSlots;
  for (size_t i = 0; i < stash.size(); ++i)
    freeSlots.push_back(i);
  // Slots are the backend's memory, kept across steps (the input buffer,
  // hence its size, is the same every step).
  auto push = [&](int64_t m) {
    size_t slot;
    if (freeSlots.empty()) {
      slot = stash.size();
      stash.push_back(static_cast<uint8_t *>(backendImpl->allocate(
          inputBytes, Tier::Device,
          "pipeline stash slot (" + std::to_string(inputBytes) + " bytes)")));
    } else {
      slot = freeSlots.back();
      freeSlots.pop_back();
    }
    backendImpl->copy(stash[slot], input.data, inputBytes);
    inFlight.emplace_back(m, slot);
  };
  auto pop = [&](int64_t m) {
    // validatePlan checked that backwards follow the forwards' order.
    if (inFlight.empty() || inFlight.front().first != m)
      throw Error("pipeline stage " + std::to_string(k) +
                  ": the backward of micro-batch " + std::to_string(m) +
                  " has no forward in flight");
    const size_t slot = inFlight.front().second;
    inFlight.pop_front();
    backendImpl->copy(input.data, stash[slot], inputBytes);
    freeSlots.push_back(slot);
  };

  double lossSum = 0;
  // Dropout numbers the micro-batches across data-parallel ranks.
  const int64_t firstMicroBatch = firstMicroBatchOfRank(M);
  const uint64_t sentBefore = collectiveStats().totalSent();
  // The step program, as the compiler scheduled it (validatePlan checked
  // its messages' buffers and peers and its micro-batch order). The
  // verified order pairs every send with its receive, so the transport
  // needs no tag to tell them apart.
  constexpr int kTag = 0;
  const Program &step = *thePlan.findProgram(st.step);
  // A message on the trace's communication lane, with the bytes it sent.
  auto timedMessage = [&](size_t index, const std::function<void()> &move) {
    if (!instructionHook) {
      move();
      return;
    }
    const uint64_t before = pp.stats().totalSent();
    InstructionEvent event;
    event.program = &step;
    event.index = index;
    event.instruction = &step.instructions[index];
    event.startUs = nowUs();
    move();
    event.durationUs = nowUs() - event.startUs;
    event.stream = 1;
    event.collective = true;
    event.bytesSent = pp.stats().totalSent() - before;
    instructionHook(event);
  };
  for (size_t i = 0; i < step.instructions.size(); ++i) {
    const Instruction &inst = step.instructions[i];
    switch (inst.opcode) {
    case Opcode::PipelineForward: {
      const int64_t m = ops::PipelineForward::decode(inst).microBatch;
      setMicroBatch(firstMicroBatch + m);
      if (first)
        fillBatch(fill, m);
      push(m);
      // The last stage's forward is part of its backward program.
      if (!last)
        runProgram(st.forward);
      break;
    }
    case Opcode::PipelineBackward: {
      const int64_t m = ops::PipelineBackward::decode(inst).microBatch;
      setMicroBatch(firstMicroBatch + m);
      pop(m);
      if (last)
        fillBatch(fill, m);
      runProgram(st.forwardBackward);
      if (last)
        lossSum += readScalar(uint32_t(st.loss));
      break;
    }
    case Opcode::PipelineSend: {
      const ops::PipelineSend send = ops::PipelineSend::decode(inst);
      BufferView x = buffer(inst.inputs[0]);
      timedMessage(i, [&] {
        pp.send(x.data, size_t(x.size()), x.desc->dtype, int(send.peer), kTag);
      });
      break;
    }
    case Opcode::PipelineRecv: {
      const ops::PipelineRecv recv = ops::PipelineRecv::decode(inst);
      BufferView x = buffer(inst.outputs[0]);
      timedMessage(i, [&] {
        pp.recv(x.data, size_t(x.size()), x.desc->dtype, int(recv.peer), kTag);
      });
      break;
    }
    default:
      throw Error("pipeline stage " + std::to_string(k) + "'s step program '" +
                  step.name + "' instruction " + std::to_string(i) + " (" +
                  opcodeName(inst.opcode) +
                  ") is not a pipeline-step "
                  "instruction");
    }
  }

  StepResult r;
  r.hasLoss = last;
  r.loss = last ? lossSum / double(M) : 0.0;
  const bool apply = unscaleOrSkip(r);
  if (apply)
    runProgram(st.optimizer);
  r.gradNorm = apply ? readScalar(uint32_t(st.gradNorm)) : std::nan("");
  r.learningRate = readScalar(uint32_t(st.learningRate));
  r.collectiveBytesSent = collectiveStats().totalSent() - sentBefore;
  if (apply)
    ++currentStep;
  return r;
}
