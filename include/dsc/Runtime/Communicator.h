//===- Communicator.h - Collectives between the ranks of a plan -*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// dsc::rt::Communicator: the one interface the executor calls for collectives
// and point-to-point transfers, implemented by in-process threads
// (ThreadCommunicator.h), Open MPI (MpiCommunicator.h) and NCCL
// (NcclCommunicator.h).
//
// Groups. A communicator spans an ordered set of ranks (its group) and every
// collective runs over the whole group, as in MPI and NCCL. A mesh axis (the
// dp or tp ranks that share the other coordinates) is made with split(color,
// key), MPI_Comm_split's contract: every rank of the parent calls it, ranks
// with the same color form a new communicator, ordered by (key, parent rank).
// This maps one to one onto MPI_Comm_split and ncclCommSplit, so a plan's
// groups are created once at start-up and no call carries a rank list.
//
// Byte accounting. Every communicator counts, per collective kind, the calls
// and the bytes this rank sent and received, so dsc-run can compare the plan
// summary's predicted traffic with what moved. The counts follow the ring
// algorithms (ringBytesSent in dsc/Support/CollectiveBytes.h, the formulas
// the compiler's plan summary uses too): the thread communicator measures
// them (its collectives are those rings), MPI and NCCL count the same model
// because their libraries choose algorithms of their own.
// docs/communicators.md.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_COMMUNICATOR_H
#define DSC_RUNTIME_COMMUNICATOR_H

