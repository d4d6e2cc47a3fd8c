// 1-bit Adam on pipeline stages: every pipeline rank gets its warm-up and
// its compressed program (dsc.stage = k), each first summing the tied
// embedding's gradient over pp as AdamW's stage optimizers do.
// RUN: dsc-opt %s --dsc-optimizer="optimizer=onebit_adam freeze-step=3 lr-schedule=constant" | FileCheck %s

// CHECK-LABEL: func.func @optimizer.stage0() -> (tensor<f32>, tensor<f32>) attributes {dsc.program = #dsc.program_role<optimizer>, dsc.stage = 0 : i64}
// CHECK-NEXT: dsc.all_reduce_states [@grad.wte] on @mesh axes = ["pp"]
// CHECK: dsc.onebit_adam @wte grad = @grad.wte
// CHECK-NEXT: dsc.onebit_adam @h.0.w grad = @grad.h.0.w
// CHECK-LABEL: func.func @optimizer.compressed.stage0() -> (tensor<f32>, tensor<f32>) attributes {dsc.from_step = 3 : i64, dsc.program = #dsc.program_role<compressed_optimizer>, dsc.stage = 0 : i64}
// CHECK-NEXT: dsc.all_reduce_states [@grad.wte] on @mesh axes = ["pp"]
// CHECK: dsc.adam_momentum @adam.m.wte grad = @grad.wte
// CHECK-NEXT: dsc.adam_momentum @adam.m.h.0.w grad = @grad.h.0.w
// CHECK-NEXT: dsc.frozen_adam @wte exp_avg = @adam.m.wte exp_avg_sq = @adam.v.wte
// CHECK-NEXT: dsc.frozen_adam @h.0.w
// CHECK-LABEL: func.func @optimizer.stage1()
// CHECK-LABEL: func.func @optimizer.compressed.stage1() -> (tensor<f32>, tensor<f32>) attributes {dsc.from_step = 3 : i64, dsc.program = #dsc.program_role<compressed_optimizer>, dsc.stage = 1 : i64}
// CHECK-NEXT: dsc.all_reduce_states [@grad.wte] on @mesh axes = ["pp"]
// CHECK: dsc.adam_momentum @adam.m.h.1.w grad = @grad.h.1.w
// CHECK-NEXT: dsc.adam_momentum @adam.m.wte grad = @grad.wte
// CHECK-NEXT: dsc.frozen_adam @h.1.w
// CHECK-NEXT: dsc.frozen_adam @wte

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
