//===- Layout.cpp - transpose, slice, concat and their adjoints -----------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Data-movement ops. Each adjoint is the inverse movement (inverse
// permutation, scatter into the slice, split of the concat).
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/CpuKernels.h"

#include "KernelSupport.h"

#include <cstring>

using namespace dsc::rt;
using detail::dispatchAccumulate;
using detail::put;

namespace {
/// dst = permute(src): dst.shape[i] = srcShape[perm[i]]. Parallel over the
/// leading output dims; the innermost output dim is a strided gather from
/// src (contiguous when the last dim is not permuted).
template <bool Acc, typename T>
void permuteCopy(const T *src, T *dst, const int64_t *srcShape, const int *perm,
                 int rank) {
  if (rank == 0) {
    put<Acc>(dst, *src);
    return;
  }
  int64_t srcStride[kMaxRank] = {}, dstShape[kMaxRank] = {},
          gatherStride[kMaxRank] = {};
  int64_t st = 1;
  for (int i = rank - 1; i >= 0; --i) {
    srcStride[i] = st;
    st *= srcShape[i];
  }
  for (int i = 0; i < rank; ++i) {
    dstShape[i] = srcShape[perm[i]];
    gatherStride[i] = srcStride[perm[i]];
  }
  const int64_t inner = dstShape[rank - 1],
                innerStride = gatherStride[rank - 1];
  const int64_t outer = st / (inner ? inner : 1);
  if (st == 0)
    return;
#pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < outer; ++o) {
    int64_t rem = o, base = 0;
    for (int i = rank - 2; i >= 0; --i) {
      base += (rem % dstShape[i]) * gatherStride[i];
      rem /= dstShape[i];
    }
    T *d = dst + o * inner;
    const T *sp = src + base;
    if (innerStride == 1) {
#pragma omp simd
      for (int64_t j = 0; j < inner; ++j)
        put<Acc>(d + j, sp[j]);
    } else {
      for (int64_t j = 0; j < inner; ++j)
        put<Acc>(d + j, sp[j * innerStride]);
    }
  }
}
} // namespace

template <typename T>
void dsc::rt::transposeForward(const T *in, T *out, const int64_t *inShape,
                               const int *perm, int rank) {
  permuteCopy<false>(in, out, inShape, perm, rank);
}

template <typename T>
void dsc::rt::transposeBackward(const T *dOut, T *dIn, const int64_t *inShape,
                                const int *perm, int rank, bool accumulate) {
  int64_t outShape[kMaxRank];
  int inv[kMaxRank];
  for (int i = 0; i < rank; ++i) {
    outShape[i] = inShape[perm[i]];
    inv[perm[i]] = i;
  }
  dispatchAccumulate(accumulate, [&](auto acc) {
    permuteCopy<decltype(acc)::value>(dOut, dIn, outShape, inv, rank);
  });
}

template <typename T>
void dsc::rt::sliceForward(const T *in, T *out, int64_t outer, int64_t dimSize,
                           int64_t inner, int64_t start, int64_t len) {
#pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(out + o * len * inner, in + (o * dimSize + start) * inner,
                sizeof(T) * len * inner);
}

template <typename T>
void dsc::rt::sliceBackward(const T *dOut, T *dIn, int64_t outer,
                            int64_t dimSize, int64_t inner, int64_t start,
                            int64_t len, bool accumulate) {
#pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < outer; ++o) {
    T *d = dIn + o * dimSize * inner;
    const T *g = dOut + o * len * inner;
    if (accumulate) {
      T *ds = d + start * inner;
#pragma omp simd
      for (int64_t j = 0; j < len * inner; ++j)
        ds[j] += g[j];
      continue;
    }
    std::memset(d, 0, sizeof(T) * start * inner);
    std::memcpy(d + start * inner, g, sizeof(T) * len * inner);
    std::memset(d + (start + len) * inner, 0,
                sizeof(T) * (dimSize - start - len) * inner);
  }
}

template <typename T>
void dsc::rt::concatForward(const T *const *ins, const int64_t *dims, int count,
                            T *out, int64_t outer, int64_t inner) {
  int64_t total = 0;
  for (int i = 0; i < count; ++i)
    total += dims[i];
#pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < outer; ++o) {
    T *d = out + o * total * inner;
    for (int i = 0; i < count; ++i) {
      std::memcpy(d, ins[i] + o * dims[i] * inner, sizeof(T) * dims[i] * inner);
      d += dims[i] * inner;
    }
  }
}

template <typename T>
void dsc::rt::concatBackward(const T *dOut, T *const *dIns, const int64_t *dims,
                             int count, int64_t outer, int64_t inner,
                             bool accumulate) {
  int64_t total = 0;
  for (int i = 0; i < count; ++i)
    total += dims[i];
  dispatchAccumulate(accumulate, [&](auto acc) {
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < outer; ++o) {
      const T *g = dOut + o * total * inner;
      for (int i = 0; i < count; ++i) {
        const int64_t n = dims[i] * inner;
        if (dIns[i]) {
          T *d = dIns[i] + o * n;
#pragma omp simd
          for (int64_t j = 0; j < n; ++j)
            put<decltype(acc)::value>(d + j, g[j]);
        }
        g += n;
      }
    }
  });
}

#define INSTANTIATE(T)                                                         \
  template void dsc::rt::transposeForward<T>(const T *, T *, const int64_t *,  \
                                             const int *, int);                \
  template void dsc::rt::transposeBackward<T>(const T *, T *, const int64_t *, \
                                              const int *, int, bool);         \
  template void dsc::rt::sliceForward<T>(const T *, T *, int64_t, int64_t,     \
                                         int64_t, int64_t, int64_t);           \
  template void dsc::rt::sliceBackward<T>(const T *, T *, int64_t, int64_t,    \
                                          int64_t, int64_t, int64_t, bool);    \
  template void dsc::rt::concatForward<T>(const T *const *, const int64_t *,   \
                                          int, T *, int64_t, int64_t);         \
  template void dsc::rt::concatBackward<T>(                                    \
      const T *, T *const *, const int64_t *, int, int64_t, int64_t, bool);
DSC_RT_INSTANTIATE_FLOAT_DOUBLE(INSTANTIATE)
