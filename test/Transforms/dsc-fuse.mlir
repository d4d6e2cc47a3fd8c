// RUN: dsc-opt %s --dsc-fuse -split-input-file -verify-diagnostics | FileCheck %s

// A weight's gradient product accumulated into its device state becomes one
// dsc.matmul_accumulate at the accumulate's place, with the product's flags
// (f32 and bf16 alike: an accumulate's value is its state's type); the
// other products stay: %b is read by something else, @grad.h (host) is
// --dsc-offload's (the GEMM writes device memory only).
// CHECK-LABEL: func.func @backward
// CHECK-NEXT: %[[B:.*]] = dsc.matmul %arg0, %arg1 {transpose_lhs}
// CHECK-NEXT: %[[D:.*]] = dsc.matmul %arg0, %arg1 {transpose_lhs}
// CHECK-NEXT: dsc.matmul_accumulate %arg0, %arg1 {transpose_lhs} into @grad.w : tensor<8x4xf32>, tensor<8x4xf32>
// CHECK-NEXT: dsc.accumulate %[[B]] into @grad.v
// CHECK-NEXT: dsc.gelu %[[B]]
// CHECK-NEXT: dsc.matmul_accumulate %arg2, %arg3 {transpose_lhs} into @grad.b16 : tensor<8x4xbf16>, tensor<8x4xbf16>
// CHECK-NEXT: dsc.accumulate %[[D]] into @grad.h
// CHECK-NEXT: return
dsc.state @grad.w : tensor<4x4xf32> gradient of @w
dsc.state @grad.v : tensor<4x4xf32> gradient of @v
dsc.state @grad.b16 : tensor<4x4xbf16> gradient of @b16
dsc.state @grad.h : tensor<4x4xf32> gradient of @hw in host
dsc.parameter @w : tensor<4x4xf32> init = #dsc.init<zeros>
dsc.parameter @v : tensor<4x4xf32> init = #dsc.init<zeros>
dsc.parameter @b16 : tensor<4x4xbf16> init = #dsc.init<zeros>
dsc.parameter @hw : tensor<4x4xf32> init = #dsc.init<zeros>
func.func @backward(%x: tensor<8x4xf32>, %dy: tensor<8x4xf32>, %x16: tensor<8x4xbf16>, %dy16: tensor<8x4xbf16>) attributes {dsc.program = #dsc.program_role<forward_backward>} {
  %a = dsc.matmul %x, %dy {transpose_lhs} : tensor<8x4xf32>, tensor<8x4xf32> -> tensor<4x4xf32> loc("h.0.fc")
  %b = dsc.matmul %x, %dy {transpose_lhs} : tensor<8x4xf32>, tensor<8x4xf32> -> tensor<4x4xf32>
  %c = dsc.matmul %x16, %dy16 {transpose_lhs} : tensor<8x4xbf16>, tensor<8x4xbf16> -> tensor<4x4xbf16>
  %d = dsc.matmul %x, %dy {transpose_lhs} : tensor<8x4xf32>, tensor<8x4xf32> -> tensor<4x4xf32>
  dsc.accumulate %a into @grad.w : tensor<4x4xf32>
  dsc.accumulate %b into @grad.v : tensor<4x4xf32>
  %e = dsc.gelu %b : tensor<4x4xf32>
  dsc.accumulate %c into @grad.b16 : tensor<4x4xbf16>
  dsc.accumulate %d into @grad.h : tensor<4x4xf32>
  return
}

// -----

// The fused op's verifier: the product must be the state's type.
dsc.parameter @w : tensor<4x4xf32> init = #dsc.init<zeros>
dsc.state @grad.w : tensor<4x4xf32> gradient of @w
func.func @bad(%x: tensor<8x4xf32>, %dy: tensor<8x3xf32>) {
  // expected-error @+1 {{product type 'tensor<4x3xf32>' differs from state '@grad.w' of type 'tensor<4x4xf32>'}}
  dsc.matmul_accumulate %x, %dy {transpose_lhs} into @grad.w : tensor<8x4xf32>, tensor<8x3xf32>
  return
}

