module attributes {dsc.model = {vocab_size = 8 : i64}} {
  dsc.parameter @x : tensor<2x5x8xf64> init = #dsc.init<normal, std = 1.0>
  func.func @loss(%ids: tensor<2x5xi32>, %t: tensor<2x5xi32>) -> tensor<f64> {
    %x = dsc.get_parameter @x : tensor<2x5x8xf64>
    %y = dsc.rotary %x {head_dim = 8 : i64, rotary_dims = 8 : i64, base = 3.0 : f64} : tensor<2x5x8xf64>
    %l = dsc.cross_entropy %y, %t : tensor<2x5x8xf64>, tensor<2x5xi32> -> tensor<f64>
    return %l : tensor<f64>
  }
}
