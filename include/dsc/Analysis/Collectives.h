//===- Collectives.h - Alpha-beta cost of NCCL collectives ------*- C++ -*-===//
//
// Part of the dsc project.
//
//===----------------------------------------------------------------------===//
//
// Ring alpha-beta models of the collectives a plan issues, in the units of
// nccl-tests (size = the whole buffer, bus bandwidth), and the placement of a
// process group on the node layout.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_ANALYSIS_COLLECTIVES_H
#define DSC_ANALYSIS_COLLECTIVES_H

#include "dsc/Analysis/ClusterSpec.h"
#include "dsc/Support/CollectiveBytes.h"

#include <cstdint>

namespace mlir::dsc::analysis {

/// The collective kinds and their nccl-tests factors are the runtime's
/// (dsc/Support/CollectiveBytes.h), so the cost model prices the bytes the
/// communicators count: busBandwidthFactor (all-reduce 2(n-1)/n, all-gather
/// and reduce-scatter (n-1)/n, point-to-point 1; a rank moves factor * size
/// bytes over its slowest link) and ringSteps (the latency steps: 2(n-1),
/// n-1, 1).
using ::dsc::busBandwidthFactor;
using ::dsc::CollectiveKind;
using ::dsc::ringSteps;

/// An effective link: bus bandwidth a ring achieves (bytes/s) and the
/// latency of one ring step (s).
struct Link {
  double busBandwidth = 0;
  double latency = 0;
  bool interNode = false;
};

/// Where a process group of `size` ranks with rank stride `stride` lands when
/// ranks fill nodes of `gpusPerNode` in order.
struct GroupPlacement {
  int64_t size = 1;
  /// Members of one group that share a node.
  int64_t membersPerNode = 1;
  bool crossesNodes = false;
};

GroupPlacement placeGroup(int64_t stride, int64_t size, int64_t gpusPerNode);

/// The link a group's ring runs over. Inside a node it is NVLink at
/// intra-node efficiency. Across nodes NCCL runs one ring per NIC, so a group
/// with g members per node drives g of the node's NICs (the other groups of
/// the same axis drive the rest): bus bandwidth min(NVLink, g * NIC share).
Link linkFor(const ClusterSpec &cluster, const GroupPlacement &placement);

/// Alpha-beta time of one collective over `sizeBytes` (nccl-tests size:
/// the full buffer, i.e. the all-gather output or reduce-scatter input):
/// steps * latency + factor * size / busBandwidth. Zero for n <= 1.
double collectiveTime(CollectiveKind kind, int64_t n, double sizeBytes,
                      const Link &link);

/// Bytes one rank sends for the collective (factor * size).
double collectiveBusBytes(CollectiveKind kind, int64_t n, double sizeBytes);

} // namespace mlir::dsc::analysis

#endif // DSC_ANALYSIS_COLLECTIVES_H
