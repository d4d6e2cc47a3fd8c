//===- KernelForwardTest.cpp - Forwards against independent references ----===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The FD checks prove each backward matches its forward; these prove the
// forwards compute the right function (naive loops, known values, masks).
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/CpuKernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <omp.h>
#include <random>
#include <vector>

using namespace dsc::rt;

namespace {

TEST(Dropout, MaskIsDeterministicAndHasTheRightRate) {
  const int64_t n = 200000;
  const float p = 0.1f;
  std::vector<float> x(n, 1.0f), y(n), y2(n);
  dropoutForward(x.data(), y.data(), n, p, 99);
  dropoutForward(x.data(), y2.data(), n, p, 99);
  EXPECT_EQ(std::memcmp(y.data(), y2.data(), n * sizeof(float)), 0);
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(y[i] != 0.0f, dropoutKeep(99, i, p)) << i;
    if (y[i] != 0.0f) {
      ++kept;
      ASSERT_FLOAT_EQ(y[i], 1.0f / 0.9f);
    }
  }
  // 0.9 * n +- 5 sigma (sigma = sqrt(n p (1-p)) ~ 134).
  EXPECT_NEAR(double(kept), 0.9 * n, 700.0);
  // A shard at offset 1000 reproduces the unsharded mask.
  std::vector<float> shard(500);
  dropoutForward(x.data(), shard.data(), 500, p, 99, 1000);
  EXPECT_EQ(std::memcmp(shard.data(), y.data() + 1000, 500 * sizeof(float)), 0);
  // A different seed gives a different mask.
  dropoutForward(x.data(), y2.data(), n, p, 100);
  EXPECT_NE(std::memcmp(y.data(), y2.data(), n * sizeof(float)), 0);
}

TEST(Forward, MatmulMatchesNaiveLoops) {
  for (int mask = 0; mask < 8; ++mask) {
    MatmulShape s;
    s.batch = 2, s.m = 3, s.n = 4, s.k = 5;
    s.transA = mask & 1, s.transB = mask & 2, s.broadcastB = mask & 4;
    std::vector<double> a(s.batch * s.m * s.k), b(s.batch * s.k * s.n);
    for (size_t i = 0; i < a.size(); ++i)
      a[i] = std::sin(double(i) + 1);
    for (size_t i = 0; i < b.size(); ++i)
      b[i] = std::cos(double(i) * 0.7);
    std::vector<double> c(s.batch * s.m * s.n);
    matmulForward(a.data(), b.data(), c.data(), s);
    for (int64_t bi = 0; bi < s.batch; ++bi)
      for (int64_t i = 0; i < s.m; ++i)
        for (int64_t j = 0; j < s.n; ++j) {
          double want = 0;
          for (int64_t l = 0; l < s.k; ++l) {
            const double *ab = a.data() + bi * s.m * s.k;
            const double *bb = b.data() + (s.broadcastB ? 0 : bi * s.k * s.n);
            double av = s.transA ? ab[l * s.m + i] : ab[i * s.k + l];
            double bv = s.transB ? bb[j * s.k + l] : bb[l * s.n + j];
            want += av * bv;
          }
          ASSERT_NEAR(c[(bi * s.m + i) * s.n + j], want, 1e-12)
              << "mask " << mask;
        }
  }
}

/// Shapes large enough that the GEMM is split across threads, by rows
/// (m >= n) and by columns (m < n), with blocks not a multiple of the split.
TEST(Forward, MatmulSplitAcrossThreadsMatchesNaiveLoops) {
  int saved = omp_get_max_threads();
  omp_set_num_threads(3);
  for (auto [m, n] : {std::pair<int64_t, int64_t>{333, 130}, {70, 451}}) {
    for (int mask = 0; mask < 4; ++mask) {
      MatmulShape s;
      s.m = m, s.n = n, s.k = 97;
      s.transA = mask & 1, s.transB = mask & 2;
      std::vector<float> a(s.m * s.k), b(s.k * s.n), c(s.m * s.n);
      for (size_t i = 0; i < a.size(); ++i)
        a[i] = float(std::sin(0.1 * double(i)));
      for (size_t i = 0; i < b.size(); ++i)
        b[i] = float(std::cos(0.07 * double(i)));
      matmulForward(a.data(), b.data(), c.data(), s);
      for (int64_t i = 0; i < s.m; ++i)
        for (int64_t j = 0; j < s.n; ++j) {
          double want = 0;
          for (int64_t l = 0; l < s.k; ++l)
            want += double(s.transA ? a[l * s.m + i] : a[i * s.k + l]) *
                    double(s.transB ? b[j * s.k + l] : b[l * s.n + j]);
          ASSERT_NEAR(c[i * s.n + j], want, 1e-4)
              << m << "x" << n << " mask " << mask << " at " << i << "," << j;
        }
    }
  }
  omp_set_num_threads(saved);
}

