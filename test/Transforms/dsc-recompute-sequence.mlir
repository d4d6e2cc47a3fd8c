// RUN: dsc-opt %s --dsc-autodiff --dsc-recompute | FileCheck %s

// Sequence parallelism's gathers are done again in the backward, in every
// mode (here recompute=none): the weight gradient of the product reads a
// second all-gather of the rank's rows, made just before it, instead of
// the whole gathered input kept since the forward. Kept: only the logits
// the loss's gradient reads (2x4x8 f32, 256 bytes); the rows %arg0 are
// the program's input.
// CHECK-LABEL: func.func @forward_backward
// CHECK-SAME: dsc.saved_activation_bytes = 256 : i64
// CHECK: dsc.all_gather %arg0
// CHECK: dsc.cross_entropy_grad
// CHECK: %[[G:.*]] = dsc.all_gather %arg0 on @mesh axes = ["tp"] gather_dim = 0 : tensor<4x8xf32> -> tensor<8x8xf32>
// CHECK-NEXT: %[[R:.*]] = dsc.reshape %[[G]] : tensor<8x8xf32> -> tensor<2x4x8xf32>
// CHECK-NEXT: dsc.reshape %[[R]] : tensor<2x4x8xf32> -> tensor<8x8xf32>
// CHECK: dsc.matmul {{.*}} {transpose_lhs}

dsc.mesh @mesh axes = ["tp"] shape = [2]
dsc.parameter @h.0.w : tensor<8x8xf32> init = #dsc.init<normal, std = 0.02>
func.func @loss(%x: tensor<4x8xf32>, %t: tensor<2x4xi32>) -> tensor<f32> {
  %g = dsc.all_gather %x on @mesh axes = ["tp"] gather_dim = 0 : tensor<4x8xf32> -> tensor<8x8xf32> loc("h.0.fc")
  %r = dsc.reshape %g : tensor<8x8xf32> -> tensor<2x4x8xf32> loc("h.0.fc")
  %w = dsc.get_parameter @h.0.w : tensor<8x8xf32>
  %y = dsc.matmul %r, %w : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32> loc("h.0.fc")
  %l = dsc.cross_entropy %y, %t : tensor<2x4x8xf32>, tensor<2x4xi32> -> tensor<f32> loc("loss")
  return %l : tensor<f32>
}
