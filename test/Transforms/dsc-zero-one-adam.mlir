// 0/1 Adam (optimizer=zero_one_adam): --dsc-optimizer emits four step
// programs, one per kind of DeepSpeed's step, and records the policy that
// picks a step's program from its number; --dsc-data-parallel averages the
// gradients exactly in the variance step only, compressed (each tensor
// alone, DeepSpeed's padded error states) before the onebit step's momenta,
// nothing in a local step, and the rewound accumulators in a sync step
// with error states of their own (DeepSpeed zeroes the errors when the
// variance freezes).
// RUN: dsc-opt %s --dsc-optimizer="optimizer=zero_one_adam var-freeze-step=7 var-update-scaler=3 lr-schedule=constant lr=1.0e-3" --dsc-data-parallel="dp=4" | FileCheck %s
// RUN: dsc-opt %s --dsc-optimizer="optimizer=zero_one_adam lr-schedule=constant" --dsc-data-parallel="dp=4" --dsc-verify-collectives -o /dev/null
// RUN: not dsc-opt %s --dsc-optimizer="optimizer=zero_one_adam local-step-clipper=0" 2>&1 | FileCheck %s --check-prefix=CLIPPER
// RUN: not dsc-opt %s --dsc-optimizer="optimizer=zero_one_adam lr-schedule=constant" --dsc-data-parallel="dp=1" 2>&1 | FileCheck %s --check-prefix=ONERANK
// RUN: not dsc-opt %s --dsc-optimizer="optimizer=zero_one_adam lr-schedule=constant" --dsc-data-parallel="dp=4 zero=1" 2>&1 | FileCheck %s --check-prefix=ZERO

// CHECK: module attributes {dsc.zero_one_adam = {local_step_clipper = 16 : i64, local_step_scaler = 32678 : i64, var_freeze_step = 7 : i64, var_update_scaler = 3 : i64}}
// CHECK: dsc.state @zoadam.accumulator.w : tensor<8x15xf32> momentum_accumulator of @w
// CHECK: dsc.state @zoadam.lr_sum : tensor<1xf64> learning_rate_sum of @w
// CHECK: dsc.state @onebit.worker_error.w : tensor<128xf32> worker_error of @w
// CHECK: dsc.state @zoadam.worker_error.w : tensor<128xf32> worker_error of @w
// CHECK-NEXT: dsc.state @zoadam.server_error.w : tensor<32xf32> server_error of @w

// CHECK-LABEL: func.func @optimizer() -> (tensor<f32>, tensor<f32>) attributes {dsc.program = #dsc.program_role<optimizer>}
// CHECK-NEXT: dsc.all_reduce_states [@grad.b, @grad.w] on @mesh axes = ["dp"] reduction = avg
// CHECK-NEXT: %[[LR:.*]] = dsc.learning_rate constant base = 1.000000e-03
// CHECK-NEXT: dsc.clip_grad_norm [@grad.b, @grad.w]
// CHECK-NEXT: dsc.onebit_adam @b grad = @grad.b exp_avg = @adam.m.b exp_avg_sq = @adam.v.b lr = %[[LR]]
// CHECK-NEXT: dsc.onebit_adam @w

// CHECK-LABEL: func.func @optimizer.onebit() -> (tensor<f32>, tensor<f32>) attributes {dsc.program = #dsc.program_role<onebit_step_optimizer>}
// CHECK-NOT: all_reduce_states [
// CHECK: dsc.clip_grad_norm [@grad.b, @grad.w]
// CHECK-NEXT: dsc.compressed_all_reduce_states [@grad.b] worker_error = @onebit.worker_error.b server_error = @onebit.server_error.b on @mesh axes = ["dp"]
// CHECK-NEXT: dsc.compressed_all_reduce_states [@grad.w] worker_error = @onebit.worker_error.w server_error = @onebit.server_error.w on @mesh axes = ["dp"]
// CHECK-NEXT: dsc.adam_momentum @adam.m.b grad = @grad.b beta1 = 9.000000e-01
// CHECK-NEXT: dsc.adam_momentum @adam.m.w grad = @grad.w beta1 = 9.000000e-01
// CHECK-NEXT: dsc.frozen_adam @b exp_avg = @adam.m.b exp_avg_sq = @adam.v.b
// CHECK-NEXT: dsc.frozen_adam @w
// CHECK-NEXT: dsc.zero [@grad.b, @grad.w]

