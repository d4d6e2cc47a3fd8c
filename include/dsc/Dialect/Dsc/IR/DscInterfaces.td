//===- DscInterfaces.td - dsc op interfaces ----------------*- tablegen -*-===//
//
// Interfaces shared by the graph ops: a cost interface (FLOPs and bytes from
// the op's types) and a reverse-mode differentiation interface.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_DIALECT_DSC_IR_DSCINTERFACES_TD
#define DSC_DIALECT_DSC_IR_DSCINTERFACES_TD

include "mlir/IR/OpBase.td"

def Dsc_CostOpInterface : OpInterface<"CostOpInterface"> {
  let cppNamespace = "::mlir::dsc";
  let description = [{
    Reports what one execution of the op costs, computed from its operand and
    result types only. `matmulFlops` counts multiply-adds of dense products as
    two FLOPs each (a matmul of MxK by KxN is 2MNK), which is the accounting
    Megatron-LM and the ZeRO paper use for model FLOPs; `vectorFlops` counts
    the elementwise and reduction work that runs on vector units. Bytes are
    the sizes of the tensors read and written, assuming no fusion.
  }];
  let methods = [
    InterfaceMethod<
      "Returns the op's cost for one execution.",
      "::mlir::dsc::OpCost", "getCost", (ins)>,
  ];
}

def Dsc_DifferentiableOpInterface : OpInterface<"DifferentiableOpInterface"> {
  let cppNamespace = "::mlir::dsc";
  let description = [{
    Reverse-mode differentiation rule (vector-Jacobian product) of an op.
    Given the gradients of the op's results (null where a result does not
    influence the loss), build the ops that compute the gradients of its
    operands and return one value per operand; a null value means the operand
    is not differentiable (token ids, targets). `--dsc-autodiff` composes
    these rules over the loss graph.
  }];
  let methods = [
    InterfaceMethod<
      "Builds the vector-Jacobian product at the builder's insertion point.",
      "::llvm::LogicalResult", "buildVJP",
      (ins "::mlir::OpBuilder &":$builder,
           "::mlir::ValueRange":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>,
  ];
}

#endif // DSC_DIALECT_DSC_IR_DSCINTERFACES_TD
