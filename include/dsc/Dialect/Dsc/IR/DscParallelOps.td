//===- DscParallelOps.td - tensor-slicing ops --------------*- tablegen -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The ops that Megatron-LM's tensor slicing adds to a forward graph besides
// `dsc.all_reduce`: the identity whose gradient is all-reduced (Megatron's
// f), and the vocabulary-parallel embedding and cross-entropy, which keep
// only a rank's rows of the vocabulary so that no rank holds full logits.
// Autodiff derives the backward's collectives from their rules.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_DIALECT_DSC_IR_DSCPARALLELOPS_TD
#define DSC_DIALECT_DSC_IR_DSCPARALLELOPS_TD

def Dsc_CopyToParallelOp : Dsc_CollectiveOp<"copy_to_parallel",
    [Pure, AllTypesMatch<["input", "result"]>,
     DeclareOpInterfaceMethods<Dsc_DifferentiableOpInterface>]> {
  let summary = "Enters a tensor-parallel region: identity, gradient all-reduced";
  let description = [{
    Megatron-LM's `f`: the value is replicated over the group and flows
    unchanged into a column-parallel product; each rank's branch then
    contributes a part of the input's gradient, so the gradient is the sum
    over the group (an all-reduce in the backward). Its partner, the
    `dsc.all_reduce` after a row-parallel product, is `g`: a sum forward and
    the identity backward.

    ```mlir
    %x1 = dsc.copy_to_parallel %x on @mesh axes = ["tp"] : tensor<4x64x768xf32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$mesh_axes);
  let results = (outs Dsc_FloatTensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh `axes` `=` $mesh_axes attr-dict `:` type($result)
  }];
}

def Dsc_ScatterToParallelOp : Dsc_CollectiveOp<"scatter_to_parallel",
    [Pure, DeclareOpInterfaceMethods<Dsc_DifferentiableOpInterface>]> {
  let summary = "Keeps this rank's chunk of a replicated tensor";
  let description = [{
    Megatron-LM's `scatter_to_sequence_parallel_region`: `input` is the
    same on every rank of the group; rank `i` keeps the `i`-th of `n` equal
    chunks along `dim` (no communication). Its gradient is the all-gather
    of the chunks' gradients. Sequence parallelism enters its region with
    it after the embedding.

    ```mlir
    %x1 = dsc.scatter_to_parallel %x on @mesh axes = ["tp"] dim = 0
        : tensor<128x768xf32> -> tensor<64x768xf32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$mesh_axes, I64Attr:$dim);
  let results = (outs Dsc_FloatTensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh `axes` `=` $mesh_axes `dim` `=` $dim attr-dict
    `:` type($input) `->` type($result)
  }];
}

