// RUN: dsc-opt %s -split-input-file -verify-diagnostics --dsc-autodiff --dsc-stage-backward | FileCheck %s
// RUN: not dsc-opt %s -split-input-file --dsc-autodiff --dsc-stage-backward --dsc-stage-backward 2>&1 | FileCheck %s --check-prefix=TWICE

// Two stages (as --dsc-pipeline cuts them). Stage 0's backward reads the
// embedding's output (the matmul's weight gradient needs its input): the
// forward returns it after the stage output, and @backward.stage0 takes it
// after the output's gradient, with no forward op left; it reads its
// weight again instead of keeping it. The last stage runs forward and
// backward together and is left as it is.
// CHECK-LABEL: module @two_stages
// CHECK-LABEL: func.func @loss.stage0(%arg0: tensor<2x4xi32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>)
// CHECK: %[[X:.*]] = dsc.embedding
// CHECK: %[[OUT:.*]] = dsc.add %[[X]], %{{.*}}
// CHECK-NEXT: return %[[OUT]], %[[X]] : tensor<2x4x8xf32>, tensor<2x4x8xf32>
// CHECK-LABEL: func.func @backward.stage0(%arg0: tensor<2x4xi32>, %arg1: tensor<2x4x8xf32>, %arg2: tensor<2x4x8xf32>)
// CHECK-SAME: dsc.program = #dsc.program_role<forward_backward>, dsc.stage = 0 : i64
// CHECK-NEXT: %[[W:.*]] = dsc.get_parameter @h.0.w
// CHECK-NEXT: dsc.matmul %arg1, %[[W]] {transpose_rhs}
// CHECK-NEXT: dsc.reshape %arg2
// CHECK-NOT: dsc.embedding %
// CHECK: dsc.embedding_grad
// CHECK-LABEL: func.func @loss.stage1
// CHECK-SAME: -> tensor<f32>
// CHECK-LABEL: func.func @forward_backward.stage1
// CHECK-NEXT: dsc.gelu %arg0
// TWICE: error: --dsc-stage-backward: stage 0 is split already, or its programs are not (input) -> output and (input, output gradient) -> input gradient

module @two_stages attributes {dsc.pipeline = #dsc.pipeline<stages = 2, schedule = "1f1b">} {
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

// Without a pipeline there is nothing to split.
// CHECK-LABEL: module @one_stage
// CHECK: func.func @forward_backward(
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
