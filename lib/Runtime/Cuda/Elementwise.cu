//===- Elementwise.cu - Elementwise CUDA kernels --------------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Add, bias, scale, dtype conversion, GELU and dropout: memory-bound loops,
// one grid-stride kernel each, fp32 arithmetic whatever the element type.
// The most frequent (add, its backward's axb, bias add, scale, conversion)
// move kPack elements per access where the pointers are 16-byte aligned
// (GRID_STRIDE_PACKED): the same arithmetic per element, so the same bits.
//
//===----------------------------------------------------------------------===//

#include "CudaSupport.cuh"

using namespace dsc::rt::cuda;
using namespace dsc::rt::cuda::detail;

namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;

template <typename T>
__global__ void addKernel(const T *a, const T *b, T *y, int64_t n,
                          bool packed) {
  auto one = [&](int64_t i) { y[i] = fromF<T>(toF(a[i]) + toF(b[i])); };
  auto pack = [&](int64_t p) {
    const Pack<T> x = loadPack(a + p * kPack), z = loadPack(b + p * kPack);
    Pack<T> r;
#pragma unroll
    for (int k = 0; k < kPack; ++k)
      r.v[k] = fromF<T>(toF(x.v[k]) + toF(z.v[k]));
    storePack(y + p * kPack, r);
  };
  GRID_STRIDE_PACKED(n, packed, pack, one);
}

/// y (+)= alpha * x * (b ? b : 1): add's, scale's and mul's backward.
template <typename T>
__global__ void axbKernel(const T *x, const T *b, T *y, int64_t n, float alpha,
                          bool acc, bool packed) {
  auto one = [&](int64_t i) {
    float v = alpha * toF(x[i]);
    if (b)
      v *= toF(b[i]);
    put(y + i, v, acc);
  };
  auto pack = [&](int64_t p) {
    const Pack<T> xs = loadPack(x + p * kPack);
    Pack<T> bs, r = acc ? loadPack(y + p * kPack) : Pack<T>();
    if (b)
      bs = loadPack(b + p * kPack);
#pragma unroll
    for (int k = 0; k < kPack; ++k) {
      float v = alpha * toF(xs.v[k]);
      if (b)
        v *= toF(bs.v[k]);
      r.v[k] = fromF<T>(acc ? toF(r.v[k]) + v : v);
    }
    storePack(y + p * kPack, r);
  };
  GRID_STRIDE_PACKED(n, packed, pack, one);
}

template <typename T>
__global__ void mulKernel(const T *a, const T *b, T *y, int64_t n) {
  GRID_STRIDE(i, n) { y[i] = fromF<T>(toF(a[i]) * toF(b[i])); }
}

/// Packed when cols is a multiple of kPack too: a pack is then one row's.
template <typename T>
__global__ void biasAddKernel(const T *x, const T *bias, T *y, int64_t n,
                              int64_t cols, bool packed) {
  auto one = [&](int64_t i) {
    y[i] = fromF<T>(toF(x[i]) + toF(bias[i % cols]));
  };
  auto pack = [&](int64_t p) {
    const Pack<T> xs = loadPack(x + p * kPack),
                  bs = loadPack(bias + (p * kPack) % cols);
    Pack<T> r;
#pragma unroll
    for (int k = 0; k < kPack; ++k)
      r.v[k] = fromF<T>(toF(xs.v[k]) + toF(bs.v[k]));
    storePack(y + p * kPack, r);
  };
  GRID_STRIDE_PACKED(n, packed, pack, one);
}

/// Block (32, 32) owns 32 columns; thread row ty sums rows ty, ty + 32, ...
/// and the 32 partials are added in ty order: a fixed order, no atomics.
template <typename T>
__global__ void biasGradKernel(const T *dY, T *dBias, int64_t rows,
                               int64_t cols, bool acc) {
  __shared__ float part[32][33];
  const int64_t c = int64_t(blockIdx.x) * 32 + threadIdx.x;
  float s = 0.0f;
  if (c < cols)
    for (int64_t r = threadIdx.y; r < rows; r += 32)
      s += toF(dY[r * cols + c]);
  part[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float t = 0.0f;
    for (int i = 0; i < 32; ++i)
      t += part[i][threadIdx.x];
    put(dBias + c, t, acc);
  }
}

