//===- dsc-translate.cpp - dsc front-ends -----------------------*- C++ -*-===//
//
// mlir-translate for dsc: imports model configs (GPT-NeoX) as dsc graphs.
// `--checkpoint-info DIR` (a checkpoint directory or one of its steps) is
// not a translation: it prints the manifest as a table and exits; nor is
// `--export-hf CKPT --hf-config config.json -o DIR`, which writes a
// checkpoint's parameters as a Hugging Face directory.
//
//===----------------------------------------------------------------------===//

#include "dsc/Conversion/DscToPlan.h"
#include "dsc/Runtime/Checkpoint.h"
#include "dsc/Target/GPTGraphBuilder.h"
#include "dsc/Target/HFModel.h"

#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>
#include <string>

static llvm::cl::extrahelp checkpointInfoHelp(
    "\n  --checkpoint-info DIR   print a checkpoint's manifest (DIR's latest "
    "step,\n                          or a step directory) as a table\n"
    "  --export-hf CKPT --hf-config DIR/config.json -o OUT\n"
    "                          write a checkpoint's parameters as a Hugging "
    "Face\n                          directory (model.safetensors, "
    "config.json)\n");

int main(int argc, char **argv) {
  if (argc == 3 && std::strcmp(argv[1], "--checkpoint-info") == 0) {
    std::string table, error;
    if (!dsc::rt::describeCheckpoint(argv[2], table, error)) {
      llvm::errs() << "dsc-translate: error: " << error << "\n";
      return 1;
    }
    llvm::outs() << table;
    return 0;
  }
  // dsc-translate --export-hf CKPT --hf-config CONFIG -o DIR.
  if (argc == 7 && std::strcmp(argv[1], "--export-hf") == 0 &&
      std::strcmp(argv[3], "--hf-config") == 0 &&
      std::strcmp(argv[5], "-o") == 0) {
    std::string error;
    if (!mlir::dsc::exportHF(argv[2], argv[4], argv[6], error)) {
      llvm::errs() << "dsc-translate: error: " << error << "\n";
      return 1;
    }
    return 0;
  }
  if (argc > 1 && std::strcmp(argv[1], "--export-hf") == 0) {
    llvm::errs() << "dsc-translate: error: usage: dsc-translate --export-hf "
                    "CHECKPOINT --hf-config DIR/config.json -o OUT_DIR\n";
    return 1;
  }
  mlir::dsc::registerImportNeoXTranslation();
  mlir::dsc::registerImportHFTranslation();
  mlir::dsc::registerToPlanTranslation();
  return mlir::failed(
      mlir::mlirTranslateMain(argc, argv, "dsc translation driver\n"));
}
