//===- CompileModel.cpp - dsc-run's in-process compiler ---------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Imports or parses the model, runs --dsc-compile and lowers the result to
// the runtime's plan (a module that is already compiled is lowered as it
// is); compiler diagnostics become the error's message.
//
//===----------------------------------------------------------------------===//

#include "CompileModel.h"
#include "NeoXTrainingConfig.h"
#include "ResolveConfig.h"
#include "RunPlan.h"
#include "dsc/Config/DeepSpeedConfig.h"

#include "dsc/Conversion/CurriculumPlan.h"
#include "dsc/Conversion/DscToPlan.h"
#include "dsc/Dialect/Dsc/IR/DscAttrNames.h"
#include "dsc/Dialect/Dsc/IR/DscDialect.h"
#include "dsc/Dialect/Dsc/IR/DscOps.h"
#include "dsc/Dialect/Dsc/IR/DscPrograms.h"
#include "dsc/Runtime/Error.h"
#include "dsc/Runtime/PlanIO.h"
#include "dsc/Runtime/SeqlenReshape.h"
#include "dsc/Support/ParallelPlan.h"
#include "dsc/Target/GPTGraphBuilder.h"
#include "dsc/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <limits>
#include <iostream>
#include <map>
#include <sstream>
#include <vector>

using namespace mlir;
using ::dsc::rt::Error;

