//===- CheckpointFiles.cpp - step directories: atomic save, checked read --===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// What is atomic and why (docs/checkpoints.md): the ranks write into a
// hidden temporary directory; every file is fsynced, then the directory;
// one rename makes the step visible under its final name, and only then is
// `latest` replaced (a temporary file renamed over it). A crash at any
// instant leaves `latest` naming a complete step: a reader that follows it
// never sees a partial one, and a half-written temporary directory is never
// named by anything.
//
//===----------------------------------------------------------------------===//

#include "FileIO.h"
#include "Shapes.h"
#include "dsc/Runtime/Checkpoint.h"
#include "dsc/Runtime/Error.h"
#include "dsc/Runtime/Safetensors.h"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <unistd.h>

using namespace dsc::rt;
using namespace dsc::rt::checkpoint;

void dsc::rt::prepareCheckpointDirectory(const std::string &dir) {
  makeDirectories(dir);
  if (::access(dir.c_str(), W_OK) != 0)
    throw Error("checkpoint directory '" + dir + "' is not writable");
}

std::vector<std::string>
dsc::rt::reclaimUnfinishedSaves(const std::string &dir) {
  std::vector<std::string> reclaimed;
  if (!isDirectory(dir))
    return reclaimed;
  for (const std::string &entry : listDirectory(dir)) {
    const std::string path = dir + "/" + entry;
    // beginCheckpointStep's directories and commitCheckpointStep's marker
    // file, as a killed or failed save leaves them.
    const bool stepDir = entry.rfind(".tmp-step-", 0) == 0 && isDirectory(path);
    const bool marker = entry == "latest.tmp" && !isDirectory(path);
    if (!stepDir && !marker)
      continue;
    removeTree(path);
    reclaimed.push_back(entry);
  }
  if (!reclaimed.empty())
    syncDirectory(dir);
  std::sort(reclaimed.begin(), reclaimed.end());
  return reclaimed;
}

std::string dsc::rt::beginCheckpointStep(const std::string &dir,
                                         int64_t iteration, int64_t token) {
  makeDirectories(dir);
  const std::string tmp = dir + "/.tmp-" + checkpointStepName(iteration) + "-" +
                          std::to_string(token);
  removeTree(tmp);
  makeDirectory(tmp, /*mayExist=*/false);
  return tmp;
}

void dsc::rt::checkpointKillPoint(const char *phase, int64_t iteration) {
  static const char *at = std::getenv("DSC_CHECKPOINT_KILL_AT");
  if (at &&
      std::string(at) == std::string(phase) + ":" + std::to_string(iteration))
    std::raise(SIGKILL);
}

std::string dsc::rt::checkpointDataFileName(int64_t rank) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "rank-%05lld.safetensors", (long long)rank);
  return buf;
}

std::string dsc::rt::commitCheckpointStep(const std::string &dir,
                                          const std::string &tmp,
                                          const CheckpointManifest &m,
                                          int64_t keep) {
  const std::string text = formatManifest(m);
  checkpointKillPoint("manifest", m.iteration);
  writeFileDurably(tmp + "/manifest.json", text.data(), text.size());
  syncDirectory(tmp);
  checkpointKillPoint("rename", m.iteration);
  const std::string name = checkpointStepName(m.iteration);
  const std::string step = dir + "/" + name;
  // A step saved again (a run resumed from an earlier step): the new one
  // replaces it. Between the removal and the rename `latest` may name a
  // missing step; it is re-pointed right after.
  if (pathExists(step))
    removeTree(step);
  renamePath(tmp, step);
  syncDirectory(dir);
  checkpointKillPoint("marker", m.iteration);
  const std::string marker = dir + "/latest";
  const std::string markerTmp = marker + ".tmp";
  const std::string line = name + "\n";
  writeFileDurably(markerTmp, line.data(), line.size());
  checkpointKillPoint("marker-rename", m.iteration);
  renamePath(markerTmp, marker);
  syncDirectory(dir);

  if (keep > 0) {
    std::vector<std::string> steps;
    for (const std::string &entry : listDirectory(dir))
      if (entry.size() == name.size() && entry.rfind("step-", 0) == 0 &&
          isDirectory(dir + "/" + entry))
        steps.push_back(entry);
    std::sort(steps.begin(), steps.end());
    // The newest `keep` by step number; the one just written always stays.
    for (size_t i = 0; i + size_t(keep) < steps.size(); ++i)
      if (steps[i] != name)
        removeTree(dir + "/" + steps[i]);
  }
  return step;
}

