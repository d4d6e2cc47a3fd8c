// RUN: dsc-opt %s --dsc-offload="optimizer=host" | FileCheck %s --check-prefix=HOST
// RUN: dsc-opt %s --dsc-offload="optimizer=nvme nvme-path=/scratch nvme-block-bytes=65536 nvme-queue-depth=4" | FileCheck %s --check-prefix=NVME
// RUN: dsc-opt %s --dsc-offload="optimizer=nvme" --dsc-plan-memory | FileCheck %s --check-prefix=MEMORY
// RUN: dsc-opt %s --dsc-offload="optimizer=none" | FileCheck %s --check-prefix=NONE
// RUN: not dsc-opt %s --dsc-offload="optimizer=host params=host" 2>&1 | FileCheck %s --check-prefix=NOCHUNK
// RUN: dsc-opt %s --dsc-offload="optimizer=host dpu=1" | FileCheck %s --check-prefix=DPU
// RUN: not dsc-opt %s --dsc-offload="optimizer=nvme dpu=1" 2>&1 | FileCheck %s --check-prefix=DPUNVME

// ZeRO-Offload's delayed parameter update: each parameter takes its master
// before the master's update (the value the previous step's update left),
// then the updates follow a dsc.overlap_next_step: they run beside the
// next step's forward and backward.
// DPU-LABEL: func.func @optimizer
// DPU: dsc.clip_grad_norm [@offload.grad.w, @offload.grad.b]
// DPU-NEXT: dsc.transfer @offload.master.w to @w chunk on @mesh axes = ["dp"]
// DPU-NEXT: dsc.transfer @offload.master.b to @b{{$}}
// DPU-NEXT: dsc.all_gather_states [@w]
// DPU-NEXT: dsc.zero [@grad.w, @grad.b]
// DPU-NEXT: dsc.overlap_next_step
// DPU-NEXT: dsc.adamw @offload.master.w grad = @offload.grad.w
// DPU-NEXT: dsc.adamw @offload.master.b grad = @offload.grad.b
// DPU-NEXT: return
// DPUNVME: error: --dsc-offload: dpu=1 (the delayed parameter update) needs optimizer=host and params=none, got optimizer=nvme params=none

// ZeRO-Infinity's parameter offload moves ZeRO-3 chunks (see
// dsc-offload-params.mlir); this ZeRO-1 plan has none.
// NOCHUNK: error: --dsc-offload: params=host offloads ZeRO-3 chunks and no parameter is one; compile with zero=3 (DeepSpeed's offload_param is stage 3's), whose persistence threshold keeps parameters of at most that many elements whole

// A ZeRO-1 plan on dp=2: @w's update is sharded (its moments and its
// gradient's valid part are this rank's 8 of 16 elements), @b's is whole
// (dp does not shard it).
dsc.mesh @mesh axes = ["dp"] shape = [2]
dsc.parameter @w : tensor<4x4xf32> init = #dsc.init<normal, std = 0.02>
dsc.parameter @b : tensor<3xf32> init = #dsc.init<zeros>
dsc.state @grad.w : tensor<4x4xf32> gradient of @w
dsc.state @grad.b : tensor<3xf32> gradient of @b
dsc.state @adam.m.w : tensor<8xf32> exp_avg of @w
dsc.state @adam.v.w : tensor<8xf32> exp_avg_sq of @w
dsc.state @adam.m.b : tensor<3xf32> exp_avg of @b
dsc.state @adam.v.b : tensor<3xf32> exp_avg_sq of @b
func.func @optimizer() -> (tensor<f32>, tensor<f32>) attributes {dsc.program = #dsc.program_role<optimizer>} {
  dsc.reduce_scatter_states [@grad.w] on @mesh axes = ["dp"] reduction = avg
  dsc.all_reduce_states [@grad.b] on @mesh axes = ["dp"] reduction = avg
  %lr = dsc.learning_rate constant base = 1.0e-3 min = 0.0 warmup = 0 total = 0 : tensor<f32>
  %norm = dsc.clip_grad_norm [@grad.w, @grad.b] max_norm = 1.0 sharded on @mesh axes = ["dp"] shards = [true, false] : tensor<f32>
  dsc.adamw @w grad = @grad.w exp_avg = @adam.m.w exp_avg_sq = @adam.v.w lr = %lr beta1 = 0.9 beta2 = 0.95 eps = 1.0e-8 weight_decay = 0.1 sharded on @mesh axes = ["dp"] : tensor<f32>
  dsc.adamw @b grad = @grad.b exp_avg = @adam.m.b exp_avg_sq = @adam.v.b lr = %lr beta1 = 0.9 beta2 = 0.95 eps = 1.0e-8 weight_decay = 0.0 : tensor<f32>
  dsc.all_gather_states [@w] on @mesh axes = ["dp"]
  dsc.zero [@grad.w, @grad.b]
  return %norm, %lr : tensor<f32>, tensor<f32>
}

