//===- CompilePipeline.cpp - --dsc-compile ----------------------*- C++ -*-===//
//
// The whole chain from a graph to a memory-planned training plan, as one
// registered pass pipeline so that dsc-opt and dsc-run compile identically;
// `ds-config=FILE` fills the options a DeepSpeed config sets.
// (The pipeline-parallel cut, --dsc-pipeline, is PipelineCut.cpp.)
//
//===----------------------------------------------------------------------===//

#include "dsc/Transforms/Passes.h"

#include "dsc/Config/DeepSpeedConfig.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::dsc;

std::unique_ptr<CompileOptions> CompileOptions::parse(StringRef text,
                                                      std::string &error) {
  auto options = std::make_unique<CompileOptions>();
  if (failed(options->parseMore(text, error)))
    return nullptr;
  return options;
}

LogicalResult CompileOptions::parseMore(StringRef text, std::string &error) {
  std::string rest;
  ::dsc::PlanKeySet given;
  if (!::dsc::parseParallelPlan(std::string_view(text.data(), text.size()),
                                parallel, error, &given, &rest)) {
    error = "--dsc-compile: " + error;
    return failure();
  }
  givenPlanKeys |= given;
  llvm::raw_string_ostream errors(error);
  return parseFromString(rest, errors);
}

void CompileOptions::copyFrom(const CompileOptions &other) {
  copyOptionValuesFrom(other);
  parallel = other.parallel;
  givenPlanKeys = other.givenPlanKeys;
}

/// --dsc-mixed-precision at `plan`'s precision (the pass names the one it
/// supports, and why fp16 is refused).
static void addMixedPrecisionPass(OpPassManager &pm,
                                  const ::dsc::ParallelPlan &plan) {
  DscMixedPrecisionPassOptions mixed;
  mixed.dtype = ::dsc::precisionName(plan.precision);
  pm.addPass(createDscMixedPrecisionPass(mixed));
}

