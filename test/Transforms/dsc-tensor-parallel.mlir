// RUN: dsc-opt %s --dsc-tensor-parallel="tp=2" -split-input-file -verify-diagnostics | FileCheck %s
// RUN: not dsc-opt %s --dsc-tensor-parallel="tp=0" -split-input-file 2>&1 | FileCheck %s --check-prefix=TP0

// TP0: error: --dsc-tensor-parallel: plan key 'tp': '0' is not an integer >= 1

// An MLP, one rank of tp=2: the first product is column-parallel (the
// rank keeps 16 of the 32 columns of W1 and b1, its input passes through
// Megatron's f, copy_to_parallel), GELU runs on the rank's columns, the
// second product is row-parallel (16 of the 32 rows of W2) and its partial
// sums are all-reduced (Megatron's g) before the replicated bias. Split
// parameters keep their names and get the layout of the whole they are a
// part of; the mesh is declared.
// CHECK-LABEL: module {
// CHECK-NEXT: dsc.mesh @mesh axes = ["tp"] shape = [2]
// CHECK-NEXT: dsc.parameter @fc.weight : tensor<8x16xf32> {{.*}} layout = <view = [8, 32], split = {{\[}}[], ["tp"]]>
// CHECK-NEXT: dsc.parameter @fc.bias : tensor<16xf32> {{.*}} layout = <view = [32], split = {{\[}}["tp"]]>
// CHECK-NEXT: dsc.parameter @proj.weight : tensor<16x8xf32> {{.*}} layout = <view = [32, 8], split = {{\[}}["tp"], []]>
// CHECK-NEXT: dsc.parameter @proj.bias : tensor<8xf32> init = <zeros>{{$}}
// CHECK-LABEL: func.func @loss(%arg0: tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[W1:.*]] = dsc.get_parameter @fc.weight : tensor<8x16xf32>
// CHECK-NEXT: %[[B1:.*]] = dsc.get_parameter @fc.bias : tensor<16xf32>
// CHECK-NEXT: %[[F:.*]] = dsc.copy_to_parallel %arg0 on @mesh axes = ["tp"] : tensor<2x4x8xf32>
// CHECK-NEXT: %[[H:.*]] = dsc.matmul %[[F]], %[[W1]] : tensor<2x4x8xf32>, tensor<8x16xf32> -> tensor<2x4x16xf32>
// CHECK-NEXT: %[[HB:.*]] = dsc.bias_add %[[H]], %[[B1]] : tensor<2x4x16xf32>, tensor<16xf32>
// CHECK-NEXT: %[[G:.*]] = dsc.gelu %[[HB]] : tensor<2x4x16xf32>
// CHECK-NEXT: %[[W2:.*]] = dsc.get_parameter @proj.weight : tensor<16x8xf32>
// CHECK-NEXT: %[[B2:.*]] = dsc.get_parameter @proj.bias : tensor<8xf32>
// CHECK-NEXT: %[[Y:.*]] = dsc.matmul %[[G]], %[[W2]] : tensor<2x4x16xf32>, tensor<16x8xf32> -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[SUM:.*]] = dsc.all_reduce %[[Y]] on @mesh axes = ["tp"] : tensor<2x4x8xf32>
// CHECK-NEXT: %[[OUT:.*]] = dsc.bias_add %[[SUM]], %[[B2]] : tensor<2x4x8xf32>, tensor<8xf32>
// CHECK-NEXT: return %[[OUT]] : tensor<2x4x8xf32>

dsc.parameter @fc.weight : tensor<8x32xf32> init = #dsc.init<normal, std = 0.02>
dsc.parameter @fc.bias : tensor<32xf32> init = #dsc.init<zeros>
dsc.parameter @proj.weight : tensor<32x8xf32> init = #dsc.init<normal, std = 0.02>
dsc.parameter @proj.bias : tensor<8xf32> init = #dsc.init<zeros>
func.func @loss(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %w1 = dsc.get_parameter @fc.weight : tensor<8x32xf32>
  %b1 = dsc.get_parameter @fc.bias : tensor<32xf32>
  %h = dsc.matmul %x, %w1 : tensor<2x4x8xf32>, tensor<8x32xf32> -> tensor<2x4x32xf32>
  %hb = dsc.bias_add %h, %b1 : tensor<2x4x32xf32>, tensor<32xf32>
  %g = dsc.gelu %hb : tensor<2x4x32xf32>
  %w2 = dsc.get_parameter @proj.weight : tensor<32x8xf32>
  %b2 = dsc.get_parameter @proj.bias : tensor<8xf32>
  %y = dsc.matmul %g, %w2 : tensor<2x4x32xf32>, tensor<32x8xf32> -> tensor<2x4x8xf32>
  %yb = dsc.bias_add %y, %b2 : tensor<2x4x8xf32>, tensor<8xf32>
  return %yb : tensor<2x4x8xf32>
}

