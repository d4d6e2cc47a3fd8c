//===- Softmax.cu - Softmax over the last dim on CUDA ---------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// One block per row with block reductions: rows range from a few columns to
// a vocabulary, and a block covers both with a fixed reduction order.
//
//===----------------------------------------------------------------------===//

#include "CudaSupport.cuh"

using namespace dsc::rt::cuda;
using namespace dsc::rt::cuda::detail;

namespace {
constexpr int kThreads = 256;

template <typename T>
__global__ void forwardKernel(const T *x, T *y, int64_t cols) {
  __shared__ float red[32];
  const T *xr = x + int64_t(blockIdx.x) * cols;
  T *yr = y + int64_t(blockIdx.x) * cols;
  float mx = -INFINITY;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    mx = fmaxf(mx, toF(xr[c]));
  mx = blockReduce<true>(mx, red);
  float s = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    s += __expf(toF(xr[c]) - mx);
  const float inv = 1.0f / blockReduce<false>(s, red);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    yr[c] = fromF<T>(__expf(toF(xr[c]) - mx) * inv);
}

template <typename T>
__global__ void backwardKernel(const T *y, const T *dY, T *dX, int64_t cols,
                               bool acc) {
  __shared__ float red[32];
  const int64_t off = int64_t(blockIdx.x) * cols;
  float dot = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    dot += toF(y[off + c]) * toF(dY[off + c]);
  dot = blockReduce<false>(dot, red);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    put(dX + off + c, toF(y[off + c]) * (toF(dY[off + c]) - dot), acc);
}
} // namespace

template <typename T>
cudaError_t dsc::rt::cuda::softmaxForward(const T *x, T *y, int64_t rows,
                                          int64_t cols, cudaStream_t stream) {
  if (rows == 0)
    return cudaSuccess;
  forwardKernel<<<unsigned(rows), kThreads, 0, stream>>>(x, y, cols);
  return cudaGetLastError();
}

template <typename T>
cudaError_t dsc::rt::cuda::softmaxBackward(const T *y, const T *dY, T *dX,
                                           int64_t rows, int64_t cols,
                                           bool accumulate,
                                           cudaStream_t stream) {
  if (rows == 0)
    return cudaSuccess;
  backwardKernel<<<unsigned(rows), kThreads, 0, stream>>>(y, dY, dX, cols,
                                                          accumulate);
  return cudaGetLastError();
}

#define INSTANTIATE(T)                                                         \
  template cudaError_t dsc::rt::cuda::softmaxForward<T>(                       \
      const T *, T *, int64_t, int64_t, cudaStream_t);                         \
  template cudaError_t dsc::rt::cuda::softmaxBackward<T>(                      \
      const T *, const T *, T *, int64_t, int64_t, bool, cudaStream_t);
DSC_CUDA_INSTANTIATE_ALL(INSTANTIATE)
