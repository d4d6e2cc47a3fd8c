//===- MixedPrecision.cpp - --dsc-mixed-precision ---------------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// bf16 mixed precision on the forward graph, before autodiff: the master
// weights stay f32 and each read of one is cast to bf16; everything the
// graph computes from them is bf16 except the loss. Autodiff then casts
// each weight's bf16 gradient back to f32 (the cast's VJP) before it is
// accumulated, so gradient states, their collectives and the optimizer
// stay f32.
//
//   %w = dsc.get_parameter @h.0.mlp.fc.weight : tensor<64x256xf32>
//   %y = dsc.matmul %x, %w : tensor<2x8x64xf32>, tensor<64x256xf32>
//       -> tensor<2x8x256xf32>
//   ...
//   %l = dsc.cross_entropy %logits, %t : tensor<2x8x256xf32>, ... -> tensor<f32>
// becomes
//   %w = dsc.get_parameter @h.0.mlp.fc.weight : tensor<64x256xf32>
//   %wb = dsc.cast %w : tensor<64x256xf32> to tensor<64x256xbf16>
//   %y = dsc.matmul %x, %wb : tensor<2x8x64xbf16>, tensor<64x256xbf16>
//       -> tensor<2x8x256xbf16>
//   ...
//   %l = dsc.cross_entropy %logits, %t : tensor<2x8x256xbf16>, ... -> tensor<f32>
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscAttrNames.h"
#include "dsc/Dialect/Dsc/IR/DscOps.h"
#include "dsc/Dialect/Dsc/IR/DscPrograms.h"
#include "dsc/Transforms/Passes.h"
#include "dsc/Transforms/TransformerLayers.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCMIXEDPRECISIONPASS
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

/// `type` with element type `low` when it is an f32 ranked tensor, else
/// null: only f32 is lowered (f64 graphs are the gradient checks').
RankedTensorType lowered(Type type, Type low) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.getElementType().isF32())
    return {};
  return RankedTensorType::get(tensor.getShape(), low, tensor.getEncoding());
}

/// `type` with f32 elements (a lowered value's original type).
RankedTensorType widened(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  return RankedTensorType::get(tensor.getShape(),
                               Float32Type::get(type.getContext()),
                               tensor.getEncoding());
}

/// The constant `dense` converted to `type`'s element type, rounding to
/// nearest even as the runtime's cast does.
DenseElementsAttr convertConstant(DenseFPElementsAttr dense,
                                  RankedTensorType type) {
  const llvm::fltSemantics &semantics =
      cast<FloatType>(type.getElementType()).getFloatSemantics();
  auto convert = [&](APFloat value) {
    bool losesInfo = false;
    value.convert(semantics, APFloat::rmNearestTiesToEven, &losesInfo);
    return value;
  };
  if (dense.isSplat())
    return DenseElementsAttr::get(type,
                                  convert(dense.getSplatValue<APFloat>()));
  SmallVector<APFloat> values;
  for (APFloat value : dense.getValues<APFloat>())
    values.push_back(convert(value));
  return DenseElementsAttr::get(type, values);
}

