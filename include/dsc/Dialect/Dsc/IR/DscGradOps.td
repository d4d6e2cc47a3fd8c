//===- DscGradOps.td - dsc backward and state ops ----------*- tablegen -*-===//
//
// Ops that --dsc-autodiff emits: gradients of the graph ops that have no
// expression in forward ops, persistent state (gradients, optimizer moments)
// and accumulation into it. Included from DscOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_DIALECT_DSC_IR_DSCGRADOPS_TD
#define DSC_DIALECT_DSC_IR_DSCGRADOPS_TD

//===----------------------------------------------------------------------===//
// Persistent state
//===----------------------------------------------------------------------===//

def Dsc_StateOp : Dsc_Op<"state", [Symbol, HasParent<"::mlir::ModuleOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Declares persistent training state of a parameter";
  let description = [{
    Zero-initialized state that lives across steps and belongs to one
    parameter: its accumulated gradient, or an optimizer moment. ZeRO shards
    these along `dp`; checkpoints save the optimizer moments.

    ```mlir
    dsc.state @grad.wte.weight : tensor<256x64xf32> gradient of @wte.weight
    dsc.state @adam.m.wte.weight : tensor<256x64xf32> exp_avg of @wte.weight
    ```

    `in host` or `in nvme` places it off the device (`--dsc-offload`): ops
    of the optimizer program read a host state where it is; an NVMe state
    only between a `dsc.swap_in` and the `dsc.swap_out` after it, which
    stage it in host memory.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<Dsc_FloatTensor>:$type,
                       Dsc_StateKind:$kind, FlatSymbolRefAttr:$of,
                       DefaultValuedProp<EnumProp<Dsc_MemoryTier>,
                                         "::mlir::dsc::MemoryTier::Device">:$tier);
  let assemblyFormat = [{
    $sym_name `:` $type $kind `of` $of (`in` $tier^)? attr-dict
  }];
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
  }];
}

def Dsc_AccumulateOp : Dsc_Op<"accumulate",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Adds a value into persistent state";
  let description = [{
    `state += value`. Autodiff accumulates each parameter's gradient into its
    `gradient` state, so running the program for several micro-batches sums
    their gradients (gradient accumulation).

    ```mlir
    dsc.accumulate %g into @grad.wte.weight : tensor<256x64xf32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$value, FlatSymbolRefAttr:$state);
  let assemblyFormat = "$value `into` $state attr-dict `:` type($value)";
}

def Dsc_MatmulAccumulateOp : Dsc_Op<"matmul_accumulate",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>,
     DeclareOpInterfaceMethods<Dsc_CostOpInterface>]> {
  let summary = "Adds a matrix product into persistent state (fused)";
  let description = [{
    `state += op(lhs) op(rhs)`, `dsc.matmul`'s product (same operands, flags
    and result shape) added into `state` as it is computed, with no
    temporary for the product and no second pass over it. `--dsc-fuse`
    makes it from a `dsc.matmul` whose only use is a `dsc.accumulate` (a
    weight's gradient accumulated into its `gradient` state); the product's
    element type is the state's.

    ```mlir
    dsc.matmul_accumulate %x, %dy {transpose_lhs} into @grad.h.0.mlp.fc.weight
        : tensor<4096x768xf32>, tensor<4096x3072xf32> -> tensor<768x3072xf32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$lhs, Dsc_FloatTensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs,
                       FlatSymbolRefAttr:$state);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `into` $state `:` type($lhs) `,` type($rhs)
  }];
  let hasVerifier = 1;
}

