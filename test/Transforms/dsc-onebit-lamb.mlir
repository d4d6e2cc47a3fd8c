// 1-bit LAMB (optimizer=onebit_lamb): --dsc-optimizer emits the warm-up
// (LAMB's clamped trust ratio, averaged into each tensor's frozen
// coefficient) and the compressed step as two programs; --dsc-data-parallel
// compresses every momentum of the group as one fused buffer, as DeepSpeed
// does, with a pad state where DeepSpeed's buffer keeps the last average.
// RUN: dsc-opt %s --dsc-optimizer="optimizer=onebit_lamb freeze-step=7 lr-schedule=constant lr=1.0e-3 max-coeff=0.3" | FileCheck %s
// RUN: dsc-opt %s --dsc-optimizer="optimizer=onebit_lamb freeze-step=7 lr-schedule=constant" --dsc-data-parallel="dp=4" | FileCheck %s --check-prefix=DP
// RUN: dsc-opt %s --dsc-optimizer="optimizer=onebit_lamb freeze-step=7 lr-schedule=constant" --dsc-data-parallel="dp=4" --dsc-plan-memory --dsc-plan-summary -o /dev/null | FileCheck %s --check-prefix=BYTES
// RUN: dsc-opt %s --dsc-optimizer="optimizer=onebit_lamb freeze-step=7 lr-schedule=constant" --dsc-data-parallel="dp=4" --dsc-verify-collectives -o /dev/null
// RUN: dsc-opt %s --dsc-optimizer="optimizer=onebit_lamb freeze-step=1 lr-schedule=constant" | FileCheck %s --check-prefix=EARLY
// RUN: not dsc-opt %s --dsc-optimizer="optimizer=onebit_lamb min-coeff=0.5 max-coeff=0.3" 2>&1 | FileCheck %s --check-prefix=COEFF
// RUN: not dsc-opt %s --dsc-optimizer="optimizer=onebit_lamb factor-threshold=2" 2>&1 | FileCheck %s --check-prefix=THRESHOLD
// RUN: not dsc-opt %s --dsc-optimizer="optimizer=onebit_lamb freeze-step=7" --dsc-data-parallel="dp=4 zero=1" 2>&1 | FileCheck %s --check-prefix=ZERO

// CHECK: dsc.state @adam.m.b : tensor<16xf32> exp_avg of @b
// CHECK-NEXT: dsc.state @adam.v.b : tensor<16xf32> exp_avg_sq of @b
// CHECK-NEXT: dsc.state @lamb.coeffs.b : tensor<5xf64> lamb_coefficients of @b
// CHECK-LABEL: func.func @optimizer() -> (tensor<f32>, tensor<f32>) attributes {dsc.program = #dsc.program_role<optimizer>}
// CHECK-NEXT: %[[LR:.*]] = dsc.learning_rate constant base = 1.000000e-03
// CHECK-NEXT: dsc.clip_grad_norm [@grad.b, @grad.w]
// CHECK-NEXT: dsc.onebit_lamb @b grad = @grad.b exp_avg = @adam.m.b exp_avg_sq = @adam.v.b coefficients = @lamb.coeffs.b lr = %[[LR]] beta1 = 9.000000e-01 beta2 = 0.94999999999999996 eps = 1.000000e-08 weight_decay = 0.000000e+00 max_coeff = 3.000000e-01 min_coeff = 1.000000e-02 coeff_beta = 9.000000e-01 : tensor<f32>
// CHECK-NEXT: dsc.onebit_lamb @w {{.*}} weight_decay = 1.000000e-01 {{.*}} : tensor<f32>
// CHECK-NEXT: dsc.zero [@grad.b, @grad.w]
// CHECK-LABEL: func.func @optimizer.compressed() -> (tensor<f32>, tensor<f32>) attributes {dsc.from_step = 7 : i64, dsc.program = #dsc.program_role<compressed_optimizer>}
// CHECK-NEXT: %[[LR2:.*]] = dsc.learning_rate constant
// CHECK-NEXT: dsc.clip_grad_norm [@grad.b, @grad.w]
// CHECK-NEXT: dsc.lamb_freeze coefficients = [@lamb.coeffs.b, @lamb.coeffs.w] exp_avg = [@adam.m.b, @adam.m.w] exp_avg_sq = [@adam.v.b, @adam.v.w] fresh = [@lamb.v_fresh.b, @lamb.v_fresh.w] copy_variance
// CHECK-NEXT: dsc.lamb_momentum @adam.m.b grad = @grad.b last = @lamb.m_last.b coefficients = @lamb.coeffs.b beta1 = 9.000000e-01
// CHECK-NEXT: dsc.lamb_momentum @adam.m.w
// CHECK-NEXT: dsc.frozen_lamb @b exp_avg = @adam.m.b last = @lamb.m_last.b exp_avg_sq = @adam.v.b fresh = @lamb.v_fresh.b coefficients = @lamb.coeffs.b lr = %[[LR2]] beta1 = 9.000000e-01 beta2 = 0.94999999999999996 eps = 1.000000e-08 weight_decay = 0.000000e+00 factor_max = 4.000000e+00 factor_min = 5.000000e-01 factor_threshold = 1.000000e-01 : tensor<f32>
// CHECK-NEXT: dsc.frozen_lamb @w
// CHECK-NEXT: dsc.zero [@grad.b, @grad.w]

