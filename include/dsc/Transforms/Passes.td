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
    separately as `forward_vector_flops`. With MoE layers, the parameters a
    token uses are reported too (`active_parameters`): of each expert
    weight read by the batched products of a layer's dispatched rows, the
    `top_k` of its `E` experts a token is routed to; the FLOPs are those of
    the capacity the experts compute.

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
    activation recompute and sequence parallelism: the knobs `--dsc-compile`
    builds, so the winner compiles (`--dsc-compile="plan=auto"`). With
    `knobs=all` it also prices optimizer offload, which the cost model
    knows and the compiler does not build yet. Plans that do not
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
    Option<"precision", "precision", "std::string", /*default=*/"\"bf16\"",
           "What the search prices and records for plan=auto to compile: "
           "'bf16' (16-bit compute, the papers' forms) or 'fp32' (as "
           "--dsc-compile builds by default)">,
    Option<"knobs", "knobs", "std::string", /*default=*/"\"buildable\"",
           "'buildable': only the knobs --dsc-compile builds (dp, tp, pp, "
           "ZeRO, micro-batches, schedule, full recompute, sequence "
           "parallelism), so the winner compiles; 'all': also price "
           "optimizer offload, which the compiler does not build yet">,
  ];
}


def DscApplyPlanPass : Pass<"dsc-apply-plan", "::mlir::ModuleOp"> {
  let summary = "Compiles the module with the plan its dsc.plan records";
  let description = [{
    `--dsc-compile="plan=auto ..."` runs this pass, which reads the
    module's `dsc.plan` (the winner `--dsc-auto-parallel` records: dp, tp,
    pp, zero, micro_batch_size, microbatches, schedule, recompute,
    sequence_parallel, offload) and runs the whole `--dsc-compile`
    pipeline with its dp, tp, pp, zero, microbatches and pipeline-schedule
    (the other compile options as given). So the search's answer
    compiles:

    ```
    dsc-opt model.mlir --dsc-auto-parallel="cluster=... gpus=8 global-batch=32"
      | dsc-opt --dsc-compile="plan=auto"
    ```

    Nothing in the plan is silently dropped. Errors name the cause: a
    module without `dsc.plan`; a plan asking for offload, which the
    compiler does not build yet (search with knobs=buildable, the default);
    a plan whose micro-batch size is
    not the graph's (the graph's token shape fixes it: search with
    micro-batch=B); a compile option (dp=, tp=, pp=, zero=,
    microbatches=, pipeline-schedule=, recompute=, sequence-parallel=) that
    disagrees with the plan (the plan's `recompute = true` is
    `recompute=full`).
    Run alone, `--dsc-apply-plan` compiles with the default options.
  }];
  let dependentDialects = ["::mlir::dsc::DscDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::arith::ArithDialect"];
}

def DscEstimateInferencePass : Pass<"dsc-estimate-inference",
                                     "::mlir::ModuleOp"> {
  let summary = "Prices an inference plan: per-token latency, the largest "
                "batch, and the tp that serves best";
  let description = [{
    Reads the model's shape from `dsc.model` and a cluster description, and
    prices serving it (docs/cost-model.md, "Inference"): the weights and KV
    cache bytes per GPU, a decode step's time at batch 1 and at `batch`
    (max of its memory time, every weight and each sequence's cache once,
    and its compute, plus two all-reduces per layer under tp), the floor
    (weight bytes / memory bandwidth plus the all-reduces), a prefill of
    `prompt` tokens, and the largest batch whose KV caches at `context`
    fit beside the weights. Then it searches tp (powers of two within a
    node that divide the heads) for `objective=latency` (the fastest decode
    step at batch 1) or `throughput` (the most tokens per second per GPU at
    the largest batch) and names the winner. The module is not changed.

    ```
    dsc-opt gpt.mlir --dsc-estimate-inference="cluster=examples/clusters/dgx-h100-80gb.json tp=2 context=2048"
    remark: --dsc-estimate-inference: tp=2 bf16 on H100: weights ... GB per GPU, ...
    ```
    Errors: a tp that does not divide the heads or kv heads or spans
    nodes, a missing cluster or `dsc.model`.
  }];
  let options = [
    Option<"clusterPath", "cluster", "std::string", /*default=*/"",
           "Cluster description (JSON, examples/clusters/)">,
    Option<"tp", "tp", "int64_t", /*default=*/"1", "Tensor-parallel ranks">,
    Option<"batch", "batch", "int64_t", /*default=*/"1",
           "Sequences per decode step">,
    Option<"context", "context", "int64_t", /*default=*/"2048",
           "Tokens per sequence (its KV cache)">,
    Option<"prompt", "prompt", "int64_t", /*default=*/"512",
           "A prompt's tokens (the prefill priced)">,
    Option<"precision", "precision", "std::string", /*default=*/"\"bf16\"",
           "bf16 (2 bytes) or fp32 (4) weights and KV cache">,
    Option<"objective", "objective", "std::string",
           /*default=*/"\"latency\"", "latency or throughput (the search)">,
  ];
}

