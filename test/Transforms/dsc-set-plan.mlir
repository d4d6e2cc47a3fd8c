// RUN: dsc-opt %s -split-input-file --dsc-set-plan="dp=2 v=2 pp=2 pipeline-schedule=interleaved-1f1b offload=cpu zero=1" | FileCheck %s
// RUN: not dsc-opt %s --dsc-set-plan="dp=2 zero=7" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: dsc-opt %s -split-input-file --dsc-set-plan="dp=2 tp=4" --dsc-declare-mesh | FileCheck %s --check-prefix=READ
// RUN: dsc-opt %s -split-input-file --dsc-set-plan="dp=2 tp=4" --dsc-declare-mesh="tp=2" | FileCheck %s --check-prefix=OVER

// The plan given is recorded in its one textual form (aliases spelled as
// keys, keys at their defaults left out, the mesh axes always), over the
// plan the module already records.
// CHECK-LABEL: module attributes
// CHECK-SAME: dsc.parallel_plan = #dsc.parallel_plan<"dp=2 tp=1 pp=2 zero=1 pipeline-schedule=interleaved-1f1b virtual-stages=2 offload-optimizer=host">
module {
  dsc.parameter @w : tensor<8x16xf32> init = #dsc.init<normal, std = 0.02>
}

// -----

// A module's recorded plan keeps the keys not given (precision, microbatches).
// CHECK-LABEL: module attributes
// CHECK-SAME: dsc.parallel_plan = #dsc.parallel_plan<"dp=2 tp=1 pp=2 zero=1 microbatches=4 pipeline-schedule=interleaved-1f1b virtual-stages=2 offload-optimizer=host precision=bf16">
module attributes {dsc.parallel_plan = #dsc.parallel_plan<"microbatches=4 precision=bf16 dp=8">} {
  dsc.parameter @w : tensor<8x16xf32> init = #dsc.init<normal, std = 0.02>
}

// BAD: error: --dsc-set-plan: plan key 'zero': '7' is not a ZeRO stage 0, 1, 2 or 3

// A later pass reads its knobs from the recorded plan: --dsc-declare-mesh
// without options declares the plan's mesh; its own keys override the
// module's plan for that run.
// READ: dsc.mesh @mesh axes = ["dp", "tp"] shape = [2, 4]
// READ: dsc.mesh @mesh axes = ["dp", "tp"] shape = [2, 4]
// OVER: dsc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]

// -----

// The graph's token shape fixes the micro-batch size: another is refused.
// RUN: not dsc-opt %s -split-input-file --dsc-set-plan="micro-batch-size=4" 2>&1 | FileCheck %s --check-prefix=MBS
// MBS: error: --dsc-set-plan: the plan's micro-batch-size=4 is not the graph's 2 (its token shape); import the model with that micro-batch size (dsc-run does, given the config)
module attributes {dsc.model = {micro_batch_size = 2 : i64}} {
}
