//===- DscCollectives.cpp - symbol-using dsc op verifiers -------*- C++ -*-===//
//
// Verifiers that need a symbol table: parameter reads, sharding annotations
// and collectives, which must name an existing mesh and axes of it and move
// shapes that divide evenly over the communicator group.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscOps.h"

#include "mlir/IR/Builders.h"

#include <cmath>
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::dsc;


/// Finds the mesh `name` refers to, or reports that it does not exist.
static FailureOr<MeshOp> lookupMesh(Operation *op,
                                    SymbolTableCollection &tables,
                                    FlatSymbolRefAttr name) {
  auto mesh = tables.lookupNearestSymbolFrom<MeshOp>(op, name);
  if (!mesh)
    return op->emitOpError("'") << name << "' does not name a dsc.mesh";
  return mesh;
}

static std::string listAxes(MeshOp mesh) {
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::interleaveComma(mesh.getAxes().getAsValueRange<StringAttr>(), os);
  return text;
}

/// Size of axis `name` of `mesh`, or an error naming the valid axes.
static FailureOr<int64_t> getAxisSize(Operation *op, MeshOp mesh,
                                      StringRef name) {
  std::optional<unsigned> index = mesh.getAxisIndex(name);
  if (!index)
    return op->emitOpError("mesh axis '")
           << name << "' is not an axis of @" << mesh.getSymName()
           << " (axes: " << listAxes(mesh) << ")";
  return mesh.getShape()[*index];
}

/// Product of the sizes of `axes`, each of which must exist once in `mesh`.
static FailureOr<int64_t> getGroupSizeOf(Operation *op, MeshOp mesh,
                                         ArrayRef<StringRef> axes) {
  if (axes.empty())
    return op->emitOpError("needs at least one mesh axis");
  llvm::StringSet<> seen;
  int64_t size = 1;
  for (StringRef axis : axes) {
    if (!seen.insert(axis).second)
      return op->emitOpError("mesh axis '") << axis << "' is listed twice";
    FailureOr<int64_t> axisSize = getAxisSize(op, mesh, axis);
    if (failed(axisSize))
      return failure();
    size *= *axisSize;
  }
  return size;
}

static FailureOr<int64_t> getGroupSizeOf(Operation *op,
                                         SymbolTableCollection &tables,
                                         FlatSymbolRefAttr meshName,
                                         ArrayAttr axes) {
  FailureOr<MeshOp> mesh = lookupMesh(op, tables, meshName);
  if (failed(mesh))
    return failure();
  SmallVector<StringRef> names(axes.getAsValueRange<StringAttr>());
  return getGroupSizeOf(op, *mesh, names);
}

/// Checks `dim` is a dimension of `type` and divisible by `groupSize`.
static LogicalResult verifyDivisibleDim(Operation *op, StringRef what,
                                        RankedTensorType type, int64_t dim,
                                        int64_t groupSize) {
  if (dim < 0 || dim >= type.getRank())
    return op->emitOpError() << what << " " << dim
                             << " is out of range for rank " << type.getRank();
  if (type.getDimSize(dim) % groupSize != 0)
    return op->emitOpError()
           << what << " " << dim << " of size " << type.getDimSize(dim)
           << " is not divisible by the group size " << groupSize;
  return success();
}

/// Checks `result` equals `input` with dimension `dim` scaled by num/den.
static LogicalResult verifyScaledShape(Operation *op, RankedTensorType input,
                                       RankedTensorType result, int64_t dim,
                                       int64_t num, int64_t den) {
  SmallVector<int64_t> expected(input.getShape());
  expected[dim] = expected[dim] * num / den;
  if (result.getShape() != ArrayRef<int64_t>(expected) ||
      result.getElementType() != input.getElementType())
    return op->emitOpError("result type ")
           << result << " must be "
           << RankedTensorType::get(expected, input.getElementType());
  return success();
}

FailureOr<MeshOp> mlir::dsc::getOrCreateMeshWithAxis(ModuleOp module,
                                                     StringRef axis,
                                                     int64_t size,
                                                     StringRef pass) {
  auto meshes = module.getOps<MeshOp>();
  if (!meshes.empty()) {
    MeshOp mesh = *meshes.begin();
    std::optional<unsigned> index = mesh.getAxisIndex(axis);
    if (!index || mesh.getShape()[*index] != size)
      return mesh.emitError("--")
             << pass << ": mesh @" << mesh.getSymName() << " needs a '" << axis
             << "' axis of size " << size;
    return mesh;
  }
  OpBuilder b(module.getContext());
  b.setInsertionPointToStart(module.getBody());
  return MeshOp::create(b, module.getLoc(), "mesh", b.getStrArrayAttr({axis}),
                        b.getDenseI64ArrayAttr({size}));
}

SmallVector<StringRef> mlir::dsc::dataParallelAxes(MeshOp mesh) {
  if (mesh && mesh.getAxisIndex("ep"))
    return {"edp", "ep"};
  if (mesh && mesh.getAxisIndex("dp"))
    return {"dp"};
  return {};
}

