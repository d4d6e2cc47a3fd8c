//===- Optimizer.cu - AdamW, grad norm and clipping on CUDA ---------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Fused AdamW over flat fp32 master buffers (mixed precision: low-precision
// grads in, a low-precision weight copy out) and a fixed-order grad norm.
//
//===----------------------------------------------------------------------===//

#include "CudaSupport.cuh"

#include <cmath>
#include <cstring>
#include <vector>

using namespace dsc::rt;
using namespace dsc::rt::cuda;
using namespace dsc::rt::cuda::detail;

namespace {
/// The CPU kernel's block: partial sums over the same element ranges.
constexpr int64_t kNormBlock = 4096;
constexpr int kThreads = 256;

struct AdamWConsts {
  float decayMul, b1, b2, c1, c2, stepSize, invSqrtBc2, eps, gradScale;
};

template <typename G, typename Low>
__global__ void adamwKernel(float *param, const G *grad, float *m, float *v,
                            int64_t n, AdamWConsts k, Low *lowp) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    // torch.optim.AdamW's order, as in the CPU kernel.
    const float g = toF(grad[i]) * k.gradScale;
    const float p = param[i] * k.decayMul;
    const float mi = k.b1 * m[i] + k.c1 * g;
    const float vi = k.b2 * v[i] + k.c2 * g * g;
    m[i] = mi;
    v[i] = vi;
    const float np = p - k.stepSize * mi / (sqrtf(vi) * k.invSqrtBc2 + k.eps);
    param[i] = np;
    if (lowp)
      lowp[i] = fromF<Low>(np);
  }
}

template <typename G, typename Low>
__global__ void sgdKernel(float *param, const G *grad, float *buf, int64_t n,
                          float lr, float mu, float wd, bool nesterov,
                          float gradScale, Low *lowp) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    // The CPU kernel's order: g += wd p; buf = mu buf + g; p -= lr * step.
    const float g = toF(grad[i]) * gradScale + wd * param[i];
    const float b = mu * buf[i] + g;
    buf[i] = b;
    const float np = param[i] - lr * (nesterov ? g + mu * b : b);
    param[i] = np;
    if (lowp)
      lowp[i] = fromF<Low>(np);
  }
}

