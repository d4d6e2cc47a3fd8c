//===- Layout.cu - Transpose, slice, concat and their adjoints on CUDA ----===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Copies with index arithmetic, one thread per destination element; shapes
// travel by value in a fixed-size struct (rank <= kMaxRank).
//
//===----------------------------------------------------------------------===//

#include "CudaSupport.cuh"

using namespace dsc::rt;
using namespace dsc::rt::cuda;
using namespace dsc::rt::cuda::detail;

namespace {
struct Dims {
  int64_t v[kMaxRank];
};

/// dst (row-major, dstShape) gathers src at sum(idx_i * stride_i).
template <typename T>
__global__ void gatherKernel(const T *src, T *dst, int64_t n, int rank,
                             Dims dstShape, Dims stride, Dims offset,
                             bool acc) {
  for (int64_t o = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; o < n;
       o += int64_t(gridDim.x) * blockDim.x) {
    int64_t rem = o, at = 0;
    for (int i = rank - 1; i >= 0; --i) {
      at += (rem % dstShape.v[i] + offset.v[i]) * stride.v[i];
      rem /= dstShape.v[i];
    }
    put(dst + o, toF(src[at]), acc);
  }
}

/// The slice backward: dIn at the box position (+)= dOut (dIn was zeroed
/// first unless accumulating; each element has one writer).
template <typename T>
__global__ void scatterBoxKernel(const T *dOut, T *dIn, int64_t n, int rank,
                                 Dims outShape, Dims inStride, Dims offset) {
  for (int64_t o = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; o < n;
       o += int64_t(gridDim.x) * blockDim.x) {
    int64_t rem = o, at = 0;
    for (int i = rank - 1; i >= 0; --i) {
      at += (rem % outShape.v[i] + offset.v[i]) * inStride.v[i];
      rem /= outShape.v[i];
    }
    dIn[at] = fromF<T>(toF(dIn[at]) + toF(dOut[o]));
  }
}

template <typename T> __global__ void zeroKernel(T *p, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    p[i] = fromF<T>(0.0f);
}

/// Block `part` [outer, d, inner] of a concat [outer, total, inner] at
/// column `off`; toPart copies out of the concat (the backward).
template <typename T>
__global__ void concatPartKernel(const T *src, T *dst, int64_t outer, int64_t d,
                                 int64_t total, int64_t off, int64_t inner,
                                 bool toPart, bool acc) {
  const int64_t n = outer * d * inner;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = e % inner, r = (e / inner) % d, o = e / (inner * d);
    const int64_t big = (o * total + off + r) * inner + j;
    if (toPart)
      put(dst + e, toF(src[big]), acc);
    else
      dst[big] = src[e];
  }
}

int64_t product(const int64_t *shape, int rank) {
  int64_t n = 1;
  for (int i = 0; i < rank; ++i)
    n *= shape[i];
  return n;
}

template <typename T>
cudaError_t permute(const T *src, T *dst, const int64_t *srcShape,
                    const int *perm, int rank, bool acc, cudaStream_t stream) {
  if (rank < 0 || rank > kMaxRank)
    return cudaErrorInvalidValue;
  Dims srcStride = {}, dstShape = {}, gather = {}, zero = {};
  int64_t st = 1;
  for (int i = rank - 1; i >= 0; --i) {
    srcStride.v[i] = st;
    st *= srcShape[i];
  }
  for (int i = 0; i < rank; ++i) {
    dstShape.v[i] = srcShape[perm[i]];
    gather.v[i] = srcStride.v[perm[i]];
  }
  if (st == 0)
    return cudaSuccess;
  gatherKernel<<<gridFor(st), 256, 0, stream>>>(src, dst, st, rank, dstShape,
                                                gather, zero, acc);
  return cudaGetLastError();
}
} // namespace

template <typename T>
cudaError_t dsc::rt::cuda::transposeForward(const T *in, T *out,
                                            const int64_t *inShape,
                                            const int *perm, int rank,
                                            cudaStream_t stream) {
  return permute(in, out, inShape, perm, rank, false, stream);
}

template <typename T>
cudaError_t
dsc::rt::cuda::transposeBackward(const T *dOut, T *dIn, const int64_t *inShape,
                                 const int *perm, int rank, bool accumulate,
                                 cudaStream_t stream) {
  if (rank < 0 || rank > kMaxRank)
    return cudaErrorInvalidValue;
  int64_t outShape[kMaxRank];
  int inv[kMaxRank];
  for (int i = 0; i < rank; ++i) {
    outShape[i] = inShape[perm[i]];
    inv[perm[i]] = i;
  }
  return permute(dOut, dIn, outShape, inv, rank, accumulate, stream);
}

