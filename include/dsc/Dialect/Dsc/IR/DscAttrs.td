//===- DscAttrs.td - dsc attributes and enums --------------*- tablegen -*-===//
//
// Attributes of the dsc dialect: parameter initializers, memory tiers,
// reduction kinds, the sharding of a tensor over a mesh and the role of a
// training program.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_DIALECT_DSC_IR_DSCATTRS_TD
#define DSC_DIALECT_DSC_IR_DSCATTRS_TD

include "dsc/Dialect/Dsc/IR/DscBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Dsc_InitKind : I32EnumAttr<"InitKind", "parameter initializer", [
  I32EnumAttrCase<"Zeros", 0, "zeros">,
  I32EnumAttrCase<"Ones", 1, "ones">,
  I32EnumAttrCase<"Normal", 2, "normal">,
  I32EnumAttrCase<"ScaledNormal", 3, "scaled_normal">
]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::dsc";
}

def Dsc_MemoryTier : I32EnumAttr<"MemoryTier", "memory tier", [
  I32EnumAttrCase<"Device", 0, "device">,
  I32EnumAttrCase<"Host", 1, "host">,
  I32EnumAttrCase<"Nvme", 2, "nvme">
]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::dsc";
}

def Dsc_PipelineMessage : I32EnumAttr<"PipelineMessage",
    "what a pipeline stage sends its neighbour", [
  I32EnumAttrCase<"Activation", 0, "activation">,
  I32EnumAttrCase<"Gradient", 1, "gradient">
]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::dsc";
}

def Dsc_ReductionKind : I32EnumAttr<"ReductionKind", "collective reduction", [
  I32EnumAttrCase<"Sum", 0, "sum">,
  I32EnumAttrCase<"Average", 1, "avg">,
  I32EnumAttrCase<"Max", 2, "max">,
  I32EnumAttrCase<"Min", 3, "min">
]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::dsc";
}

// Mixture-of-Experts routing rules (dsc.moe_route; the runtime's
// MoeKernels.h has the same enums with the same values).
def Dsc_MoeNormalize : I32EnumAttr<"MoeNormalize",
    "how an MoE router's chosen gates become combine weights", [
  I32EnumAttrCase<"None", 0, "none">,
  I32EnumAttrCase<"AfterDrop", 1, "after_drop">,
  I32EnumAttrCase<"BeforeDrop", 2, "before_drop">
]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::dsc";
}

def Dsc_MoeDropPolicy : I32EnumAttr<"MoeDropPolicy",
    "which (token, choice) pairs an over-full expert keeps", [
  I32EnumAttrCase<"Position", 0, "position">,
  I32EnumAttrCase<"Probability", 1, "probs">,
  I32EnumAttrCase<"Random", 2, "random">
]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::dsc";
}

def Dsc_MoeSlotOrder : I32EnumAttr<"MoeSlotOrder",
    "the order an expert's capacity slots are handed out in", [
  I32EnumAttrCase<"TokenMajor", 0, "token_major">,
  I32EnumAttrCase<"ChoiceMajor", 1, "choice_major">
]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::dsc";
}

def Dsc_MoeAuxCounts : I32EnumAttr<"MoeAuxCounts",
    "which choices count in the load-balancing loss's token fractions", [
  I32EnumAttrCase<"FirstChoice", 0, "first_choice">,
  I32EnumAttrCase<"AllChoices", 1, "all_choices">
]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::dsc";
}

def Dsc_StateKind : I32EnumAttr<"StateKind", "kind of persistent state", [
  I32EnumAttrCase<"Gradient", 0, "gradient">,
  I32EnumAttrCase<"ExpAvg", 1, "exp_avg">,
  I32EnumAttrCase<"ExpAvgSq", 2, "exp_avg_sq">,
  I32EnumAttrCase<"Momentum", 3, "momentum">,
  // Offload (--dsc-offload): the update's copy of the parameter in the tier
  // where the update runs, and the gradient moved there.
  I32EnumAttrCase<"Master", 4, "master">,
  I32EnumAttrCase<"GradientCopy", 5, "gradient_copy">,
  // 1-bit optimizers (dsc.compressed_all_reduce_states): the compression's
  // error feedback of this rank's whole padded tensor, and of the chunk it
  // serves.
  I32EnumAttrCase<"WorkerError", 6, "worker_error">,
  I32EnumAttrCase<"ServerError", 7, "server_error">,
  // 1-bit LAMB: each tensor's f64 scalars [5] (coeff_freeze, last_factor,
  // scaling_coeff, momentum_scale, frozen), the fresh variance of the
  // compression phase, the momentum before the step's update, and the
  // fused buffer's pad after its moments (DeepSpeed keeps the last
  // compressed average there).
  I32EnumAttrCase<"LambCoefficients", 8, "lamb_coefficients">,
  I32EnumAttrCase<"ExpAvgSqFresh", 9, "exp_avg_sq_fresh">,
  I32EnumAttrCase<"ExpAvgLast", 10, "exp_avg_last">,
  I32EnumAttrCase<"CompressionPad", 11, "compression_pad">,
  // 0/1 Adam: the local updates since the last sync (its u), each
  // parameter's, and the learning rates summed since then (f64 [1]).
  I32EnumAttrCase<"MomentumAccumulator", 12, "momentum_accumulator">,
  I32EnumAttrCase<"LearningRateSum", 13, "learning_rate_sum">
]> {
  let cppNamespace = "::mlir::dsc";
}

