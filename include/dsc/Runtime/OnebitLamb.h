//===- OnebitLamb.h - DeepSpeed's 1-bit LAMB step ---------------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// One step of DeepSpeed's OnebitLamb (deepspeed/runtime/fp16/onebit/lamb.py;
// Li et al. 2021) over T parameter tensors on one rank of the data-parallel
// group `comm`, as its engine runs it (the unfused FP16 wrapper: one fp32
// tensor per parameter, one empty step at construction, so real step k runs
// with DeepSpeed's state['step'] s = k + 1). The momenta live in one fused
// buffer [m_0 | ... | m_{T−1} | pad], padded to onebitPaddedSize(Σ n_t, p).
//
//   warm-up (real steps 1 .. max(1, freeze_step − 1)): the engine's exact
//   all-reduce g = (Σ_r g_r) / p, then per tensor LAMB
//     m = β1 m + (1 − β1) g,  v = β2 v + (1 − β2) g²   (vf = v at s = freeze)
//     u = m / (√v + ε) + wd·x;  c = clamp(‖x‖ / ‖u‖, min_coeff, max_coeff)
//     coeff_freeze = coeff_beta·coeff_freeze + (1 − coeff_beta)·c  (c ≠ 1)
//     x −= lr·c·u
//   compression (v frozen; each rank's own g_r):
//     first time: scaling_t = mean_t(rms(m_t)) / rms(m_t)
//     m_t = (β1 m_t + (1 − β1) g_t)·scaling_t; the fused buffer, pad
//     included (it keeps the last result there), is compressed-all-reduced
//     (p > 1); m_t /= scaling_t
//     ĝ = (m − β1 m_prev) / (1 − β1);  vf = β2 vf + (1 − β2) ĝ²
//     u = m / (√v + ε) + wd·x;  factor = max((√v + ε) / (√vf + ε)), blended
//     towards 1 by ‖u − wd·x‖ / ‖u‖ when wd > 0, clamped to [factor_min,
//     factor_max] and to ±factor_threshold of the last factor
//     x −= lr·(coeff_freeze·factor)·u
//
// No bias correction (coeff_freeze included), ε outside the root. Tensors
// are f32 with one rounding per torch operation (fma where torch's kernels
// fuse); what DeepSpeed keeps as Python doubles (coefficients, factors,
// scaling coefficients) stays double here. The 2-norms sum in f64 and round
// once. As the independent numpy reference (scripts/onebit-reference/
// README.md, "1-bit LAMB") lays it out; checked against its goldens
// (test/Runtime/Inputs/onebit/onebit-lamb.json) on 1, 2 and 4 ranks.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_ONEBITLAMB_H
#define DSC_RUNTIME_ONEBITLAMB_H

#include <cstddef>
#include <cstdint>
#include <vector>

namespace dsc::rt {

class Communicator;

/// OnebitLamb's constructor arguments, DeepSpeed's defaults.
struct OnebitLambConfig {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weightDecay = 0;
  int64_t freezeStep = 100000;
  double maxCoeff = 10.0, minCoeff = 0.01, coeffBeta = 0.9;
  double factorMax = 4.0, factorMin = 0.5, factorThreshold = 0.1;
};

/// One parameter tensor of a step: its values, this rank's gradient.
struct OnebitLambTensor {
  float *params;
  const float *grad;
  int64_t size;
};

/// A tensor's state besides its momentum (which is in the fused buffer).
struct OnebitLambTensorState {
  std::vector<float> expAvgSq, expAvgSqFresh;
  double lambCoeffFreeze = 0.0, lastFactor = 1.0;
  /// rms(m_t) at the first compression step, and mean_t(rms) / rms(m_t).
  double momentumScale = 0.0, scalingCoeff = 0.0;
};

/// A rank's state.
struct OnebitLambState {
  std::vector<OnebitLambTensorState> tensors;
  /// [m_0 | ... | m_{T−1} | pad]: the momenta and the pad that carries the
  /// last compressed all-reduce's output.
  std::vector<float> expAvgFlat;
  /// Tensor t's momentum starts at offsets[t]; offsets[T] = Σ n_t.
  std::vector<int64_t> offsets;
  /// The compressed all-reduce's errors: padded length and its chunk.
  std::vector<float> workerError, serverError;
  /// DeepSpeed's state['step']: 1 after the construction-time empty step.
  int64_t step = 1;
  /// The compression stage has begun (lamb_freeze_key); the scaling
  /// coefficients are set.
  bool freezeKey = false, scalingCoeffsSet = false;

  /// Tensor t's momentum in the fused buffer.
  float *expAvg(size_t t) { return expAvgFlat.data() + offsets[t]; }
};

/// What a step did: the stage, each tensor's coefficient (DeepSpeed's
/// lamb_coeffs) and, when compressing, its factor.
struct OnebitLambStepReport {
  bool compressed = false;
  std::vector<double> coeffs, factors;
};

/// A tensor's scalars as a compiled plan keeps them: an f64 [5] state
/// (DeepSpeed's Python doubles), indexed by these.
enum LambCoefficient : int {
  kLambCoeffFreeze = 0,
  kLambLastFactor = 1,
  kLambScalingCoeff = 2,
  kLambMomentumScale = 3,
  /// 1 once the compression phase's scaling coefficients are set.
  kLambFrozen = 4,
  kLambCoefficientCount = 5
};

/// The per-tensor kernels of the step, which the plan's OnebitLamb,
/// LambFreezeScale, LambScalingCoeffs, LambMomentum and FrozenLamb
/// instructions run (config's weightDecay is the tensor's).
///
/// A warm-up step of one tensor after the gradient's all-reduce: the
/// moments, the clamped trust ratio c (returned, and appended to `coeffs`
/// when non-null), coeffFreeze's average of it, x −= lr·c·u.
double onebitLambWarmup(float *x, float *m, float *v, const float *g, int64_t n,
                        double lr, double &coeffFreeze,
                        const OnebitLambConfig &config,
                        std::vector<double> *coeffs = nullptr);
/// rms(m) = ‖m‖₂ / √n, the first compression step's momentum scale.
double lambMomentumScale(const float *m, int64_t n);
/// The scaling coefficients: the scales' mean over each scale.
std::vector<double>
lambScalingCoeffs(const std::vector<double> &momentumScales);
/// last = m; m = (β1·m + (1−β1)·g)·scaling: the local momentum, scaled
/// for the fused compressed all-reduce.
void lambLocalMomentum(float *m, float *last, const float *g, int64_t n,
                       double beta1, double scalingCoeff);
/// After the compressed all-reduce: m /= scaling; the fresh variance from
/// the reconstructed gradient; the factor (returned; lastFactor becomes
/// it); x −= lr·(coeffFreeze·factor)·u.
double frozenLambUpdate(float *x, float *m, const float *last, const float *v,
                        float *vf, int64_t n, double lr, double coeffFreeze,
                        double scalingCoeff, double &lastFactor,
                        const OnebitLambConfig &config);

/// One step of the tensors (the same ones, in the same order, every step);
/// every rank of `comm` calls it.
OnebitLambStepReport onebitLambStep(Communicator &comm,
                                    const std::vector<OnebitLambTensor> &ts,
                                    OnebitLambState &state,
                                    const OnebitLambConfig &config);

} // namespace dsc::rt

#endif // DSC_RUNTIME_ONEBITLAMB_H
