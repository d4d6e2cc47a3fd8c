//===- ShardLayout.cpp - a rank's part of a whole tensor ------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/ShardLayout.h"

using namespace dsc::rt;

int64_t dsc::rt::groupSize(const std::vector<Plan::MeshAxis> &mesh,
                           int64_t axes) {
  int64_t size = 1;
  for (size_t a = 0; a < mesh.size(); ++a)
    if (axes & (int64_t(1) << a))
      size *= mesh[a].size;
  return size;
}

int64_t dsc::rt::groupIndex(const std::vector<Plan::MeshAxis> &mesh,
                            const std::vector<int64_t> &coords, int64_t axes) {
  int64_t index = 0;
  for (size_t a = 0; a < mesh.size() && a < coords.size(); ++a)
    if (axes & (int64_t(1) << a))
      index = index * mesh[a].size + coords[a];
  return index;
}

namespace {

/// The product of `shape`, or -1 when a dimension is below 1 or it is
/// implausibly large (2^50).
int64_t checkedProduct(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 1 || n > (int64_t(1) << 50) / d)
      return -1;
    n *= d;
  }
  return n;
}

/// The whole shape, when recorded, has the whole's element count: the
/// view's, or the chunks' together.
std::string checkWholeShape(const ShardLayout &layout, int64_t count,
                            const std::vector<Plan::MeshAxis> &mesh) {
  if (layout.shape.empty())
    return "";
  const int64_t whole = checkedProduct(layout.shape);
  const int64_t expected = layout.view.empty()
                               ? count * groupSize(mesh, layout.chunkAxes)
                               : checkedProduct(layout.view);
  if (whole < 0 || whole != expected)
    return "layout shape " + shapeString(layout.shape) + " does not have the " +
           std::to_string(expected) + " elements of the layout's whole";
  return "";
}

} // namespace

std::string dsc::rt::checkShardLayout(const ShardLayout &layout,
                                      int64_t numElements,
                                      const std::vector<Plan::MeshAxis> &mesh) {
  const int64_t known = mesh.size() >= 63 ? -1 : (int64_t(1) << mesh.size()) - 1;
  if (layout.isWhole())
    return layout.shape.empty() ? "" : "has a whole shape but no layout";
  if (mesh.empty())
    return "has a shard layout but the plan has no mesh";
  if (layout.chunkAxes & ~known)
    return "chunk axes mask " + std::to_string(layout.chunkAxes) +
           " names axes the mesh " + meshString(mesh) + " does not have";
  if (std::string error = checkWholeShape(layout, numElements, mesh);
      !error.empty())
    return error;
  // Without a view the buffer is a chunk of a whole of unknown size.
  if (layout.view.empty())
    return "";
  int64_t part = numElements;
  {
    if (layout.viewSplit.size() != layout.view.size())
      return "layout view " + shapeString(layout.view) + " has " +
             std::to_string(layout.viewSplit.size()) + " split masks";
    part = 1;
    for (size_t d = 0; d < layout.view.size(); ++d) {
      const int64_t size = layout.view[d], mask = layout.viewSplit[d];
      if (size < 1)
        return "layout view " + shapeString(layout.view) +
               " has a dimension below 1";
      if (mask & ~known)
        return "layout view dimension " + std::to_string(d) +
               " is split over axes mask " + std::to_string(mask) +
               " that the mesh " + meshString(mesh) + " does not have";
      if (mask & layout.chunkAxes)
        return "layout splits view dimension " + std::to_string(d) +
               " and chunks over the same mesh axis";
      const int64_t parts = groupSize(mesh, mask);
      if (size % parts != 0)
        return "layout view " + shapeString(layout.view) + " dimension " +
               std::to_string(d) + " (" + std::to_string(size) +
               ") is split into " + std::to_string(parts) +
               " parts, which do not divide it";
      if (part > (int64_t(1) << 50) / (size / parts))
        return "layout view " + shapeString(layout.view) + " is too large";
      part *= size / parts;
    }
  }
  const int64_t chunks = groupSize(mesh, layout.chunkAxes);
  if (part % chunks != 0 || part / chunks != numElements)
    return "layout gives each rank " +
           (part % chunks ? std::to_string(part) + "/" + std::to_string(chunks)
                          : std::to_string(part / chunks)) +
           " elements but the buffer has " + std::to_string(numElements);
  return "";
}

ShardIndexer::ShardIndexer(const ShardLayout &layout, int64_t count,
                           const std::vector<Plan::MeshAxis> &mesh,
                           const std::vector<int64_t> &coords)
    : view(layout.view) {
  chunkOffset = groupIndex(mesh, coords, layout.chunkAxes) * count;
  wholeElements = count * groupSize(mesh, layout.chunkAxes);
  for (size_t d = 0; d < view.size(); ++d) {
    const int64_t parts = groupSize(mesh, layout.viewSplit[d]);
    boxShape.push_back(view[d] / parts);
    boxOffset.push_back(groupIndex(mesh, coords, layout.viewSplit[d]) *
                        boxShape.back());
  }
  if (!view.empty())
    wholeElements = numElements(view);
}

int64_t ShardIndexer::wholeIndex(int64_t local) const {
  int64_t boxFlat = chunkOffset + local;
  if (view.empty())
    return boxFlat;
  // Unravel in the box, shift to the box's corner, ravel in the view.
  int64_t whole = 0, stride = 1;
  for (size_t d = view.size(); d-- > 0;) {
    const int64_t i = boxFlat % boxShape[d];
    boxFlat /= boxShape[d];
    whole += (boxOffset[d] + i) * stride;
    stride *= view[d];
  }
  return whole;
}
