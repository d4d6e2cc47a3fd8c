//===- Matmul.cpp - Batched GEMM forward and backward ---------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Batched matmul with transpose flags and a broadcast B, mapped onto OpenBLAS
// GEMMs; a broadcast B folds the batch into M, giving one large GEMM.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/CpuKernels.h"

#include "KernelSupport.h"

#include <omp.h>

using namespace dsc::rt;
using detail::gemm;
using detail::parallelGemm;

namespace {
/// Runs f(i) for i in [0, batch): across threads with single-threaded GEMMs
/// when there are enough small problems, else one split GEMM at a time.
/// Each i writes its own output, so either way is deterministic.
template <typename F>
void forBatch(int64_t batch, double flopsEach, const F &f) {
  detail::pinBlasThreads();
  const int threads = omp_get_max_threads();
  if (batch >= threads && flopsEach < 5e7) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < batch; ++i)
      f(i, /*split=*/false);
  } else {
    for (int64_t i = 0; i < batch; ++i)
      f(i, /*split=*/true);
  }
}

template <typename T>
void anyGemm(bool split, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
             T alpha, const T *a, int64_t lda, const T *b, int64_t ldb, T beta,
             T *c, int64_t ldc) {
  if (split)
    parallelGemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else
    gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
} // namespace

template <typename T>
void dsc::rt::matmulForward(const T *a, const T *b, T *c, const MatmulShape &s,
                            bool accumulate) {
  const int64_t lda = s.transA ? s.m : s.k, ldb = s.transB ? s.k : s.n;
  const T beta = accumulate ? T(1) : T(0);
  // A shared B with row-major A [batch*m, k] is a single GEMM: the batch is
  // just more rows, which gives the threads one large problem.
  if (s.broadcastB && !s.transA) {
    parallelGemm(false, s.transB, s.batch * s.m, s.n, s.k, T(1), a, lda, b, ldb,
                 beta, c, s.n);
    return;
  }
  forBatch(s.batch, 2.0 * s.m * s.n * s.k, [&](int64_t i, bool split) {
    anyGemm(split, s.transA, s.transB, s.m, s.n, s.k, T(1), a + i * s.m * s.k,
            lda, b + (s.broadcastB ? 0 : i * s.k * s.n), ldb, beta,
            c + i * s.m * s.n, s.n);
  });
}

template <typename T>
void dsc::rt::matmulBackward(const T *a, const T *b, const T *dC, T *dA, T *dB,
                             const MatmulShape &s, bool accumulate) {
  const int64_t lda = s.transA ? s.m : s.k, ldb = s.transB ? s.k : s.n;
  const int64_t aSize = s.m * s.k, bSize = s.k * s.n, cSize = s.m * s.n;
  const double flopsEach = 2.0 * s.m * s.n * s.k;
  const T beta = accumulate ? T(1) : T(0);

  if (dA) {
    // dA = dC op(B)^T, or in A's stored layout when transA: op(B) dC^T.
    auto one = [&](bool split, int64_t rows, const T *bi, const T *dCi,
                   T *dAi) {
      if (!s.transA)
        anyGemm(split, false, !s.transB, rows, s.k, s.n, T(1), dCi, s.n, bi,
                ldb, beta, dAi, s.k);
      else
        anyGemm(split, s.transB, true, s.k, s.m, s.n, T(1), bi, ldb, dCi, s.n,
                beta, dAi, s.m);
    };
    if (s.broadcastB && !s.transA)
      one(true, s.batch * s.m, b, dC, dA);
    else
      forBatch(s.batch, flopsEach, [&](int64_t i, bool split) {
        one(split, s.m, b + (s.broadcastB ? 0 : i * bSize), dC + i * cSize,
            dA + i * aSize);
      });
  }

  if (dB) {
    // dB = op(A)^T dC, or in B's stored layout when transB: dC^T op(A).
    auto one = [&](bool split, int64_t rows, const T *ai, const T *dCi, T *dBi,
                   T bt) {
      if (!s.transB)
        anyGemm(split, !s.transA, false, s.k, s.n, rows, T(1), ai, lda, dCi,
                s.n, bt, dBi, s.n);
      else
        anyGemm(split, true, s.transA, s.n, s.k, rows, T(1), dCi, s.n, ai, lda,
                bt, dBi, s.k);
    };
    if (!s.broadcastB) {
      forBatch(s.batch, flopsEach, [&](int64_t i, bool split) {
        one(split, s.m, a + i * aSize, dC + i * cSize, dB + i * bSize, beta);
      });
    } else if (!s.transA) {
      // The batch reduction happens inside one GEMM's K loop.
      one(true, s.batch * s.m, a, dC, dB, beta);
    } else {
      // Sum in batch order so the result does not depend on threading.
      for (int64_t i = 0; i < s.batch; ++i)
        one(true, s.m, a + i * aSize, dC + i * cSize, dB, i == 0 ? beta : T(1));
    }
  }
}

#define INSTANTIATE(T)                                                         \
  template void dsc::rt::matmulForward<T>(const T *, const T *, T *,           \
                                          const MatmulShape &, bool);          \
  template void dsc::rt::matmulBackward<T>(                                    \
      const T *, const T *, const T *, T *, T *, const MatmulShape &, bool);
DSC_RT_INSTANTIATE_FLOAT_DOUBLE(INSTANTIATE)
