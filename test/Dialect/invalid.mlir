// RUN: dsc-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{initializer std must be a finite number >= 0, got -1}}
dsc.parameter @w : tensor<4xf32> init = #dsc.init<normal, std = -1.0>

// -----

// expected-error @+1 {{initializer 'zeros' takes no std or num_layers}}
dsc.parameter @w : tensor<4xf32> init = #dsc.init<zeros, std = 1.0>

// -----

// expected-error @+1 {{initializer 'normal' needs std > 0}}
dsc.parameter @w : tensor<4xf32> init = #dsc.init<normal>

// -----

// expected-error @+1 {{initializer 'normal' takes no num_layers; use 'scaled_normal' for residual projections}}
dsc.parameter @w : tensor<4xf32> init = #dsc.init<normal, std = 0.02, num_layers = 2>

// -----

// expected-error @+1 {{initializer 'scaled_normal' needs std > 0}}
dsc.parameter @w : tensor<4xf32> init = #dsc.init<scaled_normal, num_layers = 2>

// -----

// expected-error @+1 {{initializer 'scaled_normal' needs num_layers >= 1}}
dsc.parameter @w : tensor<4xf32> init = #dsc.init<scaled_normal, std = 0.02>

// -----

// expected-error @+1 {{parameter 'w' must have a static shape, got 'tensor<?x4xf32>'}}
dsc.parameter @w : tensor<?x4xf32> init = #dsc.init<zeros>

// -----

// expected-error @+1 {{parameter 'w' has no elements}}
dsc.parameter @w : tensor<0x4xf32> init = #dsc.init<zeros>

// -----

dsc.mesh @mesh axes = ["dp", "tp"] shape = [2, 3]
// expected-error @+1 {{layout of 'w' splits view dimension 1 (4) into 3 parts, which do not divide it}}
dsc.parameter @w : tensor<4x2xf32> init = #dsc.init<zeros> layout = #dsc.layout<view = [4, 4], split = [[], ["tp"]]>

// -----

dsc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
// expected-error @+1 {{parameter 'w' has 8 elements but its layout gives each rank 4 of the whole 16}}
dsc.parameter @w : tensor<8xf32> init = #dsc.init<zeros> layout = #dsc.layout<view = [4, 4], split = [[], ["tp"]], chunk = ["dp"]>

// -----

dsc.mesh @mesh axes = ["dp"] shape = [2]
// expected-error @+1 {{layout of 'w' names mesh axis 'tp' that @mesh does not have}}
dsc.parameter @w : tensor<8xf32> init = #dsc.init<zeros> layout = #dsc.layout<view = [4, 4], split = [[], ["tp"]]>

// -----

// expected-error @+1 {{parameter 'w' has a layout but the module has no dsc.mesh}}
dsc.parameter @w : tensor<8xf32> init = #dsc.init<zeros> layout = #dsc.layout<view = [16], split = [[]], chunk = ["dp"]>

// -----

dsc.mesh @mesh axes = ["dp"] shape = [2]
// expected-error @+1 {{layout split has 1 entries for a view of rank 2}}
dsc.parameter @w : tensor<8xf32> init = #dsc.init<zeros> layout = #dsc.layout<view = [4, 4], split = [[]]>

// -----

dsc.mesh @mesh axes = ["tp"] shape = [2]
// expected-error @+1 {{layout view [4, 3, 4] does not refine its shape [6, 8] (the same elements, split further)}}
dsc.parameter @w : tensor<4x6xf32> init = #dsc.init<zeros> layout = #dsc.layout<shape = [6, 8], view = [4, 3, 4], split = [[], [], ["tp"]]>

// -----

dsc.mesh @mesh axes = ["tp"] shape = [2]
// expected-error @+1 {{layout shape [4] has fewer elements than its view [4, 3, 4]}}
dsc.parameter @w : tensor<4x6xf32> init = #dsc.init<zeros> layout = #dsc.layout<shape = [4], view = [4, 3, 4], split = [[], [], ["tp"]]>

// -----

func.func @f() {
  // expected-error @+1 {{'dsc.parameter' op expects parent op 'builtin.module'}}
  dsc.parameter @w : tensor<4xf32> init = #dsc.init<zeros>
  return
}

// -----

func.func @f() -> tensor<4xf32> {
  // expected-error @+1 {{'missing' does not name a dsc.parameter}}
  %w = dsc.get_parameter @missing : tensor<4xf32>
  return %w : tensor<4xf32>
}

// -----

dsc.parameter @w : tensor<4xf32> init = #dsc.init<zeros>
func.func @f() -> tensor<8xf32> {
  // expected-error @+1 {{result type 'tensor<8xf32>' does not match parameter '@w' of type 'tensor<4xf32>'}}
  %w = dsc.get_parameter @w : tensor<8xf32>
  return %w : tensor<8xf32>
}

// -----

func.func @f(%t: tensor<256xf32>, %ids: tensor<2x8xi32>) {
  // expected-error @+1 {{table must be a rank-2 [vocab, hidden] tensor, got [256]}}
  %0 = dsc.embedding %t, %ids : tensor<256xf32>, tensor<2x8xi32> -> tensor<2x8x64xf32>
  return
}

// -----

func.func @f(%t: tensor<256x64xf32>, %ids: tensor<2x8xi32>) {
  // expected-error @+1 {{result shape must be ids shape + [hidden] = [2x8x64], got [2x8x32]}}
  %0 = dsc.embedding %t, %ids : tensor<256x64xf32>, tensor<2x8xi32> -> tensor<2x8x32xf32>
  return
}

// -----

func.func @f(%t: tensor<256x64xf32>, %ids: tensor<2x8xi32>) {
  // expected-error @+1 {{result element type 'f16' must match the input element type 'f32'}}
  %0 = dsc.embedding %t, %ids : tensor<256x64xf32>, tensor<2x8xi32> -> tensor<2x8x64xf16>
  return
}

// -----

func.func @f(%t: tensor<16xf32>) {
  // expected-error @+1 {{table must be a rank-2 [positions, hidden] tensor, got [16]}}
  %0 = dsc.position_embedding %t : tensor<16xf32> -> tensor<2x8x64xf32>
  return
}

// -----

func.func @f(%t: tensor<16x64xf32>) {
  // expected-error @+1 {{result must be a rank-3 [batch, seq, hidden] tensor, got [8x64]}}
  %0 = dsc.position_embedding %t : tensor<16x64xf32> -> tensor<8x64xf32>
  return
}

// -----

