// RUN: dsc-opt %s --dsc-pipeline-schedule -split-input-file -verify-diagnostics | FileCheck %s
// RUN: not dsc-opt %s --dsc-pipeline-schedule --dsc-verify-collectives=report -split-input-file 2>&1 | FileCheck %s --check-prefix=VERIFIED

// 1F1B over two stages and three micro-batches. Stage 0 warms up with one
// forward, then alternates; as the even stage of the pair it sends before
// it receives. Stage 1 (the last) alternates from the start, its forward
// only keeping the input for its backward; as the odd stage it receives
// before it sends. Every send meets its receive: the verifier counts the
// six messages on pp.
// The bubble of the schedule on these stages is recorded beside it (here
// 0: the stages compute nothing the cost interface counts).
// CHECK: dsc.pipeline = #dsc.pipeline<stages = 2, schedule = "1f1b", bubble = 0.000000e+00>
// CHECK-LABEL: func.func @step.stage0()
// CHECK-SAME: dsc.program = #dsc.program_role<pipeline_step>, dsc.stage = 0 : i64
// CHECK-NEXT: dsc.pipeline_forward @loss.stage0 microbatch = 0
// CHECK-NEXT: dsc.pipeline_send activation to 1 microbatch = 0 on @mesh : tensor<2x4x8xf32>
// CHECK-NEXT: dsc.pipeline_forward @loss.stage0 microbatch = 1
// CHECK-NEXT: dsc.pipeline_send activation to 1 microbatch = 1 on @mesh : tensor<2x4x8xf32>
// CHECK-NEXT: dsc.pipeline_recv gradient from 1 microbatch = 0 on @mesh : tensor<2x4x8xf32>
// CHECK-NEXT: dsc.pipeline_backward @forward_backward.stage0 microbatch = 0
// CHECK-NEXT: dsc.pipeline_forward @loss.stage0 microbatch = 2
// CHECK-NEXT: dsc.pipeline_send activation to 1 microbatch = 2 on @mesh : tensor<2x4x8xf32>
// CHECK-NEXT: dsc.pipeline_recv gradient from 1 microbatch = 1 on @mesh : tensor<2x4x8xf32>
// CHECK-NEXT: dsc.pipeline_backward @forward_backward.stage0 microbatch = 1
// CHECK-NEXT: dsc.pipeline_recv gradient from 1 microbatch = 2 on @mesh : tensor<2x4x8xf32>
// CHECK-NEXT: dsc.pipeline_backward @forward_backward.stage0 microbatch = 2
// CHECK-NEXT: return
// CHECK-LABEL: func.func @step.stage1()
// CHECK-NEXT: dsc.pipeline_recv activation from 0 microbatch = 0 on @mesh : tensor<2x4x8xf32>
// CHECK-NEXT: dsc.pipeline_forward @loss.stage1 microbatch = 0
// CHECK-NEXT: dsc.pipeline_backward @forward_backward.stage1 microbatch = 0
// CHECK-NEXT: dsc.pipeline_recv activation from 0 microbatch = 1 on @mesh : tensor<2x4x8xf32>
// CHECK-NEXT: dsc.pipeline_send gradient to 0 microbatch = 0 on @mesh : tensor<2x4x8xf32>
// CHECK-NEXT: dsc.pipeline_forward @loss.stage1 microbatch = 1
// CHECK-NEXT: dsc.pipeline_backward @forward_backward.stage1 microbatch = 1
// CHECK-NEXT: dsc.pipeline_recv activation from 0 microbatch = 2 on @mesh : tensor<2x4x8xf32>
// CHECK-NEXT: dsc.pipeline_send gradient to 0 microbatch = 1 on @mesh : tensor<2x4x8xf32>
// CHECK-NEXT: dsc.pipeline_forward @loss.stage1 microbatch = 2
// CHECK-NEXT: dsc.pipeline_backward @forward_backward.stage1 microbatch = 2
// CHECK-NEXT: dsc.pipeline_send gradient to 0 microbatch = 2 on @mesh : tensor<2x4x8xf32>
// CHECK-NEXT: return
// VERIFIED: remark: verified the training step (3 micro-batches) on 2 ranks of @mesh: {{.*}}; along pp: 6 send/recv pairs
module attributes {dsc.microbatches = 3 : i64, dsc.pipeline = #dsc.pipeline<stages = 2, schedule = "1f1b">} {
  dsc.mesh @mesh axes = ["pp"] shape = [2]
  func.func @loss.stage0(%t: tensor<2x4xi32>) -> tensor<2x4x8xf32> attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 0 : i64} {
    %a = arith.constant dense<0.0> : tensor<2x4x8xf32>
    return %a : tensor<2x4x8xf32>
  }
  func.func @forward_backward.stage0(%t: tensor<2x4xi32>, %g: tensor<2x4x8xf32>) attributes {dsc.program = #dsc.program_role<forward_backward>, dsc.stage = 0 : i64} {
    return
  }
  func.func @loss.stage1(%x: tensor<2x4x8xf32>, %t: tensor<2x4xi32>) -> tensor<f32> attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 1 : i64} {
    %l = arith.constant dense<0.0> : tensor<f32>
    return %l : tensor<f32>
  }
  func.func @forward_backward.stage1(%x: tensor<2x4x8xf32>, %t: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x8xf32>) attributes {dsc.program = #dsc.program_role<forward_backward>, dsc.stage = 1 : i64} {
    %l = arith.constant dense<0.0> : tensor<f32>
    return %l, %x : tensor<f32>, tensor<2x4x8xf32>
  }
}

