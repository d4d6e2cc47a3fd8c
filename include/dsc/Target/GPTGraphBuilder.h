//===- GPTGraphBuilder.h - emit a GPT loss graph ----------------*- C++ -*-===//
//
// Builds the dsc graph of a GPT decoder's loss on one micro-batch.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_TARGET_GPTGRAPHBUILDER_H
#define DSC_TARGET_GPTGRAPHBUILDER_H

#include "dsc/Target/GPTConfig.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace mlir::dsc {

/// Emits a module with one `dsc.parameter` per weight (GPT-2 names:
/// `wte.weight`, `h.<i>.attn.qkv.weight`, ...), a `dsc.model` attribute
/// describing the shape, and `func.func @loss(tokens, targets) -> tensor<f32>`
/// computing the mean next-token cross-entropy of one micro-batch. Ops carry
/// name locations (`h.<i>.mlp.fc`) that analyses use to group them by layer.
OwningOpRef<ModuleOp> buildGPTGraph(const GPTConfig &config, Location loc);

/// Registers `--import-neox` with mlir-translate's registry.
void registerImportNeoXTranslation();

} // namespace mlir::dsc

#endif // DSC_TARGET_GPTGRAPHBUILDER_H
