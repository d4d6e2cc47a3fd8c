//===- PipelineStep.cpp - One rank's part of a pipelined step -------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The step program's pipeline instructions, one case each, and the slots
// that keep what a later instruction reads.
//
//===----------------------------------------------------------------------===//

#include "PipelineStep.h"

#include "dsc/Runtime/Instructions.h"

#include <deque>
#include <functional>
#include <map>
#include <string>
#include <tuple>

using namespace dsc::rt;

PipelineStep::~PipelineStep() {
  for (auto &[bytes, slot] : slots)
    backend.release(slot);
}

bool PipelineStep::holdsLoss() const {
  const int64_t S = int64_t(plan.stages.size());
  return (S - 1) % plan.pipelineRanks() == mesh.stage();
}

double PipelineStep::run(const TokenFeed::Fill &fill, int64_t firstMicroBatch,
                         double backwardSeed) {
  const int64_t S = int64_t(plan.stages.size());
  const int64_t P = plan.pipelineRanks();
  const int64_t r = mesh.stage();
  const PipelineStage &own = plan.stages[size_t(r)];
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
  if ((S - 1) % P == r && plan.gradientSeed >= 0)
    arenas.writeScalar(uint32_t(plan.gradientSeed), backwardSeed);

  // Slots of backend memory, kept across steps (the buffers, hence their
  // sizes, are the same every step): all free when a step starts.
  std::multimap<size_t, uint8_t *> freeSlots;
  for (auto &[bytes, slot] : slots)
    freeSlots.emplace(bytes, slot);
  auto takeSlot = [&](size_t bytes) {
    auto it = freeSlots.find(bytes);
    if (it != freeSlots.end()) {
      uint8_t *slot = it->second;
      freeSlots.erase(it);
      return slot;
    }
    auto *slot = static_cast<uint8_t *>(backend.allocate(
        bytes, Tier::Device,
        "pipeline stash slot (" + std::to_string(bytes) + " bytes)"));
    slots.emplace_back(bytes, slot);
    return slot;
  };
  auto stageName = [](int64_t stage) {
    return "pipeline stage " + std::to_string(stage);
  };
  // What the backward of each micro-batch in flight reads, per stage,
  // oldest first: the stage input and, when the backward does not compute
  // the forward again, the forward's residuals; zero-bubble, what the
  // activation-gradient part keeps for the weight-gradient part.
  struct Kept {
    int64_t microBatch;
    std::vector<uint8_t *> slots; // in the order of the buffers kept
  };
  using InFlight = std::map<int64_t, std::deque<Kept>>;
  InFlight toBackward, toWeight;
  auto keep = [&](InFlight &inFlight, int64_t stage, int64_t m,
                  const std::vector<int64_t> &ids) {
    Kept kept{m, {}};
    for (int64_t id : ids) {
      BufferView x = arenas.view(uint32_t(id));
      uint8_t *slot = takeSlot(x.desc->bytes);
      backend.copy(slot, x.data, x.desc->bytes);
      kept.slots.push_back(slot);
    }
    inFlight[stage].push_back(std::move(kept));
  };
  auto restore = [&](InFlight &inFlight, int64_t stage, int64_t m,
                     const std::vector<int64_t> &ids, const char *part) {
    // validatePlan checked that each part follows the previous one's
    // micro-batch order.
    auto &queue = inFlight[stage];
    if (queue.empty() || queue.front().microBatch != m)
      throw Error(stageName(stage) + ": the " + part + " of micro-batch " +
                  std::to_string(m) + " has nothing kept for it");
    Kept kept = std::move(queue.front());
    queue.pop_front();
    for (size_t i = 0; i < ids.size(); ++i) {
      BufferView x = arenas.view(uint32_t(ids[i]));
      backend.copy(x.data, kept.slots[i], x.desc->bytes);
      freeSlots.emplace(x.desc->bytes, kept.slots[i]);
    }
  };
  // Per stage, what a forward keeps for its backward: the input, then the
  // residuals (as the forward wrote them and as the backward reads them).
  std::vector<std::vector<int64_t>> keptOut(static_cast<size_t>(S)),
      keptIn(static_cast<size_t>(S));
  for (int64_t k = r; k < S; k += P) {
    const PipelineStage &st = plan.stages[size_t(k)];
    keptOut[size_t(k)] = {st.input};
    keptOut[size_t(k)].insert(keptOut[size_t(k)].end(), st.residualsOut.begin(),
                              st.residualsOut.end());
    keptIn[size_t(k)] = {st.input};
    keptIn[size_t(k)].insert(keptIn[size_t(k)].end(), st.residualsIn.begin(),
                             st.residualsIn.end());
  }
  // Messages received and not yet read: (stage, gradient, micro-batch).
  // The forward or backward that reads one copies it into the stage's
  // buffer, so messages of several stages or micro-batches can wait.
  std::map<std::tuple<int64_t, bool, int64_t>, uint8_t *> received;
  auto deliver = [&](int64_t stage, bool gradient, int64_t m,
                     int64_t bufferId) {
    auto it = received.find({stage, gradient, m});
    if (it == received.end())
      throw Error(stageName(stage) + ": the " +
                  (gradient ? "output's gradient" : "activation") +
                  " of micro-batch " + std::to_string(m) +
                  " was not received before it is read");
    BufferView x = arenas.view(uint32_t(bufferId));
    backend.copy(x.data, it->second, x.desc->bytes);
    freeSlots.emplace(x.desc->bytes, it->second);
    received.erase(it);
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
      const PipelineStage &st = plan.stages[size_t(f.stage)];
      context.setMicroBatch(firstMicroBatch + f.microBatch);
      if (f.stage == 0)
        feed.fill(fill, f.microBatch);
      else
        deliver(f.stage, false, f.microBatch, st.input);
      // The last stage's forward is part of its backward program; another
      // stage's forward also writes the residuals its backward reads.
      if (f.stage != S - 1)
        runner.run(st.forward);
      keep(toBackward, f.stage, f.microBatch, keptOut[size_t(f.stage)]);
      break;
    }
    case Opcode::PipelineBackward: {
      const ops::PipelineBackward b = ops::PipelineBackward::decode(inst);
      const PipelineStage &st = plan.stages[size_t(b.stage)];
      const bool last = b.stage == S - 1;
      context.setMicroBatch(firstMicroBatch + b.microBatch);
      restore(toBackward, b.stage, b.microBatch, keptIn[size_t(b.stage)],
              "backward");
      if (last)
        feed.fill(fill, b.microBatch);
      else
        deliver(b.stage, true, b.microBatch, st.outputGrad);
      runner.run(st.forwardBackward);
      if (last)
        lossSum += arenas.readScalar(uint32_t(st.loss));
      if (!st.backwardWeight.empty())
        keep(toWeight, b.stage, b.microBatch, st.weightStashOut);
      break;
    }
    case Opcode::PipelineBackwardWeight: {
      const ops::PipelineBackwardWeight w =
          ops::PipelineBackwardWeight::decode(inst);
      const PipelineStage &st = plan.stages[size_t(w.stage)];
      context.setMicroBatch(firstMicroBatch + w.microBatch);
      restore(toWeight, w.stage, w.microBatch, st.weightStashIn,
              "weight-gradient part");
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
      const PipelineStage &st = plan.stages[size_t(recv.stage)];
      BufferView x = arenas.view(inst.outputs[0]);
      // The stage's input and output gradient are distinct buffers
      // (validatePlan checked the message is one of them).
      const bool gradient = int64_t(inst.outputs[0]) == st.outputGrad;
      uint8_t *slot = takeSlot(x.desc->bytes);
      timedMessage(i, [&] {
        pp.recv(slot, size_t(x.size()), x.desc->dtype, int(recv.peer), kTag);
      });
      if (!received
               .emplace(std::make_tuple(recv.stage, gradient, recv.microBatch),
                        slot)
               .second)
        throw Error(stageName(recv.stage) + " receives micro-batch " +
                    std::to_string(recv.microBatch) + "'s " +
                    (gradient ? "output's gradient" : "activation") + " twice");
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