// -----

dsc.parameter @w : tensor<4x4xf32> init = #dsc.init<zeros>
dsc.state @grad.w : tensor<4x4xf32> gradient of @w
func.func @badk(%x: tensor<8x4xf32>, %dy: tensor<7x4xf32>) {
  // expected-error @+1 {{contracting dimensions differ: lhs has K = 8, rhs has K = 7}}
  dsc.matmul_accumulate %x, %dy {transpose_lhs} into @grad.w : tensor<8x4xf32>, tensor<7x4xf32>
  return
}

// -----

// Megatron's bias_gelu: a bias add read only by a gelu and its gelu_grad
// becomes bias_gelu at the gelu's place and bias_gelu_grad (the sum
// recomputed from %mm and %b) at the gradient's, tanh and exact alike; the
// bias's gradient stays bias_grad of the fused gradient, and the fused ops
// keep the gelu's (and its gradient's) layer.
// CHECK-LABEL: func.func @mlp
// CHECK-SAME: (%[[MM:.*]]: tensor<8x16xf32>, %[[B:.*]]: tensor<16xf32>, %[[DY:.*]]: tensor<8x16xf32>)
// CHECK-NOT: dsc.bias_add
// CHECK-NOT: dsc.gelu
// CHECK: %[[G:.*]] = dsc.bias_gelu %[[MM]], %[[B]] {dsc.layer = 0 : i64} : tensor<8x16xf32>, tensor<16xf32>
// CHECK-NEXT: %[[E:.*]] = dsc.bias_gelu %[[MM]], %[[B]] {exact} : tensor<8x16xf32>, tensor<16xf32>
// CHECK-NEXT: %[[S:.*]] = dsc.add %[[G]], %[[E]]
// CHECK-NEXT: %[[DX:.*]] = dsc.bias_gelu_grad %[[MM]], %[[B]], %[[DY]] {dsc.layer = 0 : i64} : tensor<8x16xf32>, tensor<16xf32>
// CHECK-NEXT: %[[DE:.*]] = dsc.bias_gelu_grad %[[MM]], %[[B]], %[[DY]] {exact} : tensor<8x16xf32>, tensor<16xf32>
// CHECK-NEXT: %[[DB:.*]] = dsc.bias_grad %[[DX]]
// CHECK-NEXT: return %[[S]], %[[DX]], %[[DE]], %[[DB]]
func.func @mlp(%mm: tensor<8x16xf32>, %b: tensor<16xf32>, %dy: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16xf32>) attributes {dsc.program = #dsc.program_role<forward_backward>} {
  %ba = dsc.bias_add %mm, %b {dsc.layer = 0 : i64} : tensor<8x16xf32>, tensor<16xf32>
  %g = dsc.gelu %ba {dsc.layer = 0 : i64} : tensor<8x16xf32>
  %ea = dsc.bias_add %mm, %b : tensor<8x16xf32>, tensor<16xf32>
  %e = dsc.gelu %ea {exact} : tensor<8x16xf32>
  %s = dsc.add %g, %e : tensor<8x16xf32>
  %dx = dsc.gelu_grad %ba, %dy {dsc.layer = 0 : i64} : tensor<8x16xf32>
  %de = dsc.gelu_grad %ea, %dy {exact} : tensor<8x16xf32>
  %db = dsc.bias_grad %dx : tensor<8x16xf32> -> tensor<16xf32>
  return %s, %dx, %de, %db : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16xf32>
}

// -----

