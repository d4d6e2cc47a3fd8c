//===- CheckpointIO.cpp - Saving and restoring training state -------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The executor's side of sharded checkpoints (the format is
// include/dsc/Runtime/Checkpoint.h, docs/checkpoints.md). Every rank computes
// the same global list of pieces from the plan alone: for each world rank,
// each parameter and optimizer state its pipeline stage holds, the box its
// ShardLayout gives it; a box several ranks hold (dp replicas, or tp for an
// unsliced tensor) is written by the lowest of them. The ranks write their
// files, then one all-reduce shares each piece's byte offset and checksum
// (and any failure), and rank 0 writes the manifest and commits the step.
//
// Loading maps this rank's boxes onto the stored pieces through the tensor's
// flat element index, whatever plan wrote them, reads only the pieces that
// overlap, checks everything, agrees with the other ranks that all is well,
// and only then copies into the buffers.
//
//===----------------------------------------------------------------------===//

#include "CheckpointIO.h"
#include "PendingCheckpoint.h"

#include "dsc/Runtime/Checkpoint.h"
#include "dsc/Runtime/FloatConvert.h"
#include "dsc/Runtime/Safetensors.h"
#include "dsc/Runtime/ShardLayout.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <unistd.h>

using namespace dsc::rt;

namespace {

bool checkpointed(BufferRole role) {
  return role == BufferRole::Parameter || role == BufferRole::OptimizerState ||
         role == BufferRole::CompressionError;
}

/// The whole tensor's shape: a sharded buffer's layout records it (the
/// lowering writes it from the parameter), a whole buffer is it. A plan
/// without it (written by hand) gets the view, or a chunk's flat whole.
std::vector<int64_t> wholeShape(const Plan &plan, const Buffer &b) {
  const ShardLayout &l = b.layout;
  if (l.isWhole())
    return b.shape;
  if (!l.shape.empty())
    return l.shape;
  if (!l.view.empty())
    return l.view;
  return {numElements(b.shape) * groupSize(plan.mesh, l.chunkAxes)};
}

/// The part of its whole tensor that buffer `b` holds on the rank at
/// `coords` (ShardIndexer's mapping, as a box).
TensorBox boxOf(const Plan &plan, const Buffer &b,
                const std::vector<int64_t> &coords) {
  const ShardLayout &l = b.layout;
  const int64_t count = numElements(b.shape);
  TensorBox box;
  if (l.view.empty()) {
    const int64_t chunks = groupSize(plan.mesh, l.chunkAxes);
    box.view = wholeShape(plan, b);
    box.offsets.assign(box.view.size(), 0);
    box.sizes = box.view;
    if (chunks > 1) {
      box.flatOffset = groupIndex(plan.mesh, coords, l.chunkAxes) * count;
      box.flatCount = count;
    }
    return box;
  }
  box.view = l.view;
  for (size_t d = 0; d < l.view.size(); ++d) {
    const int64_t size = l.view[d] / groupSize(plan.mesh, l.viewSplit[d]);
    box.sizes.push_back(size);
    box.offsets.push_back(groupIndex(plan.mesh, coords, l.viewSplit[d]) * size);
  }
  if (l.chunkAxes) {
    box.flatOffset = groupIndex(plan.mesh, coords, l.chunkAxes) * count;
    box.flatCount = count;
  }
  return box;
}

/// Which buffers each pipeline rank keeps up to date: those its stages'
/// programs name (all of them without stages). Index: the rank's coordinate
/// on the pp axis (0 without stages); rank r holds stages r, r+P, ...
std::vector<std::vector<bool>> buffersOfStages(const Plan &plan) {
  if (plan.stages.empty())
    return {std::vector<bool>(plan.buffers.size(), true)};
  const size_t ranks = size_t(plan.pipelineRanks());
  std::vector<std::vector<bool>> out(
      ranks, std::vector<bool>(plan.buffers.size(), false));
  for (size_t k = 0; k < plan.stages.size(); ++k) {
    const PipelineStage &s = plan.stages[k];
    std::vector<bool> &used = out[k % ranks];
    for (const std::string &name :
         {s.forward, s.forwardBackward, s.backwardWeight, s.optimizer,
          s.compressedOptimizer})
      if (const Program *prog = plan.findProgram(name))
        for (const Instruction &inst : prog->instructions) {
          for (uint32_t id : inst.inputs)
            used[id] = true;
          for (uint32_t id : inst.outputs)
            used[id] = true;
        }
  }
  return out;
}

int64_t stageOfRank(const Plan &plan, const std::vector<int64_t> &coords) {
  if (plan.stages.empty())
    return 0;
  return coords[size_t(findMeshAxis(plan.mesh, "pp"))];
}

/// Where each buffer's checkpointed values are read from: itself, except
/// under a delayed parameter update (an optimizer program with an
/// OverlapNextStep), where a parameter lags its master by a step and the
/// master, which its transfer before the update reads, holds the weights
/// the checkpoint saves.
std::vector<uint32_t> checkpointSources(const Plan &plan) {
  std::vector<uint32_t> source(plan.buffers.size());
  for (uint32_t id = 0; id < source.size(); ++id)
    source[id] = id;
  const Program *opt = plan.findProgram("optimizer");
  if (!opt || std::none_of(opt->instructions.begin(), opt->instructions.end(),
                           [](const Instruction &i) {
                             return i.opcode == Opcode::OverlapNextStep;
                           }))
    return source;
  for (const Instruction &inst : opt->instructions) {
    if (inst.opcode == Opcode::OverlapNextStep)
      break;
    if (inst.opcode == Opcode::Transfer &&
        plan.buffers[inst.inputs[0]].role == BufferRole::OffloadCopy &&
        plan.buffers[inst.outputs[0]].role == BufferRole::Parameter)
      source[inst.outputs[0]] = inst.inputs[0];
  }
  return source;
}

/// Every piece of the checkpoint, in (rank, buffer) order; the same list on
/// every rank.
std::vector<PlannedPiece> planPieces(const Plan &plan, int64_t ranks) {
  std::vector<std::vector<bool>> stages = buffersOfStages(plan);
  const std::vector<uint32_t> sources = checkpointSources(plan);
  std::map<std::pair<uint32_t, std::string>, bool> seen;
  std::vector<PlannedPiece> out;
  for (int64_t r = 0; r < ranks; ++r) {
    std::vector<int64_t> coords = plan.mesh.empty()
                                      ? std::vector<int64_t>{}
                                      : meshCoordinates(plan.mesh, r);
    const std::vector<bool> &held = stages[size_t(stageOfRank(plan, coords))];
    for (uint32_t id = 0; id < plan.buffers.size(); ++id) {
      const Buffer &b = plan.buffers[id];
      if (!checkpointed(b.role) || !held[id])
        continue;
      const uint32_t source = sources[id];
      TensorBox box = boxOf(plan, plan.buffers[source], coords);
      std::string key = shapeString(box.view) + shapeString(box.offsets) +
                        shapeString(box.sizes) + " " +
                        std::to_string(box.flatOffset) + " " +
                        std::to_string(box.flatCount);
      if (seen.emplace(std::make_pair(id, key), true).second)
        out.push_back({id, source, r, std::move(box)});
    }
  }
  return out;
}

/// Every rank learns whether any rank failed (`mine` non-empty) and, if so,
/// the lowest failing rank's message (prefixed with its number on the
/// others): all ranks throw the cause, whichever the runner reports.
std::string sharedFailure(Communicator *world, const std::string &mine) {
  if (!world || world->size() < 2)
    return mine;
  double first = mine.empty() ? double(world->size()) : double(world->rank());
  world->allReduce(&first, 1, DType::F64, ReduceOp::Min);
  if (first >= double(world->size()))
    return "";
  const int root = int(first);
  const std::string &text = mine;
  double length = double(text.size());
  world->broadcast(&length, 1, DType::F64, root);
  std::vector<int32_t> words((size_t(length) + 3) / 4, 0);
  if (world->rank() == root)
    std::memcpy(words.data(), text.data(), text.size());
  world->broadcast(words.data(), words.size(), DType::I32, root);
  if (world->rank() == root)
    return mine;
  return "rank " + std::to_string(root) + ": " +
         std::string(reinterpret_cast<const char *>(words.data()),
                     size_t(length));
}

const char *roleString(BufferRole role) {
  return role == BufferRole::Parameter          ? "parameter"
         : role == BufferRole::CompressionError ? "compression_error"
                                                : "optimizer_state";
}

} // namespace

