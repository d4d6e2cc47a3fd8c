//===- ShardLayout.h - a rank's part of a whole tensor ----------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Maps the elements of a sharded buffer (Buffer::layout: tensor slicing's
// boxes, ZeRO's chunks) to their indices in the whole tensor, so that every
// rank initializes its part exactly as a one-rank run initializes the whole.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_SHARDLAYOUT_H
#define DSC_RUNTIME_SHARDLAYOUT_H

#include "dsc/Runtime/Plan.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dsc::rt {

/// The number of ranks in a group of the mesh axes in mask `axes`.
int64_t groupSize(const std::vector<Plan::MeshAxis> &mesh, int64_t axes);
/// A rank's index in its group of the axes in mask `axes`: its coordinates
/// on those axes, row-major in mesh order (the order of world ranks, which
/// is how the executor splits its groups).
int64_t groupIndex(const std::vector<Plan::MeshAxis> &mesh,
                   const std::vector<int64_t> &coords, int64_t axes);

/// "" when `layout` describes a part of `numElements` elements on `mesh`;
/// otherwise what is wrong ("view [64, 3, 64] dimension 2 (64) is split
/// into 3 parts, which do not divide it").
std::string checkShardLayout(const ShardLayout &layout, int64_t numElements,
                             const std::vector<Plan::MeshAxis> &mesh);

/// The whole-tensor index of each element of one rank's buffer. The layout
/// must have passed checkShardLayout.
class ShardIndexer {
public:
  ShardIndexer(const ShardLayout &layout, int64_t count,
               const std::vector<Plan::MeshAxis> &mesh,
               const std::vector<int64_t> &coords);
  /// The index in the whole tensor of the buffer's element `local`.
  int64_t wholeIndex(int64_t local) const;
  int64_t wholeNumElements() const { return wholeElements; }

private:
  std::vector<int64_t> view, boxShape, boxOffset;
  int64_t chunkOffset = 0, wholeElements = 0;
};

} // namespace dsc::rt

#endif // DSC_RUNTIME_SHARDLAYOUT_H
