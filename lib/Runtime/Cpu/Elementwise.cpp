//===- Elementwise.cpp - add, mul, bias_add, scale ------------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The binary/unary arithmetic ops of the graph with their adjoints: flat
// OpenMP loops the compiler vectorizes; bias grads reduce by column blocks.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/CpuKernels.h"

#include "KernelSupport.h"

#include <omp.h>

using namespace dsc::rt;
using detail::dispatchAccumulate;
using detail::put;

namespace {
/// dst (op)= alpha * src over n elements; the copy-or-add of every adjoint
/// that passes a gradient straight through.
template <typename T>
void axpyInto(const T *src, T *dst, int64_t n, T alpha, bool accumulate) {
  dispatchAccumulate(accumulate, [&](auto acc) {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i)
      put<decltype(acc)::value>(dst + i, alpha * src[i]);
  });
}
} // namespace

template <typename T>
void dsc::rt::addForward(const T *a, const T *b, T *y, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i)
    y[i] = a[i] + b[i];
}

template <typename T>
void dsc::rt::addBackward(const T *dY, T *dA, T *dB, int64_t n,
                          bool accumulate) {
  if (dA)
    axpyInto(dY, dA, n, T(1), accumulate);
  if (dB)
    axpyInto(dY, dB, n, T(1), accumulate);
}

template <typename T>
void dsc::rt::mulForward(const T *a, const T *b, T *y, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i)
    y[i] = a[i] * b[i];
}

template <typename T>
void dsc::rt::mulBackward(const T *a, const T *b, const T *dY, T *dA, T *dB,
                          int64_t n, bool accumulate) {
  dispatchAccumulate(accumulate, [&](auto acc) {
    constexpr bool Acc = decltype(acc)::value;
    if (dA) {
#pragma omp parallel for simd schedule(static)
      for (int64_t i = 0; i < n; ++i)
        put<Acc>(dA + i, dY[i] * b[i]);
    }
    if (dB) {
#pragma omp parallel for simd schedule(static)
      for (int64_t i = 0; i < n; ++i)
        put<Acc>(dB + i, dY[i] * a[i]);
    }
  });
}

template <typename T>
void dsc::rt::biasAddForward(const T *x, const T *bias, T *y, int64_t rows,
                             int64_t cols) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T *xr = x + r * cols;
    T *yr = y + r * cols;
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c)
      yr[c] = xr[c] + bias[c];
  }
}

template <typename T>
void dsc::rt::biasAddBackward(const T *dY, T *dX, T *dBias, int64_t rows,
                              int64_t cols, bool accumulate) {
  if (dX)
    axpyInto(dY, dX, rows * cols, T(1), accumulate);
  if (!dBias)
    return;
    // Each thread owns a column block and sums rows in order, so the bits do
    // not depend on how many threads there are.
#pragma omp parallel
  {
    int64_t c0, c1;
    detail::blockRange(cols, omp_get_num_threads(), omp_get_thread_num(), c0,
                       c1);
    if (!accumulate)
      for (int64_t c = c0; c < c1; ++c)
        dBias[c] = T(0);
    for (int64_t r = 0; r < rows; ++r) {
      const T *dr = dY + r * cols;
#pragma omp simd
      for (int64_t c = c0; c < c1; ++c)
        dBias[c] += dr[c];
    }
  }
}

template <typename T>
void dsc::rt::scaleForward(const T *x, T *y, int64_t n, T alpha) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i)
    y[i] = alpha * x[i];
}

template <typename T>
void dsc::rt::scaleBackward(const T *dY, T *dX, int64_t n, T alpha,
                            bool accumulate) {
  axpyInto(dY, dX, n, alpha, accumulate);
}

#define INSTANTIATE(T)                                                         \
  template void dsc::rt::addForward<T>(const T *, const T *, T *, int64_t);    \
  template void dsc::rt::addBackward<T>(const T *, T *, T *, int64_t, bool);   \
  template void dsc::rt::mulForward<T>(const T *, const T *, T *, int64_t);    \
  template void dsc::rt::mulBackward<T>(const T *, const T *, const T *, T *,  \
                                        T *, int64_t, bool);                   \
  template void dsc::rt::biasAddForward<T>(const T *, const T *, T *, int64_t, \
                                           int64_t);                           \
  template void dsc::rt::biasAddBackward<T>(const T *, T *, T *, int64_t,      \
                                            int64_t, bool);                    \
  template void dsc::rt::scaleForward<T>(const T *, T *, int64_t, T);          \
  template void dsc::rt::scaleBackward<T>(const T *, T *, int64_t, T, bool);
DSC_RT_INSTANTIATE_FLOAT_DOUBLE(INSTANTIATE)