void mlir::dsc::buildCompilePipeline(OpPassManager &pm,
                                     const CompileOptions &options) {
  // plan=auto: the plan is the module's, known when the pipeline runs.
  if (!options.plan.getValue().empty()) {
    pm.addPass(createDscApplyPlanPass(options));
    return;
  }
  const ::dsc::ParallelPlan &plan = options.parallel;
  // The plan first: every pass below reads its knobs from the module's
  // dsc.parallel_plan (PlanOptions.h), so this builder only says which
  // passes run.
  pm.addPass(createDscSetPlanPass(plan));
  // The mesh first, so that every sharding pass finds its axis on it.
  if (plan.dp != 1 || plan.tp != 1 || plan.pp != 1 || plan.ep != 1)
    pm.addPass(createDscDeclareMeshPass());
  // Tensor slicing rewrites the forward graph; autodiff then derives the
  // backward's collectives from the conjugate f/g ops.
  // (sequence-parallel=1 with tp=1 reaches the pass, which refuses it.)
  if (plan.tp > 1 || plan.sequenceParallel)
    pm.addPass(createDscTensorParallelPass());

  // Experts split over ep (inside dp) after tensor slicing, which keeps
  // them whole on every tp rank; autodiff derives the all-to-alls' reverse.
  if (plan.ep > 1)
    pm.addPass(createDscExpertParallelPass());

  // Pipeline stages are cut from the (tensor-sliced) forward graph; autodiff
  // then differentiates each stage.
  // (virtual-stages without pp > 1 reaches the pass, which refuses it.)
  if (plan.pp > 1 || plan.virtualStages != 1)
    pm.addPass(createDscPipelinePass());

  // Mixed precision rewrites the (sliced, cut) forward graph; autodiff
  // then casts each weight's gradient back to f32 through the cast's rule.
  // Any other precision than fp32 goes to the pass, which names the
  // supported one (and why fp16 is refused).
  if (!plan.isFp32())
    addMixedPrecisionPass(pm, plan);

  // The loss gradient's seed 1/m turns the micro-batches' summed gradients
  // into their mean, as DeepSpeed's gradient accumulation does.
  pm.addPass(createDscAutodiffPass());

  // Directly after autodiff, whose forward_backward programs begin with
  // their forward: it always runs, to record the activations each keeps.
  pm.addPass(createDscRecomputePass());
  // A pipeline stage's forward then keeps what its backward reads (the
  // backward no longer computes the forward again).
  if (plan.pp > 1)
    pm.addPass(createDscStageBackwardPass());

  DscOptimizerPassOptions optimizer;
  optimizer.optimizer = options.optimizer;
  optimizer.freezeStep = options.freezeStep;
  optimizer.varFreezeStep = options.varFreezeStep;
  optimizer.varUpdateScaler = options.varUpdateScaler;
  optimizer.localStepScaler = options.localStepScaler;
  optimizer.localStepClipper = options.localStepClipper;
  optimizer.maxCoeff = options.maxCoeff;
  optimizer.minCoeff = options.minCoeff;
  optimizer.coeffBeta = options.coeffBeta;
  optimizer.factorMax = options.factorMax;
  optimizer.factorMin = options.factorMin;
  optimizer.factorThreshold = options.factorThreshold;
  optimizer.lr = options.lr;
  optimizer.minLr = options.minLr;
  optimizer.lrSchedule = options.lrSchedule;
  // The optimizer runs in every compile: it refuses the removed `schedule=`.
  optimizer.removedSchedule = options.removedSchedule.getValue();
  optimizer.warmup = options.warmup;
  optimizer.warmupStart = options.warmupStart;
  optimizer.warmupType = options.warmupType;
  optimizer.beta1 = options.beta1;
  optimizer.beta2 = options.beta2;
  optimizer.eps = options.eps;
  optimizer.totalSteps = options.steps;
  optimizer.weightDecay = options.weightDecay;
  optimizer.momentum = options.momentum;
  optimizer.cycleFirstSize = options.cycleFirstSize;
  optimizer.cycleSecondSize = options.cycleSecondSize;
  optimizer.cycleFirstStairs = options.cycleFirstStairs;
  optimizer.cycleSecondStairs = options.cycleSecondStairs;
  optimizer.cycleDecaySize = options.cycleDecaySize;
  optimizer.cycleRate = options.cycleRate;
  optimizer.cycleStaircase = options.cycleStaircase;
  optimizer.cycleMomentum = options.cycleMomentum;
  optimizer.cycleMinMom = options.cycleMinMom;
  optimizer.cycleMaxMom = options.cycleMaxMom;
  optimizer.decayMomRate = options.decayMomRate;
  optimizer.nesterov = options.nesterov;
  optimizer.clipGradNorm = options.clipGradNorm;
  pm.addPass(createDscOptimizerPass(optimizer));

  // ZeRO over one data-parallel rank partitions nothing: with a tp/pp mesh
  // (which has no dp axis of size 1) the plan is the unsharded one, as
  // DeepSpeed's ZeRO is on one rank (a GPT-NeoX config with
  // model_parallel_size x pipe_parallel_size GPUs). Without a mesh the
  // pass still runs and declares dp=1.
  const bool meshWithoutDp = plan.dp == 1 && (plan.tp > 1 || plan.pp > 1);
  if (plan.dp > 1 || (plan.zeroStage != 0 && !meshWithoutDp))
    pm.addPass(createDscDataParallelPass());

  // Offload places the states the optimizer and ZeRO passes declared.
  if (plan.offloadsOptimizer() || plan.offloadsParams() ||
      !plan.nvmePath.empty() || plan.deviceMemory != 0 || plan.delayedUpdate)
    pm.addPass(createDscOffloadPass());

  // A zero-bubble schedule runs each stage's backward in two parts; split
  // after the data-parallel pass has placed the gradients' collectives,
  // which go with the weight-gradient part.
  if (plan.pp > 1 && plan.schedule == ::dsc::PipelineScheduleKind::ZeroBubbleH1)
    pm.addPass(createDscSplitWeightGradientPass());

  // Fusion after every pass that reads the unfused ops (autodiff, the
  // collectives' placement, the backward's split), before memory planning.
  if (plan.fuse)
    pm.addPass(createDscFusePass());

  // Each stage's step, in the schedule's order: the sends and receives the
  // verifier below checks and the runtime runs as written.
  if (plan.pp > 1)
    pm.addPass(createDscPipelineSchedulePass());

  // After the schedule: a pipeline rank keeps as many slots of each
  // stage's kept values as its step has micro-batches in flight.
  pm.addPass(createDscPlanMemoryPass());

  // Last, so that it sees every collective the passes above placed: a plan
  // whose ranks could hang or disagree never leaves the compiler.
  pm.addPass(createDscVerifyCollectivesPass());
}

