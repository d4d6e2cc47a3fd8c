//===- RunPlan.cpp - dsc-run's driver: load a plan and train --------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The training loop around the executor: a seeded batch sampler over the
// chosen token source, micro-batches per step, Megatron-style log lines,
// JSON-lines metrics and a Chrome trace with one lane per stream.
//
//===----------------------------------------------------------------------===//

#include "RunPlan.h"

#include "ChromeTrace.h"
#include "Metrics.h"

#include "dsc/Runtime/Data.h"
#include "dsc/Runtime/Executor.h"
#include "dsc/Runtime/PlanIO.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>

using namespace dsc::run;
using namespace dsc::rt;

Plan dsc::run::loadPlan(const std::string &input) {
  return readPlanFile(input);
}

namespace {

std::string humanBytes(uint64_t bytes) {
  char buf[32];
  if (bytes >= (1ull << 30))
    std::snprintf(buf, sizeof(buf), "%.2f GiB", double(bytes) / (1ull << 30));
  else if (bytes >= (1ull << 20))
    std::snprintf(buf, sizeof(buf), "%.2f MiB", double(bytes) / (1ull << 20));
  else if (bytes >= (1ull << 10))
    std::snprintf(buf, sizeof(buf), "%.2f KiB", double(bytes) / (1ull << 10));
  else
    std::snprintf(buf, sizeof(buf), "%llu B", (unsigned long long)bytes);
  return buf;
}

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

} // namespace

