// RUN: dsc-opt %s --dsc-optimizer --dsc-data-parallel="dp=2 zero=2" -verify-diagnostics | FileCheck %s

// Three pipeline stages with a tied parameter: @wte is updated by stages 0
// and 2 (the embedding and the output layer), and stage 1 only joins the
// sum of its gradient over pp. Under ZeRO-2 the gradient is a dp shard on
// every stage that holds it, the reduced one after the pp sum: stage 1
// must neither average it over dp again nor count it whole in the norm
// (a regression: it did both, and gpt-8layer on pp=4 dp=2 zero=2 drifted
// from one rank by 5e-4 at step 4).
// CHECK: dsc.state @grad.wte : tensor<64xf32> gradient of @wte
// CHECK-LABEL: func.func @optimizer.stage0
// CHECK-NEXT: dsc.all_reduce_states [@grad.wte] on @mesh axes = ["pp"]
// CHECK-NEXT: dsc.learning_rate
// CHECK-NEXT: dsc.clip_grad_norm [@grad.wte] {{.*}} shards = [true]
// CHECK-LABEL: func.func @optimizer.stage1
// CHECK-NEXT: dsc.all_reduce_states [@grad.wte] on @mesh axes = ["pp"]
// CHECK-NOT: axes = ["dp"] reduction = avg
// CHECK-NEXT: dsc.learning_rate
// CHECK-NEXT: dsc.clip_grad_norm [@grad.wte, @grad.h] {{.*}} shards = [true, true] {dsc.pipeline_local = array<i1: false, true>}
// CHECK-LABEL: func.func @optimizer.stage2
// CHECK-NEXT: dsc.all_reduce_states [@grad.wte] on @mesh axes = ["pp"]
// CHECK-NEXT: dsc.learning_rate
// CHECK-NEXT: dsc.clip_grad_norm [@grad.wte] {{.*}} shards = [true]

module attributes {dsc.pipeline = #dsc.pipeline<stages = 3, schedule = "1f1b">} {
  dsc.mesh @mesh axes = ["dp", "pp"] shape = [2, 3]
  dsc.parameter @wte : tensor<16x8xf32> init = #dsc.init<zeros>
  dsc.parameter @h : tensor<8x8xf32> init = #dsc.init<zeros>
  dsc.state @grad.wte : tensor<16x8xf32> gradient of @wte
  dsc.state @grad.h : tensor<8x8xf32> gradient of @h
  func.func @forward_backward.stage0(%g: tensor<16x8xf32>) attributes {dsc.program = #dsc.program_role<forward_backward>, dsc.stage = 0 : i64} {
    dsc.accumulate %g into @grad.wte : tensor<16x8xf32>
    return
  }
  func.func @forward_backward.stage1(%g: tensor<8x8xf32>) attributes {dsc.program = #dsc.program_role<forward_backward>, dsc.stage = 1 : i64} {
    dsc.accumulate %g into @grad.h : tensor<8x8xf32>
    return
  }
  func.func @forward_backward.stage2(%g: tensor<16x8xf32>) attributes {dsc.program = #dsc.program_role<forward_backward>, dsc.stage = 2 : i64} {
    dsc.accumulate %g into @grad.wte : tensor<16x8xf32>
    return
  }
}
