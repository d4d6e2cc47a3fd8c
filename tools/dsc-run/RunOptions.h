//===- RunOptions.h - dsc-run's command line --------------------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// What dsc-run was asked to do, and the argv parser that fills it. Plain
// C++ (no LLVM option library) so the runtime half of dsc-run, and its
// tests, need nothing from MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_TOOLS_DSCRUN_RUNOPTIONS_H
#define DSC_TOOLS_DSCRUN_RUNOPTIONS_H

#include "dsc/Runtime/LossScaler.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace dsc::config {
struct CurriculumSchedule;
} // namespace dsc::config

namespace dsc::run {

struct RunOptions {
  /// The plan file (later also a graph-level .mlir module to compile).
  std::string input;
  /// The GPT-NeoX config files after `input`, merged into it in order.
  std::vector<std::string> moreConfigs;
  int64_t steps = 200;
  /// --data: "" for the embedded corpus, a file (byte-level tokens) or a
  /// Megatron indexed-dataset prefix.
  std::string data;
  uint64_t seed = 1234;
  /// --lr: replaces the schedule's base learning rate.
  std::optional<double> learningRate;
  /// Megatron-DeepSpeed's token-based schedule (docs/curriculum.md):
  /// --lr-decay-tokens, --lr-warmup-tokens (the plan's warm-up steps when
  /// not given), and --train-tokens, which stops training once that many
  /// tokens are consumed (or at --steps, whichever comes first).
  std::optional<int64_t> lrDecayTokens, lrWarmupTokens, trainTokens;
  /// --curriculum-seqlen-type: how a curriculum's shorter steps cut their
  /// samples (SeqlenReshape.h); unset: seqlen_truncate.
  std::optional<bool> curriculumReshape;
  int64_t logInterval = 1;
  std::string logJson; // JSON-lines metrics file, "" for none
  std::string trace;   // Chrome trace file, "" for none
  /// --microbatches: gradient-accumulation steps; 0 keeps the plan's.
  int64_t microBatches = 0;
  /// --save: checkpoint directory, a step-N directory in it written every
  /// saveInterval steps and at the end (docs/checkpoints.md); --load: a
  /// checkpoint directory (its latest step) or a step directory to resume
  /// from, saved by any plan of the model (--steps stays the total).
  std::string save, load;
  /// --nvme-path: the directory of the plan's NVMe-tier files (replaces
  /// the one compiled in).
  std::string nvmePath;
  /// A config's load (GPT-NeoX's): a directory without a checkpoint yet
  /// starts training from scratch instead of failing.
  bool loadIfPresent = false;
  int64_t saveInterval = 0; // 0: only at the end
  int64_t keep = 0;         // --keep: newest steps kept; 0: all
  /// --save-async: snapshot at the step boundary, write beside training.
  bool saveAsync = false;
  /// --print-plan: print the plan as text and exit (no training).
  bool printPlan = false;
  /// --write-plan FILE: write the plan to FILE and exit (no training).
  std::string writePlan;
  /// --print-config: print the resolved configuration, each value with
  /// where it came from, and exit (no compile, no training).
  bool printConfig = false;
  /// --compile: extra --dsc-compile options for a model compiled in-process.
  std::string compile;
  /// --deepspeed / --deepspeed_config: a DeepSpeed ds_config.json whose
  /// keys set the compile and run options (dsc/Config/DeepSpeedConfig.h).
  std::string deepspeed;
  /// --vocab-size: the tokenizer's size for a GPT-NeoX config that names
  /// its tokenizer instead (0: the config's).
  int64_t vocabSize = 0;
  /// --np: ranks to run as threads of this process (0: not given, one rank;
  /// under mpirun the MPI world decides and --np must agree with it).
  int64_t np = 0;
  /// --backend: "cpu" (default) or "cuda" (one GPU per rank: the rank's
  /// local index modulo the visible devices).
  std::string backend = "cpu";
  /// --tf32: the CUDA backend's fp32 GEMMs on TF32 tensor cores.
  bool tf32 = false;
  /// --overlap-comm on|off: collectives beside compute or in their place
  /// (Executor::setOverlapCommunication); unset: the backend's default.
  std::optional<bool> overlapComm;
  /// fp16's dynamic loss scaler; unset: DeepSpeed's defaults. Set by a
  /// config's fp16 section (dsc/Config/DeepSpeedConfig.h).
  std::optional<rt::LossScalerConfig> lossScaler;
  /// A config's wall_clock_breakdown: log lines split the step's time.
  bool wallClockBreakdown = false;
  /// A config's curriculum_learning (docs/curriculum.md): the model is
  /// compiled at each length the schedule reaches (shared: this header
  /// stays free of the config reader's LLVM headers).
  std::shared_ptr<const config::CurriculumSchedule> curriculum;
  /// Evaluation on held-out data (GPT-NeoX's valid_data_paths, eval_interval,
  /// eval_iters; docs/training.md): every evalInterval steps and at the end,
  /// evalIters batches of validData through the forward program. evalOnly:
  /// no training, one evaluation of the loaded weights.
  std::string validData;
  /// --test-data (test_data_paths): evaluated once, after the last step.
  std::string testData;
  int64_t evalInterval = 0; // 0: no evaluation
  int64_t evalIters = 100;  // GPT-NeoX's default
  bool evalOnly = false;
  /// The flags given on the command line (they win over a config's keys).
  std::set<std::string> given;
  bool help = false;
};

/// Parses `args` (argv without the program name). Accepts `--flag value` and
/// `--flag=value`. Throws dsc::rt::Error naming the flag on an unknown flag,
/// a missing or malformed value, or a missing/extra positional argument.
RunOptions parseRunOptions(const std::vector<std::string> &args);

/// The --help text.
std::string usage();

} // namespace dsc::run

#endif // DSC_TOOLS_DSCRUN_RUNOPTIONS_H