// The master and gradient copies have the moments' type: this rank's chunk
// of @w, the whole @b. The moments move to the offload tier; the device
// gradients stay where the backward accumulates them.
// What was built is the module's plan (the lowering reads it).
// HOST: module attributes {dsc.parallel_plan = #dsc.parallel_plan<"dp=1 tp=1 pp=1 offload-optimizer=host">}
// HOST: dsc.state @grad.w : tensor<4x4xf32> gradient of @w{{$}}
// HOST: dsc.state @offload.master.w : tensor<8xf32> master of @w in host
// HOST-NEXT: dsc.state @offload.grad.w : tensor<8xf32> gradient_copy of @w in host
// HOST-NEXT: dsc.state @adam.m.w : tensor<8xf32> exp_avg of @w in host
// HOST-NEXT: dsc.state @adam.v.w : tensor<8xf32> exp_avg_sq of @w in host
// HOST: dsc.state @offload.master.b : tensor<3xf32> master of @b in host
// HOST-NEXT: dsc.state @offload.grad.b : tensor<3xf32> gradient_copy of @b in host

// Gradients move down (the chunk of the whole @grad.w) after the
// reductions and before the norm, which reads the copies; each update runs
// on its master and its result moves up into the parameter's chunk before
// the all-gather makes @w whole.
// HOST-LABEL: func.func @optimizer
// HOST: dsc.all_reduce_states [@grad.b]
// HOST: dsc.learning_rate
// HOST-NEXT: dsc.transfer @grad.w to @offload.grad.w chunk on @mesh axes = ["dp"]
// HOST-NEXT: dsc.transfer @grad.b to @offload.grad.b{{$}}
// HOST-NEXT: dsc.clip_grad_norm [@offload.grad.w, @offload.grad.b] max_norm = 1.000000e+00 sharded on @mesh axes = ["dp"] shards = [true, false]
// HOST-NEXT: dsc.adamw @offload.master.w grad = @offload.grad.w exp_avg = @adam.m.w exp_avg_sq = @adam.v.w {{.*}} weight_decay = 1.000000e-01 : tensor<f32>
// HOST-NEXT: dsc.transfer @offload.master.w to @w chunk on @mesh axes = ["dp"]
// HOST-NEXT: dsc.adamw @offload.master.b grad = @offload.grad.b
// HOST-NEXT: dsc.transfer @offload.master.b to @b{{$}}
// HOST-NEXT: dsc.all_gather_states [@w]
// HOST-NEXT: dsc.zero [@grad.w, @grad.b]

// The masters start as their parameters (and again after a checkpoint's
// load).
// HOST-LABEL: func.func @initialize() attributes {dsc.program = #dsc.program_role<initialize>}
// HOST-NEXT: dsc.transfer @w to @offload.master.w chunk on @mesh axes = ["dp"]
// HOST-NEXT: dsc.transfer @b to @offload.master.b{{$}}
// HOST-NEXT: return

