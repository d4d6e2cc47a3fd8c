//===- DscCommunication.cpp - what the dsc ops communicate ------*- C++ -*-===//
//
// CommunicationOpInterface of every dsc op that talks to other ranks: the
// collectives, point-to-point transfers, in-place state collectives and the
// sharded gradient norm, each described as the events its communicator runs.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscOps.h"
#include "dsc/Dialect/Dsc/IR/DscPrograms.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

using namespace mlir;
using namespace mlir::dsc;

namespace {

/// A collective event of `name` over the group `axes` of `mesh`.
CommunicationEvent collective(StringRef name, FlatSymbolRefAttr mesh,
                              ArrayAttr axes) {
  CommunicationEvent event;
  event.kind = CommunicationEvent::Kind::Collective;
  event.name = name;
  event.mesh = mesh;
  for (StringRef axis : axes.getAsValueRange<StringAttr>())
    event.axes.push_back(axis);
  return event;
}

/// Parameters every member must agree on, as one uniqued dictionary so that
/// comparing two events' parameters is a pointer comparison.
DictionaryAttr parametersOf(MLIRContext *context,
                            ArrayRef<std::pair<StringRef, IntegerAttr>> list) {
  SmallVector<NamedAttribute> attrs;
  for (auto [name, value] : list)
    attrs.push_back(NamedAttribute(StringAttr::get(context, name), value));
  return DictionaryAttr::get(context, attrs);
}

/// Appends the types of the parameters and states `names` refers to, in
/// order; the op verifiers guarantee each name resolves to one of them.
void appendBufferTypes(Operation *op, SymbolTableCollection &tables,
                       ArrayAttr names, SmallVectorImpl<Type> &types) {
  for (Attribute name : names) {
    Operation *decl =
        tables.lookupNearestSymbolFrom(op, cast<SymbolRefAttr>(name));
    if (auto param = dyn_cast_or_null<ParameterOp>(decl))
      types.push_back(param.getType());
    else if (auto state = dyn_cast_or_null<StateOp>(decl))
      types.push_back(state.getType());
    else
      // Unresolved names stay visible as a type no real buffer has, so
      // that two ranks naming different missing buffers still compare.
      types.push_back(NoneType::get(op->getContext()));
  }
}

CommunicationEvent pointToPoint(CommunicationEvent::Kind kind,
                                FlatSymbolRefAttr mesh, StringRef axis,
                                IntegerAttr peer, IntegerAttr tag,
                                Type payload) {
  CommunicationEvent event;
  event.kind = kind;
  event.name = kind == CommunicationEvent::Kind::Send ? "send" : "recv";
  event.mesh = mesh;
  event.axes.push_back(axis);
  event.peer = peer.getInt();
  event.tag = tag.getInt();
  event.payload.push_back(payload);
  return event;
}

} // namespace

//===----------------------------------------------------------------------===//
// Value collectives
//===----------------------------------------------------------------------===//

void AllReduceOp::getCommunicationEvents(
    SymbolTableCollection &, SmallVectorImpl<CommunicationEvent> &events) {
  CommunicationEvent event =
      collective("all_reduce", getMeshAttr(), getMeshAxes());
  event.reduction = getReduction();
  event.payload.push_back(getInput().getType());
  events.push_back(std::move(event));
}

void ReduceScatterOp::getCommunicationEvents(
    SymbolTableCollection &, SmallVectorImpl<CommunicationEvent> &events) {
  CommunicationEvent event =
      collective("reduce_scatter", getMeshAttr(), getMeshAxes());
  event.reduction = getReduction();
  event.payload.push_back(getInput().getType());
  event.parameters =
      parametersOf(getContext(), {{"scatter_dim", getScatterDimAttr()}});
  events.push_back(std::move(event));
}

void AllGatherOp::getCommunicationEvents(
    SymbolTableCollection &, SmallVectorImpl<CommunicationEvent> &events) {
  CommunicationEvent event =
      collective("all_gather", getMeshAttr(), getMeshAxes());
  event.payload.push_back(getInput().getType());
  event.parameters =
      parametersOf(getContext(), {{"gather_dim", getGatherDimAttr()}});
  events.push_back(std::move(event));
}

void AllToAllOp::getCommunicationEvents(
    SymbolTableCollection &, SmallVectorImpl<CommunicationEvent> &events) {
  CommunicationEvent event =
      collective("all_to_all", getMeshAttr(), getMeshAxes());
  event.payload.push_back(getInput().getType());
  event.parameters =
      parametersOf(getContext(), {{"split_dim", getSplitDimAttr()},
                                  {"concat_dim", getConcatDimAttr()}});
  events.push_back(std::move(event));
}

