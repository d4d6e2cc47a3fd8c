//===- ThreadSendRecv.cpp - Rendezvous send/recv between threads ----------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The thread communicator's point-to-point transfers, apart from the tick
// protocol: a send posts a pointer to its buffer in the group's mailbox,
// keyed (source, destination, tag) and FIFO per key, and waits until the
// receiver has copied it; a receive waits for the matching post. Neither
// side ever leaves a pointer to its stack frame behind, also when it throws.
//
//===----------------------------------------------------------------------===//

#include "ThreadCommImpl.h"

namespace dsc::rt::detail {

void ThreadComm::doSendRecv(const void *sendBuf, size_t sendCount, int dst,
                            void *recvBuf, size_t recvCount, int src,
                            DType dtype, int tag) {
  size_t esize = dtypeSize(dtype);
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

} // namespace dsc::rt::detail
