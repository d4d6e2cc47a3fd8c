//===- DscBase.td - dsc dialect definition -----------------*- tablegen -*-===//
//
// The dsc dialect: the graph, parallel-annotation and partitioned levels of a
// training plan. This file holds the dialect and the shared type constraints.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_DIALECT_DSC_IR_DSCBASE_TD
#define DSC_DIALECT_DSC_IR_DSCBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/CommonTypeConstraints.td"

def Dsc_Dialect : Dialect {
  let name = "dsc";
  let cppNamespace = "::mlir::dsc";
  let summary = "A declarative dialect for parallel training plans";
  let description = [{
    The `dsc` dialect describes what to train (a transformer's loss graph on
    builtin ranked tensors, with named parameters), how it is parallelized (a
    device mesh with named axes and sharding annotations) and, after
    partitioning, every collective, point-to-point transfer and memory-tier
    move the plan performs. Because each of these is an op, a plan can be
    printed, FileCheck-tested, verified free of deadlock and costed before any
    hardware is reserved.

    Graph ops implement `DscCostOpInterface`, which reports the FLOPs and
    bytes an op moves from its types alone; analyses such as
    `--dsc-print-model-stats` and the plan search build on it.
  }];
  let useDefaultAttributePrinterParser = 1;
  let extraClassDeclaration = [{
    void registerAttributes();
  }];
}

class Dsc_Op<string mnemonic, list<Trait> traits = []>
    : Op<Dsc_Dialect, mnemonic, traits>;

// Floating-point tensors the compute ops accept. fp64 exists so that the
// finite-difference oracle can run the same graphs in double precision.
def Dsc_FloatType : AnyTypeOf<[F16, BF16, F32, F64]>;
def Dsc_FloatTensor : RankedTensorOf<[F16, BF16, F32, F64]>;
// Token ids and class targets.
def Dsc_IndexTensor : RankedTensorOf<[I32, I64]>;
def Dsc_AnyTensor : RankedTensorOf<[AnyType]>;

#endif // DSC_DIALECT_DSC_IR_DSCBASE_TD
