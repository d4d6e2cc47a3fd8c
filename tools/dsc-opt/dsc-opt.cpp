//===- dsc-opt.cpp - the dsc optimizer driver -------------------*- C++ -*-===//
//
// mlir-opt for dsc: parses, verifies and transforms dsc modules with the dsc
// passes and the upstream dialects a training graph uses.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscDialect.h"
#include "dsc/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::dsc::registerDscPasses();
  mlir::dsc::registerDscPipelines();

  mlir::DialectRegistry registry;
  registry.insert<mlir::dsc::DscDialect, mlir::arith::ArithDialect,
                  mlir::func::FuncDialect, mlir::tensor::TensorDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "dsc optimizer driver\n", registry));
}
