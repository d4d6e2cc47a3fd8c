//===- NeoXTrainingConfig.cpp - a GPT-NeoX config's training keys ---------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// GPT-NeoX hands its DeepSpeed keys (optimizer, batch, precision, ZeRO,
// clipping) to DeepSpeed and builds the rest itself: its Adam with the
// top-level weight_decay, its AnnealingLR from lr_decay_style / warmup /
// lr_decay_iters / min_lr, its parallel layout, activation checkpointing,
// data, checkpoints and logging. The DeepSpeed keys are read by the
// ds_config reader with GPT-NeoX's defaults (DeepSpeedConfig.cpp); this
// file reads the others, each with megatron/neox_arguments' default.
//
//===----------------------------------------------------------------------===//

#include "NeoXTrainingConfig.h"

#include "dsc/Config/ConfigValues.h"
#include "dsc/Runtime/Error.h"

#include "llvm/ADT/StringRef.h"

#include <algorithm>
#include <cmath>
#include <set>

using namespace dsc::run;
using namespace dsc::config;
using dsc::rt::Error;

namespace {

/// The keys GPT-NeoX hands to DeepSpeed, read by the ds_config reader.
const std::set<std::string> kDeepSpeedKeys = {
    "optimizer",
    "zero_optimization",
    "train_batch_size",
    "train_micro_batch_size_per_gpu",
    "gradient_accumulation_steps",
    "fp16",
    "bf16",
    "gradient_clipping",
    "zero_allow_untested_optimizer",
    "steps_per_print",
    "wall_clock_breakdown",
    "data_types",
    "curriculum_learning",
};

/// Keys of GPT-NeoX's launcher, cluster, loggers, profilers, text
/// generation and kernel choices: nothing in them changes what a training
/// step computes, and dsc-run has no counterpart. Listed once.
const std::set<std::string> kNotApplicable = {
    "launcher",
    "hostfile",
    "include",
    "num_gpus",
    "global_num_gpus",
    "deepspeed_slurm",
    "distributed_backend",
    "num_workers",
    "merge_file",
    "use_wandb",
    "wandb_project",
    "wandb_group",
    "wandb_team",
    "wandb_host",
    "tensorboard_dir",
    "log_dir",
    "use_comet",
    "comet_project",
    "comet_experiment_name",
    "comet_tags",
    "comet_others",
    "comment",
    "memory_profiling",
    "memory_profiling_path",
    "profile",
    "profile_step_start",
    "profile_step_stop",
    "text_gen_type",
    "prompt_end",
    "temperature",
    "top_p",
    "top_k",
    "recompute",
    "num_samples",
    "sample_input_file",
    "sample_output_file",
    "maximum_tokens",
    "checkpoint_validation_with_forward_pass",
    "scaled_upper_triang_masked_softmax_fusion",
    "rope_fusion",
    "layernorm_fusion",
    "te_columnparallel",
    "te_rowparallel",
    "te_layernorm_mlp",
    "te_mha",
    // GPT-NeoX's own fp16 optimizer's scaler, used only without DeepSpeed
    // (the fp16 section sets DeepSpeed's).
    "loss_scale",
    "loss_scale_window",
    "hysteresis",
    "min_loss_scale",
    "initial_scale_power",
};

/// Evaluation and the data split: dsc-run trains on the whole dataset and
/// runs no evaluation; listed once so the user knows.
const std::set<std::string> kEvaluation = {"valid_data_paths",
                                           "test_data_paths", "eval_interval",
                                           "eval_iters", "split"};

/// Keys whose default is off and which change what training computes when
/// turned on; dsc implements none of them yet.
const std::set<std::string> kRefusedWhenSet = {
    "sparsity_config",       "no_load_optim",
    "no_load_rng",           "finetune",
    "override_lr_scheduler", "use_bnb_optimizer",
    "deepspeed_extra_args",  "decay_lr_to",
    "warmup_iters",
};

/// The keys read here.
const std::set<std::string> kNeoXKeys = {
    "pipe_parallel_size",
    "model_parallel_size",
    "moe_expert_parallel_size",
    "seed",
    "train_iters",
    "lr_decay_iters",
    "lr_decay_style",
    "warmup",
    "min_lr",
    "weight_decay",
    "precision",
    "fp32_allreduce",
    "gas",
    "checkpoint_activations",
    "checkpoint_num_layers",
    "partition_activations",
    "synchronize_each_layer",
    "contiguous_checkpointing",
    "data_path",
    "train_data_paths",
    "data_impl",
    "save",
    "load",
    "checkpoint_factor",
    "save_interval",
    "keep_last_n_checkpoints",
    "extra_save_iters",
    "log_interval",
    "log_grad_norm",
};

/// Errors about a key of the config `path`: the file and the key's line.
ConfigValues::Describe describeNeoX(const mlir::dsc::NeoXTrainingKeys &keys,
                                    const std::string &path) {
  return [&keys, path](const std::string &key, const std::string &why) {
    auto line = keys.lines.find(key);
    auto file = keys.files.find(key);
    return "GPT-NeoX config '" +
           (file == keys.files.end() ? path : file->second) + "'" +
           (line == keys.lines.end()
                ? std::string()
                : ", line " + std::to_string(line->second)) +
           ": " + why;
  };
}

class NeoXReader {
public:
  NeoXReader(const mlir::dsc::NeoXTrainingKeys &keys, std::string path,
             TrainingSettings &out)
      : keys(keys), values(describeNeoX(keys, path)), out(out) {}

