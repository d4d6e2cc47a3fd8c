// RUN: dsc-opt %s -split-input-file -verify-diagnostics | FileCheck %s

// The inference programs' ops print and parse back.
// CHECK: dsc.kv_cache @kv.0 : tensor<8x2x4x2x8xf32>
// CHECK-LABEL: func.func @rows
// CHECK: dsc.rotary_at %{{.*}}, %{{.*}} {head_dim = 8 : i64, rotary_dims = 4 : i64} : tensor<1x6x32xf32>, tensor<6xi32>
// CHECK: dsc.paged_attention {{.*}} {cache = @kv.0, num_heads = 4 : i64, num_kv_heads = 2 : i64, window = 3 : i64} : tensor<1x6x32xf32>, tensor<1x6x16xf32>, tensor<6xi32>, tensor<2x4xi32>
// CHECK: dsc.position_embedding_at %{{.*}}, %{{.*}} : tensor<16x32xf32>, tensor<6xi32> -> tensor<1x6x32xf32>
// CHECK: dsc.gather_rows %{{.*}}, %{{.*}} : tensor<1x6x32xf32>, tensor<2xi32> -> tensor<1x2x32xf32>
// CHECK: dsc.sample %{{.*}}, %{{.*}}, %{{.*}} {classes = 60 : i64} : tensor<2x2x32xf32>, tensor<2x3xf32>, tensor<2xf32> -> tensor<2xi32>
module {
  dsc.kv_cache @kv.0 : tensor<8x2x4x2x8xf32>
  func.func @rows(%q: tensor<1x6x32xf32>, %k: tensor<1x6x16xf32>,
                  %v: tensor<1x6x16xf32>, %pos: tensor<6xi32>,
                  %seq: tensor<6xi32>, %table: tensor<2x4xi32>,
                  %wpe: tensor<16x32xf32>, %rows: tensor<2xi32>,
                  %logits: tensor<2x2x32xf32>, %params: tensor<2x3xf32>,
                  %u: tensor<2xf32>) -> tensor<2xi32> {
    %qr = dsc.rotary_at %q, %pos {head_dim = 8 : i64, rotary_dims = 4 : i64}
        : tensor<1x6x32xf32>, tensor<6xi32>
    %a = dsc.paged_attention %qr, %k, %v, %pos, %seq, %table
        {cache = @kv.0, num_heads = 4 : i64, num_kv_heads = 2 : i64,
         window = 3 : i64}
        : tensor<1x6x32xf32>, tensor<1x6x16xf32>, tensor<6xi32>, tensor<2x4xi32>
    %p = dsc.position_embedding_at %wpe, %pos
        : tensor<16x32xf32>, tensor<6xi32> -> tensor<1x6x32xf32>
    %h = dsc.add %a, %p : tensor<1x6x32xf32>
    %g = dsc.gather_rows %h, %rows
        : tensor<1x6x32xf32>, tensor<2xi32> -> tensor<1x2x32xf32>
    %t = dsc.sample %logits, %params, %u {classes = 60 : i64}
        : tensor<2x2x32xf32>, tensor<2x3xf32>, tensor<2xf32> -> tensor<2xi32>
    return %t : tensor<2xi32>
  }
}

// -----

// expected-error @+1 {{'dsc.kv_cache' op cache must be [blocks, 2, block_size, kv_heads, head_dim], not [8x3x4x2x8]}}
dsc.kv_cache @kv.0 : tensor<8x3x4x2x8xf32>

// -----

dsc.kv_cache @kv.0 : tensor<8x2x4x2x8xf32>
func.func @wrong_cache(%q: tensor<1x6x32xf32>, %k: tensor<1x6x32xf32>,
                       %pos: tensor<6xi32>, %table: tensor<2x4xi32>)
    -> tensor<1x6x32xf32> {
  // expected-error @+1 {{'dsc.paged_attention' op cache '@kv.0' [8x2x4x2x8] does not hold 4 kv heads of 8 'f32' features}}
  %a = dsc.paged_attention %q, %k, %k, %pos, %pos, %table
      {cache = @kv.0, num_heads = 4 : i64, num_kv_heads = 4 : i64}
      : tensor<1x6x32xf32>, tensor<1x6x32xf32>, tensor<6xi32>, tensor<2x4xi32>
  return %a : tensor<1x6x32xf32>
}

// -----

dsc.kv_cache @kv.0 : tensor<8x2x4x2x8xf32>
func.func @groups(%q: tensor<1x6x32xf32>, %k: tensor<1x6x24xf32>,
                  %pos: tensor<6xi32>, %table: tensor<2x4xi32>)
    -> tensor<1x6x32xf32> {
  // expected-error @+1 {{'dsc.paged_attention' op num_heads 4 must be a positive multiple of num_kv_heads 3}}
  %a = dsc.paged_attention %q, %k, %k, %pos, %pos, %table
      {cache = @kv.0, num_heads = 4 : i64, num_kv_heads = 3 : i64}
      : tensor<1x6x32xf32>, tensor<1x6x24xf32>, tensor<6xi32>, tensor<2x4xi32>
  return %a : tensor<1x6x32xf32>
}

// -----

func.func @not_rows(%x: tensor<2x6x32xf32>, %rows: tensor<2xi32>)
    -> tensor<1x2x32xf32> {
  // expected-error @+1 {{'dsc.gather_rows' op input must be token rows [1, N, C], not [2x6x32]}}
  %g = dsc.gather_rows %x, %rows
      : tensor<2x6x32xf32>, tensor<2xi32> -> tensor<1x2x32xf32>
  return %g : tensor<1x2x32xf32>
}

// -----

func.func @sample_params(%logits: tensor<1x2x32xf32>, %params: tensor<2x2xf32>,
                         %u: tensor<2xf32>) -> tensor<2xi32> {
  // expected-error @+1 {{'dsc.sample' op params must be [2, 3] (temperature, top_k, top_p), not [2x2]}}
  %t = dsc.sample %logits, %params, %u
      : tensor<1x2x32xf32>, tensor<2x2xf32>, tensor<2xf32> -> tensor<2xi32>
  return %t : tensor<2xi32>
}

// -----

func.func @sample_classes(%logits: tensor<2x2x32xf32>, %params: tensor<2x3xf32>,
                          %u: tensor<2xf32>) -> tensor<2xi32> {
  // expected-error @+1 {{'dsc.sample' op classes 65 must be in [0, 64]}}
  %t = dsc.sample %logits, %params, %u {classes = 65 : i64}
      : tensor<2x2x32xf32>, tensor<2x3xf32>, tensor<2xf32> -> tensor<2xi32>
  return %t : tensor<2xi32>
}