SmallVector<StringRef> mlir::dsc::replicatingDataAxes(MeshOp mesh,
                                                      ParameterOp param) {
  llvm::StringSet<> splitting;
  if (ShardLayoutAttr layout = param.getLayoutAttr())
    for (Attribute dim : layout.getSplit())
      for (StringRef axis : cast<ArrayAttr>(dim).getAsValueRange<StringAttr>())
        splitting.insert(axis);
  SmallVector<StringRef> axes;
  for (StringRef axis : dataParallelAxes(mesh))
    if (!splitting.contains(axis))
      axes.push_back(axis);
  return axes;
}

int64_t mlir::dsc::meshAxesSize(MeshOp mesh, ArrayRef<StringRef> axes) {
  int64_t size = 1;
  for (StringRef axis : axes)
    if (std::optional<unsigned> index = mesh.getAxisIndex(axis))
      size *= mesh.getShape()[*index];
  return size;
}

FailureOr<int64_t> mlir::dsc::getMeshGroupSize(Operation *op,
                                               SymbolTableCollection &tables,
                                               FlatSymbolRefAttr mesh,
                                               ArrayAttr axes) {
  return getGroupSizeOf(op, tables, mesh, axes);
}

//===----------------------------------------------------------------------===//
// GetParameterOp
//===----------------------------------------------------------------------===//

LogicalResult
GetParameterOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto param =
      symbolTable.lookupNearestSymbolFrom<ParameterOp>(*this, getNameAttr());
  if (!param)
    return emitOpError("'") << getName() << "' does not name a dsc.parameter";
  if (param.getType() != getType())
    return emitOpError("result type ")
           << getType() << " does not match parameter '@" << getName()
           << "' of type " << param.getType();
  if (param.getTier() != MemoryTier::Device)
    return emitOpError("reads parameter '@")
           << getName() << "' in tier '" << stringifyMemoryTier(param.getTier())
           << "'; an offloaded chunk is fetched (dsc.fetch_parameter) and "
              "gathered";
  return success();
}

//===----------------------------------------------------------------------===//
// FetchParameterOp
//===----------------------------------------------------------------------===//

LogicalResult
FetchParameterOp::verifySymbolUses(SymbolTableCollection &tables) {
  auto param =
      tables.lookupNearestSymbolFrom<ParameterOp>(*this, getNameAttr());
  if (!param)
    return emitOpError("'") << getName() << "' does not name a dsc.parameter";
  if (param.getTier() == MemoryTier::Device)
    return emitOpError("parameter '@")
           << getName() << "' is on the device; only a chunk in tier host "
           << "or nvme is fetched";
  if (param.getType() != getType())
    return emitOpError("result type ")
           << getType() << " does not match parameter '@" << getName()
           << "' of type " << param.getType();
  return success();
}

//===----------------------------------------------------------------------===//
// GatherParameterOp
//===----------------------------------------------------------------------===//

static std::string listNames(ArrayRef<StringRef> names) {
  std::string text = "[";
  llvm::raw_string_ostream os(text);
  llvm::interleaveComma(names, os, [&](StringRef n) { os << '"' << n << '"'; });
  return text + "]";
}

LogicalResult
GatherParameterOp::verifySymbolUses(SymbolTableCollection &tables) {
  auto param =
      tables.lookupNearestSymbolFrom<ParameterOp>(*this, getNameAttr());
  if (!param)
    return emitOpError("'") << getName() << "' does not name a dsc.parameter";
  if (!param.isChunked())
    return emitOpError("parameter '@")
           << getName() << "' is not a ZeRO-3 chunk (its layout has no chunk "
           << "axes); read it with dsc.get_parameter";
  if (param.getTier() != MemoryTier::Device && !getChunk())
    return emitOpError("parameter '@")
           << getName() << "' is in tier '"
           << stringifyMemoryTier(param.getTier())
           << "'; gather it from a dsc.fetch_parameter copy (`from %chunk`)";
  if (param.getTier() == MemoryTier::Device && getChunk())
    return emitOpError("parameter '@")
           << getName() << "' is on the device; `from` names a fetched copy "
           << "of an offloaded chunk";
  if (getChunk() && getChunk().getType() != param.getType())
    return emitOpError("gathers from ")
           << getChunk().getType() << ", not parameter '@" << getName()
           << "''s chunk type " << param.getType();
  SmallVector<StringRef> chunkAxes = param.getLayoutAttr().getChunkAxisNames();
  SmallVector<StringRef> axes(getMeshAxes().getAsValueRange<StringAttr>());
  if (axes != chunkAxes)
    return emitOpError("gathers over axes ")
           << listNames(axes) << " but parameter '@" << getName()
           << "' is chunked over " << listNames(chunkAxes);
  FailureOr<int64_t> group =
      getGroupSizeOf(*this, tables, getMeshAttr(), getMeshAxes());
  if (failed(group))
    return failure();
  RankedTensorType result = tensorOf(getResult());
  int64_t chunk = param.getNumElements();
  if (result.getElementType() != param.getTensorType().getElementType())
    return emitOpError("result element type ")
           << result.getElementType() << " differs from parameter '@"
           << getName() << "' of type " << param.getType();
  if (result.getNumElements() != chunk * *group)
    return emitOpError("result type ")
           << result << " has " << result.getNumElements() << " elements; the "
           << *group << " chunks of parameter '@" << getName() << "' (" << chunk
           << " elements each) make " << chunk * *group;
  return success();
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

LogicalResult AllReduceOp::verifySymbolUses(SymbolTableCollection &tables) {
  return getGroupSizeOf(*this, tables, getMeshAttr(), getMeshAxes());
}

LogicalResult
AllReduceStatesOp::verifySymbolUses(SymbolTableCollection &tables) {
  if (failed(getGroupSizeOf(*this, tables, getMeshAttr(), getMeshAxes())))
    return failure();
  if (getStates().empty())
    return emitOpError("needs at least one state to reduce");
  for (Attribute attr : getStates()) {
    auto name = dyn_cast<FlatSymbolRefAttr>(attr);
    if (!name || !tables.lookupNearestSymbolFrom<StateOp>(*this, name))
      return emitOpError("'") << attr << "' does not name a dsc.state";
  }
  return success();
}

LogicalResult ReduceScatterOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<int64_t> group =
      getGroupSizeOf(*this, tables, getMeshAttr(), getMeshAxes());
  if (failed(group))
    return failure();
  RankedTensorType input = tensorOf(getInput());
  int64_t dim = getScatterDimAttr().getInt();
  if (failed(
          verifyDivisibleDim(*this, "scatter dimension", input, dim, *group)))
    return failure();
  return verifyScaledShape(*this, input, tensorOf(getResult()), dim, 1, *group);
}

