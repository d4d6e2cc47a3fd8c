//===- CommLane.h - Collectives on a thread beside compute ------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// A host "stream": one worker thread that runs launched work in launch order
// (FIFO). The CPU backend runs a rank's collectives on one, so they reach
// every group in program order while its compute thread goes on; the
// executor's NVMe tier runs its file reads and writes on another. A
// ticket names a launch; waiting for it waits for every earlier one too.
// The first failure stops the lane: later launches are dropped, and every
// wait rethrows it.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_COMMLANE_H
#define DSC_RUNTIME_COMMLANE_H

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace dsc::rt {

class CommLane {
public:
  CommLane();
  /// Waits for the launched work to finish (failures are dropped: a
  /// destructor does not throw).
  ~CommLane();
  CommLane(const CommLane &) = delete;
  CommLane &operator=(const CommLane &) = delete;

  /// Queues `work`; returns its ticket (1, 2, ...).
  uint64_t launch(std::function<void()> work);
  /// Blocks until the work of `ticket` and all before it has run; rethrows
  /// the lane's first failure.
  void wait(uint64_t ticket);
  /// wait(last ticket).
  void waitAll();

private:
  void serve();

  std::mutex mutex;
  std::condition_variable queued, finished;
  std::deque<std::pair<uint64_t, std::function<void()>>> queue;
  uint64_t launched = 0, completed = 0;
  std::exception_ptr failure;
  bool stopping = false;
  std::thread worker;
};

} // namespace dsc::rt

#endif // DSC_RUNTIME_COMMLANE_H
