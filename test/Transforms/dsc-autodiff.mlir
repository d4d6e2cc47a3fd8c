// RUN: dsc-opt %s --dsc-autodiff -split-input-file -verify-diagnostics | FileCheck %s
// RUN: dsc-opt %s --dsc-autodiff="microbatches=4" -split-input-file -verify-diagnostics | FileCheck %s --check-prefix=SCALE

// A matmul, a bias, a residual add and the loss. The forward is cloned into
// @forward_backward, then each op's vector-Jacobian product in reverse
// order: the loss gradient seeded with 1, the bias gradient a reduction, the
// two contributions of the residual's %y summed, the weight's gradient
// x^T · dy; each parameter's gradient is accumulated into a new
// `gradient of` state declared after the last parameter. @loss stays, as
// the evaluation program.
// CHECK-LABEL: module attributes {dsc.microbatches = 1 : i64}
// CHECK: dsc.parameter @b
// CHECK-NEXT: dsc.state @grad.b : tensor<16xf32> gradient of @b
// CHECK-NEXT: dsc.state @grad.w : tensor<8x16xf32> gradient of @w
// CHECK-LABEL: func.func @loss(
// CHECK-NOT: dsc.accumulate
// CHECK: return
// CHECK-LABEL: func.func @forward_backward(%arg0: tensor<2x4x8xf32>, %arg1: tensor<2x4xi32>) -> tensor<f32>
// CHECK: %[[W:.*]] = dsc.get_parameter @w : tensor<8x16xf32>
// CHECK: %[[Y:.*]] = dsc.matmul %arg0, %[[W]]
// CHECK: %[[R:.*]] = dsc.add %{{.*}}, %[[Y]] : tensor<2x4x16xf32>
// CHECK-NEXT: %[[L:.*]] = dsc.cross_entropy %[[R]], %arg1
// CHECK-NEXT: %[[SEED:.*]] = arith.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[DR:.*]] = dsc.cross_entropy_grad %[[R]], %arg1, %[[SEED]] : tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<f32>
// CHECK-NEXT: %[[DB:.*]] = dsc.bias_grad %[[DR]] : tensor<2x4x16xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[DY:.*]] = dsc.add %[[DR]], %[[DR]] : tensor<2x4x16xf32>
// CHECK-NEXT: dsc.accumulate %[[DB]] into @grad.b : tensor<16xf32>
// CHECK: %[[X2:.*]] = dsc.reshape %arg0 : tensor<2x4x8xf32> -> tensor<8x8xf32>
// CHECK-NEXT: %[[DY2:.*]] = dsc.reshape %[[DY]] : tensor<2x4x16xf32> -> tensor<8x16xf32>
// CHECK-NEXT: %[[DW:.*]] = dsc.matmul %[[X2]], %[[DY2]] {transpose_lhs} : tensor<8x8xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
// CHECK-NEXT: dsc.accumulate %[[DW]] into @grad.w : tensor<8x16xf32>
// CHECK-NEXT: return %[[L]] : tensor<f32>

// microbatches=M seeds the loss gradient with 1/M (averaging the
// accumulated gradients) and records M on the module.
// SCALE-LABEL: module attributes {dsc.microbatches = 4 : i64}
// SCALE-LABEL: func.func @forward_backward
// SCALE: %[[SEED:.*]] = arith.constant dense<2.500000e-01> : tensor<f32>
// SCALE-NEXT: dsc.cross_entropy_grad %{{.*}}, %arg1, %[[SEED]]

