// RUN: dsc-opt %s --dsc-estimate="cluster=%dsc_src_root/examples/clusters/dgx-a100-80gb.json dp=8 tp=8 pp=16 micro-batch=1 microbatches=192 recompute=1 report=%t.md" -o /dev/null 2>&1 | FileCheck %s
// RUN: FileCheck %s --check-prefix=REPORT < %t.md
// RUN: dsc-opt %s --dsc-estimate="cluster=%dsc_src_root/examples/clusters/dgx-a100-80gb.json dp=8 tp=8 pp=16 zero=3 offload=1 offload-params=1 micro-batch=1 microbatches=192" -o /dev/null 2>&1 | FileCheck %s --check-prefix=PARAMS
// RUN: not dsc-opt %s --dsc-estimate="cluster=%dsc_src_root/examples/clusters/dgx-a100-80gb.json dp=8 tp=8 pp=16 zero=1 offload-params=1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=PARAMSZ1
// RUN: dsc-opt %s --dsc-estimate="cluster=%dsc_src_root/examples/clusters/dgx-a100-80gb.json dp=8 tp=8 pp=16 zero=1 offload=1 dpu=1 micro-batch=1 microbatches=192" -o /dev/null 2>&1 | FileCheck %s --check-prefix=DPU
// RUN: not dsc-opt %s --dsc-estimate="cluster=%dsc_src_root/examples/clusters/dgx-a100-80gb.json dp=8 tp=8 pp=16 zero=1 dpu=1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=DPUNOOFFLOAD
// The delayed parameter update is priced when asked (the search, which
// compares numerics-preserving plans, never proposes it).
// DPU: remark: --dsc-estimate: `dp=8 tp=8 pp=16 zero=1 micro-batch-size=1 microbatches=192 offload-optimizer=host dpu=true precision=bf16`: {{.*}} delayed parameter update on -> off
// DPUNOOFFLOAD: error: --dsc-estimate: the plan `dp=8 tp=8 pp=16 zero=1 micro-batch-size=1 dpu=true precision=bf16` does not fit the model: the delayed parameter update needs optimizer offload without parameter offload (as --dsc-offload builds it)
// ZeRO-Infinity's parameter offload is priced, and named among the changes
// the search's best makes.
// PARAMS: remark: --dsc-estimate: `dp=8 tp=8 pp=16 zero=3 micro-batch-size=1 microbatches=192 offload-optimizer=host offload-params=host precision=bf16`: {{.*}} optimizer offload on -> off, parameter offload on -> off
// PARAMSZ1: error: --dsc-estimate: the plan `dp=8 tp=8 pp=16 zero=1 micro-batch-size=1 offload-params=host precision=bf16` does not fit the model: parameter offload needs ZeRO stage 3 and optimizer offload (as --dsc-offload builds it)
// RUN: not dsc-opt %s --dsc-estimate="cluster=%dsc_src_root/examples/clusters/dgx-a100-80gb.json tp=5" -o /dev/null 2>&1 | FileCheck %s --check-prefix=HEADS
// RUN: not dsc-opt %s --dsc-estimate="dp=2" -o /dev/null 2>&1 | FileCheck %s --check-prefix=CLUSTER
// RUN: not dsc-opt %s --dsc-estimate="cluster=%dsc_src_root/examples/clusters/dgx-a100-80gb.json dp=8 ep=2" -o /dev/null 2>&1 | FileCheck %s --check-prefix=DENSEEP
// RUN: not dsc-opt %s --dsc-estimate="cluster=%dsc_src_root/examples/clusters/dgx-a100-80gb.json pp=2 pipeline-schedule=zb" -o /dev/null 2>&1 | FileCheck %s --check-prefix=SCHEDULE
// RUN: not dsc-opt %s --dsc-estimate="cluster=%dsc_src_root/examples/clusters/dgx-a100-80gb.json precision=fp16" -o /dev/null 2>&1 | FileCheck %s --check-prefix=PRECISION
// RUN: dsc-opt %s --dsc-estimate="cluster=%dsc_src_root/examples/clusters/dgx-a100-80gb.json dp=8 tp=8 pp=16 micro-batch=1 microbatches=192 precision=fp32" -o /dev/null 2>&1 | FileCheck %s --check-prefix=FP32
// RUN: dsc-opt %s --dsc-estimate="cluster=%dsc_src_root/examples/clusters/dgx-a100-80gb.json dp=8 tp=8 pp=16 micro-batch=1 microbatches=192 recompute=1 pipeline-schedule=interleaved-1f1b virtual-stages=2" -o /dev/null 2>&1 | FileCheck %s --check-prefix=INTERLEAVED
// RUN: dsc-opt %s --dsc-estimate="cluster=%dsc_src_root/examples/clusters/dgx-a100-80gb.json dp=8 tp=8 pp=16 micro-batch=1 microbatches=192 pipeline-schedule=zb-h1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ZB
// RUN: dsc-opt %s --dsc-estimate="cluster=%dsc_src_root/examples/clusters/dgx-a100-80gb.json dp=64 tp=8 pp=2 micro-batch=1 microbatches=8 pipeline-schedule=interleaved-1f1b virtual-stages=2 timeline=1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=TIMELINE
// RUN: dsc-opt %s --dsc-estimate="cluster=%dsc_src_root/examples/clusters/dgx-a100-80gb.json dp=32 tp=8 pp=4 micro-batch=1 microbatches=8 pipeline-schedule=zb-h1 timeline=1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ZBTIMELINE
// RUN: not dsc-opt %s --dsc-estimate="cluster=%dsc_src_root/examples/clusters/dgx-a100-80gb.json dp=8 tp=8 pp=16 microbatches=200 pipeline-schedule=interleaved-1f1b virtual-stages=2" -o /dev/null 2>&1 | FileCheck %s --check-prefix=GROUPS
// RUN: not dsc-opt %s --dsc-estimate="cluster=%dsc_src_root/examples/clusters/dgx-a100-80gb.json dp=8 tp=8 pp=16 microbatches=192 pipeline-schedule=interleaved-1f1b virtual-stages=4" -o /dev/null 2>&1 | FileCheck %s --check-prefix=CHUNKS

