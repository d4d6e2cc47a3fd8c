module attributes {dsc.model = {vocab_size = 8 : i64}} {
  dsc.parameter @x : tensor<2x3x16xf64> init = #dsc.init<normal, std = 1.0>
  func.func @loss(%ids: tensor<2x3xi32>, %t: tensor<2x3xi32>) -> tensor<f64> {
    %x = dsc.get_parameter @x : tensor<2x3x16xf64>
    %y = dsc.swiglu %x : tensor<2x3x16xf64> -> tensor<2x3x8xf64>
    %l = dsc.cross_entropy %y, %t : tensor<2x3x8xf64>, tensor<2x3xi32> -> tensor<f64>
    return %l : tensor<f64>
  }
}
