//===- ZeroOneAdam.cpp - DeepSpeed's 0/1 Adam step ------------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/ZeroOneAdam.h"

#include "dsc/Runtime/Communicator.h"
#include "dsc/Runtime/CompressedAllReduce.h"
#include "dsc/Runtime/OnebitAdam.h"

#include <algorithm>
#include <cmath>

using namespace dsc::rt;

namespace {

/// A hyper-parameter as torch makes it: the double, then f32.
float f32(double x) { return float(x); }

/// The errors, created as zeros at their padded lengths on first use.
void ensureErrors(ZeroOneAdamState &state, int64_t n, int64_t p) {
  const int64_t padded = onebitPaddedSize(n, p);
  if (state.workerError.size() != size_t(padded)) {
    state.workerError.assign(size_t(padded), 0.0f);
    state.serverError.assign(size_t(padded / p), 0.0f);
  }
}

/// Stage 1: the engine's gradient all-reduce (on a var step) or the
/// compressed gradient (otherwise) updates the moments.
void varOrOnebitMoments(Communicator &comm, const float *grad, int64_t n,
                        ZeroOneAdamState &state,
                        const ZeroOneAdamConfig &config) {
  const int64_t p = comm.size();
  float *m = state.expAvg.data(), *v = state.expAvgSq.data();
  std::vector<float> g(grad, grad + n);
  if (state.allReduceNext && p > 1) {
    comm.allReduce(g.data(), size_t(n), DType::F32, ReduceOp::Sum);
    const float inverse = 1.0f / float(p);
    for (float &x : g)
      x *= inverse;
  }
  if (state.step % state.varInterval == 0) {
    onebitAdamMoments(m, v, g.data(), n, config.beta1, config.beta2);
  } else if (p > 1) {
    compressedAllReduceUnpadded(comm, g.data(), n, state.workerError.data(),
                                state.serverError.data());
    adamMomentum(m, g.data(), n, config.beta1);
  }
}

/// Stage 1's variance policy after the update: var_interval doubles after
/// var_update_scaler var steps; the engine all-reduces before the next var
/// step only.
void advanceVarPolicy(ZeroOneAdamState &state,
                      const ZeroOneAdamConfig &config) {
  if (state.step % state.varInterval == 0) {
    if (++state.varCounter == config.varUpdateScaler) {
      state.varCounter = 0;
      state.varInterval *= 2;
    }
  }
  state.allReduceNext = (state.step + 1) % state.varInterval == 0;
}

/// The policy's counters after real step `state.step` (already counted):
/// stage 1's var_interval doubling and the engine's all-reduce flag, or
/// stage 2's local_step_interval doubling; past var_freeze_step, stage 2
/// for good. They depend on the step number alone.
void advancePolicy(ZeroOneAdamState &state, const ZeroOneAdamConfig &config) {
  if (!state.freezeKey) {
    advanceVarPolicy(state, config);
  } else if (++state.localStepCounter == config.localStepScaler) {
    state.localStepCounter = 0;
    state.localStepInterval =
        std::min(config.localStepClipper, 2 * state.localStepInterval);
  }
  if (state.step > config.varFreezeStep) {
    state.freezeKey = true;
    state.allReduceNext = false;
  }
}

} // namespace

const char *dsc::rt::zeroOneAdamStageName(ZeroOneAdamStage stage) {
  switch (stage) {
  case ZeroOneAdamStage::Var:
    return "var";
  case ZeroOneAdamStage::Onebit:
    return "onebit";
  case ZeroOneAdamStage::Sync:
    return "sync";
  case ZeroOneAdamStage::Local:
    return "local";
  }
  return "?";
}

ZeroOneAdamStage ZeroOneAdamState::nextStage() const {
  const int64_t s = step + 1;
  if (!freezeKey)
    return s % varInterval == 0 ? ZeroOneAdamStage::Var
                                : ZeroOneAdamStage::Onebit;
  return s % localStepInterval == 0 ? ZeroOneAdamStage::Sync
                                    : ZeroOneAdamStage::Local;
}

