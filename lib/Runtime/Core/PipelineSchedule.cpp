//===- PipelineSchedule.cpp - a pipelined training step ---------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// One rank's part of a pipelined step: its stage's forwards and backwards in
// the plan's schedule, with the activations and their gradients exchanged
// with the neighbouring stages over the pp group. The programs are pure
// compute; the point-to-point messages are the schedule's, because the
// deadlock-free order (Megatron-LM's combined send-and-receive in the
// steady state) pairs a forward's send with a backward's receive.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/Executor.h"

#include <algorithm>
#include <deque>

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
  auto view = [&](int64_t id) {
    return id >= 0 ? buffer(uint32_t(id)) : BufferView{};
  };
  BufferView output = view(st.output), outputGrad = view(st.outputGrad),
             inputGrad = view(st.inputGrad);
  // Every message is one boundary activation or its gradient, which share
  // the activation's dtype and size (validatePlan checked both ends).
  const DType dtype = !last ? output.desc->dtype : input.desc->dtype;
  const size_t actCount =
      size_t(!last ? output.size() : (first ? 0 : input.size()));
  const int prev = int(k) - 1, next = int(k) + 1;
  constexpr int kTag = 0; // direction tells activations from gradients

  auto recvForward = [&] {
    if (!first)
      pp.recv(input.data, actCount, dtype, prev, kTag);
  };
  auto sendForward = [&] {
    if (!last)
      pp.send(output.data, actCount, dtype, next, kTag);
  };
  auto recvBackward = [&] {
    if (!last)
      pp.recv(outputGrad.data, actCount, dtype, next, kTag);
  };
  auto sendBackward = [&] {
    if (!first)
      pp.send(inputGrad.data, actCount, dtype, prev, kTag);
  };
  // Megatron-LM's send_forward_recv_backward and send_backward_recv_forward:
  // a blocking send followed by a blocking receive would deadlock when the
  // neighbour does the same in the other direction.
  auto sendForwardRecvBackward = [&] {
    if (!last)
      pp.sendRecv(output.data, actCount, next, outputGrad.data, actCount, next,
                  dtype, kTag);
  };
  auto sendBackwardRecvForward = [&] {
    if (!first)
      pp.sendRecv(inputGrad.data, actCount, prev, input.data, actCount, prev,
                  dtype, kTag);
  };

  // Stage inputs of the micro-batches whose backward has not run, oldest
  // first: the backward recomputes the stage's forward from its input.
  const size_t inputBytes = input.desc->bytes;
  std::deque<size_t> inFlight; // indices into `stash`
  std::vector<size_t> freeSlots;
  for (size_t i = 0; i < stash.size(); ++i)
    freeSlots.push_back(i);
  // Slots are the backend's memory, kept across steps (the input buffer,
  // hence its size, is the same every step).
  auto push = [&] {
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
    inFlight.push_back(slot);
  };
  auto pop = [&] {
    size_t slot = inFlight.front();
    inFlight.pop_front();
    backendImpl->copy(input.data, stash[slot], inputBytes);
    freeSlots.push_back(slot);
  };

  int64_t forwards = 0, backwards = 0;
  double lossSum = 0;
  // Dropout numbers the micro-batches across data-parallel ranks.
  const int64_t firstMicroBatch = firstMicroBatchOfRank(M);
  // The stage input is in `input` (received, or filled here on stage 0).
  auto forwardStep = [&] {
    const int64_t m = forwards++;
    setMicroBatch(firstMicroBatch + m);
    if (first)
      fillBatch(fill, m);
    push();
    // The last stage's forward is part of its backward program.
    if (!last)
      runProgram(st.forward);
  };
  auto backwardStep = [&] {
    const int64_t m = backwards++;
    setMicroBatch(firstMicroBatch + m);
    pop();
    if (last)
      fillBatch(fill, m);
    runProgram(st.forwardBackward);
    if (last)
      lossSum += readScalar(uint32_t(st.loss));
  };

  const uint64_t sentBefore = collectiveStats().totalSent();
  const int64_t warmup =
      thePlan.schedule == PipelineSchedule::GPipe ? M : std::min(P - k - 1, M);
  const int64_t remaining = M - warmup;
  for (int64_t i = 0; i < warmup; ++i) {
    recvForward();
    forwardStep();
    sendForward();
  }
  if (remaining > 0)
    recvForward();
  for (int64_t i = 0; i < remaining; ++i) {
    forwardStep();
    sendForwardRecvBackward();
    backwardStep();
    if (i == remaining - 1)
      sendBackward();
    else
      sendBackwardRecvForward();
  }
  for (int64_t i = 0; i < warmup; ++i) {
    recvBackward();
    backwardStep();
    sendBackward();
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
