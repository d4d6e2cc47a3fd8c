//===- PipelineSlots.h - where each micro-batch in flight keeps its values ===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// A pipeline rank keeps values of each micro-batch in flight from one
// instruction of its step to a later one: a stage's input and residuals
// from the input's arrival (stage 0: its forward) to its backward, the
// output's gradient from its arrival to the backward, and zero-bubble the
// weight stash from the backward to the weight-gradient part. Each such
// group lives in a slot of a bank planned in the rank's arena; this is the
// one rule that picks the slots (the lowest free one), so the memory
// planner sizes the banks and the lowering names the slots alike. The
// runtime does not use it: it checks the slots the plan names.
// Header-only, no LLVM and no MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_SUPPORT_PIPELINESLOTS_H
#define DSC_SUPPORT_PIPELINESLOTS_H

#include "dsc/Support/PipelineStep.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace dsc {

/// A stage's three banks.
enum PipelineSlotBank : unsigned {
  kActivationSlots = 0,
  kGradientSlots = 1,
  kWeightSlots = 2
};

/// What assignPipelineSlots decided for one rank's step.
struct PipelineSlots {
  /// Per step instruction, its slot in each bank it touches, -1 in the
  /// others: a forward or an activation receive its activation slot, a
  /// gradient receive its gradient slot, a backward all three (the
  /// weight slot only zero-bubble), a weight-gradient part its weight
  /// slot.
  std::vector<std::array<int64_t, 3>> slotOf;
  /// Per stage (the key: chunk * P + rank), the slots each bank needs (at
  /// least 1 for the activation bank of every stage the step runs).
  std::map<int64_t, std::array<int64_t, 3>> counts;
  /// Empty when the step is well formed; else why not (a backward with no
  /// forward before it, a forward of a stage > 0 with no activation
  /// received).
  std::string error;
};

/// The slots of rank `rank`'s step of a pipeline of `ranks` ranks whose
/// last stage is `lastStage`; `zeroBubble` when backwards fill a weight
/// stash for their weight-gradient part. Each group takes the lowest free
/// slot of its stage's bank when it starts and frees it when it ends.
inline PipelineSlots assignPipelineSlots(const std::vector<PipelineStepOp> &step,
                                         int64_t rank, int64_t ranks,
                                         int64_t lastStage, bool zeroBubble) {
  PipelineSlots out;
  out.slotOf.assign(step.size(), {-1, -1, -1});
  // Per (stage, bank): the free slots below the high-water mark, and the
  // mark; per (stage, bank, micro-batch): its slot.
  std::map<std::pair<int64_t, unsigned>, std::set<int64_t>> free;
  std::map<std::pair<int64_t, unsigned>, int64_t> mark;
  std::map<std::tuple<int64_t, unsigned, int64_t>, int64_t> held;
  auto take = [&](int64_t stage, unsigned bank, int64_t mb) {
    std::set<int64_t> &f = free[{stage, bank}];
    int64_t slot;
    if (f.empty()) {
      slot = mark[{stage, bank}]++;
    } else {
      slot = *f.begin();
      f.erase(f.begin());
    }
    held[{stage, bank, mb}] = slot;
    auto &count = out.counts[stage];
    count[bank] = std::max(count[bank], slot + 1);
    return slot;
  };
  auto find = [&](int64_t stage, unsigned bank, int64_t mb) -> int64_t {
    auto it = held.find({stage, bank, mb});
    return it == held.end() ? -1 : it->second;
  };
  auto release = [&](int64_t stage, unsigned bank, int64_t mb) {
    auto it = held.find({stage, bank, mb});
    if (it == held.end())
      return int64_t(-1);
    const int64_t slot = it->second;
    free[{stage, bank}].insert(slot);
    held.erase(it);
    return slot;
  };
  for (size_t i = 0; i < step.size(); ++i) {
    const PipelineStepOp &op = step[i];
    const int64_t stage = op.chunk * ranks + rank;
    std::array<int64_t, 3> &slots = out.slotOf[i];
    out.counts.try_emplace(stage, std::array<int64_t, 3>{1, 0, 0});
    auto fail = [&](const char *what) {
      if (out.error.empty())
        out.error = std::string(what) + " of micro-batch " +
                    std::to_string(op.microBatch) + " of stage " +
                    std::to_string(stage) + " (step instruction " +
                    std::to_string(i) + ")";
    };
    switch (op.kind) {
    case PipelineStepOp::Kind::Recv:
      slots[op.gradient ? kGradientSlots : kActivationSlots] =
          take(stage, op.gradient ? kGradientSlots : kActivationSlots,
               op.microBatch);
      break;
    case PipelineStepOp::Kind::Forward:
      slots[kActivationSlots] =
          stage == 0 ? take(stage, kActivationSlots, op.microBatch)
                     : find(stage, kActivationSlots, op.microBatch);
      if (slots[kActivationSlots] < 0)
        fail("no activation received before the forward");
      break;
    case PipelineStepOp::Kind::Backward:
      slots[kActivationSlots] =
          release(stage, kActivationSlots, op.microBatch);
      if (slots[kActivationSlots] < 0)
        fail("no forward before the backward");
      if (stage != lastStage) {
        slots[kGradientSlots] = release(stage, kGradientSlots, op.microBatch);
        if (slots[kGradientSlots] < 0)
          fail("no output gradient received before the backward");
      }
      if (zeroBubble)
        slots[kWeightSlots] = take(stage, kWeightSlots, op.microBatch);
      break;
    case PipelineStepOp::Kind::BackwardWeight:
      slots[kWeightSlots] = release(stage, kWeightSlots, op.microBatch);
      if (slots[kWeightSlots] < 0)
        fail("no backward before the weight-gradient part");
      break;
    case PipelineStepOp::Kind::Send:
      break;
    }
  }
  return out;
}

} // namespace dsc

#endif // DSC_SUPPORT_PIPELINESLOTS_H