namespace {

enum class InputKind { Plan, Module, Config };

InputKind kindOf(llvm::StringRef path) {
  if (path.ends_with(".mlir"))
    return InputKind::Module;
  if (path.ends_with(".yml") || path.ends_with(".yaml") ||
      path.ends_with(".json"))
    return InputKind::Config;
  return InputKind::Plan;
}

/// True for the output of `dsc-opt --dsc-compile` (or any module that went
/// through --dsc-autodiff): it has a training step's program (the
/// forward_backward role, one per pipeline stage when pipelined). Such a
/// module is lowered to a plan as it is; compiling it again would
/// differentiate it twice.
bool isCompiledModule(ModuleOp module) {
  return !mlir::dsc::getProgramOps(module, mlir::dsc::ProgramRole::ForwardBackward)
              .empty();
}

/// The LR schedules that decay after their warmup, which therefore needs
/// fewer steps than the run (the optimizer pass's rule).
bool decaysAfterWarmup(llvm::StringRef schedule) {
  std::optional<mlir::dsc::LrSchedule> kind =
      mlir::dsc::symbolizeLrSchedule(schedule);
  return kind && mlir::dsc::LearningRateOp::decaysAfterWarmup(*kind);
}

/// The --compile option dp= (the data-parallel size the batch keys of a
/// config complete over), default 1.
int64_t compileDataParallel(const std::map<std::string, std::string> &keys) {
  auto it = keys.find("dp");
  if (it == keys.end())
    return 1;
  char *end = nullptr;
  const int64_t dp = std::strtoll(it->second.c_str(), &end, 10);
  if (it->second.empty() || *end != '\0' || dp < 1)
    throw Error("the batch keys of a config complete over --compile's dp, "
                "which must be an integer >= 1, got 'dp=" +
                it->second + "'");
  return dp;
}

/// The --compile option micro-batch-size= (any of its spellings), or 0
/// when not given: the sequences of a micro-batch the plan asks for, which
/// a config is imported with. Only that key is read here; the options'
/// parser reports what is wrong with any of them (this one included).
int64_t compileMicroBatchSize(const std::string &compile) {
  std::vector<std::string> words;
  std::string error;
  if (!::dsc::splitPlanWords(compile, words, error))
    return 0;
  int64_t size = 0;
  for (const std::string &word : words) {
    const size_t eq = word.find('=');
    if (eq == std::string::npos || ::dsc::lookupPlanKey(word.substr(0, eq)) !=
                                       ::dsc::PlanKey::microBatchSize)
      continue;
    ::dsc::ParallelPlan plan;
    if (!::dsc::setPlanValue(plan, ::dsc::PlanKey::microBatchSize,
                             word.substr(eq + 1), error))
      return 0;
    size = plan.microBatchSize;
  }
  return size;
}

/// The model keys of a config only (GPT-NeoX's model, no training keys and
/// no key that shapes the parallel plan): dsc's defaults stand as they are.
bool hasTrainingKeys(const mlir::dsc::NeoXTrainingKeys &keys) {
  for (const auto &entry : keys.values)
    if (llvm::is_contained(mlir::dsc::neoxTrainingKeyNames(),
                           entry.first.str()) ||
        llvm::is_contained(mlir::dsc::neoxPlanShapingKeyNames(),
                           entry.first.str()))
      return true;
  return false;
}

/// Each --dsc-compile option's value ("key" -> "value") as `options`
/// prints them ("{key=value ...}").
std::map<std::string, std::string>
allCompileOptions(const mlir::dsc::CompileOptions &options) {
  std::string text;
  llvm::raw_string_ostream os(text);
  options.print(os);
  // The plan's keys are the plan's (its printer, every key).
  std::string body = llvm::StringRef(text).trim().trim("{}").str() + " " +
                     ::dsc::printParallelPlan(options.parallel, /*all=*/true);
  std::map<std::string, std::string> values;
  llvm::SmallVector<llvm::StringRef> words;
  llvm::StringRef(body).split(words, ' ', -1, false);
  for (llvm::StringRef word : words) {
    auto [key, value] = word.split('=');
    // `schedule=` is removed (an error naming its successors).
    if (key == "schedule")
      continue;
    // Numbers as a config writes them (6e-04, not 6.000000e-04).
    double number = 0;
    if (value.contains_insensitive("e") && !value.getAsDouble(number))
      values[key.str()] = ::dsc::config::spellNumber(number);
    else
      values[key.str()] = value.str();
  }
  return values;
}

/// Compiles the model at each length `schedule` reaches (`compileAt`),
/// the longest being the model's own, and joins the plans: the schedule's
/// switch steps go into the plan (docs/curriculum.md).
::dsc::rt::Plan compileCurriculum(
    const ::dsc::config::CurriculumSchedule &schedule, bool reshape,
    const std::string &input, const std::optional<mlir::dsc::GPTConfig> &model,
    const std::function<::dsc::rt::Plan(int64_t, int64_t)> &compileAt) {
  if (!model)
    throw Error("curriculum_learning compiles the model at each sequence "
                "length, so it needs a GPT-NeoX config; '" +
                input + "' is a graph fixed at one length");
  const int64_t seqLength = model->seqLength;
  if (schedule.maxDifficulty > seqLength)
    throw Error("curriculum_learning.max_difficulty: " +
                std::to_string(schedule.maxDifficulty) +
                " is above the model's sequence length " +
                std::to_string(seqLength) + " ('" + input +
                "' seq_length); lower max_difficulty or lengthen the model");
  // The schedule never decreases and stays at max_difficulty once there
  // (CurriculumSchedule.h): its switch steps, up to the step it reaches
  // max_difficulty, describe it for good.
  std::vector<std::pair<int64_t, int64_t>> switches; // (from step, length)
  const int64_t limit = int64_t(1) << 31;
  for (int64_t step = 1; step < limit; ++step) {
    const int64_t length = schedule.difficultyAt(step);
    if (switches.empty() || switches.back().second != length)
      switches.push_back({step, length});
    if (length >= schedule.maxDifficulty)
      break;
  }
  if (switches.back().second != schedule.maxDifficulty)
    throw Error("curriculum_learning: the schedule does not reach "
                "max_difficulty " +
                std::to_string(schedule.maxDifficulty) + " within 2^31 steps");
  // The model's own length is the plan's: evaluation runs at it, and a
  // max_difficulty below it never trains it.
  if (switches.back().second != seqLength)
    switches.push_back({std::numeric_limits<int64_t>::max(), seqLength});
  // Under seqlen_reshape a length's micro-batch has the rows its samples
  // are cut into (SeqlenReshape.h).
  std::vector<::dsc::rt::CurriculumPart> parts;
  for (const auto &[from, length] : switches)
    parts.push_back(
        {from, compileAt(length,
                         reshape ? ::dsc::rt::seqlenReshapeRows(
                                       model->microBatchSize, seqLength, length)
                                 : model->microBatchSize)});
  return ::dsc::rt::joinCurriculumPlans(std::move(parts), reshape);
}

} // namespace

