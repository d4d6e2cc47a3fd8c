// RUN: dsc-opt %s --dsc-data-parallel="dp=4 bucket-bytes=1024" -split-input-file -verify-diagnostics | FileCheck %s
// RUN: dsc-opt %s --dsc-data-parallel="dp=4 bucket-bytes=1024" -split-input-file -verify-diagnostics --dsc-plan-memory --dsc-plan-summary -o /dev/null 2>/dev/null | FileCheck %s --check-prefix=BYTES

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
func.func @optimizer() -> (tensor<f32>, tensor<f32>) {
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
func.func @optimizer() {
  return
}

// -----

// expected-error @+1 {{--dsc-data-parallel: no @optimizer; run --dsc-autodiff and --dsc-optimizer first}}
module {
}
