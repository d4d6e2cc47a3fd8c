//===- Arenas.h - A rank's memory, one allocation per arena -----*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The tiers a plan plans statically: each device or host arena is one
// allocation of the backend's, each nvme arena a file of its own (NvmeStore),
// and one staging area receives a reduce-scatter's chunk or a strided
// all-to-all's blocks (stagingBytesOf). A pipeline rank
// allocates only its own arenas and the shared ones its stages use
// (arenaHolders): another rank's buffers have no memory here. Buffers are addressed through
// here, so nothing else knows where a tier's bytes live, nor which slot of
// its bank (PipelineStage::SlotBank) a kept buffer is in now.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_LIB_RUNTIME_EXEC_ARENAS_H
#define DSC_LIB_RUNTIME_EXEC_ARENAS_H

#include "dsc/Runtime/Backend.h"
#include "dsc/Runtime/NvmeStore.h"
#include "dsc/Runtime/Plan.h"

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

namespace dsc::rt {

/// The staging bytes collective `inst` uses (0: none): a reduce-scatter
/// receives its chunk there, an all-to-all whose blocks are strided
/// (sendOuter or recvOuter > 1) packs or receives numel(x) elements there.
uint64_t stagingBytesOf(const Plan &plan, const Instruction &inst);

class Arenas {
public:
  /// Allocates the memory arenas of `plan` that world rank `worldRank`
  /// holds on `backend` (all but other pipeline ranks' own), opens its
  /// nvme arenas' files (one per rank: `worldRank` names them) and sizes
  /// the staging area for the collective that needs the most
  /// (stagingBytesOf). Throws Error,
  /// with nothing left allocated.
  Arenas(const Plan &plan, Backend &backend, int worldRank);
  /// Releases the memory once the backend's work on it has finished.
  ~Arenas();
  Arenas(const Arenas &) = delete;
  Arenas &operator=(const Arenas &) = delete;

  /// Buffer `id` (Error when the plan has none) and its memory, in its
  /// current slot: null in an nvme arena or another pipeline rank's.
  BufferView view(uint32_t id) const;
  /// Whether this rank holds buffer `id`'s arena.
  bool holds(uint32_t id) const;
  /// Kept buffers `ids` are in slot `slot` of a bank of `stride` bytes
  /// until set again (PipelineStage::SlotBank).
  void setSlot(const std::vector<int64_t> &ids, int64_t slot, uint64_t stride);
  /// Arena `arena`'s memory; null for an nvme arena.
  uint8_t *base(uint32_t arena) const { return memory[arena]; }
  /// The bytes held for `arena` (an nvme arena's: its file's size).
  uint64_t allocatedBytes(uint32_t arena) const;
  /// Arena `arena`'s file, or null (not an nvme arena).
  NvmeStore *nvmeStore(uint32_t arena) const;
  bool hasNvme() const { return !files.empty(); }
  /// Whether a host thread may read and write arena `arena`'s memory:
  /// every arena of a host backend, the host tier of a device backend.
  bool hostReachable(uint32_t arena) const;

  /// Buffer `id`'s bytes to or from host memory, wherever it lives.
  void readBytes(uint32_t id, void *dst) const;
  void writeBytes(uint32_t id, const void *src);
  /// A scalar buffer's value as a double, and back (in its dtype).
  double readScalar(uint32_t id) const;
  void writeScalar(uint32_t id, double value);
  /// Zeroes every arena, and the nvme files when they may hold data.
  void zeroAll();

  /// A reduce-scatter's chunk, a strided all-to-all's blocks (backend
  /// memory).
  uint8_t *staging() const { return stagingArea; }
  uint64_t stagingBytes() const { return stagingSize; }

private:
  void release();

  const Plan &plan;
  Backend &backend;
  std::vector<uint8_t *> memory;
  /// Each buffer's bytes past its offset: its slot times its bank's stride.
  std::vector<uint64_t> displacement;
  std::map<uint32_t, std::unique_ptr<NvmeStore>> files;
  uint8_t *stagingArea = nullptr;
  uint64_t stagingSize = 0;
  /// Whether zeroAll ran before (the files then may hold data).
  bool zeroedOnce = false;
};

} // namespace dsc::rt

#endif // DSC_LIB_RUNTIME_EXEC_ARENAS_H