// -----

// Attention: the fused QKV product is column-parallel in the [h, 3, h]
// view (the rank keeps its heads' q, k and v columns), the attention runs
// on 2 of the 4 heads with q, k, v at the rank's columns 0, 4 and 8, and
// its head dropout masks follow the tp axis; the output projection is
// row-parallel.
// CHECK-LABEL: dsc.parameter @qkv.weight : tensor<8x12xf32> {{.*}} layout = <shape = [8, 24], view = [8, 3, 8], split = {{\[}}[], [], ["tp"]]>
// CHECK-NEXT: dsc.parameter @qkv.bias : tensor<12xf32> {{.*}} layout = <shape = [24], view = [3, 8], split = {{\[}}[], ["tp"]]>
// CHECK-NEXT: dsc.parameter @proj.weight : tensor<4x8xf32> {{.*}} layout = <view = [8, 8], split = {{\[}}["tp"], []]>
// CHECK-LABEL: func.func @loss
// CHECK: %[[F:.*]] = dsc.copy_to_parallel %arg0 on @mesh axes = ["tp"]
// CHECK-NEXT: %[[M:.*]] = dsc.matmul %[[F]], %{{.*}} : tensor<2x4x8xf32>, tensor<8x12xf32> -> tensor<2x4x12xf32>
// CHECK-NEXT: %[[QKV:.*]] = dsc.bias_add %[[M]], %{{.*}} : tensor<2x4x12xf32>, tensor<12xf32>
// CHECK-NEXT: %[[Q:.*]] = dsc.slice %[[QKV]] [0, 0, 0] [2, 4, 4] : tensor<2x4x12xf32> -> tensor<2x4x4xf32>
// CHECK-NEXT: %[[K:.*]] = dsc.slice %[[QKV]] [0, 0, 4] [2, 4, 4]
// CHECK-NEXT: %[[V:.*]] = dsc.slice %[[QKV]] [0, 0, 8] [2, 4, 4]
// CHECK-NEXT: %[[A:.*]] = dsc.attention %[[Q]], %[[K]], %[[V]] {causal, head_axes = ["tp"], num_heads = 2 : i64, seed = 1 : i64} : tensor<2x4x4xf32>
// CHECK: %[[P:.*]] = dsc.matmul %[[A]], %{{.*}} : tensor<2x4x4xf32>, tensor<4x8xf32> -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[SUM:.*]] = dsc.all_reduce %[[P]] on @mesh axes = ["tp"] : tensor<2x4x8xf32>
// CHECK-NEXT: dsc.bias_add %[[SUM]]

dsc.parameter @qkv.weight : tensor<8x24xf32> init = #dsc.init<normal, std = 0.02>
dsc.parameter @qkv.bias : tensor<24xf32> init = #dsc.init<zeros>
dsc.parameter @proj.weight : tensor<8x8xf32> init = #dsc.init<normal, std = 0.02>
dsc.parameter @proj.bias : tensor<8xf32> init = #dsc.init<zeros>
func.func @loss(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %w = dsc.get_parameter @qkv.weight : tensor<8x24xf32>
  %b = dsc.get_parameter @qkv.bias : tensor<24xf32>
  %m = dsc.matmul %x, %w : tensor<2x4x8xf32>, tensor<8x24xf32> -> tensor<2x4x24xf32>
  %qkv = dsc.bias_add %m, %b : tensor<2x4x24xf32>, tensor<24xf32>
  %q = dsc.slice %qkv [0, 0, 0] [2, 4, 8] : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
  %k = dsc.slice %qkv [0, 0, 8] [2, 4, 8] : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
  %v = dsc.slice %qkv [0, 0, 16] [2, 4, 8] : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
  %a = dsc.attention %q, %k, %v {causal, num_heads = 4 : i64, seed = 1 : i64} : tensor<2x4x8xf32>
  %pw = dsc.get_parameter @proj.weight : tensor<8x8xf32>
  %pb = dsc.get_parameter @proj.bias : tensor<8xf32>
  %p = dsc.matmul %a, %pw : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
  %pbb = dsc.bias_add %p, %pb : tensor<2x4x8xf32>, tensor<8xf32>
  return %pbb : tensor<2x4x8xf32>
}

