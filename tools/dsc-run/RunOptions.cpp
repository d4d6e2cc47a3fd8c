//===- RunOptions.cpp - dsc-run's command line ----------------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// A strict argv parser: every value is checked whole (no "12abc" read as
// 12), and every error names the flag and what was expected.
//
//===----------------------------------------------------------------------===//

#include "RunOptions.h"

#include "dsc/Runtime/Error.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

using namespace dsc::run;
using dsc::rt::Error;

std::string dsc::run::usage() {
  return "usage: dsc-run MODEL [options]\n"
         "\n"
         "Trains on the CPU (or on GPUs: --backend cuda). MODEL is a plan\n"
         "file (dsc-translate --dsc-to-plan), a graph-level module (.mlir),\n"
         "or a GPT-NeoX config (.yml, .yaml, .json); the last two are\n"
         "compiled in-process with --dsc-compile. A module that is already\n"
         "compiled (dsc-opt --dsc-compile's output) runs as it is. A\n"
         "GPT-NeoX config's training keys (optimizer, lr_decay_style,\n"
         "warmup, train_iters, zero_optimization, fp16, save, load, ...)\n"
         "set the run as GPT-NeoX reads them; --deepspeed and then the\n"
         "flags below win over them (docs/configs.md). Several GPT-NeoX\n"
         "configs (dsc-run model.yml local_setup.yml ...) merge as\n"
         "GPT-NeoX merges them: a key two of them set is an error.\n"
         "\n"
         "options:\n"
         "  --steps N            training steps in all (default 200)\n"
         "  --data FILE|PREFIX   byte-level text file, or a Megatron indexed\n"
         "                       dataset PREFIX(.bin/.idx); default: the\n"
         "                       embedded corpus\n"
         "  --seed S             parameter init, data order, dropout "
         "(default 1234)\n"
         "  --lr X               base learning rate of the plan's schedule\n"
         "  --lr-decay-tokens N  decay the learning rate over N tokens\n"
         "                       consumed, not steps (Megatron-DeepSpeed's;\n"
         "                       lr_decay_style linear or cosine)\n"
         "  --lr-warmup-tokens N warm up over N tokens (default: the\n"
         "                       schedule's warm-up steps)\n"
         "  --train-tokens N     stop once N tokens are consumed\n"
         "  --curriculum-seqlen-type T  how a curriculum's shorter steps cut\n"
         "                       their samples (Megatron-DeepSpeed's):\n"
         "                       seqlen_truncate (default: each sample's\n"
         "                       first ids) or seqlen_reshape (every\n"
         "                       sample's pieces, in more rows)\n"
         "  --microbatches M     micro-batches per step (default: the "
         "plan's)\n"
         "  --log-interval K     print a log line every K steps (default 1)\n"
         "  --log-json FILE      write one JSON object of metrics per step\n"
         "  --trace FILE         write a Chrome trace (chrome://tracing, "
         "Perfetto)\n"
         "  --save DIR           write a sharded checkpoint DIR/step-N at the\n"
         "                       end (and every --save-interval K steps);\n"
         "                       DIR/latest names the newest\n"
         "  --keep N             keep only the newest N steps in DIR\n"
         "  --save-async         copy the state to host memory at the step\n"
         "                       boundary and write it beside the next\n"
         "                       steps (one snapshot in flight)\n"
         "  --load DIR           resume from DIR's latest step, or from a\n"
         "                       step directory, saved by any plan of the\n"
         "                       model; --steps is the total\n"
         "  --valid-data PATH    held-out data (as --data) evaluated every\n"
         "                       --eval-interval K steps and at the end:\n"
         "                       --eval-iters N batches (default 100), the\n"
         "                       forward program only; logs validation loss\n"
         "                       and perplexity\n"
         "  --test-data PATH     held-out data evaluated once after the last\n"
         "                       step (--eval-iters batches from its start)\n"
         "  --eval-only          evaluate the --load checkpoint on\n"
         "                       --valid-data and --test-data once, without\n"
         "                       training\n"
         "  --nvme-path DIR      the directory of the NVMe tier's swap files\n"
         "                       (offload-optimizer=nvme; replaces the\n"
         "                       plan's nvme-path)\n"
         "  --compile OPTIONS    more --dsc-compile options for a MODEL that\n"
         "                       is compiled, e.g. \"warmup=20 min-lr=1e-4\"\n"
         "                       (steps, lr, microbatches come from the\n"
         "                       flags above; the default warmup, 10, is\n"
         "                       capped at steps - 1)\n"
         "  --deepspeed FILE     a DeepSpeed ds_config.json (also\n"
         "                       --deepspeed_config, or --compile\n"
         "                       \"ds-config=FILE\"): its batch, optimizer,\n"
         "                       scheduler, precision, clipping and ZeRO\n"
         "                       keys with DeepSpeed's meanings, under the\n"
         "                       flags and --compile; any key dsc does not\n"
         "                       implement is an error naming it\n"
         "  --vocab-size N       a GPT-NeoX config's tokenizer size, when the\n"
         "                       config names a tokenizer file (padded as\n"
         "                       GPT-NeoX pads it)\n"
         "  --np N               run N ranks as threads of this process; the\n"
         "                       plan's mesh must span N ranks (compile with\n"
         "                       --compile \"dp=N\"). Under mpirun, or with\n"
         "                       RANK, WORLD_SIZE, MASTER_ADDR and "
         "MASTER_PORT\n"
         "                       set (the ranks meet through a TCP store:\n"
         "                       docs/multi-node.md), each process is one\n"
         "                       rank and --np, if given, must equal the\n"
         "                       number of processes\n"
         "  --backend cpu|cuda   where the kernels run (default cpu); cuda\n"
         "                       puts each rank on one GPU (its local rank\n"
         "                       modulo the visible GPUs) and its\n"
         "                       collectives on NCCL\n"
         "  --tf32               with --backend cuda: fp32 GEMMs on TF32\n"
         "                       tensor cores\n"
         "  --overlap-comm on|off  run collectives beside compute on a\n"
         "                       communication lane (default: on for cuda,\n"
         "                       off for the cpu) or each in its place\n"
         "  --print-plan         print the plan as text and exit\n"
         "  --write-plan FILE    write the plan it would train (compiled from\n"
         "                       a config or module, a curriculum's lengths\n"
         "                       joined) to FILE, which dsc-run FILE runs,\n"
         "                       and exit\n"
         "  --print-config       print the resolved configuration, each\n"
         "                       value with where it came from (default,\n"
         "                       the GPT-NeoX config, --deepspeed, the\n"
         "                       command line), and exit\n"
         "  --help               this text\n";
}

