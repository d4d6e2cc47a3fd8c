//===- RmsNorm.cpp - RMS norm over the last dim, forward and backward -----===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Row-parallel, as LayerNorm.cpp: each row stays in L1 across its passes;
// dgamma reduces over rows by column blocks for fixed-order sums. With
// ms = mean(x^2) and r the row's scale (1/sqrt(ms + eps), or GPT-NeoX's
// 1/(sqrt(ms) + eps)), y = x r gamma and
//   dx = r (gamma dy) + x (dr/dms) (2/C) sum(gamma dy x),
// where dr/dms is -r^3/2, or -r^2/(2 sqrt(ms)) with eps outside.
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

/// The row's mean square.
template <typename T> T meanSquare(const T *xr, int64_t cols) {
  T sq = 0;
#pragma omp simd reduction(+ : sq)
  for (int64_t c = 0; c < cols; ++c)
    sq += xr[c] * xr[c];
  return sq / T(cols);
}

template <typename T> T rowScale(T ms, T eps, bool epsOutside) {
  return epsOutside ? T(1) / (std::sqrt(ms) + eps) : T(1) / std::sqrt(ms + eps);
}

/// d r / d ms at the row's ms and r.
template <typename T> T scaleSlope(T ms, T r, bool epsOutside) {
  if (!epsOutside)
    return -T(0.5) * r * r * r;
  // An all-zero row has ms = 0, where every x is 0 too: its term vanishes.
  return ms > T(0) ? -T(0.5) * r * r / std::sqrt(ms) : T(0);
}

} // namespace

template <typename T>
void dsc::rt::rmsNormForward(const T *x, const T *gamma, T *y, int64_t rows,
                             int64_t cols, T eps, bool epsOutside) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T *xr = x + r * cols;
    T *yr = y + r * cols;
    const T s = rowScale(meanSquare(xr, cols), eps, epsOutside);
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c)
      yr[c] = xr[c] * s * gamma[c];
  }
}

template <typename T>
void dsc::rt::rmsNormBackward(const T *x, const T *gamma, const T *dY, T *dX,
                              T *dGamma, int64_t rows, int64_t cols, T eps,
                              bool epsOutside, AccumulateMask accumulate) {
  if (dX) {
    dispatchAccumulate(accumulate[0], [&](auto acc) {
      constexpr bool Acc = decltype(acc)::value;
#pragma omp parallel for schedule(static)
      for (int64_t r = 0; r < rows; ++r) {
        const T *xr = x + r * cols, *dyr = dY + r * cols;
        T *dxr = dX + r * cols;
        const T ms = meanSquare(xr, cols);
        const T s = rowScale(ms, eps, epsOutside);
        T dot = 0;
#pragma omp simd reduction(+ : dot)
        for (int64_t c = 0; c < cols; ++c)
          dot += gamma[c] * dyr[c] * xr[c];
        const T k = scaleSlope(ms, s, epsOutside) * T(2) / T(cols) * dot;
#pragma omp simd
        for (int64_t c = 0; c < cols; ++c)
          put<Acc>(dxr + c, s * gamma[c] * dyr[c] + xr[c] * k);
      }
    });
  }
  if (!dGamma)
    return;
  const bool accGamma = accumulate[1];
  std::vector<T> scales(static_cast<size_t>(rows));
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    scales[r] = rowScale(meanSquare(x + r * cols, cols), eps, epsOutside);
#pragma omp parallel
  {
    int64_t c0, c1;
    detail::blockRange(cols, omp_get_num_threads(), omp_get_thread_num(), c0,
                       c1);
    if (!accGamma)
      for (int64_t c = c0; c < c1; ++c)
        dGamma[c] = T(0);
    for (int64_t r = 0; r < rows; ++r) {
      const T *xr = x + r * cols, *dyr = dY + r * cols;
      const T s = scales[r];
#pragma omp simd
      for (int64_t c = c0; c < c1; ++c)
        dGamma[c] += dyr[c] * xr[c] * s;
    }
  }
}

#define INSTANTIATE(T)                                                         \
  template void dsc::rt::rmsNormForward<T>(const T *, const T *, T *, int64_t, \
                                           int64_t, T, bool);                  \
  template void dsc::rt::rmsNormBackward<T>(const T *, const T *, const T *,   \
                                            T *, T *, int64_t, int64_t, T,     \
                                            bool, AccumulateMask);
DSC_RT_INSTANTIATE_FLOAT_DOUBLE(INSTANTIATE)
