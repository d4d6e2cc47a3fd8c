// RUN: dsc-opt %s -split-input-file -verify-diagnostics --dsc-compile="plan=auto" | FileCheck %s --check-prefixes=CHECK,COMPILE
// RUN: dsc-opt %s -split-input-file -verify-diagnostics --dsc-apply-plan | FileCheck %s
// RUN: not dsc-opt %s -split-input-file --dsc-compile="plan=auto dp=4" 2>&1 | FileCheck %s --check-prefix=DISAGREE
// RUN: not dsc-opt %s -split-input-file --dsc-compile="plan=best" 2>&1 | FileCheck %s --check-prefix=VALUE

// The plan --dsc-auto-parallel recorded (dp=2, ZeRO-1, 2 micro-batches) is
// what the module compiles with: the dp mesh, the micro-batch count, the
// ZeRO-1 reduce-scatter of the gradients.
// CHECK-LABEL: module attributes
// CHECK-SAME: dsc.microbatches = 2 : i64
// CHECK: dsc.mesh @mesh axes = ["dp"] shape = [2]
// CHECK: dsc.reduce_scatter
// DISAGREE: error: --dsc-compile plan=auto: the option dp=4 disagrees with dsc.parallel_plan's dp=2; drop the option or plan=auto
// VALUE: error: --dsc-compile plan=auto: plan must be 'auto' (the module's dsc.parallel_plan), got 'best'
// RUN: not dsc-opt %s -split-input-file --dsc-compile="plan=auto recompute=selective" 2>&1 | FileCheck %s --check-prefix=RECOMPUTE
// RECOMPUTE: error: --dsc-compile plan=auto: the option recompute=selective disagrees with dsc.parallel_plan's recompute=none

// The second module's offload plan (the cost model's ZeRO-Offload)
// compiles with the optimizer's states and update in host memory
// (--dsc-offload), each rank its ZeRO-1 chunk.
// CHECK: dsc.parallel_plan = #dsc.parallel_plan<"{{.*}} offload-optimizer=host">
// CHECK: dsc.state @offload.master.wte : tensor<64xf32> master of @wte in host
// CHECK: dsc.transfer @offload.master.wte to @wte chunk on @mesh axes = ["dp"]

// The third module's plan is ZeRO-Infinity's (ZeRO-3 with the chunks
// offloaded too): its chunk lives in host memory and the forward gathers a
// fetched copy of it.
// CHECK: dsc.parallel_plan = #dsc.parallel_plan<"{{.*}} offload-optimizer=host offload-params=host">
// CHECK: dsc.parameter @wte : tensor<64xf32> {{.*}} chunk = ["dp"]> in host
// CHECK: %[[CHUNK:.*]] = dsc.fetch_parameter @wte {{.*}}: tensor<64xf32>
// CHECK: dsc.gather_parameter @wte from %[[CHUNK]]
// RUN: not dsc-opt %s -split-input-file --dsc-compile="plan=auto offload-params=nvme" 2>&1 | FileCheck %s --check-prefix=PARAMS
// PARAMS: error: --dsc-compile plan=auto: the option offload-params=nvme disagrees with dsc.parallel_plan's offload-params=none; drop the option or plan=auto

// The fourth module's zero-bubble plan compiles: the stages' backwards split into their
// activation- and weight-gradient parts, the steps run the latter apart.
// CHECK: dsc.pipeline = #dsc.pipeline<stages = 2, schedule = "zb-h1"
// COMPILE: func.func @backward_weight.stage0
// COMPILE: func.func @step.stage1
// COMPILE: dsc.pipeline_backward_weight @backward_weight.stage1 microbatch = 1