dsc.parameter @w : tensor<8x16xf32> init = #dsc.init<normal, std = 0.02>
dsc.parameter @b : tensor<16xf32> init = #dsc.init<zeros>
func.func @loss(%x: tensor<2x4x8xf32>, %t: tensor<2x4xi32>) -> tensor<f32> {
  %w = dsc.get_parameter @w : tensor<8x16xf32>
  %y = dsc.matmul %x, %w : tensor<2x4x8xf32>, tensor<8x16xf32> -> tensor<2x4x16xf32>
  %b = dsc.get_parameter @b : tensor<16xf32>
  %z = dsc.bias_add %y, %b : tensor<2x4x16xf32>, tensor<16xf32>
  %r = dsc.add %z, %y : tensor<2x4x16xf32>
  %l = dsc.cross_entropy %r, %t : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A tied table: the embedding's and the LM head's gradients of the one
// read are summed before the one accumulation; a gradient state that
// exists already is accumulated into, not declared again.
// CHECK-LABEL: module attributes
// CHECK: dsc.state @grad.wte : tensor<16x8xf32> gradient of @wte
// CHECK-NOT: dsc.state
// CHECK-LABEL: func.func @forward_backward
// CHECK: %[[DL:.*]] = dsc.cross_entropy_grad
// CHECK: %[[DHEAD:.*]] = dsc.matmul {{.*}} -> tensor<16x8xf32>
// CHECK: %[[DE:.*]] = dsc.embedding_grad {{.*}}, %arg0 : tensor<2x4x8xf32>, tensor<2x4xi32> -> tensor<16x8xf32>
// CHECK-NEXT: %[[DWTE:.*]] = dsc.add %[[DHEAD]], %[[DE]] : tensor<16x8xf32>
// CHECK-NEXT: dsc.accumulate %[[DWTE]] into @grad.wte : tensor<16x8xf32>
// CHECK-NOT: dsc.accumulate
// CHECK: return
// SCALE-LABEL: func.func @forward_backward
// SCALE: arith.constant dense<2.500000e-01> : tensor<f32>

dsc.parameter @wte : tensor<16x8xf32> init = #dsc.init<normal, std = 0.02>
dsc.state @grad.wte : tensor<16x8xf32> gradient of @wte
func.func @loss(%ids: tensor<2x4xi32>, %t: tensor<2x4xi32>) -> tensor<f32> {
  %w = dsc.get_parameter @wte : tensor<16x8xf32>
  %x = dsc.embedding %w, %ids : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
  %logits = dsc.matmul %x, %w {transpose_rhs} : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
  %l = dsc.cross_entropy %logits, %t : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Pipeline stages (--dsc-pipeline) get one backward each. Stage 0 returns
// its output activation: its backward takes that activation's gradient as
// a new last argument and returns nothing. The last stage returns the loss
// and the gradient of its input activation. No @forward_backward.
// CHECK-LABEL: func.func @forward_backward.stage0(%arg0: tensor<2x4xi32>, %arg1: tensor<2x4x8xf32>) attributes {dsc.program = #dsc.program_role<forward_backward>, dsc.stage = 0 : i64}
// CHECK: %[[DT:.*]] = dsc.embedding_grad %arg1, %arg0
// CHECK-NEXT: dsc.accumulate %[[DT]] into @grad.wte
// CHECK-NEXT: return{{$}}
// CHECK-LABEL: func.func @forward_backward.stage1(%arg0: tensor<2x4x8xf32>, %arg1: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x8xf32>) attributes {dsc.program = #dsc.program_role<forward_backward>, dsc.stage = 1 : i64}
// CHECK: %[[HEAD:.*]] = dsc.get_parameter @head
// CHECK: %[[L:.*]] = dsc.cross_entropy
// CHECK: %[[DX:.*]] = dsc.matmul %{{.*}}, %[[HEAD]] : tensor<2x4x16xf32>, tensor<16x8xf32> -> tensor<2x4x8xf32>
// CHECK: dsc.accumulate %{{.*}} into @grad.head
// CHECK-NEXT: return %[[L]], %[[DX]] : tensor<f32>, tensor<2x4x8xf32>
// CHECK-NOT: func.func @forward_backward(
// SCALE-LABEL: func.func @forward_backward.stage1
// SCALE: arith.constant dense<2.500000e-01> : tensor<f32>

dsc.parameter @wte : tensor<16x8xf32> init = #dsc.init<normal, std = 0.02>
dsc.parameter @head : tensor<16x8xf32> init = #dsc.init<normal, std = 0.02>
func.func @loss.stage0(%ids: tensor<2x4xi32>) -> tensor<2x4x8xf32> attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 0 : i64} {
  %w = dsc.get_parameter @wte : tensor<16x8xf32>
  %x = dsc.embedding %w, %ids : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
  return %x : tensor<2x4x8xf32>
}
func.func @loss.stage1(%x: tensor<2x4x8xf32>, %t: tensor<2x4xi32>) -> tensor<f32> attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 1 : i64} {
  %w = dsc.get_parameter @head : tensor<16x8xf32>
  %logits = dsc.matmul %x, %w {transpose_rhs} : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
  %l = dsc.cross_entropy %logits, %t : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{--dsc-autodiff: no function @loss to differentiate}}
module {
  func.func @train() {
    return
  }
}

// -----

// expected-error @+1 {{--dsc-autodiff: the module already has a @forward_backward function}}
func.func @loss(%l: tensor<f32>) -> tensor<f32> {
  return %l : tensor<f32>
}
func.func @forward_backward() attributes {dsc.program = #dsc.program_role<forward_backward>} {
  return
}

// -----

