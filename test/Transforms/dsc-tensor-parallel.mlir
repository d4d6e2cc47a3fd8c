// RUN: dsc-translate --import-neox %S/Inputs/tp-1layer.yml | dsc-opt --dsc-tensor-parallel="tp=2" | FileCheck %s
// RUN: dsc-translate --import-neox %S/Inputs/tp-1layer.yml | dsc-opt --dsc-tensor-parallel="tp=2" --dsc-autodiff | FileCheck %s --check-prefix=GRAD

// Megatron-LM's layout of one rank of tp=2: split parameters keep their
// names, get their local type and the layout of the whole they come from.
// CHECK: dsc.mesh @mesh axes = ["tp"] shape = [2]
// CHECK: dsc.parameter @wte.weight : tensor<32x32xf32> {{.*}} layout = <view = [64, 32], split = {{\[}}["tp"], []]>
// CHECK: dsc.parameter @wpe.weight : tensor<8x32xf32> init = <normal, std = 2.000000e-02>
// CHECK-NEXT: dsc.parameter @h.0.ln_1.weight : tensor<32xf32> init = <ones>
// CHECK: dsc.parameter @h.0.attn.qkv.weight : tensor<32x48xf32> {{.*}} layout = <view = [32, 3, 32], split = {{\[}}[], [], ["tp"]]>
// CHECK: dsc.parameter @h.0.attn.qkv.bias : tensor<48xf32> {{.*}} layout = <view = [3, 32], split = {{\[}}[], ["tp"]]>
// CHECK: dsc.parameter @h.0.attn.proj.weight : tensor<16x32xf32> {{.*}} layout = <view = [32, 32], split = {{\[}}["tp"], []]>
// CHECK: dsc.parameter @h.0.attn.proj.bias : tensor<32xf32> init = <zeros>
// CHECK: dsc.parameter @h.0.mlp.fc.weight : tensor<32x64xf32> {{.*}} layout = <view = [32, 128], split = {{\[}}[], ["tp"]]>
// CHECK: dsc.parameter @h.0.mlp.fc.bias : tensor<64xf32> {{.*}} layout = <view = [128], split = {{\[}}["tp"]]>
// CHECK: dsc.parameter @h.0.mlp.proj.weight : tensor<64x32xf32> {{.*}} layout = <view = [128, 32], split = {{\[}}["tp"], []]>
// CHECK: dsc.parameter @h.0.mlp.proj.bias : tensor<32xf32> init = <zeros>

// The vocabulary-parallel lookup, summed over tp (g).
// CHECK-LABEL: func.func @loss
// CHECK: %[[LOOKUP:.*]] = dsc.vocab_parallel_embedding %{{.*}}, %arg0 on @mesh axes = ["tp"] : tensor<32x32xf32>, tensor<2x8xi32> -> tensor<2x8x32xf32>
// CHECK-NEXT: dsc.all_reduce %[[LOOKUP]] on @mesh axes = ["tp"] : tensor<2x8x32xf32>
// Column-parallel QKV behind f; the rank's 2 of 4 heads; q, k, v at its
// columns 0, 16, 32.
// CHECK: %[[LN1:.*]] = dsc.layer_norm
// CHECK: %[[F1:.*]] = dsc.copy_to_parallel %[[LN1]] on @mesh axes = ["tp"] : tensor<2x8x32xf32>
// CHECK-NEXT: %[[QKV:.*]] = dsc.matmul %[[F1]], %{{.*}} : tensor<2x8x32xf32>, tensor<32x48xf32> -> tensor<2x8x48xf32>
// CHECK-NEXT: %[[QKVB:.*]] = dsc.bias_add %[[QKV]], %{{.*}} : tensor<2x8x48xf32>, tensor<48xf32>
// CHECK-NEXT: dsc.slice %[[QKVB]] [0, 0, 0] [2, 8, 16]
// CHECK-NEXT: dsc.slice %[[QKVB]] [0, 0, 16] [2, 8, 16]
// CHECK-NEXT: dsc.slice %[[QKVB]] [0, 0, 32] [2, 8, 16]
// CHECK-NEXT: %[[ATT:.*]] = dsc.attention {{.*}}num_heads = 2{{.*}} : tensor<2x8x16xf32>
// Row-parallel projection: partial sums all-reduced (g) before the bias.
// CHECK: %[[PROJ:.*]] = dsc.matmul %[[ATT]], %{{.*}} : tensor<2x8x16xf32>, tensor<16x32xf32> -> tensor<2x8x32xf32>
// CHECK-NEXT: %[[SUM:.*]] = dsc.all_reduce %[[PROJ]] on @mesh axes = ["tp"] : tensor<2x8x32xf32>
// CHECK-NEXT: dsc.bias_add %[[SUM]]
// The MLP: fc column-parallel, GELU on the rank's 64 of 128 columns, proj
// row-parallel.
// CHECK: dsc.copy_to_parallel
// CHECK: dsc.gelu %{{.*}} : tensor<2x8x64xf32>
// CHECK: dsc.matmul %{{.*}}, %{{.*}} : tensor<2x8x64xf32>, tensor<64x32xf32> -> tensor<2x8x32xf32>
// CHECK-NEXT: dsc.all_reduce
// The LM head computes the rank's 32 of 64 vocabulary columns; the loss
// never sees whole logits.
// CHECK: %[[F3:.*]] = dsc.copy_to_parallel
// CHECK-NEXT: %[[LOGITS:.*]] = dsc.matmul %[[F3]], %{{.*}} {transpose_rhs} : tensor<2x8x32xf32>, tensor<32x32xf32> -> tensor<2x8x32xf32>
// CHECK-NEXT: dsc.vocab_parallel_cross_entropy %[[LOGITS]], %arg1 on @mesh axes = ["tp"] : tensor<2x8x32xf32>, tensor<2x8xi32> -> tensor<f32>

