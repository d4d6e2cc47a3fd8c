//===- ExpertParallel.cpp - --dsc-expert-parallel ---------------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Expert parallelism over the mesh's `ep` axis, DeepSpeed's E+D grouping:
// the ep ranks of an ep group (consecutive ranks of the data-parallel
// group) each hold E/ep experts of every MoE layer and route their own
// tokens. The pass runs before autodiff and rewrites each MoE layer's
// expert region, from the dispatch to the combine:
//
//   %xe = dsc.moe_dispatch %x, %slots          [E, C, h]
//   ... experts on [E, C, *] with weights [E, *, *] ...
//   %y = dsc.moe_combine %ye, %slots gates %g
//
// into one rank's program: the dispatched slots go to the ranks holding
// their experts (an all-to-all, split 0, concat 1: each rank then has its
// E/ep experts' slots from all ep ranks, [E/ep, ep*C, h]), the experts run
// on those with the rank's E/ep rows of each expert weight, and the results
// go back (split 1, concat 0) before the combine. Expert weights keep their
// names and get a #dsc.layout splitting dim 0 over ep, so every rank starts
// from the one-rank run's values and checkpoints hold whole tensors.
//
// The gradient: an expert's weight gradient on a rank sums the
// contributions of the ep ranks whose tokens it saw, while a dense
// weight's holds its own rank's; the data-parallel average over the
// expert-data-parallel group (dp/ep ranks) must give both the mean over dp.
// The combine's all-to-all carries grad_scale 1/ep into the experts (so
// their weight gradients are a 1/ep of the sum), and the dispatch's carries
// ep back out (so every token's gradient is as it was): the scaling lives
// in the IR, with no extra pass over the gradients.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscOps.h"
#include "dsc/Transforms/ForwardPart.h"
#include "dsc/Transforms/Passes.h"
#include "dsc/Transforms/PlanOptions.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCEXPERTPARALLELPASS
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

/// `type` with dim 0 divided and dim 1 multiplied by `ep`: a value of the
/// expert region on one rank.
RankedTensorType localSlots(RankedTensorType type, int64_t ep) {
  SmallVector<int64_t> shape(type.getShape());
  shape[0] /= ep;
  shape[1] *= ep;
  return RankedTensorType::get(shape, type.getElementType());
}

