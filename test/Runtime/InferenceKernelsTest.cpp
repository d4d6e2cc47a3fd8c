//===- InferenceKernelsTest.cpp - the inference programs' kernels ---------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Sampling against GPT-NeoX's own filters (sampling-filters.json, made by
// scripts/hf-reference/generate-goldens.py with GPT-NeoX's filter_logits):
// for each filtered distribution, a draw in the middle of every kept
// token's cumulative interval must pick that token, so the kernel samples
// exactly the reference distribution. Paged attention against a plain
// causal attention in double over the same keys, fed in two calls through
// shuffled blocks, with grouped-query heads and a sliding window.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/InferenceKernels.h"
#include "dsc/Runtime/CpuKernels.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

using namespace dsc::rt;

namespace {

std::vector<float> numbers(const llvm::json::Array &a) {
  std::vector<float> out;
  for (const llvm::json::Value &v : a)
    out.push_back(float(*v.getAsNumber()));
  return out;
}

TEST(InferenceSample, MatchesGptNeoXFilters) {
  auto buffer = llvm::MemoryBuffer::getFile(DSC_GENERATE_GOLDENS_DIR
                                            "/sampling-filters.json");
  ASSERT_TRUE(bool(buffer)) << "cannot read sampling-filters.json";
  llvm::Expected<llvm::json::Value> json =
      llvm::json::parse((*buffer)->getBuffer());
  ASSERT_TRUE(bool(json)) << llvm::toString(json.takeError());
  const llvm::json::Object &root = *json->getAsObject();
  std::vector<std::vector<float>> logits;
  for (const llvm::json::Value &row : *root.getArray("logits"))
    logits.push_back(numbers(*row.getAsArray()));
  const int64_t width = int64_t(logits[0].size());
  int64_t draws = 0, cases = 0;
  for (const llvm::json::Value &c : *root.getArray("cases")) {
    const llvm::json::Object &obj = *c.getAsObject();
    const float temperature = float(*obj.getNumber("temperature"));
    const float topK = float(*obj.getNumber("top_k"));
    const float topP = float(*obj.getNumber("top_p"));
    const float params[3] = {temperature, topK, topP};
    ++cases;
    for (auto [r, probsValue] : llvm::enumerate(*obj.getArray("probs"))) {
      std::vector<float> probs = numbers(*probsValue.getAsArray());
      double cumulative = 0;
      for (int64_t j = 0; j < width; ++j) {
        const double p = probs[size_t(j)];
        if (p < 1e-6) {
          cumulative += p;
          continue;
        }
        const float draw = float(cumulative + p / 2);
        cumulative += p;
        int32_t token = -1;
        ASSERT_EQ(sampleTokens(logits[r].data(), params, &draw, &token, 1, 1,
                               width, 0),
                  "");
        EXPECT_EQ(token, j) << "T=" << temperature << " k=" << topK
                            << " p=" << topP << " row " << r << " draw "
                            << draw;
        ++draws;
      }
    }
  }
  EXPECT_EQ(cases, 8);
  EXPECT_GT(draws, 100);
}

TEST(InferenceSample, GreedyIsTheFirstLargestAndSkipsPaddedClasses) {
  // Two shards of 3 columns: the row is [1 5 2 | 5 0 9]; 9 is a padded class.
  const float logits[6] = {1, 5, 2, 5, 0, 9};
  const float params[3] = {0, 0, 0}, draw = 0.5f;
  int32_t token = -1;
  ASSERT_EQ(sampleTokens(logits, params, &draw, &token, 1, 2, 3, 5), "");
  EXPECT_EQ(token, 1);
  ASSERT_EQ(sampleTokens(logits, params, &draw, &token, 1, 2, 3, 0), "");
  EXPECT_EQ(token, 5);
  const float bad[3] = {-1, 0, 0};
  EXPECT_NE(sampleTokens(logits, bad, &draw, &token, 1, 2, 3, 0)
                .find("temperature -1"),
            std::string::npos);
}

/// Causal attention of row t over keys lo..t in double.
std::vector<double> reference(const std::vector<float> &q,
                              const std::vector<float> &k,
                              const std::vector<float> &v, int64_t t,
                              int64_t heads, int64_t kvHeads, int64_t d,
                              int64_t window) {
  std::vector<double> out(size_t(heads * d), 0.0);
  const int64_t lo = window > 0 ? std::max<int64_t>(0, t - window + 1) : 0;
  for (int64_t h = 0; h < heads; ++h) {
    const int64_t g = h / (heads / kvHeads);
    std::vector<double> w;
    for (int64_t s = lo; s <= t; ++s) {
      double dot = 0;
      for (int64_t i = 0; i < d; ++i)
        dot += double(q[size_t(t * heads * d + h * d + i)]) *
               double(k[size_t(s * kvHeads * d + g * d + i)]);
      w.push_back(dot / std::sqrt(double(d)));
    }
    const double m = *std::max_element(w.begin(), w.end());
    double sum = 0;
    for (double &x : w)
      sum += x = std::exp(x - m);
    for (int64_t s = lo; s <= t; ++s)
      for (int64_t i = 0; i < d; ++i)
        out[size_t(h * d + i)] += w[size_t(s - lo)] / sum *
                                  double(v[size_t(s * kvHeads * d + g * d + i)]);
  }
  return out;
}

void checkPaged(int64_t window) {
  const int64_t heads = 4, kvHeads = 2, d = 8, length = 21, blockSize = 4;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  auto draw = [&](int64_t n) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float &e : x)
      e = normal(rng);
    return x;
  };
  const std::vector<float> q = draw(length * heads * d),
                           k = draw(length * kvHeads * d),
                           v = draw(length * kvHeads * d);
  PagedCacheShape s;
  s.heads = heads;
  s.kvHeads = kvHeads;
  s.headDim = d;
  s.window = window;
  s.blocks = 12;
  s.blockSize = blockSize;
  s.sequences = 2;
  s.tableWidth = 8;
  // Sequence 1 holds blocks in a shuffled order; sequence 0 is absent.
  std::vector<int32_t> table(16, -1);
  const int32_t mine[6] = {9, 2, 11, 0, 5, 7};
  std::copy(mine, mine + 6, table.begin() + 8);
  std::vector<float> cache(size_t(s.blocks * 2 * blockSize * kvHeads * d), 0);
  // Two calls: positions 0..12, then 13..20 with two unused rows between.
  std::vector<float> y(size_t(length * heads * d), 0);
  auto run = [&](std::vector<int64_t> rows) {
    s.rows = int64_t(rows.size());
    std::vector<float> qs, ks, vs;
    std::vector<int32_t> positions, sequences;
    for (int64_t t : rows) {
      const int64_t at = t < 0 ? 0 : t;
      qs.insert(qs.end(), q.begin() + at * heads * d,
                q.begin() + (at + 1) * heads * d);
      ks.insert(ks.end(), k.begin() + at * kvHeads * d,
                k.begin() + (at + 1) * kvHeads * d);
      vs.insert(vs.end(), v.begin() + at * kvHeads * d,
                v.begin() + (at + 1) * kvHeads * d);
      positions.push_back(int32_t(at));
      sequences.push_back(t < 0 ? -1 : 1);
    }
    std::vector<float> out(qs.size(), 1.0f);
    ASSERT_EQ(pagedAttention(qs.data(), ks.data(), vs.data(), positions.data(),
                             sequences.data(), table.data(), out.data(),
                             cache.data(), s),
              "");
    for (size_t i = 0; i < rows.size(); ++i) {
      if (rows[i] < 0) {
        EXPECT_EQ(out[i * heads * d], 0.0f) << "an unused row is zeros";
        continue;
      }
      std::copy(out.begin() + i * heads * d, out.begin() + (i + 1) * heads * d,
                y.begin() + rows[i] * heads * d);
    }
  };
  std::vector<int64_t> first(13);
  std::iota(first.begin(), first.end(), 0);
  run(first);
  run({13, 14, -1, 15, 16, 17, -1, 18, 19, 20});
  double worst = 0;
  for (int64_t t = 0; t < length; ++t) {
    std::vector<double> ref = reference(q, k, v, t, heads, kvHeads, d, window);
    for (int64_t i = 0; i < heads * d; ++i)
      worst = std::max(worst, std::abs(ref[size_t(i)] -
                                       double(y[size_t(t * heads * d + i)])));
  }
  EXPECT_LT(worst, 1e-5) << "window " << window;
}

