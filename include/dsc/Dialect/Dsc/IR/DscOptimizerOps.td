//===- DscOptimizerOps.td - dsc optimizer ops --------------*- tablegen -*-===//
//
// Ops that --dsc-optimizer emits: the learning-rate schedule, global
// gradient-norm clipping and in-place parameter updates over named state, so
// that the update and its state are explicit in the IR (ZeRO shards them).
// Included from DscOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_DIALECT_DSC_IR_DSCOPTIMIZEROPS_TD
#define DSC_DIALECT_DSC_IR_DSCOPTIMIZEROPS_TD

def Dsc_LearningRateOp : Dsc_Op<"learning_rate", [Pure]> {
  let summary = "The learning rate of the current step";
  let description = [{
    DeepSpeed's schedules as a function of the 1-based step `t`: `constant`
    is `base`; `warmup` (WarmupLR) ramps from `warmup_start` (default 0,
    DeepSpeed's `warmup_min_lr`) to `base` over `warmup_steps` and stays;
    `warmup_linear` (WarmupDecayLR) then decays linearly to `min` at
    `total_steps`; `warmup_cosine` (WarmupCosineLR) decays along a half
    cosine to `min` at `total_steps`. The ramp is linear, or logarithmic
    with `log_warmup` (DeepSpeed's `warmup_type: "log"`, its default).

    The `annealing_*` schedules are GPT-NeoX's AnnealingLR
    (megatron/learning_rates.py, its `lr_decay_style` constant, linear,
    cosine, exponential), evaluated at n = t - 1 with W = `warmup`,
    T = `total`: `base * max(1, n) / W` while n <= W, then with m = n - W,
    E = T - W: `base`, `base * (E - m) / E`,
    `min + (base - min) * (1 + cos(pi m / E)) / 2` or
    `base * exp(-0.693 m / E)`, at least `min` after the warmup. Like
    GPT-NeoX they are not clamped past `total` (the cosine rises again).

    ```mlir
    %lr = dsc.learning_rate warmup_cosine base = 6.000000e-04 min = 6.000000e-05
        warmup = 10 total = 200 : tensor<f32>
    %lr2 = dsc.learning_rate warmup base = 1.000000e-03 min = 0.000000e+00
        warmup = 1000 total = 0 {log_warmup, warmup_start = 1.000000e-05 : f64} : tensor<f32>
    ```
  }];
  let arguments = (ins Dsc_LrSchedule:$schedule, F64Attr:$base, F64Attr:$min,
                       I64Attr:$warmup, I64Attr:$total,
                       DefaultValuedAttr<F64Attr, "0.0">:$warmup_start,
                       UnitAttr:$log_warmup);
  let results = (outs 0DTensorOf<[F32, F64]>:$result);
  let assemblyFormat = [{
    $schedule `base` `=` $base `min` `=` $min `warmup` `=` $warmup `total` `=` $total
    attr-dict `:` type($result)
  }];
  let extraClassDeclaration = [{
    /// GPT-NeoX's AnnealingLR (the annealing_* schedules).
    static bool isAnnealing(LrSchedule schedule) {
      return schedule == LrSchedule::AnnealingConstant ||
             schedule == LrSchedule::AnnealingLinear ||
             schedule == LrSchedule::AnnealingCosine ||
             schedule == LrSchedule::AnnealingExponential;
    }
    /// Whether the rate decays after the warmup, which must then end
    /// before `total`.
    static bool decaysAfterWarmup(LrSchedule schedule) {
      return schedule != LrSchedule::Constant &&
             schedule != LrSchedule::WarmupConstant &&
             schedule != LrSchedule::AnnealingConstant;
    }
  }];
  let hasVerifier = 1;
}

def Dsc_CyclicLearningRateOp : Dsc_Op<"cyclic_learning_rate", [Pure]> {
  let summary = "DeepSpeed's LRRangeTest or OneCycle learning rate";
  let description = [{
    The learning rate of the 1-based step `t` as DeepSpeed's schedulers
    give it (deepspeed/runtime/lr_schedules.py; built at
    last_batch_iteration = -1, which sets `min`, and stepped after each
    optimizer step), with b = t - 1:

    - `range_test` (LRRangeTest): `min * (1 + rate * i)`, i = b /
      `first_size` (lr_range_test_step_size), floored with `staircase`;
    - `one_cycle` (OneCycle, its learning rate): a cycle of
      T = `first_size` + `second_size` steps rises from `min` to `max` over
      the first and falls back over the second (in `first_stairs` /
      `second_stairs` flat stairs when > 0); once b - 1 >= T, it is
      `min / (1 + rate * (b - T) / decay_size)`, or `min` when `rate` or
      `decay_size` is 0.

    ```mlir
    %lr = dsc.cyclic_learning_rate one_cycle min = 1.000000e-04 max = 1.000000e-03
        first_size = 1.000000e+01 second_size = 1.000000e+01 first_stairs = 0
        second_stairs = 0 decay_size = 5.000000e+00 rate = 1.000000e-01 : tensor<f32>
    ```
  }];
  let arguments = (ins Dsc_CyclicLrSchedule:$schedule, F64Attr:$min,
                       F64Attr:$max, F64Attr:$first_size,
                       F64Attr:$second_size, I64Attr:$first_stairs,
                       I64Attr:$second_stairs, F64Attr:$decay_size,
                       F64Attr:$rate, UnitAttr:$staircase);
  let results = (outs 0DTensorOf<[F32, F64]>:$result);
  let assemblyFormat = [{
    $schedule `min` `=` $min `max` `=` $max `first_size` `=` $first_size
    `second_size` `=` $second_size `first_stairs` `=` $first_stairs
    `second_stairs` `=` $second_stairs `decay_size` `=` $decay_size
    `rate` `=` $rate attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

def Dsc_CyclicMomentumOp : Dsc_Op<"cyclic_momentum", [Pure]> {
  let summary = "DeepSpeed's OneCycle momentum (Adam's beta1)";
  let description = [{
    OneCycle's `cycle_momentum`, which sets Adam's `betas[0]` each step,
    inversely to its learning rate (`dsc.cyclic_learning_rate one_cycle`
    with the same cycle), at the 1-based step `t`, b = t - 1: `min` at
    t = 1 (DeepSpeed sets `cycle_min_mom` when it builds the scheduler);
    then within the cycle `max - (max - min) * s(b)`, s the learning
    rate's cycle position (0 -> 1 over `first_size` steps, back over
    `second_size`, in flat stairs when > 0); once b - 1 >= T,
    `max * (1 + rate * (b - T) / decay_size)`, or `max` when `rate` or
    `decay_size` is 0.

    ```mlir
    %beta1 = dsc.cyclic_momentum min = 8.500000e-01 max = 9.900000e-01
        first_size = 1.000000e+01 second_size = 1.000000e+01 first_stairs = 0
        second_stairs = 0 decay_size = 0.000000e+00 rate = 0.000000e+00 : tensor<f32>
    ```
  }];
  let arguments = (ins F64Attr:$min, F64Attr:$max, F64Attr:$first_size,
                       F64Attr:$second_size, I64Attr:$first_stairs,
                       I64Attr:$second_stairs, F64Attr:$decay_size,
                       F64Attr:$rate);
  let results = (outs 0DTensorOf<[F32, F64]>:$result);
  let assemblyFormat = [{
    `min` `=` $min `max` `=` $max `first_size` `=` $first_size
    `second_size` `=` $second_size `first_stairs` `=` $first_stairs
    `second_stairs` `=` $second_stairs `decay_size` `=` $decay_size
    `rate` `=` $rate attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

def Dsc_ClipGradNormOp : Dsc_Op<"clip_grad_norm",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>,
     DeclareOpInterfaceMethods<Dsc_CommunicationOpInterface>]> {
  let summary = "Global L2 norm of gradients, clipped in place";
  let description = [{
    Computes the L2 norm over all `gradients` together and, when `max_norm`
    is positive and the norm exceeds it, scales every gradient by
    `max_norm / norm` (torch.nn.utils.clip_grad_norm_). Returns the norm
    before clipping, which the step log reports.

    Under ZeRO (`sharded on @mesh axes = [...] shards = [...]`, one flag per
    gradient) a sharded gradient is valid only in this rank's chunk after
    its reduce-scatter: each rank sums the squares of what it holds and the
    sums are added over the group, so every rank gets the same norm.

    ```mlir
    %norm = dsc.clip_grad_norm [@grad.wte.weight, @grad.ln_f.weight]
        max_norm = 1.000000e+00 : tensor<f32>
    ```
  }];
  let arguments = (ins SymbolRefArrayAttr:$gradients, F64Attr:$max_norm,
                       OptionalAttr<FlatSymbolRefAttr>:$mesh,
                       OptionalAttr<StrArrayAttr>:$shard_axes,
                       OptionalAttr<DenseBoolArrayAttr>:$sharded);
  let results = (outs 0DTensorOf<[F32, F64]>:$result);
  let assemblyFormat = [{
    $gradients `max_norm` `=` $max_norm
    (`sharded` `on` $mesh^ `axes` `=` $shard_axes `shards` `=` $sharded)?
    attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

def Dsc_AdamWOp : Dsc_Op<"adamw", [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "One AdamW update of a parameter, in place";
  let description = [{
    Decoupled weight decay and bias-corrected moments, as torch.optim.AdamW:
    `p -= lr·wd·p; m = β1·m + (1−β1)·g; v = β2·v + (1−β2)·g²;
    p -= lr·m̂/(sqrt(v̂) + eps)`. `--dsc-optimizer` sets `weight_decay` to 0 for
    biases and normalization weights, as Megatron-LM and nanoGPT do.

    With `sharded on @mesh axes = [...]` (ZeRO stage 1) the moments hold one
    of the group's D equal chunks of the flattened parameter (rank-1
    tensors of numel/D elements) and the op updates only this rank's chunk;
    a `dsc.all_gather_states` then makes the parameter whole again.

    With `scheduled_beta1 = %b` (DeepSpeed's OneCycle `cycle_momentum`,
    `dsc.cyclic_momentum`) the step's β1 is that scalar, in the moment and
    in its bias correction `1 − β1^t` as torch's Adam computes it from the
    group's current betas; `beta1` is then the first step's.

    ```mlir
    dsc.adamw @wte.weight grad = @grad.wte.weight exp_avg = @adam.m.wte.weight
        exp_avg_sq = @adam.v.wte.weight lr = %lr beta1 = 9.000000e-01
        beta2 = 9.500000e-01 eps = 1.000000e-08 weight_decay = 1.000000e-01 : tensor<f32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$param, FlatSymbolRefAttr:$grad,
                       FlatSymbolRefAttr:$exp_avg, FlatSymbolRefAttr:$exp_avg_sq,
                       0DTensorOf<[F32, F64]>:$lr,
                       Optional<0DTensorOf<[F32, F64]>>:$scheduled_beta1,
                       F64Attr:$beta1, F64Attr:$beta2,
                       F64Attr:$eps, F64Attr:$weight_decay,
                       OptionalAttr<FlatSymbolRefAttr>:$mesh,
                       OptionalAttr<StrArrayAttr>:$shard_axes);
  let assemblyFormat = [{
    $param `grad` `=` $grad `exp_avg` `=` $exp_avg `exp_avg_sq` `=` $exp_avg_sq
    `lr` `=` $lr (`scheduled_beta1` `=` $scheduled_beta1^ `:` type($scheduled_beta1))?
    `beta1` `=` $beta1
    `beta2` `=` $beta2 `eps` `=` $eps
    `weight_decay` `=` $weight_decay (`sharded` `on` $mesh^ `axes` `=` $shard_axes)?
    attr-dict `:` type($lr)
  }];
  let hasVerifier = 1;
}

def Dsc_SgdOp : Dsc_Op<"sgd", [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "One SGD-with-momentum update of a parameter, in place";
  let description = [{
    torch.optim.SGD: `g += wd·p; buf = momentum·buf + g;
    p -= lr·(nesterov ? g + momentum·buf : buf)`.

    ```mlir
    dsc.sgd @wte.weight grad = @grad.wte.weight momentum_buffer = @sgd.buf.wte.weight
        lr = %lr momentum = 9.000000e-01 weight_decay = 0.000000e+00 : tensor<f32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$param, FlatSymbolRefAttr:$grad,
                       FlatSymbolRefAttr:$momentum_buffer,
                       0DTensorOf<[F32, F64]>:$lr, F64Attr:$momentum,
                       F64Attr:$weight_decay, UnitAttr:$nesterov);
  let assemblyFormat = [{
    $param `grad` `=` $grad `momentum_buffer` `=` $momentum_buffer `lr` `=` $lr
    `momentum` `=` $momentum `weight_decay` `=` $weight_decay attr-dict `:` type($lr)
  }];
  let hasVerifier = 1;
}

def Dsc_AllGatherStatesOp : Dsc_Op<"all_gather_states",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>,
     DeclareOpInterfaceMethods<Dsc_CommunicationOpInterface>]> {
  let summary = "In-place all-gather of sharded parameters (ZeRO)";
  let description = [{
    Each named parameter (or state) is D equal chunks of its flattened
    elements over the group of `mesh_axes`; this rank holds the chunk at its
    index in the group and receives the others. ZeRO-1 gathers the
    parameters each rank updated for its own shard.

    ```mlir
    dsc.all_gather_states [@wte.weight, @h.0.mlp.fc.weight] on @mesh axes = ["dp"]
    ```
  }];
  let arguments = (ins SymbolRefArrayAttr:$buffers, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$mesh_axes);
  let assemblyFormat = "$buffers `on` $mesh `axes` `=` $mesh_axes attr-dict";
}

def Dsc_ReduceScatterStatesOp : Dsc_Op<"reduce_scatter_states",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>,
     DeclareOpInterfaceMethods<Dsc_CommunicationOpInterface>]> {
  let summary = "In-place reduce-scatter of gradient states (ZeRO)";
  let description = [{
    Each named state is D equal chunks of its flattened elements over the
    group of `mesh_axes`; the group's states are reduced and this rank's
    chunk receives the result. ZeRO averages each gradient only into the
    shard its rank updates.

    ```mlir
    dsc.reduce_scatter_states [@grad.wte.weight] on @mesh axes = ["dp"] reduction = avg
    ```
  }];
  let arguments = (ins SymbolRefArrayAttr:$states, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$mesh_axes,
                       DefaultValuedProp<EnumProp<Dsc_ReductionKind>,
                                         "::mlir::dsc::ReductionKind::Sum">:$reduction);
  let assemblyFormat = [{
    $states `on` $mesh `axes` `=` $mesh_axes (`reduction` `=` $reduction^)? attr-dict
  }];
}

def Dsc_ZeroOp : Dsc_Op<"zero", [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Zeroes persistent state (gradients after an update)";
  let description = [{
    ```mlir
    dsc.zero [@grad.wte.weight, @grad.ln_f.weight]
    ```
  }];
  let arguments = (ins SymbolRefArrayAttr:$states);
  let assemblyFormat = "$states attr-dict";
}

//===----------------------------------------------------------------------===//
// 1-bit Adam (DeepSpeed's OnebitAdam; docs/onebit.md)
//===----------------------------------------------------------------------===//

def Dsc_OnebitAdamOp : Dsc_Op<"onebit_adam", [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "One warm-up step of 1-bit Adam, in place";
  let description = [{
    DeepSpeed's OnebitAdam before `freeze_step`, on the exactly averaged
    gradient: `m = β1·m + (1−β1)·g; v = β2·v + (1−β2)·g²;
    p -= lr·(m/(sqrt(v) + eps) + wd·p)` — no bias correction, as DeepSpeed.

    With `sharded on @mesh axes = [...]` (ZeRO-1/2 under 1-bit Adam) `v`
    holds one of the group's D equal chunks of the flattened parameter and
    the op updates `v` and the parameter only at this rank's chunk; `m`
    stays whole and is updated whole (the compression phase's local
    momentum reads all of it), and a `dsc.all_gather_states` of the
    parameters follows.

    ```mlir
    dsc.onebit_adam @w grad = @grad.w exp_avg = @adam.m.w exp_avg_sq = @adam.v.w
        lr = %lr beta1 = 9.000000e-01 beta2 = 9.990000e-01 eps = 1.000000e-08
        weight_decay = 0.000000e+00 : tensor<f32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$param, FlatSymbolRefAttr:$grad,
                       FlatSymbolRefAttr:$exp_avg, FlatSymbolRefAttr:$exp_avg_sq,
                       0DTensorOf<[F32, F64]>:$lr, F64Attr:$beta1, F64Attr:$beta2,
                       F64Attr:$eps, F64Attr:$weight_decay,
                       OptionalAttr<FlatSymbolRefAttr>:$mesh,
                       OptionalAttr<StrArrayAttr>:$shard_axes);
  let assemblyFormat = [{
    $param `grad` `=` $grad `exp_avg` `=` $exp_avg `exp_avg_sq` `=` $exp_avg_sq
    `lr` `=` $lr `beta1` `=` $beta1 `beta2` `=` $beta2 `eps` `=` $eps
    `weight_decay` `=` $weight_decay (`sharded` `on` $mesh^ `axes` `=` $shard_axes)?
    attr-dict `:` type($lr)
  }];
  let hasVerifier = 1;
}

def Dsc_AdamMomentumOp : Dsc_Op<"adam_momentum", [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Adam's first moment from this rank's own gradient, in place";
  let description = [{
    1-bit Adam's compression phase: `m = β1·m + (1−β1)·g` with the local
    (not averaged) gradient; a `dsc.compressed_all_reduce_states` of the
    moments follows, then `dsc.frozen_adam`.

    ```mlir
    dsc.adam_momentum @adam.m.w grad = @grad.w beta1 = 9.000000e-01
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$exp_avg, FlatSymbolRefAttr:$grad,
                       F64Attr:$beta1);
  let assemblyFormat = "$exp_avg `grad` `=` $grad `beta1` `=` $beta1 attr-dict";
  let hasVerifier = 1;
}

def Dsc_FrozenAdamOp : Dsc_Op<"frozen_adam", [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "An Adam update with the second moment frozen, in place";
  let description = [{
    1-bit Adam's compression phase, after the moments' compressed
    all-reduce: `p -= lr·(m/(sqrt(v) + eps) + wd·p)`; `v` is read only.
    With `sharded on @mesh axes = [...]` (ZeRO-1/2) `v` is this rank's
    chunk of the group's D, as in `dsc.onebit_adam`, and only that chunk of
    the parameter is updated.

    ```mlir
    dsc.frozen_adam @w exp_avg = @adam.m.w exp_avg_sq = @adam.v.w lr = %lr
        eps = 1.000000e-08 weight_decay = 0.000000e+00 : tensor<f32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$param, FlatSymbolRefAttr:$exp_avg,
                       FlatSymbolRefAttr:$exp_avg_sq, 0DTensorOf<[F32, F64]>:$lr,
                       F64Attr:$eps, F64Attr:$weight_decay,
                       OptionalAttr<FlatSymbolRefAttr>:$mesh,
                       OptionalAttr<StrArrayAttr>:$shard_axes);
  let assemblyFormat = [{
    $param `exp_avg` `=` $exp_avg `exp_avg_sq` `=` $exp_avg_sq `lr` `=` $lr
    `eps` `=` $eps `weight_decay` `=` $weight_decay
    (`sharded` `on` $mesh^ `axes` `=` $shard_axes)? attr-dict `:` type($lr)
  }];
  let hasVerifier = 1;
}

def Dsc_ZeroOneAdamUpdateOp : Dsc_Op<"zero_one_adam_update", [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "0/1 Adam's local update, accumulated for the next sync";
  let description = [{
    0/1 Adam's second stage (variance frozen, DeepSpeed's zoadam.py), after
    `dsc.adam_momentum` of this rank's own gradient: `t = −lr·(m/(sqrt(v) +
    eps) + wd·p)`, `p += t`, `accumulator += t`. Nothing is communicated;
    a sync step's `dsc.zero_one_adam_rewind` and `dsc.zero_one_adam_resync`
    average the accumulator.

    ```mlir
    dsc.zero_one_adam_update @w exp_avg = @adam.m.w exp_avg_sq = @adam.v.w
        accumulator = @zoadam.accumulator.w lr = %lr eps = 1.000000e-08
        weight_decay = 0.000000e+00 : tensor<f32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$param, FlatSymbolRefAttr:$exp_avg,
                       FlatSymbolRefAttr:$exp_avg_sq,
                       FlatSymbolRefAttr:$accumulator,
                       0DTensorOf<[F32]>:$lr, F64Attr:$eps,
                       F64Attr:$weight_decay);
  let assemblyFormat = [{
    $param `exp_avg` `=` $exp_avg `exp_avg_sq` `=` $exp_avg_sq `accumulator`
    `=` $accumulator `lr` `=` $lr `eps` `=` $eps `weight_decay` `=`
    $weight_decay attr-dict `:` type($lr)
  }];
  let hasVerifier = 1;
}

def Dsc_AddLearningRateOp : Dsc_Op<"add_learning_rate", [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Adds the step's learning rate to a running f64 sum";
  let description = [{
    0/1 Adam's `lrs`, the learning rates summed since the last sync (a
    Python float in DeepSpeed, so f64 here): `sum += lr`. A sync divides
    the averaged accumulator by it, then zeroes it (`dsc.zero`).

    ```mlir
    dsc.add_learning_rate @zoadam.lr_sum lr = %lr : tensor<f32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$sum, 0DTensorOf<[F32]>:$lr);
  let assemblyFormat = "$sum `lr` `=` $lr attr-dict `:` type($lr)";
}

def Dsc_ZeroOneAdamRewindOp : Dsc_Op<"zero_one_adam_rewind", [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "0/1 Adam's sync, first half: rewind and rescale";
  let description = [{
    `p −= accumulator; accumulator ·= sqrt(v) + eps`: the parameter back
    where the last sync left it, the accumulated updates back in momentum
    units. A `dsc.compressed_all_reduce_states` of the accumulators
    follows (over the data-parallel group), then
    `dsc.zero_one_adam_resync`.

    ```mlir
    dsc.zero_one_adam_rewind @w accumulator = @zoadam.accumulator.w
        exp_avg_sq = @adam.v.w eps = 1.000000e-08
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$param, FlatSymbolRefAttr:$accumulator,
                       FlatSymbolRefAttr:$exp_avg_sq, F64Attr:$eps);
  let assemblyFormat = [{
    $param `accumulator` `=` $accumulator `exp_avg_sq` `=` $exp_avg_sq `eps`
    `=` $eps attr-dict
  }];
  let hasVerifier = 1;
}

def Dsc_ZeroOneAdamResyncOp : Dsc_Op<"zero_one_adam_resync", [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "0/1 Adam's sync, second half: momentum and parameter";
  let description = [{
    After the accumulators' compressed average: `m = −accumulator / sum`
    (`sum`: the learning rates since the last sync), `p += accumulator /
    (sqrt(v) + eps)`, `accumulator = 0`.

    ```mlir
    dsc.zero_one_adam_resync @w exp_avg = @adam.m.w
        accumulator = @zoadam.accumulator.w exp_avg_sq = @adam.v.w
        lr_sum = @zoadam.lr_sum eps = 1.000000e-08
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$param, FlatSymbolRefAttr:$exp_avg,
                       FlatSymbolRefAttr:$accumulator,
                       FlatSymbolRefAttr:$exp_avg_sq, FlatSymbolRefAttr:$lr_sum,
                       F64Attr:$eps);
  let assemblyFormat = [{
    $param `exp_avg` `=` $exp_avg `accumulator` `=` $accumulator `exp_avg_sq`
    `=` $exp_avg_sq `lr_sum` `=` $lr_sum `eps` `=` $eps attr-dict
  }];
  let hasVerifier = 1;
}

def Dsc_CompressedAllReduceStatesOp : Dsc_Op<"compressed_all_reduce_states",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>,
     DeclareOpInterfaceMethods<Dsc_CommunicationOpInterface>]> {
  let summary = "Error-compensated 1-bit average of a bucket of states, in "
                "place";
  let description = [{
    DeepSpeed's compressed all-reduce (1-bit Adam, Tang et al. 2021) of
    the concatenation of `states`, in order, as one vector (DeepSpeed's fp16
    optimizer hands 1-bit Adam each parameter group flattened into one
    tensor: one compressed all-reduce per group, not per parameter), over
    the group of `mesh_axes` (D ranks). With n the states' elements padded
    to a multiple of D·lcm(D, 8) and c = n/D:

    - worker: `x += e_w; s = ‖x‖₂/√n; e_w = x − s·sign(x)` (sign(0) = +1);
    - phase 1: an all-to-all of the sign chunks and an all-gather of the
      scales; rank j, the server of chunk j, averages the D decompressed
      chunks, adds `e_s`, compresses them again with `S = ‖M‖₂/√c` and
      keeps `e_s = M − S·sign(M)`;
    - phase 2: an all-gather of the servers' signs and scales: every rank
      ends with the same compressed average.

    The worker error is a rank-1 f32 state of n elements, the server
    error one of c. Signs move 32 to a 32-bit word: a rank sends about
    2·(n/8)·(D−1)/D bytes, 1/32 of an fp32 ring all-reduce's 2·4n·(D−1)/D.

    ```mlir
    dsc.compressed_all_reduce_states [@adam.m.b, @adam.m.w]
        worker_error = @onebit.worker_error.b server_error = @onebit.server_error.b
        on @mesh axes = ["dp"]
    ```
  }];
  let arguments = (ins SymbolRefArrayAttr:$states,
                       FlatSymbolRefAttr:$worker_error,
                       FlatSymbolRefAttr:$server_error,
                       FlatSymbolRefAttr:$mesh, StrArrayAttr:$mesh_axes);
  let assemblyFormat = [{
    $states `worker_error` `=` $worker_error `server_error` `=`
    $server_error `on` $mesh `axes` `=` $mesh_axes attr-dict
  }];
}

//===----------------------------------------------------------------------===//
// 1-bit LAMB (DeepSpeed's OnebitLamb; docs/onebit.md)
//===----------------------------------------------------------------------===//

def Dsc_OnebitLambOp : Dsc_Op<"onebit_lamb", [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "One warm-up step of 1-bit LAMB, in place";
  let description = [{
    DeepSpeed's OnebitLamb before `freeze_step`, on the exactly averaged
    gradient: `m = β1·m + (1−β1)·g; v = β2·v + (1−β2)·g²;
    u = m/(sqrt(v) + eps) + wd·p`; the trust ratio `c = ‖p‖₂/‖u‖₂`
    clamped to [min_coeff, max_coeff] (1 when a norm is 0); the frozen
    coefficient `coeff_freeze = coeff_beta·coeff_freeze + (1−coeff_beta)·c`
    (unless c = 1); `p -= lr·c·u`. No bias correction, as DeepSpeed.
    `coefficients` is the tensor's f64 `lamb_coefficients` state.

    ```mlir
    dsc.onebit_lamb @w grad = @grad.w exp_avg = @adam.m.w exp_avg_sq = @adam.v.w
        coefficients = @lamb.coeffs.w lr = %lr beta1 = 9.000000e-01
        beta2 = 9.990000e-01 eps = 1.000000e-08 weight_decay = 0.000000e+00
        max_coeff = 1.000000e+01 min_coeff = 0.01 coeff_beta = 0.9 : tensor<f32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$param, FlatSymbolRefAttr:$grad,
                       FlatSymbolRefAttr:$exp_avg, FlatSymbolRefAttr:$exp_avg_sq,
                       FlatSymbolRefAttr:$coefficients,
                       0DTensorOf<[F32]>:$lr, F64Attr:$beta1, F64Attr:$beta2,
                       F64Attr:$eps, F64Attr:$weight_decay, F64Attr:$max_coeff,
                       F64Attr:$min_coeff, F64Attr:$coeff_beta);
  let assemblyFormat = [{
    $param `grad` `=` $grad `exp_avg` `=` $exp_avg `exp_avg_sq` `=` $exp_avg_sq
    `coefficients` `=` $coefficients `lr` `=` $lr `beta1` `=` $beta1
    `beta2` `=` $beta2 `eps` `=` $eps `weight_decay` `=` $weight_decay
    `max_coeff` `=` $max_coeff `min_coeff` `=` $min_coeff
    `coeff_beta` `=` $coeff_beta attr-dict `:` type($lr)
  }];
  let hasVerifier = 1;
}

def Dsc_LambFreezeOp : Dsc_Op<"lamb_freeze", [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "1-bit LAMB's scaling coefficients, set once";
  let description = [{
    The first step of the compression phase, over every tensor of the
    fused buffer (a no-op once set, which `coefficients` records): each
    tensor's momentum scale `s_t = ‖m_t‖₂/√n_t`, its scaling coefficient
    `mean(s)/s_t` and a last factor of 1; with `copy_variance` the fresh
    variance starts from the frozen one (DeepSpeed copies it at its freeze
    step, which the warm-up reaches when freeze_step ≥ 2; else it starts
    from zeros).

    ```mlir
    dsc.lamb_freeze coefficients = [@lamb.coeffs.b, @lamb.coeffs.w]
        exp_avg = [@adam.m.b, @adam.m.w] exp_avg_sq = [@adam.v.b, @adam.v.w]
        fresh = [@lamb.v_fresh.b, @lamb.v_fresh.w] copy_variance
    ```
  }];
  let arguments = (ins SymbolRefArrayAttr:$coefficients,
                       SymbolRefArrayAttr:$exp_avg,
                       SymbolRefArrayAttr:$exp_avg_sq,
                       SymbolRefArrayAttr:$fresh, UnitAttr:$copy_variance);
  let assemblyFormat = [{
    `coefficients` `=` $coefficients `exp_avg` `=` $exp_avg `exp_avg_sq` `=`
    $exp_avg_sq `fresh` `=` $fresh (`copy_variance` $copy_variance^)? attr-dict
  }];
  let hasVerifier = 1;
}

def Dsc_LambMomentumOp : Dsc_Op<"lamb_momentum", [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "1-bit LAMB's scaled local momentum, in place";
  let description = [{
    The compression phase: `last = m; m = (β1·m + (1−β1)·g)·scaling` with
    this rank's own gradient and the tensor's scaling coefficient; a
    `dsc.compressed_all_reduce_states` of every tensor's `m` (one fused
    buffer) follows, then `dsc.frozen_lamb`.

    ```mlir
    dsc.lamb_momentum @adam.m.w grad = @grad.w last = @lamb.m_last.w
        coefficients = @lamb.coeffs.w beta1 = 9.000000e-01
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$exp_avg, FlatSymbolRefAttr:$grad,
                       FlatSymbolRefAttr:$last, FlatSymbolRefAttr:$coefficients,
                       F64Attr:$beta1);
  let assemblyFormat = [{
    $exp_avg `grad` `=` $grad `last` `=` $last `coefficients` `=`
    $coefficients `beta1` `=` $beta1 attr-dict
  }];
  let hasVerifier = 1;
}

def Dsc_FrozenLambOp : Dsc_Op<"frozen_lamb", [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "A 1-bit LAMB update with the variance frozen, in place";
  let description = [{
    The compression phase, after the momenta's compressed all-reduce:
    `m /= scaling`; the fresh variance from the reconstructed gradient
    `ĝ = (m − β1·last)/(1−β1)`: `vf = β2·vf + (1−β2)·ĝ²`; `u = m/(sqrt(v)
    + eps) + wd·p`; the factor `max((sqrt(v) + eps)/(sqrt(vf) + eps))`,
    blended towards 1 by `‖u − wd·p‖/‖u‖` when wd > 0, clamped to
    [factor_min, factor_max] and to ±factor_threshold of the last factor;
    `p -= lr·coeff_freeze·factor·u`.

    ```mlir
    dsc.frozen_lamb @w exp_avg = @adam.m.w last = @lamb.m_last.w
        exp_avg_sq = @adam.v.w fresh = @lamb.v_fresh.w
        coefficients = @lamb.coeffs.w lr = %lr beta1 = 0.9 beta2 = 0.999
        eps = 1.0e-08 weight_decay = 0.0 factor_max = 4.0 factor_min = 0.5
        factor_threshold = 0.1 : tensor<f32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$param, FlatSymbolRefAttr:$exp_avg,
                       FlatSymbolRefAttr:$last, FlatSymbolRefAttr:$exp_avg_sq,
                       FlatSymbolRefAttr:$fresh,
                       FlatSymbolRefAttr:$coefficients,
                       0DTensorOf<[F32]>:$lr, F64Attr:$beta1, F64Attr:$beta2,
                       F64Attr:$eps, F64Attr:$weight_decay,
                       F64Attr:$factor_max, F64Attr:$factor_min,
                       F64Attr:$factor_threshold);
  let assemblyFormat = [{
    $param `exp_avg` `=` $exp_avg `last` `=` $last `exp_avg_sq` `=`
    $exp_avg_sq `fresh` `=` $fresh `coefficients` `=` $coefficients
    `lr` `=` $lr `beta1` `=` $beta1 `beta2` `=` $beta2 `eps` `=` $eps
    `weight_decay` `=` $weight_decay `factor_max` `=` $factor_max
    `factor_min` `=` $factor_min `factor_threshold` `=` $factor_threshold
    attr-dict `:` type($lr)
  }];
  let hasVerifier = 1;
}

#endif // DSC_DIALECT_DSC_IR_DSCOPTIMIZEROPS_TD