// Autodiff derives the backward's collectives: the gradient of each f is
// all-reduced (three here: the LM head's input, the MLP's and the
// attention's), the g's pass their gradient through.
// GRAD-LABEL: func.func @forward_backward
// GRAD: dsc.vocab_parallel_cross_entropy_grad %{{.*}}, %arg1, %{{.*}} on @mesh axes = ["tp"]
// GRAD-COUNT-3: dsc.all_reduce %{{.*}} on @mesh axes = ["tp"] : tensor<2x8x32xf32>
// GRAD: dsc.vocab_parallel_embedding_grad %{{.*}}, %arg0 on @mesh axes = ["tp"] : tensor<2x8x32xf32>, tensor<2x8xi32> -> tensor<32x32xf32>
// GRAD-NOT: dsc.all_reduce

// Configurations that do not divide are errors naming the numbers.
// RUN: dsc-translate --import-neox %S/Inputs/tp-1layer.yml | not dsc-opt --dsc-tensor-parallel="tp=3" 2>&1 | FileCheck %s --check-prefix=HEADS
// HEADS: error: 'dsc.attention' op --dsc-tensor-parallel: 4 attention heads are not divisible by tp=3
// RUN: dsc-translate --import-neox %S/Inputs/tp-1layer.yml | not dsc-opt --dsc-tensor-parallel="tp=8" 2>&1 | FileCheck %s --check-prefix=HEADS8
// HEADS8: 4 attention heads are not divisible by tp=8
// RUN: dsc-translate --import-neox %S/Inputs/tp-1layer.yml | dsc-opt --dsc-declare-mesh="dp=2" | not dsc-opt --dsc-tensor-parallel="tp=2" 2>&1 | FileCheck %s --check-prefix=MESH
// MESH: error: --dsc-tensor-parallel: mesh @mesh needs a 'tp' axis of size 2
// RUN: dsc-translate --import-neox %S/Inputs/tp-1layer.yml | dsc-opt --dsc-tensor-parallel="tp=2" --dsc-autodiff | not dsc-opt --dsc-tensor-parallel="tp=2" 2>&1 | FileCheck %s --check-prefix=ORDER
// ORDER: error: --dsc-tensor-parallel slices the forward graph and must run before --dsc-autodiff
// RUN: %python -c "print('{\"num_layers\": 1, \"hidden_size\": 32, \"num_attention_heads\": 4, \"seq_length\": 8, \"max_position_embeddings\": 8, \"vocab_size\": 66, \"hidden_dropout\": 0, \"attention_dropout\": 0}')" > %t.vocab.json
// RUN: dsc-translate --import-neox %t.vocab.json | not dsc-opt --dsc-tensor-parallel="tp=4" 2>&1 | FileCheck %s --check-prefix=VOCAB
// VOCAB: error: 'dsc.embedding' op --dsc-tensor-parallel: the vocabulary (66 tokens) is not divisible by tp=4; pad it (Megatron's make-vocab-size-divisible-by)
// RUN: %python -c "print('{\"num_layers\": 1, \"hidden_size\": 32, \"num_attention_heads\": 4, \"seq_length\": 8, \"max_position_embeddings\": 8, \"vocab_size\": 64, \"attention_dropout\": 0.1}')" > %t.dropout.json
// Attention dropout stays one rank's: each rank's heads are those at its
// index in the tp group, and draw those heads' masks.
// RUN: dsc-translate --import-neox %t.dropout.json | dsc-opt --dsc-tensor-parallel="tp=2" | FileCheck %s --check-prefix=DROPOUT
// DROPOUT: dsc.attention {{.*}}dropout = 1.000000e-01 : f64, head_axes = ["tp"], num_heads = 2
