//===- ThreadCommImpl.h - The thread communicator's state -------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Private to lib/Runtime/Comm: the state the thread ranks share (the world,
// its groups, each rank's published slot, the point-to-point mailbox) and
// the ThreadComm class, whose members live in three files by concern:
// ThreadCommunicator.cpp (the tick protocol, waits, failure, split and the
// ThreadWorld), ThreadCollectives.cpp (the ring algorithms) and
// ThreadSendRecv.cpp (rendezvous point-to-point).
//
//===----------------------------------------------------------------------===//

#ifndef DSC_LIB_RUNTIME_COMM_THREADCOMMIMPL_H
#define DSC_LIB_RUNTIME_COMM_THREADCOMMIMPL_H

#include "dsc/Runtime/Error.h"
#include "dsc/Runtime/ThreadCommunicator.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

namespace dsc::rt::detail {

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

class ThreadComm;

/// What a rank published for its current collective.
struct Slot {
  uint64_t seq = 0;   // collectives entered
  uint64_t ticks = 0; // monotonic progress, see ThreadCommunicator.cpp
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

/// "0 2 4 6": world ranks for messages.
std::string rankList(const std::vector<int> &ranks);
/// "2.5 s": a timeout for messages.
std::string seconds(std::chrono::milliseconds ms);

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

inline void copyBytes(void *dst, const void *src, size_t bytes) {
  if (bytes && dst != src)
    std::memmove(dst, src, bytes);
}

inline int mod(int a, int n) { return ((a % n) + n) % n; }

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

} // namespace dsc::rt::detail

#endif // DSC_LIB_RUNTIME_COMM_THREADCOMMIMPL_H