def Dsc_VocabParallelEmbeddingOp : Dsc_CollectiveOp<"vocab_parallel_embedding",
    [Pure, DeclareOpInterfaceMethods<Dsc_DifferentiableOpInterface>]> {
  let summary = "Embedding lookup in one rank's rows of the vocabulary";
  let description = [{
    `table` is rows `[i·R, (i+1)·R)` of the whole `[R·n, H]` table, where
    `i` is the rank's index in the group of `mesh_axes` (`n` ranks). A token
    in those rows gets its row, any other token zeros, so the sum over the
    group (a following `dsc.all_reduce`) is the whole table's lookup. An id
    outside `[0, R·n)` is a runtime error.

    ```mlir
    %x = dsc.vocab_parallel_embedding %wte, %ids on @mesh axes = ["tp"]
        : tensor<128x768xf32>, tensor<4x64xi32> -> tensor<4x64x768xf32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$table, Dsc_IndexTensor:$ids,
                       FlatSymbolRefAttr:$mesh, StrArrayAttr:$mesh_axes);
  let results = (outs Dsc_FloatTensor:$result);
  let assemblyFormat = [{
    $table `,` $ids `on` $mesh `axes` `=` $mesh_axes attr-dict `:` type($table) `,` type($ids) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Dsc_VocabParallelEmbeddingGradOp
    : Dsc_CollectiveOp<"vocab_parallel_embedding_grad",
    [Pure]> {
  let summary = "Gradient of one rank's rows of an embedding table";
  let description = [{
    Scatter-adds the rows of `grad` whose token lies in this rank's rows of
    the vocabulary (see `dsc.vocab_parallel_embedding`) into a zero table of
    the result type; the other tokens belong to other ranks.

    ```mlir
    %dw = dsc.vocab_parallel_embedding_grad %dy, %ids on @mesh axes = ["tp"]
        : tensor<4x64x768xf32>, tensor<4x64xi32> -> tensor<128x768xf32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$grad, Dsc_IndexTensor:$ids,
                       FlatSymbolRefAttr:$mesh, StrArrayAttr:$mesh_axes);
  let results = (outs Dsc_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $ids `on` $mesh `axes` `=` $mesh_axes attr-dict `:` type($grad) `,` type($ids) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Dsc_VocabParallelCrossEntropyOp
    : Dsc_CollectiveOp<"vocab_parallel_cross_entropy",
    [DeclareOpInterfaceMethods<Dsc_DifferentiableOpInterface>]> {
  let summary = "Mean cross-entropy over logits split by vocabulary";
  let description = [{
    `logits` is `[..., R]`: this rank's columns `[i·R, (i+1)·R)` of the
    whole `[..., R·n]` logits (rank index `i` of `n` in the group of
    `mesh_axes`); `targets` holds ids of the whole vocabulary. The result is
    the whole cross-entropy's mean over tokens, on every rank of the group,
    computed as Megatron-LM does without gathering the logits: per token,
    an all-reduce of the maximum, one of the sum of exponentials and one of
    the target's logit (three all-reduces of `tokens` values). `classes`
    (0: all) counts the whole vocabulary's classes, as in
    `dsc.cross_entropy`: the global columns at and past it (a padded
    vocabulary's rows, which may fill a rank's columns whole) are left out.

    ```mlir
    %loss = dsc.vocab_parallel_cross_entropy %logits, %targets on @mesh axes = ["tp"]
        : tensor<4x64x128xf32>, tensor<4x64xi32> -> tensor<f32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$logits, Dsc_IndexTensor:$targets,
                       FlatSymbolRefAttr:$mesh, StrArrayAttr:$mesh_axes,
                       DefaultValuedAttr<I64Attr, "0">:$classes);
  let results = (outs 0DTensorOf<[F32, F64]>:$result);
  let assemblyFormat = [{
    $logits `,` $targets `on` $mesh `axes` `=` $mesh_axes attr-dict `:` type($logits) `,` type($targets) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Dsc_VocabParallelCrossEntropyGradOp
    : Dsc_CollectiveOp<"vocab_parallel_cross_entropy_grad",
    [AllTypesMatch<["logits", "result"]>]> {
  let summary = "Gradient of the vocabulary-parallel cross-entropy";
  let description = [{
    This rank's columns of `(softmax(logits) − onehot(targets)) · dloss /
    tokens`, with the softmax over the whole vocabulary: the per-token
    maximum and sum of exponentials are all-reduced over the group again
    (two all-reduces of `tokens` values) rather than kept from the forward.
    The global columns at and past `classes` (when not 0) get zero.

    ```mlir
    %dl = dsc.vocab_parallel_cross_entropy_grad %logits, %targets, %dloss on @mesh axes = ["tp"]
        : tensor<4x64x128xf32>, tensor<4x64xi32>, tensor<f32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$logits, Dsc_IndexTensor:$targets,
                       0DTensorOf<[F32, F64]>:$grad, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$mesh_axes,
                       DefaultValuedAttr<I64Attr, "0">:$classes);
  let results = (outs Dsc_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $targets `,` $grad `on` $mesh `axes` `=` $mesh_axes attr-dict `:` type($logits) `,` type($targets) `,` type($grad)
  }];
  let hasVerifier = 1;
}

#endif // DSC_DIALECT_DSC_IR_DSCPARALLELOPS_TD
