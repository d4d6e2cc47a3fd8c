//===- DscAttrs.cpp - dsc attributes ----------------------------*- C++ -*-===//
//
// Verifiers and helpers of the initializer and sharding attributes. Checks
// that need the mesh (axis names, divisibility) live with the ops that use a
// sharding, since an attribute cannot look up symbols.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscAttrs.h"
#include "dsc/Dialect/Dsc/IR/DscDialect.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace mlir::dsc;

#include "dsc/Dialect/Dsc/IR/DscEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dsc/Dialect/Dsc/IR/DscAttrs.cpp.inc"

FailureOr<::dsc::ParallelPlan>
mlir::dsc::parseParallelPlanParameter(AsmParser &parser) {
  SMLoc loc = parser.getCurrentLocation();
  std::string text;
  if (parser.parseString(&text))
    return failure();
  ::dsc::ParallelPlan plan;
  std::string error;
  if (!::dsc::parseParallelPlan(text, plan, error))
    return parser.emitError(loc) << error;
  return plan;
}

void mlir::dsc::printParallelPlanParameter(AsmPrinter &printer,
                                           const ::dsc::ParallelPlan &plan) {
  printer << '"';
  llvm::printEscapedString(plan.str(), printer.getStream());
  printer << '"';
}

void DscDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dsc/Dialect/Dsc/IR/DscAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// InitAttr
//===----------------------------------------------------------------------===//

FailureOr<llvm::APFloat> mlir::dsc::parseF64Parameter(AsmParser &parser) {
  double value;
  if (parser.parseFloat(value))
    return failure();
  return llvm::APFloat(value);
}

LogicalResult InitAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               InitKind kind, llvm::APFloat stdValue,
                               int64_t numLayers) {
  double std = stdValue.convertToDouble();
  if (!std::isfinite(std) || std < 0.0)
    return emitError() << "initializer std must be a finite number >= 0, got "
                       << std;
  switch (kind) {
  case InitKind::Zeros:
  case InitKind::Ones:
    if (std != 0.0 || numLayers != 0)
      return emitError() << "initializer '" << stringifyInitKind(kind)
                         << "' takes no std or num_layers";
    return success();
  case InitKind::Normal:
    if (std <= 0.0)
      return emitError() << "initializer 'normal' needs std > 0";
    if (numLayers != 0)
      return emitError() << "initializer 'normal' takes no num_layers; use "
                            "'scaled_normal' for residual projections";
    return success();
  case InitKind::ScaledNormal:
    if (std <= 0.0)
      return emitError() << "initializer 'scaled_normal' needs std > 0";
    if (numLayers <= 0)
      return emitError() << "initializer 'scaled_normal' needs num_layers >= "
                            "1 (it draws with std / sqrt(2 * num_layers))";
    return success();
  }
  return success();
}

double InitAttr::getEffectiveStd() const {
  if (getKind() == InitKind::ScaledNormal)
    return getStd().convertToDouble() /
           std::sqrt(2.0 * static_cast<double>(getNumLayers()));
  return getStd().convertToDouble();
}

//===----------------------------------------------------------------------===//
// PipelineAttr
//===----------------------------------------------------------------------===//

FailureOr<::dsc::PipelineScheduleKind>
mlir::dsc::parsePipelineScheduleParameter(AsmParser &parser) {
  SMLoc loc = parser.getCurrentLocation();
  std::string name;
  if (parser.parseString(&name))
    return failure();
  if (std::optional<::dsc::PipelineScheduleKind> kind =
          ::dsc::parsePipelineSchedule(name))
    return *kind;
  return parser.emitError(loc, "unknown pipeline schedule \"")
         << name << "\": \"1f1b\", \"gpipe\", \"interleaved-1f1b\" or "
         << "\"zb-h1\"";
}

FailureOr<std::optional<llvm::APFloat>>
mlir::dsc::parseOptionalF64Parameter(AsmParser &parser) {
  FailureOr<llvm::APFloat> value = parseF64Parameter(parser);
  if (failed(value))
    return failure();
  return std::optional<llvm::APFloat>(*value);
}

