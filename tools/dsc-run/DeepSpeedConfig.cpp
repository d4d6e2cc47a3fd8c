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

#include "DeepSpeedConfig.h"

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

using namespace dsc::run;
using dsc::rt::Error;

namespace {

/// A number in the fewest digits that --dsc-compile reads back exactly.
std::string spell(double v) {
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

class Reader {
public:
  Reader(std::string path, std::string text, DeepSpeedSettings &out)
      : path(std::move(path)), text(std::move(text)), out(out) {}

  [[noreturn]] void fail(const std::string &key, const std::string &why) {
    throw Error("DeepSpeed config '" + path + "'" + lineOf(key) + ": " + why);
  }

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

  const llvm::json::Object &object(const llvm::json::Value &v,
                                   const std::string &key) {
    if (const llvm::json::Object *o = v.getAsObject())
      return *o;
    fail(key, "'" + key + "' must be an object");
  }

  double number(const llvm::json::Object &o, const std::string &key,
                double fallback) {
    const llvm::json::Value *v = o.get(key);
    if (!v)
      return fallback;
    if (std::optional<double> d = v->getAsNumber())
      return *d;
    fail(key, "'" + key + "' must be a number");
  }

  int64_t integer(const llvm::json::Object &o, const std::string &key,
                  int64_t fallback) {
    const llvm::json::Value *v = o.get(key);
    if (!v)
      return fallback;
    if (std::optional<int64_t> i = v->getAsInteger())
      return *i;
    if (std::optional<double> d = v->getAsNumber();
        d && std::floor(*d) == *d && std::abs(*d) < 9e15)
      return int64_t(*d); // 5e8, as DeepSpeed's examples write sizes
    fail(key, "'" + key + "' must be an integer");
  }

  bool boolean(const llvm::json::Object &o, const std::string &key,
               bool fallback) {
    const llvm::json::Value *v = o.get(key);
    if (!v)
      return fallback;
    if (std::optional<bool> b = v->getAsBoolean())
      return *b;
    fail(key, "'" + key + "' must be true or false");
  }

  std::string string(const llvm::json::Object &o, const std::string &key,
                     const std::string &fallback) {
    const llvm::json::Value *v = o.get(key);
    if (!v)
      return fallback;
    if (std::optional<llvm::StringRef> s = v->getAsString())
      return s->str();
    fail(key, "'" + key + "' must be a string");
  }

  void set(const std::string &option, const std::string &value,
           const std::string &because) {
    out.compile[option] = value;
    out.understood.push_back(because + " -> " + option + "=" + value);
  }

  void read(const llvm::json::Object &root, int64_t dataParallel);

private:
  void readOptimizer(const llvm::json::Object &o, double &lr);
  void readScheduler(const llvm::json::Object &o, double lr);
  void readFp16(const llvm::json::Object &o);
  void readZero(const llvm::json::Object &o);

  std::string path, text;
  DeepSpeedSettings &out;
};

/// DeepSpeed's keys dsc does not implement yet, each refused by name.
const std::set<std::string> kNotImplemented = {
    "amp",
    "activation_checkpointing",
    "aio",
    "autotuning",
    "checkpoint",
    "comms_logger",
    "communication_data_type",
    "compression_training",
    "csv_monitor",
    "curriculum_learning",
    "data_efficiency",
    "data_types",
    "disable_allgather",
    "dump_state",
    "elasticity",
    "flops_profiler",
    "gradient_predivide_factor",
    "hybrid_engine",
    "load_universal",
    "memory_breakdown",
    "nebula",
    "pipeline",
    "prescale_gradients",
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
                                    "zero_optimization",
                                    "zero_allow_untested_optimizer",
                                    "steps_per_print",
                                    "wall_clock_breakdown"};
  for (const auto &entry : root) {
    const std::string key = entry.first.str();
    if (kNotImplemented.count(key))
      fail(key, "'" + key +
                    "' is a DeepSpeed key dsc does not implement yet; remove "
                    "it to train without it");
  }
  std::vector<std::string> all = known;
  all.insert(all.end(), kNotImplemented.begin(), kNotImplemented.end());
  onlyKnown(root, "", all);

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

  // The optimizer's learning rate; a scheduler may set its own.
  double lr = 1e-3; // DeepSpeed's Adam default
  if (const llvm::json::Value *v = root.get("optimizer"))
    readOptimizer(object(*v, "optimizer"), lr);
  else
    out.understood.push_back("no 'optimizer': dsc's AdamW (GPT-NeoX's "
                             "defaults), as a client optimizer would be");
  if (const llvm::json::Value *v = root.get("scheduler"))
    readScheduler(object(*v, "scheduler"), lr);
  else
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

  // DeepSpeed's default is no clipping (0.0); dsc's own is 1.0.
  const double clip = number(root, "gradient_clipping", 0.0);
  if (clip < 0)
    fail("gradient_clipping",
         "'gradient_clipping' must be >= 0, got " + spell(clip));
  set("clip-grad-norm", spell(clip),
      "gradient_clipping = " + spell(clip) +
          (root.get("gradient_clipping") ? "" : " (DeepSpeed's default)"));

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

  if (root.get("steps_per_print")) {
    out.stepsPerPrint = integer(root, "steps_per_print", 10);
    if (*out.stepsPerPrint < 1)
      fail("steps_per_print", "'steps_per_print' must be >= 1");
    out.understood.push_back(
        "steps_per_print = " + std::to_string(*out.stepsPerPrint) +
        " -> --log-interval");
  }
  if (boolean(root, "wall_clock_breakdown", false))
    fail("wall_clock_breakdown",
         "'wall_clock_breakdown' is a DeepSpeed key dsc does not implement "
         "yet (dsc-run --trace FILE writes every instruction's time)");
}

void Reader::readOptimizer(const llvm::json::Object &o, double &lr) {
  onlyKnown(o, "optimizer", {"type", "params"});
  const std::string type = llvm::StringRef(string(o, "type", "")).lower();
  if (type != "adam" && type != "adamw")
    fail("type", "optimizer type '" + string(o, "type", "") +
                     "' is not one dsc implements (Adam and AdamW are)");
  static const llvm::json::Object empty;
  const llvm::json::Object &p =
      o.get("params") ? object(*o.get("params"), "params") : empty;
  onlyKnown(p, "optimizer.params",
            {"lr", "betas", "eps", "weight_decay", "adam_w_mode", "torch_adam",
             "bias_correction", "amsgrad"});
  lr = number(p, "lr", 1e-3);
  double beta1 = 0.9, beta2 = 0.999;
  if (const llvm::json::Value *betas = p.get("betas")) {
    const llvm::json::Array *a = betas->getAsArray();
    if (!a || a->size() != 2 || !(*a)[0].getAsNumber() ||
        !(*a)[1].getAsNumber())
      fail("betas", "'betas' must be two numbers, [beta1, beta2]");
    beta1 = *(*a)[0].getAsNumber();
    beta2 = *(*a)[1].getAsNumber();
  }
  const double eps = number(p, "eps", 1e-8);
  const double decay = number(p, "weight_decay", 0.0);
  // DeepSpeed's Adam is AdamW unless adam_w_mode is false (then the decay
  // is an L2 term in the gradient, which dsc does not implement).
  const bool decoupled =
      type == "adamw" ? true : boolean(p, "adam_w_mode", true);
  if (!decoupled && decay != 0.0)
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
  set("optimizer", "adamw", "optimizer.type = " + string(o, "type", ""));
  set("lr", spell(lr), "optimizer.params.lr = " + spell(lr));
  set("beta1", spell(beta1), "optimizer.params.betas[0]");
  set("beta2", spell(beta2), "optimizer.params.betas[1]");
  set("eps", spell(eps), "optimizer.params.eps");
  set("weight-decay", spell(decay), "optimizer.params.weight_decay");
}

void Reader::readScheduler(const llvm::json::Object &o, double lr) {
  onlyKnown(o, "scheduler", {"type", "params"});
  const std::string type = string(o, "type", "");
  static const llvm::json::Object empty;
  const llvm::json::Object &p =
      o.get("params") ? object(*o.get("params"), "params") : empty;
  if (type == "OneCycle" || type == "LRRangeTest")
    fail("type", "scheduler '" + type +
                     "' is a DeepSpeed scheduler dsc does not implement yet "
                     "(WarmupLR, WarmupDecayLR and WarmupCosineLR are)");
  if (type != "WarmupLR" && type != "WarmupDecayLR" && type != "WarmupCosineLR")
    fail("type", "unknown scheduler type '" + type +
                     "'; expected WarmupLR, WarmupDecayLR or WarmupCosineLR");
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
  if (warmup < 0)
    fail("warmup_num_steps", "'warmup_num_steps' must be >= 0");
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

void Reader::readFp16(const llvm::json::Object &o) {
  onlyKnown(o, "fp16",
            {"enabled", "loss_scale", "initial_scale_power",
             "loss_scale_window", "hysteresis", "min_loss_scale",
             "consecutive_hysteresis", "auto_cast"});
  if (!boolean(o, "enabled", false))
    return;
  // dsc's loss scaler is DeepSpeed's dynamic one with its defaults.
  if (number(o, "loss_scale", 0.0) != 0.0)
    fail("loss_scale", "a static 'loss_scale' is not implemented (0, "
                       "dynamic scaling, is)");
  struct Default {
    const char *key;
    double value;
  };
  for (Default d :
       {Default{"initial_scale_power", 16}, Default{"loss_scale_window", 1000},
        Default{"hysteresis", 2}, Default{"min_loss_scale", 1}})
    if (number(o, d.key, d.value) != d.value)
      fail(d.key, "'" + std::string(d.key) +
                      "' other than DeepSpeed's default " + spell(d.value) +
                      " is not implemented (dsc's loss scaler has DeepSpeed's "
                      "defaults)");
  if (boolean(o, "consecutive_hysteresis", false))
    fail("consecutive_hysteresis",
         "'consecutive_hysteresis': true is not implemented");
  if (boolean(o, "auto_cast", false))
    fail("auto_cast", "'auto_cast': true is not implemented");
  set("precision", "fp16", "fp16.enabled = true, dynamic loss scaling");
}

void Reader::readZero(const llvm::json::Object &o) {
  const std::vector<std::string> offload = {"offload_optimizer",
                                            "offload_param"};
  for (const std::string &key : offload)
    if (o.get(key))
      fail(key, "'" + key +
                    "' is not implemented yet (ZeRO-Offload is dsc's next "
                    "piece of work); remove it to train on the device");
  onlyKnown(o, "zero_optimization",
            {"stage", "reduce_bucket_size", "allgather_bucket_size",
             "overlap_comm", "contiguous_gradients", "reduce_scatter",
             "allgather_partitions", "offload_optimizer", "offload_param"});
  const int64_t stage = integer(o, "stage", 0);
  if (stage < 0 || stage > 3)
    fail("stage",
         "ZeRO 'stage' must be 0, 1, 2 or 3, got " + std::to_string(stage));
  set("zero", std::to_string(stage), "zero_optimization.stage");
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

void dsc::run::completeBatchTriple(std::optional<int64_t> train,
                                   std::optional<int64_t> micro,
                                   std::optional<int64_t> gas,
                                   int64_t worldSize, DeepSpeedSettings &out) {
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

DeepSpeedSettings dsc::run::readDeepSpeedConfig(const std::string &path,
                                                int64_t dataParallel) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(path);
  if (!file)
    throw Error("cannot read DeepSpeed config '" + path +
                "': " + file.getError().message());
  std::string text = (*file)->getBuffer().str();
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(text);
  if (!parsed)
    throw Error("DeepSpeed config '" + path +
                "' is not valid JSON: " + llvm::toString(parsed.takeError()));
  const llvm::json::Object *root = parsed->getAsObject();
  if (!root)
    throw Error("DeepSpeed config '" + path + "' must be a JSON object");
  DeepSpeedSettings out;
  Reader reader(path, text, out);
  try {
    reader.read(*root, dataParallel);
  } catch (const Error &e) {
    std::string what = e.what();
    // The batch triple's messages are DeepSpeed's own; say where.
    if (what.rfind("DeepSpeed config", 0) != 0)
      throw Error("DeepSpeed config '" + path + "': " + what);
    throw;
  }
  return out;
}
