//===- BenchKernels.cpp - dsc-bench-kernels: CPU kernel throughput --------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Times every CPU kernel at GPT-2-small shapes against an OpenBLAS sgemm
// ceiling measured in the same run, so numbers from noisy machines compare.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/CpuAdam.h"
#include "dsc/Runtime/CpuKernels.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

using namespace dsc::rt;

namespace {

struct Options {
  int64_t batch = 4, seq = 1024, hidden = 768, heads = 12, vocab = 50304;
  int64_t params = 124439808; // GPT-2 small (tied embeddings, V = 50304)
  double minSeconds = 0.5;
  std::string filter;
};

std::vector<float> zeros(int64_t n) { return std::vector<float>(size_t(n)); }

/// Buffers are filled with cheap deterministic noise in [-1, 1).
std::vector<float> noise(int64_t n, uint32_t seed) {
  std::vector<float> v = zeros(n);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    uint32_t z = uint32_t(i) * 2654435761u + seed * 40503u;
    z ^= z >> 15;
    z *= 2246822519u;
    z ^= z >> 13;
    v[size_t(i)] = float(z >> 8) * (2.0f / 16777216.0f) - 1.0f;
  }
  return v;
}

/// Best-of-N wall time in seconds: one call, then repeats until minSeconds.
/// The minimum is the least noisy statistic on shared 2-core machines.
double timeIt(const std::function<void()> &f, double minSeconds) {
  using clock = std::chrono::steady_clock;
  double best = 1e30, total = 0;
  int reps = 0;
  do {
    auto t0 = clock::now();
    f();
    double s = std::chrono::duration<double>(clock::now() - t0).count();
    best = std::min(best, s);
    total += s;
    ++reps;
  } while (total < minSeconds || reps < 2);
  return best;
}

/// Rows are kept and printed at the end, against the better of the two
/// ceiling measurements (start and end of the run), so a ceiling taken
/// while another process held a core cannot inflate the ratios.
struct Row {
  std::string name;
  double seconds, flops, bytes;
  /// A bandwidth row shown against the STREAM triad measured in this run.
  bool ofTriad = false;
};
std::vector<Row> rows;
double ceilingGflops = 0;
/// The better STREAM triad rate (GB/s) of the run's measurements.
double triadGBs = 0;

/// One result. flops = 0 means a bandwidth-bound kernel (GB/s shown).
void report(const std::string &name, double seconds, double flops,
            double bytes) {
  rows.push_back({name, seconds, flops, bytes});
  std::fprintf(stderr, "  %s: %.2f ms\n", name.c_str(), seconds * 1e3);
}

void printRows() {
  for (const Row &r : rows) {
    std::printf("%-44s %9.2f", r.name.c_str(), r.seconds * 1e3);
    if (r.flops > 0) {
      double g = r.flops / r.seconds * 1e-9;
      std::printf(" %9.1f %9s %8.0f%%\n", g, "", 100.0 * g / ceilingGflops);
    } else if (r.ofTriad && triadGBs > 0) {
      const double gbs = r.bytes / r.seconds * 1e-9;
      std::printf(" %9s %9.1f %8.0f%% of triad\n", "", gbs,
                  100.0 * gbs / triadGBs);
    } else {
      std::printf(" %9s %9.1f %9s\n", "", r.bytes / r.seconds * 1e-9, "");
    }
  }
}

bool selected(const Options &o, const std::string &name) {
  return o.filter.empty() || name.find(o.filter) != std::string::npos;
}

/// sgemm 2048^3 with OpenBLAS's own threading (one per OpenMP thread), as a
/// user calling OpenBLAS directly would get; restores the kernels' setting.
void benchSgemmCeiling(const Options &o, const char *label) {
  const int64_t n = 2048;
  std::vector<float> a = noise(n * n, 1), b = noise(n * n, 2), c = zeros(n * n);
  const int saved = openblas_get_num_threads();
  openblas_set_num_threads(omp_get_max_threads());
  auto run = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(n), int(n),
                int(n), 1.0f, a.data(), int(n), b.data(), int(n), 0.0f,
                c.data(), int(n));
  };
  double s = timeIt(run, o.minSeconds);
  openblas_set_num_threads(saved);
  ceilingGflops = std::max(ceilingGflops, 2.0 * n * n * n / s * 1e-9);
  report(label, s, 2.0 * n * n * n, 0);
}

