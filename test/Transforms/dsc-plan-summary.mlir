// RUN: dsc-opt %s --dsc-plan-summary=microbatches=3 -split-input-file -verify-diagnostics -o /dev/null | FileCheck %s
// RUN: not dsc-opt %s --dsc-plan-summary=microbatches=0 -split-input-file -o /dev/null 2>&1 | FileCheck %s --check-prefix=MB0

// MB0: error: --dsc-plan-summary: microbatches must be >= 1

// A model's FLOPs a micro-batch do not depend on its pipeline: gpt-tiny
// without stages, on two (zb-h1) and on four.
// RUN: dsc-translate --import-neox %dsc_src_root/examples/configs/gpt-tiny.yml -o %t.graph.mlir
// RUN: dsc-opt %t.graph.mlir --dsc-compile="microbatches=4" | dsc-opt --dsc-plan-summary -o /dev/null > %t.flops
// RUN: dsc-opt %t.graph.mlir --dsc-compile="pp=2 microbatches=4 pipeline-schedule=zb-h1" | dsc-opt --dsc-plan-summary -o /dev/null >> %t.flops
// RUN: dsc-opt %t.graph.mlir --dsc-compile="pp=4 microbatches=4" | dsc-opt --dsc-plan-summary -o /dev/null >> %t.flops
// RUN: FileCheck %s --check-prefix=STAGES < %t.flops
// STAGES: "microbatches": 4,
// STAGES-NEXT: "forward_flops_per_microbatch": [[FWD:[1-9][0-9]*]],
// STAGES-NEXT: "flops_per_microbatch": [[ALL:[1-9][0-9]*]],
// STAGES: "microbatches": 4,
// STAGES-NEXT: "forward_flops_per_microbatch": [[FWD]],
// STAGES-NEXT: "flops_per_microbatch": [[ALL]],
// STAGES: "microbatches": 4,
// STAGES-NEXT: "forward_flops_per_microbatch": [[FWD]],
// STAGES-NEXT: "flops_per_microbatch": [[ALL]],

// The summary reads the planned bytes from dsc.memory and dsc.program_peaks
// (written here by hand, as --dsc-plan-memory would) and counts the rest
// from the IR. Every tensor<8x16xf32> is 128 elements, 512 bytes:
//   model state: @w and @grad.w on the device (1024 B), @m, @master and
//     @gcopy in host memory (1536 B), @v on NVMe (512 B): 3072 bytes; the
//     optimizer states are @m and @v, the offload copies @master and @gcopy.
//   transfers per step: @grad.w to @gcopy, device to host, 512 B; @master
//     to @w, host to device, 512 B; @v swapped in (NVMe to host) and out
//     (host to NVMe), 512 B each.
//   FLOPs: one [4, 8] x [8, 16] matmul is 2 * 4 * 16 * 8 = 1024, in the
//     forward (@loss) and in @forward_backward; a step is 3 micro-batches.
//   collectives over dp = 4: the optimizer's all-reduce of @grad.w sends
//     2 * 3/4 * 512 = 768 B once a step; each micro-batch's all-gather of
//     a [16, 16] result (1024 B) sends 3/4 * 1024 = 768 B, 3 * 768 = 2304
//     a step.

