//===- ParallelPlanTest.cpp - The plan's one parser and printer -----------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// dsc::parseParallelPlan and printParallelPlan: every spelling, every error,
// and a fuzz of random and mutated plan strings (each is accepted and
// round-trips, or is an error that names the key at fault; none crashes).
//
//===----------------------------------------------------------------------===//

#include "dsc/Support/ParallelPlan.h"

#include <gtest/gtest.h>

#include <random>

using namespace dsc;

namespace {

ParallelPlan parse(const std::string &text) {
  ParallelPlan plan;
  std::string error;
  EXPECT_TRUE(parseParallelPlan(text, plan, error)) << text << ": " << error;
  return plan;
}

std::string parseError(const std::string &text) {
  ParallelPlan plan;
  std::string error;
  EXPECT_FALSE(parseParallelPlan(text, plan, error)) << text;
  return error;
}

TEST(ParallelPlan, DefaultsPrintTheMeshOnly) {
  EXPECT_EQ(ParallelPlan().str(), "dp=1 tp=1 pp=1");
  EXPECT_EQ(parse(""), ParallelPlan());
}

TEST(ParallelPlan, EveryKeyParsesAndPrintsBack) {
  ParallelPlan plan = parse(
      "dp=2 tp=4 pp=8 zero=3 bucket-bytes=1000 persistence-threshold=7 "
      "prefetch=true micro-batch-size=4 microbatches=16 "
      "pipeline-schedule=interleaved-1f1b virtual-stages=2 recompute=selective "
      "recompute-layers=3 sequence-parallel=1 offload-optimizer=nvme "
      "offload-params=host dpu=true nvme-path=\"/mnt/a dir\" "
      "nvme-block-bytes=4096 nvme-queue-depth=4 device-memory=123 "
      "precision=bf16");
  EXPECT_EQ(plan.dp, 2);
  EXPECT_EQ(plan.tp, 4);
  EXPECT_EQ(plan.pp, 8);
  EXPECT_EQ(plan.zeroStage, 3);
  EXPECT_EQ(plan.bucketBytes, 1000);
  EXPECT_EQ(plan.persistenceThreshold, 7);
  EXPECT_TRUE(plan.prefetch);
  EXPECT_EQ(plan.microBatchSize, 4);
  EXPECT_EQ(plan.numMicroBatches, 16);
  EXPECT_EQ(plan.schedule, PipelineScheduleKind::InterleavedOneFOneB);
  EXPECT_EQ(plan.virtualStages, 2);
  EXPECT_EQ(plan.recompute, RecomputeKind::Selective);
  EXPECT_EQ(plan.recomputeLayers, 3);
  EXPECT_TRUE(plan.sequenceParallel);
  EXPECT_EQ(plan.offloadOptimizer, OffloadTier::Nvme);
  EXPECT_EQ(plan.offloadParams, OffloadTier::Host);
  EXPECT_TRUE(plan.delayedUpdate);
  EXPECT_EQ(plan.nvmePath, "/mnt/a dir");
  EXPECT_EQ(plan.nvmeBlockBytes, 4096);
  EXPECT_EQ(plan.nvmeQueueDepth, 4);
  EXPECT_EQ(plan.deviceMemory, 123);
  EXPECT_EQ(plan.precision, Precision::Bf16);
  EXPECT_EQ(parse(plan.str()), plan);
  EXPECT_EQ(parse(printParallelPlan(plan, /*all=*/true)), plan);
  EXPECT_NE(plan, ParallelPlan());
}

TEST(ParallelPlan, OlderSpellingsAreAliases) {
  // --dsc-estimate's booleans and micro-batch=, DeepSpeed's "cpu".
  ParallelPlan plan = parse("offload=1 offload-params=true recompute=1 "
                            "micro-batch=2 v=3 zero-stage=1 sp sp=1 "
                            "micro-batches=5 delayed-update=0 precision=f32");
  EXPECT_EQ(plan.offloadOptimizer, OffloadTier::Host);
  EXPECT_EQ(plan.offloadParams, OffloadTier::Host);
  EXPECT_EQ(plan.recompute, RecomputeKind::Full);
  EXPECT_EQ(plan.microBatchSize, 2);
  EXPECT_EQ(plan.virtualStages, 3);
  EXPECT_EQ(plan.zeroStage, 1);
  EXPECT_TRUE(plan.sequenceParallel);
  EXPECT_EQ(plan.numMicroBatches, 5);
  EXPECT_FALSE(plan.delayedUpdate);
  EXPECT_EQ(plan.precision, Precision::Fp32);
  EXPECT_EQ(parse("offload-optimizer=cpu").offloadOptimizer, OffloadTier::Host);
  EXPECT_EQ(parse("mbs=8").microBatchSize, 8);
  EXPECT_EQ(parse("recompute=0").recompute, RecomputeKind::None);
}

TEST(ParallelPlan, ParsesOntoABaseAndReportsTheKeysGiven) {
  ParallelPlan plan = parse("dp=4 zero=2");
  PlanKeySet given;
  std::string error;
  ASSERT_TRUE(parseParallelPlan("v=2 tp=2", plan, error, &given)) << error;
  EXPECT_EQ(plan.dp, 4);
  EXPECT_EQ(plan.zeroStage, 2);
  EXPECT_EQ(plan.tp, 2);
  EXPECT_EQ(given.count(), 2u);
  EXPECT_TRUE(given[size_t(PlanKey::virtualStages)]);
  EXPECT_TRUE(given[size_t(PlanKey::tp)]);
}

TEST(ParallelPlan, OtherWordsPassThroughWhenAsked) {
  ParallelPlan plan;
  std::string error, rest;
  ASSERT_TRUE(parseParallelPlan("lr=0.1 dp=2 ds-config={a b} warmup=3", plan,
                                error, nullptr, &rest))
      << error;
  EXPECT_EQ(plan.dp, 2);
  EXPECT_EQ(rest, "lr=0.1 ds-config={a b} warmup=3");
}

TEST(ParallelPlan, ErrorsNameTheKey) {
  EXPECT_EQ(parseError("dp=2 tq=2").substr(0, 52),
            "unknown plan key 'tq' (did you mean 'tp'?); the keys");
  EXPECT_EQ(parseError("zero=4"),
            "plan key 'zero': '4' is not a ZeRO stage 0, 1, 2 or 3");
  EXPECT_EQ(parseError("dp=0"), "plan key 'dp': '0' is not an integer >= 1");
  EXPECT_EQ(parseError("device-memory=-1"),
            "plan key 'device-memory': '-1' is not an integer >= 0");
  EXPECT_EQ(parseError("pipeline-schedule=zigzag"),
            "plan key 'pipeline-schedule': 'zigzag' is not gpipe, 1f1b, "
            "interleaved-1f1b or zb-h1");
  EXPECT_EQ(parseError("offload-optimizer=gpu"),
            "plan key 'offload-optimizer': 'gpu' is not none, host (cpu) or "
            "nvme");
  EXPECT_EQ(parseError("tp"), "plan key 'tp' needs a value (an integer >= 1)");
  EXPECT_EQ(parseError("dp=99999999999999999999"),
            "plan key 'dp': '99999999999999999999' is not an integer >= 1");
  EXPECT_EQ(parseError("nvme-path=\"abc"), "'nvme-path=\"abc': an "
                                           "unterminated quote");
  EXPECT_EQ(parseError("nvme-path=\"a\"b"),
            "plan key 'nvme-path': text after the closing quote");
}

TEST(ParallelPlan, ContradictoryKeysAreRefused) {
  EXPECT_EQ(parseError("offload=1 offload-optimizer=nvme"),
            "plan key 'offload-optimizer' is given twice: 'offload=1' and "
            "'offload-optimizer=nvme' contradict each other");
  EXPECT_EQ(parseError("v=2 virtual-stages=3"),
            "plan key 'virtual-stages' is given twice: 'v=2' and "
            "'virtual-stages=3' contradict each other");
  // The same value twice is no contradiction.
  EXPECT_EQ(parse("offload=1 offload-optimizer=host").offloadOptimizer,
            OffloadTier::Host);
}

TEST(ParallelPlan, FailedParseLeavesThePlanAsItWas) {
  ParallelPlan plan = parse("dp=2");
  std::string error;
  EXPECT_FALSE(parseParallelPlan("tp=4 zero=9", plan, error));
  EXPECT_EQ(plan, parse("dp=2"));
}

/// Accepted strings round-trip; refused ones name a key or the word.
void checkOne(const std::string &text) {
  ParallelPlan plan;
  std::string error;
  if (parseParallelPlan(text, plan, error)) {
    ParallelPlan again;
    std::string error2;
    ASSERT_TRUE(parseParallelPlan(plan.str(), again, error2))
        << "'" << text << "' printed as '" << plan.str() << "': " << error2;
    ASSERT_EQ(again, plan) << text;
    ParallelPlan all;
    ASSERT_TRUE(parseParallelPlan(printParallelPlan(plan, true), all, error2))
        << error2;
    ASSERT_EQ(all, plan) << text;
    return;
  }
  const bool namesKey = error.rfind("plan key '", 0) == 0 ||
                        error.rfind("unknown plan key '", 0) == 0 ||
                        (error.rfind("'", 0) == 0 &&
                         error.find("unterminated") != std::string::npos);
  ASSERT_TRUE(namesKey) << "'" << text << "': " << error;
}

TEST(ParallelPlan, FuzzedStringsRoundTripOrNameTheKey) {
  std::mt19937_64 rng(20261203);
  const std::vector<std::string> seeds = {
      "dp=2 tp=2 pp=2 zero=1 pipeline-schedule=interleaved-1f1b v=2",
      "zero=3 offload-optimizer=nvme offload-params=nvme nvme-path=/tmp/x",
      "pp=4 microbatches=8 pipeline-schedule=zb-h1 recompute=full "
      "recompute-layers=2",
      "tp=4 sp precision=bf16 micro-batch-size=2 device-memory=1000000",
      "nvme-path=\"a \\\"quoted\\\" dir\" dpu=1 offload=cpu"};
  const std::string alphabet = "abcdefghijklmnopqrstuvwxyz0123456789=- "
                               "\"\\{}_.,/'\t";
  std::vector<std::string> names;
  for (const PlanKeyInfo &info : planKeys())
    names.push_back(info.name);
  std::uniform_int_distribution<int> pick(0, 1 << 30);
  for (int i = 0; i < 20000; ++i) {
    std::string text;
    switch (pick(rng) % 3) {
    case 0: { // random characters
      int n = pick(rng) % 40;
      for (int j = 0; j < n; ++j)
        text += alphabet[size_t(pick(rng)) % alphabet.size()];
      break;
    }
    case 1: { // a seed with a few bytes flipped, inserted or deleted
      text = seeds[size_t(pick(rng)) % seeds.size()];
      int edits = 1 + pick(rng) % 4;
      for (int e = 0; e < edits && !text.empty(); ++e) {
        size_t at = size_t(pick(rng)) % text.size();
        switch (pick(rng) % 3) {
        case 0:
          text[at] = alphabet[size_t(pick(rng)) % alphabet.size()];
          break;
        case 1:
          text.insert(at, 1, alphabet[size_t(pick(rng)) % alphabet.size()]);
          break;
        default:
          text.erase(at, 1);
        }
      }
      break;
    }
    default: { // real keys with random values
      int n = 1 + pick(rng) % 5;
      const std::vector<std::string> values = {"0",
                                               "1",
                                               "2",
                                               "3",
                                               "4",
                                               "-1",
                                               "true",
                                               "false",
                                               "none",
                                               "host",
                                               "nvme",
                                               "cpu",
                                               "full",
                                               "selective",
                                               "bf16",
                                               "fp16",
                                               "1f1b",
                                               "zb-h1",
                                               "gpipe",
                                               "interleaved-1f1b",
                                               "\"x y\"",
                                               "",
                                               "1e3",
                                               "9223372036854775807",
                                               "9223372036854775808"};
      for (int j = 0; j < n; ++j)
        text += names[size_t(pick(rng)) % names.size()] + "=" +
                values[size_t(pick(rng)) % values.size()] + " ";
    }
    }
    checkOne(text);
    if (::testing::Test::HasFatalFailure())
      return;
  }
}

} // namespace
