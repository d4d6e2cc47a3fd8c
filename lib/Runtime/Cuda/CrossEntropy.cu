//===- CrossEntropy.cu - Cross entropy fused with softmax on CUDA ---------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// One block per row of logits (a row is a vocabulary: 50k columns); the mean
// loss is summed over rows in row order, in double, by a single block. Of a
// row's `vocab` columns the first `n` are classes; the rest (a padded
// vocabulary's rows) take no probability and get a zero gradient.
//
//===----------------------------------------------------------------------===//

#include "CudaSupport.cuh"

using namespace dsc::rt::cuda;
using namespace dsc::rt::cuda::detail;

namespace {
constexpr int kThreads = 512;

/// Logsumexp of one row by the block: max pass, then sum pass.
template <typename T>
__device__ float rowLse(const T *x, int64_t vocab, float *red) {
  float mx = -INFINITY;
  for (int64_t c = threadIdx.x; c < vocab; c += blockDim.x)
    mx = fmaxf(mx, toF(x[c]));
  mx = blockReduce<true>(mx, red);
  float s = 0.0f;
  for (int64_t c = threadIdx.x; c < vocab; c += blockDim.x)
    s += expf(toF(x[c]) - mx);
  return mx + logf(blockReduce<false>(s, red));
}

template <typename T>
__global__ void forwardKernel(const T *logits, const int32_t *targets,
                              float *lse, float *rowLoss, int64_t vocab,
                              int64_t n) {
  __shared__ float red[32];
  const int64_t r = blockIdx.x;
  const T *x = logits + r * vocab;
  const float l = rowLse(x, n, red);
  if (threadIdx.x == 0) {
    if (lse)
      lse[r] = l;
    const int64_t t = targets[r];
    rowLoss[r] = (t < 0 || t >= n) ? __int_as_float(0x7fc00000) : l - toF(x[t]);
  }
}

/// Mean of rowLoss in row order (double), as the CPU kernel sums it: one
/// thread, because the order is the contract and rows are few (16k).
__global__ void meanKernel(const float *rowLoss, float *loss, int64_t rows) {
  double total = 0;
  for (int64_t r = 0; r < rows; ++r)
    total += double(rowLoss[r]);
  *loss = float(total / double(rows));
}

template <typename T>
__global__ void backwardKernel(const T *logits, const int32_t *targets,
                               const float *lse, float g, T *dLogits,
                               int64_t vocab, int64_t n, bool acc) {
  __shared__ float red[32];
  const int64_t r = blockIdx.x;
  const T *x = logits + r * vocab;
  T *d = dLogits + r * vocab;
  const float l = lse ? lse[r] : rowLse(x, n, red);
  const int64_t t = targets[r];
  for (int64_t c = threadIdx.x; c < vocab; c += blockDim.x) {
    float v = c < n ? expf(toF(x[c]) - l) * g - (c == t ? g : 0.0f) : 0.0f;
    put(d + c, v, acc);
  }
}

/// Forward and backward: the row is read for the max, for the sum, and once
/// more to write the gradient (in place when dLogits == logits, which is
/// safe: each element is read before its own write, by the same thread).
template <typename T>
__global__ void fusedKernel(const T *logits, const int32_t *targets,
                            float *rowLoss, float g, T *dLogits, int64_t vocab,
                            int64_t n) {
  __shared__ float red[32];
  const int64_t r = blockIdx.x;
  const T *x = logits + r * vocab;
  T *d = dLogits + r * vocab;
  const float l = rowLse(x, n, red);
  const int64_t t = targets[r];
  if (threadIdx.x == 0)
    rowLoss[r] = (t < 0 || t >= n) ? __int_as_float(0x7fc00000) : l - toF(x[t]);
  // Every thread has read x[t] (thread 0) before anyone overwrites it.
  __syncthreads();
  for (int64_t c = threadIdx.x; c < vocab; c += blockDim.x)
    d[c] =
        fromF<T>(c < n ? expf(toF(x[c]) - l) * g - (c == t ? g : 0.0f) : 0.0f);
}
} // namespace

template <typename T>
cudaError_t dsc::rt::cuda::crossEntropyForward(
    const T *logits, const int32_t *targets, float *lse, float *loss,
    int64_t rows, int64_t vocab, int64_t classes, cudaStream_t stream) {
  if (rows == 0)
    return cudaSuccess;
  float *rowLoss = nullptr;
  if (cudaError_t e =
          cudaMallocAsync((void **)&rowLoss, rows * sizeof(float), stream))
    return e;
  forwardKernel<<<unsigned(rows), kThreads, 0, stream>>>(
      logits, targets, lse, rowLoss, vocab,
      dsc::rt::classColumns(vocab, 0, classes));
  meanKernel<<<1, 1, 0, stream>>>(rowLoss, loss, rows);
  cudaError_t launch = cudaGetLastError();
  cudaError_t freed = cudaFreeAsync(rowLoss, stream);
  return launch ? launch : freed;
}

template <typename T>
cudaError_t dsc::rt::cuda::crossEntropyBackward(
    const T *logits, const int32_t *targets, const float *lse, float dLoss,
    T *dLogits, int64_t rows, int64_t vocab, int64_t classes, bool accumulate,
    cudaStream_t stream) {
  if (rows == 0)
    return cudaSuccess;
  backwardKernel<<<unsigned(rows), kThreads, 0, stream>>>(
      logits, targets, lse, dLoss / float(rows), dLogits, vocab,
      dsc::rt::classColumns(vocab, 0, classes), accumulate);
  return cudaGetLastError();
}

template <typename T>
cudaError_t
dsc::rt::cuda::crossEntropyFused(const T *logits, const int32_t *targets,
                                 float *loss, float dLoss, T *dLogits,
                                 int64_t rows, int64_t vocab, int64_t classes,
                                 cudaStream_t stream) {
  if (rows == 0)
    return cudaSuccess;
  float *rowLoss = nullptr;
  if (cudaError_t e =
          cudaMallocAsync((void **)&rowLoss, rows * sizeof(float), stream))
    return e;
  fusedKernel<<<unsigned(rows), kThreads, 0, stream>>>(
      logits, targets, rowLoss, dLoss / float(rows), dLogits, vocab,
      dsc::rt::classColumns(vocab, 0, classes));
  meanKernel<<<1, 1, 0, stream>>>(rowLoss, loss, rows);
  cudaError_t launch = cudaGetLastError();
  cudaError_t freed = cudaFreeAsync(rowLoss, stream);
  return launch ? launch : freed;
}

#define INSTANTIATE(T)                                                         \
  template cudaError_t dsc::rt::cuda::crossEntropyForward<T>(                  \
      const T *, const int32_t *, float *, float *, int64_t, int64_t, int64_t, \
      cudaStream_t);                                                           \
  template cudaError_t dsc::rt::cuda::crossEntropyBackward<T>(                 \
      const T *, const int32_t *, const float *, float, T *, int64_t, int64_t, \
      int64_t, bool, cudaStream_t);                                            \
  template cudaError_t dsc::rt::cuda::crossEntropyFused<T>(                    \
      const T *, const int32_t *, float *, float, T *, int64_t, int64_t,       \
      int64_t, cudaStream_t);
DSC_CUDA_INSTANTIATE_ALL(INSTANTIATE)
