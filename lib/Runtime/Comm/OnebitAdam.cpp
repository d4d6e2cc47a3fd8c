//===- OnebitAdam.cpp - DeepSpeed's 1-bit Adam step -----------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/OnebitAdam.h"

#include "dsc/Runtime/CompressedAllReduce.h"
#include "dsc/Runtime/Communicator.h"

#include <cmath>

using namespace dsc::rt;

namespace {

/// A hyper-parameter as torch makes it: the value (or 1 − it) in double,
/// then f32.
float f32(double x) { return float(x); }

} // namespace

void dsc::rt::onebitAdamMoments(float *m, float *v, const float *g, int64_t n,
                                double beta1, double beta2) {
  adamMomentum(m, g, n, beta1);
  onebitAdamVariance(v, g, n, beta2);
}

void dsc::rt::onebitAdamVariance(float *v, const float *g, int64_t n,
                                 double beta2) {
  const float b2 = f32(beta2), oneMinusBeta2 = f32(1.0 - beta2);
  for (int64_t i = 0; i < n; ++i)
    v[i] = std::fma(oneMinusBeta2 * g[i], g[i], v[i] * b2);
}

void dsc::rt::adamMomentum(float *m, const float *g, int64_t n, double beta1) {
  const float b1 = f32(beta1), oneMinusBeta1 = f32(1.0 - beta1);
  for (int64_t i = 0; i < n; ++i)
    m[i] = std::fma(oneMinusBeta1, g[i], m[i] * b1);
}

void dsc::rt::frozenAdamUpdate(float *params, const float *m, const float *v,
                               int64_t n, double lr, double eps,
                               double weightDecay) {
  const float e = f32(eps), negLr = f32(-lr), decay = f32(weightDecay);
  // `update += wd * p` and `p.add_(-lr * update)`: torch multiplies into a
  // temporary, then adds (two roundings each, no fused multiply-add).
  for (int64_t i = 0; i < n; ++i) {
    float update = m[i] / (std::sqrt(v[i]) + e);
    if (decay > 0) {
      const float decayed = decay * params[i];
      update = update + decayed;
    }
    const float step = negLr * update;
    params[i] = params[i] + step;
  }
}

void dsc::rt::onebitAdamStep(Communicator &comm, float *params,
                             const float *grad, int64_t n,
                             OnebitAdamState &state,
                             const OnebitAdamConfig &config) {
  const int64_t p = comm.size();
  const size_t count = size_t(n);
  if (state.expAvg.size() != count) {
    state.expAvg.assign(count, 0.0f);
    state.expAvgSq.assign(count, 0.0f);
  }
  float *m = state.expAvg.data(), *v = state.expAvgSq.data();
  if (!state.compressesNext(config)) {
    std::vector<float> g(grad, grad + n);
    if (p > 1) {
      comm.allReduce(g.data(), count, DType::F32, ReduceOp::Sum);
      const float inverse = 1.0f / float(p);
      for (float &x : g)
        x *= inverse;
    }
    onebitAdamMoments(m, v, g.data(), n, config.beta1, config.beta2);
  } else {
    // The variance frozen, the momentum local; one rank has nothing to
    // communicate.
    adamMomentum(m, grad, n, config.beta1);
    if (p > 1) {
      const int64_t padded = onebitPaddedSize(n, p);
      if (state.workerError.size() != size_t(padded)) {
        state.workerError.assign(size_t(padded), 0.0f);
        state.serverError.assign(size_t(padded / p), 0.0f);
      }
      compressedAllReduceUnpadded(comm, m, n, state.workerError.data(),
                                  state.serverError.data());
    }
  }
  frozenAdamUpdate(params, m, v, n, config.lr, config.eps, config.weightDecay);
  ++state.steps;
}
