// RUN: dsc-opt %s -split-input-file -verify-diagnostics --dsc-verify-collectives=report | FileCheck %s

// Data and tensor parallelism on 2x2 ranks: tensor-parallel all-reduces in
// the backward and the evaluation program, gradient and parameter
// collectives (reached through a call) in the optimizer. The module is
// unchanged.

// CHECK-LABEL: dsc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
// CHECK-LABEL: func.func @forward_backward
// CHECK-NEXT: dsc.all_reduce %{{.*}} on @mesh axes = ["tp"] : tensor<8x4xf32>
// CHECK-NEXT: dsc.accumulate
// CHECK-LABEL: func.func @optimizer
// CHECK-NEXT: call @sync_grads() : () -> ()
// CHECK-NEXT: dsc.all_gather_states [@w] on @mesh axes = ["dp"]

// expected-remark @+2 {{verified the training step on 4 ranks of @mesh: 3 events per rank; group [dp]: 2 groups x 2 collectives; group [tp]: 2 groups x 1 collectives}}
// expected-remark @+1 {{verified evaluation @loss on 4 ranks of @mesh: 1 events per rank; group [tp]: 2 groups x 1 collectives}}
dsc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
dsc.parameter @w : tensor<8x4xf32> init = #dsc.init<zeros>
dsc.state @grad.w : tensor<8x4xf32> gradient of @w
func.func @forward_backward(%x: tensor<8x4xf32>) attributes {dsc.program = #dsc.program_role<forward_backward>} {
  %y = dsc.all_reduce %x on @mesh axes = ["tp"] : tensor<8x4xf32>
  dsc.accumulate %y into @grad.w : tensor<8x4xf32>
  return
}
func.func @sync_grads() {
  dsc.all_reduce_states [@grad.w] on @mesh axes = ["dp"] reduction = avg
  return
}
func.func @optimizer() attributes {dsc.program = #dsc.program_role<optimizer>} {
  call @sync_grads() : () -> ()
  dsc.all_gather_states [@w] on @mesh axes = ["dp"]
  return
}
func.func @loss(%x: tensor<8x4xf32>) -> tensor<8x4xf32> attributes {dsc.program = #dsc.program_role<forward>} {
  %y = dsc.all_reduce %x on @mesh axes = ["tp"] : tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

// A two-stage pipeline replicated over dp: stage functions exchange the
// activation and its gradient, and only stage 0 reduces over dp, which is
// fine because every rank of each of its dp groups is on stage 0.

// CHECK-LABEL: func.func @stage0
// CHECK-LABEL: func.func @stage1

// expected-remark @+1 {{verified the training step on 4 ranks of @mesh: 2-3 events per rank; group [dp]: 1 group x 1 collectives; along pp: 4 send/recv pairs}}
dsc.mesh @mesh axes = ["dp", "pp"] shape = [2, 2]
func.func @stage0(%x: tensor<4x8xf32>) attributes {dsc.stage = 0 : i64} {
  dsc.send %x on @mesh axis = "pp" to 1 tag = 0 : tensor<4x8xf32>
  %g = dsc.recv on @mesh axis = "pp" from 1 tag = 1 : tensor<4x8xf32>
  %s = dsc.all_reduce %g on @mesh axes = ["dp"] reduction = avg : tensor<4x8xf32>
  return
}
func.func @stage1() attributes {dsc.stage = 1 : i64} {
  %a = dsc.recv on @mesh axis = "pp" from 0 tag = 0 : tensor<4x8xf32>
  dsc.send %a on @mesh axis = "pp" to 0 tag = 1 : tensor<4x8xf32>
  return
}

// -----

// A plan without communication has nothing to prove.

// CHECK-LABEL: func.func @forward_backward
// expected-remark @below {{the plan does not communicate; nothing to verify}}
module {
  func.func @forward_backward() attributes {dsc.program = #dsc.program_role<forward_backward>} {
    return
  }
}

// -----

// The two stages disagree on the shape of the activation.

dsc.mesh @mesh axes = ["pp"] shape = [2]
func.func @stage0(%x: tensor<4x8xf32>) attributes {dsc.stage = 0 : i64} {
  // expected-error-re @+1 {{send and recv disagree on the payload type: rank 0 (pp=0) issues send of tensor<4x8xf32> to pp=1 tag 0 in @stage0 at loc({{.*}}), rank 1 (pp=1) issues recv of tensor<8x4xf32> from pp=0 tag 0 in @stage1 at loc({{.*}})}}
  dsc.send %x on @mesh axis = "pp" to 1 : tensor<4x8xf32>
  return
}
func.func @stage1() attributes {dsc.stage = 1 : i64} {
  // expected-note @+1 {{rank 1 (pp=1) issues recv of tensor<8x4xf32> from pp=0 tag 0 in @stage1}}
  %a = dsc.recv on @mesh axis = "pp" from 0 : tensor<8x4xf32>
  return
}

// -----

// Stage 0 sends two tensors in the order opposite to the one stage 1
// receives them in: each waits for the other forever.

dsc.mesh @mesh axes = ["dp", "pp"] shape = [2, 2]
func.func @stage0(%a: tensor<4xf32>, %b: tensor<4xf32>) attributes {dsc.stage = 0 : i64} {
  // expected-error-re @+1 {{deadlock: rank 0 (dp=0, pp=0) and rank 1 (dp=0, pp=1) wait on each other: rank 0 (dp=0, pp=0) issues send of tensor<4xf32> to pp=1 tag 0 in @stage0 at loc({{.*}}), rank 1 (dp=0, pp=1) issues recv of tensor<4xf32> from pp=0 tag 1 in @stage1 at loc({{.*}})}}
  dsc.send %a on @mesh axis = "pp" to 1 tag = 0 : tensor<4xf32>
  dsc.send %b on @mesh axis = "pp" to 1 tag = 1 : tensor<4xf32>
  return
}
func.func @stage1() attributes {dsc.stage = 1 : i64} {
  // expected-note @+1 {{rank 1 (dp=0, pp=1) issues recv of tensor<4xf32> from pp=0 tag 1 in @stage1}}
  %b = dsc.recv on @mesh axis = "pp" from 0 tag = 1 : tensor<4xf32>
  %a = dsc.recv on @mesh axis = "pp" from 0 tag = 0 : tensor<4xf32>
  return
}

// -----

// Three stages each send to the next before receiving: a cycle.

dsc.mesh @mesh axes = ["pp"] shape = [3]
func.func @stage0(%x: tensor<4xf32>) attributes {dsc.stage = 0 : i64} {
  // expected-error @+1 {{deadlock: rank 0 (pp=0) waits for rank 1 (pp=1) in a cycle of 3 ranks that wait on each other: rank 0 (pp=0) issues send of tensor<4xf32> to pp=1 tag 0 in @stage0}}
  dsc.send %x on @mesh axis = "pp" to 1 : tensor<4xf32>
  %r = dsc.recv on @mesh axis = "pp" from 2 : tensor<4xf32>
  return
}
func.func @stage1(%x: tensor<4xf32>) attributes {dsc.stage = 1 : i64} {
  // expected-note @+1 {{rank 1 (pp=1) issues send of tensor<4xf32> to pp=2 tag 0 in @stage1}}
  dsc.send %x on @mesh axis = "pp" to 2 : tensor<4xf32>
  %r = dsc.recv on @mesh axis = "pp" from 0 : tensor<4xf32>
  return
}
func.func @stage2(%x: tensor<4xf32>) attributes {dsc.stage = 2 : i64} {
  dsc.send %x on @mesh axis = "pp" to 0 : tensor<4xf32>
  %r = dsc.recv on @mesh axis = "pp" from 1 : tensor<4xf32>
  return
}

// -----

// An all-reduce over dp on one stage only is fine (its dp groups lie
// within the stage); one over pp that only stage 0 issues waits forever.

dsc.mesh @mesh axes = ["dp", "pp"] shape = [2, 2]
func.func @stage0(%x: tensor<4xf32>) attributes {dsc.stage = 0 : i64} {
  %a = dsc.all_reduce %x on @mesh axes = ["dp"] : tensor<4xf32>
  // expected-error-re @+1 {{rank 0 (dp=0, pp=0) issues all_reduce of tensor<4xf32> over [pp] (sum) in @stage0 at loc({{.*}}), but rank 1 (dp=0, pp=1) of its group [pp] has no more communication in this schedule}}
  %b = dsc.all_reduce %a on @mesh axes = ["pp"] : tensor<4xf32>
  return
}
func.func @stage1(%x: tensor<4xf32>) attributes {dsc.stage = 1 : i64} {
  %a = dsc.all_reduce %x on @mesh axes = ["dp"] : tensor<4xf32>
  return
}

// -----

// The two stages reduce over pp with different reductions.

dsc.mesh @mesh axes = ["pp"] shape = [2]
func.func @stage0(%x: tensor<4xf32>) attributes {dsc.stage = 0 : i64} {
  // expected-error-re @+1 {{collectives diverge in group [pp] of rank 0 (pp=0): rank 0 (pp=0) issues all_reduce of tensor<4xf32> over [pp] (sum) in @stage0 at loc({{.*}}), rank 1 (pp=1) issues all_reduce of tensor<4xf32> over [pp] (max) in @stage1 at loc({{.*}})}}
  %a = dsc.all_reduce %x on @mesh axes = ["pp"] reduction = sum : tensor<4xf32>
  return
}
func.func @stage1(%x: tensor<4xf32>) attributes {dsc.stage = 1 : i64} {
  // expected-note @+1 {{rank 1 (pp=1) issues all_reduce of tensor<4xf32> over [pp] (max) in @stage1}}
  %a = dsc.all_reduce %x on @mesh axes = ["pp"] reduction = max : tensor<4xf32>
  return
}

// -----

// Different kinds (and payloads) on one group.

dsc.mesh @mesh axes = ["pp", "dp"] shape = [2, 2]
func.func @stage0(%x: tensor<64xf32>) attributes {dsc.stage = 0 : i64} {
  // expected-error @+1 {{collectives diverge in group [pp] of rank 0 (pp=0, dp=0): rank 0 (pp=0, dp=0) issues all_reduce of tensor<64xf32> over [pp] (sum)}}
  %a = dsc.all_reduce %x on @mesh axes = ["pp"] : tensor<64xf32>
  return
}
func.func @stage1(%x: tensor<32xf32>) attributes {dsc.stage = 1 : i64} {
  // expected-note @+1 {{rank 2 (pp=1, dp=0) issues all_gather of tensor<32xf32> over [pp] gather_dim = 0 in @stage1}}
  %a = dsc.all_gather %x on @mesh axes = ["pp"] gather_dim = 0 : tensor<32xf32> -> tensor<64xf32>
  return
}

// -----

// Two gradient buckets that differ in one buffer's element type.

dsc.mesh @mesh axes = ["pp"] shape = [2]
dsc.parameter @a : tensor<8xf32> init = #dsc.init<zeros>
dsc.parameter @b : tensor<8xf32> init = #dsc.init<zeros>
dsc.parameter @c : tensor<8xf16> init = #dsc.init<zeros>
dsc.state @grad.a : tensor<8xf32> gradient of @a
dsc.state @grad.b : tensor<8xf32> gradient of @b
dsc.state @grad.c : tensor<8xf16> gradient of @c
func.func @stage0() attributes {dsc.stage = 0 : i64} {
  // expected-error @+1 {{collectives diverge in group [pp] of rank 0 (pp=0): rank 0 (pp=0) issues all_reduce of (tensor<8xf32>, tensor<8xf32>) over [pp] (avg)}}
  dsc.all_reduce_states [@grad.a, @grad.b] on @mesh axes = ["pp"] reduction = avg
  return
}
func.func @stage1() attributes {dsc.stage = 1 : i64} {
  // expected-note @+1 {{rank 1 (pp=1) issues all_reduce of (tensor<8xf32>, tensor<8xf16>) over [pp] (avg)}}
  dsc.all_reduce_states [@grad.a, @grad.c] on @mesh axes = ["pp"] reduction = avg
  return
}

// -----

// A stage function needs a pp axis to run on.

dsc.mesh @mesh axes = ["dp"] shape = [2]
// expected-error @+1 {{runs on pipeline stage 1, but @mesh has no mesh axis 'pp' to run it on}}
func.func @stage1(%x: tensor<4xf32>) attributes {dsc.stage = 1 : i64} {
  %a = dsc.all_reduce %x on @mesh axes = ["dp"] : tensor<4xf32>
  return
}

// -----

dsc.mesh @mesh axes = ["pp"] shape = [2]
func.func @stage0(%x: tensor<4xf32>) attributes {dsc.stage = 0 : i64} {
  // expected-error @+1 {{rank 0 (pp=0) issues send of tensor<4xf32> to pp=0 tag 0 in @stage0}}
  dsc.send %x on @mesh axis = "pp" to 0 : tensor<4xf32>
  return
}

// -----

// One communicator (the axes {dp, pp}), but the stages number its ranks in
// different orders, so their all-gathers concatenate differently.

dsc.mesh @mesh axes = ["dp", "pp"] shape = [2, 2]
func.func @stage0(%x: tensor<4xf32>) attributes {dsc.stage = 0 : i64} {
  // expected-error-re @+1 {{collectives diverge in group [dp, pp] of rank 0 (dp=0, pp=0): rank 0 (dp=0, pp=0) issues all_gather of tensor<4xf32> over [dp, pp] gather_dim = 0 in @stage0 at loc({{.*}}), rank 1 (dp=0, pp=1) issues all_gather of tensor<4xf32> over [pp, dp] gather_dim = 0 in @stage1 at loc({{.*}}); they number the group's ranks in different axis orders}}
  %a = dsc.all_gather %x on @mesh axes = ["dp", "pp"] gather_dim = 0 : tensor<4xf32> -> tensor<16xf32>
  return
}
func.func @stage1(%x: tensor<4xf32>) attributes {dsc.stage = 1 : i64} {
  // expected-note @+1 {{rank 1 (dp=0, pp=1) issues all_gather of tensor<4xf32> over [pp, dp]}}
  %a = dsc.all_gather %x on @mesh axes = ["pp", "dp"] gather_dim = 0 : tensor<4xf32> -> tensor<16xf32>
  return
}

// -----

// A hand-broken pipeline schedule (pipeline_step programs, as
// --dsc-pipeline-schedule writes them): after the first micro-batch, stage
// 1 sends its gradient while stage 0 sends its next activation, so both
// wait on a send. The verifier names the two ranks and the first message
// neither can complete.

module attributes {dsc.microbatches = 2 : i64, dsc.pipeline = #dsc.pipeline<stages = 2, schedule = "1f1b">} {
  dsc.mesh @mesh axes = ["pp"] shape = [2]
  func.func @loss.stage0(%t: tensor<2x4xi32>) -> tensor<2x4xf32> attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 0 : i64} {
    %a = arith.constant dense<0.0> : tensor<2x4xf32>
    return %a : tensor<2x4xf32>
  }
  func.func @forward_backward.stage0(%t: tensor<2x4xi32>, %g: tensor<2x4xf32>) attributes {dsc.program = #dsc.program_role<forward_backward>, dsc.stage = 0 : i64} {
    return
  }
  func.func @loss.stage1(%x: tensor<2x4xf32>, %t: tensor<2x4xi32>) -> tensor<f32> attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 1 : i64} {
    %l = arith.constant dense<0.0> : tensor<f32>
    return %l : tensor<f32>
  }
  func.func @forward_backward.stage1(%x: tensor<2x4xf32>, %t: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4xf32>) attributes {dsc.program = #dsc.program_role<forward_backward>, dsc.stage = 1 : i64} {
    %l = arith.constant dense<0.0> : tensor<f32>
    return %l, %x : tensor<f32>, tensor<2x4xf32>
  }
  func.func @step.stage0() attributes {dsc.program = #dsc.program_role<pipeline_step>, dsc.stage = 0 : i64} {
    dsc.pipeline_forward @loss.stage0 microbatch = 0
    dsc.pipeline_send activation to 1 microbatch = 0 on @mesh : tensor<2x4xf32>
    dsc.pipeline_forward @loss.stage0 microbatch = 1
    // expected-error-re @+1 {{deadlock: rank 0 (pp=0) and rank 1 (pp=1) wait on each other: rank 0 (pp=0) issues send of tensor<2x4xf32> to pp=1 tag 1 in @step.stage0 at loc({{.*}}), rank 1 (pp=1) issues send of tensor<2x4xf32> to pp=0 tag 0 in @step.stage1 at loc({{.*}})}}
    dsc.pipeline_send activation to 1 microbatch = 1 on @mesh : tensor<2x4xf32>
    dsc.pipeline_recv gradient from 1 microbatch = 0 on @mesh : tensor<2x4xf32>
    dsc.pipeline_backward @forward_backward.stage0 microbatch = 0
    dsc.pipeline_recv gradient from 1 microbatch = 1 on @mesh : tensor<2x4xf32>
    dsc.pipeline_backward @forward_backward.stage0 microbatch = 1
    return
  }
  func.func @step.stage1() attributes {dsc.program = #dsc.program_role<pipeline_step>, dsc.stage = 1 : i64} {
    dsc.pipeline_recv activation from 0 microbatch = 0 on @mesh : tensor<2x4xf32>
    dsc.pipeline_forward @loss.stage1 microbatch = 0
    dsc.pipeline_backward @forward_backward.stage1 microbatch = 0
    // expected-note @+1 {{rank 1 (pp=1) issues send of tensor<2x4xf32> to pp=0 tag 0 in @step.stage1}}
    dsc.pipeline_send gradient to 0 microbatch = 0 on @mesh : tensor<2x4xf32>
    dsc.pipeline_recv activation from 0 microbatch = 1 on @mesh : tensor<2x4xf32>
    dsc.pipeline_forward @loss.stage1 microbatch = 1
    dsc.pipeline_backward @forward_backward.stage1 microbatch = 1
    dsc.pipeline_send gradient to 0 microbatch = 1 on @mesh : tensor<2x4xf32>
    return
  }
}

