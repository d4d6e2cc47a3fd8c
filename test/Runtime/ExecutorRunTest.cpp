//===- ExecutorRunTest.cpp - dsc-run's driver, in-process ----------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// dsc-run's runtime half (tools/dsc-run, library DscRunDriver) on the tiny
// plan of PlanTestSupport.h: option parsing and its messages, a training run
// with its log line, JSON-lines file and Chrome trace, and the bad inputs
// that must end in "dsc-run: error: ..." and exit code 1.
//
//===----------------------------------------------------------------------===//

#include "PlanTestSupport.h"

#include "ChromeTrace.h"
#include "Metrics.h"
#include "RunOptions.h"
#include "RunPlan.h"

#include "dsc/Runtime/PlanIO.h"
#include "dsc/Runtime/ThreadCommunicator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

using namespace dsc::rt;
using namespace dsc::rt::test;
using namespace dsc::run;

namespace {

/// A byte-level tiny model (vocab 256) that trains on the embedded corpus.
const TinyShape kBytes{256, 16, 2, 8};

std::string tempPath(const std::string &name) {
  return uniqueTempPath(::testing::TempDir(), "run-" + name);
}

std::string writeTinyPlan(const std::string &name, TinyShape s = kBytes) {
  std::string path = tempPath(name);
  writePlanFile(makeTinyPlan(DType::F32, s, 0.01), path);
  return path;
}

std::string slurp(const std::string &path) {
  std::ifstream is(path);
  std::stringstream ss;
  ss << is.rdbuf();
  return ss.str();
}

struct Outcome {
  int code;
  std::string out, err;
};

Outcome runTool(const std::vector<std::string> &args) {
  std::ostringstream out, err;
  int code = dscRunMain(args, out, err);
  return {code, out.str(), err.str()};
}

std::string parseError(const std::vector<std::string> &args) {
  try {
    parseRunOptions(args);
  } catch (const Error &e) {
    return e.what();
  }
  return "no error";
}

//===----------------------------------------------------------------------===//
// Options
//===----------------------------------------------------------------------===//

TEST(DscRunOptions, ParsesEveryFlag) {
  RunOptions o =
      parseRunOptions({"m.plan", "--steps", "7", "--data=corpus.txt", "--seed",
                       "9", "--lr", "3e-4", "--log-interval=2", "--log-json",
                       "m.jsonl", "--trace", "t.json", "--microbatches", "4"});
  EXPECT_EQ(o.input, "m.plan");
  EXPECT_EQ(o.steps, 7);
  EXPECT_EQ(o.data, "corpus.txt");
  EXPECT_EQ(o.seed, 9u);
  ASSERT_TRUE(o.learningRate.has_value());
  EXPECT_DOUBLE_EQ(*o.learningRate, 3e-4);
  EXPECT_EQ(o.logInterval, 2);
  EXPECT_EQ(o.logJson, "m.jsonl");
  EXPECT_EQ(o.trace, "t.json");
  EXPECT_EQ(o.microBatches, 4);
  RunOptions d = parseRunOptions({"m.plan"});
  EXPECT_EQ(d.steps, 200);
  EXPECT_EQ(d.data, "");
  EXPECT_FALSE(d.learningRate.has_value());
  EXPECT_TRUE(parseRunOptions({"--help"}).help);
}

TEST(DscRunOptions, ErrorsNameTheFlag) {
  EXPECT_EQ(parseError({"m.plan", "--steps", "12x"}),
            "--steps expects an integer, got '12x'");
  EXPECT_EQ(parseError({"m.plan", "--steps", "0"}),
            "--steps must be at least 1, got 0");
  EXPECT_EQ(parseError({"m.plan", "--lr", "fast"}),
            "--lr expects a number, got 'fast'");
  EXPECT_EQ(parseError({"m.plan", "--lr", "-1"}),
            "--lr must not be negative, got -1");
  EXPECT_EQ(parseError({"m.plan", "--seed"}), "--seed expects a value");
  EXPECT_EQ(parseError({"m.plan", "--step", "3"}),
            "unknown option '--step' (dsc-run --help lists them)");
  EXPECT_EQ(parseError({}), "no plan given (usage: dsc-run PLAN [options])");
  EXPECT_EQ(parseError({"a.plan", "b.plan"}),
            "one plan expected, got 'a.plan' and 'b.plan' (only GPT-NeoX "
            "configs, .yml or .yaml, merge)");
  EXPECT_EQ(parseError({"model.yml", "run.json"}),
            "one plan expected, got 'model.yml' and 'run.json' (only GPT-NeoX "
            "configs, .yml or .yaml, merge)");
}

//===----------------------------------------------------------------------===//
// Output formats
//===----------------------------------------------------------------------===//

TEST(DscRunMetrics, MegatronLogLine) {
  StepMetrics m;
  m.iteration = 10;
  m.iterations = 200;
  m.consumedSamples = 40;
  m.msPerIteration = 12.34;
  m.tflops = 0.0123;
  m.learningRate = 1e-3;
  m.loss = 4.5;
  m.gradNorm = 1.25;
  EXPECT_EQ(formatLogLine(m),
            " iteration       10/     200 | consumed samples:           40 |"
            " elapsed time per iteration (ms): 12.3 | throughput (TFLOP/s):"
            " 0.012 | learning rate: 1.000000E-03 | lm loss: 4.500000E+00 |"
            " grad norm: 1.250 |");
  m.gradNorm = std::nan("");
  EXPECT_EQ(formatJsonLine(m),
            "{\"iteration\": 10, \"iterations\": 200, \"consumed_samples\": "
            "40, \"elapsed_time_per_iteration_ms\": 12.34, "
            "\"throughput_tflops\": 0.0123, \"learning_rate\": 0.001, "
            "\"lm_loss\": 4.5, \"grad_norm\": null}");
  EXPECT_EQ(jsonString("a\"b\\c\n"), "\"a\\\"b\\\\c\\n\"");
  // Loss scaling (f16 plans): Megatron's fields, around the grad norm.
  m.lossScale = 32768;
  m.skippedIterations = 3;
  m.gradNorm = 0.5;
  EXPECT_EQ(formatLogLine(m),
            " iteration       10/     200 | consumed samples:           40 |"
            " elapsed time per iteration (ms): 12.3 | throughput (TFLOP/s):"
            " 0.012 | learning rate: 1.000000E-03 | lm loss: 4.500000E+00 |"
            " loss scale: 32768.0 | grad norm: 0.500 | number of skipped "
            "iterations:   3 |");
  EXPECT_NE(formatJsonLine(m).find(
                ", \"loss_scale\": 32768, \"skipped_iterations\": 3}"),
            std::string::npos)
      << formatJsonLine(m);
}

//===----------------------------------------------------------------------===//
// Runs
//===----------------------------------------------------------------------===//

void expectError(const Outcome &o, const std::string &part);

TEST(DscRun, TrainsAndWritesLogJsonAndTrace) {
  std::string plan = writeTinyPlan("train.plan");
  std::string json = tempPath("train.jsonl"), trace = tempPath("trace.json");
  Outcome o = runTool({plan, "--steps", "6", "--log-interval", "3",
                       "--log-json", json, "--trace", trace, "--seed", "5"});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.err, "");
  EXPECT_NE(o.out.find(" iteration        3/       6 | consumed samples:"
                       "            6 |"),
            std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find(" iteration        6/       6 |"), std::string::npos);
  EXPECT_EQ(o.out.find(" iteration        2/"), std::string::npos);
  EXPECT_NE(o.out.find("| lm loss: "), std::string::npos);
  EXPECT_NE(o.out.find("| grad norm: "), std::string::npos);
  EXPECT_NE(o.out.find("embedded default corpus"), std::string::npos) << o.out;