// CHECK-LABEL: func.func @optimizer.local() -> (tensor<f32>, tensor<f32>) attributes {dsc.program = #dsc.program_role<local_step_optimizer>}
// CHECK-NOT: all_reduce_states
// CHECK: dsc.adam_momentum @adam.m.b grad = @grad.b
// CHECK-NEXT: dsc.adam_momentum @adam.m.w grad = @grad.w
// CHECK-NEXT: dsc.add_learning_rate @zoadam.lr_sum lr = %{{.*}} : tensor<f32>
// CHECK-NEXT: dsc.zero_one_adam_update @b exp_avg = @adam.m.b exp_avg_sq = @adam.v.b accumulator = @zoadam.accumulator.b lr = %{{.*}} eps = 1.000000e-08 weight_decay = 0.000000e+00 : tensor<f32>
// CHECK-NEXT: dsc.zero_one_adam_update @w {{.*}} weight_decay = 1.000000e-01 : tensor<f32>
// CHECK-NEXT: dsc.zero [@grad.b, @grad.w]
// CHECK-NEXT: return

// CHECK-LABEL: func.func @optimizer.sync() -> (tensor<f32>, tensor<f32>) attributes {dsc.program = #dsc.program_role<sync_step_optimizer>}
// CHECK: dsc.add_learning_rate @zoadam.lr_sum
// CHECK: dsc.zero_one_adam_update @w
// CHECK-NEXT: dsc.zero_one_adam_rewind @b accumulator = @zoadam.accumulator.b exp_avg_sq = @adam.v.b eps = 1.000000e-08
// CHECK-NEXT: dsc.zero_one_adam_rewind @w
// CHECK-NEXT: dsc.compressed_all_reduce_states [@zoadam.accumulator.b] worker_error = @zoadam.worker_error.b server_error = @zoadam.server_error.b on @mesh axes = ["dp"]
// CHECK-NEXT: dsc.compressed_all_reduce_states [@zoadam.accumulator.w] worker_error = @zoadam.worker_error.w
// CHECK-NEXT: dsc.zero_one_adam_resync @b exp_avg = @adam.m.b accumulator = @zoadam.accumulator.b exp_avg_sq = @adam.v.b lr_sum = @zoadam.lr_sum eps = 1.000000e-08
// CHECK-NEXT: dsc.zero_one_adam_resync @w
// CHECK-NEXT: dsc.zero [@grad.b, @grad.w]
// CHECK-NEXT: dsc.zero [@zoadam.lr_sum]

// CLIPPER: error: --dsc-optimizer: optimizer=zero_one_adam: local-step-clipper must be >= 1, got 0
// ONERANK: error: --dsc-data-parallel: 0/1 Adam averages over data parallelism, but '@b' has no other replica
// ZERO: error: --dsc-data-parallel: zero=1 with optimizer=zero_one_adam: not built

dsc.parameter @w : tensor<8x15xf32> init = #dsc.init<normal, std = 0.02>
dsc.parameter @b : tensor<16xf32> init = #dsc.init<zeros>
dsc.state @grad.b : tensor<16xf32> gradient of @b
dsc.state @grad.w : tensor<8x15xf32> gradient of @w
func.func @forward_backward(%db: tensor<16xf32>, %dw: tensor<8x15xf32>) attributes {dsc.program = #dsc.program_role<forward_backward>} {
  dsc.accumulate %db into @grad.b : tensor<16xf32>
  dsc.accumulate %dw into @grad.w : tensor<8x15xf32>
  return
}
