//===- Gelu.cpp - GELU (tanh form and exact) forward and backward ---------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// GPT-2's tanh-form GELU and the exact (erf) one GPT-NeoX and torch's
// F.gelu compute. The backwards recompute from x instead of saving the
// transcendental, trading it for a tensor of memory.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/CpuKernels.h"

#include "KernelSupport.h"

#include <cmath>

using namespace dsc::rt;
using detail::dispatchAccumulate;
using detail::put;

namespace {
constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kCubic = 0.044715;
constexpr double kInvSqrt2 = 0.7071067811865476;
constexpr double kInvSqrt2Pi = 0.3989422804014327;
} // namespace

template <typename T> void dsc::rt::geluForward(const T *x, T *y, int64_t n) {
  const T s = T(kSqrt2OverPi), c = T(kCubic);
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    T xi = x[i];
    y[i] = T(0.5) * xi * (T(1) + detail::fastTanh(s * (xi + c * xi * xi * xi)));
  }
}

template <typename T>
void dsc::rt::geluBackward(const T *x, const T *dY, T *dX, int64_t n,
                           bool accumulate) {
  const T s = T(kSqrt2OverPi), c = T(kCubic);
  dispatchAccumulate(accumulate, [&](auto acc) {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      T xi = x[i];
      T t = detail::fastTanh(s * (xi + c * xi * xi * xi));
      T du = s * (T(1) + T(3) * c * xi * xi);
      T g = T(0.5) * (T(1) + t) + T(0.5) * xi * (T(1) - t * t) * du;
      put<decltype(acc)::value>(dX + i, dY[i] * g);
    }
  });
}

template <typename T>
void dsc::rt::geluExactForward(const T *x, T *y, int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i)
    y[i] = T(0.5) * x[i] * (T(1) + std::erf(x[i] * T(kInvSqrt2)));
}

template <typename T>
void dsc::rt::geluExactBackward(const T *x, const T *dY, T *dX, int64_t n,
                                bool accumulate) {
  dispatchAccumulate(accumulate, [&](auto acc) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const T xi = x[i];
      const T cdf = T(0.5) * (T(1) + std::erf(xi * T(kInvSqrt2)));
      const T pdf = T(kInvSqrt2Pi) * std::exp(T(-0.5) * xi * xi);
      put<decltype(acc)::value>(dX + i, dY[i] * (cdf + xi * pdf));
    }
  });
}

#define INSTANTIATE(T)                                                         \
  template void dsc::rt::geluForward<T>(const T *, T *, int64_t);              \
  template void dsc::rt::geluBackward<T>(const T *, const T *, T *, int64_t,   \
                                         bool);                                \
  template void dsc::rt::geluExactForward<T>(const T *, T *, int64_t);         \
  template void dsc::rt::geluExactBackward<T>(const T *, const T *, T *,       \
                                              int64_t, bool);
DSC_RT_INSTANTIATE_FLOAT_DOUBLE(INSTANTIATE)