def Dsc_LrSchedule : I32EnumAttr<"LrSchedule", "learning-rate schedule", [
  I32EnumAttrCase<"Constant", 0, "constant">,
  I32EnumAttrCase<"WarmupConstant", 1, "warmup">,
  I32EnumAttrCase<"WarmupLinear", 2, "warmup_linear">,
  I32EnumAttrCase<"WarmupCosine", 3, "warmup_cosine">,
  I32EnumAttrCase<"AnnealingConstant", 4, "annealing_constant">,
  I32EnumAttrCase<"AnnealingLinear", 5, "annealing_linear">,
  I32EnumAttrCase<"AnnealingCosine", 6, "annealing_cosine">,
  I32EnumAttrCase<"AnnealingExponential", 7, "annealing_exponential">
]> {
  let cppNamespace = "::mlir::dsc";
}

def Dsc_CyclicLrSchedule : I32EnumAttr<"CyclicLrSchedule",
    "cyclic learning-rate schedule", [
  I32EnumAttrCase<"RangeTest", 0, "range_test">,
  I32EnumAttrCase<"OneCycle", 1, "one_cycle">
]> {
  let cppNamespace = "::mlir::dsc";
}

def Dsc_ProgramRole : I32EnumAttr<"ProgramRole", "role of a training program", [
  I32EnumAttrCase<"Forward", 0, "forward">,
  I32EnumAttrCase<"ForwardBackward", 1, "forward_backward">,
  I32EnumAttrCase<"Optimizer", 2, "optimizer">,
  I32EnumAttrCase<"PipelineStep", 3, "pipeline_step">,
  I32EnumAttrCase<"BackwardWeight", 4, "backward_weight">,
  I32EnumAttrCase<"Initialize", 5, "initialize">,
  I32EnumAttrCase<"Prefill", 6, "prefill">,
  I32EnumAttrCase<"Decode", 7, "decode">,
  I32EnumAttrCase<"CompressedOptimizer", 8, "compressed_optimizer">,
  // 0/1 Adam's other steps (the var step is `optimizer`): a compressed
  // gradient, a local step, a local step and a sync.
  I32EnumAttrCase<"OnebitStepOptimizer", 9, "onebit_step_optimizer">,
  I32EnumAttrCase<"LocalStepOptimizer", 10, "local_step_optimizer">,
  I32EnumAttrCase<"SyncStepOptimizer", 11, "sync_step_optimizer">
]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::dsc";
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