__device__ double warpSumD(double v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/// Fixed-shape block sum in double: every thread gets the result.
__device__ double blockSumD(double v) {
  __shared__ double red[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warpSumD(v);
  __syncthreads();
  if (lane == 0)
    red[warp] = v;
  __syncthreads();
  double r = lane < int(blockDim.x >> 5) ? red[lane] : 0.0;
  return warpSumD(r);
}

/// *partial = the block's sum of squares of x[base, end), in double.
template <typename T>
__device__ void squaresOfRange(const T *x, int64_t base, int64_t end,
                               double *partial) {
  double s = 0;
  for (int64_t i = base + threadIdx.x; i < end; i += blockDim.x) {
    double d = double(toF(x[i]));
    s += d * d;
  }
  s = blockSumD(s);
  if (threadIdx.x == 0)
    *partial = s;
}

/// partial[b] = sum of squares of elements [b*4096, (b+1)*4096) of one
/// buffer, in double.
template <typename T>
__global__ void squaresKernel(const T *x, int64_t n, double *partial) {
  const int64_t base = int64_t(blockIdx.x) * kNormBlock;
  squaresOfRange(x, base, min(n, base + kNormBlock), partial + blockIdx.x);
}

/// The clip factor clipScale(sqrt(*sumSq) * normScale, maxNorm) as a float
/// in `c`, computed per thread from the device scalar so the host never
/// waits for the norm; false when nothing is to scale (a norm within
/// maxNorm, or not finite: the loss scaler's overflow, which skips the
/// step).
__device__ __forceinline__ bool
clipFactor(const double *sumSq, double normScale, double maxNorm, float &c) {
  const double norm = sqrt(*sumSq) * normScale;
  if (!isfinite(norm))
    return false;
  const double coef = maxNorm / (norm + 1e-6);
  c = float(coef);
  return coef < 1.0;
}

/// Several buffers as one launch: tensor t's blocks of kNormBlock elements
/// are blocks firstBlock[t] .. firstBlock[t + 1] - 1 of the grid (a
/// multi-tensor apply, as apex's): one launch instead of one a tensor, the
/// launches' overhead being most of a small tensor's time.
template <typename T> struct BlockTable {
  T *const *ptrs;
  const int64_t *sizes;
  const int64_t *firstBlock; // count + 1 entries
  int count;

  /// The tensor holding grid block b: the last t with firstBlock[t] <= b
  /// (an empty tensor's first block is the next one's).
  __device__ __forceinline__ int tensorOf(int64_t b) const {
    int lo = 0, hi = count - 1;
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (firstBlock[mid] <= b)
        lo = mid;
      else
        hi = mid - 1;
    }
    return lo;
  }
};

/// squaresKernel over every buffer of `table` in one launch: partial[b] is
/// the same block's sum as the per-buffer launches write.
template <typename T>
__global__ void squaresMultiKernel(BlockTable<const T> table, double *partial) {
  const int t = table.tensorOf(blockIdx.x);
  const int64_t base = (int64_t(blockIdx.x) - table.firstBlock[t]) * kNormBlock;
  squaresOfRange(table.ptrs[t], base, min(table.sizes[t], base + kNormBlock),
                 partial + blockIdx.x);
}

/// clipKernel over every buffer of `table` in one launch.
template <typename T>
__global__ void clipMultiKernel(BlockTable<T> table, const double *sumSq,
                                double normScale, double maxNorm) {
  float c;
  if (!clipFactor(sumSq, normScale, maxNorm, c))
    return;
  const int t = table.tensorOf(blockIdx.x);
  const int64_t base = (int64_t(blockIdx.x) - table.firstBlock[t]) * kNormBlock;
  const int64_t end = min(table.sizes[t], base + kNormBlock);
  T *x = table.ptrs[t];
  for (int64_t i = base + threadIdx.x; i < end; i += blockDim.x)
    x[i] = fromF<T>(toF(x[i]) * c);
}

/// The device copy of a BlockTable of `count` host buffers, in one
/// stream-ordered allocation the caller frees with cudaFreeAsync (the host
/// arrays may go once this returns: a pageable copy is staged before the
/// call returns). Sets `blocks` to the grid's size.
template <typename T>
cudaError_t uploadTable(T *const *hostBuffers, const int64_t *hostSizes,
                        int count, cudaStream_t stream, BlockTable<T> &table,
                        void *&storage, int64_t &blocks) {
  std::vector<int64_t> words(size_t(3 * count + 1));
  int64_t *sizes = words.data() + count, *first = sizes + count;
  blocks = 0;
  for (int b = 0; b < count; ++b) {
    std::memcpy(&words[size_t(b)], &hostBuffers[b], sizeof(int64_t));
    sizes[b] = hostSizes[b];
    first[b] = blocks;
    blocks += (hostSizes[b] + kNormBlock - 1) / kNormBlock;
  }
  first[count] = blocks;
  storage = nullptr;
  if (cudaError_t e =
          cudaMallocAsync(&storage, words.size() * sizeof(int64_t), stream))
    return e;
  if (cudaError_t e =
          cudaMemcpyAsync(storage, words.data(), words.size() * sizeof(int64_t),
                          cudaMemcpyHostToDevice, stream))
    return e;
  auto *dev = static_cast<int64_t *>(storage);
  table.ptrs = reinterpret_cast<T *const *>(dev);
  table.sizes = dev + count;
  table.firstBlock = dev + 2 * count;
  table.count = count;
  return cudaSuccess;
}

/// One block adds all partials (strided per thread, then the tree): the
/// order depends only on the count.
__global__ void sumPartialsKernel(const double *partial, int64_t count,
                                  double *out) {
  double s = 0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x)
    s += partial[i];
  s = blockSumD(s);
  if (threadIdx.x == 0)
    *out = s;
}

/// x *= clipFactor(...), one buffer.
template <typename T>
__global__ void clipKernel(T *x, int64_t n, const double *sumSq,
                           double normScale, double maxNorm) {
  float c;
  if (!clipFactor(sumSq, normScale, maxNorm, c))
    return;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    x[i] = fromF<T>(toF(x[i]) * c);
}
} // namespace

template <typename G, typename Low>
cudaError_t dsc::rt::cuda::adamwStep(float *param, const G *grad, float *m,
                                     float *v, int64_t n,
                                     const AdamWConfig &cfg, int64_t step,
                                     bool decay, float gradScale, Low *lowp,
                                     cudaStream_t stream) {
  if (n == 0)
    return cudaSuccess;
  const double bc1 = 1.0 - std::pow(cfg.beta1, double(step));
  const double bc2 = 1.0 - std::pow(cfg.beta2, double(step));
  AdamWConsts k;
  k.decayMul = float(decay ? 1.0 - cfg.lr * cfg.weightDecay : 1.0);
  k.b1 = float(cfg.beta1);
  k.b2 = float(cfg.beta2);
  k.c1 = float(1.0 - cfg.beta1);
  k.c2 = float(1.0 - cfg.beta2);
  k.stepSize = float(cfg.lr / bc1);
  k.invSqrtBc2 = float(1.0 / std::sqrt(bc2));
  k.eps = float(cfg.eps);
  k.gradScale = gradScale;
  adamwKernel<<<gridFor(n, kThreads), kThreads, 0, stream>>>(param, grad, m, v,
                                                             n, k, lowp);
  return cudaGetLastError();
}

