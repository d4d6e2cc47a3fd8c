//===- ResolveConfig.cpp - one run's settings from its layers -------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//

#include "ResolveConfig.h"

#include "dsc/Runtime/Error.h"

#include <cmath>
#include <iomanip>
#include <sstream>

using namespace dsc::run;
using dsc::config::spellNumber;
using dsc::rt::Error;

namespace {

/// One run option as the layers set it: the last layer that sets it wins
/// unless the command line gave its flag; disagreements are noted.
template <typename T, typename Show>
void resolveRun(const std::vector<ConfigLayer> &layers, RunOptions &options,
                ResolvedConfig &out, const std::string &flag,
                std::optional<T> TrainingSettings::*field, T &target,
                Show show) {
  std::optional<T> value;
  std::string source;
  for (const ConfigLayer &layer : layers) {
    const std::optional<T> &v = layer.settings.*field;
    if (!v)
      continue;
    auto origin = layer.settings.runOrigin.find(flag);
    const std::string from =
        layer.name +
        (origin == layer.settings.runOrigin.end() ? "" : ": " + origin->second);
    if (value && !(*value == *v))
      out.notes.push_back(from + " (" + show(*v) + ") replaces " + source +
                          " (" + show(*value) + ")");
    value = v;
    source = from;
  }
  if (options.given.count(flag)) {
    if (value && !(*value == target))
      out.notes.push_back("the command line's " + flag + " " + show(target) +
                          " replaces " + source + " (" + show(*value) + ")");
    out.runSource[flag] = "command line";
    return;
  }
  if (!value)
    return;
  target = *value;
  out.runSource[flag] = source;
}

std::string showString(const std::string &s) { return s; }
std::string showInt(int64_t v) { return std::to_string(v); }

} // namespace

std::map<std::string, std::string>
dsc::run::compileOptionKeys(const std::string &options) {
  std::map<std::string, std::string> keys;
  std::istringstream words(options);
  for (std::string word; words >> word;) {
    size_t eq = word.find('=');
    keys[word.substr(0, eq)] =
        eq == std::string::npos ? "" : word.substr(eq + 1);
  }
  return keys;
}