struct DscMixedPrecisionPass
    : mlir::dsc::impl::DscMixedPrecisionPassBase<DscMixedPrecisionPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    StringRef requested = dtype;
    // fp16's 5-bit exponent underflows small gradients: the runtime
    // scales an f16 plan's loss dynamically (Executor, DeepSpeed's
    // DynamicLossScaler), which the plan's f16 buffers call for.
    const bool half =
        requested == "f16" || requested == "fp16" || requested == "float16";
    if (!half && requested != "bf16") {
      module.emitError("--dsc-mixed-precision: unknown compute dtype '")
          << requested << "'; the supported ones are bf16 and f16";
      return signalPassFailure();
    }
    for (auto func : module.getOps<func::FuncOp>())
      if (getProgramRole(func) == ProgramRole::ForwardBackward) {
        func.emitError("--dsc-mixed-precision runs on the forward graph, "
                       "before --dsc-autodiff, but the module has @")
            << func.getSymName()
            << " already; run it before autodiff (--dsc-compile "
               "\"precision=bf16\" does)";
        return signalPassFailure();
      }
    Type low = half ? Type(Float16Type::get(&getContext()))
                    : Type(BFloat16Type::get(&getContext()));
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal() && failed(convert(func, low)))
        return signalPassFailure();
  }

  LogicalResult convert(func::FuncOp func, Type low) {
    if (!func.getBody().hasOneBlock())
      return func.emitError("--dsc-mixed-precision: @")
             << func.getSymName() << " must have a single block";
    Block &block = func.getBody().front();
    // Refused before anything is rewritten: a half-converted function (its
    // arguments cast, their uses inside a region replaced) must not reach
    // the error path.
    for (Operation &op : block)
      if (op.getNumRegions())
        return op.emitOpError("--dsc-mixed-precision: cannot convert an op "
                              "with regions; the pass runs on a flat "
                              "forward graph");
    // A pipeline stage's activation crosses to the next stage in bf16, as
    // Megatron-LM sends it; other functions keep their signature.
    bool stage = func->hasAttr(kStageAttr);
    // Values this pass made low precision (their original type was f32).
    llvm::DenseSet<Value> low16;
    OpBuilder b(func.getContext());
    // A cast made for an op sits at its location and in its transformer
    // layer.
    auto castTo = [&](Value value, Type type, Location loc,
                      Operation *source = nullptr) -> Value {
      ++numCasts;
      auto cast = CastOp::create(b, loc, type, value);
      if (source)
        inheritTransformerLayer(source, cast);
      return cast;
    };

    b.setInsertionPointToStart(&block);
    for (BlockArgument arg : block.getArguments()) {
      RankedTensorType type = lowered(arg.getType(), low);
      if (!type)
        continue;
      if (stage) {
        arg.setType(type);
        low16.insert(arg);
        ++numLowered;
        continue;
      }
      Value cast = castTo(arg, type, arg.getLoc());
      arg.replaceAllUsesExcept(cast, cast.getDefiningOp());
      low16.insert(cast);
    }

    SmallVector<Operation *> ops;
    for (Operation &op : block)
      ops.push_back(&op);
    for (Operation *op : ops) {
      // A master weight is read in f32 and used in bf16. Read through a
      // copy_to_parallel (sequence parallelism's region parameters), the
      // cast follows the copy, so that the copy's backward sums the
      // gradient over tp in f32, as Megatron-LM sums its main grads.
      if (isa<GetParameterOp, GatherParameterOp>(op)) {
        Value read = op->getResult(0);
        if (read.hasOneUse())
          if (auto enter = dyn_cast<CopyToParallelOp>(*read.getUsers().begin()))
            read = enter.getResult();
        RankedTensorType type = lowered(read.getType(), low);
        if (!type || read.use_empty())
          continue;
        b.setInsertionPointAfterValue(read);
        Value cast = castTo(read, type, op->getLoc(), op);
        read.replaceAllUsesExcept(cast, cast.getDefiningOp());
        low16.insert(cast);
        continue;
      }
      if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
        auto dense = dyn_cast<DenseFPElementsAttr>(constant.getValue());
        RankedTensorType type = lowered(constant.getType(), low);
        if (!dense || !type)
          continue;
        constant.setValueAttr(convertConstant(dense, type));
        constant.getResult().setType(type);
        low16.insert(constant.getResult());
        ++numLowered;
        continue;
      }
      // Explicit casts (the pass's own, or the user's) stay as written.
      if (isa<CastOp>(op))
        continue;
      if (stage && isa<func::ReturnOp>(op))
        continue; // The signature follows the returned types below.

      bool anyLowOperand = llvm::any_of(
          op->getOperands(), [&](Value v) { return low16.contains(v); });
      bool anyF32Operand = llvm::any_of(op->getOperands(), [&](Value v) {
        return static_cast<bool>(lowered(v.getType(), low));
      });
      if (!isa<DscDialect>(op->getDialect()) || isa<func::ReturnOp>(op)) {
        // A consumer outside the graph's vocabulary (or a non-stage
        // function's result) gets the f32 it was written for.
        b.setInsertionPoint(op);
        llvm::DenseMap<Value, Value> wide;
        for (OpOperand &operand : op->getOpOperands()) {
          Value value = operand.get();
          if (!low16.contains(value))
            continue;
          Value &cast = wide[value];
          if (!cast)
            cast = castTo(value, widened(value.getType()), op->getLoc(), op);
          operand.set(cast);
        }
        continue;
      }
      // An MoE router decides in f32 (Mixtral's and Megatron-LM's
      // routers do): its logits are widened, and its gates (cast to the
      // rows' type where they are combined) and auxiliary loss stay f32.
      if (isa<MoeRouteOp>(op)) {
        b.setInsertionPoint(op);
        Value logits = op->getOperand(0);
        if (low16.contains(logits))
          op->setOperand(0, castTo(logits, widened(logits.getType()),
                                   op->getLoc(), op));
        continue;
      }
      // A graph op on f32 values only (arithmetic on the f32 loss) stays
      // f32; one with a bf16 operand computes in bf16, so an f32 operand
      // from outside the graph is cast first.
      if (anyF32Operand && !anyLowOperand)
        continue;
      b.setInsertionPoint(op);
      llvm::DenseMap<Value, Value> narrow;
      for (OpOperand &operand : op->getOpOperands()) {
        Value value = operand.get();
        RankedTensorType type = lowered(value.getType(), low);
        if (!type)
          continue;
        Value &cast = narrow[value];
        if (!cast) {
          cast = castTo(value, type, op->getLoc(), op);
          low16.insert(cast);
        }
        operand.set(cast);
      }
      // The loss takes bf16 logits and stays an f32 scalar: its log-sum-exp
      // and mean are accumulated in f32, and it seeds the backward.
      if (isa<CrossEntropyOp, VocabParallelCrossEntropyOp>(op))
        continue;
      for (OpResult result : op->getResults())
        if (RankedTensorType type = lowered(result.getType(), low)) {
          result.setType(type);
          low16.insert(result);
          ++numLowered;
        }
    }

    if (stage) {
      Operation *ret = block.getTerminator();
      func.setFunctionType(FunctionType::get(func.getContext(),
                                             block.getArgumentTypes(),
                                             ret->getOperandTypes()));
    }
    return success();
  }
};

} // namespace