void PendingCheckpoint::write(const std::string &file) {
  try {
    if (!mine.empty()) {
      writer.setMetadata("format", "dsc-checkpoint piece file");
      SafetensorsHeader layout = writer.write(tmp + "/" + file);
      checkpointKillPoint("data", iteration);
      // The layout lists the tensors in add order: mine's order.
      for (size_t k = 0; k < mine.size(); ++k) {
        const std::vector<uint8_t> &bytes = writer.bytesOf(k);
        const uint64_t sum = checkpointChecksum(bytes.data(), bytes.size());
        shared[1 + 3 * mine[k]] = double(layout.tensors[k].begin);
        shared[2 + 3 * mine[k]] = double(sum & 0xffffffffu);
        shared[3 + 3 * mine[k]] = double(sum >> 32);
      }
    }
  } catch (const std::exception &e) {
    failure = e.what();
  }
  written.store(true);
}

CheckpointIO::CheckpointIO(const Plan &plan, const MeshGroups &mesh)
    : plan(plan), mesh(mesh) {}

CheckpointIO::~CheckpointIO() = default;

uint64_t
CheckpointIO::begin(const std::string &dir, int64_t consumedSamples,
                    int64_t keep, bool async, const CheckpointStamp &stamp,
                    const std::function<void(uint32_t, void *)> &readBuffer) {
  Communicator *worldComm = mesh.world();
  if (pending)
    throw Error("a checkpoint save is in flight; finish it first");
  const int64_t ranks = worldComm ? worldComm->size() : 1;
  const int64_t me = worldComm ? worldComm->rank() : 0;
  auto save = std::make_unique<PendingCheckpoint>();
  save->dir = dir;
  save->keep = keep;
  save->iteration = stamp.iteration;
  save->optimizerSteps = stamp.optimizerSteps;
  save->seed = stamp.seed;
  save->consumedSamples = consumedSamples;
  save->lossScaler = stamp.lossScaler;
  save->tokens = stamp.tokens;
  save->pieces = planPieces(plan, ranks);

  // One temporary directory, named by rank 0's pid, created before any rank
  // writes into it (the agreement orders the two).
  double token = double(::getpid());
  std::string failure;
  if (me == 0) {
    try {
      beginCheckpointStep(dir, save->iteration, int64_t(token));
    } catch (const Error &e) {
      failure = e.what();
    }
  }
  failure = sharedFailure(worldComm, failure);
  if (!failure.empty())
    throw Error(failure);
  if (worldComm && ranks > 1)
    worldComm->broadcast(&token, 1, DType::F64, 0);
  save->tmp = dir + "/.tmp-" + checkpointStepName(save->iteration) + "-" +
              std::to_string(int64_t(token));

  // The snapshot: this rank's pieces, copied once into the file's data.
  save->shared.assign(1 + 3 * save->pieces.size(), 0.0);
  save->async = async;
  if (async)
    save->writer.reuseStorage(std::move(snapshotStorage));
  try {
    for (size_t p = 0; p < save->pieces.size(); ++p) {
      if (save->pieces[p].rank != me)
        continue;
      const Buffer &b = plan.buffers[save->pieces[p].buffer];
      const uint32_t source = save->pieces[p].source;
      const TensorBox &box = save->pieces[p].box;
      uint8_t *dst = save->writer.reserve(
          b.name, b.dtype,
          box.flatCount >= 0 ? std::vector<int64_t>{box.flatCount} : box.sizes);
      if (plan.buffers[source].bytes)
        readBuffer(source, dst);
      save->mine.push_back(p);
    }
  } catch (const std::exception &e) {
    failure = e.what();
  }
  failure = sharedFailure(worldComm, failure);
  if (!failure.empty()) {
    if (me == 0)
      abandonCheckpointStep(save->tmp);
    throw Error(failure);
  }

  const uint64_t snapshotBytes = save->writer.dataBytes();
  PendingCheckpoint *raw = save.get();
  const std::string file = checkpointDataFileName(me);
  if (async)
    save->thread = std::thread([raw, file] { raw->write(file); });
  else
    save->write(file);
  pending = std::move(save);
  return snapshotBytes;
}

