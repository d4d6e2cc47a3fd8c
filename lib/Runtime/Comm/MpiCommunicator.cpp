//===- MpiCommunicator.cpp - Collectives through Open MPI -----------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Each call maps onto one MPI call on a communicator made by MPI_Comm_split;
// errors come back (MPI_ERRORS_RETURN) and are thrown as Error naming the
// call. Bytes are counted by the ring model, since Open MPI picks its own
// algorithms. Built only with DSC_HAVE_MPI; otherwise the factory throws.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/MpiCommunicator.h"
#include "dsc/Runtime/Error.h"

#ifdef DSC_HAVE_MPI

#include <mpi.h>

#include <climits>
#include <cstdio>
#include <cstring>

namespace dsc::rt {

namespace {

std::string mpiErrorText(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS)
    return "MPI error " + std::to_string(code);
  return std::string(text, size_t(len));
}

MPI_Datatype mpiType(DType t) {
  switch (t) {
  case DType::F32:
    return MPI_FLOAT;
  case DType::F64:
    return MPI_DOUBLE;
  case DType::I32:
    return MPI_INT32_T;
  case DType::BF16:
  case DType::F16:
    return MPI_UINT16_T; // moved, never reduced
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op mpiOp(ReduceOp op) {
  switch (op) {
  case ReduceOp::Sum:
  case ReduceOp::Avg:
    return MPI_SUM;
  case ReduceOp::Max:
    return MPI_MAX;
  case ReduceOp::Min:
    return MPI_MIN;
  }
  return MPI_OP_NULL;
}

template <typename T> void divideBy(void *buf, size_t count, int n) {
  T *p = static_cast<T *>(buf);
  for (size_t i = 0; i < count; ++i)
    p[i] = p[i] / T(n);
}

/// Avg is MPI_SUM then a division by the group size on every rank: the same
/// division of the same sums, so it keeps MPI's cross-rank agreement.
void divide(void *buf, size_t count, DType dtype, int n) {
  if (n <= 1)
    return;
  if (dtype == DType::F32)
    divideBy<float>(buf, count, n);
  else if (dtype == DType::F64)
    divideBy<double>(buf, count, n);
  else if (dtype == DType::I32)
    divideBy<int32_t>(buf, count, n);
}

class MpiComm final : public Communicator {
public:
  MpiComm(MPI_Comm comm, bool ownsComm, bool finalizes)
      : comm(comm), ownsComm(ownsComm), finalizes(finalizes) {
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm, &myRank);
    MPI_Comm_size(comm, &mySize);
    MPI_Comm_rank(MPI_COMM_WORLD, &myWorldRank);
    // World ranks of the members, for messages.
    MPI_Group group, worldGroup;
    MPI_Comm_group(comm, &group);
    MPI_Comm_group(MPI_COMM_WORLD, &worldGroup);
    std::vector<int> local(size_t(mySize), 0);
    members.assign(size_t(mySize), -1);
    for (int i = 0; i < mySize; ++i)
      local[size_t(i)] = i;
    MPI_Group_translate_ranks(group, mySize, local.data(), worldGroup,
                              members.data());
    MPI_Group_free(&group);
    MPI_Group_free(&worldGroup);
  }

  ~MpiComm() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized)
      return;
    if (ownsComm)
      MPI_Comm_free(&comm);
    if (finalizes)
      MPI_Finalize();
  }

