//===- Arenas.cpp - A rank's memory: one allocation per plan arena --------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Allocation, release and byte access of the plan's arenas; the plan was
// validated before any of this runs, so offsets and sizes are trusted.
//
//===----------------------------------------------------------------------===//

#include "Arenas.h"

#include "dsc/Runtime/ArenaHolders.h"

#include "dsc/Runtime/FloatConvert.h"
#include "dsc/Runtime/Instructions.h"

#include <algorithm>
#include <string>

using namespace dsc::rt;

/// Which arenas world rank `worldRank` allocates: its pipeline rank's
/// (arenaHolders: its own, and the shared ones its stages use).
static std::vector<bool> arenasHeldBy(const Plan &plan, int worldRank) {
  const std::vector<std::vector<bool>> holders = arenaHolders(plan);
  const int64_t axis = findMeshAxis(plan.mesh, "pp");
  const size_t r =
      plan.stages.empty() || axis < 0
          ? 0
          : size_t(meshCoordinates(plan.mesh, worldRank)[size_t(axis)]);
  std::vector<bool> held(plan.arenas.size(), false);
  for (size_t a = 0; a < held.size(); ++a)
    held[a] = r < holders[a].size() && holders[a][r];
  return held;
}

uint64_t dsc::rt::stagingBytesOf(const Plan &plan, const Instruction &inst) {
  // The communicators' send and receive buffers must not overlap.
  switch (inst.opcode) {
  case Opcode::ReduceScatter:
  case Opcode::ReduceScatterAccumulate: {
    // A reduce-scatter's chunk is staged outside its input; the largest
    // input bounds it.
    uint64_t bytes = 0;
    for (uint32_t id : inst.inputs)
      bytes = std::max(bytes, plan.buffers[id].bytes);
    return bytes;
  }
  case Opcode::AllToAll: {
    // Strided blocks are packed, or received, contiguously there
    // (Collectives::runAllToAll); contiguous ones go straight between x
    // and y.
    const ops::AllToAll op = ops::AllToAll::decode(inst);
    return op.sendOuter != 1 || op.recvOuter != 1
               ? plan.buffers[inst.inputs[0]].bytes
               : 0;
  }
  default:
    return 0;
  }
}

Arenas::Arenas(const Plan &plan, Backend &backend, int worldRank)
    : plan(plan), backend(backend) {
  memory.assign(plan.arenas.size(), nullptr);
  displacement.assign(plan.buffers.size(), 0);
  const std::vector<bool> held = arenasHeldBy(plan, worldRank);
  try {
    for (size_t a = 0; a < plan.arenas.size(); ++a) {
      const Arena &arena = plan.arenas[a];
      if (arena.tier != Tier::Nvme || !held[a])
        continue;
      if (plan.nvmePath.empty())
        throw Error("the plan keeps " + std::to_string(arena.bytes) +
                    " bytes in the nvme tier (arena " + std::to_string(a) +
                    ") but names no directory for them: compile with "
                    "nvme-path=DIR or run dsc-run with --nvme-path DIR");
      // One file per rank and arena: ranks may share the directory.
      NvmeOptions lane;
      lane.blockBytes = plan.nvmeBlockBytes;
      lane.queueDepth = int(plan.nvmeQueueDepth);
      files[uint32_t(a)] = std::make_unique<NvmeStore>(
          plan.nvmePath,
          "dsc-rank" + std::to_string(worldRank) + "-arena" +
              std::to_string(a) + ".swap",
          arena.bytes, lane);
    }
    for (size_t a = 0; a < plan.arenas.size(); ++a) {
      const Arena &arena = plan.arenas[a];
      if (arena.tier == Tier::Nvme || !held[a])
        continue; // a file (above), or another pipeline rank's
      memory[a] = static_cast<uint8_t *>(backend.allocate(
          arena.bytes, arena.tier,
          "arena " + std::to_string(a) + " (" + tierName(arena.tier) + ", " +
              std::to_string(arena.bytes) + " bytes)"));
    }
    // One staging area for the collective that needs the most.
    for (const Program &prog : plan.programs)
      for (const Instruction &inst : prog.instructions)
        stagingSize = std::max(stagingSize, stagingBytesOf(plan, inst));
    stagingArea = static_cast<uint8_t *>(backend.allocate(
        stagingSize, Tier::Device,
        "collective staging (" + std::to_string(stagingSize) + " bytes)"));
  } catch (...) {
    release();
    throw;
  }
}

Arenas::~Arenas() { release(); }