template <typename T>
__global__ void scaleKernel(const T *x, T *y, int64_t n, float alpha,
                            bool packed) {
  auto one = [&](int64_t i) { y[i] = fromF<T>(alpha * toF(x[i])); };
  auto pack = [&](int64_t p) {
    const Pack<T> xs = loadPack(x + p * kPack);
    Pack<T> r;
#pragma unroll
    for (int k = 0; k < kPack; ++k)
      r.v[k] = fromF<T>(alpha * toF(xs.v[k]));
    storePack(y + p * kPack, r);
  };
  GRID_STRIDE_PACKED(n, packed, pack, one);
}

template <typename From, typename To>
__global__ void convertKernel(const From *x, To *y, int64_t n, bool packed) {
  auto one = [&](int64_t i) { y[i] = fromF<To>(toF(x[i])); };
  auto pack = [&](int64_t p) {
    const Pack<From> xs = loadPack(x + p * kPack);
    Pack<To> r;
#pragma unroll
    for (int k = 0; k < kPack; ++k)
      r.v[k] = fromF<To>(toF(xs.v[k]));
    storePack(y + p * kPack, r);
  };
  GRID_STRIDE_PACKED(n, packed, pack, one);
}

template <typename T>
__global__ void geluForwardKernel(const T *x, T *y, int64_t n) {
  GRID_STRIDE(i, n) {
    float xi = toF(x[i]);
    y[i] =
        fromF<T>(0.5f * xi *
                 (1.0f + tanhf(kSqrt2OverPi * (xi + kCubic * xi * xi * xi))));
  }
}

template <typename T>
__global__ void geluBackwardKernel(const T *x, const T *dY, T *dX, int64_t n,
                                   bool acc) {
  GRID_STRIDE(i, n) {
    float xi = toF(x[i]);
    float t = tanhf(kSqrt2OverPi * (xi + kCubic * xi * xi * xi));
    float du = kSqrt2OverPi * (1.0f + 3.0f * kCubic * xi * xi);
    float g = 0.5f * (1.0f + t) + 0.5f * xi * (1.0f - t * t) * du;
    put(dX + i, toF(dY[i]) * g, acc);
  }
}

template <typename T>
__global__ void geluExactForwardKernel(const T *x, T *y, int64_t n) {
  GRID_STRIDE(i, n) {
    float xi = toF(x[i]);
    y[i] = fromF<T>(0.5f * xi * (1.0f + erff(xi * kInvSqrt2)));
  }
}

template <typename T>
__global__ void geluExactBackwardKernel(const T *x, const T *dY, T *dX,
                                        int64_t n, bool acc) {
  GRID_STRIDE(i, n) {
    float xi = toF(x[i]);
    float cdf = 0.5f * (1.0f + erff(xi * kInvSqrt2));
    float pdf = kInvSqrt2Pi * expf(-0.5f * xi * xi);
    put(dX + i, toF(dY[i]) * (cdf + xi * pdf), acc);
  }
}

/// Megatron's bias_gelu: gelu(x + bias[col]), the sum rounded to T as
/// biasAddKernel rounds it (bf16 sums as the unfused ops see them).
template <typename T>
__global__ void biasGeluForwardKernel(const T *x, const T *bias, T *y,
                                      int64_t n, int64_t cols, bool exact) {
  GRID_STRIDE(i, n) {
    float xi = toF(fromF<T>(toF(x[i]) + toF(bias[i % cols])));
    float g =
        exact ? 0.5f * xi * (1.0f + erff(xi * kInvSqrt2))
              : 0.5f * xi *
                    (1.0f + tanhf(kSqrt2OverPi * (xi + kCubic * xi * xi * xi)));
    y[i] = fromF<T>(g);
  }
}

