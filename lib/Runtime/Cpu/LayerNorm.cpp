//===- LayerNorm.cpp - LayerNorm over the last dim, forward and backward --===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Row-parallel LayerNorm; each row stays in L1 across its passes. The
// parameter grads reduce over rows by column blocks for fixed-order sums.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/CpuKernels.h"

#include "KernelSupport.h"

#include <cmath>
#include <omp.h>

using namespace dsc::rt;
using detail::dispatchAccumulate;
using detail::put;

template <typename T>
void dsc::rt::layerNormForward(const T *x, const T *gamma, const T *beta, T *y,
                               T *mean, T *rstd, int64_t rows, int64_t cols,
                               T eps) {
  const T invCols = T(1) / T(cols);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T *xr = x + r * cols;
    T *yr = y + r * cols;
    T sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < cols; ++c)
      sum += xr[c];
    T mu = sum * invCols;
    // Two-pass variance: the row is in cache, and it avoids the cancellation
    // of E[x^2] - E[x]^2 on activations with a large mean.
    T sq = 0;
#pragma omp simd reduction(+ : sq)
    for (int64_t c = 0; c < cols; ++c) {
      T d = xr[c] - mu;
      sq += d * d;
    }
    T rs = T(1) / std::sqrt(sq * invCols + eps);
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c)
      yr[c] = (xr[c] - mu) * rs * gamma[c] + beta[c];
    mean[r] = mu;
    rstd[r] = rs;
  }
}

template <typename T>
void dsc::rt::layerNormBackward(const T *x, const T *gamma, const T *mean,
                                const T *rstd, const T *dY, T *dX, T *dGamma,
                                T *dBeta, int64_t rows, int64_t cols,
                                bool accumulate) {
  const T invCols = T(1) / T(cols);
  dispatchAccumulate(accumulate, [&](auto acc) {
    constexpr bool Acc = decltype(acc)::value;
    if (dX) {
#pragma omp parallel for schedule(static)
      for (int64_t r = 0; r < rows; ++r) {
        const T *xr = x + r * cols, *dyr = dY + r * cols;
        T *dxr = dX + r * cols;
        const T mu = mean[r], rs = rstd[r];
        // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma.
        T sumG = 0, sumGX = 0;
#pragma omp simd reduction(+ : sumG, sumGX)
        for (int64_t c = 0; c < cols; ++c) {
          T g = dyr[c] * gamma[c];
          sumG += g;
          sumGX += g * (xr[c] - mu) * rs;
        }
        const T a = sumG * invCols, b = sumGX * invCols;
#pragma omp simd
        for (int64_t c = 0; c < cols; ++c) {
          T xhat = (xr[c] - mu) * rs;
          put<Acc>(dxr + c, rs * (dyr[c] * gamma[c] - a - xhat * b));
        }
      }
    }
    if (!dGamma && !dBeta)
      return;
#pragma omp parallel
    {
      int64_t c0, c1;
      detail::blockRange(cols, omp_get_num_threads(), omp_get_thread_num(), c0,
                         c1);
      if (!Acc)
        for (int64_t c = c0; c < c1; ++c) {
          if (dGamma)
            dGamma[c] = T(0);
          if (dBeta)
            dBeta[c] = T(0);
        }
      for (int64_t r = 0; r < rows; ++r) {
        const T *xr = x + r * cols, *dyr = dY + r * cols;
        const T mu = mean[r], rs = rstd[r];
        if (dGamma) {
#pragma omp simd
          for (int64_t c = c0; c < c1; ++c)
            dGamma[c] += dyr[c] * (xr[c] - mu) * rs;
        }
        if (dBeta) {
#pragma omp simd
          for (int64_t c = c0; c < c1; ++c)
            dBeta[c] += dyr[c];
        }
      }
    }
  });
}

#define INSTANTIATE(T)                                                         \
  template void dsc::rt::layerNormForward<T>(                                  \
      const T *, const T *, const T *, T *, T *, T *, int64_t, int64_t, T);    \
  template void dsc::rt::layerNormBackward<T>(const T *, const T *, const T *, \
                                              const T *, const T *, T *, T *,  \
                                              T *, int64_t, int64_t, bool);
DSC_RT_INSTANTIATE_FLOAT_DOUBLE(INSTANTIATE)
