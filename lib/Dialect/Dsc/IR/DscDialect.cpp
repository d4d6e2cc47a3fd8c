//===- DscDialect.cpp - dsc dialect registration ----------------*- C++ -*-===//
//
// Registers the dsc ops and attributes with the context, and checks the
// `dsc.*` discardable attributes passes leave for each other (their names
// live in DscAttrNames.h).
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscDialect.h"
#include "dsc/Dialect/Dsc/IR/DscAttrNames.h"
#include "dsc/Dialect/Dsc/IR/DscOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::dsc;

#include "dsc/Dialect/Dsc/IR/DscDialect.cpp.inc"

void DscDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dsc/Dialect/Dsc/IR/DscOps.cpp.inc"
      >();
  registerAttributes();
}

//===----------------------------------------------------------------------===//
// Discardable attributes
//===----------------------------------------------------------------------===//

namespace {

/// Where a known attribute may sit.
enum class Holder {
  Function,
  Module,
  Declaration,
  ClipGradNorm,
  AnyOp,
  OpInFunction
};

struct KnownAttr {
  StringLiteral name;
  Holder holder;
};

constexpr KnownAttr kKnownAttrs[] = {
    {kProgramAttr, Holder::Function},
    {kStageAttr, Holder::Function},
    {kInputOffsetsAttr, Holder::Function},
    {kSavedActivationBytesAttr, Holder::Function},
    {kWeightStashAttr, Holder::Function},
    {kOffsetAttr, Holder::Declaration},
    {kPipelineRankAttr, Holder::Declaration},
    {kPipelineRanksAttr, Holder::Declaration},
    {kSlotBanksAttr, Holder::Function},
    {kOffsetsAttr, Holder::AnyOp},
    {kPipelineLocalAttr, Holder::ClipGradNorm},
    {kLayerAttr, Holder::OpInFunction},
    {kMicrobatchesAttr, Holder::Module},
    {kPipelineAttr, Holder::Module},
    {kModelAttr, Holder::Module},
    {kMemoryAttr, Holder::Module},
    {kProgramPeaksAttr, Holder::Module},
    {kPlanAttr, Holder::Module},
    {kPlanEstimateAttr, Holder::Module},
    {kInferenceAttr, Holder::Module},
    {kFromStepAttr, Holder::Function},
    {kZeroOneAdamAttr, Holder::Module},
};

StringRef holderName(Holder holder) {
  switch (holder) {
  case Holder::Function:
    return "a function";
  case Holder::Module:
    return "the module";
  case Holder::Declaration:
    return "a dsc.parameter, dsc.state or dsc.kv_cache";
  case Holder::ClipGradNorm:
    return "a dsc.clip_grad_norm";
  case Holder::AnyOp:
    return "an op";
  case Holder::OpInFunction:
    return "an op in a function";
  }
  llvm_unreachable("unknown holder");
}

bool holds(Holder holder, Operation *op) {
  switch (holder) {
  case Holder::Function:
    return isa<FunctionOpInterface>(op);
  case Holder::Module:
    return isa<ModuleOp>(op);
  case Holder::Declaration:
    return isa<ParameterOp, StateOp, KvCacheOp>(op);
  case Holder::ClipGradNorm:
    return isa<ClipGradNormOp>(op);
  case Holder::AnyOp:
    return true;
  case Holder::OpInFunction:
    return !isa<FunctionOpInterface>(op) &&
           op->getParentOfType<FunctionOpInterface>();
  }
  llvm_unreachable("unknown holder");
}

/// An integer attribute of type i64 (what the passes write), or null (also
/// for a null `attr`, a dictionary's missing key).
IntegerAttr asI64(Attribute attr) {
  auto value = dyn_cast_or_null<IntegerAttr>(attr);
  if (!value || !value.getType().isSignlessInteger(64))
    return {};
  return value;
}

/// Checks the value of a known attribute on an op that may hold it.
LogicalResult verifyValue(Operation *op, StringRef name, Attribute value) {
  auto fail = [&]() {
    return op->emitOpError("attribute '") << name << "' must be ";
  };
  if (name == kProgramAttr) {
    if (!isa<ProgramRoleAttr>(value))
      return fail()
             << "a #dsc.program_role<forward|forward_backward|"
                "optimizer|pipeline_step|backward_weight|initialize|prefill|"
                "decode|compressed_optimizer>, got "
             << value;
    return success();
  }
  if (name == kStageAttr) {
    IntegerAttr stage = asI64(value);
    if (!stage || stage.getInt() < 0)
      return fail() << "a pipeline stage, an i64 >= 0, got " << value;
    return success();
  }
  if (name == kFromStepAttr) {
    IntegerAttr step = asI64(value);
    auto role = op->getAttrOfType<ProgramRoleAttr>(kProgramAttr);
    if (!step || step.getInt() < 1)
      return fail() << "the first optimizer step, an i64 >= 1, got " << value;
    if (!role || role.getValue() != ProgramRole::CompressedOptimizer)
      return fail() << "on a compressed_optimizer program only";
    return success();
  }
  if (name == kZeroOneAdamAttr) {
    auto policy = dyn_cast<DictionaryAttr>(value);
    if (!policy)
      return fail() << "0/1 Adam's policy, a dictionary, got " << value;
    for (StringRef key : {"var_freeze_step", "var_update_scaler",
                          "local_step_scaler", "local_step_clipper"}) {
      IntegerAttr v = asI64(policy.get(key));
      if (!v || v.getInt() < (key == "var_freeze_step" ? 0 : 1))
        return fail() << "0/1 Adam's policy needs " << key
                      << ", an i64 >= " << (key == "var_freeze_step" ? 0 : 1)
                      << ", got " << policy.get(key);
    }
    if (policy.size() != 4)
      return fail() << "0/1 Adam's policy has exactly var_freeze_step, "
                       "var_update_scaler, local_step_scaler and "
                       "local_step_clipper, got "
                    << value;
    return success();
  }
  if (name == kMicrobatchesAttr) {
    IntegerAttr count = asI64(value);
    if (!count || count.getInt() < 1)
      return fail() << "the micro-batches per step, an i64 >= 1, got " << value;
    return success();
  }
  if (name == kWeightStashAttr) {
    IntegerAttr count = asI64(value);
    auto func = dyn_cast<FunctionOpInterface>(op);
    if (!count || count.getInt() < 0 || !func ||
        count.getInt() > int64_t(func.getNumResults()))
      return fail() << "the count of the function's last results its "
                       "weight-gradient part takes, an i64 from 0 to its "
                    << (func ? func.getNumResults() : 0) << " results, got "
                    << value;
    return success();
  }
  if (name == kLayerAttr) {
    IntegerAttr layer = asI64(value);
    if (!layer || layer.getInt() < 0)
      return fail() << "a transformer layer, an i64 >= 0, got " << value;
    return success();
  }
  if (name == kSavedActivationBytesAttr) {
    IntegerAttr bytes = asI64(value);
    if (!bytes || bytes.getInt() < 0)
      return fail() << "a byte count, an i64 >= 0, got " << value;
    return success();
  }
  if (name == kOffsetAttr) {
    IntegerAttr offset = asI64(value);
    if (!offset || offset.getInt() < 0)
      return fail() << "a byte offset, an i64 >= 0, got " << value;
    return success();
  }
  if (name == kPipelineRankAttr) {
    IntegerAttr rank = asI64(value);
    if (!rank || rank.getInt() < 0)
      return fail() << "a pipeline rank, an i64 >= 0, got " << value;
    return success();
  }
  if (name == kPipelineRanksAttr) {
    auto ranks = dyn_cast<DenseI64ArrayAttr>(value);
    bool ascending = ranks && ranks.size() >= 2;
    for (int64_t i = 0; ascending && i < ranks.size(); ++i)
      ascending = ranks[i] >= 0 && (i == 0 || ranks[i] > ranks[i - 1]);
    if (!ascending)
      return fail() << "two or more pipeline ranks, ascending i64 >= 0, got "
                    << value;
    return success();
  }
  if (name == kSlotBanksAttr) {
    auto banks = dyn_cast<DictionaryAttr>(value);
    if (!banks)
      return fail() << "a dictionary of slot banks, got " << value;
    for (NamedAttribute bank : banks) {
      auto fields = dyn_cast<DenseI64ArrayAttr>(bank.getValue());
      StringRef key = bank.getName().getValue();
      if ((key != "activation" && key != "gradient" && key != "weight") ||
          !fields || fields.size() != 3 || fields[0] < 0 || fields[1] < 1 ||
          fields[2] < 1)
        return fail() << "{activation, gradient, weight} of array<i64: "
                         "offset >= 0, stride >= 1, slots >= 1>, but '"
                      << key << "' is " << bank.getValue();
    }
    return success();
  }
  if (name == kInputOffsetsAttr || name == kOffsetsAttr) {
    bool inputs = name == kInputOffsetsAttr;
    // A swap-in's are its states' host staging.
    auto swapIn = dyn_cast<SwapInOp>(op);
    unsigned expected = inputs ? cast<FunctionOpInterface>(op).getNumArguments()
                        : swapIn ? swapIn.getStates().size()
                                 : op->getNumResults();
    auto offsets = dyn_cast<DenseI64ArrayAttr>(value);
    if (!offsets || offsets.size() != static_cast<int64_t>(expected) ||
        llvm::any_of(offsets.asArrayRef(), [](int64_t x) { return x < 0; }))
      return fail() << "an array<i64> of " << expected << " byte offsets >= 0 "
                    << "(one per "
                    << (inputs   ? "argument"
                        : swapIn ? "state"
                                 : "result")
                    << "), got " << value;
    return success();
  }
  if (name == kPipelineLocalAttr) {
    size_t expected = cast<ClipGradNormOp>(op).getGradients().size();
    auto local = dyn_cast<DenseBoolArrayAttr>(value);
    if (!local || local.size() != static_cast<int64_t>(expected))
      return fail() << "an array<i1> of " << expected
                    << " flags (one per gradient), got " << value;
    return success();
  }
  if (name == kPlanAttr) {
    if (!isa<ParallelPlanAttr>(value))
      return fail() << "a #dsc.parallel_plan, got " << value;
    return success();
  }
  if (name == kPipelineAttr) {
    if (!isa<PipelineAttr>(value))
      return fail() << "a #dsc.pipeline<stages = P, schedule = \"...\">, got "
                    << value;
    return success();
  }
  auto dict = dyn_cast<DictionaryAttr>(value);
  if (!dict)
    return fail() << "a dictionary, got " << value;
  if (name == kMemoryAttr) {
    for (StringRef key : {"persistent_bytes", "temporary_bytes", "arena_bytes"})
      if (!asI64(dict.get(key)))
        return fail() << "{persistent_bytes, temporary_bytes, arena_bytes} "
                         "as i64 byte counts, but '"
                      << key << "' is "
                      << (dict.get(key) ? "not an i64" : "missing");
    return success();
  }
  if (name == kInferenceAttr) {
    for (StringRef key : {"block_size", "kv_blocks", "max_context",
                          "max_sequences", "token_budget"}) {
      IntegerAttr v = asI64(dict.get(key));
      if (!v || v.getInt() <= 0)
        return fail() << "{block_size, kv_blocks, max_context, "
                         "max_sequences, token_budget} as positive i64, but '"
                      << key << "' is "
                      << (dict.get(key) ? "not one" : "missing");
    }
    return success();
  }
  if (name == kProgramPeaksAttr) {
    for (NamedAttribute peak : dict)
      if (!asI64(peak.getValue()))
        return fail() << "a dictionary of i64 peak bytes per program, but '"
                      << peak.getName().getValue() << "' is "
                      << peak.getValue();
    return success();
  }
  // dsc.model and dsc.plan_estimate: their readers check their
  // fields and say which one is wrong.
  return success();
}

} // namespace

LogicalResult DscDialect::verifyOperationAttribute(Operation *op,
                                                   NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  const KnownAttr *known = llvm::find_if(
      kKnownAttrs, [&](const KnownAttr &k) { return k.name == name; });
  if (known == std::end(kKnownAttrs)) {
    InFlightDiagnostic diag = op->emitOpError("has unknown dsc attribute '")
                              << name << "'; the dsc attributes are ";
    llvm::interleaveComma(kKnownAttrs, diag,
                          [&](const KnownAttr &k) { diag << k.name; });
    return diag;
  }
  if (!holds(known->holder, op))
    return op->emitOpError("attribute '")
           << name << "' belongs on " << holderName(known->holder)
           << ", not on '" << op->getName() << "'";
  return verifyValue(op, name, attr.getValue());
}
