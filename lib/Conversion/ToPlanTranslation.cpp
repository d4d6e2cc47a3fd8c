//===- ToPlanTranslation.cpp - dsc-translate --dsc-to-plan ------*- C++ -*-===//
//
// Writes the binary plan file dsc-run executes, from a memory-planned module.
// The module's ranks are proved to agree (--dsc-verify-collectives) and the
// plan is validated with the runtime's own checks before it is written, so
// an edited module or a compiler bug is caught here rather than at launch.
//
//===----------------------------------------------------------------------===//

#include "dsc/Conversion/DscToPlan.h"
#include "dsc/Dialect/Dsc/IR/DscDialect.h"
#include "dsc/Runtime/Error.h"
#include "dsc/Runtime/PlanIO.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Tools/mlir-translate/Translation.h"

using namespace mlir;
using namespace mlir::dsc;

void mlir::dsc::registerToPlanTranslation() {
  TranslateFromMLIRRegistration registration(
      "dsc-to-plan",
      "write the binary runtime plan of a compiled (--dsc-compile) module",
      [](Operation *op, raw_ostream &output) -> LogicalResult {
        auto module = dyn_cast<ModuleOp>(op);
        if (!module)
          return op->emitError("expected a module");
        // Not on the module: the diagnostic would print all of it.
        if (failed(verifyCompiledModule(module)))
          return emitError(UnknownLoc::get(module.getContext()))
                 << "--dsc-to-plan: the module's ranks do not agree on their "
                    "communication (the --dsc-verify-collectives error "
                    "above); no plan was written";
        FailureOr<rt::Plan> plan = lowerToPlan(module);
        if (failed(plan))
          return failure();
        std::vector<uint8_t> bytes;
        try {
          rt::validatePlan(*plan);
          bytes = rt::writePlan(*plan);
        } catch (const rt::Error &error) {
          return module.emitError("the lowered plan is invalid: ")
                 << error.what();
        }
        output.write(reinterpret_cast<const char *>(bytes.data()),
                     bytes.size());
        return success();
      },
      [](DialectRegistry &registry) {
        registry.insert<DscDialect, arith::ArithDialect, func::FuncDialect>();
      });
}