// Not fused: a sum with a third user (it must exist: here a pipeline stage's
// forward returning it to its backward program), a gelu and gelu_grad of
// different forms, a sum that is gelu_grad's incoming gradient, a sum read
// by gelu_grad alone (--dsc-recompute's clone without its gelu). A sum read
// by the gelu alone (a forward program's, or the forward's when the
// backward reads a recomputed clone) becomes bias_gelu.
// CHECK-LABEL: func.func @kept
// CHECK-NEXT: dsc.bias_add
// CHECK-NEXT: dsc.gelu
// CHECK-NEXT: dsc.gelu_grad
// CHECK-NEXT: dsc.bias_add
// CHECK-NEXT: dsc.gelu
// CHECK-NEXT: dsc.gelu_grad {{.*}} {exact}
// CHECK-NEXT: %[[FG:.*]] = dsc.bias_gelu %arg0, %arg1 : tensor<8x16xf32>, tensor<16xf32>
// CHECK-NEXT: dsc.bias_add
// CHECK-NEXT: dsc.gelu
// CHECK-NEXT: dsc.gelu_grad
// CHECK-NEXT: dsc.bias_add
// CHECK-NEXT: dsc.gelu_grad
// CHECK-NEXT: return
func.func @kept(%mm: tensor<8x16xf32>, %b: tensor<16xf32>, %dy: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) {
  %ba = dsc.bias_add %mm, %b : tensor<8x16xf32>, tensor<16xf32>
  %g = dsc.gelu %ba : tensor<8x16xf32>
  %dx = dsc.gelu_grad %ba, %dy : tensor<8x16xf32>
  %ma = dsc.bias_add %mm, %b : tensor<8x16xf32>, tensor<16xf32>
  %mg = dsc.gelu %ma : tensor<8x16xf32>
  %mdx = dsc.gelu_grad %ma, %dy {exact} : tensor<8x16xf32>
  %fa = dsc.bias_add %mm, %b : tensor<8x16xf32>, tensor<16xf32>
  %fg = dsc.gelu %fa : tensor<8x16xf32>
  %ga = dsc.bias_add %mm, %b : tensor<8x16xf32>, tensor<16xf32>
  %gg = dsc.gelu %ga : tensor<8x16xf32>
  %gdx = dsc.gelu_grad %dy, %ga : tensor<8x16xf32>
  %ra = dsc.bias_add %mm, %b : tensor<8x16xf32>, tensor<16xf32>
  %rdx = dsc.gelu_grad %ra, %dy : tensor<8x16xf32>
  return %ba, %dx, %mdx, %fg, %gg, %gdx, %rdx : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>
}

// -----

// The fused ops' verifiers: the bias is a vector of the input's last dim.
func.func @bad_bias(%x: tensor<8x16xf32>, %b: tensor<8xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{bias must be a vector of the input's last dimension's size [16], got 'tensor<8xf32>'}}
  %y = dsc.bias_gelu %x, %b : tensor<8x16xf32>, tensor<8xf32>
  return %y : tensor<8x16xf32>
}

// -----

func.func @bad_grad_bias(%x: tensor<8x16xf32>, %b: tensor<16xbf16>, %dy: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{bias element type 'bf16' must match the input element type 'f32'}}
  %dx = dsc.bias_gelu_grad %x, %b, %dy : tensor<8x16xf32>, tensor<16xbf16>
  return %dx : tensor<8x16xf32>
}

// -----