// -----

// GPipe over three stages and two micro-batches: every forward, then
// every backward in forward order. The middle stage passes activations up
// and gradients down.
// CHECK-LABEL: func.func @step.stage1()
// CHECK-NEXT: dsc.pipeline_recv activation from 0 microbatch = 0 on @mesh : tensor<2x4x8xf32>
// CHECK-NEXT: dsc.pipeline_forward @loss.stage1 microbatch = 0
// CHECK-NEXT: dsc.pipeline_send activation to 2 microbatch = 0 on @mesh : tensor<2x4x8xf32>
// CHECK-NEXT: dsc.pipeline_recv activation from 0 microbatch = 1 on @mesh : tensor<2x4x8xf32>
// CHECK-NEXT: dsc.pipeline_forward @loss.stage1 microbatch = 1
// CHECK-NEXT: dsc.pipeline_send activation to 2 microbatch = 1 on @mesh : tensor<2x4x8xf32>
// CHECK-NEXT: dsc.pipeline_recv gradient from 2 microbatch = 0 on @mesh : tensor<2x4x8xf32>
// CHECK-NEXT: dsc.pipeline_backward @forward_backward.stage1 microbatch = 0
// CHECK-NEXT: dsc.pipeline_send gradient to 0 microbatch = 0 on @mesh : tensor<2x4x8xf32>
// CHECK-NEXT: dsc.pipeline_recv gradient from 2 microbatch = 1 on @mesh : tensor<2x4x8xf32>
// CHECK-NEXT: dsc.pipeline_backward @forward_backward.stage1 microbatch = 1
// CHECK-NEXT: dsc.pipeline_send gradient to 0 microbatch = 1 on @mesh : tensor<2x4x8xf32>
// CHECK-NEXT: return
// VERIFIED: remark: verified the training step (2 micro-batches) on 3 ranks of @mesh: {{.*}}; along pp: 8 send/recv pairs
module attributes {dsc.microbatches = 2 : i64, dsc.pipeline = #dsc.pipeline<stages = 3, schedule = "gpipe">} {
  dsc.mesh @mesh axes = ["pp"] shape = [3]
  func.func @loss.stage0(%t: tensor<2x4xi32>) -> tensor<2x4x8xf32> attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 0 : i64} {
    %a = arith.constant dense<0.0> : tensor<2x4x8xf32>
    return %a : tensor<2x4x8xf32>
  }
  func.func @forward_backward.stage0(%t: tensor<2x4xi32>, %g: tensor<2x4x8xf32>) attributes {dsc.program = #dsc.program_role<forward_backward>, dsc.stage = 0 : i64} {
    return
  }
  func.func @loss.stage1(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 1 : i64} {
    return %x : tensor<2x4x8xf32>
  }
  func.func @forward_backward.stage1(%x: tensor<2x4x8xf32>, %g: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> attributes {dsc.program = #dsc.program_role<forward_backward>, dsc.stage = 1 : i64} {
    return %g : tensor<2x4x8xf32>
  }
  func.func @loss.stage2(%x: tensor<2x4x8xf32>, %t: tensor<2x4xi32>) -> tensor<f32> attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 2 : i64} {
    %l = arith.constant dense<0.0> : tensor<f32>
    return %l : tensor<f32>
  }
  func.func @forward_backward.stage2(%x: tensor<2x4x8xf32>, %t: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x8xf32>) attributes {dsc.program = #dsc.program_role<forward_backward>, dsc.stage = 2 : i64} {
    %l = arith.constant dense<0.0> : tensor<f32>
    return %l, %x : tensor<f32>, tensor<2x4x8xf32>
  }
}

// -----