namespace dsc::run {

rt::Plan loadOrCompile(RunOptions &options) {
  InputKind kind = kindOf(options.input);
  if (options.vocabSize && kind != InputKind::Config)
    throw Error("--vocab-size applies to a GPT-NeoX config, not to '" +
                options.input + "'");
  if (kind == InputKind::Plan && !options.deepspeed.empty())
    throw Error("--deepspeed applies to a model that is compiled (a config "
                "or a graph-level .mlir module), not to the plan file '" +
                options.input + "'");
  if (kind == InputKind::Plan && options.printConfig)
    throw Error("--print-config shows how a model is compiled (a config or "
                "a graph-level .mlir module), not the plan file '" +
                options.input + "' (--print-plan prints a plan)");
  if (kind == InputKind::Plan) {
    if (!options.compile.empty())
      throw Error("--compile applies to a .mlir module or a config, not to "
                  "the plan file '" +
                  options.input + "'");
    if (options.curriculumReshape)
      throw Error("--curriculum-seqlen-type applies to a config that is "
                  "compiled per length, not to the plan file '" +
                  options.input + "' (its lengths are compiled already)");
    return loadPlan(options.input);
  }

  DialectRegistry registry;
  registry
      .insert<mlir::dsc::DscDialect, arith::ArithDialect, func::FuncDialect>();
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  // Diagnostics become the error message: name the place, not the module.
  context.printOpOnDiagnostic(false);
  // Collect diagnostics instead of printing them: they become the error.
  std::string diagnostics;
  llvm::raw_string_ostream diagStream(diagnostics);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context, diagStream);

  auto buffer = llvm::MemoryBuffer::getFile(options.input);
  if (!buffer)
    throw Error("cannot read '" + options.input +
                "': " + buffer.getError().message());
  sourceMgr.AddNewSourceBuffer(std::move(*buffer), llvm::SMLoc());
  if (!options.moreConfigs.empty() && kind != InputKind::Config)
    throw Error("'" + options.input +
                "' is not a GPT-NeoX config: only configs merge");
  for (const std::string &path : options.moreConfigs) {
    auto more = llvm::MemoryBuffer::getFile(path);
    if (!more)
      throw Error("cannot read '" + path + "': " + more.getError().message());
    sourceMgr.AddNewSourceBuffer(std::move(*more), llvm::SMLoc());
  }

  // --compile "ds-config=FILE" is --deepspeed FILE: dsc-run also applies
  // the config's run options.
  std::map<std::string, std::string> compileKeys =
      compileOptionKeys(options.compile);
  if (auto named = compileKeys.find("ds-config"); named != compileKeys.end()) {
    const std::string file = named->second;
    if (!options.deepspeed.empty() && options.deepspeed != file)
      throw Error("--compile \"ds-config=" + file + "\" and --deepspeed " +
                  options.deepspeed + " name two DeepSpeed configs; give one");
    options.deepspeed = file;
    compileKeys.erase(named);
    options.compile.clear();
    for (const auto &[key, value] : compileKeys)
      options.compile += (options.compile.empty() ? "" : " ") + key +
                         (value.empty() ? "" : "=" + value);
  }

  const int64_t dp = compileDataParallel(compileKeys);
  // A config's model is imported with the ds_config's micro-batch size
  // when the config sets none (its default is the import's, not the
  // user's), so the ds_config is read first.
  std::optional<ConfigLayer> dsConfig;
  if (!options.deepspeed.empty() && kind != InputKind::Module)
    dsConfig =
        ConfigLayer{"ds_config", "DeepSpeed config '" + options.deepspeed + "'",
                    config::readDeepSpeedConfig(options.deepspeed, dp)};

  OwningOpRef<ModuleOp> module;
  std::optional<mlir::dsc::GPTConfig> modelConfig;
  mlir::dsc::NeoXTrainingKeys trainingKeys;
  // A plan's micro-batch size (the search's, say) is the import's: a config
  // is imported with it; a graph was imported with its own, which must be
  // the plan's.
  const int64_t plannedMicroBatch = compileMicroBatchSize(options.compile);
  if (kind == InputKind::Module) {
    module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  } else {
    mlir::dsc::NeoXImportOptions importOptions;
    importOptions.vocabSize = options.vocabSize;
    std::optional<mlir::dsc::GPTConfig> config = mlir::dsc::parseNeoXConfig(
        sourceMgr, &context, importOptions, &trainingKeys);
    if (config && plannedMicroBatch)
      config->microBatchSize = plannedMicroBatch;
    else if (config && dsConfig && dsConfig->settings.microBatchPerGpu &&
             !trainingKeys.values.get("train_micro_batch_size_per_gpu"))
      config->microBatchSize = dsConfig->settings.microBatchPerGpu;
    modelConfig = config;
    if (config) {
      module = mlir::dsc::buildGPTGraph(
          *config, FileLineColLoc::get(&context, options.input, 1, 1));
      if (failed(verify(*module)))
        module = nullptr;
    }
  }
  if (!module)
    throw Error("cannot load the model '" + options.input + "':\n" +
                diagnostics);

