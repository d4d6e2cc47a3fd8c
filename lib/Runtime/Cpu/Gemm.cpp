//===- Gemm.cpp - OpenBLAS threading policy and the parallel GEMM ---------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The runtime owns CPU threading: OpenBLAS runs single-threaded inside our
// OpenMP regions, and large GEMMs are split across those threads here.
//
//===----------------------------------------------------------------------===//

#include "KernelSupport.h"

#include <algorithm>
#include <omp.h>
#include <vector>

using namespace dsc::rt;

void detail::pinBlasThreads() {
  // openblas_set_num_threads is not thread-safe; a function-local static is.
  static const bool pinned = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)pinned;
}

template <typename T>
void detail::parallelGemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                          T alpha, const T *a, int64_t lda, const T *b,
                          int64_t ldb, T beta, T *c, int64_t ldc) {
  pinBlasThreads();
  const int threadCount = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (m == 1) {
    // One row (a decode step): a matrix-vector product per column block,
    // each weight read once.
    const int64_t incx = ta ? lda : 1;
    constexpr int64_t kColumns = 256;
    const int64_t blocks =
        std::max<int64_t>(1, std::min<int64_t>(threadCount, n / kColumns));
    // Memory-bound: worth splitting once the matrix outgrows a core's cache
    // share (256 KiB of f32).
    if (blocks == 1 || n * k < 65536) {
      rowTimesMatrix(tb, n, k, alpha, a, incx, b, ldb, beta, c);
      return;
    }
    if (tb) {
      // B is [n, k]: each thread streams its own rows of B.
#pragma omp parallel for schedule(static) num_threads(int(blocks))
      for (int64_t p = 0; p < blocks; ++p) {
        const int64_t lo = n * p / blocks, hi = n * (p + 1) / blocks;
        rowTimesMatrix(tb, hi - lo, k, alpha, a, incx, b + lo * ldb, ldb,
                       beta, c + lo);
      }
      return;
    }
    // B is [k, n]: each thread streams its own rows of B (a slice of k) into
    // a partial product, summed in thread order (deterministic for a thread
    // count, as every kernel here).
    const int64_t parts = std::max<int64_t>(
        1, std::min<int64_t>(threadCount, k / 64));
    if (parts == 1) {
      rowTimesMatrix(tb, n, k, alpha, a, incx, b, ldb, beta, c);
      return;
    }
    // Reused across calls: a decode step makes dozens of these products.
    static thread_local std::vector<T> partial;
    partial.resize(static_cast<size_t>(parts * n));
    // The workers write through this pointer: inside the parallel region
    // `partial` would name each thread's own (empty) copy.
    T *const sums = partial.data();
#pragma omp parallel for schedule(static) num_threads(int(parts))
    for (int64_t p = 0; p < parts; ++p) {
      const int64_t lo = k * p / parts, hi = k * (p + 1) / parts;
      rowTimesMatrix(tb, n, hi - lo, T(1), a + lo * incx, incx, b + lo * ldb,
                     ldb, T(0), sums + p * n);
    }
    for (int64_t j = 0; j < n; ++j) {
      T sum = 0;
      for (int64_t p = 0; p < parts; ++p)
        sum += sums[p * n + j];
      c[j] = alpha * sum + (beta == T(0) ? T(0) : beta * c[j]);
    }
    return;
  }
  // Blocks are multiples of 64 rows/columns so each call keeps OpenBLAS's
  // register tiles full; a problem too small to split runs on one thread.
  constexpr int64_t kAlign = 64;
  const int threads = threadCount;
  const bool splitRows = m >= n || n < kAlign * threads;
  const int64_t extent = splitRows ? m : n;
  int64_t parts = std::min<int64_t>(threads, extent / kAlign);
  if (parts <= 1 || 2.0 * m * n * k < 4e6) {
    gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
#pragma omp parallel for schedule(static) num_threads(int(parts))
  for (int64_t p = 0; p < parts; ++p) {
    // Block p of `extent`, rounded to kAlign.
    int64_t chunk = (extent / parts + kAlign - 1) / kAlign * kAlign;
    int64_t lo = std::min(extent, p * chunk);
    int64_t hi = p == parts - 1 ? extent : std::min(extent, lo + chunk);
    if (hi <= lo)
      continue;
    if (splitRows) {
      // Rows [lo, hi) of C come from rows of op(A).
      const T *ap = ta ? a + lo : a + lo * lda;
      gemm(ta, tb, hi - lo, n, k, alpha, ap, lda, b, ldb, beta, c + lo * ldc,
           ldc);
    } else {
      // Columns [lo, hi) of C come from columns of op(B).
      const T *bp = tb ? b + lo * ldb : b + lo;
      gemm(ta, tb, m, hi - lo, k, alpha, a, lda, bp, ldb, beta, c + lo, ldc);
    }
  }
}

template void detail::parallelGemm<float>(bool, bool, int64_t, int64_t, int64_t,
                                          float, const float *, int64_t,
                                          const float *, int64_t, float,
                                          float *, int64_t);
template void detail::parallelGemm<double>(bool, bool, int64_t, int64_t,
                                           int64_t, double, const double *,
                                           int64_t, const double *, int64_t,
                                           double, double *, int64_t);
