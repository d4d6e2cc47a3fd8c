// RUN: dsc-opt %s -split-input-file -verify-diagnostics --dsc-autodiff=microbatches=3 --dsc-stage-backward --dsc-split-weight-gradient | FileCheck %s
// RUN: dsc-opt %s -split-input-file -verify-diagnostics --dsc-autodiff=microbatches=3 --dsc-stage-backward --dsc-split-weight-gradient --dsc-pipeline-schedule | FileCheck %s --check-prefix=STEP
// RUN: not dsc-opt %s -split-input-file --dsc-autodiff --dsc-stage-backward --dsc-split-weight-gradient --dsc-split-weight-gradient 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not dsc-opt %s -split-input-file --dsc-autodiff --dsc-stage-backward --dsc-pipeline-schedule 2>&1 | FileCheck %s --check-prefix=UNSPLIT

// Two stages of the zero-bubble schedule. The last stage's B is its
// forward, the loss and the input gradient (the matmul with the weight
// transposed, gelu_grad); its W the two weight gradients, which read the
// forward's values and the gradients flowing through the stage from B's
// results after the loss and input gradient (dsc.weight_stash = 4).
// Stage 0 has no input gradient: its B only keeps its arguments (copies,
// its own buffers), and W is its whole backward, which reads the weight
// again instead of receiving it.
// CHECK-LABEL: module @two_stages
// CHECK-LABEL: func.func @backward.stage0(%arg0: tensor<2x4xi32>, %arg1: tensor<2x4x8xf32>, %arg2: tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4xi32>)
// CHECK-SAME: dsc.program = #dsc.program_role<forward_backward>, dsc.stage = 0 : i64, dsc.weight_stash = 3 : i64
// CHECK-NEXT: %[[C0:.*]] = dsc.reshape %arg1 : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[C1:.*]] = dsc.reshape %arg2
// CHECK-NEXT: %[[C2:.*]] = dsc.reshape %arg0 : tensor<2x4xi32> -> tensor<2x4xi32>
// CHECK-NEXT: return %[[C0]], %[[C1]], %[[C2]]
// CHECK-LABEL: func.func @backward_weight.stage0(%arg0: tensor<2x4x8xf32>, %arg1: tensor<2x4x8xf32>, %arg2: tensor<2x4xi32>)
// CHECK-SAME: dsc.program = #dsc.program_role<backward_weight>, dsc.stage = 0 : i64
// CHECK-NEXT: dsc.get_parameter @h.0.w
// CHECK: dsc.accumulate %{{.*}} into @grad.h.0.w
// CHECK: dsc.embedding_grad %{{.*}}, %arg2
// CHECK: dsc.accumulate %{{.*}} into @grad.wte
// CHECK-NEXT: return
// CHECK-LABEL: func.func @forward_backward.stage1(
// CHECK-SAME: -> (tensor<f32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x16xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>)
// CHECK-SAME: dsc.weight_stash = 4 : i64
// CHECK: %[[H:.*]] = dsc.gelu %arg0
// CHECK: %[[W:.*]] = dsc.get_parameter @h.1.w
// CHECK: %[[X:.*]] = dsc.add %arg0
// CHECK: %[[LOSS:.*]] = dsc.cross_entropy
// CHECK: %[[DLOGITS:.*]] = dsc.cross_entropy_grad
// CHECK-NEXT: %[[DX:.*]] = dsc.matmul %[[DLOGITS]], %{{.*}} :
// CHECK-NEXT: %[[DH:.*]] = dsc.matmul %[[DX]], %[[W]] {transpose_rhs}
// CHECK-NEXT: %[[G:.*]] = dsc.gelu_grad %arg0, %[[DH]]
// CHECK-NEXT: %[[DIN:.*]] = dsc.add %[[DX]], %[[G]]
// CHECK-NEXT: return %[[LOSS]], %[[DIN]], %[[X]], %[[DLOGITS]], %[[H]], %[[DX]]
// CHECK-NOT: dsc.accumulate
// CHECK-LABEL: func.func @backward_weight.stage1(%arg0: tensor<2x4x8xf32>, %arg1: tensor<2x4x16xf32>, %arg2: tensor<2x4x8xf32>, %arg3: tensor<2x4x8xf32>)
// CHECK: dsc.matmul %{{.*}}, %{{.*}} {transpose_lhs} : tensor<8x16xf32>, tensor<8x8xf32> -> tensor<16x8xf32>
// CHECK-NEXT: dsc.accumulate %{{.*}} into @grad.wte
// CHECK: dsc.matmul %{{.*}}, %{{.*}} {transpose_lhs} : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
// CHECK-NEXT: dsc.accumulate %{{.*}} into @grad.h.1.w
// CHECK-NEXT: return

