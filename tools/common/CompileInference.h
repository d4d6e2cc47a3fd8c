//===- CompileInference.h - a model graph to an inference plan --*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// What dsc-generate and dsc-serve share: a model graph read from a file and
// compiled with --dsc-compile-inference's options into a plan, in process
// (CompileModelFile.h). Diagnostics go to stderr.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_TOOLS_COMMON_COMPILEINFERENCE_H
#define DSC_TOOLS_COMMON_COMPILEINFERENCE_H

#include "CompileModelFile.h"
#include "dsc/Transforms/Passes.h"

#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>

namespace dsc::tools {

/// The inference plan of the model graph in `path`, or nullopt after
/// printing why (prefixed with `tool`).
inline std::optional<::dsc::rt::Plan>
compileInference(const std::string &path, const std::string &options,
                 const char *tool) {
  return compileModelFile(path, [&](mlir::ModuleOp, mlir::PassManager &pm) {
    std::string error;
    auto parsed = mlir::dsc::InferenceCompileOptions::parse(options, error);
    if (!parsed) {
      llvm::errs() << tool << ": error: " << error << "\n";
      return false;
    }
    mlir::dsc::buildInferencePipeline(pm, *parsed);
    return true;
  });
}

} // namespace dsc::tools

#endif // DSC_TOOLS_COMMON_COMPILEINFERENCE_H
