//===- ThreadCommunicator.cpp - Ring collectives between threads ----------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Ranks as threads: ring collectives over shared memory with a fixed
// reduction order, rendezvous send/recv, and failure propagation.
//
// Progress protocol. Each rank of a group has a monotonic tick counter. A
// collective of kind K advances every rank's counter by the same number of
// ticks: one on arrival (after publishing its buffer pointers) and one per
// ring step. A rank at step s of a ring waits until its predecessor's
// counter reaches base + 1 + s, i.e. the predecessor has finished step s - 1
// and the chunk it produced there is ready to read in place; the ring's own
// dependency chain keeps a rank from overwriting a chunk its successor has
// still to read. Every collective ends by waiting for all ranks' last tick,
// so no rank leaves (and reuses its buffers) while another still reads them.
// Since every rank advances by the same count, `base` agrees across ranks
// and counters never need resetting.
//
// All waits go through ThreadCommunicator::waitFor, which wakes on the awaited
// peer's progress, on a world failure, on the peer's thread exiting, and
// at the deadline, so no call blocks longer than the timeout.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/ThreadCommunicator.h"
#include "dsc/Runtime/Error.h"
#include "dsc/Runtime/FloatConvert.h"

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <tuple>

namespace dsc::rt {

namespace {

using Clock = std::chrono::steady_clock;

/// The calls that take part in the tick protocol (point-to-point does not).
enum class Op : uint32_t {
  AllReduce,
  ReduceScatter,
  AllGather,
  AllToAll,
  Broadcast,
  Barrier,
  Split
};

const char *opName(Op op) {
  switch (op) {
  case Op::AllReduce:
    return "all_reduce";
  case Op::ReduceScatter:
    return "reduce_scatter";
  case Op::AllGather:
    return "all_gather";
  case Op::AllToAll:
    return "all_to_all";
  case Op::Broadcast:
    return "broadcast";
  case Op::Barrier:
    return "barrier";
  case Op::Split:
    return "split";
  }
  return "unknown";
}

class ThreadComm;

/// What a rank published for its current collective.
struct Slot {
  uint64_t seq = 0;   // collectives entered
  uint64_t ticks = 0; // monotonic progress, see the file comment
  Op op = Op::Barrier;
  size_t count = 0;
  DType dtype = DType::F32;
  ReduceOp reduce = ReduceOp::Sum;
  int root = 0;
  const char *send = nullptr;
  char *recv = nullptr;
  char *scratch = nullptr;
  ThreadComm *comm = nullptr;
  int color = 0, key = 0;
  int waitingOn = -1; // the group rank this rank sleeps on, for wake-ups
};

/// A posted send, owned by the sending rank's stack until `done`.
struct Message {
  const char *data;
  size_t bytes;
  bool done = false;
};

struct Group {
  uint64_t id = 0;
  std::vector<int> members; // world ranks in group order
  std::mutex mu;
  std::vector<Slot> slots;
  std::unique_ptr<std::condition_variable[]> cvs; // one per member
  // (source, destination, tag) in group ranks -> posted sends, FIFO.
  std::map<std::tuple<int, int, int>, std::deque<Message *>> mail;

  Group(uint64_t id, std::vector<int> members)
      : id(id), members(std::move(members)), slots(this->members.size()),
        cvs(new std::condition_variable[this->members.size()]) {}
  int size() const { return int(members.size()); }

  /// Wakes the ranks sleeping on `who` (lock held).
  void wakeWaitersOn(int who) {
    for (int m = 0; m < size(); ++m)
      if (slots[m].waitingOn == who)
        cvs[m].notify_one();
  }
  void wakeAll() {
    std::lock_guard<std::mutex> lock(mu);
    for (int m = 0; m < size(); ++m)
      cvs[m].notify_all();
  }
};

std::string rankList(const std::vector<int> &ranks) {
  std::ostringstream os;
  for (size_t i = 0; i < ranks.size(); ++i)
    os << (i ? " " : "") << ranks[i];
  return os.str();
}

std::string seconds(std::chrono::milliseconds ms) {
  std::ostringstream os;
  os << double(ms.count()) / 1000.0 << " s";
  return os.str();
}

} // namespace

namespace detail {

struct ThreadWorldState {
  int size;
  ThreadWorldOptions options;
  std::atomic<bool> failed{false};
  std::unique_ptr<std::atomic<bool>[]> exited;
  std::unique_ptr<std::atomic<bool>[]> handedOut;