// -----

// Rotary queries and keys: the rotation works head by head, so each rank
// rotates its own two heads' q and k columns with the same attributes.
// CHECK-LABEL: func.func @loss
// CHECK: %[[Q:.*]] = dsc.slice %{{.*}} [0, 0, 0] [2, 4, 4] : tensor<2x4x12xf32> -> tensor<2x4x4xf32>
// CHECK-NEXT: %[[RQ:.*]] = dsc.rotary %[[Q]] {head_dim = 2 : i64, rotary_dims = 2 : i64} : tensor<2x4x4xf32>
// CHECK-NEXT: %[[K:.*]] = dsc.slice %{{.*}} [0, 0, 4] [2, 4, 4]
// CHECK-NEXT: %[[RK:.*]] = dsc.rotary %[[K]] {{.*}} : tensor<2x4x4xf32>
// CHECK-NEXT: %[[V:.*]] = dsc.slice %{{.*}} [0, 0, 8] [2, 4, 4]
// CHECK-NEXT: dsc.attention %[[RQ]], %[[RK]], %[[V]] {causal, head_axes = ["tp"], num_heads = 2 : i64, seed = 1 : i64} : tensor<2x4x4xf32>

dsc.parameter @qkv.weight : tensor<8x24xf32> init = #dsc.init<normal, std = 0.02>
dsc.parameter @qkv.bias : tensor<24xf32> init = #dsc.init<zeros>
dsc.parameter @proj.weight : tensor<8x8xf32> init = #dsc.init<normal, std = 0.02>
dsc.parameter @proj.bias : tensor<8xf32> init = #dsc.init<zeros>
func.func @loss(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %w = dsc.get_parameter @qkv.weight : tensor<8x24xf32>
  %b = dsc.get_parameter @qkv.bias : tensor<24xf32>
  %m = dsc.matmul %x, %w : tensor<2x4x8xf32>, tensor<8x24xf32> -> tensor<2x4x24xf32>
  %qkv = dsc.bias_add %m, %b : tensor<2x4x24xf32>, tensor<24xf32>
  %q = dsc.slice %qkv [0, 0, 0] [2, 4, 8] : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
  %rq = dsc.rotary %q {head_dim = 2 : i64, rotary_dims = 2 : i64, base = 1.0e4 : f64} : tensor<2x4x8xf32>
  %k = dsc.slice %qkv [0, 0, 8] [2, 4, 8] : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
  %rk = dsc.rotary %k {head_dim = 2 : i64, rotary_dims = 2 : i64, base = 1.0e4 : f64} : tensor<2x4x8xf32>
  %v = dsc.slice %qkv [0, 0, 16] [2, 4, 8] : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
  %a = dsc.attention %rq, %rk, %v {causal, num_heads = 4 : i64, seed = 1 : i64} : tensor<2x4x8xf32>
  %pw = dsc.get_parameter @proj.weight : tensor<8x8xf32>
  %pb = dsc.get_parameter @proj.bias : tensor<8xf32>
  %p = dsc.matmul %a, %pw : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
  %pbb = dsc.bias_add %p, %pb : tensor<2x4x8xf32>, tensor<8xf32>
  return %pbb : tensor<2x4x8xf32>
}

// -----

