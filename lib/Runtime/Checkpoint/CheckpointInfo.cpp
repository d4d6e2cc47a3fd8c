//===- CheckpointInfo.cpp - a checkpoint's manifest as a table ------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// What `dsc-translate --checkpoint-info DIR` prints: the step, the plan that
// wrote it, and one row per tensor with its shape, bytes and how it was
// split (boxes of a view, ZeRO chunks of each box).
//
//===----------------------------------------------------------------------===//

#include "Shapes.h"
#include "dsc/Runtime/Checkpoint.h"
#include "dsc/Runtime/Safetensors.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

using namespace dsc::rt;
using namespace dsc::rt::checkpoint;

namespace {

std::string padded(const std::string &s, size_t width) {
  return s.size() >= width ? s + " " : s + std::string(width - s.size(), ' ');
}

/// "2 boxes [128, 64] of [128, 3, 128], 2 chunks each", "whole".
std::string layoutText(const CheckpointTensor &t) {
  std::map<std::string, int> chunksPerBox;
  std::string sizes, view;
  for (const CheckpointPiece &p : t.pieces) {
    ++chunksPerBox[shapeText(p.box.view) + shapeText(p.box.offsets) +
                   shapeText(p.box.sizes)];
    sizes = shapeText(p.box.sizes);
    view = shapeText(p.box.view);
  }
  const size_t boxes = chunksPerBox.size();
  int chunks = 0;
  for (const auto &[box, n] : chunksPerBox)
    chunks = std::max(chunks, n);
  if (boxes == 1 && chunks == 1 &&
      t.pieces[0].box.sizes == t.pieces[0].box.view)
    return "whole";
  std::string out = boxes == 1 && t.pieces[0].box.sizes == t.pieces[0].box.view
                        ? "whole " + view
                        : std::to_string(boxes) +
                              (boxes == 1 ? " box " : " boxes ") + sizes +
                              " of " + view;
  if (chunks > 1)
    out += ", " + std::to_string(chunks) + " chunks each";
  return out;
}

} // namespace

std::string dsc::rt::formatCheckpointInfo(const std::string &stepDir,
                                          const CheckpointManifest &m) {
  std::string out = "checkpoint '" + stepDir + "': format " +
                    std::to_string(m.version) + ", iteration " +
                    std::to_string(m.iteration) + " (" +
                    std::to_string(m.optimizerSteps) + " optimizer steps), " +
                    std::to_string(m.consumedSamples) +
                    " samples consumed, seed " + std::to_string(m.seed) + "\n";
  out += "plan: " +
         (m.mesh.empty() && m.ranks == 1
              ? std::string("one rank")
              : (m.mesh.empty() ? std::string("no mesh") : m.mesh) + " on " +
                    std::to_string(m.ranks) + " ranks") +
         "; fingerprint " + m.fingerprint + "; loss scaler: ";
  if (m.lossScaler) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "scale %g, %lld skipped steps",
                  m.lossScaler->scale, (long long)m.lossScaler->skippedSteps);
    out += buf;
  } else {
    out += "none";
  }
  out += "\nfiles:";
  for (const std::string &f : m.files)
    out += " " + f;
  out += "\n\n";
  size_t nameWidth = 6;
  for (const CheckpointTensor &t : m.tensors)
    nameWidth = std::max(nameWidth, t.name.size() + 2);
  out += padded("tensor", nameWidth) + padded("role", 17) + padded("dtype", 7) +
         padded("shape", 16) + padded("bytes", 11) + padded("pieces", 8) +
         "layout\n";
  uint64_t bytes = 0, elements = 0;
  for (const CheckpointTensor &t : m.tensors) {
    const int64_t n = elementCount(t.shape);
    const uint64_t b = uint64_t(n) * dtypeSize(t.dtype);
    bytes += b;
    elements += uint64_t(n);
    out += padded(t.name, nameWidth) + padded(t.role, 17) +
           padded(safetensorsDTypeName(t.dtype), 7) +
           padded(shapeText(t.shape), 16) + padded(std::to_string(b), 11) +
           padded(std::to_string(t.pieces.size()), 8) + layoutText(t) + "\n";
  }
  out += "\n" + std::to_string(m.tensors.size()) + " tensors, " +
         std::to_string(elements) + " elements, " + std::to_string(bytes) +
         " bytes\n";
  return out;
}

bool dsc::rt::describeCheckpoint(const std::string &path, std::string &table,
                                 std::string &error) noexcept {
  try {
    CheckpointReader reader(path);
    table = formatCheckpointInfo(reader.directory(), reader.manifest());
    return true;
  } catch (const std::exception &e) {
    error = e.what();
  } catch (...) {
    error = "unknown error";
  }
  return false;
}
