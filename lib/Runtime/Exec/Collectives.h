//===- Collectives.h - The plan's collectives and their lane ----*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The communication lane's schedule and its calls: where each collective of
// a program may be launched beside compute (as early as the bytes it touches
// allow, in program order on every rank), and each collective run over its
// group (AllReduce in buckets of contiguous buffers, the gathers, the
// reduce-scatters and the strided all-to-alls through the staging area).
//
//===----------------------------------------------------------------------===//

#ifndef DSC_LIB_RUNTIME_EXEC_COLLECTIVES_H
#define DSC_LIB_RUNTIME_EXEC_COLLECTIVES_H

#include "Arenas.h"
#include "MeshGroups.h"

#include <cstdint>
#include <map>
#include <vector>

namespace dsc::rt {

/// Bytes [begin, end) of an arena (-1: the collectives' staging area).
struct ByteRange {
  int64_t arena;
  uint64_t begin, end;
};
/// Whether any range of `a` shares a byte with one of `b`.
bool overlaps(const std::vector<ByteRange> &a, const std::vector<ByteRange> &b);

/// Where a program's collectives are launched, and what its instructions
/// touch.
struct CollectiveSchedule {
  /// The collectives to launch before instruction i.
  std::vector<std::vector<size_t>> launchAt;
  /// Whether instruction i calls a group inside its kernel.
  std::vector<bool> usesCommunicator;
  std::vector<std::vector<ByteRange>> ranges;
};

class Collectives {
public:
  Collectives(const Plan &plan, const Arenas &arenas, Backend &backend,
              const MeshGroups &mesh)
      : plan(plan), arenas(arenas), backend(backend), mesh(mesh) {}

  /// Launch collectives early, beside compute, when `on` and every group
  /// may be called from the backend's lane; returns whether they are.
  bool setOverlap(bool on);
  bool overlapping() const { return overlap; }
  /// `prog`'s schedule (computed once per program and overlap setting).
  const CollectiveSchedule &scheduleOf(const Program &prog);
  /// Collective instruction `index` of `prog` over its group: AllReduce;
  /// AllGather, GatherParameter, GatherChunks; the ReduceScatter family;
  /// AllToAll.
  void runAllReduce(const Program &prog, size_t index);
  void runAllGather(const Program &prog, size_t index);
  void runReduceScatter(const Program &prog, size_t index);
  void runAllToAll(const Program &prog, size_t index);
  /// 1-bit Adam's compressed all-reduce (host memory: the CPU backend).
  void runCompressedAllReduce(const Program &prog, size_t index);

private:
  /// Buffer `id`'s memory where it is now (its slot, when kept).
  uint8_t *address(uint32_t id) const {
    return static_cast<uint8_t *>(arenas.view(id).data);
  }

  std::vector<ByteRange> rangesOf(const Instruction &inst) const;

  const Plan &plan;
  const Arenas &arenas;
  Backend &backend;
  const MeshGroups &mesh;
  bool overlap = false;
  std::map<const Program *, CollectiveSchedule> schedules;
};

} // namespace dsc::rt

#endif // DSC_LIB_RUNTIME_EXEC_COLLECTIVES_H
