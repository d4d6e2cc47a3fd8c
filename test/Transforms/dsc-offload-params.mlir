// RUN: dsc-opt %s --dsc-offload="optimizer=host params=host" | FileCheck %s --check-prefix=HOST
// RUN: dsc-opt %s --dsc-offload="optimizer=nvme params=nvme" | FileCheck %s --check-prefix=NVME
// RUN: dsc-opt %s --dsc-offload="optimizer=host params=nvme" --dsc-plan-memory --dsc-plan-summary -o /dev/null | FileCheck %s --check-prefix=SUMMARY
// RUN: not dsc-opt %s --dsc-offload="params=host" 2>&1 | FileCheck %s --check-prefix=NOOPT
// RUN: not dsc-opt %s --dsc-offload="optimizer=host params=disk" 2>&1 | FileCheck %s --check-prefix=BADTIER

// ZeRO-Infinity's parameter offload on a ZeRO-3 plan (dp=2): @w1 and @w2
// are chunks (8 of 16 elements), @b stays whole on the device (as a
// parameter below DeepSpeed's persistence threshold). The backward
// gathers each chunk a second time, in reverse order.

// The chunks move to the tier; @b keeps its master copy, the chunks need
// none (they are fp32 and updated where they live).
// HOST: module attributes {dsc.microbatches = 2 : i64, dsc.parallel_plan = #dsc.parallel_plan<"dp=1 tp=1 pp=1 offload-optimizer=host offload-params=host">}
// HOST: dsc.parameter @w1 : tensor<8xf32> {{.*}} chunk = ["dp"]> in host
// HOST-NEXT: dsc.parameter @w2 : tensor<8xf32> {{.*}} chunk = ["dp"]> in host
// HOST-NEXT: dsc.parameter @b : tensor<3xf32> init = <zeros>{{$}}
// HOST-NOT: master of @w
// HOST: dsc.state @offload.master.b : tensor<3xf32> master of @b in host

// Each gather reads a device copy fetched one gather ahead: @w2's first
// fetch is issued before @w1's gather, the backward's @w1 fetch before
// @w2's second gather.
// HOST-LABEL: func.func @forward_backward
// HOST-NEXT: %[[F1:.*]] = dsc.fetch_parameter @w1 : tensor<8xf32>
// HOST-NEXT: %[[F2:.*]] = dsc.fetch_parameter @w2 : tensor<8xf32>
// HOST-NEXT: dsc.gather_parameter @w1 from %[[F1]] : tensor<8xf32> on @mesh axes = ["dp"] : tensor<4x4xf32>
// HOST-NEXT: dsc.matmul
// HOST-NEXT: %[[F3:.*]] = dsc.fetch_parameter @w2 : tensor<8xf32>
// HOST-NEXT: dsc.gather_parameter @w2 from %[[F2]] : tensor<8xf32>
// HOST-NEXT: dsc.matmul
// HOST-NEXT: dsc.cross_entropy
// HOST-NEXT: %[[F4:.*]] = dsc.fetch_parameter @w1 : tensor<8xf32>
// HOST-NEXT: dsc.gather_parameter @w2 from %[[F3]] : tensor<8xf32>
// HOST-NEXT: dsc.matmul
// HOST-NEXT: dsc.gather_parameter @w1 from %[[F4]] : tensor<8xf32>

// The chunks' updates run in place on the host with the gradients'
// copies; only @b's master moves up.
// HOST-LABEL: func.func @optimizer
// HOST: dsc.transfer @grad.w1 to @offload.grad.w1{{$}}
// HOST: dsc.clip_grad_norm [@offload.grad.w1, @offload.grad.w2, @offload.grad.b]
// HOST-NEXT: dsc.adamw @w1 grad = @offload.grad.w1 exp_avg = @adam.m.w1
// HOST-NEXT: dsc.adamw @w2 grad = @offload.grad.w2
// HOST-NEXT: dsc.adamw @offload.master.b grad = @offload.grad.b
// HOST-NEXT: dsc.transfer @offload.master.b to @b{{$}}
// HOST-NEXT: dsc.zero
// HOST-LABEL: func.func @initialize
// HOST-NEXT: dsc.transfer @b to @offload.master.b
// HOST-NEXT: return

// NVMe: a chunk is swapped in with its moments around its update (the
// next parameter's states prefetched before it).
// NVME: dsc.parallel_plan = #dsc.parallel_plan<"dp=1 tp=1 pp=1 offload-optimizer=nvme offload-params=nvme">
// NVME: dsc.parameter @w1 : tensor<8xf32> {{.*}} in nvme
// NVME-LABEL: func.func @optimizer
// NVME: dsc.swap_in [@w1, @adam.m.w1, @adam.v.w1]
// NVME-NEXT: dsc.swap_in [@w2, @adam.m.w2, @adam.v.w2]
// NVME-NEXT: dsc.adamw @w1 grad = @offload.grad.w1
// NVME-NEXT: dsc.swap_out [@w1, @adam.m.w1, @adam.v.w1]
// NVME-NEXT: dsc.swap_in [@offload.master.b, @adam.m.b, @adam.v.b]
// NVME-NEXT: dsc.adamw @w2