TEST(Forward, AttentionMatchesNaiveLoops) {
  for (bool causal : {true, false}) {
    AttentionShape s;
    s.batch = 2, s.seq = 70, s.hidden = 12, s.heads = 3;
    s.causal = causal;
    s.rowBlock = 16; // five blocks, the last one short
    const int64_t n = s.batch * s.seq * s.hidden, hd = s.headDim();
    std::vector<double> q(n), k(n), v(n), out(n), lse(s.lseSize()),
        scratch(attentionScratchSize(s, 2));
    for (int64_t i = 0; i < n; ++i) {
      q[i] = std::sin(0.3 * i);
      k[i] = std::cos(0.17 * i);
      v[i] = std::sin(0.05 * i + 1);
    }
    ASSERT_TRUE(attentionForward(q.data(), k.data(), v.data(), out.data(),
                                 lse.data(), scratch.data(),
                                 int64_t(scratch.size()), s));
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t h = 0; h < s.heads; ++h)
        for (int64_t i = 0; i < s.seq; ++i) {
          const int64_t keys = causal ? i + 1 : s.seq;
          std::vector<double> sc(keys);
          double mx = -1e300, sum = 0;
          for (int64_t j = 0; j < keys; ++j) {
            double d = 0;
            for (int64_t c = 0; c < hd; ++c)
              d += q[(b * s.seq + i) * s.hidden + h * hd + c] *
                   k[(b * s.seq + j) * s.hidden + h * hd + c];
            sc[j] = d / std::sqrt(double(hd));
            mx = std::max(mx, sc[j]);
          }
          for (double &x : sc)
            sum += (x = std::exp(x - mx));
          ASSERT_NEAR(lse[(b * s.heads + h) * s.seq + i], mx + std::log(sum),
                      1e-12);
          for (int64_t c = 0; c < hd; ++c) {
            double want = 0;
            for (int64_t j = 0; j < keys; ++j)
              want += sc[j] / sum * v[(b * s.seq + j) * s.hidden + h * hd + c];
            ASSERT_NEAR(out[(b * s.seq + i) * s.hidden + h * hd + c], want,
                        1e-12)
                << (causal ? "causal" : "non-causal") << " row " << i;
          }
        }
  }
}

TEST(Forward, CrossEntropyOfUniformLogitsIsLogVocab) {
  const int64_t rows = 3, vocab = 50304;
  std::vector<float> logits(rows * vocab, 0.25f), lse(rows);
  std::vector<int32_t> targets = {0, 17, 50303};
  float loss = crossEntropyForward(logits.data(), targets.data(), lse.data(),
                                   rows, vocab);
  EXPECT_NEAR(loss, std::log(50304.0f), 1e-4f);
  targets[1] = 50304; // out of range: a loud NaN, not a read past the row
  loss = crossEntropyForward(logits.data(), targets.data(), lse.data(), rows,
                             vocab);
  EXPECT_TRUE(std::isnan(loss));
}

TEST(Forward, EmbeddingCountsOutOfRangeIds) {
  std::vector<float> table = {1, 2, 3, 4}, out(6, -1.0f);
  std::vector<int32_t> ids = {1, 2, -1};
  EXPECT_EQ(embeddingForward(table.data(), ids.data(), out.data(), 3, 2, 2), 2);
  EXPECT_EQ(out[0], 3.0f);
  EXPECT_EQ(out[1], 4.0f);
  EXPECT_EQ(out[2], 0.0f);
  EXPECT_EQ(out[5], 0.0f);
}

TEST(Forward, GeluKnownValues) {
  // GPT-2's gelu(1) = 0.5 * (1 + tanh(sqrt(2/pi) * 1.044715)).
  double x[3] = {1.0, 0.0, -3.0}, y[3];
  geluForward(x, y, 3);
  EXPECT_NEAR(y[0], 0.8411919906082768, 1e-12);
  EXPECT_EQ(y[1], 0.0);
  EXPECT_NEAR(y[2], -0.0036373920817729943, 1e-12);
}

