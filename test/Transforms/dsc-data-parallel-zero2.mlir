// RUN: dsc-opt %s --dsc-data-parallel="dp=4 zero=2" -verify-diagnostics | FileCheck %s
// RUN: dsc-opt %s --dsc-data-parallel="dp=4 zero=2" --dsc-plan-memory --dsc-plan-summary -o /dev/null | FileCheck %s --check-prefix=BYTES

// ZeRO-2: the gradient of @w becomes a rank-1 shard that the backward
// reduce-scatters into; the optimizer no longer reduces it.
// CHECK-LABEL: dsc.state @grad.w : tensor<32xf32> gradient of @w
// CHECK-LABEL: func.func @forward_backward
// CHECK: dsc.reduce_scatter_accumulate %{{.*}} into @grad.w on @mesh axes = ["dp"] reduction = avg : tensor<16x8xf32>
// CHECK: dsc.accumulate %{{.*}} into @grad.odd : tensor<6xf32>
// CHECK-LABEL: func.func @optimizer
// CHECK-NEXT: dsc.all_reduce_states [@grad.odd] on @mesh axes = ["dp"] reduction = avg
// CHECK-NEXT: dsc.learning_rate
// CHECK: dsc.adamw @w {{.*}} sharded on @mesh axes = ["dp"]
// CHECK: dsc.all_gather_states [@w] on @mesh axes = ["dp"]
// BYTES: "all_reduce": 40
// BYTES: "reduce_scatter": 384,
// BYTES: "all_gather": 384

module {
  dsc.parameter @w : tensor<16x8xf32> init = #dsc.init<zeros>
  dsc.parameter @odd : tensor<6xf32> init = #dsc.init<zeros>
  dsc.state @grad.w : tensor<16x8xf32> gradient of @w
  dsc.state @grad.odd : tensor<6xf32> gradient of @odd
  dsc.state @adam.m.w : tensor<16x8xf32> exp_avg of @w
  dsc.state @adam.v.w : tensor<16x8xf32> exp_avg_sq of @w
  dsc.state @adam.m.odd : tensor<6xf32> exp_avg of @odd
  dsc.state @adam.v.odd : tensor<6xf32> exp_avg_sq of @odd
  func.func @forward_backward(%gw: tensor<16x8xf32>, %godd: tensor<6xf32>) attributes {dsc.program = #dsc.program_role<forward_backward>} {
    dsc.accumulate %gw into @grad.w : tensor<16x8xf32>
    dsc.accumulate %godd into @grad.odd : tensor<6xf32>
    return
  }
  func.func @optimizer() -> (tensor<f32>, tensor<f32>) attributes {dsc.program = #dsc.program_role<optimizer>} {
    %lr = dsc.learning_rate constant base = 1.0e-3 min = 0.0 warmup = 0 total = 10 : tensor<f32>
    %n = dsc.clip_grad_norm [@grad.w, @grad.odd] max_norm = 1.0 : tensor<f32>
    dsc.adamw @w grad = @grad.w exp_avg = @adam.m.w exp_avg_sq = @adam.v.w lr = %lr beta1 = 0.9 beta2 = 0.95 eps = 1.0e-8 weight_decay = 0.1 : tensor<f32>
    dsc.adamw @odd grad = @grad.odd exp_avg = @adam.m.odd exp_avg_sq = @adam.v.odd lr = %lr beta1 = 0.9 beta2 = 0.95 eps = 1.0e-8 weight_decay = 0.0 : tensor<f32>
    dsc.zero [@grad.w, @grad.odd]
    return %n, %lr : tensor<f32>, tensor<f32>
  }
}
