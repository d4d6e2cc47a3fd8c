//===- CheckpointIO.h - A rank's checkpoint saves and loads -----*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Sharded checkpoints (docs/checkpoints.md) through the format library
// (DscRuntimeCheckpoint): each rank writes only the pieces of its buffers no
// lower rank holds, rank 0 commits the manifest, and a load reads only the
// pieces that overlap this rank's buffers, whatever plan saved them. Every
// rank calls each of these at the same points; a failure on any rank is
// shared, so all throw it. This part owns the save in flight.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_LIB_RUNTIME_EXEC_CHECKPOINTIO_H
#define DSC_LIB_RUNTIME_EXEC_CHECKPOINTIO_H

#include "MeshGroups.h"

#include "dsc/Runtime/Checkpoint.h"
#include "dsc/Runtime/LossScaler.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dsc::rt {

struct PendingCheckpoint;

/// What a checkpoint records beside the tensors.
struct CheckpointStamp {
  int64_t iteration = 0, optimizerSteps = 0;
  uint64_t seed = 0;
  std::optional<LossScalerState> lossScaler;
  std::optional<TokenCounts> tokens;
};

/// A load's result, checked on every rank before any rank changes
/// anything: the manifest, and this rank's buffers' new bytes.
struct RestoredCheckpoint {
  CheckpointManifest manifest;
  std::vector<std::pair<uint32_t, std::vector<uint8_t>>> buffers;
  /// What the load could not restore as saved and started afresh (a 1-bit
  /// optimizer's errors under another group size), for the log.
  std::vector<std::string> warnings;
};

class CheckpointIO {
public:
  CheckpointIO(const Plan &plan, const MeshGroups &mesh);
  ~CheckpointIO();
  CheckpointIO(const CheckpointIO &) = delete;
  CheckpointIO &operator=(const CheckpointIO &) = delete;

  /// At a step boundary: creates the temporary step directory and copies
  /// this rank's pieces into host memory through `readBuffer` (its one cost
  /// to training); with `async` a thread of its own writes and fsyncs the
  /// file while training goes on. Returns the snapshot's host bytes. Error
  /// if a save is in flight.
  uint64_t begin(const std::string &dir, int64_t consumedSamples, int64_t keep,
                 bool async, const CheckpointStamp &stamp,
                 const std::function<void(uint32_t, void *)> &readBuffer);
  /// Commits the save in flight (rank 0 writes the manifest and renames the
  /// step into place; then `dir`/latest names it and only the newest `keep`
  /// stay). Without `wait` it commits only when every rank's writer has
  /// finished, else returns nullopt. Returns the step directory.
  std::optional<std::string> finish(bool wait);
  bool inFlight() const { return pending != nullptr; }
  /// Reads `path` (a step directory, or one whose `latest` names one) for
  /// this rank's buffers; `scaling` is the run's loss scaler settings, null
  /// when it does not scale. Checks the manifest, the files and the
  /// checksums against the plan, on every rank.
  RestoredCheckpoint load(const std::string &path,
                          const LossScalerConfig *scaling) const;

private:
  const Plan &plan;
  const MeshGroups &mesh;
  std::unique_ptr<PendingCheckpoint> pending;
  /// The last asynchronous snapshot's host buffers, filled again by the
  /// next (SafetensorsWriter::reuseStorage).
  std::vector<std::vector<uint8_t>> snapshotStorage;
};

} // namespace dsc::rt

#endif // DSC_LIB_RUNTIME_EXEC_CHECKPOINTIO_H
