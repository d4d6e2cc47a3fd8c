// RUN: dsc-opt %s --dsc-estimate="cluster=%dsc_src_root/examples/clusters/dgx-a100-80gb.json dp=8 tp=8 pp=16 micro-batch=1 microbatches=192 recompute=1 report=%t.md" -o /dev/null 2>&1 | FileCheck %s
// RUN: FileCheck %s --check-prefix=REPORT < %t.md
// RUN: not dsc-opt %s --dsc-estimate="cluster=%dsc_src_root/examples/clusters/dgx-a100-80gb.json tp=5" -o /dev/null 2>&1 | FileCheck %s --check-prefix=HEADS
// RUN: not dsc-opt %s --dsc-estimate="dp=2" -o /dev/null 2>&1 | FileCheck %s --check-prefix=CLUSTER
// RUN: not dsc-opt %s --dsc-estimate="cluster=%dsc_src_root/examples/clusters/dgx-a100-80gb.json pp=2 pipeline-schedule=zb" -o /dev/null 2>&1 | FileCheck %s --check-prefix=SCHEDULE

// GPT-3 175B as Megatron-LM's scripts train it on 1024 A100s (Narayanan
// et al. 2021: tensor 8, pipeline 16, micro-batch 1, global batch 1536,
// full recompute; priced without interleaving): its time, throughput,
// bubble (15/192) and memory, then the search's plan on the same GPUs and
// batch, and the knobs that differ.
// CHECK: remark: --dsc-estimate: `dp=8 tp=8 pp=16 zero=0 b=1 m=192 1f1b recompute`: {{[0-9.]+}} s per step, {{[0-9]+}} TFLOP/s per GPU, MFU {{[0-9.]+}}%, pipeline bubble 7.8%, {{[0-9.]+}} GB per GPU; the search's best on 1024 GPUs with global batch 1536: `{{.*}}`, {{[0-9.]+}} s per step ({{[0-9.]+}}% faster); it changes: {{.*}}pp 16 -> {{[0-9]+}}
// REPORT: ## Your plan
// REPORT: `dp=8 tp=8 pp=16 zero=0 b=1 m=192 1f1b recompute`
// REPORT: it changes:
// REPORT: - pp 16 ->
// REPORT: ## Winner

// Numbers that do not divide are errors naming them.
// HEADS: error: --dsc-estimate: the plan `dp=1 tp=5 pp=1 zero=0 b=1 m=1` does not fit the model: tp=5 does not divide the 96 attention heads
// CLUSTER: error: --dsc-estimate: needs cluster=FILE (see examples/clusters/)
// SCHEDULE: error: --dsc-estimate: pipeline-schedule must be '1f1b' or 'gpipe', got 'zb'
module attributes {dsc.model = {hidden_size = 12288 : i64, micro_batch_size = 1 : i64, num_attention_heads = 96 : i64, num_layers = 96 : i64, parameters = 174615846912 : i64, seq_length = 2048 : i64, vocab_size = 51200 : i64}} {
}
