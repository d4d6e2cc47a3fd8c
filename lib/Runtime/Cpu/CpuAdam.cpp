//===- CpuAdam.cpp - AdamW over host-resident states ----------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// One loop body per instruction set, each over a block of elements, and an
// OpenMP loop over blocks. The file is compiled with -ffp-contract=off so
// that no path fuses a multiply and an add the others do not: every path
// rounds the same products and sums, in torch.optim.AdamW's order.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/CpuAdam.h"
#include "dsc/Runtime/FloatConvert.h"

#include <immintrin.h>

#include <cmath>

using namespace dsc::rt;

namespace {

/// The step's constants, in float as the scalar path uses them.
struct Coefficients {
  float decayMul, b1, b2, c1, c2, stepSize, invSqrtBc2, eps;
};

Coefficients coefficientsOf(const AdamWConfig &cfg, int64_t step, bool decay) {
  const double bc1 = 1.0 - std::pow(cfg.beta1, double(step));
  const double bc2 = 1.0 - std::pow(cfg.beta2, double(step));
  return {float(decay ? 1.0 - cfg.lr * cfg.weightDecay : 1.0),
          float(cfg.beta1),
          float(cfg.beta2),
          float(1.0 - cfg.beta1),
          float(1.0 - cfg.beta2),
          float(cfg.lr / bc1),
          float(1.0 / std::sqrt(bc2)),
          float(cfg.eps)};
}

/// Elements [begin, end) on the scalar path.
void scalarRange(float *param, const float *grad, float *m, float *v,
                 uint16_t *copy, int64_t begin, int64_t end,
                 const Coefficients &k) {
  for (int64_t i = begin; i < end; ++i) {
    const float g = grad[i];
    const float p = param[i] * k.decayMul;
    const float mi = k.b1 * m[i] + k.c1 * g;
    const float vi = k.b2 * v[i] + k.c2 * g * g;
    m[i] = mi;
    v[i] = vi;
    const float updated =
        p - k.stepSize * mi / (std::sqrt(vi) * k.invSqrtBc2 + k.eps);
    param[i] = updated;
    if (copy)
      copy[i] = floatToBf16(updated);
  }
}

__attribute__((target("avx2"))) void
avx2Range(float *param, const float *grad, float *m, float *v, uint16_t *copy,
          int64_t begin, int64_t end, const Coefficients &k) {
  const __m256 decayMul = _mm256_set1_ps(k.decayMul), b1 = _mm256_set1_ps(k.b1),
               b2 = _mm256_set1_ps(k.b2), c1 = _mm256_set1_ps(k.c1),
               c2 = _mm256_set1_ps(k.c2), stepSize = _mm256_set1_ps(k.stepSize),
               invSqrtBc2 = _mm256_set1_ps(k.invSqrtBc2),
               eps = _mm256_set1_ps(k.eps);
  int64_t i = begin;
  for (; i + 8 <= end; i += 8) {
    const __m256 g = _mm256_loadu_ps(grad + i);
    const __m256 p = _mm256_mul_ps(_mm256_loadu_ps(param + i), decayMul);
    const __m256 mi = _mm256_add_ps(_mm256_mul_ps(b1, _mm256_loadu_ps(m + i)),
                                    _mm256_mul_ps(c1, g));
    const __m256 vi = _mm256_add_ps(_mm256_mul_ps(b2, _mm256_loadu_ps(v + i)),
                                    _mm256_mul_ps(_mm256_mul_ps(c2, g), g));
    _mm256_storeu_ps(m + i, mi);
    _mm256_storeu_ps(v + i, vi);
    const __m256 denom =
        _mm256_add_ps(_mm256_mul_ps(_mm256_sqrt_ps(vi), invSqrtBc2), eps);
    const __m256 updated =
        _mm256_sub_ps(p, _mm256_div_ps(_mm256_mul_ps(stepSize, mi), denom));
    _mm256_storeu_ps(param + i, updated);
    if (copy)
      for (int j = 0; j < 8; ++j)
        copy[i + j] = floatToBf16(param[i + j]);
  }
  scalarRange(param, grad, m, v, copy, i, end, k);
}

__attribute__((target("avx512f"))) void
avx512Range(float *param, const float *grad, float *m, float *v, uint16_t *copy,
            int64_t begin, int64_t end, const Coefficients &k) {
  const __m512 decayMul = _mm512_set1_ps(k.decayMul), b1 = _mm512_set1_ps(k.b1),
               b2 = _mm512_set1_ps(k.b2), c1 = _mm512_set1_ps(k.c1),
               c2 = _mm512_set1_ps(k.c2), stepSize = _mm512_set1_ps(k.stepSize),
               invSqrtBc2 = _mm512_set1_ps(k.invSqrtBc2),
               eps = _mm512_set1_ps(k.eps);
  int64_t i = begin;
  for (; i + 16 <= end; i += 16) {
    const __m512 g = _mm512_loadu_ps(grad + i);
    const __m512 p = _mm512_mul_ps(_mm512_loadu_ps(param + i), decayMul);
    const __m512 mi = _mm512_add_ps(_mm512_mul_ps(b1, _mm512_loadu_ps(m + i)),
                                    _mm512_mul_ps(c1, g));
    const __m512 vi = _mm512_add_ps(_mm512_mul_ps(b2, _mm512_loadu_ps(v + i)),
                                    _mm512_mul_ps(_mm512_mul_ps(c2, g), g));
    _mm512_storeu_ps(m + i, mi);
    _mm512_storeu_ps(v + i, vi);
    const __m512 denom =
        _mm512_add_ps(_mm512_mul_ps(_mm512_sqrt_ps(vi), invSqrtBc2), eps);
    const __m512 updated =
        _mm512_sub_ps(p, _mm512_div_ps(_mm512_mul_ps(stepSize, mi), denom));
    _mm512_storeu_ps(param + i, updated);
    if (copy) {
      // Round to nearest even on the bits (floatToBf16), NaNs kept quiet.
      const __m512i bits = _mm512_castps_si512(updated);
      const __m512i lsb =
          _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
      __m512i rounded = _mm512_srli_epi32(
          _mm512_add_epi32(bits,
                           _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)),
          16);
      const __mmask16 nan = _mm512_cmp_ps_mask(updated, updated, _CMP_UNORD_Q);
      rounded =
          _mm512_mask_mov_epi32(rounded, nan,
                                _mm512_or_si512(_mm512_srli_epi32(bits, 16),
                                                _mm512_set1_epi32(0x0040)));
      _mm256_storeu_si256(reinterpret_cast<__m256i *>(copy + i),
                          _mm512_cvtepi32_epi16(rounded));
    }
  }
  scalarRange(param, grad, m, v, copy, i, end, k);
}

} // namespace