#include "dsc/Runtime/DType.h"
#include "dsc/Runtime/ReduceOp.h"
#include "dsc/Support/CollectiveBytes.h"

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dsc::rt {

/// What the byte counters are kept by, and the ring byte model they follow:
/// one definition for the compiler's planned bytes and the runtime's counts
/// (dsc/Support/CollectiveBytes.h).
using ::dsc::CollectiveKind;
using ::dsc::collectiveKindName; // "all_reduce", ...
using ::dsc::kNumCollectiveKinds;
using ::dsc::ringBytesReceived;
using ::dsc::ringBytesSent;

/// A snapshot of a communicator's counters.
struct CommStats {
  std::array<uint64_t, kNumCollectiveKinds> calls{};
  std::array<uint64_t, kNumCollectiveKinds> bytesSent{};
  std::array<uint64_t, kNumCollectiveKinds> bytesReceived{};

  uint64_t sent(CollectiveKind k) const { return bytesSent[size_t(k)]; }
  uint64_t received(CollectiveKind k) const { return bytesReceived[size_t(k)]; }
  uint64_t count(CollectiveKind k) const { return calls[size_t(k)]; }
  uint64_t totalSent() const;
  CommStats &operator+=(const CommStats &other);
};

/// "all_reduce 3 calls 24576 B sent 24576 B received, barrier 1 call ...",
/// kinds without calls left out; "no communication" when none.
std::string formatCommStats(const CommStats &stats);

/// The rank's interface to a group of ranks. One object belongs to one
/// thread: its calls are not reentrant, and every rank of the group must
/// issue the same collectives in the same order with matching counts,
/// dtypes and ops (the plan verifier proves that; the thread communicator
/// also checks it and names both ranks when they differ).
///
/// Every call either completes or throws dsc::rt::Error naming the call, the
/// group and the cause: a failed or aborted rank, a timeout, a mismatch, an
/// MPI error. Counts are in elements of `dtype`; buffers are host memory
/// (device memory for the NCCL communicator). The host backends have
/// finished a call when it returns; a device backend may instead enqueue it
/// on its stream (the CUDA executor orders it with events), and then reports
/// errors at its next synchronization.
class Communicator {
public:
  virtual ~Communicator();
  Communicator(const Communicator &) = delete;
  Communicator &operator=(const Communicator &) = delete;

  /// This rank's index in the group, 0 <= rank() < size().
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// This rank's index in the world (the process or thread index), for
  /// messages and traces.
  virtual int worldRank() const = 0;
  /// "threads", "mpi", "nccl".
  virtual const char *backendName() const = 0;
  /// The world ranks of this group, in group order.
  virtual const std::vector<int> &worldRanks() const = 0;

  /// Collective over this group: the ranks passing the same color form a new
  /// communicator, ordered by (key, rank()). A negative color returns null
  /// (MPI_UNDEFINED: this rank joins none).
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;

  /// In place: every rank ends with the element-wise reduction of all
  /// ranks' `buf`. Avg is the sum divided by size() (integer division for
  /// I32). Every backend reduces F32, F64 and I32; canReduce says whether
  /// this one also reduces BF16 / F16 (NCCL does).
  void allReduce(void *buf, size_t count, DType dtype, ReduceOp op);
  /// `send` holds size()·recvCount elements; rank r receives the reduction
  /// of every rank's elements [r·recvCount, (r+1)·recvCount). The buffers
  /// must not overlap (MPI_Reduce_scatter_block's rule).
  void reduceScatter(const void *send, void *recv, size_t recvCount,
                     DType dtype, ReduceOp op);
  /// `recv` (size()·sendCount elements) receives rank r's `send` at
  /// r·sendCount, in rank order. `send` may alias its place in `recv`.
  void allGather(const void *send, void *recv, size_t sendCount, DType dtype);
  /// Block j (countPerRank elements) of `send` goes to rank j, which stores
  /// it as block rank() of its `recv`. The buffers must not overlap.
  void allToAll(const void *send, void *recv, size_t countPerRank, DType dtype);
  /// Every rank's `buf` receives rank `root`'s.
  void broadcast(void *buf, size_t count, DType dtype, int root);
  /// Blocks until `peer` has received the message (a rendezvous, as NCCL and
  /// MPI's large messages behave, so a plan that would deadlock under them
  /// deadlocks, and then times out, under threads too). Messages between a
  /// pair with one tag arrive in order.
  void send(const void *buf, size_t count, DType dtype, int peer, int tag);
  void recv(void *buf, size_t count, DType dtype, int peer, int tag);
  /// send to `dst` and recv from `src` together, without ordering them (two
  /// pipeline stages exchanging activations and gradients).
  void sendRecv(const void *sendBuf, size_t sendCount, int dst, void *recvBuf,
                size_t recvCount, int src, DType dtype, int tag);
  void barrier();

  /// Marks this rank failed with `reason`: every rank blocked in or later
  /// entering a collective with it throws Error("rank R failed: reason")
  /// (threads), or the job ends (MPI_Abort under mpirun). Does not return
  /// under MPI.
  virtual void abort(const std::string &reason) = 0;

  /// This communicator's counters (not its parent's or its splits').
  CommStats stats() const;
  void resetStats();

  /// Whether reductions (allReduce, reduceScatter) take `dtype` here.
  virtual bool canReduce(DType dtype) const;
  /// Whether a thread other than the one that made this communicator may
  /// make its calls (one thread at a time): the executor's collectives
  /// then run on a thread beside compute. False for MPI initialized with
  /// less than MPI_THREAD_SERIALIZED.
  virtual bool callableFromAnyThread() const { return true; }

protected:
  Communicator() = default;

  virtual void doAllReduce(void *buf, size_t count, DType dtype,
                           ReduceOp op) = 0;
  virtual void doReduceScatter(const void *send, void *recv, size_t recvCount,
                               DType dtype, ReduceOp op) = 0;
  virtual void doAllGather(const void *send, void *recv, size_t sendCount,
                           DType dtype) = 0;
  virtual void doAllToAll(const void *send, void *recv, size_t countPerRank,
                          DType dtype) = 0;
  virtual void doBroadcast(void *buf, size_t count, DType dtype, int root) = 0;
  /// A side whose peer is -1 is absent (send and recv alone).
  virtual void doSendRecv(const void *sendBuf, size_t sendCount, int dst,
                          void *recvBuf, size_t recvCount, int src, DType dtype,
                          int tag) = 0;
  virtual void doBarrier() = 0;

  /// Counters; backends add bytes as they move them (any thread may add to
  /// any communicator's counters: they are atomic).
  void addSent(CollectiveKind k, uint64_t bytes) {
    bytesSent[size_t(k)].fetch_add(bytes, std::memory_order_relaxed);
  }
  void addReceived(CollectiveKind k, uint64_t bytes) {
    bytesReceived[size_t(k)].fetch_add(bytes, std::memory_order_relaxed);
  }
  /// Counts by the ring model, for backends whose library picks its own
  /// algorithm (MPI, NCCL): what ringBytesSent says, sent and received.
  void addRingModel(CollectiveKind k, uint64_t bytes, size_t elementSize,
                    int root = 0);

  /// "all_reduce(1024 x f32, sum) on threads group [0 2 4 6] (rank 1 of 4)".
  std::string describe(const char *call, const std::string &args) const;

private:
  void checkReduction(const char *call, DType dtype, ReduceOp op) const;
  void checkPeer(const char *call, int peer, const char *what) const;
  void checkPointToPoint(const char *call, int peer, DType dtype,
                         int tag) const;
  void countCall(CollectiveKind k) {
    calls[size_t(k)].fetch_add(1, std::memory_order_relaxed);
  }

  std::array<std::atomic<uint64_t>, kNumCollectiveKinds> calls{};
  std::array<std::atomic<uint64_t>, kNumCollectiveKinds> bytesSent{};
  std::array<std::atomic<uint64_t>, kNumCollectiveKinds> bytesReceived{};
};

/// True when this process was started by mpirun / srun / a PMI launcher
/// (OMPI_COMM_WORLD_SIZE, PMIX_RANK, PMI_SIZE, ...): dsc-run then uses the
/// MPI communicator without being told.
bool launchedByMpi();

/// True when the runtime was built with the MPI communicator (DSC_HAVE_MPI).
bool haveMpiCommunicator();

} // namespace dsc::rt

#endif // DSC_RUNTIME_COMMUNICATOR_H