// expected-error @+1 {{--dsc-autodiff: @loss must return one value, the result of a dsc.cross_entropy or dsc.vocab_parallel_cross_entropy, or of a dsc.auxiliary_loss of one (or, as a pipeline stage, its output activation)}}
func.func @loss(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %y = dsc.gelu %x : tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

func.func @loss(%x: tensor<2x4x16xf32>, %t: tensor<2x4xi32>) -> tensor<f32> {
  // expected-error @+1 {{'arith.addf' op is on the path to the loss but has no differentiation rule}}
  %y = arith.addf %x, %x : tensor<2x4x16xf32>
  %l = dsc.cross_entropy %y, %t : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// The gradient's name is taken by a symbol that is not a state.
dsc.parameter @w : tensor<16x8xf32> init = #dsc.init<zeros>
dsc.parameter @grad.w : tensor<16x8xf32> init = #dsc.init<zeros>
func.func @loss(%x: tensor<2x4x8xf32>, %t: tensor<2x4xi32>) -> tensor<f32> {
  // expected-error @+1 {{'dsc.get_parameter' op cannot create gradient state @grad.w: the symbol exists and is not a dsc.state}}
  %w = dsc.get_parameter @w : tensor<16x8xf32>
  %logits = dsc.matmul %x, %w {transpose_rhs} : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
  %l = dsc.cross_entropy %logits, %t : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// An MoE layer: the auxiliary loss gets the loss's own seed (the reported
// loss stays the cross-entropy); the combine's gradient dispatches the
// output's gradient with the gates and takes the gates' gradient; the
// router's gradient reads both; the dispatch's gradient sums the slots
// back into their tokens; the slots (i32) get none.
// CHECK-LABEL: func.func @forward_backward
// CHECK: %[[SLOTS:.*]], %[[GATES:.*]], %[[AUX:.*]] = dsc.moe_route %[[LOGITS:[^ ]*]]
// CHECK: %[[XE:.*]] = dsc.moe_dispatch %[[X:[^,]*]], %[[SLOTS]] :
// CHECK: %[[Y:.*]] = dsc.moe_combine %[[YE:[^,]*]], %[[SLOTS]] gates %[[GATES]]
// CHECK: %[[L:.*]] = dsc.cross_entropy %[[Y]]
// CHECK-NEXT: %[[TOTAL:.*]] = dsc.auxiliary_loss %[[L]], %[[AUX]]
// CHECK-NEXT: %[[SEED:.*]] = arith.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[DY:.*]] = dsc.cross_entropy_grad %[[Y]], %{{.*}}, %[[SEED]]
// CHECK-NEXT: %[[DYE:.*]] = dsc.moe_dispatch %[[DY]], %[[SLOTS]] gates %[[GATES]]
// CHECK-NEXT: %[[DG:.*]] = dsc.moe_gates_grad %[[YE]], %[[SLOTS]], %[[DY]]
// CHECK: dsc.moe_combine %{{.*}}, %[[SLOTS]] : tensor<4x8x16xf32>, tensor<4x8xi32> -> tensor<2x4x16xf32>
// CHECK: dsc.moe_route_grad %[[LOGITS]], %[[SLOTS]], %[[DG]], %[[SEED]] slot_order = choice_major {capacity = 8 : i64, top_k = 2 : i64}
// CHECK: return %[[TOTAL]] : tensor<f32>
dsc.parameter @wg : tensor<16x4xf32> init = #dsc.init<normal, std = 0.02>
dsc.parameter @w : tensor<4x16x16xf32> init = #dsc.init<normal, std = 0.02>
func.func @loss(%x: tensor<2x4x16xf32>, %t: tensor<2x4xi32>) -> tensor<f32> {
  %wg = dsc.get_parameter @wg : tensor<16x4xf32>
  %logits = dsc.matmul %x, %wg : tensor<2x4x16xf32>, tensor<16x4xf32> -> tensor<2x4x4xf32>
  %slots, %gates, %aux = dsc.moe_route %logits slot_order = choice_major
      {top_k = 2 : i64, capacity = 8 : i64}
      : tensor<2x4x4xf32> -> tensor<4x8xi32>, tensor<4x8xf32>, tensor<f32>
  %xe = dsc.moe_dispatch %x, %slots
      : tensor<2x4x16xf32>, tensor<4x8xi32> -> tensor<4x8x16xf32>
  %w = dsc.get_parameter @w : tensor<4x16x16xf32>
  %ye = dsc.matmul %xe, %w : tensor<4x8x16xf32>, tensor<4x16x16xf32> -> tensor<4x8x16xf32>
  %y = dsc.moe_combine %ye, %slots gates %gates
      : tensor<4x8x16xf32>, tensor<4x8xi32>, tensor<4x8xf32> -> tensor<2x4x16xf32>
  %l = dsc.cross_entropy %y, %t : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<f32>
  %total = dsc.auxiliary_loss %l, %aux : tensor<f32>, tensor<f32>
  return %total : tensor<f32>
}
