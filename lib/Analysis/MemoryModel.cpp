//===- MemoryModel.cpp - Model-state and activation memory ----------------===//
//
// Part of the dsc project.
//
//===----------------------------------------------------------------------===//
//
// Written term by term as in the papers (not simplified) so that a reader
// can check each against its source.
//
//===----------------------------------------------------------------------===//

#include "dsc/Analysis/MemoryModel.h"

using namespace mlir::dsc::analysis;

ModelStateBytes mlir::dsc::analysis::zeroModelStateBytes(double psi,
                                                         int zeroStage,
                                                         int64_t nd) {
  const double k = 12.0; // Adam: fp32 params, momentum, variance
  double n = static_cast<double>(nd < 1 ? 1 : nd);
  ModelStateBytes m;
  m.params = zeroStage >= 3 ? 2.0 * psi / n : 2.0 * psi;
  m.grads = zeroStage >= 2 ? 2.0 * psi / n : 2.0 * psi;
  m.optimizer = zeroStage >= 1 ? k * psi / n : k * psi;
  return m;
}

ModelStateBytes mlir::dsc::analysis::fp32ModelStateBytes(double psi,
                                                         int zeroStage,
                                                         int64_t nd) {
  double n = static_cast<double>(nd < 1 ? 1 : nd);
  ModelStateBytes m;
  m.params = zeroStage >= 3 ? 4.0 * psi / n : 4.0 * psi;
  m.grads = zeroStage >= 2 ? 4.0 * psi / n : 4.0 * psi;
  m.optimizer = zeroStage >= 1 ? 8.0 * psi / n : 8.0 * psi;
  return m;
}

double mlir::dsc::analysis::fp32ActivationBytesPerLayer(const ModelShape &model,
                                                        int64_t b, int64_t t,
                                                        bool sequenceParallel,
                                                        bool recompute) {
  double s = model.seqLength, h = model.hiddenSize;
  double sbh = s * static_cast<double>(b) * h, td = t < 1 ? 1 : t;
  if (recompute)
    return sequenceParallel ? 4.0 * sbh / td : 4.0 * sbh;
  if (sequenceParallel)
    return 64.0 * sbh / td;
  return sbh * (16.0 + 48.0 / td);
}

double mlir::dsc::analysis::activationBytesPerLayer(const ModelShape &model,
                                                    int64_t b, int64_t t,
                                                    bool sequenceParallel,
                                                    bool recompute) {
  double s = model.seqLength, h = model.hiddenSize, a = model.numHeads;
  double bd = b, td = t < 1 ? 1 : t;
  double sbh = s * bd * h;
  if (recompute)
    return sequenceParallel ? 2.0 * sbh / td : 2.0 * sbh;
  if (td == 1.0)
    return sbh * (34.0 + 5.0 * a * s / h);
  if (sequenceParallel)
    return sbh / td * (34.0 + 5.0 * a * s / h);
  return sbh * (10.0 + 24.0 / td + 5.0 * a * s / (h * td));
}

double mlir::dsc::analysis::moeActivationBytesPerLayer(const ModelShape &model,
                                                       int64_t b, int64_t t,
                                                       bool recompute,
                                                       bool fp32) {
  // Sequence parallelism is refused with MoE layers (CostModel::checkPlan).
  const double dense =
      fp32 ? fp32ActivationBytesPerLayer(model, b, t, false, recompute)
           : activationBytesPerLayer(model, b, t, false, recompute);
  if (recompute || model.numExperts <= 0)
    return dense;
  const double element = fp32 ? 4.0 : 2.0;
  const double td = t < 1 ? 1 : t;
  const double s = model.seqLength, h = model.hiddenSize, bd = b;
  const double f = model.ffnWidth();
  const double rows = double(model.numExperts) * double(model.moeCapacity) *
                      bd / double(model.microBatchSize);
  const double denseMlp = element * 8.0 * s * bd * h / td;
  const double experts =
      element * rows * (h + (model.gatedMlp ? 2.0 * f : f) + f);
  return dense - denseMlp + experts;
}
