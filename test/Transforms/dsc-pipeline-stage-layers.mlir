// RUN: dsc-opt %s --dsc-pipeline="pp=2 stage-layers=1,3" | FileCheck %s
// RUN: dsc-opt %s --dsc-pipeline="pp=2 stage-layers=3,1" | FileCheck %s --check-prefix=LATE
// RUN: not dsc-opt %s --dsc-pipeline="pp=2 stage-layers=1,2,1" 2>&1 | FileCheck %s --check-prefix=COUNT
// RUN: not dsc-opt %s --dsc-pipeline="pp=2 stage-layers=2,3" 2>&1 | FileCheck %s --check-prefix=SUM
// RUN: not dsc-opt %s --dsc-pipeline="pp=2 stage-layers=0,4" 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: dsc-opt %s --dsc-compile="pp=2 microbatches=2 stage-layers=1,3" | FileCheck %s --check-prefix=PLAN
// RUN: dsc-translate --import-neox %dsc_src_root/examples/configs/gpt-tiny.yml | not dsc-opt --dsc-estimate="pp=2 stage-layers=1,3 cluster=%dsc_src_root/examples/clusters/dgx-h200.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ESTIMATE

// stage-layers gives the cut instead of the cost balance (which cuts these
// four equal layers 2,2): stage 0 holds h.0 with the embedding, stage 1
// h.1 to h.3 with the head and the loss.
// CHECK-LABEL: func.func @loss.stage0
// CHECK: @h.0.w
// CHECK-NOT: @h.1.w
// CHECK-LABEL: func.func @loss.stage1
// CHECK: @h.1.w
// CHECK: @h.2.w
// CHECK: @h.3.w
// CHECK: dsc.cross_entropy
// LATE-LABEL: func.func @loss.stage0
// LATE: @h.2.w
// LATE-NOT: @h.3.w
// LATE-LABEL: func.func @loss.stage1
// LATE-NOT: @h.2.w
// LATE: @h.3.w
// The key travels with the plan.
// PLAN: dsc.parallel_plan = #dsc.parallel_plan<"{{.*}}stage-layers=1,3{{.*}}">

// The cost model cuts evenly: a given cut is refused by name there.
// ESTIMATE: error: --dsc-estimate: stage-layers=1,3 is not priced: the cost model cuts the layers evenly
// COUNT: error: --dsc-pipeline: stage-layers=1,2,1 gives 3 stages' layers, but the plan has 2 stages (pp x virtual-stages)
// SUM: error: --dsc-pipeline: stage-layers=2,3 adds up to 5 layers, but the model has 4
// ZERO: error: --dsc-pipeline: stage-layers=0,4: '0' is not a layer count >= 1 (each stage holds at least one transformer layer)

module @four_layers {
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