const char *dsc::rt::cpuIsaName(CpuIsa isa) {
  switch (isa) {
  case CpuIsa::Scalar:
    return "scalar";
  case CpuIsa::Avx2:
    return "avx2";
  case CpuIsa::Avx512:
    return "avx512";
  }
  return "unknown";
}

std::optional<CpuIsa> dsc::rt::parseCpuIsa(std::string_view name) {
  for (CpuIsa isa : {CpuIsa::Scalar, CpuIsa::Avx2, CpuIsa::Avx512})
    if (name == cpuIsaName(isa))
      return isa;
  return std::nullopt;
}

bool dsc::rt::cpuSupports(CpuIsa isa) {
  switch (isa) {
  case CpuIsa::Scalar:
    return true;
  case CpuIsa::Avx2:
    return __builtin_cpu_supports("avx2");
  case CpuIsa::Avx512:
    return __builtin_cpu_supports("avx512f");
  }
  return false;
}

CpuIsa dsc::rt::detectCpuIsa() {
  if (cpuSupports(CpuIsa::Avx512))
    return CpuIsa::Avx512;
  if (cpuSupports(CpuIsa::Avx2))
    return CpuIsa::Avx2;
  return CpuIsa::Scalar;
}

void dsc::rt::cpuAdamW(float *param, const float *grad, float *m, float *v,
                       int64_t n, const AdamWConfig &cfg, int64_t step,
                       bool decay, uint16_t *bf16Copy, CpuIsa isa) {
  const Coefficients k = coefficientsOf(cfg, step, decay);
  // Blocks of 64 KiB of each stream: whole vectors, and enough of them
  // that every thread streams for a while.
  constexpr int64_t kBlock = 16384;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
  for (int64_t blockIndex = 0; blockIndex < blocks; ++blockIndex) {
    const int64_t begin = blockIndex * kBlock;
    const int64_t end = begin + kBlock < n ? begin + kBlock : n;
    switch (isa) {
    case CpuIsa::Avx512:
      avx512Range(param, grad, m, v, bf16Copy, begin, end, k);
      break;
    case CpuIsa::Avx2:
      avx2Range(param, grad, m, v, bf16Copy, begin, end, k);
      break;
    case CpuIsa::Scalar:
      scalarRange(param, grad, m, v, bf16Copy, begin, end, k);
      break;
    }
  }
}