void dsc::rt::abandonCheckpointStep(const std::string &tmp) {
  try {
    removeTree(tmp);
  } catch (const Error &) {
    // Best effort: a leftover hidden directory is named by nothing.
  }
}

CheckpointReader::CheckpointReader(const std::string &path)
    : stepDir(resolveCheckpointStep(path)) {
  const std::string file = stepDir + "/manifest.json";
  std::vector<uint8_t> bytes = readWholeFile(file, "checkpoint manifest");
  m = parseManifest(std::string(bytes.begin(), bytes.end()), file);
}

std::vector<uint8_t> CheckpointReader::readPiece(const CheckpointTensor &tensor,
                                                 const CheckpointPiece &piece) {
  const std::string path = stepDir + "/" + piece.file;
  const std::string what =
      "checkpoint data file '" + path + "': tensor '" + tensor.name + "'";
  // The header is read each time: pieces are few per file and rank, and a
  // file changed between two reads is caught by the checksum anyway.
  SafetensorsHeader header = readSafetensorsHeader(path);
  const SafetensorsTensor *entry = header.find(piece.key);
  if (!entry)
    throw Error(what + ": the file has no tensor '" + piece.key +
                "' that the manifest names");
  std::vector<int64_t> expectShape =
      piece.box.flatCount >= 0 ? std::vector<int64_t>{piece.box.flatCount}
                               : piece.box.sizes;
  if (entry->dtype != tensor.dtype || entry->shape != expectShape ||
      entry->begin != piece.byteOffset ||
      entry->end - entry->begin != piece.byteLength)
    throw Error(
        what + ": the file holds '" + piece.key + "' as " +
        safetensorsDTypeName(entry->dtype) + " " + shapeText(entry->shape) +
        " at bytes " + std::to_string(entry->begin) + " to " +
        std::to_string(entry->end) + ", the manifest says " +
        safetensorsDTypeName(tensor.dtype) + " " + shapeText(expectShape) +
        " at bytes " + std::to_string(piece.byteOffset) + " to " +
        std::to_string(piece.byteOffset + piece.byteLength));
  ReadFile f(path, "checkpoint data file");
  std::vector<uint8_t> bytes(piece.byteLength);
  f.read(piece.byteOffset, bytes.data(), bytes.size());
  if (checkpointChecksum(bytes.data(), bytes.size()) != piece.checksum)
    throw Error(what + ": checksum mismatch in bytes " +
                std::to_string(piece.byteOffset) + " to " +
                std::to_string(piece.byteOffset + piece.byteLength) +
                " (the file is corrupt)");
  return bytes;
}

std::vector<uint8_t> dsc::rt::readWholeTensor(CheckpointReader &reader,
                                              const CheckpointTensor &t) {
  const uint64_t size = dtypeSize(t.dtype);
  std::vector<uint8_t> out(uint64_t(elementCount(t.shape)) * size);
  for (const CheckpointPiece &p : t.pieces) {
    std::vector<uint8_t> bytes = reader.readPiece(t, p);
    BoxIndexer box(p.box);
    for (int64_t j = 0; j < box.count();) {
      const int64_t n = box.runFrom(j);
      std::copy_n(bytes.data() + j * size, n * size,
                  out.data() + box.whole(j) * size);
      j += n;
    }
  }
  return out;
}