  std::mutex mu; // guards everything below
  std::string failure;
  int failedRank = -1;
  uint64_t nextGroupId = 1;
  std::vector<std::weak_ptr<Group>> groups; // to wake on failure
  std::shared_ptr<Group> world;
  struct PendingSplit {
    std::shared_ptr<Group> group;
    int takers;
  };
  // (parent group id, parent's collective seq, color) -> the new group,
  // until each of its members has taken it.
  std::map<std::tuple<uint64_t, uint64_t, int>, PendingSplit> splits;

  ThreadWorldState(int size, ThreadWorldOptions options)
      : size(size), options(options), exited(new std::atomic<bool>[size]),
        handedOut(new std::atomic<bool>[size]) {
    std::vector<int> all(size);
    for (int r = 0; r < size; ++r) {
      all[r] = r;
      exited[r] = false;
      handedOut[r] = false;
    }
    world = newGroup(std::move(all));
  }

  std::shared_ptr<Group> newGroup(std::vector<int> members) {
    auto g = std::make_shared<Group>(nextGroupId++, std::move(members));
    groups.erase(std::remove_if(
                     groups.begin(), groups.end(),
                     [](const std::weak_ptr<Group> &w) { return w.expired(); }),
                 groups.end());
    groups.push_back(g);
    return g;
  }

  void wakeEveryone() {
    std::vector<std::shared_ptr<Group>> live;
    {
      std::lock_guard<std::mutex> lock(mu);
      for (auto &w : groups)
        if (auto g = w.lock())
          live.push_back(std::move(g));
    }
    for (auto &g : live)
      g->wakeAll();
  }

  /// Records the first failure; `message` is complete ("rank 3 failed: x").
  void failWith(int rank, const std::string &message) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (failed.load())
        return;
      failure = message;
      failedRank = rank;
      failed.store(true);
    }
    wakeEveryone();
  }

  std::string failureMessage() {
    std::lock_guard<std::mutex> lock(mu);
    return failure;
  }
};

} // namespace detail

namespace {

using detail::ThreadWorldState;

template <typename T>
void combine(T *dst, const T *partial, const T *own, size_t n, ReduceOp op,
             int divisor) {
  switch (op) {
  case ReduceOp::Sum:
  case ReduceOp::Avg:
    for (size_t i = 0; i < n; ++i)
      dst[i] = partial[i] + own[i];
    if (op == ReduceOp::Avg && divisor > 1)
      for (size_t i = 0; i < n; ++i)
        dst[i] = dst[i] / T(divisor);
    return;
  case ReduceOp::Max:
    for (size_t i = 0; i < n; ++i)
      dst[i] = own[i] > partial[i] ? own[i] : partial[i];
    return;
  case ReduceOp::Min:
    for (size_t i = 0; i < n; ++i)
      dst[i] = own[i] < partial[i] ? own[i] : partial[i];
    return;
  }
}

/// dst = partial (op) own, then / divisor for Avg when divisor > 1 (the
/// last step of a ring reduction). The partial is always the left operand:
/// chunk c is summed as ((x[c+1] + x[c+2]) + ...) + x[c] on every rank.
void combineBytes(char *dst, const char *partial, const char *own, size_t count,
                  DType dtype, ReduceOp op, int divisor) {
  switch (dtype) {
  case DType::F32:
    return combine(reinterpret_cast<float *>(dst),
                   reinterpret_cast<const float *>(partial),
                   reinterpret_cast<const float *>(own), count, op, divisor);
  case DType::F64:
    return combine(reinterpret_cast<double *>(dst),
                   reinterpret_cast<const double *>(partial),
                   reinterpret_cast<const double *>(own), count, op, divisor);
  case DType::I32:
    return combine(reinterpret_cast<int32_t *>(dst),
                   reinterpret_cast<const int32_t *>(partial),
                   reinterpret_cast<const int32_t *>(own), count, op, divisor);
  case DType::BF16:
  case DType::F16: {
    // Each ring step in f32, rounded back to 16 bits: the numerics of a
    // 16-bit ring reduction (NCCL's).
    const bool bf16 = dtype == DType::BF16;
    auto load = [&](const char *p, size_t i) {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      return bf16 ? bf16ToFloat(h) : f16ToFloat(h);
    };
    std::vector<float> a(count), b(count);
    for (size_t i = 0; i < count; ++i) {
      a[i] = load(partial, i);
      b[i] = load(own, i);
    }
    combine(a.data(), a.data(), b.data(), count, op, divisor);
    for (size_t i = 0; i < count; ++i) {
      uint16_t h = bf16 ? floatToBf16(a[i]) : floatToF16(a[i]);
      std::memcpy(dst + 2 * i, &h, 2);
    }
    return;
  }
  }
}

void copyBytes(void *dst, const void *src, size_t bytes) {
  if (bytes && dst != src)
    std::memmove(dst, src, bytes);
}

int mod(int a, int n) { return ((a % n) + n) % n; }

class ThreadComm final : public Communicator {
public:
  ThreadComm(std::shared_ptr<ThreadWorldState> world,
             std::shared_ptr<Group> group, int me)
      : world(std::move(world)), group(std::move(group)), me(me) {}
  ~ThreadComm() override {
    // A rank's world communicator going away is the rank leaving: peers
    // still waiting for it fail at once rather than at the timeout.
    if (group == world->world) {
      world->exited[worldRank()].store(true);
      world->wakeEveryone();
    }
  }

