// RUN: dsc-opt %s --dsc-estimate="cluster=%dsc_src_root/examples/clusters/dgx-a100-80gb.json dp=8 ep=2 zero=1 micro-batch=2 microbatches=16 report=%t.md" -o /dev/null 2>&1 | FileCheck %s
// RUN: FileCheck %s --check-prefix=REPORT < %t.md
// RUN: FileCheck %s --check-prefix=JSON < %t.json
// RUN: dsc-opt %s --dsc-estimate="cluster=%dsc_src_root/examples/clusters/dgx-a100-80gb.json dp=8 zero=1 micro-batch=2 microbatches=16" -o /dev/null 2>&1 | FileCheck %s --check-prefix=EP1
// RUN: not dsc-opt %s --dsc-estimate="cluster=%dsc_src_root/examples/clusters/dgx-a100-80gb.json dp=4 ep=3" -o /dev/null 2>&1 | FileCheck %s --check-prefix=DP
// RUN: not dsc-opt %s --dsc-estimate="cluster=%dsc_src_root/examples/clusters/dgx-a100-80gb.json dp=6 ep=3" -o /dev/null 2>&1 | FileCheck %s --check-prefix=EXPERTS
// RUN: dsc-opt %s --dsc-estimate="cluster=%dsc_src_root/examples/clusters/dgx-a100-80gb.json dp=4 ep=2 pp=2 zero=1 micro-batch=2 microbatches=8" -o /dev/null 2>&1 | FileCheck %s --check-prefix=PP

// An MoE GPT (24 layers of h=2048, every MLP 8 top-1 experts of capacity
// factor 1, so as many expert rows as a dense MLP's tokens) on one DGX
// A100 with its experts split over ep=2 of the 8 data-parallel ranks: the
// plan is priced with its all-to-alls, and the search, which tries every
// ep dividing dp and the experts, names the ep it would change.
// CHECK: remark: --dsc-estimate: `dp=8 tp=1 pp=1 ep=2 zero=1 micro-batch-size=2 microbatches=16 precision=bf16`: {{[0-9.]+}} s per step, {{[0-9]+}} TFLOP/s per GPU, MFU {{[0-9.]+}}%, pipeline bubble 0.0%, {{[0-9.]+}} GB per GPU; the search's best on 8 GPUs with global batch 256: `dp=8 tp=1 pp=1 ep={{[0-9]}} {{.*}}; it changes: ep 2 -> {{[48]}}

// The report shows each plan's ep and the step's all-to-all seconds.
// REPORT: ## Your plan
// REPORT: `dp=8 tp=1 pp=1 ep=2 zero=1 micro-batch-size=2 microbatches=16 precision=bf16`
// REPORT: Its expert-parallel all-to-alls take {{[0-9.]+}} s per step ({{[0-9.]+}}%) and send {{[0-9.]+}} GB per GPU.
// REPORT: | expert-parallel all-to-alls | {{[0-9.]+}} |
// REPORT: ## Top plans
// REPORT: | # | dp | tp | pp | ep | ZeRO |
// REPORT-NEXT: |---:|---:|---:|---:|---:|---:|---|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|{{$}}
// REPORT-NEXT: | 1 | 8 | 1 | 1 | {{[248]}} |
// JSON: "ep": {{[248]}}
// JSON: "ep_comm": {{[0-9.e-]+}}

// At ep = 1 the search's best splits the experts.
// EP1: remark: --dsc-estimate: `dp=8 tp=1 pp=1 zero=1 micro-batch-size=2 microbatches=16 precision=bf16`: {{.*}}; it changes: {{.*}}ep 1 -> {{[248]}}

// What does not divide, with the numbers.
// DP: error: --dsc-estimate: the plan `{{.*}}` does not fit the model: ep=3 does not divide dp=4 (expert parallelism splits the data-parallel group)
// EXPERTS: error: --dsc-estimate: the plan `{{.*}}` does not fit the model: 8 experts are not divisible by ep=3

// Pipelines with MoE layers (each stage seeds its own aux losses) are
// priced: 2 stages of 12 MoE layers, a bubble of 1/8.
// PP: remark: --dsc-estimate: `dp=4 tp=1 pp=2 ep=2 zero=1 micro-batch-size=2 microbatches=8 precision=bf16`: {{[0-9.]+}} s per step, {{[0-9]+}} TFLOP/s per GPU, MFU {{[0-9.]+}}%, pipeline bubble 12.5%
module attributes {dsc.model = {hidden_size = 2048 : i64, micro_batch_size = 8 : i64, moe_capacity = 2048 : i64, moe_expert_interval = 1 : i64, num_attention_heads = 16 : i64, num_experts = 8 : i64, num_layers = 24 : i64, parameters = 6954795008 : i64, seq_length = 2048 : i64, vocab_size = 51200 : i64}} {
}
