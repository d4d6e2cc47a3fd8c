// RUN: dsc-translate --import-neox %S/Inputs/pp-4layer.yml | dsc-opt --dsc-declare-mesh="pp=2" --dsc-pipeline="pp=2" | FileCheck %s --check-prefix=EVEN
// RUN: dsc-translate --import-neox %S/Inputs/pp-4layer-wide-vocab.yml | dsc-opt --dsc-declare-mesh="pp=2" --dsc-pipeline="pp=2" | FileCheck %s --check-prefix=COST
// RUN: dsc-translate --import-neox %S/Inputs/pp-4layer.yml | dsc-opt --dsc-pipeline="pp=4 pipeline-schedule=gpipe" | FileCheck %s --check-prefix=FOUR
// RUN: dsc-translate --import-neox %S/Inputs/pp-4layer.yml | dsc-opt --dsc-declare-mesh="pp=2" --dsc-pipeline="pp=2" --dsc-autodiff="microbatches=4" --dsc-optimizer | FileCheck %s --check-prefix=TRAIN
// RUN: dsc-translate --import-neox %S/Inputs/pp-4layer.yml | not dsc-opt --dsc-pipeline="pp=5" 2>&1 | FileCheck %s --check-prefix=LAYERS
// RUN: dsc-translate --import-neox %S/Inputs/pp-4layer.yml | not dsc-opt --dsc-declare-mesh="pp=2" --dsc-pipeline="pp=4" 2>&1 | FileCheck %s --check-prefix=MESH
// RUN: dsc-translate --import-neox %S/Inputs/pp-4layer.yml | not dsc-opt --dsc-pipeline="pp=2 pipeline-schedule=zigzag" 2>&1 | FileCheck %s --check-prefix=SCHED

// A small vocabulary: the embedding and the LM head weigh about a layer
// each, and the cost-balanced cut is the even one, h.0-h.1 | h.2-h.3.
// EVEN: module attributes {{.*}}dsc.pipeline = {schedule = "1f1b", stages = 2 : i64}
// EVEN-LABEL: func.func @loss.stage0(%arg0: tensor<2x8xi32>) -> tensor<2x8x32xf32> attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 0 : i64}
// EVEN: dsc.get_parameter @wte.weight
// EVEN: dsc.get_parameter @h.0.ln_1.weight
// EVEN: dsc.get_parameter @h.1.ln_1.weight
// EVEN-NOT: @h.2.
// EVEN: return %{{.*}} : tensor<2x8x32xf32>
// EVEN-LABEL: func.func @loss.stage1(%arg0: tensor<2x8x32xf32>, %arg1: tensor<2x8xi32>) -> tensor<f32> attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 1 : i64}
// EVEN-NOT: @h.1.
// EVEN: dsc.get_parameter @h.2.ln_1.weight
// EVEN: dsc.get_parameter @h.3.ln_1.weight
// The tied embedding is read again by the LM head of the last stage.
// EVEN: dsc.get_parameter @wte.weight
// EVEN: dsc.cross_entropy
// EVEN-NOT: func.func @loss(

// A vocabulary of 2048 over h=32: the LM head's 2·b·s·h·V FLOPs outweigh
// three layers, so cost balance puts three layers on stage 0 where equal
// layer counts would put two.
// COST-LABEL: func.func @loss.stage0
// COST: dsc.get_parameter @h.2.ln_1.weight
// COST-LABEL: func.func @loss.stage1
// COST-NOT: @h.2.
// COST: dsc.get_parameter @h.3.ln_1.weight
// COST: dsc.cross_entropy

// pp=4 declares its mesh and gives each stage one layer.
// FOUR: dsc.pipeline = {schedule = "gpipe", stages = 4 : i64}
// FOUR: dsc.mesh @mesh axes = ["pp"] shape = [4]
// FOUR-LABEL: func.func @loss.stage0(%arg0: tensor<2x8xi32>) -> tensor<2x8x32xf32>
// FOUR: @h.0.ln_1.weight
// FOUR-LABEL: func.func @loss.stage1(%arg0: tensor<2x8x32xf32>) -> tensor<2x8x32xf32> attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 1 : i64}
// FOUR: @h.1.ln_1.weight
// FOUR-LABEL: func.func @loss.stage2(%arg0: tensor<2x8x32xf32>) -> tensor<2x8x32xf32> attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 2 : i64}
// FOUR: @h.2.ln_1.weight
// FOUR-LABEL: func.func @loss.stage3(%arg0: tensor<2x8x32xf32>, %arg1: tensor<2x8xi32>) -> tensor<f32> attributes {dsc.program = #dsc.program_role<forward>, dsc.stage = 3 : i64}
// FOUR: @h.3.ln_1.weight

// Autodiff: stage 0's backward takes its output's gradient and returns
// nothing; the last returns the loss and its input's gradient. Each
// recomputes its forward.
// TRAIN-LABEL: func.func @forward_backward.stage0(%arg0: tensor<2x8xi32>, %arg1: tensor<2x8x32xf32>) attributes {dsc.program = #dsc.program_role<forward_backward>, dsc.stage = 0 : i64}
// TRAIN: dsc.accumulate %{{.*}} into @grad.wte.weight
// TRAIN: return{{$}}
// TRAIN-LABEL: func.func @forward_backward.stage1(%arg0: tensor<2x8x32xf32>, %arg1: tensor<2x8xi32>) -> (tensor<f32>, tensor<2x8x32xf32>) attributes {dsc.program = #dsc.program_role<forward_backward>, dsc.stage = 1 : i64}
// TRAIN: %[[SEED:.*]] = arith.constant dense<2.500000e-01> : tensor<f32>
// TRAIN: dsc.cross_entropy_grad %{{.*}}, %arg1, %[[SEED]]
// TRAIN: dsc.accumulate %{{.*}} into @grad.wte.weight
// TRAIN: return %{{.*}}, %[[DX:.*]] : tensor<f32>, tensor<2x8x32xf32>
// One optimizer per stage: the tied embedding's two parts are summed over
// pp, the norm counts the stage's own gradients as parts over pp (false
// for the shared one), and both stages update their copy of wte.
// TRAIN-LABEL: func.func @optimizer.stage0() -> (tensor<f32>, tensor<f32>) attributes {dsc.program = #dsc.program_role<optimizer>, dsc.stage = 0 : i64}
// TRAIN-NEXT: dsc.all_reduce_states [@grad.wte.weight] on @mesh axes = ["pp"]
// TRAIN: dsc.clip_grad_norm {{.*}}@grad.wte.weight] max_norm {{.*}}dsc.pipeline_local = array<i1: true, {{.*}}, true, false>
// TRAIN-NOT: @h.2.
// TRAIN: dsc.adamw @wte.weight
// TRAIN-LABEL: func.func @optimizer.stage1() -> (tensor<f32>, tensor<f32>) attributes {dsc.program = #dsc.program_role<optimizer>, dsc.stage = 1 : i64}
// TRAIN-NEXT: dsc.all_reduce_states [@grad.wte.weight] on @mesh axes = ["pp"]
// TRAIN: dsc.clip_grad_norm [@grad.wte.weight, @grad.ln_f.bias, {{.*}}dsc.pipeline_local = array<i1: false, true,
// TRAIN-NOT: @h.1.
// TRAIN: dsc.adamw @wte.weight

// LAYERS: error: --dsc-pipeline: 5 stages need at least 5 transformer layers, but @loss has 4
// MESH: error: --dsc-pipeline: pp=4 but mesh @mesh has a 'pp' axis of size 2
// SCHED: error: --dsc-pipeline: unknown schedule 'zigzag'; expected 1f1b or gpipe
