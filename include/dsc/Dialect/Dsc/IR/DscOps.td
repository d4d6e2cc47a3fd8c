//===- DscOps.td - dsc operations --------------------------*- tablegen -*-===//
//
// The ops of the dsc dialect: parameters, the transformer graph ops, and the
// parallel vocabulary (mesh, sharding, collectives, tier transfers, stages).
//
//===----------------------------------------------------------------------===//

#ifndef DSC_DIALECT_DSC_IR_DSCOPS_TD
#define DSC_DIALECT_DSC_IR_DSCOPS_TD

include "dsc/Dialect/Dsc/IR/DscBase.td"
include "dsc/Dialect/Dsc/IR/DscAttrs.td"
include "dsc/Dialect/Dsc/IR/DscInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/IR/OpBase.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

// A pure compute op of the graph with a cost.
class Dsc_ComputeOp<string mnemonic, list<Trait> traits = []>
    : Dsc_Op<mnemonic, !listconcat(traits,
          [Pure, DeclareOpInterfaceMethods<Dsc_CostOpInterface>])>;

// A forward graph op: a compute op that --dsc-autodiff can differentiate.
class Dsc_GraphOp<string mnemonic, list<Trait> traits = []>
    : Dsc_ComputeOp<mnemonic, !listconcat(traits,
          [DeclareOpInterfaceMethods<Dsc_DifferentiableOpInterface>])>;

//===----------------------------------------------------------------------===//
// Parameters
//===----------------------------------------------------------------------===//

