//===- ImportNeoX.cpp - dsc-translate --import-neox -------------*- C++ -*-===//
//
// The `--import-neox` translation: GPT-NeoX config file -> dsc graph module.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscDialect.h"
#include "dsc/Target/GPTGraphBuilder.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/Support/CommandLine.h"

using namespace mlir;
using namespace mlir::dsc;

static llvm::cl::opt<std::string> importElementType(
    "import-neox-element-type", llvm::cl::init("f32"),
    llvm::cl::desc("Float type of an imported model: f32, or f64 for "
                   "finite-difference checks"));

static llvm::cl::opt<int64_t> importVocabSize(
    "import-neox-vocab-size", llvm::cl::init(0),
    llvm::cl::desc("The tokenizer's vocabulary size, for a GPT-NeoX config "
                   "that names its tokenizer instead (padded as GPT-NeoX "
                   "pads it)"));

void mlir::dsc::registerImportNeoXTranslation() {
  TranslateToMLIRRegistration registration(
      "import-neox",
      "import a GPT-NeoX model config (YAML or JSON) as a dsc loss graph",
      [](llvm::SourceMgr &sourceMgr,
         MLIRContext *context) -> OwningOpRef<Operation *> {
        context->loadDialect<DscDialect, func::FuncDialect>();
        if (importVocabSize < 0) {
          emitError(UnknownLoc::get(context),
                    "--import-neox-vocab-size must be positive, got ")
              << importVocabSize.getValue();
          return nullptr;
        }
        NeoXImportOptions options;
        options.vocabSize = importVocabSize;
        std::optional<GPTConfig> config =
            parseNeoXConfig(sourceMgr, context, options);
        if (!config)
          return nullptr;
        if (importElementType != "f32" && importElementType != "f64") {
          emitError(UnknownLoc::get(context),
                    "--import-neox-element-type must be f32 or f64, got '")
              << importElementType << "'";
          return nullptr;
        }
        config->useF64 = importElementType == "f64";
        auto name = sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID())
                        ->getBufferIdentifier();
        OwningOpRef<ModuleOp> module =
            buildGPTGraph(*config, FileLineColLoc::get(context, name, 1, 1));
        if (failed(verify(*module)))
          return nullptr;
        return module;
      },
      [](DialectRegistry &registry) {
        registry.insert<DscDialect, func::FuncDialect>();
      });
}