/// bias_gelu_back: dy * gelu'(x + bias[col]), the sum recomputed.
template <typename T>
__global__ void biasGeluBackwardKernel(const T *x, const T *bias, const T *dY,
                                       T *dX, int64_t n, int64_t cols,
                                       bool exact, bool acc) {
  GRID_STRIDE(i, n) {
    float xi = toF(fromF<T>(toF(x[i]) + toF(bias[i % cols])));
    float g;
    if (exact) {
      float cdf = 0.5f * (1.0f + erff(xi * kInvSqrt2));
      float pdf = kInvSqrt2Pi * expf(-0.5f * xi * xi);
      g = cdf + xi * pdf;
    } else {
      float t = tanhf(kSqrt2OverPi * (xi + kCubic * xi * xi * xi));
      float du = kSqrt2OverPi * (1.0f + 3.0f * kCubic * xi * xi);
      g = 0.5f * (1.0f + t) + 0.5f * xi * (1.0f - t * t) * du;
    }
    put(dX + i, toF(dY[i]) * g, acc);
  }
}

template <typename T>
__global__ void dropoutKernel(const T *x, T *y, int64_t n, uint64_t key,
                              uint64_t thr, float inv, bool acc) {
  GRID_STRIDE(i, n) {
    float v = dropoutKeepBit(key, uint64_t(i), thr) ? toF(x[i]) * inv : 0.0f;
    put(y + i, v, acc);
  }
}

/// The grid of a GRID_STRIDE_PACKED loop over n elements.
unsigned gridOf(int64_t n, bool packed) {
  return gridFor(packed ? n / kPack : n);
}

/// y (+)= alpha * x * (b ? b : 1), packed where the pointers allow.
template <typename T>
void launchAxb(const T *x, const T *b, T *y, int64_t n, float alpha, bool acc,
               cudaStream_t stream) {
  const bool packed = packable({x, b, y});
  axbKernel<T>
      <<<gridOf(n, packed), 256, 0, stream>>>(x, b, y, n, alpha, acc, packed);
}
} // namespace

template <typename T>
cudaError_t dsc::rt::cuda::addForward(const T *a, const T *b, T *y, int64_t n,
                                      cudaStream_t stream) {
  const bool packed = packable({a, b, y});
  addKernel<<<gridOf(n, packed), 256, 0, stream>>>(a, b, y, n, packed);
  return cudaGetLastError();
}

template <typename T>
cudaError_t dsc::rt::cuda::addBackward(const T *dY, T *dA, T *dB, int64_t n,
                                       bool accumulate, cudaStream_t stream) {
  if (dA)
    launchAxb<T>(dY, nullptr, dA, n, 1.0f, accumulate, stream);
  if (dB)
    launchAxb<T>(dY, nullptr, dB, n, 1.0f, accumulate, stream);
  return cudaGetLastError();
}

template <typename T>
cudaError_t dsc::rt::cuda::mulForward(const T *a, const T *b, T *y, int64_t n,
                                      cudaStream_t stream) {
  mulKernel<<<gridFor(n), 256, 0, stream>>>(a, b, y, n);
  return cudaGetLastError();
}

template <typename T>
cudaError_t dsc::rt::cuda::mulBackward(const T *a, const T *b, const T *dY,
                                       T *dA, T *dB, int64_t n, bool accumulate,
                                       cudaStream_t stream) {
  if (dA)
    launchAxb<T>(dY, b, dA, n, 1.0f, accumulate, stream);
  if (dB)
    launchAxb<T>(dY, a, dB, n, 1.0f, accumulate, stream);
  return cudaGetLastError();
}

template <typename T>
cudaError_t dsc::rt::cuda::scaleBackward(const T *dY, T *dX, int64_t n,
                                         float alpha, bool accumulate,
                                         cudaStream_t stream) {
  launchAxb<T>(dY, nullptr, dX, n, alpha, accumulate, stream);
  return cudaGetLastError();
}

template <typename T>
cudaError_t dsc::rt::cuda::accumulate(const T *x, T *y, int64_t n,
                                      cudaStream_t stream) {
  launchAxb<T>(x, nullptr, y, n, 1.0f, true, stream);
  return cudaGetLastError();
}

