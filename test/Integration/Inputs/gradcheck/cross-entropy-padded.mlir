// A padded vocabulary: 6 of the logits' 8 columns are classes (the data's
// vocabulary, tokenizer_vocab_size, is what the check draws targets from).
// The two padding columns take no probability: their head rows get exactly
// zero gradient, which finite differences confirm.
module attributes {dsc.model = {vocab_size = 8 : i64, tokenizer_vocab_size = 6 : i64}} {
  dsc.parameter @wte : tensor<8x4xf64> init = #dsc.init<normal, std = 1.0>
  dsc.parameter @head : tensor<8x4xf64> init = #dsc.init<normal, std = 1.0>
  func.func @loss(%ids: tensor<2x3xi32>, %t: tensor<2x3xi32>) -> tensor<f64> {
    %w = dsc.get_parameter @wte : tensor<8x4xf64>
    %h = dsc.get_parameter @head : tensor<8x4xf64>
    %e = dsc.embedding %w, %ids : tensor<8x4xf64>, tensor<2x3xi32> -> tensor<2x3x4xf64>
    %logits = dsc.matmul %e, %h {transpose_rhs} : tensor<2x3x4xf64>, tensor<8x4xf64> -> tensor<2x3x8xf64>
    %l = dsc.cross_entropy %logits, %t {classes = 6 : i64} : tensor<2x3x8xf64>, tensor<2x3xi32> -> tensor<f64>
    return %l : tensor<f64>
  }
}