// CHECK-LABEL: "bytes": {
// CHECK-NEXT:    "device": {
// CHECK-NEXT:      "persistent": 640,
// CHECK-NEXT:      "temporary": 384,
// CHECK-NEXT:      "peak": 1024
// CHECK-NEXT:    },
// CHECK-NEXT:    "host": 1152,
// CHECK-NEXT:    "host_staging": 128,
// CHECK-NEXT:    "nvme": 512
// CHECK-NEXT:  },
// CHECK-NEXT:  "model_state_bytes_by_tier": {
// CHECK-NEXT:    "device": 1024,
// CHECK-NEXT:    "host": 1536,
// CHECK-NEXT:    "nvme": 512
// CHECK-NEXT:  },
// CHECK-NEXT:  "transfer_bytes_per_step": {
// CHECK-NEXT:    "device_to_host": 512,
// CHECK-NEXT:    "host_to_device": 512,
// CHECK-NEXT:    "host_to_nvme": 512,
// CHECK-NEXT:    "nvme_to_host": 512,
// CHECK-NEXT:    "nvme_to_device": 0
// CHECK-NEXT:  },
// CHECK-NEXT:  "program_temporary_bytes": {
// CHECK-NEXT:    "forward_backward": 384,
// CHECK-NEXT:    "loss": 128,
// CHECK-NEXT:    "optimizer": 0
// CHECK-NEXT:  },
// CHECK-NEXT:  "parameters": 128,
// CHECK-NEXT:  "whole_parameters": 128,
// CHECK-NEXT:  "gradient_elements": 128,
// CHECK-NEXT:  "optimizer_state_elements": 256,
// CHECK-NEXT:  "offload_copy_elements": 256,
// CHECK-NEXT:  "model_state_bytes": 3072,
// CHECK-NEXT:  "backward_gathered_elements": 0,
// CHECK-NEXT:  "microbatches": 3,
// CHECK-NEXT:  "forward_flops_per_microbatch": 1024,
// CHECK-NEXT:  "flops_per_microbatch": 1024,
// CHECK-NEXT:  "flops_per_step": 3072,
// CHECK-NEXT:  "collective_bytes_per_step": {
// CHECK-NEXT:    "all_reduce": 768,
// CHECK-NEXT:    "reduce_scatter": 0,
// CHECK-NEXT:    "all_gather": 2304,
// CHECK-NEXT:    "all_to_all": 0
// CHECK-NEXT:  }
// CHECK-NEXT: }

module attributes {dsc.memory = {alignment = 64 : i64, arena_bytes = 1024 : i64, host_bytes = 1152 : i64, host_staging_bytes = 128 : i64, nvme_bytes = 512 : i64, persistent_bytes = 640 : i64, temporary_bytes = 384 : i64}, dsc.program_peaks = {forward_backward = 384 : i64, loss = 128 : i64, optimizer = 0 : i64}} {
  dsc.mesh @mesh axes = ["dp"] shape = [4]
  dsc.parameter @w : tensor<8x16xf32> init = #dsc.init<zeros>
  dsc.state @grad.w : tensor<8x16xf32> gradient of @w
  dsc.state @m : tensor<8x16xf32> exp_avg of @w in host
  dsc.state @v : tensor<8x16xf32> exp_avg_sq of @w in nvme
  dsc.state @master : tensor<8x16xf32> master of @w in host
  dsc.state @gcopy : tensor<8x16xf32> gradient_copy of @w in host
  func.func @forward_backward(%x: tensor<4x8xf32>) -> tensor<16x16xf32> attributes {dsc.program = #dsc.program_role<forward_backward>} {
    %w = dsc.get_parameter @w : tensor<8x16xf32>
    %y = dsc.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
    %g = dsc.all_gather %y on @mesh axes = ["dp"] gather_dim = 0 : tensor<4x16xf32> -> tensor<16x16xf32>
    return %g : tensor<16x16xf32>
  }
  func.func @loss(%x: tensor<4x8xf32>) -> tensor<4x16xf32> attributes {dsc.program = #dsc.program_role<forward>} {
    %w = dsc.get_parameter @w : tensor<8x16xf32>
    %y = dsc.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
    return %y : tensor<4x16xf32>
  }
  func.func @optimizer() attributes {dsc.program = #dsc.program_role<optimizer>} {
    dsc.all_reduce_states [@grad.w] on @mesh axes = ["dp"] reduction = avg
    dsc.transfer @grad.w to @gcopy
    dsc.swap_in [@v]
    dsc.swap_out [@v]
    dsc.transfer @master to @w
    return
  }
}

// -----

