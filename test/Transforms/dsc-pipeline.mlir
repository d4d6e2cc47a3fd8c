// RUN: dsc-opt %s --dsc-pipeline="pp=2" -split-input-file -verify-diagnostics | FileCheck %s
// RUN: dsc-opt %s --dsc-pipeline="pp=2 pipeline-schedule=gpipe" -split-input-file -verify-diagnostics | FileCheck %s --check-prefix=GPIPE
// RUN: not dsc-opt %s --dsc-pipeline="pp=2 pipeline-schedule=zigzag" -split-input-file 2>&1 | FileCheck %s --check-prefix=SCHED
// RUN: not dsc-opt %s --dsc-pipeline="pp=0" -split-input-file 2>&1 | FileCheck %s --check-prefix=PP0
// RUN: dsc-opt %s --dsc-pipeline="pp=2 pipeline-schedule=zb-h1" -split-input-file -verify-diagnostics | FileCheck %s --check-prefix=ZB
// RUN: not dsc-opt %s --dsc-pipeline="pp=2 pipeline-schedule=interleaved-1f1b virtual-stages=2" -split-input-file 2>&1 | FileCheck %s --check-prefix=INTERLEAVED
// RUN: not dsc-opt %s --dsc-pipeline="pp=2 virtual-stages=2" -split-input-file 2>&1 | FileCheck %s --check-prefix=CHUNKS

// SCHED: error: --dsc-pipeline: plan key 'pipeline-schedule': 'zigzag' is not gpipe, 1f1b, interleaved-1f1b or zb-h1
// PP0: error: --dsc-pipeline: plan key 'pp': '0' is not an integer >= 1
// CHUNKS: error: --dsc-pipeline: virtual-stages=2 needs pipeline-schedule=interleaved-1f1b, not 1f1b

// Interleaved over 2 ranks with 2 chunks each: 4 stages, too many for
// two layers; four layers make one stage each, rank 0 holding stages 0 and
// 2, rank 1 stages 1 and 3 (the mesh's pp axis has the 2 ranks).
// INTERLEAVED: error: --dsc-pipeline: 4 stages need at least 4 transformer layers, but @loss has 2
// INTERLEAVED-LABEL: module @narrow_vocab attributes {dsc.pipeline = #dsc.pipeline<stages = 4, schedule = "interleaved-1f1b", virtual_stages = 2>}
// INTERLEAVED-NEXT: dsc.mesh @mesh axes = ["pp"] shape = [2]
// INTERLEAVED-LABEL: func.func @loss.stage0
// INTERLEAVED: @h.0.w
// INTERLEAVED-NOT: @h.1.w
// INTERLEAVED-LABEL: func.func @loss.stage1
// INTERLEAVED: @h.1.w
// INTERLEAVED-LABEL: func.func @loss.stage2
// INTERLEAVED: @h.2.w
// INTERLEAVED-LABEL: func.func @loss.stage3
// INTERLEAVED: @h.3.w
// INTERLEAVED: dsc.cross_entropy
// The zero-bubble schedule cuts the same stages (its backwards are split
// later, by --dsc-split-weight-gradient).
// ZB: dsc.pipeline = #dsc.pipeline<stages = 2, schedule = "zb-h1">

// Two layers, pp=2: one stage function per layer with its `dsc.stage`, the
// schedule on the module, the mesh declared, @loss erased. Stage 0 takes
// the tokens and returns the residual stream after h.0; stage 1 takes it and
// the targets and returns the loss. The embedding goes with the first layer,
// the LM head and the loss with the last; the tied table's read is cloned
// into the last stage. Layers are told by the name locations of the ops
// (h.1's GELU comes before its first parameter read) and by parameter names.
// CHECK-LABEL: module @two_layers attributes {dsc.pipeline = #dsc.pipeline<stages = 2, schedule = "1f1b">}
// CHECK-NEXT: dsc.mesh @mesh axes = ["pp"] shape = [2]
// CHECK-LABEL: func.func @loss.stage0(%arg0: tensor<2x4xi32>) -> tensor<2x4x8xf32> attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 0 : i64}
// CHECK-NEXT: %[[WTE:.*]] = dsc.get_parameter @wte : tensor<16x8xf32>
// CHECK-NEXT: %[[X:.*]] = dsc.embedding %[[WTE]], %arg0
// CHECK-NEXT: %[[W0:.*]] = dsc.get_parameter @h.0.w
// CHECK-NEXT: %[[Y0:.*]] = dsc.matmul %[[X]], %[[W0]]
// CHECK-NEXT: %[[X1:.*]] = dsc.add %[[X]], %[[Y0]]
// CHECK-NEXT: return %[[X1]] : tensor<2x4x8xf32>
// CHECK-LABEL: func.func @loss.stage1(%arg0: tensor<2x4x8xf32>, %arg1: tensor<2x4xi32>) -> tensor<f32> attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 1 : i64}
// CHECK-NEXT: %[[A1:.*]] = dsc.gelu %arg0
// CHECK-NEXT: %[[W1:.*]] = dsc.get_parameter @h.1.w
// CHECK-NEXT: %[[Y1:.*]] = dsc.matmul %[[A1]], %[[W1]]
// CHECK-NEXT: %[[X2:.*]] = dsc.add %arg0, %[[Y1]]
// CHECK-NEXT: %[[HEAD:.*]] = dsc.get_parameter @wte : tensor<16x8xf32>
// CHECK-NEXT: %[[LOGITS:.*]] = dsc.matmul %[[X2]], %[[HEAD]] {transpose_rhs}
// CHECK-NEXT: %[[L:.*]] = dsc.cross_entropy %[[LOGITS]], %arg1
// CHECK-NEXT: return %[[L]] : tensor<f32>
// CHECK-NOT: func.func @loss(
// GPIPE-LABEL: module @two_layers attributes {dsc.pipeline = #dsc.pipeline<stages = 2, schedule = "gpipe">}

