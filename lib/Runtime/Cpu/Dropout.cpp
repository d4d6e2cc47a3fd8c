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

namespace {
/// splitmix64's finalizer: a bijection on 64 bits with full avalanche.
inline uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// Keep iff the top 24 bits, read as a fraction in [0, 1), are >= p; the
/// threshold is precomputed as an integer so the loop has no float compare.
inline uint64_t keepThreshold(float p) {
  double t = double(p) * double(1u << 24);
  return t <= 0 ? 0 : (t >= double(1u << 24) ? (1u << 24) : uint64_t(t + 0.5));
}

inline bool keepBit(uint64_t seedKey, uint64_t index, uint64_t threshold) {
  return (mix64(seedKey + index) >> 40) >= threshold;
}
} // namespace

bool dsc::rt::dropoutKeep(uint64_t seed, uint64_t index, float p) {
  return keepBit(mix64(seed), index, keepThreshold(p));
}

template <typename T>
void dsc::rt::dropoutForward(const T *x, T *y, int64_t n, float p,
                             uint64_t seed, uint64_t offset) {
  const uint64_t key = mix64(seed) + offset, thr = keepThreshold(p);
  const T inv = p < 1.0f ? T(1) / (T(1) - T(p)) : T(0);
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i)
    y[i] = keepBit(key, uint64_t(i), thr) ? x[i] * inv : T(0);
}

template <typename T>
void dsc::rt::dropoutBackward(const T *dY, T *dX, int64_t n, float p,
                              uint64_t seed, bool accumulate, uint64_t offset) {
  const uint64_t key = mix64(seed) + offset, thr = keepThreshold(p);
  const T inv = p < 1.0f ? T(1) / (T(1) - T(p)) : T(0);
  dispatchAccumulate(accumulate, [&](auto acc) {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i)
      put<decltype(acc)::value>(
          dX + i, keepBit(key, uint64_t(i), thr) ? dY[i] * inv : T(0));
  });
}

#define INSTANTIATE(T)                                                         \
  template void dsc::rt::dropoutForward<T>(const T *, T *, int64_t, float,     \
                                           uint64_t, uint64_t);                \
  template void dsc::rt::dropoutBackward<T>(const T *, T *, int64_t, float,    \
                                            uint64_t, bool, uint64_t);
DSC_RT_INSTANTIATE_FLOAT_DOUBLE(INSTANTIATE)