LogicalResult PipelineAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   int64_t stages,
                                   ::dsc::PipelineScheduleKind schedule,
                                   int64_t virtualStages,
                                   std::optional<llvm::APFloat> bubble) {
  if (stages < 1)
    return emitError() << "a pipeline needs stages >= 1, got " << stages;
  // Interleaved: each pp rank holds virtual_stages of the stages.
  if (virtualStages < 1 || stages % virtualStages != 0)
    return emitError() << "virtual_stages must be >= 1 and divide the "
                       << stages << " stages, got " << virtualStages;
  if (virtualStages > 1 &&
      schedule != ::dsc::PipelineScheduleKind::InterleavedOneFOneB)
    return emitError() << "virtual_stages = " << virtualStages
                       << " needs schedule \"interleaved-1f1b\", not \""
                       << ::dsc::pipelineScheduleName(schedule) << "\"";
  if (bubble) {
    const double fraction = bubble->convertToDouble();
    if (!(fraction >= 0.0 && fraction <= 1.0))
      return emitError() << "bubble is the idle fraction of the step, in "
                            "[0, 1], got "
                         << fraction;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// ShardLayoutAttr
//===----------------------------------------------------------------------===//

/// Checks that `list` is an array of strings, naming `what` in the error.
static LogicalResult
verifyAxisList(function_ref<InFlightDiagnostic()> emitError, Attribute list,
               const Twine &what, llvm::StringSet<> &seen) {
  auto array = dyn_cast<ArrayAttr>(list);
  if (!array)
    return emitError() << what << " must be a list of mesh axis names";
  for (Attribute axis : array) {
    auto name = dyn_cast<StringAttr>(axis);
    if (!name || name.getValue().empty())
      return emitError() << what << " must contain non-empty axis names";
    if (!seen.insert(name.getValue()).second)
      return emitError() << "mesh axis '" << name.getValue()
                         << "' is used more than once in the sharding";
  }
  return success();
}

LogicalResult
ShardLayoutAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                        ArrayRef<int64_t> view, ArrayAttr split,
                        ArrayAttr chunk, ArrayRef<int64_t> shape) {
  if (view.empty())
    return emitError() << "layout view must have at least one dimension";
  for (int64_t d : view)
    if (d < 1)
      return emitError() << "layout view dimensions must be positive, got "
                         << d;
  if (split.size() != view.size())
    return emitError() << "layout split has " << split.size()
                       << " entries for a view of rank " << view.size();
  llvm::StringSet<> seen;
  for (auto [dim, axes] : llvm::enumerate(split))
    if (failed(verifyAxisList(emitError, axes,
                              "split axes of view dimension " + Twine(dim),
                              seen)))
      return failure();
  if (chunk && failed(verifyAxisList(emitError, chunk, "chunk axes", seen)))
    return failure();
  if (!shape.empty()) {
    // The view refines the shape: every running product of the shape is
    // one of the view's, and the totals agree.
    int64_t s = 1, v = 1;
    size_t vi = 0;
    for (int64_t d : shape) {
      if (d < 1)
        return emitError() << "layout shape dimensions must be positive, got "
                           << d;
      s *= d;
      while (vi < view.size() && v < s)
        v *= view[vi++];
      if (v != s)
        return emitError() << "layout view [" << view
                           << "] does not refine its shape [" << shape
                           << "] (the same elements, split further)";
    }
    if (vi != view.size())
      return emitError() << "layout shape [" << shape << "] has fewer elements"
                         << " than its view [" << view << "]";
  }
  return success();
}

int64_t ShardLayoutAttr::getWholeNumElements() const {
  int64_t n = 1;
  for (int64_t d : getView())
    n *= d;
  return n;
}

SmallVector<StringRef> ShardLayoutAttr::getAxesOfDim(unsigned dim) const {
  SmallVector<StringRef> names;
  for (Attribute axis : cast<ArrayAttr>(getSplit()[dim]))
    names.push_back(cast<StringAttr>(axis).getValue());
  return names;
}

SmallVector<StringRef> ShardLayoutAttr::getChunkAxisNames() const {
  SmallVector<StringRef> names;
  if (ArrayAttr chunk = getChunk())
    for (Attribute axis : chunk)
      names.push_back(cast<StringAttr>(axis).getValue());
  return names;
}
