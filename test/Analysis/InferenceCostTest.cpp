//===- InferenceCostTest.cpp - pricing inference plans --------------------===//
//
// The inference cost model's formulas on exact numbers (InferenceCost.h):
// bytes per GPU, the decode floor, the step as the larger of its memory and
// compute times plus the all-reduces, the prefill, and the search's choice.
//
//===----------------------------------------------------------------------===//

#include "dsc/Analysis/InferenceCost.h"
#include "dsc/Analysis/Collectives.h"

#include "gtest/gtest.h"

using namespace mlir::dsc::analysis;

namespace {

ClusterSpec simple() {
  ClusterSpec c;
  c.gpu.kind = "test";
  c.gpu.peak16BitFlops = 1e15;
  c.gpu.memoryBytes = 82e9;
  c.gpu.memoryBandwidth = 2e12;
  c.gpusPerNode = 8;
  c.intraNodeBandwidth = 200e9;
  c.intraNodeLatency = 5e-6;
  c.calibration.reservedBytes = 2e9;
  return c;
}

ModelShape model() {
  ModelShape m;
  m.numLayers = 32;
  m.hiddenSize = 4096;
  m.numHeads = 32;
  m.numKvHeads = 8;
  m.vocabSize = 32000;
  m.parameters = 7e9;
  return m;
}

TEST(InferenceCost, BytesFloorAndLargestBatch) {
  const ClusterSpec c = simple();
  InferencePlan p;
  p.tp = 2;
  p.context = 4096;
  InferenceEstimate e = estimateInference(model(), c, p);
  EXPECT_DOUBLE_EQ(e.weightBytes, 7e9 * 2 / 2);
  // 2 x 32 layers x 8/2 kv heads x 128 x 2 bytes.
  EXPECT_DOUBLE_EQ(e.kvBytesPerToken, 2.0 * 32 * 4 * 128 * 2);
  EXPECT_DOUBLE_EQ(e.kvBytesPerSequence, e.kvBytesPerToken * 4096);
  EXPECT_EQ(e.largestBatch,
            int64_t((80e9 - 7e9) / (2.0 * 32 * 4 * 128 * 2 * 4096)));
  const Link link = linkFor(c, placeGroup(1, 2, 8));
  const double ar1 =
      collectiveTime(CollectiveKind::AllReduce, 2, 4096 * 2, link);
  EXPECT_DOUBLE_EQ(e.decodeFloorSeconds, 7e9 / 2e12 + 2 * 32 * ar1);
  EXPECT_DOUBLE_EQ(e.decodeSeconds,
                   std::max(e.decodeMemorySeconds, e.decodeComputeSeconds) +
                       e.decodeCommSeconds);
  EXPECT_GT(e.decodeSeconds, e.decodeFloorSeconds);
  // At batch 1 a decode step is memory-bound.
  EXPECT_GT(e.decodeMemorySeconds, e.decodeComputeSeconds);
  EXPECT_DOUBLE_EQ(e.tokensPerSecond, 1 / e.decodeSeconds);
}

TEST(InferenceCost, BatchesTradeLatencyForThroughput) {
  const ClusterSpec c = simple();
  InferencePlan p;
  p.context = 1024;
  InferenceEstimate one = estimateInference(model(), c, p);
  p.batch = 64;
  InferenceEstimate many = estimateInference(model(), c, p);
  EXPECT_GT(many.decodeSeconds, one.decodeSeconds);
  EXPECT_GT(many.tokensPerSecond, 20 * one.tokensPerSecond);
  // A prefill of p tokens is compute: 2 P p plus the causal scores.
  p.prompt = 1024;
  InferenceEstimate e = estimateInference(model(), c, p);
  EXPECT_GT(e.prefillSeconds, 2 * 7e9 * 1024 / 1e15);
}

TEST(InferenceCost, SearchAndErrors) {
  const ClusterSpec c = simple();
  InferencePlan p;
  p.tp = 3;
  EXPECT_EQ(checkInferencePlan(model(), c, p),
            "tp=3 does not divide the 32 heads and 8 kv heads");
  p.tp = 16;
  EXPECT_EQ(checkInferencePlan(model(), c, p),
            "tp=16 spans more than a node's 8 GPUs");
  p.tp = 1;
  // Latency: more ranks read fewer weights each, until the all-reduces
  // cost more; every candidate divides the 8 kv heads. By hand: 14 GB of
  // bf16 weights at 0.8 x 2 TB/s is 8.75 ms at tp=1, 2.19 ms at tp=4
  // plus 64 all-reduces of ~31 us (6 steps of 5 us and 8 KB at 160 GB/s),
  // 1.09 ms at tp=8 plus 64 of ~70 us: tp=4 wins, tp=1 is last.
  std::vector<InferenceChoice> latency = searchInference(model(), c, p, false);
  ASSERT_EQ(latency.size(), 4u); // tp 1, 2, 4, 8
  EXPECT_EQ(latency.front().plan.tp, 4);
  EXPECT_EQ(latency.back().plan.tp, 1);
  std::vector<InferenceChoice> throughput =
      searchInference(model(), c, p, true);
  ASSERT_FALSE(throughput.empty());
  EXPECT_EQ(throughput.front().plan.batch,
            throughput.front().estimate.largestBatch);
}

} // namespace
