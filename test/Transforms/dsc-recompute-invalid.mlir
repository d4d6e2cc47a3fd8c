// RUN: dsc-opt %s --dsc-recompute -split-input-file -verify-diagnostics

// A forward_backward program needs its forward program, whose ops it
// begins with, to tell its forward part from its backward.
// expected-error @+1 {{--dsc-recompute: @forward_backward has no forward program to tell its forward ops by}}
func.func @forward_backward(%x: tensor<2x4xf32>) -> tensor<2x4xf32>
    attributes {dsc.program = #dsc.program_role<forward_backward>} {
  return %x : tensor<2x4xf32>
}

// -----

func.func @loss(%x: tensor<2x4xf32>) -> tensor<2x4xf32>
    attributes {dsc.program = #dsc.program_role<forward>} {
  %y = dsc.gelu %x : tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}
// expected-error @+1 {{--dsc-recompute: the ops of @forward_backward do not begin with those of @loss (op 0); the pass runs directly after --dsc-autodiff}}
func.func @forward_backward(%x: tensor<2x4xf32>) -> tensor<2x4xf32>
    attributes {dsc.program = #dsc.program_role<forward_backward>} {
  %y = dsc.add %x, %x : tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