// GPT-3 175B as Megatron-LM's scripts train it on 1024 A100s (Narayanan
// et al. 2021: tensor 8, pipeline 16, micro-batch 1, global batch 1536,
// full recompute; priced without interleaving): its time, throughput,
// bubble (15/192) and memory, then the search's plan on the same GPUs and
// batch, and the knobs that differ.
// CHECK: remark: --dsc-estimate: `dp=8 tp=8 pp=16 micro-batch-size=1 microbatches=192 recompute=full precision=bf16`: {{[0-9.]+}} s per step, {{[0-9]+}} TFLOP/s per GPU, MFU {{[0-9.]+}}%, pipeline bubble 7.8%, {{[0-9.]+}} GB per GPU; the search's best on 1024 GPUs with global batch 1536: `{{.*}}`, {{[0-9.]+}} s per step ({{[0-9.]+}}% faster); it changes: {{.*}}pp 16 -> {{[0-9]+}}
// Each of the 16 pipeline ranks plans its own stages' memory; the first
// keeps the most micro-batches in flight.
// CHECK-SAME: ; GB per pipeline rank: {{([0-9.]+, ){15}[0-9.]+$}}
// REPORT: ## Your plan
// REPORT: `dp=8 tp=8 pp=16 micro-batch-size=1 microbatches=192 recompute=full precision=bf16`
// REPORT: it changes:
// REPORT: - pp 16 ->
// REPORT: ## Winner

// Numbers that do not divide are errors naming them.
// HEADS: error: --dsc-estimate: the plan `dp=1 tp=5 pp=1 micro-batch-size=1 precision=bf16` does not fit the model: tp=5 does not divide the 96 attention heads
// CLUSTER: error: --dsc-estimate: needs cluster=FILE (see examples/clusters/)
// Expert parallelism needs experts (test/Transforms/dsc-estimate-moe.mlir).
// DENSEEP: error: --dsc-estimate: the plan `dp=8 tp=1 pp=1 ep=2 micro-batch-size=1 precision=bf16` does not fit the model: ep=2 needs MoE layers; the model has none
// PRECISION: error: --dsc-estimate: precision must be 'bf16' or 'fp32', got 'fp16'
// An fp32 plan (as --dsc-compile builds it) adds its bytes per GPU; the
// comparison search prices fp32 plans too.
// FP32: remark: --dsc-estimate: `dp=8 tp=8 pp=16 micro-batch-size=1 microbatches=192`: {{.*}} GB per GPU; {{[0-9]+}} bytes per GPU before the {{[0-9]+}} reserved (states {{[0-9]+}}, activations {{[0-9]+}}, temporaries {{[0-9]+}}); the search's best on 1024 GPUs with global batch 1536: `{{[^`]*}}`
// The fp32 plan is compared with fp32 plans.
// FP32-NOT: precision=bf16
// SCHEDULE: error: --dsc-estimate: plan key 'pipeline-schedule': 'zb' is not gpipe, 1f1b, interleaved-1f1b or zb-h1

