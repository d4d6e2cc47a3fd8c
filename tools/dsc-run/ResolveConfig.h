//===- ResolveConfig.h - one run's settings from its layers -----*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// A run's settings come in layers: dsc's defaults, the GPT-NeoX config's
// training keys, a ds_config.json (--deepspeed), the command line. A later
// layer wins over an earlier one, with a note when they disagree; every
// value keeps where it came from, which --print-config shows.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUN_RESOLVECONFIG_H
#define DSC_RUN_RESOLVECONFIG_H

#include "RunOptions.h"
#include "dsc/Config/DeepSpeedConfig.h"

#include <map>
#include <ostream>
#include <string>
#include <vector>

namespace dsc::run {

using config::TrainingSettings;

/// A config file's settings, named for notes ("GPT-NeoX config",
/// "ds_config") and for errors ("DeepSpeed config 'ds.json'").
struct ConfigLayer {
  std::string name;
  std::string label;
  TrainingSettings settings;
};

/// What the layers resolve to.
struct ResolvedConfig {
  /// The --dsc-compile options, "key=value ..." (the options the layers
  /// and the command line set; the rest are --dsc-compile's defaults).
  std::string pipeline;
  /// Where each compile option set came from ("GPT-NeoX config: min_lr").
  std::map<std::string, std::string> compileSource;
  /// Where each run option (by flag) came from.
  std::map<std::string, std::string> runSource;
  /// "X replaces Y" notes and what each file's keys meant.
  std::vector<std::string> notes;
};

/// The keys of a --dsc-compile option string ("dp=2 zero=1" -> dp -> 2,
/// zero -> 1; a flag without a value maps to "").
std::map<std::string, std::string>
compileOptionKeys(const std::string &options);

/// Merges `layers` (in order) and the command line in `options` (its flags
/// and --compile): the compile options into the result, the run options
/// (--steps, --seed, --data, --save, --load, --save-interval, --keep,
/// --log-interval, --overlap-comm, the loss scaler, wall_clock_breakdown)
/// into `options` where the command line did not give them.
ResolvedConfig resolveConfig(const std::vector<ConfigLayer> &layers,
                             RunOptions &options);

/// --print-config: every --dsc-compile option with its value and source
/// (`allOptions` is "key=value" for each, --dsc-compile's defaults
/// included), the run options, and the notes.
void printResolvedConfig(const ResolvedConfig &resolved,
                         const std::map<std::string, std::string> &allOptions,
                         const RunOptions &options, std::ostream &os);

} // namespace dsc::run

#endif // DSC_RUN_RESOLVECONFIG_H
