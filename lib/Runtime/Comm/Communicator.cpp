//===- Communicator.cpp - Checks and byte accounting for all backends -----===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The backend-independent half of Communicator: argument checks with
// messages that name the call and the group, the call and byte counters (by
// the ring byte model of dsc/Support/CollectiveBytes.h for backends whose
// library picks its own algorithm), and launcher detection for dsc-run.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/Communicator.h"
#include "dsc/Runtime/Error.h"
#include "dsc/Runtime/NcclCommunicator.h"
#include "dsc/Runtime/RankDiscovery.h"

#include <cstdlib>
#include <sstream>

namespace dsc::rt {

uint64_t CommStats::totalSent() const {
  uint64_t total = 0;
  for (uint64_t b : bytesSent)
    total += b;
  return total;
}

CommStats &CommStats::operator+=(const CommStats &other) {
  for (size_t k = 0; k < kNumCollectiveKinds; ++k) {
    calls[k] += other.calls[k];
    bytesSent[k] += other.bytesSent[k];
    bytesReceived[k] += other.bytesReceived[k];
  }
  return *this;
}

Communicator::~Communicator() = default;

bool Communicator::canReduce(DType dtype) const {
  return dtype == DType::F32 || dtype == DType::F64 || dtype == DType::I32;
}

std::string formatCommStats(const CommStats &stats) {
  std::ostringstream os;
  bool first = true;
  for (size_t k = 0; k < kNumCollectiveKinds; ++k) {
    if (!stats.calls[k])
      continue;
    os << (first ? "" : ", ") << collectiveKindName(CollectiveKind(k)) << " "
       << stats.calls[k] << (stats.calls[k] == 1 ? " call " : " calls ")
       << stats.bytesSent[k] << " B sent " << stats.bytesReceived[k]
       << " B received";
    first = false;
  }
  return first ? "no communication" : os.str();
}

void Communicator::addRingModel(CollectiveKind k, uint64_t bytes,
                                size_t elementSize, int root) {
  addSent(k, ringBytesSent(k, bytes, elementSize, size(), rank(), root));
  addReceived(k,
              ringBytesReceived(k, bytes, elementSize, size(), rank(), root));
}

std::string Communicator::describe(const char *call,
                                   const std::string &args) const {
  std::ostringstream os;
  os << call << "(" << args << ") on " << backendName() << " group [";
  const std::vector<int> &members = worldRanks();
  for (size_t i = 0; i < members.size(); ++i)
    os << (i ? " " : "") << members[i];
  os << "] (world rank " << worldRank() << ", rank " << rank() << " of "
     << size() << ")";
  return os.str();
}

static std::string countArgs(size_t count, DType dtype) {
  return std::to_string(count) + " x " + dtypeName(dtype);
}

void Communicator::checkReduction(const char *call, DType dtype,
                                  ReduceOp op) const {
  if (dtypeSize(dtype) == 0 || !canReduce(dtype))
    throw Error(describe(call, dtypeName(dtype)) + ": the " + backendName() +
                " communicator does not reduce " + dtypeName(dtype) +
                " (f32, f64 and i32 are reduced by every backend)");
  if (uint32_t(op) > uint32_t(ReduceOp::Min))
    throw Error(describe(call, dtypeName(dtype)) + ": unknown reduce op " +
                std::to_string(uint32_t(op)));
}

void Communicator::checkPeer(const char *call, int peer,
                             const char *what) const {
  if (peer < 0 || peer >= size())
    throw Error(describe(call, std::string(what) + " " + std::to_string(peer)) +
                ": " + what + " " + std::to_string(peer) +
                " is not a rank of this group of " + std::to_string(size()));
}

void Communicator::allReduce(void *buf, size_t count, DType dtype,
                             ReduceOp op) {
  checkReduction("all_reduce", dtype, op);
  countCall(CollectiveKind::AllReduce);
  doAllReduce(buf, count, dtype, op);
}

void Communicator::reduceScatter(const void *send, void *recv, size_t recvCount,
                                 DType dtype, ReduceOp op) {
  checkReduction("reduce_scatter", dtype, op);
  countCall(CollectiveKind::ReduceScatter);
  doReduceScatter(send, recv, recvCount, dtype, op);
}

void Communicator::allGather(const void *send, void *recv, size_t sendCount,
                             DType dtype) {
  if (dtypeSize(dtype) == 0)
    throw Error(describe("all_gather", countArgs(sendCount, dtype)) +
                ": unknown dtype");
  countCall(CollectiveKind::AllGather);
  doAllGather(send, recv, sendCount, dtype);
}

void Communicator::allToAll(const void *send, void *recv, size_t countPerRank,
                            DType dtype) {
  if (dtypeSize(dtype) == 0)
    throw Error(describe("all_to_all", countArgs(countPerRank, dtype)) +
                ": unknown dtype");
  countCall(CollectiveKind::AllToAll);
  doAllToAll(send, recv, countPerRank, dtype);
}

void Communicator::broadcast(void *buf, size_t count, DType dtype, int root) {
  checkPeer("broadcast", root, "root");
  if (dtypeSize(dtype) == 0)
    throw Error(describe("broadcast", countArgs(count, dtype)) +
                ": unknown dtype");
  countCall(CollectiveKind::Broadcast);
  doBroadcast(buf, count, dtype, root);
}

void Communicator::checkPointToPoint(const char *call, int peer, DType dtype,
                                     int tag) const {
  checkPeer(call, peer, "peer");
  if (peer == rank())
    throw Error(describe(call, "peer " + std::to_string(peer)) +
                ": a rank cannot send to or receive from itself");
  if (dtypeSize(dtype) == 0)
    throw Error(describe(call, dtypeName(dtype)) + ": unknown dtype");
  if (tag < 0)
    throw Error(describe(call, "tag " + std::to_string(tag)) +
                ": tags are non-negative");
}

void Communicator::send(const void *buf, size_t count, DType dtype, int peer,
                        int tag) {
  checkPointToPoint("send", peer, dtype, tag);
  countCall(CollectiveKind::Send);
  doSendRecv(buf, count, peer, nullptr, 0, -1, dtype, tag);
}

void Communicator::recv(void *buf, size_t count, DType dtype, int peer,
                        int tag) {
  checkPointToPoint("recv", peer, dtype, tag);
  countCall(CollectiveKind::Recv);
  doSendRecv(nullptr, 0, -1, buf, count, peer, dtype, tag);
}

void Communicator::sendRecv(const void *sendBuf, size_t sendCount, int dst,
                            void *recvBuf, size_t recvCount, int src,
                            DType dtype, int tag) {
  checkPointToPoint("send", dst, dtype, tag);
  checkPointToPoint("recv", src, dtype, tag);
  countCall(CollectiveKind::Send);
  countCall(CollectiveKind::Recv);
  doSendRecv(sendBuf, sendCount, dst, recvBuf, recvCount, src, dtype, tag);
}

void Communicator::barrier() {
  countCall(CollectiveKind::Barrier);
  doBarrier();
}

CommStats Communicator::stats() const {
  CommStats s;
  for (size_t k = 0; k < kNumCollectiveKinds; ++k) {
    s.calls[k] = calls[k].load(std::memory_order_relaxed);
    s.bytesSent[k] = bytesSent[k].load(std::memory_order_relaxed);
    s.bytesReceived[k] = bytesReceived[k].load(std::memory_order_relaxed);
  }
  return s;
}

void Communicator::resetStats() {
  for (size_t k = 0; k < kNumCollectiveKinds; ++k) {
    calls[k].store(0, std::memory_order_relaxed);
    bytesSent[k].store(0, std::memory_order_relaxed);
    bytesReceived[k].store(0, std::memory_order_relaxed);
  }
}

// Open MPI's mpirun, then PMIx / PMI launchers (srun, MPICH's hydra,
// Intel MPI) and MVAPICH: the conventions RankDiscovery knows.
bool launchedByMpi() { return mpiLauncherVariablesSet(); }

bool haveMpiCommunicator() {
#ifdef DSC_HAVE_MPI
  return true;
#else
  return false;
#endif
}

// DSC_HAVE_NCCL is set on this file by lib/Runtime/Nccl when it builds
// DscRuntimeNccl.
bool haveNcclCommunicator() {
#ifdef DSC_HAVE_NCCL
  return true;
#else
  return false;
#endif
}

} // namespace dsc::rt
