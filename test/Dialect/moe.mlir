// RUN: dsc-opt %s -split-input-file -verify-diagnostics | FileCheck %s

// The MoE ops print and parse back; the routing rules show when they are
// not the defaults.

// CHECK-LABEL: func.func @layer
// CHECK: dsc.moe_route %{{.*}} normalize = after_drop slot_order = choice_major {aux_coeff = 1.000000e-02 : f64, capacity = 16 : i64, drop_tokens, top_k = 2 : i64}
// CHECK: dsc.moe_dispatch %{{.*}}, %{{.*}} : tensor<2x8x32xf32>, tensor<4x16xi32> -> tensor<4x16x32xf32>
// CHECK: dsc.moe_combine %{{.*}}, %{{.*}} gates %{{.*}} : tensor<4x16x32xf32>, tensor<4x16xi32>, tensor<4x16xf32> -> tensor<2x8x32xf32>
// CHECK: dsc.moe_route_grad {{.*}} normalize = before_drop drop_policy = probs aux_counts = all_choices
// CHECK: dsc.moe_gates_grad
// CHECK: dsc.auxiliary_loss %{{.*}}, %{{.*}} : tensor<f32>, tensor<f32>
func.func @layer(%x: tensor<2x8x32xf32>, %logits: tensor<2x8x4xf32>,
                 %loss: tensor<f32>) -> tensor<f32> {
  %slots, %gates, %aux = dsc.moe_route %logits normalize = after_drop
      slot_order = choice_major {top_k = 2 : i64, capacity = 16 : i64,
      drop_tokens, aux_coeff = 1.0e-02 : f64}
      : tensor<2x8x4xf32> -> tensor<4x16xi32>, tensor<4x16xf32>, tensor<f32>
  %xe = dsc.moe_dispatch %x, %slots
      : tensor<2x8x32xf32>, tensor<4x16xi32> -> tensor<4x16x32xf32>
  %y = dsc.moe_combine %xe, %slots gates %gates
      : tensor<4x16x32xf32>, tensor<4x16xi32>, tensor<4x16xf32>
      -> tensor<2x8x32xf32>
  %d = dsc.moe_route_grad %logits, %slots, %gates, %aux normalize = before_drop
      drop_policy = probs aux_counts = all_choices
      {top_k = 2 : i64, capacity = 16 : i64, drop_tokens}
      : tensor<2x8x4xf32>, tensor<4x16xi32>, tensor<4x16xf32>, tensor<f32>
  %dg = dsc.moe_gates_grad %xe, %slots, %y
      : tensor<4x16x32xf32>, tensor<4x16xi32>, tensor<2x8x32xf32>
      -> tensor<4x16xf32>
  %l = dsc.auxiliary_loss %loss, %aux : tensor<f32>, tensor<f32>
  return %l : tensor<f32>
}

// -----

// A pipeline stage's routing losses (--dsc-pipeline), seeded in the stage.
// CHECK-LABEL: func.func @stage_losses
// CHECK: dsc.stage_auxiliary_loss %{{.*}}, %{{.*}} : tensor<f32>, tensor<f32>
func.func @stage_losses(%a: tensor<f32>, %b: tensor<f32>) {
  dsc.stage_auxiliary_loss %a, %b : tensor<f32>, tensor<f32>
  return
}

// -----

func.func @top_k_above_experts(%logits: tensor<2x8x4xf32>) {
  // expected-error @+1 {{top_k must be in [1, 4] (the experts), got 5}}
  %slots, %gates, %aux = dsc.moe_route %logits {top_k = 5 : i64, capacity = 16 : i64, drop_tokens}
      : tensor<2x8x4xf32> -> tensor<4x16xi32>, tensor<4x16xf32>, tensor<f32>
  return
}

// -----

func.func @dropless_too_small(%logits: tensor<2x8x4xf32>) {
  // expected-error @+1 {{without drop_tokens every expert must have room for all 16 tokens (capacity >= tokens), got capacity 8}}
  %slots, %gates, %aux = dsc.moe_route %logits {top_k = 1 : i64, capacity = 8 : i64}
      : tensor<2x8x4xf32> -> tensor<4x8xi32>, tensor<4x8xf32>, tensor<f32>
  return
}

// -----

func.func @slots_shape(%logits: tensor<2x8x4xf32>) {
  // expected-error @+1 {{slots must be [experts, capacity] = [4x16], got [3x16]}}
  %slots, %gates, %aux = dsc.moe_route %logits {top_k = 1 : i64, capacity = 16 : i64}
      : tensor<2x8x4xf32> -> tensor<3x16xi32>, tensor<4x16xf32>, tensor<f32>
  return
}

// -----

func.func @negative_coefficient(%logits: tensor<2x8x4xf32>) {
  // expected-error @+1 {{aux_coeff and z_coeff must be finite and >= 0, got -1.000000e+00 and 0.000000e+00}}
  %slots, %gates, %aux = dsc.moe_route %logits {top_k = 1 : i64, capacity = 16 : i64, aux_coeff = -1.0 : f64}
      : tensor<2x8x4xf32> -> tensor<4x16xi32>, tensor<4x16xf32>, tensor<f32>
  return
}

// -----

func.func @dispatch_rows(%x: tensor<2x8x32xf32>, %slots: tensor<4x16xi32>) {
  // expected-error @+1 {{the slot rows must be [experts, capacity, hidden] = [4x16x32], got [4x16x16]}}
  %xe = dsc.moe_dispatch %x, %slots
      : tensor<2x8x32xf32>, tensor<4x16xi32> -> tensor<4x16x16xf32>
  return
}

// -----

func.func @combine_gates(%ye: tensor<4x16x32xf32>, %slots: tensor<4x16xi32>, %g: tensor<4x8xf32>) {
  // expected-error @+1 {{gates must be [experts, capacity] like the slots, of the rows' element type, got 'tensor<4x8xf32>'}}
  %y = dsc.moe_combine %ye, %slots gates %g
      : tensor<4x16x32xf32>, tensor<4x16xi32>, tensor<4x8xf32> -> tensor<2x8x32xf32>
  return
}

// -----

func.func @aux_type(%loss: tensor<f32>, %aux: tensor<f64>) {
  // expected-error @+1 {{each auxiliary loss must have the loss's type 'tensor<f32>', got 'tensor<f64>'}}
  %l = dsc.auxiliary_loss %loss, %aux : tensor<f32>, tensor<f64>
  return
}