func.func @f(%t: tensor<16x64xf32>) {
  // expected-error @+1 {{sequence length 32 exceeds the 16 positions of the table}}
  %0 = dsc.position_embedding %t : tensor<16x64xf32> -> tensor<2x32x64xf32>
  return
}

// -----

func.func @f(%t: tensor<16x64xf32>) {
  // expected-error @+1 {{result shape must be [batch, seq, hidden of table] = [2x8x64], got [2x8x32]}}
  %0 = dsc.position_embedding %t : tensor<16x64xf32> -> tensor<2x8x32xf32>
  return
}

// -----

func.func @f(%a: tensor<8xf32>, %b: tensor<8x4xf32>) {
  // expected-error @+1 {{lhs must have rank >= 2, got [8]}}
  %0 = dsc.matmul %a, %b : tensor<8xf32>, tensor<8x4xf32> -> tensor<4xf32>
  return
}

// -----

func.func @f(%a: tensor<2x8x16xf32>, %b: tensor<4x3x16x4xf32>) {
  // expected-error @+1 {{rhs must be a matrix or have the lhs's rank 3, got [4x3x16x4]}}
  %0 = dsc.matmul %a, %b : tensor<2x8x16xf32>, tensor<4x3x16x4xf32> -> tensor<2x8x4xf32>
  return
}

// -----

func.func @f(%a: tensor<2x8x16xf32>, %b: tensor<3x16x4xf32>) {
  // expected-error @+1 {{batch dimensions differ: lhs [2], rhs [3]}}
  %0 = dsc.matmul %a, %b : tensor<2x8x16xf32>, tensor<3x16x4xf32> -> tensor<2x8x4xf32>
  return
}

// -----

func.func @f(%a: tensor<8x16xf32>, %b: tensor<16x4xf16>) {
  // expected-error @+1 {{operand element types differ: 'f32' vs 'f16'}}
  %0 = dsc.matmul %a, %b : tensor<8x16xf32>, tensor<16x4xf16> -> tensor<8x4xf32>
  return
}

// -----

func.func @f(%a: tensor<8x16xf32>, %b: tensor<12x4xf32>) {
  // expected-error @+1 {{contracting dimensions differ: lhs has K = 16, rhs has K = 12}}
  %0 = dsc.matmul %a, %b : tensor<8x16xf32>, tensor<12x4xf32> -> tensor<8x4xf32>
  return
}

// -----

func.func @f(%a: tensor<8x16xf32>, %b: tensor<4x16xf32>) {
  // expected-error @+1 {{result shape must be batch + [M, N] = [8x4], got [8x16]}}
  %0 = dsc.matmul %a, %b {transpose_rhs} : tensor<8x16xf32>, tensor<4x16xf32> -> tensor<8x16xf32>
  return
}

// -----

func.func @f(%a: tensor<8x16xf32>, %b: tensor<8x16xf32>) {
  // expected-error @+1 {{'dsc.add' op requires the same type for all operands and results}}
  %0 = "dsc.add"(%a, %b) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x8xf32>
  return
}

// -----

func.func @f(%x: tensor<f32>, %b: tensor<1xf32>) {
  // expected-error @+1 {{input must have rank >= 1}}
  %0 = dsc.bias_add %x, %b : tensor<f32>, tensor<1xf32>
  return
}

// -----