def DscEstimatePass : Pass<"dsc-estimate", "::mlir::ModuleOp"> {
  let summary = "Prices one given parallel plan and says what the search "
                "would change";
  let description = [{
    The question a user with a running Megatron-LM or DeepSpeed job asks:
    what does my configuration cost, and what would you do instead? Reads
    the model's shape from `dsc.model` (as `--dsc-auto-parallel` does), a
    cluster description and a plan given knob by knob (dp, tp, pp, zero,
    micro-batch, microbatches, pipeline-schedule, virtual-stages, recompute,
    sequence-parallel, offload), prices it with the same cost model, then
    runs the search on the same GPUs (dp x tp x pp) and global batch
    (dp x micro-batch x microbatches) and emits a remark with the plan's
    step time, throughput, MFU, bubble and memory (or why it does not fit)
    and the search's winner with the knobs it changes. With
    `report=PATH.md` it writes the search's report with a "Your plan"
    section at the top. The module is not changed.

    ```
    dsc-opt gpt3.mlir --dsc-estimate="cluster=examples/clusters/dgx-a100-80gb.json \
        dp=8 tp=8 pp=16 micro-batch=1 microbatches=192 recompute=1"
    remark: --dsc-estimate: `dp=8 tp=8 pp=16 recompute=full precision=bf16 ...`:
      ... s per step ...; the search's best on 1024 GPUs ... changes: pp 16 -> 4, ...
    ```

    Every schedule (`interleaved-1f1b` with `virtual-stages=v`,
    Megatron-LM's `--num-layers-per-virtual-pipeline-stage`, and `zb-h1`
    too) is priced as the compiler's simulation runs it
    (include/dsc/Support/PipelineStep.h), so a user can price the
    Megatron-LM configuration they run; the comparison search chooses only
    what `--dsc-compile` builds. `precision=fp32` prices an fp32 plan as
    `--dsc-compile` builds it by default (fp32 AdamW states, the
    activations dsc's kernels keep; docs/cost-model.md) and adds its bytes
    per GPU, which equal the memory planner's arena within 2%
    (test/Integration/memory-model-vs-planner.test). `timeline=1` adds a remark
    with the plan's step per rank, simulated with the model's stage times
    (one row per rank, or per rank and chunk).

    A plan whose numbers do not divide the model (heads by tp, layers by
    pp x virtual-stages, micro-batches by pp when interleaved) or that puts
    tp across nodes is an error naming them.

    The plan's keys are the parallel plan's own (dsc/Support/ParallelPlan.def,
    read by its one parser, as `--dsc-compile` reads them): `micro-batch=`
    is `micro-batch-size=` (0: the model's), `offload=1` is
    `offload-optimizer=host`, `recompute=1` is `recompute=full`; the
    precision defaults to bf16 here (the papers' forms). The options below
    are the estimate's own.
  }];
  let options = [
    Option<"cluster", "cluster", "std::string", /*default=*/"\"\"",
           "Cluster description JSON file (examples/clusters/*.json)">,
    Option<"report", "report", "std::string", /*default=*/"\"\"",
           "Write the search's report with this plan at the top here (plus "
           ".json, .svg and .html)">,
    Option<"knobs", "knobs", "std::string", /*default=*/"\"buildable\"",
           "What the comparison search may choose: 'buildable' (what "
           "--dsc-compile builds) or 'all' (also recompute, sequence "
           "parallelism and offload)">,
    Option<"timeline", "timeline", "bool", /*default=*/"false",
           "Also print the plan's pipeline step per rank, simulated with "
           "the model's stage times">,
  ];
}

def DscAutodiffPass : Pass<"dsc-autodiff", "::mlir::ModuleOp"> {
  let summary = "Builds the backward pass of a loss function";
  let description = [{
    Differentiates the loss function `func` (default `@loss`, which must
    return the scalar result of a `dsc.cross_entropy`) in reverse mode, op by
    op through `DifferentiableOpInterface`, and emits
    `@forward_backward`: the forward ops, then their vector-Jacobian
    products, and for every parameter a `dsc.accumulate` of its gradient
    into a zero-initialized `dsc.state @grad.<name> ... gradient of @<name>`.
    The original function is kept as the evaluation (forward-only) program.

    Running `@forward_backward` once per micro-batch sums the gradients;
    the loss gradient's seed `1/microbatches` makes that sum an average
    (gradient accumulation). The pass records the count it seeded for as
    `dsc.microbatches` on the module, for the per-step totals and the
    lowering.

    The differentiated function is marked `dsc.program =
    #dsc.program_role<forward>` (the evaluation program) and
    `@forward_backward` `#dsc.program_role<forward_backward>`; a pipelined
    module's stages (forward programs with `dsc.stage`) each get a
    `@forward_backward.stage<k>`.

    Before:
    ```mlir
    func.func @loss(%ids, %t) -> tensor<f32> {
      %w = dsc.get_parameter @wte.weight : tensor<256x64xf32>
      ...
      %l = dsc.cross_entropy %logits, %t : ... -> tensor<f32>
      return %l : tensor<f32>
    }
    ```
    After (added):
    ```mlir
    dsc.state @grad.wte.weight : tensor<256x64xf32> gradient of @wte.weight
    func.func @forward_backward(%ids, %t) -> tensor<f32>
        attributes {dsc.program = #dsc.program_role<forward_backward>} {
      ... forward ...
      %seed = arith.constant dense<1.0> : tensor<f32>
      %dlogits = dsc.cross_entropy_grad %logits, %t, %seed : ...
      ... backward ...
      dsc.accumulate %dw into @grad.wte.weight : tensor<256x64xf32>
      return %l : tensor<f32>
    }
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
  let options = [
    Option<"funcName", "func", "std::string", /*default=*/"\"loss\"",
           "The loss function to differentiate">,
  ];
  let statistics = [
    Statistic<"numGradientOps", "gradient-ops", "Ops emitted by the backward pass">,
    Statistic<"numParameters", "parameters", "Parameters that receive a gradient">,
  ];
}

def DscOptimizerPass : Pass<"dsc-optimizer", "::mlir::ModuleOp"> {
  let summary = "Makes the optimizer step and its state explicit";
  let description = [{
    Emits `func.func @optimizer() -> (tensor<f32>, tensor<f32>)`, run once
    per step after the micro-batches' `@forward_backward`: the learning rate
    of the step (`dsc.learning_rate`), global gradient-norm clipping over all
    gradients (`dsc.clip_grad_norm`), one update per parameter (`dsc.adamw`
    with `dsc.state` moments `@adam.m.<name>`/`@adam.v.<name>`, or `dsc.sgd`
    with `@sgd.momentum.<name>`), and zeroing of the gradients. It returns the
    gradient norm and the learning rate for the step log. Weight decay is
    not applied to biases and normalization weights (rank-1 parameters).
    Requires `--dsc-autodiff` first.

    `optimizer=onebit_adam` is DeepSpeed's 1-bit Adam (docs/onebit.md), as
    two programs: `@optimizer`, its warm-up (`dsc.onebit_adam`: Adam
    without bias correction on the averaged gradient), and
    `@optimizer.compressed` (role `compressed_optimizer`, `dsc.from_step =
    freeze-step`), which runs in its place from that optimizer step on:
    `dsc.adam_momentum` from the rank's own gradient and `dsc.frozen_adam`
    with the second moment frozen; `--dsc-data-parallel` puts the moments'
    compressed all-reduce between them.

    `optimizer=onebit_lamb` is DeepSpeed's 1-bit LAMB, the same way:
    `@optimizer` with `dsc.onebit_lamb` (LAMB's clamped trust ratio,
    averaged into each tensor's frozen coefficient), and
    `@optimizer.compressed` with `dsc.lamb_freeze` (the scaling
    coefficients, once), `dsc.lamb_momentum` per tensor, and
    `dsc.frozen_lamb`; `--dsc-data-parallel` compresses all the momenta of
    a group as one fused buffer, as DeepSpeed does.

    `optimizer=zero_one_adam` is DeepSpeed's 0/1 Adam: which of four
    programs a step runs is a function of its number (var-freeze-step,
    var-update-scaler, local-step-scaler, local-step-clipper, carried as
    the module's `dsc.zero_one_adam` policy): `@optimizer`, a variance step
    (`dsc.onebit_adam` on the averaged gradient); `@optimizer.onebit`
    (role `onebit_step_optimizer`), `dsc.adam_momentum` from the
    gradients' compressed average and `dsc.frozen_adam`; after the
    variance freezes `@optimizer.local` (`local_step_optimizer`),
    `dsc.adam_momentum` from the rank's own gradient,
    `dsc.add_learning_rate` and `dsc.zero_one_adam_update`, and
    `@optimizer.sync` (`sync_step_optimizer`), the same followed by
    `dsc.zero_one_adam_rewind`, the accumulators' compressed average and
    `dsc.zero_one_adam_resync`. `--dsc-data-parallel` inserts the compressed
    averages; it needs dp >= 2, without ZeRO and pipelines.
  }];
  // The ops it creates: their dialects load even when the input has none.
  let dependentDialects = ["::mlir::dsc::DscDialect", "::mlir::func::FuncDialect",
                           "::mlir::arith::ArithDialect"];
  let options = [
    Option<"optimizer", "optimizer", "std::string", /*default=*/"\"adamw\"",
           "adamw, sgd, onebit_adam, onebit_lamb or zero_one_adam">,
    Option<"varFreezeStep", "var-freeze-step", "int64_t", /*default=*/"100000",
           "optimizer=zero_one_adam: the last step that may update the "
           "variance (DeepSpeed's var_freeze_step)">,
    Option<"varUpdateScaler", "var-update-scaler", "int64_t", /*default=*/"16",
           "optimizer=zero_one_adam: variance updates before their interval "
           "doubles">,
    Option<"localStepScaler", "local-step-scaler", "int64_t",
           /*default=*/"32678",
           "optimizer=zero_one_adam: local steps before the sync interval "
           "doubles">,
    Option<"localStepClipper", "local-step-clipper", "int64_t",
           /*default=*/"16",
           "optimizer=zero_one_adam: the longest sync interval">,
    Option<"freezeStep", "freeze-step", "int64_t", /*default=*/"100000",
           "optimizer=onebit_adam|onebit_lamb: the first optimizer step that "
           "compresses (DeepSpeed's freeze_step)">,
    Option<"maxCoeff", "max-coeff", "double", /*default=*/"10.0",
           "optimizer=onebit_lamb: the trust ratio's upper bound">,
    Option<"minCoeff", "min-coeff", "double", /*default=*/"0.01",
           "optimizer=onebit_lamb: the trust ratio's lower bound">,
    Option<"coeffBeta", "coeff-beta", "double", /*default=*/"0.9",
           "optimizer=onebit_lamb: the warm-up's moving average of the "
           "trust ratio">,
    Option<"factorMax", "factor-max", "double", /*default=*/"4.0",
           "optimizer=onebit_lamb: the largest factor of the frozen ratio">,
    Option<"factorMin", "factor-min", "double", /*default=*/"0.5",
           "optimizer=onebit_lamb: the smallest factor of the frozen ratio">,
    Option<"factorThreshold", "factor-threshold", "double", /*default=*/"0.1",
           "optimizer=onebit_lamb: the most the factor changes in a step, "
           "relative">,
    Option<"lr", "lr", "double", /*default=*/"6.0e-4", "Peak learning rate">,
    Option<"minLr", "min-lr", "double", /*default=*/"6.0e-5",
           "Learning rate at the end of a decaying schedule">,
    Option<"lrSchedule", "lr-schedule", "std::string",
           /*default=*/"\"warmup_cosine\"",
           "Learning-rate schedule: constant, warmup, warmup_linear or "
           "warmup_cosine (DeepSpeed's); annealing_constant, "
           "annealing_linear, annealing_cosine or annealing_exponential "
           "(GPT-NeoX's lr_decay_style); range_test or one_cycle "
           "(DeepSpeed's LRRangeTest and OneCycle: from min-lr, to lr, "
           "shaped by the cycle-* options)">,
    Option<"removedSchedule", "schedule", "std::string", /*default=*/"\"\"",
           "Removed: an error naming lr-schedule and pipeline-schedule">,
    Option<"warmup", "warmup", "int64_t", /*default=*/"10", "Warmup steps">,
    Option<"warmupStart", "warmup-start", "double", /*default=*/"0.0",
           "Learning rate at the warmup's start (DeepSpeed's "
           "warmup_min_lr)">,
    Option<"warmupType", "warmup-type", "std::string",
           /*default=*/"\"linear\"",
           "Warmup ramp: linear or log (DeepSpeed's warmup_type)">,
    Option<"totalSteps", "total-steps", "int64_t", /*default=*/"200",
           "Steps of the whole run (end of the decay)">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "AdamW beta1">,
    Option<"beta2", "beta2", "double", /*default=*/"0.95", "AdamW beta2">,
    Option<"eps", "eps", "double", /*default=*/"1.0e-8", "AdamW epsilon">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"0.1",
           "Decoupled weight decay of matrices">,
    Option<"momentum", "momentum", "double", /*default=*/"0.9", "SGD momentum">,
    Option<"nesterov", "nesterov", "bool", /*default=*/"false", "Nesterov SGD">,
    Option<"clipGradNorm", "clip-grad-norm", "double", /*default=*/"1.0",
           "Max global gradient norm (0 disables clipping)">,
    Option<"cycleFirstSize", "cycle-first-size", "double", /*default=*/"2000",
           "one_cycle: steps of the rise (cycle_first_step_size); "
           "range_test: steps per increase (lr_range_test_step_size)">,
    Option<"cycleSecondSize", "cycle-second-size", "double",
           /*default=*/"-1",
           "one_cycle: steps of the fall (-1: the rise's)">,
    Option<"cycleFirstStairs", "cycle-first-stairs", "int64_t",
           /*default=*/"0", "one_cycle: stairs of the rise (0: none)">,
    Option<"cycleSecondStairs", "cycle-second-stairs", "int64_t",
           /*default=*/"-1", "one_cycle: stairs of the fall (-1: the rise's)">,
    Option<"cycleDecaySize", "cycle-decay-size", "double", /*default=*/"0",
           "one_cycle: decay_step_size after the cycle (0: no decay)">,
    Option<"cycleRate", "cycle-rate", "double", /*default=*/"0",
           "one_cycle: decay_lr_rate; range_test: lr_range_test_step_rate">,
    Option<"cycleStaircase", "cycle-staircase", "bool", /*default=*/"false",
           "range_test: lr_range_test_staircase">,
    Option<"cycleMomentum", "cycle-momentum", "bool", /*default=*/"false",
           "one_cycle with adamw: cycle beta1 inversely to the learning rate "
           "(DeepSpeed's cycle_momentum; dsc.cyclic_momentum)">,
    Option<"cycleMinMom", "cycle-min-mom", "double", /*default=*/"0.8",
           "cycle-momentum: beta1 at the rate's peak (cycle_min_mom)">,
    Option<"cycleMaxMom", "cycle-max-mom", "double", /*default=*/"0.9",
           "cycle-momentum: beta1 at the cycle's ends (cycle_max_mom)">,
    Option<"decayMomRate", "decay-mom-rate", "double", /*default=*/"0",
           "cycle-momentum: beta1's growth after the cycle (decay_mom_rate)">,
  ];
}


def DscPlanMemoryPass : Pass<"dsc-plan-memory", "::mlir::ModuleOp"> {
  let summary = "Plans every buffer of the training programs statically";
  let description = [{
    Assigns each tensor a byte offset in the device arena. Persistent buffers
    (parameters, `dsc.state`, constants, program inputs and returned values)
    are laid out first, end to end; every other value of `@forward_backward`,
    `@optimizer` and the loss function is a temporary placed by a linear scan
    over its live range (definition to last use) with best-fit reuse of freed
    ranges. The programs never run at the same time, so their temporaries
    share one region after the persistent one. Offsets are 64-byte aligned.

    Annotations (the plan form, read by the lowering to the runtime plan):
    `dsc.offset` on declarations, `dsc.offsets` (one per result) on ops,
    `dsc.input_offsets` on functions, and on the module `dsc.memory =
    {persistent_bytes, temporary_bytes, arena_bytes}` plus per-program peaks
    in `dsc.program_peaks`.

    A pipelined module (`dsc.pipeline`; run after `--dsc-pipeline-schedule`)
    is planned per pipeline rank: each rank's arenas hold the declarations
    only its stages name (`dsc.pipeline_rank = r`; what every rank's
    stages name is shared, every rank's; what some ranks' stages name but
    not all, such as a tied embedding's parameter and Adam moments on the
    first and the last rank, is in an arena of that set of ranks,
    `dsc.pipeline_ranks = array<i64: ...>`, which the ranks between them do
    not allocate), its stages' program values and its temporaries, each
    from offset 0. What a micro-batch keeps from one
    part of its work to a later one lives in a stage's banks of slots, one
    slot per micro-batch the rank's step has in flight
    (`dsc.slot_banks = {activation, gradient, weight}` on the stage's
    forward, each `array<i64: offset, stride, slots>`): the forward's
    residuals are the backward's arguments, one buffer. `dsc.memory` adds
    `pipeline_ranks`, `shared` and, when there are sets, `shared_by_ranks`
    (each set's bytes and its `ranks`); its top-level figures are the
    largest rank's with the shared ones and its sets'.

    With `prefetch`, a gathered parameter's bytes are reserved from just
    after the previous `dsc.gather_parameter`, not from its own: no
    instruction in between reuses them, so the executor's communication
    lane (Executor::setOverlapCommunication) can gather the next parameter
    while the current one is in use, at the price of one more gathered
    parameter in the peak (DeepSpeed's stage-3 prefetch, one deep).
  }];
  let options = [
    Option<"alignment", "alignment", "int64_t", /*default=*/"64",
           "Byte alignment of every buffer">,
  ];
  let statistics = [
    Statistic<"numBuffers", "buffers", "Buffers planned">,
    Statistic<"reusedBytes", "reused-bytes", "Bytes saved by reusing freed ranges">,
  ];
}


def DscPlanSummaryPass : Pass<"dsc-plan-summary", "::mlir::ModuleOp"> {
  let summary = "Prints a compiled plan's summary as one JSON object";
  let description = [{
    For a module compiled by `--dsc-compile`, prints on stdout: planned bytes
    per tier (persistent, temporary, arena) and per program, the parameter
    count, model FLOPs of one micro-batch's forward and backward and of a
    step, and the bytes moved by collectives per step. The programs are
    found by their `dsc.program` role.
  }];
  let options = [
    Option<"microbatches", "microbatches", "int64_t", /*default=*/"1",
           "Micro-batches per step, for the per-step totals (the module's "
           "dsc.microbatches wins)">,
  ];
}


def DscDataParallelPass : Pass<"dsc-data-parallel", "::mlir::ModuleOp"> {
  let summary = "Replicates the training step over a data-parallel mesh axis";
  let description = [{
    Every rank of the `dp` axis runs the same programs on its own
    micro-batches; before the optimizer step, the accumulated gradients are
    averaged over `dp` with in-place all-reduces (`dsc.all_reduce_states`),
    so every rank applies the same update and the replicas stay identical.
    This is DeepSpeed's and PyTorch DDP's data parallelism at the
    gradient-accumulation boundary.

    With expert parallelism (`--dsc-declare-mesh` made dp the axes `edp`
    and `ep`), each parameter's group is the data-parallel axes that
    replicate it: `["edp"]` for an expert weight (split over `ep`),
    `["edp", "ep"]` for the rest; buckets, ZeRO shards and gathers are per
    group. An expert alone in its group (ep = dp) is neither averaged nor
    sharded.

    Gradients are grouped into buckets of at most `bucket-bytes` in
    declaration order (the order autodiff produces them, last layer first),
    as DDP's `bucket_cap_mb` and DeepSpeed's `reduce_bucket_size` do, so the
    runtime issues one collective per bucket over contiguous memory.

    Declares `dsc.mesh @mesh axes = ["dp"] shape = [dp]` unless the module
    has a mesh, which must then have a `dp` axis of that size. Requires
    `--dsc-optimizer` first. Per rank and step the all-reduces move
    2·(dp−1)/dp times the gradient bytes (ring algorithm).

    `zero=1` is ZeRO stage 1: the gradients of parameters dp divides are
    reduce-scattered (`dsc.reduce_scatter_states`) instead of all-reduced,
    each AdamW update becomes `sharded on @mesh axes = ["dp"]` with moments
    shrunk to rank-1 shards of numel/dp elements, the gradient norm sums
    each rank's valid chunks over dp, and `dsc.all_gather_states` makes the
    parameters whole again: 2·(dp−1)/dp of the parameter bytes per rank, as
    the ZeRO paper counts, with the optimizer state divided by dp. A
    parameter whose size dp does not divide stays replicated.

    `zero=2` also shards the gradients: their `dsc.state` becomes a rank-1
    shard and the backward of every micro-batch reduce-scatters each
    gradient into it (`dsc.reduce_scatter_accumulate`), as DeepSpeed's
    stage 2 does, so no rank keeps a whole accumulated gradient.

    `zero=3` also shards the parameters: each becomes a rank-1 chunk of
    numel/dp elements with a `layout` whose `chunk` is `["dp"]` (keeping a
    tensor-slicing layout's view and splits), every function reads it with
    `dsc.gather_parameter` right before its first use, and
    `@forward_backward` gathers it a second time before its first use in
    the backward, so each gathered copy is a temporary the memory planner
    frees after its last use. The AdamW update runs on the chunks in place
    and no all-gather follows it. Per rank and micro-batch: two all-gathers
    and one reduce-scatter, 3·(dp−1)/dp of the parameter bytes; model
    states 16·Ψ/dp bytes in fp32 with Adam.

    ```mlir
    func.func @optimizer() -> (tensor<f32>, tensor<f32>) {
      dsc.all_reduce_states [@grad.ln_f.bias, @grad.ln_f.weight, ...]
          on @mesh axes = ["dp"] reduction = avg
      %lr = dsc.learning_rate ...
    ```
  }];
  let statistics = [
    Statistic<"numBuckets", "buckets", "All-reduce buckets">,
    Statistic<"numShardedParams", "sharded-params",
               "Parameters whose optimizer states ZeRO-1 shards">,
    Statistic<"numChunkedParams", "chunked-params",
               "Parameters ZeRO-3 keeps as one chunk per rank">,
    Statistic<"numGathers", "parameter-gathers",
               "dsc.gather_parameter ops ZeRO-3 inserts">,
  ];
}

def DscOffloadPass : Pass<"dsc-offload", "::mlir::ModuleOp"> {
  let summary = "Moves the optimizer's states and update off the device "
                "(ZeRO-Offload, ZeRO-Infinity's NVMe tier)";
  let description = [{
    ZeRO-Offload: the O(parameters) work of a step, the gradient norm and
    the AdamW update, runs where the optimizer states live; the
    O(parameters × batch) forward and backward stay on the device. With
    `optimizer=host` every AdamW parameter gets, in the host tier, a master
    copy (`dsc.state @offload.master.<p> master of @p in host`), a gradient
    copy (`@offload.grad.<p>`, `gradient_copy`) and its moments; the
    optimizer program becomes, per parameter:

    ```mlir
    dsc.transfer @grad.p to @offload.grad.p          // device -> host
    ...                                              // norm over the copies
    dsc.adamw @offload.master.p grad = @offload.grad.p exp_avg = @adam.m.p ...
    dsc.transfer @offload.master.p to @p             // host -> device
    ```

    and a program with role `initialize` fills each master from its
    parameter (after initialization and after a checkpoint load: masters
    are not checkpointed, the parameter they equal is). Under ZeRO-1/2 the
    copies hold this rank's 1/dp chunk and each transfer moves only that
    chunk (`chunk on @mesh`): bandwidth-centric partitioning.

    `optimizer=nvme` (ZeRO-Infinity) keeps masters and moments `in nvme`
    instead; the update of parameter i is bracketed by `dsc.swap_in` and
    `dsc.swap_out` of its three states, and parameter i+1's swap-in is
    issued before parameter i's update (a prefetch: the memory planner
    keeps two parameters' staging live in the host arena, not all of
    them). Gradient copies stay in the host tier.

    `params=host|nvme` (ZeRO-Infinity's parameter offload, ZeRO-3 only,
    with `optimizer=host|nvme`) keeps every ZeRO-3 chunk
    (`dsc.parameter ... in host|nvme`) off the device: each
    `dsc.gather_parameter` gathers `from` a `dsc.fetch_parameter` copy made
    one gather ahead (the next layer's chunk is read while the current one
    is gathered and used), and the chunk is updated in place where it
    lives, with no master copy (it is fp32 already); an NVMe chunk is
    swapped in with its moments around its update. Parameters ZeRO-3
    keeps whole (below the persistence threshold) stay on the device with
    the optimizer's master copies.

    `device-memory=BYTES` sets a budget for the device arena: with
    `optimizer=none` the pass plans the module's memory without offload,
    with the optimizer in the host tier and (ZeRO-3) with the parameters
    there too (on a copy, with `--dsc-plan-memory`) and takes the first
    whose device peak fits; with a tier named it checks that one. When
    none fits, the error names the smallest device peak offload reaches
    and the peak without it.

    `dpu=1` (ZeRO-Offload's delayed parameter update, optimizer=host):
    each parameter receives its master before the master's update, and
    the updates move after a `dsc.overlap_next_step`, so they run beside
    the next step's forward and backward, which use parameters one step
    stale: the gradient of step i is taken at the parameters of step i-2
    and applied to the masters of step i-1.

    Requires AdamW (DeepSpeed's CPU Adam) and runs after `--dsc-optimizer`
    and `--dsc-data-parallel`, before `--dsc-plan-memory`. With pipeline
    stages each stage's optimizer program is offloaded (one `initialize`
    fills every stage's masters). Refused by name: SGD, `params=` without
    ZeRO-3 or without optimizer offload, `params=` and `dpu=1` with
    pipeline stages.
  }];
  let dependentDialects = ["::mlir::dsc::DscDialect", "::mlir::func::FuncDialect"];
  let statistics = [
    Statistic<"numOffloaded", "offloaded-params",
              "Parameters whose update runs off the device">,
    Statistic<"numTransfers", "transfers", "dsc.transfer ops inserted">,
    Statistic<"numFetches", "fetches",
              "dsc.fetch_parameter ops inserted (params=host|nvme)">,
  ];
}

def DscSetPlanPass : Pass<"dsc-set-plan", "::mlir::ModuleOp"> {
  let summary = "Records the parallel plan on the module (dsc.parallel_plan)";
  let description = [{
    The first pass of `--dsc-compile`: records the plan given (its option
    string is a plan in its textual form, read by the plan's one parser,
    dsc/Support/ParallelPlan.def) as the module's `dsc.parallel_plan`, over
    the plan the module already records. Every pass that builds a part of
    the plan (the mesh, tensor slicing, the pipeline cut, ZeRO, recompute,
    offload) reads its knobs from there, and a pass that decides one (the
    offload tier a `device-memory=` budget picks) records its choice, so
    the compiled module says which plan it is.

    ```
    dsc-opt model.mlir --dsc-set-plan="dp=2 zero=1"
    module attributes {dsc.parallel_plan = #dsc.parallel_plan<"dp=2 tp=1 pp=1 zero=1">} {...}
    ```
  }];
  let dependentDialects = ["::mlir::dsc::DscDialect"];
}

def DscDeclareMeshPass : Pass<"dsc-declare-mesh", "::mlir::ModuleOp"> {
  let summary = "Declares the device mesh of a parallel plan";
  let description = [{
    Adds `dsc.mesh @mesh` with the axes `dp`, `pp`, `tp` whose size is
    above 1, in Megatron-LM's order (tp innermost, so a tensor-parallel
    group is consecutive ranks, within a node). The sharding passes then
    find their axis on it. A module that has a mesh already must have
    exactly these axes and sizes.

    ```mlir
    dsc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
    ```
  }];
  // The ops it creates: their dialects load even when the input has none.
  let dependentDialects = ["::mlir::dsc::DscDialect"];
}

def DscInferenceProgramsPass : Pass<"dsc-inference-programs",
                                    "::mlir::ModuleOp"> {
  let summary = "An inference plan's prefill and decode programs";
  let description = [{
    Replaces the forward loss function (after `--dsc-tensor-parallel`, before
    memory planning) by two programs over flat token rows `[1, N, *]`:
    `@prefill` (N = `token-budget`: prompts' chunks) and `@decode` (N =
    `max-sequences`: one token of each running sequence). Each takes the
    rows' token ids, positions and sequences, the block table
    (`[max-sequences, ceil(max-context / block-size)]`), the rows to sample
    and their sampling settings and draws, and returns the sampled tokens.
    Every attention layer gets a `dsc.kv_cache` of `kv-blocks` blocks of
    `block-size` positions (default: max-sequences full contexts), which
    both programs write and read through `dsc.paged_attention`; rotary and
    learned position embeddings read the rows' positions; the output
    projection runs on `dsc.gather_rows` of the sampled rows; `dsc.sample`
    replaces the cross-entropy (after an all-gather of the vocabulary shards
    under tensor slicing). The module gets `dsc.inference` stating the
    block size, blocks, longest context, sequences and token budget.

    ```mlir
    dsc.kv_cache @kv.0 : tensor<64x2x16x2x8xf32>
    func.func @decode(%tokens: tensor<1x8xi32>, %pos: tensor<8xi32>, ...)
        -> tensor<8xi32> attributes {dsc.program = #dsc.program_role<decode>}
    ```
    Errors: a max-context past a learned position table, too few blocks for
    one sequence, MoE layers (not compiled for inference yet), non-causal
    attention.
  }];
  let options = [
    Option<"funcName", "func", "std::string", /*default=*/"\"loss\"",
           "The forward function computing the loss">,
    Option<"tokenBudget", "token-budget", "int64_t", /*default=*/"256",
           "Token rows of one prefill forward">,
    Option<"maxSequences", "max-sequences", "int64_t", /*default=*/"8",
           "Sequences running at once (decode's rows, the block table's)">,
    Option<"blockSize", "block-size", "int64_t", /*default=*/"16",
           "Positions per KV-cache block">,
    Option<"maxContext", "max-context", "int64_t", /*default=*/"0",
           "Longest context, prompt and generated tokens (0: the model's "
           "max_position_embeddings)">,
    Option<"kvBlocks", "kv-blocks", "int64_t", /*default=*/"0",
           "KV-cache blocks per layer (0: max-sequences full contexts)">,
  ];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

def DscExpertParallelPass : Pass<"dsc-expert-parallel", "::mlir::ModuleOp"> {
  let summary = "Expert parallelism: MoE experts split over the mesh axis ep";
  let description = [{
    Rewrites the forward graph (before `--dsc-autodiff`) so that each rank
    of an `ep` group (DeepSpeed's E+D grouping: ep consecutive ranks of the
    data-parallel group; `--dsc-declare-mesh` splits dp into the axes `edp`
    and `ep`) holds `E/ep` experts of every MoE layer. The dispatched slots
    `[E, C, h]` go to the ranks holding their experts (`dsc.all_to_all`
    split 0, concat 1: `[E/ep, ep·C, h]`), the experts run on them, and the
    results come back (split 1, concat 0) before `dsc.moe_combine`. Expert
    weights (`[E, in, out]`, read by the region's products) keep their names
    and get `#dsc.layout<split = [["ep"], [], []]>`. The combine's exchange
    carries `grad_scale = 1/ep` and the dispatch's `ep`, so an expert's
    weight gradient, which sums the ep ranks' contributions, averaged over
    `edp` is the mean over dp.

    ```mlir
    %xe = dsc.moe_dispatch %x, %slots : ... -> tensor<4x8x16xf32>
    %r = dsc.all_to_all %xe on @mesh axes = ["ep"] split_dim = 0
        concat_dim = 1 grad_scale = 2.0 : tensor<4x8x16xf32> -> tensor<2x16x16xf32>
    %h = dsc.matmul %r, %w : tensor<2x16x16xf32>, tensor<2x16x32xf32> -> tensor<2x16x32xf32>
    ```
    Errors: experts not divisible by ep, a model without MoE layers, an op
    in the expert region other than batched products, GELU and SwiGLU.
  }];
  let options = [
    Option<"funcName", "func", "std::string", /*default=*/"\"loss\"",
           "The forward function computing the loss">,
  ];
  let statistics = [
    Statistic<"numSplitExperts", "split-experts",
              "Expert weights split over ep">,
  ];
}

def DscTensorParallelPass : Pass<"dsc-tensor-parallel", "::mlir::ModuleOp"> {
  let summary = "Megatron-LM tensor slicing of a GPT forward graph over tp";
  let description = [{
    Rewrites the forward graph (before `--dsc-autodiff`) into one rank's
    program of Megatron-LM's tensor slicing over the mesh axis `tp`:

    - the fused QKV projection and the MLP's first product are
      column-parallel: the rank keeps its output columns (for QKV, its
      heads' q, k and v columns, the view `[h, 3, h]` split on the last
      dim) and the attention runs on its `heads / tp` heads;
    - the attention's output projection and the MLP's second product are
      row-parallel: the rank keeps its input rows and the partial sums are
      all-reduced (`dsc.all_reduce`, Megatron's `g`) before the replicated
      bias;
    - the input of every column-parallel product passes through
      `dsc.copy_to_parallel` (Megatron's `f`: identity, gradient
      all-reduced);
    - the token embedding and the LM head are vocabulary-parallel: each
      rank keeps `vocab / tp` rows of the table, looks up its tokens
      (`dsc.vocab_parallel_embedding`, then an all-reduce) and computes its
      columns of the logits; `dsc.vocab_parallel_cross_entropy` computes the
      loss with all-reduces of per-token values, so no rank holds the whole
      logits.

    Split parameters keep their names and get a `#dsc.layout` with the
    whole parameter's view, so every rank starts from the one-rank run's
    values. Per layer and micro-batch the forward all-reduces two `[b, s,
    h]` activations and the backward two more (the `f`s' gradients): the
    four all-reduces of Megatron-LM. Heads, the MLP width or the vocabulary
    not divisible by `tp` are errors naming the numbers. Each attention
    gets `head_axes = ["tp"]`, so its dropout draws, for the rank's heads,
    the masks one rank draws.

    Declares `dsc.mesh @mesh axes = ["tp"] shape = [tp]` unless the module
    has a mesh, which must then have a `tp` axis of that size.

    With `sequence-parallel=1` (Korthikanti et al. 2022, Megatron-LM's
    `--sequence-parallel`), the ops between the tensor-parallel regions
    (layer norms, residual adds, biases, dropouts) work on the rank's
    `1/tp` of the tokens: each `g` all-reduce becomes a `dsc.reshape` to
    `[b*s, h]` and a `dsc.reduce_scatter` of the token rows, each `f`
    becomes a `dsc.all_gather` of them (and a reshape back); the bytes on
    the wire are the same, the activations between the regions are `1/tp`
    per rank. A replicated operand that enters the region (the position
    embedding) is chunked with `dsc.scatter_to_parallel`; the region's
    parameters (the norms' weights, the row-parallel biases) are read
    through `dsc.copy_to_parallel`, so their gradients, partial over the
    rank's tokens, are summed over tp; a dropout between the regions gets
    `shard_axes = ["tp"]`, so it draws, on the rank's rows, the mask of the
    whole. Before (one layer's attention exit):
    ```mlir
    %p = dsc.matmul %a, %w : tensor<2x8x16xf32>, tensor<16x32xf32> -> tensor<2x8x32xf32>
    %g = dsc.all_reduce %p on @mesh axes = ["tp"] : tensor<2x8x32xf32>
    %y = dsc.add %x, %g : tensor<2x8x32xf32>
    ```
    After (tp = 2):
    ```mlir
    %r = dsc.reshape %p : tensor<2x8x32xf32> -> tensor<16x32xf32>
    %g = dsc.reduce_scatter %r on @mesh axes = ["tp"] scatter_dim = 0
        : tensor<16x32xf32> -> tensor<8x32xf32>
    %y = dsc.add %x, %g : tensor<8x32xf32>
    ```
    Errors: tokens per micro-batch not divisible by `tp`; an op reading a
    sequence-parallel value that works across tokens (anything but the
    ones above).
  }];
  let options = [
    Option<"funcName", "func", "std::string", /*default=*/"\"loss\"",
           "The forward function computing the loss">,
  ];
  let statistics = [
    Statistic<"numSplitParameters", "split-parameters",
              "Parameters split over tp">,
  ];
}

def DscVerifyCollectivesPass
    : Pass<"dsc-verify-collectives", "::mlir::ModuleOp"> {
  let summary = "Proves every rank's collectives and transfers match";
  let description = [{
    Checks a plan statically, before any rank runs it, for the errors that
    otherwise hang or corrupt a job: a collective some ranks of a group skip
    or issue in another order, with another shape, element type, reduction
    or parameter; a send whose recv is missing, out of order, or receives
    another type. The pass changes nothing; it fails with an error that
    names the first two ranks that disagree (world rank and mesh
    coordinates) and, at each one's op, what that rank issues.

    Model of execution. The world is the ranks of the plan's mesh (one mesh;
    row-major ranks, last axis innermost). One training step of a rank runs,
    in order:

    1. the `forward_backward` program (`dsc.program`) once per micro-batch
       (the module's `dsc.microbatches`, default 1);
    2. every function carrying `dsc.stage`, once, in module order (a
       pipeline stage's program, whose schedule covers all micro-batches);
       when the stages have `pipeline_step` programs
       (`--dsc-pipeline-schedule`), a stage runs its step program, whose
       `dsc.pipeline_forward` and `dsc.pipeline_backward` run the stage's
       forward and forward_backward (the last stage's forward runs inside
       its backward), then its optimizer;
    3. the `optimizer` program once.

    A `func.func` with an integer attribute `dsc.stage = k` runs only on
    ranks whose coordinate on mesh axis `pp` is `k`; everything else runs
    on every rank. The evaluation function (the `dsc.program =
    #dsc.program_role<forward>` without a stage) runs alone and is checked
    as a schedule of its own. Calls are followed.

    Ops describe their communication through `CommunicationOpInterface`. A
    collective completes when every rank of its group (the ranks that differ
    only on its axes) has it next; ranks with the same collective next on
    one group must agree on kind, payload types, reduction and parameters.
    Send and recv are rendezvous: a send completes when its peer's next
    event is the recv from it with the same tag, and the two must carry the
    same type. The pass runs all ranks' sequences to the end; if no rank can
    move it reports a deadlock: two ranks waiting on each other (or on a
    rank that has finished its step) and their ops.

    Limits: programs are straight-line (communication inside loops or
    conditionals is rejected), collective bodies are not checked for
    numerical agreement, and buffered (eager) sends that a runtime might
    complete without a waiting recv are treated as rendezvous, so a plan
    that only works because of buffering is rejected.

    ```
    dsc-opt --dsc-verify-collectives=report plan.mlir
    ```
  }];
  let options = [
    Option<"report", "report", "bool", /*default=*/"false",
           "Emit a remark per verified schedule with per-group event counts">,
  ];
  let statistics = [
    Statistic<"numEvents", "events",
              "Communication events issued over all ranks">,
  ];
}

def DscPipelinePass : Pass<"dsc-pipeline", "::mlir::ModuleOp"> {
  let summary = "Cuts a forward graph into pipeline stages over pp";
  let description = [{
    Splits the loss function (before `--dsc-autodiff`, after tensor
    slicing) into `pp` stage functions `@<func>.stage<k>`, each with the
    integer attribute `dsc.stage = k` (it runs on the ranks whose
    coordinate on the mesh axis `pp` is k). Cuts fall on transformer-layer
    boundaries only, where the residual stream between two blocks is the
    one value that crosses: layers are told by the ops' name locations
    (`loc("h.3.mlp.fc")`); the embedding belongs to the first layer's
    stage and the final norm, LM head and loss to the last layer's.

    The cut balances cost, not layer counts: each op weighs its
    `CostOpInterface` matmul FLOPs plus `vector-weight` times its vector
    FLOPs (elementwise work runs at a fraction of the matrix units' rate),
    and the contiguous split that minimizes the heaviest stage is chosen
    (ties: the earliest cuts). The embedding and the LM head with its
    vocabulary-wide cross-entropy make the first and the last stage
    heavier than a layer, so they get fewer layers.

    The plan's `stage-layers=n0,n1,...` gives the cut instead: stage k
    holds the next nk layers (one count per stage, each at least 1, adding
    up to the model's layers; the error names the numbers). Memory is why:
    1F1B's stage k keeps pp-k micro-batches in flight, so a cut that gives
    the first stages fewer layers and the later ones more evens the ranks'
    peaks (`--dsc-plan-summary`'s `bytes_per_pipeline_rank`) at the price
    of the stages' balance.

    Stage k < pp-1 takes the previous stage's activation (stage 0: the
    tokens) and returns its output activation; the last takes the
    activation and the targets and returns the loss. Parameter reads and
    constants are cloned into every stage that uses them (a tied
    embedding is read by the first and the last stage). The original
    function is erased.

    MoE layers: the loss's `dsc.auxiliary_loss` goes, and every stage with
    MoE layers ends with a `dsc.stage_auxiliary_loss` of its routers'
    losses, which `--dsc-autodiff` seeds in that stage with 1/m (the one
    message between stages is the residual stream). Under fp16 (dynamic
    loss scaling, whose seed is written at run time) this is refused.

    Before:
    ```mlir
    func.func @loss(%tokens: tensor<8x64xi32>, %targets: tensor<8x64xi32>) -> tensor<f32> {
      ... wte, wpe, h.0 ... h.3, ln_f, lm_head ...
      return %l : tensor<f32>
    }
    ```
    After (pp=2):
    ```mlir
    func.func @loss.stage0(%tokens: tensor<8x64xi32>) -> tensor<8x64x128xf32>
        attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 0 : i64}
        { ... wte, wpe, h.0, h.1 ... }
    func.func @loss.stage1(%x: tensor<8x64x128xf32>, %targets: tensor<8x64xi32>)
        -> tensor<f32> attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 1 : i64}
        { ... h.2, h.3, ln_f, lm_head ... }
    ```

    Each stage function is a forward program of its stage (`dsc.program =
    #dsc.program_role<forward>`, `dsc.stage = k`). The pipeline schedule
    (`pipeline-schedule`) is recorded on the module as `dsc.pipeline =
    #dsc.pipeline<stages = P, schedule = "1f1b">`, from which
    `--dsc-pipeline-schedule` writes each stage's step.

    With `pipeline-schedule=interleaved-1f1b virtual-stages=v`
    (Megatron-LM's virtual pipeline) the model is cut into pp x v stages
    the same way, and rank r of the mesh's `pp` axis holds stages r, r+pp,
    r+2pp, ...: `dsc.pipeline = #dsc.pipeline<stages = pp*v, schedule =
    "interleaved-1f1b", virtual_stages = v>`.

    Errors name the numbers: fewer layers than stages, a mesh whose `pp`
    axis has another size, a cut crossed by more than one activation,
    virtual stages without the interleaved schedule (or fewer than 2).
    Declares `dsc.mesh @mesh axes = ["pp"] shape = [pp]` unless the module
    has a mesh, which must then have a `pp` axis of that size.
  }];
  let options = [
    Option<"funcName", "func", "std::string", /*default=*/"\"loss\"",
           "The forward function computing the loss">,
    Option<"vectorWeight", "vector-weight", "double", /*default=*/"8.0",
           "Cost of one vector FLOP in matmul FLOPs, for balancing">,
    Option<"removedSchedule", "schedule", "std::string", /*default=*/"\"\"",
           "Removed: an error naming pipeline-schedule and lr-schedule">,
  ];
  let statistics = [
    Statistic<"numStages", "stages", "Pipeline stages created">,
  ];
}

def DscStageBackwardPass : Pass<"dsc-stage-backward", "::mlir::ModuleOp"> {
  let summary = "A pipeline stage keeps what its backward reads instead of "
                "computing its forward again";
  let description = [{
    Runs after `--dsc-autodiff` and `--dsc-recompute` on a pipelined module
    (`dsc.pipeline`). --dsc-autodiff writes each stage's backward as
    `forward_backward`, a clone of the stage's forward followed by the
    backward ops; a stage's forward also runs on its own (its output goes
    to the next stage), so the forward would run twice per micro-batch.
    For every stage but the last (which runs its forward and backward
    together), this pass makes the forward program return, after its
    output, the forward values the backward reads (the residuals, in
    program order: activations as `--dsc-recompute` left them; parameter
    reads, constants and copies of parameters are read again instead), and
    rewrites `forward_backward` into `backward.stage<k>`, which takes them
    after the output's gradient and has no forward ops. The runtime keeps
    a micro-batch's residuals from its forward to its backward (Megatron-LM
    keeps the stage's activations the same way unless it recomputes).

    Before (stage 0 of two):
    ```mlir
    func.func @loss.stage0(%t: tensor<2x4xi32>) -> tensor<2x4x8xf32> {
      %w = dsc.get_parameter @h.0.w : tensor<8x8xf32>
      %x = ... %t ...
      %h = dsc.matmul %x, %w : ...
      %y = dsc.gelu %h : tensor<2x4x8xf32>
      return %y : tensor<2x4x8xf32>
    }
    func.func @forward_backward.stage0(%t: tensor<2x4xi32>, %dy: tensor<2x4x8xf32>) {
      %w = dsc.get_parameter @h.0.w ...
      %x = ... %h = dsc.matmul %x, %w ... %y = dsc.gelu %h ...
      %dh = dsc.gelu_grad %h, %dy : ...
      ... %x, %w ...
    }
    ```
    After:
    ```mlir
    func.func @loss.stage0(%t: tensor<2x4xi32>)
        -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
      ...
      return %y, %x, %h : ...
    }
    func.func @backward.stage0(%t: tensor<2x4xi32>, %dy: tensor<2x4x8xf32>,
                               %x: tensor<2x4x8xf32>, %h: tensor<2x4x8xf32>) {
      %w = dsc.get_parameter @h.0.w ...
      %dh = dsc.gelu_grad %h, %dy : ...
      ...
    }
    ```
    A module without `dsc.pipeline` is left as it is. Errors: a stage
    without its programs, programs already split, or a `forward_backward`
    whose first ops are not its forward's (a pass rewrote them in between).
  }];
  let statistics = [
    Statistic<"numSplit", "stages", "Stage backwards split from their "
                                    "forwards">,
  ];
}

def DscFusePass : Pass<"dsc-fuse", "::mlir::ModuleOp"> {
  let summary = "Fuses chains of ops into instructions that make one pass "
                "over memory";
  let description = [{
    Rewrites the training programs' chains the runtime runs faster as one
    instruction, after `--dsc-autodiff` (which differentiates the unfused
    ops) and every pass that places collectives or splits programs, before
    `--dsc-plan-memory`. `--dsc-compile` runs it unless the plan says
    `fuse=0` (`fuse=0` compiles what the ops compile to alone, bit for
    bit).

    Rules:

    - A gradient written in place: a `dsc.matmul` whose only use is a
      `dsc.accumulate` into a state (a weight's gradient, summed over the
      micro-batches) becomes `dsc.matmul_accumulate`, which adds the product
      into the state as the GEMM computes it (the GEMM's C += A B): no
      temporary for the product, no second pass over it. Not fused: a
      product read by anything else (it must exist), one whose element type
      is not the state's (bf16 products into f32 gradients: the accumulate
      casts), and a state outside the device tier (--dsc-offload's host or
      NVMe gradients: the GEMM writes device memory only). The product is
      the same; the sum is rounded once instead of twice, so results agree
      with the unfused program to float rounding, not bit for bit.

    ```mlir
    // Before:
    %gw = dsc.matmul %x, %dy {transpose_lhs}
        : tensor<8x4xf32>, tensor<8x4xf32> -> tensor<4x4xf32>
    dsc.accumulate %gw into @grad.w : tensor<4x4xf32>
    // After:
    dsc.matmul_accumulate %x, %dy {transpose_lhs} into @grad.w
        : tensor<8x4xf32>, tensor<8x4xf32>
    ```

    - Megatron-LM's bias_gelu: a `dsc.bias_add` whose users are exactly one
      `dsc.gelu` and that GELU's `dsc.gelu_grad` (the sum as its input), in
      the bias add's block, both `exact` or both not, becomes
      `dsc.bias_gelu` at the GELU's place and `dsc.bias_gelu_grad` at the
      gradient's, which recomputes the sum from the product and the bias
      (`bias_gelu_back`): the sum is neither written nor kept from the
      forward to the backward (the product is kept instead). A bias add
      read by the GELU alone (a forward program's; a training program's
      whose backward reads a `--dsc-recompute` clone) becomes
      `dsc.bias_gelu`, so that a training program still begins with its
      forward program's ops. The bias's gradient stays `dsc.bias_grad` of
      the fused gradient. Not fused: a sum with any other user (a pipeline
      stage's forward returning it to its backward program after
      `--dsc-stage-backward`, a second GELU), users in another block, a
      gradient without its GELU, and GELUs of different forms. Both kernels
      round the sum to the element type as `dsc.bias_add` does: on the CPU
      the results are the unfused ops' bit for bit.

    ```mlir
    // Before:
    %ba = dsc.bias_add %mm, %b : tensor<8x16xf32>, tensor<16xf32>
    %g = dsc.gelu %ba : tensor<8x16xf32>
    ...
    %dx = dsc.gelu_grad %ba, %dy : tensor<8x16xf32>
    // After:
    %g = dsc.bias_gelu %mm, %b : tensor<8x16xf32>, tensor<16xf32>
    ...
    %dx = dsc.bias_gelu_grad %mm, %b, %dy : tensor<8x16xf32>, tensor<16xf32>
    ```

    - Attention's saved statistics (FlashAttention-2's): a
      `dsc.attention_grad` whose forward, a `dsc.attention` of the same q,
      k, v and attributes, comes before it in its block (the latest one:
      under recompute the backward's clone) becomes
      `dsc.attention_grad_lse`, reading the forward's output and its rows'
      logsumexp `[batch, heads, seq]` (f32; f64 for f64 operands), which
      the forward, now `dsc.attention_lse`, writes as it computes them. The
      backward no longer computes them again (on CUDA it ran the whole
      forward for them). Not fused: a forward in another block (a
      `--dsc-stage-backward` stage's forward program), a gradient without
      its forward. The CPU kernels keep normalizing each row of the
      backward's scores themselves (their row term is `rowsum(P ∘ dP)`, which
      needs no output), so on the CPU the fused plan trains as the unfused
      one bit for bit.

    ```mlir
    // Before:
    %o = dsc.attention %q, %k, %v {num_heads = 2 : i64, causal}
        : tensor<2x8x16xf32>
    ...
    %dq, %dk, %dv = dsc.attention_grad %q, %k, %v, %do
        {num_heads = 2 : i64, causal} : tensor<2x8x16xf32>
    // After:
    %o, %lse = dsc.attention_lse %q, %k, %v {num_heads = 2 : i64, causal}
        : tensor<2x8x16xf32>, tensor<2x2x8xf32>
    ...
    %dq, %dk, %dv = dsc.attention_grad_lse %q, %k, %v, %do, %o, %lse
        {num_heads = 2 : i64, causal} : tensor<2x8x16xf32>, tensor<2x2x8xf32>
    ```
  }];
  let statistics = [
    Statistic<"numFused", "fused", "Chains fused into one instruction">,
  ];
}

def DscSplitWeightGradientPass
    : Pass<"dsc-split-weight-gradient", "::mlir::ModuleOp"> {
  let summary = "Splits each pipeline stage's backward into its activation- "
                "and weight-gradient parts (zero-bubble schedules)";
  let description = [{
    For the zero-bubble schedule `zb-h1` (Qi et al. 2024): each pipeline
    stage's backward (its `forward_backward` program, after
    `--dsc-stage-backward`) becomes two programs. The activation-gradient
    part B keeps the program and its results (the stage input's gradient,
    which the previous stage waits for; the last stage's loss): it is every
    op those results depend on. The weight-gradient part W, a new
    `backward_weight.stage<k>` program (`#dsc.program_role<backward_weight>`),
    is every other op: the weight gradients' matmuls and their
    accumulation. B returns, after its results, the values W reads from it
    (`dsc.weight_stash = N` counts them), W takes them as its arguments;
    parameter reads and constants W reads again. The schedule runs W later
    (`dsc.pipeline_backward_weight`), in the bubble, and the runtime keeps
    each micro-batch's values from its B to its W.

    Runs after `--dsc-data-parallel` (which turns the backward's
    gradient accumulation into ZeRO's reduce-scatters: they move to W with
    it) and before `--dsc-plan-memory`; `--dsc-compile` runs it when
    `pipeline-schedule=zb-h1`.

    Before (the last stage, abridged):
    ```mlir
    func.func @forward_backward.stage1(%x: tensor<2x4x8xf32>, %t: tensor<2x4xi32>)
        -> (tensor<f32>, tensor<2x4x8xf32>) {
      %w = dsc.get_parameter @h.1.w ...
      %h = dsc.matmul %x, %w ...
      ... %dh ...
      %dw = dsc.matmul %x2, %dh2 {transpose_lhs} ...
      dsc.accumulate %dw into @grad.h.1.w ...
      %dx = dsc.matmul %dh, %w {transpose_rhs} ...
      return %loss, %dx ...
    }
    ```
    After:
    ```mlir
    func.func @forward_backward.stage1(%x: ..., %t: ...)
        -> (tensor<f32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>)
        attributes {dsc.weight_stash = 2 : i64, ...} {
      ...
      %c = dsc.reshape %x ...
      return %loss, %dx, %c, %dh ...
    }
    func.func @backward_weight.stage1(%x: tensor<2x4x8xf32>, %dh: tensor<2x4x8xf32>)
        attributes {dsc.program = #dsc.program_role<backward_weight>, dsc.stage = 1 : i64} {
      %dw = dsc.matmul ... {transpose_lhs} ...
      dsc.accumulate %dw into @grad.h.1.w ...
      return
    }
    ```
    Errors: a module without `dsc.pipeline`, a stage without its
    `forward_backward`, a stage split already.
  }];
  let statistics = [
    Statistic<"numSplit", "stages", "Stage backwards split into B and W">,
  ];
}

def DscRecomputePass : Pass<"dsc-recompute", "::mlir::ModuleOp"> {
  let summary = "Activation recompute: the backward recomputes forward values "
                "instead of keeping them";
  let description = [{
    Runs directly after `--dsc-autodiff`, on every forward_backward program
    (a pipeline stage's too). Its forward part is the program's first ops
    (a clone of the forward program); every forward value a backward op
    reads is kept from the forward to the backward of the micro-batch, the
    activation memory Korthikanti et al. 2022 ("Reducing Activation
    Recomputation in Large Transformer Models") count. With `recompute=`:

    - `none`: the backward reads the forward's values;
    - `selective`: the attention core, the values of shape `b x a x s x s`
      (scores, probabilities, their dropout), is recomputed in the backward
      from the kept queries and keys. dsc's fused `dsc.attention` never
      keeps these (its backward recomputes them, as FlashAttention does), so
      on the importers' graphs `selective` plans what `none` plans;
    - `full`: each transformer layer (`h.<i>.*`) keeps only its input; the
      backward recomputes the layer's values from it when it first needs
      one, just before that layer's backward (Megatron-LM's
      `--recompute-granularity full`). `recompute-layers=N` recomputes only
      the first N layers of each program (`--recompute-method block
      --recompute-num-layers N`).

    A recomputed value is a clone of its op (dropout masks are a pure
    function of the seed, step and micro-batch, so the clone draws the same
    mask). A value some op outside its layer reads in the forward (the
    layer's output, the next layer's input) is always kept. In every mode a
    sequence-parallel `dsc.all_gather` (and the reshapes of what it
    gathered) is done again in the backward rather than kept whole, as
    Megatron-LM does, so all a layer keeps is split over tp. Each program
    gets `dsc.saved_activation_bytes`: the bytes of the forward values its
    backward reads (parameters, constants and their copies are not
    activations).

    Before (one layer; the backward reads the layer's inner values):
    ```mlir
    func.func @forward_backward(%x: tensor<2x4xf32>) -> tensor<f32> {
      %w = dsc.get_parameter @h.0.fc.weight : tensor<4x4xf32>
      %h = dsc.matmul %x, %w : ... loc("h.0.fc")
      %g = dsc.gelu %h : tensor<2x4xf32> loc("h.0.act")
      ... loss ...
      %dh = dsc.gelu_grad %h, %dg : tensor<2x4xf32>
    }
    ```
    After `recompute=full`:
    ```mlir
      %h.1 = dsc.matmul %x, %w : ... loc("h.0.fc")
      %dh = dsc.gelu_grad %h.1, %dg : tensor<2x4xf32>
    ```
    and `dsc.saved_activation_bytes` counts `%x` instead of `%h` and `%g`.

    Errors: an unknown mode, `recompute-layers` without `full` or below 1, a
    forward_backward program without its forward program or whose ops do
    not begin with it (the pass runs before any other pass changes them).
  }];
  let statistics = [
    Statistic<"numRecomputed", "recomputed-ops",
              "Forward ops cloned into backwards">,
  ];
}

def DscPipelineSchedulePass
    : Pass<"dsc-pipeline-schedule", "::mlir::ModuleOp"> {
  let summary = "Writes each pipeline stage's step as an explicit program";
  let description = [{
    After `--dsc-pipeline` (and autodiff), each stage k has a forward and a
    forward_backward program; the order in which a step runs them over the
    micro-batches, and the messages between stages, is the schedule. This
    pass writes it into the IR, one `pipeline_step` program per stage,
    `@step.stage<k>`, from the module's `dsc.pipeline = #dsc.pipeline<stages
    = P, schedule = ...>` and `dsc.microbatches = M`:

    - `gpipe`: every forward, then every backward (in forward order);
    - `1f1b` (PipeDream-flush, Megatron-LM's default): stage k runs
      min(P-k-1, M) warm-up forwards, then alternates one forward and one
      backward, then drains the remaining backwards, so at most P-k
      micro-batches are in flight;
    - `interleaved-1f1b` (`virtual_stages = v` in `dsc.pipeline`: P = the
      pp ranks, each holding stages r, r+P, ...): Megatron-LM's
      interleaved order, one step per rank over its v stages, each message
      naming the chunk (`of chunk c`) whose boundary moves. M must be a
      multiple of P.

    A combined exchange with one neighbour (Megatron-LM's
    send_forward_recv_backward and send_backward_recv_forward) is written
    as a blocking send and a receive in an order that cannot deadlock: the
    even stage of the pair sends first, the odd one receives first.
    Interleaved, the messages are placed from one run of the step on a
    clock (a send after the compute that produced it, a receive before the
    one that reads it, every rank in the clock's order), which cannot
    deadlock either.
    `--dsc-verify-collectives` then checks every message of the step, and
    the runtime runs the programs as written, with no schedule of its own.

    Before (P = 2, M = 2, 1f1b):
    ```mlir
    module attributes {dsc.microbatches = 2 : i64,
                       dsc.pipeline = #dsc.pipeline<stages = 2, schedule = "1f1b">} {
      func.func @loss.stage0(...) -> tensor<2x4xf32> attributes {dsc.stage = 0 ...}
      func.func @forward_backward.stage0(...) attributes {dsc.stage = 0 ...}
      func.func @loss.stage1(...) attributes {dsc.stage = 1 ...}
      func.func @forward_backward.stage1(...) attributes {dsc.stage = 1 ...}
    }
    ```
    After, stage 1 (its forward is the first half of its backward):
    ```mlir
    func.func @step.stage1() attributes {
        dsc.program = #dsc.program_role<pipeline_step>, dsc.stage = 1 : i64} {
      dsc.pipeline_recv activation from 0 microbatch = 0 on @mesh : tensor<2x4xf32>
      dsc.pipeline_forward @loss.stage1 microbatch = 0
      dsc.pipeline_backward @forward_backward.stage1 microbatch = 0
      dsc.pipeline_recv activation from 0 microbatch = 1 on @mesh : tensor<2x4xf32>
      dsc.pipeline_send gradient to 0 microbatch = 0 on @mesh : tensor<2x4xf32>
      dsc.pipeline_forward @loss.stage1 microbatch = 1
      dsc.pipeline_backward @forward_backward.stage1 microbatch = 1
      dsc.pipeline_send gradient to 0 microbatch = 1 on @mesh : tensor<2x4xf32>
      return
    }
    ```

    The pass also runs the steps on a clock (PipelineSimulation.h: each
    forward and backward takes its program's cost, matmul FLOPs plus
    vector FLOPs at an eighth of their rate; a message is a rendezvous)
    and records the schedule's idle fraction of the step as `bubble` in
    `dsc.pipeline`; the plan summary carries it. With equal stages it is
    (P-1)/M for both schedules.

    Errors: a module without `dsc.pipeline`, a stage without its forward or
    forward_backward program, a schedule it does not know, steps written
    already.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];
  let options = [
    Option<"printTimeline", "print-timeline", "bool", /*default=*/"false",
           "Emit a remark drawing each stage's simulated step, one character "
           "per 1/100 of the step: digits are forwards (micro-batch mod 10), "
           "letters backwards (a = micro-batch 0), dots idle">,
  ];
  let statistics = [
    Statistic<"numMessages", "messages",
              "Sends written over all stages' steps">,
  ];
}

def DscMixedPrecisionPass : Pass<"dsc-mixed-precision", "::mlir::ModuleOp"> {
  let summary = "Computes the forward graph in bf16 over fp32 master weights";
  let description = [{
    Mixed-precision training as DeepSpeed's and Megatron-LM's `bf16:
    enabled`: the activations, the compute copies of the weights and (after
    `--dsc-autodiff`) the activation gradients are `bf16`; the parameters
    (fp32 master weights), their gradient states, the optimizer moments
    and the loss stay `f32`.

    Runs on the forward graph, before `--dsc-autodiff` and after tensor
    slicing and pipeline cutting, on every function of the module
    (`@loss`, or its stages `@loss.stage<k>`):

    - every parameter read (`dsc.get_parameter`, `dsc.gather_parameter`)
      of an f32 tensor gets a `dsc.cast` to `bf16` right after it, which
      all its users read instead;
    - every f32 tensor result of a dsc op becomes `bf16` (an f32 operand
      that still reaches such an op is cast first), except the loss of
      `dsc.cross_entropy` / `dsc.vocab_parallel_cross_entropy`, which
      takes bf16 logits and returns an f32 scalar;
    - f32 splat or dense `arith.constant`s are converted to `bf16`;
    - a pipeline stage's activation input and output become `bf16` (the
      boundary messages halve); another function's f32 arguments are cast
      on entry and its f32 results cast back before the return, as is any
      operand of an op outside the dsc dialect (a consumer that needs f32).

    Autodiff then differentiates each cast by casting the incoming bf16
    gradient back to f32 (`dsc.cast ... to tensor<...xf32>`) before it is
    accumulated into the f32 `@grad.<name>` state, so gradient
    accumulation, the data-parallel all-reduces and reduce-scatters, the
    norm and AdamW all run in f32. ZeRO-3 gathers the f32 chunk and casts
    the gathered parameter (twice DeepSpeed's bf16 gather bytes).

    `dtype=f16` computes in IEEE half instead. Its 5-bit exponent
    underflows small gradients, so the runtime trains a plan with f16
    buffers with dynamic loss scaling (DeepSpeed's DynamicLossScaler and
    defaults: the loss seed scaled, overflowing steps skipped and the scale
    lowered, the gradients unscaled before the optimizer).

    Before:
    ```mlir
    func.func @loss(%ids: tensor<2x8xi32>, %t: tensor<2x8xi32>) -> tensor<f32> {
      %w = dsc.get_parameter @wte.weight : tensor<256x64xf32>
      %x = dsc.embedding %w, %ids : tensor<256x64xf32>, tensor<2x8xi32> -> tensor<2x8x64xf32>
      %y = dsc.matmul %x, %w {transpose_rhs}
          : tensor<2x8x64xf32>, tensor<256x64xf32> -> tensor<2x8x256xf32>
      %l = dsc.cross_entropy %y, %t : tensor<2x8x256xf32>, tensor<2x8xi32> -> tensor<f32>
      return %l : tensor<f32>
    }
    ```
    After:
    ```mlir
    func.func @loss(%ids: tensor<2x8xi32>, %t: tensor<2x8xi32>) -> tensor<f32> {
      %w = dsc.get_parameter @wte.weight : tensor<256x64xf32>
      %wb = dsc.cast %w : tensor<256x64xf32> to tensor<256x64xbf16>
      %x = dsc.embedding %wb, %ids : tensor<256x64xbf16>, tensor<2x8xi32> -> tensor<2x8x64xbf16>
      %y = dsc.matmul %x, %wb {transpose_rhs}
          : tensor<2x8x64xbf16>, tensor<256x64xbf16> -> tensor<2x8x256xbf16>
      %l = dsc.cross_entropy %y, %t : tensor<2x8x256xbf16>, tensor<2x8xi32> -> tensor<f32>
      return %l : tensor<f32>
    }
    ```
    `--dsc-compile="precision=bf16"` adds this pass.
  }];
  let options = [
    Option<"dtype", "dtype", "std::string", /*default=*/"\"bf16\"",
           "The compute element type: bf16, or f16 (trained with dynamic "
           "loss scaling by the runtime)">,
  ];
  let statistics = [
    Statistic<"numCasts", "casts", "dsc.cast ops inserted">,
    Statistic<"numLowered", "lowered-values",
              "f32 values computed in the compute type instead">,
  ];
}

#endif // DSC_TRANSFORMS_PASSES_TD
