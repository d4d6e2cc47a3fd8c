//===- DscOps.h - dsc operations --------------------------------*- C++ -*-===//
//
// The op classes of the dsc dialect, generated from DscOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_DIALECT_DSC_IR_DSCOPS_H
#define DSC_DIALECT_DSC_IR_DSCOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dsc/Dialect/Dsc/IR/DscDialect.h"
#include "dsc/Dialect/Dsc/IR/DscInterfaces.h"

#define GET_OP_CLASSES
#include "dsc/Dialect/Dsc/IR/DscOps.h.inc"

namespace mlir::dsc {
/// Formats a shape as `4x64x768` (`scalar` for rank 0), as the verifiers'
/// messages print shapes.
std::string formatShape(ArrayRef<int64_t> shape);
/// `[4x64x768]`: a tensor's shape as the verifiers' messages print it.
inline std::string shapeOf(RankedTensorType type) {
  return "[" + formatShape(type.getShape()) + "]";
}
/// The ranked tensor type of `v` (every dsc op's operands and results).
inline RankedTensorType tensorOf(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// Ranks in one group of `axes` of the mesh `mesh` names, or an error on
/// `op` naming what is wrong (no such mesh, unknown or repeated axis).
FailureOr<int64_t> getMeshGroupSize(Operation *op,
                                    SymbolTableCollection &tables,
                                    FlatSymbolRefAttr mesh, ArrayAttr axes);

/// A matrix product's shape (batch + [M, N]) of `lhs` and `rhs` under the
/// transpose flags, or an error on `op` naming what does not fit
/// (dsc.matmul and dsc.matmul_accumulate).
FailureOr<SmallVector<int64_t>> matmulShape(Operation *op, Value lhs, Value rhs,
                                            bool transposeLhs,
                                            bool transposeRhs);

/// A cross-entropy's `classes` (0: every column) against the `columns` of
/// its vocabulary (`whose`: "the logits", "the whole vocabulary"): an error
/// on `op` unless 0 <= classes <= columns.
LogicalResult verifyClassCount(Operation *op, int64_t classes, int64_t columns,
                               StringRef whose);

/// What dsc.attention and its fused forms require of their query and
/// attributes (rank-3 [batch, seq, hidden], heads dividing hidden, dropout
/// in [0, 1), a window only when causal), and of a saved logsumexp `lse`
/// when non-null ([batch, heads, seq], f32; f64 for f64 operands): an error
/// on `op` naming what does not hold.
LogicalResult verifyAttention(Operation *op, RankedTensorType query,
                              int64_t heads, double dropout, int64_t window,
                              bool causal, RankedTensorType lse = {});

/// The module's mesh, which must have axis `axis` of size `size`, or, when
/// the module has none, a new one-axis mesh @mesh; an error naming `pass`
/// and the axis otherwise.
FailureOr<MeshOp> getOrCreateMeshWithAxis(ModuleOp module, StringRef axis,
                                          int64_t size, StringRef pass);

/// The mesh axes of the data-parallel group: ["edp", "ep"] on a mesh with
/// expert parallelism (DeepSpeed's E+D grouping: ep consecutive ranks of the
/// data-parallel group share their experts' tokens), ["dp"] on one with a
/// dp axis, none otherwise.
SmallVector<StringRef> dataParallelAxes(MeshOp mesh);
/// The data-parallel axes that replicate `param`: dataParallelAxes less the
/// axes its layout splits it over (an expert's ep). ZeRO shards it and its
/// gradient is averaged over these.
SmallVector<StringRef> replicatingDataAxes(MeshOp mesh, ParameterOp param);
/// The product of the sizes of `axes` on `mesh` (1 for none).
int64_t meshAxesSize(MeshOp mesh, ArrayRef<StringRef> axes);

/// Bytes one rank sends per training step in a module's collectives, by
/// kind, under ring algorithms: those of @forward_backward count once per
/// micro-batch, those of @optimizer once, those of other functions (the
/// evaluation loss) not at all.
struct CollectiveBytes {
  int64_t allReduce = 0, reduceScatter = 0, allGather = 0, allToAll = 0;
  /// A pipeline stage's activations sent to the next stage.
  int64_t pointToPoint = 0;
  /// 1-bit optimizers' compressed all-reduces (their all-to-alls and
  /// all-gathers of signs and scales).
  int64_t compressedAllReduce = 0;
  int64_t total() const {
    return allReduce + reduceScatter + allGather + allToAll + pointToPoint +
           compressedAllReduce;
  }
};
/// Rank 0's bytes sent in one step: the micro-batches' programs and the
/// optimizer, or with `compressed` the compressed_optimizer (a 1-bit
/// optimizer's step after its warm-up) in its place.
CollectiveBytes collectiveBytesPerStep(ModuleOp module, int64_t microbatches,
                                       bool compressed = false);
/// The same with the optimizer program of `optimizerRole` in place of
/// `optimizer` (0/1 Adam's onebit and sync steps; no pipelines).
CollectiveBytes collectiveBytesPerStep(ModuleOp module, int64_t microbatches,
                                       ProgramRole optimizerRole);

/// The axes over which `clip` adds the ranks' sums of squares: its ZeRO
/// axes and the axes that split any of its gradients' parameters (tensor
/// slicing). Empty when every rank holds whole gradients.
SmallVector<StringRef> getNormAxes(ClipGradNormOp clip);
} // namespace mlir::dsc

#endif // DSC_DIALECT_DSC_IR_DSCOPS_H