ResolvedConfig dsc::run::resolveConfig(const std::vector<ConfigLayer> &layers,
                                       RunOptions &options) {
  ResolvedConfig out;
  std::map<std::string, std::string> merged;
  for (const ConfigLayer &layer : layers) {
    for (const std::string &line : layer.settings.understood)
      out.notes.push_back(layer.name + ": " + line);
    for (const auto &[key, value] : layer.settings.compile) {
      auto origin = layer.settings.origin.find(key);
      const std::string from =
          layer.name +
          (origin == layer.settings.origin.end() ? "" : ": " + origin->second);
      if (merged.count(key) && merged[key] != value)
        out.notes.push_back(from + " (" + key + "=" + value + ") replaces " +
                            out.compileSource[key] + " (" + key + "=" +
                            merged[key] + ")");
      merged[key] = value;
      out.compileSource[key] = from;
    }
  }

  // Run options: the files' unless the command line gave the flag.
  resolveRun<int64_t>(layers, options, out, "--steps", &TrainingSettings::steps,
                      options.steps, showInt);
  resolveRun<int64_t>(layers, options, out, "--log-interval",
                      &TrainingSettings::logInterval, options.logInterval,
                      showInt);
  resolveRun<int64_t>(layers, options, out, "--save-interval",
                      &TrainingSettings::saveInterval, options.saveInterval,
                      showInt);
  resolveRun<int64_t>(layers, options, out, "--keep", &TrainingSettings::keep,
                      options.keep, showInt);
  resolveRun<uint64_t>(layers, options, out, "--seed", &TrainingSettings::seed,
                       options.seed,
                       [](uint64_t v) { return std::to_string(v); });
  resolveRun<std::string>(layers, options, out, "--data",
                          &TrainingSettings::data, options.data, showString);
  resolveRun<std::string>(layers, options, out, "--valid-data",
                          &TrainingSettings::validData, options.validData,
                          showString);
  resolveRun<std::string>(layers, options, out, "--test-data",
                          &TrainingSettings::testData, options.testData,
                          showString);
  resolveRun<int64_t>(layers, options, out, "--eval-interval",
                      &TrainingSettings::evalInterval, options.evalInterval,
                      showInt);
  resolveRun<int64_t>(layers, options, out, "--eval-iters",
                      &TrainingSettings::evalIters, options.evalIters, showInt);
  resolveRun<std::string>(layers, options, out, "--save",
                          &TrainingSettings::save, options.save, showString);
  resolveRun<std::string>(layers, options, out, "--load",
                          &TrainingSettings::load, options.load, showString);
  if (!options.given.count("--load"))
    for (const ConfigLayer &layer : layers)
      if (layer.settings.load)
        options.loadIfPresent = layer.settings.loadIfPresent;
  std::optional<bool> overlap = options.overlapComm;
  bool overlapValue = overlap.value_or(false);
  resolveRun<bool>(layers, options, out, "--overlap-comm",
                   &TrainingSettings::overlapComm, overlapValue,
                   [](bool b) { return std::string(b ? "on" : "off"); });
  if (out.runSource.count("--overlap-comm"))
    options.overlapComm = overlapValue;
  for (const ConfigLayer &layer : layers) {
    if (layer.settings.lossScaler) {
      options.lossScaler = layer.settings.lossScaler;
      out.runSource["loss-scaler"] = layer.name + ": fp16";
    }
    if (layer.settings.curriculum) {
      options.curriculum = std::make_shared<const config::CurriculumSchedule>(
          *layer.settings.curriculum);
      out.runSource["curriculum"] = layer.name + ": curriculum_learning";
    }
    if (layer.settings.wallClockBreakdown) {
      options.wallClockBreakdown = *layer.settings.wallClockBreakdown;
      out.runSource["wall-clock-breakdown"] =
          layer.name + ": wall_clock_breakdown";
    }
  }
  // The files' saving keys are theirs; without a place to save they would
  // be silently ignored.
  if (options.save.empty() && (options.saveInterval || options.keep))
    throw Error(std::string(options.saveInterval ? "a save interval"
                                                 : "keeping the newest "
                                                   "checkpoints") +
                " needs a place to save (--save DIR or the config's save)");

  // The schedule's end defaults to the run's length.
  if (!merged.count("steps")) {
    merged["steps"] = std::to_string(options.steps);
    out.compileSource["steps"] =
        out.runSource.count("--steps")
            ? out.runSource["--steps"] + " (the run's length)"
            : "--steps (the run's length)";
  }
  // `given` is the flag as written ("--lr 0.001", "--compile zero=1").
  auto flagWins = [&](const std::string &key, const std::string &value,
                      const std::string &given) {
    if (merged.count(key) && merged[key] != value)
      out.notes.push_back("the command line's " + given + " replaces " +
                          out.compileSource[key] + " (" + key + "=" +
                          merged[key] + ")");
    merged[key] = value;
    out.compileSource[key] = "command line: " + given;
  };
  if (options.microBatches > 0)
    flagWins("microbatches", std::to_string(options.microBatches),
             "--microbatches " + std::to_string(options.microBatches));
  if (options.learningRate)
    flagWins("lr", spellNumber(*options.learningRate),
             "--lr " + spellNumber(*options.learningRate));
  for (const auto &[key, value] : compileOptionKeys(options.compile))
    flagWins(key, value, "--compile " + key + "=" + value);
  // Without ZeRO DeepSpeed's engine scales the loss in FP16_Optimizer,
  // whose rule has no hysteresis (LossScaleRule::Fused): it reads the
  // config's hysteresis and consecutive_hysteresis and ignores them,
  // silently; dsc says so when they differ from the defaults.
  const auto zero = merged.find("zero");
  if (options.lossScaler && (zero == merged.end() || zero->second == "0") &&
      (options.lossScaler->hysteresis != 2 ||
       options.lossScaler->consecutiveHysteresis))
    out.notes.push_back(
        out.runSource["loss-scaler"] +
        ": 'hysteresis' and 'consecutive_hysteresis' have no effect without "
        "ZeRO (zero=0): DeepSpeed's FP16_Optimizer halves the loss scale on "
        "every overflow (docs/training.md)");
  for (const auto &[key, value] : merged)
    out.pipeline += (out.pipeline.empty() ? "" : " ") + key +
                    (value.empty() ? "" : "=" + value);
  return out;
}

