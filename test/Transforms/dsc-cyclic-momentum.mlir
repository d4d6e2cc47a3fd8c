// OneCycle's cycle_momentum (cycle-momentum=true with lr-schedule=one_cycle
// and adamw): --dsc-optimizer computes each step's beta1 with
// dsc.cyclic_momentum over the learning rate's cycle, hands it to every
// dsc.adamw (whose beta1 records the first step's, cycle-min-mom) and
// returns it as the optimizer's third result for the step log; the
// lowering reads it into AdamWScheduledBeta1. Elsewhere it is refused.
// RUN: dsc-opt %s --dsc-optimizer="optimizer=adamw lr-schedule=one_cycle lr=1.0e-3 min-lr=1.0e-4 cycle-first-size=10 cycle-momentum=true cycle-min-mom=0.85 cycle-max-mom=0.95 decay-mom-rate=0.01 cycle-decay-size=5" | FileCheck %s
// RUN: not dsc-opt %s --dsc-optimizer="optimizer=adamw lr-schedule=warmup_cosine cycle-momentum=true" 2>&1 | FileCheck %s --check-prefix=SCHEDULE
// RUN: not dsc-opt %s --dsc-optimizer="optimizer=sgd lr-schedule=one_cycle min-lr=1.0e-4 cycle-momentum=true" 2>&1 | FileCheck %s --check-prefix=SCHEDULE
// RUN: not dsc-opt %s --dsc-optimizer="optimizer=adamw lr-schedule=one_cycle min-lr=1.0e-4 cycle-momentum=true cycle-min-mom=0.95 cycle-max-mom=0.9" 2>&1 | FileCheck %s --check-prefix=RANGE

// CHECK-LABEL: func.func @optimizer() -> (tensor<f32>, tensor<f32>, tensor<f32>)
// CHECK-NEXT: %[[LR:.*]] = dsc.cyclic_learning_rate one_cycle
// CHECK-NEXT: %[[B1:.*]] = dsc.cyclic_momentum min = 8.500000e-01 max = 0.94999999999999996 first_size = 1.000000e+01 second_size = 1.000000e+01 first_stairs = 0 second_stairs = 0 decay_size = 5.000000e+00 rate = 1.000000e-02 : tensor<f32>
// CHECK-NEXT: %[[NORM:.*]] = dsc.clip_grad_norm
// CHECK-NEXT: dsc.adamw @b grad = @grad.b exp_avg = @adam.m.b exp_avg_sq = @adam.v.b lr = %[[LR]] scheduled_beta1 = %[[B1]] : tensor<f32> beta1 = 8.500000e-01
// CHECK-NEXT: dsc.adamw @w {{.*}} scheduled_beta1 = %[[B1]] : tensor<f32> beta1 = 8.500000e-01
// CHECK-NEXT: dsc.zero [@grad.b, @grad.w]
// CHECK-NEXT: return %[[NORM]], %[[LR]], %[[B1]] : tensor<f32>, tensor<f32>, tensor<f32>

// SCHEDULE: error: --dsc-optimizer: cycle-momentum cycles AdamW's beta1 with OneCycle's learning rate: it needs lr-schedule=one_cycle and optimizer=adamw
// RANGE: error: --dsc-optimizer: one_cycle: cycle-momentum needs 0 < cycle-min-mom <= cycle-max-mom < 1 (beta1)

dsc.parameter @w : tensor<8x15xf32> init = #dsc.init<normal, std = 0.02>
dsc.parameter @b : tensor<16xf32> init = #dsc.init<zeros>
dsc.state @grad.b : tensor<16xf32> gradient of @b
dsc.state @grad.w : tensor<8x15xf32> gradient of @w
func.func @forward_backward(%db: tensor<16xf32>, %dw: tensor<8x15xf32>) attributes {dsc.program = #dsc.program_role<forward_backward>} {
  dsc.accumulate %db into @grad.b : tensor<16xf32>
  dsc.accumulate %dw into @grad.w : tensor<8x15xf32>
  return
}
