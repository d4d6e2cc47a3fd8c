//===- PipelineScheduleKind.h - GPipe or 1F1B -------------------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The order of a pipelined step's forwards and backwards, shared by the
// cost model and plan search (which price it), --dsc-pipeline-schedule
// (which writes each stage's step as IR), the lowering (which records it in
// a plan file: the values are the file's) and reports, with its one
// spelling in attributes, options and reports. Header-only, no LLVM and no
// MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_SUPPORT_PIPELINESCHEDULEKIND_H
#define DSC_SUPPORT_PIPELINESCHEDULEKIND_H

#include <cstdint>
#include <optional>
#include <string_view>

namespace dsc {

/// The values are the plan file's encoding: never renumber them.
enum class PipelineScheduleKind : uint32_t {
  /// All M forwards, then all M backwards (GPipe): M stage inputs stashed.
  GPipe = 0,
  /// PipeDream-flush as Megatron-LM's non-interleaved schedule: P-k-1
  /// warmup forwards, then one forward and one backward in turn, then the
  /// remaining backwards: at most P-k stage inputs stashed.
  OneFOneB = 1,
};

/// "gpipe" or "1f1b": the spelling of the `schedule` attribute, the
/// pipeline-schedule option and reports.
constexpr const char *pipelineScheduleName(PipelineScheduleKind kind) {
  return kind == PipelineScheduleKind::GPipe ? "gpipe" : "1f1b";
}

/// The kind spelled `name` ("gpipe" or "1f1b"), or none.
constexpr std::optional<PipelineScheduleKind>
parsePipelineSchedule(std::string_view name) {
  if (name == "gpipe")
    return PipelineScheduleKind::GPipe;
  if (name == "1f1b")
    return PipelineScheduleKind::OneFOneB;
  return std::nullopt;
}

} // namespace dsc

#endif // DSC_SUPPORT_PIPELINESCHEDULEKIND_H
