// RUN: dsc-opt %s -split-input-file -verify-diagnostics

// The dialect checks each dsc.* discardable attribute's type and the op it
// sits on, and refuses any other dsc.* name.

// expected-error @+1 {{'builtin.module' op has unknown dsc attribute 'dsc.stages'; the dsc attributes are dsc.program, dsc.stage, dsc.input_offsets, dsc.saved_activation_bytes, dsc.weight_stash, dsc.offset, dsc.pipeline_rank, dsc.pipeline_ranks, dsc.slot_banks, dsc.offsets, dsc.pipeline_local, dsc.layer, dsc.microbatches, dsc.pipeline, dsc.model, dsc.memory, dsc.program_peaks, dsc.parallel_plan, dsc.plan_estimate}}
module attributes {dsc.stages = 2 : i64} {
}

// -----

// expected-error @+1 {{'func.func' op attribute 'dsc.program' must be a #dsc.program_role<forward|forward_backward|optimizer|pipeline_step|backward_weight|initialize|prefill|decode|compressed_optimizer>, got "optimizer"}}
func.func @optimizer() attributes {dsc.program = "optimizer"} {
  return
}

// -----

// A set of pipeline ranks (--dsc-plan-memory's arena of some ranks) is two
// or more ascending ranks.
module {
  // expected-error @+1 {{'dsc.parameter' op attribute 'dsc.pipeline_ranks' must be two or more pipeline ranks, ascending i64 >= 0, got array<i64: 3, 0>}}
  dsc.parameter @w : tensor<4xf32> init = #dsc.init<zeros> {dsc.pipeline_ranks = array<i64: 3, 0>}
}

// -----

module {
  // expected-error @+1 {{'dsc.parameter' op attribute 'dsc.pipeline_ranks' must be two or more pipeline ranks, ascending i64 >= 0, got array<i64: 1>}}
  dsc.parameter @w : tensor<4xf32> init = #dsc.init<zeros> {dsc.pipeline_ranks = array<i64: 1>}
}

// -----

// expected-error @+1 {{'builtin.module' op attribute 'dsc.program' belongs on a function, not on 'builtin.module'}}
module attributes {dsc.program = #dsc.program_role<forward>} {
}

// -----

// expected-error @+2 {{expected ::mlir::dsc::ProgramRole to be one of: forward, forward_backward, optimizer}}
// expected-error @+1 {{failed to parse Dsc_ProgramRoleAttr parameter 'value' which is to be a `::mlir::dsc::ProgramRole`}}
func.func @f() attributes {dsc.program = #dsc.program_role<backward>} {
  return
}

// -----

// expected-error @+1 {{'func.func' op attribute 'dsc.stage' must be a pipeline stage, an i64 >= 0, got -1 : i64}}
func.func @f() attributes {dsc.stage = -1 : i64} {
  return
}

// -----

// expected-error @+1 {{'func.func' op attribute 'dsc.stage' must be a pipeline stage, an i64 >= 0, got 1 : i32}}
func.func @f() attributes {dsc.stage = 1 : i32} {
  return
}

// -----

module {
  // expected-error @+1 {{'dsc.parameter' op attribute 'dsc.stage' belongs on a function, not on 'dsc.parameter'}}
  dsc.parameter @w : tensor<4xf32> init = #dsc.init<zeros> {dsc.stage = 0 : i64}
}

// -----

// expected-error @+1 {{'func.func' op attribute 'dsc.input_offsets' must be an array<i64> of 2 byte offsets >= 0 (one per argument), got array<i64: 0>}}
func.func @f(%a: tensor<4xf32>, %b: tensor<4xf32>) attributes {dsc.input_offsets = array<i64: 0>} {
  return
}

// -----

// expected-error @+1 {{'builtin.module' op attribute 'dsc.microbatches' must be the micro-batches per step, an i64 >= 1, got 0 : i64}}
module attributes {dsc.microbatches = 0 : i64} {
}

// -----

// expected-error @+1 {{'func.func' op attribute 'dsc.microbatches' belongs on the module, not on 'func.func'}}
func.func @f() attributes {dsc.microbatches = 2 : i64} {
  return
}

