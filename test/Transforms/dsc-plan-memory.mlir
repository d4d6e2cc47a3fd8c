// RUN: dsc-opt %s --dsc-plan-memory -split-input-file -verify-diagnostics | FileCheck %s
// RUN: dsc-opt %s --dsc-plan-memory=alignment=16 -split-input-file -verify-diagnostics | FileCheck %s --check-prefix=ALIGN16
// RUN: not dsc-opt %s --dsc-plan-memory=alignment=48 -split-input-file 2>&1 | FileCheck %s --check-prefix=ALIGN48

// ALIGN48: error: --dsc-plan-memory: alignment must be a power of two

// Persistent buffers end to end, each tier from its own offset 0, rounded up
// to 64 bytes (tensor<32xf32> is 128 B, tensor<8xf32> 32 B -> 64):
//   device: @w 0; inputs: (0, tensor<32xf32>) 128, shared by both programs,
//           (1, tensor<8xf32>) 256; @forward_backward's result 320, its
//           constant 448; @loss's result 512; persistent = 640.
//   host:   @m 0 (host_bytes 128).
// Temporaries above 640, by program: @forward_backward's %a at +0, %b at +128
// (%a is still read), %c at +0 again (%a died at %b), its reshape a view of
// %c; peak 256. @loss's %a at +0, peak 128. arena = 640 + max(256, 128).
// With alignment=16 nothing rounds: @w 0, inputs 128 and 256, the result
// 288, the constant 416, @loss's result 448; persistent 576.

// CHECK-LABEL: module attributes
// CHECK-SAME: dsc.memory = {alignment = 64 : i64, arena_bytes = 896 : i64, host_bytes = 128 : i64, host_staging_bytes = 0 : i64, persistent_bytes = 640 : i64, temporary_bytes = 256 : i64}
// CHECK-SAME: dsc.program_peaks = {forward_backward = 256 : i64, loss = 128 : i64}
// CHECK-NEXT: dsc.parameter @w : tensor<32xf32> {{.*}}{dsc.offset = 0 : i64}
// CHECK-NEXT: dsc.state @m : tensor<32xf32> exp_avg of @w in host {dsc.offset = 0 : i64}
// CHECK-LABEL: func.func @forward_backward
// CHECK-SAME: dsc.input_offsets = array<i64: 128, 256>
// CHECK-NEXT: %[[W:.*]] = dsc.get_parameter @w {dsc.offsets = array<i64: 0>}
// CHECK-NEXT: arith.constant {dsc.offsets = array<i64: 448>}
// CHECK-NEXT: %[[A:.*]] = dsc.gelu %arg0 {dsc.offsets = array<i64: 640>}
// CHECK-NEXT: %[[B:.*]] = dsc.gelu %[[A]] {dsc.offsets = array<i64: 768>}
// CHECK-NEXT: %[[C:.*]] = dsc.add %[[B]], %[[W]] {dsc.offsets = array<i64: 640>}
// CHECK-NEXT: dsc.reshape %[[C]] {dsc.offsets = array<i64: 640>}
// CHECK-NEXT: %[[D:.*]] = dsc.add %[[C]], %[[W]] {dsc.offsets = array<i64: 320>}
// CHECK-NEXT: return %[[D]]
// CHECK-LABEL: func.func @loss
// CHECK-SAME: dsc.input_offsets = array<i64: 128>
// CHECK-NEXT: %[[A:.*]] = dsc.gelu %arg0 {dsc.offsets = array<i64: 640>}
// CHECK-NEXT: dsc.gelu %[[A]] {dsc.offsets = array<i64: 512>}

// ALIGN16-LABEL: module attributes
// ALIGN16-SAME: dsc.memory = {alignment = 16 : i64, arena_bytes = 832 : i64, host_bytes = 128 : i64, host_staging_bytes = 0 : i64, persistent_bytes = 576 : i64, temporary_bytes = 256 : i64}
// ALIGN16-LABEL: func.func @forward_backward
// ALIGN16-SAME: dsc.input_offsets = array<i64: 128, 256>
// ALIGN16: arith.constant {dsc.offsets = array<i64: 416>}
// ALIGN16-LABEL: func.func @loss
// ALIGN16: dsc.gelu %{{.*}} {dsc.offsets = array<i64: 448>}

