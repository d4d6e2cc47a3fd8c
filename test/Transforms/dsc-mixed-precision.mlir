// RUN: dsc-opt %s -split-input-file -verify-diagnostics --dsc-mixed-precision="dtype=bf16" | FileCheck %s
// RUN: dsc-opt %s -split-input-file -verify-diagnostics --dsc-mixed-precision="dtype=f16" | FileCheck %s --check-prefix=F16
// RUN: not dsc-opt %s -split-input-file --dsc-mixed-precision="dtype=fp8" 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// fp16 computes in f16 the same way (the runtime scales its loss
// dynamically); an unknown dtype is refused naming the supported ones.
// F16: %[[WB:.*]] = dsc.cast %{{.*}} : tensor<256x64xf32> to tensor<256x64xf16>
// F16: dsc.cross_entropy %{{.*}}, %{{.*}} : tensor<2x8x256xf16>, tensor<2x8xi32> -> tensor<f32>
// UNKNOWN: error: --dsc-mixed-precision: unknown compute dtype 'fp8'; the supported ones are bf16 and f16

// A tied embedding, a layer norm and the LM head: each parameter read is
// cast to bf16 right after it and every activation is bf16; the loss of
// bf16 logits stays an f32 scalar. The parameters themselves stay f32.
dsc.parameter @wte : tensor<256x64xf32> init = #dsc.init<normal, std = 0.02>
dsc.parameter @ln.weight : tensor<64xf32> init = #dsc.init<ones>
dsc.parameter @ln.bias : tensor<64xf32> init = #dsc.init<zeros>
// CHECK: dsc.parameter @wte : tensor<256x64xf32>
// CHECK-LABEL: func.func @loss
// CHECK-SAME: (%[[IDS:.*]]: tensor<2x8xi32>, %[[T:.*]]: tensor<2x8xi32>) -> tensor<f32>
func.func @loss(%ids: tensor<2x8xi32>, %t: tensor<2x8xi32>) -> tensor<f32> {
  // CHECK: %[[W:.*]] = dsc.get_parameter @wte : tensor<256x64xf32>
  // CHECK-NEXT: %[[WB:.*]] = dsc.cast %[[W]] : tensor<256x64xf32> to tensor<256x64xbf16>
  %w = dsc.get_parameter @wte : tensor<256x64xf32>
  // CHECK-NEXT: %[[X:.*]] = dsc.embedding %[[WB]], %[[IDS]] : tensor<256x64xbf16>, tensor<2x8xi32> -> tensor<2x8x64xbf16>
  %x = dsc.embedding %w, %ids : tensor<256x64xf32>, tensor<2x8xi32> -> tensor<2x8x64xf32>
  // CHECK-NEXT: %[[G:.*]] = dsc.get_parameter @ln.weight : tensor<64xf32>
  // CHECK-NEXT: %[[GB:.*]] = dsc.cast %[[G]] : tensor<64xf32> to tensor<64xbf16>
  %g = dsc.get_parameter @ln.weight : tensor<64xf32>
  // CHECK-NEXT: %[[B:.*]] = dsc.get_parameter @ln.bias : tensor<64xf32>
  // CHECK-NEXT: %[[BB:.*]] = dsc.cast %[[B]] : tensor<64xf32> to tensor<64xbf16>
  %b = dsc.get_parameter @ln.bias : tensor<64xf32>
  // CHECK-NEXT: %[[N:.*]] = dsc.layer_norm %[[X]], %[[GB]], %[[BB]] {{.*}}: tensor<2x8x64xbf16>, tensor<64xbf16>, tensor<64xbf16>
  %n = dsc.layer_norm %x, %g, %b : tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>
  // CHECK-NEXT: %[[H:.*]] = dsc.gelu %[[N]] : tensor<2x8x64xbf16>
  %h = dsc.gelu %n : tensor<2x8x64xf32>
  // The LM head reads the tied table through the same cast.
  // CHECK-NEXT: %[[L:.*]] = dsc.matmul %[[H]], %[[WB]] {transpose_rhs} : tensor<2x8x64xbf16>, tensor<256x64xbf16> -> tensor<2x8x256xbf16>
  %logits = dsc.matmul %h, %w {transpose_rhs} : tensor<2x8x64xf32>, tensor<256x64xf32> -> tensor<2x8x256xf32>
  // CHECK-NEXT: %[[LOSS:.*]] = dsc.cross_entropy %[[L]], %[[T]] : tensor<2x8x256xbf16>, tensor<2x8xi32> -> tensor<f32>
  %loss = dsc.cross_entropy %logits, %t : tensor<2x8x256xf32>, tensor<2x8xi32> -> tensor<f32>
  // CHECK-NEXT: return %[[LOSS]] : tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A pipeline stage: its activation input and output become bf16 (the
// boundary messages halve) and the signature follows; a constant follows
// the values it is combined with.
dsc.parameter @h.1.w : tensor<64x64xf32> init = #dsc.init<normal, std = 0.02>
// CHECK-LABEL: func.func @loss.stage1
// CHECK-SAME: (%[[IN:.*]]: tensor<2x8x64xbf16>) -> tensor<2x8x64xbf16> attributes {dsc.stage = 1 : i64}
func.func @loss.stage1(%x: tensor<2x8x64xf32>) -> tensor<2x8x64xf32> attributes {dsc.stage = 1 : i64} {
  // CHECK: %[[W:.*]] = dsc.cast %{{.*}} : tensor<64x64xf32> to tensor<64x64xbf16>
  %w = dsc.get_parameter @h.1.w : tensor<64x64xf32>
  // CHECK-NEXT: %[[Y:.*]] = dsc.matmul %[[IN]], %[[W]] : tensor<2x8x64xbf16>, tensor<64x64xbf16> -> tensor<2x8x64xbf16>
  %y = dsc.matmul %x, %w : tensor<2x8x64xf32>, tensor<64x64xf32> -> tensor<2x8x64xf32>
  // CHECK-NEXT: %[[HALF:.*]] = arith.constant dense<5.000000e-01> : tensor<2x8x64xbf16>
  %half = arith.constant dense<0.5> : tensor<2x8x64xf32>
  // CHECK-NEXT: %[[Z:.*]] = dsc.mul %[[Y]], %[[HALF]] : tensor<2x8x64xbf16>
  %z = dsc.mul %y, %half : tensor<2x8x64xf32>
  // CHECK-NEXT: return %[[Z]] : tensor<2x8x64xbf16>
  return %z : tensor<2x8x64xf32>
}

// -----

// Consumers that need f32 get it: an op outside the dsc dialect and the
// result of a function that is not a pipeline stage. Arithmetic on the f32
// loss stays f32, and an f32 argument is cast on entry.
dsc.parameter @w : tensor<8x4xf32> init = #dsc.init<normal, std = 0.02>
// CHECK-LABEL: func.func @eval
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>, %[[T:.*]]: tensor<4xi32>) -> (tensor<f32>, tensor<4x4xf32>)
func.func @eval(%x: tensor<4x8xf32>, %t: tensor<4xi32>) -> (tensor<f32>, tensor<4x4xf32>) {
  // CHECK-NEXT: %[[XB:.*]] = dsc.cast %[[X]] : tensor<4x8xf32> to tensor<4x8xbf16>
  // CHECK-NEXT: dsc.get_parameter @w
  // CHECK-NEXT: %[[W:.*]] = dsc.cast
  %w = dsc.get_parameter @w : tensor<8x4xf32>
  // CHECK-NEXT: %[[L:.*]] = dsc.matmul %[[XB]], %[[W]] : tensor<4x8xbf16>, tensor<8x4xbf16> -> tensor<4x4xbf16>
  %l = dsc.matmul %x, %w : tensor<4x8xf32>, tensor<8x4xf32> -> tensor<4x4xf32>
  // CHECK-NEXT: %[[LOSS:.*]] = dsc.cross_entropy %[[L]], %[[T]] : tensor<4x4xbf16>, tensor<4xi32> -> tensor<f32>
  %loss = dsc.cross_entropy %l, %t : tensor<4x4xf32>, tensor<4xi32> -> tensor<f32>
  // CHECK-NEXT: %[[TWICE:.*]] = dsc.add %[[LOSS]], %[[LOSS]] : tensor<f32>
  %twice = dsc.add %loss, %loss : tensor<f32>
  // CHECK-NEXT: %[[LF:.*]] = dsc.cast %[[L]] : tensor<4x4xbf16> to tensor<4x4xf32>
  // CHECK-NEXT: %[[E:.*]] = arith.addf %[[LF]], %[[LF]] : tensor<4x4xf32>
  %e = arith.addf %l, %l : tensor<4x4xf32>
  // CHECK-NEXT: return %[[TWICE]], %[[E]] : tensor<f32>, tensor<4x4xf32>
  return %twice, %e : tensor<f32>, tensor<4x4xf32>
}