// Attention's saved statistics: the gradient pairs with the latest forward
// of its q, k, v and attributes before it (%o2, not %o1: under recompute,
// the backward's clone), which now writes the rows' logsumexp; the forward
// of other attributes (%c, no causal) and a gradient without a forward
// (%dk2's q is %k) stay; f64 operands get an f64 logsumexp.
// CHECK-LABEL: func.func @attention
// CHECK-NEXT: %[[O1:.*]] = dsc.attention %arg0, %arg1, %arg2 {causal, num_heads = 2 : i64} : tensor<2x8x16xf32>
// CHECK-NEXT: %[[C:.*]] = dsc.attention %arg0, %arg1, %arg2 {num_heads = 2 : i64} : tensor<2x8x16xf32>
// CHECK-NEXT: %[[O2:.*]], %[[LSE:.*]] = dsc.attention_lse %arg0, %arg1, %arg2 {causal, num_heads = 2 : i64} : tensor<2x8x16xf32>, tensor<2x2x8xf32>
// CHECK-NEXT: %{{.*}}, %{{.*}}, %{{.*}} = dsc.attention_grad_lse %arg0, %arg1, %arg2, %arg3, %[[O2]], %[[LSE]] {causal, num_heads = 2 : i64} : tensor<2x8x16xf32>, tensor<2x2x8xf32>
// CHECK-NEXT: %{{.*}}, %{{.*}}, %{{.*}} = dsc.attention_grad %arg1, %arg1, %arg2, %arg3 {causal, num_heads = 2 : i64} : tensor<2x8x16xf32>
// CHECK-NEXT: %[[D:.*]], %[[DLSE:.*]] = dsc.attention_lse %arg4, %arg4, %arg4 {num_heads = 1 : i64} : tensor<1x4x8xf64>, tensor<1x1x4xf64>
// CHECK-NEXT: %{{.*}}, %{{.*}}, %{{.*}} = dsc.attention_grad_lse %arg4, %arg4, %arg4, %arg4, %[[D]], %[[DLSE]] {num_heads = 1 : i64} : tensor<1x4x8xf64>, tensor<1x1x4xf64>
func.func @attention(%q: tensor<2x8x16xf32>, %k: tensor<2x8x16xf32>, %v: tensor<2x8x16xf32>, %do: tensor<2x8x16xf32>, %x: tensor<1x4x8xf64>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<1x4x8xf64>, tensor<1x4x8xf64>) attributes {dsc.program = #dsc.program_role<forward_backward>} {
  %o1 = dsc.attention %q, %k, %v {num_heads = 2 : i64, causal} : tensor<2x8x16xf32>
  %c = dsc.attention %q, %k, %v {num_heads = 2 : i64} : tensor<2x8x16xf32>
  %o2 = dsc.attention %q, %k, %v {num_heads = 2 : i64, causal} : tensor<2x8x16xf32>
  %dq, %dk, %dv = dsc.attention_grad %q, %k, %v, %do {num_heads = 2 : i64, causal} : tensor<2x8x16xf32>
  %dq2, %dk2, %dv2 = dsc.attention_grad %k, %k, %v, %do {num_heads = 2 : i64, causal} : tensor<2x8x16xf32>
  %d = dsc.attention %x, %x, %x {num_heads = 1 : i64} : tensor<1x4x8xf64>
  %dx, %dy, %dz = dsc.attention_grad %x, %x, %x, %x {num_heads = 1 : i64} : tensor<1x4x8xf64>
  return %o1, %c, %o2, %dq, %dk2, %dv, %d, %dx : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<1x4x8xf64>, tensor<1x4x8xf64>
}

// -----

// The fused attention's verifiers: the logsumexp is [batch, heads, seq] of
// f32 (f64 for f64 operands).
func.func @bad_lse_shape(%q: tensor<2x8x16xf32>) -> tensor<2x8x16xf32> {
  // expected-error @+1 {{lse must be [batch, heads, seq] = [2x2x8], got [2x8x2]}}
  %o, %lse = dsc.attention_lse %q, %q, %q {num_heads = 2 : i64} : tensor<2x8x16xf32>, tensor<2x8x2xf32>
  return %o : tensor<2x8x16xf32>
}

// -----

func.func @bad_lse_type(%q: tensor<2x8x16xbf16>, %o: tensor<2x8x16xbf16>, %lse: tensor<2x2x8xbf16>) -> tensor<2x8x16xbf16> {
  // expected-error @+1 {{lse must be 'f32' (the scores' logsumexp of 'bf16' operands), got 'bf16'}}
  %dq, %dk, %dv = dsc.attention_grad_lse %q, %q, %q, %q, %o, %lse {num_heads = 2 : i64} : tensor<2x8x16xbf16>, tensor<2x2x8xbf16>
  return %dq : tensor<2x8x16xbf16>
}

// -----

func.func @bad_heads(%q: tensor<2x8x16xf32>) -> tensor<2x8x16xf32> {
  // expected-error @+1 {{hidden size 16 is not divisible by num_heads 3}}
  %o, %lse = dsc.attention_lse %q, %q, %q {num_heads = 3 : i64} : tensor<2x8x16xf32>, tensor<2x3x8xf32>
  return %o : tensor<2x8x16xf32>
}