struct DscExpertParallelPass
    : PlanReadingPass<
          DscExpertParallelPass,
          mlir::dsc::impl::DscExpertParallelPassBase<DscExpertParallelPass>> {
  using PlanReadingPass::PlanReadingPass;

  int64_t ep{};

  void runOnOperation() override {
    ModuleOp module = getOperation();
    ep = readPlan(module).ep;
    if (ep == 1)
      return;
    FailureOr<func::FuncOp> found =
        forwardLossFunction(module, funcName, "--dsc-expert-parallel",
                            "splits the forward graph's experts");
    if (failed(found))
      return signalPassFailure();
    func::FuncOp loss = *found;
    auto meshes = module.getOps<MeshOp>();
    MeshOp mesh = meshes.empty() ? MeshOp() : *meshes.begin();
    std::optional<unsigned> axis = mesh ? mesh.getAxisIndex("ep") : std::nullopt;
    if (!axis || mesh.getShape()[*axis] != ep) {
      module.emitError("--dsc-expert-parallel: ep=")
          << ep << " needs a mesh with an 'ep' axis of size " << ep
          << " (--dsc-declare-mesh declares it)";
      return signalPassFailure();
    }
    meshRef = FlatSymbolRefAttr::get(mesh.getSymNameAttr());
    SmallVector<MoeDispatchOp> dispatches;
    loss.walk([&](MoeDispatchOp d) { dispatches.push_back(d); });
    if (dispatches.empty()) {
      module.emitError("--dsc-expert-parallel: ep=")
          << ep << " splits the experts of MoE layers, but @"
          << funcName.getValue() << " has none";
      return signalPassFailure();
    }
    for (MoeDispatchOp dispatch : dispatches)
      if (failed(splitExperts(dispatch)))
        return signalPassFailure();
    if (failed(splitParameters(module)))
      return signalPassFailure();
  }

private:
  FlatSymbolRefAttr meshRef;
  /// Expert weights, in the order first read.
  llvm::SetVector<StringRef> expertWeights;

  AllToAllOp exchange(OpBuilder &b, Location loc, Value input,
                      RankedTensorType type, int64_t split, int64_t concat,
                      double gradScale) {
    return AllToAllOp::create(
        b, loc, type, input, meshRef, b.getStrArrayAttr({"ep"}),
        b.getI64IntegerAttr(split), b.getI64IntegerAttr(concat),
        /*scale=*/FloatAttr(), b.getF64FloatAttr(gradScale));
  }

  /// One MoE layer: the all-to-alls around its expert region, the region
  /// retyped to the rank's experts.
  LogicalResult splitExperts(MoeDispatchOp dispatch) {
    auto slots = cast<RankedTensorType>(dispatch.getResult().getType());
    const int64_t experts = slots.getDimSize(0);
    if (experts % ep != 0)
      return dispatch.emitOpError("--dsc-expert-parallel: ")
             << experts << " experts are not divisible by ep=" << ep;
    OpBuilder b(dispatch->getContext());
    b.setInsertionPointAfter(dispatch);
    AllToAllOp in = exchange(b, dispatch.getLoc(), dispatch.getResult(),
                             localSlots(slots, ep), 0, 1, double(ep));
    dispatch.getResult().replaceAllUsesExcept(in.getResult(), in);

    // The region: every op reached from the exchange up to the combine,
    // in program order (the walk below retypes each once).
    SmallVector<Value> work{in.getResult()};
    llvm::SetVector<Operation *> region;
    SmallVector<MoeCombineOp> combines;
    while (!work.empty()) {
      Value v = work.pop_back_val();
      for (Operation *user : v.getUsers()) {
        if (auto combine = dyn_cast<MoeCombineOp>(user)) {
          if (combine.getInput() != v)
            return combine.emitOpError("--dsc-expert-parallel: an expert "
                                       "value reaches the combine other than "
                                       "as its input");
          if (!llvm::is_contained(combines, combine))
            combines.push_back(combine);
          continue;
        }
        if (!isa<MatmulOp, GeluOp, SwigluOp>(user))
          return user->emitOpError("--dsc-expert-parallel: only batched "
                                   "products, GELU and SwiGLU may run "
                                   "between an MoE dispatch and its combine");
        if (auto matmul = dyn_cast<MatmulOp>(user)) {
          auto weight = matmul.getRhs().getDefiningOp<GetParameterOp>();
          if (matmul.getLhs() != v || !weight ||
              matmul.getTransposeLhs() || matmul.getTransposeRhs() ||
              cast<RankedTensorType>(weight.getType()).getRank() != 3 ||
              cast<RankedTensorType>(weight.getType()).getDimSize(0) !=
                  experts)
            return matmul.emitOpError(
                       "--dsc-expert-parallel: an expert product must be "
                       "the slots times a weight of ")
                   << experts << " experts ([E, in, out]) read with "
                                 "dsc.get_parameter";
          expertWeights.insert(weight.getName());
        }
        if (region.insert(user))
          for (Value r : user->getResults())
            work.push_back(r);
      }
    }
    if (combines.size() != 1)
      return dispatch.emitOpError("--dsc-expert-parallel: the dispatch's "
                                  "experts reach ")
             << combines.size() << " combines; expected one";
    for (Operation *op : region)
      for (Value r : op->getResults())
        r.setType(localSlots(cast<RankedTensorType>(r.getType()), ep));

    MoeCombineOp combine = combines.front();
    Value local = combine.getInput();
    b.setInsertionPoint(combine);
    AllToAllOp out = exchange(
        b, combine.getLoc(), local,
        RankedTensorType::get(slots.getShape().drop_back().vec(),
                              cast<RankedTensorType>(local.getType())
                                  .getElementType()),
        1, 0, 1.0 / double(ep));
    // The result's last dim is the experts' output width.
    SmallVector<int64_t> whole(slots.getShape().drop_back());
    whole.push_back(cast<RankedTensorType>(local.getType()).getShape().back());
    out.getResult().setType(RankedTensorType::get(
        whole, cast<RankedTensorType>(local.getType()).getElementType()));
    combine.getInputMutable().assign(out.getResult());
    return success();
  }

  /// Each expert weight keeps its rank's E/ep experts, with a layout that
  /// splits dim 0 of the whole over ep.
  LogicalResult splitParameters(ModuleOp module) {
    MLIRContext *context = module.getContext();
    Builder b(context);
    for (StringRef name : expertWeights) {
      auto param = module.lookupSymbol<ParameterOp>(name);
      if (!param)
        return module.emitError("--dsc-expert-parallel: no dsc.parameter @")
               << name;
      if (param.getLayoutAttr())
        return param.emitOpError("--dsc-expert-parallel: expert weight '")
               << name << "' is split already";
      RankedTensorType whole = param.getTensorType();
      SmallVector<Attribute> perDim(whole.getRank(), b.getStrArrayAttr({}));
      perDim[0] = b.getStrArrayAttr({"ep"});
      auto layout =
          ShardLayoutAttr::get(context, whole.getShape(),
                               b.getArrayAttr(perDim), nullptr, ArrayRef<int64_t>());
      SmallVector<int64_t> local(whole.getShape());
      local[0] /= ep;
      auto type = RankedTensorType::get(local, whole.getElementType());
      param.setType(type);
      param.setLayoutAttr(layout);
      ++numSplitExperts;
      module.walk([&](GetParameterOp read) {
        if (read.getName() == name)
          read.getResult().setType(type);
      });
    }
    return success();
  }
};

} // namespace
