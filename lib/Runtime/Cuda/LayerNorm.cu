//===- LayerNorm.cu - LayerNorm over the last dim on CUDA -----------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// One warp per row (rows are short: 768 to 12288 columns) with a two-pass
// variance as on the CPU; parameter grads reduce over rows in two passes.
//
//===----------------------------------------------------------------------===//

#include "CudaSupport.cuh"

using namespace dsc::rt;
using namespace dsc::rt::cuda;
using namespace dsc::rt::cuda::detail;

namespace {
constexpr int kWarpsPerBlock = 8;
/// Rows per partial sum of dGamma/dBeta: enough blocks to fill an H100
/// at 16k rows, few enough partials that the second pass is trivial.
constexpr int64_t kRowChunk = 128;

/// Mean and rstd of one row by its warp (two passes; the second reads the
/// row from L1).
template <typename T>
__device__ void rowStats(const T *xr, int64_t cols, float eps, float &mean,
                         float &rstd) {
  const int lane = threadIdx.x & 31;
  float s = 0.0f;
  for (int64_t c = lane; c < cols; c += 32)
    s += toF(xr[c]);
  const float mu = warpSum(s) / float(cols);
  float sq = 0.0f;
  for (int64_t c = lane; c < cols; c += 32) {
    float d = toF(xr[c]) - mu;
    sq += d * d;
  }
  mean = mu;
  rstd = rsqrtf(warpSum(sq) / float(cols) + eps);
}

template <typename T>
__global__ void forwardKernel(const T *x, const T *gamma, const T *beta, T *y,
                              float *mean, float *rstd, int64_t rows,
                              int64_t cols, float eps) {
  const int64_t r = int64_t(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (r >= rows)
    return;
  const T *xr = x + r * cols;
  T *yr = y + r * cols;
  float mu, rs;
  rowStats(xr, cols, eps, mu, rs);
  for (int64_t c = threadIdx.x & 31; c < cols; c += 32)
    yr[c] = fromF<T>((toF(xr[c]) - mu) * rs * toF(gamma[c]) + toF(beta[c]));
  if ((threadIdx.x & 31) == 0) {
    if (mean)
      mean[r] = mu;
    if (rstd)
      rstd[r] = rs;
  }
}

template <typename T>
__global__ void backwardDxKernel(const T *x, const T *gamma, const float *mean,
                                 const float *rstd, const T *dY, T *dX,
                                 int64_t rows, int64_t cols, float eps,
                                 bool acc) {
  const int64_t r = int64_t(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (r >= rows)
    return;
  const int lane = threadIdx.x & 31;
  const T *xr = x + r * cols, *dyr = dY + r * cols;
  T *dxr = dX + r * cols;
  float mu, rs;
  if (mean && rstd) {
    mu = mean[r];
    rs = rstd[r];
  } else {
    rowStats(xr, cols, eps, mu, rs);
  }
  // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma.
  float sumG = 0.0f, sumGX = 0.0f;
  for (int64_t c = lane; c < cols; c += 32) {
    float g = toF(dyr[c]) * toF(gamma[c]);
    sumG += g;
    sumGX += g * (toF(xr[c]) - mu) * rs;
  }
  const float a = warpSum(sumG) / float(cols), b = warpSum(sumGX) / float(cols);
  for (int64_t c = lane; c < cols; c += 32) {
    float xhat = (toF(xr[c]) - mu) * rs;
    put(dxr + c, rs * (toF(dyr[c]) * toF(gamma[c]) - a - xhat * b), acc);
  }
}

/// Pass 1: block (32, 8) sums kRowChunk rows of 32 columns into one partial
/// per column, in a fixed order.
template <typename T>
__global__ void paramPartialKernel(const T *x, const float *mean,
                                   const float *rstd, const T *dY,
                                   float *partGamma, float *partBeta,
                                   int64_t rows, int64_t cols, float eps) {
  __shared__ float sg[8][33], sb[8][33];
  const int64_t c = int64_t(blockIdx.x) * 32 + threadIdx.x;
  const int64_t r0 = int64_t(blockIdx.y) * kRowChunk;
  const int64_t r1 = min(rows, r0 + kRowChunk);
  float g = 0.0f, b = 0.0f;
  if (c < cols)
    for (int64_t r = r0 + threadIdx.y; r < r1; r += 8) {
      const float dy = toF(dY[r * cols + c]);
      g += dy * (toF(x[r * cols + c]) - mean[r]) * rstd[r];
      b += dy;
    }
  sg[threadIdx.y][threadIdx.x] = g;
  sb[threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float tg = 0.0f, tb = 0.0f;
    for (int i = 0; i < 8; ++i) {
      tg += sg[i][threadIdx.x];
      tb += sb[i][threadIdx.x];
    }
    partGamma[int64_t(blockIdx.y) * cols + c] = tg;
    partBeta[int64_t(blockIdx.y) * cols + c] = tb;
  }
}

/// Pass 2: each column sums its chunk partials in chunk order.
template <typename T>
__global__ void paramFinalKernel(const float *partGamma, const float *partBeta,
                                 T *dGamma, T *dBeta, int64_t chunks,
                                 int64_t cols, bool accG, bool accB) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols)
    return;
  float g = 0.0f, b = 0.0f;
  for (int64_t i = 0; i < chunks; ++i) {
    g += partGamma[i * cols + c];
    b += partBeta[i * cols + c];
  }
  if (dGamma)
    put(dGamma + c, g, accG);
  if (dBeta)
    put(dBeta + c, b, accB);
}

/// Statistics for the parameter pass when the caller saved none.
template <typename T>
__global__ void statsKernel(const T *x, float *mean, float *rstd, int64_t rows,
                            int64_t cols, float eps) {
  const int64_t r = int64_t(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (r >= rows)
    return;
  float mu, rs;
  rowStats(x + r * cols, cols, eps, mu, rs);
  if ((threadIdx.x & 31) == 0) {
    mean[r] = mu;
    rstd[r] = rs;
  }
}

unsigned rowBlocks(int64_t rows) {
  return unsigned((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
}
} // namespace

template <typename T>
cudaError_t
dsc::rt::cuda::layerNormForward(const T *x, const T *gamma, const T *beta, T *y,
                                float *mean, float *rstd, int64_t rows,
                                int64_t cols, float eps, cudaStream_t stream) {
  if (rows == 0)
    return cudaSuccess;
  forwardKernel<<<rowBlocks(rows), 32 * kWarpsPerBlock, 0, stream>>>(
      x, gamma, beta, y, mean, rstd, rows, cols, eps);
  return cudaGetLastError();
}

template <typename T>
cudaError_t dsc::rt::cuda::layerNormBackward(
    const T *x, const T *gamma, const float *mean, const float *rstd,
    const T *dY, T *dX, T *dGamma, T *dBeta, int64_t rows, int64_t cols,
    float eps, AccumulateMask accumulate, cudaStream_t stream) {
  if (rows == 0)
    return cudaSuccess;
  if (dX) {
    backwardDxKernel<<<rowBlocks(rows), 32 * kWarpsPerBlock, 0, stream>>>(
        x, gamma, mean, rstd, dY, dX, rows, cols, eps, accumulate[0]);
    if (cudaError_t e = cudaGetLastError())
      return e;
  }
  if (!dGamma && !dBeta)
    return cudaSuccess;
  const int64_t chunks = (rows + kRowChunk - 1) / kRowChunk;
  const bool ownStats = !mean || !rstd;
  float *scratch = nullptr;
  size_t floats = size_t(2 * chunks * cols) + (ownStats ? size_t(2 * rows) : 0);
  if (cudaError_t e =
          cudaMallocAsync((void **)&scratch, floats * sizeof(float), stream))
    return e;
  float *pg = scratch, *pb = pg + chunks * cols;
  if (ownStats) {
    float *mu = pb + chunks * cols, *rs = mu + rows;
    statsKernel<<<rowBlocks(rows), 32 * kWarpsPerBlock, 0, stream>>>(
        x, mu, rs, rows, cols, eps);
    mean = mu;
    rstd = rs;
  }
  paramPartialKernel<<<dim3(unsigned((cols + 31) / 32), unsigned(chunks)),
                       dim3(32, 8), 0, stream>>>(x, mean, rstd, dY, pg, pb,
                                                 rows, cols, eps);
  paramFinalKernel<<<unsigned((cols + 255) / 256), 256, 0, stream>>>(
      pg, pb, dGamma, dBeta, chunks, cols, accumulate[1], accumulate[2]);
  cudaError_t launch = cudaGetLastError();
  cudaError_t freed = cudaFreeAsync(scratch, stream);
  return launch ? launch : freed;
}

#define INSTANTIATE(T)                                                         \
  template cudaError_t dsc::rt::cuda::layerNormForward<T>(                     \
      const T *, const T *, const T *, T *, float *, float *, int64_t,         \
      int64_t, float, cudaStream_t);                                           \
  template cudaError_t dsc::rt::cuda::layerNormBackward<T>(                    \
      const T *, const T *, const float *, const float *, const T *, T *, T *, \
      T *, int64_t, int64_t, float, AccumulateMask, cudaStream_t);
DSC_CUDA_INSTANTIATE_ALL(INSTANTIATE)
