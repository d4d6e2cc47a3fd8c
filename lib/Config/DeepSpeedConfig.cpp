//===- DeepSpeedConfig.cpp - a ds_config.json as dsc options --------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Each section is read by one function that takes every key it knows and
// refuses the rest: an unknown key names its line and the nearest known
// key; a DeepSpeed key dsc does not implement (yet) is named as such.
// DeepSpeed's defaults are written where they differ from dsc's (AdamW's
// beta2 0.999 and weight decay 0, no gradient clipping, a constant
// learning rate without a scheduler), so the run trains as DeepSpeed
// would.
//
//===----------------------------------------------------------------------===//

#include "dsc/Config/DeepSpeedConfig.h"
#include "dsc/Config/ConfigValues.h"
#include "dsc/Config/RelaxedJson.h"

#include "dsc/Runtime/Error.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>

using namespace dsc::config;
using dsc::rt::Error;

std::string dsc::config::spellNumber(double v) {
  // Whole numbers as integers (2000, not 2e+03).
  if (std::floor(v) == v && std::abs(v) < 1e15)
    return std::to_string(int64_t(v));
  for (int digits = 1; digits < 17; ++digits) {
    std::ostringstream os;
    os.precision(digits);
    os << v;
    if (std::strtod(os.str().c_str(), nullptr) == v)
      return os.str();
  }
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

namespace {

std::string spell(double v) { return spellNumber(v); }

class Reader : public ConfigValues {
public:
  Reader(std::string label, std::string text, TrainingSettings &out,
         ConfigFlavor flavor)
      : ConfigValues([this](const std::string &key, const std::string &why) {
          return this->label + lineOf(key) + ": " + why;
        }),
        label(std::move(label)), text(std::move(text)), out(out),
        flavor(flavor) {}

  /// ", line N" of the first `"key"` in the file, or "".
  std::string lineOf(const std::string &key) const {
    size_t at = text.find("\"" + key + "\"");
    if (at == std::string::npos)
      return "";
    return ", line " + std::to_string(1 + std::count(text.begin(),
                                                     text.begin() + at, '\n'));
  }

  /// Refuses the keys of `object` outside `known`, with a suggestion.
  void onlyKnown(const llvm::json::Object &object, const std::string &section,
                 const std::vector<std::string> &known) {
    for (const auto &entry : object) {
      const std::string key = entry.first.str();
      if (std::find(known.begin(), known.end(), key) != known.end())
        continue;
      std::string best;
      unsigned bestDistance = 4;
      for (const std::string &k : known) {
        unsigned d = llvm::StringRef(key).edit_distance(k, true, bestDistance);
        if (d < bestDistance) {
          bestDistance = d;
          best = k;
        }
      }
      fail(key, "unknown key '" + key + "'" +
                    (section.empty() ? "" : " in '" + section + "'") +
                    (best.empty() ? std::string()
                                  : "; did you mean '" + best + "'?"));
    }
  }

  void set(const std::string &option, const std::string &value,
           const std::string &because) {
    out.compile[option] = value;
    out.origin[option] = because;
    out.understood.push_back(because + " -> " + option + "=" + value);
  }

  void read(const llvm::json::Object &root, int64_t dataParallel);

private:
  void readOptimizer(const llvm::json::Object &o, double &lr);
  /// An Adam-family optimizer's `betas` ([0.9, 0.999] when absent).
  std::pair<double, double> readBetas(const llvm::json::Object &params) {
    const llvm::json::Value *betas = params.get("betas");
    if (!betas)
      return {0.9, 0.999};
    const llvm::json::Array *a = betas->getAsArray();
    if (!a || a->size() != 2 || !(*a)[0].getAsNumber() ||
        !(*a)[1].getAsNumber())
      fail("betas", "'betas' must be two numbers, [beta1, beta2]");
    return {*(*a)[0].getAsNumber(), *(*a)[1].getAsNumber()};
  }
  void readZeroOneAdam(const llvm::json::Object &params,
                       const std::string &typeName, double &lr);
  void readOnebitLamb(const llvm::json::Object &params,
                      const std::string &typeName, double &lr);
  /// What OnebitAdam (`optimizer`, compiled as optimizer=`compiled`),
  /// OnebitLamb and ZeroOneAdam share: their common arguments and
  /// `ownKeys`, the phases' switch (`freezeMeaning` says when; "" for
  /// ZeroOneAdam, which has none); DeepSpeed stores bias_correction,
  /// eps_inside_sqrt and max_grad_norm and never uses them; cuda_aware and
  /// comm_backend_name choose its communication.
  void readOnebit(const llvm::json::Object &p, const std::string &typeName,
                  double &lr, const char *optimizer, const char *compiled,
                  const std::vector<std::string> &ownKeys,
                  const std::string &freezeMeaning);
  void readOnebitAdam(const llvm::json::Object &params,
                      const std::string &typeName, double &lr);
  void readScheduler(const llvm::json::Object &o, double lr);
  void readOneCycle(const llvm::json::Object &params);
  void readOneCycleRate(const llvm::json::Object &params);
  void readRangeTest(const llvm::json::Object &params);
  void readFp16(const llvm::json::Object &o);
  void readZero(const llvm::json::Object &o);
  void readOffload(const llvm::json::Object &zero, int64_t stage);
  void readAio(const llvm::json::Object &o);
  void readBatch(const llvm::json::Object &root, int64_t dataParallel);
  void readActivationCheckpointing(const llvm::json::Object &o);
  void readCheckpoint(const llvm::json::Object &o);

  std::string label, text;
  TrainingSettings &out;
  ConfigFlavor flavor;
  bool neox() const { return flavor == ConfigFlavor::NeoX; }
};

/// DeepSpeed's keys dsc does not implement yet, each refused by name.
const std::set<std::string> kNotImplemented = {
    "amp",
    "autotuning",
    "comms_logger",
    "communication_data_type",
    "compression_training",
    "csv_monitor",
    "data_efficiency",
    "disable_allgather",
    "dump_state",
    "elasticity",
    "flops_profiler",
    "hybrid_engine",
    "memory_breakdown",
    "nebula",
    "pipeline",
    "sparse_attention",
    "sparse_gradients",
    "tensorboard",
    "wandb",
    "zero_force_ds_cpu_optimizer",
};

void Reader::read(const llvm::json::Object &root, int64_t dataParallel) {
  std::vector<std::string> known = {"train_batch_size",
                                    "train_micro_batch_size_per_gpu",
                                    "gradient_accumulation_steps",
                                    "optimizer",
                                    "scheduler",
                                    "fp16",
                                    "bf16",
                                    "gradient_clipping",
                                    "prescale_gradients",
                                    "gradient_predivide_factor",
                                    "zero_optimization",
                                    "zero_allow_untested_optimizer",
                                    "aio",
                                    "activation_checkpointing",
                                    "data_types",
                                    "checkpoint",
                                    "steps_per_print",
                                    "wall_clock_breakdown",
                                    "curriculum_learning"};
  for (const auto &entry : root) {
    const std::string key = entry.first.str();
    if (key == "data_efficiency")
      // Its curriculum's seqlen metrics exist here in another form; its
      // sampler (the order of the samples) and random-LTD do not.
      fail(key,
           "'data_efficiency' is a DeepSpeed key dsc does not implement "
           "yet (its DeepSpeedDataSampler orders the samples otherwise "
           "than dsc's loader, and random-LTD is not built); a "
           "sequence-length curriculum trains from a 'curriculum_learning' "
           "block, with dsc-run --curriculum-seqlen-type seqlen_truncate "
           "or seqlen_reshape as its metrics name them "
           "(docs/curriculum.md); remove it to train without it");
    else if (kNotImplemented.count(key))
      fail(key, "'" + key +
                    "' is a DeepSpeed key dsc does not implement yet; remove "
                    "it to train without it");
  }
  std::vector<std::string> all = known;
  all.insert(all.end(), kNotImplemented.begin(), kNotImplemented.end());
  onlyKnown(root, "", all);

  // A GPT-NeoX config may leave the batch to another of its files (GPT-NeoX
  // merges several); the model's micro-batch then stands.
  if (neox() && !root.get("train_batch_size") &&
      !root.get("train_micro_batch_size_per_gpu")) {
    if (root.get("gradient_accumulation_steps")) {
      out.gradientAccumulation =
          integer(root, "gradient_accumulation_steps", 1);
      if (out.gradientAccumulation < 1)
        fail("gradient_accumulation_steps",
             "'gradient_accumulation_steps' must be >= 1");
      set("microbatches", std::to_string(out.gradientAccumulation),
          "gradient_accumulation_steps = " +
              std::to_string(out.gradientAccumulation));
    }
  } else {
    readBatch(root, dataParallel);
  }

  // The optimizer's learning rate; a scheduler may set its own.
  double lr = 1e-3; // DeepSpeed's Adam default
  if (const llvm::json::Value *v = root.get("optimizer"))
    readOptimizer(object(*v, "optimizer"), lr);
  else if (neox())
    out.understood.push_back("no 'optimizer' (GPT-NeoX needs one, perhaps in "
                             "another of its files): dsc's AdamW");
  else
    out.understood.push_back("no 'optimizer': dsc's AdamW (GPT-NeoX's "
                             "defaults), as a client optimizer would be");
  if (neox() && root.get("scheduler"))
    fail("scheduler", "'scheduler' is DeepSpeed's; a GPT-NeoX config sets "
                      "its schedule with lr_decay_style, warmup, "
                      "lr_decay_iters and min_lr");
  if (const llvm::json::Value *v = root.get("scheduler"))
    readScheduler(object(*v, "scheduler"), lr);
  else if (!neox())
    set("lr-schedule", "constant",
        "no 'scheduler' (DeepSpeed keeps the "
        "optimizer's rate)");

  const bool fp16 =
      root.get("fp16") &&
      boolean(object(*root.get("fp16"), "fp16"), "enabled", false);
  const bool bf16 =
      root.get("bf16") &&
      boolean(object(*root.get("bf16"), "bf16"), "enabled", false);
  if (root.get("bf16"))
    onlyKnown(object(*root.get("bf16"), "bf16"), "bf16", {"enabled"});
  if (fp16 && bf16)
    fail("bf16", "'fp16' and 'bf16' are both enabled; DeepSpeed takes one");
  if (root.get("fp16"))
    readFp16(object(*root.get("fp16"), "fp16"));
  if (bf16)
    set("precision", "bf16", "bf16.enabled = true");
  else if (!fp16)
    set("precision", "fp32", "neither fp16 nor bf16 enabled");

  // DeepSpeed's engine sums the gradients, then divides by the
  // data-parallel size (its defaults: prescale_gradients false,
  // gradient_predivide_factor 1): dsc's average. The other orders round
  // differently and are not built.
  if (boolean(root, "prescale_gradients", false))
    fail("prescale_gradients",
         "'prescale_gradients': true divides the gradients before their "
         "all-reduce, which dsc does not implement; dsc averages after it "
         "(DeepSpeed's default, false)");
  if (root.get("prescale_gradients"))
    out.understood.push_back("prescale_gradients = false: the gradients are "
                             "averaged after their all-reduce, as dsc does");
  if (const double f = number(root, "gradient_predivide_factor", 1.0); f != 1.0)
    fail("gradient_predivide_factor",
         "'gradient_predivide_factor' " + spell(f) +
             " splits the average around the all-reduce, which dsc does "
             "not implement; use 1.0 (DeepSpeed's default)");
  if (root.get("gradient_predivide_factor"))
    out.understood.push_back("gradient_predivide_factor = 1.0: the average "
                             "after the all-reduce, as dsc does");

  // DeepSpeed's default is no clipping (0.0); GPT-NeoX's is 1.0.
  const double clipDefault = neox() ? 1.0 : 0.0;
  const double clip = number(root, "gradient_clipping", clipDefault);
  if (clip < 0)
    fail("gradient_clipping",
         "'gradient_clipping' must be >= 0, got " + spell(clip));
  set("clip-grad-norm", spell(clip),
      "gradient_clipping = " + spell(clip) +
          (root.get("gradient_clipping") ? ""
           : neox()                      ? " (GPT-NeoX's default)"
                                         : " (DeepSpeed's default)"));

  if (const llvm::json::Value *v = root.get("zero_optimization");
      v && v->getAsBoolean())
    // DeepSpeed's legacy form: true is stage 1.
    set("zero", *v->getAsBoolean() ? "1" : "0",
        std::string("zero_optimization = ") +
            (*v->getAsBoolean() ? "true (stage 1)" : "false"));
  else if (v)
    readZero(object(*v, "zero_optimization"));
  else
    set("zero", "0", "no 'zero_optimization'");
  // dsc's ZeRO stages run every optimizer it has.
  (void)boolean(root, "zero_allow_untested_optimizer", false);
  // After the ZeRO section: it applies only to an NVMe offload.
  if (const llvm::json::Value *v = root.get("aio"))
    readAio(object(*v, "aio"));

  if (const llvm::json::Value *v = root.get("activation_checkpointing"))
    readActivationCheckpointing(object(*v, "activation_checkpointing"));
  if (const llvm::json::Value *v = root.get("data_types")) {
    const llvm::json::Object &o = object(*v, "data_types");
    onlyKnown(o, "data_types", {"grad_accum_dtype"});
    const std::string dtype = string(o, "grad_accum_dtype", "fp32");
    if (dtype != "fp32")
      fail("grad_accum_dtype",
           "'grad_accum_dtype' \"" + dtype +
               "\" is not implemented: dsc accumulates gradients in fp32 "
               "under every precision");
    out.understood.push_back("data_types.grad_accum_dtype = fp32: as dsc "
                             "accumulates gradients");
  }
  if (const llvm::json::Value *v = root.get("checkpoint"))
    readCheckpoint(object(*v, "checkpoint"));

  if (root.get("steps_per_print")) {
    const int64_t every = integer(root, "steps_per_print", 10);
    if (every < 1)
      fail("steps_per_print", "'steps_per_print' must be >= 1");
    if (neox()) {
      out.understood.push_back(
          "steps_per_print = " + std::to_string(every) +
          ": DeepSpeed's own progress line under GPT-NeoX; dsc-run's log "
          "follows log_interval");
    } else {
      out.logInterval = every;
      out.runOrigin["--log-interval"] = "steps_per_print";
      out.understood.push_back("steps_per_print = " + std::to_string(every) +
                               " -> --log-interval");
    }
  }
  if (root.get("wall_clock_breakdown")) {
    out.wallClockBreakdown = boolean(root, "wall_clock_breakdown", false);
    out.runOrigin["wall-clock-breakdown"] = "wall_clock_breakdown";
    out.understood.push_back(
        std::string("wall_clock_breakdown = ") +
        (*out.wallClockBreakdown ? "true" : "false") + ": the step log " +
        (*out.wallClockBreakdown ? "splits" : "does not split") +
        " each step's time into forward-backward and optimizer");
  }
  // The sequence-length curriculum (docs/curriculum.md); the model's length
  // bounds max_difficulty where the model is known (dsc-run).
  if (const llvm::json::Value *v = root.get("curriculum_learning")) {
    llvm::Expected<CurriculumSchedule> schedule =
        readCurriculumSchedule(object(*v, "curriculum_learning"));
    if (!schedule)
      fail("curriculum_learning", llvm::toString(schedule.takeError()));
    if (schedule->enabled) {
      out.curriculum = *schedule;
      out.understood.push_back(
          "curriculum_learning: sequence length " +
          std::to_string(schedule->minDifficulty) + " -> " +
          std::to_string(schedule->maxDifficulty) +
          ", the training step compiled per length");
    } else {
      out.understood.push_back("curriculum_learning: not enabled");
    }
  }
}

void Reader::readBatch(const llvm::json::Object &root, int64_t dataParallel) {
  auto optional = [&](const char *key) -> std::optional<int64_t> {
    if (!root.get(key))
      return std::nullopt;
    return integer(root, key, 0);
  };
  completeBatchTriple(
      optional("train_batch_size"), optional("train_micro_batch_size_per_gpu"),
      optional("gradient_accumulation_steps"), dataParallel, out);
  out.understood.push_back(
      "train_batch_size " + std::to_string(out.trainBatchSize) +
      " = train_micro_batch_size_per_gpu " +
      std::to_string(out.microBatchPerGpu) + " x gradient_accumulation_steps " +
      std::to_string(out.gradientAccumulation) + " x " +
      std::to_string(dataParallel) + " data-parallel ranks");
  set("microbatches", std::to_string(out.gradientAccumulation),
      "gradient_accumulation_steps = " +
          std::to_string(out.gradientAccumulation));
}

void Reader::readActivationCheckpointing(const llvm::json::Object &o) {
  onlyKnown(o, "activation_checkpointing",
            {"partition_activations", "cpu_checkpointing",
             "contiguous_memory_optimization", "number_checkpoints",
             "synchronize_checkpoint_boundary", "profile"});
  if (boolean(o, "partition_activations", false))
    fail("partition_activations",
         "'partition_activations': true (each tensor-parallel rank keeping a "
         "slice of the checkpoints) is not implemented; dsc's "
         "sequence-parallel=true splits the kept layer inputs over tp");
  if (boolean(o, "cpu_checkpointing", false))
    fail("cpu_checkpointing", "'cpu_checkpointing': true (checkpoints in "
                              "host memory) is not implemented yet");
  if (boolean(o, "profile", false))
    fail("profile", "'profile': true is not implemented (dsc-run --trace "
                    "FILE times every instruction)");
  (void)boolean(o, "contiguous_memory_optimization", false);
  (void)boolean(o, "synchronize_checkpoint_boundary", false);
  (void)integer(o, "number_checkpoints", 0);
  out.understood.push_back(
      "activation_checkpointing: configures the checkpointing a model asks "
      "for (contiguous_memory_optimization, number_checkpoints and "
      "synchronize_checkpoint_boundary place or time it and do not apply to "
      "dsc's planned arena); dsc recomputes with --compile "
      "recompute=full|selective" +
      std::string(neox() ? " (GPT-NeoX: checkpoint_activations)" : ""));
}

void Reader::readCheckpoint(const llvm::json::Object &o) {
  onlyKnown(o, "checkpoint",
            {"tag_validation", "load_universal", "use_node_local_storage",
             "parallel_write"});
  const std::string tag = string(o, "tag_validation", "Warn");
  if (tag != "Warn" && tag != "Ignore" && tag != "Fail")
    fail("tag_validation", "'tag_validation' must be \"Warn\", \"Ignore\" or "
                           "\"Fail\", got '" +
                               tag + "'");
  if (o.get("tag_validation"))
    out.understood.push_back(
        "checkpoint.tag_validation = " + tag +
        ": dsc checks the manifest of every checkpoint on every rank and "
        "refuses one that disagrees (Fail)");
  if (o.get("load_universal"))
    out.understood.push_back(
        std::string("checkpoint.load_universal = ") +
        (boolean(o, "load_universal", false) ? "true" : "false") +
        ": dsc's checkpoints are universal, loaded by any plan of the model");
  if (boolean(o, "use_node_local_storage", false))
    fail("use_node_local_storage",
         "'use_node_local_storage': true is not implemented (dsc-run "
         "--save writes one directory every rank can read)");
  if (o.get("parallel_write"))
    fail("parallel_write", "'parallel_write' is not implemented (each dsc "
                           "rank already writes the pieces it holds)");
}

void Reader::readOptimizer(const llvm::json::Object &o, double &lr) {
  onlyKnown(o, "optimizer", {"type", "params"});
  const std::string typeName = string(o, "type", "");
  const std::string type = llvm::StringRef(typeName).lower();
  static const llvm::json::Object empty;
  const llvm::json::Object &p =
      o.get("params") ? object(*o.get("params"), "params") : empty;
  // DeepSpeed builds OneBitAdam (GPT-NeoX passes "onebitadam" to it).
  if (type == "onebitadam")
    return readOnebitAdam(p, typeName, lr);
  if (type == "onebitlamb" && !neox())
    return readOnebitLamb(p, typeName, lr);
  if (type == "zerooneadam" && !neox())
    return readZeroOneAdam(p, typeName, lr);
  // GPT-NeoX builds "adam" itself (apex's or DeepSpeed's FusedAdam, AdamW
  // unless adam_w_mode is false) with its top-level weight_decay; its other
  // types are other optimizers.
  if (neox() && type != "adam")
    fail("type", "optimizer type '" + typeName +
                     "' is not one dsc implements for a GPT-NeoX config "
                     "(\"Adam\", GPT-NeoX's FusedAdam, and \"onebitadam\" "
                     "are)");
  if (!neox() && type == "sgd") {
    // torch.optim.SGD, which DeepSpeed builds for "SGD".
    onlyKnown(p, "optimizer.params",
              {"lr", "momentum", "dampening", "weight_decay", "nesterov"});
    lr = number(p, "lr", 1e-3);
    if (number(p, "dampening", 0.0) != 0.0)
      fail("dampening", "'dampening' other than 0 is not implemented");
    const double momentum = number(p, "momentum", 0.0);
    const bool nesterov = boolean(p, "nesterov", false);
    if (nesterov && momentum <= 0)
      fail("nesterov", "Nesterov momentum requires a momentum (torch.optim.SGD "
                       "refuses it too)");
    set("optimizer", "sgd", "optimizer.type = " + typeName);
    set("lr", spell(lr), "optimizer.params.lr");
    set("momentum", spell(momentum),
        "optimizer.params.momentum" +
            std::string(p.get("momentum") ? "" : " (torch's default)"));
    set("nesterov", nesterov ? "true" : "false", "optimizer.params.nesterov");
    set("weight-decay", spell(number(p, "weight_decay", 0.0)),
        "optimizer.params.weight_decay (added to the gradient of matrices, "
        "as torch.optim.SGD)");
    return;
  }
  if (type != "adam" && type != "adamw")
    fail("type", "optimizer type '" + typeName +
                     "' is not one dsc implements (Adam, AdamW, SGD, "
                     "OneBitAdam, ZeroOneAdam and OneBitLamb are)");
  onlyKnown(p, "optimizer.params",
            {"lr", "betas", "eps", "weight_decay", "adam_w_mode", "torch_adam",
             "bias_correction", "amsgrad"});
  if (neox() && p.get("weight_decay"))
    fail("weight_decay", "GPT-NeoX passes its top-level 'weight_decay' to the "
                         "optimizer (a second one in optimizer.params stops "
                         "it); set weight_decay at the top level");
  lr = number(p, "lr", 1e-3);
  const auto [beta1, beta2] = readBetas(p);
  const double eps = number(p, "eps", 1e-8);
  const double decay = number(p, "weight_decay", 0.0);
  // DeepSpeed's Adam is AdamW unless adam_w_mode is false (then the decay
  // is an L2 term in the gradient, which dsc does not implement).
  const bool decoupled =
      type == "adamw" ? true : boolean(p, "adam_w_mode", true);
  if (!decoupled && (decay != 0.0 || neox()))
    fail("adam_w_mode",
         "'adam_w_mode': false adds the weight decay to the gradient (Adam "
         "with L2), which dsc does not implement; use AdamW or "
         "weight_decay 0");
  if (!boolean(p, "bias_correction", true))
    fail("bias_correction", "'bias_correction': false is not implemented");
  if (boolean(p, "amsgrad", false))
    fail("amsgrad", "'amsgrad': true is not implemented");
  // torch_adam chooses DeepSpeed's implementation, not the mathematics.
  (void)boolean(p, "torch_adam", false);
  set("optimizer", "adamw", "optimizer.type = " + typeName);
  set("lr", spell(lr), "optimizer.params.lr = " + spell(lr));
  set("beta1", spell(beta1), "optimizer.params.betas[0]");
  set("beta2", spell(beta2), "optimizer.params.betas[1]");
  set("eps", spell(eps), "optimizer.params.eps");
  if (!neox())
    set("weight-decay", spell(decay), "optimizer.params.weight_decay");
}

/// DeepSpeed's OnebitAdam (runtime/fp16/onebit/adam.py, docs/onebit.md):
/// its constructor's arguments, each honored or refused by name.
void Reader::readOnebitAdam(const llvm::json::Object &p,
                            const std::string &typeName, double &lr) {
  // DeepSpeed's first step only initializes (real step k is its step
  // k + 1) and it compresses once its step reaches freeze_step: real steps
  // from max(freeze_step, 1) on.
  readOnebit(p, typeName, lr, "OnebitAdam", "onebit_adam", {},
             "the first compressed step");
}

/// DeepSpeed's ZeroOneAdam (runtime/fp16/onebit/zoadam.py, docs/onebit.md):
/// its constructor's arguments, each honored or refused by name; its policy
/// replaces the freeze step.
void Reader::readZeroOneAdam(const llvm::json::Object &p,
                             const std::string &typeName, double &lr) {
  readOnebit(p, typeName, lr, "ZeroOneAdam", "zero_one_adam",
             {"var_freeze_step", "var_update_scaler", "local_step_scaler",
              "local_step_clipper"},
             /*freezeMeaning=*/"");
  for (auto [key, option, fallback, least, meaning] :
       {std::make_tuple("var_freeze_step", "var-freeze-step", 100000, 0,
                        "the last step that may update the variance"),
        std::make_tuple("var_update_scaler", "var-update-scaler", 16, 1,
                        "variance updates before their interval doubles"),
        std::make_tuple("local_step_scaler", "local-step-scaler", 32678, 1,
                        "local steps before the sync interval doubles"),
        std::make_tuple("local_step_clipper", "local-step-clipper", 16, 1,
                        "the longest sync interval")}) {
    const int64_t value = integer(p, key, fallback);
    if (value < least)
      fail(key, std::string("'") + key + "' must be >= " +
                    std::to_string(least) + ", got " + std::to_string(value));
    set(option, std::to_string(value),
        std::string("optimizer.params.") + key +
            (p.get(key) ? "" : " (DeepSpeed's default)") + ": " + meaning);
  }
}

/// DeepSpeed's OnebitLamb (runtime/fp16/onebit/lamb.py, docs/onebit.md):
/// its constructor's arguments, each honored or refused by name.
void Reader::readOnebitLamb(const llvm::json::Object &p,
                            const std::string &typeName, double &lr) {
  // Its warm-up ends after the step at which DeepSpeed's count (one ahead
  // of the real steps) reaches freeze_step: real steps from
  // max(freeze_step, 2) compress; the compiler keeps freeze_step itself,
  // which also says whether the warm-up took the fresh variance.
  readOnebit(p, typeName, lr, "OnebitLamb", "onebit_lamb",
             {"max_coeff", "min_coeff", "coeff_beta", "factor_max",
              "factor_min", "factor_threshold"},
             "compressed from step max(freeze_step, 2)");
  for (auto [key, option, fallback] :
       {std::make_tuple("max_coeff", "max-coeff", 10.0),
        std::make_tuple("min_coeff", "min-coeff", 0.01),
        std::make_tuple("coeff_beta", "coeff-beta", 0.9),
        std::make_tuple("factor_max", "factor-max", 4.0),
        std::make_tuple("factor_min", "factor-min", 0.5),
        std::make_tuple("factor_threshold", "factor-threshold", 0.1)})
    set(option, spell(number(p, key, fallback)),
        std::string("optimizer.params.") + key +
            (p.get(key) ? "" : " (DeepSpeed's default)"));
}

void Reader::readOnebit(const llvm::json::Object &p,
                        const std::string &typeName, double &lr,
                        const char *optimizer, const char *compiled,
                        const std::vector<std::string> &ownKeys,
                        const std::string &freezeMeaning) {
  std::vector<std::string> known = {"lr",
                                    "freeze_step",
                                    "betas",
                                    "eps",
                                    "weight_decay",
                                    "bias_correction",
                                    "eps_inside_sqrt",
                                    "max_grad_norm",
                                    "amsgrad",
                                    "cuda_aware",
                                    "comm_backend_name"};
  known.insert(known.end(), ownKeys.begin(), ownKeys.end());
  // 0/1 Adam has no freeze step: its policy replaces it.
  if (std::string(optimizer) == "ZeroOneAdam")
    known.erase(std::find(known.begin(), known.end(), "freeze_step"));
  onlyKnown(p, "optimizer.params", known);
  if (boolean(p, "amsgrad", false))
    fail("amsgrad", std::string("the 1-bit optimizers do not support the "
                                "AMSGrad variant (as DeepSpeed's ") +
                        optimizer + " refuses it)");
  if (number(p, "max_grad_norm", 0.0) != 0.0)
    fail("max_grad_norm",
         std::string(optimizer) +
             "'s 'max_grad_norm' is stored but never applied by DeepSpeed; "
             "clip with the top-level 'gradient_clipping' instead");
  lr = number(p, "lr", 1e-3);
  const auto [beta1, beta2] = readBetas(p);
  set("optimizer", compiled, "optimizer.type = " + typeName);
  if (!freezeMeaning.empty()) {
    const int64_t freeze = integer(p, "freeze_step", 100000);
    if (freeze < 0)
      fail("freeze_step",
           "'freeze_step' must be >= 0, got " + std::to_string(freeze));
    set("freeze-step", std::to_string(std::max<int64_t>(freeze, 1)),
        "optimizer.params.freeze_step" +
            std::string(p.get("freeze_step") ? "" : " (DeepSpeed's default)") +
            ": " + freezeMeaning);
  }
  set("lr", spell(lr), "optimizer.params.lr = " + spell(lr));
  set("beta1", spell(beta1), "optimizer.params.betas[0]");
  set("beta2", spell(beta2), "optimizer.params.betas[1]");
  set("eps", spell(number(p, "eps", 1e-8)), "optimizer.params.eps");
  set("weight-decay", spell(number(p, "weight_decay", 0.0)),
      "optimizer.params.weight_decay" +
          std::string(neox() ? " (GPT-NeoX's top-level weight_decay does not "
                               "reach the optimizer DeepSpeed builds)"
                             : ""));
  for (const char *key : {"bias_correction", "eps_inside_sqrt"})
    if (p.get(key))
      out.understood.push_back(
          std::string("optimizer.params.") + key + " = " +
          (boolean(p, key, false) ? "true" : "false") +
          ": stored but never used by DeepSpeed's " + optimizer +
          " (no bias correction, eps outside the square root), nor by dsc");
  for (const char *key : {"cuda_aware", "comm_backend_name"})
    if (p.get(key))
      out.understood.push_back(
          std::string("optimizer.params.") + key +
          ": DeepSpeed's choice of communication backend; dsc's "
          "communicator (threads, MPI or NCCL) carries the compressed "
          "all-reduce");
}

void Reader::readScheduler(const llvm::json::Object &o, double lr) {
  onlyKnown(o, "scheduler", {"type", "params"});
  const std::string type = string(o, "type", "");
  static const llvm::json::Object empty;
  const llvm::json::Object &p =
      o.get("params") ? object(*o.get("params"), "params") : empty;
  if (type == "OneCycle")
    return readOneCycle(p);
  if (type == "LRRangeTest")
    return readRangeTest(p);
  if (type != "WarmupLR" && type != "WarmupDecayLR" && type != "WarmupCosineLR")
    fail("type", "unknown scheduler type '" + type +
                     "'; expected WarmupLR, WarmupDecayLR, WarmupCosineLR, "
                     "OneCycle or LRRangeTest");
  const bool cosine = type == "WarmupCosineLR";
  std::vector<std::string> known = {"warmup_num_steps", "warmup_type",
                                    "last_batch_iteration"};
  if (cosine) {
    known.insert(known.end(),
                 {"total_num_steps", "warmup_min_ratio", "cos_min_ratio"});
  } else {
    known.insert(known.end(), {"warmup_min_lr", "warmup_max_lr"});
    if (type == "WarmupDecayLR")
      known.push_back("total_num_steps");
  }
  onlyKnown(p, "scheduler.params", known);
  if (integer(p, "last_batch_iteration", -1) != -1)
    fail("last_batch_iteration",
         "'last_batch_iteration' other than -1 resumes a schedule; resume "
         "from a dsc checkpoint (--load) instead");
  const std::string warmupType = string(p, "warmup_type", "log");
  if (warmupType != "log" && warmupType != "linear")
    fail("warmup_type", "'warmup_type' must be \"log\" or \"linear\", got '" +
                            warmupType + "'");
  const int64_t warmup = integer(p, "warmup_num_steps", 1000);
  // DeepSpeed 0.19 refuses 0 ("must be a positive integer"); dsc's warmup 0
  // would mean no warm-up, which no DeepSpeed scheduler has.
  if (warmup < 1)
    fail("warmup_num_steps", "'warmup_num_steps' must be >= 1, as DeepSpeed "
                             "requires; got " +
                                 std::to_string(warmup));
  set("warmup", std::to_string(warmup), type + ".warmup_num_steps");
  set("warmup-type", warmupType, type + ".warmup_type");
  if (type != "WarmupLR") {
    if (!p.get("total_num_steps"))
      fail("params", type + " needs 'total_num_steps'");
    set("steps", std::to_string(integer(p, "total_num_steps", 0)),
        type + ".total_num_steps");
  }
  if (cosine) {
    // Ratios of the optimizer's learning rate.
    const double start = number(p, "warmup_min_ratio", 0.0) * lr;
    const double end = number(p, "cos_min_ratio", 0.0001) * lr;
    set("lr-schedule", "warmup_cosine", "scheduler.type = WarmupCosineLR");
    set("lr", spell(lr), "the optimizer's lr");
    set("warmup-start", spell(start), "warmup_min_ratio * lr");
    set("min-lr", spell(end), "cos_min_ratio * lr");
    return;
  }
  // WarmupLR and WarmupDecayLR set the rate themselves, from
  // warmup_min_lr to warmup_max_lr; the decay ends at warmup_min_lr.
  const double lo = number(p, "warmup_min_lr", 0.0);
  const double hi = number(p, "warmup_max_lr", 0.001);
  set("lr-schedule", type == "WarmupLR" ? "warmup" : "warmup_linear",
      "scheduler.type = " + type);
  set("lr", spell(hi), type + ".warmup_max_lr");
  set("warmup-start", spell(lo), type + ".warmup_min_lr");
  set("min-lr", spell(lo),
      type == "WarmupLR" ? "WarmupLR (no decay; dsc's min-lr must not exceed "
                           "lr)"
                         : "WarmupDecayLR decays to warmup_min_lr");
}

void Reader::readOneCycle(const llvm::json::Object &p) {
  onlyKnown(p, "scheduler.params",
            {"cycle_min_lr", "cycle_max_lr", "decay_lr_rate",
             "cycle_first_step_size", "cycle_second_step_size",
             "cycle_first_stair_count", "cycle_second_stair_count",
             "decay_step_size", "cycle_momentum", "cycle_min_mom",
             "cycle_max_mom", "decay_mom_rate", "last_batch_iteration"});
  if (integer(p, "last_batch_iteration", -1) != -1)
    fail("last_batch_iteration",
         "'last_batch_iteration' other than -1 resumes a schedule; resume "
         "from a dsc checkpoint (--load) instead");
  for (const char *key : {"cycle_min_lr", "cycle_max_lr"})
    if (!p.get(key))
      fail("params", std::string("OneCycle needs '") + key + "'");
  // DeepSpeed cycles the betas of an optimizer that has them (true by
  // default): betas = (momentum, 0.99), momentum falling as the rate rises,
  // cycle_min_mom from the scheduler's construction on. torch's SGD has
  // none: DeepSpeed disables it there with a warning.
  const bool cycleMomentum = boolean(p, "cycle_momentum", true);
  auto optimizer = out.compile.find("optimizer");
  const std::string optimizerName =
      optimizer == out.compile.end() ? "adamw" : optimizer->second;
  const char *momKeys[] = {"cycle_min_mom", "cycle_max_mom", "decay_mom_rate"};
  if (cycleMomentum && optimizerName == "adamw") {
    const double lo = number(p, "cycle_min_mom", 0.8),
                 hi = number(p, "cycle_max_mom", 0.9);
    if (!(lo > 0 && lo <= hi && hi < 1))
      fail("cycle_min_mom", "OneCycle's momentum is Adam's beta1: it needs 0 "
                            "< cycle_min_mom <= cycle_max_mom < 1, got " +
                                spell(lo) + " and " + spell(hi));
    auto source = [&](const char *key) {
      return std::string("OneCycle.") + key +
             (p.get(key) ? "" : " (DeepSpeed's default)");
    };
    set("cycle-momentum", "true",
        source("cycle_momentum") + ": beta1 cycles inversely to the rate");
    set("cycle-min-mom", spell(lo), source("cycle_min_mom"));
    set("cycle-max-mom", spell(hi), source("cycle_max_mom"));
    set("decay-mom-rate", spell(number(p, "decay_mom_rate", 0.0)),
        source("decay_mom_rate"));
    set("beta1", spell(lo),
        "OneCycle.cycle_min_mom: DeepSpeed's OneCycle replaces betas[0] "
        "(the first step's; dsc.cyclic_momentum gives each step's)");
    set("beta2", "0.99",
        "OneCycle.cycle_momentum: DeepSpeed's OneCycle sets betas to "
        "(momentum, 0.99), replacing the optimizer's betas[1]");
    return readOneCycleRate(p);
  }
  if (cycleMomentum && optimizerName != "sgd")
    fail("cycle_momentum",
         "OneCycle's 'cycle_momentum' (true by default) cycles the betas "
         "of optimizer=" +
             optimizerName +
             ", which dsc builds for AdamW only; set \"cycle_momentum\": "
             "false to cycle the learning rate only");
  for (const char *key : momKeys)
    if (p.get(key))
      out.understood.push_back(
          std::string("OneCycle.") + key +
          (cycleMomentum ? ": no effect (torch's SGD has no betas: "
                           "DeepSpeed disables cycle_momentum, with a "
                           "warning)"
                         : ": no effect with cycle_momentum false"));
  if (cycleMomentum)
    out.understood.push_back(
        "OneCycle.cycle_momentum: no effect with SGD (torch's SGD has no "
        "betas: DeepSpeed disables it, with a warning)");
  readOneCycleRate(p);
}

/// OneCycle's learning-rate cycle (its momentum is readOneCycle's).
void Reader::readOneCycleRate(const llvm::json::Object &p) {
  const double lo = number(p, "cycle_min_lr", 0),
               hi = number(p, "cycle_max_lr", 0);
  set("lr-schedule", "one_cycle", "scheduler.type = OneCycle");
  set("lr", spell(hi), "OneCycle.cycle_max_lr");
  set("min-lr", spell(lo), "OneCycle.cycle_min_lr");
  set("cycle-first-size", spell(number(p, "cycle_first_step_size", 2000)),
      "OneCycle.cycle_first_step_size");
  if (p.get("cycle_second_step_size"))
    set("cycle-second-size", spell(number(p, "cycle_second_step_size", 0)),
        "OneCycle.cycle_second_step_size");
  set("cycle-first-stairs",
      std::to_string(integer(p, "cycle_first_stair_count", 0)),
      "OneCycle.cycle_first_stair_count");
  if (p.get("cycle_second_stair_count"))
    set("cycle-second-stairs",
        std::to_string(integer(p, "cycle_second_stair_count", 0)),
        "OneCycle.cycle_second_stair_count");
  set("cycle-decay-size", spell(number(p, "decay_step_size", 0)),
      "OneCycle.decay_step_size");
  set("cycle-rate", spell(number(p, "decay_lr_rate", 0)),
      "OneCycle.decay_lr_rate");
}

void Reader::readRangeTest(const llvm::json::Object &p) {
  onlyKnown(p, "scheduler.params",
            {"lr_range_test_min_lr", "lr_range_test_step_size",
             "lr_range_test_step_rate", "lr_range_test_staircase",
             "last_batch_iteration"});
  if (integer(p, "last_batch_iteration", -1) != -1)
    fail("last_batch_iteration",
         "'last_batch_iteration' other than -1 resumes a schedule; resume "
         "from a dsc checkpoint (--load) instead");
  set("lr-schedule", "range_test", "scheduler.type = LRRangeTest");
  set("lr", spell(number(p, "lr_range_test_min_lr", 1e-3)),
      "LRRangeTest.lr_range_test_min_lr");
  set("cycle-first-size", spell(number(p, "lr_range_test_step_size", 2000)),
      "LRRangeTest.lr_range_test_step_size");
  set("cycle-rate", spell(number(p, "lr_range_test_step_rate", 1.0)),
      "LRRangeTest.lr_range_test_step_rate");
  set("cycle-staircase",
      boolean(p, "lr_range_test_staircase", false) ? "true" : "false",
      "LRRangeTest.lr_range_test_staircase");
}

void Reader::readFp16(const llvm::json::Object &o) {
  std::vector<std::string> known = {"enabled",
                                    "loss_scale",
                                    "initial_scale_power",
                                    "loss_scale_window",
                                    "hysteresis",
                                    "min_loss_scale",
                                    "consecutive_hysteresis",
                                    "auto_cast"};
  // GPT-NeoX's configs also mark the section with "fp16": true or
  // "type": "fp16" (its own, which DeepSpeed passes over).
  if (neox())
    known.insert(known.end(), {"fp16", "type"});
  onlyKnown(o, "fp16", known);
  const bool enabled = boolean(o, "enabled", false);
  if (neox() && o.get("fp16") && boolean(o, "fp16", false) != enabled)
    fail("fp16", "'fp16.fp16' and 'fp16.enabled' disagree");
  if (neox() && o.get("type") && string(o, "type", "") != "fp16")
    fail("type", "'fp16.type' must be \"fp16\"");
  if (!enabled)
    return;
  if (number(o, "loss_scale", 0.0) != 0.0)
    fail("loss_scale", "a static 'loss_scale' is not implemented (0, "
                       "dynamic scaling, is)");
  // DeepSpeed's DynamicLossScaler with the config's settings.
  dsc::rt::LossScalerConfig scaler;
  const int64_t power = integer(o, "initial_scale_power", 16);
  if (power < 0 || power > 64)
    fail("initial_scale_power", "'initial_scale_power' must be in [0, 64]");
  scaler.initialScale = std::ldexp(1.0, int(power));
  scaler.scaleWindow = integer(o, "loss_scale_window", 1000);
  if (scaler.scaleWindow < 1)
    fail("loss_scale_window", "'loss_scale_window' must be >= 1");
  const int64_t hysteresis = integer(o, "hysteresis", 2);
  if (hysteresis < 1 || hysteresis > 1000000)
    fail("hysteresis", "'hysteresis' must be in [1, 1000000]");
  scaler.hysteresis = int(hysteresis);
  scaler.minScale = number(o, "min_loss_scale", 1);
  if (!(scaler.minScale > 0))
    fail("min_loss_scale", "'min_loss_scale' must be > 0");
  scaler.consecutiveHysteresis = boolean(o, "consecutive_hysteresis", false);
  if (boolean(o, "auto_cast", false))
    fail("auto_cast", "'auto_cast': true is not implemented");
  out.lossScaler = scaler;
  out.runOrigin["loss-scaler"] = "fp16";
  out.understood.push_back(
      "fp16: dynamic loss scaling from 2^" + std::to_string(power) +
      ", window " + std::to_string(scaler.scaleWindow) + ", hysteresis " +
      std::to_string(scaler.hysteresis) + ", min " + spell(scaler.minScale) +
      (scaler.consecutiveHysteresis ? ", consecutive hysteresis" : ""));
  set("precision", "fp16", "fp16.enabled = true");
}

/// ZeRO-Offload's offload_optimizer (and its legacy cpu_offload) and
/// ZeRO-Infinity's offload_param.
void Reader::readOffload(const llvm::json::Object &zero, int64_t stage) {
  std::string device = "none", path;
  std::string because;
  if (const llvm::json::Value *v = zero.get("offload_optimizer")) {
    const llvm::json::Object &o = object(*v, "offload_optimizer");
    onlyKnown(o, "offload_optimizer",
              {"device", "nvme_path", "pin_memory", "buffer_count", "fast_init",
               "ratio"});
    device = string(o, "device", "none");
    path = string(o, "nvme_path", "");
    because = "zero_optimization.offload_optimizer.device = " + device;
    if (device != "none" && device != "cpu" && device != "nvme")
      fail("device", "'offload_optimizer.device' must be \"none\", "
                     "\"cpu\" or \"nvme\", got \"" +
                         device + "\"");
    if (number(o, "ratio", 1.0) != 1.0)
      fail("ratio", "a partial optimizer offload ('offload_optimizer.ratio' "
                    "other than 1) is not implemented");
    if (device == "nvme" && path.empty())
      fail("device", "'offload_optimizer.device' = \"nvme\" needs "
                     "'nvme_path', the directory of the swap files");
    if (device != "nvme" && !path.empty())
      out.understood.push_back("offload_optimizer.nvme_path: no effect "
                               "(the device is not nvme)");
    for (const char *key : {"pin_memory", "buffer_count", "fast_init"})
      if (o.get(key))
        out.understood.push_back(
            std::string("offload_optimizer.") + key +
            ": no effect (dsc's host tier is one pinned allocation and its "
            "NVMe swaps keep two parameters' states in flight)");
  }
  // DeepSpeed's legacy spelling of offload_optimizer: {"device": "cpu"}.
  if (boolean(zero, "cpu_offload", false)) {
    if (device != "none" && device != "cpu")
      fail("cpu_offload", "'cpu_offload' and 'offload_optimizer.device' = \"" +
                              device + "\" disagree");
    device = "cpu";
    because = "zero_optimization.cpu_offload = true";
  }
  if (device != "none") {
    // DeepSpeed offloads only from its ZeRO optimizers; at stage 0 it
    // would train on the device without a word.
    if (stage == 0)
      fail(zero.get("cpu_offload") ? "cpu_offload" : "offload_optimizer",
           "optimizer offload needs ZeRO stage 1, 2 or 3 (DeepSpeed "
           "offloads only from its ZeRO optimizers)");
    set("offload-optimizer", device == "cpu" ? "host" : "nvme", because);
    if (device == "nvme")
      set("nvme-path", path, "zero_optimization.offload_optimizer.nvme_path");
  } else if (zero.get("offload_optimizer")) {
    out.understood.push_back("offload_optimizer.device = none: no offload");
  }
  if (const llvm::json::Value *v = zero.get("offload_param")) {
    const llvm::json::Object &o = object(*v, "offload_param");
    onlyKnown(o, "offload_param",
              {"device", "nvme_path", "pin_memory", "buffer_count",
               "buffer_size", "max_in_cpu"});
    const std::string param = string(o, "device", "none");
    const std::string paramPath = string(o, "nvme_path", "");
    if (param != "none" && param != "cpu" && param != "nvme")
      fail("device", "'offload_param.device' must be \"none\", \"cpu\" or "
                     "\"nvme\", got \"" +
                         param + "\"");
    if (param == "none") {
      out.understood.push_back("offload_param.device = none: no offload");
      return;
    }
    if (stage != 3)
      fail("device", "'offload_param' needs ZeRO stage 3 (only stage 3 "
                     "partitions the parameters), got stage " +
                         std::to_string(stage));
    if (device == "none")
      fail("device", "'offload_param' needs 'offload_optimizer' (\"cpu\" "
                     "or \"nvme\"): dsc updates an offloaded parameter "
                     "chunk where it lives");
    if (param == "nvme" && paramPath.empty())
      fail("device", "'offload_param.device' = \"nvme\" needs 'nvme_path', "
                     "the directory of the swap files");
    if (param == "nvme" && device == "nvme" && path != paramPath)
      fail("nvme_path", "'offload_param.nvme_path' (\"" + paramPath +
                            "\") and 'offload_optimizer.nvme_path' (\"" + path +
                            "\") differ; dsc keeps one NVMe directory");
    if (param != "nvme" && !paramPath.empty())
      out.understood.push_back("offload_param.nvme_path: no effect (the "
                               "device is not nvme)");
    set("offload-params", param == "cpu" ? "host" : "nvme",
        "zero_optimization.offload_param.device = " + param);
    if (param == "nvme" && device != "nvme")
      set("nvme-path", paramPath, "zero_optimization.offload_param.nvme_path");
    for (const char *key :
         {"pin_memory", "buffer_count", "buffer_size", "max_in_cpu"})
      if (o.get(key))
        out.understood.push_back(
            std::string("offload_param.") + key +
            ": no effect (dsc's host tier is one pinned allocation; each "
            "chunk is fetched one gather ahead of its use into the device "
            "arena's planned bytes)");
  }
}

/// DeepSpeed's async I/O settings: the NVMe lane's request size and depth.
void Reader::readAio(const llvm::json::Object &o) {
  onlyKnown(o, "aio",
            {"block_size", "queue_depth", "thread_count",
             "intra_op_parallelism", "single_submit", "overlap_events",
             "use_gds"});
  if (boolean(o, "use_gds", false))
    fail("use_gds", "'aio.use_gds' (GPUDirect Storage) is not implemented");
  auto on = [&](const char *key) {
    auto it = out.compile.find(key);
    return it != out.compile.end() && it->second == "nvme";
  };
  if (!on("offload-optimizer") && !on("offload-params")) {
    out.understood.push_back("aio: no effect (nothing is offloaded to NVMe)");
    return;
  }
  const int64_t block = integer(o, "block_size", 1048576);
  if (block < 4096 || block > (int64_t(1) << 30))
    fail("block_size", "'aio.block_size' must be in [4096, 2^30], got " +
                           std::to_string(block));
  const int64_t depth = integer(o, "queue_depth", 8);
  if (depth < 1 || depth > 4096)
    fail("queue_depth", "'aio.queue_depth' must be in [1, 4096], got " +
                            std::to_string(depth));
  set("nvme-block-bytes", std::to_string(block),
      std::string("aio.block_size") +
          (o.get("block_size") ? "" : " (DeepSpeed's default)"));
  set("nvme-queue-depth", std::to_string(depth),
      std::string("aio.queue_depth") +
          (o.get("queue_depth") ? "" : " (DeepSpeed's default)"));
  for (const char *key : {"thread_count", "intra_op_parallelism",
                          "single_submit", "overlap_events"})
    if (o.get(key))
      out.understood.push_back(
          std::string("aio.") + key +
          ": no effect (dsc's NVMe lane is one thread keeping queue_depth "
          "requests in flight through io_uring)");
}

void Reader::readZero(const llvm::json::Object &o) {
  // DeepSpeed's keys that place, time or cache work without changing what
  // is computed: accepted, each said to have no effect in dsc.
  static const std::vector<std::pair<std::string, std::string>> noEffect = {
      {"stage3_max_reuse_distance",
       "dsc's plan frees a gathered parameter after its last use in the "
       "step"},
      {"stage3_gather_16bit_weights_on_model_save",
       "dsc's checkpoints hold whole fp32 tensors, loadable by any plan"},
      {"stage3_gather_fp16_weights_on_model_save",
       "dsc's checkpoints hold whole fp32 tensors, loadable by any plan"},
      {"sub_group_size", "dsc's optimizer updates one parameter at a time"},
      {"round_robin_gradients", "a gradient-copy order of ZeRO-Offload"},
      {"ignore_unused_parameters", "dsc's graph has no unused parameter"},
      {"elastic_checkpoint", "dsc's checkpoints load into any plan"},
      {"stage3_max_live_parameters",
       "dsc holds at most the gathered parameter in use and, with "
       "prefetch, the next one"},
  };
  std::vector<std::string> known = {"stage",
                                    "reduce_bucket_size",
                                    "allgather_bucket_size",
                                    "overlap_comm",
                                    "contiguous_gradients",
                                    "reduce_scatter",
                                    "allgather_partitions",
                                    "offload_optimizer",
                                    "offload_param",
                                    "cpu_offload",
                                    "stage3_prefetch_bucket_size",
                                    "stage3_param_persistence_threshold",
                                    "load_from_fp32_weights",
                                    "zero_quantized_weights",
                                    "zero_quantized_gradients",
                                    "zero_hpz_partition_size",
                                    "mics_shard_size"};
  for (const auto &[key, why] : noEffect)
    known.push_back(key);
  onlyKnown(o, "zero_optimization", known);
  const int64_t stage = integer(o, "stage", 0);
  if (stage < 0 || stage > 3)
    fail("stage",
         "ZeRO 'stage' must be 0, 1, 2 or 3, got " + std::to_string(stage));
  set("zero", std::to_string(stage), "zero_optimization.stage");
  readOffload(o, stage);
  for (const auto &[key, why] : noEffect)
    if (o.get(key))
      out.understood.push_back(key + ": no effect (" + why + ")");
  if (!boolean(o, "load_from_fp32_weights", true))
    fail("load_from_fp32_weights", "'load_from_fp32_weights': false is not "
                                   "implemented (dsc resumes from its fp32 "
                                   "masters)");
  // ZeRO++ and MiCS change what is communicated (quantized) or where.
  if (boolean(o, "zero_quantized_weights", false) ||
      boolean(o, "zero_quantized_gradients", false))
    fail(o.get("zero_quantized_weights") ? "zero_quantized_weights"
                                         : "zero_quantized_gradients",
         "ZeRO++'s quantized communication is not implemented");
  if (integer(o, "zero_hpz_partition_size", 1) != 1)
    fail("zero_hpz_partition_size",
         "ZeRO++'s hierarchical partitioning ('zero_hpz_partition_size' "
         "other than 1) is not implemented");
  if (integer(o, "mics_shard_size", -1) != -1)
    fail("mics_shard_size", "MiCS ('mics_shard_size') is not implemented");
  if (stage == 3) {
    // DeepSpeed's defaults: parameters of up to 1e5 elements stay whole,
    // prefetching on (a bucket of 5e7 elements).
    const int64_t persist =
        integer(o, "stage3_param_persistence_threshold", 100000);
    if (persist < 0)
      fail("stage3_param_persistence_threshold",
           "'stage3_param_persistence_threshold' must be >= 0");
    set("persistence-threshold", std::to_string(persist),
        "zero_optimization.stage3_param_persistence_threshold" +
            std::string(o.get("stage3_param_persistence_threshold")
                            ? ""
                            : " (DeepSpeed's default)"));
    const int64_t prefetch =
        integer(o, "stage3_prefetch_bucket_size", 50000000);
    if (prefetch < 0)
      fail("stage3_prefetch_bucket_size",
           "'stage3_prefetch_bucket_size' must be >= 0");
    set("prefetch", prefetch > 0 ? "true" : "false",
        "zero_optimization.stage3_prefetch_bucket_size = " +
            std::to_string(prefetch) +
            (o.get("stage3_prefetch_bucket_size") ? ""
                                                  : " (DeepSpeed's default)") +
            (prefetch > 0 ? " (dsc prefetches the next gathered parameter)"
                          : ""));
  } else {
    for (const char *key :
         {"stage3_param_persistence_threshold", "stage3_prefetch_bucket_size"})
      if (o.get(key))
        out.understood.push_back(std::string(key) +
                                 ": no effect below stage 3");
  }
  if (o.get("reduce_bucket_size")) {
    // DeepSpeed counts elements; dsc's buckets are fp32 bytes.
    const int64_t elements = integer(o, "reduce_bucket_size", 0);
    if (elements < 1)
      fail("reduce_bucket_size", "'reduce_bucket_size' must be >= 1");
    set("bucket-bytes", std::to_string(4 * elements),
        "reduce_bucket_size = " + std::to_string(elements) + " elements");
  }
  if (o.get("allgather_bucket_size")) {
    const int64_t elements = integer(o, "allgather_bucket_size", 0);
    if (elements < 1)
      fail("allgather_bucket_size", "'allgather_bucket_size' must be >= 1");
    out.understood.push_back(
        "allgather_bucket_size = " + std::to_string(elements) +
        ": no effect, dsc's ZeRO all-gathers each parameter's shards in one "
        "collective");
  }
  if (o.get("overlap_comm")) {
    out.overlapComm = boolean(o, "overlap_comm", false);
    out.runOrigin["--overlap-comm"] = "zero_optimization.overlap_comm";
    out.understood.push_back(std::string("overlap_comm = ") +
                             (*out.overlapComm ? "true" : "false") +
                             " -> --overlap-comm");
  }
  // dsc's gradients always live contiguously in its planned arena.
  (void)boolean(o, "contiguous_gradients", true);
  if (!boolean(o, "reduce_scatter", true))
    fail("reduce_scatter", "'reduce_scatter': false (all-reduce instead of "
                           "reduce-scatter under ZeRO) is not implemented");
  if (!boolean(o, "allgather_partitions", true))
    fail("allgather_partitions",
         "'allgather_partitions': false is not implemented");
}

} // namespace

void dsc::config::completeBatchTriple(std::optional<int64_t> train,
                                      std::optional<int64_t> micro,
                                      std::optional<int64_t> gas,
                                      int64_t worldSize,
                                      TrainingSettings &out) {
  // runtime/config.py's _set_batch_related_parameters, then its assertion;
  // the sizes given are checked first, so that completing divides by none
  // that is zero.
  if (worldSize < 1)
    throw Error("the data-parallel size must be >= 1, got " +
                std::to_string(worldSize));
  if (train && *train <= 0)
    throw Error("Train batch size: " + std::to_string(*train) +
                " has to be greater than 0");
  if (micro && *micro <= 0)
    throw Error("Micro batch size per gpu: " + std::to_string(*micro) +
                " has to be greater than 0");
  if (gas && *gas <= 0)
    throw Error("Gradient accumulation steps: " + std::to_string(*gas) +
                " has to be greater than 0");
  if (train && micro && gas) {
  } else if (train && micro) {
    gas = *train / *micro;
    *gas /= worldSize;
  } else if (train && gas) {
    micro = *train / worldSize;
    *micro /= *gas;
  } else if (micro && gas) {
    train = *micro * *gas * worldSize;
  } else if (train) {
    gas = 1;
    micro = *train / worldSize;
  } else if (micro) {
    train = *micro * worldSize;
    gas = 1;
  } else {
    throw Error("Either train_batch_size or train_micro_batch_size_per_gpu "
                "needs to be provided");
  }
  if (*train <= 0)
    throw Error("Train batch size: " + std::to_string(*train) +
                " has to be greater than 0");
  if (*micro <= 0)
    throw Error("Micro batch size per gpu: " + std::to_string(*micro) +
                " has to be greater than 0");
  if (*gas <= 0)
    throw Error("Gradient accumulation steps: " + std::to_string(*gas) +
                " has to be greater than 0");
  if (*train != *micro * *gas * worldSize)
    throw Error("Check batch related parameters. train_batch_size is not "
                "equal to micro_batch_per_gpu * gradient_acc_step * "
                "world_size " +
                std::to_string(*train) + " != " + std::to_string(*micro) +
                " * " + std::to_string(*gas) + " * " +
                std::to_string(worldSize));
  out.trainBatchSize = *train;
  out.microBatchPerGpu = *micro;
  out.gradientAccumulation = *gas;
}

TrainingSettings dsc::config::readDeepSpeedKeys(const llvm::json::Object &root,
                                                const std::string &label,
                                                const std::string &text,
                                                int64_t dataParallel,
                                                ConfigFlavor flavor) {
  TrainingSettings out;
  Reader reader(label, text, out, flavor);
  try {
    reader.read(root, dataParallel);
  } catch (const Error &e) {
    std::string what = e.what();
    // The batch triple's messages are DeepSpeed's own; say where.
    if (what.rfind(label, 0) != 0)
      throw Error(label + ": " + what);
    throw;
  }
  return out;
}

TrainingSettings dsc::config::readDeepSpeedConfig(const std::string &path,
                                                  int64_t dataParallel) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(path);
  if (!file)
    throw Error("cannot read DeepSpeed config '" + path +
                "': " + file.getError().message());
  std::string error;
  const std::string text = relaxedJsonToJson((*file)->getBuffer(), error);
  if (!error.empty())
    throw Error("DeepSpeed config '" + path + "', " + error);
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(text);
  if (!parsed)
    throw Error("DeepSpeed config '" + path +
                "' is not valid JSON: " + llvm::toString(parsed.takeError()) +
                " (dsc reads JSON with hjson's comments and trailing "
                "commas, as DeepSpeed's configs use them)");
  const llvm::json::Object *root = parsed->getAsObject();
  if (!root)
    throw Error("DeepSpeed config '" + path + "' must be a JSON object");
  return readDeepSpeedKeys(*root, "DeepSpeed config '" + path + "'", text,
                           dataParallel, ConfigFlavor::DeepSpeed);
}

std::optional<TrainingSettings>
dsc::config::tryReadDeepSpeedConfig(const std::string &path,
                                    int64_t dataParallel, std::string &error) {
  try {
    return readDeepSpeedConfig(path, dataParallel);
  } catch (const std::exception &e) {
    error = e.what();
    return std::nullopt;
  }
}