LogicalResult AllGatherOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<int64_t> group =
      getGroupSizeOf(*this, tables, getMeshAttr(), getMeshAxes());
  if (failed(group))
    return failure();
  RankedTensorType input = tensorOf(getInput());
  int64_t dim = getGatherDimAttr().getInt();
  if (failed(verifyDivisibleDim(*this, "gather dimension", input, dim, 1)))
    return failure();
  return verifyScaledShape(*this, input, tensorOf(getResult()), dim, *group, 1);
}

LogicalResult AllToAllOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<int64_t> group =
      getGroupSizeOf(*this, tables, getMeshAttr(), getMeshAxes());
  if (failed(group))
    return failure();
  RankedTensorType input = tensorOf(getInput());
  const int64_t split = getSplitDimAttr().getInt();
  const int64_t concat = getConcatDimAttr().getInt();
  if (failed(verifyDivisibleDim(*this, "split dimension", input, split,
                                *group)) ||
      failed(verifyDivisibleDim(*this, "concat dimension", input, concat, 1)))
    return failure();
  SmallVector<int64_t> expected(input.getShape());
  expected[split] /= *group;
  expected[concat] *= *group;
  RankedTensorType result = tensorOf(getResult());
  if (result.getShape() != ArrayRef<int64_t>(expected) ||
      result.getElementType() != input.getElementType())
    return emitOpError("result type ")
           << result << " must be "
           << RankedTensorType::get(expected, input.getElementType())
           << " (split dimension " << split << " divided and concat dimension "
           << concat << " multiplied by the group size " << *group << ")";
  for (auto [name, scale] : {std::pair<StringRef, FloatAttr>{"scale",
                                                             getScaleAttr()},
                             {"grad_scale", getGradScaleAttr()}})
    if (scale && !(std::isfinite(scale.getValueAsDouble()) &&
                   scale.getValueAsDouble() > 0))
      return emitOpError() << name << " must be finite and positive, got "
                           << scale.getValueAsDouble();
  return success();
}

/// Checks a point-to-point peer coordinate along `axis`.
static LogicalResult verifyPeer(Operation *op, SymbolTableCollection &tables,
                                FlatSymbolRefAttr meshName, StringRef axis,
                                int64_t peer) {
  FailureOr<MeshOp> mesh = lookupMesh(op, tables, meshName);
  if (failed(mesh))
    return failure();
  FailureOr<int64_t> size = getAxisSize(op, *mesh, axis);
  if (failed(size))
    return failure();
  if (peer < 0 || peer >= *size)
    return op->emitOpError("peer ") << peer << " is outside mesh axis '" << axis
                                    << "' of size " << *size;
  return success();
}

LogicalResult SendOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyPeer(*this, tables, getMeshAttr(), getAxis(),
                    getPeerAttr().getInt());
}

LogicalResult RecvOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyPeer(*this, tables, getMeshAttr(), getAxis(),
                    getPeerAttr().getInt());
}

/// The axis a pipeline stage's messages travel on.
static constexpr llvm::StringLiteral kPipelineAxis = "pp";

LogicalResult PipelineSendOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyPeer(*this, tables, getMeshAttr(), kPipelineAxis, getPeer());
}

LogicalResult PipelineRecvOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyPeer(*this, tables, getMeshAttr(), kPipelineAxis, getPeer());
}
