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
  // The constants as torch makes them: the difference in double, then f32.
  const float beta1 = float(config.beta1), beta2 = float(config.beta2);
  const float oneMinusBeta1 = float(1.0 - config.beta1);
  const float oneMinusBeta2 = float(1.0 - config.beta2);
  const float eps = float(config.eps), negLr = float(-config.lr);
  const float decay = float(config.weightDecay);
  std::vector<float> &m = state.expAvg, &v = state.expAvgSq;
  if (!state.compressesNext(config)) {
    std::vector<float> g(grad, grad + n);
    if (p > 1) {
      comm.allReduce(g.data(), count, DType::F32, ReduceOp::Sum);
      const float inverse = 1.0f / float(p);
      for (float &x : g)
        x *= inverse;
    }
    for (size_t i = 0; i < count; ++i) {
      m[i] = std::fma(oneMinusBeta1, g[i], m[i] * beta1);
      v[i] = std::fma(oneMinusBeta2 * g[i], g[i], v[i] * beta2);
    }
  } else if (p == 1) {
    // The variance frozen, the momentum local: nothing to communicate.
    for (size_t i = 0; i < count; ++i)
      m[i] = std::fma(oneMinusBeta1, grad[i], m[i] * beta1);
  } else {
    const int64_t padded = onebitPaddedSize(n, p);
    if (state.workerError.size() != size_t(padded)) {
      state.workerError.assign(size_t(padded), 0.0f);
      state.serverError.assign(size_t(padded / p), 0.0f);
    }
    std::vector<float> local(size_t(padded), 0.0f);
    for (size_t i = 0; i < count; ++i)
      local[i] = std::fma(oneMinusBeta1, grad[i], m[i] * beta1);
    compressedAllReduce(comm, local.data(), state.workerError.data(),
                        state.serverError.data(), padded);
    std::copy(local.begin(), local.begin() + n, m.begin());
  }
  for (size_t i = 0; i < count; ++i) {
    float update = m[i] / (std::sqrt(v[i]) + eps);
    if (decay > 0)
      update = std::fma(decay, params[i], update);
    params[i] = std::fma(negLr, update, params[i]);
  }
  ++state.steps;
}
