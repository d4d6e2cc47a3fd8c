//===- CompileForCheck.h - a loss graph file to a one-rank plan -*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// What the checking tools (dsc-gradcheck, dsc-hf-check) share: a loss graph
// read from a file and compiled with the real pipeline (--dsc-compile) into
// a one-rank plan with plain SGD, so that a training program leaves every
// parameter's gradient in `grad.<name>` and there is no optimizer state.
// Diagnostics go to stderr.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_TOOLS_COMMON_COMPILEFORCHECK_H
#define DSC_TOOLS_COMMON_COMPILEFORCHECK_H

#include "dsc/Conversion/DscToPlan.h"
#include "dsc/Dialect/Dsc/IR/DscDialect.h"
#include "dsc/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/SourceMgr.h"

#include <optional>
#include <string>

namespace dsc::tools {

/// The plan of the loss graph in `path`, or nullopt after printing why.
inline std::optional<::dsc::rt::Plan> compileForCheck(const std::string &path) {
  mlir::DialectRegistry registry;
  registry.insert<mlir::dsc::DscDialect, mlir::arith::ArithDialect,
                  mlir::func::FuncDialect>();
  mlir::MLIRContext context(registry);
  llvm::SourceMgr sourceMgr;
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(path, sourceMgr, &context);
  if (!module)
    return std::nullopt;
  mlir::PassManager pm(&context);
  mlir::dsc::CompileOptions options;
  options.optimizer = "sgd";
  mlir::dsc::buildCompilePipeline(pm, options);
  if (mlir::failed(pm.run(*module)))
    return std::nullopt;
  mlir::FailureOr<::dsc::rt::Plan> lowered = mlir::dsc::lowerToPlan(*module);
  if (mlir::failed(lowered))
    return std::nullopt;
  return std::move(*lowered);
}

} // namespace dsc::tools

#endif // DSC_TOOLS_COMMON_COMPILEFORCHECK_H
