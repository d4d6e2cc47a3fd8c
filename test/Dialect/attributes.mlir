// RUN: dsc-opt %s -split-input-file | dsc-opt -split-input-file | FileCheck %s

// The dsc.* attributes passes leave for each other round-trip where they
// belong (DscAttrNames.h).

// CHECK-LABEL: module attributes
// CHECK-SAME: dsc.memory = {arena_bytes = 192 : i64, persistent_bytes = 128 : i64, temporary_bytes = 64 : i64}
// CHECK-SAME: dsc.microbatches = 4 : i64
// CHECK-SAME: dsc.model = {num_layers = 2 : i64}
// CHECK-SAME: dsc.parallel_plan = #dsc.parallel_plan<"dp=2 tp=1 pp=1 zero=1 pipeline-schedule=zb-h1 offload-optimizer=host nvme-path=\22a b\22">
// CHECK-SAME: dsc.pipeline = #dsc.pipeline<stages = 2, schedule = "gpipe">
// CHECK-SAME: dsc.plan_estimate = {mfu = 5.000000e-01 : f64}
// CHECK-SAME: dsc.program_peaks = {optimizer.stage0 = 64 : i64}
module attributes {dsc.microbatches = 4 : i64,
                   dsc.pipeline = #dsc.pipeline<stages = 2, schedule = "gpipe">,
                   dsc.model = {num_layers = 2 : i64},
                   dsc.memory = {persistent_bytes = 128 : i64, temporary_bytes = 64 : i64, arena_bytes = 192 : i64},
                   dsc.program_peaks = {optimizer.stage0 = 64 : i64},
                   dsc.parallel_plan = #dsc.parallel_plan<"pipeline-schedule=zb-h1 dp=2 zero=1 offload=cpu nvme-path=\"a b\"">,
                   dsc.plan_estimate = {mfu = 0.5 : f64}} {
  // CHECK: dsc.parameter @w : tensor<4xf32> init = <zeros> {dsc.offset = 0 : i64}
  dsc.parameter @w : tensor<4xf32> init = #dsc.init<zeros> {dsc.offset = 0 : i64}
  // CHECK: dsc.state @grad.w : tensor<4xf32> gradient of @w {dsc.offset = 64 : i64}
  dsc.state @grad.w : tensor<4xf32> gradient of @w {dsc.offset = 64 : i64}
  // CHECK-LABEL: func.func @optimizer.stage0
  // CHECK-SAME: attributes {dsc.input_offsets = array<i64>, dsc.program = #dsc.program_role<optimizer>, dsc.stage = 0 : i64}
  func.func @optimizer.stage0() -> tensor<f32> attributes {dsc.program = #dsc.program_role<optimizer>, dsc.stage = 0 : i64, dsc.input_offsets = array<i64>} {
    // CHECK: dsc.clip_grad_norm [@grad.w] max_norm = 1.000000e+00 {dsc.offsets = array<i64: 128>, dsc.pipeline_local = array<i1: true>}
    %n = dsc.clip_grad_norm [@grad.w] max_norm = 1.0 {dsc.pipeline_local = array<i1: true>, dsc.offsets = array<i64: 128>} : tensor<f32>
    return %n : tensor<f32>
  }
  // CHECK-LABEL: func.func @forward_backward
  // CHECK-SAME: attributes {dsc.program = #dsc.program_role<forward_backward>}
  func.func @forward_backward() attributes {dsc.program = #dsc.program_role<forward_backward>} {
    return
  }
  // CHECK-LABEL: func.func @loss
  // CHECK-SAME: attributes {dsc.program = #dsc.program_role<forward>}
  func.func @loss() attributes {dsc.program = #dsc.program_role<forward>} {
    return
  }
}

// -----

// #dsc.pipeline in any order, its defaults elided (virtual_stages = 1, no
// bubble): an interleaved shape with its bubble prints in one order.
// CHECK-LABEL: module @interleaved
// CHECK-SAME: dsc.pipeline = #dsc.pipeline<stages = 4, schedule = "interleaved-1f1b", virtual_stages = 2, bubble = 1.250000e-01>
module @interleaved attributes {dsc.pipeline = #dsc.pipeline<bubble = 0.125, virtual_stages = 2, schedule = "interleaved-1f1b", stages = 4>} {
}

// -----

// CHECK-LABEL: module @zero_bubble
// CHECK-SAME: dsc.pipeline = #dsc.pipeline<stages = 2, schedule = "zb-h1", bubble = 0.000000e+00>
module @zero_bubble attributes {dsc.pipeline = #dsc.pipeline<stages = 2, schedule = "zb-h1", virtual_stages = 1, bubble = 0.0>} {
}
