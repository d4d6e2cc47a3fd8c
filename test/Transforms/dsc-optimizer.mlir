// RUN: dsc-opt %s --dsc-optimizer -split-input-file -verify-diagnostics | FileCheck %s
// RUN: dsc-opt %s --dsc-optimizer="lr=1.0e-3 min-lr=1.0e-4 lr-schedule=warmup_linear warmup=5 total-steps=100 beta1=0.8 beta2=0.99 eps=1.0e-6 weight-decay=0.01 clip-grad-norm=0.5 warmup-type=log warmup-start=1.0e-5" -split-input-file -verify-diagnostics | FileCheck %s --check-prefix=OPTS
// RUN: dsc-opt %s --dsc-optimizer="optimizer=sgd momentum=0.8 nesterov=true lr-schedule=constant lr=0.5" -split-input-file -verify-diagnostics | FileCheck %s --check-prefix=SGD
// RUN: not dsc-opt %s --dsc-optimizer="lr-schedule=step" -split-input-file 2>&1 | FileCheck %s --check-prefix=SCHED
// RUN: not dsc-opt %s --dsc-optimizer="lr-schedule=warmup_cosine warmup=10 total-steps=10" -split-input-file 2>&1 | FileCheck %s --check-prefix=STEPS
// RUN: not dsc-opt %s --dsc-optimizer="optimizer=lamb" -split-input-file 2>&1 | FileCheck %s --check-prefix=OPTIMIZER
// RUN: not dsc-opt %s --dsc-optimizer="warmup-type=exp" -split-input-file 2>&1 | FileCheck %s --check-prefix=WARMUPTYPE
// WARMUPTYPE: error: --dsc-optimizer: unknown warmup-type 'exp'; expected linear or log (DeepSpeed's warmup_type)
// RUN: %python -c "print('dsc.parameter @w : tensor<4xf32> init = #dsc.init<zeros>\\ndsc.state @grad.w : tensor<4xf32> gradient of @w')" | dsc-opt --dsc-optimizer | FileCheck %s --check-prefix=NOFUNC
// RUN: dsc-opt %s --dsc-optimizer="lr=6.0e-4 min-lr=6.0e-5 lr-schedule=annealing_cosine warmup=3 total-steps=30" -split-input-file -verify-diagnostics | FileCheck %s --check-prefix=NEOX
// RUN: dsc-opt %s --dsc-optimizer="lr=1.0e-3 min-lr=1.0e-4 lr-schedule=one_cycle cycle-first-size=4 cycle-decay-size=2 cycle-rate=0.5" -split-input-file -verify-diagnostics | FileCheck %s --check-prefix=CYCLE
// RUN: dsc-opt %s --dsc-optimizer="lr=1.0e-4 lr-schedule=range_test cycle-first-size=3 cycle-rate=0.5 cycle-staircase=true" -split-input-file -verify-diagnostics | FileCheck %s --check-prefix=RANGE
// RUN: not dsc-opt %s --dsc-optimizer="lr-schedule=annealing_linear warmup-type=log" -split-input-file 2>&1 | FileCheck %s --check-prefix=ANNEALLOG
// RUN: not dsc-opt %s --dsc-optimizer="lr=1.0e-3 min-lr=2.0e-3 lr-schedule=one_cycle" -split-input-file 2>&1 | FileCheck %s --check-prefix=CYCLEMIN
// NEOX: dsc.learning_rate annealing_cosine base = 6.000000e-04 min = 6.000000e-05 warmup = 3 total = 30 : tensor<f32>
// CYCLE: dsc.cyclic_learning_rate one_cycle min = 1.000000e-04 max = 1.000000e-03 first_size = 4.000000e+00 second_size = 4.000000e+00 first_stairs = 0 second_stairs = 0 decay_size = 2.000000e+00 rate = 5.000000e-01 : tensor<f32>
// RANGE: dsc.cyclic_learning_rate range_test min = 1.000000e-04 max = 1.000000e-04 first_size = 3.000000e+00 second_size = 3.000000e+00 first_stairs = 0 second_stairs = 0 decay_size = 0.000000e+00 rate = 5.000000e-01 {staircase} : tensor<f32>
// ANNEALLOG: error: --dsc-optimizer: schedule 'annealing_linear' (GPT-NeoX's AnnealingLR) warms up linearly from 0, so warmup-start and warmup-type=log do not apply to it
// CYCLEMIN: error: --dsc-optimizer: one_cycle: one_cycle rises from min-lr to lr: min-lr must be in (0, lr = 0.001000]

