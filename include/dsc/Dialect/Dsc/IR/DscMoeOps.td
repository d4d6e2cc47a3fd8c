//===- DscMoeOps.td - Mixture-of-Experts ops ---------------*- tablegen -*-===//
//
// A Mixture-of-Experts layer as four graph ops: the router's decision
// (dsc.moe_route), moving token rows into the experts' capacity slots and
// back (dsc.moe_dispatch, dsc.moe_combine), and the auxiliary losses joining
// the loss's gradient (dsc.auxiliary_loss). The experts themselves are
// batched dsc.matmul over an [E, C, H] tensor with [E, H, F] weights.
// docs/moe.md has the equations and their sources.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_DIALECT_DSC_IR_DSCMOEOPS_TD
#define DSC_DIALECT_DSC_IR_DSCMOEOPS_TD

// Expert slots: [E, C] token indices, -1 where empty.
def Dsc_SlotTensor : 2DTensorOf<[I32]>;

def Dsc_MoeRouteOp : Dsc_GraphOp<"moe_route"> {
  let summary = "An MoE router's top-k choice with expert capacity";
  let description = [{
    Routes the `T` tokens of `logits` (`[..., E]`, the router's `x · Wg`,
    one row per token) to `E` experts of `C` slots each (`capacity`):

    - `p = softmax(logits)` per token; a token's `top_k` choices are its
      largest `p`, in descending order (ties to the lower expert);
    - slots are handed out per expert in `slot_order`: `token_major` (by
      token, its choices together: DeepSpeed's top-k, Mixtral) or
      `choice_major` (all first choices, then all second choices:
      DeepSpeed's top-2);
    - with `drop_tokens`, an expert keeps at most `C` pairs, chosen by
      `drop_policy`: `position` (the first in slot order), `probs` (the
      largest `p`) or `random` (DeepSpeed's random token selection, draws a
      pure function of `seed`, the step and the pair); without it `C` must be
      at least `T` (no expert can get more: a token's choices are distinct),
      and nothing drops;
    - the kept pairs' combine weights are `p` (`normalize = none`, DeepSpeed
      top-1), `p` over the sum of the token's kept `p` (`after_drop`,
      DeepSpeed top-2/top-k) or over the sum of its `top_k` chosen `p`
      (`before_drop`, Mixtral).

    Results: `slots` `[E, C]` (the token in each slot, `-1` when empty;
    an expert's filled slots come first), `gates` `[E, C]` (each slot's
    combine weight, `0` when empty) and `aux`, the auxiliary loss
    `aux_coeff · E · Σ_e P_e f_e + z_coeff · mean_t logsumexp(logits_t)²`
    with `P_e` the mean of `p[:, e]` over tokens and `f_e` the fraction of
    tokens whose choice (the first only, or all `top_k`: `aux_counts`) is
    `e` before dropping (Switch Transformer's load balance, Fedus et al.
    2021; the router z-loss of ST-MoE, Zoph et al. 2022). `f_e` carries no
    gradient; `P_e`, the weights and the z-loss do.

    ```mlir
    %slots, %gates, %aux = dsc.moe_route %logits normalize = after_drop
        slot_order = choice_major {top_k = 2 : i64, capacity = 16 : i64,
        drop_tokens, aux_coeff = 1.0e-02 : f64}
        : tensor<2x16x4xf32> -> tensor<4x16xi32>, tensor<4x16xf32>, tensor<f32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$logits, I64Attr:$top_k,
                       I64Attr:$capacity, UnitAttr:$drop_tokens,
                       DefaultValuedProp<EnumProp<Dsc_MoeNormalize>,
                           "::mlir::dsc::MoeNormalize::None">:$normalize,
                       DefaultValuedProp<EnumProp<Dsc_MoeDropPolicy>,
                           "::mlir::dsc::MoeDropPolicy::Position">:$drop_policy,
                       DefaultValuedProp<EnumProp<Dsc_MoeSlotOrder>,
                           "::mlir::dsc::MoeSlotOrder::TokenMajor">:$slot_order,
                       DefaultValuedProp<EnumProp<Dsc_MoeAuxCounts>,
                           "::mlir::dsc::MoeAuxCounts::FirstChoice">:$aux_counts,
                       DefaultValuedAttr<F64Attr, "0.0">:$aux_coeff,
                       DefaultValuedAttr<F64Attr, "0.0">:$z_coeff,
                       DefaultValuedAttr<I64Attr, "0">:$seed);
  let results = (outs Dsc_SlotTensor:$slots, Dsc_FloatTensor:$gates,
                      0DTensorOf<[F16, BF16, F32, F64]>:$aux);
  let assemblyFormat = [{
    $logits (`normalize` `=` $normalize^)? (`drop_policy` `=` $drop_policy^)?
    (`slot_order` `=` $slot_order^)? (`aux_counts` `=` $aux_counts^)?
    attr-dict `:` type($logits) `->` type($slots) `,` type($gates)
    `,` type($aux)
  }];
  let hasVerifier = 1;
}

def Dsc_MoeRouteGradOp : Dsc_ComputeOp<"moe_route_grad",
    [AllTypesMatch<["logits", "result"]>]> {
  let summary = "Gradient of dsc.moe_route with respect to its logits";
  let description = [{
    The logits' gradient from the gradients of the kept slots' `gates`
    (through the softmax and the normalization) and of `aux` (through `P_e`
    and the z-loss), for the `slots` dsc.moe_route chose; the choices are
    recomputed from `logits`. Same attributes as the route.

    ```mlir
    %dlogits = dsc.moe_route_grad %logits, %slots, %dgates, %daux
        {top_k = 2 : i64, capacity = 16 : i64, drop_tokens}
        : tensor<2x16x4xf32>, tensor<4x16xi32>, tensor<4x16xf32>, tensor<f32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$logits, Dsc_SlotTensor:$slots,
                       Dsc_FloatTensor:$grad_gates,
                       0DTensorOf<[F16, BF16, F32, F64]>:$grad_aux,
                       I64Attr:$top_k, I64Attr:$capacity, UnitAttr:$drop_tokens,
                       DefaultValuedProp<EnumProp<Dsc_MoeNormalize>,
                           "::mlir::dsc::MoeNormalize::None">:$normalize,
                       DefaultValuedProp<EnumProp<Dsc_MoeDropPolicy>,
                           "::mlir::dsc::MoeDropPolicy::Position">:$drop_policy,
                       DefaultValuedProp<EnumProp<Dsc_MoeSlotOrder>,
                           "::mlir::dsc::MoeSlotOrder::TokenMajor">:$slot_order,
                       DefaultValuedProp<EnumProp<Dsc_MoeAuxCounts>,
                           "::mlir::dsc::MoeAuxCounts::FirstChoice">:$aux_counts,
                       DefaultValuedAttr<F64Attr, "0.0">:$aux_coeff,
                       DefaultValuedAttr<F64Attr, "0.0">:$z_coeff,
                       DefaultValuedAttr<I64Attr, "0">:$seed);
  let results = (outs Dsc_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $slots `,` $grad_gates `,` $grad_aux (`normalize` `=` $normalize^)? (`drop_policy` `=` $drop_policy^)?
    (`slot_order` `=` $slot_order^)? (`aux_counts` `=` $aux_counts^)?
    attr-dict `:`
    type($logits) `,` type($slots) `,` type($grad_gates) `,` type($grad_aux)
  }];
  let hasVerifier = 1;
}

def Dsc_MoeDispatchOp : Dsc_GraphOp<"moe_dispatch"> {
  let summary = "Gathers token rows into the experts' capacity slots";
  let description = [{
    `result[e, c, :] = g · input[slots[e, c], :]` over the `T` token rows of
    `input` (`[..., H]`), zeros where the slot is empty (`-1`); `g` is
    `gates[e, c]` when given, else 1 (the weighted form is the gradient of
    dsc.moe_combine).

    ```mlir
    %xe = dsc.moe_dispatch %x, %slots
        : tensor<2x16x32xf32>, tensor<4x16xi32> -> tensor<4x16x32xf32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$input, Dsc_SlotTensor:$slots,
                       Optional<Dsc_FloatTensor>:$gates);
  let results = (outs Dsc_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $slots (`gates` $gates^)? attr-dict `:` type($input) `,`
    type($slots) (`,` type($gates)^)? `->` type($result)
  }];
  let hasVerifier = 1;
}

def Dsc_MoeCombineOp : Dsc_GraphOp<"moe_combine"> {
  let summary = "Sums the experts' slot rows back into their tokens";
  let description = [{
    `result[t, :] = Σ g · input[e, c, :]` over the slots `(e, c)` holding
    token `t`, in ascending slot order, `g` being `gates[e, c]` when given,
    else 1 (the unweighted form is the gradient of dsc.moe_dispatch); a
    token no slot holds (every choice dropped) gets zeros. The result's
    shape (`[..., H]`, `T` rows) is the tokens'.

    ```mlir
    %y = dsc.moe_combine %ye, %slots gates %gates
        : tensor<4x16x32xf32>, tensor<4x16xi32>, tensor<4x16xf32>
        -> tensor<2x16x32xf32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$input, Dsc_SlotTensor:$slots,
                       Optional<Dsc_FloatTensor>:$gates);
  let results = (outs Dsc_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $slots (`gates` $gates^)? attr-dict `:` type($input) `,`
    type($slots) (`,` type($gates)^)? `->` type($result)
  }];
  let hasVerifier = 1;
}

def Dsc_MoeGatesGradOp : Dsc_ComputeOp<"moe_gates_grad"> {
  let summary = "Gradient of dsc.moe_combine with respect to its gates";
  let description = [{
    `result[e, c] = <input[e, c, :], grad[slots[e, c], :]>`, 0 where the slot
    is empty: `input` the combined slot rows `[E, C, H]`, `grad` the
    gradient of the combine's result (`[..., H]`, `T` rows).

    ```mlir
    %dgates = dsc.moe_gates_grad %ye, %slots, %dy
        : tensor<4x16x32xf32>, tensor<4x16xi32>, tensor<2x16x32xf32>
        -> tensor<4x16xf32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$input, Dsc_SlotTensor:$slots,
                       Dsc_FloatTensor:$grad);
  let results = (outs Dsc_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $slots `,` $grad attr-dict `:` type($input) `,` type($slots)
    `,` type($grad) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Dsc_AuxiliaryLossOp : Dsc_GraphOp<"auxiliary_loss",
    [AllTypesMatch<["loss", "result"]>]> {
  let summary = "Adds auxiliary losses to the gradient, not to the report";
  let description = [{
    The result is `loss`, the language-model loss a run reports; its
    gradient is that of `loss + Σ aux`: each auxiliary loss (an MoE layer's
    load-balancing and z-loss, already weighted) gets the gradient `loss`
    gets. This is Megatron-LM's `MoEAuxLossAutoScaler` as an op: the
    auxiliary losses train the routers with the same seed, micro-batch
    average and loss scale as the loss, and the logged loss stays the one
    the model is measured by.

    ```mlir
    %l = dsc.auxiliary_loss %loss, %aux0, %aux1
        : tensor<f32>, tensor<f32>, tensor<f32>
    ```
  }];
  let arguments = (ins 0DTensorOf<[F32, F64]>:$loss,
                       Variadic<0DTensorOf<[F16, BF16, F32, F64]>>:$aux);
  let results = (outs 0DTensorOf<[F32, F64]>:$result);
  let assemblyFormat = [{
    $loss (`,` $aux^)? attr-dict `:` type($loss) (`,` type($aux)^)?
  }];
  let hasVerifier = 1;
}

def Dsc_StageAuxiliaryLossOp : Dsc_Op<"stage_auxiliary_loss"> {
  let summary = "A pipeline stage's auxiliary losses, seeded in the stage";
  let description = [{
    The auxiliary losses (MoE load-balancing and z-losses) of the MoE layers
    a pipeline stage holds. `--dsc-pipeline` replaces the loss function's
    `dsc.auxiliary_loss` by one of these in every stage with MoE layers:
    the stage's one message (the residual stream) does not carry them, so
    `--dsc-autodiff` seeds each in its own stage with the loss's seed, the
    micro-batch average `1/m` (baked into the plan: such a plan has no
    runtime-written gradient seed, so it runs with the micro-batch count it
    was compiled for, and fp16's dynamic loss scaling is refused). The
    gradient is that of `loss + Σ aux`, as with `dsc.auxiliary_loss`; the op
    itself computes nothing and has no runtime instruction.

    ```mlir
    dsc.stage_auxiliary_loss %aux0, %aux1 : tensor<f32>, tensor<f32>
    ```
  }];
  let arguments = (ins Variadic<0DTensorOf<[F32, F64]>>:$aux);
  let assemblyFormat = [{
    $aux attr-dict `:` type($aux)
  }];
}

#endif // DSC_DIALECT_DSC_IR_DSCMOEOPS_TD
