//===- VerifyCompiledModule.cpp - prove before lowering ---------*- C++ -*-===//
//
// Every path from a compiled module into execution (dsc-translate
// --dsc-to-plan, dsc-run on a .mlir) runs --dsc-verify-collectives first.
//
//===----------------------------------------------------------------------===//
//
// --dsc-compile verifies the module it makes, but a compiled module is a
// text file a user may edit (swap two sends, drop a receive) before handing
// it on: the lowering proves it again with the same pass, so that a plan
// that would deadlock or mismatch is refused with the pass's message naming
// both ranks instead of hanging at run time.
//
//===----------------------------------------------------------------------===//

#include "dsc/Conversion/DscToPlan.h"
#include "dsc/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"

using namespace mlir;
using namespace mlir::dsc;

LogicalResult mlir::dsc::verifyCompiledModule(ModuleOp module) {
  PassManager pm(module.getContext(), module.getOperationName());
  pm.addPass(createDscVerifyCollectivesPass());
  return pm.run(module);
}