template <typename T>
cudaError_t
dsc::rt::cuda::sliceForward(const T *in, T *out, const int64_t *inShape,
                            const int64_t *outShape, const int64_t *offsets,
                            int rank, cudaStream_t stream) {
  if (rank < 0 || rank > kMaxRank)
    return cudaErrorInvalidValue;
  Dims os = {}, stride = {}, off = {};
  int64_t st = 1;
  for (int i = rank - 1; i >= 0; --i) {
    stride.v[i] = st;
    st *= inShape[i];
    os.v[i] = outShape[i];
    off.v[i] = offsets[i];
  }
  const int64_t n = product(outShape, rank);
  if (n == 0)
    return cudaSuccess;
  gatherKernel<<<gridFor(n), 256, 0, stream>>>(in, out, n, rank, os, stride,
                                               off, false);
  return cudaGetLastError();
}

template <typename T>
cudaError_t
dsc::rt::cuda::sliceBackward(const T *dOut, T *dIn, const int64_t *inShape,
                             const int64_t *outShape, const int64_t *offsets,
                             int rank, bool accumulate, cudaStream_t stream) {
  if (rank < 0 || rank > kMaxRank)
    return cudaErrorInvalidValue;
  Dims os = {}, stride = {}, off = {};
  int64_t st = 1;
  for (int i = rank - 1; i >= 0; --i) {
    stride.v[i] = st;
    st *= inShape[i];
    os.v[i] = outShape[i];
    off.v[i] = offsets[i];
  }
  if (!accumulate && st > 0)
    zeroKernel<<<gridFor(st), 256, 0, stream>>>(dIn, st);
  const int64_t n = product(outShape, rank);
  if (n > 0)
    scatterBoxKernel<<<gridFor(n), 256, 0, stream>>>(dOut, dIn, n, rank, os,
                                                     stride, off);
  return cudaGetLastError();
}

template <typename T>
cudaError_t dsc::rt::cuda::concatForward(const T *const *ins,
                                         const int64_t *dims, int count, T *out,
                                         int64_t outer, int64_t inner,
                                         cudaStream_t stream) {
  int64_t total = 0;
  for (int i = 0; i < count; ++i)
    total += dims[i];
  int64_t off = 0;
  for (int i = 0; i < count; ++i) {
    const int64_t n = outer * dims[i] * inner;
    if (n > 0)
      concatPartKernel<<<gridFor(n), 256, 0, stream>>>(
          ins[i], out, outer, dims[i], total, off, inner, false, false);
    off += dims[i];
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t dsc::rt::cuda::concatBackward(const T *dOut, T *const *dIns,
                                          const int64_t *dims, int count,
                                          int64_t outer, int64_t inner,
                                          bool accumulate,
                                          cudaStream_t stream) {
  int64_t total = 0;
  for (int i = 0; i < count; ++i)
    total += dims[i];
  int64_t off = 0;
  for (int i = 0; i < count; ++i) {
    const int64_t n = outer * dims[i] * inner;
    if (dIns[i] && n > 0)
      concatPartKernel<<<gridFor(n), 256, 0, stream>>>(
          dOut, dIns[i], outer, dims[i], total, off, inner, true, accumulate);
    off += dims[i];
  }
  return cudaGetLastError();
}

#define INSTANTIATE(T)                                                         \
  template cudaError_t dsc::rt::cuda::transposeForward<T>(                     \
      const T *, T *, const int64_t *, const int *, int, cudaStream_t);        \
  template cudaError_t dsc::rt::cuda::transposeBackward<T>(                    \
      const T *, T *, const int64_t *, const int *, int, bool, cudaStream_t);  \
  template cudaError_t dsc::rt::cuda::sliceForward<T>(                         \
      const T *, T *, const int64_t *, const int64_t *, const int64_t *, int,  \
      cudaStream_t);                                                           \
  template cudaError_t dsc::rt::cuda::sliceBackward<T>(                        \
      const T *, T *, const int64_t *, const int64_t *, const int64_t *, int,  \
      bool, cudaStream_t);                                                     \
  template cudaError_t dsc::rt::cuda::concatForward<T>(                        \
      const T *const *, const int64_t *, int, T *, int64_t, int64_t,           \
      cudaStream_t);                                                           \
  template cudaError_t dsc::rt::cuda::concatBackward<T>(                       \
      const T *, T *const *, const int64_t *, int, int64_t, int64_t, bool,     \
      cudaStream_t);
DSC_CUDA_INSTANTIATE_ALL(INSTANTIATE)
