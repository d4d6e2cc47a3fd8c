//===- CompileForCheck.h - a loss graph file to a one-rank plan -*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// What the checking tools (dsc-gradcheck, dsc-hf-check) share: a loss graph
// read from a file and compiled with the real pipeline (--dsc-compile;
// CompileModelFile.h) into
// a plan with plain SGD, so that a training program leaves every
// parameter's gradient in `grad.<name>` and there is no optimizer state. The
// plan has one rank unless `compileOptions` (--dsc-compile's, e.g. "tp=2")
// says otherwise. Diagnostics go to stderr.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_TOOLS_COMMON_COMPILEFORCHECK_H
#define DSC_TOOLS_COMMON_COMPILEFORCHECK_H

#include "CompileModelFile.h"
#include "dsc/Dialect/Dsc/IR/DscOps.h"
#include "dsc/Transforms/Passes.h"

#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <optional>
#include <string>

namespace dsc::tools {

/// Makes each dsc.auxiliary_loss an explicit sum, so that the value the
/// programs return is what the backward differentiates (the loss plus the
/// MoE layers' auxiliary losses), which finite differences of the forward
/// program can then check.
inline void sumAuxiliaryLosses(mlir::ModuleOp module) {
  module.walk([](mlir::dsc::AuxiliaryLossOp aux) {
    mlir::OpBuilder b(aux);
    mlir::Value total = aux.getLoss();
    for (mlir::Value term : aux.getAux())
      total = mlir::dsc::AddOp::create(b, aux.getLoc(), total, term);
    aux.getResult().replaceAllUsesWith(total);
    aux.erase();
  });
}

/// The plan of the loss graph in `path`, or nullopt after printing why.
/// With `withAuxiliaryLosses` the returned loss includes the auxiliary
/// losses (sumAuxiliaryLosses).
inline std::optional<::dsc::rt::Plan>
compileForCheck(const std::string &path,
                const std::string &compileOptions = "",
                bool withAuxiliaryLosses = false) {
  return compileModelFile(path, [&](mlir::ModuleOp module,
                                    mlir::PassManager &pm) {
    std::string optionsError;
    std::unique_ptr<mlir::dsc::CompileOptions> options =
        mlir::dsc::CompileOptions::parse(compileOptions, optionsError);
    if (!options) {
      llvm::errs() << "error: bad compile options '" << compileOptions
                   << "' (see dsc-opt --help, --dsc-compile): " << optionsError
                   << "\n";
      return false;
    }
    if (options->optimizer.hasValue() && options->optimizer != "sgd") {
      llvm::errs() << "error: the checks compile with optimizer=sgd "
                      "(gradients only), not '"
                   << options->optimizer.getValue() << "'\n";
      return false;
    }
    options->optimizer = "sgd";
    if (withAuxiliaryLosses)
      sumAuxiliaryLosses(module);
    mlir::dsc::buildCompilePipeline(pm, *options);
    return true;
  });
}

} // namespace dsc::tools

#endif // DSC_TOOLS_COMMON_COMPILEFORCHECK_H
