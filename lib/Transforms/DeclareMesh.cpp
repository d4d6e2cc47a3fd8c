//===- DeclareMesh.cpp - --dsc-declare-mesh ---------------------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscOps.h"
#include "dsc/Transforms/Passes.h"
#include "dsc/Transforms/PlanOptions.h"

#include "mlir/IR/Builders.h"

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCDECLAREMESHPASS
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

struct DscDeclareMeshPass
    : PlanReadingPass<
          DscDeclareMeshPass,
          mlir::dsc::impl::DscDeclareMeshPassBase<DscDeclareMeshPass>> {
  using PlanReadingPass::PlanReadingPass;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    const ::dsc::ParallelPlan plan = readPlan(module);
    const int64_t dp = plan.dp, pp = plan.pp, tp = plan.tp, ep = plan.ep;
    if (dp % ep != 0) {
      module.emitError("--dsc-declare-mesh: ep=")
          << ep << " does not divide dp=" << dp
          << " (expert parallelism splits the data-parallel group)";
      return signalPassFailure();
    }
    Builder b(module.getContext());
    SmallVector<StringRef> names;
    SmallVector<int64_t> sizes;
    // With expert parallelism dp is two axes, ep innermost: DeepSpeed's E+D
    // grouping, where ep consecutive data-parallel ranks exchange their
    // tokens and the ranks at one ep index (axis edp) share their experts.
    // ep > 1 keeps the axis even when edp is 1, so that the data-parallel
    // axes are ["edp", "ep"] whenever experts are split.
    const bool experts = ep > 1;
    for (auto [name, size] :
         {std::pair<StringRef, int64_t>{experts ? "edp" : "dp", dp / ep},
          {"ep", experts ? ep : 1},
          {"pp", pp},
          {"tp", tp}}) {
      // Each is >= 1 (the plan's parser refuses less).
      if (size > 1 || (experts && name == "edp")) {
        names.push_back(name);
        sizes.push_back(size);
      }
    }
    auto meshes = module.getOps<MeshOp>();
    if (!meshes.empty()) {
      MeshOp mesh = *meshes.begin();
      if (mesh.getAxes() != b.getStrArrayAttr(names) ||
          mesh.getShape() != ArrayRef<int64_t>(sizes)) {
        mesh.emitError("--dsc-declare-mesh: the module's mesh differs from "
                       "dp=")
            << dp << (ep > 1 ? " ep=" + std::to_string(ep) : "")
            << " pp=" << pp << " tp=" << tp;
        return signalPassFailure();
      }
      return;
    }
    if (names.empty())
      return; // One rank: no mesh.
    OpBuilder builder(module.getContext());
    builder.setInsertionPointToStart(module.getBody());
    MeshOp::create(builder, module.getLoc(), "mesh",
                   builder.getStrArrayAttr(names),
                   builder.getDenseI64ArrayAttr(sizes));
  }
};

} // namespace
