//===- TcpCommunicator.cpp - Ranks as processes joined by TCP -------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Every pair of a group has one connection of its own (a split makes new
// ones), so groups used from different threads never share a byte stream.
// Each message is a frame: a 16-byte header (kind, tag, payload bytes) and
// the payload. The kind says which collective sent it, so ranks that issue
// different collectives fail naming both instead of misreading each other;
// an abort frame carries the failed rank's reason to its peers.
//
// A step of a collective is one exchange: its sends and receives progress
// together under poll(2) on non-blocking sockets, so two ranks sending each
// other megabytes do not wait on each other's socket buffers, and the
// deadline and end-of-file of every connection are watched throughout.
//
// The rings are ThreadCollectives.cpp's, step for step: at ring step s rank
// r receives the partial of chunk r-s-2 from r-1 and adds its own to it
// (RingCombine.h), so chunk c is reduced in the order x[c+1], x[c+2], ...,
// x[c] on both communicators and the results agree bit for bit.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/TcpCommunicator.h"

#include "RingCombine.h"
#include "TcpSocket.h"
#include "dsc/Runtime/Error.h"
#include "dsc/Runtime/Fnv1a.h"
#include "dsc/Runtime/TcpStore.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <poll.h>
#include <set>
#include <sys/socket.h>
#include <unistd.h>

using namespace dsc::rt;
using namespace dsc::rt::detail;

namespace {

/// Frame kinds; a collective's is kCollective + its CollectiveKind.
enum : uint32_t {
  kData = 1,
  kAck = 2,
  kAbort = 3,
  kSplit = 4,
  kCollective = 16,
};

constexpr size_t kHeaderBytes = 16;

void putU64(char *p, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    p[i] = char((v >> (8 * i)) & 0xff);
}

uint64_t getU64(const char *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i)
    v |= uint64_t(uint8_t(p[i])) << (8 * i);
  return v;
}

std::string kindName(uint32_t kind) {
  if (kind == kData)
    return "a send";
  if (kind == kAck)
    return "a receipt";
  if (kind == kSplit)
    return "split";
  if (kind >= kCollective && kind < kCollective + kNumCollectiveKinds)
    return collectiveKindName(CollectiveKind(kind - kCollective));
  return "frame kind " + std::to_string(kind);
}

int mod(int a, int n) { return ((a % n) + n) % n; }

class TcpComm;

/// One connection to a peer of a group.
struct Conn {
  int fd = -1;
  /// A frame to this peer is partly written: an abort frame now would land
  /// inside it, so abort only closes the connection.
  bool midFrame = false;
  /// An abort frame went out already.
  bool told = false;
};