// The schedule runs W apart: stage 0 (one W held back at most: none, it
// is rank 0) right after each B; the last stage holds one back and runs
// the rest in its cool-down.
// STEP-LABEL: func.func @step.stage0
// STEP: dsc.pipeline_backward @backward.stage0 microbatch = 0
// STEP-NEXT: dsc.pipeline_backward_weight @backward_weight.stage0 microbatch = 0
// STEP-LABEL: func.func @step.stage1
// STEP: dsc.pipeline_backward @forward_backward.stage1 microbatch = 0
// STEP-NOT: dsc.pipeline_backward_weight
// STEP: dsc.pipeline_backward @forward_backward.stage1 microbatch = 1
// STEP: dsc.pipeline_backward_weight @backward_weight.stage1 microbatch = 0
// STEP: dsc.pipeline_backward @forward_backward.stage1 microbatch = 2
// STEP: dsc.pipeline_backward_weight @backward_weight.stage1 microbatch = 1
// STEP-NEXT: dsc.pipeline_backward_weight @backward_weight.stage1 microbatch = 2
// STEP-NEXT: return

// TWICE: error: --dsc-split-weight-gradient: stage 0's backward is split already
// UNSPLIT: error: --dsc-pipeline-schedule: stage 0 has no backward_weight program, which the zb-h1 schedule runs apart from the backward (run --dsc-split-weight-gradient before)

module @two_stages attributes {dsc.pipeline = #dsc.pipeline<stages = 2, schedule = "zb-h1">} {
  dsc.mesh @mesh axes = ["pp"] shape = [2]
  dsc.parameter @wte : tensor<16x8xf32> init = <normal, std = 2.000000e-02>
  dsc.parameter @h.0.w : tensor<8x8xf32> init = <normal, std = 2.000000e-02>
  dsc.parameter @h.1.w : tensor<8x8xf32> init = <normal, std = 2.000000e-02>
  func.func @loss.stage0(%arg0: tensor<2x4xi32>) -> tensor<2x4x8xf32> attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 0 : i64} {
    %0 = dsc.get_parameter @wte : tensor<16x8xf32>
    %1 = dsc.embedding %0, %arg0 : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
    %2 = dsc.get_parameter @h.0.w : tensor<8x8xf32>
    %3 = dsc.matmul %1, %2 : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
    %4 = dsc.add %1, %3 : tensor<2x4x8xf32>
    return %4 : tensor<2x4x8xf32>
  }
  func.func @loss.stage1(%arg0: tensor<2x4x8xf32>, %arg1: tensor<2x4xi32>) -> tensor<f32> attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 1 : i64} {
    %0 = dsc.gelu %arg0 : tensor<2x4x8xf32>
    %1 = dsc.get_parameter @h.1.w : tensor<8x8xf32>
    %2 = dsc.matmul %0, %1 : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
    %3 = dsc.add %arg0, %2 : tensor<2x4x8xf32>
    %4 = dsc.get_parameter @wte : tensor<16x8xf32>
    %5 = dsc.matmul %3, %4 {transpose_rhs} : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
    %6 = dsc.cross_entropy %5, %arg1 : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<f32>
    return %6 : tensor<f32>
  }
}

// -----

// Without a pipeline there are no stages to split.
// expected-error @below {{--dsc-split-weight-gradient: the module has no dsc.pipeline (a zero-bubble schedule splits pipeline stages' backwards; run --dsc-pipeline first)}}
module @one_stage {
  dsc.parameter @w : tensor<16x8xf32> init = #dsc.init<normal, std = 0.02>
  func.func @loss(%ids: tensor<2x4xi32>, %t: tensor<2x4xi32>) -> tensor<f32> {
    %w = dsc.get_parameter @w : tensor<16x8xf32>
    %x = dsc.embedding %w, %ids : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
    %logits = dsc.matmul %x, %w {transpose_rhs} : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
    %l = dsc.cross_entropy %logits, %t : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