// One fused buffer of both moments (136 elements, from 4·lcm(4, 8) = 32:
// 160, so a pad of 24), its errors of 160 and 160/4 = 40 elements.
// DP: dsc.state @lamb.momentum_pad.b : tensor<24xf32> compression_pad of @b
// DP-NEXT: dsc.state @onebit.worker_error.b : tensor<160xf32> worker_error of @b
// DP-NEXT: dsc.state @onebit.server_error.b : tensor<40xf32> server_error of @b
// DP-LABEL: func.func @optimizer()
// DP-NEXT: dsc.all_reduce_states [@grad.b, @grad.w] on @mesh axes = ["dp"] reduction = avg
// DP-LABEL: func.func @optimizer.compressed()
// DP-NOT: all_reduce_states
// DP: dsc.lamb_momentum @adam.m.w
// DP-NEXT: dsc.compressed_all_reduce_states [@adam.m.b, @adam.m.w, @lamb.momentum_pad.b] worker_error = @onebit.worker_error.b server_error = @onebit.server_error.b on @mesh axes = ["dp"]
// DP-NEXT: dsc.frozen_lamb @b

// A warm-up step sends the ring all-reduce's 2·(3/4)·(16+120)·4 = 816
// bytes; a compressed one 2·3·(⌈40/32⌉·4 + 4) = 72.
// BYTES: "collective_bytes_per_step": {
// BYTES-NEXT: "all_reduce": 816,
// BYTES: "collective_bytes_per_compressed_step": {
// BYTES-NEXT: "all_reduce": 0,
// BYTES: "compressed_all_reduce": 72

// freeze_step 1: DeepSpeed compresses from step 2 (its warm-up ends after
// a step) and never takes the fresh variance from the warm-up.
// EARLY: func.func @optimizer.compressed() {{.*}} attributes {dsc.from_step = 2 : i64
// EARLY: dsc.lamb_freeze
// EARLY-NOT: copy_variance
// EARLY-SAME: {{$}}

// COEFF: error: --dsc-optimizer: optimizer=onebit_lamb: needs 0 < min-coeff <= max-coeff, got min-coeff = 5.000000e-01, max-coeff = 3.000000e-01
// THRESHOLD: error: --dsc-optimizer: optimizer=onebit_lamb: factor-threshold must be in [0, 1], got 2.000000e+00
// ZERO: error: 'dsc.onebit_lamb' op --dsc-data-parallel: zero=1 with optimizer=onebit_lamb: not built (LAMB's trust ratio needs each whole parameter and its update; DeepSpeed refuses ZeRO with 1-bit LAMB too): use zero=0

dsc.parameter @w : tensor<8x15xf32> init = #dsc.init<normal, std = 0.02>
dsc.parameter @b : tensor<16xf32> init = #dsc.init<zeros>
dsc.state @grad.b : tensor<16xf32> gradient of @b
dsc.state @grad.w : tensor<8x15xf32> gradient of @w
func.func @forward_backward(%db: tensor<16xf32>, %dw: tensor<8x15xf32>) attributes {dsc.program = #dsc.program_role<forward_backward>} {
  dsc.accumulate %db into @grad.b : tensor<16xf32>
  dsc.accumulate %dw into @grad.w : tensor<8x15xf32>
  return
}
