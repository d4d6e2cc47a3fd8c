//===- ThreadCollectives.cpp - Ring collectives between threads -----------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The thread communicator's collectives: ring reduce-scatter, all-reduce and
// all-gather over shared memory (each rank reads its predecessor's chunk in
// place, with a fixed reduction order so every rank ends bitwise identical),
// all-to-all and the broadcast chain. Each counts the bytes it moves, which
// are the ring model's (dsc/Support/CollectiveBytes.h) by construction: the
// chunks are ringChunk's. Steps are sequenced by the tick protocol of
// ThreadCommunicator.cpp.
//
//===----------------------------------------------------------------------===//

#include "RingCombine.h"
#include "ThreadCommImpl.h"

namespace dsc::rt::detail {

void ThreadComm::ringReduceScatter(Lock &lock, const Call &call, size_t count,
                                   DType dtype, ReduceOp op,
                                   CollectiveKind kind, const char *ownBase,
                                   char *finalDst, bool wholeBuffer) {
  int n = size(), prev = mod(me - 1, n);
  size_t esize = dtypeSize(dtype);
  for (int s = 0; s + 1 < n; ++s) {
    int k = mod(me - s - 2, n);
    waitTicks(lock, call, prev, call.base + 1 + uint64_t(s));
    const Slot &from = group->slots[prev];
    // Step 0 reads the predecessor's own input; later steps the partial it
    // wrote in its scratch (the buffer itself for all-reduce).
    const char *partialBase = s == 0 ? from.send : from.scratch;
    ThreadComm *sender = from.comm;
    auto [off, len] = chunkOf(count, n, k, esize);
    bool last = s + 2 == n;
    char *dst = last ? finalDst + (wholeBuffer ? off : 0)
                     : group->slots[me].scratch + off;
    lock.unlock();
    if (len)
      combineBytes(dst, partialBase + off, ownBase + off, len / esize, dtype,
                   op, last ? n : 1);
    addReceived(kind, len);
    sender->countSentBy(kind, len);
    lock.lock();
    tick(lock);
  }
}

void ThreadComm::doAllReduce(void *buf, size_t count, DType dtype,
                             ReduceOp op) {
  std::string what = describe(
      "all_reduce", std::to_string(count) + " elements, " + reduceOpName(op));
  Lock lock(group->mu);
  Call call =
      enter(lock, Op::AllReduce, what, count, dtype, op, 0, buf, buf, buf);
  int n = size(), prev = mod(me - 1, n);
  size_t esize = dtypeSize(dtype);
  char *bytes = static_cast<char *>(buf);
  ringReduceScatter(lock, call, count, dtype, op, CollectiveKind::AllReduce,
                    bytes, bytes, /*wholeBuffer=*/true);
  // All-gather: pass the finished chunks on around the ring.
  for (int t = 0; t + 1 < n; ++t) {
    int k = mod(me - t - 1, n);
    uint64_t step = uint64_t(n - 1 + t);
    waitTicks(lock, call, prev, call.base + 1 + step);
    const Slot &from = group->slots[prev];
    const char *src = from.recv;
    ThreadComm *sender = from.comm;
    auto [off, len] = chunkOf(count, n, k, esize);
    lock.unlock();
    copyBytes(bytes + off, src + off, len);
    addReceived(CollectiveKind::AllReduce, len);
    sender->countSentBy(CollectiveKind::AllReduce, len);
    lock.lock();
    tick(lock);
  }
  waitAll(lock, call, call.base + 1 + 2 * uint64_t(n - 1));
}

void ThreadComm::doReduceScatter(const void *send, void *recv, size_t recvCount,
                                 DType dtype, ReduceOp op) {
  std::string what =
      describe("reduce_scatter", std::to_string(recvCount) +
                                     " elements per rank, " + reduceOpName(op));
  int n = size();
  size_t esize = dtypeSize(dtype);
  // Partials of the chunks this rank passes on; its own chunk goes straight
  // to `recv`.
  scratch.resize(size_t(n) * recvCount * esize);
  Lock lock(group->mu);
  Call call = enter(lock, Op::ReduceScatter, what, recvCount, dtype, op, 0,
                    send, recv, scratch.data());
  if (n == 1) {
    lock.unlock();
    copyBytes(recv, send, recvCount * esize);
    return;
  }
  ringReduceScatter(lock, call, size_t(n) * recvCount, dtype, op,
                    CollectiveKind::ReduceScatter,
                    static_cast<const char *>(send), static_cast<char *>(recv),
                    /*wholeBuffer=*/false);
  waitAll(lock, call, call.base + uint64_t(n));
}

void ThreadComm::doAllGather(const void *send, void *recv, size_t sendCount,
                             DType dtype) {
  std::string what =
      describe("all_gather", std::to_string(sendCount) + " elements per rank");
  int n = size(), prev = mod(me - 1, n);
  size_t chunk = sendCount * dtypeSize(dtype);
  char *out = static_cast<char *>(recv);
  // The rank's own block is local; copy it before publishing so the
  // successor may read `recv` for later blocks.
  copyBytes(out + size_t(me) * chunk, send, chunk);
  Lock lock(group->mu);
  Call call = enter(lock, Op::AllGather, what, sendCount, dtype, ReduceOp::Sum,
                    0, send, recv, nullptr);
  for (int t = 0; t + 1 < n; ++t) {
    int k = mod(me - t - 1, n);
    waitTicks(lock, call, prev, call.base + 1 + uint64_t(t));
    const Slot &from = group->slots[prev];
    const char *src = t == 0 ? from.send : from.recv + size_t(k) * chunk;
    ThreadComm *sender = from.comm;
    lock.unlock();
    copyBytes(out + size_t(k) * chunk, src, chunk);
    addReceived(CollectiveKind::AllGather, chunk);
    sender->countSentBy(CollectiveKind::AllGather, chunk);
    lock.lock();
    tick(lock);
  }
  waitAll(lock, call, call.base + uint64_t(n));
}

void ThreadComm::doAllToAll(const void *send, void *recv, size_t countPerRank,
                            DType dtype) {
  std::string what = describe("all_to_all", std::to_string(countPerRank) +
                                                " elements per rank");
  int n = size();
  size_t chunk = countPerRank * dtypeSize(dtype);
  char *out = static_cast<char *>(recv);
  Lock lock(group->mu);
  Call call = enter(lock, Op::AllToAll, what, countPerRank, dtype,
                    ReduceOp::Sum, 0, send, recv, nullptr);
  waitAll(lock, call, call.base + 1);
  // Start with the successor so the ranks do not all read rank 0 at once.
  for (int i = 0; i < n; ++i) {
    int p = mod(me + i, n);
    const Slot &from = group->slots[p];
    const char *src = from.send + size_t(me) * chunk;
    ThreadComm *sender = from.comm;
    lock.unlock();
    copyBytes(out + size_t(p) * chunk, src, chunk);
    if (p != me) {
      addReceived(CollectiveKind::AllToAll, chunk);
      sender->countSentBy(CollectiveKind::AllToAll, chunk);
    }
    lock.lock();
  }
  tick(lock);
  waitAll(lock, call, call.base + 2);
}

void ThreadComm::doBroadcast(void *buf, size_t count, DType dtype, int root) {
  std::string what =
      describe("broadcast", std::to_string(count) + " elements, root " +
                                std::to_string(root));
  int n = size(), prev = mod(me - 1, n);
  size_t bytes = count * dtypeSize(dtype);
  Lock lock(group->mu);
  Call call = enter(lock, Op::Broadcast, what, count, dtype, ReduceOp::Sum,
                    root, buf, buf, nullptr);
  // A chain from the root, as NCCL's ring broadcast: each rank copies from
  // its predecessor once that one has the data.
  if (me != root) {
    waitTicks(lock, call, prev, call.base + 2);
    const Slot &from = group->slots[prev];
    const char *src = from.recv;
    ThreadComm *sender = from.comm;
    lock.unlock();
    copyBytes(buf, src, bytes);
    addReceived(CollectiveKind::Broadcast, bytes);
    sender->countSentBy(CollectiveKind::Broadcast, bytes);
    lock.lock();
  }
  tick(lock);
  waitAll(lock, call, call.base + 2);
}

} // namespace dsc::rt::detail
