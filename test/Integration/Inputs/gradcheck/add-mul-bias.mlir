module attributes {dsc.model = {vocab_size = 8 : i64}} {
  dsc.parameter @a : tensor<2x3x8xf64> init = #dsc.init<normal, std = 1.0>
  dsc.parameter @b : tensor<2x3x8xf64> init = #dsc.init<normal, std = 1.0>
  dsc.parameter @c : tensor<8xf64> init = #dsc.init<normal, std = 1.0>
  func.func @loss(%ids: tensor<2x3xi32>, %t: tensor<2x3xi32>) -> tensor<f64> {
    %a = dsc.get_parameter @a : tensor<2x3x8xf64>
    %b = dsc.get_parameter @b : tensor<2x3x8xf64>
    %c = dsc.get_parameter @c : tensor<8xf64>
    %s = dsc.add %a, %b : tensor<2x3x8xf64>
    %m = dsc.mul %s, %a : tensor<2x3x8xf64>
    %y = dsc.bias_add %m, %c : tensor<2x3x8xf64>, tensor<8xf64>
    %l = dsc.cross_entropy %y, %t : tensor<2x3x8xf64>, tensor<2x3xi32> -> tensor<f64>
    return %l : tensor<f64>
  }
}
