//===- DscAttrNames.h - names of the dsc discardable attributes -*- C++ -*-===//
//
// The `dsc.*` attributes passes leave on ops for later passes and the
// lowering to read, one constant each, so that no pass spells a name of its
// own. DscDialect::verifyOperationAttribute checks each one's type and the
// kind of op it sits on, and refuses any other `dsc.*` name.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_DIALECT_DSC_IR_DSCATTRNAMES_H
#define DSC_DIALECT_DSC_IR_DSCATTRNAMES_H

#include "llvm/ADT/StringRef.h"

namespace mlir::dsc {

//===----------------------------------------------------------------------===//
// On functions
//===----------------------------------------------------------------------===//

/// `#dsc.program_role<...>`: what a training program is (the evaluation
/// forward, the micro-batch's forward and backward, the optimizer step).
/// Set by the pass that creates the function (--dsc-autodiff,
/// --dsc-pipeline, --dsc-optimizer); read instead of its name.
inline constexpr llvm::StringLiteral kProgramAttr = "dsc.program";
/// `i64 >= 0`: the pipeline stage a function runs on (--dsc-pipeline).
inline constexpr llvm::StringLiteral kStageAttr = "dsc.stage";
/// On a compressed_optimizer program: the first optimizer step (1-based)
/// it runs, in place of the optimizer program (1-bit Adam's freeze_step).
inline constexpr llvm::StringLiteral kFromStepAttr = "dsc.from_step";
/// On the module, with optimizer=zero_one_adam: its policy, the dictionary
/// {var_freeze_step, var_update_scaler, local_step_scaler,
/// local_step_clipper} (i64 each) from which a step's program follows.
inline constexpr llvm::StringLiteral kZeroOneAdamAttr = "dsc.zero_one_adam";
/// `array<i64>`, one per argument: the planned offsets of a program's
/// inputs (--dsc-plan-memory).
inline constexpr llvm::StringLiteral kInputOffsetsAttr = "dsc.input_offsets";
/// `i64 >= 0` on a forward_backward program: the bytes of the forward's
/// values its backward reads, the activations a micro-batch keeps between
/// them (--dsc-recompute).
inline constexpr llvm::StringLiteral kSavedActivationBytesAttr =
    "dsc.saved_activation_bytes";
/// `i64 >= 0` on a pipeline stage's forward_backward split by
/// --dsc-split-weight-gradient: how many of its last results are the values
/// its backward_weight program takes, in the order of its arguments.
inline constexpr llvm::StringLiteral kWeightStashAttr = "dsc.weight_stash";

//===----------------------------------------------------------------------===//
// On ops
//===----------------------------------------------------------------------===//

/// `i64 >= 0` on `dsc.parameter` and `dsc.state`: the declaration's planned
/// offset (--dsc-plan-memory).
inline constexpr llvm::StringLiteral kOffsetAttr = "dsc.offset";
/// `array<i64>`, one per result, on an op in a program: the planned offsets
/// of its results (--dsc-plan-memory).
inline constexpr llvm::StringLiteral kOffsetsAttr = "dsc.offsets";
/// `array<i1>`, one per gradient, on `dsc.clip_grad_norm` of a pipeline
/// stage: whether the stage holds that gradient alone (--dsc-optimizer).
inline constexpr llvm::StringLiteral kPipelineLocalAttr = "dsc.pipeline_local";
/// `i64 >= 0` on an op in a function: the transformer layer the op belongs
/// to (the importers; each pass that creates ops for an op of a layer gives
/// them its layer). Read by the pipeline cut and activation recompute
/// (dsc/Transforms/TransformerLayers.h).
inline constexpr llvm::StringLiteral kLayerAttr = "dsc.layer";

/// `i64`, on a declaration of a pipelined module: the pipeline rank
/// whose arenas hold it (--dsc-plan-memory); absent, every rank's.
inline constexpr llvm::StringLiteral kPipelineRankAttr = "dsc.pipeline_rank";
/// `array<i64>`, on a declaration of a pipelined module named by some of
/// the pipeline ranks' stages but not all (a tied embedding's parameter
/// and Adam moments: the first and the last rank): the ranks, ascending,
/// whose shared arena holds it (--dsc-plan-memory; `dsc.memory`'s
/// `shared_by_ranks` lists that arena).
inline constexpr llvm::StringLiteral kPipelineRanksAttr = "dsc.pipeline_ranks";
/// A dictionary on a pipeline stage's forward (--dsc-plan-memory): its
/// banks of per-micro-batch slots, `activation`, `gradient` and `weight`,
/// each `array<i64: offset, stride, slots>` (PipelineStage::SlotBank).
inline constexpr llvm::StringLiteral kSlotBanksAttr = "dsc.slot_banks";

//===----------------------------------------------------------------------===//
// On the module
//===----------------------------------------------------------------------===//

/// `i64 >= 1`: micro-batches per step, recorded by --dsc-autodiff, which
/// seeds the loss gradient with their inverse.
inline constexpr llvm::StringLiteral kMicrobatchesAttr = "dsc.microbatches";
/// `#dsc.pipeline<stages = P, schedule = "1f1b", ...>`: the stages
/// --dsc-pipeline cut, with the schedule's bubble once
/// --dsc-pipeline-schedule has simulated it.
inline constexpr llvm::StringLiteral kPipelineAttr = "dsc.pipeline";
/// A dictionary: the model's shape (dsc-translate --import-neox).
inline constexpr llvm::StringLiteral kModelAttr = "dsc.model";
/// `{persistent_bytes, temporary_bytes, arena_bytes, alignment}`, each an
/// integer (--dsc-plan-memory).
inline constexpr llvm::StringLiteral kMemoryAttr = "dsc.memory";
/// A dictionary of integers: each program's peak temporary bytes
/// (--dsc-plan-memory).
inline constexpr llvm::StringLiteral kProgramPeaksAttr = "dsc.program_peaks";
/// `#dsc.parallel_plan<"...">`: the plan --dsc-auto-parallel chose, which
/// --dsc-compile="plan=auto" compiles; --dsc-compile records the plan it
/// builds, and --dsc-offload the tiers and NVMe lane it built (read by the
/// lowering).
inline constexpr llvm::StringLiteral kPlanAttr = "dsc.parallel_plan";
/// A dictionary: that plan's cost estimate (--dsc-auto-parallel).
inline constexpr llvm::StringLiteral kPlanEstimateAttr = "dsc.plan_estimate";

/// A dictionary: an inference plan's KV-cache shape and limits (block_size,
/// kv_blocks, max_context, max_sequences, token_budget), set by
/// --dsc-inference-programs.
inline constexpr llvm::StringLiteral kInferenceAttr = "dsc.inference";
/// On an inference program's argument: which request input it is
/// ("tokens", "positions", ...), the name of its buffer in the plan.
inline constexpr llvm::StringLiteral kInputAttr = "dsc.input";

} // namespace mlir::dsc

#endif // DSC_DIALECT_DSC_IR_DSCATTRNAMES_H
