// RUN: dsc-opt %s | FileCheck %s
// Round trip through the custom form and through the generic form.
// RUN: dsc-opt %s | dsc-opt | FileCheck %s
// RUN: dsc-opt %s --mlir-print-op-generic | dsc-opt | FileCheck %s

// CHECK: dsc.mesh @mesh axes = ["dp", "pp", "tp"] shape = [2, 2, 2]
dsc.mesh @mesh axes = ["dp", "pp", "tp"] shape = [2, 2, 2]

// CHECK: dsc.parameter @wte.weight : tensor<256x64xf32> init = <normal, std = 2.000000e-02>
dsc.parameter @wte.weight : tensor<256x64xf32> init = #dsc.init<normal, std = 0.02>
// CHECK: dsc.parameter @wpe.weight : tensor<16x64xf32> init = <normal, std = 1.000000e-02>
dsc.parameter @wpe.weight : tensor<16x64xf32> init = #dsc.init<normal, std = 0.01>
// CHECK: dsc.parameter @h.0.proj.weight : tensor<64x64xf32> init = <scaled_normal, std = 2.000000e-02, num_layers = 12>
dsc.parameter @h.0.proj.weight : tensor<64x64xf32> init = #dsc.init<scaled_normal, std = 0.02, num_layers = 12>
// CHECK: dsc.parameter @h.0.ln.weight : tensor<64xf32> init = <ones>
dsc.parameter @h.0.ln.weight : tensor<64xf32> init = #dsc.init<ones>
// CHECK: dsc.parameter @h.0.ln.bias : tensor<64xf32> init = <zeros>
dsc.parameter @h.0.ln.bias : tensor<64xf32> init = #dsc.init<zeros>
// CHECK: dsc.parameter @h.0.qkv.weight : tensor<64x96xf32> init = <normal, std = 2.000000e-02> layout = <view = [64, 3, 64], split = {{\[}}[], [], ["tp"]]>
dsc.parameter @h.0.qkv.weight : tensor<64x96xf32> init = #dsc.init<normal, std = 0.02> layout = #dsc.layout<view = [64, 3, 64], split = [[], [], ["tp"]]>
// CHECK: dsc.parameter @h.0.fc.weight : tensor<1024xf32> init = <normal, std = 2.000000e-02> layout = <view = [64, 64], split = {{\[}}[], ["tp"]], chunk = ["dp"]>
dsc.parameter @h.0.fc.weight : tensor<1024xf32> init = #dsc.init<normal, std = 0.02> layout = #dsc.layout<view = [64, 64], split = [[], ["tp"]], chunk = ["dp"]>
// A ZeRO-3 chunk of a tensor-sliced fused QKV weight records the whole shape.
// CHECK: dsc.parameter @h.1.qkv.weight : tensor<3072xf32> init = <normal, std = 2.000000e-02> layout = <shape = [64, 192], view = [64, 3, 64], split = {{\[}}[], [], ["tp"]], chunk = ["dp"]>
dsc.parameter @h.1.qkv.weight : tensor<3072xf32> init = #dsc.init<normal, std = 0.02> layout = #dsc.layout<shape = [64, 192], view = [64, 3, 64], split = [[], [], ["tp"]], chunk = ["dp"]>

