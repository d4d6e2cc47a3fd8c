//===- NcclCommunicator.cpp - Collectives on GPUs through NCCL ------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Each call maps onto one NCCL call (or one NCCL group) enqueued on the
// rank's stream; it returns once enqueued. The communicators of one rank
// share that stream, so synchronizeNccl's watchdog watches and aborts them
// together: a stuck call of any of them stalls the stream for all. Bytes
// are counted by the ring model, since NCCL picks its own algorithms.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/NcclCommunicator.h"
#include "dsc/Runtime/Error.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <sstream>
#include <thread>

namespace dsc::rt {

namespace {

static_assert(sizeof(ncclUniqueId) % sizeof(int32_t) == 0,
              "the unique id travels over the bootstrap as i32 words");
constexpr size_t kIdWords = sizeof(ncclUniqueId) / sizeof(int32_t);

ncclDataType_t ncclType(DType t) {
  switch (t) {
  case DType::F32:
    return ncclFloat32;
  case DType::F64:
    return ncclFloat64;
  case DType::I32:
    return ncclInt32;
  case DType::BF16:
    return ncclBfloat16;
  case DType::F16:
    return ncclFloat16;
  }
  return ncclFloat32; // unreachable: Communicator checks the dtype first
}

ncclRedOp_t ncclOp(ReduceOp op) {
  switch (op) {
  case ReduceOp::Sum:
    return ncclSum;
  case ReduceOp::Avg:
    return ncclAvg;
  case ReduceOp::Max:
    return ncclMax;
  case ReduceOp::Min:
    return ncclMin;
  }
  return ncclSum; // unreachable: Communicator checks the op first
}

std::string cudaText(cudaError_t code) {
  return std::string(cudaGetErrorName(code)) + ": " + cudaGetErrorString(code);
}

/// ncclGetErrorString says what kind of failure, ncclGetLastError what
/// happened (read it right after the failed call, before another NCCL
/// call replaces it).
std::string ncclText(ncclResult_t code, ncclComm_t comm) {
  std::string text = ncclGetErrorString(code);
  const char *last = ncclGetLastError(comm);
  if (last && *last)
    text += std::string(" (") + last + ")";
  return text;
}

std::string seconds(double s) {
  std::ostringstream os;
  os << s;
  return os.str();
}

double defaultTimeoutSeconds() {
  const char *text = std::getenv("DSC_NCCL_TIMEOUT_S");
  if (!text || !*text)
    return 600;
  char *end = nullptr;
  double secs = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(secs > 0) || secs > 3.2e7)
    throw Error(std::string("DSC_NCCL_TIMEOUT_S='") + text +
                "' is not a positive number of seconds");
  return secs;
}

class NcclComm;

/// The NCCL communicators of one rank: its world communicator and the ones
/// split from it. They share one stream, and one rank's objects belong to
/// one thread, so this needs no lock.
struct StreamFamily {
  std::vector<NcclComm *> members;
};

/// Frees a cudaMalloc'ed scratch buffer however the call leaves.
struct DeviceScratch {
  void *ptr = nullptr;
  ~DeviceScratch() {
    if (ptr)
      cudaFree(ptr);
  }
};

class NcclComm final : public Communicator {
public:
  NcclComm(ncclComm_t comm, cudaStream_t stream, int device,
           Communicator &bootstrap, std::vector<int> members, int rank,
           std::shared_ptr<StreamFamily> family)
      : comm(comm), stream(stream), device(device), bootstrap(&bootstrap),
        myRank(rank), mySize(int(members.size())),
        myWorldRank(bootstrap.worldRank()), members(std::move(members)),
        family(std::move(family)) {
    this->family->members.push_back(this);
  }

  ~NcclComm() override {
    // Never throws: a failed or timed-out wait aborts instead of destroying
    // (ncclCommDestroy would wait for the stuck calls). Unwinding from an
    // error, the enqueued calls may wait for peers that will not come, so
    // abort at once rather than wait for the timeout.
    bool drained = false;
    if (std::uncaught_exceptions() == 0) {
      try {
        synchronize(-1);
        drained = true;
      } catch (...) {
      }
    }
    if (!aborted) {
      cudaSetDevice(device);
      if (drained)
        ncclCommDestroy(comm);
      else
        ncclCommAbort(comm);
    }
    if (barrierWord)
      cudaFree(barrierWord);
    auto &all = family->members;
    all.erase(std::remove(all.begin(), all.end(), this), all.end());
  }