void Arenas::release() {
  // Collectives or device work may be in flight on these buffers.
  try {
    backend.waitCollectives();
    backend.synchronize();
  } catch (const Error &) {
    // Destruction goes on; the failure was or will be reported elsewhere.
  }
  for (uint8_t *a : memory)
    backend.release(a);
  memory.clear();
  backend.release(stagingArea);
  stagingArea = nullptr;
  files.clear();
}

BufferView Arenas::view(uint32_t id) const {
  if (id >= plan.buffers.size())
    throw Error("buffer " + std::to_string(id) + " does not exist (" +
                std::to_string(plan.buffers.size()) + " buffers)");
  const Buffer &b = plan.buffers[id];
  return {&b, memory[b.arena]
                  ? memory[b.arena] + b.offset + displacement[id]
                  : nullptr};
}

bool Arenas::holds(uint32_t id) const {
  const uint32_t arena = plan.buffers[id].arena;
  return memory[arena] || files.count(arena);
}

void Arenas::setSlot(const std::vector<int64_t> &ids, int64_t slot,
                     uint64_t stride) {
  // validatePlan checked slot < the bank's slots and the bank's bytes.
  for (int64_t id : ids)
    displacement[size_t(id)] = uint64_t(slot) * stride;
}

uint64_t Arenas::allocatedBytes(uint32_t arena) const {
  if (arena >= memory.size())
    throw Error("arena " + std::to_string(arena) + " does not exist (" +
                std::to_string(memory.size()) + " arenas)");
  if (NvmeStore *file = nvmeStore(arena))
    return file->size();
  return memory[arena] ? plan.arenas[arena].bytes : 0;
}

NvmeStore *Arenas::nvmeStore(uint32_t arena) const {
  auto it = files.find(arena);
  return it == files.end() ? nullptr : it->second.get();
}

bool Arenas::hostReachable(uint32_t arena) const {
  return backend.hostAddressable() || plan.arenas[arena].tier == Tier::Host;
}

void Arenas::readBytes(uint32_t id, void *dst) const {
  const Buffer &b = plan.buffers[id];
  if (NvmeStore *file = nvmeStore(b.arena))
    file->read(b.offset, dst, b.bytes);
  else if (void *data = view(id).data)
    backend.copyOut(dst, data, b.bytes);
}

void Arenas::writeBytes(uint32_t id, const void *src) {
  const Buffer &b = plan.buffers[id];
  if (NvmeStore *file = nvmeStore(b.arena))
    file->write(b.offset, src, b.bytes);
  else if (void *data = view(id).data)
    backend.copyIn(data, src, b.bytes);
}

/// Error: buffer `id` has no memory on this rank.
static Error notHeld(const Plan &plan, uint32_t id) {
  const Buffer &b = plan.buffers[id];
  const int64_t owner = plan.arenas[b.arena].pipelineRank;
  return Error("buffer '" + b.name + "' is in arena " +
               std::to_string(b.arena) +
               (owner >= 0 ? " of pipeline rank " + std::to_string(owner)
                           : std::string(" shared by the pipeline ranks "
                                         "whose stages use it")) +
               ", which this rank does not hold");
}

double Arenas::readScalar(uint32_t id) const {
  const Buffer &b = plan.buffers[id];
  void *data = view(id).data;
  if (!data)
    throw notHeld(plan, id);
  uint8_t bytes[8] = {};
  backend.copyOut(bytes, data, std::min<uint64_t>(b.bytes, sizeof bytes));
  return loadAsDouble(bytes, b.dtype, 0);
}

void Arenas::writeScalar(uint32_t id, double value) {
  const Buffer &b = plan.buffers[id];
  void *data = view(id).data;
  if (!data)
    throw notHeld(plan, id);
  uint8_t bytes[8] = {};
  convertFloats(&value, DType::F64, bytes, b.dtype, 1);
  backend.copyIn(data, bytes, std::min<uint64_t>(b.bytes, sizeof bytes));
}

void Arenas::zeroAll() {
  for (size_t a = 0; a < memory.size(); ++a)
    if (memory[a])
      backend.fillZero(memory[a], plan.arenas[a].bytes);
  // The nvme files start as zeros; a second initialize zeroes them again.
  if (zeroedOnce)
    for (auto &[a, file] : files) {
      std::vector<uint8_t> zeros(std::min<uint64_t>(file->size(), 1 << 20));
      for (uint64_t at = 0; at < file->size(); at += zeros.size())
        file->write(at, zeros.data(),
                    std::min<uint64_t>(zeros.size(), file->size() - at));
    }
  zeroedOnce = true;
}
