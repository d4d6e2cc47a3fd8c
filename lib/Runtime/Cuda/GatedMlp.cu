//===- GatedMlp.cu - SwiGLU and grouped-query head repeats on CUDA --------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The CPU kernels' formulas (lib/Runtime/Cpu/GatedMlp.cpp) as grid-stride
// loops in fp32 arithmetic: one thread per gated element, per copied
// element, and per summed element (the copies summed in the CPU's order).
//
//===----------------------------------------------------------------------===//

#include "CudaSupport.cuh"

using namespace dsc::rt;
using namespace dsc::rt::cuda;
using namespace dsc::rt::cuda::detail;

namespace {

template <typename T>
__global__ void swigluForwardKernel(const T *x, T *y, int64_t rows,
                                    int64_t cols) {
  GRID_STRIDE(i, rows * cols) {
    const int64_t r = i / cols, c = i % cols;
    const float up = toF(x[r * 2 * cols + c]);
    const float g = toF(x[r * 2 * cols + cols + c]);
    y[i] = fromF<T>(up * g / (1.0f + expf(-g)));
  }
}

template <typename T>
__global__ void swigluBackwardKernel(const T *x, const T *dY, T *dX,
                                     int64_t rows, int64_t cols) {
  GRID_STRIDE(i, rows * cols) {
    const int64_t r = i / cols, c = i % cols;
    const float up = toF(x[r * 2 * cols + c]);
    const float g = toF(x[r * 2 * cols + cols + c]);
    const float s = 1.0f / (1.0f + expf(-g)), dy = toF(dY[i]);
    dX[r * 2 * cols + c] = fromF<T>(dy * g * s);
    dX[r * 2 * cols + cols + c] =
        fromF<T>(dy * up * s * (1.0f + g * (1.0f - s)));
  }
}

template <typename T>
__global__ void repeatHeadsForwardKernel(const T *x, T *y, int64_t rows,
                                         int64_t kvHeads, int64_t headDim,
                                         int64_t repeats) {
  const int64_t in = kvHeads * headDim, out = in * repeats;
  GRID_STRIDE(i, rows * out) {
    const int64_t r = i / out, j = (i % out) / headDim, d = i % headDim;
    y[i] = x[r * in + (j / repeats) * headDim + d];
  }
}

template <typename T>
__global__ void repeatHeadsBackwardKernel(const T *dY, T *dX, int64_t rows,
                                          int64_t kvHeads, int64_t headDim,
                                          int64_t repeats) {
  const int64_t in = kvHeads * headDim, out = in * repeats;
  GRID_STRIDE(i, rows * in) {
    const int64_t r = i / in, h = (i % in) / headDim, d = i % headDim;
    const T *dy = dY + r * out + h * repeats * headDim + d;
    float sum = 0.0f;
    for (int64_t k = 0; k < repeats; ++k)
      sum += toF(dy[k * headDim]);
    dX[i] = fromF<T>(sum);
  }
}

} // namespace

template <typename T>
cudaError_t dsc::rt::cuda::swigluForward(const T *x, T *y, int64_t rows,
                                         int64_t cols, cudaStream_t stream) {
  swigluForwardKernel<<<gridFor(rows * cols), 256, 0, stream>>>(x, y, rows,
                                                                cols);
  return cudaGetLastError();
}

template <typename T>
cudaError_t dsc::rt::cuda::swigluBackward(const T *x, const T *dY, T *dX,
                                          int64_t rows, int64_t cols,
                                          cudaStream_t stream) {
  swigluBackwardKernel<<<gridFor(rows * cols), 256, 0, stream>>>(x, dY, dX,
                                                                 rows, cols);
  return cudaGetLastError();
}

template <typename T>
cudaError_t dsc::rt::cuda::repeatHeadsForward(const T *x, T *y, int64_t rows,
                                              int64_t kvHeads, int64_t headDim,
                                              int64_t repeats,
                                              cudaStream_t stream) {
  repeatHeadsForwardKernel<<<gridFor(rows * kvHeads * headDim * repeats), 256,
                             0, stream>>>(x, y, rows, kvHeads, headDim,
                                          repeats);
  return cudaGetLastError();
}

template <typename T>
cudaError_t dsc::rt::cuda::repeatHeadsBackward(const T *dY, T *dX, int64_t rows,
                                               int64_t kvHeads, int64_t headDim,
                                               int64_t repeats,
                                               cudaStream_t stream) {
  repeatHeadsBackwardKernel<<<gridFor(rows * kvHeads * headDim), 256, 0,
                              stream>>>(dY, dX, rows, kvHeads, headDim,
                                        repeats);
  return cudaGetLastError();
}

#define INSTANTIATE(T)                                                         \
  template cudaError_t dsc::rt::cuda::swigluForward<T>(                        \
      const T *, T *, int64_t, int64_t, cudaStream_t);                         \
  template cudaError_t dsc::rt::cuda::swigluBackward<T>(                       \
      const T *, const T *, T *, int64_t, int64_t, cudaStream_t);              \
  template cudaError_t dsc::rt::cuda::repeatHeadsForward<T>(                   \
      const T *, T *, int64_t, int64_t, int64_t, int64_t, cudaStream_t);       \
  template cudaError_t dsc::rt::cuda::repeatHeadsBackward<T>(                  \
      const T *, T *, int64_t, int64_t, int64_t, int64_t, cudaStream_t);
DSC_CUDA_INSTANTIATE_ALL(INSTANTIATE)