  void read();

private:
  [[noreturn]] void fail(const std::string &key, const std::string &why) {
    values.fail(key, why);
  }
  const llvm::json::Value *get(const std::string &key) const {
    return keys.values.get(key);
  }
  /// YAML's null (`key: ~`) is GPT-NeoX's None: the default.
  bool has(const std::string &key) const {
    const llvm::json::Value *v = get(key);
    return v && v->kind() != llvm::json::Value::Null;
  }
  double number(const std::string &key, double fallback) {
    return has(key) ? values.number(keys.values, key, fallback) : fallback;
  }
  int64_t integer(const std::string &key, int64_t fallback) {
    return has(key) ? values.integer(keys.values, key, fallback) : fallback;
  }
  bool boolean(const std::string &key, bool fallback) {
    return has(key) ? values.boolean(keys.values, key, fallback) : fallback;
  }
  std::string string(const std::string &key, const std::string &fallback) {
    return has(key) ? values.string(keys.values, key, fallback) : fallback;
  }
  void setCompile(const std::string &option, const std::string &value,
                  const std::string &because) {
    out.compile[option] = value;
    out.origin[option] = because;
    out.understood.push_back(because + " -> " + option + "=" + value);
  }
  void setRun(const std::string &flag, const std::string &because) {
    out.runOrigin[flag] = because;
    out.understood.push_back(because + " -> " + flag);
  }

  void readSchedule();
  void readOnebitSchedule(int64_t iters, const std::string &itersKey);
  void readParallel();
  void readRecompute(int64_t tp);
  void readData();
  void readEvaluation();
  void readCheckpoints();