// -----

// dsc.pipeline is a #dsc.pipeline: its verifier checks the shape.
// expected-error @+1 {{'builtin.module' op attribute 'dsc.pipeline' must be a #dsc.pipeline<stages = P, schedule = "...">, got {schedule = "1f1b", stages = 2 : i64}}}
module attributes {dsc.pipeline = {stages = 2 : i64, schedule = "1f1b"}} {
}

// -----

// expected-error @+2 {{failed to parse Dsc_PipelineAttr parameter 'schedule'}}
// expected-error @+1 {{unknown pipeline schedule "zigzag": "1f1b", "gpipe", "interleaved-1f1b" or "zb-h1"}}
module attributes {dsc.pipeline = #dsc.pipeline<stages = 2, schedule = "zigzag">} {
}

// -----

// expected-error @+1 {{struct is missing required parameter: stages}}
module attributes {dsc.pipeline = #dsc.pipeline<schedule = "1f1b">} {
}

// -----

// expected-error @+1 {{a pipeline needs stages >= 1, got 0}}
module attributes {dsc.pipeline = #dsc.pipeline<stages = 0, schedule = "1f1b">} {
}

// -----

// expected-error @+1 {{virtual_stages must be >= 1 and divide the 6 stages, got 4}}
module attributes {dsc.pipeline = #dsc.pipeline<stages = 6, schedule = "interleaved-1f1b", virtual_stages = 4>} {
}

// -----

// expected-error @+1 {{virtual_stages must be >= 1 and divide the 4 stages, got 0}}
module attributes {dsc.pipeline = #dsc.pipeline<stages = 4, schedule = "interleaved-1f1b", virtual_stages = 0>} {
}

// -----

// expected-error @+1 {{virtual_stages = 2 needs schedule "interleaved-1f1b", not "1f1b"}}
module attributes {dsc.pipeline = #dsc.pipeline<stages = 4, schedule = "1f1b", virtual_stages = 2>} {
}

// -----

// expected-error @+1 {{bubble is the idle fraction of the step, in [0, 1], got 1.500000e+00}}
module attributes {dsc.pipeline = #dsc.pipeline<stages = 2, schedule = "1f1b", bubble = 1.5>} {
}

// -----

// expected-error @+1 {{'builtin.module' op attribute 'dsc.model' must be a dictionary, got "gpt2"}}
module attributes {dsc.model = "gpt2"} {
}

// -----

// expected-error @+1 {{'builtin.module' op attribute 'dsc.memory' must be {persistent_bytes, temporary_bytes, arena_bytes} as i64 byte counts, but 'arena_bytes' is missing}}
module attributes {dsc.memory = {persistent_bytes = 0 : i64, temporary_bytes = 0 : i64}} {
}

// -----

// expected-error @+1 {{'builtin.module' op attribute 'dsc.program_peaks' must be a dictionary of i64 peak bytes per program, but 'optimizer' is "big"}}
module attributes {dsc.program_peaks = {optimizer = "big"}} {
}

// -----

// expected-error @+1 {{'builtin.module' op attribute 'dsc.parallel_plan' must be a #dsc.parallel_plan, got {dp = 2 : i64}}}
module attributes {dsc.parallel_plan = {dp = 2 : i64}} {
}

// -----

// The plan's text is read by the plan's one parser: errors name the key.
// expected-error @+2 {{failed to parse Dsc_ParallelPlanAttr parameter 'plan'}}
// expected-error @+1 {{unknown plan key 'tq' (did you mean 'tp'?)}}
module attributes {dsc.parallel_plan = #dsc.parallel_plan<"dp=2 tq=2">} {
}

// -----

// expected-error @+2 {{failed to parse Dsc_ParallelPlanAttr parameter 'plan'}}
// expected-error @+1 {{plan key 'zero': '5' is not a ZeRO stage 0, 1, 2 or 3}}
module attributes {dsc.parallel_plan = #dsc.parallel_plan<"zero=5">} {
}

// -----