// Bad options are refused before anything is emitted, naming what is
// accepted.
// SCHED: error: --dsc-optimizer: unknown schedule 'step'; expected constant, warmup, warmup_linear, warmup_cosine, range_test, one_cycle (DeepSpeed's) or annealing_constant, annealing_linear, annealing_cosine, annealing_exponential (GPT-NeoX's)
// STEPS: error: --dsc-optimizer: schedule 'warmup_cosine' decays after the warmup, so total-steps (10) must exceed warmup (10)
// OPTIMIZER: error: --dsc-optimizer: unknown optimizer 'lamb'; expected adamw, sgd, onebit_adam, onebit_lamb or zero_one_adam

// One step: the learning rate of the step, the global norm of all
// gradients in declaration order with clipping, one AdamW update per
// parameter over its two moments (declared after the last state), weight
// decay on matrices only, the gradients zeroed; it returns the norm and the
// learning rate.
// CHECK-LABEL: dsc.state @grad.w : tensor<8x16xf32> gradient of @w
// CHECK-NEXT: dsc.state @adam.m.b : tensor<16xf32> exp_avg of @b
// CHECK-NEXT: dsc.state @adam.v.b : tensor<16xf32> exp_avg_sq of @b
// CHECK-NEXT: dsc.state @adam.m.w : tensor<8x16xf32> exp_avg of @w
// CHECK-NEXT: dsc.state @adam.v.w : tensor<8x16xf32> exp_avg_sq of @w
// CHECK-LABEL: func.func @optimizer() -> (tensor<f32>, tensor<f32>)
// CHECK-NEXT: %[[LR:.*]] = dsc.learning_rate warmup_cosine base = 6.000000e-04 min = 6.000000e-05 warmup = 10 total = 200 : tensor<f32>
// CHECK-NEXT: %[[NORM:.*]] = dsc.clip_grad_norm [@grad.b, @grad.w] max_norm = 1.000000e+00 : tensor<f32>
// CHECK-NEXT: dsc.adamw @b grad = @grad.b exp_avg = @adam.m.b exp_avg_sq = @adam.v.b lr = %[[LR]] beta1 = 9.000000e-01 beta2 = 0.94999999999999996 eps = 1.000000e-08 weight_decay = 0.000000e+00 : tensor<f32>
// CHECK-NEXT: dsc.adamw @w grad = @grad.w exp_avg = @adam.m.w exp_avg_sq = @adam.v.w lr = %[[LR]] beta1 = 9.000000e-01 beta2 = 0.94999999999999996 eps = 1.000000e-08 weight_decay = 1.000000e-01 : tensor<f32>
// CHECK-NEXT: dsc.zero [@grad.b, @grad.w]
// CHECK-NEXT: return %[[NORM]], %[[LR]] : tensor<f32>, tensor<f32>

// The options reach the ops.
// OPTS-LABEL: func.func @optimizer()
// OPTS-NEXT: %[[LR:.*]] = dsc.learning_rate warmup_linear base = 1.000000e-03 min = 1.000000e-04 warmup = 5 total = 100 {log_warmup, warmup_start = 1.000000e-05 : f64} : tensor<f32>
// OPTS-NEXT: dsc.clip_grad_norm [@grad.b, @grad.w] max_norm = 5.000000e-01
// OPTS-NEXT: dsc.adamw @b {{.*}} lr = %[[LR]] beta1 = 8.000000e-01 beta2 = 0.98999999999999999 eps = 9.9999999999999995E-7 weight_decay = 0.000000e+00
// OPTS-NEXT: dsc.adamw @w {{.*}} lr = %[[LR]] beta1 = 8.000000e-01 beta2 = 0.98999999999999999 eps = 9.9999999999999995E-7 weight_decay = 1.000000e-02

