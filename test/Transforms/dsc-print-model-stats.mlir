// RUN: dsc-opt %s --dsc-print-model-stats -o /dev/null | FileCheck %s --check-prefix=TEXT
// RUN: dsc-opt %s --dsc-print-model-stats="format=json" -o /dev/null | FileCheck %s --check-prefix=JSON
// RUN: dsc-opt %s --dsc-print-model-stats | FileCheck %s --check-prefix=IR
// RUN: not dsc-opt %s --dsc-print-model-stats="format=xml" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BADFMT

// A one-block model small enough to count by hand (b=2, s=8, h=16, V=32):
//   parameters: wte 32*16 + h.0 (qkv 16*48+48, mlp 16*64+64) = 512 + 816 + 1088 = 2416
//   matmul FLOPs: qkv 2*16*16*48 = 24576, fc 2*16*16*64 = 32768,
//                 attention 4*2*8*8*16 = 8192, lm_head 2*16*16*32 = 16384
//   total 81920; layer h.0 = 65536.

dsc.parameter @wte.weight : tensor<32x16xf32> init = #dsc.init<normal, std = 0.02>
dsc.parameter @h.0.qkv.weight : tensor<16x48xf32> init = #dsc.init<normal, std = 0.02>
dsc.parameter @h.0.qkv.bias : tensor<48xf32> init = #dsc.init<zeros>
dsc.parameter @h.0.fc.weight : tensor<16x64xf32> init = #dsc.init<normal, std = 0.02>
dsc.parameter @h.0.fc.bias : tensor<64xf32> init = #dsc.init<zeros>

func.func @loss(%ids: tensor<2x8xi32>, %targets: tensor<2x8xi32>) -> tensor<f32> {
  %wte = dsc.get_parameter @wte.weight : tensor<32x16xf32>
  %x = dsc.embedding %wte, %ids : tensor<32x16xf32>, tensor<2x8xi32> -> tensor<2x8x16xf32>
  %wq = dsc.get_parameter @h.0.qkv.weight : tensor<16x48xf32>
  %bq = dsc.get_parameter @h.0.qkv.bias : tensor<48xf32>
  %qkv0 = dsc.matmul %x, %wq : tensor<2x8x16xf32>, tensor<16x48xf32> -> tensor<2x8x48xf32>
  %qkv = dsc.bias_add %qkv0, %bq : tensor<2x8x48xf32>, tensor<48xf32>
  %q = dsc.slice %qkv [0, 0, 0] [2, 8, 16] : tensor<2x8x48xf32> -> tensor<2x8x16xf32>
  %k = dsc.slice %qkv [0, 0, 16] [2, 8, 16] : tensor<2x8x48xf32> -> tensor<2x8x16xf32>
  %v = dsc.slice %qkv [0, 0, 32] [2, 8, 16] : tensor<2x8x48xf32> -> tensor<2x8x16xf32>
  %a = dsc.attention %q, %k, %v {num_heads = 2 : i64, causal} : tensor<2x8x16xf32>
  %wf = dsc.get_parameter @h.0.fc.weight : tensor<16x64xf32>
  %bf = dsc.get_parameter @h.0.fc.bias : tensor<64xf32>
  %f0 = dsc.matmul %a, %wf : tensor<2x8x16xf32>, tensor<16x64xf32> -> tensor<2x8x64xf32>
  %f = dsc.bias_add %f0, %bf : tensor<2x8x64xf32>, tensor<64xf32>
  %g = dsc.gelu %f : tensor<2x8x64xf32>
  %h = dsc.slice %g [0, 0, 0] [2, 8, 16] : tensor<2x8x64xf32> -> tensor<2x8x16xf32>
  %logits = dsc.matmul %h, %wte {transpose_rhs} : tensor<2x8x16xf32>, tensor<32x16xf32> -> tensor<2x8x32xf32> loc("lm_head")
  %loss = dsc.cross_entropy %logits, %targets : tensor<2x8x32xf32>, tensor<2x8xi32> -> tensor<f32> loc("loss")
  return %loss : tensor<f32>
}

// TEXT: === dsc model stats ===
// TEXT: parameters: 2,416
// TEXT: forward FLOPs / micro-batch: 81,920
// TEXT: wte 512 0
// TEXT: h.0 1,904 65,536
// TEXT: lm_head 0 16,384
// TEXT: ops: dsc.parameter=5 dsc.get_parameter=5 dsc.embedding=1 dsc.matmul=3

// JSON: "parameters": 2416,
// JSON: "forward_flops": 81920,
// JSON: "layers": [
// JSON: "name": "wte",
// JSON-NEXT: "parameters": 512,
// JSON-NEXT: "forward_flops": 0,
// JSON: "name": "h.0",
// JSON-NEXT: "parameters": 1904,
// JSON-NEXT: "forward_flops": 65536,
// JSON: "name": "lm_head",
// JSON-NEXT: "parameters": 0,
// JSON-NEXT: "forward_flops": 16384,

// The analysis leaves the module unchanged.
// IR-LABEL: func.func @loss
// IR: dsc.cross_entropy

// BADFMT: unknown format 'xml'; expected 'text' or 'json'
