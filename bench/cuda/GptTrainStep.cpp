//===- GptTrainStep.cpp - GPT-2-small training-step benchmark on CUDA -----===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Times the kernel sequence of one GPT-2-small bf16 training step (forward,
// backward, grad clip, AdamW on fp32 master weights) on one GPU, straight
// from CudaKernels.h (no compiler, no plan), and a cuBLASLt GEMM ceiling.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/CudaKernels.h"

#include "GpuPeak.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace dsc::rt;
namespace cu = dsc::rt::cuda;
using bf16 = __nv_bfloat16;

namespace {
#define CK(...)                                                                \
  do {                                                                         \
    cudaError_t e_ = (__VA_ARGS__);                                            \
    if (e_ != cudaSuccess) {                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__,              \
                   #__VA_ARGS__, cudaGetErrorString(e_));                      \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)
#define LT(...)                                                                \
  do {                                                                         \
    cublasStatus_t s_ = (__VA_ARGS__);                                         \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                         \
      std::fprintf(stderr, "%s:%d: %s: cublas status %d\n", __FILE__,          \
                   __LINE__, #__VA_ARGS__, int(s_));                           \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

// GPT-2 small; the vocabulary padded to a multiple of 128 (as llm.c does)
// so the LM-head GEMM tiles evenly.
constexpr int64_t L = 12, H = 768, NH = 12, V = 50304, S = 1024;

/// Offsets of one layer's parameters in the flat buffers.
struct LayerParams {
  int64_t ln1g, ln1b, wq, wk, wv, bq, bk, bv, wproj, bproj, ln2g, ln2b, wfc,
      bfc, wout, bout;
};

struct Model {
  int64_t wte, wpe, lnfg, lnfb, total = 0;
  LayerParams layer[L];
  int64_t take(int64_t n) {
    int64_t at = total;
    total += (n + 63) / 64 * 64; // keep every tensor 128-byte aligned
    return at;
  }
  Model() {
    wte = take(V * H);
    wpe = take(S * H);
    for (auto &l : layer) {
      l.ln1g = take(H), l.ln1b = take(H);
      l.wq = take(H * H), l.wk = take(H * H), l.wv = take(H * H);
      l.bq = take(H), l.bk = take(H), l.bv = take(H);
      l.wproj = take(H * H), l.bproj = take(H);
      l.ln2g = take(H), l.ln2b = take(H);
      l.wfc = take(H * 4 * H), l.bfc = take(4 * H);
      l.wout = take(4 * H * H), l.bout = take(H);
    }
    lnfg = take(H), lnfb = take(H);
  }
};

/// Saved activations of one layer (bf16) and its fp32 statistics.
struct LayerActs {
  bf16 *x, *ln1, *q, *k, *v, *att, *xmid, *ln2, *fcPre, *fcAct;
  float *mean1, *rstd1, *mean2, *rstd2, *lse;
};

template <typename T> T *dalloc(int64_t n) {
  void *p = nullptr;
  CK(cudaMalloc(&p, size_t(n) * sizeof(T)));
  return (T *)p;
}

MatmulShape mm(int64_t m, int64_t n, int64_t k, bool tb = false) {
  MatmulShape s;
  s.m = m;
  s.n = n;
  s.k = k;
  s.transB = tb;
  return s;
}

struct Step {
  int64_t B, BT;
  Model model;
  cu::MatmulContext ctx;
  cudaStream_t st;
  float *master, *m, *v;
  bf16 *w, *g;
  std::vector<LayerActs> acts;
  bf16 *xFinal, *lnf, *logits, *dx, *dtmp, *dbig, *dq, *dk, *dv;
  float *meanF, *rstdF, *loss;
  double *sumSq;
  int32_t *ids, *targets;
  int64_t stepNo = 0;

  bf16 *W(int64_t off) { return w + off; }
  bf16 *G(int64_t off) { return g + off; }

  explicit Step(int64_t batch) : B(batch), BT(batch * S) {
    CK(cudaStreamCreate(&st));
    LT(cu::createMatmulContext(ctx));
    const int64_t P = model.total;
    master = dalloc<float>(P), m = dalloc<float>(P), v = dalloc<float>(P);
    w = dalloc<bf16>(P), g = dalloc<bf16>(P);
    // N(0, 0.02)-like init from a fast host generator (Box-Muller is not
    // needed for a timing run; a uniform with the same std is).
    std::vector<float> h(P);
    uint64_t x = 88172645463325252ull;
    const float a = 0.02f * std::sqrt(3.0f);
    for (auto &e : h) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      e = a * (float(x >> 40) / float(1 << 24) * 2.0f - 1.0f);
    }
    for (auto &l : model.layer)
      for (int64_t off : {l.ln1g, l.ln2g})
        for (int64_t i = 0; i < H; ++i)
          h[off + i] = 1.0f;
    for (int64_t i = 0; i < H; ++i)
      h[model.lnfg + i] = 1.0f;
    CK(cudaMemcpy(master, h.data(), P * 4, cudaMemcpyHostToDevice));
    CK(cudaMemset(m, 0, P * 4));
    CK(cudaMemset(v, 0, P * 4));
    CK(cu::convert(master, w, P, st));
    acts.resize(L);
    for (auto &a : acts) {
      a.x = dalloc<bf16>(BT * H), a.ln1 = dalloc<bf16>(BT * H);
      a.q = dalloc<bf16>(BT * H), a.k = dalloc<bf16>(BT * H);
      a.v = dalloc<bf16>(BT * H), a.att = dalloc<bf16>(BT * H);
      a.xmid = dalloc<bf16>(BT * H), a.ln2 = dalloc<bf16>(BT * H);
      a.fcPre = dalloc<bf16>(BT * 4 * H), a.fcAct = dalloc<bf16>(BT * 4 * H);
      a.mean1 = dalloc<float>(BT), a.rstd1 = dalloc<float>(BT);
      a.mean2 = dalloc<float>(BT), a.rstd2 = dalloc<float>(BT);
      a.lse = dalloc<float>(BT * NH);
    }
    xFinal = dalloc<bf16>(BT * H), lnf = dalloc<bf16>(BT * H);
    logits = dalloc<bf16>(BT * V);
    dx = dalloc<bf16>(BT * H), dtmp = dalloc<bf16>(BT * H);
    dbig = dalloc<bf16>(BT * 4 * H);
    dq = dalloc<bf16>(BT * H), dk = dalloc<bf16>(BT * H),
    dv = dalloc<bf16>(BT * H);
    meanF = dalloc<float>(BT), rstdF = dalloc<float>(BT);
    loss = dalloc<float>(1);
    sumSq = dalloc<double>(1);
    ids = dalloc<int32_t>(BT), targets = dalloc<int32_t>(BT);
    std::vector<int32_t> t(BT);
    for (auto &e : t) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      e = int32_t(x % 50257);
    }
    CK(cudaMemcpy(ids, t.data(), BT * 4, cudaMemcpyHostToDevice));
    std::rotate(t.begin(), t.begin() + 1, t.end());
    CK(cudaMemcpy(targets, t.data(), BT * 4, cudaMemcpyHostToDevice));
    CK(cudaStreamSynchronize(st));
  }

  AttentionShape attn() const {
    AttentionShape s;
    s.batch = B;
    s.seq = S;
    s.hidden = H;
    s.heads = NH;
    s.causal = true;
    return s;
  }

  void forward() {
    CK(cu::embeddingForward(W(model.wte), ids, acts[0].x, BT, V, H, nullptr,
                            st));
    CK(cu::positionEmbeddingForward(W(model.wpe), dtmp, B, S, H, st));
    CK(cu::addForward(acts[0].x, dtmp, acts[0].x, BT * H, st));
    for (int64_t l = 0; l < L; ++l) {
      const LayerParams &p = model.layer[l];
      LayerActs &a = acts[l];
      bf16 *next = l + 1 < L ? acts[l + 1].x : xFinal;
      CK(cu::layerNormForward(a.x, W(p.ln1g), W(p.ln1b), a.ln1, a.mean1,
                              a.rstd1, BT, H, 1e-5f, st));
      LT(cu::gemm(ctx, a.ln1, W(p.wq), a.q, mm(BT, H, H), 1, 0, st,
                  cu::Epilogue::Bias, W(p.bq)));
      LT(cu::gemm(ctx, a.ln1, W(p.wk), a.k, mm(BT, H, H), 1, 0, st,
                  cu::Epilogue::Bias, W(p.bk)));
      LT(cu::gemm(ctx, a.ln1, W(p.wv), a.v, mm(BT, H, H), 1, 0, st,
                  cu::Epilogue::Bias, W(p.bv)));
      CK(cu::attentionForward(a.q, a.k, a.v, a.att, a.lse, attn(), st));
      LT(cu::gemm(ctx, a.att, W(p.wproj), dtmp, mm(BT, H, H), 1, 0, st,
                  cu::Epilogue::Bias, W(p.bproj)));
      CK(cu::addForward(a.x, dtmp, a.xmid, BT * H, st));
      CK(cu::layerNormForward(a.xmid, W(p.ln2g), W(p.ln2b), a.ln2, a.mean2,
                              a.rstd2, BT, H, 1e-5f, st));
      LT(cu::gemm(ctx, a.ln2, W(p.wfc), a.fcAct, mm(BT, 4 * H, H), 1, 0, st,
                  cu::Epilogue::GeluBias, W(p.bfc), a.fcPre));
      LT(cu::gemm(ctx, a.fcAct, W(p.wout), dtmp, mm(BT, H, 4 * H), 1, 0, st,
                  cu::Epilogue::Bias, W(p.bout)));
      CK(cu::addForward(a.xmid, dtmp, next, BT * H, st));
    }
    CK(cu::layerNormForward(xFinal, W(model.lnfg), W(model.lnfb), lnf, meanF,
                            rstdF, BT, H, 1e-5f, st));
    // Tied LM head: logits = lnf wte^T.
    LT(cu::gemm(ctx, lnf, W(model.wte), logits, mm(BT, V, H, true), 1, 0, st));
    CK(cu::crossEntropyFused(logits, targets, loss, 1.0f, logits, BT, V,
                             /*classes=*/0, st));
  }

  void backward() {
    const MatmulShape head = mm(BT, V, H, true);
    LT(cu::matmulBackward(ctx, lnf, W(model.wte), logits, dtmp, G(model.wte),
                          head, false, st));
    CK(cu::layerNormBackward(xFinal, W(model.lnfg), meanF, rstdF, dtmp, dx,
                             G(model.lnfg), G(model.lnfb), BT, H, 1e-5f,
                             AccumulateMask(0), st));
    for (int64_t l = L - 1; l >= 0; --l) {
      const LayerParams &p = model.layer[l];
      LayerActs &a = acts[l];
      // MLP: dx is the residual stream's gradient.
      LT(cu::matmulBackward(ctx, a.fcAct, W(p.wout), dx, dbig, G(p.wout),
                            mm(BT, H, 4 * H), false, st));
      CK(cu::biasGrad(dx, G(p.bout), BT, H, false, st));
      CK(cu::geluBackward(a.fcPre, dbig, dbig, BT * 4 * H, false, st));
      LT(cu::matmulBackward(ctx, a.ln2, W(p.wfc), dbig, dtmp, G(p.wfc),
                            mm(BT, 4 * H, H), false, st));
      CK(cu::biasGrad(dbig, G(p.bfc), BT, 4 * H, false, st));
      CK(cu::layerNormBackward(a.xmid, W(p.ln2g), a.mean2, a.rstd2, dtmp, dx,
                               G(p.ln2g), G(p.ln2b), BT, H, 1e-5f,
                               AccumulateMask(1), st));
      // Attention.
      LT(cu::matmulBackward(ctx, a.att, W(p.wproj), dx, dtmp, G(p.wproj),
                            mm(BT, H, H), false, st));
      CK(cu::biasGrad(dx, G(p.bproj), BT, H, false, st));
      CK(cu::attentionBackward(a.q, a.k, a.v, a.lse, dtmp, dq, dk, dv, attn(),
                               AccumulateMask(0), st, a.att));
      LT(cu::matmulBackward(ctx, a.ln1, W(p.wq), dq, dtmp, G(p.wq),
                            mm(BT, H, H), false, st));
      LT(cu::matmulBackward(ctx, a.ln1, W(p.wk), dk, dtmp, G(p.wk),
                            mm(BT, H, H), true, st));
      LT(cu::matmulBackward(ctx, a.ln1, W(p.wv), dv, dtmp, G(p.wv),
                            mm(BT, H, H), true, st));
      // matmulBackward's accumulate also applied to dW above; the weights
      // were zeroed at the start of the step, so adding into them is exact.
      CK(cu::biasGrad(dq, G(p.bq), BT, H, false, st));
      CK(cu::biasGrad(dk, G(p.bk), BT, H, false, st));
      CK(cu::biasGrad(dv, G(p.bv), BT, H, false, st));
      CK(cu::layerNormBackward(a.x, W(p.ln1g), a.mean1, a.rstd1, dtmp, dx,
                               G(p.ln1g), G(p.ln1b), BT, H, 1e-5f,
                               AccumulateMask(1), st));
    }
    CK(cu::embeddingBackward(dx, ids, G(model.wte), BT, V, H, true, st));
    CK(cu::positionEmbeddingBackward(dx, G(model.wpe), B, S, S, H, false, st));
  }

  void optimize() {
    const bf16 *bufs[] = {g};
    bf16 *mbufs[] = {g};
    const int64_t sizes[] = {model.total};
    CK(cu::sumOfSquares(bufs, sizes, 1, sumSq, st));
    CK(cu::clipGradients(mbufs, sizes, 1, sumSq, 1.0, 1.0, st));
    AdamWConfig cfg;
    cfg.lr = 6e-4;
    cfg.weightDecay = 0.1;
    CK(cu::adamwStep<bf16, bf16>(master, g, m, v, model.total, cfg, ++stepNo,
                                 true, 1.0f, w, st));
  }

  void run() {
    // Only wk/wv grads accumulate (see backward); zero them up front.
    CK(cudaMemsetAsync(g, 0, model.total * sizeof(bf16), st));
    forward();
    backward();
    optimize();
  }
};

/// Best bf16 GEMM throughput cuBLASLt reaches here: the ceiling the step's
/// MFU should be read against.
double gemmCeiling(cudaStream_t st, int64_t M, int64_t N, int64_t K) {
  cu::MatmulContext ctx;
  LT(cu::createMatmulContext(ctx));
  bf16 *a = dalloc<bf16>(M * K), *b = dalloc<bf16>(K * N),
       *c = dalloc<bf16>(M * N);
  CK(cudaMemset(a, 0, M * K * 2));
  CK(cudaMemset(b, 0, K * N * 2));
  const MatmulShape s = mm(M, N, K);
  for (int i = 0; i < 3; ++i)
    LT(cu::gemm(ctx, a, b, c, s, 1, 0, st));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  const int iters = 20;
  CK(cudaEventRecord(e0, st));
  for (int i = 0; i < iters; ++i)
    LT(cu::gemm(ctx, a, b, c, s, 1, 0, st));
  CK(cudaEventRecord(e1, st));
  CK(cudaEventSynchronize(e1));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  cudaFree(a), cudaFree(b), cudaFree(c);
  cu::destroyMatmulContext(ctx);
  return 2.0 * M * N * K * iters / (ms * 1e-3) / 1e12;
}

/// The kernels' scratch comes from cudaMallocAsync: keep freed memory in
/// the pool instead of returning it to the driver at every synchronization.
void keepPoolMemory() {
  cudaMemPool_t pool;
  CK(cudaDeviceGetDefaultMemPool(&pool, 0));
  uint64_t threshold = ~uint64_t(0);
  CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold,
                             &threshold));
}

} // namespace

