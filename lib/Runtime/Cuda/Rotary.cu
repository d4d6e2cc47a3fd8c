//===- Rotary.cu - rotary position embedding on CUDA ----------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// One thread per rotated pair (row, head, i): the CPU kernel's pairing
// (lib/Runtime/Cpu/Rotary.cpp), with the angle's frequency, cosine and sine
// in double as there, so the two backends turn by the same angles; a second
// loop copies the features past rotaryDims when y is not x.
//
//===----------------------------------------------------------------------===//

#include "CudaSupport.cuh"

using namespace dsc::rt;
using namespace dsc::rt::cuda;
using namespace dsc::rt::cuda::detail;

namespace {

template <typename T>
__global__ void rotaryKernel(const T *x, T *y, int64_t rows, int64_t seq,
                             int64_t cols, int64_t headDim, int64_t rotaryDims,
                             double base, bool inverse) {
  const int64_t half = rotaryDims / 2, heads = cols / headDim;
  GRID_STRIDE(t, rows * heads * half) {
    const int64_t i = t % half, h = (t / half) % heads, r = t / (half * heads);
    const double angle =
        double(r % seq) * pow(base, -2.0 * double(i) / double(rotaryDims));
    double s, c;
    sincos(angle, &s, &c);
    const float cf = float(c), sf = float(inverse ? -s : s);
    const int64_t at = r * cols + h * headDim + i;
    const float a = toF(x[at]), b = toF(x[at + half]);
    y[at] = fromF<T>(a * cf - b * sf);
    y[at + half] = fromF<T>(b * cf + a * sf);
  }
}

template <typename T>
__global__ void copyTailKernel(const T *x, T *y, int64_t rows, int64_t cols,
                               int64_t headDim, int64_t rotaryDims) {
  const int64_t tail = headDim - rotaryDims, heads = cols / headDim;
  GRID_STRIDE(t, rows * heads * tail) {
    const int64_t i = t % tail, h = (t / tail) % heads, r = t / (tail * heads);
    const int64_t at = r * cols + h * headDim + rotaryDims + i;
    y[at] = x[at];
  }
}

} // namespace

template <typename T>
cudaError_t
dsc::rt::cuda::rotaryForward(const T *x, T *y, int64_t rows, int64_t seq,
                             int64_t cols, int64_t headDim, int64_t rotaryDims,
                             double base, bool inverse, cudaStream_t stream) {
  const int64_t pairs = rows * (cols / headDim) * (rotaryDims / 2);
  rotaryKernel<<<gridFor(pairs), 256, 0, stream>>>(
      x, y, rows, seq, cols, headDim, rotaryDims, base, inverse);
  const int64_t tail = rows * (cols / headDim) * (headDim - rotaryDims);
  if (y != x && tail > 0)
    copyTailKernel<<<gridFor(tail), 256, 0, stream>>>(x, y, rows, cols, headDim,
                                                      rotaryDims);
  return cudaGetLastError();
}

#define INSTANTIATE(T)                                                         \
  template cudaError_t dsc::rt::cuda::rotaryForward<T>(                        \
      const T *, T *, int64_t, int64_t, int64_t, int64_t, int64_t, double,     \
      bool, cudaStream_t);
DSC_CUDA_INSTANTIATE_ALL(INSTANTIATE)
