//===- PrintModelStats.cpp - --dsc-print-model-stats ------------*- C++ -*-===//
//
// Reports a model graph's parameter count (and, with MoE layers, the
// parameters a token uses) and forward FLOPs, per layer and in total, from
// the dsc.parameter declarations and the cost interface.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscOps.h"
#include "dsc/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCPRINTMODELSTATSPASS
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

struct LayerStats {
  int64_t parameters = 0;
  OpCost forward;
};

/// Layers in order of first appearance.
using LayerMap =
    llvm::MapVector<std::string, LayerStats, std::map<std::string, unsigned>>;

/// Maps a dotted name to its layer: `h.3.attn.qkv.weight` -> `h.3`,
/// `ln_f.weight` -> `ln_f`.
std::string layerOfName(StringRef name) {
  auto [head, rest] = name.split('.');
  if (head == "h") {
    StringRef index = rest.split('.').first;
    unsigned value;
    if (!index.getAsInteger(10, value))
      return ("h." + index).str();
  }
  return head.str();
}

/// The name an op carries in its location, looking through fused and
/// call-site locations; empty when it has none.
StringRef nameOfLocation(Location loc) {
  if (auto named = dyn_cast<NameLoc>(loc))
    return named.getName().getValue();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations())
      if (StringRef name = nameOfLocation(inner); !name.empty())
        return name;
  if (auto callSite = dyn_cast<CallSiteLoc>(loc))
    return nameOfLocation(callSite.getCallee());
  return {};
}

std::string withCommas(int64_t value) {
  std::string digits = std::to_string(value), out;
  int count = 0;
  for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
    if (count && count % 3 == 0 && *it != '-')
      out.push_back(',');
    out.push_back(*it);
    ++count;
  }
  return std::string(out.rbegin(), out.rend());
}

/// The MoE router whose dispatched rows `rows` are (through the experts'
/// batched products and activations), or null.
MoeRouteOp routeOfExpertRows(Value rows) {
  while (Operation *def = rows.getDefiningOp()) {
    if (auto dispatch = dyn_cast<MoeDispatchOp>(def))
      return dispatch.getSlots().getDefiningOp<MoeRouteOp>();
    if (!isa<MatmulOp, GeluOp, SwigluOp, CastOp, DropoutOp>(def))
      return nullptr;
    rows = def->getOperand(0);
  }
  return nullptr;
}

/// Parameters a token does not use: of each expert weight ([E, ...], read
/// by a batched product of an MoE layer's dispatched rows), the E - k
/// experts a token is not routed to.
int64_t inactiveParameters(ModuleOp module) {
  llvm::DenseMap<StringAttr, double> idleShare;
  module.walk([&](MatmulOp product) {
    auto weight = product.getRhs().getDefiningOp<GetParameterOp>();
    MoeRouteOp route = routeOfExpertRows(product.getLhs());
    if (!weight || !route ||
        cast<RankedTensorType>(weight.getType()).getRank() != 3)
      return;
    const double experts =
        double(cast<RankedTensorType>(route.getGates().getType()).getDimSize(0));
    idleShare[weight.getNameAttr().getAttr()] =
        1.0 - double(route.getTopK()) / experts;
  });
  double idle = 0;
  for (auto param : module.getOps<ParameterOp>())
    if (auto it = idleShare.find(param.getSymNameAttr()); it != idleShare.end())
      idle += it->second * double(param.getNumElements());
  return int64_t(idle + 0.5);
}

