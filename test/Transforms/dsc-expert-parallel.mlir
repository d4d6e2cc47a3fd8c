// RUN: dsc-opt %s --dsc-expert-parallel -split-input-file -verify-diagnostics | FileCheck %s
// RUN: dsc-opt %s --dsc-expert-parallel --dsc-autodiff -split-input-file -verify-diagnostics 2>/dev/null | FileCheck %s --check-prefix=GRAD

// One MoE layer at ep=2: 4 experts, capacity 4, 8 tokens of width 8. The
// slots go to their experts' ranks (split 0, concat 1), the experts run on
// their 2 of 4 experts with the slots of both ranks, and come back (split
// 1, concat 0) before the combine. The expert weights keep their rank's 2
// experts with a layout over ep; the router stays whole.
// CHECK-LABEL: module @one_layer
// CHECK: dsc.parameter @router : tensor<8x4xf32>
// CHECK-NOT: layout
// CHECK: dsc.parameter @fc : tensor<2x8x16xf32> init = <normal, std = 2.000000e-02> layout = <view = [4, 8, 16], split = {{\[}}["ep"], [], []]>
// CHECK: dsc.parameter @proj : tensor<2x16x8xf32> init = <normal, std = 2.000000e-02> layout = <view = [4, 16, 8], split = {{\[}}["ep"], [], []]>
// CHECK: %[[XE:.*]] = dsc.moe_dispatch
// CHECK-NEXT: %[[IN:.*]] = dsc.all_to_all %[[XE]] on @mesh axes = ["ep"] split_dim = 0 concat_dim = 1 grad_scale = 2.000000e+00 : tensor<4x4x8xf32> -> tensor<2x8x8xf32>
// CHECK: dsc.matmul %[[IN]], %{{.*}} : tensor<2x8x8xf32>, tensor<2x8x16xf32> -> tensor<2x8x16xf32>
// CHECK: dsc.gelu %{{.*}} : tensor<2x8x16xf32>
// CHECK: %[[YE:.*]] = dsc.matmul %{{.*}}, %{{.*}} : tensor<2x8x16xf32>, tensor<2x16x8xf32> -> tensor<2x8x8xf32>
// CHECK-NEXT: %[[OUT:.*]] = dsc.all_to_all %[[YE]] on @mesh axes = ["ep"] split_dim = 1 concat_dim = 0 grad_scale = 5.000000e-01 : tensor<2x8x8xf32> -> tensor<4x4x8xf32>
// CHECK-NEXT: dsc.moe_combine %[[OUT]]