// The last module's plan asks for recompute (the cost model's is full
// recompute): its layer h.0 keeps only its input %x; the backward
// recomputes the matmul and the gelu (the gelu's gradient reads the
// matmul's output). Kept: %x, the layer's output and the logits, 256 +
// 256 + 512 bytes.
// CHECK: dsc.parallel_plan = {{.*}}recompute=full
// CHECK: func.func @forward_backward
// CHECK-SAME: dsc.saved_activation_bytes = 1024 : i64
// CHECK: dsc.cross_entropy_grad
// CHECK: %[[H:.*]] = dsc.matmul %{{.*}} : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
// CHECK: dsc.gelu_grad %[[H]]
module attributes {dsc.model = {vocab_size = 16 : i64, micro_batch_size = 2 : i64}, dsc.parallel_plan = #dsc.parallel_plan<"dp=2 tp=1 pp=1 zero=1 micro-batch-size=2 microbatches=2">} {
  dsc.parameter @wte : tensor<16x8xf32> init = #dsc.init<normal, std = 0.02>
  func.func @loss(%ids: tensor<2x4xi32>, %t: tensor<2x4xi32>) -> tensor<f32> {
    %w = dsc.get_parameter @wte : tensor<16x8xf32>
    %x = dsc.embedding %w, %ids : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
    %logits = dsc.matmul %x, %w {transpose_rhs} : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
    %l = dsc.cross_entropy %logits, %t : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// An offload plan (the second module; the checks are above).
module attributes {dsc.model = {vocab_size = 16 : i64, micro_batch_size = 2 : i64}, dsc.parallel_plan = #dsc.parallel_plan<"dp=2 tp=1 pp=1 zero=1 micro-batch-size=2 offload-optimizer=host">} {
  dsc.parameter @wte : tensor<16x8xf32> init = #dsc.init<normal, std = 0.02>
  func.func @loss(%ids: tensor<2x4xi32>, %t: tensor<2x4xi32>) -> tensor<f32> {
    %w = dsc.get_parameter @wte : tensor<16x8xf32>
    %x = dsc.embedding %w, %ids : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
    %logits = dsc.matmul %x, %w {transpose_rhs} : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
    %l = dsc.cross_entropy %logits, %t : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// ZeRO-Infinity (the third module; the checks are above).
module attributes {dsc.model = {vocab_size = 16 : i64, micro_batch_size = 2 : i64}, dsc.parallel_plan = #dsc.parallel_plan<"dp=2 tp=1 pp=1 zero=3 micro-batch-size=2 offload-optimizer=host offload-params=host">} {
  dsc.parameter @wte : tensor<16x8xf32> init = #dsc.init<normal, std = 0.02>
  func.func @loss(%ids: tensor<2x4xi32>, %t: tensor<2x4xi32>) -> tensor<f32> {
    %w = dsc.get_parameter @wte : tensor<16x8xf32>
    %x = dsc.embedding %w, %ids : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
    %logits = dsc.matmul %x, %w {transpose_rhs} : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
    %l = dsc.cross_entropy %logits, %t : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// A zero-bubble plan compiles (the fourth module).
module attributes {dsc.model = {vocab_size = 16 : i64, micro_batch_size = 2 : i64}, dsc.parallel_plan = #dsc.parallel_plan<"dp=1 tp=1 pp=2 micro-batch-size=2 microbatches=2 pipeline-schedule=zb-h1">} {
  dsc.parameter @wte : tensor<16x8xf32> init = #dsc.init<normal, std = 0.02>
  dsc.parameter @h.0.w : tensor<8x8xf32> init = #dsc.init<normal, std = 0.02>
  dsc.parameter @h.1.w : tensor<8x8xf32> init = #dsc.init<normal, std = 0.02>
  func.func @loss(%ids: tensor<2x4xi32>, %t: tensor<2x4xi32>) -> tensor<f32> {
    %w = dsc.get_parameter @wte : tensor<16x8xf32>
    %x = dsc.embedding %w, %ids : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
    %w0 = dsc.get_parameter @h.0.w : tensor<8x8xf32>
    %h0 = dsc.matmul %x, %w0 : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
    %w1 = dsc.get_parameter @h.1.w : tensor<8x8xf32>
    %h1 = dsc.matmul %h0, %w1 : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
    %logits = dsc.matmul %h1, %w {transpose_rhs} : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
    %l = dsc.cross_entropy %logits, %t : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Sequence parallelism without tensor slicing is refused, not dropped.
// expected-error @+1 {{--dsc-tensor-parallel: sequence-parallel=1 splits the tensor-parallel group's tokens and needs tp > 1}}
module attributes {dsc.model = {vocab_size = 16 : i64, micro_batch_size = 2 : i64}, dsc.parallel_plan = #dsc.parallel_plan<"dp=1 tp=1 pp=1 micro-batch-size=2 sequence-parallel=true">} {
}

// -----

// The graph's tokens fix the micro-batch size.
// expected-error @+1 {{--dsc-compile plan=auto: dsc.parallel_plan's micro-batch size 1 is not the graph's 2 (its token shape); search with micro-batch=2 or import the model with that micro-batch size}}
module attributes {dsc.model = {vocab_size = 16 : i64, micro_batch_size = 2 : i64}, dsc.parallel_plan = #dsc.parallel_plan<"dp=2 tp=1 pp=1 micro-batch-size=1 microbatches=2">} {
}

// -----

// expected-error @+1 {{--dsc-compile plan=auto: the module has no dsc.parallel_plan; run --dsc-auto-parallel first (it records its winner there)}}
module {
}

// -----

module attributes {dsc.model = {vocab_size = 16 : i64, micro_batch_size = 2 : i64}, dsc.parallel_plan = #dsc.parallel_plan<"dp=1 tp=1 pp=1 micro-batch-size=2 recompute=full">} {
  dsc.parameter @wte : tensor<16x8xf32> init = #dsc.init<normal, std = 0.02>
  dsc.parameter @h.0.w : tensor<8x8xf32> init = #dsc.init<normal, std = 0.02>
  func.func @loss(%ids: tensor<2x4xi32>, %t: tensor<2x4xi32>) -> tensor<f32> {
    %w = dsc.get_parameter @wte : tensor<16x8xf32>
    %x = dsc.embedding %w, %ids : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
    %hw = dsc.get_parameter @h.0.w : tensor<8x8xf32>
    %h = dsc.matmul %x, %hw : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32> loc("h.0.fc")
    %g = dsc.gelu %h : tensor<2x4x8xf32> loc("h.0.act")
    %r = dsc.add %g, %x : tensor<2x4x8xf32> loc("h.0.residual")
    %logits = dsc.matmul %r, %w {transpose_rhs} : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
    %l = dsc.cross_entropy %logits, %t : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