func.func @f(%x: tensor<8x16xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{bias must be a vector of the last dimension's size [16], got [8]}}
  %0 = dsc.bias_add %x, %b : tensor<8x16xf32>, tensor<8xf32>
  return
}

// -----

func.func @f(%x: tensor<8x16xf32>, %b: tensor<16xf16>) {
  // expected-error @+1 {{bias element type 'f16' must match the input element type 'f32'}}
  %0 = dsc.bias_add %x, %b : tensor<8x16xf32>, tensor<16xf16>
  return
}

// -----

func.func @f(%x: tensor<8x16xf32>, %g: tensor<16xf32>) {
  // expected-error @+1 {{epsilon must be > 0, got 0}}
  %0 = dsc.layer_norm %x, %g, %g {epsilon = 0.0 : f64} : tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>
  return
}

// -----

func.func @f(%x: tensor<f32>, %g: tensor<1xf32>) {
  // expected-error @+1 {{input must have rank >= 1}}
  %0 = dsc.layer_norm %x, %g, %g : tensor<f32>, tensor<1xf32>, tensor<1xf32>
  return
}

// -----

func.func @f(%x: tensor<8x16xf32>, %g: tensor<8xf32>, %b: tensor<16xf32>) {
  // expected-error @+1 {{gamma must be a vector of the last dimension's size [16], got [8]}}
  %0 = dsc.layer_norm %x, %g, %b : tensor<8x16xf32>, tensor<8xf32>, tensor<16xf32>
  return
}

// -----

func.func @f(%x: tensor<8x16xf32>, %g: tensor<16xf32>) {
  // expected-error @+1 {{epsilon must be > 0, got -1}}
  %0 = dsc.rms_norm %x, %g {epsilon = -1.0 : f64} : tensor<8x16xf32>, tensor<16xf32>
  return
}

// -----

func.func @f(%x: tensor<8x16xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{gamma must be a vector of the last dimension's size [16], got [8]}}
  %0 = dsc.rms_norm %x, %g : tensor<8x16xf32>, tensor<8xf32>
  return
}

// -----

func.func @f(%x: tensor<8x16xf32>, %g: tensor<16xf32>, %b: tensor<4x16xf32>) {
  // expected-error @+1 {{beta must be a vector of the last dimension's size [16], got [4x16]}}
  %0 = dsc.layer_norm %x, %g, %b : tensor<8x16xf32>, tensor<16xf32>, tensor<4x16xf32>
  return
}

// -----

func.func @f(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{query must be a rank-3 [batch, seq, hidden] tensor, got [8x16]}}
  %0 = dsc.attention %x, %x, %x {num_heads = 2 : i64} : tensor<8x16xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8x16xf32>) {
  // expected-error @+1 {{num_heads must be >= 1, got 0}}
  %0 = dsc.attention %x, %x, %x {num_heads = 0 : i64} : tensor<2x8x16xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8x16xf32>) {
  // expected-error @+1 {{hidden size 16 is not divisible by num_heads 3}}
  %0 = dsc.attention %x, %x, %x {num_heads = 3 : i64, causal} : tensor<2x8x16xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8x16xf32>) {
  // expected-error @+1 {{attention dropout must be in [0, 1), got 1}}
  %0 = dsc.attention %x, %x, %x {num_heads = 2 : i64, dropout = 1.0 : f64} : tensor<2x8x16xf32>
  return
}

// -----

func.func @f(%q: tensor<2x8x16xf32>, %k: tensor<2x4x16xf32>) {
  // expected-error @+1 {{'dsc.attention' op failed to verify that all of {query, key, value, result} have same type}}
  %0 = "dsc.attention"(%q, %k, %q) {num_heads = 2 : i64} : (tensor<2x8x16xf32>, tensor<2x4x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @f(%l: tensor<256xf32>, %t: tensor<i32>) {
  // expected-error @+1 {{logits must have rank >= 2 ([tokens..., vocab]), got [256]}}
  %0 = dsc.cross_entropy %l, %t : tensor<256xf32>, tensor<i32> -> tensor<f32>
  return
}

// -----

func.func @f(%l: tensor<2x8x256xf32>, %t: tensor<2x4xi32>) {
  // expected-error @+1 {{targets shape must be the logits shape without the vocab dimension = [2x8], got [2x4]}}
  %0 = dsc.cross_entropy %l, %t : tensor<2x8x256xf32>, tensor<2x4xi32> -> tensor<f32>
  return
}

// -----

func.func @f(%l: tensor<2x8x256xf32>, %t: tensor<2x8xi32>) {
  // expected-error @+1 {{classes = 300 must be between 0 (every column) and the 256 columns of the logits}}
  %0 = dsc.cross_entropy %l, %t {classes = 300 : i64} : tensor<2x8x256xf32>, tensor<2x8xi32> -> tensor<f32>
  return
}

// -----

func.func @f(%l: tensor<2x8x256xf32>, %t: tensor<2x8xi32>, %g: tensor<f32>) {
  // expected-error @+1 {{classes = -1 must be between 0 (every column) and the 256 columns of the logits}}
  %0 = dsc.cross_entropy_grad %l, %t, %g {classes = -1 : i64} : tensor<2x8x256xf32>, tensor<2x8xi32>, tensor<f32>
  return
}

// -----

dsc.mesh @mesh axes = ["tp"] shape = [2]
func.func @f(%l: tensor<2x8x128xf32>, %t: tensor<2x8xi32>) {
  // expected-error @+1 {{classes = 257 must be between 0 (every column) and the 256 columns of the whole vocabulary}}
  %0 = dsc.vocab_parallel_cross_entropy %l, %t on @mesh axes = ["tp"] {classes = 257 : i64} : tensor<2x8x128xf32>, tensor<2x8xi32> -> tensor<f32>
  return
}

// -----

func.func @f(%x: tensor<?x16xf32>) {
  // expected-error @+1 {{reshape needs static shapes}}
  %0 = dsc.reshape %x : tensor<?x16xf32> -> tensor<16x4xf32>
  return
}

// -----

func.func @f(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{cannot reshape [8x16] (128 elements) to [8x8] (64 elements)}}
  %0 = dsc.reshape %x : tensor<8x16xf32> -> tensor<8x8xf32>
  return
}

// -----

func.func @f(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{result element type 'f16' must match the input element type 'f32'}}
  %0 = dsc.reshape %x : tensor<8x16xf32> -> tensor<128xf16>
  return
}

// -----

func.func @f(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{permutation has 3 entries but the input has rank 2}}
  %0 = dsc.transpose %x [0, 1, 2] : tensor<8x16xf32> -> tensor<8x16xf32>
  return
}

// -----

func.func @f(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{permutation [1x1] is not a permutation of 0..1}}
  %0 = dsc.transpose %x [1, 1] : tensor<8x16xf32> -> tensor<16x16xf32>
  return
}

// -----

func.func @f(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{result shape must be the permuted input shape = [16x8], got [8x16]}}
  %0 = dsc.transpose %x [1, 0] : tensor<8x16xf32> -> tensor<8x16xf32>
  return
}

// -----

func.func @f(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{needs one offset and one size per input dimension (2), got 1 offsets and 2 sizes}}
  %0 = dsc.slice %x [0] [8, 8] : tensor<8x16xf32> -> tensor<8x8xf32>
  return
}

// -----

func.func @f(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{slice [12, 20) of dimension 1 is out of bounds [0, 16)}}
  %0 = dsc.slice %x [0, 12] [8, 8] : tensor<8x16xf32> -> tensor<8x8xf32>
  return
}

// -----

func.func @f(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{result shape must be the slice sizes = [8x8], got [8x4]}}
  %0 = dsc.slice %x [0, 0] [8, 8] : tensor<8x16xf32> -> tensor<8x4xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{needs at least one input}}
  %0 = "dsc.concat"() {dim = 0 : i64} : () -> tensor<8xf32>
  return
}

// -----

func.func @f(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{dim 2 is out of range for rank 2}}
  %0 = dsc.concat %x, %x {dim = 2 : i64} : tensor<8x16xf32>, tensor<8x16xf32> -> tensor<8x32xf32>
  return
}

// -----

func.func @f(%x: tensor<8x16xf32>, %y: tensor<8x16xf16>) {
  // expected-error @+1 {{input 1 has type 'tensor<8x16xf16>', incompatible with input 0 'tensor<8x16xf32>'}}
  %0 = dsc.concat %x, %y {dim = 1 : i64} : tensor<8x16xf32>, tensor<8x16xf16> -> tensor<8x32xf32>
  return
}

// -----

func.func @f(%x: tensor<8x16xf32>, %y: tensor<4x16xf32>) {
  // expected-error @+1 {{input 1 differs from input 0 in dimension 0 (4 vs 8); only dimension 1 may differ}}
  %0 = dsc.concat %x, %y {dim = 1 : i64} : tensor<8x16xf32>, tensor<4x16xf32> -> tensor<8x32xf32>
  return
}

// -----

func.func @f(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{result shape must be the concatenated shape = [8x32], got [8x16]}}
  %0 = dsc.concat %x, %x {dim = 1 : i64} : tensor<8x16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
  return
}

// -----

func.func @f(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{dropout probability must be in [0, 1), got 1.5}}
  %0 = dsc.dropout %x {p = 1.5 : f64} : tensor<8x16xf32>
  return
}

// -----

// expected-error @+1 {{mesh needs at least one axis}}
dsc.mesh @mesh axes = [] shape = []

// -----

// expected-error @+1 {{has 2 axis names but 1 axis sizes}}
dsc.mesh @mesh axes = ["dp", "tp"] shape = [2]

// -----

// expected-error @+1 {{mesh axis names must not be empty}}
dsc.mesh @mesh axes = [""] shape = [2]

