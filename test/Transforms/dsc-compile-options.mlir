// --dsc-compile's counts below 1 are errors that name them (exit code 1,
// no crash): the passes that take them check them.
// RUN: not dsc-opt %s --dsc-compile="dp=0" 2>&1 | FileCheck %s --check-prefix=DP
// RUN: not dsc-opt %s --dsc-compile="tp=-1" 2>&1 | FileCheck %s --check-prefix=TP
// RUN: not dsc-opt %s --dsc-compile="pp=0" 2>&1 | FileCheck %s --check-prefix=PP
// RUN: not dsc-opt %s --dsc-compile="microbatches=0" 2>&1 | FileCheck %s --check-prefix=MB
// DP: error: --dsc-declare-mesh: dp must be >= 1, got 0
// TP: error: --dsc-declare-mesh: tp must be >= 1, got -1
// PP: error: --dsc-declare-mesh: pp must be >= 1, got 0
// MB: error: --dsc-autodiff: microbatches must be >= 1, got 0
// DP-NOT: Stack dump
// MB-NOT: Stack dump

dsc.parameter @w : tensor<8x16xf32> init = #dsc.init<normal, std = 0.02>
func.func @loss(%x: tensor<2x4x8xf32>, %t: tensor<2x4xi32>) -> tensor<f32> {
  %w = dsc.get_parameter @w : tensor<8x16xf32>
  %y = dsc.matmul %x, %w : tensor<2x4x8xf32>, tensor<8x16xf32> -> tensor<2x4x16xf32>
  %l = dsc.cross_entropy %y, %t : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<f32>
  return %l : tensor<f32>
}
