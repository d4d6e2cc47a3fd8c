// RUN: dsc-opt %s --dsc-autodiff --dsc-recompute -split-input-file | FileCheck %s --check-prefix=NONE
// RUN: dsc-opt %s --dsc-autodiff --dsc-recompute="recompute=full" -split-input-file | FileCheck %s --check-prefix=FULL
// RUN: dsc-opt %s --dsc-autodiff --dsc-recompute="recompute=selective" -split-input-file | FileCheck %s --check-prefix=SEL
// RUN: dsc-opt %s --dsc-autodiff --dsc-recompute="recompute=full recompute-layers=1" -split-input-file | FileCheck %s --check-prefix=FIRST
// RUN: dsc-opt %s --dsc-autodiff --dsc-recompute="recompute=selective recompute-modules=core_attn,mlp_act" -split-input-file | FileCheck %s --check-prefix=ACT

// Two layers, each a matmul, a gelu and an attention core written out:
// the gelu's output reshaped to b x a x s x s scores, a softmax, a product,
// a second softmax, reshaped back; then a residual add, the layer's output.
// Every value is 2x4x4 f32 = 128 bytes. The function's argument %x (layer
// 0's input) is an input, not an activation the program keeps.

// recompute=none: the backward reads, per layer, the matmul's output (for
// gelu's gradient), the first softmax's output (the product's and its own
// gradient) and the second's; layer 0's output (layer 1's input, for layer
// 1's weight gradient) and layer 1's (the loss's gradient): 2 x 3 x 128 +
// 2 x 128 bytes. Nothing is cloned.
// NONE-LABEL: func.func @forward_backward
// NONE-SAME: dsc.saved_activation_bytes = 1024 : i64
// NONE-COUNT-4: dsc.softmax %
// NONE-NOT: dsc.softmax %
// NONE: return

// recompute=full: a layer keeps only its input (%arg0 for layer 0, layer
// 0's output for layer 1), and the loss layer 1's output: 2 x 128 bytes.
// The backward of layer 1 recomputes its values from its input just before
// it first needs one (the second softmax's gradient), then layer 0 from
// %arg0.
// FULL-LABEL: func.func @forward_backward
// FULL-SAME: dsc.saved_activation_bytes = 256 : i64
// FULL: %[[R0:.*]] = dsc.add %{{.*}}, %arg0
// FULL: %[[R1:.*]] = dsc.add %{{.*}}, %[[R0]]
// FULL: dsc.cross_entropy_grad %[[R1]]
// FULL: %[[H1:.*]] = dsc.matmul %[[R0]]
// FULL-NEXT: %[[G1:.*]] = dsc.gelu %[[H1]]
// FULL-NEXT: %[[S1:.*]] = dsc.reshape %[[G1]]
// FULL-NEXT: %[[P1:.*]] = dsc.softmax %[[S1]]
// FULL-NEXT: %[[E1:.*]] = dsc.mul %[[P1]], %[[P1]]
// FULL-NEXT: %[[F1:.*]] = dsc.softmax %[[E1]]
// FULL-NEXT: dsc.softmax_grad %[[F1]]
// FULL: dsc.gelu_grad %[[H1]]
// FULL: %[[H0:.*]] = dsc.matmul %arg0
// FULL-NEXT: %[[G0:.*]] = dsc.gelu %[[H0]]
// FULL: dsc.gelu_grad %[[H0]]
// FULL: return

// recompute=selective: only the b x a x s x s values (the reshape, both
// softmaxes and the product) are recomputed, from the gelu's output, which
// is now kept instead of the two softmaxes' outputs: per layer 256 bytes
// (the matmul's and the gelu's outputs) instead of 384; the matmul and the
// gelu are not recomputed.
// SEL-LABEL: func.func @forward_backward
// SEL-SAME: dsc.saved_activation_bytes = 768 : i64
// SEL: %[[G1:.*]] = dsc.gelu
// SEL: dsc.cross_entropy_grad
// SEL: %[[S1:.*]] = dsc.reshape %[[G1]] : tensor<2x4x4xf32> -> tensor<1x2x4x4xf32>
// SEL-NEXT: %[[P1:.*]] = dsc.softmax %[[S1]]
// SEL-NEXT: %[[E1:.*]] = dsc.mul %[[P1]], %[[P1]]
// SEL-NEXT: %[[F1:.*]] = dsc.softmax %[[E1]]
// SEL-NEXT: dsc.softmax_grad %[[F1]]
// SEL-NOT: dsc.gelu %
// SEL: return

// recompute-modules=core_attn,mlp_act: the MLP activation's output (the
// gelu's) is recomputed too, from the matmul's output, which its own
// gradient keeps anyway: per layer 128 bytes (the matmul's output), with
// the layers' outputs 512. Each layer's gelu runs again in the backward,
// before the attention core it feeds.
// ACT-LABEL: func.func @forward_backward
// ACT-SAME: dsc.saved_activation_bytes = 512 : i64
// ACT: %[[H1:.*]] = dsc.matmul %{{.*}}, %{{.*}} : tensor<2x4x4xf32>, tensor<4x4xf32> -> tensor<2x4x4xf32>
// ACT: dsc.cross_entropy_grad
// ACT: %[[G1:.*]] = dsc.gelu %[[H1]]
// ACT-NEXT: dsc.reshape %[[G1]]
// ACT: dsc.gelu_grad %[[H1]]
// ACT: return

