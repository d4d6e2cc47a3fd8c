//===- DscInferenceOps.td - inference programs' ops --------*- tablegen -*-===//
//
// The ops of an inference plan's programs (--dsc-compile-inference): a
// forward over a flat list of token rows, each row a (sequence, position)
// pair, so that one program runs prefill chunks of several prompts and
// decode steps of many sequences alike (DeepSpeed-FastGen's token budget,
// vLLM's flattened batch). The keys and values live in a paged cache
// (dsc.kv_cache): fixed-size blocks, a block table per sequence. The
// program samples the next tokens itself (dsc.sample). docs/inference.md
// has the arithmetic and the sources.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_DIALECT_DSC_IR_DSCINFERENCEOPS_TD
#define DSC_DIALECT_DSC_IR_DSCINFERENCEOPS_TD

def Dsc_KvCacheOp : Dsc_Op<"kv_cache", [Symbol,
    HasParent<"::mlir::ModuleOp">]> {
  let summary = "Declares one attention layer's paged key/value cache";
  let description = [{
    Persistent device memory for the keys and values of one attention
    layer: `[blocks, 2, block_size, kv_heads, head_dim]`, a block holding
    `block_size` consecutive positions of one sequence, keys then values.
    Sequences own blocks through the block table the programs take; the
    memory planner places the cache next to the weights, so a plan that
    compiles has room for every block it states.

    ```mlir
    dsc.kv_cache @kv.0 : tensor<64x2x16x2x8xf32>
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<Dsc_FloatTensor>:$type);
  let assemblyFormat = "$sym_name `:` $type attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
    int64_t getBlocks() { return getTensorType().getDimSize(0); }
    int64_t getBlockSize() { return getTensorType().getDimSize(2); }
    int64_t getKvHeads() { return getTensorType().getDimSize(3); }
    int64_t getHeadDim() { return getTensorType().getDimSize(4); }
  }];
}

def Dsc_PagedAttentionOp : Dsc_Op<"paged_attention", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    DeclareOpInterfaceMethods<Dsc_CostOpInterface>,
    MemoryEffects<[MemRead, MemWrite]>,
    AllTypesMatch<["query", "result"]>, AllTypesMatch<["key", "value"]>,
    AllTypesMatch<["positions", "sequences"]>]> {
  let summary = "Causal attention of token rows over a paged KV cache";
  let description = [{
    `query` is `[1, N, num_heads * d]`, `key` and `value` `[1, N,
    num_kv_heads * d]`: the projections of N token rows. Row i belongs to
    sequence `sequences[i]` (a row of `block_table`, or -1 for an unused
    row) at position `positions[i]`. The op first writes every row's key
    and value into `cache` at block `block_table[s][p / block_size]`, slot
    `p % block_size`; then each row attends causally over its sequence's
    positions `0 .. p` (`p - window + 1 .. p` with a sliding `window`) read
    from the cache, query head h using key head `h / (num_heads /
    num_kv_heads)` (grouped-query attention), scaled by `1/sqrt(d)`. Rows
    of one sequence in one call see each other's keys as a causal
    attention over the whole sequence would. Unused rows give zeros.

    A position past the block table's width, a block id outside the cache,
    or a sequence id outside the table is a runtime error naming the
    numbers; the generation driver never asks for one (it refuses the
    request first).

    ```mlir
    %a = dsc.paged_attention %q, %k, %v, %pos, %seq, %table
        {cache = @kv.0, num_heads = 4 : i64, num_kv_heads = 2 : i64}
        : tensor<1x64x32xf32>, tensor<1x64x16xf32>, tensor<64xi32>,
          tensor<8x8xi32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$query, Dsc_FloatTensor:$key,
                       Dsc_FloatTensor:$value, 1DTensorOf<[I32]>:$positions,
                       1DTensorOf<[I32]>:$sequences,
                       2DTensorOf<[I32]>:$block_table,
                       FlatSymbolRefAttr:$cache, I64Attr:$num_heads,
                       I64Attr:$num_kv_heads,
                       DefaultValuedAttr<I64Attr, "0">:$window);
  let results = (outs Dsc_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $positions `,` $sequences `,` $block_table
    attr-dict `:` type($query) `,` type($key) `,` type($positions) `,`
    type($block_table)
  }];
  let hasVerifier = 1;
}