// -----

// A hand-broken interleaved schedule: rank 1 takes micro-batch 1's
// activation as its chunk 1's (stage 3's, from stage 2) where rank 0 sends
// it for chunk 0 (stage 0 to stage 1). Both messages go from rank 0 to
// rank 1 with the same micro-batch; the verifier tells them apart by the
// stage that sends them and names the two ranks and the first message
// neither can complete.

module attributes {dsc.microbatches = 2 : i64, dsc.pipeline = #dsc.pipeline<stages = 4, schedule = "interleaved-1f1b", virtual_stages = 2, bubble = 0.000000e+00>} {
  dsc.mesh @mesh axes = ["pp"] shape = [2]
  func.func @loss.stage0(%arg0: tensor<2x4xi32>) -> tensor<2x4x8xf32> attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 0 : i64} {
    %cst = arith.constant dense<0.000000e+00> : tensor<2x4x8xf32>
    return %cst : tensor<2x4x8xf32>
  }
  func.func @forward_backward.stage0(%arg0: tensor<2x4xi32>, %arg1: tensor<2x4x8xf32>) attributes {dsc.program = #dsc.program_role<forward_backward>, dsc.stage = 0 : i64} {
    return
  }
  func.func @loss.stage1(%arg0: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 1 : i64} {
    return %arg0 : tensor<2x4x8xf32>
  }
  func.func @forward_backward.stage1(%arg0: tensor<2x4x8xf32>, %arg1: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> attributes {dsc.program = #dsc.program_role<forward_backward>, dsc.stage = 1 : i64} {
    return %arg1 : tensor<2x4x8xf32>
  }
  func.func @loss.stage2(%arg0: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 2 : i64} {
    return %arg0 : tensor<2x4x8xf32>
  }
  func.func @forward_backward.stage2(%arg0: tensor<2x4x8xf32>, %arg1: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> attributes {dsc.program = #dsc.program_role<forward_backward>, dsc.stage = 2 : i64} {
    return %arg1 : tensor<2x4x8xf32>
  }
  func.func @loss.stage3(%arg0: tensor<2x4x8xf32>, %arg1: tensor<2x4xi32>) -> tensor<f32> attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 3 : i64} {
    %cst = arith.constant dense<0.000000e+00> : tensor<f32>
    return %cst : tensor<f32>
  }
  func.func @forward_backward.stage3(%arg0: tensor<2x4x8xf32>, %arg1: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x8xf32>) attributes {dsc.program = #dsc.program_role<forward_backward>, dsc.stage = 3 : i64} {
    %cst = arith.constant dense<0.000000e+00> : tensor<f32>
    return %cst, %arg0 : tensor<f32>, tensor<2x4x8xf32>
  }
  func.func @step.stage0() attributes {dsc.program = #dsc.program_role<pipeline_step>, dsc.stage = 0 : i64} {
    dsc.pipeline_forward @loss.stage0 microbatch = 0
    dsc.pipeline_send activation of chunk 0 to 1 microbatch = 0 on @mesh : tensor<2x4x8xf32>
    dsc.pipeline_forward @loss.stage0 microbatch = 1
    // expected-error-re @+1 {{deadlock: rank 0 (pp=0) and rank 1 (pp=1) wait on each other: rank 0 (pp=0) issues send of tensor<2x4x8xf32> to pp=1 tag 1 from_stage = 0 gradient = 0 in @step.stage0 at loc({{.*}}), rank 1 (pp=1) issues recv of tensor<2x4x8xf32> from pp=0 tag 1 from_stage = 2 gradient = 0 in @step.stage1 at loc({{.*}})}}
    dsc.pipeline_send activation of chunk 0 to 1 microbatch = 1 on @mesh : tensor<2x4x8xf32>
    dsc.pipeline_recv activation of chunk 1 from 1 microbatch = 0 on @mesh : tensor<2x4x8xf32>
    dsc.pipeline_forward @loss.stage2 microbatch = 0
    dsc.pipeline_recv activation of chunk 1 from 1 microbatch = 1 on @mesh : tensor<2x4x8xf32>
    dsc.pipeline_send activation of chunk 1 to 1 microbatch = 0 on @mesh : tensor<2x4x8xf32>
    dsc.pipeline_forward @loss.stage2 microbatch = 1
    dsc.pipeline_send activation of chunk 1 to 1 microbatch = 1 on @mesh : tensor<2x4x8xf32>
    dsc.pipeline_recv gradient of chunk 1 from 1 microbatch = 0 on @mesh : tensor<2x4x8xf32>
    dsc.pipeline_backward @forward_backward.stage2 microbatch = 0
    dsc.pipeline_recv gradient of chunk 1 from 1 microbatch = 1 on @mesh : tensor<2x4x8xf32>
    dsc.pipeline_send gradient of chunk 1 to 1 microbatch = 0 on @mesh : tensor<2x4x8xf32>
    dsc.pipeline_backward @forward_backward.stage2 microbatch = 1
    dsc.pipeline_send gradient of chunk 1 to 1 microbatch = 1 on @mesh : tensor<2x4x8xf32>
    dsc.pipeline_recv gradient of chunk 0 from 1 microbatch = 0 on @mesh : tensor<2x4x8xf32>
    dsc.pipeline_backward @forward_backward.stage0 microbatch = 0
    dsc.pipeline_recv gradient of chunk 0 from 1 microbatch = 1 on @mesh : tensor<2x4x8xf32>
    dsc.pipeline_backward @forward_backward.stage0 microbatch = 1
    return
  }
  func.func @step.stage1() attributes {dsc.program = #dsc.program_role<pipeline_step>, dsc.stage = 1 : i64} {
    dsc.pipeline_recv activation of chunk 0 from 0 microbatch = 0 on @mesh : tensor<2x4x8xf32>
    dsc.pipeline_forward @loss.stage1 microbatch = 0
    // expected-note @+1 {{rank 1 (pp=1) issues recv of tensor<2x4x8xf32> from pp=0 tag 1 from_stage = 2 gradient = 0 in @step.stage1}}
    dsc.pipeline_recv activation of chunk 1 from 0 microbatch = 1 on @mesh : tensor<2x4x8xf32>
    dsc.pipeline_send activation of chunk 0 to 0 microbatch = 0 on @mesh : tensor<2x4x8xf32>
    dsc.pipeline_forward @loss.stage1 microbatch = 1
    dsc.pipeline_send activation of chunk 0 to 0 microbatch = 1 on @mesh : tensor<2x4x8xf32>
    dsc.pipeline_recv activation of chunk 1 from 0 microbatch = 0 on @mesh : tensor<2x4x8xf32>
    dsc.pipeline_forward @loss.stage3 microbatch = 0
    dsc.pipeline_recv activation of chunk 1 from 0 microbatch = 1 on @mesh : tensor<2x4x8xf32>
    dsc.pipeline_forward @loss.stage3 microbatch = 1
    dsc.pipeline_backward @forward_backward.stage3 microbatch = 0
    dsc.pipeline_send gradient of chunk 1 to 0 microbatch = 0 on @mesh : tensor<2x4x8xf32>
    dsc.pipeline_backward @forward_backward.stage3 microbatch = 1
    dsc.pipeline_send gradient of chunk 1 to 0 microbatch = 1 on @mesh : tensor<2x4x8xf32>
    dsc.pipeline_recv gradient of chunk 0 from 0 microbatch = 0 on @mesh : tensor<2x4x8xf32>
    dsc.pipeline_backward @forward_backward.stage1 microbatch = 0
    dsc.pipeline_recv gradient of chunk 0 from 0 microbatch = 1 on @mesh : tensor<2x4x8xf32>
    dsc.pipeline_send gradient of chunk 0 to 0 microbatch = 0 on @mesh : tensor<2x4x8xf32>
    dsc.pipeline_backward @forward_backward.stage1 microbatch = 1
    dsc.pipeline_send gradient of chunk 0 to 0 microbatch = 1 on @mesh : tensor<2x4x8xf32>
    return
  }
}

