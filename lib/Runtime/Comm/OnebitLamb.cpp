//===- OnebitLamb.cpp - DeepSpeed's 1-bit LAMB step -----------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/OnebitLamb.h"

#include "dsc/Runtime/Communicator.h"
#include "dsc/Runtime/CompressedAllReduce.h"
#include "dsc/Runtime/Error.h"
#include "dsc/Runtime/OnebitAdam.h"

#include <algorithm>
#include <cmath>
#include <string>

using namespace dsc::rt;

namespace {

/// A hyper-parameter as torch makes it: the double, then f32.
float f32(double x) { return float(x); }

/// ‖x‖₂ in f32, the sum of squares in f64 rounded once (as the reference).
float norm2(const float *x, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i)
    sum += double(x[i]) * double(x[i]);
  return float(std::sqrt(sum));
}

/// The fused buffer, its offsets, the per-tensor state and the errors, on
/// the first call; later calls must pass the same tensor sizes.
void ensureState(OnebitLambState &state,
                 const std::vector<OnebitLambTensor> &ts, int64_t p) {
  if (!state.offsets.empty()) {
    bool same = state.offsets.size() == ts.size() + 1;
    for (size_t t = 0; same && t < ts.size(); ++t)
      same = state.offsets[t + 1] - state.offsets[t] == ts[t].size;
    if (!same)
      throw Error("1-bit LAMB: the step's tensors differ from the state's");
    return;
  }
  state.offsets.assign(1, 0);
  state.tensors.resize(ts.size());
  for (size_t t = 0; t < ts.size(); ++t) {
    if (ts[t].size <= 0)
      throw Error("1-bit LAMB: tensor " + std::to_string(t) +
                  " is empty (DeepSpeed filters empty parameters out)");
    state.offsets.push_back(state.offsets.back() + ts[t].size);
    state.tensors[t].expAvgSq.assign(size_t(ts[t].size), 0.0f);
    state.tensors[t].expAvgSqFresh.assign(size_t(ts[t].size), 0.0f);
  }
  const int64_t padded = onebitPaddedSize(state.offsets.back(), p);
  state.expAvgFlat.assign(size_t(padded), 0.0f);
  state.workerError.assign(size_t(padded), 0.0f);
  state.serverError.assign(size_t(padded / p), 0.0f);
}

/// Element i of the update: u = f32(m / f32(√v + ε)), then f32(u +
/// f32(wd·x)) when wd > 0 (torch's `update += wd·p`). The kernels compute
/// it twice, for its norm and for the step, rather than keep a copy: the
/// same operations on the same values give the same floats.
inline float lambUpdateAt(const float *m, const float *v, const float *x,
                          int64_t i, float eps, float decay, bool decays) {
  float u = m[i] / (std::sqrt(v[i]) + eps);
  if (decays)
    u += decay * x[i];
  return u;
}

/// x = f32(x + f32(f32(−lr·c)·u)), −lr·c a Python double product.
void applyScaled(float *x, const float *m, const float *v, int64_t n, double lr,
                 double coeff, const OnebitLambConfig &config) {
  const float scale = f32(-lr * coeff), e = f32(config.eps),
              decay = f32(config.weightDecay);
  const bool decays = config.weightDecay > 0;
  for (int64_t i = 0; i < n; ++i)
    x[i] += scale * lambUpdateAt(m, v, x, i, e, decay, decays);
}

/// The factor from top = max((√v + ε) / (√vf + ε)), blended towards 1 by
/// the update norms' ratio (wd > 0), then clamped in DeepSpeed's order.
double clampedFactor(float top, float prelimNorm, float updateNorm,
                     double lastFactor, const OnebitLambConfig &config) {
  double factor = double(top);
  if (config.weightDecay > 0) {
    const double ratio = std::min(1.0, double(prelimNorm / updateNorm));
    factor = factor * ratio + (1.0 - ratio);
  }
  if (factor > config.factorMax)
    factor = config.factorMax;
  if (factor < config.factorMin)
    factor = config.factorMin;
  if (factor > lastFactor * (1.0 + config.factorThreshold))
    factor = lastFactor * (1.0 + config.factorThreshold);
  if (factor < lastFactor * (1.0 - config.factorThreshold))
    factor = lastFactor * (1.0 - config.factorThreshold);
  return factor;
}

