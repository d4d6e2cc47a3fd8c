//===- CollectivesTest.cpp - Bus bandwidth factors and placement ----------===//
//
// Part of the dsc project.
//
//===----------------------------------------------------------------------===//
//
// Checks the nccl-tests bus-bandwidth factors, the alpha-beta times and the
// intra/inter-node placement of Megatron-ordered process groups.
//
//===----------------------------------------------------------------------===//

#include "dsc/Analysis/Collectives.h"

#include "gtest/gtest.h"

using namespace mlir::dsc::analysis;

namespace {

TEST(BusBandwidth, NcclTestsFactors) {
  for (int64_t n : {2, 3, 4, 8, 16, 64, 1024}) {
    double nd = n;
    EXPECT_DOUBLE_EQ(busBandwidthFactor(CollectiveKind::AllReduce, n),
                     2 * (nd - 1) / nd);
    EXPECT_DOUBLE_EQ(busBandwidthFactor(CollectiveKind::AllGather, n),
                     (nd - 1) / nd);
    EXPECT_DOUBLE_EQ(busBandwidthFactor(CollectiveKind::ReduceScatter, n),
                     (nd - 1) / nd);
    EXPECT_EQ(busBandwidthFactor(CollectiveKind::Send, n), 1.0);
  }
  EXPECT_EQ(busBandwidthFactor(CollectiveKind::AllReduce, 8), 1.75);
  EXPECT_EQ(busBandwidthFactor(CollectiveKind::AllGather, 8), 0.875);
  EXPECT_EQ(busBandwidthFactor(CollectiveKind::AllReduce, 1), 0.0);
}

TEST(BusBandwidth, AllReduceIsReduceScatterPlusAllGather) {
  for (int64_t n : {2, 8, 512})
    EXPECT_DOUBLE_EQ(busBandwidthFactor(CollectiveKind::AllReduce, n),
                     busBandwidthFactor(CollectiveKind::ReduceScatter, n) +
                         busBandwidthFactor(CollectiveKind::AllGather, n));
}

// The cost model's factor is the bytes the runtime's communicators count
// (and the plan summary plans) per byte of the collective, for every rank,
// when n divides the buffer: one formula, dsc/Support/CollectiveBytes.h.
TEST(BusBandwidth, FactorIsTheRingBytesEveryRankSends) {
  for (int64_t n : {2, 3, 4, 8})
    for (CollectiveKind kind :
         {CollectiveKind::AllReduce, CollectiveKind::ReduceScatter,
          CollectiveKind::AllGather, CollectiveKind::AllToAll,
          CollectiveKind::Send}) {
      uint64_t bytes = 4 * uint64_t(n) * 1000;
      for (int64_t r = 0; r < n; ++r)
        EXPECT_DOUBLE_EQ(double(::dsc::ringBytesSent(kind, bytes, 4, n, r)),
                         collectiveBusBytes(kind, n, double(bytes)))
            << ::dsc::collectiveKindName(kind) << " n=" << n << " r=" << r;
    }
}

TEST(AlphaBeta, TimeIsStepsTimesLatencyPlusBusBytesOverBandwidth) {
  Link link{100e9, 5e-6, false};
  // 8-way all-reduce of 1 GB: 14 steps * 5 us + 1.75 GB / 100 GB/s.
  EXPECT_DOUBLE_EQ(collectiveTime(CollectiveKind::AllReduce, 8, 1e9, link),
                   14 * 5e-6 + 1.75e9 / 100e9);
  EXPECT_DOUBLE_EQ(collectiveTime(CollectiveKind::AllGather, 4, 1e9, link),
                   3 * 5e-6 + 0.75e9 / 100e9);
  EXPECT_DOUBLE_EQ(collectiveTime(CollectiveKind::Send, 2, 1e9, link),
                   5e-6 + 1e9 / 100e9);
  EXPECT_EQ(collectiveTime(CollectiveKind::AllReduce, 1, 1e9, link), 0.0);
  EXPECT_DOUBLE_EQ(collectiveBusBytes(CollectiveKind::AllReduce, 4, 100), 150);
}

TEST(Placement, MegatronOrderPutsTpInsideNodes) {
  // tp=8 fills a DGX node.
  GroupPlacement tp = placeGroup(1, 8, 8);
  EXPECT_FALSE(tp.crossesNodes);
  EXPECT_EQ(tp.membersPerNode, 8);
  // dp with stride tp=8: one member per node.
  GroupPlacement dp = placeGroup(8, 4, 8);
  EXPECT_TRUE(dp.crossesNodes);
  EXPECT_EQ(dp.membersPerNode, 1);
  // dp=4 with tp=2 stays within the node (ranks 0,2,4,6).
  GroupPlacement small = placeGroup(2, 4, 8);
  EXPECT_FALSE(small.crossesNodes);
  // dp=16 with tp=2: 4 members per node, across 4 nodes.
  GroupPlacement wide = placeGroup(2, 16, 8);
  EXPECT_TRUE(wide.crossesNodes);
  EXPECT_EQ(wide.membersPerNode, 4);
}

TEST(Placement, InterNodeLinkScalesWithNicsDriven) {
  ClusterSpec c;
  c.gpusPerNode = 8;
  c.intraNodeBandwidth = 300e9;
  c.intraNodeLatency = 2e-6;
  c.interNodeBandwidthPerNode = 8 * 25e9;
  c.interNodeLatency = 5e-6;
  c.calibration.intraNodeCollectiveEfficiency = 1.0;
  c.calibration.interNodeCollectiveEfficiency = 1.0;
  Link intra = linkFor(c, placeGroup(1, 8, 8));
  EXPECT_FALSE(intra.interNode);
  EXPECT_EQ(intra.busBandwidth, 300e9);
  Link oneNic = linkFor(c, placeGroup(8, 4, 8));
  EXPECT_TRUE(oneNic.interNode);
  EXPECT_EQ(oneNic.busBandwidth, 25e9);
  EXPECT_EQ(oneNic.latency, 5e-6);
  Link fourNics = linkFor(c, placeGroup(2, 16, 8));
  EXPECT_EQ(fourNics.busBandwidth, 100e9);
  // Never faster than NVLink.
  c.interNodeBandwidthPerNode = 8 * 1000e9;
  EXPECT_EQ(linkFor(c, placeGroup(1, 16, 8)).busBandwidth, 300e9);
}

} // namespace
