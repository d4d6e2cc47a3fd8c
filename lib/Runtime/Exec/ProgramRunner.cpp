//===- ProgramRunner.cpp - Runs a program's instructions in order ---------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The plan's meaning on one rank, instruction by instruction. The plan was
// validated before any of this runs, so the code here trusts shapes and ids.
//
//===----------------------------------------------------------------------===//

#include "ProgramRunner.h"

#include "dsc/Runtime/Instructions.h"

#include <chrono>
#include <utility>
#include <vector>

using namespace dsc::rt;

namespace {
double steadyNs() {
  return double(std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::steady_clock::now().time_since_epoch())
                    .count());
}
} // namespace

ProgramRunner::ProgramRunner(const Plan &plan, Backend &backend, Arenas &arenas,
                             const MeshGroups &mesh, RunContext &context,
                             Collectives &collectives, TierTransfers &tiers)
    : plan(plan), backend(backend), arenas(arenas), mesh(mesh),
      context(context), collectives(collectives), tiers(tiers),
      startNs(steadyNs()) {}

ProgramRunner::~ProgramRunner() {
  try {
    waitForOverlapped();
  } catch (...) {
    // Destruction goes on; a failed update was reported by the step that
    // waited for it, or the run is ending on another error.
  }
}

double ProgramRunner::nowUs() const { return (steadyNs() - startNs) / 1000.0; }

void ProgramRunner::run(const std::string &name) {
  const Program *prog = plan.findProgram(name);
  if (!prog) {
    std::string have;
    for (const Program &p : plan.programs)
      have += (have.empty() ? "'" : ", '") + p.name + "'";
    throw Error("the plan has no program '" + name + "' (it has " +
                (have.empty() ? std::string("none") : have) + ")");
  }
  // Only the next step's forward and backward run beside an overlapped
  // update: it touches host-tier states they do not (the plan verifier
  // checks); everything else may read or write them.
  if (name != "forward_backward")
    waitForOverlapped();
  if (hook) {
    runTimed(*prog);
    return;
  }
  const CollectiveSchedule &schedule = collectives.scheduleOf(*prog);
  // Launched collectives not yet waited for, oldest first, with the bytes
  // they read and write.
  struct InFlight {
    uint64_t ticket;
    const std::vector<ByteRange> *ranges;
  };
  std::vector<InFlight> inFlight;
  auto waitThrough = [&](size_t k) { // waits for inFlight[0..k]
    backend.waitCollective(inFlight[k].ticket);
    inFlight.erase(inFlight.begin(), inFlight.begin() + ptrdiff_t(k) + 1);
  };
  // NVMe reads and writes queued on the NVMe lane, likewise: a swap-in
  // runs beside the update before it (the prefetch the compiler placed).
  std::vector<InFlight> ioInFlight;
  // Waits for the newest NVMe transfer whose bytes `ranges` touch (the
  // lane completes in order).
  auto waitForLane = [&](const std::vector<ByteRange> &ranges) {
    for (size_t k = ioInFlight.size(); k-- > 0;)
      if (overlaps(*ioInFlight[k].ranges, ranges)) {
        tiers.wait(ioInFlight[k].ticket);
        ioInFlight.erase(ioInFlight.begin(),
                         ioInFlight.begin() + ptrdiff_t(k) + 1);
        return;
      }
  };
  auto waitAll = [&] {
    backend.waitCollectives();
    inFlight.clear();
    tiers.waitAll();
    ioInFlight.clear();
  };
  try {
    for (size_t i = 0; i < prog->instructions.size(); ++i) {
      // Collectives hoisted to here go first: their operands are final,
      // once the NVMe lane has written what they read (a fetched chunk).
      for (size_t j : schedule.launchAt[i]) {
        waitForLane(schedule.ranges[j]);
        inFlight.push_back({backend.launchCollective(
                                [this, prog, j] { runInstruction(*prog, j); }),
                            &schedule.ranges[j]});
      }
      const Instruction &inst = prog->instructions[i];
      if (isCollective(inst.opcode))
        continue; // launched above, at or before its place
      if (inst.opcode == Opcode::OverlapNextStep) {
        // The delayed parameter update: the rest runs beside the next
        // step's forward and backward.
        waitAll();
        launchOverlapped(*prog, i + 1);
        return;
      }
      if (schedule.usesCommunicator[i]) {
        // It calls a group itself: nothing else may be on the lane.
        waitAll();
      } else {
        // Wait for the newest launch whose bytes this instruction touches
        // (launches complete in order).
        for (size_t k = inFlight.size(); k-- > 0;)
          if (overlaps(*inFlight[k].ranges, schedule.ranges[i])) {
            waitThrough(k);
            break;
          }
      }
      if (tiers.onLane(*prog, i)) {
        // The lane runs its I/O in order; compute waits below for what
        // it touches.
        ioInFlight.push_back({tiers.launch(*prog, i), &schedule.ranges[i]});
        continue;
      }
      waitForLane(schedule.ranges[i]);
      runInstruction(*prog, i);
    }
    waitAll();
  } catch (...) {
    // The lane's launches were made on every rank alike: let them finish
    // (or fail) before the arenas they use may go.
    try {
      backend.waitCollectives();
    } catch (...) {
    }
    try {
      tiers.waitAll();
    } catch (...) {
    }
    throw;
  }
}