// -----

// expected-error @+1 {{mesh axis 'dp' is declared twice}}
dsc.mesh @mesh axes = ["dp", "dp"] shape = [2, 2]

// -----

// expected-error @+1 {{mesh axis 'tp' must have size >= 1, got 0}}
dsc.mesh @mesh axes = ["dp", "tp"] shape = [2, 0]

// -----

func.func @f(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{'@nomesh' does not name a dsc.mesh}}
  %0 = dsc.all_reduce %x on @nomesh axes = ["tp"] : tensor<8x16xf32>
  return
}

// -----

dsc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
func.func @f(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{mesh axis 'pp' is not an axis of @mesh (axes: dp, tp)}}
  %0 = dsc.all_reduce %x on @mesh axes = ["pp"] : tensor<8x16xf32>
  return
}

// -----

dsc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
func.func @f(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{needs at least one mesh axis}}
  %0 = dsc.all_reduce %x on @mesh axes = [] : tensor<8x16xf32>
  return
}

// -----

dsc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
func.func @f(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{mesh axis 'dp' is listed twice}}
  %0 = dsc.all_reduce %x on @mesh axes = ["dp", "dp"] : tensor<8x16xf32>
  return
}

// -----

func.func @f(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{'@mesh' does not name a dsc.mesh}}
  %0 = dsc.all_reduce %x on @mesh axes = ["dp"] : tensor<8x16xf32>
  return
}

// -----

dsc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
func.func @f(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{scatter dimension 2 is out of range for rank 2}}
  %0 = dsc.reduce_scatter %x on @mesh axes = ["dp"] scatter_dim = 2 : tensor<8x16xf32> -> tensor<4x16xf32>
  return
}

// -----

dsc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
func.func @f(%x: tensor<7x16xf32>) {
  // expected-error @+1 {{scatter dimension 0 of size 7 is not divisible by the group size 2}}
  %0 = dsc.reduce_scatter %x on @mesh axes = ["dp"] scatter_dim = 0 : tensor<7x16xf32> -> tensor<3x16xf32>
  return
}

// -----

dsc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
func.func @f(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{result type 'tensor<4x16xf32>' must be 'tensor<2x16xf32>'}}
  %0 = dsc.reduce_scatter %x on @mesh axes = ["dp", "tp"] scatter_dim = 0 : tensor<8x16xf32> -> tensor<4x16xf32>
  return
}

// -----

dsc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
func.func @f(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{gather dimension -1 is out of range for rank 2}}
  %0 = dsc.all_gather %x on @mesh axes = ["dp"] gather_dim = -1 : tensor<8x16xf32> -> tensor<16x16xf32>
  return
}

// -----

dsc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
func.func @f(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{result type 'tensor<8x16xf32>' must be 'tensor<8x32xf32>'}}
  %0 = dsc.all_gather %x on @mesh axes = ["tp"] gather_dim = 1 : tensor<8x16xf32> -> tensor<8x16xf32>
  return
}

// -----

dsc.mesh @mesh axes = ["dp", "pp"] shape = [2, 4]
func.func @f(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{peer 4 is outside mesh axis 'pp' of size 4}}
  dsc.send %x on @mesh axis = "pp" to 4 : tensor<8x16xf32>
  return
}

// -----

dsc.mesh @mesh axes = ["dp", "pp"] shape = [2, 4]
func.func @f() {
  // expected-error @+1 {{mesh axis 'tp' is not an axis of @mesh (axes: dp, pp)}}
  %0 = dsc.recv on @mesh axis = "tp" from 0 : tensor<8x16xf32>
  return
}

// -----

dsc.parameter @w : tensor<8x16xf32> init = #dsc.init<zeros>
dsc.state @m : tensor<8x16xf32> exp_avg of @w in host
dsc.state @g : tensor<8x16xf32> gradient of @w
func.func @f() {
  // expected-error @+1 {{source and destination are both in tier 'device'; a transfer must change the tier}}
  dsc.transfer @g to @w
  return
}

// -----

dsc.parameter @w : tensor<8x16xf32> init = #dsc.init<zeros>
dsc.state @m : tensor<64xf32> master of @w in host
func.func @f() {
  // expected-error @+1 {{moves 128 elements into 64; without chunk axes both sides hold the same count}}
  dsc.transfer @w to @m
  return
}

// -----

dsc.mesh @mesh axes = ["dp"] shape = [4]
dsc.parameter @w : tensor<8x16xf32> init = #dsc.init<zeros>
dsc.state @m : tensor<64xf32> master of @w in host
func.func @f() {
  // expected-error @+1 {{chunked over a group of 4 ranks, one side must hold 4 times the other's elements; got 128 and 64}}
  dsc.transfer @w to @m chunk on @mesh axes = ["dp"]
  return
}

// -----

dsc.parameter @w : tensor<8x16xf32> init = #dsc.init<zeros>
func.func @f() {
  // expected-error @+1 {{destination '@nothing' does not name a dsc.parameter or dsc.state}}
  dsc.transfer @w to @nothing
  return
}

// -----

dsc.parameter @w : tensor<8x16xf32> init = #dsc.init<zeros>
dsc.state @m : tensor<8x16xf32> exp_avg of @w in host
func.func @f() {
  // expected-error @+1 {{'@m' is in tier 'host'; only nvme states and parameters are swapped}}
  dsc.swap_in [@m]
  return
}

// -----

dsc.parameter @w : tensor<8x16xf32> init = #dsc.init<zeros>
dsc.state @master : tensor<8x16xf32> master of @w in host
dsc.state @g : tensor<8x16xf32> gradient of @w
dsc.state @m : tensor<8x16xf32> exp_avg of @w in host
dsc.state @v : tensor<8x16xf32> exp_avg_sq of @w in host
func.func @f(%lr: tensor<f32>) {
  // expected-error @+1 {{grad '@g' is a gradient state, expected gradient_copy}}
  dsc.adamw @master grad = @g exp_avg = @m exp_avg_sq = @v lr = %lr beta1 = 0.9 beta2 = 0.95 eps = 1.0e-8 weight_decay = 0.0 : tensor<f32>
  return
}

// -----

func.func @f(%l: tensor<2x8x256xf64>, %t: tensor<2x8xi32>) {
  // expected-error @+1 {{the loss must be f64 for f64 logits, got 'f32'}}
  %0 = dsc.cross_entropy %l, %t : tensor<2x8x256xf64>, tensor<2x8xi32> -> tensor<f32>
  return
}

// -----

