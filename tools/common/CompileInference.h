//===- CompileInference.h - a model graph to an inference plan --*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// What dsc-generate and dsc-serve share: a model graph read from a file and
// compiled with --dsc-compile-inference's options into a plan, in process.
// Diagnostics go to stderr.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_TOOLS_COMMON_COMPILEINFERENCE_H
#define DSC_TOOLS_COMMON_COMPILEINFERENCE_H

#include "dsc/Conversion/DscToPlan.h"
#include "dsc/Dialect/Dsc/IR/DscDialect.h"
#include "dsc/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>

namespace dsc::tools {

/// The inference plan of the model graph in `path`, or nullopt after
/// printing why (prefixed with `tool`).
inline std::optional<::dsc::rt::Plan>
compileInference(const std::string &path, const std::string &options,
                 const char *tool) {
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
  std::string error;
  auto parsed = mlir::dsc::InferenceCompileOptions::parse(options, error);
  if (!parsed) {
    llvm::errs() << tool << ": error: " << error << "\n";
    return std::nullopt;
  }
  mlir::PassManager pm(&context);
  mlir::dsc::buildInferencePipeline(pm, *parsed);
  if (mlir::failed(pm.run(*module)))
    return std::nullopt;
  mlir::FailureOr<::dsc::rt::Plan> lowered = mlir::dsc::lowerToPlan(*module);
  if (mlir::failed(lowered))
    return std::nullopt;
  return std::move(*lowered);
}

} // namespace dsc::tools

#endif // DSC_TOOLS_COMMON_COMPILEINFERENCE_H
