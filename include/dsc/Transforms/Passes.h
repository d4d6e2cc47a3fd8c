//===- Passes.h - dsc passes ------------------------------------*- C++ -*-===//
//
// Declarations and registration of the dsc passes (generated from
// Passes.td).
//
//===----------------------------------------------------------------------===//

#ifndef DSC_TRANSFORMS_PASSES_H
#define DSC_TRANSFORMS_PASSES_H

#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassOptions.h"

#include "dsc/Support/ParallelPlan.h"

namespace mlir::dsc {

#define GEN_PASS_DECL
#include "dsc/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "dsc/Transforms/Passes.h.inc"

/// Options of the whole-chain pipeline `--dsc-compile`: the parallel plan
/// (`parallel`, its keys read by the plan's one parser) and the training
/// options (optimizer, learning-rate schedule, clipping, steps) below.
struct CompileOptions : public PassPipelineOptions<CompileOptions> {
  Option<std::string> optimizer{
      *this, "optimizer",
      llvm::cl::desc("adamw, sgd, onebit_adam, onebit_lamb or zero_one_adam"),
      llvm::cl::init("adamw")};
  Option<int64_t> freezeStep{
      *this, "freeze-step",
      llvm::cl::desc("optimizer=onebit_adam|onebit_lamb: the first optimizer "
                     "step that compresses (DeepSpeed's freeze_step)"),
      llvm::cl::init(100000)};
  // 0/1 Adam's (DeepSpeed's ZeroOneAdam's) policy, its defaults.
  Option<int64_t> varFreezeStep{
      *this, "var-freeze-step",
      llvm::cl::desc("optimizer=zero_one_adam: the last step that may "
                     "update the variance; local steps follow"),
      llvm::cl::init(100000)};
  Option<int64_t> varUpdateScaler{
      *this, "var-update-scaler",
      llvm::cl::desc("optimizer=zero_one_adam: variance updates before "
                     "their interval doubles"),
      llvm::cl::init(16)};
  Option<int64_t> localStepScaler{
      *this, "local-step-scaler",
      llvm::cl::desc("optimizer=zero_one_adam: local steps before the "
                     "sync interval doubles"),
      llvm::cl::init(32678)};
  Option<int64_t> localStepClipper{
      *this, "local-step-clipper",
      llvm::cl::desc("optimizer=zero_one_adam: the longest sync interval"),
      llvm::cl::init(16)};
  // 1-bit LAMB's (DeepSpeed's OnebitLamb's) coefficients.
  Option<double> maxCoeff{
      *this, "max-coeff",
      llvm::cl::desc("optimizer=onebit_lamb: the trust ratio's upper bound"),
      llvm::cl::init(10.0)};
  Option<double> minCoeff{
      *this, "min-coeff",
      llvm::cl::desc("optimizer=onebit_lamb: the trust ratio's lower bound"),
      llvm::cl::init(0.01)};
  Option<double> coeffBeta{
      *this, "coeff-beta",
      llvm::cl::desc("optimizer=onebit_lamb: the warm-up's moving average "
                     "of the trust ratio"),
      llvm::cl::init(0.9)};
  Option<double> factorMax{
      *this, "factor-max",
      llvm::cl::desc("optimizer=onebit_lamb: the compression phase's "
                     "largest factor of the frozen ratio"),
      llvm::cl::init(4.0)};
  Option<double> factorMin{
      *this, "factor-min",
      llvm::cl::desc("optimizer=onebit_lamb: its smallest factor"),
      llvm::cl::init(0.5)};
  Option<double> factorThreshold{
      *this, "factor-threshold",
      llvm::cl::desc("optimizer=onebit_lamb: the most the factor changes "
                     "in a step, relative"),
      llvm::cl::init(0.1)};
  Option<double> lr{*this, "lr", llvm::cl::desc("Peak learning rate"),
                    llvm::cl::init(6.0e-4)};
  Option<double> minLr{*this, "min-lr",
                       llvm::cl::desc("Final learning rate of the decay"),
                       llvm::cl::init(6.0e-5)};
  Option<std::string> lrSchedule{
      *this, "lr-schedule",
      llvm::cl::desc("Learning-rate schedule: constant, warmup, "
                     "warmup_linear or warmup_cosine (DeepSpeed's); "
                     "annealing_constant, annealing_linear, annealing_cosine "
                     "or annealing_exponential (GPT-NeoX's lr_decay_style); "
                     "range_test or one_cycle (DeepSpeed's LRRangeTest and "
                     "OneCycle: from min-lr, to lr, shaped by cycle-*)"),
      llvm::cl::init("warmup_cosine")};
  /// `schedule=` meant either schedule; it is refused with an error naming
  /// lr-schedule and pipeline-schedule.
  Option<std::string> removedSchedule{
      *this, "schedule",
      llvm::cl::desc("Removed: an error naming lr-schedule and "
                     "pipeline-schedule"),
      llvm::cl::init("")};
  Option<int64_t> warmup{*this, "warmup", llvm::cl::desc("Warmup steps"),
                         llvm::cl::init(10)};
  Option<double> warmupStart{
      *this, "warmup-start",
      llvm::cl::desc("Learning rate at the warmup's start (DeepSpeed's "
                     "warmup_min_lr)"),
      llvm::cl::init(0.0)};
  Option<std::string> warmupType{
      *this, "warmup-type",
      llvm::cl::desc("Warmup ramp: linear or log (DeepSpeed's warmup_type)"),
      llvm::cl::init("linear")};
  Option<double> beta1{*this, "beta1", llvm::cl::desc("AdamW beta1"),
                       llvm::cl::init(0.9)};
  Option<double> beta2{*this, "beta2", llvm::cl::desc("AdamW beta2"),
                       llvm::cl::init(0.95)};
  Option<double> eps{*this, "eps", llvm::cl::desc("AdamW epsilon"),
                     llvm::cl::init(1.0e-8)};
  Option<double> momentum{*this, "momentum",
                          llvm::cl::desc("SGD momentum (optimizer=sgd)"),
                          llvm::cl::init(0.9)};
  Option<bool> nesterov{*this, "nesterov",
                        llvm::cl::desc("Nesterov SGD (optimizer=sgd)"),
                        llvm::cl::init(false)};
  Option<double> cycleFirstSize{
      *this, "cycle-first-size",
      llvm::cl::desc("one_cycle: steps of the rise; range_test: steps per "
                     "increase"),
      llvm::cl::init(2000)};
  Option<double> cycleSecondSize{
      *this, "cycle-second-size",
      llvm::cl::desc("one_cycle: steps of the fall (-1: the rise's)"),
      llvm::cl::init(-1)};
  Option<int64_t> cycleFirstStairs{
      *this, "cycle-first-stairs",
      llvm::cl::desc("one_cycle: stairs of the rise (0: none)"),
      llvm::cl::init(0)};
  Option<int64_t> cycleSecondStairs{
      *this, "cycle-second-stairs",
      llvm::cl::desc("one_cycle: stairs of the fall (-1: the rise's)"),
      llvm::cl::init(-1)};
  Option<double> cycleDecaySize{
      *this, "cycle-decay-size",
      llvm::cl::desc("one_cycle: decay steps after the cycle (0: none)"),
      llvm::cl::init(0)};
  Option<double> cycleRate{
      *this, "cycle-rate",
      llvm::cl::desc("one_cycle: decay rate; range_test: step rate"),
      llvm::cl::init(0)};
  Option<bool> cycleStaircase{*this, "cycle-staircase",
                              llvm::cl::desc("range_test: increase in stairs"),
                              llvm::cl::init(false)};
  // OneCycle's cycle_momentum: Adam's beta1 falls as the rate rises.
  Option<bool> cycleMomentum{
      *this, "cycle-momentum",
      llvm::cl::desc("one_cycle with adamw: cycle beta1 inversely to the "
                     "learning rate (DeepSpeed's cycle_momentum)"),
      llvm::cl::init(false)};
  Option<double> cycleMinMom{
      *this, "cycle-min-mom",
      llvm::cl::desc("cycle-momentum: beta1 at the rate's peak"),
      llvm::cl::init(0.8)};
  Option<double> cycleMaxMom{
      *this, "cycle-max-mom",
      llvm::cl::desc("cycle-momentum: beta1 at the cycle's ends"),
      llvm::cl::init(0.9)};
  Option<double> decayMomRate{
      *this, "decay-mom-rate",
      llvm::cl::desc("cycle-momentum: beta1's growth rate after the cycle"),
      llvm::cl::init(0.0)};
  Option<int64_t> steps{*this, "steps",
                        llvm::cl::desc("Steps of the run (end of the decay)"),
                        llvm::cl::init(200)};
  Option<double> weightDecay{*this, "weight-decay",
                             llvm::cl::desc("AdamW decay of matrices"),
                             llvm::cl::init(0.1)};
  Option<double> clipGradNorm{*this, "clip-grad-norm",
                              llvm::cl::desc("Max global gradient norm"),
                              llvm::cl::init(1.0)};
  Option<std::string> plan{
      *this, "plan",
      llvm::cl::desc("'auto': compile with the plan the module's "
                     "dsc.parallel_plan records (--dsc-auto-parallel's "
                     "winner; --dsc-apply-plan)"),
      llvm::cl::init("")};
  Option<std::string> dsConfig{
      *this, "ds-config",
      llvm::cl::desc("A DeepSpeed ds_config.json whose keys (batch, "
                     "optimizer, scheduler, precision, clipping, ZeRO) set "
                     "the options not given here, with DeepSpeed's meanings "
                     "and defaults (docs/configs.md)"),
      llvm::cl::init("")};

