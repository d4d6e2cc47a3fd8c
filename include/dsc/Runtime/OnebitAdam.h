//===- OnebitAdam.h - DeepSpeed's 1-bit Adam step ---------------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// One step of DeepSpeed's OnebitAdam (deepspeed/runtime/fp16/onebit/adam.py)
// on one rank of the data-parallel group `comm`, as its engine runs it:
//
//   warm-up (real step k < freeze_step; DeepSpeed's optimizer wrapper takes
//   one empty step at construction, so its state's step is k + 1 - 1):
//     g = (Σ_r g_r) / p                      the engine's exact all-reduce
//     m = β1 m + (1 − β1) g,  v = β2 v + (1 − β2) g²
//   compression (k >= freeze_step; errors start at zero):
//     m = compressedAllReduce(β1 m + (1 − β1) g_r)     v frozen
//   both:  u = m / (√v + ε) (+ wd·x);  x −= lr·u     (no bias correction)
//
// One rank (p = 1) freezes the variance too but never compresses: DeepSpeed
// skips the all-reduce.
// Checked on 1, 2 and 4 ranks against the independent numpy reference's
// 20-step goldens (test/Runtime/Inputs/onebit/onebit-adam.json). This is
// the step's arithmetic; the compiler's 1-bit Adam (two step programs, the
// errors as checkpointed state) is docs/onebit.md's plan.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_ONEBITADAM_H
#define DSC_RUNTIME_ONEBITADAM_H

#include <cstdint>
#include <vector>

namespace dsc::rt {

class Communicator;

struct OnebitAdamConfig {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weightDecay = 0;
  int64_t freezeStep = 100000;
};

/// A rank's state: the moments, the compression's errors (padded length,
/// and its chunk of it), and the real steps taken.
struct OnebitAdamState {
  std::vector<float> expAvg, expAvgSq, workerError, serverError;
  int64_t steps = 0;
  /// Whether real step `steps + 1` compresses.
  bool compressesNext(const OnebitAdamConfig &c) const {
    return steps + 1 >= c.freezeStep;
  }
};

/// The kernels of the step (the plan's OnebitAdam, AdamMomentum and
/// FrozenAdam instructions), f32 with the hyper-parameters rounded as
/// torch rounds them:
/// m = β1·m + (1−β1)·g and v = β2·v + (1−β2)·g².
void onebitAdamMoments(float *m, float *v, const float *g, int64_t n,
                       double beta1, double beta2);
/// v = β2·v + (1−β2)·g² (onebitAdamMoments' v alone, for ZeRO's chunk).
void onebitAdamVariance(float *v, const float *g, int64_t n, double beta2);
/// m = β1·m + (1−β1)·g.
void adamMomentum(float *m, const float *g, int64_t n, double beta1);
/// params -= lr·(m/(sqrt(v) + eps) + wd·params).
void frozenAdamUpdate(float *params, const float *m, const float *v, int64_t n,
                      double lr, double eps, double weightDecay);

/// One step of `params` (n) with this rank's gradient `grad` (n).
void onebitAdamStep(Communicator &comm, float *params, const float *grad,
                    int64_t n, OnebitAdamState &state,
                    const OnebitAdamConfig &config);

} // namespace dsc::rt

#endif // DSC_RUNTIME_ONEBITADAM_H
