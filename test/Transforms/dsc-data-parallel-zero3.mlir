// RUN: dsc-opt %s --dsc-data-parallel="dp=4 zero=3" -verify-diagnostics | FileCheck %s
// RUN: dsc-opt %s --dsc-data-parallel="dp=4 zero=3" --dsc-plan-memory --dsc-plan-summary -o /dev/null | FileCheck %s --check-prefix=BYTES
// RUN: dsc-opt %s --dsc-data-parallel="dp=4 zero=3 persistence-threshold=36" | FileCheck %s --check-prefix=PERSIST

// DeepSpeed's stage3_param_persistence_threshold: @fc.weight (36 elements)
// stays whole with a replicated update, @wte (96) is still chunked.
// PERSIST: dsc.parameter @wte : tensor<24xf32> {{.*}} chunk = ["dp"]>
// PERSIST: dsc.parameter @fc.weight : tensor<6x6xf32> init = <normal, std = 2.000000e-02>{{$}}
// PERSIST-LABEL: func.func @forward_backward
// PERSIST-NOT: dsc.gather_parameter @fc.weight
// PERSIST: dsc.accumulate %{{.*}} into @grad.fc.weight : tensor<6x6xf32>

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

// The training programs of an embedding, a layer norm, a product and a
// tied LM head, as --dsc-autodiff and --dsc-optimizer="lr-schedule=constant
// warmup=0" make them.
module attributes {dsc.microbatches = 1 : i64} {
  dsc.parameter @wte : tensor<16x6xf32> init = <normal, std = 2.000000e-02>
  dsc.parameter @ln.weight : tensor<6xf32> init = <ones>
  dsc.parameter @ln.bias : tensor<6xf32> init = <zeros>
  dsc.parameter @fc.weight : tensor<6x6xf32> init = <normal, std = 2.000000e-02>
  dsc.state @grad.fc.weight : tensor<6x6xf32> gradient of @fc.weight
  dsc.state @grad.ln.bias : tensor<6xf32> gradient of @ln.bias
  dsc.state @grad.ln.weight : tensor<6xf32> gradient of @ln.weight
  dsc.state @grad.wte : tensor<16x6xf32> gradient of @wte
  dsc.state @adam.m.fc.weight : tensor<6x6xf32> exp_avg of @fc.weight
  dsc.state @adam.v.fc.weight : tensor<6x6xf32> exp_avg_sq of @fc.weight
  dsc.state @adam.m.ln.bias : tensor<6xf32> exp_avg of @ln.bias
  dsc.state @adam.v.ln.bias : tensor<6xf32> exp_avg_sq of @ln.bias
  dsc.state @adam.m.ln.weight : tensor<6xf32> exp_avg of @ln.weight
  dsc.state @adam.v.ln.weight : tensor<6xf32> exp_avg_sq of @ln.weight
  dsc.state @adam.m.wte : tensor<16x6xf32> exp_avg of @wte
  dsc.state @adam.v.wte : tensor<16x6xf32> exp_avg_sq of @wte
  func.func @loss(%arg0: tensor<2x4xi32>, %arg1: tensor<2x4xi32>) -> tensor<f32> {
    %0 = dsc.get_parameter @wte : tensor<16x6xf32>
    %1 = dsc.get_parameter @ln.weight : tensor<6xf32>
    %2 = dsc.get_parameter @ln.bias : tensor<6xf32>
    %3 = dsc.get_parameter @fc.weight : tensor<6x6xf32>
    %4 = dsc.embedding %0, %arg0 : tensor<16x6xf32>, tensor<2x4xi32> -> tensor<2x4x6xf32>
    %5 = dsc.layer_norm %4, %1, %2 : tensor<2x4x6xf32>, tensor<6xf32>, tensor<6xf32>
    %6 = dsc.matmul %5, %3 : tensor<2x4x6xf32>, tensor<6x6xf32> -> tensor<2x4x6xf32>
    %7 = dsc.matmul %6, %0 {transpose_rhs} : tensor<2x4x6xf32>, tensor<16x6xf32> -> tensor<2x4x16xf32>
    %8 = dsc.cross_entropy %7, %arg1 : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<f32>
    return %8 : tensor<f32>
  }
  func.func @forward_backward(%arg0: tensor<2x4xi32>, %arg1: tensor<2x4xi32>) -> tensor<f32> attributes {dsc.program = #dsc.program_role<forward_backward>} {
    %0 = dsc.get_parameter @wte : tensor<16x6xf32>
    %1 = dsc.get_parameter @ln.weight : tensor<6xf32>
    %2 = dsc.get_parameter @ln.bias : tensor<6xf32>
    %3 = dsc.get_parameter @fc.weight : tensor<6x6xf32>
    %4 = dsc.embedding %0, %arg0 : tensor<16x6xf32>, tensor<2x4xi32> -> tensor<2x4x6xf32>
    %5 = dsc.layer_norm %4, %1, %2 : tensor<2x4x6xf32>, tensor<6xf32>, tensor<6xf32>
    %6 = dsc.matmul %5, %3 : tensor<2x4x6xf32>, tensor<6x6xf32> -> tensor<2x4x6xf32>
    %7 = dsc.matmul %6, %0 {transpose_rhs} : tensor<2x4x6xf32>, tensor<16x6xf32> -> tensor<2x4x16xf32>
    %8 = dsc.cross_entropy %7, %arg1 : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<f32>
    %cst = arith.constant dense<1.000000e+00> : tensor<f32>
    %9 = dsc.cross_entropy_grad %7, %arg1, %cst : tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<f32>
    %10 = dsc.matmul %9, %0 : tensor<2x4x16xf32>, tensor<16x6xf32> -> tensor<2x4x6xf32>
    %11 = dsc.reshape %6 : tensor<2x4x6xf32> -> tensor<8x6xf32>
    %12 = dsc.reshape %9 : tensor<2x4x16xf32> -> tensor<8x16xf32>
    %13 = dsc.matmul %12, %11 {transpose_lhs} : tensor<8x16xf32>, tensor<8x6xf32> -> tensor<16x6xf32>
    %14 = dsc.matmul %10, %3 {transpose_rhs} : tensor<2x4x6xf32>, tensor<6x6xf32> -> tensor<2x4x6xf32>
    %15 = dsc.reshape %5 : tensor<2x4x6xf32> -> tensor<8x6xf32>
    %16 = dsc.reshape %10 : tensor<2x4x6xf32> -> tensor<8x6xf32>
    %17 = dsc.matmul %15, %16 {transpose_lhs} : tensor<8x6xf32>, tensor<8x6xf32> -> tensor<6x6xf32>
    %input_grad, %gamma_grad, %beta_grad = dsc.layer_norm_grad %4, %1, %14 : tensor<2x4x6xf32>, tensor<6xf32>
    %18 = dsc.embedding_grad %input_grad, %arg0 : tensor<2x4x6xf32>, tensor<2x4xi32> -> tensor<16x6xf32>
    %19 = dsc.add %13, %18 : tensor<16x6xf32>
    dsc.accumulate %17 into @grad.fc.weight : tensor<6x6xf32>
    dsc.accumulate %beta_grad into @grad.ln.bias : tensor<6xf32>
    dsc.accumulate %gamma_grad into @grad.ln.weight : tensor<6xf32>
    dsc.accumulate %19 into @grad.wte : tensor<16x6xf32>
    return %8 : tensor<f32>
  }
  func.func @optimizer() -> (tensor<f32>, tensor<f32>) attributes {dsc.program = #dsc.program_role<optimizer>} {
    %0 = dsc.learning_rate constant base = 6.000000e-04 min = 6.000000e-05 warmup = 0 total = 200 : tensor<f32>
    %1 = dsc.clip_grad_norm [@grad.fc.weight, @grad.ln.bias, @grad.ln.weight, @grad.wte] max_norm = 1.000000e+00 : tensor<f32>
    dsc.adamw @fc.weight grad = @grad.fc.weight exp_avg = @adam.m.fc.weight exp_avg_sq = @adam.v.fc.weight lr = %0 beta1 = 9.000000e-01 beta2 = 0.94999999999999996 eps = 1.000000e-08 weight_decay = 1.000000e-01 : tensor<f32>
    dsc.adamw @ln.bias grad = @grad.ln.bias exp_avg = @adam.m.ln.bias exp_avg_sq = @adam.v.ln.bias lr = %0 beta1 = 9.000000e-01 beta2 = 0.94999999999999996 eps = 1.000000e-08 weight_decay = 0.000000e+00 : tensor<f32>
    dsc.adamw @ln.weight grad = @grad.ln.weight exp_avg = @adam.m.ln.weight exp_avg_sq = @adam.v.ln.weight lr = %0 beta1 = 9.000000e-01 beta2 = 0.94999999999999996 eps = 1.000000e-08 weight_decay = 0.000000e+00 : tensor<f32>
    dsc.adamw @wte grad = @grad.wte exp_avg = @adam.m.wte exp_avg_sq = @adam.v.wte lr = %0 beta1 = 9.000000e-01 beta2 = 0.94999999999999996 eps = 1.000000e-08 weight_decay = 1.000000e-01 : tensor<f32>
    dsc.zero [@grad.fc.weight, @grad.ln.bias, @grad.ln.weight, @grad.wte]
    return %1, %0 : tensor<f32>, tensor<f32>
  }
}

