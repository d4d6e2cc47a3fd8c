// RUN: dsc-translate --import-neox %S/../Integration/Inputs/moe-tiny.json | dsc-opt --dsc-pipeline="pp=2" | FileCheck %s
// RUN: dsc-translate --import-neox %S/../Integration/Inputs/moe-tiny.json | dsc-opt --dsc-pipeline="pp=2" --dsc-autodiff="microbatches=4" | FileCheck %s --check-prefix=GRAD
// RUN: dsc-translate --import-neox %S/../Integration/Inputs/moe-tiny.json | not dsc-opt --dsc-pipeline="pp=2 precision=fp16" 2>&1 | FileCheck %s --check-prefix=FP16

// A 2-layer MoE GPT cut into 2 stages: the loss's dsc.auxiliary_loss goes
// (the stage's one message, the residual stream, cannot carry the routers'
// losses), and each stage names its own layer's routing loss in a
// dsc.stage_auxiliary_loss. The last stage returns the cross-entropy.
// CHECK-LABEL: func.func @loss.stage0
// CHECK: %{{.*}}, %{{.*}}, %[[AUX0:.*]] = dsc.moe_route
// CHECK: dsc.stage_auxiliary_loss %[[AUX0]] : tensor<f32>
// CHECK-NEXT: return
// CHECK-LABEL: func.func @loss.stage1
// CHECK: %{{.*}}, %{{.*}}, %[[AUX1:.*]] = dsc.moe_route
// CHECK: %[[CE:.*]] = dsc.cross_entropy
// CHECK-NOT: dsc.auxiliary_loss
// CHECK: dsc.stage_auxiliary_loss %[[AUX1]] : tensor<f32>
// CHECK-NEXT: return %[[CE]]

// Autodiff seeds each stage's routing loss there: stage 0 (which returns
// an activation) with a constant 1/m of its own, the last stage with the
// loss's own seed.
// GRAD-LABEL: func.func @forward_backward.stage0
// GRAD: %[[SEED0:.*]] = arith.constant dense<2.500000e-01> : tensor<f32>
// GRAD: dsc.moe_route_grad %{{.*}}, %{{.*}}, %{{.*}}, %[[SEED0]]
// GRAD-LABEL: func.func @forward_backward.stage1
// GRAD: %[[SEED1:.*]] = arith.constant dense<2.500000e-01> : tensor<f32>
// GRAD: dsc.cross_entropy_grad %{{.*}}, %{{.*}}, %[[SEED1]]
// GRAD: dsc.moe_route_grad %{{.*}}, %{{.*}}, %{{.*}}, %[[SEED1]]

// FP16: error: 'dsc.auxiliary_loss' op --dsc-pipeline: pipelines with MoE layers seed each stage's auxiliary losses with a fixed 1/m; fp16's dynamic loss scaling is not supported with them (use precision=bf16)
