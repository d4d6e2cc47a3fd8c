//===- ThreadCommunicator.cpp - Thread ranks: groups and rendezvous -------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Ranks as threads: the machinery every call of the thread communicator
// stands on (entering a call, the tick protocol, waits with timeouts and
// failure propagation, matching checks), the calls that are only that
// machinery (barrier, split), and the ThreadWorld with runRanks. The ring
// algorithms are in ThreadCollectives.cpp, send/recv in ThreadSendRecv.cpp,
// the shared state in ThreadCommImpl.h.
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
// All waits go through ThreadComm::waitFor, which wakes on the awaited
// peer's progress, on a world failure, on the peer's thread exiting, and
// at the deadline, so no call blocks longer than the timeout.
//
//===----------------------------------------------------------------------===//

#include "ThreadCommImpl.h"

#include <cstdlib>
#include <sstream>
#include <thread>

namespace dsc::rt {

namespace detail {

namespace {

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

} // namespace

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

namespace {

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

} // namespace

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

} // namespace detail

using detail::ThreadComm;

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