module @two_layers {
  dsc.parameter @wte : tensor<16x8xf32> init = #dsc.init<normal, std = 0.02>
  dsc.parameter @h.0.w : tensor<8x8xf32> init = #dsc.init<normal, std = 0.02>
  dsc.parameter @h.1.w : tensor<8x8xf32> init = #dsc.init<normal, std = 0.02>
  func.func @loss(%ids: tensor<2x4xi32>, %t: tensor<2x4xi32>) -> tensor<f32> {
    %wte = dsc.get_parameter @wte : tensor<16x8xf32>
    %x = dsc.embedding %wte, %ids : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32> loc("wte")
    %w0 = dsc.get_parameter @h.0.w : tensor<8x8xf32>
    %y0 = dsc.matmul %x, %w0 : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32> loc("h.0.mlp")
    %x1 = dsc.add %x, %y0 : tensor<2x4x8xf32> loc("h.0.residual")
    %a1 = dsc.gelu %x1 : tensor<2x4x8xf32> loc("h.1.act")
    %w1 = dsc.get_parameter @h.1.w : tensor<8x8xf32>
    %y1 = dsc.matmul %a1, %w1 : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32> loc("h.1.mlp")
    %x2 = dsc.add %x1, %y1 : tensor<2x4x8xf32> loc("h.1.residual")
    %logits = dsc.matmul %x2, %wte {transpose_rhs} : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32> loc("lm_head")
    %l = dsc.cross_entropy %logits, %t : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<f32> loc("loss")
    return %l : tensor<f32>
  }
}

// -----

// The cut balances cost, not layer counts. Four layers under a vocabulary
// of 8: the LM head weighs about a layer, and the cut is the even one.
// CHECK-LABEL: module @narrow_vocab
// CHECK-LABEL: func.func @loss.stage0
// CHECK: @h.1.w
// CHECK-NOT: @h.2.w
// CHECK-LABEL: func.func @loss.stage1
// CHECK: @h.2.w
// CHECK: @h.3.w
// GPIPE-LABEL: module @narrow_vocab

