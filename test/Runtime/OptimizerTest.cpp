//===- OptimizerTest.cpp - AdamW, SGD and gradient clipping ---------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Optimizer steps against hand-computed values and a restatement of the
// paper's update; grad-norm exactness and thread-count independence.
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

} // namespace