// Grouped-query attention without biases (Llama): 4 query heads, 2
// key/value heads of 2 features. q's projection is column-parallel (the
// rank keeps 2 query heads), [K | V] in its [8, 2, 4] view (the rank keeps
// its key/value head of each); both read the input through one f, so the
// backward all-reduces its gradient once. The head repeat pairs the rank's
// query heads with its key/value head; the output projection, biasless,
// all-reduces its product.
// CHECK-LABEL: dsc.parameter @q.weight : tensor<8x4xf32> {{.*}} layout = <view = [8, 8], split = {{\[}}[], ["tp"]]>
// CHECK-NEXT: dsc.parameter @kv.weight : tensor<8x4xf32> {{.*}} layout = <shape = [8, 8], view = [8, 2, 4], split = {{\[}}[], [], ["tp"]]>
// CHECK-NEXT: dsc.parameter @proj.weight : tensor<4x8xf32> {{.*}} layout = <view = [8, 8], split = {{\[}}["tp"], []]>
// CHECK-LABEL: func.func @loss
// CHECK: %[[F:.*]] = dsc.copy_to_parallel %arg0 on @mesh axes = ["tp"]
// CHECK-NEXT: %[[Q:.*]] = dsc.matmul %[[F]], %{{.*}} : tensor<2x4x8xf32>, tensor<8x4xf32> -> tensor<2x4x4xf32>
// CHECK-NOT: dsc.copy_to_parallel
// CHECK: %[[KV:.*]] = dsc.matmul %[[F]], %{{.*}} : tensor<2x4x8xf32>, tensor<8x4xf32> -> tensor<2x4x4xf32>
// CHECK-NEXT: %[[K:.*]] = dsc.slice %[[KV]] [0, 0, 0] [2, 4, 2] : tensor<2x4x4xf32> -> tensor<2x4x2xf32>
// CHECK-NEXT: %[[V:.*]] = dsc.slice %[[KV]] [0, 0, 2] [2, 4, 2] : tensor<2x4x4xf32> -> tensor<2x4x2xf32>
// CHECK-NEXT: %[[RQ:.*]] = dsc.rotary %[[Q]] {{.*}} : tensor<2x4x4xf32>
// CHECK-NEXT: %[[RK:.*]] = dsc.rotary %[[K]] {{.*}} : tensor<2x4x2xf32>
// CHECK-NEXT: %[[K2:.*]] = dsc.repeat_heads %[[RK]] {head_dim = 2 : i64, repeats = 2 : i64} : tensor<2x4x2xf32> -> tensor<2x4x4xf32>
// CHECK-NEXT: %[[V2:.*]] = dsc.repeat_heads %[[V]] {head_dim = 2 : i64, repeats = 2 : i64} : tensor<2x4x2xf32> -> tensor<2x4x4xf32>
// CHECK-NEXT: %[[A:.*]] = dsc.attention %[[RQ]], %[[K2]], %[[V2]] {causal, head_axes = ["tp"], num_heads = 2 : i64, seed = 1 : i64} : tensor<2x4x4xf32>
// CHECK: %[[P:.*]] = dsc.matmul %[[A]], %{{.*}} : tensor<2x4x4xf32>, tensor<4x8xf32> -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[SUM:.*]] = dsc.all_reduce %[[P]] on @mesh axes = ["tp"] : tensor<2x4x8xf32>
// CHECK-NEXT: return %[[SUM]]

dsc.parameter @q.weight : tensor<8x8xf32> init = #dsc.init<normal, std = 0.02>
dsc.parameter @kv.weight : tensor<8x8xf32> init = #dsc.init<normal, std = 0.02>
dsc.parameter @proj.weight : tensor<8x8xf32> init = #dsc.init<normal, std = 0.02>
func.func @loss(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %wq = dsc.get_parameter @q.weight : tensor<8x8xf32>
  %q = dsc.matmul %x, %wq : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
  %wkv = dsc.get_parameter @kv.weight : tensor<8x8xf32>
  %kv = dsc.matmul %x, %wkv : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
  %k = dsc.slice %kv [0, 0, 0] [2, 4, 4] : tensor<2x4x8xf32> -> tensor<2x4x4xf32>
  %v = dsc.slice %kv [0, 0, 4] [2, 4, 4] : tensor<2x4x8xf32> -> tensor<2x4x4xf32>
  %rq = dsc.rotary %q {head_dim = 2 : i64, rotary_dims = 2 : i64} : tensor<2x4x8xf32>
  %rk = dsc.rotary %k {head_dim = 2 : i64, rotary_dims = 2 : i64} : tensor<2x4x4xf32>
  %k2 = dsc.repeat_heads %rk {head_dim = 2 : i64, repeats = 2 : i64} : tensor<2x4x4xf32> -> tensor<2x4x8xf32>
  %v2 = dsc.repeat_heads %v {head_dim = 2 : i64, repeats = 2 : i64} : tensor<2x4x4xf32> -> tensor<2x4x8xf32>
  %a = dsc.attention %rq, %k2, %v2 {causal, num_heads = 4 : i64, seed = 1 : i64} : tensor<2x4x8xf32>
  %pw = dsc.get_parameter @proj.weight : tensor<8x8xf32>
  %p = dsc.matmul %a, %pw : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
  return %p : tensor<2x4x8xf32>
}

