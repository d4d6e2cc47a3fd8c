// RUN: dsc-opt %s --dsc-data-parallel="dp=4 bucket-bytes=1024 zero=1" -split-input-file -verify-diagnostics | FileCheck %s
// RUN: dsc-opt %s --dsc-data-parallel="dp=4 bucket-bytes=1024 zero=1" -split-input-file -verify-diagnostics --dsc-plan-memory --dsc-plan-summary -o /dev/null 2>/dev/null | FileCheck %s --check-prefix=BYTES
// RUN: not dsc-opt %s --dsc-data-parallel="dp=0" -split-input-file 2>&1 | FileCheck %s --check-prefix=DP0
// RUN: not dsc-opt %s --dsc-data-parallel="dp=4 bucket-bytes=0" -split-input-file 2>&1 | FileCheck %s --check-prefix=BUCKET

// DP0: error: --dsc-data-parallel: plan key 'dp': '0' is not an integer >= 1
// BUCKET: error: --dsc-data-parallel: plan key 'bucket-bytes': '0' is not an integer >= 1

// Gradients (declaration order: 512 + 256 + 1024 + 64 bytes) are averaged
// over dp in buckets of at most 1024 bytes, before the optimizer uses them.
// CHECK: dsc.mesh @mesh axes = ["dp"] shape = [4]
// CHECK-LABEL: func.func @optimizer
// CHECK-NEXT: dsc.all_reduce_states [@grad.a, @grad.b] on @mesh axes = ["dp"] reduction = avg
// CHECK-NEXT: dsc.all_reduce_states [@grad.c] on @mesh axes = ["dp"] reduction = avg
// CHECK-NEXT: dsc.all_reduce_states [@grad.d] on @mesh axes = ["dp"] reduction = avg
// CHECK-NEXT: dsc.learning_rate
// A ring all-reduce of S bytes over 4 ranks sends 2*3/4*S per rank:
// 1.5 * (512 + 256 + 1024 + 64) = 2784.
// BYTES: "all_reduce": 2784

dsc.parameter @a : tensor<128xf32> init = #dsc.init<zeros>
dsc.parameter @b : tensor<64xf32> init = #dsc.init<zeros>
dsc.parameter @c : tensor<256xf32> init = #dsc.init<zeros>
dsc.parameter @d : tensor<16xf32> init = #dsc.init<zeros>
dsc.state @grad.a : tensor<128xf32> gradient of @a
dsc.state @grad.b : tensor<64xf32> gradient of @b
dsc.state @grad.c : tensor<256xf32> gradient of @c
dsc.state @grad.d : tensor<16xf32> gradient of @d
func.func @optimizer() -> (tensor<f32>, tensor<f32>) attributes {dsc.program = #dsc.program_role<optimizer>} {
  %lr = dsc.learning_rate constant base = 1.0e-3 min = 0.0 warmup = 0 total = 10 : tensor<f32>
  %n = dsc.clip_grad_norm [@grad.a, @grad.b, @grad.c, @grad.d] max_norm = 1.0 : tensor<f32>
  dsc.zero [@grad.a, @grad.b, @grad.c, @grad.d]
  return %n, %lr : tensor<f32>, tensor<f32>
}

// -----

// expected-error @+1 {{--dsc-data-parallel: mesh @m needs a 'dp' axis of size 4}}
dsc.mesh @m axes = ["tp"] shape = [4]
dsc.parameter @a : tensor<128xf32> init = #dsc.init<zeros>
dsc.state @grad.a : tensor<128xf32> gradient of @a
func.func @optimizer() attributes {dsc.program = #dsc.program_role<optimizer>} {
  return
}

// -----

// expected-error @+1 {{--dsc-data-parallel: no @optimizer; run --dsc-autodiff and --dsc-optimizer first}}
module {
}

// -----