module @narrow_vocab {
  dsc.parameter @wte : tensor<8x16xf32> init = #dsc.init<normal, std = 0.02>
  dsc.parameter @h.0.w : tensor<16x16xf32> init = #dsc.init<normal, std = 0.02>
  dsc.parameter @h.1.w : tensor<16x16xf32> init = #dsc.init<normal, std = 0.02>
  dsc.parameter @h.2.w : tensor<16x16xf32> init = #dsc.init<normal, std = 0.02>
  dsc.parameter @h.3.w : tensor<16x16xf32> init = #dsc.init<normal, std = 0.02>
  func.func @loss(%ids: tensor<2x4xi32>, %t: tensor<2x4xi32>) -> tensor<f32> {
    %wte = dsc.get_parameter @wte : tensor<8x16xf32>
    %x0 = dsc.embedding %wte, %ids : tensor<8x16xf32>, tensor<2x4xi32> -> tensor<2x4x16xf32>
    %w0 = dsc.get_parameter @h.0.w : tensor<16x16xf32>
    %y0 = dsc.matmul %x0, %w0 : tensor<2x4x16xf32>, tensor<16x16xf32> -> tensor<2x4x16xf32>
    %x1 = dsc.add %x0, %y0 : tensor<2x4x16xf32>
    %w1 = dsc.get_parameter @h.1.w : tensor<16x16xf32>
    %y1 = dsc.matmul %x1, %w1 : tensor<2x4x16xf32>, tensor<16x16xf32> -> tensor<2x4x16xf32>
    %x2 = dsc.add %x1, %y1 : tensor<2x4x16xf32>
    %w2 = dsc.get_parameter @h.2.w : tensor<16x16xf32>
    %y2 = dsc.matmul %x2, %w2 : tensor<2x4x16xf32>, tensor<16x16xf32> -> tensor<2x4x16xf32>
    %x3 = dsc.add %x2, %y2 : tensor<2x4x16xf32>
    %w3 = dsc.get_parameter @h.3.w : tensor<16x16xf32>
    %y3 = dsc.matmul %x3, %w3 : tensor<2x4x16xf32>, tensor<16x16xf32> -> tensor<2x4x16xf32>
    %x4 = dsc.add %x3, %y3 : tensor<2x4x16xf32>
    %logits = dsc.matmul %x4, %wte {transpose_rhs} : tensor<2x4x16xf32>, tensor<8x16xf32> -> tensor<2x4x8xf32>
    %l = dsc.cross_entropy %logits, %t : tensor<2x4x8xf32>, tensor<2x4xi32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// A vocabulary of 256: the LM head outweighs three layers, and stage 0
// takes three.
// CHECK-LABEL: module @wide_vocab
// CHECK-LABEL: func.func @loss.stage0
// CHECK: @h.2.w
// CHECK-LABEL: func.func @loss.stage1
// CHECK-NOT: @h.2.w
// CHECK: @h.3.w
// CHECK: dsc.cross_entropy
// GPIPE-LABEL: module @wide_vocab

module @wide_vocab {
  dsc.parameter @wte : tensor<256x16xf32> init = #dsc.init<normal, std = 0.02>
  dsc.parameter @h.0.w : tensor<16x16xf32> init = #dsc.init<normal, std = 0.02>
  dsc.parameter @h.1.w : tensor<16x16xf32> init = #dsc.init<normal, std = 0.02>
  dsc.parameter @h.2.w : tensor<16x16xf32> init = #dsc.init<normal, std = 0.02>
  dsc.parameter @h.3.w : tensor<16x16xf32> init = #dsc.init<normal, std = 0.02>
  func.func @loss(%ids: tensor<2x4xi32>, %t: tensor<2x4xi32>) -> tensor<f32> {
    %wte = dsc.get_parameter @wte : tensor<256x16xf32>
    %x0 = dsc.embedding %wte, %ids : tensor<256x16xf32>, tensor<2x4xi32> -> tensor<2x4x16xf32>
    %w0 = dsc.get_parameter @h.0.w : tensor<16x16xf32>
    %y0 = dsc.matmul %x0, %w0 : tensor<2x4x16xf32>, tensor<16x16xf32> -> tensor<2x4x16xf32>
    %x1 = dsc.add %x0, %y0 : tensor<2x4x16xf32>
    %w1 = dsc.get_parameter @h.1.w : tensor<16x16xf32>
    %y1 = dsc.matmul %x1, %w1 : tensor<2x4x16xf32>, tensor<16x16xf32> -> tensor<2x4x16xf32>
    %x2 = dsc.add %x1, %y1 : tensor<2x4x16xf32>
    %w2 = dsc.get_parameter @h.2.w : tensor<16x16xf32>
    %y2 = dsc.matmul %x2, %w2 : tensor<2x4x16xf32>, tensor<16x16xf32> -> tensor<2x4x16xf32>
    %x3 = dsc.add %x2, %y2 : tensor<2x4x16xf32>
    %w3 = dsc.get_parameter @h.3.w : tensor<16x16xf32>
    %y3 = dsc.matmul %x3, %w3 : tensor<2x4x16xf32>, tensor<16x16xf32> -> tensor<2x4x16xf32>
    %x4 = dsc.add %x3, %y3 : tensor<2x4x16xf32>
    %logits = dsc.matmul %x4, %wte {transpose_rhs} : tensor<2x4x16xf32>, tensor<256x16xf32> -> tensor<2x4x256xf32>
    %l = dsc.cross_entropy %logits, %t : tensor<2x4x256xf32>, tensor<2x4xi32> -> tensor<f32>
    return %l : tensor<f32>
  }
}


// -----

// A mesh with a pp axis of that size is used as it is.
// CHECK-LABEL: module @dp_pp_mesh attributes {dsc.pipeline
// CHECK-NEXT: dsc.mesh @mesh axes = ["dp", "pp"] shape = [2, 2]
// CHECK-NOT: dsc.mesh
// CHECK: func.func @loss.stage0
// CHECK: func.func @loss.stage1
// GPIPE-LABEL: module @dp_pp_mesh

module @dp_pp_mesh {
  dsc.mesh @mesh axes = ["dp", "pp"] shape = [2, 2]
  dsc.parameter @h.0.w : tensor<8x8xf32> init = #dsc.init<normal, std = 0.02>
  dsc.parameter @h.1.w : tensor<8x8xf32> init = #dsc.init<normal, std = 0.02>
  func.func @loss(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
    %w0 = dsc.get_parameter @h.0.w : tensor<8x8xf32>
    %y0 = dsc.matmul %x, %w0 : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
    %w1 = dsc.get_parameter @h.1.w : tensor<8x8xf32>
    %y1 = dsc.matmul %y0, %w1 : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
    return %y1 : tensor<2x4x8xf32>
  }
}

// -----

dsc.parameter @h.0.w : tensor<8x8xf32> init = #dsc.init<normal, std = 0.02>
// expected-error @+1 {{--dsc-pipeline: 2 stages need at least 2 transformer layers, but @loss has 1}}
func.func @loss(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %w0 = dsc.get_parameter @h.0.w : tensor<8x8xf32>
  %y0 = dsc.matmul %x, %w0 : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
  return %y0 : tensor<2x4x8xf32>
}

// -----

// Stages are cut between whole layers in program order.
dsc.parameter @h.0.w : tensor<8x8xf32> init = #dsc.init<normal, std = 0.02>
dsc.parameter @h.0.v : tensor<8x8xf32> init = #dsc.init<normal, std = 0.02>
dsc.parameter @h.1.w : tensor<8x8xf32> init = #dsc.init<normal, std = 0.02>
func.func @loss(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %w0 = dsc.get_parameter @h.0.w : tensor<8x8xf32>
  %y0 = dsc.matmul %x, %w0 : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
  %w1 = dsc.get_parameter @h.1.w : tensor<8x8xf32>
  %y1 = dsc.matmul %y0, %w1 : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
  // expected-error @+1 {{'dsc.get_parameter' op --dsc-pipeline: layer h.0 is interleaved with layer h.1; stages are cut between whole layers in program order}}
  %v0 = dsc.get_parameter @h.0.v : tensor<8x8xf32>
  %z = dsc.matmul %y1, %v0 : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
  return %z : tensor<2x4x8xf32>
}

// -----

// Layers are numbered from h.0: a first layer h.1 is named as such.
dsc.parameter @h.1.w : tensor<8x8xf32> init = #dsc.init<normal, std = 0.02>
func.func @loss(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'dsc.get_parameter' op --dsc-pipeline: layer h.1 comes before layer h.0; stages are cut between whole layers numbered from h.0 in program order}}
  %w1 = dsc.get_parameter @h.1.w : tensor<8x8xf32>
  %y1 = dsc.matmul %x, %w1 : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
  return %y1 : tensor<2x4x8xf32>
}