/// Writes `reason` as an abort frame (unless one would land inside a frame)
/// and ends this side's stream; the descriptor stays open.
void tellPeer(Conn &c, const std::string &reason) {
  if (c.fd < 0 || c.told)
    return;
  c.told = true;
  if (!c.midFrame) {
    char head[kHeaderBytes] = {};
    uint32_t words[2] = {kAbort, 0};
    std::memcpy(head, words, 8);
    putU64(head + 8, reason.size());
    std::string frame(head, kHeaderBytes);
    frame += reason;
    // Best effort, without waiting: the peer may be gone too.
    (void)!::send(c.fd, frame.data(), frame.size(),
                  MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  ::shutdown(c.fd, SHUT_WR);
}

void closeConn(Conn &c) {
  if (c.fd < 0)
    return;
  // Unread input would make close() reset the connection, and a reset may
  // discard what this rank last sent (an abort's reason).
  char sink[4096];
  while (::recv(c.fd, sink, sizeof(sink), MSG_DONTWAIT) > 0)
    ;
  ::shutdown(c.fd, SHUT_WR);
  ::close(c.fd);
  c.fd = -1;
}

/// What the communicators of one process share: the store, the timeout,
/// the live communicators, and the connections of destroyed ones. Those
/// stay open until the last communicator goes: a failing rank unwinds its
/// executor (and groups) before dsc-run calls abort() on the world, and the
/// peers waiting on a group's connection should still read why.
struct Fabric {
  std::shared_ptr<TcpStore> store;
  std::chrono::milliseconds timeout;
  std::mutex mu;
  std::set<TcpComm *> comms;
  std::vector<Conn> retired;
  ~Fabric() {
    for (Conn &c : retired)
      closeConn(c);
  }
};

/// One send or receive of an exchange.
struct Xfer {
  int peer;
  bool send;
  uint32_t kind, tag;
  char *data;
  size_t len;
  char head[kHeaderBytes] = {};
  size_t done = 0; // bytes of header + payload moved
};

class TcpComm final : public Communicator {
public:
  TcpComm(std::shared_ptr<Fabric> fabric, std::string id,
          std::vector<int> worldRanks, int me)
      : fabric(std::move(fabric)), id(std::move(id)),
        members(std::move(worldRanks)), me(me), conns(members.size()) {
    std::lock_guard<std::mutex> lock(this->fabric->mu);
    this->fabric->comms.insert(this);
  }

  ~TcpComm() override {
    std::lock_guard<std::mutex> lock(fabric->mu);
    fabric->comms.erase(this);
    for (Conn &c : conns)
      if (c.fd >= 0)
        fabric->retired.push_back(c);
  }

  int rank() const override { return me; }
  int size() const override { return int(members.size()); }
  int worldRank() const override { return fabric->store->rank(); }
  const char *backendName() const override { return "tcp"; }
  const std::vector<int> &worldRanks() const override { return members; }
  bool canReduce(DType) const override { return true; }

  /// Connects every pair of the group (collective over the group).
  void connect();
  std::unique_ptr<Communicator> split(int color, int key) override;
  void abort(const std::string &reason) override;
  /// Writes an abort frame to every peer not in mid-frame, then ends the
  /// streams; later calls throw.
  void tellPeers(const std::string &reason);

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
  /// Moves every transfer to completion or throws naming the peer and
  /// `what`; afterwards the communicator is broken (its streams are in an
  /// unknown state) and every later call throws that first error.
  /// Payload bytes count as `kind` (received ones as `recvKind` when
  /// given: send and recv are two kinds); `count` false counts nothing.
  void exchange(std::vector<Xfer> &xfers, const std::string &what,
                CollectiveKind kind, bool count = true, int recvKind = -1);
  Xfer sendTo(int peer, uint32_t kind, uint32_t tag, const void *data,
              size_t len) const {
    return Xfer{peer,
                true,
                kind,
                tag,
                const_cast<char *>(static_cast<const char *>(data)),
                len};
  }
  Xfer recvFrom(int peer, uint32_t kind, uint32_t tag, void *data,
                size_t len) const {
    return Xfer{peer, false, kind, tag, static_cast<char *>(data), len};
  }
  /// Throws the first failure again when the communicator is broken.
  void checkUsable() const {
    if (!failure.empty())
      throw Error(failure);
  }
  /// "rank 3" (world rank) of group rank `peer`.
  std::string peerName(int peer) const {
    return "rank " + std::to_string(members[size_t(peer)]);
  }
  [[noreturn]] void fail(const std::string &message) {
    failure = message;
    throw Error(message);
  }
  /// Whether the next frame waiting from `peer` is an abort; its reason.
  bool abortReason(int peer, std::string *reason);
  uint32_t nextTag() { return uint32_t(++calls); }

  std::shared_ptr<Fabric> fabric;
  std::string id;
  std::vector<int> members;
  int me;
  std::vector<Conn> conns;
  uint64_t calls = 0, splits = 0;
  std::string failure;
  std::vector<char> scratch, incoming;
};

bool TcpComm::abortReason(int peer, std::string *reason) {
  const int fd = conns[size_t(peer)].fd;
  char head[kHeaderBytes];
  if (::recv(fd, head, kHeaderBytes, MSG_PEEK | MSG_DONTWAIT) !=
      ssize_t(kHeaderBytes))
    return false;
  uint32_t words[2];
  std::memcpy(words, head, 8);
  if (words[0] != kAbort)
    return false;
  ::recv(fd, head, kHeaderBytes, MSG_DONTWAIT);
  reason->assign(std::min<uint64_t>(getU64(head + 8), 1 << 20), '\0');
  std::string error;
  readAll(fd, reason->data(), reason->size(),
          Clock::now() + std::chrono::seconds(1), &error);
  return true;
}

void TcpComm::connect() {
  const int n = size();
  if (n == 1)
    return;
  TcpStore &store = *fabric->store;
  const Deadline deadline = Clock::now() + store.timeout();
  const std::string group =
      "the tcp group '" + id + "' (" + std::to_string(n) + " ranks)";
  std::string error;
  int port = 0;
  // Every interface: the published address may be a name (MASTER_ADDR on
  // rank 0) that resolves here to another interface than the peers use.
  int listenFd = listenTcp("", 0, n, &port, &error);
  if (listenFd < 0)
    throw Error("setting up " + group + ": cannot listen: " + error);
  store.set("dsc/" + id + "/addr/" + std::to_string(me),
            store.localAddress() + " " + std::to_string(port));
  // Hello: a hash of the group's id and the caller's rank in it, so a stray
  // or stale connection is refused instead of taking a rank's place.
  const uint64_t idHash =
      fnv1a64(reinterpret_cast<const uint8_t *>(id.data()), id.size());
  try {
    for (int j = 0; j < me; ++j) {
      const std::string addr =
          store.get("dsc/" + id + "/addr/" + std::to_string(j));
      const size_t space = addr.rfind(' ');
      const std::string host = addr.substr(0, space);
      const int theirPort = std::atoi(addr.c_str() + space + 1);
      int fd = connectTcp(host, theirPort, deadline, &error);
      if (fd < 0)
        throw Error("setting up " + group + ": cannot connect to " +
                    peerName(j) + " at " + hostPort(host, theirPort) + ": " +
                    error);
      conns[size_t(j)].fd = fd;
      char hello[kHeaderBytes];
      putU64(hello, idHash);
      putU64(hello + 8, uint64_t(me));
      if (writeAll(fd, hello, sizeof(hello), deadline, &error) != Io::Ok)
        throw Error("setting up " + group + ": " + peerName(j) +
                    " closed the connection before it was made");
    }
    for (int pending = n - 1 - me; pending > 0;) {
      int fd = acceptTcp(listenFd, deadline, &error);
      if (fd < 0) {
        std::string missing;
        for (int j = me + 1; j < n; ++j)
          if (conns[size_t(j)].fd < 0)
            missing += (missing.empty() ? "" : ", ") + peerName(j);
        throw Error("setting up " + group + ": " +
                    (error.empty()
                         ? "timed out after " + secondsText(store.timeout()) +
                               ": " + missing + " never connected"
                         : error));
      }
      char hello[kHeaderBytes];
      if (readAll(fd, hello, sizeof(hello), deadline, &error) != Io::Ok) {
        ::close(fd);
        continue;
      }
      const uint64_t them = getU64(hello + 8);
      if (getU64(hello) != idHash || them <= uint64_t(me) ||
          them >= uint64_t(n) || conns[size_t(them)].fd >= 0) {
        ::close(fd);
        continue;
      }
      conns[size_t(them)].fd = fd;
      --pending;
    }
  } catch (...) {
    ::close(listenFd);
    throw;
  }
  ::close(listenFd);
}

void TcpComm::exchange(std::vector<Xfer> &xfers, const std::string &what,
                       CollectiveKind kind, bool count, int recvKind) {
  const CollectiveKind received =
      recvKind < 0 ? kind : CollectiveKind(recvKind);
  checkUsable();
  const Deadline deadline = Clock::now() + fabric->timeout;
  for (Xfer &x : xfers)
    if (x.send) {
      uint32_t words[2] = {x.kind, x.tag};
      std::memcpy(x.head, words, 8);
      putU64(x.head + 8, x.len);
    }
  std::vector<pollfd> fds;
  std::vector<Xfer *> open;
  auto lost = [&](const Xfer &x) {
    // A peer that aborted wrote why before closing; a send to it fails
    // without reading that, so look for it unless a frame from it is half
    // read.
    bool halfRead = false;
    for (const Xfer &y : xfers)
      halfRead |= !y.send && y.peer == x.peer && y.done > 0 &&
                  y.done < kHeaderBytes + y.len;
    if (std::string reason; !halfRead && abortReason(x.peer, &reason))
      fail(what + ": " + peerName(x.peer) + " failed: " + reason);
    fail(what + ": " + peerName(x.peer) +
         " closed its connection: it exited, failed or was killed (its own "
         "output says why)");
  };
  while (true) {
    fds.clear();
    open.clear();
    for (Xfer &x : xfers)
      if (x.done < kHeaderBytes + x.len) {
        fds.push_back(
            {conns[size_t(x.peer)].fd, short(x.send ? POLLOUT : POLLIN), 0});
        open.push_back(&x);
      }
    if (open.empty())
      return;
    const int wait = msUntil(deadline);
    int ready = wait ? ::poll(fds.data(), fds.size(), wait) : 0;
    if (ready < 0 && errno == EINTR)
      continue;
    if (ready <= 0) {
      std::string peers;
      for (Xfer *x : open)
        if (peers.find(peerName(x->peer)) == std::string::npos)
          peers += (peers.empty() ? "" : ", ") + peerName(x->peer);
      fail(what + ": timed out after " + secondsText(fabric->timeout) +
           " waiting for " + peers + " (DSC_COMM_TIMEOUT sets the limit)");
    }
    for (size_t i = 0; i < open.size(); ++i) {
      if (!fds[i].revents)
        continue;
      Xfer &x = *open[i];
      Conn &conn = conns[size_t(x.peer)];
      if (x.send) {
        conn.midFrame = true;
        while (x.done < kHeaderBytes + x.len) {
          const bool head = x.done < kHeaderBytes;
          const char *p =
              head ? x.head + x.done : x.data + (x.done - kHeaderBytes);
          const size_t left =
              head ? kHeaderBytes - x.done : kHeaderBytes + x.len - x.done;
          ssize_t put = ::send(conn.fd, p, left, MSG_NOSIGNAL);
          if (put < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
              break;
            lost(x);
          }
          x.done += size_t(put);
          if (count && !head)
            addSent(kind, uint64_t(put));
        }
        if (x.done == kHeaderBytes + x.len)
          conn.midFrame = false;
        continue;
      }
      while (x.done < kHeaderBytes + x.len) {
        const bool head = x.done < kHeaderBytes;
        char *p = head ? x.head + x.done : x.data + (x.done - kHeaderBytes);
        const size_t left =
            head ? kHeaderBytes - x.done : kHeaderBytes + x.len - x.done;
        ssize_t got = ::recv(conn.fd, p, left, 0);
        if (got < 0 &&
            (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
          break;
        if (got <= 0)
          lost(x);
        x.done += size_t(got);
        if (count && !head)
          addReceived(received, uint64_t(got));
        if (x.done != kHeaderBytes)
          continue;
        uint32_t words[2];
        std::memcpy(words, x.head, 8);
        const uint64_t bytes = getU64(x.head + 8);
        if (words[0] == kAbort) {
          std::string reason(std::min<uint64_t>(bytes, 1 << 20), '\0');
          std::string error;
          readAll(conn.fd, reason.data(), reason.size(), deadline, &error);
          fail(what + ": " + peerName(x.peer) + " failed: " + reason);
        }
        if (words[0] != x.kind || words[1] != x.tag || bytes != x.len)
          fail(what + ": " + peerName(x.peer) + " sent " + kindName(words[0]) +
               " (" + std::to_string(bytes) + " bytes, tag " +
               std::to_string(words[1]) + ") where this rank expects " +
               kindName(x.kind) + " (" + std::to_string(x.len) +
               " bytes, tag " + std::to_string(x.tag) +
               "): the ranks issue different calls");
      }
    }
  }
}

void TcpComm::doAllReduce(void *buf, size_t count, DType dtype, ReduceOp op) {
  const int n = size();
  if (n == 1)
    return;
  const std::string what = describe(
      "all_reduce", std::to_string(count) + " elements, " + reduceOpName(op));
  const auto kind = CollectiveKind::AllReduce;
  const uint32_t frame = kCollective + uint32_t(kind), tag = nextTag();
  const size_t esize = dtypeSize(dtype);
  char *bytes = static_cast<char *>(buf);
  const int next = mod(me + 1, n), prev = mod(me - 1, n);
  incoming.resize(chunkOf(count, n, 0, esize).second);
  // Reduce-scatter in place: step s sends the partial of chunk me-s-1 (its
  // own input at s = 0) and adds its own to the predecessor's partial of
  // chunk me-s-2.
  for (int s = 0; s + 1 < n; ++s) {
    auto [sendOff, sendLen] = chunkOf(count, n, mod(me - s - 1, n), esize);
    auto [off, len] = chunkOf(count, n, mod(me - s - 2, n), esize);
    std::vector<Xfer> xs = {sendTo(next, frame, tag, bytes + sendOff, sendLen),
                            recvFrom(prev, frame, tag, incoming.data(), len)};
    exchange(xs, what, kind);
    if (len)
      combineBytes(bytes + off, incoming.data(), bytes + off, len / esize,
                   dtype, op, s + 2 == n ? n : 1);
  }
  // All-gather: pass the finished chunks on around the ring.
  for (int t = 0; t + 1 < n; ++t) {
    auto [sendOff, sendLen] = chunkOf(count, n, mod(me - t, n), esize);
    auto [off, len] = chunkOf(count, n, mod(me - t - 1, n), esize);
    std::vector<Xfer> xs = {sendTo(next, frame, tag, bytes + sendOff, sendLen),
                            recvFrom(prev, frame, tag, bytes + off, len)};
    exchange(xs, what, kind);
  }
}

void TcpComm::doReduceScatter(const void *send, void *recv, size_t recvCount,
                              DType dtype, ReduceOp op) {
  const int n = size();
  const size_t esize = dtypeSize(dtype);
  if (n == 1) {
    std::memmove(recv, send, recvCount * esize);
    return;
  }
  const std::string what =
      describe("reduce_scatter", std::to_string(recvCount) +
                                     " elements per rank, " + reduceOpName(op));
  const auto kind = CollectiveKind::ReduceScatter;
  const uint32_t frame = kCollective + uint32_t(kind), tag = nextTag();
  const size_t count = size_t(n) * recvCount;
  const char *own = static_cast<const char *>(send);
  const int next = mod(me + 1, n), prev = mod(me - 1, n);
  // Partials of the chunks this rank passes on; its own goes to `recv`.
  scratch.resize(count * esize);
  incoming.resize(recvCount * esize);
  for (int s = 0; s + 1 < n; ++s) {
    auto [sendOff, sendLen] = chunkOf(count, n, mod(me - s - 1, n), esize);
    auto [off, len] = chunkOf(count, n, mod(me - s - 2, n), esize);
    const char *out = (s == 0 ? own : scratch.data()) + sendOff;
    std::vector<Xfer> xs = {sendTo(next, frame, tag, out, sendLen),
                            recvFrom(prev, frame, tag, incoming.data(), len)};
    exchange(xs, what, kind);
    const bool last = s + 2 == n;
    char *dst = last ? static_cast<char *>(recv) : scratch.data() + off;
    if (len)
      combineBytes(dst, incoming.data(), own + off, len / esize, dtype, op,
                   last ? n : 1);
  }
}

void TcpComm::doAllGather(const void *send, void *recv, size_t sendCount,
                          DType dtype) {
  const int n = size();
  const size_t chunk = sendCount * dtypeSize(dtype);
  char *out = static_cast<char *>(recv);
  // `send` may be this rank's block of `recv`.
  std::memmove(out + size_t(me) * chunk, send, chunk);
  if (n == 1)
    return;
  const std::string what =
      describe("all_gather", std::to_string(sendCount) + " elements per rank");
  const auto kind = CollectiveKind::AllGather;
  const uint32_t frame = kCollective + uint32_t(kind), tag = nextTag();
  const int next = mod(me + 1, n), prev = mod(me - 1, n);
  for (int t = 0; t + 1 < n; ++t) {
    std::vector<Xfer> xs = {
        sendTo(next, frame, tag, out + size_t(mod(me - t, n)) * chunk, chunk),
        recvFrom(prev, frame, tag, out + size_t(mod(me - t - 1, n)) * chunk,
                 chunk)};
    exchange(xs, what, kind);
  }
}

void TcpComm::doAllToAll(const void *send, void *recv, size_t countPerRank,
                         DType dtype) {
  const int n = size();
  const size_t chunk = countPerRank * dtypeSize(dtype);
  const char *in = static_cast<const char *>(send);
  char *out = static_cast<char *>(recv);
  std::memcpy(out + size_t(me) * chunk, in + size_t(me) * chunk, chunk);
  if (n == 1)
    return;
  const std::string what = describe("all_to_all", std::to_string(countPerRank) +
                                                      " elements per rank");
  const auto kind = CollectiveKind::AllToAll;
  const uint32_t frame = kCollective + uint32_t(kind), tag = nextTag();
  std::vector<Xfer> xs;
  for (int i = 1; i < n; ++i) {
    const int to = mod(me + i, n), from = mod(me - i, n);
    xs.push_back(sendTo(to, frame, tag, in + size_t(to) * chunk, chunk));
    xs.push_back(recvFrom(from, frame, tag, out + size_t(from) * chunk, chunk));
  }
  exchange(xs, what, kind);
}

void TcpComm::doBroadcast(void *buf, size_t count, DType dtype, int root) {
  const int n = size();
  if (n == 1)
    return;
  const std::string what =
      describe("broadcast", std::to_string(count) + " elements, root " +
                                std::to_string(root));
  const auto kind = CollectiveKind::Broadcast;
  const uint32_t frame = kCollective + uint32_t(kind), tag = nextTag();
  const size_t bytes = count * dtypeSize(dtype);
  // A chain from the root, as the thread communicator's and NCCL's ring.
  const int next = mod(me + 1, n), prev = mod(me - 1, n);
  if (me != root) {
    std::vector<Xfer> xs = {recvFrom(prev, frame, tag, buf, bytes)};
    exchange(xs, what, kind);
  }
  if (next != root) {
    std::vector<Xfer> xs = {sendTo(next, frame, tag, buf, bytes)};
    exchange(xs, what, kind);
  }
}

void TcpComm::doSendRecv(const void *sendBuf, size_t sendCount, int dst,
                         void *recvBuf, size_t recvCount, int src, DType dtype,
                         int tag) {
  const size_t esize = dtypeSize(dtype);
  const std::string what =
      dst >= 0 && src >= 0
          ? describe("send_recv", "to " + std::to_string(dst) + ", from " +
                                      std::to_string(src) + ", tag " +
                                      std::to_string(tag))
      : dst >= 0 ? describe("send", "to " + std::to_string(dst) + ", tag " +
                                        std::to_string(tag))
                 : describe("recv", "from " + std::to_string(src) + ", tag " +
                                        std::to_string(tag));
  std::vector<Xfer> data, acks;
  if (dst >= 0) {
    data.push_back(
        sendTo(dst, kData, uint32_t(tag), sendBuf, sendCount * esize));
    acks.push_back(recvFrom(dst, kAck, uint32_t(tag), nullptr, 0));
  }
  if (src >= 0) {
    data.push_back(
        recvFrom(src, kData, uint32_t(tag), recvBuf, recvCount * esize));
    acks.push_back(sendTo(src, kAck, uint32_t(tag), nullptr, 0));
  }
  const int recvKind = int(CollectiveKind::Recv);
  exchange(data, what, CollectiveKind::Send, true, recvKind);
  // A send returns once the peer has the message (NCCL's and MPI's
  // rendezvous), so a plan that deadlocks there deadlocks here too.
  exchange(acks, what, CollectiveKind::Send, false);
}

void TcpComm::doBarrier() {
  const int n = size();
  if (n == 1)
    return;
  const auto kind = CollectiveKind::Barrier;
  const uint32_t frame = kCollective + uint32_t(kind), tag = nextTag();
  std::vector<Xfer> xs;
  for (int p = 0; p < n; ++p)
    if (p != me) {
      xs.push_back(sendTo(p, frame, tag, nullptr, 0));
      xs.push_back(recvFrom(p, frame, tag, nullptr, 0));
    }
  exchange(xs, describe("barrier", ""), kind);
}

std::unique_ptr<Communicator> TcpComm::split(int color, int key) {
  const int n = size();
  // Every rank's (color, key), not counted: MPI_Comm_split's traffic is not
  // a collective of the plan.
  std::vector<int32_t> all(2 * size_t(n));
  all[2 * size_t(me)] = color;
  all[2 * size_t(me) + 1] = key;
  const uint32_t tag = nextTag();
  std::vector<Xfer> xs;
  for (int p = 0; p < n; ++p)
    if (p != me) {
      xs.push_back(sendTo(p, kSplit, tag, &all[2 * size_t(me)], 8));
      xs.push_back(recvFrom(p, kSplit, tag, &all[2 * size_t(p)], 8));
    }
  exchange(xs,
           describe("split", "color " + std::to_string(color) + ", key " +
                                 std::to_string(key)),
           CollectiveKind::Barrier, /*count=*/false);
  const uint64_t index = splits++;
  if (color < 0)
    return nullptr;
  std::vector<std::pair<int, int>> order; // (key, parent rank)
  for (int p = 0; p < n; ++p)
    if (all[2 * size_t(p)] == color)
      order.push_back({all[2 * size_t(p) + 1], p});
  std::sort(order.begin(), order.end());
  std::vector<int> worlds;
  int newRank = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    if (order[i].second == me)
      newRank = int(i);
    worlds.push_back(members[size_t(order[i].second)]);
  }
  auto comm = std::make_unique<TcpComm>(
      fabric, id + "." + std::to_string(index) + "c" + std::to_string(color),
      std::move(worlds), newRank);
  comm->connect();
  return comm;
}

void TcpComm::tellPeers(const std::string &reason) {
  for (Conn &c : conns)
    tellPeer(c, reason);
  if (failure.empty())
    failure = describe("abort", "") + ": this rank failed: " + reason;
}

void TcpComm::abort(const std::string &reason) {
  // Every group of this process, live or gone: its peers may wait on any.
  std::lock_guard<std::mutex> lock(fabric->mu);
  for (TcpComm *comm : fabric->comms)
    comm->tellPeers(reason);
  for (Conn &c : fabric->retired)
    tellPeer(c, reason);
}

} // namespace

std::unique_ptr<Communicator>
dsc::rt::createTcpWorldCommunicator(std::shared_ptr<TcpStore> store,
                                    std::chrono::milliseconds timeout) {
  if (!store)
    throw Error("createTcpWorldCommunicator: no store");
  if (timeout.count() <= 0)
    throw Error("the tcp communicator's timeout must be positive, got " +
                std::to_string(timeout.count()) + " ms");
  auto fabric = std::make_shared<Fabric>();
  fabric->store = std::move(store);
  fabric->timeout = timeout;
  std::vector<int> ranks(size_t(fabric->store->size()));
  for (size_t i = 0; i < ranks.size(); ++i)
    ranks[i] = int(i);
  const int me = fabric->store->rank();
  auto world = std::make_unique<TcpComm>(fabric, "world", std::move(ranks), me);
  world->connect();
  return world;
}