/// --dsc-fuse's bias_gelu and bias_gelu_grad against the chains they
/// replace, in fp32, bit for bit: bias_add then gelu, and gelu_grad of the
/// bias_add's result (both forms; rows enough for every thread, an odd row
/// length for the vector loops' tails).
TEST(Forward, BiasGeluIsBiasAddThenGeluBitForBit) {
  const int64_t rows = 67, cols = 37, n = rows * cols;
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<float> x(n), bias(cols), dy(n);
  for (float &v : x)
    v = dist(rng);
  for (float &v : bias)
    v = dist(rng);
  for (float &v : dy)
    v = dist(rng);
  std::vector<float> sum(n), want(n), got(n), wantDx(n), gotDx(n);
  biasAddForward(x.data(), bias.data(), sum.data(), rows, cols);
  for (bool exact : {false, true}) {
    if (exact) {
      geluExactForward(sum.data(), want.data(), n);
      geluExactBackward(sum.data(), dy.data(), wantDx.data(), n, false);
    } else {
      geluForward(sum.data(), want.data(), n);
      geluBackward(sum.data(), dy.data(), wantDx.data(), n, false);
    }
    biasGeluForward(x.data(), bias.data(), got.data(), rows, cols, exact);
    biasGeluBackward(x.data(), bias.data(), dy.data(), gotDx.data(), rows, cols,
                     exact, false);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), n * sizeof(float)), 0)
        << "exact=" << exact;
    EXPECT_EQ(std::memcmp(gotDx.data(), wantDx.data(), n * sizeof(float)), 0)
        << "exact=" << exact;
    // In place, as the memory planner may place them (kElementwise).
    std::vector<float> inPlace = x;
    biasGeluForward(inPlace.data(), bias.data(), inPlace.data(), rows, cols,
                    exact);
    EXPECT_EQ(std::memcmp(inPlace.data(), want.data(), n * sizeof(float)), 0);
    // Accumulate mode as the unfused gradient's (the product may be
    // contracted into the add: compared with that, not with 1 + wantDx).
    std::vector<float> accDx(n, 1.0f), wantAcc(n, 1.0f);
    if (exact)
      geluExactBackward(sum.data(), dy.data(), wantAcc.data(), n, true);
    else
      geluBackward(sum.data(), dy.data(), wantAcc.data(), n, true);
    biasGeluBackward(x.data(), bias.data(), dy.data(), accDx.data(), rows, cols,
                     exact, true);
    EXPECT_EQ(std::memcmp(accDx.data(), wantAcc.data(), n * sizeof(float)), 0)
        << "exact=" << exact;
  }
}

/// Mixed accumulate masks, as the plan's LayerNormGrad uses (6: dx is
/// overwritten, dgamma and dbeta accumulate across micro-batches).
/// Both epsilon placements against the formulas written out in long double:
/// transformers' Llama (eps inside the square root) and GPT-NeoX's RMSNorm
/// (eps added to the root mean square). A large eps makes them differ.
TEST(Forward, RmsNormMatchesBothFormulas) {
  const int64_t rows = 5, cols = 7;
  const double eps = 0.25;
  std::mt19937 rng(3);
  std::normal_distribution<double> dist(0.0, 1.0);
  std::vector<double> x(rows * cols), gamma(cols), y(rows * cols);
  for (double &v : x)
    v = dist(rng);
  for (double &v : gamma)
    v = dist(rng);
  for (bool outside : {false, true}) {
    rmsNormForward(x.data(), gamma.data(), y.data(), rows, cols, eps, outside);
    for (int64_t r = 0; r < rows; ++r) {
      long double ms = 0;
      for (int64_t c = 0; c < cols; ++c)
        ms += (long double)x[r * cols + c] * x[r * cols + c];
      ms /= cols;
      const long double scale =
          outside ? 1.0L / (std::sqrt(ms) + eps) : 1.0L / std::sqrt(ms + eps);
      for (int64_t c = 0; c < cols; ++c)
        EXPECT_NEAR(y[r * cols + c], double(x[r * cols + c] * scale * gamma[c]),
                    1e-14)
            << "outside=" << outside << " r=" << r << " c=" << c;
    }
  }
  // The two placements are different functions.
  std::vector<double> inside(rows * cols);
  rmsNormForward(x.data(), gamma.data(), inside.data(), rows, cols, eps, false);
  EXPECT_GT(std::abs(inside[0] - y[0]), 1e-3);
}

TEST(AccumulateMask, LayerNormMixesOverwriteAndAccumulate) {
  const int64_t rows = 3, cols = 8;
  std::vector<double> x(rows * cols), g(cols, 1.5), dy(rows * cols);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = std::sin(double(i));
    dy[i] = std::cos(0.3 * double(i));
  }
  std::vector<double> dx0(rows * cols), dg0(cols), db0(cols);
  layerNormBackward(x.data(), g.data(), (double *)nullptr, (double *)nullptr,
                    dy.data(), dx0.data(), dg0.data(), db0.data(), rows, cols,
                    1e-5, AccumulateMask(0));
  std::vector<double> dx(rows * cols, 100.0), dg(cols, 1.0), db(cols, 2.0);
  layerNormBackward(x.data(), g.data(), (double *)nullptr, (double *)nullptr,
                    dy.data(), dx.data(), dg.data(), db.data(), rows, cols,
                    1e-5, AccumulateMask(6));
  for (int64_t i = 0; i < rows * cols; ++i)
    EXPECT_DOUBLE_EQ(dx[i], dx0[i]);
  for (int64_t c = 0; c < cols; ++c) {
    // Summed onto the old value row by row: equal up to rounding.
    EXPECT_NEAR(dg[c], 1.0 + dg0[c], 1e-13);
    EXPECT_NEAR(db[c], 2.0 + db0[c], 1e-13);
  }
}