func.func @f(%l: tensor<2x8x256xf32>, %t: tensor<2x8xi32>) {
  // expected-error @+1 {{the loss must be f32 (accumulated in f32), got 'f64'}}
  %0 = dsc.cross_entropy %l, %t : tensor<2x8x256xf32>, tensor<2x8xi32> -> tensor<f64>
  return
}

// -----

// bf16 logits take an f32 loss (mixed precision); a bf16 loss is refused.
func.func @f(%l: tensor<2x8x256xbf16>, %t: tensor<2x8xi32>) {
  // expected-error @+1 {{result #0 must be 0D tensor of 32-bit float or 64-bit float values, but got 'tensor<bf16>'}}
  %0 = dsc.cross_entropy %l, %t : tensor<2x8x256xbf16>, tensor<2x8xi32> -> tensor<bf16>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{result shape [8x4] must equal the input shape [4x8]; a cast changes only the element type (reshape with dsc.reshape)}}
  %0 = dsc.cast %x : tensor<4x8xf32> to tensor<8x4xbf16>
  return
}

// -----

func.func @f(%ids: tensor<4x8xi32>) {
  // expected-error @+1 {{input must be a float tensor (f16, bf16, f32 or f64 elements), got 'tensor<4x8xi32>'; only float tensors are cast}}
  %0 = dsc.cast %ids : tensor<4x8xi32> to tensor<4x8xbf16>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{result must be a float tensor (f16, bf16, f32 or f64 elements), got 'tensor<4x8xi32>'; only float tensors are cast}}
  %0 = dsc.cast %x : tensor<4x8xf32> to tensor<4x8xi32>
  return
}

// -----

dsc.mesh @mesh axes = ["dp"] shape = [2]
func.func @f() {
  // expected-error @+1 {{'w' does not name a dsc.parameter}}
  %w = dsc.gather_parameter @w on @mesh axes = ["dp"] : tensor<4x4xf32>
  return
}

// -----

dsc.mesh @mesh axes = ["dp"] shape = [2]
dsc.parameter @w : tensor<4x4xf32> init = #dsc.init<zeros>
func.func @f() {
  // expected-error @+1 {{parameter '@w' is not a ZeRO-3 chunk (its layout has no chunk axes); read it with dsc.get_parameter}}
  %w = dsc.gather_parameter @w on @mesh axes = ["dp"] : tensor<8x4xf32>
  return
}

// -----

dsc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
dsc.parameter @w : tensor<8xf32> init = #dsc.init<zeros> layout = #dsc.layout<view = [4, 4], split = [[], []], chunk = ["dp"]>
func.func @f() {
  // expected-error @+1 {{gathers over axes ["tp"] but parameter '@w' is chunked over ["dp"]}}
  %w = dsc.gather_parameter @w on @mesh axes = ["tp"] : tensor<4x4xf32>
  return
}

// -----

dsc.mesh @mesh axes = ["dp"] shape = [2]
dsc.parameter @w : tensor<8xf32> init = #dsc.init<zeros> layout = #dsc.layout<view = [4, 4], split = [[], []], chunk = ["dp"]>
func.func @f() {
  // expected-error @+1 {{result type 'tensor<4x2xf32>' has 8 elements; the 2 chunks of parameter '@w' (8 elements each) make 16}}
  %w = dsc.gather_parameter @w on @mesh axes = ["dp"] : tensor<4x2xf32>
  return
}

// -----

dsc.mesh @mesh axes = ["dp"] shape = [2]
dsc.parameter @w : tensor<8xf32> init = #dsc.init<zeros> layout = #dsc.layout<view = [4, 4], split = [[], []], chunk = ["dp"]>
func.func @f() {
  // expected-error @+1 {{result element type 'f64' differs from parameter '@w' of type 'tensor<8xf32>'}}
  %w = dsc.gather_parameter @w on @mesh axes = ["dp"] : tensor<4x4xf64>
  return
}

// -----

func.func @f(%x: tensor<2x8x64xf32>) {
  // expected-error @+1 {{head_dim 24 does not divide the last dimension 64}}
  %0 = dsc.rotary %x {head_dim = 24 : i64, rotary_dims = 4 : i64} : tensor<2x8x64xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8x64xf32>) {
  // expected-error @+1 {{rotary_dims must be even and in [2, head_dim = 16], got 3}}
  %0 = dsc.rotary %x {head_dim = 16 : i64, rotary_dims = 3 : i64} : tensor<2x8x64xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8x64xf32>) {
  // expected-error @+1 {{rotary_dims must be even and in [2, head_dim = 16], got 32}}
  %0 = dsc.rotary %x {head_dim = 16 : i64, rotary_dims = 32 : i64} : tensor<2x8x64xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8x64xf32>) {
  // expected-error @+1 {{base must be > 1, got 1}}
  %0 = dsc.rotary %x {head_dim = 16 : i64, rotary_dims = 4 : i64, base = 1.0 : f64} : tensor<2x8x64xf32>
  return
}

// -----

func.func @f(%x: tensor<64xf32>) {
  // expected-error @+1 {{input must be [..., seq, heads * head_dim], got rank 1}}
  %0 = dsc.rotary %x {head_dim = 16 : i64, rotary_dims = 4 : i64} : tensor<64xf32>
  return
}

// -----

dsc.mesh @mesh axes = ["pp"] shape = [3]
func.func @step.stage1() attributes {dsc.program = #dsc.program_role<pipeline_step>, dsc.stage = 1 : i64} {
  // expected-error @+1 {{stage 1 sends activations to stage 2, not 0}}
  dsc.pipeline_send activation to 0 microbatch = 0 on @mesh : tensor<2x4xf32>
  return
}

// -----

dsc.mesh @mesh axes = ["pp"] shape = [3]
func.func @step.stage1() attributes {dsc.program = #dsc.program_role<pipeline_step>, dsc.stage = 1 : i64} {
  // expected-error @+1 {{stage 1 receives gradients from stage 2, not 0}}
  dsc.pipeline_recv gradient from 0 microbatch = 0 on @mesh : tensor<2x4xf32>
  return
}

// -----

dsc.mesh @mesh axes = ["pp"] shape = [2]
func.func @step.stage1() attributes {dsc.program = #dsc.program_role<pipeline_step>, dsc.stage = 1 : i64} {
  // expected-error @+1 {{peer 2 is outside mesh axis 'pp' of size 2}}
  dsc.pipeline_send activation to 2 microbatch = 0 on @mesh : tensor<2x4xf32>
  return
}

// -----