  std::string lines = slurp(json);
  int count = 0;
  for (size_t at = 0;
       (at = lines.find("\"lm_loss\": ", at)) != std::string::npos; ++at)
    ++count;
  EXPECT_EQ(count, 6) << lines;
  EXPECT_EQ(lines.rfind("{\"iteration\": 1, \"iterations\": 6", 0), 0u);
  EXPECT_NE(lines.find("{\"iteration\": 6, \"iterations\": 6, "
                       "\"consumed_samples\": 12,"),
            std::string::npos);

  std::string t = slurp(trace);
  EXPECT_EQ(t.rfind("{\"traceEvents\": [", 0), 0u);
  EXPECT_NE(t.find("\"ph\": \"X\""), std::string::npos);
  EXPECT_NE(t.find("\"name\": \"compute\""), std::string::npos);
  EXPECT_NE(t.find("\"name\": \"head.grad_weight\", \"cat\": \"Matmul\""),
            std::string::npos);
  EXPECT_NE(t.find("\"name\": \"iteration 6\""), std::string::npos);
  EXPECT_NE(t.find("\"displayTimeUnit\": \"ms\"}"), std::string::npos);
  std::remove(plan.c_str());
  std::remove(json.c_str());
  std::remove(trace.c_str());
}

TEST(DscRun, LossFallsAndRepeatsBitForBit) {
  std::string plan = writeTinyPlan("falls.plan");
  RunOptions o = parseRunOptions({plan, "--steps", "40", "--lr", "0.02"});
  std::ostringstream sink;
  RunResult a, b;
  EXPECT_EQ(runPlan(readPlanFile(plan), o, sink, &a), 0);
  EXPECT_EQ(runPlan(readPlanFile(plan), o, sink, &b), 0);
  ASSERT_EQ(a.losses.size(), 40u);
  EXPECT_TRUE(std::isfinite(a.losses.front()));
  EXPECT_LT(a.losses.back(), a.losses.front() - 0.5);
  EXPECT_EQ(a.losses, b.losses);
  Plan p = readPlanFile(plan);
  ASSERT_EQ(a.allocatedBytesPerArena.size(), 1u);
  EXPECT_EQ(a.allocatedBytesPerArena[0], p.summary.peakBytesPerArena[0]);
  std::remove(plan.c_str());
}