void benchMatmul(const Options &o, const std::string &name, int64_t n,
                 bool transB) {
  if (!selected(o, name))
    return;
  const int64_t rows = o.batch * o.seq, k = o.hidden;
  MatmulShape s;
  s.batch = 1;
  s.m = rows;
  s.n = n;
  s.k = k;
  s.transB = transB;
  std::vector<float> a = noise(rows * k, 3), b = noise(k * n, 4),
                     c = zeros(rows * n), dC = noise(rows * n, 5),
                     dA = zeros(rows * k), dB = zeros(k * n);
  const double flops = 2.0 * rows * n * k;
  report(name + " fwd",
         timeIt([&] { matmulForward(a.data(), b.data(), c.data(), s); },
                o.minSeconds),
         flops, 0);
  report(name + " bwd",
         timeIt(
             [&] {
               matmulBackward(a.data(), b.data(), dC.data(), dA.data(),
                              dB.data(), s, false);
             },
             o.minSeconds),
         2 * flops, 0);
}

void benchAttention(const Options &o) {
  if (!selected(o, "attention"))
    return;
  AttentionShape s;
  s.batch = o.batch;
  s.seq = o.seq;
  s.hidden = o.hidden;
  s.heads = o.heads;
  const int64_t n = o.batch * o.seq * o.hidden;
  std::vector<float> q = noise(n, 6), k = noise(n, 7), v = noise(n, 8),
                     out = zeros(n), lse = zeros(s.lseSize()),
                     dOut = noise(n, 9), dq = zeros(n), dk = zeros(n),
                     dv = zeros(n),
                     scratch =
                         zeros(attentionScratchSize(s, omp_get_max_threads()));
  // Useful FLOPs of causal attention (half of the dense S x S products),
  // the count FlashAttention and Megatron's MFU use.
  const double flops = 2.0 * o.batch * o.hidden * o.seq * o.seq;
  report("attention fwd (causal, saves lse)",
         timeIt(
             [&] {
               (void)attentionForward(q.data(), k.data(), v.data(), out.data(),
                                      lse.data(), scratch.data(),
                                      int64_t(scratch.size()), s);
             },
             o.minSeconds),
         flops, 0);
  report("attention bwd",
         timeIt(
             [&] {
               (void)attentionBackward(
                   q.data(), k.data(), v.data(), lse.data(), dOut.data(),
                   dq.data(), dk.data(), dv.data(), scratch.data(),
                   int64_t(scratch.size()), s, AccumulateMask());
             },
             o.minSeconds),
         2 * flops, 0);
}

void benchRowKernels(const Options &o) {
  const int64_t rows = o.batch * o.seq, h = o.hidden;
  const double f = sizeof(float);
  if (selected(o, "layer_norm")) {
    std::vector<float> x = noise(rows * h, 10), g = noise(h, 11),
                       b = noise(h, 12), y = zeros(rows * h), mean(rows),
                       rstd(rows), dy = noise(rows * h, 13),
                       dx = zeros(rows * h), dg(h), db(h);
    report("layer_norm fwd [B*S, H]",
           timeIt(
               [&] {
                 layerNormForward(x.data(), g.data(), b.data(), y.data(),
                                  mean.data(), rstd.data(), rows, h, 1e-5f);
               },
               o.minSeconds),
           0, 2 * rows * h * f);
    report("layer_norm bwd",
           timeIt(
               [&] {
                 layerNormBackward(x.data(), g.data(), mean.data(), rstd.data(),
                                   dy.data(), dx.data(), dg.data(), db.data(),
                                   rows, h, 1e-5f, AccumulateMask());
               },
               o.minSeconds),
           0, 3 * rows * h * f);
  }
  if (selected(o, "gelu")) {
    const int64_t n = rows * 4 * h;
    std::vector<float> x = noise(n, 14), y = zeros(n), dy = noise(n, 15),
                       dx = zeros(n);
    report("gelu fwd [B*S, 4H]",
           timeIt([&] { geluForward(x.data(), y.data(), n); }, o.minSeconds), 0,
           2 * n * f);
    report(
        "gelu bwd",
        timeIt([&] { geluBackward(x.data(), dy.data(), dx.data(), n, false); },
               o.minSeconds),
        0, 3 * n * f);
  }
  if (selected(o, "softmax")) {
    const int64_t r = o.batch * o.heads * o.seq, c = o.seq;
    std::vector<float> x = noise(r * c, 16), y = zeros(r * c),
                       dy = noise(r * c, 17), dx = zeros(r * c);
    report(
        "softmax fwd [B*nh*S, S]",
        timeIt([&] { softmaxForward(x.data(), y.data(), r, c); }, o.minSeconds),
        0, 2 * r * c * f);
    report("softmax bwd",
           timeIt(
               [&] {
                 softmaxBackward(y.data(), dy.data(), dx.data(), r, c, false);
               },
               o.minSeconds),
           0, 3 * r * c * f);
  }
  if (selected(o, "bias_add")) {
    const int64_t n = rows * 4 * h;
    std::vector<float> x = noise(n, 18), b = noise(4 * h, 19), y = zeros(n),
                       db = zeros(4 * h);
    report(
        "bias_add fwd [B*S, 4H]",
        timeIt(
            [&] { biasAddForward(x.data(), b.data(), y.data(), rows, 4 * h); },
            o.minSeconds),
        0, 2 * n * f);
    report("bias_add bwd (dx + dbias)",
           timeIt(
               [&] {
                 biasAddBackward(x.data(), y.data(), db.data(), rows, 4 * h,
                                 false);
               },
               o.minSeconds),
           0, 2 * n * f);
  }
  if (selected(o, "add")) {
    const int64_t n = rows * h;
    std::vector<float> a = noise(n, 20), b = noise(n, 21), y = zeros(n);
    report("add fwd [B*S, H] (residual)",
           timeIt([&] { addForward(a.data(), b.data(), y.data(), n); },
                  o.minSeconds),
           0, 3 * n * f);
  }
  if (selected(o, "dropout")) {
    const int64_t n = rows * h;
    std::vector<float> x = noise(n, 22), y = zeros(n);
    report("dropout fwd [B*S, H] p=0.1",
           timeIt([&] { dropoutForward(x.data(), y.data(), n, 0.1f, 1); },
                  o.minSeconds),
           0, 2 * n * f);
  }
  if (selected(o, "transpose")) {
    const int64_t shape[4] = {o.batch, o.seq, o.heads, h / o.heads};
    const int perm[4] = {0, 2, 1, 3};
    const int64_t n = rows * h;
    std::vector<float> x = noise(n, 23), y = zeros(n);
    report("transpose [B,S,nh,hd]->[B,nh,S,hd]",
           timeIt([&] { transposeForward(x.data(), y.data(), shape, perm, 4); },
                  o.minSeconds),
           0, 2 * n * f);
  }
}