  /// The parallel plan: every key of dsc/Support/ParallelPlan.def, read
  /// from the option string by the plan's one parser (parse() below), not
  /// by these options.
  ::dsc::ParallelPlan parallel;
  /// The plan keys the option string gave (a config's value for any other
  /// key is taken; one given here wins).
  ::dsc::PlanKeySet givenPlanKeys;

  /// Parses `text`: the plan's keys through the plan's one parser, the rest
  /// as these options. Null with `error` naming the key on failure.
  static std::unique_ptr<CompileOptions> parse(StringRef text,
                                               std::string &error);
  /// Parses `text` onto these options (as parse() does); the plan keys it
  /// gives are added to givenPlanKeys.
  LogicalResult parseMore(StringRef text, std::string &error);
  /// This pipeline's options and plan, copied from `other`.
  void copyFrom(const CompileOptions &other);
};

/// Options of `--dsc-compile-inference`: the parallel plan's keys (tp and
/// precision; a key an inference plan has no use for is refused by name)
/// and the KV cache's and batch's shape (--dsc-inference-programs').
struct InferenceCompileOptions
    : public PassPipelineOptions<InferenceCompileOptions> {
  Option<int64_t> tokenBudget{*this, "token-budget",
                              llvm::cl::desc("Token rows of one prefill"),
                              llvm::cl::init(256)};
  Option<int64_t> maxSequences{
      *this, "max-sequences",
      llvm::cl::desc("Sequences running at once (decode's rows)"),
      llvm::cl::init(8)};
  Option<int64_t> blockSize{*this, "block-size",
                            llvm::cl::desc("Positions per KV-cache block"),
                            llvm::cl::init(16)};
  Option<int64_t> maxContext{
      *this, "max-context",
      llvm::cl::desc("Longest context (0: the model's positions)"),
      llvm::cl::init(0)};
  Option<int64_t> kvBlocks{
      *this, "kv-blocks",
      llvm::cl::desc("KV-cache blocks per layer (0: max-sequences full "
                     "contexts)"),
      llvm::cl::init(0)};

  ::dsc::ParallelPlan parallel;

  /// Parses `text` (plan keys and the options above); null with `error`
  /// naming the key on failure.
  static std::unique_ptr<InferenceCompileOptions> parse(StringRef text,
                                                        std::string &error);
};

/// --dsc-compile-inference's passes: the plan, the mesh and tensor slicing
/// (tp > 1), mixed precision, the inference programs, memory planning and
/// the collectives' verification.
void buildInferencePipeline(OpPassManager &pm,
                            const InferenceCompileOptions &options);

/// --dsc-set-plan recording `plan` whole (--dsc-compile's first pass).
std::unique_ptr<Pass> createDscSetPlanPass(const ::dsc::ParallelPlan &plan);

/// --dsc-apply-plan with the other options of a `--dsc-compile="plan=auto
/// ..."` (ApplyPlan.cpp).
std::unique_ptr<Pass> createDscApplyPlanPass(const CompileOptions &options);

/// Fails with an error on `module` naming `lr-schedule=` and
/// `pipeline-schedule=` when the removed option `schedule=` of `pass` was
/// given a value (`removed`), so that no schedule is silently taken for the
/// other. (Option::hasValue cannot tell: copying a pass's options sets it.)
inline LogicalResult refuseRemovedScheduleOption(Operation *module,
                                                 StringRef pass,
                                                 StringRef removed) {
  if (removed.empty())
    return success();
  return module->emitError()
         << pass << ": the option 'schedule=" << removed
         << "' was removed; use 'lr-schedule=' for the learning-rate schedule "
            "(constant, warmup, warmup_linear, warmup_cosine) or "
            "'pipeline-schedule=' for the pipeline's order of micro-batches "
            "(1f1b, gpipe)";
}

/// Adds autodiff, the optimizer, data parallelism, memory planning and the
/// verification of the plan's collectives to `pm`.
void buildCompilePipeline(OpPassManager &pm, const CompileOptions &options);

/// Sets the options of `options.dsConfig` (a DeepSpeed ds_config.json, over
/// `options.dp` data-parallel ranks) that were not given explicitly in
/// `given` (the option string `options` was parsed from); an explicit
/// option wins. The config's run-level keys (steps_per_print,
/// overlap_comm, the fp16 loss scaler, wall_clock_breakdown) are dsc-run's:
/// each one set is a line in `notes`. Failure: `error` names the file and
/// the key.
LogicalResult applyDeepSpeedConfig(CompileOptions &options, StringRef given,
                                   std::vector<std::string> &notes,
                                   std::string &error);

/// Registers `--dsc-compile`.
void registerDscPipelines();

} // namespace mlir::dsc

#endif // DSC_TRANSFORMS_PASSES_H