/// A warm-up step: the engine's gradient mean (one bucket of all the
/// tensors), then LAMB with the clamped trust ratio per tensor.
void warmupStep(Communicator &comm, const std::vector<OnebitLambTensor> &ts,
                OnebitLambState &state, const OnebitLambConfig &config,
                OnebitLambStepReport &report) {
  const int64_t p = comm.size(), total = state.offsets.back();
  std::vector<float> g(static_cast<size_t>(total));
  for (size_t t = 0; t < ts.size(); ++t)
    std::copy(ts[t].grad, ts[t].grad + ts[t].size,
              g.begin() + state.offsets[t]);
  if (p > 1) {
    comm.allReduce(g.data(), g.size(), DType::F32, ReduceOp::Sum);
    const float inverse = 1.0f / float(p);
    for (float &x : g)
      x *= inverse;
  }
  for (size_t t = 0; t < ts.size(); ++t) {
    OnebitLambTensorState &s = state.tensors[t];
    onebitLambWarmup(ts[t].params, state.expAvg(t), s.expAvgSq.data(),
                     g.data() + state.offsets[t], ts[t].size, config.lr,
                     s.lambCoeffFreeze, config, &report.coeffs);
    if (state.step == config.freezeStep)
      s.expAvgSqFresh = s.expAvgSq;
  }
  if (state.step >= config.freezeStep)
    state.freezeKey = true;
}

/// A compression step: local momenta, scaled, compressed-all-reduced in the
/// fused buffer; the fresh variance from the reconstructed gradients sets
/// each tensor's factor of the frozen coefficient.
void compressionStep(Communicator &comm,
                     const std::vector<OnebitLambTensor> &ts,
                     OnebitLambState &state, const OnebitLambConfig &config,
                     OnebitLambStepReport &report) {
  const int64_t total = state.offsets.back();
  std::vector<float> last(static_cast<size_t>(total));
  if (!state.scalingCoeffsSet) {
    std::vector<double> scales;
    for (size_t t = 0; t < ts.size(); ++t)
      scales.push_back(lambMomentumScale(state.expAvg(t), ts[t].size));
    const std::vector<double> coeffs = lambScalingCoeffs(scales);
    for (size_t t = 0; t < ts.size(); ++t) {
      state.tensors[t].momentumScale = scales[t];
      state.tensors[t].scalingCoeff = coeffs[t];
    }
    state.scalingCoeffsSet = true;
  }
  for (size_t t = 0; t < ts.size(); ++t)
    lambLocalMomentum(state.expAvg(t), last.data() + state.offsets[t],
                      ts[t].grad, ts[t].size, config.beta1,
                      state.tensors[t].scalingCoeff);
  if (comm.size() > 1)
    compressedAllReduce(comm, state.expAvgFlat.data(), state.workerError.data(),
                        state.serverError.data(),
                        int64_t(state.expAvgFlat.size()));
  for (size_t t = 0; t < ts.size(); ++t) {
    OnebitLambTensorState &s = state.tensors[t];
    const double factor = frozenLambUpdate(
        ts[t].params, state.expAvg(t), last.data() + state.offsets[t],
        s.expAvgSq.data(), s.expAvgSqFresh.data(), ts[t].size, config.lr,
        s.lambCoeffFreeze, s.scalingCoeff, s.lastFactor, config);
    report.factors.push_back(factor);
    report.coeffs.push_back(s.lambCoeffFreeze * factor);
  }
}

} // namespace

