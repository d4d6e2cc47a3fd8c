//===- KernelSupport.h - Helpers shared by the CPU kernels ------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Private helpers for lib/Runtime/Cpu: the overwrite-or-accumulate store,
// the BLAS dispatch on element type, the dropout mask (SplitMix64.h), and
// the explicit-instantiation macro.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_LIB_RUNTIME_CPU_KERNELSUPPORT_H
#define DSC_LIB_RUNTIME_CPU_KERNELSUPPORT_H

#include "dsc/Runtime/CpuKernels.h"
#include "dsc/Runtime/SplitMix64.h"

#include <cblas.h>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace dsc::rt::detail {

/// Writes `v` to `*p`, or adds it when accumulating. Kernels hoist the flag
/// out of their loops by instantiating on it (see `dispatchAccumulate`).
template <bool Acc, typename T> inline void put(T *p, T v) {
  if constexpr (Acc)
    *p += v;
  else
    *p = v;
}

/// Calls f(std::true_type) or f(std::false_type) so that inner loops see a
/// compile-time flag and vectorize without a branch.
template <typename F> inline void dispatchAccumulate(bool acc, F &&f) {
  if (acc)
    f(std::integral_constant<bool, true>());
  else
    f(std::integral_constant<bool, false>());
}

/// Row-major GEMM with explicit leading dimensions, typed on T, run on the
/// calling thread (OpenBLAS is pinned to one thread: see Gemm.cpp). Use it
/// inside parallel regions; use parallelGemm outside them.
/// y[n] = alpha * x · op(B) + beta * y for one row x (k elements, stride
/// incx): a product with one row reads each weight once, where sgemm would
/// first pack B (decode steps of inference, batch 1).
inline void rowTimesMatrix(bool tb, int64_t n, int64_t k, float alpha,
                           const float *x, int64_t incx, const float *b,
                           int64_t ldb, float beta, float *y) {
  // op(B) = B [k, n]: y = Bᵀ x; op(B) = Bᵀ with B [n, k]: y = B x.
  if (tb)
    cblas_sgemv(CblasRowMajor, CblasNoTrans, int(n), int(k), alpha, b, int(ldb),
                x, int(incx), beta, y, 1);
  else
    cblas_sgemv(CblasRowMajor, CblasTrans, int(k), int(n), alpha, b, int(ldb),
                x, int(incx), beta, y, 1);
}
inline void rowTimesMatrix(bool tb, int64_t n, int64_t k, double alpha,
                           const double *x, int64_t incx, const double *b,
                           int64_t ldb, double beta, double *y) {
  if (tb)
    cblas_dgemv(CblasRowMajor, CblasNoTrans, int(n), int(k), alpha, b, int(ldb),
                x, int(incx), beta, y, 1);
  else
    cblas_dgemv(CblasRowMajor, CblasTrans, int(k), int(n), alpha, b, int(ldb),
                x, int(incx), beta, y, 1);
}
inline void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                 const float *a, int64_t lda, const float *b, int64_t ldb,
                 float beta, float *c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k, alpha, a,
              (int)lda, b, (int)ldb, beta, c, (int)ldc);
}
inline void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                 double alpha, const double *a, int64_t lda, const double *b,
                 int64_t ldb, double beta, double *c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k, alpha, a,
              (int)lda, b, (int)ldb, beta, c, (int)ldc);
}

/// Makes OpenBLAS single-threaded, once per process. The kernels run every
/// thread themselves (OpenMP): two pools that both spin on 2 cores starve
/// each other, and per-head GEMMs are only parallel if BLAS is reentrant.
void pinBlasThreads();

/// One GEMM split over the OpenMP threads by blocks of C's rows (or columns
/// when M is small), each block a single-threaded BLAS call. Every element
/// of C is computed by one call over the full K, so the result does not
/// depend on the split.
template <typename T>
void parallelGemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha,
                  const T *a, int64_t lda, const T *b, int64_t ldb, T beta,
                  T *c, int64_t ldc);

