//===- Fuse.cpp - --dsc-fuse ----------------------------------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Chains of ops the runtime runs as one instruction, rewritten in the IR so
// that the plan (and its tests) show what runs. Each rule says what may fuse
// and what must not (Passes.td's description); autodiff saw the unfused ops.
//
// Rules:
//
// - A weight's gradient product accumulated into its device state:
//
//     %gw = dsc.matmul %x, %dy {transpose_lhs}     dsc.matmul_accumulate
//     dsc.accumulate %gw into @grad.w        =>      %x, %dy {transpose_lhs}
//                                                    into @grad.w
//
// - Megatron-LM's bias_gelu: a bias add read only by a GELU and by that
//   GELU's gradient (a dense MLP's fc after --dsc-autodiff) becomes a fused
//   forward and a backward that recomputes the sum from the product and the
//   bias, so the sum is neither written nor kept from the forward to the
//   backward (the product is kept instead, as Megatron keeps it):
//
//     %ba = dsc.bias_add %mm, %b                  %g = dsc.bias_gelu %mm, %b
//     %g = dsc.gelu %ba                     =>    ...
//     ...                                         %dx = dsc.bias_gelu_grad
//     %dx = dsc.gelu_grad %ba, %dy                       %mm, %b, %dy
//
//   Both users in the bias add's block (one program: the forward_backward
//   of a step or of a pipeline's last stage), both `exact` or both not. A
//   bias add read by the GELU alone fuses into bias_gelu too (a forward
//   program's, a forward_backward's whose backward reads a recomputed
//   clone): a training program then still begins with its forward
//   program's ops, which --dsc-plan-summary's FLOP count relies on.
//   The pass runs after the passes that move values between programs, so
//   it sees where each sum is read: --dsc-stage-backward's forward returns
//   the sum to its backward, which receives it as an argument (the return
//   is another user: not fused); --dsc-recompute's backward reads a clone
//   of the sum (the clone's users are the recomputed GELU and the gradient
//   under full recompute: fused as a pair). Not fused: a sum read by
//   anything else (it must exist), a gradient without its GELU (nothing
//   to save), GELUs of different forms. The sum is rounded to the element
//   type in both fused kernels as bias_add rounds it, so the CPU results
//   are those of the unfused ops bit for bit.
//
// - Attention's saved statistics: a dsc.attention_grad whose forward (a
//   dsc.attention of the same q, k, v and attributes) comes before it in
//   its block becomes dsc.attention_grad_lse, reading the forward's output
//   and its rows' logsumexp, which the forward (now dsc.attention_lse)
//   writes as it computes them, instead of computing them again:
//
//     %o = dsc.attention %q, %k, %v           %o, %lse = dsc.attention_lse
//     ...                               =>        %q, %k, %v
//     %dq, %dk, %dv = dsc.attention_grad      ...
//         %q, %k, %v, %do                     %dq, %dk, %dv =
//                                               dsc.attention_grad_lse
//                                               %q, %k, %v, %do, %o, %lse
//
//   The latest such forward before the gradient pairs with it (under
//   recompute, the clone the backward runs). The logsumexp is [batch,
//   heads, seq] (f32; f64 for f64 operands), a head's sequence of floats;
//   the output stays live from the forward to the gradient (the attention
//   projection's backward reads it before anyway). Not fused: a forward in
//   another block (--dsc-stage-backward's forward program, whose results
//   its backward receives), a gradient without its forward. On CUDA the
//   backward no longer runs the forward again; the CPU kernels keep
//   normalizing the backward's rows themselves (bit for bit the unfused
//   program's results).
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscOps.h"
#include "dsc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCFUSEPASS
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