dsc.parameter @w : tensor<32xf32> init = #dsc.init<zeros>
dsc.state @m : tensor<32xf32> exp_avg of @w in host
func.func @forward_backward(%x: tensor<32xf32>, %t: tensor<8xf32>) -> tensor<32xf32> attributes {dsc.program = #dsc.program_role<forward_backward>} {
  %w = dsc.get_parameter @w : tensor<32xf32>
  %k = arith.constant dense<1.0> : tensor<8xf32>
  %a = dsc.gelu %x : tensor<32xf32>
  %b = dsc.gelu %a : tensor<32xf32>
  %c = dsc.add %b, %w : tensor<32xf32>
  %r = dsc.reshape %c : tensor<32xf32> -> tensor<4x8xf32>
  %d = dsc.add %c, %w : tensor<32xf32>
  return %d : tensor<32xf32>
}
func.func @loss(%x: tensor<32xf32>) -> tensor<32xf32> attributes {dsc.program = #dsc.program_role<forward>} {
  %a = dsc.gelu %x : tensor<32xf32>
  %e = dsc.gelu %a : tensor<32xf32>
  return %e : tensor<32xf32>
}

// -----

// NVMe states are staged in the host arena between dsc.swap_in and
// dsc.swap_out, above the host tier's persistent bytes (@h: 0..128):
// @v at 128 + 0, @u at 128 + 128; a staging peak of 192 (128 + 64), so the
// host arena is 128 + 192. The NVMe arena holds @v (0) and @u (128): 192.
// The device holds the parameters, @w 0 and @s 128: 192.

// CHECK-LABEL: module attributes
// CHECK-SAME: dsc.memory = {alignment = 64 : i64, arena_bytes = 192 : i64, host_bytes = 320 : i64, host_staging_bytes = 192 : i64, nvme_bytes = 192 : i64, persistent_bytes = 192 : i64, temporary_bytes = 0 : i64}
// CHECK: dsc.parameter @s : tensor<16xf32> {{.*}}{dsc.offset = 128 : i64}
// CHECK: dsc.state @h : tensor<32xf32> exp_avg_sq of @w in host {dsc.offset = 0 : i64}
// CHECK: dsc.state @v : tensor<32xf32> exp_avg of @w in nvme {dsc.offset = 0 : i64}
// CHECK: dsc.state @u : tensor<16xf32> exp_avg of @s in nvme {dsc.offset = 128 : i64}
// CHECK-LABEL: func.func @optimizer
// CHECK-NEXT: dsc.swap_in [@v, @u] {dsc.offsets = array<i64: 128, 256>}
// CHECK-NEXT: dsc.swap_out [@v, @u]

dsc.parameter @w : tensor<32xf32> init = #dsc.init<zeros>
dsc.parameter @s : tensor<16xf32> init = #dsc.init<zeros>
dsc.state @h : tensor<32xf32> exp_avg_sq of @w in host
dsc.state @v : tensor<32xf32> exp_avg of @w in nvme
dsc.state @u : tensor<16xf32> exp_avg of @s in nvme
func.func @optimizer() attributes {dsc.program = #dsc.program_role<optimizer>} {
  dsc.swap_in [@v, @u]
  dsc.swap_out [@v, @u]
  return
}

// -----

dsc.parameter @w : tensor<32xf32> init = #dsc.init<zeros>
dsc.state @v : tensor<32xf32> exp_avg of @w in nvme
func.func @optimizer() {
  // expected-error @+1 {{--dsc-plan-memory: swaps out @v, which no dsc.swap_in before it swapped in}}
  dsc.swap_out [@v]
  return
}

// -----

dsc.parameter @w : tensor<32xf32> init = #dsc.init<zeros>
dsc.state @v : tensor<32xf32> exp_avg of @w in nvme
// expected-error @+1 {{--dsc-plan-memory: 1 states swapped in are never swapped out, among them @v}}
func.func @optimizer() {
  dsc.swap_in [@v]
  return
}

// -----

// expected-error @+1 {{--dsc-plan-memory: a program must return distinct values computed by its ops}}
func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{--dsc-plan-memory: a program must return distinct values computed by its ops}}
func.func @forward(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %y = dsc.gelu %x : tensor<4xf32>
  return %y, %y : tensor<4xf32>, tensor<4xf32>
}

// -----

// expected-error @+1 {{--dsc-plan-memory: programs must have one block}}
func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = dsc.gelu %x : tensor<4xf32>
  return %y : tensor<4xf32>
^unreachable:
  return %x : tensor<4xf32>
}