TEST(InferencePagedAttention, MatchesCausalAttentionAcrossCallsAndBlocks) {
  checkPaged(0);
}

TEST(InferencePagedAttention, SlidingWindow) { checkPaged(6); }

TEST(InferencePagedAttention, RefusesPositionsPastTheTable) {
  PagedCacheShape s;
  s.rows = 1;
  s.heads = s.kvHeads = 1;
  s.headDim = 2;
  s.blocks = 2;
  s.blockSize = 2;
  s.sequences = 1;
  s.tableWidth = 2;
  std::vector<float> x(2, 0), cache(16, 0);
  std::vector<int32_t> table = {0, 1};
  int32_t position = 4, sequence = 0;
  std::string why =
      pagedAttention(x.data(), x.data(), x.data(), &position, &sequence,
                     table.data(), x.data(), cache.data(), s);
  EXPECT_NE(why.find("position 4 is outside the planned context of 4 tokens"),
            std::string::npos)
      << why;
  table = {0, 5};
  position = 3;
  why = pagedAttention(x.data(), x.data(), x.data(), &position, &sequence,
                       table.data(), x.data(), cache.data(), s);
  EXPECT_NE(why.find("block 1 is 5, not one of the cache's 2 blocks"),
            std::string::npos)
      << why;
}

} // namespace

namespace {

/// A decode step's products have one row: the matrix-vector path
/// (rowTimesMatrix) must equal the plain product for every layout, wide
/// enough to split over threads, and accumulate.
TEST(InferenceMatmul, OneRowEqualsTheNaiveProduct) {
  const int64_t n = 1000, k = 300;
  std::mt19937 rng(3);
  std::normal_distribution<double> normal;
  std::vector<double> a(static_cast<size_t>(k)), b(static_cast<size_t>(n * k)),
      c(static_cast<size_t>(n));
  for (double &x : a)
    x = normal(rng);
  for (double &x : b)
    x = normal(rng);
  for (bool transA : {false, true})
    for (bool transB : {false, true})
      for (bool accumulate : {false, true}) {
        MatmulShape s;
        s.m = 1;
        s.n = n;
        s.k = k;
        s.transA = transA;
        s.transB = transB;
        std::fill(c.begin(), c.end(), 1.0);
        matmulForward(a.data(), b.data(), c.data(), s, accumulate);
        double worst = 0;
        for (int64_t j = 0; j < n; ++j) {
          double want = accumulate ? 1.0 : 0.0;
          for (int64_t i = 0; i < k; ++i)
            want += a[size_t(i)] * b[size_t(transB ? j * k + i : i * n + j)];
          worst = std::max(worst, std::abs(want - c[size_t(j)]));
        }
        EXPECT_LT(worst, 1e-9) << "transA " << transA << " transB " << transB
                               << " accumulate " << accumulate;
      }
}

} // namespace