/// exp for the float kernels: Cephes' expf polynomial (< 2 ulp on the clamped
/// range) written branch-free so `omp simd` loops vectorize it; libm's expf
/// is a scalar call. Inputs below -87.3 give ~1e-38 instead of 0, which no
/// softmax or loss can tell apart. NaN propagates.
inline float fastExp(float x) {
  x = x < -87.3f ? -87.3f : (x > 88.3f ? 88.3f : x);
  // Round x * log2(e) to an integer n with the 1.5 * 2^23 trick: n then sits
  // in the low mantissa bits of t, read back without a float-to-int
  // conversion (undefined for NaN, which must just propagate).
  const float shifter = 12582912.0f; // bits 0x4B400000
  float t = x * 1.44269504088896341f + shifter;
  float n = t - shifter;
  int32_t tBits;
  std::memcpy(&tBits, &t, sizeof(tBits));
  const int32_t ni = tBits - 0x4B400000;
  float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float y = p * r * r + r + 1.0f;
  // 2^n, built in the exponent field (n is within [-126, 127] here).
  int32_t bits = int32_t(uint32_t(ni + 127) << 23);
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return y * scale;
}
/// The double kernels are the test oracle: libm, exactly.
inline double fastExp(double x) { return std::exp(x); }

/// tanh(x) = 1 - 2 / (exp(2x) + 1): absolute error ~1e-7, which is what GELU
/// needs (it adds 1 to the result), and saturates cleanly at +-1.
inline float fastTanh(float x) {
  return 1.0f - 2.0f / (fastExp(2.0f * x) + 1.0f);
}
inline double fastTanh(double x) { return std::tanh(x); }

/// The dropout mask (counter-based: mask bit = f(seed, element index)),
/// shared bit for bit with the CUDA kernels.
using ::dsc::rt::dropoutKeepBit;
using ::dsc::rt::dropoutKey;
using ::dsc::rt::dropoutThreshold;

/// Softmax of one row of n (y may alias x); defined in Softmax.cpp and reused
/// by the attention kernel on each row's causal prefix.
template <typename T> void softmaxRow(const T *x, T *y, int64_t n);

/// Splits [0, n) into `parts` contiguous blocks; block i is [begin, end).
inline void blockRange(int64_t n, int parts, int i, int64_t &begin,
                       int64_t &end) {
  int64_t q = n / parts, r = n % parts;
  begin = i * q + (i < r ? i : r);
  end = begin + q + (i < r ? 1 : 0);
}

/// dLogits = (softmax(logits) - onehot(targets)) * dLoss / rows, each row's
/// softmax from its logsumexp `lse[r]` (T, or double for a vocabulary
/// shard); the one-hot column is targets[r] - colBegin, absent when outside
/// [0, cols) (another shard's). The backward of both cross-entropies.
template <typename T, typename L>
void crossEntropyGradRows(const T *logits, const int32_t *targets, const L *lse,
                          T dLoss, T *dLogits, int64_t rows, int64_t cols,
                          int64_t colBegin, int64_t classes, bool accumulate) {
  const T g = dLoss / T(rows);
  // Columns past the classes (a padded vocabulary's) take no probability.
  const int64_t n = classColumns(cols, colBegin, classes);
  dispatchAccumulate(accumulate, [&](auto acc) {
    constexpr bool Acc = decltype(acc)::value;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const T *x = logits + r * cols;
      T *d = dLogits + r * cols;
      const T l = T(lse[r]);
#pragma omp simd
      for (int64_t c = 0; c < n; ++c)
        put<Acc>(d + c, fastExp(x[c] - l) * g);
      for (int64_t c = n; c < cols; ++c)
        put<Acc>(d + c, T(0));
      const int64_t t = int64_t(targets[r]) - colBegin;
      if (t >= 0 && t < cols)
        d[t] -= g;
    }
  });
}

} // namespace dsc::rt::detail

#define DSC_RT_INSTANTIATE_FLOAT_DOUBLE(MACRO)                                 \
  MACRO(float)                                                                 \
  MACRO(double)

#endif // DSC_LIB_RUNTIME_CPU_KERNELSUPPORT_H