void dsc::rt::zeroOneAdamUpdate(float *params, float *accumulator,
                                const float *m, const float *v, int64_t n,
                                double lr, double eps, double weightDecay) {
  // Stage 1's update is 1-bit Adam's frozen-variance update, the kernel a
  // compiled plan's dsc.frozen_adam runs.
  if (!accumulator)
    return frozenAdamUpdate(params, m, v, n, lr, eps, weightDecay);
  const float e = f32(eps), negLr = f32(-lr), decay = f32(weightDecay);
  for (int64_t i = 0; i < n; ++i) {
    float update = m[i] / (std::sqrt(v[i]) + e);
    if (decay > 0) {
      const float decayed = decay * params[i];
      update = update + decayed;
    }
    const float step = negLr * update;
    params[i] = params[i] + step;
    accumulator[i] = accumulator[i] + step;
  }
}

void dsc::rt::zeroOneAdamRewind(float *params, float *accumulator,
                                const float *v, int64_t n, double eps) {
  const float e = f32(eps);
  for (int64_t i = 0; i < n; ++i) {
    params[i] += -accumulator[i];
    accumulator[i] *= std::sqrt(v[i]) + e;
  }
}

void dsc::rt::zeroOneAdamResync(float *params, float *m, float *accumulator,
                                const float *v, int64_t n, double lrs,
                                double eps) {
  const float e = f32(eps), sum = f32(lrs);
  for (int64_t i = 0; i < n; ++i) {
    m[i] = -(accumulator[i] / sum);
    params[i] += accumulator[i] / (std::sqrt(v[i]) + e);
    accumulator[i] = 0.0f;
  }
}

ZeroOneAdamStage dsc::rt::zeroOneAdamStageAt(int64_t step,
                                             const ZeroOneAdamConfig &config) {
  return ZeroOneAdamStageCursor(config).stageAt(step);
}

ZeroOneAdamStage ZeroOneAdamStageCursor::stageAt(int64_t step) {
  // Real step k's stage is nextStage() once k - 1 steps are counted
  // (counters.step == k: DeepSpeed's count is one ahead). The executor
  // also asks for the step just run (its gradient norm): answered from
  // the counters as they stand, not by a replay.
  if (step < counters.step)
    counters = ZeroOneAdamState();
  while (counters.step < step) {
    ++counters.step;
    advancePolicy(counters, config);
  }
  return counters.nextStage();
}

ZeroOneAdamStepReport
dsc::rt::zeroOneAdamStep(Communicator &comm, float *params, const float *grad,
                         int64_t n, ZeroOneAdamState &state,
                         const ZeroOneAdamConfig &config) {
  const size_t count = size_t(n);
  if (state.expAvg.size() != count) {
    state.expAvg.assign(count, 0.0f);
    state.expAvgSq.assign(count, 0.0f);
    state.momentumAccumulator.assign(count, 0.0f);
  }
  ensureErrors(state, n, comm.size());
  const ZeroOneAdamStage stage = state.nextStage();
  ZeroOneAdamStepReport report{stage, state.allReduceNext, 0.0};
  ++state.step;
  float *m = state.expAvg.data();
  const float *v = state.expAvgSq.data();
  if (!state.freezeKey) {
    varOrOnebitMoments(comm, grad, n, state, config);
    zeroOneAdamUpdate(params, nullptr, m, v, n, config.lr, config.eps,
                      config.weightDecay);
  } else {
    adamMomentum(m, grad, n, config.beta1);
    state.lrs += config.lr;
    report.lrs = state.lrs;
    zeroOneAdamUpdate(params, state.momentumAccumulator.data(), m, v, n,
                      config.lr, config.eps, config.weightDecay);
    if (stage == ZeroOneAdamStage::Sync) {
      // Rewind x by the interval's accumulated updates, average the
      // accumulator (scaled back to momentum units) over the ranks, and
      // re-estimate m and x from it.
      float *cb = state.momentumAccumulator.data();
      zeroOneAdamRewind(params, cb, v, n, config.eps);
      if (comm.size() > 1)
        compressedAllReduceUnpadded(comm, cb, n, state.workerError.data(),
                                    state.serverError.data());
      zeroOneAdamResync(params, m, cb, v, n, state.lrs, config.eps);
      state.lrs = 0;
    }
  }
  advancePolicy(state, config);
  // Stage 2's errors (they held the gradients') start from zero.
  if (state.freezeKey && !state.errorsReinitialized) {
    std::fill(state.workerError.begin(), state.workerError.end(), 0.0f);
    std::fill(state.serverError.begin(), state.serverError.end(), 0.0f);
    state.errorsReinitialized = true;
  }
  return report;
}
