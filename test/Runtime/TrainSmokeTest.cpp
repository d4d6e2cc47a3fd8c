//===- TrainSmokeTest.cpp - A one-layer GPT trained with the raw kernels --===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Chains the kernels by hand into a byte-level GPT block on the embedded
// corpus: if any VJP, the sampler or AdamW were wrong, the loss would not fall.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/CpuKernels.h"
#include "dsc/Runtime/Data.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

using namespace dsc::rt;

namespace {

using Vec = std::vector<float>;

/// One parameter with its gradient and AdamW moments.
struct Param {
  Vec w, g, m, v;
  bool decay;
  Param(size_t n, float std, float fill, bool decay, std::mt19937 &rng)
      : w(n, fill), g(n), m(n), v(n), decay(decay) {
    std::normal_distribution<float> dist(0.0f, std);
    if (std > 0)
      for (float &x : w)
        x = dist(rng);
  }
  float *p() { return w.data(); }
  float *d() { return g.data(); }
};

TEST(TrainSmoke, OneLayerGptLearnsTheDefaultCorpus) {
  const int64_t V = 256, B = 8, S = 64, H = 64, nh = 4, F = 4 * H;
  const int64_t N = B * S;
  std::mt19937 rng(1234);
  Param tok(V * H, 0.02f, 0, true, rng), pos(S * H, 0.02f, 0, true, rng);
  Param ln1g(H, 0, 1, false, rng), ln1b(H, 0, 0, false, rng);
  Param wqkv(H * 3 * H, 0.02f, 0, true, rng), bqkv(3 * H, 0, 0, false, rng);
  Param wo(H * H, 0.01f, 0, true, rng), bo(H, 0, 0, false, rng);
  Param ln2g(H, 0, 1, false, rng), ln2b(H, 0, 0, false, rng);
  Param w1(H * F, 0.02f, 0, true, rng), b1(F, 0, 0, false, rng);
  Param w2(F * H, 0.01f, 0, true, rng), b2(H, 0, 0, false, rng);
  Param lnfg(H, 0, 1, false, rng), lnfb(H, 0, 0, false, rng);
  Param wout(H * V, 0.02f, 0, true, rng);
  std::vector<Param *> params = {&tok, &pos, &ln1g, &ln1b, &wqkv, &bqkv,
                                 &wo,  &bo,  &ln2g, &ln2b, &w1,   &b1,
                                 &w2,  &b2,  &lnfg, &lnfb, &wout};

  auto source = defaultCorpusTokens();
  BatchSampler sampler(*source, B, S, /*seed=*/7, V);
  std::vector<int32_t> ids(N), targets(N);

  // Activations (forward) and their gradients (backward).
  Vec e(N * H), x0(N * H), h1(N * H), m1(N), r1(N), qkv(N * 3 * H), q(N * H),
      k(N * H), v(N * H), a(N * H), lse(B * nh * S), o(N * H), x1(N * H),
      h2(N * H), m2(N), r2(N), f1(N * F), g(N * F), f2(N * H), x2(N * H),
      h3(N * H), m3(N), r3(N), logits(N * V), lseCe(N);
  Vec dlogits(N * V), dh3(N * H), dx2(N * H), dg(N * F), df1(N * F), dh2(N * H),
      dx1(N * H), da(N * H), dq(N * H), dk(N * H), dv(N * H), dqkv(N * 3 * H),
      dh1(N * H), dx0(N * H);

  AttentionShape as;
  as.batch = B, as.seq = S, as.hidden = H, as.heads = nh;
  auto mm = [](int64_t m, int64_t n, int64_t kk) {
    MatmulShape s;
    s.m = m, s.n = n, s.k = kk;
    return s;
  };
  const MatmulShape sQkv = mm(N, 3 * H, H), sO = mm(N, H, H), s1 = mm(N, F, H),
                    s2 = mm(N, H, F), sOut = mm(N, V, H);
  const int64_t qkvShape[] = {N, 3 * H}, partShape[] = {N, H};
  const int64_t offQ[] = {0, 0}, offK[] = {0, H}, offV[] = {0, 2 * H};
  const int64_t thirds[] = {H, H, H};
  const float eps = 1e-5f;

  AdamWConfig adam;
  adam.lr = 3e-3;
  adam.weightDecay = 0.01;
  std::vector<float> losses;
  for (int step = 1; step <= 300; ++step) {
    sampler.batchAt(step - 1, ids.data(), targets.data());
    // Forward.
    ASSERT_EQ(embeddingForward(tok.p(), ids.data(), e.data(), N, V, H), 0);
    positionEmbeddingForward(pos.p(), x0.data(), B, S, H);
    addForward(e.data(), x0.data(), x0.data(), N * H);
    layerNormForward(x0.data(), ln1g.p(), ln1b.p(), h1.data(), m1.data(),
                     r1.data(), N, H, eps);
    matmulForward(h1.data(), wqkv.p(), qkv.data(), sQkv);
    biasAddForward(qkv.data(), bqkv.p(), qkv.data(), N, 3 * H);
    sliceForward(qkv.data(), q.data(), qkvShape, partShape, offQ, 2);
    sliceForward(qkv.data(), k.data(), qkvShape, partShape, offK, 2);
    sliceForward(qkv.data(), v.data(), qkvShape, partShape, offV, 2);
    ASSERT_TRUE(attentionForward(q.data(), k.data(), v.data(), a.data(),
                                 lse.data(), (float *)nullptr, 0, as));
    matmulForward(a.data(), wo.p(), o.data(), sO);
    biasAddForward(o.data(), bo.p(), o.data(), N, H);
    addForward(x0.data(), o.data(), x1.data(), N * H);
    layerNormForward(x1.data(), ln2g.p(), ln2b.p(), h2.data(), m2.data(),
                     r2.data(), N, H, eps);
    matmulForward(h2.data(), w1.p(), f1.data(), s1);
    biasAddForward(f1.data(), b1.p(), f1.data(), N, F);
    geluForward(f1.data(), g.data(), N * F);
    matmulForward(g.data(), w2.p(), f2.data(), s2);
    biasAddForward(f2.data(), b2.p(), f2.data(), N, H);
    addForward(x1.data(), f2.data(), x2.data(), N * H);
    layerNormForward(x2.data(), lnfg.p(), lnfb.p(), h3.data(), m3.data(),
                     r3.data(), N, H, eps);
    matmulForward(h3.data(), wout.p(), logits.data(), sOut);
    float loss =
        crossEntropyForward(logits.data(), targets.data(), lseCe.data(), N, V);
    ASSERT_TRUE(std::isfinite(loss)) << "step " << step;
    losses.push_back(loss);

    // Backward: every gradient buffer is overwritten once, then residual
    // branches accumulate into it.
    crossEntropyBackward(logits.data(), targets.data(), lseCe.data(), 1.0f,
                         dlogits.data(), N, V, false);
    matmulBackward(h3.data(), wout.p(), dlogits.data(), dh3.data(), wout.d(),
                   sOut, false);
    layerNormBackward(x2.data(), lnfg.p(), m3.data(), r3.data(), dh3.data(),
                      dx2.data(), lnfg.d(), lnfb.d(), N, H, eps,
                      AccumulateMask(0));
    // x2 = x1 + f2: dx1 starts as dx2, f2's branch reads dx2.
    dx1 = dx2;
    biasAddBackward(dx2.data(), (float *)nullptr, b2.d(), N, H, false);
    matmulBackward(g.data(), w2.p(), dx2.data(), dg.data(), w2.d(), s2, false);
    geluBackward(f1.data(), dg.data(), df1.data(), N * F, false);
    biasAddBackward(df1.data(), (float *)nullptr, b1.d(), N, F, false);
    matmulBackward(h2.data(), w1.p(), df1.data(), dh2.data(), w1.d(), s1,
                   false);
    // dx1 += LN2's dx (bit 0), its dgamma/dbeta overwrite.
    layerNormBackward(x1.data(), ln2g.p(), m2.data(), r2.data(), dh2.data(),
                      dx1.data(), ln2g.d(), ln2b.d(), N, H, eps,
                      AccumulateMask(1));
    // x1 = x0 + o.
    dx0 = dx1;
    biasAddBackward(dx1.data(), (float *)nullptr, bo.d(), N, H, false);
    matmulBackward(a.data(), wo.p(), dx1.data(), da.data(), wo.d(), sO, false);
    ASSERT_TRUE(attentionBackward(q.data(), k.data(), v.data(), lse.data(),
                                  da.data(), dq.data(), dk.data(), dv.data(),
                                  (float *)nullptr, 0, as, AccumulateMask(0)));
    const float *parts[] = {dq.data(), dk.data(), dv.data()};
    concatForward(parts, thirds, 3, dqkv.data(), N, 1);
    biasAddBackward(dqkv.data(), (float *)nullptr, bqkv.d(), N, 3 * H, false);
    matmulBackward(h1.data(), wqkv.p(), dqkv.data(), dh1.data(), wqkv.d(), sQkv,
                   false);
    layerNormBackward(x0.data(), ln1g.p(), m1.data(), r1.data(), dh1.data(),
                      dx0.data(), ln1g.d(), ln1b.d(), N, H, eps,
                      AccumulateMask(1));
    embeddingBackward(dx0.data(), ids.data(), tok.d(), N, V, H, false);
    positionEmbeddingBackward(dx0.data(), pos.d(), B, S, S, H, false);

    // Clip to norm 1, then AdamW.
    std::vector<const float *> bufs;
    std::vector<int64_t> sizes;
    for (Param *p : params) {
      bufs.push_back(p->d());
      sizes.push_back(int64_t(p->g.size()));
    }
    double norm =
        std::sqrt(sumOfSquares(bufs.data(), sizes.data(), int(bufs.size())));
    ASSERT_TRUE(std::isfinite(norm)) << "step " << step;
    float clip = float(clipScale(norm, 1.0));
    for (Param *p : params) {
      if (clip < 1.0f)
        scaleForward(p->d(), p->d(), int64_t(p->g.size()), clip);
      adamwStep(p->p(), p->d(), p->m.data(), p->v.data(), int64_t(p->w.size()),
                adam, step, p->decay);
    }
  }

  auto mean = [&](size_t from, size_t to) {
    double s = 0;
    for (size_t i = from; i < to; ++i)
      s += losses[i];
    return s / double(to - from);
  };
  const double last = mean(losses.size() - 10, losses.size());
  // Starts at ln(256) = 5.55 (uniform bytes). English prose is ~4.1 bits per
  // character under a unigram model (2.9 nats); a block with attention must
  // get below that on this text within 300 steps (it reaches ~2.43; the
  // kernels are deterministic, so this does not flake).
  EXPECT_NEAR(losses[0], std::log(256.0), 0.05);
  EXPECT_LT(last, 2.6) << "loss went from " << losses[0] << " to " << last;
  RecordProperty("final_loss", std::to_string(last));
}

} // namespace