void ProgramRunner::launchOverlapped(const Program &prog, size_t from) {
  waitForOverlapped();
  // A device backend's instructions share its stream and its pinned
  // scalar slots (the learning rate is read through them): there the
  // update runs in order (the same numerics, no overlap).
  if (!backend.hostAddressable()) {
    for (size_t i = from; i < prog.instructions.size(); ++i)
      runInstruction(prog, i);
    return;
  }
  const int64_t stepOfUpdate = context.step();
  overlapped = std::thread([this, &prog, from, stepOfUpdate] {
    RunContext::setThreadStep(stepOfUpdate);
    try {
      for (size_t i = from; i < prog.instructions.size(); ++i)
        runInstruction(prog, i);
      backend.synchronize();
    } catch (...) {
      overlappedError = std::current_exception();
    }
    RunContext::setThreadStep(0);
  });
}

void ProgramRunner::waitForOverlapped() {
  if (overlapped.joinable())
    overlapped.join();
  if (std::exception_ptr error = std::exchange(overlappedError, nullptr))
    std::rethrow_exception(error);
}

void ProgramRunner::runTimed(const Program &prog) {
  // One instruction at a time, each timed to its completion.
  for (size_t i = 0; i < prog.instructions.size(); ++i) {
    const Instruction &inst = prog.instructions[i];
    Communicator *comm =
        isCollective(inst.opcode) ? mesh.group(groupAxesOf(inst)) : nullptr;
    uint64_t sentBefore = comm ? comm->stats().totalSent() : 0;
    backend.synchronize();
    double t0 = nowUs();
    if (comm)
      backend.waitCollective(
          backend.launchCollective([&] { runInstruction(prog, i); }));
    else
      runInstruction(prog, i);
    backend.synchronize();
    double t1 = nowUs();
    InstructionEvent event{&prog, i, &inst, t0, t1 - t0, 0};
    if (comm) {
      event.stream = 1;
      event.collective = true;
      event.bytesSent = comm->stats().totalSent() - sentBefore;
    }
    hook(event);
  }
}

void ProgramRunner::runInstruction(const Program &prog, size_t index) {
  const Instruction &inst = prog.instructions[index];
  switch (inst.opcode) {
  case Opcode::AllReduce:
    collectives.runAllReduce(prog, index);
    return;
  case Opcode::AllGather:
  case Opcode::GatherParameter:
  case Opcode::GatherChunks:
    collectives.runAllGather(prog, index);
    return;
  case Opcode::ReduceScatter:
  case Opcode::ReduceScatterAccumulate:
  case Opcode::ReduceScatterChunks:
    collectives.runReduceScatter(prog, index);
    return;
  case Opcode::AllToAll:
    collectives.runAllToAll(prog, index);
    return;
  case Opcode::CompressedAllReduce:
    collectives.runCompressedAllReduce(prog, index);
    return;
  case Opcode::PipelineForward:
  case Opcode::PipelineBackward:
  case Opcode::PipelineBackwardWeight:
  case Opcode::PipelineSend:
  case Opcode::PipelineRecv:
    throw instructionError(prog, index,
                           "a pipeline stage's step runs in trainStep, "
                           "not as a program");
  case Opcode::Transfer:
    // The initialize program fills every pipeline rank's copies; each rank
    // its own (validatePlan: both ends are one rank's).
    if (arenas.holds(inst.inputs[0]) && arenas.holds(inst.outputs[0]))
      tiers.run(prog, index);
    return;
  case Opcode::OverlapNextStep:
    // Run in order (a traced run times each instruction): nothing to do.
    return;
  case Opcode::Zero:
    for (uint32_t id : inst.outputs) {
      BufferView v = arenas.view(id);
      if (v.data)
        backend.fillZero(v.data, v.desc->bytes);
    }
    return;
  default:
    backend.run(context, prog, index);
  }
}