// -----

// SwiGLU: the fused [up | gate] product is column-parallel in its
// [8, 2, 16] view, so the rank's 16 columns hold 8 of up and the same 8 of
// gate, and the gated product is the rank's 8 columns.
// CHECK-LABEL: dsc.parameter @fc.weight : tensor<8x16xf32> {{.*}} layout = <shape = [8, 32], view = [8, 2, 16], split = {{\[}}[], [], ["tp"]]>
// CHECK-NEXT: dsc.parameter @proj.weight : tensor<8x8xf32> {{.*}} layout = <view = [16, 8], split = {{\[}}["tp"], []]>
// CHECK-LABEL: func.func @loss
// CHECK: dsc.swiglu %{{.*}} : tensor<2x4x16xf32> -> tensor<2x4x8xf32>

dsc.parameter @fc.weight : tensor<8x32xf32> init = #dsc.init<normal, std = 0.02>
dsc.parameter @proj.weight : tensor<16x8xf32> init = #dsc.init<normal, std = 0.02>
func.func @loss(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %w1 = dsc.get_parameter @fc.weight : tensor<8x32xf32>
  %h = dsc.matmul %x, %w1 : tensor<2x4x8xf32>, tensor<8x32xf32> -> tensor<2x4x32xf32>
  %g = dsc.swiglu %h : tensor<2x4x32xf32> -> tensor<2x4x16xf32>
  %w2 = dsc.get_parameter @proj.weight : tensor<16x8xf32>
  %y = dsc.matmul %g, %w2 : tensor<2x4x16xf32>, tensor<16x8xf32> -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// The tied embedding and LM head are vocabulary-parallel: the rank keeps 8
// of the 16 rows, looks up its tokens and g sums the lookups; the head
// computes the rank's 8 logit columns behind f, and the loss combines
// them without whole logits. A mesh with a tp axis of size 2 is used as it
// is.
// CHECK-LABEL: dsc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
// CHECK-NEXT: dsc.parameter @wte : tensor<8x8xf32> {{.*}} layout = <view = [16, 8], split = {{\[}}["tp"], []]>
// CHECK-LABEL: func.func @loss
// CHECK-NEXT: %[[W:.*]] = dsc.get_parameter @wte : tensor<8x8xf32>
// CHECK-NEXT: %[[E:.*]] = dsc.vocab_parallel_embedding %[[W]], %arg0 on @mesh axes = ["tp"] : tensor<8x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[X:.*]] = dsc.all_reduce %[[E]] on @mesh axes = ["tp"] : tensor<2x4x8xf32>
// CHECK-NEXT: %[[F:.*]] = dsc.copy_to_parallel %[[X]] on @mesh axes = ["tp"] : tensor<2x4x8xf32>
// CHECK-NEXT: %[[L:.*]] = dsc.matmul %[[F]], %[[W]] {transpose_rhs} : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[LOSS:.*]] = dsc.vocab_parallel_cross_entropy %[[L]], %arg1 on @mesh axes = ["tp"] : tensor<2x4x8xf32>, tensor<2x4xi32> -> tensor<f32>
// CHECK-NEXT: return %[[LOSS]] : tensor<f32>
// CHECK-NOT: dsc.mesh

dsc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
dsc.parameter @wte : tensor<16x8xf32> init = #dsc.init<normal, std = 0.02>
func.func @loss(%ids: tensor<2x4xi32>, %t: tensor<2x4xi32>) -> tensor<f32> {
  %w = dsc.get_parameter @wte : tensor<16x8xf32>
  %x = dsc.embedding %w, %ids : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
  %logits = dsc.matmul %x, %w {transpose_rhs} : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
  %l = dsc.cross_entropy %logits, %t : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A padded vocabulary (11 classes of 16 rows) stays padded: the
// vocabulary-parallel loss counts the whole vocabulary's classes, so rank
// 1's columns 8..15 hold classes 8..10 and five padding rows.
// CHECK-LABEL: dsc.mesh @mesh axes = ["tp"] shape = [2]
// CHECK-LABEL: func.func @loss
// CHECK: dsc.vocab_parallel_cross_entropy %{{.*}}, %arg1 on @mesh axes = ["tp"] {classes = 11 : i64} : tensor<2x4x8xf32>, tensor<2x4xi32> -> tensor<f32>
func.func @loss(%ids: tensor<2x4xi32>, %t: tensor<2x4xi32>) -> tensor<f32> {
  %w = dsc.get_parameter @wte : tensor<16x8xf32>
  %x = dsc.embedding %w, %ids : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
  %logits = dsc.matmul %x, %w {transpose_rhs} : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
  %l = dsc.cross_entropy %logits, %t {classes = 11 : i64} : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<f32>
  return %l : tensor<f32>
}
dsc.parameter @wte : tensor<16x8xf32> init = #dsc.init<normal, std = 0.02>

// -----

// Sizes tp does not divide are errors naming the numbers.
func.func @loss(%x: tensor<2x4x6xf32>) -> tensor<2x4x6xf32> {
  %w = dsc.get_parameter @qkv.weight : tensor<6x18xf32>
  %b = dsc.get_parameter @qkv.bias : tensor<18xf32>
  %m = dsc.matmul %x, %w : tensor<2x4x6xf32>, tensor<6x18xf32> -> tensor<2x4x18xf32>
  %qkv = dsc.bias_add %m, %b : tensor<2x4x18xf32>, tensor<18xf32>
  %q = dsc.slice %qkv [0, 0, 0] [2, 4, 6] : tensor<2x4x18xf32> -> tensor<2x4x6xf32>
  %k = dsc.slice %qkv [0, 0, 6] [2, 4, 6] : tensor<2x4x18xf32> -> tensor<2x4x6xf32>
  %v = dsc.slice %qkv [0, 0, 12] [2, 4, 6] : tensor<2x4x18xf32> -> tensor<2x4x6xf32>
  // expected-error @+1 {{'dsc.attention' op --dsc-tensor-parallel: 3 attention heads are not divisible by tp=2}}
  %a = dsc.attention %q, %k, %v {causal, num_heads = 3 : i64, seed = 1 : i64} : tensor<2x4x6xf32>
  return %a : tensor<2x4x6xf32>
}
dsc.parameter @qkv.weight : tensor<6x18xf32> init = #dsc.init<zeros>
dsc.parameter @qkv.bias : tensor<18xf32> init = #dsc.init<zeros>

// -----

dsc.parameter @fc.weight : tensor<8x5xf32> init = #dsc.init<zeros>
dsc.parameter @fc.bias : tensor<5xf32> init = #dsc.init<zeros>
dsc.parameter @proj.weight : tensor<5x8xf32> init = #dsc.init<zeros>
dsc.parameter @proj.bias : tensor<8xf32> init = #dsc.init<zeros>
func.func @loss(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %w1 = dsc.get_parameter @fc.weight : tensor<8x5xf32>
  %b1 = dsc.get_parameter @fc.bias : tensor<5xf32>
  %h = dsc.matmul %x, %w1 : tensor<2x4x8xf32>, tensor<8x5xf32> -> tensor<2x4x5xf32>
  %hb = dsc.bias_add %h, %b1 : tensor<2x4x5xf32>, tensor<5xf32>
  // expected-error @+1 {{'dsc.gelu' op --dsc-tensor-parallel: the MLP width 5 is not divisible by tp=2}}
  %g = dsc.gelu %hb : tensor<2x4x5xf32>
  %w2 = dsc.get_parameter @proj.weight : tensor<5x8xf32>
  %b2 = dsc.get_parameter @proj.bias : tensor<8xf32>
  %y = dsc.matmul %g, %w2 : tensor<2x4x5xf32>, tensor<5x8xf32> -> tensor<2x4x8xf32>
  %yb = dsc.bias_add %y, %b2 : tensor<2x4x8xf32>, tensor<8xf32>
  return %yb : tensor<2x4x8xf32>
}

// -----

dsc.parameter @wte : tensor<15x8xf32> init = #dsc.init<zeros>
func.func @loss(%ids: tensor<2x4xi32>) -> tensor<2x4x8xf32> {
  %w = dsc.get_parameter @wte : tensor<15x8xf32>
  // expected-error @+1 {{'dsc.embedding' op --dsc-tensor-parallel: the vocabulary (15 tokens) is not divisible by tp=2; pad it (Megatron's make-vocab-size-divisible-by; a Hugging Face model: dsc-translate --import-hf-pad-vocab-to N)}}
  %x = dsc.embedding %w, %ids : tensor<15x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
  return %x : tensor<2x4x8xf32>
}

// -----

// Graphs not in Megatron's shapes are refused.
dsc.parameter @fc.weight : tensor<8x32xf32> init = #dsc.init<zeros>
func.func @loss(%x: tensor<2x4x8xf32>) -> tensor<2x4x32xf32> {
  %w1 = dsc.get_parameter @fc.weight : tensor<8x32xf32>
  %h = dsc.matmul %x, %w1 : tensor<2x4x8xf32>, tensor<8x32xf32> -> tensor<2x4x32xf32>
  // expected-error @+1 {{'dsc.gelu' op --dsc-tensor-parallel: expected the MLP x · W1 (+ b1) -> activation -> · W2 (+ b2)}}
  %g = dsc.gelu %h : tensor<2x4x32xf32>
  return %g : tensor<2x4x32xf32>
}

// -----

func.func @loss(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'dsc.attention' op --dsc-tensor-parallel: expected q, k, v projected from one input (rotary on q and k, head repeats on k and v) and the output projection after the attention}}
  %a = dsc.attention %q, %k, %v {causal, num_heads = 4 : i64, seed = 1 : i64} : tensor<2x4x8xf32>
  return %a : tensor<2x4x8xf32>
}

