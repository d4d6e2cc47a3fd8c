// RUN: rm -rf %t && mkdir -p %t
// RUN: dsc-opt %s -split-input-file -verify-diagnostics --dsc-auto-parallel="cluster=%dsc_src_root/examples/clusters/dgx-a100-80gb.json gpus=1024 global-batch=1536 knobs=all report=%t/plan.md" | FileCheck %s
// RUN: FileCheck %s --check-prefix=MD < %t/plan.md
// RUN: FileCheck %s --check-prefix=JSON < %t/plan.json
// RUN: FileCheck %s --check-prefix=SVG < %t/plan.svg
// RUN: FileCheck %s --check-prefix=HTML < %t/plan.html
// RUN: dsc-opt %s -split-input-file -verify-diagnostics --dsc-auto-parallel="cluster=%dsc_src_root/examples/clusters/dgx-a100-80gb.json gpus=1024 global-batch=1536 knobs=all objective=memory" | FileCheck %s --check-prefix=MEM
// RUN: dsc-opt %s -split-input-file -verify-diagnostics --dsc-auto-parallel="cluster=%dsc_src_root/examples/clusters/dgx-a100-80gb.json gpus=1024 global-batch=1536 knobs=all micro-batch=2" | FileCheck %s --check-prefix=MB2
// RUN: dsc-opt %s -split-input-file -verify-diagnostics --dsc-auto-parallel="cluster=%dsc_src_root/examples/clusters/dgx-a100-80gb.json gpus=1024 global-batch=1536 report=%t/buildable.md" | FileCheck %s --check-prefix=BUILDABLE
// RUN: FileCheck %s --check-prefix=BUILDABLE-MD < %t/buildable.md
// RUN: not dsc-opt %s -split-input-file --dsc-auto-parallel="cluster=%dsc_src_root/examples/clusters/dgx-a100-80gb.json gpus=1024 global-batch=1536 knobs=some" 2>&1 | FileCheck %s --check-prefix=KNOBS
// RUN: not dsc-opt %s -split-input-file --dsc-auto-parallel="cluster=%t/missing.json gpus=8 global-batch=8" 2>&1 | FileCheck %s --check-prefix=NOFILE
// RUN: not dsc-opt %s -split-input-file --dsc-auto-parallel="cluster=%dsc_src_root/examples/clusters/dgx-a100-80gb.json gpus=1024 global-batch=1536 objective=cost" 2>&1 | FileCheck %s --check-prefix=OBJECTIVE
// RUN: not dsc-opt %s -split-input-file --dsc-auto-parallel="cluster=%dsc_src_root/examples/clusters/dgx-a100-80gb.json global-batch=1536" 2>&1 | FileCheck %s --check-prefix=NOGPUS

// GPT-3 175B (Brown et al.) on 1024 A100-80GB with global batch 1536, the
// setting of Narayanan et al. (SC'21), every knob the cost model prices
// (knobs=all): tensor parallelism fills the node,
// pipeline stages span nodes, ZeRO-1 shards the optimizer over dp, and
// Megatron-LM's interleaved schedule with 6 chunks of 4 layers per rank
// cuts the bubble to (1/6)(3/48).

// CHECK-LABEL: module @gpt3_175b
// CHECK-SAME: dsc.parallel_plan = #dsc.parallel_plan<"dp=32 tp=8 pp=4 zero=1 micro-batch-size=1 microbatches=48 pipeline-schedule=interleaved-1f1b virtual-stages=6 sequence-parallel=true precision=bf16">
// CHECK-SAME: dsc.plan_estimate = {bubble_fraction = 0.010416666666666666 : f64
// CHECK-SAME: objective = "time"
// CHECK-SAME: reason = "dp=32 tp=8 pp=4 zero=1 micro-batch-size=1 microbatches=48 pipeline-schedule=interleaved-1f1b virtual-stages=6 sequence-parallel=true precision=bf16 wins at {{[0-9.]+}} s/step

