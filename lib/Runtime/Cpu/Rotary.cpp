//===- Rotary.cpp - rotary position embedding -----------------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The rotate_half pairing of GPT-NeoX, Llama and transformers: in each head
// feature i and feature i + rotaryDims/2 (i < rotaryDims/2) turn together
// by the angle pos * base^(-2i/rotaryDims). The angles' cosines and sines
// are computed once a call in double, [seq, rotaryDims/2], and shared by
// every row and head at that position; the backward is the same kernel
// turning the other way.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/CpuKernels.h"

#include "KernelSupport.h"

#include <cmath>
#include <vector>

using namespace dsc::rt;

template <typename T>
void dsc::rt::rotaryForward(const T *x, T *y, int64_t rows, int64_t seq,
                            int64_t cols, int64_t headDim, int64_t rotaryDims,
                            double base, bool inverse) {
  const int64_t half = rotaryDims / 2;
  std::vector<T> cosines(size_t(seq * half)), sines(size_t(seq * half));
  for (int64_t i = 0; i < half; ++i) {
    const double frequency =
        std::pow(base, -2.0 * double(i) / double(rotaryDims));
    for (int64_t pos = 0; pos < seq; ++pos) {
      const double angle = double(pos) * frequency;
      cosines[size_t(pos * half + i)] = T(std::cos(angle));
      sines[size_t(pos * half + i)] =
          T(inverse ? -std::sin(angle) : std::sin(angle));
    }
  }
  const int64_t heads = cols / headDim;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T *c = cosines.data() + (r % seq) * half;
    const T *s = sines.data() + (r % seq) * half;
    for (int64_t h = 0; h < heads; ++h) {
      const T *xh = x + r * cols + h * headDim;
      T *yh = y + r * cols + h * headDim;
#pragma omp simd
      for (int64_t i = 0; i < half; ++i) {
        const T a = xh[i], b = xh[i + half];
        yh[i] = a * c[i] - b * s[i];
        yh[i + half] = b * c[i] + a * s[i];
      }
      if (yh != xh)
        for (int64_t i = rotaryDims; i < headDim; ++i)
          yh[i] = xh[i];
    }
  }
}

#define INSTANTIATE(T)                                                         \
  template void dsc::rt::rotaryForward<T>(const T *, T *, int64_t, int64_t,    \
                                          int64_t, int64_t, int64_t, double,   \
                                          bool);
DSC_RT_INSTANTIATE_FLOAT_DOUBLE(INSTANTIATE)