// Interleaved 1F1B over 2 ranks holding 2 chunks each (stages 0 and 2 on
// rank 0, 1 and 3 on rank 1), 2 micro-batches (= P: every forward warms
// up). Rank 0 runs chunk 0's forwards, then chunk 1's, then the
// backwards in reverse chunk order; each message names its chunk and goes
// where the clock of PipelineStep.h put it: a send right after the
// forward or backward that produced it, a receive before the one that
// reads it, in one order for both ranks. The verifier matches each message
// by the stage that sends it.
// CHECK-LABEL: func.func @step.stage0()
// CHECK-NEXT: dsc.pipeline_forward @loss.stage0 microbatch = 0
// CHECK-NEXT: dsc.pipeline_send activation of chunk 0 to 1 microbatch = 0
// CHECK-NEXT: dsc.pipeline_forward @loss.stage0 microbatch = 1
// CHECK-NEXT: dsc.pipeline_send activation of chunk 0 to 1 microbatch = 1
// CHECK-NEXT: dsc.pipeline_recv activation of chunk 1 from 1 microbatch = 0
// CHECK-NEXT: dsc.pipeline_forward @loss.stage2 microbatch = 0
// CHECK-NEXT: dsc.pipeline_recv activation of chunk 1 from 1 microbatch = 1
// CHECK-NEXT: dsc.pipeline_send activation of chunk 1 to 1 microbatch = 0
// CHECK-NEXT: dsc.pipeline_forward @loss.stage2 microbatch = 1
// CHECK-NEXT: dsc.pipeline_send activation of chunk 1 to 1 microbatch = 1
// CHECK-NEXT: dsc.pipeline_recv gradient of chunk 1 from 1 microbatch = 0
// CHECK-NEXT: dsc.pipeline_backward @forward_backward.stage2 microbatch = 0
// CHECK-NEXT: dsc.pipeline_recv gradient of chunk 1 from 1 microbatch = 1
// CHECK-NEXT: dsc.pipeline_send gradient of chunk 1 to 1 microbatch = 0
// CHECK-NEXT: dsc.pipeline_backward @forward_backward.stage2 microbatch = 1
// CHECK-NEXT: dsc.pipeline_send gradient of chunk 1 to 1 microbatch = 1
// CHECK-NEXT: dsc.pipeline_recv gradient of chunk 0 from 1 microbatch = 0
// CHECK-NEXT: dsc.pipeline_backward @forward_backward.stage0 microbatch = 0
// CHECK-NEXT: dsc.pipeline_recv gradient of chunk 0 from 1 microbatch = 1
// CHECK-NEXT: dsc.pipeline_backward @forward_backward.stage0 microbatch = 1
// CHECK-NEXT: return
// CHECK-LABEL: func.func @step.stage1()
// CHECK-NEXT: dsc.pipeline_recv activation of chunk 0 from 0 microbatch = 0
// CHECK-NEXT: dsc.pipeline_forward @loss.stage1 microbatch = 0
// CHECK: dsc.pipeline_forward @loss.stage3 microbatch = 1
// CHECK-NEXT: dsc.pipeline_backward @forward_backward.stage3 microbatch = 0
// CHECK-NEXT: dsc.pipeline_send gradient of chunk 1 to 0 microbatch = 0
// VERIFIED: remark: verified the training step (2 micro-batches) on 2 ranks of @mesh: 12 events per rank; along pp: 12 send/recv pairs

module attributes {dsc.microbatches = 2 : i64, dsc.pipeline = #dsc.pipeline<stages = 4, schedule = "interleaved-1f1b", virtual_stages = 2>} {
  dsc.mesh @mesh axes = ["pp"] shape = [2]
  func.func @loss.stage0(%t: tensor<2x4xi32>) -> tensor<2x4x8xf32> attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 0 : i64} {
    %a = arith.constant dense<0.0> : tensor<2x4x8xf32>
    return %a : tensor<2x4x8xf32>
  }
  func.func @forward_backward.stage0(%t: tensor<2x4xi32>, %g: tensor<2x4x8xf32>) attributes {dsc.program = #dsc.program_role<forward_backward>, dsc.stage = 0 : i64} {
    return
  }
  func.func @loss.stage1(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 1 : i64} {
    return %x : tensor<2x4x8xf32>
  }
  func.func @forward_backward.stage1(%x: tensor<2x4x8xf32>, %g: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> attributes {dsc.program = #dsc.program_role<forward_backward>, dsc.stage = 1 : i64} {
    return %g : tensor<2x4x8xf32>
  }
  func.func @loss.stage2(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 2 : i64} {
    return %x : tensor<2x4x8xf32>
  }
  func.func @forward_backward.stage2(%x: tensor<2x4x8xf32>, %g: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> attributes {dsc.program = #dsc.program_role<forward_backward>, dsc.stage = 2 : i64} {
    return %g : tensor<2x4x8xf32>
  }
  func.func @loss.stage3(%x: tensor<2x4x8xf32>, %t: tensor<2x4xi32>) -> tensor<f32> attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 3 : i64} {
    %l = arith.constant dense<0.0> : tensor<f32>
    return %l : tensor<f32>
  }
  func.func @forward_backward.stage3(%x: tensor<2x4x8xf32>, %t: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x8xf32>) attributes {dsc.program = #dsc.program_role<forward_backward>, dsc.stage = 3 : i64} {
    %l = arith.constant dense<0.0> : tensor<f32>
    return %l, %x : tensor<f32>, tensor<2x4x8xf32>
  }
}