TEST(DscRun, SaveAndResume) {
  std::string plan = writeTinyPlan("resume.plan");
  std::string ckpt = tempPath("resume.ckpt");
  std::string full = tempPath("full.jsonl"), part = tempPath("part.jsonl");
  // Six steps straight, and three + three through a checkpoint.
  ASSERT_EQ(runTool({plan, "--steps", "6", "--log-json", full}).code, 0);
  Outcome first = runTool({plan, "--steps", "3", "--save", ckpt});
  ASSERT_EQ(first.code, 0) << first.err;
  EXPECT_NE(first.out.find("checkpoint in '" + ckpt + "'"), std::string::npos);
  Outcome second =
      runTool({plan, "--steps", "6", "--load", ckpt, "--log-json", part});
  ASSERT_EQ(second.code, 0) << second.err;
  EXPECT_NE(second.out.find("resumed from '" + ckpt +
                            "' at iteration 4 (6 samples consumed)"),
            std::string::npos)
      << second.out;
  EXPECT_EQ(second.out.find(" iteration        3/"), std::string::npos);
  // The resumed steps log the same losses as the straight run.
  auto lossOf = [](const std::string &jsonl, int iteration) {
    std::string key = "{\"iteration\": " + std::to_string(iteration) + ",";
    size_t at = jsonl.find(key);
    if (at == std::string::npos)
      return std::string("missing");
    at = jsonl.find("\"lm_loss\": ", at);
    return jsonl.substr(at, jsonl.find(',', at) - at);
  };
  std::string a = slurp(full), b = slurp(part);
  for (int it = 4; it <= 6; ++it)
    EXPECT_EQ(lossOf(a, it), lossOf(b, it)) << "iteration " << it;
  EXPECT_EQ(lossOf(b, 3), "missing");
  expectError(runTool({plan, "--steps", "2", "--load", ckpt}),
              "has done 3 steps already; --steps 2 is the total to reach");
  for (const std::string &f : {plan, ckpt, full, part})
    std::remove(f.c_str());
}

TEST(DscRun, MicroBatchesConsumeMoreSamples) {
  std::string plan = writeTinyPlan("micro.plan");
  Outcome o = runTool({plan, "--steps", "2", "--microbatches", "3"});
  ASSERT_EQ(o.code, 0) << o.err;
  // 2 steps x 3 micro-batches x 2 samples.
  EXPECT_NE(o.out.find("consumed samples:           12 |"), std::string::npos)
      << o.out;
  std::remove(plan.c_str());
}

TEST(DscRun, ByteFileData) {
  std::string plan = writeTinyPlan("bytes.plan");
  std::string data = tempPath("bytes.txt");
  std::ofstream(data) << "the quick brown fox jumps over the lazy dog\n";
  Outcome o = runTool({plan, "--steps", "1", "--data", data});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find(data), std::string::npos) << o.out;
  std::remove(plan.c_str());
  std::remove(data.c_str());
}

//===----------------------------------------------------------------------===//
// Bad input: a message and exit code 1, never a crash
//===----------------------------------------------------------------------===//

