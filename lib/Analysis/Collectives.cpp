//===- Collectives.cpp - Alpha-beta cost of NCCL collectives --------------===//
//
// Part of the dsc project.
//
//===----------------------------------------------------------------------===//
//
// The factors (dsc/Support/CollectiveBytes.h) follow nccl-tests'
// doc/PERFORMANCE.md so that a user can take its busbw column and put it
// straight into a cluster file's calibration.
//
//===----------------------------------------------------------------------===//

#include "dsc/Analysis/Collectives.h"

#include <algorithm>

using namespace mlir::dsc::analysis;

GroupPlacement mlir::dsc::analysis::placeGroup(int64_t stride, int64_t size,
                                               int64_t gpusPerNode) {
  GroupPlacement p;
  p.size = size;
  if (size <= 1)
    return p;
  if (stride * size <= gpusPerNode) {
    // The whole group fits in one node's block of ranks.
    p.membersPerNode = size;
    p.crossesNodes = false;
    return p;
  }
  p.crossesNodes = true;
  p.membersPerNode = std::max<int64_t>(1, gpusPerNode / stride);
  return p;
}

Link mlir::dsc::analysis::linkFor(const ClusterSpec &cluster,
                                  const GroupPlacement &placement) {
  const Calibration &cal = cluster.calibration;
  double nvlink =
      cluster.intraNodeBandwidth * cal.intraNodeCollectiveEfficiency;
  Link link;
  if (!placement.crossesNodes) {
    link.busBandwidth = nvlink;
    link.latency = cluster.intraNodeLatency;
    return link;
  }
  double nics = static_cast<double>(placement.membersPerNode) *
                cluster.interNodeBandwidthPerGpu() *
                cal.interNodeCollectiveEfficiency;
  link.busBandwidth = std::min(nvlink, nics);
  link.latency = cluster.interNodeLatency;
  link.interNode = true;
  return link;
}

double mlir::dsc::analysis::collectiveTime(CollectiveKind kind, int64_t n,
                                           double sizeBytes, const Link &link) {
  if (n <= 1 || sizeBytes <= 0)
    return 0.0;
  return static_cast<double>(ringSteps(kind, n)) * link.latency +
         busBandwidthFactor(kind, n) * sizeBytes / link.busBandwidth;
}

double mlir::dsc::analysis::collectiveBusBytes(CollectiveKind kind, int64_t n,
                                               double sizeBytes) {
  return busBandwidthFactor(kind, n) * sizeBytes;
}
