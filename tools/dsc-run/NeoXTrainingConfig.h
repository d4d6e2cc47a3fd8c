//===- NeoXTrainingConfig.h - a GPT-NeoX config's training keys -*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// `dsc-run config.yml`: the training keys of the GPT-NeoX config that also
// holds the model, read with GPT-NeoX's meanings and defaults (its
// AnnealingLR schedule, its Adam, its batch, precision, ZeRO, activation
// checkpointing, data, checkpoint and logging keys). Each key is honored,
// listed as not applicable (the launcher's, the cluster's, the loggers'),
// or refused by name.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUN_NEOXTRAININGCONFIG_H
#define DSC_RUN_NEOXTRAININGCONFIG_H

#include "dsc/Config/DeepSpeedConfig.h"

#include "dsc/Target/GPTConfig.h"

#include <string>

namespace dsc::run {

using config::TrainingSettings;

/// The settings of the training keys `keys` of the GPT-NeoX config `path`
/// (whose text is `text`) for a run whose data-parallel size is
/// `dataParallel`. Throws rt::Error naming the file, the key and its line.
TrainingSettings readNeoXTraining(const mlir::dsc::NeoXTrainingKeys &keys,
                                  const std::string &path,
                                  const std::string &text,
                                  int64_t dataParallel);

/// Whether readNeoXTraining classifies the training key `key` (every name
/// of mlir::dsc::neoxTrainingKeyNames() must be).
bool isClassifiedNeoXTrainingKey(const std::string &key);

} // namespace dsc::run

#endif // DSC_RUN_NEOXTRAININGCONFIG_H
