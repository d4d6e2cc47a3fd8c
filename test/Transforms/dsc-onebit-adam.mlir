// 1-bit Adam (optimizer=onebit_adam): --dsc-optimizer emits the warm-up
// and the compressed step as two programs; --dsc-data-parallel puts the
// moments' compressed all-reduce, with error states of DeepSpeed's padded
// sizes, between the local momentum and the frozen-variance update, and
// the gradients' exact all-reduce into the warm-up only; under ZeRO-1/2
// the variance and the updates are sharded.
// RUN: dsc-opt %s --dsc-optimizer="optimizer=onebit_adam freeze-step=7 lr-schedule=constant lr=1.0e-3 beta2=0.999" | FileCheck %s
// RUN: dsc-opt %s --dsc-optimizer="optimizer=onebit_adam freeze-step=7 lr-schedule=constant" --dsc-data-parallel="dp=4" | FileCheck %s --check-prefix=DP
// RUN: dsc-opt %s --dsc-optimizer="optimizer=onebit_adam freeze-step=7 lr-schedule=constant" --dsc-data-parallel="dp=4" --dsc-plan-memory --dsc-plan-summary -o /dev/null | FileCheck %s --check-prefix=BYTES
// RUN: dsc-opt %s --dsc-optimizer="optimizer=onebit_adam freeze-step=7 lr-schedule=constant" --dsc-data-parallel="dp=4 onebit-bucket-bytes=4096" | FileCheck %s --check-prefix=BUCKETS
// RUN: dsc-opt %s --dsc-optimizer="optimizer=onebit_adam freeze-step=7 lr-schedule=constant" --dsc-data-parallel="dp=4 onebit-bucket-bytes=4096" --dsc-plan-memory --dsc-plan-summary -o /dev/null | FileCheck %s --check-prefix=BUCKETBYTES
// RUN: dsc-opt %s --dsc-optimizer="optimizer=onebit_adam freeze-step=7 lr-schedule=constant" --dsc-data-parallel="dp=4" --dsc-verify-collectives -o /dev/null
// RUN: not dsc-opt %s --dsc-optimizer="optimizer=onebit_adam freeze-step=0" 2>&1 | FileCheck %s --check-prefix=FREEZE
// RUN: dsc-opt %s --dsc-optimizer="optimizer=onebit_adam freeze-step=7 lr-schedule=constant" --dsc-data-parallel="dp=4 zero=1" | FileCheck %s --check-prefix=ZERO
// RUN: dsc-opt %s --dsc-optimizer="optimizer=onebit_adam freeze-step=7 lr-schedule=constant" --dsc-data-parallel="dp=4 zero=1" --dsc-plan-memory --dsc-plan-summary -o /dev/null | FileCheck %s --check-prefix=ZEROBYTES
// RUN: dsc-opt %s --dsc-optimizer="optimizer=onebit_adam freeze-step=7 lr-schedule=constant" --dsc-data-parallel="dp=4 zero=1" --dsc-verify-collectives -o /dev/null
// RUN: dsc-opt %s --dsc-optimizer="optimizer=onebit_adam freeze-step=7 lr-schedule=constant" --dsc-data-parallel="dp=4 zero=2" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ZERO2
// RUN: not dsc-opt %s --dsc-optimizer="optimizer=onebit_adam freeze-step=7" --dsc-data-parallel="dp=4 zero=3" 2>&1 | FileCheck %s --check-prefix=ZERO3

