//===- VocabParallelCrossEntropy.cpp - cross-entropy over split logits ----===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The per-rank pieces of Megatron-LM's vocabulary-parallel cross-entropy:
// each rank holds columns [colBegin, colBegin + cols) of every row of the
// logits. The executor all-reduces the pieces between the calls (the max,
// then the sums), so no rank ever holds a whole row. Sums are in double.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/CpuKernels.h"

#include "KernelSupport.h"

#include <cmath>
#include <limits>

using namespace dsc::rt;

template <typename T>
void dsc::rt::vocabShardRowMax(const T *logits, int64_t rows, int64_t cols,
                               int64_t colBegin, int64_t classes, double *max) {
  const int64_t n = classColumns(cols, colBegin, classes);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T *x = logits + r * cols;
    // Columns that are all padding: -inf, which the group's max ignores.
    T mx = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : mx)
    for (int64_t c = 0; c < n; ++c)
      mx = x[c] > mx ? x[c] : mx;
    max[r] = double(mx);
  }
}

template <typename T>
void dsc::rt::vocabShardRowSums(const T *logits, const int32_t *targets,
                                const double *max, int64_t rows, int64_t cols,
                                int64_t colBegin, int64_t classes,
                                double *sumExp, double *targetLogit) {
  const int64_t n = classColumns(cols, colBegin, classes);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T *x = logits + r * cols;
    const T mx = T(max[r]);
    T sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < n; ++c)
      sum += detail::fastExp(x[c] - mx);
    sumExp[r] = double(sum);
    const int64_t t = int64_t(targets[r]) - colBegin;
    targetLogit[r] = (t >= 0 && t < n) ? double(x[t]) : 0.0;
  }
}

template <typename T>
void dsc::rt::vocabShardCrossEntropyBackward(const T *logits,
                                             const int32_t *targets,
                                             const double *lse, T dLoss,
                                             T *dLogits, int64_t rows,
                                             int64_t cols, int64_t colBegin,
                                             int64_t classes, bool accumulate) {
  detail::crossEntropyGradRows(logits, targets, lse, dLoss, dLogits, rows, cols,
                               colBegin, classes, accumulate);
}

#define INSTANTIATE(T)                                                         \
  template void dsc::rt::vocabShardRowMax<T>(const T *, int64_t, int64_t,      \
                                             int64_t, int64_t, double *);      \
  template void dsc::rt::vocabShardRowSums<T>(                                 \
      const T *, const int32_t *, const double *, int64_t, int64_t, int64_t,   \
      int64_t, double *, double *);                                            \
  template void dsc::rt::vocabShardCrossEntropyBackward<T>(                    \
      const T *, const int32_t *, const double *, T, T *, int64_t, int64_t,    \
      int64_t, int64_t, bool);
DSC_RT_INSTANTIATE_FLOAT_DOUBLE(INSTANTIATE)
