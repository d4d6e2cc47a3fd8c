//===- RmsNorm.cu - RMS norm over the last dim on CUDA --------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// As LayerNorm.cu: one warp per row, fp32 arithmetic; dgamma reduces over
// rows in two fixed-order passes (row chunks, then chunk partials), so no
// atomics. The formulas are the CPU kernel's (lib/Runtime/Cpu/RmsNorm.cpp).
//
//===----------------------------------------------------------------------===//

#include "CudaSupport.cuh"

using namespace dsc::rt;
using namespace dsc::rt::cuda;
using namespace dsc::rt::cuda::detail;

namespace {
constexpr int kWarpsPerBlock = 8;
constexpr int64_t kRowChunk = 128;

/// The row's mean square, by its warp.
template <typename T> __device__ float meanSquare(const T *xr, int64_t cols) {
  float sq = 0.0f;
  for (int64_t c = threadIdx.x & 31; c < cols; c += 32) {
    const float v = toF(xr[c]);
    sq += v * v;
  }
  return warpSum(sq) / float(cols);
}

__device__ float rowScale(float ms, float eps, bool epsOutside) {
  return epsOutside ? 1.0f / (sqrtf(ms) + eps) : rsqrtf(ms + eps);
}

template <typename T>
__global__ void forwardKernel(const T *x, const T *gamma, T *y, int64_t rows,
                              int64_t cols, float eps, bool epsOutside) {
  const int64_t r = int64_t(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (r >= rows)
    return;
  const T *xr = x + r * cols;
  T *yr = y + r * cols;
  const float s = rowScale(meanSquare(xr, cols), eps, epsOutside);
  for (int64_t c = threadIdx.x & 31; c < cols; c += 32)
    yr[c] = fromF<T>(toF(xr[c]) * s * toF(gamma[c]));
}

template <typename T>
__global__ void backwardDxKernel(const T *x, const T *gamma, const T *dY, T *dX,
                                 float *scales, int64_t rows, int64_t cols,
                                 float eps, bool epsOutside, bool acc) {
  const int64_t r = int64_t(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (r >= rows)
    return;
  const int lane = threadIdx.x & 31;
  const T *xr = x + r * cols, *dyr = dY + r * cols;
  const float ms = meanSquare(xr, cols);
  const float s = rowScale(ms, eps, epsOutside);
  if (scales && lane == 0)
    scales[r] = s;
  if (!dX)
    return;
  T *dxr = dX + r * cols;
  float dot = 0.0f;
  for (int64_t c = lane; c < cols; c += 32)
    dot += toF(gamma[c]) * toF(dyr[c]) * toF(xr[c]);
  dot = warpSum(dot);
  // d scale / d ms: -s^3/2, or -s^2/(2 sqrt(ms)) with eps outside (0 for
  // an all-zero row, whose x terms vanish anyway).
  const float slope = epsOutside
                          ? (ms > 0.0f ? -0.5f * s * s / sqrtf(ms) : 0.0f)
                          : -0.5f * s * s * s;
  const float k = slope * 2.0f / float(cols) * dot;
  for (int64_t c = lane; c < cols; c += 32)
    put(dxr + c, s * toF(gamma[c]) * toF(dyr[c]) + toF(xr[c]) * k, acc);
}

template <typename T>
__global__ void gammaPartialKernel(const T *x, const float *scales, const T *dY,
                                   float *part, int64_t rows, int64_t cols) {
  __shared__ float sg[8][33];
  const int64_t c = int64_t(blockIdx.x) * 32 + threadIdx.x;
  const int64_t r0 = int64_t(blockIdx.y) * kRowChunk;
  const int64_t r1 = min(rows, r0 + kRowChunk);
  float g = 0.0f;
  if (c < cols)
    for (int64_t r = r0 + threadIdx.y; r < r1; r += 8)
      g += toF(dY[r * cols + c]) * toF(x[r * cols + c]) * scales[r];
  sg[threadIdx.y][threadIdx.x] = g;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float t = 0.0f;
    for (int i = 0; i < 8; ++i)
      t += sg[i][threadIdx.x];
    part[int64_t(blockIdx.y) * cols + c] = t;
  }
}

template <typename T>
__global__ void gammaFinalKernel(const float *part, T *dGamma, int64_t chunks,
                                 int64_t cols, bool acc) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols)
    return;
  float g = 0.0f;
  for (int64_t i = 0; i < chunks; ++i)
    g += part[i * cols + c];
  put(dGamma + c, g, acc);
}

unsigned rowBlocks(int64_t rows) {
  return unsigned((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
}
} // namespace

template <typename T>
cudaError_t dsc::rt::cuda::rmsNormForward(const T *x, const T *gamma, T *y,
                                          int64_t rows, int64_t cols, float eps,
                                          bool epsOutside,
                                          cudaStream_t stream) {
  if (rows == 0)
    return cudaSuccess;
  forwardKernel<<<rowBlocks(rows), 32 * kWarpsPerBlock, 0, stream>>>(
      x, gamma, y, rows, cols, eps, epsOutside);
  return cudaGetLastError();
}

template <typename T>
cudaError_t
dsc::rt::cuda::rmsNormBackward(const T *x, const T *gamma, const T *dY, T *dX,
                               T *dGamma, int64_t rows, int64_t cols, float eps,
                               bool epsOutside, AccumulateMask accumulate,
                               cudaStream_t stream) {
  if (rows == 0)
    return cudaSuccess;
  const int64_t chunks = (rows + kRowChunk - 1) / kRowChunk;
  float *scratch = nullptr;
  if (dGamma)
    if (cudaError_t e = cudaMallocAsync(
            (void **)&scratch, size_t(rows + chunks * cols) * sizeof(float),
            stream))
      return e;
  float *scales = scratch, *part = scratch ? scratch + rows : nullptr;
  backwardDxKernel<<<rowBlocks(rows), 32 * kWarpsPerBlock, 0, stream>>>(
      x, gamma, dY, dX, scales, rows, cols, eps, epsOutside, accumulate[0]);
  if (!dGamma)
    return cudaGetLastError();
  gammaPartialKernel<<<dim3(unsigned((cols + 31) / 32), unsigned(chunks)),
                       dim3(32, 8), 0, stream>>>(x, scales, dY, part, rows,
                                                 cols);
  gammaFinalKernel<<<unsigned((cols + 255) / 256), 256, 0, stream>>>(
      part, dGamma, chunks, cols, accumulate[1]);
  cudaError_t launch = cudaGetLastError();
  cudaError_t freed = cudaFreeAsync(scratch, stream);
  return launch ? launch : freed;
}

#define INSTANTIATE(T)                                                         \
  template cudaError_t dsc::rt::cuda::rmsNormForward<T>(                       \
      const T *, const T *, T *, int64_t, int64_t, float, bool, cudaStream_t); \
  template cudaError_t dsc::rt::cuda::rmsNormBackward<T>(                      \
      const T *, const T *, const T *, T *, T *, int64_t, int64_t, float,      \
      bool, AccumulateMask, cudaStream_t);
DSC_CUDA_INSTANTIATE_ALL(INSTANTIATE)