func.func @loss.stage0(%t: tensor<2x4xi32>) -> tensor<2x4xf32> attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 0 : i64} {
  %a = arith.constant dense<0.0> : tensor<2x4xf32>
  return %a : tensor<2x4xf32>
}
func.func @step.stage1() attributes {dsc.program = #dsc.program_role<pipeline_step>, dsc.stage = 1 : i64} {
  // expected-error @+1 {{callee @loss.stage0 must be stage 1's forward program}}
  dsc.pipeline_forward @loss.stage0 microbatch = 0
  return
}

// -----

// A weight-gradient part runs the stage's backward_weight program, not its
// backward.
func.func @backward.stage0(%t: tensor<2x4xi32>, %d: tensor<2x4xf32>) attributes {dsc.program = #dsc.program_role<forward_backward>, dsc.stage = 0 : i64} {
  return
}
func.func @step.stage0() attributes {dsc.program = #dsc.program_role<pipeline_step>, dsc.stage = 0 : i64} {
  // expected-error @+1 {{callee @backward.stage0 must be stage 0's backward_weight program}}
  dsc.pipeline_backward_weight @backward.stage0 microbatch = 0
  return
}

// -----

func.func @f() attributes {dsc.weight_stash = 1 : i64} {
  // expected-error @-1 {{attribute 'dsc.weight_stash' must be the count of the function's last results its weight-gradient part takes, an i64 from 0 to its 0 results, got 1 : i64}}
  return
}

// -----

// Interleaved (4 stages on 2 ranks): rank 1 holds stages 1 and 3, whose
// neighbours are on rank 0; stage 3 is the last and sends no activation.
module attributes {dsc.pipeline = #dsc.pipeline<stages = 4, schedule = "interleaved-1f1b", virtual_stages = 2>} {
  dsc.mesh @mesh axes = ["pp"] shape = [2]
  func.func @loss.stage2(%x: tensor<2x4xf32>) -> tensor<2x4xf32> attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 2 : i64} {
    return %x : tensor<2x4xf32>
  }
  func.func @step.stage1() attributes {dsc.program = #dsc.program_role<pipeline_step>, dsc.stage = 1 : i64} {
    // expected-error @+1 {{callee @loss.stage2 must be the forward program of a stage pp rank 1 holds (1 + 2c for chunk c < 2)}}
    dsc.pipeline_forward @loss.stage2 microbatch = 0
    return
  }
}

// -----

module attributes {dsc.pipeline = #dsc.pipeline<stages = 4, schedule = "interleaved-1f1b", virtual_stages = 2>} {
  dsc.mesh @mesh axes = ["pp"] shape = [2]
  func.func @step.stage0() attributes {dsc.program = #dsc.program_role<pipeline_step>, dsc.stage = 0 : i64} {
    // expected-error @+1 {{in an interleaved pipeline must name its chunk 0 <= c < 2}}
    dsc.pipeline_send activation to 1 microbatch = 0 on @mesh : tensor<2x4xf32>
    return
  }
}

// -----

module attributes {dsc.pipeline = #dsc.pipeline<stages = 4, schedule = "interleaved-1f1b", virtual_stages = 2>} {
  dsc.mesh @mesh axes = ["pp"] shape = [2]
  func.func @step.stage1() attributes {dsc.program = #dsc.program_role<pipeline_step>, dsc.stage = 1 : i64} {
    // expected-error @+1 {{stage 3 (rank 1 chunk 1) has no next stage to send activations to}}
    dsc.pipeline_send activation of chunk 1 to 0 microbatch = 0 on @mesh : tensor<2x4xf32>
    return
  }
}

// -----

module attributes {dsc.pipeline = #dsc.pipeline<stages = 6, schedule = "interleaved-1f1b", virtual_stages = 2>} {
  dsc.mesh @mesh axes = ["pp"] shape = [3]
  func.func @step.stage2() attributes {dsc.program = #dsc.program_role<pipeline_step>, dsc.stage = 2 : i64} {
    // expected-error @+1 {{stage 2 (rank 2 chunk 0) sends activations to stage 3 on rank 0, not rank 1}}
    dsc.pipeline_send activation of chunk 0 to 1 microbatch = 0 on @mesh : tensor<2x4xf32>
    return
  }
}

// -----

dsc.mesh @mesh axes = ["pp"] shape = [2]
func.func @step.stage0() attributes {dsc.program = #dsc.program_role<pipeline_step>, dsc.stage = 0 : i64} {
  // expected-error @+1 {{names chunk 1, but the pipeline is not interleaved}}
  dsc.pipeline_send activation of chunk 1 to 1 microbatch = 0 on @mesh : tensor<2x4xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{must be inside a pipeline stage's program (a function with dsc.stage)}}
  dsc.pipeline_backward @f microbatch = 0
  return
}

// -----

dsc.mesh @mesh axes = ["dp", "tp"] shape = [2, 4]
func.func @f(%x: tensor<6x16xf32>) {
  // expected-error @+1 {{dimension 0 of size 6 is not divisible by the group size 4}}
  %0 = dsc.scatter_to_parallel %x on @mesh axes = ["tp"] dim = 0 : tensor<6x16xf32> -> tensor<1x16xf32>
  return
}

// -----

dsc.mesh @mesh axes = ["dp", "tp"] shape = [2, 4]
func.func @f(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{result type 'tensor<4x16xf32>' must be 'tensor<2x16xf32>'}}
  %0 = dsc.scatter_to_parallel %x on @mesh axes = ["tp"] dim = 0 : tensor<8x16xf32> -> tensor<4x16xf32>
  return
}

// -----

func.func @optimizer() -> tensor<f32> {
  // expected-error @+1 {{warmup_start must be in [0, base = 1.000000e-03], got 2.000000e-03}}
  %lr = dsc.learning_rate warmup base = 1.000000e-03 min = 0.000000e+00 warmup = 10 total = 0 {warmup_start = 2.000000e-03 : f64} : tensor<f32>
  return %lr : tensor<f32>
}

// -----

func.func @optimizer() -> tensor<f32> {
  // expected-error @+1 {{min learning rate must be in [0, base = 1.000000e-03], got 2.000000e-03}}
  %lr = dsc.learning_rate warmup base = 1.000000e-03 min = 2.000000e-03 warmup = 10 total = 0 : tensor<f32>
  return %lr : tensor<f32>
}

// -----

