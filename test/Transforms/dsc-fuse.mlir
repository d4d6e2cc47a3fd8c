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
