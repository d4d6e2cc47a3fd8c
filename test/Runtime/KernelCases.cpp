//===- KernelCases.cpp - The CPU kernels wrapped as test cases ------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Small shapes chosen so every code path runs (repeated ids, broadcast B,
// causal rows of every length, non-trivial permutations) in a few ms.
//
//===----------------------------------------------------------------------===//

#include "KernelCases.h"

#include "dsc/Runtime/CpuKernels.h"

#include <omp.h>
#include <stdexcept>
#include <type_traits>

using namespace dsc::rt;
using namespace dsc::rt::test;

#define ELEM_T(v) typename std::decay_t<decltype(v)>::value_type

namespace {

void addEmbedding(std::vector<KernelCase> &cases) {
  const int64_t vocab = 7, hidden = 5;
  const std::vector<int32_t> ids = {3, 0, 6, 3, 2, 3, 1}; // repeats on purpose
  const int64_t n = int64_t(ids.size());
  cases.push_back(makeCase(
      "embedding", {size_t(vocab * hidden)}, size_t(n * hidden),
      [=](const auto &in, auto &out) {
        embeddingForward(in[0].data(), ids.data(), out.data(), n, vocab,
                         hidden);
      },
      [=](const auto &in, const auto &d, auto &dIn, bool acc) {
        embeddingBackward(d.data(), ids.data(), dIn[0].data(), n, vocab, hidden,
                          acc);
      }));
}

void addPositionEmbedding(std::vector<KernelCase> &cases) {
  const int64_t positions = 6, hidden = 5, batch = 3, seq = 4;
  cases.push_back(makeCase(
      "position_embedding", {size_t(positions * hidden)},
      size_t(batch * seq * hidden),
      [=](const auto &in, auto &out) {
        positionEmbeddingForward(in[0].data(), out.data(), batch, seq, hidden);
      },
      [=](const auto &, const auto &d, auto &dIn, bool acc) {
        positionEmbeddingBackward(d.data(), dIn[0].data(), batch, seq,
                                  positions, hidden, acc);
      }));
}

void addMatmul(std::vector<KernelCase> &cases) {
  for (int mask = 0; mask < 8; ++mask) {
    MatmulShape s;
    s.batch = 3;
    s.m = 4;
    s.n = 5;
    s.k = 3;
    s.transA = mask & 1;
    s.transB = mask & 2;
    s.broadcastB = mask & 4;
    const size_t aSize = s.batch * s.m * s.k;
    const size_t bSize = (s.broadcastB ? 1 : s.batch) * s.k * s.n;
    std::string name = "matmul_tA" + std::to_string(int(s.transA)) + "_tB" +
                       std::to_string(int(s.transB)) + "_bcast" +
                       std::to_string(int(s.broadcastB));
    cases.push_back(makeCase(
        name, {aSize, bSize}, size_t(s.batch * s.m * s.n),
        [=](const auto &in, auto &out) {
          matmulForward(in[0].data(), in[1].data(), out.data(), s);
        },
        [=](const auto &in, const auto &d, auto &dIn, bool acc) {
          matmulBackward(in[0].data(), in[1].data(), d.data(), dIn[0].data(),
                         dIn[1].data(), s, acc);
        }));
  }
}

void addElementwise(std::vector<KernelCase> &cases) {
  const int64_t n = 37;
  cases.push_back(makeCase(
      "add", {size_t(n), size_t(n)}, size_t(n),
      [=](const auto &in, auto &out) {
        addForward(in[0].data(), in[1].data(), out.data(), n);
      },
      [=](const auto &, const auto &d, auto &dIn, bool acc) {
        addBackward(d.data(), dIn[0].data(), dIn[1].data(), n, acc);
      }));
  cases.push_back(makeCase(
      "mul", {size_t(n), size_t(n)}, size_t(n),
      [=](const auto &in, auto &out) {
        mulForward(in[0].data(), in[1].data(), out.data(), n);
      },
      [=](const auto &in, const auto &d, auto &dIn, bool acc) {
        mulBackward(in[0].data(), in[1].data(), d.data(), dIn[0].data(),
                    dIn[1].data(), n, acc);
      }));
  const int64_t rows = 6, cols = 9;
  cases.push_back(makeCase(
      "bias_add", {size_t(rows * cols), size_t(cols)}, size_t(rows * cols),
      [=](const auto &in, auto &out) {
        biasAddForward(in[0].data(), in[1].data(), out.data(), rows, cols);
      },
      [=](const auto &, const auto &d, auto &dIn, bool acc) {
        biasAddBackward(d.data(), dIn[0].data(), dIn[1].data(), rows, cols,
                        acc);
      }));
  cases.push_back(makeCase(
      "scale", {size_t(n)}, size_t(n),
      [=](const auto &in, auto &out) {
        using T = ELEM_T(out);
        scaleForward(in[0].data(), out.data(), n, T(-1.75));
      },
      [=](const auto &, const auto &d, auto &dIn, bool acc) {
        using T = ELEM_T(d);
        scaleBackward(d.data(), dIn[0].data(), n, T(-1.75), acc);
      }));
  cases.push_back(makeCase(
      "gelu", {size_t(n)}, size_t(n),
      [=](const auto &in, auto &out) {
        geluForward(in[0].data(), out.data(), n);
      },
      [=](const auto &in, const auto &d, auto &dIn, bool acc) {
        geluBackward(in[0].data(), d.data(), dIn[0].data(), n, acc);
      }));
  // --dsc-fuse's bias_gelu: the fused backward's dx, and the bias's gradient
  // as the plan takes it (bias_grad of that dx).
  for (bool exact : {false, true})
    cases.push_back(makeCase(
        exact ? "bias_gelu_exact" : "bias_gelu",
        {size_t(rows * cols), size_t(cols)}, size_t(rows * cols),
        [=](const auto &in, auto &out) {
          biasGeluForward(in[0].data(), in[1].data(), out.data(), rows, cols,
                          exact);
        },
        [=](const auto &in, const auto &d, auto &dIn, bool acc) {
          using T = ELEM_T(d);
          std::vector<T> dx(rows * cols);
          biasGeluBackward(in[0].data(), in[1].data(), d.data(), dx.data(),
                           rows, cols, exact, false);
          biasAddBackward(dx.data(), dIn[0].data(), dIn[1].data(), rows, cols,
                          acc);
        }));
}

void addNormalizations(std::vector<KernelCase> &cases) {
  const int64_t rows = 5, cols = 11;
  // With saved statistics, and without (the backward recomputes them).
  for (bool saved : {true, false}) {
    cases.push_back(makeCase(
        saved ? "layer_norm" : "layer_norm_recompute",
        {size_t(rows * cols), size_t(cols), size_t(cols)}, size_t(rows * cols),
        [=](const auto &in, auto &out) {
          using T = ELEM_T(out);
          layerNormForward(in[0].data(), in[1].data(), in[2].data(), out.data(),
                           (T *)nullptr, (T *)nullptr, rows, cols, T(1e-5));
        },
        [=](const auto &in, const auto &d, auto &dIn, bool acc) {
          using T = ELEM_T(d);
          std::vector<T> y(rows * cols), mean(rows), rstd(rows);
          layerNormForward(in[0].data(), in[1].data(), in[2].data(), y.data(),
                           mean.data(), rstd.data(), rows, cols, T(1e-5));
          layerNormBackward(in[0].data(), in[1].data(),
                            saved ? mean.data() : nullptr,
                            saved ? rstd.data() : nullptr, d.data(),
                            dIn[0].data(), dIn[1].data(), dIn[2].data(), rows,
                            cols, T(1e-5), AccumulateMask::all(acc));
        }));
  }
  cases.push_back(makeCase(
      "softmax", {size_t(rows * cols)}, size_t(rows * cols),
      [=](const auto &in, auto &out) {
        softmaxForward(in[0].data(), out.data(), rows, cols);
      },
      [=](const auto &in, const auto &d, auto &dIn, bool acc) {
        using T = ELEM_T(d);
        std::vector<T> y(rows * cols);
        softmaxForward(in[0].data(), y.data(), rows, cols);
        softmaxBackward(y.data(), d.data(), dIn[0].data(), rows, cols, acc);
      }));
}

void addAttention(std::vector<KernelCase> &cases) {
  struct Variant {
    const char *name;
    bool causal, saveLse, callerScratch;
    float dropout;
  };
  for (const Variant &var :
       {Variant{"attention", true, true, true, 0.0f},
        Variant{"attention_noncausal", false, true, true, 0.0f},
        Variant{"attention_recompute", true, false, false, 0.0f},
        Variant{"attention_dropout", true, true, true, 0.25f},
        Variant{"attention_noncausal_dropout", false, false, false, 0.25f}}) {
    AttentionShape s;
    s.batch = 2;
    s.seq = 5;
    s.hidden = 8;
    s.heads = 2;
    s.causal = var.causal;
    s.dropout = var.dropout;
    s.seed = 77;
    s.rowBlock = 2; // blocks of 2, 2 and 1 query rows
    const size_t n = size_t(s.batch * s.seq * s.hidden);
    // Forward then (optionally) backward, with the variant's lse and
    // scratch choices; throws if a kernel refuses to run.
    auto run = [=](const auto &in, auto &out, const auto *d, auto *dIn,
                   bool acc) {
      using T = ELEM_T(out);
      std::vector<T> lse(s.lseSize()),
          scratch(attentionScratchSize(s, omp_get_max_threads()));
      T *sp = var.callerScratch ? scratch.data() : nullptr;
      T *lp = var.saveLse ? lse.data() : nullptr;
      bool ok =
          attentionForward(in[0].data(), in[1].data(), in[2].data(), out.data(),
                           lp, sp, int64_t(scratch.size()), s);
      if (ok && d)
        ok = attentionBackward(in[0].data(), in[1].data(), in[2].data(), lp,
                               d->data(), (*dIn)[0].data(), (*dIn)[1].data(),
                               (*dIn)[2].data(), sp, int64_t(scratch.size()), s,
                               AccumulateMask::all(acc));
      if (!ok)
        throw std::logic_error("attention scratch too small");
    };
    cases.push_back(makeCase(
        var.name, {n, n, n}, n,
        [=](const auto &in, auto &out) {
          using V = std::decay_t<decltype(out)>;
          run(in, out, (const V *)nullptr, (Tensors<ELEM_T(out)> *)nullptr,
              false);
        },
        [=](const auto &in, const auto &d, auto &dIn, bool acc) {
          std::decay_t<decltype(d)> out(n);
          run(in, out, &d, &dIn, acc);
        }));
  }
}

void addCrossEntropy(std::vector<KernelCase> &cases) {
  const int64_t rows = 6, vocab = 7;
  const std::vector<int32_t> targets = {0, 6, 3, 3, 1, 5};
  for (bool saved : {true, false})
    cases.push_back(makeCase(
        saved ? "cross_entropy" : "cross_entropy_recompute",
        {size_t(rows * vocab)}, 1,
        [=](const auto &in, auto &out) {
          using T = ELEM_T(out);
          out[0] = crossEntropyForward(in[0].data(), targets.data(),
                                       (T *)nullptr, rows, vocab);
        },
        [=](const auto &in, const auto &d, auto &dIn, bool acc) {
          using T = ELEM_T(d);
          std::vector<T> lse(rows);
          crossEntropyForward(in[0].data(), targets.data(), lse.data(), rows,
                              vocab);
          crossEntropyBackward(in[0].data(), targets.data(),
                               saved ? lse.data() : nullptr, d[0],
                               dIn[0].data(), rows, vocab, acc);
        }));
  // A padded vocabulary: 5 classes of the 7 columns. The last two take no
  // probability, so the loss does not move with them and their gradient is
  // exactly zero.
  const int64_t classes = 5;
  const std::vector<int32_t> classTargets = {0, 4, 3, 3, 1, 2};
  cases.push_back(makeCase(
      "cross_entropy_padded_vocab", {size_t(rows * vocab)}, 1,
      [=](const auto &in, auto &out) {
        using T = ELEM_T(out);
        out[0] = crossEntropyForward(in[0].data(), classTargets.data(),
                                     (T *)nullptr, rows, vocab, classes);
      },
      [=](const auto &in, const auto &d, auto &dIn, bool acc) {
        crossEntropyBackward(in[0].data(), classTargets.data(),
                             decltype(d.data())(nullptr), d[0], dIn[0].data(),
                             rows, vocab, acc, classes);
      }));
}

void addDropout(std::vector<KernelCase> &cases) {
  const int64_t n = 64;
  const float p = 0.3f;
  const uint64_t seed = 1234;
  cases.push_back(makeCase(
      "dropout", {size_t(n)}, size_t(n),
      [=](const auto &in, auto &out) {
        dropoutForward(in[0].data(), out.data(), n, p, seed);
      },
      [=](const auto &, const auto &d, auto &dIn, bool acc) {
        dropoutBackward(d.data(), dIn[0].data(), n, p, seed, acc);
      }));
}

void addLayout(std::vector<KernelCase> &cases) {
  struct Perm {
    std::vector<int64_t> shape;
    std::vector<int> perm;
    const char *name;
  };
  for (const Perm &pc : {Perm{{2, 3, 4}, {2, 0, 1}, "transpose_201"},
                         Perm{{2, 3, 2, 4}, {0, 2, 1, 3}, "transpose_0213"},
                         Perm{{3, 5}, {1, 0}, "transpose_10"}}) {
    size_t n = 1;
    for (int64_t d : pc.shape)
      n *= size_t(d);
    const int rank = int(pc.shape.size());
    cases.push_back(makeCase(
        pc.name, {n}, n,
        [=](const auto &in, auto &out) {
          transposeForward(in[0].data(), out.data(), pc.shape.data(),
                           pc.perm.data(), rank);
        },
        [=](const auto &, const auto &d, auto &dIn, bool acc) {
          transposeBackward(d.data(), dIn[0].data(), pc.shape.data(),
                            pc.perm.data(), rank, acc);
        }));
  }
  const std::vector<int64_t> inShape = {3, 5, 4}, outShape = {2, 3, 2},
                             offsets = {1, 1, 2};
  cases.push_back(makeCase(
      "slice", {60}, 12,
      [=](const auto &in, auto &out) {
        sliceForward(in[0].data(), out.data(), inShape.data(), outShape.data(),
                     offsets.data(), 3);
      },
      [=](const auto &, const auto &d, auto &dIn, bool acc) {
        sliceBackward(d.data(), dIn[0].data(), inShape.data(), outShape.data(),
                      offsets.data(), 3, acc);
      }));
  const std::vector<int64_t> dims = {2, 1, 3};
  const int64_t cOuter = 2, cInner = 3;
  cases.push_back(makeCase(
      "concat",
      {size_t(cOuter * 2 * cInner), size_t(cOuter * 1 * cInner),
       size_t(cOuter * 3 * cInner)},
      size_t(cOuter * 6 * cInner),
      [=](const auto &in, auto &out) {
        using T = ELEM_T(out);
        const T *ptrs[3] = {in[0].data(), in[1].data(), in[2].data()};
        concatForward(ptrs, dims.data(), 3, out.data(), cOuter, cInner);
      },
      [=](const auto &, const auto &d, auto &dIn, bool acc) {
        using T = ELEM_T(d);
        T *ptrs[3] = {dIn[0].data(), dIn[1].data(), dIn[2].data()};
        concatBackward(d.data(), ptrs, dims.data(), 3, cOuter, cInner, acc);
      }));
}

} // namespace

std::vector<KernelCase> dsc::rt::test::allKernelCases() {
  std::vector<KernelCase> cases;
  addEmbedding(cases);
  addPositionEmbedding(cases);
  addMatmul(cases);
  addElementwise(cases);
  addNormalizations(cases);
  addAttention(cases);
  addCrossEntropy(cases);
  addDropout(cases);
  addLayout(cases);
  return cases;
}
