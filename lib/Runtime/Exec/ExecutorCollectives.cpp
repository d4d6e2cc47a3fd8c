//===- ExecutorCollectives.cpp - Collectives over the plan's mesh ---------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The executor's collective engine: where each collective of a program may
// be launched ahead of compute (by the arena bytes instructions touch), the
// group of an instruction's mesh axes, and the in-place all-reduce (buckets
// of contiguous buffers), all-gather and reduce-scatter of ZeRO.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/Executor.h"

#include "dsc/Runtime/Backend.h"
#include "dsc/Runtime/CpuKernels.h"
#include "dsc/Runtime/FloatConvert.h"
#include "dsc/Runtime/InstructionArgs.h"
#include "dsc/Runtime/PlanIO.h"
#include "dsc/Runtime/ShardLayout.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>
#include <set>

using namespace dsc::rt;

namespace {

/// The reduction of a collective that reduces.
ReduceOp reduceOf(const Instruction &inst) {
  switch (inst.opcode) {
  case Opcode::AllReduce:
    return ReduceOp(ops::AllReduce::decode(inst).reduce);
  case Opcode::ReduceScatter:
    return ReduceOp(ops::ReduceScatter::decode(inst).reduce);
  case Opcode::ReduceScatterChunks:
    return ReduceOp(ops::ReduceScatterChunks::decode(inst).reduce);
  default:
    return ReduceOp(ops::ReduceScatterAccumulate::decode(inst).reduce);
  }
}

} // namespace

std::vector<Executor::ByteRange>
Executor::rangesOf(const Instruction &inst) const {
  std::vector<ByteRange> ranges;
  auto add = [&](uint32_t id) {
    const Buffer &b = thePlan.buffers[id];
    if (b.bytes)
      ranges.push_back({int64_t(b.arena), b.offset, b.offset + b.bytes});
  };
  for (uint32_t id : inst.inputs)
    add(id);
  for (uint32_t id : inst.outputs)
    add(id);
  // A reduce-scatter also writes the staging area (arena -1).
  if (inst.opcode == Opcode::ReduceScatter ||
      inst.opcode == Opcode::ReduceScatterAccumulate)
    ranges.push_back({-1, 0, stagingSize});
  return ranges;
}

bool Executor::overlaps(const std::vector<ByteRange> &a,
                        const std::vector<ByteRange> &b) {
  for (const ByteRange &x : a)
    for (const ByteRange &y : b)
      if (x.arena == y.arena && x.begin < y.end && y.begin < x.end)
        return true;
  return false;
}

const Executor::CommSchedule &Executor::commScheduleOf(const Program &prog) {
  auto it = commSchedules.find(&prog);
  if (it != commSchedules.end())
    return it->second;
  const size_t n = prog.instructions.size();
  CommSchedule s;
  s.launchAt.assign(n, {});
  s.usesCommunicator.assign(n, false);
  s.ranges.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const Instruction &inst = prog.instructions[i];
    s.ranges[i] = rangesOf(inst);
    // Ops that call a group from inside their kernel.
    s.usesCommunicator[i] = isVocabParallel(inst.opcode) ||
                            inst.opcode == Opcode::GlobalNormClipParts;
  }
  // Each collective is launched as early as it can be: after the last
  // compute instruction before it that touches its bytes or calls a
  // communicator, and not before the collective before it was launched
  // (the lane runs launches in order, so every group sees its collectives
  // in program order on every rank). All ranks compute the same points
  // from the same plan.
  size_t previousLaunch = 0;
  for (size_t j = 0; j < n; ++j) {
    if (!isCollective(prog.instructions[j].opcode))
      continue;
    size_t at = j;
    if (overlap)
      while (at > previousLaunch) {
        const size_t p = at - 1;
        // An earlier collective is on the lane before this one: only
        // compute can conflict.
        if (!isCollective(prog.instructions[p].opcode) &&
            (s.usesCommunicator[p] || overlaps(s.ranges[p], s.ranges[j])))
          break;
        at = p;
      }
    s.launchAt[at].push_back(j);
    previousLaunch = at;
  }
  return commSchedules.emplace(&prog, std::move(s)).first->second;
}

std::vector<std::pair<size_t, size_t>>
Executor::collectiveLaunchPoints(const std::string &name) {
  const Program *prog = thePlan.findProgram(name);
  if (!prog)
    throw Error("the plan has no program '" + name + "'");
  const CommSchedule &s = commScheduleOf(*prog);
  std::vector<std::pair<size_t, size_t>> points;
  for (size_t at = 0; at < s.launchAt.size(); ++at)
    for (size_t j : s.launchAt[at])
      points.push_back({j, at});
  return points;
}

void Executor::setOverlapCommunication(bool on) {
  // Only where every group may be called from the backend's lane (MPI
  // initialized for one thread only may not).
  bool can = on && worldComm && !groups.empty();
  for (const auto &[mask, comm] : groups)
    can = can && comm->callableFromAnyThread();
  overlap = can;
  backendImpl->setOverlap(overlap);
  commSchedules.clear();
}

Communicator &Executor::requireGroup(const Program &prog, size_t index,
                                     int64_t axes) const {
  Communicator *comm = group(axes);
  if (!comm)
    failAt(prog, index, "no group for mesh axes mask " + std::to_string(axes));
  return *comm;
}

