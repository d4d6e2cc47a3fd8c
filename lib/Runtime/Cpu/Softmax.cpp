//===- Softmax.cpp - Softmax over the last dim, forward and backward ------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Row-parallel, max-subtracted softmax. The backward needs only the output
// y, so the forward's input can be freed by the memory planner.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/CpuKernels.h"

#include "KernelSupport.h"

#include <cmath>

using namespace dsc::rt;
using detail::dispatchAccumulate;
using detail::put;

namespace dsc::rt::detail {
/// Softmax of one row of `n`, in place allowed (y == x). Shared with the
/// attention kernel, which calls it on the causal prefix of each row.
template <typename T> void softmaxRow(const T *x, T *y, int64_t n) {
  T mx = x[0];
#pragma omp simd reduction(max : mx)
  for (int64_t c = 1; c < n; ++c)
    mx = x[c] > mx ? x[c] : mx;
  T sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < n; ++c) {
    T e = fastExp(x[c] - mx);
    y[c] = e;
    sum += e;
  }
  T inv = T(1) / sum;
#pragma omp simd
  for (int64_t c = 0; c < n; ++c)
    y[c] *= inv;
}
template void softmaxRow<float>(const float *, float *, int64_t);
template void softmaxRow<double>(const double *, double *, int64_t);
} // namespace dsc::rt::detail

template <typename T>
void dsc::rt::softmaxForward(const T *x, T *y, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    detail::softmaxRow(x + r * cols, y + r * cols, cols);
}

template <typename T>
void dsc::rt::softmaxBackward(const T *y, const T *dY, T *dX, int64_t rows,
                              int64_t cols, bool accumulate) {
  dispatchAccumulate(accumulate, [&](auto acc) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const T *yr = y + r * cols, *dyr = dY + r * cols;
      T *dxr = dX + r * cols;
      T dot = 0;
#pragma omp simd reduction(+ : dot)
      for (int64_t c = 0; c < cols; ++c)
        dot += yr[c] * dyr[c];
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c)
        put<decltype(acc)::value>(dxr + c, yr[c] * (dyr[c] - dot));
    }
  });
}

#define INSTANTIATE(T)                                                         \
  template void dsc::rt::softmaxForward<T>(const T *, T *, int64_t, int64_t);  \
  template void dsc::rt::softmaxBackward<T>(const T *, const T *, T *,         \
                                            int64_t, int64_t, bool);
DSC_RT_INSTANTIATE_FLOAT_DOUBLE(INSTANTIATE)
