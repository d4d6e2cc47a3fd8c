//===- CurriculumSchedule.h - DeepSpeed's seqlen curriculum ----*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// A ds_config's `curriculum_learning` block (curriculum_type "seqlen") read
// and checked, and the sequence length DeepSpeed's CurriculumScheduler gives
// at each global step, so a run can train short sequences first exactly as
// DeepSpeed would. Only the schedule: nothing here compiles or trains.
// docs/curriculum.md has the formulas and what DeepSpeed's code does.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_CONFIG_CURRICULUMSCHEDULE_H
#define DSC_CONFIG_CURRICULUMSCHEDULE_H

#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dsc::config {

/// DeepSpeed's `schedule_type`s with a closed form ("custom" takes a Python
/// function, which a config file cannot carry).
enum class CurriculumScheduleType { FixedLinear, FixedRoot, FixedDiscrete };

/// The `curriculum_learning` block, in DeepSpeed's keys. The block
/// DeepSpeed <= 0.19.6 and GPT-NeoX read at the top level of a ds_config;
/// DeepSpeed 0.19.8 refuses it there and reads the same schedule keys per
/// metric under data_efficiency.data_sampling.curriculum_learning.
struct CurriculumSchedule {
  /// `enabled`: DeepSpeed builds no scheduler without it (default false).
  bool enabled = false;
  /// `curriculum_type`: "seqlen", the only one dsc implements.
  std::string curriculumType = "seqlen";
  /// `min_difficulty`, `max_difficulty`: sequence lengths, in tokens.
  int64_t minDifficulty = 0, maxDifficulty = 0;
  /// `schedule_type`.
  CurriculumScheduleType scheduleType = CurriculumScheduleType::FixedLinear;
  /// fixed_linear and fixed_root's `schedule_config`: the steps from
  /// min_difficulty to max_difficulty (`total_curriculum_step`), the
  /// multiple every length is rounded to (`difficulty_step`) and the root
  /// (`root_degree`; 1 for fixed_linear, which has no such key).
  int64_t totalCurriculumStep = 0, difficultyStep = 0;
  double rootDegree = 1.0;
  /// fixed_discrete's `schedule_config`: `difficulty[i]` up to and
  /// including step `maxStep[i]`, the last difficulty after the last step.
  std::vector<int64_t> difficulty, maxStep;

  /// The sequence length DeepSpeed's CurriculumScheduler returns from
  /// `update_difficulty(globalStep)` in a run that updated it at every
  /// step before, as DeepSpeed does: the training step with 1-based number
  /// k (DeepSpeed's engine: global_steps + 1; its data sampler: the k-th
  /// global batch) is evaluated at k. `globalStep` must not be negative.
  int64_t difficultyAt(int64_t globalStep) const;
};

/// Reads a `curriculum_learning` block. `keyPrefix` is the block's key
/// path, which every error message starts with. An unknown key, a missing
/// or mistyped one, and a schedule DeepSpeed would refuse, crash on or run
/// inconsistently are errors naming the key; `maxSeqLen`, when given (the
/// model's sequence length), bounds max_difficulty. A block that is only
/// `"enabled": false` is accepted as it is, the schedule unread.
llvm::Expected<CurriculumSchedule>
readCurriculumSchedule(const llvm::json::Object &block,
                       std::optional<int64_t> maxSeqLen = std::nullopt,
                       llvm::StringRef keyPrefix = "curriculum_learning");

} // namespace dsc::config

#endif // DSC_CONFIG_CURRICULUMSCHEDULE_H