  int rank() const override { return me; }
  int size() const override { return group->size(); }
  int worldRank() const override { return group->members[me]; }
  const char *backendName() const override { return "threads"; }
  const std::vector<int> &worldRanks() const override { return group->members; }
  bool canReduce(DType) const override { return true; }
  void abort(const std::string &reason) override {
    world->failWith(worldRank(), "rank " + std::to_string(worldRank()) +
                                     " failed: " + reason);
    throw Error("rank " + std::to_string(worldRank()) + " aborted: " + reason);
  }

  std::unique_ptr<Communicator> split(int color, int key) override;

  /// Lets a reader on another thread count what it took from this rank.
  void countSentBy(CollectiveKind k, uint64_t bytes) { addSent(k, bytes); }

protected:
  void doAllReduce(void *buf, size_t count, DType dtype, ReduceOp op) override;
  void doReduceScatter(const void *send, void *recv, size_t recvCount,
                       DType dtype, ReduceOp op) override;
  void doAllGather(const void *send, void *recv, size_t sendCount,
                   DType dtype) override;
  void doAllToAll(const void *send, void *recv, size_t countPerRank,
                  DType dtype) override;
  void doBroadcast(void *buf, size_t count, DType dtype, int root) override;
  void doSendRecv(const void *sendBuf, size_t sendCount, int dst, void *recvBuf,
                  size_t recvCount, int src, DType dtype, int tag) override;
  void doBarrier() override;

private:
  using Lock = std::unique_lock<std::mutex>;

  /// One collective in flight on this rank.
  struct Call {
    Op op;
    std::string what; // describe(...) for messages
    uint64_t base;    // ticks before arrival
    Clock::time_point deadline;
  };

  Call enter(Lock &lock, Op op, std::string what, size_t count, DType dtype,
             ReduceOp reduce, int root, const void *send, void *recv,
             void *scratch);
  void tick(Lock &lock);
  /// Blocks until peer `p` has reached `target` ticks in this call.
  void waitTicks(Lock &lock, const Call &call, int p, uint64_t target);
  /// Blocks until every rank has reached `target` ticks.
  void waitAll(Lock &lock, const Call &call, uint64_t target);
  /// Blocks until `missing()` returns -1; it returns the group rank still
  /// awaited. `stall` says what that rank failed to do, for messages.
  template <typename Missing>
  void waitFor(Lock &lock, Clock::time_point deadline, const std::string &what,
               Missing missing, const std::function<std::string(int)> &stall);
  void checkMatches(Lock &lock, const Call &call, int p);
  /// Fails the world (which wakes every group, so `lock` is released first)
  /// and throws `message`.
  [[noreturn]] void failAndThrow(Lock &lock, const std::string &message);
  void throwIfFailed(const std::string &what);

