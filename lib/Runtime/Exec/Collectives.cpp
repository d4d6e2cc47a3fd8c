//===- Collectives.cpp - The plan's collectives and their lane ------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Launch points and the collectives' calls; the plan was validated before
// any of this runs, so buffers, groups and chunk sizes are trusted.
//
//===----------------------------------------------------------------------===//

#include "Collectives.h"

#include "dsc/Runtime/CompressedAllReduce.h"

#include "dsc/Runtime/Instructions.h"

#include <algorithm>
#include <string>
#include <vector>

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

std::vector<ByteRange> Collectives::rangesOf(const Instruction &inst) const {
  std::vector<ByteRange> ranges;
  auto add = [&](uint32_t id) {
    const Buffer &b = plan.buffers[id];
    if (b.bytes)
      ranges.push_back({int64_t(b.arena), b.offset, b.offset + b.bytes});
  };
  for (uint32_t id : inst.inputs)
    add(id);
  for (uint32_t id : inst.outputs)
    add(id);
  // A reduce-scatter, a strided all-to-all also write the staging area
  // (arena -1).
  if (stagingBytesOf(plan, inst))
    ranges.push_back({-1, 0, arenas.stagingBytes()});
  return ranges;
}

bool dsc::rt::overlaps(const std::vector<ByteRange> &a,
                       const std::vector<ByteRange> &b) {
  for (const ByteRange &x : a)
    for (const ByteRange &y : b)
      if (x.arena == y.arena && x.begin < y.end && y.begin < x.end)
        return true;
  return false;
}

const CollectiveSchedule &Collectives::scheduleOf(const Program &prog) {
  auto it = schedules.find(&prog);
  if (it != schedules.end())
    return it->second;
  const size_t n = prog.instructions.size();
  CollectiveSchedule s;
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
  return schedules.emplace(&prog, std::move(s)).first->second;
}

bool Collectives::setOverlap(bool on) {
  overlap = on && mesh.callableFromAnyThread();
  backend.setOverlap(overlap);
  schedules.clear();
  return overlap;
}

void Collectives::runAllReduce(const Program &prog, size_t index) {
  const Instruction &inst = prog.instructions[index];
  Communicator *comm = &mesh.require(prog, index, groupAxesOf(inst));
  const ReduceOp op = reduceOf(inst);
  auto fail = [&](const std::string &msg) {
    throw instructionError(prog, index, msg);
  };
  // Runs of buffers contiguous in one arena, in operand order, are one
  // bucket and one call.
  const std::vector<uint32_t> &ids = inst.inputs;
  for (size_t i = 0; i < ids.size();) {
    const Buffer &first = plan.buffers[ids[i]];
    uint8_t *start = address(ids[i]);
    uint64_t bytes = first.bytes;
    size_t j = i + 1;
    for (; j < ids.size(); ++j) {
      const Buffer &next = plan.buffers[ids[j]];
      if (next.arena != first.arena || address(ids[j]) != start + bytes ||
          next.dtype != first.dtype)
        break;
      bytes += next.bytes;
    }
    if (bytes) {
      try {
        comm->allReduce(start, size_t(bytes / dtypeSize(first.dtype)),
                        first.dtype, op);
      } catch (const Error &e) {
        fail(e.what());
      }
    }
    i = j;
  }
}

void Collectives::runAllGather(const Program &prog, size_t index) {
  const Instruction &inst = prog.instructions[index];
  Communicator *comm = &mesh.require(prog, index, groupAxesOf(inst));
  auto fail = [&](const std::string &msg) {
    throw instructionError(prog, index, msg);
  };
  if (inst.opcode == Opcode::GatherParameter ||
      inst.opcode == Opcode::GatherChunks) {
    // ZeRO-3: the parameter's chunk into a separate temporary; the chunk
    // itself stays, since the optimizer updates it in place. Sequence
    // parallelism: the rank's tokens into the whole sequence.
    const Buffer &chunk = plan.buffers[inst.inputs[0]];
    try {
      comm->allGather(address(inst.inputs[0]), address(inst.outputs[0]),
                      size_t(numElements(chunk.shape)), chunk.dtype);
    } catch (const Error &e) {
      fail(e.what());
    }
    return;
  }
  // Each buffer gathers in place: this rank's chunk is already where the
  // gathered buffer wants it (the send block aliases its block of recv).
  for (uint32_t id : inst.inputs) {
    const Buffer &b = plan.buffers[id];
    const size_t chunk = size_t(numElements(b.shape)) / size_t(comm->size());
    uint8_t *base = address(id);
    try {
      comm->allGather(base + chunk * dtypeSize(b.dtype) * comm->rank(), base,
                      chunk, b.dtype);
    } catch (const Error &e) {
      fail(e.what());
    }
  }
}