// CHECK-LABEL: func.func @optimizer() -> (tensor<f32>, tensor<f32>) attributes {dsc.program = #dsc.program_role<optimizer>}
// CHECK-NEXT: %[[LR:.*]] = dsc.learning_rate constant base = 1.000000e-03
// CHECK-NEXT: dsc.clip_grad_norm [@grad.b, @grad.w]
// CHECK-NEXT: dsc.onebit_adam @b grad = @grad.b exp_avg = @adam.m.b exp_avg_sq = @adam.v.b lr = %[[LR]] beta1 = 9.000000e-01 beta2 = 0.99899999999999999 eps = 1.000000e-08 weight_decay = 0.000000e+00 : tensor<f32>
// CHECK-NEXT: dsc.onebit_adam @w grad = @grad.w {{.*}} weight_decay = 1.000000e-01 : tensor<f32>
// CHECK-NEXT: dsc.zero [@grad.b, @grad.w]
// CHECK-LABEL: func.func @optimizer.compressed() -> (tensor<f32>, tensor<f32>) attributes {dsc.from_step = 7 : i64, dsc.program = #dsc.program_role<compressed_optimizer>}
// CHECK-NEXT: %[[LR2:.*]] = dsc.learning_rate constant
// CHECK-NEXT: dsc.clip_grad_norm [@grad.b, @grad.w]
// CHECK-NEXT: dsc.adam_momentum @adam.m.b grad = @grad.b beta1 = 9.000000e-01
// CHECK-NEXT: dsc.adam_momentum @adam.m.w grad = @grad.w beta1 = 9.000000e-01
// CHECK-NEXT: dsc.frozen_adam @b exp_avg = @adam.m.b exp_avg_sq = @adam.v.b lr = %[[LR2]] eps = 1.000000e-08 weight_decay = 0.000000e+00 : tensor<f32>
// CHECK-NEXT: dsc.frozen_adam @w exp_avg = @adam.m.w exp_avg_sq = @adam.v.w lr = %[[LR2]] eps = 1.000000e-08 weight_decay = 1.000000e-01 : tensor<f32>
// CHECK-NEXT: dsc.zero [@grad.b, @grad.w]

// Each moment alone (DeepSpeed's fp32 OnebitAdam: a scale per tensor):
// @b's 16 elements pad to 4·lcm(4, 8) = 32 over 4 ranks (8 served by
// each), @w's 120 to 128 (32 each).
// DP: dsc.state @onebit.worker_error.b : tensor<32xf32> worker_error of @b
// DP-NEXT: dsc.state @onebit.server_error.b : tensor<8xf32> server_error of @b
// DP-NEXT: dsc.state @onebit.worker_error.w : tensor<128xf32> worker_error of @w
// DP-NEXT: dsc.state @onebit.server_error.w : tensor<32xf32> server_error of @w
// DP-LABEL: func.func @optimizer()
// DP-NEXT: dsc.all_reduce_states [@grad.b, @grad.w] on @mesh axes = ["dp"] reduction = avg
// DP-LABEL: func.func @optimizer.compressed()
// DP-NOT: all_reduce_states
// DP: dsc.adam_momentum @adam.m.w
// DP-NEXT: dsc.compressed_all_reduce_states [@adam.m.b] worker_error = @onebit.worker_error.b server_error = @onebit.server_error.b on @mesh axes = ["dp"]
// DP-NEXT: dsc.compressed_all_reduce_states [@adam.m.w] worker_error = @onebit.worker_error.w server_error = @onebit.server_error.w on @mesh axes = ["dp"]
// DP-NEXT: dsc.frozen_adam @b

// With onebit-bucket-bytes the moments of one weight-decay class go in
// buckets (DeepSpeed's fp16 optimizer: a flattened parameter group), each
// compressed as one vector: @b (a bias, no decay) and @w (a matrix) stay
// apart, as DeepSpeed's parameter groups keep them.
// BUCKETS: dsc.compressed_all_reduce_states [@adam.m.b] worker_error = @onebit.worker_error.b server_error = @onebit.server_error.b on @mesh axes = ["dp"]
// BUCKETS-NEXT: dsc.compressed_all_reduce_states [@adam.m.w] worker_error = @onebit.worker_error.w server_error = @onebit.server_error.w on @mesh axes = ["dp"]

// A warm-up step sends the ring all-reduce's 2·(3/4)·(16+120)·4 = 816
// bytes; a compressed one, per bucket, 2·3·(⌈c/32⌉·4 + 4) for its chunk of
// c = 8 and 32 signs: 48 + 48 = 96.
// BYTES: "collective_bytes_per_step": {
// BYTES-NEXT: "all_reduce": 816,
// BYTES: "collective_bytes_per_compressed_step": {
// BYTES-NEXT: "all_reduce": 0,
// BYTES: "compressed_all_reduce": 96
// BUCKETBYTES: "compressed_all_reduce": 96