def Dsc_ReduceScatterAccumulateOp : Dsc_Op<"reduce_scatter_accumulate",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>,
     DeclareOpInterfaceMethods<Dsc_CommunicationOpInterface>]> {
  let summary = "Reduce-scatters a gradient into a sharded accumulator (ZeRO-2)";
  let description = [{
    Reduces `value` over the group of `mesh_axes` and adds the chunk at this
    rank's index (one of D equal chunks of the flattened value) into
    `state`, a rank-1 gradient shard of numel/D elements. ZeRO stage 2 does
    this for every micro-batch, so no rank ever keeps a whole accumulated
    gradient.

    ```mlir
    dsc.reduce_scatter_accumulate %g into @grad.wte.weight on @mesh axes = ["dp"]
        reduction = avg : tensor<256x64xf32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$value, FlatSymbolRefAttr:$state,
                       FlatSymbolRefAttr:$mesh, StrArrayAttr:$mesh_axes,
                       DefaultValuedProp<EnumProp<Dsc_ReductionKind>,
                                         "::mlir::dsc::ReductionKind::Sum">:$reduction);
  let assemblyFormat = [{
    $value `into` $state `on` $mesh `axes` `=` $mesh_axes
    (`reduction` `=` $reduction^)? attr-dict `:` type($value)
  }];
}

//===----------------------------------------------------------------------===//
// Gradient ops
//===----------------------------------------------------------------------===//

def Dsc_EmbeddingGradOp : Dsc_ComputeOp<"embedding_grad"> {
  let summary = "Gradient of an embedding table";
  let description = [{
    Scatter-adds the rows of `grad` (`ids.shape + [H]`) into a zero table of
    the result type at the positions `ids`.

    ```mlir
    %dw = dsc.embedding_grad %dy, %ids
        : tensor<2x8x64xf32>, tensor<2x8xi32> -> tensor<256x64xf32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$grad, Dsc_IndexTensor:$ids);
  let results = (outs Dsc_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $ids attr-dict `:` type($grad) `,` type($ids) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Dsc_PositionEmbeddingGradOp : Dsc_ComputeOp<"position_embedding_grad"> {
  let summary = "Gradient of a learned position table";
  let description = [{
    Sums `grad` (`[B, S, H]`) over the batch into the first `S` rows of a
    zero table of the result type (`[P, H]`).

    ```mlir
    %dw = dsc.position_embedding_grad %dy : tensor<2x8x64xf32> -> tensor<16x64xf32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$grad);
  let results = (outs Dsc_FloatTensor:$result);
  let assemblyFormat = "$grad attr-dict `:` type($grad) `->` type($result)";
  let hasVerifier = 1;
}

def Dsc_BiasGradOp : Dsc_ComputeOp<"bias_grad"> {
  let summary = "Gradient of a bias: sum over all but the last dimension";
  let description = [{
    ```mlir
    %db = dsc.bias_grad %dy : tensor<2x8x64xf32> -> tensor<64xf32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$grad);
  let results = (outs Dsc_FloatTensor:$result);
  let assemblyFormat = "$grad attr-dict `:` type($grad) `->` type($result)";
  let hasVerifier = 1;
}

def Dsc_GeluGradOp : Dsc_ComputeOp<"gelu_grad",
    [AllTypesMatch<["input", "grad", "result"]>]> {
  let summary = "Gradient of the GELU (tanh form, or erf with `exact`)";
  let description = [{
    ```mlir
    %dx = dsc.gelu_grad %x, %dy : tensor<2x8x256xf32>
    %de = dsc.gelu_grad %x, %dy {exact} : tensor<2x8x256xf32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$input, Dsc_FloatTensor:$grad,
                       UnitAttr:$exact);
  let results = (outs Dsc_FloatTensor:$result);
  let assemblyFormat = "$input `,` $grad attr-dict `:` type($result)";
}

def Dsc_BiasGeluOp : Dsc_ComputeOp<"bias_gelu",
    [AllTypesMatch<["input", "result"]>]> {
  let summary = "GELU of a bias add, in one pass (fused)";
  let description = [{
    `result[..., n] = gelu(input[..., n] + bias[n])`, `dsc.gelu` (tanh form,
    or erf with `exact`) of `dsc.bias_add`'s sum, computed per element
    without storing the sum: Megatron-LM's `bias_gelu`. `--dsc-fuse` makes it
    from a `dsc.bias_add` whose only users are one `dsc.gelu` and the
    matching `dsc.gelu_grad`, which becomes `dsc.bias_gelu_grad`. The sum is
    rounded to the element type as `dsc.bias_add` rounds it, so the result is
    `dsc.gelu`'s of that sum.

    ```mlir
    %y = dsc.bias_gelu %x, %b : tensor<4x64x3072xf32>, tensor<3072xf32>
    %z = dsc.bias_gelu %x, %b {exact} : tensor<4x64x3072xf32>, tensor<3072xf32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$input, Dsc_FloatTensor:$bias,
                       UnitAttr:$exact);
  let results = (outs Dsc_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $bias attr-dict `:` type($input) `,` type($bias)
  }];
  let hasVerifier = 1;
}

def Dsc_BiasGeluGradOp : Dsc_ComputeOp<"bias_gelu_grad",
    [AllTypesMatch<["input", "grad", "result"]>]> {
  let summary = "Gradient of the GELU of a bias add, recomputing the sum "
                "(fused)";
  let description = [{
    `result = gelu'(input + bias) * grad` with the bias broadcast along the
    last dimension: `dsc.gelu_grad` of `dsc.bias_add`'s sum, which it
    recomputes instead of reading (Megatron-LM's `bias_gelu_back`), so the
    sum need not live from the forward to the backward. It is the gradient
    with respect to `input`; the bias's is `dsc.bias_grad` of it.

    ```mlir
    %dx = dsc.bias_gelu_grad %x, %b, %dy
        : tensor<4x64x3072xf32>, tensor<3072xf32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$input, Dsc_FloatTensor:$bias,
                       Dsc_FloatTensor:$grad, UnitAttr:$exact);
  let results = (outs Dsc_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $bias `,` $grad attr-dict `:` type($input) `,` type($bias)
  }];
  let hasVerifier = 1;
}

def Dsc_LayerNormGradOp : Dsc_ComputeOp<"layer_norm_grad",
    [AllTypesMatch<["input", "grad", "input_grad"]>,
     AllTypesMatch<["gamma", "gamma_grad", "beta_grad"]>]> {
  let summary = "Gradients of layer normalization";
  let description = [{
    Gradients with respect to the input, gamma and beta. The row statistics
    are recomputed from `input` rather than kept from the forward pass: they
    cost one pass over the row, and not keeping them saves 2·rows floats per
    layer norm for the whole forward/backward gap.

    ```mlir
    %dx, %dg, %db = dsc.layer_norm_grad %x, %g, %dy {epsilon = 1.000000e-05 : f64}
        : tensor<2x8x64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$input, Dsc_FloatTensor:$gamma,
                       Dsc_FloatTensor:$grad,
                       DefaultValuedAttr<F64Attr, "1.0e-5">:$epsilon);
  let results = (outs Dsc_FloatTensor:$input_grad, Dsc_FloatTensor:$gamma_grad,
                      Dsc_FloatTensor:$beta_grad);
  let assemblyFormat = [{
    $input `,` $gamma `,` $grad attr-dict `:` type($input) `,` type($gamma)
  }];
}

def Dsc_RmsNormGradOp : Dsc_ComputeOp<"rms_norm_grad",
    [AllTypesMatch<["input", "grad", "input_grad"]>,
     AllTypesMatch<["gamma", "gamma_grad"]>]> {
  let summary = "Gradients of root-mean-square normalization";
  let description = [{
    Gradients with respect to the input and gamma of `dsc.rms_norm` with the
    same `epsilon` and `epsilon_outside_sqrt`; the row's root mean square is
    recomputed from `input` (one pass over a row that is in cache).

    ```mlir
    %dx, %dg = dsc.rms_norm_grad %x, %g, %dy {epsilon = 1.000000e-06 : f64}
        : tensor<2x8x64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$input, Dsc_FloatTensor:$gamma,
                       Dsc_FloatTensor:$grad,
                       DefaultValuedAttr<F64Attr, "1.0e-6">:$epsilon,
                       UnitAttr:$epsilon_outside_sqrt);
  let results = (outs Dsc_FloatTensor:$input_grad,
                      Dsc_FloatTensor:$gamma_grad);
  let assemblyFormat = [{
    $input `,` $gamma `,` $grad attr-dict `:` type($input) `,` type($gamma)
  }];
}

def Dsc_SwigluGradOp : Dsc_ComputeOp<"swiglu_grad",
    [AllTypesMatch<["input", "result"]>]> {
  let summary = "Gradient of dsc.swiglu with respect to its [up | gate] input";
  let description = [{
    `d_up = dy * silu(gate)`, `d_gate = dy * up * silu'(gate)` with
    `silu'(g) = s(g) (1 + g (1 - s(g)))`, `s` the sigmoid.

    ```mlir
    %dx = dsc.swiglu_grad %x, %dy : tensor<2x8x64xf32>, tensor<2x8x32xf32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$input, Dsc_FloatTensor:$grad);
  let results = (outs Dsc_FloatTensor:$result);
  let assemblyFormat =
      "$input `,` $grad attr-dict `:` type($input) `,` type($grad)";
  let hasVerifier = 1;
}

def Dsc_RepeatHeadsGradOp : Dsc_ComputeOp<"repeat_heads_grad"> {
  let summary = "Gradient of dsc.repeat_heads: each group of heads summed";
  let description = [{
    ```mlir
    %dk = dsc.repeat_heads_grad %dk8 {head_dim = 8 : i64, repeats = 2 : i64}
        : tensor<2x8x32xf32> -> tensor<2x8x16xf32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$grad, I64Attr:$head_dim,
                       I64Attr:$repeats);
  let results = (outs Dsc_FloatTensor:$result);
  let assemblyFormat = "$grad attr-dict `:` type($grad) `->` type($result)";
  let hasVerifier = 1;
}

def Dsc_SoftmaxGradOp : Dsc_ComputeOp<"softmax_grad",
    [AllTypesMatch<["output", "grad", "result"]>]> {
  let summary = "Gradient of softmax from its output";
  let description = [{
    `dx = y ⊙ (dy − sum(dy ⊙ y))` over the last dimension.

    ```mlir
    %dx = dsc.softmax_grad %y, %dy : tensor<2x8x8xf32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$output, Dsc_FloatTensor:$grad);
  let results = (outs Dsc_FloatTensor:$result);
  let assemblyFormat = "$output `,` $grad attr-dict `:` type($result)";
}

def Dsc_AttentionGradOp : Dsc_ComputeOp<"attention_grad",
    [AllTypesMatch<["query", "key", "value", "grad", "query_grad", "key_grad",
                    "value_grad"]>]> {
  let summary = "Gradients of fused multi-head attention";
  let description = [{
    Gradients with respect to `q`, `k` and `v`, recomputing the attention
    probabilities block by block from `q`, `k` and the row logsumexp (as
    FlashAttention does) instead of keeping the `[B, heads, S, S]` matrix.
    Attributes are those of the forward `dsc.attention`.

    ```mlir
    %dq, %dk, %dv = dsc.attention_grad %q, %k, %v, %dout {num_heads = 4 : i64, causal}
        : tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$query, Dsc_FloatTensor:$key,
                       Dsc_FloatTensor:$value, Dsc_FloatTensor:$grad,
                       I64Attr:$num_heads, UnitAttr:$causal,
                       DefaultValuedAttr<F64Attr, "0.0">:$dropout,
                       DefaultValuedAttr<I64Attr, "0">:$seed,
                       OptionalAttr<StrArrayAttr>:$head_axes,
                       DefaultValuedAttr<I64Attr, "0">:$window);
  let results = (outs Dsc_FloatTensor:$query_grad, Dsc_FloatTensor:$key_grad,
                      Dsc_FloatTensor:$value_grad);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $grad attr-dict `:` type($query)
  }];
}

def Dsc_AttentionLseOp : Dsc_ComputeOp<"attention_lse",
    [AllTypesMatch<["query", "key", "value", "result"]>]> {
  let summary = "Attention that saves its rows' logsumexp for the backward "
                "(fused)";
  let description = [{
    `dsc.attention`, and `lse[b, h, i]`, the logsumexp of query row `i`'s
    scaled, masked scores in head `h` (f32; f64 for f64 operands), which the
    forward computes anyway. `--dsc-fuse` makes it from a `dsc.attention`
    whose gradient `dsc.attention_grad` is in the same block, which becomes
    `dsc.attention_grad_lse` reading `lse` and the output instead of
    computing them again (FlashAttention-2 saves the same statistics).

    ```mlir
    %o, %lse = dsc.attention_lse %q, %k, %v {num_heads = 4 : i64, causal}
        : tensor<2x8x64xf32>, tensor<2x4x8xf32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$query, Dsc_FloatTensor:$key,
                       Dsc_FloatTensor:$value, I64Attr:$num_heads,
                       UnitAttr:$causal,
                       DefaultValuedAttr<F64Attr, "0.0">:$dropout,
                       DefaultValuedAttr<I64Attr, "0">:$seed,
                       OptionalAttr<StrArrayAttr>:$head_axes,
                       DefaultValuedAttr<I64Attr, "0">:$window);
  let results = (outs Dsc_FloatTensor:$result, Dsc_FloatTensor:$lse);
  let assemblyFormat = [{
    $query `,` $key `,` $value attr-dict `:` type($result) `,` type($lse)
  }];
  let hasVerifier = 1;
}

def Dsc_AttentionGradLseOp : Dsc_ComputeOp<"attention_grad_lse",
    [AllTypesMatch<["query", "key", "value", "grad", "output", "query_grad",
                    "key_grad", "value_grad"]>]> {
  let summary = "Gradients of attention from its saved output and logsumexp "
                "(fused)";
  let description = [{
    `dsc.attention_grad`, reading the forward's `output` and `lse`
    (`dsc.attention_lse`'s results) instead of computing them again: the
    probabilities are `exp(s - lse)` block by block, and the softmax
    backward's row terms `D_i = dO_i · o_i` come from the output where a
    kernel wants them (the CPU's take `rowsum(P ∘ dP)`, equal in exact
    arithmetic). Attributes are the forward's.

    ```mlir
    %dq, %dk, %dv = dsc.attention_grad_lse %q, %k, %v, %dout, %o, %lse
        {num_heads = 4 : i64, causal} : tensor<2x8x64xf32>, tensor<2x4x8xf32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$query, Dsc_FloatTensor:$key,
                       Dsc_FloatTensor:$value, Dsc_FloatTensor:$grad,
                       Dsc_FloatTensor:$output, Dsc_FloatTensor:$lse,
                       I64Attr:$num_heads, UnitAttr:$causal,
                       DefaultValuedAttr<F64Attr, "0.0">:$dropout,
                       DefaultValuedAttr<I64Attr, "0">:$seed,
                       OptionalAttr<StrArrayAttr>:$head_axes,
                       DefaultValuedAttr<I64Attr, "0">:$window);
  let results = (outs Dsc_FloatTensor:$query_grad, Dsc_FloatTensor:$key_grad,
                      Dsc_FloatTensor:$value_grad);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $grad `,` $output `,` $lse attr-dict `:`
    type($query) `,` type($lse)
  }];
  let hasVerifier = 1;
}

def Dsc_CrossEntropyGradOp : Dsc_ComputeOp<"cross_entropy_grad",
    [AllTypesMatch<["logits", "result"]>]> {
  let summary = "Gradient of the mean cross-entropy with respect to logits";
  let description = [{
    `dlogits = (softmax(logits) − onehot(targets)) · dloss / tokens`, the
    softmax over the first `classes` columns (0: all); the columns past them
    (a padded vocabulary's) get zero.

    ```mlir
    %dl = dsc.cross_entropy_grad %logits, %targets, %dloss
        : tensor<2x8x256xf32>, tensor<2x8xi32>, tensor<f32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$logits, Dsc_IndexTensor:$targets,
                       0DTensorOf<[F16, BF16, F32, F64]>:$grad,
                       DefaultValuedAttr<I64Attr, "0">:$classes);
  let results = (outs Dsc_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $targets `,` $grad attr-dict `:` type($logits) `,` type($targets) `,` type($grad)
  }];
  let hasVerifier = 1;
}

def Dsc_SliceGradOp : Dsc_ComputeOp<"slice_grad"> {
  let summary = "Gradient of a static slice";
  let description = [{
    A zero tensor of the result type (the sliced input's type) with `grad`
    placed at `offsets`.

    ```mlir
    %dx = dsc.slice_grad %dq [0, 0, 0] : tensor<2x8x64xf32> -> tensor<2x8x192xf32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$grad, DenseI64ArrayAttr:$offsets);
  let results = (outs Dsc_FloatTensor:$result);
  let assemblyFormat = [{
    $grad $offsets attr-dict `:` type($grad) `->` type($result)
  }];
  let hasVerifier = 1;
}

#endif // DSC_DIALECT_DSC_IR_DSCGRADOPS_TD