func.func @optimizer() -> tensor<f32> {
  // expected-error @+1 {{'annealing_cosine' (GPT-NeoX's AnnealingLR) warms up linearly from 0: warmup_start and log_warmup do not apply}}
  %lr = dsc.learning_rate annealing_cosine base = 1.000000e-03 min = 0.000000e+00 warmup = 10 total = 100 {log_warmup} : tensor<f32>
  return %lr : tensor<f32>
}

// -----

func.func @optimizer() -> tensor<f32> {
  // expected-error @+1 {{a decaying schedule needs total steps (10) > warmup steps (10)}}
  %lr = dsc.learning_rate annealing_linear base = 1.000000e-03 min = 0.000000e+00 warmup = 10 total = 10 : tensor<f32>
  return %lr : tensor<f32>
}

// -----

func.func @optimizer() -> tensor<f32> {
  // expected-error @+1 {{one_cycle's max learning rate must be >= min = 1.000000e-03, got 1.000000e-04}}
  %lr = dsc.cyclic_learning_rate one_cycle min = 1.000000e-03 max = 1.000000e-04 first_size = 1.000000e+01 second_size = 5.000000e+00 first_stairs = 0 second_stairs = 0 decay_size = 0.000000e+00 rate = 0.000000e+00 : tensor<f32>
  return %lr : tensor<f32>
}

// -----

func.func @optimizer() -> tensor<f32> {
  // expected-error @+1 {{first_size must be > 0, got 0.000000e+00}}
  %lr = dsc.cyclic_learning_rate range_test min = 1.000000e-03 max = 1.000000e-03 first_size = 0.000000e+00 second_size = 0.000000e+00 first_stairs = 0 second_stairs = 0 decay_size = 0.000000e+00 rate = 1.000000e+00 : tensor<f32>
  return %lr : tensor<f32>
}

// -----

// expected-error @+1 {{parameter 'w' is in tier 'host' but is not a ZeRO-3 chunk; only chunks are offloaded}}
dsc.parameter @w : tensor<8x16xf32> init = #dsc.init<zeros> in host

// -----

dsc.mesh @mesh axes = ["dp"] shape = [2]
dsc.parameter @w : tensor<8xf32> init = #dsc.init<zeros> layout = #dsc.layout<view = [4, 4], split = [[], []], chunk = ["dp"]> in host
func.func @f() -> tensor<4x4xf32> {
  // expected-error @+1 {{parameter '@w' is in tier 'host'; gather it from a dsc.fetch_parameter copy (`from %chunk`)}}
  %w = dsc.gather_parameter @w on @mesh axes = ["dp"] : tensor<4x4xf32>
  return %w : tensor<4x4xf32>
}

// -----

dsc.mesh @mesh axes = ["dp"] shape = [2]
dsc.parameter @w : tensor<8xf32> init = #dsc.init<zeros> layout = #dsc.layout<view = [4, 4], split = [[], []], chunk = ["dp"]>
func.func @f(%c: tensor<8xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{parameter '@w' is on the device; `from` names a fetched copy of an offloaded chunk}}
  %w = dsc.gather_parameter @w from %c : tensor<8xf32> on @mesh axes = ["dp"] : tensor<4x4xf32>
  return %w : tensor<4x4xf32>
}

// -----

dsc.mesh @mesh axes = ["dp"] shape = [2]
dsc.parameter @w : tensor<8xf32> init = #dsc.init<zeros> layout = #dsc.layout<view = [4, 4], split = [[], []], chunk = ["dp"]> in nvme
func.func @f(%c: tensor<4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{gathers from 'tensor<4xf32>', not parameter '@w''s chunk type 'tensor<8xf32>'}}
  %w = dsc.gather_parameter @w from %c : tensor<4xf32> on @mesh axes = ["dp"] : tensor<4x4xf32>
  return %w : tensor<4x4xf32>
}

// -----

dsc.mesh @mesh axes = ["dp"] shape = [2]
dsc.parameter @w : tensor<8xf32> init = #dsc.init<zeros> layout = #dsc.layout<view = [4, 4], split = [[], []], chunk = ["dp"]>
func.func @f() -> tensor<8xf32> {
  // expected-error @+1 {{parameter '@w' is on the device; only a chunk in tier host or nvme is fetched}}
  %c = dsc.fetch_parameter @w : tensor<8xf32>
  return %c : tensor<8xf32>
}

// -----

dsc.mesh @mesh axes = ["dp"] shape = [2]
dsc.parameter @w : tensor<8xf32> init = #dsc.init<zeros> layout = #dsc.layout<view = [4, 4], split = [[], []], chunk = ["dp"]> in host
func.func @f() -> tensor<4xf32> {
  // expected-error @+1 {{result type 'tensor<4xf32>' does not match parameter '@w' of type 'tensor<8xf32>'}}
  %c = dsc.fetch_parameter @w : tensor<4xf32>
  return %c : tensor<4xf32>
}

// -----

dsc.mesh @mesh axes = ["dp"] shape = [2]
dsc.parameter @w : tensor<8xf32> init = #dsc.init<zeros> layout = #dsc.layout<view = [4, 4], split = [[], []], chunk = ["dp"]> in host
func.func @f() -> tensor<8xf32> {
  // expected-error @+1 {{reads parameter '@w' in tier 'host'; an offloaded chunk is fetched (dsc.fetch_parameter) and gathered}}
  %w = dsc.get_parameter @w : tensor<8xf32>
  return %w : tensor<8xf32>
}

// -----

dsc.mesh @mesh axes = ["dp"] shape = [2]
dsc.parameter @w : tensor<8xf32> init = #dsc.init<zeros> layout = #dsc.layout<view = [4, 4], split = [[], []], chunk = ["dp"]> in host
dsc.state @g : tensor<8xf32> gradient of @w
dsc.state @m : tensor<8xf32> exp_avg of @w in host
dsc.state @v : tensor<8xf32> exp_avg_sq of @w in host
func.func @f(%lr: tensor<f32>) {
  // expected-error @+1 {{grad '@g' is a gradient state, expected gradient_copy}}
  dsc.adamw @w grad = @g exp_avg = @m exp_avg_sq = @v lr = %lr beta1 = 0.9 beta2 = 0.95 eps = 1.0e-8 weight_decay = 0.0 : tensor<f32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{belongs in the optimizer program (the update it overlaps with the next step)}}
  dsc.overlap_next_step
  return
}

// -----

dsc.parameter @w : tensor<8xf32> init = #dsc.init<zeros>
dsc.state @g : tensor<8xf32> gradient of @w
func.func @optimizer() attributes {dsc.program = #dsc.program_role<optimizer>} {
  // expected-error @+1 {{is followed by 'dsc.zero'; only dsc.adamw updates run beside the next step}}
  dsc.overlap_next_step
  dsc.zero [@g]
  return
}

