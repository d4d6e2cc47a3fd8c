// RUN: dsc-opt %s --dsc-autodiff --dsc-optimizer="lr-schedule=constant warmup=0" --dsc-data-parallel="dp=4 zero=3" | FileCheck %s --enable-var-scope
// RUN: dsc-opt %s --dsc-autodiff --dsc-optimizer="lr-schedule=constant warmup=0" --dsc-data-parallel="dp=4 zero=3" --dsc-plan-memory --dsc-plan-summary -o /dev/null | FileCheck %s --check-prefix=BYTES

// ZeRO-3: @wte (96 elements) and @fc.weight (36) become chunks of 24 and 9
// elements whose layout says which part of the whole each rank holds; the
// layer norm's 6-element parameters (dp=4 does not divide them) stay
// replicated as in ZeRO-1/2.
// CHECK: dsc.mesh @mesh axes = ["dp"] shape = [4]
// CHECK: dsc.parameter @wte : tensor<24xf32> init = <normal, std = 2.000000e-02> layout = <view = [16, 6], split = {{\[}}[], []], chunk = ["dp"]>
// CHECK: dsc.parameter @ln.weight : tensor<6xf32> init = <ones>{{$}}
// CHECK: dsc.parameter @fc.weight : tensor<9xf32> init = <normal, std = 2.000000e-02> layout = <view = [6, 6], split = {{\[}}[], []], chunk = ["dp"]>
// CHECK-DAG: dsc.state @grad.wte : tensor<24xf32> gradient of @wte
// CHECK-DAG: dsc.state @grad.fc.weight : tensor<9xf32> gradient of @fc.weight
// CHECK-DAG: dsc.state @grad.ln.weight : tensor<6xf32> gradient of @ln.weight
// CHECK-DAG: dsc.state @adam.m.wte : tensor<24xf32> exp_avg of @wte
// CHECK-DAG: dsc.state @adam.v.wte : tensor<24xf32> exp_avg_sq of @wte
// CHECK-DAG: dsc.state @adam.m.ln.weight : tensor<6xf32> exp_avg of @ln.weight

// The evaluation loss gathers each chunked parameter once, right before its
// first use; replicated parameters are still read.
// CHECK-LABEL: func.func @loss
// CHECK-NOT: dsc.get_parameter @wte
// CHECK: dsc.get_parameter @ln.weight : tensor<6xf32>
// CHECK: %[[WTE:.*]] = dsc.gather_parameter @wte on @mesh axes = ["dp"] : tensor<16x6xf32>
// CHECK-NEXT: dsc.embedding %[[WTE]]
// CHECK: %[[FC:.*]] = dsc.gather_parameter @fc.weight on @mesh axes = ["dp"] : tensor<6x6xf32>
// CHECK-NEXT: dsc.matmul %{{.*}}, %[[FC]]
// CHECK-NOT: dsc.gather_parameter
// CHECK: dsc.matmul %{{.*}}, %[[WTE]] {transpose_rhs}
// CHECK: return

// Training: the forward gathers before the first forward use, and the
// backward (after the loss) gathers again before its first use; the
// gradients are reduce-scattered into their chunks every micro-batch.
// CHECK-LABEL: func.func @forward_backward
// CHECK: %[[WTE0:.*]] = dsc.gather_parameter @wte on @mesh axes = ["dp"] : tensor<16x6xf32>
// CHECK-NEXT: dsc.embedding %[[WTE0]]
// CHECK: %[[FC0:.*]] = dsc.gather_parameter @fc.weight on @mesh axes = ["dp"] : tensor<6x6xf32>
// CHECK-NEXT: dsc.matmul %{{.*}}, %[[FC0]]
// CHECK: dsc.matmul %{{.*}}, %[[WTE0]] {transpose_rhs}
// CHECK: %[[LOSS:.*]] = dsc.cross_entropy
// CHECK-NOT: %[[WTE0]]
// CHECK-NOT: %[[FC0]]
// CHECK: %[[WTE1:.*]] = dsc.gather_parameter @wte on @mesh axes = ["dp"] : tensor<16x6xf32>
// CHECK-NEXT: dsc.matmul %{{.*}}, %[[WTE1]]
// CHECK-NOT: %[[WTE0]]
// CHECK-NOT: %[[FC0]]
// CHECK: %[[FC1:.*]] = dsc.gather_parameter @fc.weight on @mesh axes = ["dp"] : tensor<6x6xf32>
// CHECK-NEXT: dsc.matmul %{{.*}}, %[[FC1]]
// CHECK-DAG: dsc.reduce_scatter_accumulate %{{.*}} into @grad.fc.weight on @mesh axes = ["dp"] reduction = avg : tensor<6x6xf32>
// CHECK-DAG: dsc.accumulate %{{.*}} into @grad.ln.weight : tensor<6xf32>
// CHECK-DAG: dsc.reduce_scatter_accumulate %{{.*}} into @grad.wte on @mesh axes = ["dp"] reduction = avg : tensor<16x6xf32>
// CHECK: return %[[LOSS]]

