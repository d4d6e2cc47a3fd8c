//===- Passes.td - dsc transformation and analysis passes --*- tablegen -*-===//
//
// The passes of dsc-opt. Flags are `--dsc-<verb>-<noun>`.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_TRANSFORMS_PASSES_TD
#define DSC_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def DscPrintModelStatsPass
    : Pass<"dsc-print-model-stats", "::mlir::ModuleOp"> {
  let summary = "Prints parameter counts and forward FLOPs of a model graph";
  let description = [{
    Sums the parameters declared with `dsc.parameter` and the cost of every op
    implementing `DscCostOpInterface`, per layer and in total, and prints them
    on stdout. Forward FLOPs are the dense (matmul-class) FLOPs of one
    micro-batch, Megatron-LM's model-FLOPs accounting: for a GPT they equal
    24·b·s·l·h²·(1 + s/(6h)) + 2·b·s·h·V. Elementwise work is reported
    separately as `forward_vector_flops`.

    Layers are found from the ops' name locations (`loc("h.3.mlp.fc")`) and
    the parameters' dotted names: everything under `h.<i>.` is layer `h.<i>`,
    anything else is grouped by its first name component (`wte`, `ln_f`).

    ```
    dsc-opt --dsc-print-model-stats="format=json" gpt.mlir
    ```
  }];
  let options = [
    Option<"format", "format", "std::string", /*default=*/"\"text\"",
           "Output format: 'text' (a table) or 'json' (one object)">,
  ];
}

#endif // DSC_TRANSFORMS_PASSES_TD
