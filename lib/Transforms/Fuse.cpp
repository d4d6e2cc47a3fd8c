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
  }

  /// A gradient written in place: matmul -> accumulate into a device state
  /// of the product's type becomes one matmul_accumulate at the
  /// accumulate's place (the operands dominate it: the matmul came before).
  void fuseGradientProduct(AccumulateOp acc, SymbolTableCollection &symbols) {
    auto product = acc.getValue().getDefiningOp<MatmulOp>();
    if (!product || !product->hasOneUse() ||
        product->getBlock() != acc->getBlock())
      return;
    auto state = symbols.lookupNearestSymbolFrom<StateOp>(acc, acc.getStateAttr());
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
