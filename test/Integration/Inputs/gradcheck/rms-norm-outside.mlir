module attributes {dsc.model = {vocab_size = 8 : i64}} {
  dsc.parameter @x : tensor<2x3x8xf64> init = #dsc.init<normal, std = 1.0>
  dsc.parameter @g : tensor<8xf64> init = #dsc.init<normal, std = 1.0>
  func.func @loss(%ids: tensor<2x3xi32>, %t: tensor<2x3xi32>) -> tensor<f64> {
    %x = dsc.get_parameter @x : tensor<2x3x8xf64>
    %g = dsc.get_parameter @g : tensor<8xf64>
    %y = dsc.rms_norm %x, %g {epsilon = 1.0e-2 : f64, epsilon_outside_sqrt} : tensor<2x3x8xf64>, tensor<8xf64>
    %l = dsc.cross_entropy %y, %t : tensor<2x3x8xf64>, tensor<2x3xi32> -> tensor<f64>
    return %l : tensor<f64>
  }
}