// -----

// Interleaving runs the micro-batches in groups of the ranks: 3 of them
// over 2 ranks is refused with the numbers.
// expected-error @+1 {{--dsc-pipeline-schedule: interleaved-1f1b runs the micro-batches in groups of pp: 3 micro-batches is not a multiple of pp=2}}
module attributes {dsc.microbatches = 3 : i64, dsc.pipeline = #dsc.pipeline<stages = 4, schedule = "interleaved-1f1b", virtual_stages = 2>} {
  dsc.mesh @mesh axes = ["pp"] shape = [2]
  func.func @loss.stage0(%t: tensor<2x4xi32>) -> tensor<2x4x8xf32> attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 0 : i64} {
    %a = arith.constant dense<0.0> : tensor<2x4x8xf32>
    return %a : tensor<2x4x8xf32>
  }
  func.func @forward_backward.stage0(%t: tensor<2x4xi32>, %g: tensor<2x4x8xf32>) attributes {dsc.program = #dsc.program_role<forward_backward>, dsc.stage = 0 : i64} {
    return
  }
  func.func @loss.stage1(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 1 : i64} {
    return %x : tensor<2x4x8xf32>
  }
  func.func @forward_backward.stage1(%x: tensor<2x4x8xf32>, %g: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> attributes {dsc.program = #dsc.program_role<forward_backward>, dsc.stage = 1 : i64} {
    return %g : tensor<2x4x8xf32>
  }
  func.func @loss.stage2(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 2 : i64} {
    return %x : tensor<2x4x8xf32>
  }
  func.func @forward_backward.stage2(%x: tensor<2x4x8xf32>, %g: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> attributes {dsc.program = #dsc.program_role<forward_backward>, dsc.stage = 2 : i64} {
    return %g : tensor<2x4x8xf32>
  }
  func.func @loss.stage3(%x: tensor<2x4x8xf32>, %t: tensor<2x4xi32>) -> tensor<f32> attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 3 : i64} {
    %l = arith.constant dense<0.0> : tensor<f32>
    return %l : tensor<f32>
  }
  func.func @forward_backward.stage3(%x: tensor<2x4x8xf32>, %t: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x8xf32>) attributes {dsc.program = #dsc.program_role<forward_backward>, dsc.stage = 3 : i64} {
    %l = arith.constant dense<0.0> : tensor<f32>
    return %l, %x : tensor<f32>, tensor<2x4x8xf32>
  }
}

// -----

// expected-error @+1 {{--dsc-pipeline-schedule: the module has no dsc.pipeline attribute (run --dsc-pipeline first)}}
module {
}

// -----

// expected-error @+1 {{--dsc-pipeline-schedule: stage 1 has no forward_backward program (run --dsc-autodiff before)}}
module attributes {dsc.microbatches = 1 : i64, dsc.pipeline = #dsc.pipeline<stages = 2, schedule = "1f1b">} {
  dsc.mesh @mesh axes = ["pp"] shape = [2]
  func.func @loss.stage0(%t: tensor<2x4xi32>) -> tensor<2x4x8xf32> attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 0 : i64} {
    %a = arith.constant dense<0.0> : tensor<2x4x8xf32>
    return %a : tensor<2x4x8xf32>
  }
  func.func @forward_backward.stage0(%t: tensor<2x4xi32>, %g: tensor<2x4x8xf32>) attributes {dsc.program = #dsc.program_role<forward_backward>, dsc.stage = 0 : i64} {
    return
  }
  func.func @loss.stage1(%x: tensor<2x4x8xf32>, %t: tensor<2x4xi32>) -> tensor<f32> attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 1 : i64} {
    %l = arith.constant dense<0.0> : tensor<f32>
    return %l : tensor<f32>
  }
}
