//===- DscInterfaces.td - dsc op interfaces ----------------*- tablegen -*-===//
//
// Interfaces shared by the graph ops: a cost interface (FLOPs and bytes from
// the op's types), a reverse-mode differentiation interface, and the
// communication interface through which plan verifiers see collectives.
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

def Dsc_CommunicationOpInterface : OpInterface<"CommunicationOpInterface"> {
  let cppNamespace = "::mlir::dsc";
  let description = [{
    An op that makes its rank take part in communication describes each
    communication it issues, in issue order, as a `CommunicationEvent`:

    - a collective: its stable kind name (`all_reduce`, `reduce_scatter`,
      `all_gather`), the mesh, the group axes
      (the group is the ranks that differ from this one only on those axes),
      the reduction when it reduces, the payload types (the tensor each rank
      contributes; for in-place ops over named state, the states' types in
      order) and the parameters every member must agree on (`root`,
      `scatter_dim`, ...);
    - a point-to-point `send` or `recv`: the mesh, the one axis along which
      the peer lies, the peer's coordinate on it, the tag and the payload.

    An in-place op over named buffers reports the same kind as its
    value-semantics cousin (`dsc.all_reduce_states` is an `all_reduce`), so
    that a verifier compares what the communicator executes, not how the IR
    spells it. An op that communicates only in some configurations (an
    unsharded `dsc.clip_grad_norm`) reports no event. `--dsc-verify-collectives`
    proves from these descriptions alone that every rank's sequence of
    events matches its groups' and peers', so new communicating ops plug in
    by implementing this interface.

    ```c++
    SymbolTableCollection tables;
    SmallVector<CommunicationEvent> events;
    cast<CommunicationOpInterface>(op).getCommunicationEvents(tables, events);
    ```
  }];
  let methods = [
    InterfaceMethod<
      "Appends the communication events one execution of the op issues, in "
      "the order it issues them; `symbolTables` resolves the buffers an "
      "in-place op names to their types.",
      "void", "getCommunicationEvents",
      (ins "::mlir::SymbolTableCollection &":$symbolTables,
           "::llvm::SmallVectorImpl<::mlir::dsc::CommunicationEvent> &":$events)>,
  ];
}

#endif // DSC_DIALECT_DSC_IR_DSCINTERFACES_TD