def Dsc_ProgramRoleAttr : EnumAttr<Dsc_Dialect, Dsc_ProgramRole, "program_role"> {
  let assemblyFormat = "`<` $value `>`";
  let summary = "What a training program computes";
  let description = [{
    Set as `dsc.program` on each function the compiler makes a program of,
    by the pass that creates (or adopts) it, and read by later passes and
    the lowering instead of the function's name:

    - `forward`: the loss alone (evaluation), or a pipeline stage's forward
      (`--dsc-autodiff` marks the function it differentiates,
      `--dsc-pipeline` each stage it cuts);
    - `forward_backward`: one micro-batch's forward and backward, which
      accumulates the gradients (`--dsc-autodiff`);
    - `optimizer`: the step after the micro-batches (`--dsc-optimizer`);
    - `pipeline_step`: a pipeline stage's whole step, the schedule: its
      forwards and backwards per micro-batch and the messages between
      stages, in order (`--dsc-pipeline-schedule`);
    - `backward_weight`: under a zero-bubble schedule, the weight-gradient
      part W of a pipeline stage's backward, split from its
      `forward_backward` (which keeps the activation-gradient part B) by
      `--dsc-split-weight-gradient`;
    - `initialize`: run once after the parameters are initialized or loaded
      from a checkpoint, before the first step: `--dsc-offload` fills the
      update's master copies of the parameters in the offload tier from
      them;
    - `prefill` and `decode`: an inference plan's forwards over token rows
      (--dsc-compile-inference): prompts' chunks within a token budget, and
      one token of each running sequence; each samples the next tokens;
    - `compressed_optimizer`: a 1-bit optimizer's step from the optimizer
      step `dsc.from_step` on (its `freeze_step`), in place of `optimizer`
      (the warm-up): moments from each rank's own gradients and their
      compressed all-reduce (`--dsc-optimizer`, `--dsc-data-parallel`);
    - `onebit_step_optimizer`, `local_step_optimizer`,
      `sync_step_optimizer`: 0/1 Adam's steps other than its variance
      steps (`optimizer`): a compressed average of the gradients for the
      momentum, a local step communicating nothing, and a local step
      followed by the accumulators' compressed average. Which one a step
      runs follows from its number (the plan's 0/1 Adam policy).

    A pipeline stage's programs carry `dsc.stage = k` beside their role.

    ```mlir
    func.func @forward_backward(%ids: tensor<8x64xi32>, %t: tensor<8x64xi32>)
        -> tensor<f32> attributes {dsc.program = #dsc.program_role<forward_backward>}
    ```
  }];
}

// A double stored as an APFloat (hashable, exact round trip).
def Dsc_F64Parameter : AttrOrTypeParameter<"::llvm::APFloat", "a 64-bit float"> {
  let parser = [{ ::mlir::dsc::parseF64Parameter($_parser) }];
  let printer = [{ $_printer.printFloat($_self) }];
  let comparator = [{ $_lhs.bitwiseIsEqual($_rhs) }];
  let defaultValue = "::llvm::APFloat(0.0)";
}

class Dsc_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Dsc_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def Dsc_InitAttr : Dsc_Attr<"Init", "init"> {
  let summary = "How a parameter is initialized";
  let description = [{
    `zeros` and `ones` fill the tensor; `normal` draws from N(0, std²);
    `scaled_normal` is GPT-2's init for residual projections, N(0, (std /
    sqrt(2 · num_layers))²), which keeps the residual stream's variance
    independent of depth.

    ```mlir
    #dsc.init<normal, std = 2.000000e-02>
    #dsc.init<scaled_normal, std = 2.000000e-02, num_layers = 12>
    #dsc.init<zeros>
    ```
  }];
  let parameters = (ins
    "::mlir::dsc::InitKind":$kind,
    Dsc_F64Parameter:$std,
    DefaultValuedParameter<"int64_t", "0">:$num_layers);
  let assemblyFormat = "`<` $kind (`,` struct($std, $num_layers)^)? `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Standard deviation actually drawn from (scaled for residual layers).
    double getEffectiveStd() const;
  }];
}

def Dsc_ShardLayoutAttr : Dsc_Attr<"ShardLayout", "layout"> {
  let summary = "Which part of a whole parameter this rank stores";
  let description = [{
    Set on a `dsc.parameter` whose type is one rank's part of a larger
    parameter (tensor slicing, ZeRO-3). `view` is the whole parameter's shape
    seen with the dims a split needs, in the same element order (the fused
    QKV weight `[H, 3H]` as `[H, 3, H]`, so each rank keeps its heads' q, k
    and v columns); `split` has one entry per view dim: the mesh axes it is
    split evenly over (empty: not split); the rank's box is the product of
    its slices. `chunk` (ZeRO-3) flattens the box and keeps only the chunk at
    the rank's index in the group of those axes, of as many equal chunks as
    the group has ranks. `shape` is the whole parameter's own shape when
    it differs from the view (the fused QKV weight's `[H, 3H]`; the view
    must refine it): once ZeRO-3 has chunked a tensor-sliced parameter,
    nothing else records it, and checkpoints name tensors by it.

    The runtime initializes each rank's elements with the values a one-rank
    run gives those elements of the whole parameter, so every plan of a
    model starts from the same weights.

    ```mlir
    dsc.parameter @h.0.attn.qkv.weight : tensor<128x192xf32>
        init = <normal, std = 2.000000e-02>
        layout = <view = [128, 3, 128], split = [[], [], ["tp"]]>
    dsc.parameter @h.0.mlp.fc.weight : tensor<8192xf32>
        init = <normal, std = 2.000000e-02>
        layout = <view = [128, 512], split = [[], ["tp"]], chunk = ["dp"]>
    dsc.parameter @h.0.attn.qkv.weight : tensor<12288xf32>
        init = <normal, std = 2.000000e-02>
        layout = <shape = [128, 384], view = [128, 3, 128],
                  split = [[], [], ["tp"]], chunk = ["dp"]>
    ```
  }];
  let parameters = (ins
    ArrayRefParameter<"int64_t">:$view,
    "::mlir::ArrayAttr":$split,
    OptionalParameter<"::mlir::ArrayAttr">:$chunk,
    OptionalArrayRefParameter<"int64_t">:$shape);
  let assemblyFormat =
      "`<` (`shape` `=` `[` $shape^ `]` `,` ` `)? `view` `=` `[` $view `]` `,` `split` `=` $split (`,` `chunk` `=` $chunk^)? `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The number of elements of the whole parameter.
    int64_t getWholeNumElements() const;
    /// The axes view dim `dim` is split over, as strings.
    ::llvm::SmallVector<::llvm::StringRef> getAxesOfDim(unsigned dim) const;
    /// The chunk axes as strings (empty without ZeRO-3).
    ::llvm::SmallVector<::llvm::StringRef> getChunkAxisNames() const;
  }];
}