// With SGD, one momentum buffer per parameter instead of the two moments.
// SGD-LABEL: dsc.state @grad.w
// SGD-NEXT: dsc.state @sgd.momentum.b : tensor<16xf32> momentum of @b
// SGD-NEXT: dsc.state @sgd.momentum.w : tensor<8x16xf32> momentum of @w
// SGD-NOT: @adam
// SGD-LABEL: func.func @optimizer()
// SGD-NEXT: %[[LR:.*]] = dsc.learning_rate constant base = 5.000000e-01
// SGD-NEXT: dsc.clip_grad_norm
// SGD-NEXT: dsc.sgd @b grad = @grad.b momentum_buffer = @sgd.momentum.b lr = %[[LR]] momentum = 8.000000e-01 weight_decay = 0.000000e+00 {nesterov} : tensor<f32>
// SGD-NEXT: dsc.sgd @w grad = @grad.w momentum_buffer = @sgd.momentum.w lr = %[[LR]] momentum = 8.000000e-01 weight_decay = 1.000000e-01 {nesterov} : tensor<f32>
// SGD-NEXT: dsc.zero [@grad.b, @grad.w]

dsc.parameter @w : tensor<8x16xf32> init = #dsc.init<normal, std = 0.02>
dsc.parameter @b : tensor<16xf32> init = #dsc.init<zeros>
dsc.state @grad.b : tensor<16xf32> gradient of @b
dsc.state @grad.w : tensor<8x16xf32> gradient of @w
func.func @forward_backward(%db: tensor<16xf32>, %dw: tensor<8x16xf32>) attributes {dsc.program = #dsc.program_role<forward_backward>} {
  dsc.accumulate %db into @grad.b : tensor<16xf32>
  dsc.accumulate %dw into @grad.w : tensor<8x16xf32>
  return
}

// -----

// Pipeline stages: one optimizer per stage over the gradients its backward
// accumulates. The tied table's gradient, accumulated by both stages, is
// first summed over pp; it is in both norms, marked not local
// (dsc.pipeline_local false) so the lowering counts it once, and both
// stages update their copy. No @optimizer.
// CHECK-LABEL: func.func @optimizer.stage0() -> (tensor<f32>, tensor<f32>) attributes {dsc.program = #dsc.program_role<optimizer>, dsc.stage = 0 : i64}
// CHECK-NEXT: dsc.all_reduce_states [@grad.wte] on @mesh axes = ["pp"]
// CHECK-NEXT: dsc.learning_rate
// CHECK-NEXT: dsc.clip_grad_norm [@grad.wte, @grad.h.0.w] max_norm = 1.000000e+00 {dsc.pipeline_local = array<i1: false, true>}
// CHECK-NEXT: dsc.adamw @wte
// CHECK-NEXT: dsc.adamw @h.0.w
// CHECK-NEXT: dsc.zero [@grad.wte, @grad.h.0.w]
// CHECK-LABEL: func.func @optimizer.stage1() -> (tensor<f32>, tensor<f32>) attributes {dsc.program = #dsc.program_role<optimizer>, dsc.stage = 1 : i64}
// CHECK-NEXT: dsc.all_reduce_states [@grad.wte] on @mesh axes = ["pp"]
// CHECK-NEXT: dsc.learning_rate
// CHECK-NEXT: dsc.clip_grad_norm [@grad.h.1.w, @grad.wte] max_norm = 1.000000e+00 {dsc.pipeline_local = array<i1: true, false>}
// CHECK-NEXT: dsc.adamw @h.1.w
// CHECK-NEXT: dsc.adamw @wte
// CHECK-NEXT: dsc.zero [@grad.h.1.w, @grad.wte]
// CHECK-NOT: func.func @optimizer(
// OPTS-LABEL: func.func @optimizer.stage0()
// SGD-LABEL: func.func @optimizer.stage1()
// SGD: dsc.sgd @h.1.w