def Dsc_ParameterOp : Dsc_Op<"parameter", [Symbol, HasParent<"::mlir::ModuleOp">]> {
  let summary = "Declares a trainable parameter";
  let description = [{
    A parameter of the model: its stable dotted name (used by checkpoints,
    reports and sharding plans), its tensor type and its initializer.
    Functions read it with `dsc.get_parameter`. With a `layout` (set by
    tensor slicing and ZeRO-3), the type is this rank's part of the whole
    parameter the layout describes.

    `in host` or `in nvme` (ZeRO-Infinity's parameter offload, set by
    `--dsc-offload="params=..."`) keeps a ZeRO-3 chunk off the device:
    functions copy it in with `dsc.fetch_parameter` and gather the copy,
    and the update runs where it lives.

    ```mlir
    dsc.parameter @h.0.attn.qkv.weight : tensor<768x2304xf32>
        init = #dsc.init<normal, std = 2.000000e-02>
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<Dsc_FloatTensor>:$type,
                       Dsc_InitAttr:$init,
                       OptionalAttr<Dsc_ShardLayoutAttr>:$layout,
                       DefaultValuedProp<EnumProp<Dsc_MemoryTier>,
                                         "::mlir::dsc::MemoryTier::Device">:$tier);
  let assemblyFormat = [{
    $sym_name `:` $type `init` `=` $init (`layout` `=` $layout^)?
    (`in` $tier^)? attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
    /// Number of scalar elements of the parameter.
    int64_t getNumElements() { return getTensorType().getNumElements(); }
    /// Number of elements of the whole parameter its layout describes (the
    /// parameter's own count without a layout).
    int64_t getWholeNumElements();
    /// Whether this rank stores a ZeRO-3 chunk (the layout has chunk axes),
    /// which functions read with dsc.gather_parameter.
    bool isChunked();
  }];
}

def Dsc_GetParameterOp : Dsc_Op<"get_parameter",
    [Pure, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Reads a parameter's current value";
  let description = [{
    ```mlir
    %w = dsc.get_parameter @h.0.attn.qkv.weight : tensor<768x2304xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$name);
  let results = (outs Dsc_FloatTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Graph ops
//===----------------------------------------------------------------------===//

def Dsc_EmbeddingOp : Dsc_GraphOp<"embedding"> {
  let summary = "Token embedding lookup";
  let description = [{
    Gathers rows of `table` (`V x H`) by the integer `ids`; the result has
    shape `ids.shape + [H]`. An id outside `[0, V)` is a runtime error.

    ```mlir
    %x = dsc.embedding %wte, %ids
        : tensor<50304x768xf32>, tensor<4x1024xi32> -> tensor<4x1024x768xf32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$table, Dsc_IndexTensor:$ids);
  let results = (outs Dsc_FloatTensor:$result);
  let assemblyFormat = [{
    $table `,` $ids attr-dict `:` type($table) `,` type($ids) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Dsc_PositionEmbeddingOp : Dsc_GraphOp<"position_embedding"> {
  let summary = "Learned absolute position embedding";
  let description = [{
    Takes the first `S` rows of the position table (`P x H`, `S <= P`) and
    broadcasts them over the batch: `result[b, s, :] = table[s, :]`.

    ```mlir
    %p = dsc.position_embedding %wpe : tensor<1024x768xf32> -> tensor<4x64x768xf32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$table);
  let results = (outs Dsc_FloatTensor:$result);
  let assemblyFormat = "$table attr-dict `:` type($table) `->` type($result)";
  let hasVerifier = 1;
}

def Dsc_MatmulOp : Dsc_GraphOp<"matmul"> {
  let summary = "Batched matrix product with transpose flags";
  let description = [{
    `result[..., m, n] = sum_k op(lhs)[..., m, k] * op(rhs)[..., k, n]`, where
    `op` transposes the two innermost dimensions when the matching flag is
    set. `lhs` has rank >= 2; `rhs` either has the same batch dimensions as
    `lhs` or is a rank-2 matrix shared by every batch element (a weight).
    Cost: 2·batch·M·N·K FLOPs.

    ```mlir
    %y = dsc.matmul %x, %w : tensor<4x64x768xf32>, tensor<768x2304xf32>
        -> tensor<4x64x2304xf32>
    %logits = dsc.matmul %h, %wte {transpose_rhs}
        : tensor<4x64x768xf32>, tensor<50304x768xf32> -> tensor<4x64x50304xf32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$lhs, Dsc_FloatTensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs Dsc_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
  let hasVerifier = 1;
}

class Dsc_BinaryElementwiseOp<string mnemonic, string what>
    : Dsc_GraphOp<mnemonic, [SameOperandsAndResultType]> {
  let summary = "Elementwise " # what;
  let description = [{
    Both operands and the result have the same shape and element type.

    ```mlir
    %z = dsc.}] # mnemonic # [{ %x, %y : tensor<4x64x768xf32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$lhs, Dsc_FloatTensor:$rhs);
  let results = (outs Dsc_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
}

def Dsc_AddOp : Dsc_BinaryElementwiseOp<"add", "sum">;
def Dsc_MulOp : Dsc_BinaryElementwiseOp<"mul", "product">;

def Dsc_BiasAddOp : Dsc_GraphOp<"bias_add", [AllTypesMatch<["input", "result"]>]> {
  let summary = "Adds a bias vector along the last dimension";
  let description = [{
    `result[..., n] = input[..., n] + bias[n]`.

    ```mlir
    %y = dsc.bias_add %x, %b : tensor<4x64x2304xf32>, tensor<2304xf32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$input, Dsc_FloatTensor:$bias);
  let results = (outs Dsc_FloatTensor:$result);
  let assemblyFormat = "$input `,` $bias attr-dict `:` type($input) `,` type($bias)";
  let hasVerifier = 1;
}

def Dsc_GeluOp : Dsc_GraphOp<"gelu", [SameOperandsAndResultType]> {
  let summary = "GELU activation, tanh approximation or exact";
  let description = [{
    `0.5·x·(1 + tanh(sqrt(2/π)·(x + 0.044715·x³)))`, the form GPT-2 and
    Megatron-LM use (transformers' `gelu_new`); with `exact`,
    `0.5·x·(1 + erf(x/√2))` (torch's default `F.gelu`, transformers'
    `gelu`, what GPT-NeoX computes without `bias_gelu_fusion`).

    ```mlir
    %y = dsc.gelu %x : tensor<4x64x3072xf32>
    %z = dsc.gelu %x {exact} : tensor<4x64x3072xf32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$input, UnitAttr:$exact);
  let results = (outs Dsc_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Dsc_LayerNormOp : Dsc_GraphOp<"layer_norm",
    [AllTypesMatch<["input", "result"]>]> {
  let summary = "Layer normalization over the last dimension";
  let description = [{
    `(x - mean) / sqrt(var + epsilon) * gamma + beta` over the last
    dimension; `gamma` and `beta` are vectors of the last dimension's size.

    ```mlir
    %y = dsc.layer_norm %x, %g, %b {epsilon = 1.000000e-05 : f64}
        : tensor<4x64x768xf32>, tensor<768xf32>, tensor<768xf32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$input, Dsc_FloatTensor:$gamma,
                       Dsc_FloatTensor:$beta,
                       DefaultValuedAttr<F64Attr, "1.0e-5">:$epsilon);
  let results = (outs Dsc_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $gamma `,` $beta attr-dict `:` type($input) `,` type($gamma) `,` type($beta)
  }];
  let hasVerifier = 1;
}

def Dsc_RmsNormOp : Dsc_GraphOp<"rms_norm",
    [AllTypesMatch<["input", "result"]>]> {
  let summary = "Root-mean-square normalization over the last dimension";
  let description = [{
    `x / sqrt(mean(x²) + epsilon) * gamma` over the last dimension (Zhang
    and Sennrich 2019; Llama and Mistral, as transformers computes it), or
    with `epsilon_outside_sqrt`, `x / (sqrt(mean(x²)) + epsilon) * gamma`,
    which is what GPT-NeoX's own `norm: rmsnorm` computes. `gamma` is a
    vector of the last dimension's size; there is no mean subtraction and
    no bias.

    ```mlir
    %y = dsc.rms_norm %x, %g {epsilon = 1.000000e-06 : f64}
        : tensor<4x64x768xf32>, tensor<768xf32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$input, Dsc_FloatTensor:$gamma,
                       DefaultValuedAttr<F64Attr, "1.0e-6">:$epsilon,
                       UnitAttr:$epsilon_outside_sqrt);
  let results = (outs Dsc_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $gamma attr-dict `:` type($input) `,` type($gamma)
  }];
  let hasVerifier = 1;
}

def Dsc_RotaryOp : Dsc_GraphOp<"rotary", [SameOperandsAndResultType]> {
  let summary = "Rotary position embedding of each attention head";
  let description = [{
    Rotates the queries or keys of every head by their position (Su et al.
    2021). The input is `[..., seq, heads * head_dim]`, heads contiguous in
    the last dimension as the attention op reads them, and the position of
    a row is its index along the sequence dimension. In each head the first
    `rotary_dims` features are rotated in pairs `(i, i + rotary_dims/2)`
    (the "rotate_half" pairing of GPT-NeoX, Llama and transformers) by the
    angle `position * base^(-2i / rotary_dims)`; the others pass unchanged
    (GPT-NeoX's partial rotary, `rotary_pct`). With `inverse` the rotation
    goes the other way: that is the op's own gradient, as a rotation's
    transpose is its inverse.

    Because the op works head by head, it is the same on a tensor-parallel
    rank's heads as on the whole model's.

    ```mlir
    %q = dsc.rotary %x {head_dim = 64 : i64, rotary_dims = 16 : i64,
                        base = 1.000000e+04 : f64} : tensor<4x64x768xf32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$input, I64Attr:$head_dim,
                       I64Attr:$rotary_dims,
                       DefaultValuedAttr<F64Attr, "10000.0">:$base,
                       UnitAttr:$inverse);
  let results = (outs Dsc_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Dsc_SwigluOp : Dsc_GraphOp<"swiglu"> {
  let summary = "Gated MLP activation: up * silu(gate)";
  let description = [{
    The SwiGLU of Shazeer 2020 (Llama, Mistral, GPT-NeoX's `activation:
    swiglu`) on the fused output of the MLP's first projection. The input's
    last dimension is `[up | gate]`, each half `f` wide (GPT-NeoX's
    `x, gate = x.chunk(2)`), and the result is `up * gate * sigmoid(gate)`,
    `f` wide. Under tensor slicing each rank's input holds its own columns
    of both halves, so the op is the same on a rank's columns.

    ```mlir
    %y = dsc.swiglu %x : tensor<4x64x22016xf32> -> tensor<4x64x11008xf32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$input);
  let results = (outs Dsc_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Dsc_RepeatHeadsOp : Dsc_GraphOp<"repeat_heads"> {
  let summary = "Repeats each key/value head for grouped-query attention";
  let description = [{
    Grouped-query attention (Ainslie et al. 2023; multi-query when there is
    one group): `[..., kv_heads * head_dim]` becomes `[..., kv_heads *
    repeats * head_dim]`, output head `j` a copy of input head
    `j / repeats`, so query head `h` attends with key/value head
    `h / (heads / kv_heads)`, as transformers' `repeat_kv` pairs them. Its
    gradient sums each group of `repeats` heads.

    ```mlir
    %k8 = dsc.repeat_heads %k {head_dim = 128 : i64, repeats = 4 : i64}
        : tensor<4x64x1024xf32> -> tensor<4x64x4096xf32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$input, I64Attr:$head_dim,
                       I64Attr:$repeats);
  let results = (outs Dsc_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Dsc_SoftmaxOp : Dsc_GraphOp<"softmax", [SameOperandsAndResultType]> {
  let summary = "Softmax over the last dimension";
  let description = [{
    Numerically stable softmax along the innermost dimension.

    ```mlir
    %p = dsc.softmax %x : tensor<4x12x64x64xf32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$input);
  let results = (outs Dsc_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Dsc_AttentionOp : Dsc_GraphOp<"attention",
    [AllTypesMatch<["query", "key", "value", "result"]>]> {
  let summary = "Fused multi-head (causal) self-attention";
  let description = [{
    `q`, `k` and `v` are `[B, S, H]`; the op splits `H` into `num_heads`
    heads of `H / num_heads`, computes `softmax(q·kᵀ / sqrt(H / num_heads))·v`
    per head (with a causal mask when `causal` is set, and attention dropout
    with probability `dropout`), and concatenates the heads back into
    `[B, S, H]`. Cost, as Megatron-LM counts it: 4·B·S²·H FLOPs for the two
    products (the causal mask is not subtracted).

    Under tensor slicing, `head_axes` names the mesh axes whose group splits
    the whole attention's heads: this rank's `num_heads` are the heads at
    its index in that group, so the dropout mask of each head is the one a
    single rank would draw for it.

    A causal attention with a `window` of W > 0 is Mistral's sliding window:
    query `t` sees keys `t - W + 1 .. t` (GPT-NeoX's
    `sliding_window_width`, transformers' `sliding_window`).

    ```mlir
    %a = dsc.attention %q, %k, %v {num_heads = 12 : i64, causal}
        : tensor<4x64x768xf32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$query, Dsc_FloatTensor:$key,
                       Dsc_FloatTensor:$value, I64Attr:$num_heads,
                       UnitAttr:$causal,
                       DefaultValuedAttr<F64Attr, "0.0">:$dropout,
                       DefaultValuedAttr<I64Attr, "0">:$seed,
                       OptionalAttr<StrArrayAttr>:$head_axes,
                       DefaultValuedAttr<I64Attr, "0">:$window);
  let results = (outs Dsc_FloatTensor:$result);
  let assemblyFormat = "$query `,` $key `,` $value attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Dsc_CrossEntropyOp : Dsc_GraphOp<"cross_entropy"> {
  let summary = "Mean softmax cross-entropy over tokens";
  let description = [{
    `logits` is `[..., V]` and `targets` is `logits.shape[:-1]` of class ids;
    the result is the mean over all tokens of `-log softmax(logits)[target]`,
    as an f32 scalar tensor (f64 for f64 logits, which the finite-difference
    checks use). Under mixed precision the logits are bf16 and the loss is
    still f32: the log-sum-exp and the mean over tokens are accumulated in
    f32, and the loss scalar seeds the backward.

    `classes`, when not 0, is how many of the `V` columns are classes: the
    columns at and past it are the rows GPT-NeoX pads the vocabulary with
    (to a multiple of `make_vocab_size_divisible_by` × model-parallel size).
    They are left out of the softmax, so they take no probability, never
    count in the loss and get a zero gradient; a target id at or past
    `classes` makes the loss NaN, as one past `V` does.

    ```mlir
    %loss = dsc.cross_entropy %logits, %targets
        : tensor<4x64x256xf32>, tensor<4x64xi32> -> tensor<f32>
    %loss16 = dsc.cross_entropy %logits16, %targets
        : tensor<4x64x256xbf16>, tensor<4x64xi32> -> tensor<f32>
    // A 250-token vocabulary padded to 256 rows.
    %padded = dsc.cross_entropy %logits, %targets {classes = 250 : i64}
        : tensor<4x64x256xf32>, tensor<4x64xi32> -> tensor<f32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$logits, Dsc_IndexTensor:$targets,
                       DefaultValuedAttr<I64Attr, "0">:$classes);
  let results = (outs 0DTensorOf<[F32, F64]>:$result);
  let assemblyFormat = [{
    $logits `,` $targets attr-dict `:` type($logits) `,` type($targets) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Dsc_ReshapeOp : Dsc_GraphOp<"reshape"> {
  let summary = "Reshape with the same number of elements";
  let description = [{
    ```mlir
    %y = dsc.reshape %x : tensor<4x64x768xf32> -> tensor<256x768xf32>
    ```
  }];
  let arguments = (ins Dsc_AnyTensor:$input);
  let results = (outs Dsc_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Dsc_TransposeOp : Dsc_GraphOp<"transpose"> {
  let summary = "Permutes the dimensions of a tensor";
  let description = [{
    `result.shape[i] = input.shape[permutation[i]]`.

    ```mlir
    %y = dsc.transpose %x [0, 2, 1] : tensor<4x64x768xf32> -> tensor<4x768x64xf32>
    ```
  }];
  let arguments = (ins Dsc_AnyTensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs Dsc_AnyTensor:$result);
  let assemblyFormat = [{
    $input $permutation attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Dsc_SliceOp : Dsc_GraphOp<"slice"> {
  let summary = "Static slice with unit strides";
  let description = [{
    `result = input[offsets[0] : offsets[0] + sizes[0], ...]`; the result's
    shape is `sizes`.

    ```mlir
    %q = dsc.slice %qkv [0, 0, 0] [4, 64, 768]
        : tensor<4x64x2304xf32> -> tensor<4x64x768xf32>
    ```
  }];
  let arguments = (ins Dsc_AnyTensor:$input, DenseI64ArrayAttr:$offsets,
                       DenseI64ArrayAttr:$sizes);
  let results = (outs Dsc_AnyTensor:$result);
  let assemblyFormat = [{
    $input $offsets $sizes attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Dsc_ConcatOp : Dsc_GraphOp<"concat"> {
  let summary = "Concatenates tensors along one dimension";
  let description = [{
    ```mlir
    %y = dsc.concat %a, %b {dim = 2 : i64}
        : tensor<4x64x768xf32>, tensor<4x64x768xf32> -> tensor<4x64x1536xf32>
    ```
  }];
  let arguments = (ins Variadic<Dsc_AnyTensor>:$inputs, I64Attr:$dim);
  let results = (outs Dsc_AnyTensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` type($inputs) `->` type($result)";
  let hasVerifier = 1;
}

def Dsc_DropoutOp : Dsc_GraphOp<"dropout", [SameOperandsAndResultType]> {
  let summary = "Inverted dropout with a deterministic mask";
  let description = [{
    Zeroes each element with probability `p` and scales the rest by
    `1 / (1 - p)`. The mask is a pure function of `seed`, the training step
    and the element index, so the backward pass and every rank of a parallel
    plan regenerate the same mask. With `shard_axes` (sequence parallelism)
    the input is the chunk at this rank's index, over the group of those
    mesh axes, of a tensor that many times larger, and the mask is that of
    its elements in the whole.

    ```mlir
    %y = dsc.dropout %x {p = 1.000000e-01 : f64, seed = 7 : i64} : tensor<4x64x768xf32>
    ```
  }];
  let arguments = (ins Dsc_FloatTensor:$input, F64Attr:$p,
                       DefaultValuedAttr<I64Attr, "0">:$seed,
                       OptionalAttr<StrArrayAttr>:$shard_axes);
  let results = (outs Dsc_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Dsc_CastOp : Dsc_GraphOp<"cast"> {
  let summary = "Converts a float tensor to another float element type";
  let description = [{
    Elementwise conversion between float element types of the same shape;
    a narrowing cast (to `bf16` or `f16`) rounds to nearest even.
    `--dsc-mixed-precision` casts each fp32 master weight to the compute
    type after it is read, and autodiff casts the gradient flowing back
    through it to the input's type, so gradients are accumulated in fp32.
    It is memory-bound: no FLOPs, the bytes of its input and its result.

    ```mlir
    %w = dsc.get_parameter @h.0.mlp.fc.weight : tensor<64x256xf32>
    %wb = dsc.cast %w : tensor<64x256xf32> to tensor<64x256xbf16>
    ```
  }];
  let arguments = (ins Dsc_AnyTensor:$input);
  let results = (outs Dsc_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Mesh and sharding
//===----------------------------------------------------------------------===//

def Dsc_MeshOp : Dsc_Op<"mesh", [Symbol, HasParent<"::mlir::ModuleOp">]> {
  let summary = "Declares a device mesh with named axes";
  let description = [{
    A logical grid of ranks. Each axis has a name and a size; the usual axes
    are `dp` (data parallel and ZeRO), `pp` (pipeline stages) and `tp`
    (tensor slicing), and more may be added (`ep`, `sp`). Ranks are laid out
    row-major with the last axis innermost, as Megatron-LM orders them (so
    `tp` listed last stays within a node).

    ```mlir
    dsc.mesh @mesh axes = ["dp", "pp", "tp"] shape = [2, 2, 2]
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrArrayAttr:$axes,
                       DenseI64ArrayAttr:$shape);
  let assemblyFormat = "$sym_name `axes` `=` $axes `shape` `=` $shape attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Index of the axis called `name`, or std::nullopt.
    std::optional<unsigned> getAxisIndex(::llvm::StringRef name);
    /// Total number of ranks in the mesh.
    int64_t getNumRanks();
  }];
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

// A collective over the ranks that differ only in the coordinates of
// `mesh_axes` (or a point-to-point transfer along one axis); all ranks of
// such a group must issue it in the same order, which
// --dsc-verify-collectives checks through CommunicationOpInterface.
class Dsc_CollectiveOp<string mnemonic, list<Trait> traits = []>
    : Dsc_Op<mnemonic, !listconcat(traits,
          [DeclareOpInterfaceMethods<SymbolUserOpInterface>,
           DeclareOpInterfaceMethods<Dsc_CommunicationOpInterface>])>;

def Dsc_AllReduceOp : Dsc_CollectiveOp<"all_reduce",
    [AllTypesMatch<["input", "result"]>,
     DeclareOpInterfaceMethods<Dsc_DifferentiableOpInterface>]> {
  let summary = "All-reduce over mesh axes";
  let description = [{
    Every rank of the group gets the reduction of the group's inputs. Its
    gradient (a sum or an average) is the result's gradient, unchanged or
    divided by the group size: the ops after it compute the same values on
    every rank of the group, so each rank already holds the whole gradient
    with respect to the reduced value (Megatron-LM's `g`, after a
    row-parallel product).

    ```mlir
    %g = dsc.all_reduce %g0 on @mesh axes = ["dp"] reduction = sum : tensor<768x768xf32>
    ```
  }];
  let arguments = (ins Dsc_AnyTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$mesh_axes,
                       DefaultValuedProp<EnumProp<Dsc_ReductionKind>,
                                         "::mlir::dsc::ReductionKind::Sum">:$reduction);
  let results = (outs Dsc_AnyTensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh `axes` `=` $mesh_axes (`reduction` `=` $reduction^)? attr-dict `:` type($result)
  }];
}

def Dsc_AllReduceStatesOp : Dsc_CollectiveOp<"all_reduce_states"> {
  let summary = "In-place all-reduce of persistent state (a gradient bucket)";
  let description = [{
    Reduces the named `dsc.state` buffers in place over the mesh axes, as
    one bucket: the runtime issues one collective over buffers that are
    contiguous in memory. Data parallelism averages the accumulated
    gradients over `dp` this way before the optimizer uses them.

    ```mlir
    dsc.all_reduce_states [@grad.h.0.mlp.fc.weight, @grad.h.0.mlp.fc.bias]
        on @mesh axes = ["dp"] reduction = avg
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

def Dsc_ReduceScatterOp : Dsc_CollectiveOp<"reduce_scatter",
    [DeclareOpInterfaceMethods<Dsc_DifferentiableOpInterface>]> {
  let summary = "Reduce-scatter over mesh axes";
  let description = [{
    Reduces `input` over the group and leaves rank `i` of the group with the
    `i`-th of `n` equal chunks along `scatter_dim`. Sequence parallelism's
    exit from a row-parallel product (Megatron-LM's
    `reduce_scatter_to_sequence_parallel_region`); a sum's gradient is the
    all-gather of the result's gradient.

    ```mlir
    %g = dsc.reduce_scatter %g0 on @mesh axes = ["dp"] scatter_dim = 0
        : tensor<768x768xf32> -> tensor<384x768xf32>
    ```
  }];
  let arguments = (ins Dsc_AnyTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$mesh_axes, I64Attr:$scatter_dim,
                       DefaultValuedProp<EnumProp<Dsc_ReductionKind>,
                                         "::mlir::dsc::ReductionKind::Sum">:$reduction);
  let results = (outs Dsc_AnyTensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh `axes` `=` $mesh_axes `scatter_dim` `=` $scatter_dim
    (`reduction` `=` $reduction^)? attr-dict `:` type($input) `->` type($result)
  }];
}

def Dsc_AllGatherOp : Dsc_CollectiveOp<"all_gather",
    [DeclareOpInterfaceMethods<Dsc_DifferentiableOpInterface>]> {
  let summary = "All-gather over mesh axes";
  let description = [{
    Concatenates the group's inputs along `gather_dim`, in group-rank order.
    Sequence parallelism's entry into a column-parallel product
    (`gather_from_sequence_parallel_region`): each rank's product then
    holds a part of the gathered value's gradient, so its gradient is the
    sum-reduce-scatter of the result's.

    ```mlir
    %w = dsc.all_gather %w0 on @mesh axes = ["dp"] gather_dim = 0
        : tensor<384x768xf32> -> tensor<768x768xf32>
    ```
  }];
  let arguments = (ins Dsc_AnyTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$mesh_axes, I64Attr:$gather_dim);
  let results = (outs Dsc_AnyTensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh `axes` `=` $mesh_axes `gather_dim` `=` $gather_dim attr-dict
    `:` type($input) `->` type($result)
  }];
}

def Dsc_AllToAllOp : Dsc_CollectiveOp<"all_to_all",
    [DeclareOpInterfaceMethods<Dsc_DifferentiableOpInterface>]> {
  let summary = "All-to-all over mesh axes";
  let description = [{
    Splits the input along `split_dim` into D equal parts (D the group
    size), sends part j to group rank j, and concatenates the parts it
    receives along `concat_dim`, in group-rank order: the result is the
    input with `split_dim` divided by D and `concat_dim` multiplied by D,
    times `scale` (default 1). Expert parallelism's dispatch (the slots of [E, C, h] go to the ranks
    holding their experts: split 0, concat 1, giving [E/D, D·C, h]) and
    combine (the inverse: split 1, concat 0).

    Its gradient is the transposed all-to-all (split and concat swapped) of
    the result's gradient, with scale `scale`·`grad_scale`: `grad_scale`
    (default 1) is a factor the gradient carries on purpose. Expert
    parallelism sets it: an expert's weight gradient sums the contributions
    of the D ranks whose tokens it saw, so the combine's gradient carries
    1/D into the experts and the dispatch's D back out of them, which
    leaves every token's gradient as it was (see docs/moe.md).

    ```mlir
    %r = dsc.all_to_all %x on @mesh axes = ["ep"] split_dim = 0 concat_dim = 1
        : tensor<4x8x64xf32> -> tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins Dsc_AnyTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$mesh_axes, I64Attr:$split_dim,
                       I64Attr:$concat_dim, OptionalAttr<F64Attr>:$scale,
                       OptionalAttr<F64Attr>:$grad_scale);
  let results = (outs Dsc_AnyTensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh `axes` `=` $mesh_axes `split_dim` `=` $split_dim
    `concat_dim` `=` $concat_dim (`scale` `=` $scale^)?
    (`grad_scale` `=` $grad_scale^)? attr-dict
    `:` type($input) `->` type($result)
  }];
}

def Dsc_GatherParameterOp : Dsc_CollectiveOp<"gather_parameter"> {
  let summary = "All-gathers a ZeRO-3 parameter chunk into a temporary";
  let description = [{
    Under ZeRO stage 3 a rank stores only its chunk of a parameter (the
    `dsc.parameter` has a layout with `chunk = [...]`). This op all-gathers
    the chunks of the group of `mesh_axes`, which must be the layout's chunk
    axes, in group-rank order into a new tensor: the rank's whole box of the
    parameter (the whole parameter when it is not tensor-sliced). The result
    is an ordinary temporary, so it dies after its last use and the memory
    planner reuses its bytes.

    `--dsc-data-parallel="zero=3"` puts one before the first forward use of
    each chunked parameter and, in `@forward_backward`, a second one before
    its first use in the backward, as DeepSpeed's stage 3 fetches a
    parameter before each use and releases it after. It is not `Pure`: two
    gathers of one parameter are two collectives every rank of the group
    must issue, and must not be merged or moved.

    ```mlir
    dsc.parameter @h.0.mlp.fc.weight : tensor<8192xf32>
        init = #dsc.init<normal, std = 2.000000e-02>
        layout = #dsc.layout<view = [64, 256], split = [[], []], chunk = ["dp"]>
    ...
    %w = dsc.gather_parameter @h.0.mlp.fc.weight on @mesh axes = ["dp"]
        : tensor<64x256xf32>
    ```

    A chunk offloaded to host memory or NVMe (`in host|nvme`) is gathered
    `from` the device copy a `dsc.fetch_parameter` made of it.
  }];
  let arguments = (ins FlatSymbolRefAttr:$name, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$mesh_axes,
                       Optional<Dsc_FloatTensor>:$chunk);
  let results = (outs Dsc_FloatTensor:$result);
  let assemblyFormat = [{
    $name (`from` $chunk^ `:` type($chunk))? `on` $mesh `axes` `=` $mesh_axes
    attr-dict `:` type($result)
  }];
}

def Dsc_SendOp : Dsc_CollectiveOp<"send"> {
  let summary = "Sends a tensor to another coordinate along one mesh axis";
  let description = [{
    Point-to-point send to the rank whose coordinate along `axis` is `peer`
    (all other coordinates equal). `tag` pairs a send with its `dsc.recv`.

    The general form of a message, along any axis, to any peer, with any
    tag: hand-written plans and the tests of `--dsc-verify-collectives`
    (cycles of three ranks, sends to oneself) use it. No pass creates it:
    pipeline stages exchange activations and their gradients with
    `dsc.pipeline_send` and `dsc.pipeline_recv`, whose peers are checked to
    be neighbouring stages and whose tag is the micro-batch, and which are
    the only messages the lowering to the runtime plan accepts.

    ```mlir
    dsc.send %act on @mesh axis = "pp" to 1 tag = 0 : tensor<4x64x768xf32>
    ```
  }];
  let arguments = (ins Dsc_AnyTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrAttr:$axis, I64Attr:$peer,
                       DefaultValuedAttr<I64Attr, "0">:$tag);
  let assemblyFormat = [{
    $input `on` $mesh `axis` `=` $axis `to` $peer (`tag` `=` $tag^)? attr-dict `:` type($input)
  }];
}

def Dsc_RecvOp : Dsc_CollectiveOp<"recv"> {
  let summary = "Receives a tensor from another coordinate along one mesh axis";
  let description = [{
    The receiving end of `dsc.send`: from the rank whose coordinate along
    `axis` is `peer`, the message of the same `tag`.

    ```mlir
    %act = dsc.recv on @mesh axis = "pp" from 0 tag = 0 : tensor<4x64x768xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$mesh, StrAttr:$axis, I64Attr:$peer,
                       DefaultValuedAttr<I64Attr, "0">:$tag);
  let results = (outs Dsc_AnyTensor:$result);
  let assemblyFormat = [{
    `on` $mesh `axis` `=` $axis `from` $peer (`tag` `=` $tag^)? attr-dict `:` type($result)
  }];
}

//===----------------------------------------------------------------------===//
// Memory tiers and overlap
//===----------------------------------------------------------------------===//

def Dsc_TransferOp : Dsc_Op<"transfer",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Copies a parameter or state into one in another memory tier";
  let description = [{
    `destination = source`, between two persistent declarations (dsc.parameter
    or dsc.state) of one element type whose tiers (a state's `in`, device
    when absent; a parameter's likewise) differ: `--dsc-offload` moves
    gradients down to where the update runs and the updated master weights
    back up. An NVMe state must be swapped in (`dsc.swap_in`) where it is
    transferred: the copy is its host staging.

    With `chunk on @mesh axes = [...]` one side is D times the other (D the
    group's size) and the transfer moves the chunk at this rank's index of
    the larger side's flattened elements: bandwidth-centric partitioning,
    each ZeRO rank moves only the 1/D it updates.

    ```mlir
    dsc.transfer @grad.wte.weight to @offload.grad.wte.weight
    dsc.transfer @offload.master.wte.weight to @wte.weight chunk on @mesh axes = ["dp"]
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$source, FlatSymbolRefAttr:$destination,
                       OptionalAttr<FlatSymbolRefAttr>:$mesh,
                       OptionalAttr<StrArrayAttr>:$chunk_axes);
  let assemblyFormat = [{
    $source `to` $destination (`chunk` `on` $mesh^ `axes` `=` $chunk_axes)?
    attr-dict
  }];
  let extraClassDeclaration = [{
    /// Bytes one transfer moves (the chunk with chunk axes).
    int64_t getBytes(::mlir::SymbolTableCollection &tables);
  }];
}

def Dsc_FetchParameterOp : Dsc_Op<"fetch_parameter",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Copies an offloaded ZeRO-3 chunk into a device temporary";
  let description = [{
    ZeRO-Infinity: the parameter's chunk is `in host` or `in nvme`; this op
    copies it (over PCIe, or from the NVMe file) into a new device
    temporary that a `dsc.gather_parameter ... from` then all-gathers. The
    temporary dies after the gather, so the device holds a chunk only
    between its fetch and its gather. `--dsc-offload` places each fetch one
    gather ahead (the next layer's chunk is read while the current one is
    gathered and used). Not `Pure`: the parameter changes every step.

    ```mlir
    %c = dsc.fetch_parameter @h.0.mlp.fc.weight : tensor<8192xf32>
    %w = dsc.gather_parameter @h.0.mlp.fc.weight from %c : tensor<8192xf32>
        on @mesh axes = ["dp"] : tensor<64x256xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$name);
  let results = (outs Dsc_FloatTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

def Dsc_SwapInOp : Dsc_Op<"swap_in",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Reads NVMe states into host staging (ZeRO-Infinity)";
  let description = [{
    Each named state (or ZeRO-3 parameter chunk) is `in nvme`; from here
    to the `dsc.swap_out` that names it, ops use its host staging copy, read from the NVMe file here.
    `--dsc-plan-memory` gives each staging its bytes in the host arena for
    that span (the next parameter's swap-in before the current update is
    the prefetch that overlaps the update).

    ```mlir
    dsc.swap_in [@adam.m.wte.weight, @adam.v.wte.weight]
    ```
  }];
  let arguments = (ins SymbolRefArrayAttr:$states);
  let assemblyFormat = "$states attr-dict";
}

def Dsc_SwapOutOp : Dsc_Op<"swap_out",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Writes NVMe states back from their host staging";
  let description = [{
    Ends the span a `dsc.swap_in` began: the staging copies of the named
    `in nvme` states are written to the NVMe file and their host bytes are
    free again.

    ```mlir
    dsc.swap_out [@adam.m.wte.weight, @adam.v.wte.weight]
    ```
  }];
  let arguments = (ins SymbolRefArrayAttr:$states);
  let assemblyFormat = "$states attr-dict";
}

def Dsc_OverlapNextStepOp : Dsc_Op<"overlap_next_step"> {
  let summary = "The rest of the update runs beside the next step "
                "(ZeRO-Offload's delayed parameter update)";
  let description = [{
    In the optimizer program of `--dsc-offload="optimizer=host dpu=1"`:
    the ops after it, the AdamW updates of the masters in host memory, run
    beside the next step's forward and backward instead of before them.
    Before it, each parameter received its master as the previous step's
    update left it, so the next forward and backward use parameters one
    step stale (Ren et al. 2021, section 5.2). Only `dsc.adamw` may follow
    it.

    ```mlir
    dsc.transfer @offload.master.p to @p
    dsc.zero [@grad.p]
    dsc.overlap_next_step
    dsc.adamw @offload.master.p grad = @offload.grad.p ...
    return %norm, %lr : tensor<f32>, tensor<f32>
    ```
  }];
  let assemblyFormat = "attr-dict";
  let hasVerifier = 1;
}

include "dsc/Dialect/Dsc/IR/DscGradOps.td"
include "dsc/Dialect/Dsc/IR/DscScheduleOps.td"
include "dsc/Dialect/Dsc/IR/DscOptimizerOps.td"
include "dsc/Dialect/Dsc/IR/DscParallelOps.td"
include "dsc/Dialect/Dsc/IR/DscMoeOps.td"
include "dsc/Dialect/Dsc/IR/DscInferenceOps.td"

#endif // DSC_DIALECT_DSC_IR_DSCOPS_TD