  // A compiled module (dsc-opt --dsc-compile's output) runs as its plan
  // file would: --steps, --lr and --microbatches apply at run time, and
  // there is nothing left to compile.
  if (kind == InputKind::Module && isCompiledModule(*module)) {
    if (!options.compile.empty() || !options.deepspeed.empty() ||
        options.printConfig)
      throw Error("'" + options.input +
                  "' is already compiled (it has @forward_backward), so "
                  "--compile \"" +
                  options.compile +
                  "\" has nothing to apply to: run it without --compile, or "
                  "give dsc-run the graph-level module or config it was "
                  "compiled from together with --compile");
    // The module may have been edited since it was compiled: prove its
    // ranks agree before any of them starts.
    if (failed(mlir::dsc::verifyCompiledModule(*module)))
      throw Error("the compiled module '" + options.input + "' cannot run:\n" +
                  diagnostics);
    FailureOr<rt::Plan> plan = mlir::dsc::lowerToPlan(*module);
    if (failed(plan))
      throw Error("lowering the compiled module '" + options.input +
                  "' to a plan failed:\n" + diagnostics);
    validatePlan(*plan);
    return std::move(*plan);
  }

  // The run's settings, in layers: the config's training keys, the
  // ds_config, the command line.
  std::vector<ConfigLayer> layers;
  if (kind == InputKind::Config && hasTrainingKeys(trainingKeys))
    layers.push_back(
        {"GPT-NeoX config", "GPT-NeoX config '" + options.input + "'",
         readNeoXTraining(trainingKeys, options.input,
                          sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID())
                              ->getBuffer()
                              .str(),
                          dp)});
  if (!dsConfig && !options.deepspeed.empty())
    dsConfig =
        ConfigLayer{"ds_config", "DeepSpeed config '" + options.deepspeed + "'",
                    config::readDeepSpeedConfig(options.deepspeed, dp)};
  if (dsConfig)
    layers.push_back(std::move(*dsConfig));
  // The graph's tokens fix the micro-batch size.
  auto model = (*module)->getAttrOfType<DictionaryAttr>(mlir::dsc::kModelAttr);
  auto micro =
      model ? model.getAs<IntegerAttr>("micro_batch_size") : IntegerAttr();
  if (micro && plannedMicroBatch && micro.getInt() != plannedMicroBatch)
    throw Error("--compile's micro-batch-size=" +
                std::to_string(plannedMicroBatch) + " is not the graph's: '" +
                options.input + "' was imported with micro-batches of " +
                std::to_string(micro.getInt()) +
                " sequences (its token shape); import it with "
                "micro-batch-size " +
                std::to_string(plannedMicroBatch) +
                ", or give dsc-run the config, which is imported with the "
                "plan's");
  for (const ConfigLayer &layer : layers)
    if (micro && layer.settings.microBatchPerGpu &&
        micro.getInt() != layer.settings.microBatchPerGpu)
      throw Error(layer.label + ": train_micro_batch_size_per_gpu is " +
                  std::to_string(layer.settings.microBatchPerGpu) +
                  ", but the model '" + options.input +
                  "' was built with micro-batches of " +
                  std::to_string(micro.getInt()) +
                  (plannedMicroBatch
                       ? " sequences (--compile's micro-batch-size); make "
                         "them equal"
                       : " sequences (its own train_micro_batch_size_per_gpu); "
                         "make them equal"));
  ResolvedConfig resolved = resolveConfig(layers, options);
  const std::string pipeline = resolved.pipeline;
  // Under mpirun rank 0 speaks for all.
  const bool firstRank =
      !std::getenv("OMPI_COMM_WORLD_RANK") ||
      std::string(std::getenv("OMPI_COMM_WORLD_RANK")) == "0";
  if (firstRank && !options.printConfig)
    for (const std::string &note : resolved.notes)
      std::cerr << "dsc-run: " << note << "\n";

  std::string optionsError;
  std::unique_ptr<mlir::dsc::CompileOptions> compileOptions =
      mlir::dsc::CompileOptions::parse(pipeline, optionsError);
  if (!compileOptions)
    throw Error("bad --compile options '" + options.compile +
                "' (see dsc-opt --help, --dsc-compile): " + optionsError);
  if (options.printConfig) {
    if (firstRank)
      printResolvedConfig(resolved, allCompileOptions(*compileOptions), options,
                          std::cout);
    return rt::Plan();
  }
  // The default warmup (10 steps) is capped at steps - 1 for a schedule that
  // decays after it, so a short run (--steps 1 for a smoke test) compiles:
  // Megatron asserts warmup < decay steps, DeepSpeed's WarmupDecayLR warms
  // up through such a run. Runs longer than the default warmup keep it, so
  // dsc-run and dsc-opt --dsc-compile agree wherever the latter succeeds. An
  // explicit warmup is the user's: one that leaves no step to decay is an
  // error naming both numbers.
  const int64_t steps = compileOptions->steps;
  const int64_t warmup = compileOptions->warmup;
  if (decaysAfterWarmup(compileOptions->lrSchedule.getValue()) &&
      warmup >= steps) {
    if (compileOptions->warmup.hasValue())
      throw Error("the '" + compileOptions->lrSchedule.getValue() +
                  "' learning-rate schedule decays after its warmup, so the "
                  "run's " +
                  std::to_string(steps) + " steps must exceed the warmup of " +
                  std::to_string(warmup) + " steps: pass --compile \"warmup=" +
                  std::to_string(std::max<int64_t>(0, steps - 1)) +
                  "\" (or less), more --steps, or a schedule without decay "
                  "(lr-schedule=warmup or lr-schedule=constant)");
    compileOptions->warmup = std::max<int64_t>(0, steps - 1);
  }

  // A pass's warning (a plan knob that does less than its name says) is
  // the user's to read even when the compile succeeds; errors and remarks
  // go on to the collecting handler.
  ScopedDiagnosticHandler warnings(&context, [&](Diagnostic &d) {
    if (d.getSeverity() != DiagnosticSeverity::Warning)
      return failure();
    if (firstRank)
      std::cerr << "dsc-run: warning: " << d.str() << "\n";
    return success();
  });
  auto compile = [&](ModuleOp graph, const std::string &what) {
    PassManager pm(&context);
    mlir::dsc::buildCompilePipeline(pm, *compileOptions);
    if (failed(pm.run(graph)))
      throw Error("compiling '" + options.input + "'" + what + " failed:\n" +
                  diagnostics);
    FailureOr<rt::Plan> plan = mlir::dsc::lowerToPlan(graph);
    if (failed(plan))
      throw Error("lowering '" + options.input + "'" + what +
                  " to a plan failed:\n" + diagnostics);
    // plan=auto: the module's plan chose the micro-batches (the lowering
    // read them from the compiled module).
    if (compileOptions->plan.getValue().empty())
      plan->microBatches = compileOptions->parallel.numMicroBatches;
    validatePlan(*plan);
    return std::move(*plan);
  };
  if (options.curriculumReshape && !options.curriculum)
    throw Error("--curriculum-seqlen-type: '" + options.input +
                "' has no curriculum_learning (nor does --deepspeed)");
  if (options.curriculum)
    return compileCurriculum(*options.curriculum,
                             options.curriculumReshape.value_or(false),
                             options.input, modelConfig,
                             [&](int64_t length, int64_t rows) {
                               mlir::dsc::GPTConfig atLength = *modelConfig;
                               atLength.seqLength = length;
                               atLength.microBatchSize = rows;
                               OwningOpRef<ModuleOp> graph =
                                   mlir::dsc::buildGPTGraph(
                                       atLength,
                                       FileLineColLoc::get(
                                           &context, options.input, 1, 1));
                               if (!graph || failed(verify(*graph)))
                                 throw Error("cannot build '" + options.input +
                                             "' at sequence length " +
                                             std::to_string(length) + ":\n" +
                                             diagnostics);
                               return compile(*graph,
                                              " at sequence length " +
                                                  std::to_string(length));
                             });
  return compile(*module, "");
}

} // namespace dsc::run
