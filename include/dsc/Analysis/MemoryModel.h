//===- MemoryModel.h - Model-state and activation memory --------*- C++ -*-===//
//
// Part of the dsc project.
//
//===----------------------------------------------------------------------===//
//
// The closed forms of the ZeRO paper (model states under mixed-precision
// Adam) and of Korthikanti et al. 2022 (activations per transformer layer).
// Tests hold these to the papers' formulas exactly.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_ANALYSIS_MEMORYMODEL_H
#define DSC_ANALYSIS_MEMORYMODEL_H

#include "dsc/Analysis/ModelShape.h"

#include <cstdint>

namespace mlir::dsc::analysis {

/// Bytes of model states on one rank, split the way ZeRO partitions them:
/// fp16 parameters (2 Psi), fp16 gradients (2 Psi) and the K = 12 bytes per
/// parameter of Adam's fp32 master weights, momentum and variance.
struct ModelStateBytes {
  double params = 0;
  double grads = 0;
  double optimizer = 0;
  double total() const { return params + grads + optimizer; }
};

/// Rajbhandari et al. (SC'20), Fig. 1, for `psi` parameters on one model
/// replica partitioned over `nd` data-parallel ranks:
///   stage 0: 2 Psi + 2 Psi + 12 Psi
///   stage 1 (P_os):     2 Psi + 2 Psi + 12 Psi / Nd   = 4 Psi + 12 Psi/Nd
///   stage 2 (P_os+g):   2 Psi + (2 + 12) Psi / Nd     = 2 Psi + 14 Psi/Nd
///   stage 3 (P_os+g+p): (2 + 2 + 12) Psi / Nd         = 16 Psi/Nd
ModelStateBytes zeroModelStateBytes(double psi, int zeroStage, int64_t nd);

/// The same partitions of an fp32 plan as dsc compiles it (AdamW, no
/// master copy): 4 Psi parameters, 4 Psi gradients, 8 Psi momentum and
/// variance, each divided by Nd from the ZeRO stage that shards it.
ModelStateBytes fp32ModelStateBytes(double psi, int zeroStage, int64_t nd);

/// Activation bytes one transformer layer of an fp32 plan keeps, as dsc's
/// kernels keep them (docs/recompute.md): no dropout masks (drawn again in
/// the backward) and no s x s attention scores (the fused attention's
/// backward recomputes them), so selective recompute keeps what none does:
///   none, selective:           s b h (16 + 48/t)
///   with sequence parallelism: 64 s b h / t
///   full recompute:            4 s b h  (4 s b h / t with sequence par.)
double fp32ActivationBytesPerLayer(const ModelShape &model, int64_t b,
                                   int64_t t, bool sequenceParallel,
                                   bool recompute);

/// Activation bytes one transformer layer keeps for the backward of one
/// micro-batch (Korthikanti et al. 2022, "Reducing Activation Recomputation
/// in Large Transformer Models", Sec. 4), 16-bit activations, b sequences:
///   no parallelism:            s b h (34 + 5 a s / h)
///   tensor parallel t:         s b h (10 + 24/t + 5 a s / (h t))
///   tensor + sequence par. t:  s b h / t (34 + 5 a s / h)
///   full recompute:            2 s b h  (the layer input only;
///                              2 s b h / t with sequence parallelism)
/// With t == 1 the three non-recompute forms agree.
double activationBytesPerLayer(const ModelShape &model, int64_t b, int64_t t,
                               bool sequenceParallel, bool recompute);

/// Activation bytes one MoE layer keeps for the backward of one micro-batch
/// on one rank (docs/cost-model.md, "Mixture of Experts"): the dense
/// layer's form above (fp32's when `fp32`) with the dense MLP's sliced part
/// (its 4h hidden before and after the activation, 8 s b h / t elements)
/// replaced by the experts': the dispatched rows [E, C, h], their hidden
/// [E, C, 2f gated or f] and its activation [E, C, f], where C is the
/// capacity scaled from the model's micro-batch to b. Under expert
/// parallelism a rank holds [E/ep, ep C, .] of each, the same count, and
/// with tp every tp rank holds them whole. Full recompute keeps the layer's
/// input only, as a dense layer does. The router's logits and the layer's
/// dropout mask are the dense form's.
double moeActivationBytesPerLayer(const ModelShape &model, int64_t b, int64_t t,
                                  bool recompute, bool fp32);

} // namespace mlir::dsc::analysis

#endif // DSC_ANALYSIS_MEMORYMODEL_H