// The update: replicated gradients are all-reduced, chunked ones counted
// once each in the norm, AdamW updates the chunks in place (no `sharded`,
// no all-gather after it).
// CHECK-LABEL: func.func @optimizer
// CHECK-NOT: dsc.reduce_scatter_states
// CHECK: dsc.all_reduce_states [@grad.ln.bias, @grad.ln.weight] on @mesh axes = ["dp"] reduction = avg
// CHECK: dsc.clip_grad_norm {{.*}} sharded on @mesh axes = ["dp"]
// CHECK: dsc.adamw @wte grad = @grad.wte exp_avg = @adam.m.wte exp_avg_sq = @adam.v.wte lr = %{{[^ ]*}} beta1 = {{[^ ]*}} beta2 = {{[^ ]*}} eps = {{[^ ]*}} weight_decay = {{[^ ]*}} : tensor<f32>
// CHECK-NOT: dsc.all_gather_states
// CHECK: return

// Per rank and micro-batch: two gathers of (4-1)/4 of 4*(96+36) bytes and
// one reduce-scatter of it; the replicated 12 elements are all-reduced
// (2*3/4*48) and the norm's f64 (8 for rank 0: one element is one chunk).
// BYTES: "parameters": 45,
// BYTES: "whole_parameters": 144,
// BYTES: "gradient_elements": 45,
// BYTES: "optimizer_state_elements": 90,
// BYTES: "model_state_bytes": 720,
// BYTES: "all_reduce": 80,
// BYTES: "reduce_scatter": 396,
// BYTES: "all_gather": 792

module {
  dsc.parameter @wte : tensor<16x6xf32> init = #dsc.init<normal, std = 0.02>
  dsc.parameter @ln.weight : tensor<6xf32> init = #dsc.init<ones>
  dsc.parameter @ln.bias : tensor<6xf32> init = #dsc.init<zeros>
  dsc.parameter @fc.weight : tensor<6x6xf32> init = #dsc.init<normal, std = 0.02>
  func.func @loss(%ids: tensor<2x4xi32>, %targets: tensor<2x4xi32>) -> tensor<f32> {
    %wte = dsc.get_parameter @wte : tensor<16x6xf32>
    %g = dsc.get_parameter @ln.weight : tensor<6xf32>
    %b = dsc.get_parameter @ln.bias : tensor<6xf32>
    %fc = dsc.get_parameter @fc.weight : tensor<6x6xf32>
    %x = dsc.embedding %wte, %ids : tensor<16x6xf32>, tensor<2x4xi32> -> tensor<2x4x6xf32>
    %h = dsc.layer_norm %x, %g, %b {epsilon = 1.0e-5 : f64} : tensor<2x4x6xf32>, tensor<6xf32>, tensor<6xf32>
    %y = dsc.matmul %h, %fc : tensor<2x4x6xf32>, tensor<6x6xf32> -> tensor<2x4x6xf32>
    %logits = dsc.matmul %y, %wte {transpose_rhs} : tensor<2x4x6xf32>, tensor<16x6xf32> -> tensor<2x4x16xf32>
    %loss = dsc.cross_entropy %logits, %targets : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}
