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

    Passes talk to each other through a few discardable attributes, all
    named in `DscAttrNames.h` and checked by the dialect: on functions
    `dsc.program` (a `#dsc.program_role`), `dsc.stage` (i64 >= 0) and
    `dsc.input_offsets` (one i64 per argument); on ops `dsc.offset`
    (`dsc.parameter`, `dsc.state`), `dsc.offsets` (one i64 per result) and
    `dsc.pipeline_local` (`dsc.clip_grad_norm`, one bool per gradient); on
    the module `dsc.microbatches` (i64 >= 1), `dsc.pipeline`, `dsc.model`,
    `dsc.memory`, `dsc.program_peaks`, `dsc.plan` and `dsc.plan_estimate`
    (dictionaries). Any other `dsc.*` attribute is an error.
  }];
  let useDefaultAttributePrinterParser = 1;
  // The `dsc.*` discardable attributes passes leave for each other
  // (DscAttrNames.h): each must have its type and sit on its kind of op.
  let hasOperationAttrVerify = 1;
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
