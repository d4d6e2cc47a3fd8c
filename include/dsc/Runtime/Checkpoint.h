//===- Checkpoint.h - sharded checkpoints: manifest and boxes ---*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// A checkpoint is a directory per step (DIR/step-00000010/) holding a
// manifest.json and safetensors data files (docs/checkpoints.md). The
// manifest names every whole tensor (name, dtype, global shape) and, for each
// piece stored, the part of the whole it is (a box in a view of the tensor,
// or a flat range of such a box: a ZeRO chunk), where its bytes are and their
// checksum; any plan loads it by mapping its own parts onto the pieces
// through the tensor's flat element index. This header is the format only
// (no executor): the model import reads the same files.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_CHECKPOINT_H
#define DSC_RUNTIME_CHECKPOINT_H

#include "dsc/Runtime/LossScaler.h"
#include "dsc/Runtime/Plan.h"
#include "dsc/Runtime/TokenSchedule.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dsc::rt {

/// Bumped when the manifest's meaning changes; a reader refuses others.
/// (Version 2: pieces carry XXH3-64 checksums, "xxh3_64", where version 1
/// had FNV-1a 64.)
constexpr int64_t kCheckpointFormatVersion = 2;
/// The manifest's hash of its own text (xxh3_64 of the text with the
/// placeholder where the hash goes), its last head key; a manifest
/// written before it existed has none and is read unchecked.
inline constexpr const char *kManifestChecksumKey = "manifest_xxh3_64";
inline constexpr const char *kManifestChecksumPlaceholder = "0000000000000000";

//===----------------------------------------------------------------------===//
// Parts of a whole tensor
//===----------------------------------------------------------------------===//

/// A set of elements of a whole tensor: the box [offsets, offsets + sizes)
/// of `view` (the tensor's shape seen with the dims a split needs: the same
/// elements in the same row-major order, so numElements(view) is the
/// tensor's), and of that box, flattened row-major, the `flatCount` elements
/// from `flatOffset` (a ZeRO chunk, which need not be a box); flatCount -1
/// means the whole box. Element j of the part is element flatOffset + j of
/// the flattened box.
struct TensorBox {
  std::vector<int64_t> view, offsets, sizes;
  int64_t flatOffset = 0, flatCount = -1;
  /// The elements of the part (-1 when the box is malformed).
  int64_t count() const;
  bool operator==(const TensorBox &o) const {
    return view == o.view && offsets == o.offsets && sizes == o.sizes &&
           flatOffset == o.flatOffset && count() == o.count();
  }
};
/// "" when `box` is a part of a tensor of `wholeElements` elements;
/// otherwise what is wrong ("box offset 64 + size 128 exceeds view
/// dimension 1 (128)").
std::string checkTensorBox(const TensorBox &box, int64_t wholeElements);

/// Maps a part's elements to the whole tensor's flat (row-major) indices
/// and back. The box must have passed checkTensorBox.
class BoxIndexer {
public:
  explicit BoxIndexer(const TensorBox &box);
  int64_t count() const { return elements; }
  /// The whole tensor's flat index of the part's element `j`.
  int64_t whole(int64_t j) const;
  /// The part's element at whole index `w`, or -1 when it holds none.
  int64_t local(int64_t w) const;
  /// How many elements from `j` on have consecutive whole indices.
  int64_t runFrom(int64_t j) const;

private:
  std::vector<int64_t> view, offsets, sizes;
  int64_t flatOffset = 0, elements = 0, inner = 1;
};

/// Whether two shapes name the same elements in the same order, one a
/// refinement of the other ([128, 384] and [128, 3, 128]; not [384, 128]):
/// the same element count, and every running product of the coarser is one
/// of the finer's.
bool shapesCompatible(const std::vector<int64_t> &a,
                      const std::vector<int64_t> &b);

//===----------------------------------------------------------------------===//
// The manifest
//===----------------------------------------------------------------------===//

/// One stored piece of a tensor: tensor `key` of data file `file` (a name in
/// the step directory), bytes [byteOffset, byteOffset + byteLength) of the
/// file, the part `box` of the whole, in the tensor's dtype.
struct CheckpointPiece {
  TensorBox box;
  std::string file, key;
  uint64_t byteOffset = 0, byteLength = 0;
  /// FNV-1a 64 of the bytes.
  uint64_t checksum = 0;
};

struct CheckpointTensor {
  std::string name;
  /// "parameter" or "optimizer_state".
  std::string role;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<CheckpointPiece> pieces;
};

struct CheckpointManifest {
  int64_t version = kCheckpointFormatVersion;
  /// Iterations done (the directory's step-N), optimizer steps done (the
  /// learning-rate schedule's and Adam's position; fewer than iterations by
  /// the steps fp16 loss scaling skipped), samples consumed.
  int64_t iteration = 0, optimizerSteps = 0, consumedSamples = 0;
  /// The run's seed: the data order and dropout masks derive from it, the
  /// step and the sample count.
  uint64_t seed = 0;
  /// The plan that wrote it: its mesh ("dp=2 tp=2"; "" for one rank) and
  /// rank count.
  std::string mesh;
  int64_t ranks = 1;
  /// modelFingerprint(tensors), hex.
  std::string fingerprint;
  std::optional<LossScalerState> lossScaler;
  /// Tokens consumed and the token schedule's counters (TokenSchedule.h):
  /// with a curriculum the tokens are not the samples times one length.
  /// Absent from checkpoints of runs that did not count them.
  std::optional<TokenCounts> tokens;
  std::vector<CheckpointTensor> tensors;
  /// The data files, names in the step directory.
  std::vector<std::string> files;

