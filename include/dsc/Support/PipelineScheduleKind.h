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
  /// Megatron-LM's interleaved 1F1B: each rank holds v model chunks
  /// (stages k, k+P, ...) and runs them in 1F1B order over groups of P
  /// micro-batches; bubble (1/v)(P-1)/M.
  InterleavedOneFOneB = 2,
  /// Zero bubble ZB-H1 (Qi et al. 2024): 1F1B with each backward split into
  /// its activation-gradient part B and weight-gradient part W; stage k
  /// defers k of its W to its tail, so the gradients run down the pipeline
  /// without waiting for W and the W fill the bubble, holding no more
  /// micro-batches than 1F1B's stage 0.
  ZeroBubbleH1 = 3,
};

/// "gpipe", "1f1b", "interleaved-1f1b" or "zb-h1": the spelling of the
/// `schedule` attribute, the pipeline-schedule option and reports.
constexpr const char *pipelineScheduleName(PipelineScheduleKind kind) {
  switch (kind) {
  case PipelineScheduleKind::GPipe:
    return "gpipe";
  case PipelineScheduleKind::OneFOneB:
    return "1f1b";
  case PipelineScheduleKind::InterleavedOneFOneB:
    return "interleaved-1f1b";
  case PipelineScheduleKind::ZeroBubbleH1:
    return "zb-h1";
  }
  return "unknown";
}

/// The kind spelled `name`, or none.
constexpr std::optional<PipelineScheduleKind>
parsePipelineSchedule(std::string_view name) {
  for (PipelineScheduleKind kind :
       {PipelineScheduleKind::GPipe, PipelineScheduleKind::OneFOneB,
        PipelineScheduleKind::InterleavedOneFOneB,
        PipelineScheduleKind::ZeroBubbleH1})
    if (name == pipelineScheduleName(kind))
      return kind;
  return std::nullopt;
}

} // namespace dsc

#endif // DSC_SUPPORT_PIPELINESCHEDULEKIND_H