template <typename T>
cudaError_t dsc::rt::cuda::biasAddForward(const T *x, const T *bias, T *y,
                                          int64_t rows, int64_t cols,
                                          cudaStream_t stream) {
  const bool packed = cols % kPack == 0 && packable({x, bias, y});
  biasAddKernel<<<gridOf(rows * cols, packed), 256, 0, stream>>>(
      x, bias, y, rows * cols, cols, packed);
  return cudaGetLastError();
}

template <typename T>
cudaError_t dsc::rt::cuda::biasGrad(const T *dY, T *dBias, int64_t rows,
                                    int64_t cols, bool accumulate,
                                    cudaStream_t stream) {
  biasGradKernel<<<unsigned((cols + 31) / 32), dim3(32, 32), 0, stream>>>(
      dY, dBias, rows, cols, accumulate);
  return cudaGetLastError();
}

template <typename T>
cudaError_t dsc::rt::cuda::scaleForward(const T *x, T *y, int64_t n,
                                        float alpha, cudaStream_t stream) {
  const bool packed = packable({x, y});
  scaleKernel<<<gridOf(n, packed), 256, 0, stream>>>(x, y, n, alpha, packed);
  return cudaGetLastError();
}

template <typename From, typename To>
cudaError_t dsc::rt::cuda::convert(const From *x, To *y, int64_t n,
                                   cudaStream_t stream) {
  const bool packed = packable({x, y});
  convertKernel<<<gridOf(n, packed), 256, 0, stream>>>(x, y, n, packed);
  return cudaGetLastError();
}

template <typename T>
cudaError_t dsc::rt::cuda::geluForward(const T *x, T *y, int64_t n,
                                       cudaStream_t stream) {
  geluForwardKernel<<<gridFor(n), 256, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}

template <typename T>
cudaError_t dsc::rt::cuda::geluBackward(const T *x, const T *dY, T *dX,
                                        int64_t n, bool accumulate,
                                        cudaStream_t stream) {
  geluBackwardKernel<<<gridFor(n), 256, 0, stream>>>(x, dY, dX, n, accumulate);
  return cudaGetLastError();
}

template <typename T>
cudaError_t dsc::rt::cuda::biasGeluForward(const T *x, const T *bias, T *y,
                                           int64_t rows, int64_t cols,
                                           bool exact, cudaStream_t stream) {
  biasGeluForwardKernel<<<gridFor(rows * cols), 256, 0, stream>>>(
      x, bias, y, rows * cols, cols, exact);
  return cudaGetLastError();
}

template <typename T>
cudaError_t
dsc::rt::cuda::biasGeluBackward(const T *x, const T *bias, const T *dY, T *dX,
                                int64_t rows, int64_t cols, bool exact,
                                bool accumulate, cudaStream_t stream) {
  biasGeluBackwardKernel<<<gridFor(rows * cols), 256, 0, stream>>>(
      x, bias, dY, dX, rows * cols, cols, exact, accumulate);
  return cudaGetLastError();
}

template <typename T>
cudaError_t dsc::rt::cuda::geluExactForward(const T *x, T *y, int64_t n,
                                            cudaStream_t stream) {
  geluExactForwardKernel<<<gridFor(n), 256, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}

template <typename T>
cudaError_t dsc::rt::cuda::geluExactBackward(const T *x, const T *dY, T *dX,
                                             int64_t n, bool accumulate,
                                             cudaStream_t stream) {
  geluExactBackwardKernel<<<gridFor(n), 256, 0, stream>>>(x, dY, dX, n,
                                                          accumulate);
  return cudaGetLastError();
}

template <typename T>
cudaError_t dsc::rt::cuda::dropoutForward(const T *x, T *y, int64_t n, float p,
                                          uint64_t seed, uint64_t offset,
                                          cudaStream_t stream) {
  const float inv = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  dropoutKernel<<<gridFor(n), 256, 0, stream>>>(
      x, y, n, dropoutKey(seed) + offset, dropoutThreshold(p), inv, false);
  return cudaGetLastError();
}

