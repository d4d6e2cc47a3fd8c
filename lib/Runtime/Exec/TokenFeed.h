//===- TokenFeed.h - Ids into tokens and targets ----------------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// How a batch reaches the well-known tokens and targets buffers: written in
// place on a host backend; on a device backend through host mirrors, with
// the ids checked against the vocabulary on the host so the error names the
// position without a wait.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_LIB_RUNTIME_EXEC_TOKENFEED_H
#define DSC_LIB_RUNTIME_EXEC_TOKENFEED_H

#include "Arenas.h"

#include <cstdint>
#include <functional>
#include <vector>

namespace dsc::rt {

class TokenFeed {
public:
  using Fill = std::function<void(int64_t, int32_t *, int32_t *)>;

  TokenFeed(const Plan &plan, Backend &backend, Arenas &arenas)
      : plan(plan), backend(backend), arenas(arenas) {}

  /// Copies `count` ids into buffer `id` (the tokens or targets); `what`
  /// names the call in errors ("Tokens").
  void set(uint32_t id, const int32_t *data, size_t count, const char *what);
  /// Buffer `id` itself, on a host-addressable backend (else Error).
  int32_t *hostView(uint32_t id);
  /// Calls `fill` for micro-batch `microBatchInStep` on the buffers (host
  /// memory) or on their mirrors, then copied in (device memory).
  void fill(const Fill &fill, int64_t microBatchInStep);
  /// The same for a curriculum's `length` shorter than the plan's: `fill`
  /// writes whole samples (the plan's sequence length), which are cut to
  /// the length's rows (SeqlenReshape.h: each sample's first ids, the rest
  /// dropped, as GPT-NeoX truncates its samples; or under seqlen_reshape
  /// pieces of every sample) in the length's buffers (docs/curriculum.md).
  void fillCut(const Fill &fill, int64_t microBatchInStep,
               const CurriculumLength &length);
  /// fill, or fillCut for a curriculum step at a length (null: none)
  /// shorter than the plan's.
  void fillAt(const Fill &fill, int64_t microBatchInStep,
              const CurriculumLength *length);

private:
  /// The vocabulary the instructions reading id buffer `ids` assume (0 when
  /// none reads it).
  int64_t vocabularyReading(uint32_t ids) const;

  const Plan &plan;
  Backend &backend;
  Arenas &arenas;
  /// A device backend's host copies of the tokens and targets buffers.
  std::vector<int32_t> hostTokens, hostTargets;
  /// Where `fill` writes the ids of a buffer another pipeline rank holds
  /// (the loader draws every micro-batch's tokens and targets alike).
  std::vector<int32_t> unheldTokens, unheldTargets;
  /// Whole samples' ids before fillCut cuts them to a length.
  std::vector<int32_t> wholeTokens, wholeTargets, cutTokens, cutTargets;
};

} // namespace dsc::rt

#endif // DSC_LIB_RUNTIME_EXEC_TOKENFEED_H