void Executor::runAllReduce(const Program &prog, size_t index) {
  const Instruction &inst = prog.instructions[index];
  Communicator *comm = &requireGroup(prog, index, groupAxesOf(inst));
  const ReduceOp op = reduceOf(inst);
  auto fail = [&](const std::string &msg) { failAt(prog, index, msg); };
  // Runs of buffers contiguous in one arena, in operand order, are one
  // bucket and one call.
  const std::vector<uint32_t> &ids = inst.inputs;
  for (size_t i = 0; i < ids.size();) {
    const Buffer &first = thePlan.buffers[ids[i]];
    uint64_t end = first.offset + first.bytes;
    size_t j = i + 1;
    for (; j < ids.size(); ++j) {
      const Buffer &next = thePlan.buffers[ids[j]];
      if (next.arena != first.arena || next.offset != end ||
          next.dtype != first.dtype)
        break;
      end += next.bytes;
    }
    const uint64_t bytes = end - first.offset;
    if (bytes) {
      try {
        comm->allReduce(arenas[first.arena] + first.offset,
                        size_t(bytes / dtypeSize(first.dtype)), first.dtype,
                        op);
      } catch (const Error &e) {
        fail(e.what());
      }
    }
    i = j;
  }
}

void Executor::runAllGather(const Program &prog, size_t index) {
  const Instruction &inst = prog.instructions[index];
  Communicator *comm = &requireGroup(prog, index, groupAxesOf(inst));
  auto fail = [&](const std::string &msg) { failAt(prog, index, msg); };
  if (inst.opcode == Opcode::GatherParameter ||
      inst.opcode == Opcode::GatherChunks) {
    // ZeRO-3: the parameter's chunk into a separate temporary; the chunk
    // itself stays, since the optimizer updates it in place. Sequence
    // parallelism: the rank's tokens into the whole sequence.
    const Buffer &chunk = thePlan.buffers[inst.inputs[0]];
    const Buffer &whole = thePlan.buffers[inst.outputs[0]];
    try {
      comm->allGather(arenas[chunk.arena] + chunk.offset,
                      arenas[whole.arena] + whole.offset,
                      size_t(numElements(chunk.shape)), chunk.dtype);
    } catch (const Error &e) {
      fail(e.what());
    }
    return;
  }
  // Each buffer gathers in place: this rank's chunk is already where the
  // gathered buffer wants it (the send block aliases its block of recv).
  for (uint32_t id : inst.inputs) {
    const Buffer &b = thePlan.buffers[id];
    const size_t chunk = size_t(numElements(b.shape)) / size_t(comm->size());
    uint8_t *base = arenas[b.arena] + b.offset;
    try {
      comm->allGather(base + chunk * dtypeSize(b.dtype) * comm->rank(), base,
                      chunk, b.dtype);
    } catch (const Error &e) {
      fail(e.what());
    }
  }
}

void Executor::runReduceScatter(const Program &prog, size_t index) {
  const Instruction &inst = prog.instructions[index];
  Communicator *comm = &requireGroup(prog, index, groupAxesOf(inst));
  auto fail = [&](const std::string &msg) { failAt(prog, index, msg); };
  const ReduceOp op = reduceOf(inst);
  // The communicator's send and receive buffers must not overlap: receive
  // this rank's chunk into the staging area, then put it in place.
  if (inst.opcode == Opcode::ReduceScatterChunks) {
    // Sequence parallelism: the group's partial sums reduced, this rank's
    // tokens into their own buffer (send and receive do not overlap).
    const Buffer &x = thePlan.buffers[inst.inputs[0]];
    const Buffer &y = thePlan.buffers[inst.outputs[0]];
    try {
      comm->reduceScatter(arenas[x.arena] + x.offset,
                          arenas[y.arena] + y.offset,
                          size_t(numElements(y.shape)), x.dtype, op);
    } catch (const Error &e) {
      fail(e.what());
    }
    return;
  }
  if (inst.opcode == Opcode::ReduceScatterAccumulate) {
    // ZeRO-2: reduce the micro-batch's gradient and add this rank's chunk
    // into its shard-sized accumulator.
    const Buffer &x = thePlan.buffers[inst.inputs[0]];
    const Buffer &shard = thePlan.buffers[inst.outputs[0]];
    const size_t chunk = size_t(numElements(shard.shape));
    try {
      comm->reduceScatter(arenas[x.arena] + x.offset, staging, chunk, x.dtype,
                          op);
    } catch (const Error &e) {
      fail(e.what());
    }
    backendImpl->accumulate(x.dtype, arenas[shard.arena] + shard.offset,
                            staging, int64_t(chunk));
    return;
  }
  for (uint32_t id : inst.inputs) {
    const Buffer &b = thePlan.buffers[id];
    const size_t chunk = size_t(numElements(b.shape)) / size_t(comm->size());
    const size_t chunkBytes = chunk * dtypeSize(b.dtype);
    uint8_t *base = arenas[b.arena] + b.offset;
    try {
      comm->reduceScatter(base, staging, chunk, b.dtype, op);
    } catch (const Error &e) {
      fail(e.what());
    }
    backendImpl->copy(base + chunkBytes * comm->rank(), staging, chunkBytes);
  }
}