  const CheckpointTensor *find(const std::string &name) const;
};

/// A piece's checksum: XXH3-64 (xxHash's XXH3_64bits, seed 0), which runs
/// at memory speed (FNV-1a, byte by byte, took 2.3 s a GB-and-a-half
/// snapshot).
uint64_t checkpointChecksum(const uint8_t *data, size_t size);
/// FNV-1a 64, as 16 hex digits, of every tensor's name, dtype and shape in
/// name order.
std::string modelFingerprint(const std::vector<CheckpointTensor> &tensors);

/// The manifest as JSON text (docs/checkpoints.md).
std::string formatManifest(const CheckpointManifest &m);
/// Parses and checks a manifest: its fields and types, every piece's box
/// and byte range, and that each tensor's pieces cover it exactly (no
/// overlap, no gap). Throws Error naming `file` and the tensor.
CheckpointManifest parseManifest(const std::string &text,
                                 const std::string &file);

/// The manifest as a human table: the step, the plan, one row per tensor
/// (role, dtype, shape, bytes, pieces, how it was split).
std::string formatCheckpointInfo(const std::string &stepDir,
                                 const CheckpointManifest &m);
/// The table of the step `path` names (a directory with `latest`, or a step
/// directory), checked as a load checks the manifest; for tools built
/// without exceptions (dsc-translate): false and `error` on failure.
bool describeCheckpoint(const std::string &path, std::string &table,
                        std::string &error) noexcept;

/// "step-00000010".
std::string checkpointStepName(int64_t iteration);
/// The step directory `path` names: `path` itself when it holds a
/// manifest.json, else the step named by `path`/latest. Throws Error.
std::string resolveCheckpointStep(const std::string &path);

//===----------------------------------------------------------------------===//
// Directories: writing a step atomically, reading pieces
//===----------------------------------------------------------------------===//

/// Creates `dir` and its parents if absent and checks that it is writable,
/// so that a run fails before training rather than at its first save.
void prepareCheckpointDirectory(const std::string &dir);
/// Removes what saves into `dir` that were killed or failed left behind
/// (their hidden temporary step directories and the `latest` marker's
/// temporary file) and returns their names, sorted. Call it before any save
/// of this run has begun: it cannot tell another live run's save from a
/// dead one's.
std::vector<std::string> reclaimUnfinishedSaves(const std::string &dir);
/// Creates `dir` (if absent) and an empty `dir`/.tmp-step-N-<token> for the
/// ranks to write into; returns its path.
std::string beginCheckpointStep(const std::string &dir, int64_t iteration,
                                int64_t token);
/// The data file name of world rank `rank`: "rank-00003.safetensors".
std::string checkpointDataFileName(int64_t rank);
/// Writes `m` as `tmp`/manifest.json, fsyncs `tmp`, renames it to
/// `dir`/step-N (replacing an older directory of that name), fsyncs `dir`,
/// then points `dir`/latest at it (a temporary file renamed over the
/// marker) and removes all but the newest `keep` steps (0: none). Returns
/// the step directory.
std::string commitCheckpointStep(const std::string &dir, const std::string &tmp,
                                 const CheckpointManifest &m, int64_t keep);
/// A crash test's hook: SIGKILLs this process at `phase` of the save of
/// `iteration` when the environment has DSC_CHECKPOINT_KILL_AT=phase:N
/// ("data": a rank's file written; "manifest", "rename", "marker",
/// "marker-rename": before each step of the commit). Nothing otherwise.
void checkpointKillPoint(const char *phase, int64_t iteration);
/// Removes a temporary step directory after a failed save.
void abandonCheckpointStep(const std::string &tmp);

/// A step directory open for reading: the manifest, checked; pieces are
/// read on demand, each checked against its file's safetensors header and
/// its checksum. Touches no file the manifest does not list.
class CheckpointReader {
public:
  /// `path`: a step directory, or a directory with a `latest` marker.
  explicit CheckpointReader(const std::string &path);
  const std::string &directory() const { return stepDir; }
  const CheckpointManifest &manifest() const { return m; }
  /// The bytes of `piece` of `tensor`. Throws Error naming the file and the
  /// tensor when the file is missing or short, its header disagrees with
  /// the manifest, or the checksum fails.
  std::vector<uint8_t> readPiece(const CheckpointTensor &tensor,
                                 const CheckpointPiece &piece);

private:
  std::string stepDir;
  CheckpointManifest m;
};

/// A whole tensor read into one buffer (the layout of a one-rank plan; the
/// basis for exporting weights): every piece, checked, in its dtype.
std::vector<uint8_t> readWholeTensor(CheckpointReader &reader,
                                     const CheckpointTensor &tensor);

} // namespace dsc::rt

#endif // DSC_RUNTIME_CHECKPOINT_H
