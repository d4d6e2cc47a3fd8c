//===- DeepSpeedConfig.h - a ds_config.json as dsc options ------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// `dsc-run MODEL --deepspeed ds_config.json` and
// `--dsc-compile="ds-config=ds_config.json"`: the training keys every
// DeepSpeed user already has, read with DeepSpeed's meanings and defaults
// and turned into --dsc-compile options (and the few run options they set).
// Plain C++ with exceptions (rt::Error) on LLVM's JSON reader; the compiler
// calls it through tryReadDeepSpeedConfig, which does not throw.
// Every key is honored or refused by name: an unknown key is an error with
// its line and a suggestion, a DeepSpeed key dsc does not implement is an
// error naming it. Nothing is ignored.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_CONFIG_DEEPSPEEDCONFIG_H
#define DSC_CONFIG_DEEPSPEEDCONFIG_H

#include "dsc/Config/CurriculumSchedule.h"
#include "dsc/Runtime/LossScaler.h"

#include "llvm/Support/JSON.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace dsc::config {

/// What a training config file (a ds_config.json, or the training keys of
/// a GPT-NeoX config) sets: --dsc-compile options and run options, each
/// with the key it came from.
struct TrainingSettings {
  /// --dsc-compile options (key -> value), e.g. zero -> 2, lr -> 1e-3.
  std::map<std::string, std::string> compile;
  /// The config key each compile option came from.
  std::map<std::string, std::string> origin;
  /// DeepSpeed's batch triple, completed over the data-parallel size.
  int64_t trainBatchSize = 0, microBatchPerGpu = 0, gradientAccumulation = 0;
  /// dsc-run's options a file may set: --steps, --log-interval, --seed,
  /// --data, --save, --load, --save-interval, --keep, --overlap-comm.
  std::optional<int64_t> steps, logInterval, saveInterval, keep;
  std::optional<uint64_t> seed;
  std::optional<std::string> data, save, load;
  /// GPT-NeoX's evaluation: valid_data_paths, test_data_paths,
  /// eval_interval, eval_iters (--valid-data, --test-data, --eval-interval,
  /// --eval-iters).
  std::optional<std::string> validData, testData;
  std::optional<int64_t> evalInterval, evalIters;
  /// GPT-NeoX's `load`: a directory without a checkpoint yet (its `latest`
  /// marker) means training from scratch, not an error.
  bool loadIfPresent = false;
  std::optional<bool> overlapComm;
  /// fp16's dynamic loss scaler (DeepSpeed's fp16 keys).
  std::optional<rt::LossScalerConfig> lossScaler;
  /// wall_clock_breakdown: the step log splits each step's time.
  std::optional<bool> wallClockBreakdown;
  /// curriculum_learning, when enabled (docs/curriculum.md).
  std::optional<CurriculumSchedule> curriculum;
  /// The config key each run option (named by its flag) came from.
  std::map<std::string, std::string> runOrigin;
  /// One line per key read: "key = value: what dsc does with it".
  std::vector<std::string> understood;
};

/// Whose meanings and defaults the keys are read with: DeepSpeed's
/// (a ds_config.json) or GPT-NeoX's (which hands the same keys to
/// DeepSpeed but has its own optimizer construction, LR schedule,
/// weight_decay and gradient_clipping defaults).
enum class ConfigFlavor { DeepSpeed, NeoX };

/// Reads `path` for a run whose data-parallel size is `dataParallel`.
/// Throws rt::Error naming the file, the key and its line on anything it
/// refuses, and DeepSpeed's own message when the batch triple disagrees.
TrainingSettings readDeepSpeedConfig(const std::string &path,
                                     int64_t dataParallel);

/// Reads DeepSpeed's keys in `root`, the contents of the file `path`
/// (`text`, for the lines errors name), as `flavor` means them. Errors
/// start with `label` ("DeepSpeed config 'x'").
TrainingSettings readDeepSpeedKeys(const llvm::json::Object &root,
                                   const std::string &label,
                                   const std::string &text,
                                   int64_t dataParallel, ConfigFlavor flavor);

/// DeepSpeed's completion of the batch triple (runtime/config.py): the
/// missing values from the given ones over `worldSize` data-parallel
/// ranks, then the check that train = micro * gas * world. Throws
/// rt::Error with DeepSpeed's message.
void completeBatchTriple(std::optional<int64_t> train,
                         std::optional<int64_t> micro,
                         std::optional<int64_t> gas, int64_t worldSize,
                         TrainingSettings &out);

/// A number in the fewest digits that --dsc-compile reads back exactly.
std::string spellNumber(double v);

/// readDeepSpeedConfig for callers built without exceptions (the compiler's
/// --dsc-compile="ds-config=FILE"): nullopt and `error` naming the file and
/// the key on anything it refuses.
std::optional<TrainingSettings> tryReadDeepSpeedConfig(const std::string &path,
                                                       int64_t dataParallel,
                                                       std::string &error);

} // namespace dsc::config

#endif // DSC_CONFIG_DEEPSPEEDCONFIG_H
