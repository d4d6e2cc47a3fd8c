module attributes {dsc.model = {vocab_size = 12 : i64}} {
  dsc.parameter @x : tensor<2x3x4xf64> init = #dsc.init<normal, std = 1.0>
  dsc.parameter @w : tensor<2x3x12xf64> init = #dsc.init<normal, std = 1.0>
  func.func @loss(%ids: tensor<2x3xi32>, %t: tensor<2x3xi32>) -> tensor<f64> {
    %x = dsc.get_parameter @x : tensor<2x3x4xf64>
    %w = dsc.get_parameter @w : tensor<2x3x12xf64>
    %y = dsc.repeat_heads %x {head_dim = 2 : i64, repeats = 3 : i64} : tensor<2x3x4xf64> -> tensor<2x3x12xf64>
    %z = dsc.mul %y, %w : tensor<2x3x12xf64>
    %l = dsc.cross_entropy %z, %t : tensor<2x3x12xf64>, tensor<2x3xi32> -> tensor<f64>
    return %l : tensor<f64>
  }
}