int dsc::run::runPlan(Plan plan, const RunOptions &options, std::ostream &out,
                      RunResult *result) {
  for (const char *name : {"forward_backward", "optimizer"})
    if (!plan.findProgram(name))
      throw Error("plan '" + options.input + "' has no '" + name +
                  "' program, so it cannot train");
  const int64_t microBatches =
      options.microBatches ? options.microBatches : plan.microBatches;

  // Data first: a vocab mismatch is reported before any memory is touched.
  std::unique_ptr<TokenSource> source =
      openTokenSource(options.data, plan.vocabSize);
  if (source->vocabSize() > plan.vocabSize)
    throw Error("the data's vocabulary (" +
                std::to_string(source->vocabSize()) + " tokens, " +
                source->describe() + ") does not fit the model's (" +
                std::to_string(plan.vocabSize) + " tokens, plan '" +
                options.input + "')");
  BatchSampler sampler(*source, plan.microBatchSize, plan.seqLength,
                       options.seed, plan.vocabSize);

  // Outputs next: an unwritable path fails before training, not after.
  std::ofstream json;
  if (!options.logJson.empty()) {
    json.open(options.logJson, std::ios::trunc);
    if (!json)
      throw Error("cannot open --log-json file '" + options.logJson +
                  "': " + std::strerror(errno));
  }

  Executor ex(std::move(plan), options.seed);
  const Plan &p = ex.plan();
  if (options.learningRate)
    ex.setBaseLearningRate(*options.learningRate);

  out << "dsc-run: plan '" << options.input << "': vocab " << p.vocabSize
      << ", sequence " << p.seqLength << ", micro-batch " << p.microBatchSize
      << " x " << microBatches << " per step, " << p.buffers.size()
      << " buffers\n";
  out << "dsc-run: data: " << source->describe() << " (" << source->size()
      << " tokens, " << sampler.numWindows() << " samples per epoch)\n";
  for (uint32_t a = 0; a < p.arenas.size(); ++a) {
    out << "dsc-run: arena " << a << " (" << tierName(p.arenas[a].tier)
        << "): allocated " << ex.allocatedBytes(a) << " bytes ("
        << humanBytes(ex.allocatedBytes(a)) << ")";
    if (a < p.summary.peakBytesPerArena.size())
      out << ", planned peak " << p.summary.peakBytesPerArena[a] << " bytes";
    out << "\n";
  }
  if (result) {
    result->losses.clear();
    result->allocatedBytesPerArena.clear();
    for (uint32_t a = 0; a < p.arenas.size(); ++a)
      result->allocatedBytesPerArena.push_back(ex.allocatedBytes(a));
  }

  std::unique_ptr<ChromeTrace> trace;
  if (!options.trace.empty()) {
    trace = std::make_unique<ChromeTrace>("dsc-run rank 0");
    trace->nameLane(0, "compute");
    ex.setInstructionHook([&](const InstructionEvent &e) {
      const Instruction &inst = *e.instruction;
      std::string opcode = opcodeName(inst.opcode);
      trace->add(inst.name.empty() ? opcode : inst.name, opcode, e.stream,
                 e.startUs, e.durationUs,
                 "\"program\": " + jsonString(e.program->name) +
                     ", \"index\": " + std::to_string(e.index));
    });
  }

  int64_t consumed = 0, firstIteration = 1;
  if (!options.load.empty()) {
    consumed = ex.loadCheckpoint(options.load);
    firstIteration = ex.step();
    if (firstIteration > options.steps)
      throw Error("checkpoint '" + options.load + "' has done " +
                  std::to_string(firstIteration - 1) +
                  " steps already; --steps " + std::to_string(options.steps) +
                  " is the total to reach");
    out << "dsc-run: resumed from '" << options.load << "' at iteration "
        << firstIteration << " (" << consumed << " samples consumed)\n";
  }

  const int64_t samplesPerStep = p.microBatchSize * microBatches;
  const double flopsPerStep =
      double(p.summary.flopsPerMicroBatch) * double(microBatches);
  const auto runStart = std::chrono::steady_clock::now();
  double intervalSeconds = 0, intervalLoss = 0;
  int64_t intervalSteps = 0;
  for (int64_t iteration = firstIteration; iteration <= options.steps;
       ++iteration) {
    const int64_t firstSample = consumed;
    const double traceStart = ex.nowUs();
    const auto t0 = std::chrono::steady_clock::now();
    StepResult r = ex.trainStep(
        [&](int64_t m, int32_t *tokens, int32_t *targets) {
          sampler.sample(firstSample + m * p.microBatchSize, p.microBatchSize,
                         tokens, targets);
        },
        microBatches);
    const double seconds = secondsSince(t0);
    if (trace)
      trace->add("iteration " + std::to_string(iteration), "step", 0,
                 traceStart, ex.nowUs() - traceStart);
    if (result)
      result->losses.push_back(r.loss);

    consumed += samplesPerStep;

    StepMetrics m;
    m.iteration = iteration;
    m.iterations = options.steps;
    m.consumedSamples = consumed;
    m.msPerIteration = seconds * 1e3;
    m.tflops = seconds > 0 ? flopsPerStep / seconds / 1e12 : 0.0;
    m.learningRate = r.learningRate;
    m.loss = r.loss;
    m.gradNorm = r.gradNorm;
    if (json.is_open())
      json << formatJsonLine(m) << "\n";

    // The log line averages time and loss over its interval, as Megatron.
    intervalSeconds += seconds;
    intervalLoss += r.loss;
    ++intervalSteps;
    if (iteration % options.logInterval == 0 || iteration == options.steps) {
      StepMetrics avg = m;
      avg.msPerIteration = intervalSeconds / double(intervalSteps) * 1e3;
      avg.tflops = intervalSeconds > 0 ? flopsPerStep * double(intervalSteps) /
                                             intervalSeconds / 1e12
                                       : 0.0;
      avg.loss = intervalLoss / double(intervalSteps);
      out << formatLogLine(avg) << std::endl;
      intervalSeconds = intervalLoss = 0;
      intervalSteps = 0;
    }
    // Megatron stops on a NaN loss or grad norm; so do we, after logging
    // the step (and before a checkpoint could save the damage).
    if (!std::isfinite(r.loss) ||
        (p.gradNorm >= 0 && !std::isfinite(r.gradNorm))) {
      if (intervalSteps)
        out << formatLogLine(m) << std::endl;
      throw Error("iteration " + std::to_string(iteration) + ": " +
                  (!std::isfinite(r.loss) ? "lm loss" : "grad norm") + " is " +
                  std::to_string(!std::isfinite(r.loss) ? r.loss : r.gradNorm) +
                  ": training diverged (try a lower --lr)");
    }
    if (!options.save.empty() &&
        ((options.saveInterval && iteration % options.saveInterval == 0) ||
         iteration == options.steps))
      ex.saveCheckpoint(options.save, consumed);
  }
  if (json.is_open()) {
    json.close();
    if (!json)
      throw Error("cannot write --log-json file '" + options.logJson + "'");
  }
  if (trace)
    trace->write(options.trace);
  char tail[128];
  std::snprintf(tail, sizeof(tail), "dsc-run: %lld steps in %.2f s",
                (long long)(options.steps - firstIteration + 1),
                secondsSince(runStart));
  out << tail;
  if (trace)
    out << "; trace (" << trace->size() << " events) in '" << options.trace
        << "'";
  if (!options.logJson.empty())
    out << "; metrics in '" << options.logJson << "'";
  if (!options.save.empty())
    out << "; checkpoint in '" << options.save << "'";
  out << "\n";
  return 0;
}

int dsc::run::dscRunMain(const std::vector<std::string> &args,
                         std::ostream &out, std::ostream &err,
                         const PlanLoader &loader) {
  try {
    RunOptions options = parseRunOptions(args);
    if (options.help) {
      out << usage();
      return 0;
    }
    Plan plan = loader ? loader(options) : loadPlan(options.input);
    if (options.printPlan) {
      out << formatPlan(plan);
      return 0;
    }
    return runPlan(std::move(plan), options, out);
  } catch (const Error &e) {
    err << "dsc-run: error: " << e.what() << std::endl;
  } catch (const std::bad_alloc &) {
    err << "dsc-run: error: out of memory" << std::endl;
  } catch (const std::exception &e) {
    err << "dsc-run: error: " << e.what() << std::endl;
  }
  return 1;
}