// A pipeline schedule in its one spelling (dsc/Support/PipelineScheduleKind.h),
// quoted: "1f1b" and "zb-h1" are not MLIR keywords.
def Dsc_PipelineScheduleParameter
    : AttrParameter<"::dsc::PipelineScheduleKind", "a pipeline schedule"> {
  let parser = [{ ::mlir::dsc::parsePipelineScheduleParameter($_parser) }];
  let printer = [{
    $_printer << '"' << ::dsc::pipelineScheduleName($_self) << '"'
  }];
}

// A double that may be absent (unknown yet), stored as an APFloat.
def Dsc_OptionalF64Parameter
    : AttrParameter<"std::optional<::llvm::APFloat>", "an optional 64-bit float"> {
  let parser = [{ ::mlir::dsc::parseOptionalF64Parameter($_parser) }];
  let printer = [{ $_printer.printFloat(*$_self) }];
  let comparator = [{
    ($_lhs.has_value() == $_rhs.has_value() &&
     (!$_lhs.has_value() || $_lhs->bitwiseIsEqual(*$_rhs)))
  }];
  let defaultValue = "std::optional<::llvm::APFloat>()";
}

def Dsc_PipelineAttr : Dsc_Attr<"Pipeline", "pipeline"> {
  let summary = "A pipelined module's shape: its stages, schedule and bubble";
  let description = [{
    Set as `dsc.pipeline` on the module by `--dsc-pipeline` when it cuts
    the model into `stages` pipeline stages, and read by every later pass
    and the lowering (through `getPipelineShape`): its presence says the
    module is cut. The plan (`dsc.parallel_plan`) is what was asked for;
    this is what the cut built. Each pp rank holds `virtual_stages` of the
    stages (model chunks: rank r holds stages r, r + P, ... with P =
    stages / virtual_stages ranks), more than one only under the
    `interleaved-1f1b` schedule. `--dsc-pipeline-schedule` adds `bubble`,
    the simulated idle fraction of the step under that schedule on these
    stages, which the plan summary reports.

    ```mlir
    module attributes {dsc.pipeline = #dsc.pipeline<stages = 2, schedule = "1f1b">} {}
    module attributes {dsc.pipeline = #dsc.pipeline<stages = 4, schedule = "interleaved-1f1b", virtual_stages = 2, bubble = 1.250000e-01>} {}
    ```
  }];
  let parameters = (ins
    "int64_t":$stages,
    Dsc_PipelineScheduleParameter:$schedule,
    DefaultValuedParameter<"int64_t", "1">:$virtual_stages,
    Dsc_OptionalF64Parameter:$bubble);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Dsc_ParallelPlanParameter
    : AttrParameter<"::dsc::ParallelPlan", "a parallel plan"> {
  let parser = [{ ::mlir::dsc::parseParallelPlanParameter($_parser) }];
  let printer = [{ ::mlir::dsc::printParallelPlanParameter($_printer, $_self) }];
}

def Dsc_ParallelPlanAttr : Dsc_Attr<"ParallelPlan", "parallel_plan"> {
  let summary = "A parallel training plan: mesh, ZeRO, pipeline, recompute, "
                "memory tiers, precision";
  let description = [{
    The one typed form of a plan (dsc/Support/ParallelPlan.def: integers
    and enums, not strings). Its text is the plan's command-line form, the
    one `--dsc-compile`, `dsc-run --compile` and `--dsc-estimate` take and
    the search prints, read by the plan's one parser (an unknown key, a bad
    value or a key given twice with different values is an error naming
    the key). `--dsc-auto-parallel` records its winner as the module's
    `dsc.parallel_plan`, which `--dsc-compile="plan=auto"` compiles.

    ```mlir
    module attributes {dsc.parallel_plan = #dsc.parallel_plan<"dp=2 tp=2 pp=2 zero=1 micro-batch-size=1 microbatches=8 pipeline-schedule=interleaved-1f1b virtual-stages=2">} {}
    ```
  }];
  let parameters = (ins Dsc_ParallelPlanParameter:$plan);
  let assemblyFormat = "`<` $plan `>`";
}

#endif // DSC_DIALECT_DSC_IR_DSCATTRS_TD
