// RUN: dsc-opt %s --dsc-pipeline-schedule --dsc-plan-memory -split-input-file -verify-diagnostics | FileCheck %s

// Two stages over two pipeline ranks, 1F1B, 3 micro-batches. Each rank's
// memory is planned apart from offset 0 of its own arena: a declaration
// named by one rank's stages alone is that rank's (@w0: rank 0, @w1: rank
// 1), one named by both is shared (@tied, in the shared arena, no
// dsc.pipeline_rank). Sizes: tensor<2x4x8xf32> is 256 B, tensor<8xf32> 32 B
// (64 aligned).
//
// Rank 0: @w0 0; then its programs' persistent values that are not kept
// (each program's results, then its constants): the forward's output 64,
// its constant 320, the backward's loss 576 (a returned constant, placed
// again as a constant at 640); then stage 0's banks: the activation bank
// (the tokens, 64 B, and the residual, 256 B: stride 320) with 2 slots, as
// 1F1B's stage 0 has 2 micro-batches in flight (forward 0, forward 1, then
// backward 0), at 704; the gradient bank (the output's gradient) with 1
// slot at 1344. The residual (the forward's second result, the backward's
// third argument) is one buffer at 704 + 64 = 768: the forward writes it
// where the backward reads it. Persistent 1600; the forward's temporary
// peaks at 256: 1856.
// Rank 1: @w1 0, the targets (not kept: loaded at the backward) 64, the
// forward's loss 128 (and as a constant 192), the backward's results 256
// and 320 and constant 576, the activation bank (the input) with 1 slot at
// 640: 896. Shared: @tied 0: 64. The module's figures are the largest
// rank's with the shared ones: 1856 + 64.

// CHECK-LABEL: module attributes
// CHECK-SAME: dsc.memory = {alignment = 64 : i64, arena_bytes = 1920 : i64, persistent_bytes = 1664 : i64, pipeline_ranks = [{arena_bytes = 1856 : i64, persistent_bytes = 1600 : i64, temporary_bytes = 256 : i64}, {arena_bytes = 896 : i64, persistent_bytes = 896 : i64, temporary_bytes = 0 : i64}], shared = {arena_bytes = 64 : i64, persistent_bytes = 64 : i64, temporary_bytes = 0 : i64}, temporary_bytes = 256 : i64}
// CHECK: dsc.parameter @w0 : tensor<8xf32> init = <zeros> {dsc.offset = 0 : i64, dsc.pipeline_rank = 0 : i64}
// CHECK: dsc.parameter @w1 : tensor<8xf32> init = <zeros> {dsc.offset = 0 : i64, dsc.pipeline_rank = 1 : i64}
// CHECK: dsc.parameter @tied : tensor<8xf32> init = <zeros> {dsc.offset = 0 : i64}
// CHECK-LABEL: func.func @loss.stage0
// CHECK-SAME: dsc.input_offsets = array<i64: 704>
// CHECK-SAME: dsc.slot_banks = {activation = array<i64: 704, 320, 2>, gradient = array<i64: 1344, 256, 1>}
// CHECK: dsc.gelu %{{.*}} {dsc.offsets = array<i64: 1600>}
// CHECK-NEXT: dsc.gelu %{{.*}} {dsc.offsets = array<i64: 768>}
// CHECK-NEXT: dsc.gelu %{{.*}} {dsc.offsets = array<i64: 64>}
// CHECK-LABEL: func.func @backward.stage0
// CHECK-SAME: dsc.input_offsets = array<i64: 704, 1344, 768>
// CHECK-LABEL: func.func @loss.stage1
// CHECK-SAME: dsc.input_offsets = array<i64: 640, 64>
// CHECK-SAME: dsc.slot_banks = {activation = array<i64: 640, 256, 1>}
// CHECK-LABEL: func.func @forward_backward.stage1
// CHECK-SAME: dsc.input_offsets = array<i64: 640, 64>
module attributes {dsc.microbatches = 3 : i64, dsc.pipeline = #dsc.pipeline<stages = 2, schedule = "1f1b">} {
  dsc.mesh @mesh axes = ["pp"] shape = [2]
  dsc.parameter @w0 : tensor<8xf32> init = #dsc.init<zeros>
  dsc.parameter @w1 : tensor<8xf32> init = #dsc.init<zeros>
  dsc.parameter @tied : tensor<8xf32> init = #dsc.init<zeros>
  func.func @loss.stage0(%t: tensor<2x4xi32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>) attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 0 : i64} {
    %w = dsc.get_parameter @w0 : tensor<8xf32>
    %c = arith.constant dense<0.0> : tensor<2x4x8xf32>
    %x = dsc.gelu %c : tensor<2x4x8xf32>
    %r = dsc.gelu %x : tensor<2x4x8xf32>
    %o = dsc.gelu %r : tensor<2x4x8xf32>
    return %o, %r : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  }
  func.func @backward.stage0(%t: tensor<2x4xi32>, %g: tensor<2x4x8xf32>, %r: tensor<2x4x8xf32>) -> tensor<f32> attributes {dsc.program = #dsc.program_role<forward_backward>, dsc.stage = 0 : i64} {
    %w = dsc.get_parameter @tied : tensor<8xf32>
    %l = arith.constant dense<0.0> : tensor<f32>
    return %l : tensor<f32>
  }
  func.func @loss.stage1(%x: tensor<2x4x8xf32>, %t: tensor<2x4xi32>) -> tensor<f32> attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 1 : i64} {
    %l = arith.constant dense<0.0> : tensor<f32>
    return %l : tensor<f32>
  }
  func.func @forward_backward.stage1(%x: tensor<2x4x8xf32>, %t: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x8xf32>) attributes {dsc.program = #dsc.program_role<forward_backward>, dsc.stage = 1 : i64} {
    %w = dsc.get_parameter @w1 : tensor<8xf32>
    %v = dsc.get_parameter @tied : tensor<8xf32>
    %l = arith.constant dense<0.0> : tensor<f32>
    %d = dsc.gelu %x : tensor<2x4x8xf32>
    return %l, %d : tensor<f32>, tensor<2x4x8xf32>
  }
}