template <typename G, typename Low>
cudaError_t dsc::rt::cuda::sgdStep(float *param, const G *grad,
                                   float *momentumBuf, int64_t n,
                                   const SgdConfig &cfg, float gradScale,
                                   Low *lowp, cudaStream_t stream) {
  if (n == 0)
    return cudaSuccess;
  sgdKernel<<<gridFor(n, kThreads), kThreads, 0, stream>>>(
      param, grad, momentumBuf, n, float(cfg.lr), float(cfg.momentum),
      float(cfg.weightDecay), cfg.nesterov, gradScale, lowp);
  return cudaGetLastError();
}

template <typename T>
cudaError_t dsc::rt::cuda::sumOfSquares(const T *const *hostBuffers,
                                        const int64_t *hostSizes, int count,
                                        double *out, cudaStream_t stream) {
  int64_t blocks = 0;
  for (int b = 0; b < count; ++b)
    blocks += (hostSizes[b] + kNormBlock - 1) / kNormBlock;
  if (blocks == 0)
    return cudaMemsetAsync(out, 0, sizeof(double), stream);
  double *partial = nullptr;
  if (cudaError_t e =
          cudaMallocAsync((void **)&partial, blocks * sizeof(double), stream))
    return e;
  cudaError_t launch = cudaSuccess;
  void *storage = nullptr;
  if (count == 1) {
    squaresKernel<<<unsigned(blocks), kThreads, 0, stream>>>(
        hostBuffers[0], hostSizes[0], partial);
  } else {
    // Every buffer's blocks in one launch; the partials land where the
    // per-buffer launches put them, so the sum is the same bits.
    BlockTable<const T> table{};
    launch = uploadTable(hostBuffers, hostSizes, count, stream, table, storage,
                         blocks);
    if (!launch)
      squaresMultiKernel<<<unsigned(blocks), kThreads, 0, stream>>>(table,
                                                                    partial);
  }
  if (!launch) {
    sumPartialsKernel<<<1, 1024, 0, stream>>>(partial, blocks, out);
    launch = cudaGetLastError();
  }
  cudaError_t freed = cudaFreeAsync(partial, stream);
  if (storage && !freed)
    freed = cudaFreeAsync(storage, stream);
  return launch ? launch : freed;
}

template <typename T>
cudaError_t dsc::rt::cuda::clipGradients(T *const *hostBuffers,
                                         const int64_t *hostSizes, int count,
                                         const double *sumSq, double normScale,
                                         double maxNorm, cudaStream_t stream) {
  if (count == 1) {
    if (hostSizes[0])
      clipKernel<<<gridFor(hostSizes[0], kThreads), kThreads, 0, stream>>>(
          hostBuffers[0], hostSizes[0], sumSq, normScale, maxNorm);
    return cudaGetLastError();
  }
  // Every buffer in one launch (most steps clip nothing: each block reads
  // the factor and returns).
  BlockTable<T> table{};
  void *storage = nullptr;
  int64_t blocks = 0;
  cudaError_t launch = uploadTable(hostBuffers, hostSizes, count, stream, table,
                                   storage, blocks);
  if (!launch && blocks > 0) {
    clipMultiKernel<<<unsigned(blocks), kThreads, 0, stream>>>(
        table, sumSq, normScale, maxNorm);
    launch = cudaGetLastError();
  }
  cudaError_t freed = storage ? cudaFreeAsync(storage, stream) : cudaSuccess;
  return launch ? launch : freed;
}

#define INSTANTIATE_ADAMW(G, L)                                                \
  template cudaError_t dsc::rt::cuda::adamwStep<G, L>(                         \
      float *, const G *, float *, float *, int64_t, const AdamWConfig &,      \
      int64_t, bool, float, L *, cudaStream_t);
INSTANTIATE_ADAMW(float, __nv_bfloat16)
INSTANTIATE_ADAMW(float, __half)
INSTANTIATE_ADAMW(__nv_bfloat16, __nv_bfloat16)
INSTANTIATE_ADAMW(__half, __half)

#define INSTANTIATE_SGD(G, L)                                                  \
  template cudaError_t dsc::rt::cuda::sgdStep<G, L>(                           \
      float *, const G *, float *, int64_t, const SgdConfig &, float, L *,     \
      cudaStream_t);
INSTANTIATE_SGD(float, __nv_bfloat16)
INSTANTIATE_SGD(float, __half)
INSTANTIATE_SGD(__nv_bfloat16, __nv_bfloat16)
INSTANTIATE_SGD(__half, __half)

#define INSTANTIATE(T)                                                         \
  template cudaError_t dsc::rt::cuda::sumOfSquares<T>(                         \
      const T *const *, const int64_t *, int, double *, cudaStream_t);         \
  template cudaError_t dsc::rt::cuda::clipGradients<T>(                        \
      T *const *, const int64_t *, int, const double *, double, double,        \
      cudaStream_t);
DSC_CUDA_INSTANTIATE_ALL(INSTANTIATE)
