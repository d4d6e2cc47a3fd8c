//===- FloatConvert.cpp - bf16 and f16 on the host ------------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/FloatConvert.h"

using namespace dsc::rt;

void dsc::rt::convertFloats(const void *x, DType from, void *y, DType to,
                            int64_t count) {
#pragma omp parallel for schedule(static) if (count > 65536)
  for (int64_t i = 0; i < count; ++i) {
    const double v = loadAsDouble(x, from, i);
    switch (to) {
    case DType::F32:
      static_cast<float *>(y)[i] = float(v);
      break;
    case DType::F64:
      static_cast<double *>(y)[i] = v;
      break;
    case DType::BF16:
      static_cast<uint16_t *>(y)[i] = floatToBf16(float(v));
      break;
    case DType::F16:
      static_cast<uint16_t *>(y)[i] = floatToF16(float(v));
      break;
    case DType::I32:
      static_cast<int32_t *>(y)[i] = int32_t(v);
      break;
    }
  }
}