void benchEmbeddingAndLoss(const Options &o) {
  const int64_t rows = o.batch * o.seq, h = o.hidden, v = o.vocab;
  const double f = sizeof(float);
  std::vector<int32_t> ids(rows);
  for (int64_t i = 0; i < rows; ++i)
    ids[i] = int32_t((i * 7919) % v);
  if (selected(o, "embedding")) {
    std::vector<float> table = noise(v * h, 24), out = zeros(rows * h),
                       dTable = zeros(v * h);
    report("embedding fwd [V, H] -> [B*S, H]",
           timeIt(
               [&] {
                 embeddingForward(table.data(), ids.data(), out.data(), rows, v,
                                  h);
               },
               o.minSeconds),
           0, 2 * rows * h * f);
    // Dominated by zeroing the [V, H] gradient, which is what it does.
    report("embedding bwd (zero dTable + scatter)",
           timeIt(
               [&] {
                 embeddingBackward(out.data(), ids.data(), dTable.data(), rows,
                                   v, h, false);
               },
               o.minSeconds),
           0, (v * h + 3 * rows * h) * f);
  }
  if (selected(o, "cross_entropy")) {
    std::vector<float> logits = noise(rows * v, 25), lse(rows),
                       dLogits = zeros(rows * v);
    report("cross_entropy fwd [B*S, V]",
           timeIt(
               [&] {
                 crossEntropyForward(logits.data(), ids.data(), lse.data(),
                                     rows, v);
               },
               o.minSeconds),
           0, rows * v * f);
    report("cross_entropy bwd",
           timeIt(
               [&] {
                 crossEntropyBackward(logits.data(), ids.data(), lse.data(),
                                      1.0f, dLogits.data(), rows, v, false);
               },
               o.minSeconds),
           0, 2 * rows * v * f);
  }
}

/// STREAM's triad a = b + s c over n floats (12 bytes per element counted,
/// as STREAM counts them): the memory-bandwidth ceiling of the optimizer
/// rows. Kept as the better of the run's measurements.
void benchTriad(const Options &o, const char *label) {
  const int64_t n = o.params;
  std::vector<float> a = zeros(n), b = noise(n, 40), c = noise(n, 41);
  const float scale = 3.0f;
  const double seconds = timeIt(
      [&] {
        float *pa = a.data();
        const float *pb = b.data(), *pc = c.data();
#pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < n; ++i)
          pa[i] = pb[i] + scale * pc[i];
      },
      o.minSeconds);
  const double bytes = 12.0 * double(n);
  triadGBs = std::max(triadGBs, bytes / seconds * 1e-9);
  report(label, seconds, 0, bytes);
}