// -----

// A cut is crossed by one activation, the residual stream; here h.1 reads
// two values of h.0.
dsc.parameter @h.0.w : tensor<8x8xf32> init = #dsc.init<normal, std = 0.02>
dsc.parameter @h.1.w : tensor<8x8xf32> init = #dsc.init<normal, std = 0.02>
func.func @loss(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %w0 = dsc.get_parameter @h.0.w : tensor<8x8xf32>
  // expected-note @+1 {{crossing value}}
  %y0 = dsc.matmul %x, %w0 : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
  // expected-note @+1 {{crossing value}}
  %x1 = dsc.add %x, %y0 : tensor<2x4x8xf32>
  // expected-error @+1 {{'dsc.get_parameter' op --dsc-pipeline: the cut before layer h.1 (stage 1) is crossed by 2 values; a cut must be crossed by exactly one activation (the residual stream)}}
  %w1 = dsc.get_parameter @h.1.w : tensor<8x8xf32>
  %y1 = dsc.matmul %x1, %w1 : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
  %x2 = dsc.add %y0, %y1 : tensor<2x4x8xf32>
  return %x2 : tensor<2x4x8xf32>
}

// -----

// expected-error @+1 {{--dsc-pipeline: pp=2 but mesh @mesh has a 'pp' axis of size 4}}
dsc.mesh @mesh axes = ["pp"] shape = [4]
func.func @loss(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  return %x : tensor<2x4x8xf32>
}

// -----

// expected-error @+1 {{--dsc-pipeline: mesh @mesh has no 'pp' axis for 2 stages}}
dsc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
func.func @loss(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  return %x : tensor<2x4x8xf32>
}

// -----

// expected-error @+1 {{--dsc-pipeline cuts the forward graph and must run before --dsc-autodiff}}
module {
  func.func @loss(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
    return %x : tensor<2x4x8xf32>
  }
  func.func @forward_backward() attributes {dsc.program = #dsc.program_role<forward_backward>} {
    return
  }
}

// -----

// expected-error @+1 {{--dsc-pipeline: no single-block function @loss computing the loss}}
module {
  func.func private @loss(tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
}
