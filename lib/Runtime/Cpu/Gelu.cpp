//===- Gelu.cpp - GELU (tanh form and exact) forward and backward ---------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// GPT-2's tanh-form GELU and the exact (erf) one GPT-NeoX and torch's
// F.gelu compute, alone and fused with the bias add before them (--dsc-fuse's
// bias_gelu). The backwards recompute from x instead of saving the
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

// One formula per function, inlined into the plain and the bias-fused
// kernels alike, so that the compiler makes the same choices (FMA
// contraction included) in both and bias_gelu is bias_add + gelu bit for
// bit: the sum x + bias has no product to contract into.
template <typename T> inline T geluTanh(T xi) {
  const T s = T(kSqrt2OverPi), c = T(kCubic);
  return T(0.5) * xi * (T(1) + detail::fastTanh(s * (xi + c * xi * xi * xi)));
}

template <typename T> inline T geluTanhSlope(T xi) {
  const T s = T(kSqrt2OverPi), c = T(kCubic);
  T t = detail::fastTanh(s * (xi + c * xi * xi * xi));
  T du = s * (T(1) + T(3) * c * xi * xi);
  return T(0.5) * (T(1) + t) + T(0.5) * xi * (T(1) - t * t) * du;
}

template <typename T> inline T geluErf(T xi) {
  return T(0.5) * xi * (T(1) + std::erf(xi * T(kInvSqrt2)));
}

template <typename T> inline T geluErfSlope(T xi) {
  const T cdf = T(0.5) * (T(1) + std::erf(xi * T(kInvSqrt2)));
  const T pdf = T(kInvSqrt2Pi) * std::exp(T(-0.5) * xi * xi);
  return cdf + xi * pdf;
}
} // namespace

template <typename T> void dsc::rt::geluForward(const T *x, T *y, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i)
    y[i] = geluTanh(x[i]);
}

template <typename T>
void dsc::rt::geluBackward(const T *x, const T *dY, T *dX, int64_t n,
                           bool accumulate) {
  dispatchAccumulate(accumulate, [&](auto acc) {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i)
      put<decltype(acc)::value>(dX + i, dY[i] * geluTanhSlope(x[i]));
  });
}

template <typename T>
void dsc::rt::geluExactForward(const T *x, T *y, int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i)
    y[i] = geluErf(x[i]);
}

template <typename T>
void dsc::rt::geluExactBackward(const T *x, const T *dY, T *dX, int64_t n,
                                bool accumulate) {
  dispatchAccumulate(accumulate, [&](auto acc) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i)
      put<decltype(acc)::value>(dX + i, dY[i] * geluErfSlope(x[i]));
  });
}

// Megatron's bias_gelu and bias_gelu_back: the sum x + bias is formed in a
// register, rounded to T as biasAddForward rounds it, and never stored.

template <typename T>
void dsc::rt::biasGeluForward(const T *x, const T *bias, T *y, int64_t rows,
                              int64_t cols, bool exact) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T *xr = x + r * cols;
    T *yr = y + r * cols;
    if (exact) {
      for (int64_t c = 0; c < cols; ++c)
        yr[c] = geluErf(T(xr[c] + bias[c]));
    } else {
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c)
        yr[c] = geluTanh(T(xr[c] + bias[c]));
    }
  }
}

template <typename T>
void dsc::rt::biasGeluBackward(const T *x, const T *bias, const T *dY, T *dX,
                               int64_t rows, int64_t cols, bool exact,
                               bool accumulate) {
  dispatchAccumulate(accumulate, [&](auto acc) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t o = r * cols;
      if (exact) {
        for (int64_t c = 0; c < cols; ++c)
          put<decltype(acc)::value>(
              dX + o + c, dY[o + c] * geluErfSlope(T(x[o + c] + bias[c])));
      } else {
#pragma omp simd
        for (int64_t c = 0; c < cols; ++c)
          put<decltype(acc)::value>(
              dX + o + c, dY[o + c] * geluTanhSlope(T(x[o + c] + bias[c])));
      }
    }
  });
}

#define INSTANTIATE(T)                                                         \
  template void dsc::rt::geluForward<T>(const T *, T *, int64_t);              \
  template void dsc::rt::geluBackward<T>(const T *, const T *, T *, int64_t,   \
                                         bool);                                \
  template void dsc::rt::geluExactForward<T>(const T *, T *, int64_t);         \
  template void dsc::rt::geluExactBackward<T>(const T *, const T *, T *,       \
                                              int64_t, bool);                  \
  template void dsc::rt::biasGeluForward<T>(const T *, const T *, T *,         \
                                            int64_t, int64_t, bool);           \
  template void dsc::rt::biasGeluBackward<T>(                                  \
      const T *, const T *, const T *, T *, int64_t, int64_t, bool, bool);
DSC_RT_INSTANTIATE_FLOAT_DOUBLE(INSTANTIATE)