void benchOptimizer(const Options &o) {
  const int64_t n = o.params;
  const double f = sizeof(float);
  if (selected(o, "cpu adam")) {
    // ZeRO-Offload's CPU step (CpuAdam.h) on each path this CPU runs,
    // 28 bytes per parameter (p, g, m, v read; p, m, v written), 30 with
    // the bf16 copy, against the triad measured before and after.
    benchTriad(o, "stream triad (ceiling, start)");
    std::vector<float> p = noise(n, 30), g = noise(n, 31), m = zeros(n),
                       v = zeros(n);
    std::vector<uint16_t> copy(static_cast<size_t>(n));
    AdamWConfig cfg;
    for (CpuIsa isa : {CpuIsa::Avx512, CpuIsa::Avx2, CpuIsa::Scalar}) {
      if (!cpuSupports(isa))
        continue;
      for (bool withCopy : {false, true}) {
        int64_t step = 0;
        const double seconds = timeIt(
            [&] {
              cpuAdamW(p.data(), g.data(), m.data(), v.data(), n, cfg, ++step,
                       true, withCopy ? copy.data() : nullptr, isa);
            },
            o.minSeconds);
        rows.push_back({std::string("cpu adam ") + cpuIsaName(isa) +
                            (withCopy ? " + bf16 copy" : ""),
                        seconds, 0, (withCopy ? 30.0 : 28.0) * double(n),
                        true});
        std::fprintf(stderr, "  cpu adam %s: %.2f ms\n", cpuIsaName(isa),
                     seconds * 1e3);
      }
    }
    benchTriad(o, "stream triad (ceiling, end)");
  }
  if (selected(o, "adamw")) {
    std::vector<float> p = noise(n, 26), g = noise(n, 27), m = zeros(n),
                       v = zeros(n);
    AdamWConfig cfg;
    int64_t step = 0;
    report("adamw step (all params)",
           timeIt(
               [&] {
                 adamwStep(p.data(), g.data(), m.data(), v.data(), n, cfg,
                           ++step, true);
               },
               o.minSeconds),
           0, 7 * n * f);
  }
  if (selected(o, "grad_norm")) {
    std::vector<float> g = noise(n, 28);
    const float *bufs[] = {g.data()};
    int64_t sizes[] = {n};
    report("grad norm (sum of squares, all params)",
           timeIt([&] { (void)sumOfSquares(bufs, sizes, 1); }, o.minSeconds), 0,
           n * f);
    report("grad clip scale (all params)",
           timeIt([&] { scaleForward(g.data(), g.data(), n, 0.999f); },
                  o.minSeconds),
           0, 2 * n * f);
  }
}

[[noreturn]] void usage(const char *argv0) {
  std::fprintf(stderr,
               "usage: %s [--seq N] [--batch N] [--params N] [--min-time S] "
               "[--filter SUBSTRING]\n"
               "GPT-2-small shapes by default (B=4, S=1024, H=768, nh=12, "
               "V=50304); threads from OMP_NUM_THREADS / "
               "OPENBLAS_NUM_THREADS.\n",
               argv0);
  std::exit(2);
}

} // namespace

int main(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc)
        usage(argv[0]);
      return argv[++i];
    };
    if (a == "--seq")
      o.seq = std::atoll(next().c_str());
    else if (a == "--batch")
      o.batch = std::atoll(next().c_str());
    else if (a == "--params")
      o.params = std::atoll(next().c_str());
    else if (a == "--min-time")
      o.minSeconds = std::atof(next().c_str());
    else if (a == "--filter")
      o.filter = next();
    else
      usage(argv[0]);
  }
  if (o.seq <= 0 || o.batch <= 0 || o.params <= 0)
    usage(argv[0]);

  std::printf(
      "dsc-bench-kernels: B=%lld S=%lld H=%lld nh=%lld V=%lld "
      "params=%lld\n"
      "threads: %d OpenMP; the ceiling runs OpenBLAS's own threads, the "
      "kernels pin OpenBLAS to 1 and split work over OpenMP\n",
      (long long)o.batch, (long long)o.seq, (long long)o.hidden,
      (long long)o.heads, (long long)o.vocab, (long long)o.params,
      omp_get_max_threads());
  std::printf("%-44s %9s %9s %9s %9s\n", "kernel", "ms (best)", "GFLOP/s",
              "GB/s", "of sgemm");
  benchSgemmCeiling(o, "sgemm 2048^3 (ceiling, start)");
  benchMatmul(o, "matmul qkv [B*S,H]x[H,3H]", 3 * o.hidden, false);
  benchMatmul(o, "matmul mlp.fc [B*S,H]x[H,4H]", 4 * o.hidden, false);
  benchMatmul(o, "matmul lm_head [B*S,H]x[V,H]^T", o.vocab, true);
  benchAttention(o);
  benchRowKernels(o);
  benchEmbeddingAndLoss(o);
  benchOptimizer(o);
  benchSgemmCeiling(o, "sgemm 2048^3 (ceiling, end)");
  printRows();
  return 0;
}
