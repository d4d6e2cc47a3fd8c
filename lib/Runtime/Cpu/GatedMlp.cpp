//===- GatedMlp.cpp - SwiGLU and grouped-query head repeats ---------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The two row-wise kernels Llama-family graphs add: SwiGLU on the fused
// [up | gate] output of the MLP's first projection (GPT-NeoX's chunk
// order), and the repeat of each key/value head for grouped-query
// attention, whose gradient sums the copies in a fixed order.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/CpuKernels.h"

#include "KernelSupport.h"

#include <cmath>
#include <cstring>

using namespace dsc::rt;

namespace {
template <typename T> T sigmoid(T g) { return T(1) / (T(1) + std::exp(-g)); }
} // namespace

template <typename T>
void dsc::rt::swigluForward(const T *x, T *y, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T *up = x + r * 2 * cols, *gate = up + cols;
    T *yr = y + r * cols;
    for (int64_t c = 0; c < cols; ++c)
      yr[c] = up[c] * gate[c] * sigmoid(gate[c]);
  }
}

template <typename T>
void dsc::rt::swigluBackward(const T *x, const T *dY, T *dX, int64_t rows,
                             int64_t cols) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T *up = x + r * 2 * cols, *gate = up + cols;
    const T *dy = dY + r * cols;
    T *dUp = dX + r * 2 * cols, *dGate = dUp + cols;
    for (int64_t c = 0; c < cols; ++c) {
      const T g = gate[c], s = sigmoid(g);
      dUp[c] = dy[c] * g * s;
      dGate[c] = dy[c] * up[c] * s * (T(1) + g * (T(1) - s));
    }
  }
}

template <typename T>
void dsc::rt::repeatHeadsForward(const T *x, T *y, int64_t rows,
                                 int64_t kvHeads, int64_t headDim,
                                 int64_t repeats) {
  const int64_t in = kvHeads * headDim, out = in * repeats;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < kvHeads; ++h)
      for (int64_t k = 0; k < repeats; ++k)
        std::memcpy(y + r * out + (h * repeats + k) * headDim,
                    x + r * in + h * headDim, size_t(headDim) * sizeof(T));
}

template <typename T>
void dsc::rt::repeatHeadsBackward(const T *dY, T *dX, int64_t rows,
                                  int64_t kvHeads, int64_t headDim,
                                  int64_t repeats) {
  const int64_t in = kvHeads * headDim, out = in * repeats;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < kvHeads; ++h) {
      T *dx = dX + r * in + h * headDim;
      const T *dy = dY + r * out + h * repeats * headDim;
      for (int64_t i = 0; i < headDim; ++i) {
        T sum = 0;
        for (int64_t k = 0; k < repeats; ++k)
          sum += dy[k * headDim + i];
        dx[i] = sum;
      }
    }
}

#define INSTANTIATE(T)                                                         \
  template void dsc::rt::swigluForward<T>(const T *, T *, int64_t, int64_t);   \
  template void dsc::rt::swigluBackward<T>(const T *, const T *, T *, int64_t, \
                                           int64_t);                           \
  template void dsc::rt::repeatHeadsForward<T>(const T *, T *, int64_t,        \
                                               int64_t, int64_t, int64_t);     \
  template void dsc::rt::repeatHeadsBackward<T>(const T *, T *, int64_t,       \
                                                int64_t, int64_t, int64_t);
DSC_RT_INSTANTIATE_FLOAT_DOUBLE(INSTANTIATE)
