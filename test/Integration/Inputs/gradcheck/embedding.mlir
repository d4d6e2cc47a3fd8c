module attributes {dsc.model = {vocab_size = 8 : i64}} {
  dsc.parameter @wte : tensor<8x8xf64> init = #dsc.init<normal, std = 1.0>
  dsc.parameter @wpe : tensor<5x8xf64> init = #dsc.init<normal, std = 1.0>
  func.func @loss(%ids: tensor<2x3xi32>, %t: tensor<2x3xi32>) -> tensor<f64> {
    %w = dsc.get_parameter @wte : tensor<8x8xf64>
    %p = dsc.get_parameter @wpe : tensor<5x8xf64>
    %e = dsc.embedding %w, %ids : tensor<8x8xf64>, tensor<2x3xi32> -> tensor<2x3x8xf64>
    %q = dsc.position_embedding %p : tensor<5x8xf64> -> tensor<2x3x8xf64>
    %y = dsc.add %e, %q : tensor<2x3x8xf64>
    %l = dsc.cross_entropy %y, %t : tensor<2x3x8xf64>, tensor<2x3xi32> -> tensor<f64>
    return %l : tensor<f64>
  }
}