void dsc::run::printResolvedConfig(
    const ResolvedConfig &resolved,
    const std::map<std::string, std::string> &allOptions,
    const RunOptions &options, std::ostream &os) {
  auto row = [&](const std::string &name, const std::string &value,
                 const std::string &source) {
    os << "  " << std::left << std::setw(22) << name << " " << std::setw(18)
       << value << " " << source << "\n";
  };
  os << "dsc-run: the configuration of '" << options.input
     << "' (value, then where it came from)\n";
  os << "--dsc-compile options:\n";
  for (const auto &[key, value] : allOptions) {
    auto source = resolved.compileSource.find(key);
    row(key, value,
        source == resolved.compileSource.end() ? "default" : source->second);
  }
  os << "run options:\n";
  auto runRow = [&](const std::string &flag, const std::string &value) {
    auto source = resolved.runSource.find(flag);
    row(flag, value,
        source == resolved.runSource.end() ? "default" : source->second);
  };
  runRow("--steps", std::to_string(options.steps));
  runRow("--seed", std::to_string(options.seed));
  runRow("--data", options.data.empty() ? "(embedded corpus)" : options.data);
  runRow("--log-interval", std::to_string(options.logInterval));
  runRow("--save", options.save.empty() ? "(none)" : options.save);
  runRow("--save-interval", options.saveInterval
                                ? std::to_string(options.saveInterval)
                                : "(at the end)");
  runRow("--keep", options.keep ? std::to_string(options.keep) : "(all)");
  runRow("--load", options.load.empty() ? "(none)" : options.load);
  // Flags only: no config file has them (docs/curriculum.md).
  if (options.lrDecayTokens)
    row("--lr-decay-tokens", std::to_string(*options.lrDecayTokens),
        "command line");
  if (options.lrWarmupTokens)
    row("--lr-warmup-tokens", std::to_string(*options.lrWarmupTokens),
        "command line");
  if (options.trainTokens)
    row("--train-tokens", std::to_string(*options.trainTokens), "command line");
  if (!options.testData.empty())
    runRow("--test-data", options.testData);
  if (!options.validData.empty()) {
    runRow("--valid-data", options.validData);
    runRow("--eval-interval", options.evalInterval
                                  ? std::to_string(options.evalInterval)
                                  : "(none)");
    runRow("--eval-iters", std::to_string(options.evalIters));
  }
  runRow("--overlap-comm", options.overlapComm
                               ? (*options.overlapComm ? "on" : "off")
                               : "(backend's default)");
  const rt::LossScalerConfig scaler =
      options.lossScaler.value_or(rt::LossScalerConfig());
  std::ostringstream scale;
  scale << "2^" << int(std::log2(scaler.initialScale)) << " window "
        << scaler.scaleWindow << " hysteresis " << scaler.hysteresis << " min "
        << spellNumber(scaler.minScale);
  runRow("loss-scaler", scale.str());
  runRow("wall-clock-breakdown", options.wallClockBreakdown ? "on" : "off");
  if (options.curriculum) {
    runRow("curriculum", "sequence length " +
                             std::to_string(options.curriculum->minDifficulty) +
                             " -> " +
                             std::to_string(options.curriculum->maxDifficulty));
    row("--curriculum-seqlen-type",
        options.curriculumReshape.value_or(false) ? "seqlen_reshape"
                                                  : "seqlen_truncate",
        options.curriculumReshape ? "command line" : "default");
  }
  if (!resolved.notes.empty()) {
    os << "notes:\n";
    for (const std::string &note : resolved.notes)
      os << "  " << note << "\n";
  }
}