void Collectives::runReduceScatter(const Program &prog, size_t index) {
  const Instruction &inst = prog.instructions[index];
  Communicator *comm = &mesh.require(prog, index, groupAxesOf(inst));
  auto fail = [&](const std::string &msg) {
    throw instructionError(prog, index, msg);
  };
  const ReduceOp op = reduceOf(inst);
  // The communicator's send and receive buffers must not overlap: receive
  // this rank's chunk into the staging area, then put it in place.
  if (inst.opcode == Opcode::ReduceScatterChunks) {
    // Sequence parallelism: the group's partial sums reduced, this rank's
    // tokens into their own buffer (send and receive do not overlap).
    const Buffer &x = plan.buffers[inst.inputs[0]];
    const Buffer &y = plan.buffers[inst.outputs[0]];
    try {
      comm->reduceScatter(address(inst.inputs[0]), address(inst.outputs[0]),
                          size_t(numElements(y.shape)), x.dtype, op);
    } catch (const Error &e) {
      fail(e.what());
    }
    return;
  }
  if (inst.opcode == Opcode::ReduceScatterAccumulate) {
    // ZeRO-2: reduce the micro-batch's gradient and add this rank's chunk
    // into its shard-sized accumulator.
    const Buffer &x = plan.buffers[inst.inputs[0]];
    const Buffer &shard = plan.buffers[inst.outputs[0]];
    const size_t chunk = size_t(numElements(shard.shape));
    try {
      comm->reduceScatter(address(inst.inputs[0]), arenas.staging(), chunk,
                          x.dtype, op);
    } catch (const Error &e) {
      fail(e.what());
    }
    backend.accumulate(x.dtype, address(inst.outputs[0]), arenas.staging(),
                       int64_t(chunk));
    return;
  }
  for (uint32_t id : inst.inputs) {
    const Buffer &b = plan.buffers[id];
    const size_t chunk = size_t(numElements(b.shape)) / size_t(comm->size());
    const size_t chunkBytes = chunk * dtypeSize(b.dtype);
    uint8_t *base = address(id);
    try {
      comm->reduceScatter(base, arenas.staging(), chunk, b.dtype, op);
    } catch (const Error &e) {
      fail(e.what());
    }
    backend.copy(base + chunkBytes * comm->rank(), arenas.staging(),
                 chunkBytes);
  }
}

void Collectives::runAllToAll(const Program &prog, size_t index) {
  const Instruction &inst = prog.instructions[index];
  const ops::AllToAll op = ops::AllToAll::decode(inst);
  Communicator *comm = &mesh.require(prog, index, op.axes);
  auto fail = [&](const std::string &msg) {
    throw instructionError(prog, index, msg);
  };
  const Buffer &xb = plan.buffers[inst.inputs[0]];
  const DType dtype = xb.dtype;
  const uint64_t esize = dtypeSize(dtype);
  const uint64_t n = uint64_t(numElements(xb.shape));
  const uint64_t d = uint64_t(comm->size());
  const uint64_t sendOuter = uint64_t(op.sendOuter);
  const uint64_t recvOuter = uint64_t(op.recvOuter);
  // Block j is rank j's (n/d elements): x[:, j, :] of [sendOuter, d, .],
  // y[:, j, :] of [recvOuter, d, .], a run of n/(outer*d) elements per
  // outer index.
  const uint64_t blockBytes = n / d * esize;
  const uint64_t sendRun = n / (sendOuter * d) * esize;
  const uint64_t recvRun = n / (recvOuter * d) * esize;
  uint8_t *x = address(inst.inputs[0]);
  uint8_t *y = address(inst.outputs[0]);
  uint8_t *staging = arenas.staging();
  // Strided sends are packed block after block: into the staging area when
  // the receive lands straight in y, else into y itself (the output, which
  // x does not overlap), received into the staging area and unpacked back
  // into y once every rank has its block.
  const bool pack = sendOuter != 1, unpack = recvOuter != 1;
  const uint8_t *send = x;
  if (pack) {
    uint8_t *packed = unpack ? y : staging;
    for (uint64_t j = 0; j < d; ++j)
      for (uint64_t o = 0; o < sendOuter; ++o)
        backend.copy(packed + j * blockBytes + o * sendRun,
                     x + (o * d + j) * sendRun, sendRun);
    send = packed;
  }
  uint8_t *recv = unpack ? staging : y;
  try {
    comm->allToAll(send, recv, size_t(n / d), dtype);
  } catch (const Error &e) {
    fail(e.what());
  }
  if (unpack)
    for (uint64_t j = 0; j < d; ++j)
      for (uint64_t o = 0; o < recvOuter; ++o)
        backend.copy(y + (o * d + j) * recvRun,
                     staging + j * blockBytes + o * recvRun, recvRun);
  if (op.scale != 1.0)
    backend.scale(dtype, y, int64_t(n), op.scale);
}

void Collectives::runCompressedAllReduce(const Program &prog, size_t index) {
  const Instruction &inst = prog.instructions[index];
  const ops::CompressedAllReduce op = ops::CompressedAllReduce::decode(inst);
  Communicator *comm = &mesh.require(prog, index, op.axes);
  // The plan verifier checked the errors' padded sizes and the f32 dtype;
  // the arenas are host memory (the CUDA backend refuses the opcode).
  auto data = [&](size_t i) {
    return reinterpret_cast<float *>(address(inst.outputs[i]));
  };
  auto count = [&](size_t i) {
    return numElements(plan.buffers[inst.outputs[i]].shape);
  };
  try {
    if (inst.outputs.size() == 3) {
      compressedAllReduceUnpadded(*comm, data(2), count(2), data(0), data(1));
      return;
    }
    // A bucket of several states, compressed as one vector.
    int64_t total = 0;
    for (size_t i = 2; i < inst.outputs.size(); ++i)
      total += count(i);
    std::vector<float> bucket(
        size_t(onebitPaddedSize(total, int64_t(comm->size()))), 0.0f);
    int64_t at = 0;
    for (size_t i = 2; i < inst.outputs.size(); at += count(i), ++i)
      std::copy(data(i), data(i) + count(i), bucket.data() + at);
    compressedAllReduce(*comm, bucket.data(), data(0), data(1),
                        int64_t(bucket.size()));
    at = 0;
    for (size_t i = 2; i < inst.outputs.size(); at += count(i), ++i)
      std::copy(bucket.data() + at, bucket.data() + at + count(i), data(i));
  } catch (const Error &e) {
    throw instructionError(prog, index, e.what());
  }
}
