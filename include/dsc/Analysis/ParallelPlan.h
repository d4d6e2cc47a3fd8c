//===- ParallelPlan.h - One point of the parallelization space --*- C++ -*-===//
//
// Part of the dsc project.
//
//===----------------------------------------------------------------------===//
//
// The knobs a user of Megatron-LM/DeepSpeed sets by hand, gathered in one
// value type that the cost model prices and the search enumerates.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_ANALYSIS_PARALLELPLAN_H
#define DSC_ANALYSIS_PARALLELPLAN_H

#include "dsc/Support/ParallelPlan.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mlir::dsc::analysis {

/// The pipeline schedule: the compiler's kind
/// (dsc/Support/PipelineScheduleKind.h), so a plan the search picks lowers
/// to the schedule the runtime runs.
using PipelineSchedule = ::dsc::PipelineScheduleKind;

/// Returns "gpipe", "1f1b", "interleaved-1f1b" or "zb-h1" (the spelling used
/// in reports and attributes).
inline const char *scheduleName(PipelineSchedule s) {
  return ::dsc::pipelineScheduleName(s);
}

/// The one typed plan (dsc/Support/ParallelPlan.h): the cost model prices
/// it and the search enumerates it. Its precision is fp32 (as --dsc-compile
/// builds by default: MemoryModel.h's fp32 forms) or 16-bit (bf16 and fp16
/// alike: the papers' forms); of recompute it prices none and full.
using ParallelPlan = ::dsc::ParallelPlan;

/// What turns plan `from` into plan `to`, one knob a line in the search's
/// terms ("pp 16 -> 4", "recompute on -> off"); empty when they are equal.
std::vector<std::string> planChanges(const ParallelPlan &from,
                                     const ParallelPlan &to);

} // namespace mlir::dsc::analysis

#endif // DSC_ANALYSIS_PARALLELPLAN_H