// -----

// Three ranks: @tied is named by stages 0 and 2 only, so it goes to an arena
// of that set (shared_by_ranks, dsc.pipeline_ranks), which rank 1 does not
// allocate; @all, named by every stage, stays shared. The module's figures
// are the largest rank's with what it holds: rank 1, 1344 + 64 (shared);
// rank 0 holds 1088 + 64 + 64 (its set).
// CHECK-LABEL: module attributes
// CHECK-SAME: dsc.memory = {alignment = 64 : i64, arena_bytes = 1408 : i64, persistent_bytes = 1408 : i64, pipeline_ranks = [{arena_bytes = 1088 : i64, {{.*}}}, {arena_bytes = 1344 : i64, {{.*}}}, {arena_bytes = 832 : i64, {{.*}}}], shared = {arena_bytes = 64 : i64, persistent_bytes = 64 : i64, temporary_bytes = 0 : i64}, shared_by_ranks = [{arena_bytes = 64 : i64, persistent_bytes = 64 : i64, ranks = array<i64: 0, 2>, temporary_bytes = 0 : i64}]
// CHECK: dsc.parameter @tied : tensor<8xf32> init = <zeros> {dsc.offset = 0 : i64, dsc.pipeline_ranks = array<i64: 0, 2>}
// CHECK: dsc.parameter @all : tensor<16xf32> init = <zeros> {dsc.offset = 0 : i64}
// CHECK: dsc.parameter @w1 : tensor<8xf32> init = <zeros> {dsc.offset = 0 : i64, dsc.pipeline_rank = 1 : i64}
module attributes {dsc.microbatches = 3 : i64, dsc.pipeline = #dsc.pipeline<stages = 3, schedule = "1f1b">} {
  dsc.mesh @mesh axes = ["pp"] shape = [3]
  dsc.parameter @tied : tensor<8xf32> init = #dsc.init<zeros>
  dsc.parameter @all : tensor<16xf32> init = #dsc.init<zeros>
  dsc.parameter @w1 : tensor<8xf32> init = #dsc.init<zeros>
  func.func @loss.stage0(%t: tensor<2x4xi32>) -> tensor<2x4x8xf32> attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 0 : i64} {
    %w = dsc.get_parameter @tied : tensor<8xf32>
    %a = dsc.get_parameter @all : tensor<16xf32>
    %c = arith.constant dense<0.0> : tensor<2x4x8xf32>
    %o = dsc.gelu %c : tensor<2x4x8xf32>
    return %o : tensor<2x4x8xf32>
  }
  func.func @backward.stage0(%t: tensor<2x4xi32>, %g: tensor<2x4x8xf32>) -> tensor<f32> attributes {dsc.program = #dsc.program_role<forward_backward>, dsc.stage = 0 : i64} {
    %l = arith.constant dense<0.0> : tensor<f32>
    return %l : tensor<f32>
  }
  func.func @loss.stage1(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 1 : i64} {
    %w = dsc.get_parameter @w1 : tensor<8xf32>
    %a = dsc.get_parameter @all : tensor<16xf32>
    %o = dsc.gelu %x : tensor<2x4x8xf32>
    return %o : tensor<2x4x8xf32>
  }
  func.func @backward.stage1(%x: tensor<2x4x8xf32>, %g: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> attributes {dsc.program = #dsc.program_role<forward_backward>, dsc.stage = 1 : i64} {
    %d = dsc.gelu %g : tensor<2x4x8xf32>
    return %d : tensor<2x4x8xf32>
  }
  func.func @loss.stage2(%x: tensor<2x4x8xf32>, %t: tensor<2x4xi32>) -> tensor<f32> attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 2 : i64} {
    %l = arith.constant dense<0.0> : tensor<f32>
    return %l : tensor<f32>
  }
  func.func @forward_backward.stage2(%x: tensor<2x4x8xf32>, %t: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x8xf32>) attributes {dsc.program = #dsc.program_role<forward_backward>, dsc.stage = 2 : i64} {
    %v = dsc.get_parameter @tied : tensor<8xf32>
    %a = dsc.get_parameter @all : tensor<16xf32>
    %l = arith.constant dense<0.0> : tensor<f32>
    %d = dsc.gelu %x : tensor<2x4x8xf32>
    return %l, %d : tensor<f32>, tensor<2x4x8xf32>
  }
}

