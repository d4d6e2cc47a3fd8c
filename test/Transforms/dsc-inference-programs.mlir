// RUN: dsc-opt %s --dsc-inference-programs="token-budget=8 max-sequences=2 block-size=4 max-context=16" -split-input-file -verify-diagnostics | FileCheck %s

// A one-layer GPT with grouped-query attention (4 query heads, 2 kv heads)
// and rotary positions. Both programs take 8 (prefill) or 2 (decode) token
// rows; each attention gets one KV cache shared by both: 2 sequences x
// 16 / 4 = 8 blocks of 4 positions x 2 kv heads x 8 features. The repeat of
// the kv heads goes (the cache holds the kv heads), the rotary reads the
// rows' positions, and the output projection runs on the sampled rows.
// CHECK-LABEL: module @gqa
// CHECK: dsc.inference = {block_size = 4 : i64, kv_blocks = 8 : i64, max_context = 16 : i64, max_sequences = 2 : i64, token_budget = 8 : i64}
// CHECK: dsc.kv_cache @kv.0 : tensor<8x2x4x2x8xf32>
// CHECK-NOT: @loss
// CHECK: func.func @decode(%{{.*}}: tensor<1x2xi32> {dsc.input = "tokens"}, %[[POS:.*]]: tensor<2xi32> {dsc.input = "positions"}, %[[SEQ:.*]]: tensor<2xi32> {dsc.input = "sequences"}, %[[TABLE:.*]]: tensor<2x4xi32> {dsc.input = "block_table"}, %[[ROWS:.*]]: tensor<2xi32> {dsc.input = "sample_rows"}, %[[SET:.*]]: tensor<2x3xf32> {dsc.input = "sampling"}, %[[DRAW:.*]]: tensor<2xf32> {dsc.input = "draws"}) -> tensor<2xi32> attributes {dsc.program = #dsc.program_role<decode>}
// CHECK: %[[Q:.*]] = dsc.rotary_at %{{.*}}, %[[POS]] {head_dim = 8 : i64, rotary_dims = 8 : i64} : tensor<1x2x32xf32>, tensor<2xi32>
// CHECK: %[[K:.*]] = dsc.rotary_at %{{.*}}, %[[POS]] {{.*}} : tensor<1x2x16xf32>, tensor<2xi32>
// CHECK-NOT: dsc.repeat_heads
// CHECK: dsc.paged_attention %[[Q]], %[[K]], %{{.*}}, %[[POS]], %[[SEQ]], %[[TABLE]] {cache = @kv.0, num_heads = 4 : i64, num_kv_heads = 2 : i64} : tensor<1x2x32xf32>, tensor<1x2x16xf32>, tensor<2xi32>, tensor<2x4xi32>
// CHECK: %[[LAST:.*]] = dsc.gather_rows %{{.*}}, %[[ROWS]] : tensor<1x2x32xf32>, tensor<2xi32> -> tensor<1x2x32xf32>
// CHECK: %[[LOGITS:.*]] = dsc.matmul %[[LAST]], %{{.*}} {transpose_rhs} : tensor<1x2x32xf32>, tensor<64x32xf32> -> tensor<1x2x64xf32>
// CHECK: %[[NEXT:.*]] = dsc.sample %[[LOGITS]], %[[SET]], %[[DRAW]] : tensor<1x2x64xf32>, tensor<2x3xf32>, tensor<2xf32> -> tensor<2xi32>
// CHECK: return %[[NEXT]]
// CHECK: func.func @prefill(%{{.*}}: tensor<1x8xi32> {dsc.input = "tokens"}
// CHECK-SAME: -> tensor<2xi32> attributes {dsc.program = #dsc.program_role<prefill>}
// CHECK: dsc.paged_attention {{.*}} {cache = @kv.0, {{.*}}} : tensor<1x8x32xf32>, tensor<1x8x16xf32>, tensor<8xi32>, tensor<2x4xi32>
// CHECK: dsc.gather_rows {{.*}} : tensor<1x8x32xf32>, tensor<2xi32> -> tensor<1x2x32xf32>
module @gqa attributes {dsc.model = {max_position_embeddings = 64 : i64, vocab_size = 64 : i64}} {
  dsc.parameter @wte : tensor<64x32xf32> init = <zeros>
  dsc.parameter @wq : tensor<32x32xf32> init = <zeros>
  dsc.parameter @wk : tensor<32x16xf32> init = <zeros>
  dsc.parameter @wv : tensor<32x16xf32> init = <zeros>
  dsc.parameter @head : tensor<64x32xf32> init = <zeros>
  func.func @loss(%tokens: tensor<2x6xi32>, %targets: tensor<2x6xi32>) -> tensor<f32> {
    %wte = dsc.get_parameter @wte : tensor<64x32xf32>
    %x = dsc.embedding %wte, %tokens : tensor<64x32xf32>, tensor<2x6xi32> -> tensor<2x6x32xf32>
    %wq = dsc.get_parameter @wq : tensor<32x32xf32>
    %wk = dsc.get_parameter @wk : tensor<32x16xf32>
    %wv = dsc.get_parameter @wv : tensor<32x16xf32>
    %q = dsc.matmul %x, %wq : tensor<2x6x32xf32>, tensor<32x32xf32> -> tensor<2x6x32xf32>
    %k = dsc.matmul %x, %wk : tensor<2x6x32xf32>, tensor<32x16xf32> -> tensor<2x6x16xf32>
    %v = dsc.matmul %x, %wv : tensor<2x6x32xf32>, tensor<32x16xf32> -> tensor<2x6x16xf32>
    %qr = dsc.rotary %q {head_dim = 8 : i64, rotary_dims = 8 : i64} : tensor<2x6x32xf32>
    %kr = dsc.rotary %k {head_dim = 8 : i64, rotary_dims = 8 : i64} : tensor<2x6x16xf32>
    %kk = dsc.repeat_heads %kr {head_dim = 8 : i64, repeats = 2 : i64} : tensor<2x6x16xf32> -> tensor<2x6x32xf32>
    %vv = dsc.repeat_heads %v {head_dim = 8 : i64, repeats = 2 : i64} : tensor<2x6x16xf32> -> tensor<2x6x32xf32>
    %a = dsc.attention %qr, %kk, %vv {causal, num_heads = 4 : i64} : tensor<2x6x32xf32>
    %h = dsc.add %x, %a : tensor<2x6x32xf32>
    %head = dsc.get_parameter @head : tensor<64x32xf32>
    %logits = dsc.matmul %h, %head {transpose_rhs} : tensor<2x6x32xf32>, tensor<64x32xf32> -> tensor<2x6x64xf32>
    %loss = dsc.cross_entropy %logits, %targets : tensor<2x6x64xf32>, tensor<2x6xi32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// A learned position table of 8 rows cannot serve a context of 16.
// expected-error @+1 {{--dsc-inference-programs: max-context=16 exceeds the 8 positions of the model's learned position embeddings}}
module @short_table attributes {dsc.model = {vocab_size = 64 : i64}} {
  dsc.parameter @wte : tensor<64x32xf32> init = <zeros>
  dsc.parameter @wpe : tensor<8x32xf32> init = <zeros>
  func.func @loss(%tokens: tensor<1x6xi32>, %targets: tensor<1x6xi32>) -> tensor<f32> {
    %wte = dsc.get_parameter @wte : tensor<64x32xf32>
    %x = dsc.embedding %wte, %tokens : tensor<64x32xf32>, tensor<1x6xi32> -> tensor<1x6x32xf32>
    %wpe = dsc.get_parameter @wpe : tensor<8x32xf32>
    %p = dsc.position_embedding %wpe : tensor<8x32xf32> -> tensor<1x6x32xf32>
    %h = dsc.add %x, %p : tensor<1x6x32xf32>
    %logits = dsc.matmul %h, %wte {transpose_rhs} : tensor<1x6x32xf32>, tensor<64x32xf32> -> tensor<1x6x64xf32>
    %loss = dsc.cross_entropy %logits, %targets : tensor<1x6x64xf32>, tensor<1x6xi32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}
