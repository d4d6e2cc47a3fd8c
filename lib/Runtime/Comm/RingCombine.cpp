//===- RingCombine.cpp - One step of a ring reduction ---------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//

#include "RingCombine.h"

#include "dsc/Runtime/FloatConvert.h"
#include "dsc/Support/CollectiveBytes.h"

#include <cstdint>
#include <cstring>
#include <vector>

namespace dsc::rt::detail {

namespace {

template <typename T>
void combine(T *dst, const T *partial, const T *own, size_t n, ReduceOp op,
             int divisor) {
  switch (op) {
  case ReduceOp::Sum:
  case ReduceOp::Avg:
    for (size_t i = 0; i < n; ++i)
      dst[i] = partial[i] + own[i];
    if (op == ReduceOp::Avg && divisor > 1)
      for (size_t i = 0; i < n; ++i)
        dst[i] = dst[i] / T(divisor);
    return;
  case ReduceOp::Max:
    for (size_t i = 0; i < n; ++i)
      dst[i] = own[i] > partial[i] ? own[i] : partial[i];
    return;
  case ReduceOp::Min:
    for (size_t i = 0; i < n; ++i)
      dst[i] = own[i] < partial[i] ? own[i] : partial[i];
    return;
  }
}

} // namespace

void combineBytes(char *dst, const char *partial, const char *own, size_t count,
                  DType dtype, ReduceOp op, int divisor) {
  switch (dtype) {
  case DType::F32:
    return combine(reinterpret_cast<float *>(dst),
                   reinterpret_cast<const float *>(partial),
                   reinterpret_cast<const float *>(own), count, op, divisor);
  case DType::F64:
    return combine(reinterpret_cast<double *>(dst),
                   reinterpret_cast<const double *>(partial),
                   reinterpret_cast<const double *>(own), count, op, divisor);
  case DType::I32:
    return combine(reinterpret_cast<int32_t *>(dst),
                   reinterpret_cast<const int32_t *>(partial),
                   reinterpret_cast<const int32_t *>(own), count, op, divisor);
  case DType::BF16:
  case DType::F16: {
    // Each ring step in f32, rounded back to 16 bits: the numerics of a
    // 16-bit ring reduction (NCCL's).
    const bool bf16 = dtype == DType::BF16;
    auto load = [&](const char *p, size_t i) {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      return bf16 ? bf16ToFloat(h) : f16ToFloat(h);
    };
    std::vector<float> a(count), b(count);
    for (size_t i = 0; i < count; ++i) {
      a[i] = load(partial, i);
      b[i] = load(own, i);
    }
    combine(a.data(), a.data(), b.data(), count, op, divisor);
    for (size_t i = 0; i < count; ++i) {
      uint16_t h = bf16 ? floatToBf16(a[i]) : floatToF16(a[i]);
      std::memcpy(dst + 2 * i, &h, 2);
    }
    return;
  }
  }
}

std::pair<size_t, size_t> chunkOf(size_t count, int n, int k, size_t esize) {
  RingChunk chunk = ringChunk(count, n, k);
  return {size_t(chunk.first) * esize, size_t(chunk.length) * esize};
}

} // namespace dsc::rt::detail
