// RUN: dsc-opt %s --dsc-data-parallel="dp=2 zero=3" -split-input-file -verify-diagnostics
// RUN: not dsc-opt %s --dsc-data-parallel="dp=2 zero=4" -split-input-file 2>&1 | FileCheck %s --check-prefix=STAGE

// Inputs ZeRO-3 refuses, each with the cause named.
// STAGE: --dsc-data-parallel: plan key 'zero': '4' is not a ZeRO stage 0, 1, 2 or 3

// ZeRO shards AdamW's state; SGD has none of the same shape.
dsc.parameter @w : tensor<8xf32> init = #dsc.init<zeros>
dsc.state @grad.w : tensor<8xf32> gradient of @w
dsc.state @sgd.momentum.w : tensor<8xf32> momentum of @w
func.func @optimizer() -> (tensor<f32>, tensor<f32>) attributes {dsc.program = #dsc.program_role<optimizer>} {
  %lr = dsc.learning_rate constant base = 1.0e-3 min = 0.0 warmup = 0 total = 10 : tensor<f32>
  %n = dsc.clip_grad_norm [@grad.w] max_norm = 1.0 : tensor<f32>
  // expected-error @+1 {{--dsc-data-parallel: zero=3 shards AdamW state; SGD is not supported (use zero=0 or the adamw optimizer)}}
  dsc.sgd @w grad = @grad.w momentum_buffer = @sgd.momentum.w lr = %lr momentum = 0.9 weight_decay = 0.0 : tensor<f32>
  return %n, %lr : tensor<f32>, tensor<f32>
}

// -----

// A parameter that is a ZeRO-3 chunk already cannot be chunked again.
dsc.mesh @mesh axes = ["dp"] shape = [2]
// expected-error @+1 {{--dsc-data-parallel: parameter '@w' is a ZeRO-3 chunk already; run zero=3 once}}
dsc.parameter @w : tensor<8xf32> init = #dsc.init<zeros> layout = #dsc.layout<view = [16], split = [[]], chunk = ["dp"]>
dsc.state @grad.w : tensor<8xf32> gradient of @w
dsc.state @adam.m.w : tensor<8xf32> exp_avg of @w
dsc.state @adam.v.w : tensor<8xf32> exp_avg_sq of @w
func.func @optimizer() -> (tensor<f32>, tensor<f32>) attributes {dsc.program = #dsc.program_role<optimizer>} {
  %lr = dsc.learning_rate constant base = 1.0e-3 min = 0.0 warmup = 0 total = 10 : tensor<f32>
  %n = dsc.clip_grad_norm [@grad.w] max_norm = 1.0 : tensor<f32>
  dsc.adamw @w grad = @grad.w exp_avg = @adam.m.w exp_avg_sq = @adam.v.w lr = %lr beta1 = 0.9 beta2 = 0.95 eps = 1.0e-8 weight_decay = 0.0 : tensor<f32>
  return %n, %lr : tensor<f32>, tensor<f32>
}

// -----

// The backward's gathers go into @forward_backward: without it (autodiff
// has not run) there is nothing to rewrite.
// expected-error @below {{--dsc-data-parallel: zero=3 needs @forward_backward; run --dsc-autodiff first}}
module {
  dsc.parameter @w : tensor<8xf32> init = #dsc.init<zeros>
  dsc.state @grad.w : tensor<8xf32> gradient of @w
  dsc.state @adam.m.w : tensor<8xf32> exp_avg of @w
  dsc.state @adam.v.w : tensor<8xf32> exp_avg_sq of @w
  func.func @optimizer() -> (tensor<f32>, tensor<f32>) attributes {dsc.program = #dsc.program_role<optimizer>} {
    %lr = dsc.learning_rate constant base = 1.0e-3 min = 0.0 warmup = 0 total = 10 : tensor<f32>
    %n = dsc.clip_grad_norm [@grad.w] max_norm = 1.0 : tensor<f32>
    dsc.adamw @w grad = @grad.w exp_avg = @adam.m.w exp_avg_sq = @adam.v.w lr = %lr beta1 = 0.9 beta2 = 0.95 eps = 1.0e-8 weight_decay = 0.0 : tensor<f32>
    return %n, %lr : tensor<f32>, tensor<f32>
  }
}