// NVMe: masters and moments on NVMe, the gradient copies in host memory;
// each update between the swap-in and swap-out of its states, the next
// parameter's swap-in issued before it (prefetch).
// NVME: module attributes {dsc.parallel_plan = #dsc.parallel_plan<"dp=1 tp=1 pp=1 offload-optimizer=nvme nvme-path=/scratch nvme-block-bytes=65536 nvme-queue-depth=4">}
// NVME: dsc.state @offload.master.w : tensor<8xf32> master of @w in nvme
// NVME-NEXT: dsc.state @offload.grad.w : tensor<8xf32> gradient_copy of @w in host
// NVME-NEXT: dsc.state @adam.m.w : tensor<8xf32> exp_avg of @w in nvme
// NVME-LABEL: func.func @optimizer
// NVME: dsc.clip_grad_norm
// NVME-NEXT: dsc.swap_in [@offload.master.w, @adam.m.w, @adam.v.w]
// NVME-NEXT: dsc.swap_in [@offload.master.b, @adam.m.b, @adam.v.b]
// NVME-NEXT: dsc.adamw @offload.master.w
// NVME-NEXT: dsc.transfer @offload.master.w to @w chunk on @mesh axes = ["dp"]
// NVME-NEXT: dsc.swap_out [@offload.master.w, @adam.m.w, @adam.v.w]
// NVME-NEXT: dsc.adamw @offload.master.b
// NVME-NEXT: dsc.transfer @offload.master.b to @b{{$}}
// NVME-NEXT: dsc.swap_out [@offload.master.b, @adam.m.b, @adam.v.b]
// NVME-LABEL: func.func @initialize
// NVME-NEXT: dsc.swap_in [@offload.master.w]
// NVME-NEXT: dsc.transfer @w to @offload.master.w chunk on @mesh axes = ["dp"]
// NVME-NEXT: dsc.swap_out [@offload.master.w]

// Each tier is planned from its own offset 0: the NVMe file holds the
// masters and moments (3 x 64 bytes for @w's 32-byte chunk and @b's 12, at
// 64-byte alignment: 384), the host arena the two gradient copies (128)
// and the staging of at most two parameters' states at once (384: @w's
// and @b's three each, both swapped in before @w's update).
// MEMORY: host_bytes = 512 : i64, host_staging_bytes = 384 : i64, nvme_bytes = 384 : i64
// MEMORY-LABEL: func.func @optimizer
// MEMORY: dsc.swap_in [@offload.master.w, @adam.m.w, @adam.v.w] {dsc.offsets = array<i64: 128, 192, 256>}
// MEMORY-NEXT: dsc.swap_in [@offload.master.b, @adam.m.b, @adam.v.b] {dsc.offsets = array<i64: 320, 384, 448>}
// MEMORY-LABEL: func.func @initialize
// MEMORY-NEXT: dsc.swap_in [@offload.master.w] {dsc.offsets = array<i64: 128>}

// optimizer=none changes nothing.
// NONE-NOT: dsc.parallel_plan
// NONE-NOT: in host
// NONE-NOT: dsc.transfer

// RUN: dsc-opt %s --dsc-offload="optimizer=nvme" --dsc-plan-memory --dsc-plan-summary -o /dev/null | FileCheck %s --check-prefix=SUMMARY
// The summary's tiers and what a step moves: @w's 8-element chunk and the
// whole @b (3) down as gradients and up as parameters (44 bytes each way);
// their masters and moments in from NVMe and back (3 x 44).
// SUMMARY: "host": 512,
// SUMMARY-NEXT: "host_staging": 384,
// SUMMARY-NEXT: "nvme": 384
// SUMMARY: "model_state_bytes_by_tier": {
// SUMMARY-NEXT: "device": 152,
// SUMMARY-NEXT: "host": 44,
// SUMMARY-NEXT: "nvme": 132
// SUMMARY: "transfer_bytes_per_step": {
// SUMMARY-NEXT: "device_to_host": 44,
// SUMMARY-NEXT: "host_to_device": 44,
// SUMMARY-NEXT: "host_to_nvme": 132,
// SUMMARY-NEXT: "nvme_to_host": 132
// SUMMARY: "offload_copy_elements": 22,