  int rank() const override { return myRank; }
  int size() const override { return mySize; }
  int worldRank() const override { return myWorldRank; }
  const char *backendName() const override { return "nccl"; }
  const std::vector<int> &worldRanks() const override { return members; }
  bool canReduce(DType dtype) const override { return dtypeSize(dtype) != 0; }

  void abort(const std::string &reason) override {
    abortFamily("this rank aborted: " + reason);
    // Threads: fails the world and throws; MPI: ends the job.
    bootstrap->abort(reason);
    throw Error("rank " + std::to_string(myWorldRank) + " aborted: " + reason);
  }

  std::unique_ptr<Communicator> split(int color, int key) override;

  void synchronize(double timeoutSeconds);

protected:
  void doAllReduce(void *buf, size_t count, DType dtype, ReduceOp op) override {
    std::string args = std::to_string(count) + " x " + dtypeName(dtype) + ", " +
                       reduceOpName(op);
    enter("all_reduce", args);
    check(ncclAllReduce(buf, buf, count, ncclType(dtype), ncclOp(op), comm,
                        stream),
          "ncclAllReduce", "all_reduce", args);
    addRingModel(CollectiveKind::AllReduce, count * dtypeSize(dtype),
                 dtypeSize(dtype));
  }

  void doReduceScatter(const void *send, void *recv, size_t recvCount,
                       DType dtype, ReduceOp op) override {
    std::string args = std::to_string(recvCount) + " x " + dtypeName(dtype) +
                       " per rank, " + reduceOpName(op);
    enter("reduce_scatter", args);
    check(ncclReduceScatter(send, recv, recvCount, ncclType(dtype), ncclOp(op),
                            comm, stream),
          "ncclReduceScatter", "reduce_scatter", args);
    size_t esize = dtypeSize(dtype);
    addRingModel(CollectiveKind::ReduceScatter,
                 size_t(mySize) * recvCount * esize, esize);
  }

  void doAllGather(const void *send, void *recv, size_t sendCount,
                   DType dtype) override {
    // NCCL is in place when `send` is the rank's block of `recv`, as the
    // interface allows.
    std::string args =
        std::to_string(sendCount) + " x " + dtypeName(dtype) + " per rank";
    enter("all_gather", args);
    check(ncclAllGather(send, recv, sendCount, ncclType(dtype), comm, stream),
          "ncclAllGather", "all_gather", args);
    size_t esize = dtypeSize(dtype);
    addRingModel(CollectiveKind::AllGather, size_t(mySize) * sendCount * esize,
                 esize);
  }

  void doAllToAll(const void *send, void *recv, size_t countPerRank,
                  DType dtype) override {
    std::string args =
        std::to_string(countPerRank) + " x " + dtypeName(dtype) + " per rank";
    enter("all_to_all", args);
    size_t esize = dtypeSize(dtype);
    size_t block = countPerRank * esize;
    const char *from = static_cast<const char *>(send);
    char *to = static_cast<char *>(recv);
    // The rank's own block is a device copy; the others one grouped
    // send/recv pair per peer, which NCCL runs concurrently.
    if (block)
      checkCuda(cudaMemcpyAsync(to + size_t(myRank) * block,
                                from + size_t(myRank) * block, block,
                                cudaMemcpyDeviceToDevice, stream),
                "cudaMemcpyAsync", "all_to_all", args);
    Group group(*this, "all_to_all", args);
    for (int peer = 0; peer < mySize; ++peer) {
      if (peer == myRank)
        continue;
      group.note(ncclSend(from + size_t(peer) * block, countPerRank,
                          ncclType(dtype), peer, comm, stream),
                 "ncclSend");
      group.note(ncclRecv(to + size_t(peer) * block, countPerRank,
                          ncclType(dtype), peer, comm, stream),
                 "ncclRecv");
    }
    group.end();
    addRingModel(CollectiveKind::AllToAll,
                 size_t(mySize) * countPerRank * esize, esize);
  }

  void doBroadcast(void *buf, size_t count, DType dtype, int root) override {
    std::string args = std::to_string(count) + " x " + dtypeName(dtype) +
                       ", root " + std::to_string(root);
    enter("broadcast", args);
    check(ncclBroadcast(buf, buf, count, ncclType(dtype), root, comm, stream),
          "ncclBroadcast", "broadcast", args);
    addRingModel(CollectiveKind::Broadcast, count * dtypeSize(dtype),
                 dtypeSize(dtype), root);
  }

