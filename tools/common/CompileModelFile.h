//===- CompileModelFile.h - a model graph file to a plan --------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// What the tools that compile in process share (CompileForCheck.h,
// CompileInference.h): the dialects, a model graph read from a file with
// diagnostics to stderr, a pass pipeline the caller builds, and the
// lowering to a runtime plan.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_TOOLS_COMMON_COMPILEMODELFILE_H
#define DSC_TOOLS_COMMON_COMPILEMODELFILE_H

#include "dsc/Conversion/DscToPlan.h"
#include "dsc/Dialect/Dsc/IR/DscDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/SourceMgr.h"

#include <optional>
#include <string>

namespace dsc::tools {

/// The plan of the model graph in `path`: `build` may edit the module and
/// adds the passes (false after printing why stops), which run before the
/// lowering. nullopt after printing why.
inline std::optional<::dsc::rt::Plan> compileModelFile(
    const std::string &path,
    llvm::function_ref<bool(mlir::ModuleOp, mlir::PassManager &)> build) {
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
  if (!build(*module, pm) || mlir::failed(pm.run(*module)))
    return std::nullopt;
  mlir::FailureOr<::dsc::rt::Plan> lowered = mlir::dsc::lowerToPlan(*module);
  if (mlir::failed(lowered))
    return std::nullopt;
  return std::move(*lowered);
}

} // namespace dsc::tools

#endif // DSC_TOOLS_COMMON_COMPILEMODELFILE_H
