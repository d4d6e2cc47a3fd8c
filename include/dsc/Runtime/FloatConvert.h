//===- FloatConvert.h - bf16 and f16 on the host ----------------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The host's view of the 16-bit float formats a mixed-precision plan keeps:
// bfloat16 (8-bit exponent, 7-bit mantissa) and IEEE binary16. Rounding is
// to nearest even, as CUDA's __float2bfloat16_rn / __float2half_rn do, so a
// value the CPU backend rounds is the value the CUDA kernels round it to.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_FLOATCONVERT_H
#define DSC_RUNTIME_FLOATCONVERT_H

#include "dsc/Runtime/Plan.h"

#include <cstdint>
#include <cstring>

namespace dsc::rt {

inline float bf16ToFloat(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline uint16_t floatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) // NaN: keep it a (quiet) NaN
    return uint16_t((bits >> 16) | 0x0040u);
  // Round to nearest, ties to even: add 0x7fff plus the kept LSB.
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t(bits >> 16);
}

inline float f16ToFloat(uint16_t h) {
  _Float16 x;
  std::memcpy(&x, &h, sizeof x);
  return float(x);
}

inline uint16_t floatToF16(float f) {
  _Float16 x = _Float16(f); // the hardware/compiler's round to nearest even
  uint16_t h;
  std::memcpy(&h, &x, sizeof h);
  return h;
}

/// Element i of a float buffer of dtype `t` as a double (F32, F64, BF16,
/// F16; I32 as its value).
inline double loadAsDouble(const void *data, DType t, int64_t i) {
  switch (t) {
  case DType::F32:
    return static_cast<const float *>(data)[i];
  case DType::F64:
    return static_cast<const double *>(data)[i];
  case DType::BF16:
    return bf16ToFloat(static_cast<const uint16_t *>(data)[i]);
  case DType::F16:
    return f16ToFloat(static_cast<const uint16_t *>(data)[i]);
  case DType::I32:
    return static_cast<const int32_t *>(data)[i];
  }
  return 0;
}

/// Converts `count` elements of dtype `from` at `x` into dtype `to` at `y`
/// (float dtypes; 16-bit results round to nearest even from f32, so f64
/// goes through f32 first, as a GPU's conversion would).
void convertFloats(const void *x, DType from, void *y, DType to,
                   int64_t count);

} // namespace dsc::rt

#endif // DSC_RUNTIME_FLOATCONVERT_H