LogicalResult mlir::dsc::applyDeepSpeedConfig(CompileOptions &options,
                                              StringRef given,
                                              std::vector<std::string> &notes,
                                              std::string &error) {
  if (options.dsConfig.getValue().empty())
    return success();
  std::optional<::dsc::config::TrainingSettings> settings =
      ::dsc::config::tryReadDeepSpeedConfig(options.dsConfig,
                                            options.parallel.dp, error);
  if (!settings)
    return failure();
  // The options given explicitly win: only the others are parsed again. A
  // plan key counts as given under any of its spellings.
  llvm::StringSet<> explicitKeys;
  SmallVector<StringRef> words;
  given.split(words, ' ', -1, /*KeepEmpty=*/false);
  for (StringRef word : words)
    explicitKeys.insert(word.split('=').first.trim());
  std::string assigned;
  for (const auto &[key, value] : settings->compile) {
    std::optional<::dsc::PlanKey> planKey = ::dsc::lookupPlanKey(key);
    const bool explicitlyGiven = planKey
                                     ? options.givenPlanKeys[size_t(*planKey)]
                                     : explicitKeys.contains(key);
    if (!explicitlyGiven)
      assigned += " " + key + "=" + value;
  }
  // The config's plan keys are not the user's: they stay overridable.
  const ::dsc::PlanKeySet userKeys = options.givenPlanKeys;
  if (failed(options.parseMore(assigned, error)))
    return failure();
  options.givenPlanKeys = userKeys;
  const std::string file = "ds-config '" + options.dsConfig.getValue() + "'";
  if (settings->logInterval)
    notes.push_back(file + ": steps_per_print is dsc-run's --log-interval; "
                           "it does not change the plan");
  if (settings->overlapComm)
    notes.push_back(file + ": zero_optimization.overlap_comm is dsc-run's "
                           "--overlap-comm; it does not change the plan");
  if (settings->lossScaler)
    notes.push_back(file + ": the fp16 loss scaler's settings are dsc-run's "
                           "(dsc-run --deepspeed FILE applies them)");
  if (settings->wallClockBreakdown.value_or(false))
    notes.push_back(file + ": wall_clock_breakdown is dsc-run's log; it "
                           "does not change the plan");
  return success();
}