std::optional<std::string> CheckpointIO::finish(bool wait) {
  Communicator *worldComm = mesh.world();
  if (!pending)
    return std::nullopt;
  const int64_t ranks = worldComm ? worldComm->size() : 1;
  const int64_t me = worldComm ? worldComm->rank() : 0;
  if (!wait) {
    double ready = pending->written.load() ? 1.0 : 0.0;
    if (worldComm && ranks > 1)
      worldComm->allReduce(&ready, 1, DType::F64, ReduceOp::Min);
    if (ready < 1.0)
      return std::nullopt;
  }
  // Released on every path out: a failed save is abandoned, not retried.
  std::unique_ptr<PendingCheckpoint> save = std::move(pending);
  if (save->thread.joinable())
    save->thread.join();
  if (save->async)
    snapshotStorage = save->writer.takeStorage();

  std::string failure = sharedFailure(worldComm, save->failure);
  if (!failure.empty()) {
    if (me == 0)
      abandonCheckpointStep(save->tmp);
    throw Error(failure);
  }
  std::vector<double> &shared = save->shared;
  if (worldComm && ranks > 1)
    worldComm->allReduce(shared.data(), shared.size(), DType::F64,
                         ReduceOp::Sum);

  // Rank 0 writes the manifest and commits; the others wait for its word.
  const std::vector<PlannedPiece> &pieces = save->pieces;
  std::string step = save->dir + "/" + checkpointStepName(save->iteration);
  if (me == 0) {
    try {
      CheckpointManifest m;
      m.iteration = save->iteration;
      m.optimizerSteps = save->optimizerSteps;
      m.consumedSamples = save->consumedSamples;
      m.seed = save->seed;
      m.mesh = meshString(plan.mesh);
      m.ranks = ranks;
      m.lossScaler = save->lossScaler;
      m.tokens = save->tokens;
      std::map<uint32_t, size_t> tensorOf;
      std::set<int64_t> writers;
      for (size_t p = 0; p < pieces.size(); ++p) {
        const uint32_t id = pieces[p].buffer;
        const Buffer &b = plan.buffers[id];
        auto [it, fresh] = tensorOf.emplace(id, m.tensors.size());
        if (fresh) {
          CheckpointTensor t;
          t.name = b.name;
          t.role = roleString(b.role);
          t.dtype = b.dtype;
          t.shape = wholeShape(plan, b);
          m.tensors.push_back(std::move(t));
        }
        CheckpointPiece piece;
        piece.box = pieces[p].box;
        piece.file = checkpointDataFileName(pieces[p].rank);
        piece.key = b.name;
        piece.byteOffset = uint64_t(shared[1 + 3 * p]);
        piece.byteLength = plan.buffers[pieces[p].source].bytes;
        piece.checksum =
            uint64_t(shared[2 + 3 * p]) | (uint64_t(shared[3 + 3 * p]) << 32);
        m.tensors[it->second].pieces.push_back(std::move(piece));
        writers.insert(pieces[p].rank);
      }
      for (int64_t r : writers)
        m.files.push_back(checkpointDataFileName(r));
      m.fingerprint = modelFingerprint(m.tensors);
      step = commitCheckpointStep(save->dir, save->tmp, m, save->keep);
    } catch (const Error &e) {
      failure = e.what();
      abandonCheckpointStep(save->tmp);
    }
  }
  failure = sharedFailure(worldComm, failure);
  if (!failure.empty())
    throw Error(failure);
  return step;
}