int main(int argc, char **argv) {
  std::vector<int64_t> batches = {4, 8, 16};
  int steps = 10;
  double peak = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--steps" && i + 1 < argc)
      steps = std::atoi(argv[++i]);
    else if (a == "--peak-tflops" && i + 1 < argc)
      peak = std::atof(argv[++i]);
    else if (a == "--batches" && i + 1 < argc) {
      batches.clear();
      for (char *t = std::strtok(argv[++i], ","); t;
           t = std::strtok(nullptr, ","))
        batches.push_back(std::atoll(t));
    } else {
      std::fprintf(stderr,
                   "usage: %s [--batches 4,8,16] [--steps N] "
                   "[--peak-tflops X]\n",
                   argv[0]);
      return 2;
    }
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("no CUDA device: benchmark skipped\n");
    return 77;
  }
  keepPoolMemory();
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  if (peak <= 0)
    peak = dsc::bench::bf16PeakFor(prop.name); // --peak-tflops overrides
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  const double ceil1 = gemmCeiling(st, 8192, 8192, 8192);
  const double ceil2 = gemmCeiling(st, 16384, 3072, 768);
  std::printf("device: %s (%d SMs), bf16 dense peak %.1f TFLOP/s%s\n",
              prop.name, prop.multiProcessorCount, peak,
              peak > 0 ? "" : " (unknown: pass --peak-tflops)");
  std::printf("cuBLASLt bf16 GEMM ceiling: %.1f TFLOP/s (8192^3), %.1f "
              "TFLOP/s (16384x3072x768)\n",
              ceil1, ceil2);
  std::printf("GPT-2 small: L=%lld h=%lld heads=%lld vocab=%lld (padded) "
              "seq=%lld, bf16 compute, fp32 master + AdamW\n",
              (long long)L, (long long)H, (long long)NH, (long long)V,
              (long long)S);
  std::printf("%6s %10s %12s %10s %8s %8s %10s\n", "batch", "ms/step",
              "tokens/s", "TFLOP/s", "MFU", "of GEMM", "loss@1");
  for (int64_t b : batches) {
    Step step(b);
    // Model FLOPs (PaLM appendix B): 6 N per token for the matmul weights
    // (the tied LM head counted once) + 12 L h s for attention.
    const double nParams = double(L) * 12 * H * H + double(V) * H;
    const double flopsPerToken = 6.0 * nParams + 12.0 * L * H * S;
    step.run();
    float firstLoss = 0;
    CK(cudaMemcpyAsync(&firstLoss, step.loss, 4, cudaMemcpyDeviceToHost,
                       step.st));
    CK(cudaStreamSynchronize(step.st));
    step.run();
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaEventRecord(e0, step.st));
    for (int i = 0; i < steps; ++i)
      step.run();
    CK(cudaEventRecord(e1, step.st));
    CK(cudaEventSynchronize(e1));
    CK(cudaGetLastError());
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    const double msStep = ms / steps, tokens = double(step.BT);
    const double tflops = flopsPerToken * tokens / (msStep * 1e-3) / 1e12;
    std::printf("%6lld %10.2f %12.0f %10.1f %7.1f%% %7.1f%% %10.4f\n",
                (long long)b, msStep, tokens / (msStep * 1e-3), tflops,
                peak > 0 ? 100.0 * tflops / peak : 0.0,
                100.0 * tflops / std::max(ceil1, ceil2), firstLoss);
    std::fflush(stdout);
    // Step's buffers are process-lifetime; free the device between sizes.
    CK(cudaDeviceSynchronize());
    CK(cudaDeviceReset());
    keepPoolMemory();
    CK(cudaStreamCreate(&st));
  }
  return 0;
}
