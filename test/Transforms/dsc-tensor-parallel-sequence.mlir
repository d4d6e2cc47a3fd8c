// RUN: dsc-opt %s --dsc-tensor-parallel="tp=2 sequence-parallel=1" -split-input-file -verify-diagnostics | FileCheck %s
// RUN: not dsc-opt %s --dsc-tensor-parallel="tp=1 sequence-parallel=1" -split-input-file 2>&1 | FileCheck %s --check-prefix=TP1

// TP1: error: --dsc-tensor-parallel: sequence-parallel=1 splits the tensor-parallel group's tokens and needs tp > 1

// Sequence parallelism, one rank of tp=2: an MLP (column- then
// row-parallel), the residual add, a layer norm and the LM head. The
// row-parallel product's g becomes a reshape to the 8 token rows and a
// reduce-scatter of them (4 rows per rank); the bias, the residual add
// and the layer norm run on the rank's rows; the residual's other operand,
// the function's replicated input, enters through scatter_to_parallel;
// the LM head's f becomes an all-gather of the rows and a reshape back.
// The region's parameters (the bias, the norm's weights) are read through
// copy_to_parallel, which sums their gradients over tp. The MLP's own f
// stays: its input is the replicated argument.
// CHECK-LABEL: func.func @loss
// CHECK: %[[X:.*]] = dsc.copy_to_parallel %arg0 on @mesh axes = ["tp"] : tensor<2x4x8xf32>
// CHECK: %[[B2:.*]] = dsc.get_parameter @proj.bias : tensor<8xf32>
// CHECK-NEXT: %[[B2S:.*]] = dsc.copy_to_parallel %[[B2]] on @mesh axes = ["tp"] : tensor<8xf32>
// CHECK-NEXT: %[[P:.*]] = dsc.matmul
// CHECK-NEXT: %[[PR:.*]] = dsc.reshape %[[P]] : tensor<2x4x8xf32> -> tensor<8x8xf32>
// CHECK-NEXT: %[[G:.*]] = dsc.reduce_scatter %[[PR]] on @mesh axes = ["tp"] scatter_dim = 0 : tensor<8x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[Y:.*]] = dsc.bias_add %[[G]], %[[B2S]] : tensor<4x8xf32>, tensor<8xf32>
// CHECK-NEXT: %[[XR:.*]] = dsc.reshape %arg0 : tensor<2x4x8xf32> -> tensor<8x8xf32>
// CHECK-NEXT: %[[XS:.*]] = dsc.scatter_to_parallel %[[XR]] on @mesh axes = ["tp"] dim = 0 : tensor<8x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[R:.*]] = dsc.add %[[XS]], %[[Y]] : tensor<4x8xf32>
// CHECK: %[[N:.*]] = dsc.layer_norm %[[R]], %{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
// CHECK: %[[NG:.*]] = dsc.all_gather %[[N]] on @mesh axes = ["tp"] gather_dim = 0 : tensor<4x8xf32> -> tensor<8x8xf32>
// CHECK-NEXT: %[[NW:.*]] = dsc.reshape %[[NG]] : tensor<8x8xf32> -> tensor<2x4x8xf32>
// CHECK-NEXT: dsc.matmul %[[NW]], %{{.*}} {transpose_rhs}
// CHECK-NEXT: dsc.vocab_parallel_cross_entropy
dsc.parameter @fc.weight : tensor<8x32xf32> init = #dsc.init<normal, std = 0.02>
dsc.parameter @fc.bias : tensor<32xf32> init = #dsc.init<zeros>
dsc.parameter @proj.weight : tensor<32x8xf32> init = #dsc.init<normal, std = 0.02>
dsc.parameter @proj.bias : tensor<8xf32> init = #dsc.init<zeros>
dsc.parameter @ln.weight : tensor<8xf32> init = #dsc.init<ones>
dsc.parameter @ln.bias : tensor<8xf32> init = #dsc.init<zeros>
dsc.parameter @head : tensor<16x8xf32> init = #dsc.init<normal, std = 0.02>
func.func @loss(%x: tensor<2x4x8xf32>, %t: tensor<2x4xi32>) -> tensor<f32> {
  %w1 = dsc.get_parameter @fc.weight : tensor<8x32xf32>
  %b1 = dsc.get_parameter @fc.bias : tensor<32xf32>
  %h = dsc.matmul %x, %w1 : tensor<2x4x8xf32>, tensor<8x32xf32> -> tensor<2x4x32xf32>
  %hb = dsc.bias_add %h, %b1 : tensor<2x4x32xf32>, tensor<32xf32>
  %a = dsc.gelu %hb : tensor<2x4x32xf32>
  %w2 = dsc.get_parameter @proj.weight : tensor<32x8xf32>
  %b2 = dsc.get_parameter @proj.bias : tensor<8xf32>
  %y = dsc.matmul %a, %w2 : tensor<2x4x32xf32>, tensor<32x8xf32> -> tensor<2x4x8xf32>
  %yb = dsc.bias_add %y, %b2 : tensor<2x4x8xf32>, tensor<8xf32>
  %r = dsc.add %x, %yb : tensor<2x4x8xf32>
  %g = dsc.get_parameter @ln.weight : tensor<8xf32>
  %be = dsc.get_parameter @ln.bias : tensor<8xf32>
  %n = dsc.layer_norm %r, %g, %be : tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>
  %wh = dsc.get_parameter @head : tensor<16x8xf32>
  %logits = dsc.matmul %n, %wh {transpose_rhs} : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
  %l = dsc.cross_entropy %logits, %t : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Three token rows do not split over tp=2.
dsc.parameter @fc.weight : tensor<8x32xf32> init = #dsc.init<normal, std = 0.02>
dsc.parameter @proj.weight : tensor<32x8xf32> init = #dsc.init<normal, std = 0.02>
func.func @loss(%x: tensor<1x3x8xf32>) -> tensor<1x3x8xf32> {
  %w1 = dsc.get_parameter @fc.weight : tensor<8x32xf32>
  %h = dsc.matmul %x, %w1 : tensor<1x3x8xf32>, tensor<8x32xf32> -> tensor<1x3x32xf32>
  %a = dsc.gelu %h : tensor<1x3x32xf32>
  %w2 = dsc.get_parameter @proj.weight : tensor<32x8xf32>
  // expected-error @+1 {{--dsc-tensor-parallel: sequence parallelism splits the 3 token rows of 'tensor<1x3x8xf32>' over tp=2, which does not divide them}}
  %y = dsc.matmul %a, %w2 : tensor<1x3x32xf32>, tensor<32x8xf32> -> tensor<1x3x8xf32>
  return %y : tensor<1x3x8xf32>
}

// -----

// A value split by token rows may only flow into ops of one row at a
// time or back through a gather.
dsc.parameter @fc.weight : tensor<8x32xf32> init = #dsc.init<normal, std = 0.02>
dsc.parameter @proj.weight : tensor<32x8xf32> init = #dsc.init<normal, std = 0.02>
func.func @loss(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %w1 = dsc.get_parameter @fc.weight : tensor<8x32xf32>
  %h = dsc.matmul %x, %w1 : tensor<2x4x8xf32>, tensor<8x32xf32> -> tensor<2x4x32xf32>
  %a = dsc.gelu %h : tensor<2x4x32xf32>
  %w2 = dsc.get_parameter @proj.weight : tensor<32x8xf32>
  %y = dsc.matmul %a, %w2 : tensor<2x4x32xf32>, tensor<32x8xf32> -> tensor<2x4x8xf32>
  // expected-error @+1 {{--dsc-tensor-parallel: sequence parallelism splits this op's input by token rows, but it splits only layer norms, RMS norms, residual adds, biases, dropouts and casts between the tensor-parallel regions}}
  %s = dsc.softmax %y : tensor<2x4x8xf32>
  return %s : tensor<2x4x8xf32>
}