// -----

// A ZeRO-3 gather is a parameter read too: the f32 chunk is gathered, then
// cast.
dsc.mesh @mesh axes = ["dp"] shape = [2]
dsc.parameter @fc : tensor<16xf32> init = #dsc.init<normal, std = 0.02> layout = #dsc.layout<view = [8, 4], split = [[], []], chunk = ["dp"]>
// CHECK-LABEL: func.func @gathered
func.func @gathered(%x: tensor<2x8xi32>) -> tensor<8x4xf32> {
  // CHECK: %[[G:.*]] = dsc.gather_parameter @fc on @mesh axes = ["dp"] : tensor<8x4xf32>
  // CHECK-NEXT: %[[GB:.*]] = dsc.cast %[[G]] : tensor<8x4xf32> to tensor<8x4xbf16>
  // CHECK-NEXT: %[[Y:.*]] = dsc.gelu %[[GB]] : tensor<8x4xbf16>
  %w = dsc.gather_parameter @fc on @mesh axes = ["dp"] : tensor<8x4xf32>
  %y = dsc.gelu %w : tensor<8x4xf32>
  // CHECK-NEXT: %[[YF:.*]] = dsc.cast %[[Y]] : tensor<8x4xbf16> to tensor<8x4xf32>
  // CHECK-NEXT: return %[[YF]]
  return %y : tensor<8x4xf32>
}