double dsc::rt::onebitLambWarmup(float *x, float *m, float *v, const float *g,
                                 int64_t n, double lr, double &coeffFreeze,
                                 const OnebitLambConfig &config,
                                 std::vector<double> *coeffs) {
  onebitAdamMoments(m, v, g, n, config.beta1, config.beta2);
  const float weightNorm = norm2(x, n);
  const float e = f32(config.eps), decay = f32(config.weightDecay);
  const bool decays = config.weightDecay > 0;
  double sumU = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float u = lambUpdateAt(m, v, x, i, e, decay, decays);
    sumU += double(u) * double(u);
  }
  const float updateNorm = float(std::sqrt(sumU));
  double coeff = 1.0;
  if (weightNorm != 0 && updateNorm != 0) {
    coeff = double(weightNorm / updateNorm);
    coeff = std::min(coeff, config.maxCoeff);
    coeff = std::max(coeff, config.minCoeff);
  }
  if (coeff != 1.0)
    coeffFreeze =
        config.coeffBeta * coeffFreeze + (1 - config.coeffBeta) * coeff;
  if (coeffs)
    coeffs->push_back(coeff);
  applyScaled(x, m, v, n, lr, coeff, config);
  return coeff;
}

double dsc::rt::lambMomentumScale(const float *m, int64_t n) {
  return double(norm2(m, n) / f32(std::sqrt(double(n))));
}

std::vector<double>
dsc::rt::lambScalingCoeffs(const std::vector<double> &momentumScales) {
  double sum = 0;
  for (double scale : momentumScales)
    sum += scale;
  const double united = sum / double(momentumScales.size());
  std::vector<double> coeffs;
  for (double scale : momentumScales)
    coeffs.push_back(united / scale);
  return coeffs;
}

void dsc::rt::lambLocalMomentum(float *m, float *last, const float *g,
                                int64_t n, double beta1, double scalingCoeff) {
  std::copy(m, m + n, last);
  adamMomentum(m, g, n, beta1);
  const float scaling = f32(scalingCoeff);
  for (int64_t i = 0; i < n; ++i)
    m[i] *= scaling;
}

double dsc::rt::frozenLambUpdate(float *x, float *m, const float *last,
                                 const float *v, float *vf, int64_t n,
                                 double lr, double coeffFreeze,
                                 double scalingCoeff, double &lastFactor,
                                 const OnebitLambConfig &config) {
  const float b1 = f32(config.beta1), oneMinusBeta1 = f32(1.0 - config.beta1);
  const float b2 = f32(config.beta2), oneMinusBeta2 = f32(1.0 - config.beta2);
  const float e = f32(config.eps), decay = f32(config.weightDecay);
  const bool decays = config.weightDecay > 0;
  const float scaling = f32(scalingCoeff);
  // One pass for the momentum, the fresh variance, the largest ratio of
  // the denominators and the two norms; the step recomputes u.
  float top = -INFINITY;
  double sumPrelim = 0, sumU = 0;
  for (int64_t i = 0; i < n; ++i) {
    m[i] /= scaling;
    const float grad = (m[i] - last[i] * b1) / oneMinusBeta1;
    vf[i] = std::fma(oneMinusBeta2 * grad, grad, vf[i] * b2);
    const float denom = std::sqrt(v[i]) + e;
    const float prelim = m[i] / denom;
    const float u = decays ? prelim + decay * x[i] : prelim;
    top = std::max(top, denom / (std::sqrt(vf[i]) + e));
    sumPrelim += double(prelim) * double(prelim);
    sumU += double(u) * double(u);
  }
  const double factor =
      clampedFactor(top, float(std::sqrt(sumPrelim)), float(std::sqrt(sumU)),
                    lastFactor, config);
  lastFactor = factor;
  applyScaled(x, m, v, n, lr, coeffFreeze * factor, config);
  return factor;
}

OnebitLambStepReport dsc::rt::onebitLambStep(
    Communicator &comm, const std::vector<OnebitLambTensor> &ts,
    OnebitLambState &state, const OnebitLambConfig &config) {
  if (ts.empty())
    throw Error("1-bit LAMB: a step needs at least one tensor");
  ensureState(state, ts, comm.size());
  OnebitLambStepReport report;
  report.compressed = state.freezeKey;
  ++state.step;
  if (state.freezeKey)
    compressionStep(comm, ts, state, config, report);
  else
    warmupStep(comm, ts, state, config, report);
  return report;
}
