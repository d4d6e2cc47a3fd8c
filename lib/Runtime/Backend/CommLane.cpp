//===- CommLane.cpp - Collectives on a thread beside compute --------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/CommLane.h"

using namespace dsc::rt;

CommLane::CommLane() : worker([this] { serve(); }) {}

CommLane::~CommLane() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  queued.notify_all();
  worker.join();
}

uint64_t CommLane::launch(std::function<void()> work) {
  uint64_t ticket;
  {
    std::lock_guard<std::mutex> lock(mutex);
    ticket = ++launched;
    queue.emplace_back(ticket, std::move(work));
  }
  queued.notify_one();
  return ticket;
}

void CommLane::wait(uint64_t ticket) {
  std::unique_lock<std::mutex> lock(mutex);
  finished.wait(lock, [&] { return completed >= ticket || failure; });
  if (failure)
    std::rethrow_exception(failure);
}

void CommLane::waitAll() {
  uint64_t last;
  {
    std::lock_guard<std::mutex> lock(mutex);
    last = launched;
  }
  wait(last);
}

void CommLane::serve() {
  std::unique_lock<std::mutex> lock(mutex);
  for (;;) {
    queued.wait(lock, [&] { return stopping || !queue.empty(); });
    if (queue.empty())
      return; // stopping, and nothing left to run
    auto [ticket, work] = std::move(queue.front());
    queue.pop_front();
    if (!failure) {
      lock.unlock();
      std::exception_ptr error;
      try {
        work();
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      if (error && !failure)
        failure = error;
    }
    completed = ticket;
    finished.notify_all();
  }
}
