//===- dsc-translate.cpp - dsc front-ends -----------------------*- C++ -*-===//
//
// mlir-translate for dsc: imports model configs (GPT-NeoX) as dsc graphs.
//
//===----------------------------------------------------------------------===//

#include "dsc/Conversion/DscToPlan.h"
#include "dsc/Target/GPTGraphBuilder.h"

#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"

int main(int argc, char **argv) {
  mlir::dsc::registerImportNeoXTranslation();
  mlir::dsc::registerToPlanTranslation();
  return mlir::failed(
      mlir::mlirTranslateMain(argc, argv, "dsc translation driver\n"));
}
