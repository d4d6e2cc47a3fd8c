// RUN: dsc-opt %s --dsc-autodiff --dsc-recompute=recompute=full -verify-diagnostics

// Without the importers' `dsc.layer` marks (or `h.<i>` name locations) no
// layer is known; the pass says so instead of recomputing nothing.
dsc.parameter @h.0.w : tensor<4x4xf32> init = #dsc.init<normal, std = 0.02>
// expected-error @+1 {{--dsc-recompute: recompute=full needs the transformer layers, but no op of @forward_backward is marked with one (`dsc.layer = i`, as the importers mark each op of layer i, or an `h.<i>` name location)}}
func.func @loss(%x: tensor<2x4x4xf32>, %t: tensor<2x4xi32>) -> tensor<f32> {
  %w = dsc.get_parameter @h.0.w : tensor<4x4xf32>
  %h = dsc.matmul %x, %w : tensor<2x4x4xf32>, tensor<4x4xf32> -> tensor<2x4x4xf32>
  %l = dsc.cross_entropy %h, %t : tensor<2x4x4xf32>, tensor<2x4xi32> -> tensor<f32>
  return %l : tensor<f32>
}