std::unique_ptr<InferenceCompileOptions>
InferenceCompileOptions::parse(StringRef text, std::string &error) {
  auto options = std::make_unique<InferenceCompileOptions>();
  std::string rest;
  if (!::dsc::parseParallelPlan(std::string_view(text.data(), text.size()),
                                options->parallel, error, nullptr, &rest)) {
    error = "--dsc-compile-inference: " + error;
    return nullptr;
  }
  const ::dsc::ParallelPlan &plan = options->parallel;
  // What an inference plan has no use for, by name.
  auto refuse = [&](const std::string &key, const std::string &why) {
    error = "--dsc-compile-inference: " + key + " " + why;
    return nullptr;
  };
  if (plan.dp != 1)
    return refuse("dp=" + std::to_string(plan.dp),
                  "is not an inference plan's: serve replicas as separate "
                  "plans");
  if (plan.pp != 1)
    return refuse("pp=" + std::to_string(plan.pp),
                  "is not compiled for inference yet (tp is)");
  if (plan.ep != 1)
    return refuse("ep=" + std::to_string(plan.ep),
                  "is not compiled for inference yet");
  if (plan.zeroStage != 0)
    return refuse("zero=" + std::to_string(plan.zeroStage),
                  "shards training state; an inference plan has none");
  if (plan.sequenceParallel)
    return refuse("sequence-parallel", "is not compiled for inference");
  if (plan.precision == ::dsc::Precision::Fp16)
    return refuse("precision=fp16",
                  "is not compiled for inference (bf16 and fp32 are)");
  llvm::raw_string_ostream errors(error);
  if (failed(options->parseFromString(rest, errors)))
    return nullptr;
  return options;
}

void mlir::dsc::buildInferencePipeline(OpPassManager &pm,
                                       const InferenceCompileOptions &options) {
  const ::dsc::ParallelPlan &plan = options.parallel;
  pm.addPass(createDscSetPlanPass(plan));
  if (plan.tp != 1) {
    pm.addPass(createDscDeclareMeshPass());
    pm.addPass(createDscTensorParallelPass());
  }
  if (!plan.isFp32())
    addMixedPrecisionPass(pm, plan);
  DscInferenceProgramsPassOptions programs;
  programs.tokenBudget = options.tokenBudget;
  programs.maxSequences = options.maxSequences;
  programs.blockSize = options.blockSize;
  programs.maxContext = options.maxContext;
  programs.kvBlocks = options.kvBlocks;
  pm.addPass(createDscInferenceProgramsPass(programs));
  pm.addPass(createDscPlanMemoryPass());
  pm.addPass(createDscVerifyCollectivesPass());
}

void mlir::dsc::registerDscPipelines() {
  registerPassPipeline(
      "dsc-compile-inference",
      "Compile a model graph into a memory-planned inference plan: prefill "
      "and decode programs over a paged KV cache (tp, precision, "
      "token-budget, max-sequences, block-size, max-context, kv-blocks)",
      [](OpPassManager &pm, StringRef text,
         function_ref<LogicalResult(const Twine &)> errorHandler) {
        std::string error;
        std::unique_ptr<InferenceCompileOptions> options =
            InferenceCompileOptions::parse(text, error);
        if (!options)
          return errorHandler(error);
        buildInferencePipeline(pm, *options);
        return success();
      },
      [](function_ref<void(const detail::PassOptions &)> optHandler) {
        optHandler(InferenceCompileOptions());
      });
  registerPassPipeline(
      "dsc-compile",
      "Compile a model graph into a memory-planned training plan "
      "(autodiff, optimizer, data parallelism, memory planning, "
      "collective verification)",
      // Counts below 1 reach the passes, whose errors name them
      // (--dsc-declare-mesh: dp, tp, pp; --dsc-autodiff: microbatches).
      [](OpPassManager &pm, StringRef text,
         function_ref<LogicalResult(const Twine &)> errorHandler) {
        CompileOptions options;
        std::string error;
        if (failed(options.parseMore(text, error)))
          return errorHandler(error);
        std::vector<std::string> notes;
        if (failed(applyDeepSpeedConfig(options, text, notes, error)))
          return errorHandler(error);
        for (const std::string &note : notes)
          llvm::errs() << "warning: --dsc-compile: " << note << "\n";
        buildCompilePipeline(pm, options);
        return success();
      },
      [](function_ref<void(const detail::PassOptions &)> optHandler) {
        optHandler(CompileOptions());
      });
}