/// A tensor-parallel rank holding heads [2, 4) of 4 (headOffset 2) computes
/// exactly the outputs, dropout mask included, that one rank computes for
/// those heads: the mask is indexed by the global head.
TEST(Forward, AttentionDropoutMaskFollowsGlobalHeads) {
  AttentionShape full;
  full.batch = 2, full.seq = 7, full.hidden = 16, full.heads = 4;
  full.dropout = 0.3f, full.seed = 5;
  const int64_t S = full.seq, H = full.hidden, hd = full.headDim();
  const int64_t n = full.batch * S * H;
  std::vector<float> q(n), k(n), v(n), out(n);
  for (int64_t i = 0; i < n; ++i) {
    q[i] = std::sin(0.37f * i);
    k[i] = std::cos(0.11f * i);
    v[i] = std::sin(0.05f * i + 2);
  }
  ASSERT_TRUE(attentionForward(q.data(), k.data(), v.data(), out.data(),
                               (float *)nullptr, (float *)nullptr, 0, full));

  AttentionShape half = full;
  half.heads = 2, half.hidden = 2 * hd, half.headOffset = 2,
  half.totalHeads = 4;
  const int64_t hn = full.batch * S * half.hidden;
  std::vector<float> hq(hn), hk(hn), hv(hn), hout(hn);
  for (int64_t r = 0; r < full.batch * S; ++r)
    for (int64_t c = 0; c < half.hidden; ++c) {
      hq[r * half.hidden + c] = q[r * H + 2 * hd + c];
      hk[r * half.hidden + c] = k[r * H + 2 * hd + c];
      hv[r * half.hidden + c] = v[r * H + 2 * hd + c];
    }
  ASSERT_TRUE(attentionForward(hq.data(), hk.data(), hv.data(), hout.data(),
                               (float *)nullptr, (float *)nullptr, 0, half));
  for (int64_t r = 0; r < full.batch * S; ++r)
    for (int64_t c = 0; c < half.hidden; ++c)
      ASSERT_EQ(hout[r * half.hidden + c], out[r * H + 2 * hd + c])
          << "row " << r << " column " << c;

  // And the mask is really applied: without dropout the output differs.
  AttentionShape noDrop = full;
  noDrop.dropout = 0.0f;
  std::vector<float> out0(n);
  ASSERT_TRUE(attentionForward(q.data(), k.data(), v.data(), out0.data(),
                               (float *)nullptr, (float *)nullptr, 0, noDrop));
  EXPECT_NE(std::memcmp(out.data(), out0.data(), n * sizeof(float)), 0);
}

TEST(Forward, AttentionRefusesTooSmallScratch) {
  AttentionShape s;
  s.batch = 1, s.seq = 4, s.hidden = 4, s.heads = 1;
  std::vector<float> x(16, 0.5f), out(16, -1.0f), scratch(3);
  EXPECT_FALSE(attentionForward(x.data(), x.data(), x.data(), out.data(),
                                (float *)nullptr, scratch.data(), 3, s));
  EXPECT_EQ(out[0], -1.0f) << "wrote output after refusing";
}

TEST(Forward, SliceOfABox) {
  // in [2, 3, 4] = 0..23; box [1, 2, 2] at (1, 1, 1).
  std::vector<float> in(24), out(4);
  for (int i = 0; i < 24; ++i)
    in[i] = float(i);
  const int64_t inShape[] = {2, 3, 4}, outShape[] = {1, 2, 2},
                offsets[] = {1, 1, 1};
  sliceForward(in.data(), out.data(), inShape, outShape, offsets, 3);
  EXPECT_EQ(out, std::vector<float>({17, 18, 21, 22}));
}

TEST(Forward, PositionEmbeddingRepeatsOverTheBatch) {
  std::vector<float> table = {1, 2, 3, 4, 5, 6}, out(8); // 3 positions x 2
  positionEmbeddingForward(table.data(), out.data(), 2, 2, 2);
  EXPECT_EQ(out, std::vector<float>({1, 2, 3, 4, 1, 2, 3, 4}));
}

} // namespace