// CHECK-LABEL: func.func @graph
func.func @graph(%ids: tensor<2x8xi32>, %targets: tensor<2x8xi32>) -> tensor<f32> {
  // CHECK: %[[WTE:.*]] = dsc.get_parameter @wte.weight : tensor<256x64xf32>
  %wte = dsc.get_parameter @wte.weight : tensor<256x64xf32>
  // ZeRO-3: this rank's tp box (64x32) gathered from its two dp chunks.
  // CHECK: dsc.gather_parameter @h.0.fc.weight on @mesh axes = ["dp"] : tensor<64x32xf32>
  %fc = dsc.gather_parameter @h.0.fc.weight on @mesh axes = ["dp"] : tensor<64x32xf32>
  // CHECK: %[[EMB:.*]] = dsc.embedding %[[WTE]], %{{.*}} : tensor<256x64xf32>, tensor<2x8xi32> -> tensor<2x8x64xf32>
  %emb = dsc.embedding %wte, %ids : tensor<256x64xf32>, tensor<2x8xi32> -> tensor<2x8x64xf32>
  %wpe = dsc.get_parameter @wpe.weight : tensor<16x64xf32>
  // CHECK: dsc.position_embedding %{{.*}} : tensor<16x64xf32> -> tensor<2x8x64xf32>
  %pos = dsc.position_embedding %wpe : tensor<16x64xf32> -> tensor<2x8x64xf32>
  // CHECK: %[[X:.*]] = dsc.add %[[EMB]], %{{.*}} : tensor<2x8x64xf32>
  %x = dsc.add %emb, %pos : tensor<2x8x64xf32>
  // CHECK: dsc.mul %[[X]], %[[X]] : tensor<2x8x64xf32>
  %sq = dsc.mul %x, %x : tensor<2x8x64xf32>
  %g = dsc.get_parameter @h.0.ln.weight : tensor<64xf32>
  %b = dsc.get_parameter @h.0.ln.bias : tensor<64xf32>
  // CHECK: dsc.layer_norm %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 9.9999999999999995E-7 : f64} : tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>
  %ln = dsc.layer_norm %sq, %g, %b {epsilon = 1.0e-6 : f64} : tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>
  // The default base (10000) is not printed.
  // CHECK: dsc.rotary %{{.*}} {head_dim = 16 : i64, rotary_dims = 4 : i64} : tensor<2x8x64xf32>
  %rot = dsc.rotary %sq {head_dim = 16 : i64, rotary_dims = 4 : i64} : tensor<2x8x64xf32>
  // CHECK: dsc.rotary %{{.*}} {base = 5.000000e+05 : f64, head_dim = 16 : i64, inverse, rotary_dims = 16 : i64} : tensor<2x8x64xf32>
  %unrot = dsc.rotary %rot {head_dim = 16 : i64, rotary_dims = 16 : i64, base = 5.0e5 : f64, inverse} : tensor<2x8x64xf32>
  // CHECK: dsc.gelu %{{.*}} {exact} : tensor<2x8x64xf32>
  %gex = dsc.gelu %unrot {exact} : tensor<2x8x64xf32>
  // CHECK: dsc.gelu_grad %{{.*}}, %{{.*}} {exact} : tensor<2x8x64xf32>
  %dgex = dsc.gelu_grad %gex, %sq {exact} : tensor<2x8x64xf32>
  // CHECK: dsc.rms_norm %{{.*}}, %{{.*}} {epsilon = 1.000000e-05 : f64} : tensor<2x8x64xf32>, tensor<64xf32>
  %rms = dsc.rms_norm %sq, %g {epsilon = 1.0e-5 : f64} : tensor<2x8x64xf32>, tensor<64xf32>
  // CHECK: dsc.rms_norm %{{.*}}, %{{.*}} {epsilon = 1.000000e-08 : f64, epsilon_outside_sqrt} : tensor<2x8x64xf32>, tensor<64xf32>
  %rms2 = dsc.rms_norm %rms, %g {epsilon = 1.0e-8 : f64, epsilon_outside_sqrt} : tensor<2x8x64xf32>, tensor<64xf32>
  // CHECK: dsc.rms_norm_grad %{{.*}}, %{{.*}}, %{{.*}} {epsilon_outside_sqrt} : tensor<2x8x64xf32>, tensor<64xf32>
  %drms:2 = dsc.rms_norm_grad %sq, %g, %rms2 {epsilon_outside_sqrt} : tensor<2x8x64xf32>, tensor<64xf32>
  %w = dsc.get_parameter @h.0.proj.weight : tensor<64x64xf32>
  // CHECK: dsc.matmul %{{.*}}, %{{.*}} {transpose_rhs} : tensor<2x8x64xf32>, tensor<64x64xf32> -> tensor<2x8x64xf32>
  %mm = dsc.matmul %ln, %w {transpose_rhs} : tensor<2x8x64xf32>, tensor<64x64xf32> -> tensor<2x8x64xf32>
  // CHECK: dsc.matmul %{{.*}}, %{{.*}} {transpose_lhs} : tensor<2x8x64xf32>, tensor<2x8x64xf32> -> tensor<2x64x64xf32>
  %bmm = dsc.matmul %mm, %mm {transpose_lhs} : tensor<2x8x64xf32>, tensor<2x8x64xf32> -> tensor<2x64x64xf32>
  // CHECK: dsc.bias_add %{{.*}}, %{{.*}} : tensor<2x8x64xf32>, tensor<64xf32>
  %ba = dsc.bias_add %mm, %b : tensor<2x8x64xf32>, tensor<64xf32>
  // CHECK: dsc.gelu %{{.*}} : tensor<2x8x64xf32>
  %ge = dsc.gelu %ba : tensor<2x8x64xf32>
  // CHECK: dsc.softmax %{{.*}} : tensor<2x64x64xf32>
  %sm = dsc.softmax %bmm : tensor<2x64x64xf32>
  // CHECK: dsc.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, dropout = 1.000000e-01 : f64, num_heads = 4 : i64, seed = 3 : i64} : tensor<2x8x64xf32>
  %at = dsc.attention %ge, %ge, %ge {num_heads = 4 : i64, causal, dropout = 0.1 : f64, seed = 3 : i64} : tensor<2x8x64xf32>
  // CHECK: dsc.reshape %{{.*}} : tensor<2x8x64xf32> -> tensor<16x64xf32>
  %rs = dsc.reshape %at : tensor<2x8x64xf32> -> tensor<16x64xf32>
  // CHECK: dsc.transpose %{{.*}} [1, 0] : tensor<16x64xf32> -> tensor<64x16xf32>
  %tr = dsc.transpose %rs [1, 0] : tensor<16x64xf32> -> tensor<64x16xf32>
  // CHECK: dsc.slice %{{.*}} [0, 4] [64, 8] : tensor<64x16xf32> -> tensor<64x8xf32>
  %sl = dsc.slice %tr [0, 4] [64, 8] : tensor<64x16xf32> -> tensor<64x8xf32>
  // CHECK: dsc.concat %{{.*}}, %{{.*}} {dim = 1 : i64} : tensor<64x8xf32>, tensor<64x8xf32> -> tensor<64x16xf32>
  %cc = dsc.concat %sl, %sl {dim = 1 : i64} : tensor<64x8xf32>, tensor<64x8xf32> -> tensor<64x16xf32>
  // CHECK: dsc.dropout %{{.*}} {p = 5.000000e-01 : f64, seed = 7 : i64} : tensor<64x16xf32>
  %dr = dsc.dropout %cc {p = 0.5 : f64, seed = 7 : i64} : tensor<64x16xf32>
  %logits = dsc.matmul %at, %wte {transpose_rhs} : tensor<2x8x64xf32>, tensor<256x64xf32> -> tensor<2x8x256xf32>
  // CHECK: dsc.cross_entropy %{{.*}}, %{{.*}} : tensor<2x8x256xf32>, tensor<2x8xi32> -> tensor<f32>
  %loss = dsc.cross_entropy %logits, %targets : tensor<2x8x256xf32>, tensor<2x8xi32> -> tensor<f32>
  // CHECK: dsc.cross_entropy %{{.*}}, %{{.*}} {classes = 250 : i64} : tensor<2x8x256xf32>, tensor<2x8xi32> -> tensor<f32>
  %padded = dsc.cross_entropy %logits, %targets {classes = 250 : i64} : tensor<2x8x256xf32>, tensor<2x8xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// Mixed precision: casts between float types, and a cross-entropy of bf16
// logits whose loss is f32.
// CHECK-LABEL: func.func @mixed_precision
func.func @mixed_precision(%x: tensor<2x8x256xf32>, %t: tensor<2x8xi32>) -> tensor<f32> {
  // CHECK: %[[B:.*]] = dsc.cast %{{.*}} : tensor<2x8x256xf32> to tensor<2x8x256xbf16>
  %b = dsc.cast %x : tensor<2x8x256xf32> to tensor<2x8x256xbf16>
  // CHECK: dsc.cast %[[B]] : tensor<2x8x256xbf16> to tensor<2x8x256xf16>
  %h = dsc.cast %b : tensor<2x8x256xbf16> to tensor<2x8x256xf16>
  // CHECK: dsc.cast %{{.*}} : tensor<2x8x256xf16> to tensor<2x8x256xf64>
  %d = dsc.cast %h : tensor<2x8x256xf16> to tensor<2x8x256xf64>
  // CHECK: dsc.cross_entropy %[[B]], %{{.*}} : tensor<2x8x256xbf16>, tensor<2x8xi32> -> tensor<f32>
  %loss = dsc.cross_entropy %b, %t : tensor<2x8x256xbf16>, tensor<2x8xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// CHECK-LABEL: func.func @parallel
func.func @parallel(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // CHECK: dsc.all_reduce %{{.*}} on @mesh axes = ["tp"] : tensor<8x16xf32>
  %ar = dsc.all_reduce %x on @mesh axes = ["tp"] : tensor<8x16xf32>
  // CHECK: dsc.all_reduce %{{.*}} on @mesh axes = ["dp", "tp"] reduction = max : tensor<8x16xf32>
  %am = dsc.all_reduce %ar on @mesh axes = ["dp", "tp"] reduction = max : tensor<8x16xf32>
  // CHECK: dsc.reduce_scatter %{{.*}} on @mesh axes = ["dp"] scatter_dim = 0 reduction = avg : tensor<8x16xf32> -> tensor<4x16xf32>
  %rs = dsc.reduce_scatter %am on @mesh axes = ["dp"] scatter_dim = 0 reduction = avg : tensor<8x16xf32> -> tensor<4x16xf32>
  // CHECK: dsc.all_gather %{{.*}} on @mesh axes = ["dp"] gather_dim = 0 : tensor<4x16xf32> -> tensor<8x16xf32>
  %ag = dsc.all_gather %rs on @mesh axes = ["dp"] gather_dim = 0 : tensor<4x16xf32> -> tensor<8x16xf32>
  // CHECK: dsc.scatter_to_parallel %{{.*}} on @mesh axes = ["tp"] dim = 0 : tensor<8x16xf32> -> tensor<4x16xf32>
  %sc = dsc.scatter_to_parallel %ag on @mesh axes = ["tp"] dim = 0 : tensor<8x16xf32> -> tensor<4x16xf32>
  // CHECK: dsc.dropout %{{.*}} {p = 1.000000e-01 : f64, seed = 3 : i64, shard_axes = ["tp"]} : tensor<4x16xf32>
  %dr = dsc.dropout %sc {p = 1.000000e-01 : f64, seed = 3 : i64, shard_axes = ["tp"]} : tensor<4x16xf32>
  // CHECK: dsc.send %{{.*}} on @mesh axis = "pp" to 1 tag = 2 : tensor<8x16xf32>
  dsc.send %ag on @mesh axis = "pp" to 1 tag = 2 : tensor<8x16xf32>
  // CHECK: dsc.recv on @mesh axis = "pp" from 0 tag = 2 : tensor<8x16xf32>
  %rv = dsc.recv on @mesh axis = "pp" from 0 tag = 2 : tensor<8x16xf32>
  return %rv : tensor<8x16xf32>
}

// GPT-NeoX's AnnealingLR and DeepSpeed's cyclic schedules.
// CHECK-LABEL: func.func @schedules
// CHECK: dsc.learning_rate annealing_exponential base = 1.000000e-03 min = 1.000000e-05 warmup = 4 total = 40 : tensor<f32>
// CHECK: dsc.cyclic_learning_rate one_cycle min = 1.000000e-04 max = 1.000000e-03 first_size = 1.000000e+01 second_size = 5.000000e+00 first_stairs = 2 second_stairs = 1 decay_size = 3.000000e+00 rate = 1.000000e-01 : tensor<f32>
// CHECK: dsc.cyclic_learning_rate range_test min = 1.000000e-04 max = 1.000000e-04 first_size = 2.000000e+00 second_size = 0.000000e+00 first_stairs = 0 second_stairs = 0 decay_size = 0.000000e+00 rate = 1.000000e+00 {staircase} : tensor<f32>
func.func @schedules() -> (tensor<f32>, tensor<f32>, tensor<f32>) {
  %a = dsc.learning_rate annealing_exponential base = 1.000000e-03 min = 1.000000e-05 warmup = 4 total = 40 : tensor<f32>
  %b = dsc.cyclic_learning_rate one_cycle min = 1.000000e-04 max = 1.000000e-03 first_size = 1.000000e+01 second_size = 5.000000e+00 first_stairs = 2 second_stairs = 1 decay_size = 3.000000e+00 rate = 1.000000e-01 : tensor<f32>
  %c = dsc.cyclic_learning_rate range_test min = 1.000000e-04 max = 1.000000e-04 first_size = 2.000000e+00 second_size = 0.000000e+00 first_stairs = 0 second_stairs = 0 decay_size = 0.000000e+00 rate = 1.000000e+00 {staircase} : tensor<f32>
  return %a, %b, %c : tensor<f32>, tensor<f32>, tensor<f32>
}

// Offload: states in the host and NVMe tiers, transfers between tiers (a
// ZeRO chunk of the parameter), the NVMe states' swaps, the initialize
// program.
// CHECK: dsc.state @offload.master.wpe.weight : tensor<512xf32> master of @wpe.weight in nvme
dsc.state @offload.master.wpe.weight : tensor<512xf32> master of @wpe.weight in nvme
// CHECK: dsc.state @offload.grad.wpe.weight : tensor<512xf32> gradient_copy of @wpe.weight in host
dsc.state @offload.grad.wpe.weight : tensor<512xf32> gradient_copy of @wpe.weight in host
// CHECK: dsc.state @adam.m.wpe.weight : tensor<512xf32> exp_avg of @wpe.weight in nvme
dsc.state @adam.m.wpe.weight : tensor<512xf32> exp_avg of @wpe.weight in nvme
// CHECK: dsc.state @adam.v.wpe.weight : tensor<512xf32> exp_avg_sq of @wpe.weight in nvme
dsc.state @adam.v.wpe.weight : tensor<512xf32> exp_avg_sq of @wpe.weight in nvme
// CHECK: dsc.state @grad.wpe.weight : tensor<16x64xf32> gradient of @wpe.weight{{$}}
dsc.state @grad.wpe.weight : tensor<16x64xf32> gradient of @wpe.weight in device
// CHECK-LABEL: func.func @offloaded_update
func.func @offloaded_update(%lr: tensor<f32>) {
  // CHECK: dsc.transfer @grad.wpe.weight to @offload.grad.wpe.weight chunk on @mesh axes = ["dp"]
  dsc.transfer @grad.wpe.weight to @offload.grad.wpe.weight chunk on @mesh axes = ["dp"]
  // CHECK: dsc.swap_in [@offload.master.wpe.weight, @adam.m.wpe.weight, @adam.v.wpe.weight]
  dsc.swap_in [@offload.master.wpe.weight, @adam.m.wpe.weight, @adam.v.wpe.weight]
  // CHECK: dsc.adamw @offload.master.wpe.weight grad = @offload.grad.wpe.weight
  dsc.adamw @offload.master.wpe.weight grad = @offload.grad.wpe.weight exp_avg = @adam.m.wpe.weight exp_avg_sq = @adam.v.wpe.weight lr = %lr beta1 = 0.9 beta2 = 0.95 eps = 1.0e-8 weight_decay = 0.0 : tensor<f32>
  // CHECK: dsc.transfer @offload.master.wpe.weight to @wpe.weight chunk on @mesh axes = ["dp"]
  dsc.transfer @offload.master.wpe.weight to @wpe.weight chunk on @mesh axes = ["dp"]
  // CHECK: dsc.swap_out [@offload.master.wpe.weight, @adam.m.wpe.weight, @adam.v.wpe.weight]
  dsc.swap_out [@offload.master.wpe.weight, @adam.m.wpe.weight, @adam.v.wpe.weight]
  return
}
// The delayed parameter update: the master's update after the marker.
// CHECK-LABEL: func.func @delayed_update
// CHECK: dsc.overlap_next_step
// CHECK-NEXT: dsc.adamw @offload.master.wpe.weight
func.func @delayed_update(%lr: tensor<f32>) attributes {dsc.program = #dsc.program_role<optimizer>} {
  dsc.transfer @offload.grad.wpe.weight to @grad.wpe.weight chunk on @mesh axes = ["dp"]
  dsc.overlap_next_step
  dsc.adamw @offload.master.wpe.weight grad = @offload.grad.wpe.weight exp_avg = @adam.m.wpe.weight exp_avg_sq = @adam.v.wpe.weight lr = %lr beta1 = 0.9 beta2 = 0.95 eps = 1.0e-8 weight_decay = 0.0 : tensor<f32>
  return
}
// CHECK: func.func @initialize() attributes {dsc.program = #dsc.program_role<initialize>}
func.func @initialize() attributes {dsc.program = #dsc.program_role<initialize>} {
  return
}

// ZeRO-Infinity's parameter offload: a ZeRO-3 chunk in the NVMe tier, a
// device copy fetched and gathered, the chunk swapped in and updated in
// place from the gradient's host copy.
// CHECK: dsc.parameter @fc.weight : tensor<256xf32> init = <normal, std = 2.000000e-02> layout = <view = [16, 32], split = {{\[}}[], []], chunk = ["dp"]> in nvme
dsc.parameter @fc.weight : tensor<256xf32> init = #dsc.init<normal, std = 0.02> layout = #dsc.layout<view = [16, 32], split = [[], []], chunk = ["dp"]> in nvme
dsc.state @offload.grad.fc.weight : tensor<256xf32> gradient_copy of @fc.weight in host
dsc.state @adam.m.fc.weight : tensor<256xf32> exp_avg of @fc.weight in host
dsc.state @adam.v.fc.weight : tensor<256xf32> exp_avg_sq of @fc.weight in host
// CHECK-LABEL: func.func @offloaded_chunk
func.func @offloaded_chunk(%lr: tensor<f32>) -> tensor<16x32xf32> {
  // CHECK: %[[C:.*]] = dsc.fetch_parameter @fc.weight : tensor<256xf32>
  %c = dsc.fetch_parameter @fc.weight : tensor<256xf32>
  // CHECK: dsc.gather_parameter @fc.weight from %[[C]] : tensor<256xf32> on @mesh axes = ["dp"] : tensor<16x32xf32>
  %w = dsc.gather_parameter @fc.weight from %c : tensor<256xf32> on @mesh axes = ["dp"] : tensor<16x32xf32>
  // CHECK: dsc.swap_in [@fc.weight]
  dsc.swap_in [@fc.weight]
  // CHECK: dsc.adamw @fc.weight grad = @offload.grad.fc.weight
  dsc.adamw @fc.weight grad = @offload.grad.fc.weight exp_avg = @adam.m.fc.weight exp_avg_sq = @adam.v.fc.weight lr = %lr beta1 = 0.9 beta2 = 0.95 eps = 1.0e-8 weight_decay = 0.0 : tensor<f32>
  dsc.swap_out [@fc.weight]
  return %w : tensor<16x32xf32>
}