  const mlir::dsc::NeoXTrainingKeys &keys;
  ConfigValues values;
  TrainingSettings &out;
};

void NeoXReader::read() {
  for (const auto &entry : keys.values) {
    const std::string key = entry.first.str();
    if (!isClassifiedNeoXTrainingKey(key))
      fail(key, "dsc does not know what to do with '" + key + "'");
    if (!kRefusedWhenSet.count(key))
      continue;
    const llvm::json::Value &v = entry.second;
    const bool off = v.kind() == llvm::json::Value::Null ||
                     v.getAsBoolean() == std::optional<bool>(false) ||
                     (v.getAsObject() && v.getAsObject()->empty()) ||
                     (v.getAsArray() && v.getAsArray()->empty());
    if (!off)
      fail(key, "'" + key +
                    "' is a GPT-NeoX key dsc does not implement yet; "
                    "remove it to train without it");
  }
  readSchedule();
  readParallel();
  readData();
  readEvaluation();
  readCheckpoints();
  if (has("seed")) {
    const int64_t seed = integer("seed", 1234);
    if (seed < 0)
      fail("seed", "'seed' must be >= 0");
    out.seed = uint64_t(seed);
    setRun("--seed", "seed = " + std::to_string(*out.seed));
  }
  if (has("log_interval")) {
    out.logInterval = integer("log_interval", 100);
    if (*out.logInterval < 1)
      fail("log_interval", "'log_interval' must be >= 1");
    setRun("--log-interval",
           "log_interval = " + std::to_string(*out.logInterval));
  }
  if (has("log_grad_norm"))
    out.understood.push_back("log_grad_norm: dsc-run logs the gradient norm "
                             "of every step it computes one");
  if (has("fp32_allreduce"))
    out.understood.push_back(
        std::string("fp32_allreduce = ") +
        (boolean("fp32_allreduce", false) ? "true" : "false") +
        ": dsc reduces fp32 gradients under every precision (fp32 master "
        "gradients), as fp32_allreduce: true does");

  // The keys of `kind` in the config, sorted, comma-separated.
  auto keysIn = [&](const std::set<std::string> &kind) {
    std::set<std::string> present;
    for (const auto &entry : keys.values)
      if (kind.count(entry.first.str()))
        present.insert(entry.first.str());
    std::string list;
    for (const std::string &key : present)
      list += (list.empty() ? "" : ", ") + key;
    return list;
  };
  if (std::string listed = keysIn(kNotApplicable); !listed.empty())
    out.understood.push_back("not applicable to dsc-run (launcher, cluster, "
                             "loggers, generation, kernel choices): " +
                             listed);
  // Without valid_data_paths GPT-NeoX evaluates on the part of data_path
  // that `split` holds out; dsc-run does not split a dataset.
  if (std::string evaluation = keysIn(kEvaluation);
      !evaluation.empty() && !out.validData && !out.testData)
    out.understood.push_back(
        "not run: dsc-run trains on the whole dataset and evaluates nothing "
        "(" +
        evaluation +
        "): it does not split data_path; give valid_data_paths to evaluate");
  else if (has("split"))
    out.understood.push_back("split: not used, held-out data paths are given "
                             "(GPT-NeoX splits only data_path)");
}

/// GPT-NeoX's evaluation (megatron/training.py evaluate): eval_iters
/// batches of valid_data_paths every eval_interval iterations and at the
/// end; its defaults are 1000 and 100. Without valid_data_paths the keys
/// are listed as not run (read()).
void NeoXReader::readEvaluation() {
  // One prefix of a list key, or nullopt when the key is absent.
  auto onePath = [&](const std::string &key,
                     const std::string &what) -> std::optional<std::string> {
    if (!has(key))
      return std::nullopt;
    const llvm::json::Array *paths = get(key)->getAsArray();
    if (!paths || paths->empty() || !(*paths)[0].getAsString())
      fail(key, "'" + key + "' must be a list of dataset prefixes");
    if (paths->size() > 1)
      fail(key, "blending " + std::to_string(paths->size()) + " " + what +
                    " datasets is not implemented; give one");
    return (*paths)[0].getAsString()->str();
  };
  out.testData = onePath("test_data_paths", "test");
  if (out.testData)
    setRun("--test-data", "test_data_paths[0] = " + *out.testData +
                              " (evaluated after the last step)");
  out.validData = onePath("valid_data_paths", "validation");
  if (out.validData)
    setRun("--valid-data",
           "valid_data_paths[0] = " + *out.validData + " (held-out data)");
  if (!out.validData && !out.testData)
    return;
  out.evalIters = integer("eval_iters", 100);
  if (*out.evalIters < 1)
    fail("eval_iters", "'eval_iters' must be >= 1 (remove valid_data_paths "
                       "and test_data_paths to train without evaluation)");
  setRun("--eval-iters", has("eval_iters")
                             ? "eval_iters = " + std::to_string(*out.evalIters)
                             : "GPT-NeoX's default eval_iters = 100");
  if (!out.validData) {
    if (has("eval_interval"))
      out.understood.push_back("eval_interval: not used without "
                               "valid_data_paths (test_data_paths is "
                               "evaluated once, after the last step)");
    return;
  }
  out.evalInterval = integer("eval_interval", 1000);
  if (*out.evalInterval < 1)
    fail("eval_interval", "'eval_interval' must be >= 1");
  setRun("--eval-interval",
         has("eval_interval")
             ? "eval_interval = " + std::to_string(*out.evalInterval)
             : "GPT-NeoX's default eval_interval = 1000");
}

/// GPT-NeoX's AnnealingLR (megatron/training.py get_learning_rate_scheduler):
/// its iterations are lr_decay_iters (else train_iters), its warmup is the
/// fraction `warmup` of them.
void NeoXReader::readSchedule() {
  auto optimizer = out.compile.find("optimizer");
  const bool onebit =
      optimizer != out.compile.end() && optimizer->second == "onebit_adam";
  if (has("train_iters")) {
    out.steps = integer("train_iters", 0);
    if (*out.steps < 1)
      fail("train_iters", "'train_iters' must be >= 1");
    setRun("--steps", "train_iters = " + std::to_string(*out.steps));
  }
  int64_t iters = 0;
  std::string itersKey;
  if (has("lr_decay_iters")) {
    iters = integer("lr_decay_iters", 0);
    itersKey = "lr_decay_iters";
  } else if (out.steps) {
    iters = *out.steps;
    itersKey = "train_iters";
  } else {
    // A model config GPT-NeoX would merge with another file: dsc's schedule
    // and --steps stand.
    out.understood.push_back(
        "no 'train_iters' (GPT-NeoX needs it, perhaps in another of its "
        "files): dsc-run's --steps and dsc's learning-rate schedule");
    for (const char *key : {"lr_decay_style", "warmup", "min_lr"})
      if (has(key))
        fail(key, std::string("'") + key +
                      "' shapes GPT-NeoX's schedule over 'train_iters'; "
                      "give train_iters (or lr_decay_iters) too");
    if (!onebit && (has("weight_decay") || has("optimizer")))
      setCompile("weight-decay", spellNumber(number("weight_decay", 0.1)),
                 "weight_decay = " + spellNumber(number("weight_decay", 0.1)) +
                     (has("weight_decay") ? "" : " (GPT-NeoX's default)"));
    return;
  }
  iters = std::max<int64_t>(1, iters);
  if (onebit)
    return readOnebitSchedule(iters, itersKey);
  const std::string style = string("lr_decay_style", "linear");
  if (style != "constant" && style != "linear" && style != "cosine" &&
      style != "exponential")
    fail("lr_decay_style",
         "'lr_decay_style' must be constant, linear, cosine or exponential, "
         "got '" +
             style + "'");
  const double fraction = number("warmup", 0.01);
  if (!(fraction >= 0.0 && fraction <= 1.0))
    fail("warmup", "'warmup' is a fraction of the decay iterations, in [0, "
                   "1]; got " +
                       spellNumber(fraction));
  const double warmupIters = fraction * double(iters);
  const double whole = std::round(warmupIters);
  if (std::abs(warmupIters - whole) > 1e-9 * std::max(1.0, warmupIters))
    fail("warmup", "'warmup' " + spellNumber(fraction) + " of " + itersKey +
                       " " + std::to_string(iters) + " is " +
                       spellNumber(warmupIters) +
                       " iterations; dsc's schedules warm up over whole "
                       "steps: choose a warmup that gives a whole number");
  setCompile("lr-schedule", "annealing_" + style,
             "lr_decay_style = " + style +
                 (has("lr_decay_style") ? "" : " (GPT-NeoX's default)") +
                 ", GPT-NeoX's AnnealingLR");
  setCompile("steps", std::to_string(iters), itersKey);
  setCompile("warmup", std::to_string(int64_t(whole)),
             "warmup = " + spellNumber(fraction) +
                 (has("warmup") ? "" : " (GPT-NeoX's default)") + " x " +
                 itersKey);
  const double minLr = number("min_lr", 0.0);
  setCompile("min-lr", spellNumber(minLr),
             "min_lr = " + spellNumber(minLr) +
                 (has("min_lr") ? "" : " (GPT-NeoX's default)"));
  const double decay = number("weight_decay", 0.1);
  setCompile("weight-decay", spellNumber(decay),
             "weight_decay = " + spellNumber(decay) +
                 (has("weight_decay") ? "" : " (GPT-NeoX's default)"));
}

/// GPT-NeoX hands "onebitadam" to DeepSpeed with a scheduler of its own
/// making (neox_arguments/arguments.py): WarmupDecayLR from 0 to lr over
/// int(train_iters x warmup) steps (DeepSpeed's log warm-up), decaying to 0
/// at lr_decay_iters (else train_iters). Its AnnealingLR keys and the
/// top-level weight_decay do not reach that optimizer.
void NeoXReader::readOnebitSchedule(int64_t iters,
                                    const std::string &itersKey) {
  const double fraction = number("warmup", 0.01);
  if (!(fraction >= 0.0 && fraction <= 1.0))
    fail("warmup", "'warmup' is a fraction of train_iters, in [0, 1]; got " +
                       spellNumber(fraction));
  const int64_t trainIters = out.steps ? *out.steps : iters;
  const int64_t warmup = int64_t(double(trainIters) * fraction);
  if (warmup < 1)
    fail("warmup", "with optimizer 'onebitadam' GPT-NeoX warms up over "
                   "int(train_iters x warmup) = " +
                       std::to_string(warmup) +
                       " steps, which DeepSpeed's WarmupDecayLR refuses "
                       "(it needs >= 1)");
  const std::string why = "optimizer onebitadam: GPT-NeoX's WarmupDecayLR";
  setCompile("lr-schedule", "warmup_linear", why);
  setCompile("warmup-type", "log", why + " (DeepSpeed's default warmup_type)");
  setCompile("warmup-start", "0", why + " warmup_min_lr = 0");
  setCompile("min-lr", "0", why + " decays to warmup_min_lr = 0");
  setCompile("warmup", std::to_string(warmup),
             why + " warmup_num_steps = int(train_iters x warmup " +
                 spellNumber(fraction) + ")");
  setCompile("steps", std::to_string(iters),
             why + " total_num_steps = " + itersKey);
  for (const char *key : {"lr_decay_style", "min_lr", "weight_decay"})
    if (has(key))
      out.understood.push_back(
          std::string(key) +
          ": not used with optimizer 'onebitadam' (DeepSpeed builds it "
          "from the optimizer's params, with GPT-NeoX's WarmupDecayLR)");
}

void NeoXReader::readParallel() {
  const int64_t tp = integer("model_parallel_size", 1);
  const int64_t pp = integer("pipe_parallel_size", 0);
  if (tp < 1)
    fail("model_parallel_size", "'model_parallel_size' must be >= 1");
  if (pp < 0)
    fail("pipe_parallel_size", "'pipe_parallel_size' must be >= 0");
  setCompile("tp", std::to_string(tp),
             "model_parallel_size = " + std::to_string(tp));
  // DeepSpeed's ep_size: experts split over consecutive data-parallel ranks
  // (the compiler checks it divides dp and the experts).
  if (has("moe_expert_parallel_size")) {
    const int64_t ep = integer("moe_expert_parallel_size", 1);
    if (ep < 1)
      fail("moe_expert_parallel_size",
           "'moe_expert_parallel_size' must be >= 1");
    setCompile("ep", std::to_string(ep),
               "moe_expert_parallel_size = " + std::to_string(ep));
  }
  // GPT-NeoX: 0 is no pipeline module, 1 a pipeline of one stage.
  setCompile("pp", std::to_string(std::max<int64_t>(pp, 1)),
             "pipe_parallel_size = " + std::to_string(pp));
  readRecompute(tp);
}

void NeoXReader::readRecompute(int64_t tp) {
  const bool on = boolean("checkpoint_activations", false);
  setCompile("recompute", on ? "full" : "none",
             std::string("checkpoint_activations = ") +
                 (on ? "true" : "false"));
  if (!on) {
    for (const char *key :
         {"checkpoint_num_layers", "partition_activations",
          "synchronize_each_layer", "contiguous_checkpointing"})
      if (has(key))
        out.understood.push_back(std::string(key) +
                                 ": no effect without checkpoint_activations");
    return;
  }
  if (integer("checkpoint_num_layers", 1) != 1)
    fail("checkpoint_num_layers",
         "'checkpoint_num_layers' other than 1 is not implemented (dsc's "
         "full recompute keeps every layer's input, GPT-NeoX's 1)");
  if (boolean("partition_activations", false)) {
    if (tp > 1)
      fail("partition_activations",
           "'partition_activations': true with model_parallel_size > 1 "
           "(each tensor-parallel rank keeping a slice of the checkpoints) "
           "is not implemented; dsc's --compile sequence-parallel=true "
           "splits the kept layer inputs over tp");
    out.understood.push_back("partition_activations = true: no effect with "
                             "model_parallel_size 1, as in GPT-NeoX");
  }
  for (const char *key : {"synchronize_each_layer", "contiguous_checkpointing"})
    if (has(key))
      out.understood.push_back(
          std::string(key) +
          ": no effect (a device synchronization / buffer layout of "
          "DeepSpeed's checkpointing; dsc's arena is planned)");
}

void NeoXReader::readData() {
  std::optional<std::string> data;
  std::string from;
  if (has("data_path")) {
    data = string("data_path", "");
    from = "data_path";
  }
  if (has("train_data_paths")) {
    const llvm::json::Array *paths = get("train_data_paths")->getAsArray();
    if (!paths || paths->empty() || !(*paths)[0].getAsString())
      fail("train_data_paths", "'train_data_paths' must be a list of dataset "
                               "prefixes");
    if (paths->size() > 1)
      fail("train_data_paths",
           "blending " + std::to_string(paths->size()) +
               " training datasets is not implemented; give one");
    if (data)
      fail("train_data_paths",
           "'data_path' and 'train_data_paths' are both given; GPT-NeoX "
           "takes one");
    data = (*paths)[0].getAsString()->str();
    from = "train_data_paths[0]";
  }
  if (data) {
    out.data = *data;
    setRun("--data", from + " = " + *data + " (a Megatron indexed dataset)");
  }
  if (has("data_impl")) {
    const std::string impl = string("data_impl", "infer");
    if (impl != "mmap" && impl != "lazy" && impl != "cached" && impl != "infer")
      fail("data_impl", "'data_impl' must be mmap, lazy, cached or infer");
    out.understood.push_back("data_impl = " + impl +
                             ": dsc reads the indexed dataset's .bin/.idx "
                             "files through a memory map");
  }
}

void NeoXReader::readCheckpoints() {
  if (has("save")) {
    out.save = string("save", "");
    setRun("--save", "save = " + *out.save);
  }
  if (has("load")) {
    out.load = string("load", "");
    out.loadIfPresent = true;
    setRun("--load", "load = " + *out.load +
                         " (resumed when it holds a checkpoint, as in "
                         "GPT-NeoX)");
  }
  const char *intervalKey = has("checkpoint_factor") ? "checkpoint_factor"
                            : has("save_interval")   ? "save_interval"
                                                     : nullptr;
  if (intervalKey && !get(intervalKey)->getAsInteger())
    fail(intervalKey, std::string("'") + intervalKey +
                          "' must be an integer (a step interval; the log "
                          "checkpoint_scale is not implemented)");
  const bool saves = out.save.has_value();
  if (intervalKey && saves) {
    out.saveInterval = integer(intervalKey, 0);
    if (*out.saveInterval < 1)
      fail(intervalKey, std::string("'") + intervalKey + "' must be >= 1");
    setRun("--save-interval", std::string(intervalKey) + " = " +
                                  std::to_string(*out.saveInterval));
  }
  if (has("keep_last_n_checkpoints") && saves) {
    out.keep = integer("keep_last_n_checkpoints", 0);
    if (*out.keep < 1)
      fail("keep_last_n_checkpoints", "'keep_last_n_checkpoints' must be >= 1");
    setRun("--keep", "keep_last_n_checkpoints = " + std::to_string(*out.keep));
  }
  const llvm::json::Array *extra =
      has("extra_save_iters") ? get("extra_save_iters")->getAsArray() : nullptr;
  if (extra && !extra->empty() && saves)
    fail("extra_save_iters", "'extra_save_iters' is not implemented (dsc-run "
                             "saves every checkpoint_factor steps and at the "
                             "end)");
  if (!saves)
    for (const char *key : {"checkpoint_factor", "save_interval",
                            "keep_last_n_checkpoints", "extra_save_iters"})
      if (has(key))
        out.understood.push_back(std::string(key) +
                                 ": no effect without 'save', as in GPT-NeoX");
}

} // namespace