//===----------------------------------------------------------------------===//
// Point to point
//===----------------------------------------------------------------------===//

void SendOp::getCommunicationEvents(
    SymbolTableCollection &, SmallVectorImpl<CommunicationEvent> &events) {
  events.push_back(pointToPoint(CommunicationEvent::Kind::Send, getMeshAttr(),
                                getAxis(), getPeerAttr(), getTagAttr(),
                                getInput().getType()));
}

void RecvOp::getCommunicationEvents(
    SymbolTableCollection &, SmallVectorImpl<CommunicationEvent> &events) {
  events.push_back(pointToPoint(CommunicationEvent::Kind::Recv, getMeshAttr(),
                                getAxis(), getPeerAttr(), getTagAttr(),
                                getResult().getType()));
}

// A pipeline message's tag is its micro-batch: the direction (to a higher
// or a lower stage) already tells activations from gradients. Interleaved,
// two ranks exchange several stages' messages of one micro-batch, so the
// event also names the stage that sends it (and whether it is a gradient),
// which both ends must agree on.
static DictionaryAttr interleavedMessage(Operation *op,
                                         std::optional<int64_t> chunk,
                                         PipelineMessage message, bool sends) {
  if (!chunk)
    return DictionaryAttr();
  auto func = op->getParentOfType<func::FuncOp>();
  auto module = op->getParentOfType<ModuleOp>();
  std::optional<int64_t> rank = func ? getPipelineStage(func) : std::nullopt;
  std::optional<PipelineShape> shape =
      module ? getPipelineShape(module) : std::nullopt;
  if (!rank || !shape)
    return DictionaryAttr();
  const bool gradient = message == PipelineMessage::Gradient;
  int64_t stage = *chunk * shape->ranks() + *rank;
  if (!sends)
    stage += gradient ? 1 : -1;
  Builder b(op->getContext());
  return parametersOf(op->getContext(),
                      {{"from_stage", b.getI64IntegerAttr(stage)},
                       {"gradient", b.getI64IntegerAttr(gradient)}});
}

void PipelineSendOp::getCommunicationEvents(
    SymbolTableCollection &, SmallVectorImpl<CommunicationEvent> &events) {
  events.push_back(pointToPoint(CommunicationEvent::Kind::Send, getMeshAttr(),
                                "pp", getPeerAttr(), getMicrobatchAttr(),
                                getPayload()));
  events.back().parameters =
      interleavedMessage(*this, getChunk(), getMessage(), /*sends=*/true);
}

void PipelineRecvOp::getCommunicationEvents(
    SymbolTableCollection &, SmallVectorImpl<CommunicationEvent> &events) {
  events.push_back(pointToPoint(CommunicationEvent::Kind::Recv, getMeshAttr(),
                                "pp", getPeerAttr(), getMicrobatchAttr(),
                                getPayload()));
  events.back().parameters =
      interleavedMessage(*this, getChunk(), getMessage(), /*sends=*/false);
}

//===----------------------------------------------------------------------===//
// In-place collectives over named state
//===----------------------------------------------------------------------===//

// A bucket runs as one collective over contiguous buffers, which is what the
// value collective of the same kind would run: the kind is shared and the
// payload lists the buffers in their order in memory.

void AllReduceStatesOp::getCommunicationEvents(
    SymbolTableCollection &tables,
    SmallVectorImpl<CommunicationEvent> &events) {
  CommunicationEvent event =
      collective("all_reduce", getMeshAttr(), getMeshAxes());
  event.reduction = getReduction();
  appendBufferTypes(*this, tables, getStates(), event.payload);
  events.push_back(std::move(event));
}

void ReduceScatterStatesOp::getCommunicationEvents(
    SymbolTableCollection &tables,
    SmallVectorImpl<CommunicationEvent> &events) {
  CommunicationEvent event =
      collective("reduce_scatter", getMeshAttr(), getMeshAxes());
  event.reduction = getReduction();
  appendBufferTypes(*this, tables, getStates(), event.payload);
  events.push_back(std::move(event));
}

void AllGatherStatesOp::getCommunicationEvents(
    SymbolTableCollection &tables,
    SmallVectorImpl<CommunicationEvent> &events) {
  CommunicationEvent event =
      collective("all_gather", getMeshAttr(), getMeshAxes());
  appendBufferTypes(*this, tables, getBuffers(), event.payload);
  events.push_back(std::move(event));
}

void ReduceScatterAccumulateOp::getCommunicationEvents(
    SymbolTableCollection &, SmallVectorImpl<CommunicationEvent> &events) {
  CommunicationEvent event =
      collective("reduce_scatter", getMeshAttr(), getMeshAxes());
  event.reduction = getReduction();
  event.payload.push_back(getValue().getType());
  events.push_back(std::move(event));
}