template <typename T>
cudaError_t dsc::rt::cuda::dropoutBackward(const T *dY, T *dX, int64_t n,
                                           float p, uint64_t seed,
                                           bool accumulate, uint64_t offset,
                                           cudaStream_t stream) {
  const float inv = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  dropoutKernel<<<gridFor(n), 256, 0, stream>>>(
      dY, dX, n, dropoutKey(seed) + offset, dropoutThreshold(p), inv,
      accumulate);
  return cudaGetLastError();
}

#define INSTANTIATE(T)                                                         \
  template cudaError_t dsc::rt::cuda::addForward<T>(const T *, const T *, T *, \
                                                    int64_t, cudaStream_t);    \
  template cudaError_t dsc::rt::cuda::addBackward<T>(                          \
      const T *, T *, T *, int64_t, bool, cudaStream_t);                       \
  template cudaError_t dsc::rt::cuda::mulForward<T>(const T *, const T *, T *, \
                                                    int64_t, cudaStream_t);    \
  template cudaError_t dsc::rt::cuda::mulBackward<T>(                          \
      const T *, const T *, const T *, T *, T *, int64_t, bool, cudaStream_t); \
  template cudaError_t dsc::rt::cuda::scaleBackward<T>(                        \
      const T *, T *, int64_t, float, bool, cudaStream_t);                     \
  template cudaError_t dsc::rt::cuda::accumulate<T>(const T *, T *, int64_t,   \
                                                    cudaStream_t);             \
  template cudaError_t dsc::rt::cuda::biasAddForward<T>(                       \
      const T *, const T *, T *, int64_t, int64_t, cudaStream_t);              \
  template cudaError_t dsc::rt::cuda::biasGrad<T>(                             \
      const T *, T *, int64_t, int64_t, bool, cudaStream_t);                   \
  template cudaError_t dsc::rt::cuda::scaleForward<T>(const T *, T *, int64_t, \
                                                      float, cudaStream_t);    \
  template cudaError_t dsc::rt::cuda::geluForward<T>(const T *, T *, int64_t,  \
                                                     cudaStream_t);            \
  template cudaError_t dsc::rt::cuda::geluBackward<T>(                         \
      const T *, const T *, T *, int64_t, bool, cudaStream_t);                 \
  template cudaError_t dsc::rt::cuda::geluExactForward<T>(                     \
      const T *, T *, int64_t, cudaStream_t);                                  \
  template cudaError_t dsc::rt::cuda::geluExactBackward<T>(                    \
      const T *, const T *, T *, int64_t, bool, cudaStream_t);                 \
  template cudaError_t dsc::rt::cuda::biasGeluForward<T>(                      \
      const T *, const T *, T *, int64_t, int64_t, bool, cudaStream_t);        \
  template cudaError_t dsc::rt::cuda::biasGeluBackward<T>(                     \
      const T *, const T *, const T *, T *, int64_t, int64_t, bool, bool,      \
      cudaStream_t);                                                           \
  template cudaError_t dsc::rt::cuda::dropoutForward<T>(                       \
      const T *, T *, int64_t, float, uint64_t, uint64_t, cudaStream_t);       \
  template cudaError_t dsc::rt::cuda::dropoutBackward<T>(                      \
      const T *, T *, int64_t, float, uint64_t, bool, uint64_t, cudaStream_t);
DSC_CUDA_INSTANTIATE_ALL(INSTANTIATE)

#define INSTANTIATE_CONVERT(A, B)                                              \
  template cudaError_t dsc::rt::cuda::convert<A, B>(const A *, B *, int64_t,   \
                                                    cudaStream_t);
INSTANTIATE_CONVERT(float, float)
INSTANTIATE_CONVERT(float, __nv_bfloat16)
INSTANTIATE_CONVERT(float, __half)
INSTANTIATE_CONVERT(__nv_bfloat16, float)
INSTANTIATE_CONVERT(__half, float)
