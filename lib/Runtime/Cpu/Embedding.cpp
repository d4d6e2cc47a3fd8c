//===- Embedding.cpp - Embedding lookup and its scatter-add adjoint -------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Token and learned-position embeddings: row gathers forward; deterministic
// scatter-adds backward (each output row or column block has one owner).
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

template <typename T>
void dsc::rt::positionEmbeddingForward(const T *table, T *out, int64_t batch,
                                       int64_t seq, int64_t hidden) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < batch * seq; ++r)
    std::memcpy(out + r * hidden, table + (r % seq) * hidden,
                sizeof(T) * hidden);
}

template <typename T>
void dsc::rt::positionEmbeddingBackward(const T *dOut, T *dTable, int64_t batch,
                                        int64_t seq, int64_t positions,
                                        int64_t hidden, bool accumulate) {
  if (!accumulate && positions > seq)
    std::memset(dTable + seq * hidden, 0,
                sizeof(T) * (positions - seq) * hidden);
    // Each position's row is owned by one thread and summed in batch order.
#pragma omp parallel for schedule(static)
  for (int64_t s = 0; s < seq; ++s) {
    T *dst = dTable + s * hidden;
    if (!accumulate)
      std::memset(dst, 0, sizeof(T) * hidden);
    for (int64_t b = 0; b < batch; ++b) {
      const T *src = dOut + (b * seq + s) * hidden;
#pragma omp simd
      for (int64_t c = 0; c < hidden; ++c)
        dst[c] += src[c];
    }
  }
}

#define INSTANTIATE(T)                                                         \
  template int64_t dsc::rt::embeddingForward<T>(                               \
      const T *, const int32_t *, T *, int64_t, int64_t, int64_t);             \
  template void dsc::rt::embeddingBackward<T>(                                 \
      const T *, const int32_t *, T *, int64_t, int64_t, int64_t, bool);       \
  template void dsc::rt::positionEmbeddingForward<T>(const T *, T *, int64_t,  \
                                                     int64_t, int64_t);        \
  template void dsc::rt::positionEmbeddingBackward<T>(                         \
      const T *, T *, int64_t, int64_t, int64_t, int64_t, bool);
DSC_RT_INSTANTIATE_FLOAT_DOUBLE(INSTANTIATE)
