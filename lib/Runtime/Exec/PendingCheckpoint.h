//===- PendingCheckpoint.h - A save between its halves ----------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// What CheckpointIO::begin leaves for CheckpointIO::finish: the pieces
// every rank agreed on, this rank's snapshot of its own (in the safetensors
// writer, host memory), and the writer's result. With --save-async a thread
// of its own writes the file; its destructor joins that thread.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_LIB_RUNTIME_EXEC_PENDINGCHECKPOINT_H
#define DSC_LIB_RUNTIME_EXEC_PENDINGCHECKPOINT_H

#include "dsc/Runtime/Checkpoint.h"
#include "dsc/Runtime/Safetensors.h"

#include <atomic>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace dsc::rt {

/// A piece of the checkpoint: buffer `buffer` as world rank `rank` holds it.
struct PlannedPiece {
  /// The buffer whose tensor (name, role, whole shape) the piece is of,
  /// and the buffer its bytes are read from: the same, except for a
  /// parameter of a delayed parameter update, whose current values are its
  /// master's (the parameter itself is a step behind).
  uint32_t buffer, source;
  int64_t rank;
  TensorBox box;
};

struct PendingCheckpoint {
  std::string dir, tmp;
  int64_t keep = 0, iteration = 0, optimizerSteps = 0, consumedSamples = 0;
  uint64_t seed = 0;
  std::optional<LossScalerState> lossScaler;
  std::optional<TokenCounts> tokens;
  /// Every rank's pieces (the same list on every rank).
  std::vector<PlannedPiece> pieces;
  /// This rank's pieces, in the writer's order, and their snapshot.
  std::vector<size_t> mine;
  SafetensorsWriter writer;
  /// Per piece [offset, checksum low 32 bits, high 32 bits] after a flag:
  /// summed over the ranks at the commit (each piece has one writer).
  std::vector<double> shared;
  /// What went wrong writing, or "".
  std::string failure;
  std::atomic<bool> written{false};
  bool async = false;
  std::thread thread;

  /// Writes this rank's file `tmp`/`file` and fills `shared` (or
  /// `failure`), then sets `written`.
  void write(const std::string &file);
  ~PendingCheckpoint() {
    if (thread.joinable())
      thread.join();
  }
};

} // namespace dsc::rt

#endif // DSC_LIB_RUNTIME_EXEC_PENDINGCHECKPOINT_H