  /// NCCL matches a pair's messages by issue order and has no tags, so
  /// `tag` is not checked; nor can it see a size mismatch (the plan
  /// verifier rules both out).
  void doSendRecv(const void *sendBuf, size_t sendCount, int dst, void *recvBuf,
                  size_t recvCount, int src, DType dtype, int tag) override {
    std::string args = "to " + std::to_string(dst) + ", from " +
                       std::to_string(src) + ", tag " + std::to_string(tag);
    const char *call = dst >= 0 ? (src >= 0 ? "send_recv" : "send") : "recv";
    enter(call, args);
    Group group(*this, call, args);
    if (dst >= 0)
      group.note(
          ncclSend(sendBuf, sendCount, ncclType(dtype), dst, comm, stream),
          "ncclSend");
    if (src >= 0)
      group.note(
          ncclRecv(recvBuf, recvCount, ncclType(dtype), src, comm, stream),
          "ncclRecv");
    group.end();
    size_t esize = dtypeSize(dtype);
    if (dst >= 0)
      addSent(CollectiveKind::Send, sendCount * esize);
    if (src >= 0)
      addReceived(CollectiveKind::Recv, recvCount * esize);
  }

  /// A one-word all-reduce, then a wait for the stream: when it returns,
  /// every rank has reached the barrier and this rank's earlier calls are
  /// done.
  void doBarrier() override {
    enter("barrier", "");
    if (!barrierWord)
      checkCuda(cudaMalloc(&barrierWord, sizeof(int32_t)), "cudaMalloc",
                "barrier", "");
    check(ncclAllReduce(barrierWord, barrierWord, 1, ncclInt32, ncclSum, comm,
                        stream),
          "ncclAllReduce", "barrier", "");
    synchronize(-1);
  }

private:
  /// ncclGroupStart ... ncclGroupEnd; the end is always called (NCCL's
  /// group depth is per thread), then the first failure is thrown.
  class Group {
  public:
    Group(NcclComm &owner, const char *call, const std::string &args)
        : owner(owner), call(call), args(args) {
      owner.check(ncclGroupStart(), "ncclGroupStart", call, args);
    }
    ~Group() {
      if (open)
        ncclGroupEnd();
    }
    void note(ncclResult_t code, const char *what) {
      if (code != ncclSuccess && failed == ncclSuccess) {
        failed = code;
        failedCall = what;
        failedText = ncclText(code, owner.comm);
      }
    }
    void end() {
      open = false;
      ncclResult_t code = ncclGroupEnd();
      if (failed != ncclSuccess)
        throw Error(owner.describe(call, args) + ": " + failedCall +
                    " failed: " + failedText);
      owner.check(code, "ncclGroupEnd", call, args);
    }

  private:
    NcclComm &owner;
    const char *call;
    const std::string &args;
    bool open = true;
    ncclResult_t failed = ncclSuccess;
    const char *failedCall = "";
    std::string failedText;
  };

  void check(ncclResult_t code, const char *ncclCall, const char *call,
             const std::string &args) const {
    if (code != ncclSuccess)
      throw Error(describe(call, args) + ": " + ncclCall +
                  " failed: " + ncclText(code, comm));
  }

  void checkCuda(cudaError_t code, const char *cudaCall, const char *call,
                 const std::string &args) const {
    if (code != cudaSuccess)
      throw Error(describe(call, args) + ": " + cudaCall +
                  " failed: " + cudaText(code));
  }

  /// Every call starts here: an aborted communicator refuses, and the
  /// rank's device becomes current (NCCL and cudaMalloc act on it).
  void enter(const char *call, const std::string &args) const {
    if (aborted)
      throw Error(describe(call, args) +
                  ": the NCCL communicator was aborted: " + abortCause);
    int current = -1;
    if (cudaGetDevice(&current) != cudaSuccess || current != device)
      checkCuda(cudaSetDevice(device), "cudaSetDevice", call, args);
  }

  /// ncclCommAbort on every live communicator of this rank's stream; their
  /// later calls throw naming `cause`.
  void abortFamily(const std::string &cause) {
    cudaSetDevice(device);
    for (NcclComm *member : family->members) {
      if (member->aborted)
        continue;
      ncclCommAbort(member->comm);
      member->aborted = true;
      member->abortCause = cause;
    }
  }

  /// "nccl group [0 2] (rank 1 of 2)", for a family member's failure.
  std::string groupName() const {
    std::ostringstream os;
    os << backendName() << " group [";
    for (size_t i = 0; i < members.size(); ++i)
      os << (i ? " " : "") << members[i];
    os << "] (rank " << myRank << " of " << mySize << ")";
    return os.str();
  }