// By default the search keeps to the knobs --dsc-compile builds (no
// parameter offload with pipeline stages), so the winner compiles; on
// GPT-3 it is the same winner; the report says what it left out.
// BUILDABLE-LABEL: module @gpt3_175b
// BUILDABLE-SAME: dsc.parallel_plan = #dsc.parallel_plan<"dp=32 tp=8 pp=4 zero=1 micro-batch-size=1 microbatches=48 pipeline-schedule=interleaved-1f1b virtual-stages=6 sequence-parallel=true precision=bf16">
// BUILDABLE-MD: not searched: parameter offload with pipeline stages, which the compiler does not build yet (`knobs=all` prices it)
// KNOBS: error: --dsc-auto-parallel: knobs must be 'buildable' or 'all', got 'some'

// The memory objective trades time for the smallest footprint.
// MEM-LABEL: module @gpt3_175b
// MEM-SAME: dsc.parallel_plan = #dsc.parallel_plan<"dp={{[0-9]+}} tp={{[0-9]+}} pp={{[0-9]+}} zero=3 {{[^>]*}}recompute=full {{[^>]*}}offload-optimizer=host
// MEM-SAME: objective = "memory"
// MEM-SAME: reason = "{{.*}} needs the least memory

// Pinning the micro-batch to the graph's.
// MB2-LABEL: module @gpt3_175b
// MB2-SAME: micro-batch-size=2 

// MD: # dsc auto-parallel report
// MD: **gpt3_175b on 1024 x A100-SXM4-80GB, global batch 1536**
// MD: ## Winner
// MD: `dp=32 tp=8 pp=4 zero=1 micro-batch-size=1 microbatches=48 pipeline-schedule=interleaved-1f1b virtual-stages=6 sequence-parallel=true precision=bf16`
// MD: | 1 | 32 | 8 | 4 | 1 | yes | 1 x 48 | interleaved-1f1b v=6 | no | no |
// MD: ![Predicted TFLOP/s per GPU against peak memory per GPU for every feasible plan](plan.svg)

// JSON: "explanation": "dp=32 tp=8 pp=4
// JSON: "plans_enumerated": 23136
// JSON: "winner": {
// JSON: "plan": {
// JSON-DAG: "tp": 8
// JSON-DAG: "pp": 4

// SVG: <svg xmlns="http://www.w3.org/2000/svg"
// SVG: Peak memory per GPU (GB)
// SVG: Predicted model throughput per GPU
// SVG: winner: dp=32 tp=8 pp=4 zero=1 micro-batch-size=1 microbatches=48 pipeline-schedule=interleaved-1f1b virtual-stages=6 sequence-parallel=true precision=bf16
// SVG: </svg>

// HTML: <!DOCTYPE html>
// HTML: <h2>Winner</h2>
// HTML: <p><code>dp=32 tp=8 pp=4 zero=1 micro-batch-size=1 microbatches=48 pipeline-schedule=interleaved-1f1b virtual-stages=6 sequence-parallel=true precision=bf16</code></p>
// HTML: <svg xmlns="http://www.w3.org/2000/svg"
// HTML: </html>

// NOFILE: error: --dsc-auto-parallel: cannot read cluster file '{{.*}}missing.json'
// OBJECTIVE: error: --dsc-auto-parallel: objective must be 'time' or 'memory', got 'cost'
// NOGPUS: error: --dsc-auto-parallel: needs gpus=N with N > 0

module @gpt3_175b attributes {dsc.model = {num_layers = 96 : i64, hidden_size = 12288 : i64, num_attention_heads = 96 : i64, seq_length = 2048 : i64, vocab_size = 51200 : i64, micro_batch_size = 1 : i64, parameters = 174615822336 : i64}} {
}

// -----

// expected-error @below {{the module has no 'dsc.model' attribute with the model's shape; import the model with `dsc-translate --import-neox`}}
module @no_model {
}

// -----

// expected-error @below {{'dsc.model' has no integer entry 'hidden_size'}}
module @no_hidden attributes {dsc.model = {num_layers = 96 : i64, hidden_size = "big", num_attention_heads = 96 : i64, seq_length = 2048 : i64, vocab_size = 51200 : i64, micro_batch_size = 1 : i64, parameters = 174615822336 : i64}} {
}

// -----

// 175T parameters (1000x GPT-3) cannot be held by 1024 A100-80GB.
// expected-error @below {{no plan fits}}
module @too_big attributes {dsc.model = {num_layers = 96 : i64, hidden_size = 12288 : i64, num_attention_heads = 96 : i64, seq_length = 2048 : i64, vocab_size = 51200 : i64, micro_batch_size = 1 : i64, parameters = 174615822336000 : i64}} {
}