// expected-error @+2 {{failed to parse Dsc_ParallelPlanAttr parameter 'plan'}}
// expected-error @+1 {{plan key 'offload-optimizer' is given twice: 'offload=1' and 'offload-optimizer=nvme' contradict each other}}
module attributes {dsc.parallel_plan = #dsc.parallel_plan<"offload=1 offload-optimizer=nvme">} {
}

// -----

// expected-error @+1 {{'builtin.module' op attribute 'dsc.plan_estimate' must be a dictionary, got 1.000000e+00 : f64}}
module attributes {dsc.plan_estimate = 1.0 : f64} {
}

// -----

module {
  // expected-error @+1 {{'dsc.parameter' op attribute 'dsc.offset' must be a byte offset, an i64 >= 0, got -64 : i64}}
  dsc.parameter @w : tensor<4xf32> init = #dsc.init<zeros> {dsc.offset = -64 : i64}
}

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'dsc.gelu' op attribute 'dsc.offset' belongs on a dsc.parameter, dsc.state or dsc.kv_cache, not on 'dsc.gelu'}}
  %y = dsc.gelu %x {dsc.offset = 0 : i64} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'dsc.gelu' op attribute 'dsc.offsets' must be an array<i64> of 1 byte offsets >= 0 (one per result), got array<i64: 0, 64>}}
  %y = dsc.gelu %x {dsc.offsets = array<i64: 0, 64>} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

dsc.parameter @w : tensor<4xf32> init = #dsc.init<zeros>
dsc.state @grad.w : tensor<4xf32> gradient of @w
func.func @optimizer() -> tensor<f32> {
  // expected-error @+1 {{'dsc.clip_grad_norm' op attribute 'dsc.pipeline_local' must be an array<i1> of 1 flags (one per gradient), got array<i1: true, false>}}
  %n = dsc.clip_grad_norm [@grad.w] max_norm = 1.0 {dsc.pipeline_local = array<i1: true, false>} : tensor<f32>
  return %n : tensor<f32>
}

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'dsc.gelu' op attribute 'dsc.pipeline_local' belongs on a dsc.clip_grad_norm, not on 'dsc.gelu'}}
  %y = dsc.gelu %x {dsc.pipeline_local = array<i1: true>} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// What --dsc-offload built is the module's plan (dsc.offload is gone): its
// tiers and NVMe lane are checked by the plan's parser.
// expected-error @+1 {{'builtin.module' op has unknown dsc attribute 'dsc.offload'}}
module attributes {dsc.offload = {optimizer = "host"}} {
}

// -----

// expected-error @+2 {{failed to parse Dsc_ParallelPlanAttr parameter 'plan'}}
// expected-error @+1 {{plan key 'offload-optimizer': 'disk' is not none, host (cpu) or nvme}}
module attributes {dsc.parallel_plan = #dsc.parallel_plan<"offload-optimizer=disk">} {
}

// -----

// expected-error @+2 {{failed to parse Dsc_ParallelPlanAttr parameter 'plan'}}
// expected-error @+1 {{plan key 'nvme-block-bytes': '0' is not an integer >= 1}}
module attributes {dsc.parallel_plan = #dsc.parallel_plan<"offload-optimizer=nvme nvme-block-bytes=0">} {
}

// -----

// The transformer layer an op belongs to: an i64 >= 0, on an op in a
// function.
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'dsc.gelu' op attribute 'dsc.layer' must be a transformer layer, an i64 >= 0, got -1 : i64}}
  %y = dsc.gelu %x {dsc.layer = -1 : i64} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// expected-error @+1 {{'func.func' op attribute 'dsc.layer' belongs on an op in a function, not on 'func.func'}}
func.func @f() attributes {dsc.layer = 0 : i64} {
  return
}

// -----

// expected-error @+1 {{'builtin.module' op attribute 'dsc.inference' must be {block_size, kv_blocks, max_context, max_sequences, token_budget} as positive i64, but 'kv_blocks' is missing}}
module attributes {dsc.inference = {block_size = 16 : i64, max_context = 128 : i64, max_sequences = 4 : i64, token_budget = 16 : i64}} {
}
