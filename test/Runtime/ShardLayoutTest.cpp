//===- ShardLayoutTest.cpp - a rank's part of a whole tensor --------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The oracle: cut the whole tensor by hand (nested loops over the view, the
// box and the chunk) and compare every rank's indices with ShardIndexer's;
// the union over ranks must cover each whole index exactly once.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/ShardLayout.h"

#include <gtest/gtest.h>

#include <set>

using namespace dsc::rt;

namespace {

std::vector<Plan::MeshAxis> mesh222() {
  return {{"dp", 2}, {"pp", 2}, {"tp", 2}};
}

TEST(ShardLayout, GroupIndexIsRowMajorOverTheMaskedAxes) {
  auto mesh = mesh222();
  // dp=1, pp=0, tp=1; mask dp|tp = 0b101.
  EXPECT_EQ(groupIndex(mesh, {1, 0, 1}, 0b101), 3);
  EXPECT_EQ(groupIndex(mesh, {1, 0, 1}, 0b100), 1);
  EXPECT_EQ(groupIndex(mesh, {1, 1, 0}, 0b001), 1);
  EXPECT_EQ(groupSize(mesh, 0b101), 4);
  EXPECT_EQ(groupSize(mesh, 0), 1);
}

TEST(ShardLayout, FusedQkvColumnsSplitOverTp) {
  // [H, 3H] with H = 4 seen as [4, 3, 4], the last dim split over tp = 2:
  // rank tp=1 holds columns {2,3} of each of q, k, v.
  std::vector<Plan::MeshAxis> mesh = {{"tp", 2}};
  ShardLayout layout{{4, 3, 4}, {0, 0, 1}, 0};
  ASSERT_EQ(checkShardLayout(layout, 4 * 6, mesh), "");
  ShardIndexer rank1(layout, 4 * 6, mesh, {1});
  for (int64_t row = 0; row < 4; ++row)
    for (int64_t part = 0; part < 3; ++part)
      for (int64_t col = 0; col < 2; ++col)
        EXPECT_EQ(rank1.wholeIndex(row * 6 + part * 2 + col),
                  row * 12 + part * 4 + 2 + col);
  EXPECT_EQ(rank1.wholeNumElements(), 48);
}

TEST(ShardLayout, EveryWholeIndexOnceOverAllRanks) {
  // Rows split over tp, then ZeRO-3 chunks of the box over dp.
  auto mesh = mesh222();
  ShardLayout layout{{6, 4}, {0b100, 0}, 0b001};
  const int64_t local = 6 * 4 / 2 / 2;
  ASSERT_EQ(checkShardLayout(layout, local, mesh), "");
  for (int64_t pp = 0; pp < 2; ++pp) {
    std::multiset<int64_t> seen;
    for (int64_t dp = 0; dp < 2; ++dp)
      for (int64_t tp = 0; tp < 2; ++tp) {
        ShardIndexer idx(layout, local, mesh, {dp, pp, tp});
        for (int64_t i = 0; i < local; ++i) {
          // Oracle: the box of tp is rows [3tp, 3tp+3); the dp chunk is
          // its flat elements [6dp, 6dp+6).
          int64_t boxFlat = dp * local + i;
          int64_t want = (tp * 3 + boxFlat / 4) * 4 + boxFlat % 4;
          EXPECT_EQ(idx.wholeIndex(i), want);
          seen.insert(idx.wholeIndex(i));
        }
      }
    ASSERT_EQ(seen.size(), 24u);
    for (int64_t w = 0; w < 24; ++w)
      EXPECT_EQ(seen.count(w), 1u) << "whole index " << w;
  }
}

TEST(ShardLayout, ChunkOfAWholeBuffer) {
  std::vector<Plan::MeshAxis> mesh = {{"dp", 4}};
  ShardLayout layout{{}, {}, 0b1};
  ASSERT_EQ(checkShardLayout(layout, 5, mesh), "");
  ShardIndexer idx(layout, 5, mesh, {3});
  EXPECT_EQ(idx.wholeIndex(0), 15);
  EXPECT_EQ(idx.wholeNumElements(), 20);
}

TEST(ShardLayout, FaultsAreNamed) {
  std::vector<Plan::MeshAxis> mesh = {{"dp", 2}, {"tp", 3}};
  EXPECT_NE(checkShardLayout({{4, 4}, {0, 0b10}, 0}, 4, mesh)
                .find("split into 3 parts, which do not divide it"),
            std::string::npos);
  EXPECT_NE(checkShardLayout({{4, 6}, {0, 0b10}, 0}, 9, mesh)
                .find("gives each rank 8 elements but the buffer has 9"),
            std::string::npos);
  EXPECT_NE(checkShardLayout({{4, 6}, {0, 0b100}, 0}, 8, mesh)
                .find("does not have"),
            std::string::npos);
  EXPECT_NE(checkShardLayout({{4, 6}, {0b10}, 0}, 8, mesh)
                .find("split masks"),
            std::string::npos);
  EXPECT_NE(checkShardLayout({{}, {}, 1}, 4, {}).find("no mesh"),
            std::string::npos);
  EXPECT_EQ(checkShardLayout({}, 7, {}), "");
}

} // namespace