  int rank() const override { return myRank; }
  int size() const override { return mySize; }
  int worldRank() const override { return myWorldRank; }
  const char *backendName() const override { return "mpi"; }
  const std::vector<int> &worldRanks() const override { return members; }
  bool callableFromAnyThread() const override {
    // Calls from another thread, one at a time, need SERIALIZED or more.
    int level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level);
    return level >= MPI_THREAD_SERIALIZED;
  }

  void abort(const std::string &reason) override {
    // Under mpirun this ends every process of the job; the launcher reports
    // the rank and exit code.
    std::fprintf(stderr, "dsc: rank %d failed: %s\n", myWorldRank,
                 reason.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    throw Error("rank " + std::to_string(myWorldRank) + " aborted: " + reason);
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    MPI_Comm made = MPI_COMM_NULL;
    check(MPI_Comm_split(comm, color < 0 ? MPI_UNDEFINED : color, key, &made),
          "MPI_Comm_split", "split", "color " + std::to_string(color));
    if (made == MPI_COMM_NULL)
      return nullptr;
    return std::make_unique<MpiComm>(made, /*ownsComm=*/true,
                                     /*finalizes=*/false);
  }

protected:
  void doAllReduce(void *buf, size_t count, DType dtype, ReduceOp op) override {
    check(MPI_Allreduce(MPI_IN_PLACE, buf, intCount(count, "all_reduce"),
                        mpiType(dtype), mpiOp(op), comm),
          "MPI_Allreduce", "all_reduce", std::to_string(count) + " elements");
    if (op == ReduceOp::Avg)
      divide(buf, count, dtype, mySize);
    addRingModel(CollectiveKind::AllReduce, count * dtypeSize(dtype),
                 dtypeSize(dtype));
  }

  void doReduceScatter(const void *send, void *recv, size_t recvCount,
                       DType dtype, ReduceOp op) override {
    check(MPI_Reduce_scatter_block(send, recv,
                                   intCount(recvCount, "reduce_scatter"),
                                   mpiType(dtype), mpiOp(op), comm),
          "MPI_Reduce_scatter_block", "reduce_scatter",
          std::to_string(recvCount) + " elements per rank");
    if (op == ReduceOp::Avg)
      divide(recv, recvCount, dtype, mySize);
    size_t esize = dtypeSize(dtype);
    addRingModel(CollectiveKind::ReduceScatter,
                 size_t(mySize) * recvCount * esize, esize);
  }

  void doAllGather(const void *send, void *recv, size_t sendCount,
                   DType dtype) override {
    size_t esize = dtypeSize(dtype);
    const char *mine =
        static_cast<char *>(recv) + size_t(myRank) * sendCount * esize;
    int n = intCount(sendCount, "all_gather");
    check(MPI_Allgather(send == mine ? MPI_IN_PLACE : send, n, mpiType(dtype),
                        recv, n, mpiType(dtype), comm),
          "MPI_Allgather", "all_gather",
          std::to_string(sendCount) + " elements per rank");
    addRingModel(CollectiveKind::AllGather, size_t(mySize) * sendCount * esize,
                 esize);
  }

  void doAllToAll(const void *send, void *recv, size_t countPerRank,
                  DType dtype) override {
    int n = intCount(countPerRank, "all_to_all");
    check(MPI_Alltoall(send, n, mpiType(dtype), recv, n, mpiType(dtype), comm),
          "MPI_Alltoall", "all_to_all",
          std::to_string(countPerRank) + " elements per rank");
    size_t esize = dtypeSize(dtype);
    addRingModel(CollectiveKind::AllToAll,
                 size_t(mySize) * countPerRank * esize, esize);
  }

  void doBroadcast(void *buf, size_t count, DType dtype, int root) override {
    check(MPI_Bcast(buf, intCount(count, "broadcast"), mpiType(dtype), root,
                    comm),
          "MPI_Bcast", "broadcast", std::to_string(count) + " elements");
    addRingModel(CollectiveKind::Broadcast, count * dtypeSize(dtype),
                 dtypeSize(dtype), root);
  }

  void doSendRecv(const void *sendBuf, size_t sendCount, int dst, void *recvBuf,
                  size_t recvCount, int src, DType dtype, int tag) override {
    size_t esize = dtypeSize(dtype);
    MPI_Status status;
    if (dst >= 0 && src >= 0)
      check(MPI_Sendrecv(sendBuf, intCount(sendCount, "send"), mpiType(dtype),
                         dst, tag, recvBuf, intCount(recvCount, "recv"),
                         mpiType(dtype), src, tag, comm, &status),
            "MPI_Sendrecv", "send_recv",
            "peers " + std::to_string(dst) + "/" + std::to_string(src));
    else if (dst >= 0)
      check(MPI_Send(sendBuf, intCount(sendCount, "send"), mpiType(dtype), dst,
                     tag, comm),
            "MPI_Send", "send", "to rank " + std::to_string(dst));
    else
      check(MPI_Recv(recvBuf, intCount(recvCount, "recv"), mpiType(dtype), src,
                     tag, comm, &status),
            "MPI_Recv", "recv", "from rank " + std::to_string(src));
    if (src >= 0) {
      int got = 0;
      MPI_Get_count(&status, mpiType(dtype), &got);
      if (size_t(got) != recvCount)
        throw Error(describe("recv", "from rank " + std::to_string(src)) +
                    ": message size mismatch: received " + std::to_string(got) +
                    " elements, expected " + std::to_string(recvCount));
      addReceived(CollectiveKind::Recv, recvCount * esize);
    }
    if (dst >= 0)
      addSent(CollectiveKind::Send, sendCount * esize);
  }

  void doBarrier() override {
    check(MPI_Barrier(comm), "MPI_Barrier", "barrier", "");
  }

private:
  void check(int code, const char *mpiCall, const char *call,
             const std::string &args) const {
    if (code != MPI_SUCCESS)
      throw Error(describe(call, args) + ": " + mpiCall +
                  " failed: " + mpiErrorText(code));
  }

  int intCount(size_t count, const char *call) const {
    if (count > size_t(INT_MAX))
      throw Error(describe(call, std::to_string(count) + " elements") +
                  ": MPI counts are int; split the transfer");
    return int(count);
  }

  MPI_Comm comm;
  bool ownsComm, finalizes;
  int myRank = 0, mySize = 1, myWorldRank = 0;
  std::vector<int> members;
};

} // namespace

std::unique_ptr<Communicator> createMpiWorldCommunicator(int *argc,
                                                         char ***argv) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized)
    throw Error("MPI was already finalized; it cannot be initialized again");
  bool initHere = false;
  if (!initialized) {
    int provided = 0;
    // SERIALIZED: the executor's collectives may run on a thread beside
    // compute (one thread calls MPI at a time); the CPU kernels' OpenMP
    // threads never do.
    int code = MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
    if (code != MPI_SUCCESS)
      throw Error("MPI_Init_thread failed: " + mpiErrorText(code));
    initHere = true;
  }
  return std::make_unique<MpiComm>(MPI_COMM_WORLD, /*ownsComm=*/false,
                                   /*finalizes=*/initHere);
}

} // namespace dsc::rt

#else // !DSC_HAVE_MPI

namespace dsc::rt {

std::unique_ptr<Communicator> createMpiWorldCommunicator(int *, char ***) {
  throw Error("this dsc runtime was built without MPI: install an MPI "
              "(libopenmpi-dev) and reconfigure to use mpirun");
}

} // namespace dsc::rt

#endif // DSC_HAVE_MPI