  ncclComm_t comm;
  cudaStream_t stream;
  int device;
  Communicator *bootstrap;
  int myRank, mySize, myWorldRank;
  std::vector<int> members;
  std::shared_ptr<StreamFamily> family;
  bool aborted = false;
  std::string abortCause;
  void *barrierWord = nullptr;
};

void NcclComm::synchronize(double timeoutSeconds) {
  const char *call = "synchronize";
  enter(call, "");
  double limit = timeoutSeconds < 0 ? defaultTimeoutSeconds() : timeoutSeconds;
  auto start = std::chrono::steady_clock::now();
  auto pause = std::chrono::microseconds(0);
  for (;;) {
    cudaError_t state = cudaStreamQuery(stream);
    // NCCL errors first: a failed peer leaves its kernels spinning, so the
    // stream would never report done.
    for (NcclComm *member : family->members) {
      if (member->aborted)
        continue;
      ncclResult_t async = ncclSuccess;
      ncclResult_t code = ncclCommGetAsyncError(member->comm, &async);
      if (code != ncclSuccess)
        async = code;
      if (async == ncclSuccess || async == ncclInProgress)
        continue;
      std::string text = ncclText(async, member->comm);
      std::string where =
          member == this ? "" : " in " + member->groupName() + "'s calls";
      abortFamily("an NCCL error: " + text);
      throw Error(describe(call, "") + ": NCCL failed asynchronously" + where +
                  ": " + text +
                  "; this rank's NCCL communicators were aborted");
    }
    if (state == cudaSuccess)
      return;
    if (state != cudaErrorNotReady) {
      abortFamily("a CUDA error: " + cudaText(state));
      throw Error(describe(call, "") +
                  ": cudaStreamQuery failed: " + cudaText(state) +
                  "; this rank's NCCL communicators were aborted");
    }
    double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (waited >= limit) {
      abortFamily("timed out after " + seconds(limit) + " s");
      throw Error(describe(call, "") + ": timed out after " + seconds(limit) +
                  " s waiting for the calls enqueued on its stream (a peer "
                  "rank died, is stuck, or issued different collectives); "
                  "this rank's NCCL communicators were aborted "
                  "(DSC_NCCL_TIMEOUT_S sets the limit)");
    }
    // Spin briefly for short collectives, then back off to 1 ms so a long
    // wait does not burn a core.
    if (pause.count() == 0) {
      std::this_thread::yield();
      pause = std::chrono::microseconds(1);
    } else {
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(1000));
    }
  }
}

std::unique_ptr<Communicator> NcclComm::split(int color, int key) {
  std::string args =
      "color " + std::to_string(color) + ", key " + std::to_string(key);
  enter("split", args);
  if (color < 0)
    color = NCCL_SPLIT_NOCOLOR;
  // The new group's world ranks: every rank's (color, key, world rank),
  // all-gathered over this group on the device (the bootstrap need not span
  // this group, and NCCL does not say whom a split holds).
  std::array<int32_t, 3> mine = {color, key, myWorldRank};
  std::vector<int32_t> all(3 * size_t(mySize));
  DeviceScratch scratch;
  checkCuda(cudaMalloc(&scratch.ptr, all.size() * sizeof(int32_t)),
            "cudaMalloc", "split", args);
  auto *words = static_cast<int32_t *>(scratch.ptr);
  checkCuda(cudaMemcpyAsync(words + 3 * size_t(myRank), mine.data(),
                            sizeof(mine), cudaMemcpyHostToDevice, stream),
            "cudaMemcpyAsync", "split", args);
  check(ncclAllGather(words + 3 * size_t(myRank), words, 3, ncclInt32, comm,
                      stream),
        "ncclAllGather", "split", args);
  checkCuda(cudaMemcpyAsync(all.data(), words, all.size() * sizeof(int32_t),
                            cudaMemcpyDeviceToHost, stream),
            "cudaMemcpyAsync", "split", args);
  synchronize(-1);

  ncclComm_t made = nullptr;
  check(ncclCommSplit(comm, color, key, &made, nullptr), "ncclCommSplit",
        "split", args);
  if (color == NCCL_SPLIT_NOCOLOR) {
    if (made)
      ncclCommDestroy(made);
    return nullptr;
  }
  // MPI_Comm_split's order, which ncclCommSplit also follows: (key, rank).
  std::vector<int> parentRanks;
  for (int r = 0; r < mySize; ++r)
    if (all[3 * size_t(r)] == color)
      parentRanks.push_back(r);
  std::stable_sort(parentRanks.begin(), parentRanks.end(), [&](int a, int b) {
    return all[3 * size_t(a) + 1] < all[3 * size_t(b) + 1];
  });
  std::vector<int> worlds;
  int newRank = -1;
  for (int r : parentRanks) {
    if (r == myRank)
      newRank = int(worlds.size());
    worlds.push_back(all[3 * size_t(r) + 2]);
  }
  int ncclRank = -1, ncclSize = -1;
  ncclResult_t code = ncclCommUserRank(made, &ncclRank);
  if (code == ncclSuccess)
    code = ncclCommCount(made, &ncclSize);
  if (code != ncclSuccess || ncclRank != newRank ||
      ncclSize != int(worlds.size())) {
    std::string why =
        code != ncclSuccess
            ? "ncclCommUserRank/ncclCommCount failed: " + ncclText(code, made)
            : "ncclCommSplit made rank " + std::to_string(ncclRank) + " of " +
                  std::to_string(ncclSize) + ", expected rank " +
                  std::to_string(newRank) + " of " +
                  std::to_string(worlds.size()) + " by (key, rank)";
    ncclCommAbort(made);
    throw Error(describe("split", args) + ": " + why);
  }
  return std::make_unique<NcclComm>(made, stream, device, *bootstrap,
                                    std::move(worlds), newRank, family);
}

} // namespace