namespace {

int64_t parseInt(const std::string &flag, const std::string &text,
                 int64_t min) {
  errno = 0;
  char *end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE)
    throw Error(flag + " expects an integer, got '" + text + "'");
  if (v < min)
    throw Error(flag + " must be at least " + std::to_string(min) + ", got " +
                text);
  return v;
}

double parseDouble(const std::string &flag, const std::string &text) {
  errno = 0;
  char *end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v))
    throw Error(flag + " expects a number, got '" + text + "'");
  if (v < 0)
    throw Error(flag + " must not be negative, got " + text);
  return v;
}

} // namespace

RunOptions dsc::run::parseRunOptions(const std::vector<std::string> &args) {
  RunOptions o;
  std::vector<std::string> positional;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    if (arg.size() < 2 || arg[0] != '-' || arg == "-") {
      positional.push_back(arg);
      continue;
    }
    if (arg == "--help" || arg == "-h") {
      o.help = true;
      continue;
    }
    if (arg == "--print-config") {
      o.printConfig = true;
      continue;
    }
    if (arg == "--print-plan") {
      o.printPlan = true;
      continue;
    }
    if (arg == "--tf32") {
      o.tf32 = true;
      continue;
    }
    if (arg == "--eval-only") {
      o.evalOnly = true;
      o.given.insert(arg);
      continue;
    }
    if (arg == "--save-async") {
      o.saveAsync = true;
      continue;
    }
    std::string flag = arg, value;
    bool hasValue = false;
    if (size_t eq = arg.find('='); eq != std::string::npos) {
      flag = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      hasValue = true;
    }
    auto next = [&]() -> std::string {
      if (hasValue)
        return value;
      if (i + 1 >= args.size())
        throw Error(flag + " expects a value");
      return args[++i];
    };
    if (flag == "--steps")
      o.steps = parseInt(flag, next(), 1);
    else if (flag == "--data")
      o.data = next();
    else if (flag == "--seed")
      o.seed = uint64_t(parseInt(flag, next(), 0));
    else if (flag == "--lr")
      o.learningRate = parseDouble(flag, next());
    else if (flag == "--curriculum-seqlen-type") {
      const std::string type = next();
      if (type != "seqlen_truncate" && type != "seqlen_reshape")
        throw Error("--curriculum-seqlen-type: '" + type +
                    "' is not seqlen_truncate or seqlen_reshape");
      o.curriculumReshape = type == "seqlen_reshape";
    } else if (flag == "--lr-decay-tokens")
      o.lrDecayTokens = parseInt(flag, next(), 1);
    else if (flag == "--lr-warmup-tokens")
      o.lrWarmupTokens = parseInt(flag, next(), 0);
    else if (flag == "--train-tokens")
      o.trainTokens = parseInt(flag, next(), 1);
    else if (flag == "--log-interval")
      o.logInterval = parseInt(flag, next(), 1);
    else if (flag == "--deepspeed" || flag == "--deepspeed_config")
      o.deepspeed = next();
    else if (flag == "--log-json")
      o.logJson = next();
    else if (flag == "--write-plan")
      o.writePlan = next();
    else if (flag == "--trace")
      o.trace = next();
    else if (flag == "--save")
      o.save = next();
    else if (flag == "--save-interval")
      o.saveInterval = parseInt(flag, next(), 1);
    else if (flag == "--keep")
      o.keep = parseInt(flag, next(), 1);
    else if (flag == "--load")
      o.load = next();
    else if (flag == "--valid-data")
      o.validData = next();
    else if (flag == "--test-data")
      o.testData = next();
    else if (flag == "--eval-interval")
      o.evalInterval = parseInt(flag, next(), 1);
    else if (flag == "--eval-iters")
      o.evalIters = parseInt(flag, next(), 1);
    else if (flag == "--nvme-path")
      o.nvmePath = next();
    else if (flag == "--compile")
      o.compile = next();
    else if (flag == "--vocab-size")
      o.vocabSize = parseInt(flag, next(), 1);
    else if (flag == "--np")
      o.np = parseInt(flag, next(), 1);
    else if (flag == "--microbatches")
      o.microBatches = parseInt(flag, next(), 1);
    else if (flag == "--overlap-comm") {
      std::string v = next();
      if (v != "on" && v != "off")
        throw Error("--overlap-comm expects on or off, got '" + v + "'");
      o.overlapComm = v == "on";
    } else if (flag == "--backend") {
      o.backend = next();
      if (o.backend != "cpu" && o.backend != "cuda")
        throw Error("--backend expects cpu or cuda, got '" + o.backend + "'");
    } else
      throw Error("unknown option '" + flag + "' (dsc-run --help lists them)");
    if (o.data.empty() && flag == "--data")
      throw Error("--data expects a file or prefix");
    if (o.validData.empty() && flag == "--valid-data")
      throw Error("--valid-data expects a file or prefix");
    if (o.testData.empty() && flag == "--test-data")
      throw Error("--test-data expects a file or prefix");
    o.given.insert(flag == "--deepspeed_config" ? "--deepspeed" : flag);
  }
  if (o.help)
    return o;
  if (positional.empty())
    throw Error("no plan given (usage: dsc-run PLAN [options])");
  // Several GPT-NeoX configs merge, as GPT-NeoX's launcher merges them
  // (deepy.py train.py model.yml local_setup.yml); anything else is one.
  auto isYaml = [](const std::string &path) {
    auto endsWith = [&](const std::string &suffix) {
      return path.size() >= suffix.size() &&
             path.compare(path.size() - suffix.size(), suffix.size(), suffix) ==
                 0;
    };
    return endsWith(".yml") || endsWith(".yaml");
  };
  if (positional.size() > 1 &&
      !std::all_of(positional.begin(), positional.end(), isYaml))
    throw Error("one plan expected, got '" + positional[0] + "' and '" +
                positional[1] +
                "' (only GPT-NeoX configs, .yml or .yaml, merge)");
  o.input = positional[0];
  o.moreConfigs.assign(positional.begin() + 1, positional.end());
  if (o.tf32 && o.backend != "cuda")
    throw Error("--tf32 needs --backend cuda");
  // Saving options without a place to save would be silently ignored.
  const char *saveFlag = o.saveInterval ? "--save-interval"
                         : o.keep       ? "--keep"
                         : o.saveAsync  ? "--save-async"
                                        : nullptr;
  if (o.save.empty() && saveFlag)
    throw Error(std::string(saveFlag) + " needs --save DIR");
  // Megatron-DeepSpeed would warm up by tokens and decay by steps; dsc
  // evaluates the whole schedule on tokens or on steps.
  if (o.lrWarmupTokens && !o.lrDecayTokens)
    throw Error("--lr-warmup-tokens needs --lr-decay-tokens (a warm-up by "
                "tokens before a decay by steps is not built)");
  return o;
}
