//===- Optimizer.cpp - AdamW, SGD and global grad-norm clipping -----------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Optimizer updates over flat (possibly ZeRO-sharded) buffers, matching
// torch.optim's formulas, and a grad-norm reduction with a fixed order.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/CpuKernels.h"

#include "KernelSupport.h"

#include <cmath>
#include <utility>
#include <vector>

using namespace dsc::rt;

template <typename T>
void dsc::rt::adamwStep(T *param, const T *grad, T *m, T *v, int64_t n,
                        const AdamWConfig &cfg, int64_t step, bool decay) {
  // Same operation order as torch.optim.AdamW's single-tensor path:
  // p *= 1 - lr*wd; m, v update; p -= (lr/bc1) * m / (sqrt(v)/sqrt(bc2) + eps).
  const double bc1 = 1.0 - std::pow(cfg.beta1, double(step));
  const double bc2 = 1.0 - std::pow(cfg.beta2, double(step));
  const T decayMul = T(decay ? 1.0 - cfg.lr * cfg.weightDecay : 1.0);
  const T b1 = T(cfg.beta1), b2 = T(cfg.beta2);
  const T c1 = T(1.0 - cfg.beta1), c2 = T(1.0 - cfg.beta2);
  const T stepSize = T(cfg.lr / bc1), invSqrtBc2 = T(1.0 / std::sqrt(bc2));
  const T eps = T(cfg.eps);
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    T g = grad[i];
    T p = param[i] * decayMul;
    T mi = b1 * m[i] + c1 * g;
    T vi = b2 * v[i] + c2 * g * g;
    m[i] = mi;
    v[i] = vi;
    param[i] = p - stepSize * mi / (std::sqrt(vi) * invSqrtBc2 + eps);
  }
}

template <typename T>
void dsc::rt::sgdStep(T *param, const T *grad, T *momentumBuf, int64_t n,
                      const SgdConfig &cfg) {
  const T lr = T(cfg.lr), mu = T(cfg.momentum), wd = T(cfg.weightDecay);
  const bool nesterov = cfg.nesterov;
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    T g = grad[i] + wd * param[i];
    T buf = mu * momentumBuf[i] + g;
    momentumBuf[i] = buf;
    param[i] -= lr * (nesterov ? g + mu * buf : buf);
  }
}

template <typename T>
double dsc::rt::sumOfSquares(const T *const *buffers, const int64_t *sizes,
                             int count) {
  constexpr int64_t kBlock = 4096;
  std::vector<std::pair<const T *, int64_t>> blocks;
  for (int b = 0; b < count; ++b)
    for (int64_t o = 0; o < sizes[b]; o += kBlock)
      blocks.emplace_back(buffers[b] + o,
                          sizes[b] - o < kBlock ? sizes[b] - o : kBlock);
  std::vector<double> partial(blocks.size());
  const int64_t nb = int64_t(blocks.size());
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < nb; ++i) {
    const T *p = blocks[i].first;
    const int64_t len = blocks[i].second;
    double s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < len; ++j)
      s += double(p[j]) * double(p[j]);
    partial[i] = s;
  }
  double total = 0;
  for (double s : partial)
    total += s;
  return total;
}

double dsc::rt::clipScale(double globalNorm, double maxNorm) {
  // torch.nn.utils.clip_grad_norm_: coef = max_norm / (norm + 1e-6), clamped
  // to 1. A non-finite norm is returned as is, so the caller can skip the step.
  if (!std::isfinite(globalNorm))
    return globalNorm;
  double coef = maxNorm / (globalNorm + 1e-6);
  return coef < 1.0 ? coef : 1.0;
}

#define INSTANTIATE(T)                                                         \
  template void dsc::rt::adamwStep<T>(T *, const T *, T *, T *, int64_t,       \
                                      const AdamWConfig &, int64_t, bool);     \
  template void dsc::rt::sgdStep<T>(T *, const T *, T *, int64_t,              \
                                    const SgdConfig &);                        \
  template double dsc::rt::sumOfSquares<T>(const T *const *, const int64_t *,  \
                                           int);
DSC_RT_INSTANTIATE_FLOAT_DOUBLE(INSTANTIATE)
