//===- WeightsCheckpoint.cpp - model weights in and out -------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/WeightsCheckpoint.h"

#include "FileIO.h"
#include "dsc/Runtime/Checkpoint.h"
#include "dsc/Runtime/Error.h"
#include "dsc/Runtime/Safetensors.h"

#include <unistd.h>

using namespace dsc::rt;

namespace {

template <typename Fn> bool guarded(std::string &error, Fn &&fn) noexcept {
  try {
    fn();
    return true;
  } catch (const std::bad_alloc &) {
    error = "out of memory";
  } catch (const std::exception &e) {
    error = e.what();
  }
  return false;
}

} // namespace

bool dsc::rt::readSafetensorsTensors(const std::string &path,
                                     std::vector<WholeTensor> &out,
                                     std::string &error) noexcept {
  return guarded(error, [&] {
    SafetensorsHeader header = readSafetensorsHeader(path);
    ReadFile file(path, "safetensors file");
    for (const SafetensorsTensor &t : header.tensors) {
      WholeTensor w;
      w.name = t.name;
      w.dtype = t.dtype;
      w.shape = t.shape;
      w.bytes.resize(t.end - t.begin);
      file.read(t.begin, w.bytes.data(), w.bytes.size());
      out.push_back(std::move(w));
    }
  });
}

bool dsc::rt::writeWeightsCheckpoint(const std::string &dir,
                                     const std::vector<WholeTensor> &tensors,
                                     uint64_t seed,
                                     std::string &error) noexcept {
  return guarded(error, [&] {
    prepareCheckpointDirectory(dir);
    const std::string tmp = beginCheckpointStep(dir, 0, int64_t(::getpid()));
    try {
      const std::string file = checkpointDataFileName(0);
      SafetensorsWriter writer;
      for (const WholeTensor &t : tensors)
        writer.add(t.name, t.dtype, t.shape, t.bytes.data(), t.bytes.size());
      writer.setMetadata("format", "dsc-checkpoint piece file");
      SafetensorsHeader layout = writer.write(tmp + "/" + file);

      CheckpointManifest m;
      m.seed = seed;
      m.files.push_back(file);
      for (size_t i = 0; i < tensors.size(); ++i) {
        const WholeTensor &w = tensors[i];
        CheckpointTensor t;
        t.name = w.name;
        t.role = "parameter";
        t.dtype = w.dtype;
        t.shape = w.shape;
        CheckpointPiece piece;
        piece.box.view = w.shape;
        piece.box.offsets.assign(w.shape.size(), 0);
        piece.box.sizes = w.shape;
        piece.file = file;
        piece.key = w.name;
        piece.byteOffset = layout.tensors[i].begin;
        piece.byteLength = w.bytes.size();
        piece.checksum = checkpointChecksum(w.bytes.data(), w.bytes.size());
        t.pieces.push_back(std::move(piece));
        m.tensors.push_back(std::move(t));
      }
      m.fingerprint = modelFingerprint(m.tensors);
      commitCheckpointStep(dir, tmp, m, /*keep=*/0);
    } catch (...) {
      abandonCheckpointStep(tmp);
      throw;
    }
  });
}

bool dsc::rt::readCheckpointParameters(const std::string &path,
                                       std::vector<WholeTensor> &out,
                                       std::string &error) noexcept {
  return guarded(error, [&] {
    CheckpointReader reader(path);
    for (const CheckpointTensor &t : reader.manifest().tensors) {
      if (t.role != "parameter")
        continue;
      WholeTensor w;
      w.name = t.name;
      w.dtype = t.dtype;
      w.shape = t.shape;
      w.bytes = readWholeTensor(reader, t);
      out.push_back(std::move(w));
    }
  });
}

bool dsc::rt::writeSafetensorsTensors(
    const std::string &path, const std::vector<WholeTensor> &tensors,
    const std::vector<std::pair<std::string, std::string>> &metadata,
    std::string &error) noexcept {
  return guarded(error, [&] {
    SafetensorsWriter writer;
    for (const WholeTensor &t : tensors)
      writer.add(t.name, t.dtype, t.shape, t.bytes.data(), t.bytes.size());
    for (const auto &[key, value] : metadata)
      writer.setMetadata(key, value);
    writer.write(path);
  });
}