// -----

// A stage whose forward and backward disagree on what is kept is refused.
module attributes {dsc.microbatches = 1 : i64, dsc.pipeline = #dsc.pipeline<stages = 2, schedule = "1f1b">} {
  dsc.mesh @mesh axes = ["pp"] shape = [2]
  func.func @loss.stage0(%t: tensor<2x4xi32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>) attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 0 : i64} {
    %c = arith.constant dense<0.0> : tensor<2x4x8xf32>
    %o = dsc.gelu %c : tensor<2x4x8xf32>
    return %o, %c : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  }
  // expected-error @+1 {{--dsc-plan-memory: stage 0's forward returns 2 values (its output and residuals) but its backward takes 2 (its input, the output's gradient and the residuals)}}
  func.func @backward.stage0(%t: tensor<2x4xi32>, %g: tensor<2x4x8xf32>) attributes {dsc.program = #dsc.program_role<forward_backward>, dsc.stage = 0 : i64} {
    return
  }
  func.func @loss.stage1(%x: tensor<2x4x8xf32>, %t: tensor<2x4xi32>) -> tensor<f32> attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 1 : i64} {
    %l = arith.constant dense<0.0> : tensor<f32>
    return %l : tensor<f32>
  }
  func.func @forward_backward.stage1(%x: tensor<2x4x8xf32>, %t: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x8xf32>) attributes {dsc.program = #dsc.program_role<forward_backward>, dsc.stage = 1 : i64} {
    %l = arith.constant dense<0.0> : tensor<f32>
    %d = dsc.gelu %x : tensor<2x4x8xf32>
    return %l, %d : tensor<f32>, tensor<2x4x8xf32>
  }
}
