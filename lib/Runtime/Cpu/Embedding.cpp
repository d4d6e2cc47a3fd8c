//===- Embedding.cpp - Embedding lookup and its scatter-add adjoint -------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Token embedding: a row gather forward, a deterministic scatter-add backward
// (threads own column blocks, so repeated ids never race and order is fixed).
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/CpuKernels.h"

#include "KernelSupport.h"

#include <cstring>
#include <omp.h>

using namespace dsc::rt;

template <typename T>
int64_t dsc::rt::embeddingForward(const T *table, const int32_t *ids, T *out,
                                  int64_t n, int64_t vocab, int64_t hidden) {
  int64_t bad = 0;
#pragma omp parallel for schedule(static) reduction(+ : bad)
  for (int64_t i = 0; i < n; ++i) {
    int64_t id = ids[i];
    T *dst = out + i * hidden;
    if (id < 0 || id >= vocab) {
      std::memset(dst, 0, sizeof(T) * hidden);
      ++bad;
      continue;
    }
    std::memcpy(dst, table + id * hidden, sizeof(T) * hidden);
  }
  return bad;
}

template <typename T>
void dsc::rt::embeddingBackward(const T *dOut, const int32_t *ids, T *dTable,
                                int64_t n, int64_t vocab, int64_t hidden,
                                bool accumulate) {
#pragma omp parallel
  {
    int64_t c0, c1;
    detail::blockRange(hidden, omp_get_num_threads(), omp_get_thread_num(), c0,
                       c1);
    if (!accumulate)
      for (int64_t r = 0; r < vocab; ++r)
        std::memset(dTable + r * hidden + c0, 0, sizeof(T) * (c1 - c0));
    for (int64_t i = 0; i < n; ++i) {
      int64_t id = ids[i];
      if (id < 0 || id >= vocab)
        continue;
      T *dst = dTable + id * hidden;
      const T *src = dOut + i * hidden;
      for (int64_t c = c0; c < c1; ++c)
        dst[c] += src[c];
    }
  }
}

#define INSTANTIATE(T)                                                         \
  template int64_t dsc::rt::embeddingForward<T>(                               \
      const T *, const int32_t *, T *, int64_t, int64_t, int64_t);             \
  template void dsc::rt::embeddingBackward<T>(                                 \
      const T *, const int32_t *, T *, int64_t, int64_t, int64_t, bool);
DSC_RT_INSTANTIATE_FLOAT_DOUBLE(INSTANTIATE)
