//===- OptimizerTest.cpp - AdamW, SGD, grad norm and forward references --===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Optimizer steps against hand-computed values, reduction determinism across
// thread counts, and forwards against naive loops (FD checks only backwards).
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/CpuKernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <omp.h>
#include <random>
#include <vector>

using namespace dsc::rt;

namespace {

// Two AdamW steps on one scalar, p0 = 1, g = 0.5 then -0.25, lr 0.1, betas
// (0.9, 0.999), eps 1e-8, wd 0.01. By hand (40-digit decimal arithmetic):
//   t=1: p = 0.999 - 0.1 * 0.5/(0.5 + 1e-8)             = 0.899000002
//   t=2: m = 0.02, v = 0.00031225, bc1 = 0.19, bc2 = 0.001999,
//        p = 0.899000002*0.999 - (0.1/0.19) * 0.02/(sqrt(v/bc2) + 1e-8)
//          = 0.87146729870584616...
TEST(AdamW, TwoStepsMatchHandComputedReference) {
  AdamWConfig cfg;
  cfg.lr = 0.1;
  cfg.beta1 = 0.9;
  cfg.beta2 = 0.999;
  cfg.eps = 1e-8;
  cfg.weightDecay = 0.01;
  double p = 1.0, m = 0.0, v = 0.0, g = 0.5;
  adamwStep(&p, &g, &m, &v, 1, cfg, 1, /*decay=*/true);
  EXPECT_NEAR(p, 0.8990000019999999600, 1e-15);
  EXPECT_NEAR(m, 0.05, 1e-15);
  EXPECT_NEAR(v, 0.00025, 1e-15);
  g = -0.25;
  adamwStep(&p, &g, &m, &v, 1, cfg, 2, /*decay=*/true);
  EXPECT_NEAR(p, 0.87146729870584616260, 1e-14);
  EXPECT_NEAR(m, 0.02, 1e-15);
  EXPECT_NEAR(v, 0.00031225, 1e-15);

  // Same steps in fp32.
  float pf = 1.0f, mf = 0.0f, vf = 0.0f, gf = 0.5f;
  adamwStep(&pf, &gf, &mf, &vf, 1, cfg, 1, true);
  gf = -0.25f;
  adamwStep(&pf, &gf, &mf, &vf, 1, cfg, 2, true);
  EXPECT_NEAR(pf, 0.8714673f, 1e-6f);
}

// Without decay the weight-decay term must vanish: the no-decay path is how
// biases and LayerNorm gains are excluded, as in Megatron.
TEST(AdamW, NoDecayFlagSkipsWeightDecay) {
  AdamWConfig cfg;
  cfg.lr = 0.1;
  cfg.weightDecay = 0.5;
  double p = 2.0, m = 0, v = 0, g = 0.0;
  adamwStep(&p, &g, &m, &v, 1, cfg, 1, /*decay=*/false);
  EXPECT_EQ(p, 2.0);
  adamwStep(&p, &g, &m, &v, 1, cfg, 2, /*decay=*/true);
  EXPECT_NEAR(p, 2.0 * (1 - 0.05), 1e-15);
}

// The vector path agrees with a scalar restatement of the AdamW paper's
// update (p -= lr * (mhat / (sqrt(vhat) + eps) + wd * p)).
TEST(AdamW, VectorMatchesPaperFormulation) {
  const int n = 1000;
  std::mt19937 rng(3);
  std::normal_distribution<double> dist;
  std::vector<double> p(n), m(n, 0), v(n, 0), g(n);
  for (double &x : p)
    x = dist(rng);
  std::vector<double> rp = p, rm = m, rv = v;
  AdamWConfig cfg;
  cfg.lr = 3e-3;
  cfg.weightDecay = 0.1;
  for (int t = 1; t <= 5; ++t) {
    for (double &x : g)
      x = dist(rng);
    adamwStep(p.data(), g.data(), m.data(), v.data(), n, cfg, t, true);
    for (int i = 0; i < n; ++i) {
      rm[i] = cfg.beta1 * rm[i] + (1 - cfg.beta1) * g[i];
      rv[i] = cfg.beta2 * rv[i] + (1 - cfg.beta2) * g[i] * g[i];
      double mh = rm[i] / (1 - std::pow(cfg.beta1, t));
      double vh = rv[i] / (1 - std::pow(cfg.beta2, t));
      rp[i] -=
          cfg.lr * (mh / (std::sqrt(vh) + cfg.eps) + cfg.weightDecay * rp[i]);
    }
  }
  for (int i = 0; i < n; ++i)
    ASSERT_NEAR(p[i], rp[i], 1e-12) << i;
}

// torch.optim.SGD(momentum=0.9, weight_decay=0.1), two steps, by hand:
//   t=1: d = 1 + 0.1*2 = 1.2, buf = 1.2, p = 2 - 0.1*1.2 = 1.88
//   t=2: d = -0.5 + 0.188 = -0.312, buf = 1.08 - 0.312 = 0.768,
//        p = 1.88 - 0.0768 = 1.8032
TEST(Sgd, MomentumTwoSteps) {
  SgdConfig cfg;
  cfg.lr = 0.1;
  cfg.momentum = 0.9;
  cfg.weightDecay = 0.1;
  double p = 2.0, buf = 0.0, g = 1.0;
  sgdStep(&p, &g, &buf, 1, cfg);
  EXPECT_NEAR(p, 1.88, 1e-15);
  g = -0.5;
  sgdStep(&p, &g, &buf, 1, cfg);
  EXPECT_NEAR(buf, 0.768, 1e-15);
  EXPECT_NEAR(p, 1.8032, 1e-15);
  // Nesterov: p -= lr * (d + momentum * buf) = 2 - 0.1*(1.2 + 1.08).
  cfg.nesterov = true;
  p = 2.0, buf = 0.0, g = 1.0;
  sgdStep(&p, &g, &buf, 1, cfg);
  EXPECT_NEAR(p, 2.0 - 0.1 * (1.2 + 0.9 * 1.2), 1e-15);
}

TEST(GradNorm, SumOfSquaresIsExactAndThreadCountIndependent) {
  std::mt19937 rng(5);
  std::normal_distribution<float> dist;
  std::vector<float> a(10000), b(3), c(4096 * 3 + 17);
  for (auto *buf : {&a, &b, &c})
    for (float &x : *buf)
      x = dist(rng);
  const float *bufs[] = {a.data(), b.data(), c.data()};
  const int64_t sizes[] = {int64_t(a.size()), int64_t(b.size()),
                           int64_t(c.size())};
  double want = 0;
  for (auto *buf : {&a, &b, &c})
    for (float x : *buf)
      want += double(x) * x;
  int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  double one = sumOfSquares(bufs, sizes, 3);
  omp_set_num_threads(3);
  double three = sumOfSquares(bufs, sizes, 3);
  omp_set_num_threads(saved);
  EXPECT_NEAR(one, want, 1e-9 * want);
  EXPECT_EQ(std::memcmp(&one, &three, sizeof(double)), 0)
      << "grad norm depends on the thread count";
}

TEST(GradNorm, ClipScale) {
  EXPECT_EQ(clipScale(0.5, 1.0), 1.0);
  EXPECT_NEAR(clipScale(4.0, 1.0), 1.0 / (4.0 + 1e-6), 1e-15);
  EXPECT_TRUE(std::isnan(clipScale(NAN, 1.0)));
  std::vector<float> g = {3, 4};
  scaleForward(g.data(), g.data(), 2, float(clipScale(5.0, 1.0)));
  EXPECT_NEAR(g[0], 0.6f, 1e-6f);
  EXPECT_NEAR(g[1], 0.8f, 1e-6f);
}

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

TEST(Forward, AttentionMatchesNaiveLoops) {
  AttentionShape s;
  s.batch = 2, s.seq = 6, s.hidden = 12, s.heads = 3;
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
        std::vector<double> sc(i + 1);
        double mx = -1e300, sum = 0;
        for (int64_t j = 0; j <= i; ++j) {
          double d = 0;
          for (int64_t c = 0; c < hd; ++c)
            d += q[(b * s.seq + i) * s.hidden + h * hd + c] *
                 k[(b * s.seq + j) * s.hidden + h * hd + c];
          sc[j] = d / std::sqrt(double(hd));
          mx = std::max(mx, sc[j]);
        }
        for (double &x : sc)
          sum += (x = std::exp(x - mx));
        for (int64_t c = 0; c < hd; ++c) {
          double want = 0;
          for (int64_t j = 0; j <= i; ++j)
            want += sc[j] / sum * v[(b * s.seq + j) * s.hidden + h * hd + c];
          ASSERT_NEAR(out[(b * s.seq + i) * s.hidden + h * hd + c], want,
                      1e-12);
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

} // namespace