void expectError(const Outcome &o, const std::string &part) {
  EXPECT_EQ(o.code, 1);
  EXPECT_EQ(o.err.rfind("dsc-run: error: ", 0), 0u) << o.err;
  EXPECT_NE(o.err.find(part), std::string::npos) << o.err;
}

TEST(DscRun, MissingPlanFile) {
  expectError(runTool({"/nonexistent/m.plan"}),
              "cannot open plan file '/nonexistent/m.plan'");
}

TEST(DscRun, CorruptPlanFile) {
  std::string path = writeTinyPlan("corrupt.plan");
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x7f');
  }
  expectError(runTool({path}), "checksum mismatch");
  std::remove(path.c_str());
}

TEST(DscRun, PlanOfAnotherVersion) {
  std::string path = writeTinyPlan("version.plan");
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(8);
    f.put('\x63');
  }
  expectError(runTool({path}), "plan format version 99 is not supported: "
                               "this runtime reads version 15");
  std::remove(path.c_str());
}

TEST(DscRun, DataVocabDoesNotFitThePlan) {
  std::string path = writeTinyPlan("vocab.plan", TinyShape{});
  expectError(runTool({path, "--steps", "1"}),
              "the data's vocabulary (256 tokens");
  std::remove(path.c_str());
}

TEST(DscRun, MissingDataFile) {
  std::string path = writeTinyPlan("nodata.plan");
  Outcome o = runTool({path, "--data", "/nonexistent/corpus.txt"});
  expectError(o, "/nonexistent/corpus.txt");
  std::remove(path.c_str());
}

TEST(DscRun, PlanThatCannotTrain) {
  Plan plan = makeTinyPlan(DType::F32, kBytes);
  plan.programs.pop_back(); // no optimizer
  std::string path = tempPath("noopt.plan");
  writePlanFile(plan, path);
  expectError(runTool({path}), "has no 'optimizer' program");
  std::remove(path.c_str());
}

TEST(DscRun, DivergenceStopsTheRun) {
  std::string path = writeTinyPlan("diverge.plan");
  std::string json = tempPath("diverge.jsonl");
  Outcome o =
      runTool({path, "--steps", "50", "--lr", "1e30", "--log-json", json});
  expectError(o, ": training diverged (try a lower --lr)");
  EXPECT_NE(o.err.find("iteration "), std::string::npos) << o.err;
  // The diverged step is logged before the run stops.
  EXPECT_NE(slurp(json).find("null"), std::string::npos);
  std::remove(path.c_str());
  std::remove(json.c_str());
}

TEST(DscRun, UnwritableOutputs) {
  std::string path = writeTinyPlan("out.plan");
  expectError(runTool({path, "--steps", "1", "--log-json", "/nonexistent/x"}),
              "cannot open --log-json file '/nonexistent/x'");
  expectError(runTool({path, "--steps", "1", "--trace", "/nonexistent/t"}),
              "cannot open trace file '/nonexistent/t'");
  std::remove(path.c_str());
}

TEST(DscRun, BadFlag) {
  expectError(runTool({"m.plan", "--steps"}), "--steps expects a value");
}

TEST(DscRun, PrintPlan) {
  std::string plan = writeTinyPlan("print.plan");
  Outcome o = runTool({plan, "--print-plan"});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("plan version 15: vocab 256, sequence 8, micro-batch "
                       "2 x 1\n"),
            std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("'wte.weight': parameter f32 [256, 16] at arena 0 ["),
            std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("init normal(std 0.5)"), std::string::npos);
  EXPECT_NE(o.out.find("program 'optimizer' (5 instructions)"),
            std::string::npos);
  EXPECT_NE(o.out.find("  1 Matmul 'head' in(%14 'x', %3 'head.weight') "
                       "out(%15 'logits') ints(1 16 256 16 0 0 0 0)"),
            std::string::npos)
      << o.out;
  EXPECT_EQ(o.out.find("iteration"), std::string::npos);
  std::remove(plan.c_str());
}

TEST(DscRun, Help) {
  Outcome o = runTool({"--help"});
  EXPECT_EQ(o.code, 0);
  EXPECT_NE(o.out.find("usage: dsc-run MODEL"), std::string::npos);
  EXPECT_NE(o.out.find("--np N"), std::string::npos);
}

//===----------------------------------------------------------------------===//
// Ranks (--np): data parallelism on thread ranks
//===----------------------------------------------------------------------===//