  void ringReduceScatter(Lock &lock, const Call &call, size_t count,
                         DType dtype, ReduceOp op, CollectiveKind kind,
                         const char *ownBase, char *finalDst, bool wholeBuffer);

  std::shared_ptr<ThreadWorldState> world;
  std::shared_ptr<Group> group;
  int me;
  std::vector<char> scratch;
};

[[noreturn]] void ThreadComm::failAndThrow(Lock &lock,
                                           const std::string &message) {
  if (lock.owns_lock())
    lock.unlock();
  world->failWith(worldRank(), message);
  throw Error(message);
}

void ThreadComm::throwIfFailed(const std::string &what) {
  if (world->failed.load())
    throw Error(world->failureMessage() + " (seen by world rank " +
                std::to_string(worldRank()) + " in " + what + ")");
}

template <typename Missing>
void ThreadComm::waitFor(Lock &lock, Clock::time_point deadline,
                         const std::string &what, Missing missing,
                         const std::function<std::string(int)> &stall) {
  Slot &mine = group->slots[me];
  for (;;) {
    throwIfFailed(what);
    int p = missing();
    if (p < 0) {
      mine.waitingOn = -1;
      return;
    }
    int peerWorld = group->members[p];
    if (world->exited[peerWorld].load()) {
      mine.waitingOn = -1;
      failAndThrow(lock, what + ": world rank " + std::to_string(peerWorld) +
                             " exited (its thread returned) before taking "
                             "part");
    }
    Clock::time_point now = Clock::now();
    if (now >= deadline) {
      mine.waitingOn = -1;
      failAndThrow(lock, what + ": timed out after " +
                             seconds(world->options.timeout) + ": " + stall(p));
    }
    mine.waitingOn = p;
    // The slice bounds the sleep even if a wake-up were lost.
    group->cvs[me].wait_until(
        lock, std::min(deadline, now + std::chrono::milliseconds(200)));
  }
}

ThreadComm::Call ThreadComm::enter(Lock &lock, Op op, std::string what,
                                   size_t count, DType dtype, ReduceOp reduce,
                                   int root, const void *send, void *recv,
                                   void *scratchBuf) {
  throwIfFailed(what);
  Slot &s = group->slots[me];
  Call call{op, std::move(what), s.ticks,
            Clock::now() + world->options.timeout};
  s.seq++;
  s.op = op;
  s.count = count;
  s.dtype = dtype;
  s.reduce = reduce;
  s.root = root;
  s.send = static_cast<const char *>(send);
  s.recv = static_cast<char *>(recv);
  s.scratch = static_cast<char *>(scratchBuf);
  s.comm = this;
  tick(lock);
  return call;
}

void ThreadComm::tick(Lock &) {
  group->slots[me].ticks++;
  group->wakeWaitersOn(me);
}

/// "all_reduce(64 x f32, sum)" for a slot, to name what a peer called.
std::string slotCall(const Slot &s) {
  static const char *dtypes[] = {"f32", "f64", "i32", "bf16", "f16"};
  std::ostringstream os;
  os << opName(s.op);
  if (s.op == Op::Barrier || s.op == Op::Split)
    return os.str() + "()";
  os << "(" << s.count << " x " << dtypes[uint32_t(s.dtype) % 5];
  if (s.op == Op::AllReduce || s.op == Op::ReduceScatter)
    os << ", " << reduceOpName(s.reduce);
  if (s.op == Op::Broadcast)
    os << ", root " << s.root;
  return os.str() + ")";
}

void ThreadComm::checkMatches(Lock &lock, const Call &call, int p) {
  const Slot &mine = group->slots[me], &theirs = group->slots[p];
  if (theirs.seq != mine.seq)
    return; // p has moved on, so it matched when it was here
  bool same = theirs.op == mine.op;
  if (same && mine.op != Op::Barrier && mine.op != Op::Split)
    same = theirs.count == mine.count && theirs.dtype == mine.dtype &&
           theirs.reduce == mine.reduce && theirs.root == mine.root;
  if (!same)
    failAndThrow(lock, call.what + ": collective mismatch: world rank " +
                           std::to_string(worldRank()) + " called " +
                           slotCall(mine) + " as its collective #" +
                           std::to_string(mine.seq) +
                           " on this group but world rank " +
                           std::to_string(group->members[p]) + " called " +
                           slotCall(theirs));
}

void ThreadComm::waitTicks(Lock &lock, const Call &call, int p,
                           uint64_t target) {
  const Slot &mine = group->slots[me];
  waitFor(
      lock, call.deadline, call.what,
      [&]() -> int {
        if (group->slots[p].ticks < target)
          return p;
        checkMatches(lock, call, p);
        return -1;
      },
      [&](int q) {
        // Name every rank that never came, not only the neighbour awaited:
        // the others are stalled behind them.
        std::vector<int> absent;
        for (int r = 0; r < size(); ++r)
          if (group->slots[r].seq < mine.seq)
            absent.push_back(group->members[r]);
        if (!absent.empty())
          return "world rank(s) " + rankList(absent) + " did not arrive";
        return "world rank " + std::to_string(group->members[q]) +
               " arrived but did not finish its part";
      });
}

void ThreadComm::waitAll(Lock &lock, const Call &call, uint64_t target) {
  const Slot &mine = group->slots[me];
  waitFor(
      lock, call.deadline, call.what,
      [&]() -> int {
        for (int q = 0; q < size(); ++q) {
          if (group->slots[q].ticks < target)
            return q;
          checkMatches(lock, call, q);
        }
        return -1;
      },
      [&](int) {
        std::vector<int> absent, stuck;
        for (int q = 0; q < size(); ++q) {
          if (group->slots[q].seq < mine.seq)
            absent.push_back(group->members[q]);
          else if (group->slots[q].ticks < target)
            stuck.push_back(group->members[q]);
        }
        std::string s;
        if (!absent.empty())
          s = "world rank(s) " + rankList(absent) + " did not arrive";
        if (!stuck.empty())
          s += std::string(s.empty() ? "" : "; ") + "world rank(s) " +
               rankList(stuck) + " arrived but did not finish";
        return s;
      });
}

/// Byte offset and length of chunk `k` when `count` elements are split into
/// `n` near-equal chunks (the first count % n one element longer), as
/// ringBytesSent assumes.
std::pair<size_t, size_t> chunkOf(size_t count, int n, int k, size_t esize) {
  size_t base = count / size_t(n), extra = count % size_t(n);
  size_t first = size_t(k) * base + std::min(size_t(k), extra);
  size_t len = base + (size_t(k) < extra ? 1 : 0);
  return {first * esize, len * esize};
}

void ThreadComm::ringReduceScatter(Lock &lock, const Call &call, size_t count,
                                   DType dtype, ReduceOp op,
                                   CollectiveKind kind, const char *ownBase,
                                   char *finalDst, bool wholeBuffer) {
  int n = size(), prev = mod(me - 1, n);
  size_t esize = commElementSize(dtype);
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
  size_t esize = commElementSize(dtype);
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
  size_t esize = commElementSize(dtype);
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
  size_t chunk = sendCount * commElementSize(dtype);
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
  size_t chunk = countPerRank * commElementSize(dtype);
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
  size_t bytes = count * commElementSize(dtype);
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

void ThreadComm::doBarrier() {
  Lock lock(group->mu);
  Call call = enter(lock, Op::Barrier, describe("barrier", ""), 0, DType::F32,
                    ReduceOp::Sum, 0, nullptr, nullptr, nullptr);
  waitAll(lock, call, call.base + 1);
}

std::unique_ptr<Communicator> ThreadComm::split(int color, int key) {
  std::string what = describe("split", "color " + std::to_string(color) +
                                           ", key " + std::to_string(key));
  Lock lock(group->mu);
  group->slots[me].color = color;
  group->slots[me].key = key;
  Call call = enter(lock, Op::Split, what, 0, DType::F32, ReduceOp::Sum, 0,
                    nullptr, nullptr, nullptr);
  uint64_t seq = group->slots[me].seq;
  waitAll(lock, call, call.base + 1);
  std::vector<std::pair<int, int>> peers; // (key, group rank)
  for (int q = 0; q < size(); ++q)
    if (color >= 0 && group->slots[q].color == color)
      peers.emplace_back(group->slots[q].key, q);
  tick(lock);
  lock.unlock();

  std::unique_ptr<Communicator> result;
  if (color >= 0) {
    std::sort(peers.begin(), peers.end());
    std::vector<int> members;
    int newRank = -1;
    for (auto &[k, q] : peers) {
      if (q == me)
        newRank = int(members.size());
      members.push_back(group->members[q]);
    }
    std::shared_ptr<Group> made;
    {
      std::lock_guard<std::mutex> worldLock(world->mu);
      auto id = std::make_tuple(group->id, seq, color);
      auto it = world->splits.find(id);
      if (it == world->splits.end())
        it = world->splits
                 .emplace(id,
                          ThreadWorldState::PendingSplit{
                              world->newGroup(members), int(peers.size())})
                 .first;
      made = it->second.group;
      if (--it->second.takers == 0)
        world->splits.erase(it);
    }
    result = std::make_unique<ThreadComm>(world, std::move(made), newRank);
  }
  lock.lock();
  waitAll(lock, call, call.base + 2);
  return result;
}

void ThreadComm::doSendRecv(const void *sendBuf, size_t sendCount, int dst,
                            void *recvBuf, size_t recvCount, int src,
                            DType dtype, int tag) {
  size_t esize = commElementSize(dtype);
  std::string what;
  if (dst >= 0)
    what = describe("send", std::to_string(sendCount) + " elements to rank " +
                                std::to_string(dst) + ", tag " +
                                std::to_string(tag));
  if (src >= 0)
    what += (what.empty() ? "" : " + ") +
            describe("recv", std::to_string(recvCount) +
                                 " elements from rank " + std::to_string(src) +
                                 ", tag " + std::to_string(tag));
  Clock::time_point deadline = Clock::now() + world->options.timeout;
  Message posted{static_cast<const char *>(sendBuf), sendCount * esize};
  Lock lock(group->mu);
  throwIfFailed(what);
  auto outbox = std::make_tuple(me, dst, tag);
  if (dst >= 0) {
    group->mail[outbox].push_back(&posted);
    group->cvs[dst].notify_all();
  }
  try {
    if (src >= 0) {
      auto inbox = std::make_tuple(src, me, tag);
      waitFor(
          lock, deadline, what,
          [&]() -> int {
            auto it = group->mail.find(inbox);
            return it == group->mail.end() || it->second.empty() ? src : -1;
          },
          [&](int q) {
            return "no send from world rank " +
                   std::to_string(group->members[q]) + " with tag " +
                   std::to_string(tag) + " arrived";
          });
      auto it = group->mail.find(inbox);
      Message *m = it->second.front();
      it->second.pop_front();
      if (it->second.empty())
        group->mail.erase(it);
      if (m->bytes != recvCount * esize) {
        m->done = true; // the sender sees the failure, not a dangling entry
        failAndThrow(lock, what + ": message size mismatch: world rank " +
                               std::to_string(group->members[src]) + " sent " +
                               std::to_string(m->bytes) +
                               " bytes but world rank " +
                               std::to_string(worldRank()) + " expects " +
                               std::to_string(recvCount * esize));
      }
      lock.unlock();
      copyBytes(recvBuf, m->data, m->bytes);
      addReceived(CollectiveKind::Recv, m->bytes);
      lock.lock();
      m->done = true;
      group->wakeWaitersOn(me);
    }
    if (dst >= 0) {
      waitFor(
          lock, deadline, what, [&]() -> int { return posted.done ? -1 : dst; },
          [&](int q) {
            return "world rank " + std::to_string(group->members[q]) +
                   " did not receive the message (tag " + std::to_string(tag) +
                   ")";
          });
      addSent(CollectiveKind::Send, posted.bytes);
    }
  } catch (...) {
    // Never leave a pointer to this frame in the mailbox.
    if (!lock.owns_lock())
      lock.lock();
    if (dst >= 0 && !posted.done) {
      auto it = group->mail.find(outbox);
      if (it != group->mail.end()) {
        auto &q = it->second;
        q.erase(std::remove(q.begin(), q.end(), &posted), q.end());
        if (q.empty())
          group->mail.erase(it);
      }
    }
    throw;
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// ThreadWorld and runRanks
//===----------------------------------------------------------------------===//

ThreadWorldOptions ThreadWorldOptions::fromEnvironment() {
  ThreadWorldOptions options;
  const char *text = std::getenv("DSC_COMM_TIMEOUT");
  if (!text || !*text)
    return options;
  char *end = nullptr;
  double secs = std::strtod(text, &end);
  // Up to a year: longer would overflow the deadline arithmetic.
  if (end == text || *end != '\0' || !(secs > 0) || secs > 3.2e7)
    throw Error(std::string("DSC_COMM_TIMEOUT='") + text +
                "' is not a positive number of seconds");
  options.timeout =
      std::chrono::milliseconds(std::max<int64_t>(1, int64_t(secs * 1000.0)));
  return options;
}

ThreadWorld::ThreadWorld(int size, ThreadWorldOptions options) {
  if (size < 1)
    throw Error("a thread world needs at least one rank, got " +
                std::to_string(size));
  if (options.timeout.count() <= 0)
    throw Error("the thread communicator's timeout must be positive, got " +
                std::to_string(options.timeout.count()) + " ms");
  state = std::make_shared<detail::ThreadWorldState>(size, options);
}

ThreadWorld::~ThreadWorld() = default;

int ThreadWorld::size() const { return state->size; }

std::unique_ptr<Communicator> ThreadWorld::communicator(int rank) {
  if (rank < 0 || rank >= state->size)
    throw Error("thread world of " + std::to_string(state->size) +
                " ranks has no rank " + std::to_string(rank));
  if (state->handedOut[rank].exchange(true))
    throw Error("the communicator of thread rank " + std::to_string(rank) +
                " was already handed out (one per rank)");
  return std::make_unique<ThreadComm>(state, state->world, rank);
}

void ThreadWorld::fail(int rank, const std::string &reason) {
  state->failWith(rank, "rank " + std::to_string(rank) + " failed: " + reason);
}

void ThreadWorld::markExited(int rank) {
  if (rank < 0 || rank >= state->size)
    return;
  state->exited[rank].store(true);
  state->wakeEveryone();
}

bool ThreadWorld::failed() const { return state->failed.load(); }

std::string ThreadWorld::failureMessage() const {
  return state->failureMessage();
}

int ThreadWorld::failedRank() const {
  std::lock_guard<std::mutex> lock(state->mu);
  return state->failedRank;
}

void runRanks(int n, const std::function<void(Communicator &)> &body,
              ThreadWorldOptions options) {
  ThreadWorld world(n, options);
  std::vector<std::thread> threads;
  threads.reserve(size_t(n));
  auto runOne = [&world, &body](int r) {
    // Outlives the catch: its destruction marks the rank as gone, which must
    // not overtake the failure that names the cause.
    std::unique_ptr<Communicator> comm;
    try {
      comm = world.communicator(r);
      body(*comm);
    } catch (const std::exception &e) {
      world.fail(r, e.what());
    } catch (...) {
      world.fail(r, "an exception that is not a std::exception");
    }
    world.markExited(r);
  };
  try {
    for (int r = 0; r < n; ++r)
      threads.emplace_back(runOne, r);
  } catch (const std::exception &e) {
    // The ranks already started fail their next collective instead of
    // waiting for ranks that will never come.
    world.fail(int(threads.size()),
               std::string("could not start its thread: ") + e.what());
  }
  for (std::thread &t : threads)
    t.join();
  if (world.failed())
    throw Error(world.failureMessage());
}

} // namespace dsc::rt