// recompute-layers=1: only layer 0, the first of the program, recomputes;
// layer 1 keeps its 384 bytes.
// FIRST-LABEL: func.func @forward_backward
// FIRST-SAME: dsc.saved_activation_bytes = 640 : i64

dsc.parameter @h.0.w : tensor<4x4xf32> init = #dsc.init<normal, std = 0.02>
dsc.parameter @h.1.w : tensor<4x4xf32> init = #dsc.init<normal, std = 0.02>
func.func @loss(%x: tensor<2x4x4xf32>, %t: tensor<2x4xi32>) -> tensor<f32> {
  %w0 = dsc.get_parameter @h.0.w : tensor<4x4xf32>
  %h0 = dsc.matmul %x, %w0 : tensor<2x4x4xf32>, tensor<4x4xf32> -> tensor<2x4x4xf32> loc("h.0.fc")
  %g0 = dsc.gelu %h0 : tensor<2x4x4xf32> loc("h.0.act")
  %s0 = dsc.reshape %g0 : tensor<2x4x4xf32> -> tensor<1x2x4x4xf32> loc("h.0.attn")
  %p0 = dsc.softmax %s0 : tensor<1x2x4x4xf32> loc("h.0.attn")
  %e0 = dsc.mul %p0, %p0 : tensor<1x2x4x4xf32> loc("h.0.attn")
  %f0 = dsc.softmax %e0 : tensor<1x2x4x4xf32> loc("h.0.attn")
  %q0 = dsc.reshape %f0 : tensor<1x2x4x4xf32> -> tensor<2x4x4xf32> loc("h.0.attn")
  %r0 = dsc.add %q0, %x : tensor<2x4x4xf32> loc("h.0.residual")
  %w1 = dsc.get_parameter @h.1.w : tensor<4x4xf32>
  %h1 = dsc.matmul %r0, %w1 : tensor<2x4x4xf32>, tensor<4x4xf32> -> tensor<2x4x4xf32> loc("h.1.fc")
  %g1 = dsc.gelu %h1 : tensor<2x4x4xf32> loc("h.1.act")
  %s1 = dsc.reshape %g1 : tensor<2x4x4xf32> -> tensor<1x2x4x4xf32> loc("h.1.attn")
  %p1 = dsc.softmax %s1 : tensor<1x2x4x4xf32> loc("h.1.attn")
  %e1 = dsc.mul %p1, %p1 : tensor<1x2x4x4xf32> loc("h.1.attn")
  %f1 = dsc.softmax %e1 : tensor<1x2x4x4xf32> loc("h.1.attn")
  %q1 = dsc.reshape %f1 : tensor<1x2x4x4xf32> -> tensor<2x4x4xf32> loc("h.1.attn")
  %r1 = dsc.add %q1, %r0 : tensor<2x4x4xf32> loc("h.1.residual")
  %l = dsc.cross_entropy %r1, %t : tensor<2x4x4xf32>, tensor<2x4xi32> -> tensor<f32> loc("loss")
  return %l : tensor<f32>
}

// The modes and counts it does not take are named.
// RUN: not dsc-opt %s --dsc-autodiff --dsc-recompute="recompute=selective recompute-modules=core_attn,act" 2>&1 | FileCheck %s --check-prefix=MODULE
// MODULE: error: --dsc-recompute: plan key 'recompute-modules': 'act' is not core_attn, layernorm or mlp_act
// RUN: not dsc-opt %s --dsc-autodiff --dsc-recompute="recompute=full recompute-modules=layernorm" 2>&1 | FileCheck %s --check-prefix=MODULEMODE
// MODULEMODE: error: --dsc-recompute: recompute-modules=layernorm chooses what recompute=selective recomputes, but recompute=full
// RUN: not dsc-opt %s --dsc-autodiff --dsc-recompute="recompute=some" 2>&1 | FileCheck %s --check-prefix=MODE
// MODE: error: --dsc-recompute: plan key 'recompute': 'some' is not none, selective or full
// RUN: not dsc-opt %s --dsc-autodiff --dsc-recompute="recompute=selective recompute-layers=2" 2>&1 | FileCheck %s --check-prefix=LAYERS
// LAYERS: error: --dsc-recompute: recompute-layers=2 counts the layers of recompute=full, but recompute=selective
// RUN: not dsc-opt %s --dsc-autodiff --dsc-recompute="recompute=full recompute-layers=-1" 2>&1 | FileCheck %s --check-prefix=NEG
// NEG: error: --dsc-recompute: plan key 'recompute-layers': '-1' is not an integer >= 0