namespace {

/// One copy of a load: `count` elements from element `from` of a piece to
/// element `to` of the buffer.
struct PieceCopy {
  size_t piece;
  int64_t from, to, count;
};

} // namespace

RestoredCheckpoint CheckpointIO::load(const std::string &path,
                                      const LossScalerConfig *scaling) const {
  Communicator *worldComm = mesh.world();
  std::string failure;
  // Per buffer this rank holds: its new bytes, staged on the host.
  std::vector<std::pair<uint32_t, std::vector<uint8_t>>> staged;
  std::vector<std::string> warnings;
  CheckpointManifest m;
  try {
    CheckpointReader reader(path);
    m = reader.manifest();
    const std::string what = "checkpoint '" + reader.directory() + "'";
    // A saved loss scaler this run's settings (a config's fp16 section)
    // could not have reached, e.g. a scale below its min_loss_scale.
    if (scaling && m.lossScaler &&
        !DynamicLossScaler(*scaling).restore(*m.lossScaler))
      throw Error(what + ": its loss scaler (scale " +
                  std::to_string(m.lossScaler->scale) + ", hysteresis " +
                  std::to_string(m.lossScaler->hysteresisLeft) +
                  " left) cannot be this run's (min_loss_scale " +
                  std::to_string(scaling->minScale) + ", hysteresis " +
                  std::to_string(scaling->hysteresis) +
                  "): resume with the fp16 settings it was saved with");
    // Every rank checks every tensor, so all give the same verdict on a
    // checkpoint of another model, naming the first tensor that differs.
    // A checkpoint of weights only (an imported model at step 0) starts
    // the optimizer afresh: its state keeps its initial zeros.
    bool weightsOnly = m.optimizerSteps == 0;
    for (const CheckpointTensor &t : m.tensors)
      weightsOnly = weightsOnly && t.role == "parameter";
    // A 1-bit optimizer's errors are a row per rank of its group: saved by
    // another group size (or not at all) they start from zeros, as
    // DeepSpeed's 1-bit optimizers reset them at every load.
    std::set<std::string> resetErrors;
    for (const Buffer &b : plan.buffers) {
      if (b.role != BufferRole::CompressionError)
        continue;
      const CheckpointTensor *t = m.find(b.name);
      if (weightsOnly || !t || t->shape != wholeShape(plan, b))
        resetErrors.insert(b.name);
    }
    if (!resetErrors.empty())
      warnings.push_back(
          "the 1-bit optimizer's compression errors (" +
          std::to_string(resetErrors.size()) + " tensors, e.g. '" +
          *resetErrors.begin() + "') start from zeros: " + what +
          " holds them for another data-parallel group (or none)");
    auto restored = [&](const Buffer &b) {
      return checkpointed(b.role) &&
             !(weightsOnly && b.role != BufferRole::Parameter) &&
             !resetErrors.count(b.name);
    };
    std::set<std::string> planned;
    for (const Buffer &b : plan.buffers) {
      if (!restored(b))
        continue;
      planned.insert(b.name);
      const CheckpointTensor *t = m.find(b.name);
      const std::vector<int64_t> shape = wholeShape(plan, b);
      if (!t)
        throw Error(what + " has no tensor '" + b.name + "' (" +
                    roleName(b.role) + " " + dtypeName(b.dtype) + " " +
                    shapeString(shape) +
                    ") that the plan needs: is it a checkpoint of "
                    "another model or optimizer?");
      const bool floats = b.dtype != DType::I32 && t->dtype != DType::I32;
      if (!shapesCompatible(shape, t->shape) ||
          (t->dtype != b.dtype && !floats))
        throw Error(what + ": tensor '" + b.name + "' is " +
                    dtypeName(t->dtype) + " " + shapeString(t->shape) +
                    " in the checkpoint but " + dtypeName(b.dtype) + " " +
                    shapeString(shape) + " in the plan");
    }
    // An inference plan serves a training checkpoint's weights: its
    // optimizer states (and the training step's) stay in the file.
    const bool weightsWanted = isInferencePlan(plan);
    // Another optimizer's errors (a 1-bit run resumed by AdamW, or by
    // another group size) are not this plan's state.
    std::vector<std::string> dropped;
    for (const CheckpointTensor &t : m.tensors)
      if (t.role == "compression_error" && !planned.count(t.name) &&
          !resetErrors.count(t.name))
        dropped.push_back(t.name);
    if (!dropped.empty())
      warnings.push_back(what +
                         " holds a 1-bit optimizer's compression "
                         "errors (" +
                         std::to_string(dropped.size()) + " tensors, e.g. '" +
                         dropped.front() +
                         "') that this plan's optimizer does not keep: "
                         "dropped");
    for (const CheckpointTensor &t : m.tensors)
      if (!planned.count(t.name) && t.role != "compression_error" &&
          !resetErrors.count(t.name) &&
          !(weightsWanted && t.role != "parameter"))
        throw Error(what + " has tensor '" + t.name + "' (" + t.role + " " +
                    dtypeName(t.dtype) + " " + shapeString(t.shape) +
                    ") that the plan does not: is it a checkpoint of "
                    "another model or optimizer?");

    // This rank's buffers, mapped onto the pieces; the pieces read once.
    const std::vector<bool> held =
        buffersOfStages(plan)[size_t(stageOfRank(plan, mesh.coordinates()))];
    for (uint32_t id = 0; id < plan.buffers.size(); ++id) {
      const Buffer &b = plan.buffers[id];
      if (held[id] && resetErrors.count(b.name))
        staged.emplace_back(id, std::vector<uint8_t>(b.bytes, 0));
      if (!restored(b) || !held[id])
        continue;
      const CheckpointTensor &t = *m.find(b.name);
      BoxIndexer mine(boxOf(plan, b, mesh.coordinates()));
      std::vector<BoxIndexer> stored;
      for (const CheckpointPiece &p : t.pieces)
        stored.emplace_back(p.box);
      std::vector<PieceCopy> copies;
      size_t last = 0;
      for (int64_t i = 0; i < mine.count();) {
        const int64_t w = mine.whole(i);
        int64_t j = stored[last].local(w);
        for (size_t p = 0; j < 0 && p < stored.size(); ++p)
          if ((j = stored[p].local(w)) >= 0)
            last = p;
        if (j < 0) // the manifest's coverage check makes this unreachable
          throw Error(what + ": tensor '" + b.name +
                      "' has no piece with "
                      "element " +
                      std::to_string(w));
        const int64_t n = std::min(mine.runFrom(i), stored[last].runFrom(j));
        if (!copies.empty() && copies.back().piece == last &&
            copies.back().from + copies.back().count == j &&
            copies.back().to + copies.back().count == i)
          copies.back().count += n;
        else
          copies.push_back({last, j, i, n});
        i += n;
      }
      std::map<size_t, std::vector<uint8_t>> bytesOf;
      for (const PieceCopy &c : copies)
        if (!bytesOf.count(c.piece))
          bytesOf[c.piece] = reader.readPiece(t, t.pieces[c.piece]);
      std::vector<uint8_t> out(b.bytes);
      const uint64_t from = dtypeSize(t.dtype), to = dtypeSize(b.dtype);
      for (const PieceCopy &c : copies) {
        const uint8_t *src = bytesOf[c.piece].data() + c.from * from;
        uint8_t *dst = out.data() + c.to * to;
        if (t.dtype == b.dtype)
          std::memcpy(dst, src, c.count * to);
        else
          convertFloats(src, t.dtype, dst, b.dtype, c.count);
      }
      staged.emplace_back(id, std::move(out));
    }
  } catch (const Error &e) {
    failure = e.what();
  }
  // No rank changes anything unless every rank found its part sound.
  failure = sharedFailure(worldComm, failure);
  if (!failure.empty())
    throw Error(failure);

  return {std::move(m), std::move(staged), std::move(warnings)};
}