// FREEZE: error: --dsc-optimizer: optimizer=onebit_adam needs freeze-step >= 1 (the first step that compresses), got 0
// ZeRO-1 (and 2) under 1-bit Adam: each rank keeps its chunk of the
// variance and updates its chunk of the parameter in both phases, then the
// parameters are gathered; the gradients and the momentum stay whole (the
// compression phase's local momentum reads the whole local gradient), and
// the compressed all-reduce is unchanged.
// ZERO: dsc.state @adam.m.b : tensor<16xf32> exp_avg of @b
// ZERO-NEXT: dsc.state @adam.v.b : tensor<4xf32> exp_avg_sq of @b
// ZERO-NEXT: dsc.state @adam.m.w : tensor<8x15xf32> exp_avg of @w
// ZERO-NEXT: dsc.state @adam.v.w : tensor<30xf32> exp_avg_sq of @w
// ZERO-LABEL: func.func @optimizer()
// ZERO-NEXT: dsc.all_reduce_states [@grad.b, @grad.w] on @mesh axes = ["dp"] reduction = avg
// ZERO: dsc.onebit_adam @b {{.*}} sharded on @mesh axes = ["dp"] : tensor<f32>
// ZERO-NEXT: dsc.onebit_adam @w {{.*}} sharded on @mesh axes = ["dp"] : tensor<f32>
// ZERO-NEXT: dsc.all_gather_states [@b, @w] on @mesh axes = ["dp"]
// ZERO-LABEL: func.func @optimizer.compressed()
// ZERO-NOT: dsc.all_reduce_states
// ZERO: dsc.compressed_all_reduce_states [@adam.m.w]
// ZERO-NEXT: dsc.frozen_adam @b {{.*}} sharded on @mesh axes = ["dp"] : tensor<f32>
// ZERO-NEXT: dsc.frozen_adam @w {{.*}} sharded on @mesh axes = ["dp"] : tensor<f32>
// ZERO-NEXT: dsc.all_gather_states [@b, @w] on @mesh axes = ["dp"]
// ZERO-NEXT: dsc.zero

// Both phases gather the updated parameters: (3/4)·136·4 = 408 bytes more
// a step.
// ZEROBYTES: "collective_bytes_per_step": {
// ZEROBYTES-NEXT: "all_reduce": 816,
// ZEROBYTES-NEXT: "reduce_scatter": 0,
// ZEROBYTES-NEXT: "all_gather": 408,
// ZEROBYTES: "collective_bytes_per_compressed_step": {
// ZEROBYTES-NEXT: "all_reduce": 0,
// ZEROBYTES-NEXT: "reduce_scatter": 0,
// ZEROBYTES-NEXT: "all_gather": 408,
// ZEROBYTES-NEXT: "all_to_all": 0,
// ZEROBYTES-NEXT: "compressed_all_reduce": 96

// ZERO2: warning: --dsc-data-parallel: zero=2 with optimizer=onebit_adam keeps the gradients whole (the compression phase's momentum reads each rank's whole gradient): it shards the variance and the update as zero=1 does
// ZERO3: error: 'dsc.onebit_adam' op --dsc-data-parallel: optimizer=onebit_adam supports ZeRO stages 1 and 2, not zero=3 (its compression phase reads every parameter whole)

dsc.parameter @w : tensor<8x15xf32> init = #dsc.init<normal, std = 0.02>
dsc.parameter @b : tensor<16xf32> init = #dsc.init<zeros>
dsc.state @grad.b : tensor<16xf32> gradient of @b
dsc.state @grad.w : tensor<8x15xf32> gradient of @w
func.func @forward_backward(%db: tensor<16xf32>, %dw: tensor<8x15xf32>) attributes {dsc.program = #dsc.program_role<forward_backward>} {
  dsc.accumulate %db into @grad.b : tensor<16xf32>
  dsc.accumulate %dw into @grad.w : tensor<8x15xf32>
  return
}
