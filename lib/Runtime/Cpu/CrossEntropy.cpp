//===- CrossEntropy.cpp - Softmax cross entropy, forward and backward -----===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The loss head: a stable logsumexp per row saved for the backward, which is
// then one pass over the logits (exp(x - lse) - onehot) with no max re-scan.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/CpuKernels.h"

#include "KernelSupport.h"

#include <cmath>
#include <limits>
#include <vector>

using namespace dsc::rt;

namespace {
/// log(sum(exp(x))) of one row, max-subtracted: two passes over the row.
template <typename T> T rowLogSumExp(const T *x, int64_t n) {
  T mx = x[0];
#pragma omp simd reduction(max : mx)
  for (int64_t c = 1; c < n; ++c)
    mx = x[c] > mx ? x[c] : mx;
  T sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < n; ++c)
    sum += detail::fastExp(x[c] - mx);
  return mx + std::log(sum);
}
} // namespace

template <typename T>
T dsc::rt::crossEntropyForward(const T *logits, const int32_t *targets, T *lse,
                               int64_t rows, int64_t vocab, int64_t classes) {
  const int64_t n = classColumns(vocab, 0, classes);
  std::vector<double> rowLoss(rows);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T *x = logits + r * vocab;
    const T l = rowLogSumExp(x, n);
    if (lse)
      lse[r] = l;
    int64_t t = targets[r];
    rowLoss[r] = (t < 0 || t >= n) ? std::numeric_limits<double>::quiet_NaN()
                                   : double(l - x[t]);
  }
  // Row order, in double: independent of the thread count.
  double total = 0;
  for (int64_t r = 0; r < rows; ++r)
    total += rowLoss[r];
  return T(total / double(rows));
}

template <typename T>
void dsc::rt::crossEntropyBackward(const T *logits, const int32_t *targets,
                                   const T *lse, T dLoss, T *dLogits,
                                   int64_t rows, int64_t vocab, bool accumulate,
                                   int64_t classes) {
  const int64_t n = classColumns(vocab, 0, classes);
  // Without a saved lse, recompute it (the forward's first two passes).
  std::vector<T> lseStore;
  if (!lse) {
    lseStore.resize(rows);
    T *l = lseStore.data();
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r)
      l[r] = rowLogSumExp(logits + r * vocab, n);
    lse = l;
  }
  detail::crossEntropyGradRows(logits, targets, lse, dLoss, dLogits, rows,
                               vocab, /*colBegin=*/0, classes, accumulate);
}

#define INSTANTIATE(T)                                                         \
  template T dsc::rt::crossEntropyForward<T>(const T *, const int32_t *, T *,  \
                                             int64_t, int64_t, int64_t);       \
  template void dsc::rt::crossEntropyBackward<T>(const T *, const int32_t *,   \
                                                 const T *, T, T *, int64_t,   \
                                                 int64_t, bool, int64_t);
DSC_RT_INSTANTIATE_FLOAT_DOUBLE(INSTANTIATE)
