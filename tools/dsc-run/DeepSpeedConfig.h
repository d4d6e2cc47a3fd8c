//===- DeepSpeedConfig.h - a ds_config.json as dsc options ------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// `dsc-run MODEL --deepspeed ds_config.json`: the training keys every
// DeepSpeed user already has, read with DeepSpeed's meanings and defaults
// and turned into --dsc-compile options (and the few run options they set).
// Every key is honored or refused by name: an unknown key is an error with
// its line and a suggestion, a DeepSpeed key dsc does not implement is an
// error naming it. Nothing is ignored.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUN_DEEPSPEEDCONFIG_H
#define DSC_RUN_DEEPSPEEDCONFIG_H

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace dsc::run {

/// What a ds_config.json sets.
struct DeepSpeedSettings {
  /// --dsc-compile options (key -> value), e.g. zero -> 2, lr -> 1e-3.
  std::map<std::string, std::string> compile;
  /// DeepSpeed's batch triple, completed over the data-parallel size.
  int64_t trainBatchSize = 0, microBatchPerGpu = 0, gradientAccumulation = 0;
  /// steps_per_print: dsc-run's log interval.
  std::optional<int64_t> stepsPerPrint;
  /// zero_optimization.overlap_comm: dsc-run's --overlap-comm.
  std::optional<bool> overlapComm;
  /// One line per key read: "key = value: what dsc does with it".
  std::vector<std::string> understood;
};

/// Reads `path` for a run whose data-parallel size is `dataParallel`.
/// Throws rt::Error naming the file, the key and its line on anything it
/// refuses, and DeepSpeed's own message when the batch triple disagrees.
DeepSpeedSettings readDeepSpeedConfig(const std::string &path,
                                      int64_t dataParallel);

/// DeepSpeed's completion of the batch triple (runtime/config.py): the
/// missing values from the given ones over `worldSize` data-parallel
/// ranks, then the check that train = micro * gas * world. Throws
/// rt::Error with DeepSpeed's message.
void completeBatchTriple(std::optional<int64_t> train,
                         std::optional<int64_t> micro,
                         std::optional<int64_t> gas, int64_t worldSize,
                         DeepSpeedSettings &out);

} // namespace dsc::run

#endif // DSC_RUN_DEEPSPEEDCONFIG_H
