module attributes {dsc.model = {vocab_size = 8 : i64}} {
  dsc.parameter @x : tensor<2x3x12xf64> init = #dsc.init<normal, std = 1.0>
  dsc.parameter @z : tensor<2x3x4xf64> init = #dsc.init<normal, std = 1.0>
  func.func @loss(%ids: tensor<2x3xi32>, %t: tensor<2x3xi32>) -> tensor<f64> {
    %x = dsc.get_parameter @x : tensor<2x3x12xf64>
    %z = dsc.get_parameter @z : tensor<2x3x4xf64>
    %a = dsc.slice %x [0, 0, 0] [2, 3, 4] : tensor<2x3x12xf64> -> tensor<2x3x4xf64>
    %b = dsc.slice %x [0, 0, 8] [2, 3, 4] : tensor<2x3x12xf64> -> tensor<2x3x4xf64>
    %y = dsc.concat %b, %z {dim = 2 : i64} : tensor<2x3x4xf64>, tensor<2x3x4xf64> -> tensor<2x3x8xf64>
    %u = dsc.gelu %a : tensor<2x3x4xf64>
    %l = dsc.cross_entropy %y, %t : tensor<2x3x8xf64>, tensor<2x3xi32> -> tensor<f64>
    return %l : tensor<f64>
  }
}
