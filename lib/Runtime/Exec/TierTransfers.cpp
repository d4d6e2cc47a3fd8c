//===- TierTransfers.cpp - Moves between device, host and NVMe ------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Resolving a Transfer's two sides against the arenas, and moving the bytes
// in place or on the NVMe lane, counting them by tier.
//
//===----------------------------------------------------------------------===//

#include "TierTransfers.h"

#include "dsc/Runtime/Instructions.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

using namespace dsc::rt;

namespace {

/// A Transfer instruction's two sides resolved against the arenas: the
/// bytes, where they start in each, and the NVMe file on either side.
struct TransferSides {
  Tier from = Tier::Device, to = Tier::Device;
  uint64_t bytes = 0, xAt = 0, yAt = 0;
  uint32_t xArena = 0, yArena = 0;
  NvmeStore *source = nullptr, *destination = nullptr;
};

/// The sides of Transfer `index` of `prog` (a chunk at this rank's index in
/// its group).
TransferSides resolveTransfer(const Plan &plan, const Program &prog,
                              size_t index, const Arenas &arenas,
                              const MeshGroups &mesh) {
  const Instruction &inst = prog.instructions[index];
  const ops::Transfer move = ops::Transfer::decode(inst);
  const Buffer &x = plan.buffers[inst.inputs[0]];
  const Buffer &y = plan.buffers[inst.outputs[0]];
  TransferSides t;
  t.bytes = std::min(x.bytes, y.bytes);
  t.xAt = x.offset;
  t.yAt = y.offset;
  if (move.chunk != 0)
    (move.chunk == 1 ? t.xAt : t.yAt) +=
        uint64_t(mesh.require(prog, index, move.axes).rank()) * t.bytes;
  t.xArena = x.arena;
  t.yArena = y.arena;
  t.from = plan.arenas[x.arena].tier;
  t.to = plan.arenas[y.arena].tier;
  t.source = arenas.nvmeStore(x.arena);
  t.destination = arenas.nvmeStore(y.arena);
  return t;
}

} // namespace

TierTransfers::TierTransfers(const Plan &plan, Arenas &arenas, Backend &backend,
                             const MeshGroups &mesh)
    : plan(plan), arenas(arenas), backend(backend), mesh(mesh) {
  if (arenas.hasNvme())
    lane = std::make_unique<CommLane>();
}

bool TierTransfers::onLane(const Program &prog, size_t index) const {
  const Instruction &inst = prog.instructions[index];
  if (!lane || inst.opcode != Opcode::Transfer ||
      !arenas.holds(inst.inputs[0]) || !arenas.holds(inst.outputs[0]))
    return false;
  // The memory side must be host memory the lane's thread may touch.
  const Buffer &x = plan.buffers[inst.inputs[0]];
  const Buffer &y = plan.buffers[inst.outputs[0]];
  const bool xFile = arenas.nvmeStore(x.arena) != nullptr;
  const bool yFile = arenas.nvmeStore(y.arena) != nullptr;
  if (xFile == yFile)
    return false;
  return arenas.hostReachable(xFile ? y.arena : x.arena);
}

uint64_t TierTransfers::launch(const Program &prog, size_t index) {
  const TransferSides t = resolveTransfer(plan, prog, index, arenas, mesh);
  // A device backend's kernels issued before (the update of a staged
  // state in pinned memory) finish before the lane reads their bytes.
  backend.synchronize();
  totals.bytes[uint32_t(t.from)][uint32_t(t.to)] += t.bytes;
  double *seconds = &totals.seconds[uint32_t(t.from)][uint32_t(t.to)];
  uint8_t *memory =
      t.source ? arenas.base(t.yArena) + t.yAt : arenas.base(t.xArena) + t.xAt;
  return lane->launch([t, memory, seconds, &prog, index] {
    const auto start = std::chrono::steady_clock::now();
    try {
      if (t.source)
        t.source->read(t.xAt, memory, t.bytes);
      else
        t.destination->write(t.yAt, memory, t.bytes);
    } catch (const Error &e) {
      throw instructionError(prog, index, e.what());
    }
    // Only the lane writes the NVMe directions' seconds while it runs.
    *seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
  });
}

void TierTransfers::wait(uint64_t ticket) {
  if (lane)
    lane->wait(ticket);
}

void TierTransfers::waitAll() {
  if (lane)
    lane->waitAll();
}

void TierTransfers::run(const Program &prog, size_t index) {
  const TransferSides t = resolveTransfer(plan, prog, index, arenas, mesh);
  // What was issued before may still read or write these bytes.
  backend.waitCollectives();
  backend.synchronize();
  const auto start = std::chrono::steady_clock::now();
  uint8_t *x = arenas.base(t.xArena), *y = arenas.base(t.yArena);
  try {
    if (!t.source && !t.destination) {
      if (backend.hostAddressable())
        std::memcpy(y + t.yAt, x + t.xAt, t.bytes);
      else
        backend.copy(y + t.yAt, x + t.xAt, t.bytes);
    } else {
      // One side is a file; the other is memory, read through host memory
      // when the backend's is not (the device tier of a GPU).
      const uint32_t memArena = t.source ? t.yArena : t.xArena;
      uint8_t *memory = t.source ? y + t.yAt : x + t.xAt;
      const bool direct = arenas.hostReachable(memArena);
      std::vector<uint8_t> bounce(direct ? 0 : t.bytes);
      uint8_t *host = direct ? memory : bounce.data();
      if (t.source) {
        t.source->read(t.xAt, host, t.bytes);
        if (!direct)
          backend.copyIn(memory, host, t.bytes);
      } else {
        if (!direct)
          backend.copyOut(host, memory, t.bytes);
        t.destination->write(t.yAt, host, t.bytes);
      }
    }
  } catch (const Error &e) {
    throw instructionError(prog, index, e.what());
  }
  backend.synchronize();
  totals.bytes[uint32_t(t.from)][uint32_t(t.to)] += t.bytes;
  totals.seconds[uint32_t(t.from)][uint32_t(t.to)] +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
}
