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
#include <vector>

using namespace dsc::rt;
using detail::dispatchAccumulate;
using detail::put;

namespace {
/// Mean and 1/sqrt(var + eps) of one row. Two-pass variance: the row is in
/// cache, and it avoids the cancellation of E[x^2] - E[x]^2 on activations
/// with a large mean.
template <typename T>
void rowStats(const T *xr, int64_t cols, T eps, T &mean, T &rstd) {
  const T invCols = T(1) / T(cols);
  T sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < cols; ++c)
    sum += xr[c];
  const T mu = sum * invCols;
  T sq = 0;
#pragma omp simd reduction(+ : sq)
  for (int64_t c = 0; c < cols; ++c) {
    T d = xr[c] - mu;
    sq += d * d;
  }
  mean = mu;
  rstd = T(1) / std::sqrt(sq * invCols + eps);
}
} // namespace

template <typename T>
void dsc::rt::layerNormForward(const T *x, const T *gamma, const T *beta, T *y,
                               T *mean, T *rstd, int64_t rows, int64_t cols,
                               T eps) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T *xr = x + r * cols;
    T *yr = y + r * cols;
    T mu, rs;
    rowStats(xr, cols, eps, mu, rs);
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c)
      yr[c] = (xr[c] - mu) * rs * gamma[c] + beta[c];
    if (mean)
      mean[r] = mu;
    if (rstd)
      rstd[r] = rs;
  }
}

template <typename T>
void dsc::rt::layerNormBackward(const T *x, const T *gamma, const T *mean,
                                const T *rstd, const T *dY, T *dX, T *dGamma,
                                T *dBeta, int64_t rows, int64_t cols, T eps,
                                AccumulateMask accumulate) {
  const T invCols = T(1) / T(cols);
  // Without saved statistics, recompute them once for both passes below.
  std::vector<T> statsStore;
  if (!mean || !rstd) {
    statsStore.resize(2 * rows);
    T *mu = statsStore.data(), *rs = mu + rows;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r)
      rowStats(x + r * cols, cols, eps, mu[r], rs[r]);
    mean = mu;
    rstd = rs;
  }
  if (dX) {
    dispatchAccumulate(accumulate[0], [&](auto acc) {
      constexpr bool Acc = decltype(acc)::value;
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
    });
  }
  if (!dGamma && !dBeta)
    return;
  const bool accGamma = accumulate[1], accBeta = accumulate[2];
#pragma omp parallel
  {
    int64_t c0, c1;
    detail::blockRange(cols, omp_get_num_threads(), omp_get_thread_num(), c0,
                       c1);
    for (int64_t c = c0; c < c1; ++c) {
      if (dGamma && !accGamma)
        dGamma[c] = T(0);
      if (dBeta && !accBeta)
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
}

#define INSTANTIATE(T)                                                         \
  template void dsc::rt::layerNormForward<T>(                                  \
      const T *, const T *, const T *, T *, T *, T *, int64_t, int64_t, T);    \
  template void dsc::rt::layerNormBackward<T>(                                 \
      const T *, const T *, const T *, const T *, const T *, T *, T *, T *,    \
      int64_t, int64_t, T, AccumulateMask);
DSC_RT_INSTANTIATE_FLOAT_DOUBLE(INSTANTIATE)
