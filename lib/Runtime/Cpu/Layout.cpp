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

namespace {
/// Calls f(o, base) for each innermost row o of the box of outShape at
/// `offsets` inside inShape; base is the row's first element in the input.
/// Parallel over rows; each row has one owner.
template <typename F>
void forEachBoxRow(const int64_t *inShape, const int64_t *outShape,
                   const int64_t *offsets, int rank, const F &f) {
  int64_t inStride[kMaxRank] = {};
  int64_t st = 1, outer = 1;
  for (int i = rank - 1; i >= 0; --i) {
    inStride[i] = st;
    st *= inShape[i];
  }
  for (int i = 0; i < rank - 1; ++i)
    outer *= outShape[i];
  if (outer == 0 || outShape[rank - 1] == 0)
    return;
#pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < outer; ++o) {
    int64_t rem = o, base = offsets[rank - 1];
    for (int i = rank - 2; i >= 0; --i) {
      base += (rem % outShape[i] + offsets[i]) * inStride[i];
      rem /= outShape[i];
    }
    f(o, base);
  }
}
} // namespace

template <typename T>
void dsc::rt::sliceForward(const T *in, T *out, const int64_t *inShape,
                           const int64_t *outShape, const int64_t *offsets,
                           int rank) {
  if (rank == 0) {
    *out = *in;
    return;
  }
  const int64_t inner = outShape[rank - 1];
  forEachBoxRow(inShape, outShape, offsets, rank, [&](int64_t o, int64_t b) {
    std::memcpy(out + o * inner, in + b, sizeof(T) * inner);
  });
}

template <typename T>
void dsc::rt::sliceBackward(const T *dOut, T *dIn, const int64_t *inShape,
                            const int64_t *outShape, const int64_t *offsets,
                            int rank, bool accumulate) {
  if (rank == 0) {
    *dIn = accumulate ? *dIn + *dOut : *dOut;
    return;
  }
  const int64_t inner = outShape[rank - 1];
  if (!accumulate) {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i)
      n *= inShape[i];
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i)
      dIn[i] = T(0);
  }
  forEachBoxRow(inShape, outShape, offsets, rank, [&](int64_t o, int64_t b) {
    T *d = dIn + b;
    const T *g = dOut + o * inner;
#pragma omp simd
    for (int64_t j = 0; j < inner; ++j)
      d[j] += g[j];
  });
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
  template void dsc::rt::sliceForward<T>(                                      \
      const T *, T *, const int64_t *, const int64_t *, const int64_t *, int); \
  template void dsc::rt::sliceBackward<T>(const T *, T *, const int64_t *,     \
                                          const int64_t *, const int64_t *,    \
                                          int, bool);                          \
  template void dsc::rt::concatForward<T>(const T *const *, const int64_t *,   \
                                          int, T *, int64_t, int64_t);         \
  template void dsc::rt::concatBackward<T>(                                    \
      const T *, T *const *, const int64_t *, int, int64_t, int64_t, bool);
DSC_RT_INSTANTIATE_FLOAT_DOUBLE(INSTANTIATE)
