//===- Dropout.cpp - Dropout with a counter-based mask --------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The mask bit of element i is a hash of (seed, i): nothing is stored, the
// backward recomputes it, and any thread or rank split reproduces it.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/CpuKernels.h"

#include "KernelSupport.h"

using namespace dsc::rt;
using detail::dispatchAccumulate;
using detail::put;

using detail::dropoutKeepBit;
using detail::dropoutKey;
using detail::dropoutThreshold;

bool dsc::rt::dropoutKeep(uint64_t seed, uint64_t index, float p) {
  return dropoutKeepBit(dropoutKey(seed), index, dropoutThreshold(p));
}

template <typename T>
void dsc::rt::dropoutForward(const T *x, T *y, int64_t n, float p,
                             uint64_t seed, uint64_t offset) {
  const uint64_t key = dropoutKey(seed) + offset, thr = dropoutThreshold(p);
  const T inv = p < 1.0f ? T(1) / (T(1) - T(p)) : T(0);
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i)
    y[i] = dropoutKeepBit(key, uint64_t(i), thr) ? x[i] * inv : T(0);
}

template <typename T>
void dsc::rt::dropoutBackward(const T *dY, T *dX, int64_t n, float p,
                              uint64_t seed, bool accumulate, uint64_t offset) {
  const uint64_t key = dropoutKey(seed) + offset, thr = dropoutThreshold(p);
  const T inv = p < 1.0f ? T(1) / (T(1) - T(p)) : T(0);
  dispatchAccumulate(accumulate, [&](auto acc) {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i)
      put<decltype(acc)::value>(
          dX + i, dropoutKeepBit(key, uint64_t(i), thr) ? dY[i] * inv : T(0));
  });
}

#define INSTANTIATE(T)                                                         \
  template void dsc::rt::dropoutForward<T>(const T *, T *, int64_t, float,     \
                                           uint64_t, uint64_t);                \
  template void dsc::rt::dropoutBackward<T>(const T *, T *, int64_t, float,    \
                                            uint64_t, bool, uint64_t);
DSC_RT_INSTANTIATE_FLOAT_DOUBLE(INSTANTIATE)