// -----

dsc.parameter @head : tensor<8x16xf32> init = #dsc.init<zeros>
func.func @loss(%x: tensor<2x4x8xf32>, %t: tensor<2x4xi32>) -> tensor<f32> {
  %w = dsc.get_parameter @head : tensor<8x16xf32>
  %logits = dsc.matmul %x, %w : tensor<2x4x8xf32>, tensor<8x16xf32> -> tensor<2x4x16xf32>
  // expected-error @+1 {{'dsc.cross_entropy' op --dsc-tensor-parallel: expected the logits to be x · Wᵀ of a [vocab, hidden] parameter (the LM head)}}
  %l = dsc.cross_entropy %logits, %t : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A parameter split already (the pass ran before) is not split again.
dsc.mesh @mesh axes = ["tp"] shape = [2]
// expected-error @+1 {{'dsc.parameter' op --dsc-tensor-parallel: parameter 'wte' is split already}}
dsc.parameter @wte : tensor<8x8xf32> init = #dsc.init<zeros> layout = #dsc.layout<view = [16, 8], split = [["tp"], []]>
func.func @loss(%ids: tensor<2x4xi32>) -> tensor<2x4x8xf32> {
  %w = dsc.get_parameter @wte : tensor<8x8xf32>
  %x = dsc.embedding %w, %ids : tensor<8x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
  return %x : tensor<2x4x8xf32>
}

// -----

// expected-error @+1 {{--dsc-tensor-parallel: mesh @mesh needs a 'tp' axis of size 2}}
dsc.mesh @mesh axes = ["dp"] shape = [2]
func.func @loss(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  return %x : tensor<2x4x8xf32>
}

// -----

// expected-error @+1 {{--dsc-tensor-parallel: mesh @mesh needs a 'tp' axis of size 2}}
dsc.mesh @mesh axes = ["tp"] shape = [4]
func.func @loss(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  return %x : tensor<2x4x8xf32>
}

// -----

// expected-error @+1 {{--dsc-tensor-parallel slices the forward graph and must run before --dsc-autodiff}}
module {
  func.func @loss(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
    return %x : tensor<2x4x8xf32>
  }
  func.func @forward_backward() attributes {dsc.program = #dsc.program_role<forward_backward>} {
    return
  }
}

// -----

// expected-error @+1 {{--dsc-tensor-parallel: no function @loss computing the loss}}
module {
  func.func private @loss(tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
}