// ZeRO-1: the gradient of a parameter dp divides is reduce-scattered, its
// moments shrink to rank-1 shards, its update is sharded, and the parameter
// is gathered after the updates; the norm sums each rank's valid chunks. A
// parameter of 6 elements (not divisible by 4) stays replicated.
// CHECK-LABEL: dsc.state @adam.m.w : tensor<32xf32> exp_avg of @w
// CHECK: dsc.state @adam.v.w : tensor<32xf32> exp_avg_sq of @w
// CHECK: dsc.state @adam.m.odd : tensor<6xf32> exp_avg of @odd
// CHECK-LABEL: func.func @optimizer
// CHECK-NEXT: dsc.reduce_scatter_states [@grad.w] on @mesh axes = ["dp"] reduction = avg
// CHECK-NEXT: dsc.all_reduce_states [@grad.odd] on @mesh axes = ["dp"] reduction = avg
// CHECK: dsc.clip_grad_norm [@grad.w, @grad.odd] max_norm = 1.000000e+00 sharded on @mesh axes = ["dp"] shards = [true, false]
// CHECK: dsc.adamw @w {{.*}} sharded on @mesh axes = ["dp"]
// CHECK: dsc.adamw @odd {{.*}} weight_decay = 0.000000e+00 : tensor<f32>
// CHECK-NEXT: dsc.all_gather_states [@w] on @mesh axes = ["dp"]
// CHECK-NEXT: dsc.zero
// @grad.w (512 bytes) is reduce-scattered: 0.75 * 512 = 384; @grad.odd is
// all-reduced: rank 0 (whose bytes the summary reports) sends all but its own
// and all but its successor's of the ring's chunks of 2, 2, 1, 1 elements,
// 2 * 24 - 8 - 8 = 32, plus the norm's one f64, 2 * 8 - 8 - 0 = 8;
// the all-gather of @w sends 0.75 * 512 = 384.
// BYTES: "all_reduce": 40
// BYTES: "reduce_scatter": 384,
// BYTES: "all_gather": 384

dsc.parameter @w : tensor<16x8xf32> init = #dsc.init<zeros>
dsc.parameter @odd : tensor<6xf32> init = #dsc.init<zeros>
dsc.state @grad.w : tensor<16x8xf32> gradient of @w
dsc.state @grad.odd : tensor<6xf32> gradient of @odd
dsc.state @adam.m.w : tensor<16x8xf32> exp_avg of @w
dsc.state @adam.v.w : tensor<16x8xf32> exp_avg_sq of @w
dsc.state @adam.m.odd : tensor<6xf32> exp_avg of @odd
dsc.state @adam.v.odd : tensor<6xf32> exp_avg_sq of @odd
func.func @optimizer() -> (tensor<f32>, tensor<f32>) attributes {dsc.program = #dsc.program_role<optimizer>} {
  %lr = dsc.learning_rate constant base = 1.0e-3 min = 0.0 warmup = 0 total = 10 : tensor<f32>
  %n = dsc.clip_grad_norm [@grad.w, @grad.odd] max_norm = 1.0 : tensor<f32>
  dsc.adamw @w grad = @grad.w exp_avg = @adam.m.w exp_avg_sq = @adam.v.w lr = %lr beta1 = 0.9 beta2 = 0.95 eps = 1.0e-8 weight_decay = 0.1 : tensor<f32>
  dsc.adamw @odd grad = @grad.odd exp_avg = @adam.m.odd exp_avg_sq = @adam.v.odd lr = %lr beta1 = 0.9 beta2 = 0.95 eps = 1.0e-8 weight_decay = 0.0 : tensor<f32>
  dsc.zero [@grad.w, @grad.odd]
  return %n, %lr : tensor<f32>, tensor<f32>
}

// -----

// An optimizer that zeroes no gradient has nothing to average.
dsc.parameter @w : tensor<8xf32> init = #dsc.init<zeros>
// expected-error @+1 {{--dsc-data-parallel: no gradient states to reduce}}
func.func @optimizer() -> (tensor<f32>, tensor<f32>) attributes {dsc.program = #dsc.program_role<optimizer>} {
  %lr = dsc.learning_rate constant base = 1.0e-3 min = 0.0 warmup = 0 total = 10 : tensor<f32>
  return %lr, %lr : tensor<f32>, tensor<f32>
}

// -----

// ZeRO shards AdamW's moments; SGD's momentum is not sharded.
dsc.parameter @w : tensor<8xf32> init = #dsc.init<zeros>
dsc.state @grad.w : tensor<8xf32> gradient of @w
dsc.state @sgd.momentum.w : tensor<8xf32> momentum of @w
func.func @optimizer() -> (tensor<f32>, tensor<f32>) attributes {dsc.program = #dsc.program_role<optimizer>} {
  %lr = dsc.learning_rate constant base = 1.0e-3 min = 0.0 warmup = 0 total = 10 : tensor<f32>
  %n = dsc.clip_grad_norm [@grad.w] max_norm = 1.0 : tensor<f32>
  // expected-error @+1 {{--dsc-data-parallel: zero=1 shards AdamW state; SGD is not supported (use zero=0 or the adamw optimizer)}}
  dsc.sgd @w grad = @grad.w momentum_buffer = @sgd.momentum.w lr = %lr momentum = 0.9 weight_decay = 0.0 : tensor<f32>
  dsc.zero [@grad.w]
  return %n, %lr : tensor<f32>, tensor<f32>
}
