//===- ZeroOneAdam.h - DeepSpeed's 0/1 Adam step ----------------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// One step of DeepSpeed's ZeroOneAdam (deepspeed/runtime/fp16/onebit/
// zoadam.py; Lu et al. 2022) on one rank of the data-parallel group `comm`,
// with the engine around it: the optimizer switches the engine's gradient
// all-reduce on and off (enable_backward_allreduce), so the step makes that
// all-reduce itself when DeepSpeed's engine would have. s is DeepSpeed's
// state['step'] during the step: its optimizer wrapper takes one empty step
// at construction, so real step k runs with s = k + 1.
//
//   stage 1 (real steps 1 .. max(1, var_freeze_step)), every step
//   communicates:
//     "var" step (s % var_interval == 0): g = (Σ_r g_r) / p, the engine's
//       exact all-reduce; m = β1 m + (1 − β1) g, v = β2 v + (1 − β2) g²
//     "onebit" step: m = β1 m + (1 − β1) compressedAllReduce(g_r)
//       (p = 1: m untouched — DeepSpeed guards the branch with size > 1)
//     x −= lr·(m / (√v + ε) + wd·x); var_interval doubles after every
//     var_update_scaler var steps
//   stage 2 (v frozen, errors zeroed once), each rank on its own x, m, cb:
//     m = β1 m + (1 − β1) g_r;  t = −lr·(m / (√v + ε) + wd·x);  x += t;
//     cb += t;  lrs += lr
//     "sync" step (s % local_step_interval == 0): x −= cb;
//       cb = compressedAllReduce(cb·(√v + ε));  m = −cb / lrs;
//       x += cb / (√v + ε);  cb = 0, lrs = 0
//     "local" step: nothing communicated. local_step_interval doubles
//     (capped at local_step_clipper) after every local_step_scaler steps.
//
// No bias correction, ε outside the root, weight decay in the update (so it
// leaks into the synced momentum). Ranks differ between syncs, and after a
// sync only by rounding. f32 arithmetic, one rounding per torch operation,
// fma where torch's kernels fuse (add_ with alpha, addcmul_), as the
// independent numpy reference (scripts/onebit-reference/README.md, "0/1
// Adam") lays it out; checked against its goldens
// (test/Runtime/Inputs/onebit/zero-one-adam.json) on 1, 2 and 4 ranks.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_ZEROONEADAM_H
#define DSC_RUNTIME_ZEROONEADAM_H

#include <cstdint>
#include <vector>

namespace dsc::rt {

class Communicator;

/// ZeroOneAdam's constructor arguments, DeepSpeed's defaults (32678 sic).
struct ZeroOneAdamConfig {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weightDecay = 0;
  int64_t varFreezeStep = 100000, varUpdateScaler = 16;
  int64_t localStepScaler = 32678, localStepClipper = 16;
};

/// What one step does: its communication follows from it.
enum class ZeroOneAdamStage {
  Var,    ///< the engine's exact gradient all-reduce; m and v updated
  Onebit, ///< a compressed all-reduce of the gradient; m updated
  Sync,   ///< a compressed all-reduce of the momentum accumulator
  Local,  ///< no communication
};

/// "var", "onebit", "sync", "local" (the reference's names).
const char *zeroOneAdamStageName(ZeroOneAdamStage stage);

/// A rank's state: DeepSpeed's per-parameter state (one flattened parameter
/// vector, as its fused FP16 wrapper keeps it) and the optimizer-wide and
/// engine-wide flags.
struct ZeroOneAdamState {
  std::vector<float> expAvg, expAvgSq;
  /// cb: Σ of the steps' −lr·update since the last sync (stage 2).
  std::vector<float> momentumAccumulator;
  /// The compressed all-reduce's errors: padded length and its chunk.
  std::vector<float> workerError, serverError;
  /// DeepSpeed's state['step']: 1 after the construction-time empty step.
  int64_t step = 1;
  int64_t varInterval = 1, varCounter = 0;
  int64_t localStepInterval = 1, localStepCounter = 0;
  /// Σ lr since the last sync (a Python double in DeepSpeed).
  double lrs = 0;
  /// Stage 2 has begun (freeze_key); the errors were zeroed for it.
  bool freezeKey = false, errorsReinitialized = false;
  /// The engine's enable_backward_allreduce: the next step's gradients are
  /// all-reduced first.
  bool allReduceNext = true;

  /// What real step `step` (the next one) will do.
  ZeroOneAdamStage nextStage() const;
};

/// What a step did, for tests and traces.
struct ZeroOneAdamStepReport {
  ZeroOneAdamStage stage;
  /// The gradients were all-reduced (the engine's flag).
  bool gradientAllReduced;
  /// lrs during the step: the divisor on a sync step, 0 in stage 1.
  double lrs;
};

/// x = f32(x + t) with t = f32(f32(−lr)·u), u = f32(m / f32(√v + ε)), plus
/// f32(wd·x) when wd > 0 (torch's separate `update += wd·p`, then
/// `p.add_(−lr·update)`); t is also added to `accumulator` when non-null.
void zeroOneAdamUpdate(float *params, float *accumulator, const float *m,
                       const float *v, int64_t n, double lr, double eps,
                       double weightDecay);

/// A stage-2 sync's halves, around the accumulator's compressed average:
/// x −= cb; cb ·= √v + ε (rewind), then m = −cb / lrs; x += cb / (√v + ε);
/// cb = 0 (resync).
void zeroOneAdamRewind(float *params, float *accumulator, const float *v,
                       int64_t n, double eps);
void zeroOneAdamResync(float *params, float *m, float *accumulator,
                       const float *v, int64_t n, double lrs, double eps);

/// The stage of real optimizer step `step` (1-based). DeepSpeed's counters
/// depend on the step number alone, never on the data, so a compiled plan
/// picks each step's program from this (Plan::zeroOneAdam). Replays the
/// counters from step 1: O(step); a run asks ZeroOneAdamStageCursor.
ZeroOneAdamStage zeroOneAdamStageAt(int64_t step,
                                    const ZeroOneAdamConfig &config);

/// zeroOneAdamStageAt remembering where it was: asked for steps in
/// increasing order, as a training run asks, it advances the counters from
/// the last step asked (O(1) a step); an earlier step replays from step 1.
class ZeroOneAdamStageCursor {
public:
  explicit ZeroOneAdamStageCursor(const ZeroOneAdamConfig &config)
      : config(config) {}
  ZeroOneAdamStage stageAt(int64_t step);

private:
  ZeroOneAdamConfig config;
  /// Only the policy's counters: state.step is the step before the next
  /// real one (nextStage()).
  ZeroOneAdamState counters;
};

/// One step of `params` (n) with this rank's gradient `grad` (n); every
/// rank of `comm` calls it.
ZeroOneAdamStepReport zeroOneAdamStep(Communicator &comm, float *params,
                                      const float *grad, int64_t n,
                                      ZeroOneAdamState &state,
                                      const ZeroOneAdamConfig &config);

} // namespace dsc::rt

#endif // DSC_RUNTIME_ZEROONEADAM_H