std::unique_ptr<Communicator> createNcclCommunicator(Communicator &bootstrap,
                                                     int device,
                                                     cudaStream_t stream) {
  std::string where = "NCCL communicator of world rank " +
                      std::to_string(bootstrap.worldRank()) + " (rank " +
                      std::to_string(bootstrap.rank()) + " of " +
                      std::to_string(bootstrap.size()) + " over " +
                      bootstrap.backendName() + ") on device " +
                      std::to_string(device);
  // Local set-up failures are held until every rank has learned about
  // them over the bootstrap: throwing at once would leave the others waiting
  // in the broadcast or in ncclCommInitRank.
  std::string failure;
  int devices = 0;
  cudaError_t cuda = cudaGetDeviceCount(&devices);
  if (cuda != cudaSuccess)
    failure = "cudaGetDeviceCount failed: " + cudaText(cuda);
  else if (device < 0 || device >= devices)
    failure = "no such device: this process sees " + std::to_string(devices) +
              " CUDA device(s)";
  else if ((cuda = cudaSetDevice(device)) != cudaSuccess)
    failure = "cudaSetDevice failed: " + cudaText(cuda);

  std::array<int32_t, kIdWords> idWords{};
  ncclUniqueId id;
  if (bootstrap.rank() == 0 && failure.empty()) {
    ncclResult_t code = ncclGetUniqueId(&id);
    if (code != ncclSuccess)
      failure = "ncclGetUniqueId failed: " + ncclText(code, nullptr);
    else
      std::memcpy(idWords.data(), &id, sizeof(id));
  }
  bootstrap.broadcast(idWords.data(), kIdWords, DType::I32, 0);
  std::memcpy(&id, idWords.data(), sizeof(id));

  // The highest failed world rank + 1, or 0 when every rank is ready.
  int32_t failedRank = failure.empty() ? 0 : bootstrap.worldRank() + 1;
  bootstrap.allReduce(&failedRank, 1, DType::I32, ReduceOp::Max);
  if (!failure.empty())
    throw Error(where + ": " + failure);
  if (failedRank != 0)
    throw Error(where + ": world rank " + std::to_string(failedRank - 1) +
                " could not set up its device or the NCCL unique id (its "
                "error says why)");

  ncclComm_t comm = nullptr;
  ncclResult_t code =
      ncclCommInitRank(&comm, bootstrap.size(), id, bootstrap.rank());
  if (code != ncclSuccess)
    throw Error(where +
                ": ncclCommInitRank failed: " + ncclText(code, nullptr));
  return std::make_unique<NcclComm>(comm, stream, device, bootstrap,
                                    bootstrap.worldRanks(), bootstrap.rank(),
                                    std::make_shared<StreamFamily>());
}

void synchronizeNccl(Communicator &comm, double timeoutSeconds) {
  auto *nccl = dynamic_cast<NcclComm *>(&comm);
  if (!nccl)
    throw Error(std::string("synchronizeNccl: the communicator of world "
                            "rank ") +
                std::to_string(comm.worldRank()) + " is a " +
                comm.backendName() +
                " communicator; only NCCL communicators have a stream to "
                "wait for");
  nccl->synchronize(timeoutSeconds);
}

} // namespace dsc::rt