bool dsc::run::isClassifiedNeoXTrainingKey(const std::string &key) {
  return kDeepSpeedKeys.count(key) || kNotApplicable.count(key) ||
         kEvaluation.count(key) || kRefusedWhenSet.count(key) ||
         kNeoXKeys.count(key);
}

TrainingSettings
dsc::run::readNeoXTraining(const mlir::dsc::NeoXTrainingKeys &keys,
                           const std::string &path, const std::string &text,
                           int64_t dataParallel) {
  const std::string label = "GPT-NeoX config '" + path + "'";
  // GPT-NeoX's precision key and the DeepSpeed sections agree
  // (neox_arguments/arguments.py): "fp16" enables the fp16 section,
  // "bfloat16" the bf16 one.
  // YAML's null (`key: ~`) is GPT-NeoX's None: the key's default.
  auto given = [&](const char *key) -> const llvm::json::Value * {
    const llvm::json::Value *v = keys.values.get(key);
    return v && v->kind() != llvm::json::Value::Null ? v : nullptr;
  };
  llvm::json::Object ds;
  for (const auto &entry : keys.values)
    if (kDeepSpeedKeys.count(entry.first.str()) &&
        entry.second.kind() != llvm::json::Value::Null)
      ds[entry.first] = entry.second;
  if (const llvm::json::Value *gas = given("gas")) {
    if (ds.get("gradient_accumulation_steps") &&
        *ds.get("gradient_accumulation_steps") != *gas)
      throw Error(label + ": 'gas' and 'gradient_accumulation_steps' "
                          "disagree; GPT-NeoX's gas is the same number");
    ds["gradient_accumulation_steps"] = *gas;
  }
  if (const llvm::json::Value *p = given("precision")) {
    std::optional<llvm::StringRef> precision = p->getAsString();
    auto enabled = [&](const char *section) {
      const llvm::json::Object *o =
          ds.get(section) ? ds.get(section)->getAsObject() : nullptr;
      return o && o->getBoolean("enabled").value_or(false);
    };
    const ConfigValues values(describeNeoX(keys, path));
    auto fail = [&](const std::string &why) { values.fail("precision", why); };
    if (!precision || (*precision != "fp16" && *precision != "bfloat16" &&
                       *precision != "fp32"))
      fail("'precision' must be \"fp16\", \"bfloat16\" or \"fp32\"");
    if ((enabled("fp16") && *precision != "fp16") ||
        (enabled("bf16") && *precision != "bfloat16"))
      fail("'precision' \"" + precision->str() +
           "\" conflicts with the enabled DeepSpeed fp16/bf16 section (as "
           "GPT-NeoX asserts)");
    const char *section = *precision == "fp16"       ? "fp16"
                          : *precision == "bfloat16" ? "bf16"
                                                     : nullptr;
    if (section) {
      llvm::json::Object o;
      if (const llvm::json::Value *old = ds.get(section);
          old && old->getAsObject())
        o = *old->getAsObject();
      o["enabled"] = true;
      ds[section] = std::move(o);
    }
  }
  TrainingSettings out =
      readDeepSpeedKeys(ds, label, text, dataParallel, ConfigFlavor::NeoX);
  NeoXReader(keys, path, out).read();
  return out;
}