dsc.mesh @mesh axes = ["pp"] shape = [2]
dsc.parameter @wte : tensor<16x8xf32> init = #dsc.init<normal, std = 0.02>
dsc.parameter @h.0.w : tensor<8x8xf32> init = #dsc.init<normal, std = 0.02>
dsc.parameter @h.1.w : tensor<8x8xf32> init = #dsc.init<normal, std = 0.02>
dsc.state @grad.h.1.w : tensor<8x8xf32> gradient of @h.1.w
dsc.state @grad.wte : tensor<16x8xf32> gradient of @wte
dsc.state @grad.h.0.w : tensor<8x8xf32> gradient of @h.0.w
func.func @forward_backward.stage0(%a: tensor<16x8xf32>, %b: tensor<8x8xf32>) attributes {dsc.program = #dsc.program_role<forward_backward>, dsc.stage = 0 : i64} {
  dsc.accumulate %a into @grad.wte : tensor<16x8xf32>
  dsc.accumulate %b into @grad.h.0.w : tensor<8x8xf32>
  return
}
func.func @forward_backward.stage1(%a: tensor<16x8xf32>, %b: tensor<8x8xf32>) attributes {dsc.program = #dsc.program_role<forward_backward>, dsc.stage = 1 : i64} {
  dsc.accumulate %b into @grad.h.1.w : tensor<8x8xf32>
  dsc.accumulate %a into @grad.wte : tensor<16x8xf32>
  return
}

// -----

// An f64 model (the gradient checks') gets f64 scalars.
// CHECK-LABEL: func.func @optimizer() -> (tensor<f64>, tensor<f64>)
// CHECK-NEXT: dsc.learning_rate {{.*}} : tensor<f64>
// CHECK-NEXT: dsc.clip_grad_norm [@grad.w] {{.*}} : tensor<f64>
// OPTS-LABEL: func.func @optimizer() -> (tensor<f64>, tensor<f64>)
// SGD-LABEL: func.func @optimizer() -> (tensor<f64>, tensor<f64>)

dsc.parameter @w : tensor<4xf64> init = #dsc.init<zeros>
dsc.state @grad.w : tensor<4xf64> gradient of @w
func.func @forward_backward(%dw: tensor<4xf64>) attributes {dsc.program = #dsc.program_role<forward_backward>} {
  dsc.accumulate %dw into @grad.w : tensor<4xf64>
  return
}

// -----

// expected-error @+1 {{--dsc-optimizer: the module already has an @optimizer function}}
module {
  dsc.parameter @w : tensor<4xf32> init = #dsc.init<zeros>
  dsc.state @grad.w : tensor<4xf32> gradient of @w
  func.func @optimizer() attributes {dsc.program = #dsc.program_role<optimizer>} {
    return
  }
}

// -----

// expected-error @+1 {{--dsc-optimizer: no gradient states; run --dsc-autodiff first}}
module {
  dsc.parameter @w : tensor<4xf32> init = #dsc.init<zeros>
  func.func @loss() {
    return
  }
}

// -----

// A gradient that two stages accumulate is summed over the mesh's pp axis,
// which must exist.
dsc.parameter @wte : tensor<16x8xf32> init = #dsc.init<normal, std = 0.02>
// expected-error @+1 {{--dsc-optimizer: gradient @grad.wte is accumulated by several pipeline stages and must be summed over the mesh axis 'pp', but the module has no dsc.mesh with a 'pp' axis}}
dsc.state @grad.wte : tensor<16x8xf32> gradient of @wte
func.func @forward_backward.stage0(%a: tensor<16x8xf32>) attributes {dsc.program = #dsc.program_role<forward_backward>, dsc.stage = 0 : i64} {
  dsc.accumulate %a into @grad.wte : tensor<16x8xf32>
  return
}
func.func @forward_backward.stage1(%a: tensor<16x8xf32>) attributes {dsc.program = #dsc.program_role<forward_backward>, dsc.stage = 1 : i64} {
  dsc.accumulate %a into @grad.wte : tensor<16x8xf32>
  return
}

// A module of states and no function yet: the pass loads the dialects of
// the ops it creates.
// NOFUNC: func.func @optimizer() -> (tensor<f32>, tensor<f32>)
// NOFUNC: dsc.adamw
