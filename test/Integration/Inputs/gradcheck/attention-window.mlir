module attributes {dsc.model = {vocab_size = 8 : i64}} {
  dsc.parameter @q : tensor<2x7x8xf64> init = #dsc.init<normal, std = 1.0>
  dsc.parameter @k : tensor<2x7x8xf64> init = #dsc.init<normal, std = 1.0>
  dsc.parameter @v : tensor<2x7x8xf64> init = #dsc.init<normal, std = 1.0>
  func.func @loss(%ids: tensor<2x7xi32>, %t: tensor<2x7xi32>) -> tensor<f64> {
    %q = dsc.get_parameter @q : tensor<2x7x8xf64>
    %k = dsc.get_parameter @k : tensor<2x7x8xf64>
    %v = dsc.get_parameter @v : tensor<2x7x8xf64>
    %y = dsc.attention %q, %k, %v {num_heads = 2 : i64, causal, window = 3 : i64} : tensor<2x7x8xf64>
    %l = dsc.cross_entropy %y, %t : tensor<2x7x8xf64>, tensor<2x7xi32> -> tensor<f64>
    return %l : tensor<f64>
  }
}