// A pipelined plan: two stages, each with its weight-gradient part split
// off (zb-h1), and dsc.microbatches = 4, which wins over the option's 3.
// Stage 0's training program is a backward alone (--dsc-stage-backward's:
// its forward runs on its own in the step), stage 1's begins with its
// forward. The FLOPs are every stage's: the forwards' [4, 8] x [8, 16]
// (2 * 4 * 16 * 8 = 1024) and [4, 16] x [16, 4] (512), 1536; a training
// micro-batch runs stage 0's forward (1024) and backward, [4, 16] x
// [16, 8] (1024), stage 1's forward_backward, 512 + [4, 4] x [4, 16]
// (512), and the backward_weight programs' [8, 4] x [4, 16] (1024) and
// [16, 4] x [4, 4] (512): 4608, 4 * 4608 = 18432 a step.

// CHECK:       "microbatches": 4,
// CHECK-NEXT:  "forward_flops_per_microbatch": 1536,
// CHECK-NEXT:  "flops_per_microbatch": 4608,
// CHECK-NEXT:  "flops_per_step": 18432,

module attributes {dsc.microbatches = 4 : i64, dsc.memory = {alignment = 64 : i64, arena_bytes = 0 : i64, persistent_bytes = 0 : i64, temporary_bytes = 0 : i64}, dsc.program_peaks = {}} {
  func.func @forward_0(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> tensor<4x16xf32> attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 0 : i64} {
    %y = dsc.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
    return %y : tensor<4x16xf32>
  }
  func.func @forward_1(%x: tensor<4x16xf32>, %w: tensor<16x4xf32>) -> tensor<4x4xf32> attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 1 : i64} {
    %y = dsc.matmul %x, %w : tensor<4x16xf32>, tensor<16x4xf32> -> tensor<4x4xf32>
    return %y : tensor<4x4xf32>
  }
  func.func @forward_backward_0(%dy: tensor<4x16xf32>, %v: tensor<16x8xf32>) -> tensor<4x8xf32> attributes {dsc.program = #dsc.program_role<forward_backward>, dsc.stage = 0 : i64} {
    %g = dsc.gelu %dy : tensor<4x16xf32>
    %dx = dsc.matmul %g, %v : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
    return %dx : tensor<4x8xf32>
  }
  func.func @forward_backward_1(%x: tensor<4x16xf32>, %w: tensor<16x4xf32>, %v: tensor<4x16xf32>) -> tensor<4x16xf32> attributes {dsc.program = #dsc.program_role<forward_backward>, dsc.stage = 1 : i64} {
    %y = dsc.matmul %x, %w : tensor<4x16xf32>, tensor<16x4xf32> -> tensor<4x4xf32>
    %dx = dsc.matmul %y, %v : tensor<4x4xf32>, tensor<4x16xf32> -> tensor<4x16xf32>
    return %dx : tensor<4x16xf32>
  }
  func.func @backward_weight_0(%a: tensor<8x4xf32>, %b: tensor<4x16xf32>) -> tensor<8x16xf32> attributes {dsc.program = #dsc.program_role<backward_weight>, dsc.stage = 0 : i64} {
    %dw = dsc.matmul %a, %b : tensor<8x4xf32>, tensor<4x16xf32> -> tensor<8x16xf32>
    return %dw : tensor<8x16xf32>
  }
  func.func @backward_weight_1(%a: tensor<16x4xf32>, %b: tensor<4x4xf32>) -> tensor<16x4xf32> attributes {dsc.program = #dsc.program_role<backward_weight>, dsc.stage = 1 : i64} {
    %dw = dsc.matmul %a, %b : tensor<16x4xf32>, tensor<4x4xf32> -> tensor<16x4xf32>
    return %dw : tensor<16x4xf32>
  }
}

// -----

// Without the planner's annotations there is nothing to summarize.
// expected-error @+1 {{--dsc-plan-summary needs a compiled module; run --dsc-compile first}}
module {
  func.func @forward_backward(%x: tensor<4xf32>) -> tensor<4xf32> attributes {dsc.program = #dsc.program_role<forward_backward>} {
    %y = dsc.gelu %x : tensor<4xf32>
    return %y : tensor<4xf32>
  }
}

// -----

// expected-error @+1 {{--dsc-plan-summary needs a compiled module; run --dsc-compile first}}
module attributes {dsc.memory = {arena_bytes = 0 : i64, persistent_bytes = 0 : i64, temporary_bytes = 0 : i64}} {
}