// The same run with Megatron-LM's interleaving, two model chunks of three
// layers per rank (--num-layers-per-virtual-pipeline-stage 3): the bubble
// halves to 15/384, the first rank holds (1 + 15/32) times the
// activations, and the search (which chooses only what --dsc-compile
// builds, interleaving included) names the chunks among the knobs it
// changes.
// INTERLEAVED: remark: --dsc-estimate: `dp=8 tp=8 pp=16 micro-batch-size=1 microbatches=192 pipeline-schedule=interleaved-1f1b virtual-stages=2 recompute=full precision=bf16`: {{[0-9.]+}} s per step, {{[0-9]+}} TFLOP/s per GPU, MFU {{[0-9.]+}}%, pipeline bubble 3.9%, {{[0-9.]+}} GB per GPU; {{.*}}; it changes: {{.*}}virtual stages 2 -> 6
// Zero bubble H1 without recompute: the bubble is (p-1)(F + B - W) with W
// half the backward (twice the forward), so 15 slots less their backward
// (a slot also holds its tensor- and pipeline-parallel messages), against
// 1F1B's 15/192 = 7.8%.
// ZB: remark: --dsc-estimate: `dp=8 tp=8 pp=16 micro-batch-size=1 microbatches=192 pipeline-schedule=zb-h1 precision=bf16`: {{[0-9.]+}} s per step, {{[0-9]+}} TFLOP/s per GPU, MFU {{[0-9.]+}}%, pipeline bubble 3.1%
// timeline=1: the step per rank (and chunk), simulated with the model's
// stage times: interleaving 2 ranks x 2 chunks over 8 micro-batches has
// Megatron-LM's (1/v)(p-1)/m = 1/16 (the last stage's output layer is
// heavier, and still sets no extra bubble); ZB-H1's rows carry the weight
// gradients (capitals) into the tail.
// TIMELINE: remark: --dsc-estimate: interleaved-1f1b, 2 ranks x 2 chunks, 8 micro-batches, simulated bubble 0.062
// TIMELINE-NEXT: rank 0 chunk 0 (stage 0) |00
// TIMELINE-NEXT: rank 0 chunk 1 (stage 2) |....00
// TIMELINE-NEXT: rank 1 chunk 0 (stage 1) |..00
// TIMELINE-NEXT: rank 1 chunk 1 (stage 3) |......00aaaa
// ZBTIMELINE: remark: --dsc-estimate: zb-h1, 4 ranks, 8 micro-batches, simulated bubble 0.123 {{.*}}capitals: weight gradients)
// ZBTIMELINE-NEXT: stage 0 |0000{{[0-9a-hA-H.]+}}HHHH|
// ZBTIMELINE-NEXT: stage 1 |
// ZBTIMELINE-NEXT: stage 2 |
// ZBTIMELINE-NEXT: stage 3 |...........0000aaa1111{{[0-9a-hA-H.]+}}GGGHHHH|
// Megatron-LM's rules for interleaving, with the numbers.
// GROUPS: error: --dsc-estimate: the plan `dp=8 tp=8 pp=16 micro-batch-size=1 microbatches=200 pipeline-schedule=interleaved-1f1b virtual-stages=2 precision=bf16` does not fit the model: interleaved-1f1b runs the micro-batches in groups of pp: 200 micro-batches is not a multiple of pp=16
// CHUNKS: error: --dsc-estimate: the plan `dp=8 tp=8 pp=16 micro-batch-size=1 microbatches=192 pipeline-schedule=interleaved-1f1b virtual-stages=4 precision=bf16` does not fit the model: pp=16 x virtual-stages=4 model chunks do not divide the 96 layers
module attributes {dsc.model = {hidden_size = 12288 : i64, micro_batch_size = 1 : i64, num_attention_heads = 96 : i64, num_layers = 96 : i64, parameters = 174615846912 : i64, seq_length = 2048 : i64, vocab_size = 51200 : i64}} {
}