// -----

// After autodiff is too late: the backward would be half converted.
// expected-error @below {{--dsc-mixed-precision runs on the forward graph, before --dsc-autodiff, but the module has @forward_backward already; run it before autodiff (--dsc-compile "precision=bf16" does)}}
func.func @forward_backward(%x: tensor<4xf32>) -> tensor<4xf32> attributes {dsc.program = #dsc.program_role<forward_backward>} {
  return %x : tensor<4xf32>
}

// -----

// The pass converts a flat graph; ops with regions are not converted.
func.func @staged() -> tensor<4xf32> {
  // expected-error @below {{'tensor.generate' op --dsc-mixed-precision: cannot convert an op with regions; the pass runs on a flat forward graph}}
  %y = tensor.generate {
  ^bb0(%i: index):
    %one = arith.constant 1.0 : f32
    tensor.yield %one : f32
  } : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// Refused before anything is rewritten, even when an argument that the
// pass would cast is read inside the region (this crashed once).
func.func @argInRegion(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{'tensor.generate' op --dsc-mixed-precision: cannot convert an op with regions; the pass runs on a flat forward graph}}
  %y = tensor.generate {
  ^bb0(%i: index):
    %e = tensor.extract %x[%i] : tensor<4xf32>
    tensor.yield %e : f32
  } : tensor<4xf32>
  return %y : tensor<4xf32>
}