void GatherParameterOp::getCommunicationEvents(
    SymbolTableCollection &, SmallVectorImpl<CommunicationEvent> &events) {
  // ZeRO-3: every rank of the group gathers the same whole tensor.
  CommunicationEvent event =
      collective("all_gather", getMeshAttr(), getMeshAxes());
  event.payload.push_back(getResult().getType());
  events.push_back(std::move(event));
}

void ClipGradNormOp::getCommunicationEvents(
    SymbolTableCollection &tables,
    SmallVectorImpl<CommunicationEvent> &events) {
  // With whole gradients on every rank the norm is local.
  SmallVector<StringRef> axes = getNormAxes(*this);
  if (axes.empty())
    return;
  // Without ZeRO the group is the tensor-slicing axes of the module's mesh.
  FlatSymbolRefAttr mesh = getMeshAttr();
  if (!mesh)
    if (auto module = (*this)->getParentOfType<ModuleOp>())
      for (auto decl : module.getOps<MeshOp>()) {
        mesh = FlatSymbolRefAttr::get(decl.getSymNameAttr());
        break;
      }
  // Each rank's sum of squares, added over the group in double precision
  // (the runtime's GlobalNormClipParts).
  CommunicationEvent event;
  event.name = "all_reduce";
  event.mesh = mesh;
  event.axes.assign(axes.begin(), axes.end());
  event.reduction = ReductionKind::Sum;
  event.payload.push_back(
      RankedTensorType::get({}, Float64Type::get(getContext())));
  events.push_back(std::move(event));
}

//===----------------------------------------------------------------------===//
// Tensor slicing
//===----------------------------------------------------------------------===//

// Entering a tensor-parallel region and the vocabulary-parallel embedding
// only compute on this rank's part; their partners (a dsc.all_reduce, or the
// backward's) communicate.

void CopyToParallelOp::getCommunicationEvents(
    SymbolTableCollection &, SmallVectorImpl<CommunicationEvent> &) {}

void ScatterToParallelOp::getCommunicationEvents(
    SymbolTableCollection &, SmallVectorImpl<CommunicationEvent> &) {}

void VocabParallelEmbeddingOp::getCommunicationEvents(
    SymbolTableCollection &, SmallVectorImpl<CommunicationEvent> &) {}

void VocabParallelEmbeddingGradOp::getCommunicationEvents(
    SymbolTableCollection &, SmallVectorImpl<CommunicationEvent> &) {}

/// Megatron-LM's per-token reductions of the split softmax, in f64 (one
/// value per token): the maximum, the sum of exponentials and, forward
/// only, the target's logit.
static void appendSoftmaxReductions(Operation *op, FlatSymbolRefAttr mesh,
                                    ArrayAttr axes, Value targets,
                                    bool withTarget,
                                    SmallVectorImpl<CommunicationEvent> &events) {
  auto perToken = RankedTensorType::get(
      {cast<RankedTensorType>(targets.getType()).getNumElements()},
      Float64Type::get(op->getContext()));
  SmallVector<ReductionKind, 3> reductions = {ReductionKind::Max,
                                              ReductionKind::Sum};
  if (withTarget)
    reductions.push_back(ReductionKind::Sum);
  for (ReductionKind reduction : reductions) {
    CommunicationEvent event = collective("all_reduce", mesh, axes);
    event.reduction = reduction;
    event.payload.push_back(perToken);
    events.push_back(std::move(event));
  }
}

void VocabParallelCrossEntropyOp::getCommunicationEvents(
    SymbolTableCollection &, SmallVectorImpl<CommunicationEvent> &events) {
  appendSoftmaxReductions(*this, getMeshAttr(), getMeshAxes(), getTargets(),
                          /*withTarget=*/true, events);
}

void VocabParallelCrossEntropyGradOp::getCommunicationEvents(
    SymbolTableCollection &, SmallVectorImpl<CommunicationEvent> &events) {
  appendSoftmaxReductions(*this, getMeshAttr(), getMeshAxes(), getTargets(),
                          /*withTarget=*/false, events);
}

void CompressedAllReduceStatesOp::getCommunicationEvents(
    SymbolTableCollection &tables,
    SmallVectorImpl<CommunicationEvent> &events) {
  // One compressed all-reduce of the bucket (its all-to-all and three
  // all-gathers always come together).
  CommunicationEvent event =
      collective("compressed_all_reduce", getMeshAttr(), getMeshAxes());
  appendBufferTypes(*this, tables, getStates(), event.payload);
  events.push_back(std::move(event));
}