struct DscPrintModelStatsPass
    : mlir::dsc::impl::DscPrintModelStatsPassBase<DscPrintModelStatsPass> {
  using Base::Base;

  void runOnOperation() override {
    if (format != "text" && format != "json") {
      getOperation().emitError("--dsc-print-model-stats: unknown format '")
          << format << "'; expected 'text' or 'json'";
      return signalPassFailure();
    }
    ModuleOp module = getOperation();
    LayerMap layers;
    llvm::MapVector<StringRef, int64_t> opCounts;
    int64_t parameters = 0;
    OpCost total;

    for (auto param : module.getOps<ParameterOp>()) {
      parameters += param.getNumElements();
      layers[layerOfName(param.getSymName())].parameters +=
          param.getNumElements();
    }

    // An op belongs to the layer its name location names; without one (IR
    // printed without debug info), to the latest layer among its inputs, so
    // that a residual add joins the block that produced its update.
    llvm::DenseMap<Value, unsigned> layerOfValue;
    auto indexOfLayer = [&](StringRef name) -> unsigned {
      return layers.insert({name.str(), LayerStats()}).first - layers.begin();
    };
    module.walk([&](Operation *op) {
      if (op->getDialect() && op->getDialect()->getNamespace() == "dsc")
        ++opCounts[op->getName().getStringRef()];
      std::optional<unsigned> layer;
      if (StringRef name = nameOfLocation(op->getLoc()); !name.empty())
        layer = indexOfLayer(layerOfName(name));
      else if (auto read = dyn_cast<GetParameterOp>(op))
        layer = indexOfLayer(layerOfName(read.getName()));
      else
        for (Value operand : op->getOperands())
          if (auto it = layerOfValue.find(operand); it != layerOfValue.end())
            layer = layer ? std::max(*layer, it->second) : it->second;
      if (layer)
        for (Value result : op->getResults())
          layerOfValue[result] = *layer;

      auto costed = dyn_cast<CostOpInterface>(op);
      if (!costed)
        return;
      OpCost cost = costed.getCost();
      total += cost;
      unsigned index = layer ? *layer : indexOfLayer("(unattributed)");
      (layers.begin() + index)->second.forward += cost;
    });

    const int64_t active = parameters - inactiveParameters(module);
    if (format == "json")
      printJson(parameters, active, total, layers, opCounts);
    else
      printText(parameters, active, total, layers, opCounts);
    markAllAnalysesPreserved();
  }

  void printJson(int64_t parameters, int64_t active, const OpCost &total,
                 const LayerMap &layers,
                 const llvm::MapVector<StringRef, int64_t> &opCounts) {
    llvm::json::OStream json(llvm::outs(), /*IndentSize=*/2);
    json.object([&] {
      json.attribute("parameters", parameters);
      json.attribute("active_parameters", active);
      json.attribute("forward_flops", total.matmulFlops);
      json.attribute("forward_vector_flops", total.vectorFlops);
      json.attribute("forward_bytes", total.bytesRead + total.bytesWritten);
      json.attributeArray("layers", [&] {
        for (const auto &[name, stats] : layers)
          json.object([&] {
            json.attribute("name", name);
            json.attribute("parameters", stats.parameters);
            json.attribute("forward_flops", stats.forward.matmulFlops);
            json.attribute("forward_vector_flops", stats.forward.vectorFlops);
          });
      });
      json.attributeObject("ops", [&] {
        for (const auto &[name, count] : opCounts)
          json.attribute(name, count);
      });
    });
    llvm::outs() << "\n";
  }

  void printText(int64_t parameters, int64_t active, const OpCost &total,
                 const LayerMap &layers,
                 const llvm::MapVector<StringRef, int64_t> &opCounts) {
    llvm::raw_ostream &os = llvm::outs();
    os << "=== dsc model stats ===\n";
    os << llvm::formatv("parameters:                  {0} ({1:F3} B)\n",
                        withCommas(parameters), parameters / 1e9);
    if (active != parameters)
      os << llvm::formatv("active parameters / token:   {0} ({1:F3} B; the "
                          "MoE layers' top-k of their experts)\n",
                          withCommas(active), active / 1e9);
    os << llvm::formatv("forward FLOPs / micro-batch: {0} ({1:F3} TFLOP)\n",
                        withCommas(total.matmulFlops),
                        total.matmulFlops / 1e12);
    os << llvm::formatv("forward vector FLOPs:        {0}\n",
                        withCommas(total.vectorFlops));
    os << llvm::formatv("\n{0,-12} {1,18} {2,24}\n", "layer", "parameters",
                        "forward FLOPs");
    for (const auto &[name, stats] : layers)
      os << llvm::formatv("{0,-12} {1,18} {2,24}\n", name,
                          withCommas(stats.parameters),
                          withCommas(stats.forward.matmulFlops));
    os << "\nops:";
    for (const auto &[name, count] : opCounts)
      os << " " << name << "=" << count;
    os << "\n";
  }
};

} // namespace
