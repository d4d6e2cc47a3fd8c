//===- CommLane.h - Collectives on a thread beside compute ------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The CPU backend's communication "stream": one worker thread per rank that
// runs launched collectives in launch order (FIFO), so a rank's collectives
// reach every group in program order while its compute thread goes on. A
// ticket names a launch; waiting for it waits for every earlier one too.
// The first failure stops the lane: later launches are dropped, and every
// wait rethrows it.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_LIB_RUNTIME_CORE_COMMLANE_H
#define DSC_LIB_RUNTIME_CORE_COMMLANE_H

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

#endif // DSC_LIB_RUNTIME_CORE_COMMLANE_H