def Dsc_RotaryAtOp : Dsc_ComputeOp<"rotary_at",
    [AllTypesMatch<["input", "result"]>]> {
  let summary = "Rotary position embedding at given positions";
  let description = [{
    dsc.rotary (same pairing, angles and `rotary_dims`) of `[1, N, heads *
    head_dim]` token rows, row i rotated by the angle of `positions[i]`
    instead of its index: the inference programs' rows are tokens of many
    sequences at many positions.

    ```mlir
    %r = dsc.rotary_at %q, %pos {head_dim = 8 : i64, rotary_dims = 8 : i64}
        : tensor<1x64x32xf32>, tensor<64xi32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$input, 1DTensorOf<[I32]>:$positions,
                       I64Attr:$head_dim, I64Attr:$rotary_dims,
                       DefaultValuedAttr<F64Attr, "10000.0">:$base);
  let results = (outs Dsc_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $positions attr-dict `:` type($input) `,` type($positions)
  }];
  let hasVerifier = 1;
}

def Dsc_PositionEmbeddingAtOp : Dsc_ComputeOp<"position_embedding_at"> {
  let summary = "Learned position embeddings of given positions";
  let description = [{
    Row `positions[i]` of the `[P, H]` table for each of N token rows, as
    `[1, N, H]` (GPT-2's `wpe` in an inference program).

    ```mlir
    %p = dsc.position_embedding_at %wpe, %pos
        : tensor<128x32xf32>, tensor<64xi32> -> tensor<1x64x32xf32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$table, 1DTensorOf<[I32]>:$positions);
  let results = (outs Dsc_FloatTensor:$result);
  let assemblyFormat = [{
    $table `,` $positions attr-dict `:` type($table) `,` type($positions)
    `->` type($result)
  }];
  let hasVerifier = 1;
}

def Dsc_GatherRowsOp : Dsc_ComputeOp<"gather_rows"> {
  let summary = "The token rows whose next token is sampled";
  let description = [{
    `[1, R, H]` from `[1, N, H]`: row j is `input`'s row `rows[j]`, zeros
    when `rows[j]` is -1. The programs gather the last row of each
    sequence before the output projection, so the vocabulary-wide product
    runs on R rows, not N.

    ```mlir
    %h = dsc.gather_rows %x, %rows
        : tensor<1x64x32xf32>, tensor<8xi32> -> tensor<1x8x32xf32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$input, 1DTensorOf<[I32]>:$rows);
  let results = (outs Dsc_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $rows attr-dict `:` type($input) `,` type($rows) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def Dsc_SampleOp : Dsc_ComputeOp<"sample"> {
  let summary = "The next token of each row, GPT-NeoX's way";
  let description = [{
    `logits` is `[P, R, V/P]`: R rows' logits over V classes in P shards of
    consecutive columns (P = 1, or the tensor-parallel ranks' vocabulary
    columns gathered along dimension 0); `params` is `[R, 3]` f32
    (temperature, top_k, top_p) and `uniforms` `[R]` f32 draws in [0, 1).
    Per row, as GPT-NeoX's `generate_samples_from_prompt`: greedy (the first
    largest logit) when temperature, top_k and top_p are all 0; otherwise
    the logits are divided by the temperature (when > 0) in f32, every
    logit below the `top_k`-th largest set to -inf (when > 0; ties kept),
    then every token past the shortest prefix of the descending
    probabilities whose sum exceeds `top_p` (when > 0), softmax, and the
    token is the first whose cumulative probability exceeds the draw.
    Columns at and past `classes` (when not 0: the padded vocabulary rows)
    are never chosen.

    ```mlir
    %next = dsc.sample %logits, %params, %u {classes = 50257 : i64}
        : tensor<2x8x25152xf32>, tensor<8x3xf32>, tensor<8xf32>
          -> tensor<8xi32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$logits, 2DTensorOf<[F32]>:$params,
                       1DTensorOf<[F32]>:$uniforms,
                       DefaultValuedAttr<I64Attr, "0">:$classes);
  let results = (outs 1DTensorOf<[I32]>:$result);
  let assemblyFormat = [{
    $logits `,` $params `,` $uniforms attr-dict `:` type($logits) `,`
    type($params) `,` type($uniforms) `->` type($result)
  }];
  let hasVerifier = 1;
}

#endif // DSC_DIALECT_DSC_IR_DSCINFERENCEOPS_TD