// Autodiff sends each gradient back the way its value came, with the
// forward's grad_scale: 1/2 into the experts, 2 out of them.
// GRAD-LABEL: module @one_layer
// GRAD: dsc.all_to_all %{{.*}} on @mesh axes = ["ep"] split_dim = 0 concat_dim = 1 scale = 5.000000e-01 : tensor<4x4x8xf32> -> tensor<2x8x8xf32>
// GRAD: dsc.all_to_all %{{.*}} on @mesh axes = ["ep"] split_dim = 1 concat_dim = 0 scale = 2.000000e+00 : tensor<2x8x8xf32> -> tensor<4x4x8xf32>
module @one_layer attributes {dsc.parallel_plan = #dsc.parallel_plan<"dp=2 ep=2">} {
  dsc.mesh @mesh axes = ["edp", "ep"] shape = [1, 2]
  dsc.parameter @router : tensor<8x4xf32> init = <normal, std = 2.000000e-02>
  dsc.parameter @fc : tensor<4x8x16xf32> init = <normal, std = 2.000000e-02>
  dsc.parameter @proj : tensor<4x16x8xf32> init = <normal, std = 2.000000e-02>
  func.func @loss(%x: tensor<1x8x8xf32>, %t: tensor<1x8xi32>) -> tensor<f32> {
    %wg = dsc.get_parameter @router : tensor<8x4xf32>
    %logits = dsc.matmul %x, %wg : tensor<1x8x8xf32>, tensor<8x4xf32> -> tensor<1x8x4xf32>
    %slots, %gates, %aux = dsc.moe_route %logits {aux_coeff = 1.000000e-02 : f64, capacity = 4 : i64, drop_tokens, seed = 1 : i64, top_k = 2 : i64} : tensor<1x8x4xf32> -> tensor<4x4xi32>, tensor<4x4xf32>, tensor<f32>
    %xe = dsc.moe_dispatch %x, %slots : tensor<1x8x8xf32>, tensor<4x4xi32> -> tensor<4x4x8xf32>
    %w1 = dsc.get_parameter @fc : tensor<4x8x16xf32>
    %h = dsc.matmul %xe, %w1 : tensor<4x4x8xf32>, tensor<4x8x16xf32> -> tensor<4x4x16xf32>
    %a = dsc.gelu %h : tensor<4x4x16xf32>
    %w2 = dsc.get_parameter @proj : tensor<4x16x8xf32>
    %ye = dsc.matmul %a, %w2 : tensor<4x4x16xf32>, tensor<4x16x8xf32> -> tensor<4x4x8xf32>
    %y = dsc.moe_combine %ye, %slots gates %gates : tensor<4x4x8xf32>, tensor<4x4xi32>, tensor<4x4xf32> -> tensor<1x8x8xf32>
    %w3 = dsc.get_parameter @router : tensor<8x4xf32>
    %l = dsc.matmul %y, %w3 : tensor<1x8x8xf32>, tensor<8x4xf32> -> tensor<1x8x4xf32>
    %ce = dsc.cross_entropy %l, %t : tensor<1x8x4xf32>, tensor<1x8xi32> -> tensor<f32>
    %loss = dsc.auxiliary_loss %ce, %aux : tensor<f32>, tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// Experts that ep does not divide.
module @indivisible attributes {dsc.parallel_plan = #dsc.parallel_plan<"dp=4 ep=4">} {
  dsc.mesh @mesh axes = ["edp", "ep"] shape = [1, 4]
  dsc.parameter @fc : tensor<2x8x8xf32> init = <normal, std = 2.000000e-02>
  func.func @loss(%x: tensor<1x8x8xf32>, %logits: tensor<1x8x2xf32>) -> tensor<1x8x8xf32> {
    %slots, %gates, %aux = dsc.moe_route %logits {aux_coeff = 1.000000e-02 : f64, capacity = 8 : i64, seed = 1 : i64, top_k = 1 : i64} : tensor<1x8x2xf32> -> tensor<2x8xi32>, tensor<2x8xf32>, tensor<f32>
    // expected-error @+1 {{--dsc-expert-parallel: 2 experts are not divisible by ep=4}}
    %xe = dsc.moe_dispatch %x, %slots : tensor<1x8x8xf32>, tensor<2x8xi32> -> tensor<2x8x8xf32>
    %w = dsc.get_parameter @fc : tensor<2x8x8xf32>
    %ye = dsc.matmul %xe, %w : tensor<2x8x8xf32>, tensor<2x8x8xf32> -> tensor<2x8x8xf32>
    %y = dsc.moe_combine %ye, %slots gates %gates : tensor<2x8x8xf32>, tensor<2x8xi32>, tensor<2x8xf32> -> tensor<1x8x8xf32>
    return %y : tensor<1x8x8xf32>
  }
}

// -----

// An op the pass cannot move onto a rank's experts.
module @other_op attributes {dsc.parallel_plan = #dsc.parallel_plan<"dp=2 ep=2">} {
  dsc.mesh @mesh axes = ["edp", "ep"] shape = [1, 2]
  func.func @loss(%x: tensor<1x8x8xf32>, %logits: tensor<1x8x2xf32>) -> tensor<1x8x8xf32> {
    %slots, %gates, %aux = dsc.moe_route %logits {aux_coeff = 1.000000e-02 : f64, capacity = 8 : i64, seed = 1 : i64, top_k = 1 : i64} : tensor<1x8x2xf32> -> tensor<2x8xi32>, tensor<2x8xf32>, tensor<f32>
    %xe = dsc.moe_dispatch %x, %slots : tensor<1x8x8xf32>, tensor<2x8xi32> -> tensor<2x8x8xf32>
    // expected-error @+1 {{--dsc-expert-parallel: only batched products, GELU and SwiGLU may run between an MoE dispatch and its combine}}
    %s = dsc.softmax %xe : tensor<2x8x8xf32>
    %y = dsc.moe_combine %s, %slots gates %gates : tensor<2x8x8xf32>, tensor<2x8xi32>, tensor<2x8xf32> -> tensor<1x8x8xf32>
    return %y : tensor<1x8x8xf32>
  }
}

// -----

// ep without MoE layers.
// expected-error @+1 {{--dsc-expert-parallel: ep=2 splits the experts of MoE layers, but @loss has none}}
module @dense attributes {dsc.parallel_plan = #dsc.parallel_plan<"dp=2 ep=2">} {
  dsc.mesh @mesh axes = ["edp", "ep"] shape = [1, 2]
  func.func @loss(%x: tensor<1x8x8xf32>) -> tensor<1x8x8xf32> {
    return %x : tensor<1x8x8xf32>
  }
}