struct DscFusePass : mlir::dsc::impl::DscFusePassBase<DscFusePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTableCollection symbols;
    SmallVector<AccumulateOp> accumulates;
    module.walk([&](AccumulateOp acc) { accumulates.push_back(acc); });
    for (AccumulateOp acc : accumulates)
      fuseGradientProduct(acc, symbols);
    SmallVector<BiasAddOp> biasAdds;
    module.walk([&](BiasAddOp add) { biasAdds.push_back(add); });
    for (BiasAddOp add : biasAdds)
      fuseBiasGelu(add);
    SmallVector<AttentionGradOp> attentionGrads;
    module.walk([&](AttentionGradOp grad) { attentionGrads.push_back(grad); });
    for (AttentionGradOp grad : attentionGrads)
      fuseAttentionStatistics(grad);
  }

  /// The attention whose gradient `grad` is: the latest dsc.attention
  /// before it in its block with its q, k, v and attributes.
  static AttentionOp forwardOf(AttentionGradOp grad) {
    for (Operation *op = grad->getPrevNode(); op; op = op->getPrevNode()) {
      auto fwd = dyn_cast<AttentionOp>(op);
      if (fwd && fwd.getQuery() == grad.getQuery() &&
          fwd.getKey() == grad.getKey() && fwd.getValue() == grad.getValue() &&
          fwd.getNumHeadsAttr() == grad.getNumHeadsAttr() &&
          fwd.getCausal() == grad.getCausal() &&
          fwd.getDropoutAttr() == grad.getDropoutAttr() &&
          fwd.getSeedAttr() == grad.getSeedAttr() &&
          fwd.getHeadAxesAttr() == grad.getHeadAxesAttr() &&
          fwd.getWindowAttr() == grad.getWindowAttr())
        return fwd;
    }
    return {};
  }

  /// Attention's saved statistics: the forward writes its logsumexp, the
  /// gradient reads it and the output (each at its op's place).
  void fuseAttentionStatistics(AttentionGradOp grad) {
    AttentionOp fwd = forwardOf(grad);
    if (!fwd)
      return;
    RankedTensorType query = tensorOf(fwd.getQuery());
    Type element = query.getElementType().isF64()
                       ? Type(Float64Type::get(fwd.getContext()))
                       : Type(Float32Type::get(fwd.getContext()));
    auto lseType = RankedTensorType::get(
        {query.getDimSize(0), fwd.getNumHeads(), query.getDimSize(1)}, element);
    OpBuilder b(fwd);
    auto forward = AttentionLseOp::create(
        b, fwd.getLoc(), fwd.getType(), lseType, fwd.getQuery(), fwd.getKey(),
        fwd.getValue(), fwd.getNumHeadsAttr(), fwd.getCausalAttr(),
        fwd.getDropoutAttr(), fwd.getSeedAttr(), fwd.getHeadAxesAttr(),
        fwd.getWindowAttr());
    for (NamedAttribute attr : fwd->getDiscardableAttrs())
      forward->setAttr(attr.getName(), attr.getValue());
    fwd.replaceAllUsesWith(forward.getResult());
    fwd.erase();
    b.setInsertionPoint(grad);
    auto backward = AttentionGradLseOp::create(
        b, grad.getLoc(), grad.getResultTypes(), grad.getQuery(), grad.getKey(),
        grad.getValue(), grad.getGrad(), forward.getResult(), forward.getLse(),
        grad.getNumHeadsAttr(), grad.getCausalAttr(), grad.getDropoutAttr(),
        grad.getSeedAttr(), grad.getHeadAxesAttr(), grad.getWindowAttr());
    for (NamedAttribute attr : grad->getDiscardableAttrs())
      backward->setAttr(attr.getName(), attr.getValue());
    grad.replaceAllUsesWith(backward.getResults());
    grad.erase();
    ++numFused;
  }

  /// Megatron's bias_gelu: the sum's only users are one gelu and its
  /// gelu_grad (as input, not as the incoming gradient), in the sum's
  /// block, of one form; or the gelu alone. The fused forward takes the
  /// gelu's place, the fused backward the gelu_grad's (the product and the
  /// bias dominate both: they come before the sum).
  void fuseBiasGelu(BiasAddOp add) {
    Value sum = add.getResult();
    GeluOp gelu;
    GeluGradOp grad;
    for (OpOperand &use : sum.getUses()) {
      Operation *user = use.getOwner();
      if (user->getBlock() != add->getBlock())
        return;
      if (auto g = dyn_cast<GeluOp>(user); g && !gelu) {
        gelu = g;
        continue;
      }
      if (auto gg = dyn_cast<GeluGradOp>(user);
          gg && !grad && use.getOperandNumber() == 0 && gg.getGrad() != sum) {
        grad = gg;
        continue;
      }
      return;
    }
    if (!gelu || (grad && gelu.getExact() != grad.getExact()))
      return;
    OpBuilder b(gelu);
    auto forward =
        BiasGeluOp::create(b, gelu.getLoc(), gelu.getType(), add.getInput(),
                           add.getBias(), gelu.getExactAttr());
    copyDiscardableAttrs(add, gelu, forward);
    gelu.replaceAllUsesWith(forward.getResult());
    gelu.erase();
    ++numFused;
    if (!grad) {
      add.erase();
      return;
    }
    b.setInsertionPoint(grad);
    auto backward = BiasGeluGradOp::create(b, grad.getLoc(), grad.getType(),
                                           add.getInput(), add.getBias(),
                                           grad.getGrad(), grad.getExactAttr());
    copyDiscardableAttrs(add, grad, backward);
    grad.replaceAllUsesWith(backward.getResult());
    grad.erase();
    add.erase();
  }

  /// The layer (traces, recompute) and any other discardable attribute of
  /// the ops fused into `fused`, the later op's winning.
  static void copyDiscardableAttrs(Operation *first, Operation *second,
                                   Operation *fused) {
    for (Operation *op : {first, second})
      for (NamedAttribute attr : op->getDiscardableAttrs())
        fused->setAttr(attr.getName(), attr.getValue());
  }

  /// A gradient written in place: matmul -> accumulate into a device state
  /// of the product's type becomes one matmul_accumulate at the
  /// accumulate's place (the operands dominate it: the matmul came before).
  void fuseGradientProduct(AccumulateOp acc, SymbolTableCollection &symbols) {
    auto product = acc.getValue().getDefiningOp<MatmulOp>();
    if (!product || !product->hasOneUse() ||
        product->getBlock() != acc->getBlock())
      return;
    auto state =
        symbols.lookupNearestSymbolFrom<StateOp>(acc, acc.getStateAttr());
    if (!state || state.getTier() != MemoryTier::Device ||
        state.getType() != product.getType())
      return;
    OpBuilder b(acc);
    auto fused = MatmulAccumulateOp::create(
        b, acc.getLoc(), product.getLhs(), product.getRhs(),
        product.getTransposeLhsAttr(), product.getTransposeRhsAttr(),
        acc.getStateAttr());
    // The product's layer and name go with it (traces, recompute).
    for (NamedAttribute attr : product->getDiscardableAttrs())
      fused->setAttr(attr.getName(), attr.getValue());
    fused->setLoc(product.getLoc());
    acc.erase();
    product.erase();
    ++numFused;
  }
};

} // namespace
