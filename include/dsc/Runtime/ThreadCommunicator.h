//===- ThreadCommunicator.h - Ranks as threads of one process ---*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The in-process communicator behind `dsc-run --np N`: N ranks are N threads
// sharing a ThreadWorld; collectives are ring algorithms over shared memory
// (each rank reads its predecessor's chunk), so every rank reduces in the
// same fixed order and ends with bitwise identical results, run after run.
// A rank that throws or aborts makes every other rank's collective throw
// within a bounded time instead of hanging; a collective that cannot
// complete times out naming the ranks that did not arrive.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_THREADCOMMUNICATOR_H
#define DSC_RUNTIME_THREADCOMMUNICATOR_H

#include "dsc/Runtime/Communicator.h"

#include <chrono>
#include <functional>
#include <memory>
#include <string>

namespace dsc::rt {

namespace detail {
struct ThreadWorldState;
} // namespace detail

struct ThreadWorldOptions {
  /// How long one call may wait for its peers before it fails the world
  /// with a message naming the ranks that did not arrive. Long by default:
  /// a rank may legitimately compute for minutes between collectives.
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};

  /// The defaults, with the timeout from DSC_COMM_TIMEOUT (seconds, e.g.
  /// "30" or "2.5") when it is set; a malformed value is an Error naming it.
  static ThreadWorldOptions fromEnvironment();
};

/// The state N thread ranks share. Create it once, hand communicator(r) to
/// the thread of rank r (runRanks does both).
class ThreadWorld {
public:
  explicit ThreadWorld(int size, ThreadWorldOptions options = {});
  ~ThreadWorld();
  ThreadWorld(const ThreadWorld &) = delete;
  ThreadWorld &operator=(const ThreadWorld &) = delete;

  int size() const;
  /// Rank `rank`'s world communicator; one per rank (asking twice is an
  /// error), used only by that rank's thread. It keeps the world's state
  /// alive, so it may outlive this object. Destroying it counts as the rank
  /// leaving (see markExited): a thread that fails should call fail() before
  /// the communicator is destroyed, or its peers learn only that it left
  /// (runRanks does this).
  std::unique_ptr<Communicator> communicator(int rank);

  /// Fails the world: every rank blocked in or later entering a collective
  /// throws Error("rank <rank> failed: <reason>"). The first failure wins;
  /// later ones (the other ranks' consequent errors) are ignored.
  void fail(int rank, const std::string &reason);
  /// Records that rank's thread has returned: a rank waiting for it fails at
  /// once ("exited before ...") instead of waiting for the timeout.
  void markExited(int rank);

  bool failed() const;
  /// The first failure's message, "" when none.
  std::string failureMessage() const;
  /// The world rank that failed first, -1 when none.
  int failedRank() const;

private:
  std::shared_ptr<detail::ThreadWorldState> state;
};

/// Runs `body` on `n` thread ranks of a new ThreadWorld, each with its world
/// communicator, joins them all, and throws Error(first failure's message)
/// if any rank threw, aborted or timed out ("rank 3 failed: <what>").
void runRanks(int n, const std::function<void(Communicator &)> &body,
              ThreadWorldOptions options = {});

} // namespace dsc::rt

#endif // DSC_RUNTIME_THREADCOMMUNICATOR_H