// The summary: the chunks (2 x 32 bytes) on NVMe, their moments and
// gradient copies and @b's four host copies (12 bytes each) in host
// memory; per step the chunks go NVMe -> host -> NVMe around their update
// and every gather's fetch (4 per micro-batch, 2 micro-batches) reads 32
// bytes from NVMe into the device.
// SUMMARY: "model_state_bytes_by_tier": {
// SUMMARY-NEXT: "device": 88,
// SUMMARY-NEXT: "host": 240,
// SUMMARY-NEXT: "nvme": 64
// SUMMARY: "transfer_bytes_per_step": {
// SUMMARY-NEXT: "device_to_host": 76,
// SUMMARY-NEXT: "host_to_device": 12,
// SUMMARY-NEXT: "host_to_nvme": 64,
// SUMMARY-NEXT: "nvme_to_host": 64,
// SUMMARY-NEXT: "nvme_to_device": 256

// NOOPT: error: --dsc-offload: params=host needs optimizer=host or nvme: an offloaded chunk is updated where it lives
// BADTIER: error: --dsc-offload: plan key 'offload-params': 'disk' is not none, host (cpu) or nvme

module attributes {dsc.microbatches = 2 : i64} {
  dsc.mesh @mesh axes = ["dp"] shape = [2]
  dsc.parameter @w1 : tensor<8xf32> init = #dsc.init<normal, std = 0.02> layout = #dsc.layout<view = [4, 4], split = [[], []], chunk = ["dp"]>
  dsc.parameter @w2 : tensor<8xf32> init = #dsc.init<normal, std = 0.02> layout = #dsc.layout<view = [4, 4], split = [[], []], chunk = ["dp"]>
  dsc.parameter @b : tensor<3xf32> init = #dsc.init<zeros>
  dsc.state @grad.w1 : tensor<8xf32> gradient of @w1
  dsc.state @grad.w2 : tensor<8xf32> gradient of @w2
  dsc.state @grad.b : tensor<3xf32> gradient of @b
  dsc.state @adam.m.w1 : tensor<8xf32> exp_avg of @w1
  dsc.state @adam.v.w1 : tensor<8xf32> exp_avg_sq of @w1
  dsc.state @adam.m.w2 : tensor<8xf32> exp_avg of @w2
  dsc.state @adam.v.w2 : tensor<8xf32> exp_avg_sq of @w2
  dsc.state @adam.m.b : tensor<3xf32> exp_avg of @b
  dsc.state @adam.v.b : tensor<3xf32> exp_avg_sq of @b
  func.func @forward_backward(%x: tensor<2x4xf32>, %t: tensor<2xi32>) -> tensor<f32> attributes {dsc.program = #dsc.program_role<forward_backward>} {
    %w1 = dsc.gather_parameter @w1 on @mesh axes = ["dp"] : tensor<4x4xf32>
    %h = dsc.matmul %x, %w1 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    %w2 = dsc.gather_parameter @w2 on @mesh axes = ["dp"] : tensor<4x4xf32>
    %y = dsc.matmul %h, %w2 : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    %l = dsc.cross_entropy %y, %t : tensor<2x4xf32>, tensor<2xi32> -> tensor<f32>
    %w2b = dsc.gather_parameter @w2 on @mesh axes = ["dp"] : tensor<4x4xf32>
    %d = dsc.matmul %y, %w2b {transpose_rhs} : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    %w1b = dsc.gather_parameter @w1 on @mesh axes = ["dp"] : tensor<4x4xf32>
    %e = dsc.matmul %d, %w1b {transpose_rhs} : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    %g = dsc.matmul %x, %e {transpose_lhs} : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
    dsc.reduce_scatter_accumulate %g into @grad.w1 on @mesh axes = ["dp"] reduction = avg : tensor<4x4xf32>
    dsc.reduce_scatter_accumulate %g into @grad.w2 on @mesh axes = ["dp"] reduction = avg : tensor<4x4xf32>
    return %l : tensor<f32>
  }
  func.func @optimizer() -> (tensor<f32>, tensor<f32>) attributes {dsc.program = #dsc.program_role<optimizer>} {
    dsc.all_reduce_states [@grad.b] on @mesh axes = ["dp"] reduction = avg
    %lr = dsc.learning_rate constant base = 1.0e-3 min = 0.0 warmup = 0 total = 0 : tensor<f32>
    %norm = dsc.clip_grad_norm [@grad.w1, @grad.w2, @grad.b] max_norm = 1.0 sharded on @mesh axes = ["dp"] shards = [true, true, false] : tensor<f32>
    dsc.adamw @w1 grad = @grad.w1 exp_avg = @adam.m.w1 exp_avg_sq = @adam.v.w1 lr = %lr beta1 = 0.9 beta2 = 0.95 eps = 1.0e-8 weight_decay = 0.1 : tensor<f32>
    dsc.adamw @w2 grad = @grad.w2 exp_avg = @adam.m.w2 exp_avg_sq = @adam.v.w2 lr = %lr beta1 = 0.9 beta2 = 0.95 eps = 1.0e-8 weight_decay = 0.1 : tensor<f32>
    dsc.adamw @b grad = @grad.b exp_avg = @adam.m.b exp_avg_sq = @adam.v.b lr = %lr beta1 = 0.9 beta2 = 0.95 eps = 1.0e-8 weight_decay = 0.0 : tensor<f32>
    dsc.zero [@grad.w1, @grad.w2, @grad.b]
    return %norm, %lr : tensor<f32>, tensor<f32>
  }
}