/// The byte-level tiny plan on mesh dp=`dp`, its gradients averaged over dp
/// at the start of the optimizer program, with the ring model's bytes as
/// the plan's prediction.
Plan makeDataParallelPlan(int64_t dp) {
  Plan plan = makeTinyPlan(DType::F32, kBytes, 0.01);
  plan.mesh = {{"dp", dp}};
  uint32_t gWte = uint32_t(plan.findBuffer("wte.weight.grad"));
  uint32_t gHead = uint32_t(plan.findBuffer("head.weight.grad"));
  Program &opt = plan.programs[2];
  opt.instructions.insert(opt.instructions.begin(),
                          makeInst(Opcode::AllReduce, {gWte, gHead},
                                   {gWte, gHead}, "grads.all_reduce", {1, 1}));
  plan.summary.collectiveBytesPerStep = ringBytesSent(
      CollectiveKind::AllReduce,
      plan.buffers[gWte].bytes + plan.buffers[gHead].bytes, 4, int(dp), 0);
  validatePlan(plan);
  return plan;
}

TEST(DscRunRanks, TwoRanksTrainLikeOneRankWithTwoMicroBatches) {
  std::ostringstream sink, twoOut;
  RunResult one, oneMesh, two;
  RunOptions o = parseRunOptions(
      {"tiny", "--steps", "8", "--microbatches", "2", "--lr", "0.02"});
  ASSERT_EQ(runPlan(makeTinyPlan(DType::F32, kBytes, 0.01), o, sink, &one), 0);
  o.np = 1;
  ASSERT_EQ(runPlan(makeDataParallelPlan(1), o, sink, &oneMesh), 0);
  o.np = 2;
  o.microBatches = 1;
  ASSERT_EQ(runPlan(makeDataParallelPlan(2), o, twoOut, &two), 0);
  ASSERT_EQ(one.losses.size(), 8u);
  ASSERT_EQ(two.losses.size(), 8u);
  for (size_t s = 0; s < 8; ++s) {
    // dp=1 with its no-op all-reduce is the plain plan, bit for bit.
    EXPECT_EQ(oneMesh.losses[s], one.losses[s]) << s;
    EXPECT_NEAR(two.losses[s], one.losses[s], 1e-5 * one.losses[s]) << s;
    EXPECT_EQ(two.collectiveBytesPerStep[s],
              makeDataParallelPlan(2).summary.collectiveBytesPerStep);
    EXPECT_EQ(oneMesh.collectiveBytesPerStep[s], 0u);
  }
  const std::string text = twoOut.str();
  EXPECT_NE(text.find("dsc-run: mesh dp=2 on 2 ranks (threads); each of the "
                      "2 data-parallel ranks trains 1 micro-batches of the "
                      "step's 2"),
            std::string::npos)
      << text;
  // Consumed samples count both ranks' micro-batches (2 x 2 per step).
  EXPECT_NE(text.find(" iteration        8/       8 | consumed samples:"
                      "           32 |"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("collective bytes per step (rank 0): measured " +
                      std::to_string(two.collectiveBytesPerStep[0]) +
                      ", planned " +
                      std::to_string(two.collectiveBytesPerStep[0])),
            std::string::npos)
      << text;
  // Rank 1 printed nothing: one header.
  EXPECT_EQ(text.find("dsc-run: plan"), text.rfind("dsc-run: plan"));
}

TEST(DscRunRanks, TracePerRankAndJsonFromRankZero) {
  std::string plan = tempPath("dp2.plan");
  writePlanFile(makeDataParallelPlan(2), plan);
  std::string json = tempPath("dp2.jsonl"), trace = tempPath("dp2.trace.json");
  std::string trace1 = tempPath("dp2.trace.rank1.json");
  EXPECT_EQ(traceFileOfRank(trace, 1), trace1);
  EXPECT_EQ(traceFileOfRank(trace, 0), trace);
  EXPECT_EQ(traceFileOfRank("out/t", 3), "out/t.rank3");
  EXPECT_EQ(traceFileOfRank("a.b/t", 2), "a.b/t.rank2");
  Outcome o = runTool({plan, "--np", "2", "--steps", "3", "--log-json", json,
                       "--trace", trace});
  ASSERT_EQ(o.code, 0) << o.err;
  std::string lines = slurp(json);
  EXPECT_NE(
      lines.find("\"collective_bytes\": " +
                 std::to_string(
                     makeDataParallelPlan(2).summary.collectiveBytesPerStep) +
                 "}"),
      std::string::npos)
      << lines;
  for (const std::string &path : {trace, trace1}) {
    std::string t = slurp(path);
    EXPECT_NE(t.find("\"name\": \"communication\""), std::string::npos) << path;
    EXPECT_NE(t.find("\"name\": \"grads.all_reduce\", \"cat\": \"AllReduce\", "
                     "\"ph\": \"X\", \"pid\": 0, \"tid\": 1"),
              std::string::npos)
        << path;
    EXPECT_NE(t.find("\"bytes_sent\": "), std::string::npos) << path;
    std::remove(path.c_str());
  }
  std::remove(plan.c_str());
  std::remove(json.c_str());
}

TEST(DscRunRanks, TheMeshMustMatchTheRanks) {
  std::string plan = tempPath("dp2m.plan");
  writePlanFile(makeDataParallelPlan(2), plan);
  expectError(runTool({plan, "--np", "4"}),
              "dsc-run: error: the plan's mesh dp=2 needs 2 ranks, got --np 4");
  expectError(runTool({plan}),
              "the plan's mesh dp=2 needs 2 ranks, got 1 (no --np)");
  std::string single = writeTinyPlan("single.plan");
  expectError(runTool({single, "--np", "2"}),
              "the plan has no mesh, so it runs on 1 rank, got --np 2 "
              "(compile it with --compile \"dp=2\")");
  EXPECT_EQ(parseError({"m.plan", "--np", "0"}),
            "--np must be at least 1, got 0");
  std::remove(plan.c_str());
  std::remove(single.c_str());
}

TEST(DscRunRanks, AFailingRankStopsTheRunNamingIt) {
  RunOptions o = parseRunOptions({"tiny", "--steps", "5", "--np", "2"});
  RunHooks hooks;
  // Rank 1 fails before iteration 4. Rank 0 logged iteration 2 before it
  // entered iteration 3's collectives, which rank 1 completed; whether it
  // logs iteration 3 races with the abort (rank 1 may leave the last
  // collective of iteration 3 and fail before rank 0 sees it finish).
  hooks.beforeStep = [](int rank, int64_t iteration) {
    if (rank == 1 && iteration == 4)
      throw Error("injected failure");
  };
  std::ostringstream sink;
  std::string msg;
  try {
    runPlan(makeDataParallelPlan(2), o, sink, nullptr, nullptr, hooks);
  } catch (const Error &e) {
    msg = e.what();
  }
  EXPECT_EQ(msg, "rank 1 failed: iteration 4: injected failure; no "
                 "checkpoint was saved (--save DIR --save-interval K saves "
                 "them)");
  EXPECT_NE(sink.str().find(" iteration        2/       5 |"),
            std::string::npos);
  EXPECT_EQ(sink.str().find(" iteration        4/"), std::string::npos);
}

TEST(DscRunRanks, AGivenWorldRunsOneRankPerCaller) {
  // The MPI path of dsc-run (one rank per process, the world handed in),
  // driven by thread ranks: the same losses as --np 2.
  RunOptions o = parseRunOptions({"tiny", "--steps", "4", "--lr", "0.02"});
  std::ostringstream out0, sink;
  RunResult viaWorld, viaNp;
  std::vector<std::string> errors(2);
  runRanks(2, [&](Communicator &world) {
    std::ostringstream mine;
    runPlan(makeDataParallelPlan(2), o, world.rank() == 0 ? out0 : mine,
            world.rank() == 0 ? &viaWorld : nullptr, &world);
    EXPECT_EQ(mine.str(), "") << "rank " << world.rank() << " printed";
    RunOptions bad = o;
    bad.np = 3;
    try {
      runPlan(makeDataParallelPlan(2), bad, mine, nullptr, &world);
    } catch (const Error &e) {
      errors[world.rank()] = e.what();
    }
  });
  o.np = 2;
  ASSERT_EQ(runPlan(makeDataParallelPlan(2), o, sink, &viaNp), 0);
  EXPECT_EQ(viaWorld.losses, viaNp.losses);
  EXPECT_NE(out0.str().find("dsc-run: mesh dp=2 on 2 ranks (threads)"),
            std::string::npos)
      << out0.str();
  for (const std::string &e : errors)
    EXPECT_EQ(e, "--np 3 disagrees with the threads world of 2 ranks (under "
                 "mpirun, -np sets the rank count)");
}

} // namespace