// -----

func.func @f(%x: tensor<8x16xf32>, %b: tensor<16x1xf32>) {
  // expected-error @+1 {{bias must be a vector of the input's last dimension's size [16], got 'tensor<16x1xf32>'}}
  %0 = dsc.bias_gelu %x, %b {exact} : tensor<8x16xf32>, tensor<16x1xf32>
  return
}

// -----

func.func @f(%x: tensor<f32>, %b: tensor<1xf32>, %dy: tensor<f32>) {
  // expected-error @+1 {{input must have rank >= 1}}
  %0 = dsc.bias_gelu_grad %x, %b, %dy : tensor<f32>, tensor<1xf32>
  return
}

// -----

// 1-bit Adam's ops: states of the right kind and parameter, betas in range.
dsc.parameter @w : tensor<16xf32> init = #dsc.init<zeros>
dsc.state @g : tensor<16xf32> gradient of @w
dsc.state @m : tensor<16xf32> exp_avg of @w
dsc.state @v : tensor<16xf32> exp_avg_sq of @w
func.func @f(%lr: tensor<f32>) {
  // expected-error @+1 {{exp_avg_sq '@m' is a exp_avg state, expected exp_avg_sq}}
  dsc.onebit_adam @w grad = @g exp_avg = @m exp_avg_sq = @m lr = %lr beta1 = 0.9 beta2 = 0.999 eps = 1.0e-8 weight_decay = 0.0 : tensor<f32>
  return
}

// -----

dsc.parameter @w : tensor<16xf32> init = #dsc.init<zeros>
dsc.state @g : tensor<16xf32> gradient of @w
dsc.state @m : tensor<16xf32> exp_avg of @w
func.func @f() {
  // expected-error @+1 {{beta1 must be in [0, 1), got 1}}
  dsc.adam_momentum @m grad = @g beta1 = 1.0
  return
}

// -----

dsc.parameter @w : tensor<16xf32> init = #dsc.init<zeros>
dsc.state @m : tensor<16xf32> exp_avg of @w
dsc.state @v : tensor<16xf32> exp_avg_sq of @w
func.func @f(%lr: tensor<f32>) {
  // expected-error @+1 {{eps must be > 0}}
  dsc.frozen_adam @w exp_avg = @m exp_avg_sq = @v lr = %lr eps = 0.0 weight_decay = 0.0 : tensor<f32>
  return
}

// -----

// ZeRO-1/2 under 1-bit Adam: the variance is this rank's chunk, the
// momentum stays whole.
dsc.mesh @mesh axes = ["dp"] shape = [4]
dsc.parameter @w : tensor<16xf32> init = #dsc.init<zeros>
dsc.state @g : tensor<16xf32> gradient of @w
dsc.state @m : tensor<16xf32> exp_avg of @w
dsc.state @v : tensor<16xf32> exp_avg_sq of @w
func.func @f(%lr: tensor<f32>) {
  // expected-error @+1 {{state '@v' has 16 elements; it needs a shard over the group's 4}}
  dsc.onebit_adam @w grad = @g exp_avg = @m exp_avg_sq = @v lr = %lr beta1 = 0.9 beta2 = 0.999 eps = 1.0e-8 weight_decay = 0.0 sharded on @mesh axes = ["dp"] : tensor<f32>
  return
}

// -----

dsc.mesh @mesh axes = ["dp"] shape = [4]
dsc.parameter @w : tensor<16xf32> init = #dsc.init<zeros>
dsc.state @m : tensor<4xf32> exp_avg of @w
dsc.state @v : tensor<4xf32> exp_avg_sq of @w
func.func @f(%lr: tensor<f32>) {
  // expected-error @+1 {{state '@m' has 4 elements; it needs the parameter's (1-bit Adam keeps the momentum whole) 16}}
  dsc.frozen_adam @w exp_avg = @m exp_avg_sq = @v lr = %lr eps = 1.0e-8 weight_decay = 0.0 sharded on @mesh axes = ["dp"] : tensor<f32>
  return
}

// -----

dsc.mesh @mesh axes = ["dp"] shape = [4]
dsc.parameter @w : tensor<15xf32> init = #dsc.init<zeros>
dsc.state @m : tensor<15xf32> exp_avg of @w
dsc.state @v : tensor<5xf32> exp_avg_sq of @w
func.func @f(%lr: tensor<f32>) {
  // expected-error @+1 {{parameter '@w' has 15 elements, not divisible into 4 shards}}
  dsc.frozen_adam @w exp_avg = @m exp_avg_sq = @v lr = %lr eps = 1.0e-8 weight_decay = 0.0 sharded on @mesh axes = ["dp"] : tensor<f32>
  return
}

// -----

// The errors' sizes are DeepSpeed's padding of the bucket: 16 + 8
// elements over 4 ranks pad to 32, of which each rank serves 8.
dsc.mesh @mesh axes = ["dp"] shape = [4]
dsc.parameter @w : tensor<16xf32> init = #dsc.init<zeros>
dsc.parameter @b : tensor<8xf32> init = #dsc.init<zeros>
dsc.state @m : tensor<16xf32> exp_avg of @w
dsc.state @mb : tensor<8xf32> exp_avg of @b
dsc.state @we : tensor<24xf32> worker_error of @w
dsc.state @se : tensor<8xf32> server_error of @w
func.func @f() {
  // expected-error @+1 {{'@we' is 'tensor<24xf32>'; the worker_error of 2 states of 24 elements (padded to 32 over 4 ranks) is tensor<32xf32>}}
  dsc.compressed_all_reduce_states [@m, @mb] worker_error = @we server_error = @se on @mesh axes = ["dp"]
  return
}

// -----

dsc.mesh @mesh axes = ["dp"] shape = [4]
dsc.parameter @w : tensor<16xf32> init = #dsc.init<zeros>
dsc.state @m : tensor<16xf32> exp_avg of @w
dsc.state @we : tensor<32xf32> worker_error of @w
func.func @f() {
  // expected-error @+1 {{'@we' is a worker_error state, expected server_error}}
  dsc.compressed_all_reduce_states [@m] worker_error = @we server_error = @we on @mesh axes = ["dp"]
  return
}

// -----

// expected-error @+1 {{attribute 'dsc.from_step' must be on a compressed_optimizer program only}}
func.func @f() attributes {dsc.program = #dsc.program_role<optimizer>, dsc.from_step = 3 : i64} {
  return
}
