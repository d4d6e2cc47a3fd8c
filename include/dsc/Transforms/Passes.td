//===- Passes.td - dsc transformation and analysis passes --*- tablegen -*-===//
//
// The passes of dsc-opt. Flags are `--dsc-<verb>-<noun>`.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_TRANSFORMS_PASSES_TD
#define DSC_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def DscPrintModelStatsPass
    : Pass<"dsc-print-model-stats", "::mlir::ModuleOp"> {
  let summary = "Prints parameter counts and forward FLOPs of a model graph";
  let description = [{
    Sums the parameters declared with `dsc.parameter` and the cost of every op
    implementing `DscCostOpInterface`, per layer and in total, and prints them
    on stdout. Forward FLOPs are the dense (matmul-class) FLOPs of one
    micro-batch, Megatron-LM's model-FLOPs accounting: for a GPT they equal
    24·b·s·l·h²·(1 + s/(6h)) + 2·b·s·h·V. Elementwise work is reported
    separately as `forward_vector_flops`.

    Layers are found from the ops' name locations (`loc("h.3.mlp.fc")`) and
    the parameters' dotted names: everything under `h.<i>.` is layer `h.<i>`,
    anything else is grouped by its first name component (`wte`, `ln_f`).

    ```
    dsc-opt --dsc-print-model-stats="format=json" gpt.mlir
    ```
  }];
  let options = [
    Option<"format", "format", "std::string", /*default=*/"\"text\"",
           "Output format: 'text' (a table) or 'json' (one object)">,
  ];
}

def DscAutoParallelPass : Pass<"dsc-auto-parallel", "::mlir::ModuleOp"> {
  let summary = "Searches for the fastest 3D-parallel plan and records it";
  let description = [{
    Reads the model's shape from the module's `dsc.model` dictionary (written
    by `dsc-translate --import-neox`), a cluster description (JSON, see
    `examples/clusters/`), the GPU count and the global batch, and searches
    every dp x tp x pp split (tp within a node, Megatron rank order), ZeRO
    stage 0-3, micro-batch size, pipeline schedule (1F1B, GPipe), full
    recompute, sequence parallelism and optimizer offload. Plans that do not
    fit in GPU memory are pruned; the rest are ranked by the predicted step
    time (or by memory) of the analytical cost model described in
    `docs/cost-model.md`.

    The winner is recorded on the module as `dsc.plan` (dp, tp, pp, zero,
    micro_batch_size, microbatches, schedule, recompute, sequence_parallel,
    offload) for the parallelize passes, with its prediction and the reason
    it won in `dsc.plan_estimate`. With `report=PATH.md` it also writes a
    Markdown report of the top plans (and the same page as HTML), the data as
    JSON, and an SVG plot of predicted throughput against memory for every
    feasible plan.

    ```mlir
    // dsc-opt --dsc-auto-parallel="cluster=examples/clusters/dgx-a100-80gb.json gpus=1024 global-batch=1536 report=plan.md"
    module attributes {dsc.model = {num_layers = 96 : i64, hidden_size = 12288 : i64,
        num_attention_heads = 96 : i64, seq_length = 2048 : i64, vocab_size = 51200 : i64,
        micro_batch_size = 1 : i64, parameters = 174615822336 : i64}} {}
    // gets dsc.plan = {dp = 32 : i64, tp = 8 : i64, pp = 4 : i64, zero = 1 : i64, ...}
    ```
  }];
  let options = [
    Option<"cluster", "cluster", "std::string", /*default=*/"\"\"",
           "Cluster description JSON file (examples/clusters/*.json)">,
    Option<"gpus", "gpus", "int64_t", /*default=*/"0",
           "Number of GPUs to plan for">,
    Option<"globalBatch", "global-batch", "int64_t", /*default=*/"0",
           "Global batch size in sequences per optimizer step">,
    Option<"objective", "objective", "std::string", /*default=*/"\"time\"",
           "Rank plans by predicted step 'time' or by per-GPU 'memory'">,
    Option<"report", "report", "std::string", /*default=*/"\"\"",
           "Write a Markdown report here, plus .json, .svg and .html next "
           "to it">,
    Option<"top", "top", "unsigned", /*default=*/"10",
           "Number of ranked plans in the report">,
    Option<"microBatch", "micro-batch", "int64_t", /*default=*/"0",
           "Only consider this micro-batch size (0: search all divisors of "
           "the per-replica batch)">,
  ];
}

#endif // DSC_TRANSFORMS_PASSES_TD
