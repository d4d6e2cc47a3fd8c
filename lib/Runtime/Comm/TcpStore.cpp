//===- TcpStore.cpp - Where ranks meet without MPI ------------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The wire protocol is one request, one answer: [op u8][key length u32]
// [value length u32][key][value], answered [status u8][length u32][data].
// The server never parks a request: a get of an unset key answers "absent"
// and the client asks again with a growing pause, so a client that gives up
// leaves nothing behind and can then ask which ranks are missing.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/TcpStore.h"

#include "TcpSocket.h"
#include "dsc/Runtime/Error.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <poll.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

using namespace dsc::rt;
using namespace dsc::rt::detail;

namespace {

constexpr char kSet = 'S', kGet = 'G', kAdd = 'A';
constexpr char kFound = 1, kAbsent = 0, kBad = 2;
/// Keys and values above this are refused: a peer speaking another
/// protocol at the port, not a rank.
constexpr uint32_t kMaxField = 1u << 26;

void putU32(std::string &out, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    out.push_back(char((v >> (8 * i)) & 0xff));
}

uint32_t getU32(const char *p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= uint32_t(uint8_t(p[i])) << (8 * i);
  return v;
}

std::string rankList(const std::vector<int> &ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i)
    text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text;
}

} // namespace

//===----------------------------------------------------------------------===//
// Server
//===----------------------------------------------------------------------===//

struct TcpStoreServer::State {
  std::thread thread;
  std::map<std::string, std::string> data;
};

TcpStoreServer::TcpStoreServer(int port) : state(std::make_unique<State>()) {
  std::string error;
  listenFd = listenTcp("", port, 1024, &boundPort, &error);
  if (listenFd < 0)
    throw Error("cannot serve the rendezvous store at port " +
                std::to_string(port) + ": " + error +
                " (another job's store? choose another MASTER_PORT)");
  if (::pipe2(wakeFds, O_CLOEXEC) != 0) {
    ::close(listenFd);
    throw Error(std::string("cannot create the store's wake pipe: ") +
                std::strerror(errno));
  }
  state->thread = std::thread([this] { serve(); });
}

TcpStoreServer::~TcpStoreServer() {
  char byte = 0;
  (void)!::write(wakeFds[1], &byte, 1);
  state->thread.join();
  ::close(wakeFds[0]);
  ::close(wakeFds[1]);
  ::close(listenFd);
}

void TcpStoreServer::serve() {
  struct Client {
    int fd;
    std::string in;
  };
  std::vector<Client> clients;
  // Answers every whole request in c.in; false when the client must go.
  auto answer = [&](Client &c) {
    while (c.in.size() >= 9) {
      const uint32_t keyLen = getU32(c.in.data() + 1),
                     valueLen = getU32(c.in.data() + 5);
      if (keyLen > kMaxField || valueLen > kMaxField)
        return false;
      if (c.in.size() < 9 + size_t(keyLen) + valueLen)
        return true;
      const char op = c.in[0];
      std::string key = c.in.substr(9, keyLen),
                  value = c.in.substr(9 + keyLen, valueLen);
      c.in.erase(0, 9 + size_t(keyLen) + valueLen);
      char status = kFound;
      std::string reply;
      if (op == kSet) {
        state->data[key] = std::move(value);
      } else if (op == kGet) {
        auto it = state->data.find(key);
        if (it == state->data.end())
          status = kAbsent;
        else
          reply = it->second;
      } else if (op == kAdd) {
        auto &slot = state->data[key];
        int64_t now = std::strtoll(slot.c_str(), nullptr, 10) +
                      std::strtoll(value.c_str(), nullptr, 10);
        slot = reply = std::to_string(now);
      } else {
        status = kBad;
      }
      std::string out(1, status);
      putU32(out, uint32_t(reply.size()));
      out += reply;
      std::string error;
      if (writeAll(c.fd, out.data(), out.size(),
                   Clock::now() + std::chrono::seconds(30), &error) != Io::Ok ||
          status == kBad)
        return false;
    }
    return true;
  };
  while (true) {
    std::vector<pollfd> fds = {{wakeFds[0], POLLIN, 0}, {listenFd, POLLIN, 0}};
    for (const Client &c : clients)
      fds.push_back({c.fd, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR)
      break;
    if (fds[0].revents)
      break;
    std::vector<bool> drop(clients.size(), false);
    for (size_t i = 0; i < clients.size(); ++i) {
      if (!fds[i + 2].revents)
        continue;
      char buf[65536];
      ssize_t got = ::recv(clients[i].fd, buf, sizeof(buf), 0);
      if (got > 0) {
        clients[i].in.append(buf, size_t(got));
        drop[i] = !answer(clients[i]);
      } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
        drop[i] = true;
      }
    }
    for (size_t i = clients.size(); i-- > 0;)
      if (drop[i]) {
        ::close(clients[i].fd);
        clients.erase(clients.begin() + long(i));
      }
    if (fds[1].revents) {
      std::string error;
      int fd = acceptTcp(listenFd, Clock::now(), &error);
      if (fd >= 0)
        clients.push_back({fd, {}});
    }
  }
  for (const Client &c : clients)
    ::close(c.fd);
}

//===----------------------------------------------------------------------===//
// Client
//===----------------------------------------------------------------------===//

std::chrono::milliseconds RendezvousOptions::timeoutFromEnvironment() {
  const char *text = std::getenv("DSC_RENDEZVOUS_TIMEOUT");
  if (!text || !*text)
    return std::chrono::seconds(300);
  char *end = nullptr;
  double secs = std::strtod(text, &end);
  // Up to a year: longer would overflow the deadline arithmetic.
  if (end == text || *end != '\0' || !(secs > 0) || secs > 3.2e7)
    throw Error(std::string("DSC_RENDEZVOUS_TIMEOUT='") + text +
                "' is not a positive number of seconds");
  return std::chrono::milliseconds(
      std::max<int64_t>(1, int64_t(secs * 1000.0)));
}

TcpStore::TcpStore(RendezvousOptions options,
                   std::unique_ptr<TcpStoreServer> server)
    : options(std::move(options)), server(std::move(server)) {}

TcpStore::~TcpStore() {
  if (fd >= 0)
    ::close(fd);
}

std::string TcpStore::address() const {
  return hostPort(options.host, options.port);
}

std::shared_ptr<TcpStore>
TcpStore::rendezvous(const RendezvousOptions &options) {
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size)
    throw Error("rendezvous: rank " + std::to_string(options.rank) +
                " is outside a world of " + std::to_string(options.size));
  if (options.port < 1 || options.port > 65535)
    throw Error("rendezvous: MASTER_PORT=" + std::to_string(options.port) +
                " is not a TCP port (1-65535)");
  const Deadline deadline = Clock::now() + options.timeout;
  std::unique_ptr<TcpStoreServer> server;
  if (options.rank == 0 && options.hostServer)
    server = std::make_unique<TcpStoreServer>(options.port);
  std::shared_ptr<TcpStore> store(new TcpStore(options, std::move(server)));
  const std::string where = "rendezvous at " + store->address();
  const std::string of = " of " + std::to_string(options.size);
  std::string error;
  store->fd = connectTcp(options.host, options.port, deadline, &error);
  if (store->fd < 0)
    throw Error(where + " timed out after " + secondsText(options.timeout) +
                ": rank 0" + of +
                ", which serves the store, never arrived (last attempt: " +
                error + ")");
  // Where peers reach this rank: the address its connection to the store
  // leaves from, which routes towards the others. Rank 0 reaches its own
  // store through whatever its host name resolves to here (Debian maps it
  // to 127.0.1.1), while the others reach it at MASTER_ADDR by definition.
  store->localHost = options.rank == 0 && options.hostServer
                         ? options.host
                         : localHostOf(store->fd);

  const std::string me = std::to_string(options.rank);
  if (store->add("dsc/arrived/" + me, 1) > 1)
    throw Error(where + ": two processes claim rank " + me +
                " (check each one's RANK)");
  const std::string size = std::to_string(options.size);
  if (options.rank == 0)
    store->set("dsc/world_size", size);
  else if (std::string theirs = store->get("dsc/world_size"); theirs != size)
    throw Error(where + ": this process has WORLD_SIZE=" + size +
                " but rank 0 has " + theirs);

  // Everyone arrives, or the message names who did not. Rank 0 serves the
  // store, so when it gives up it first posts its message and waits (a
  // little) until the ranks that did arrive have read it: they then say
  // the same instead of only that the store went away.
  std::string unused, abandoned;
  std::vector<int> missing;
  for (auto pause = std::chrono::milliseconds(1);;) {
    try {
      if (options.rank != 0 && store->tryGet("dsc/abandoned", &abandoned)) {
        store->add("dsc/abandoned_seen", 1);
        throw Error(abandoned);
      }
      missing.clear();
      for (int r = 0; r < options.size; ++r)
        if (!store->tryGet("dsc/arrived/" + std::to_string(r), &unused))
          missing.push_back(r);
    } catch (const Error &e) {
      if (!abandoned.empty() || missing.empty())
        throw;
      throw Error(where + ": rank 0, which serves the store, left before " +
                  rankList(missing) + of + " arrived (its output says why)");
    }
    if (missing.empty())
      return store;
    if (Clock::now() >= deadline) {
      const std::string message = where + " timed out after " +
                                  secondsText(options.timeout) + ": " +
                                  rankList(missing) + of + " never arrived";
      if (options.rank == 0) {
        store->set("dsc/abandoned", message);
        const int64_t waiting = options.size - int64_t(missing.size()) - 1;
        const Deadline grace = Clock::now() + std::chrono::seconds(2);
        while (store->add("dsc/abandoned_seen", 0) < waiting &&
               Clock::now() < grace)
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      throw Error(message);
    }
    std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(
        pause, std::chrono::milliseconds(msUntil(deadline) + 1)));
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

std::string TcpStore::request(char op, const std::string &key,
                              const std::string &value, char *status) {
  std::lock_guard<std::mutex> lock(mu);
  std::string out(1, op);
  putU32(out, uint32_t(key.size()));
  putU32(out, uint32_t(value.size()));
  out += key;
  out += value;
  const Deadline deadline = Clock::now() + options.timeout;
  std::string error;
  char head[5];
  Io io = writeAll(fd, out.data(), out.size(), deadline, &error);
  if (io == Io::Ok)
    io = readAll(fd, head, sizeof(head), deadline, &error);
  std::string reply;
  if (io == Io::Ok) {
    reply.resize(getU32(head + 1));
    io = readAll(fd, reply.data(), reply.size(), deadline, &error);
  }
  const std::string where = "the rendezvous store at " + address();
  if (io == Io::Eof)
    throw Error("lost " + where +
                ": rank 0, which serves it, exited or failed");
  if (io == Io::Timeout)
    throw Error(where + " did not answer within " +
                secondsText(options.timeout));
  if (io == Io::Failed)
    throw Error(where + ": " + error);
  *status = head[0];
  return reply;
}

void TcpStore::set(const std::string &key, const std::string &value) {
  char status;
  request(kSet, key, value, &status);
}

bool TcpStore::tryGet(const std::string &key, std::string *value) {
  char status;
  std::string reply = request(kGet, key, "", &status);
  if (status != kFound)
    return false;
  *value = std::move(reply);
  return true;
}

int64_t TcpStore::add(const std::string &key, int64_t delta) {
  char status;
  return std::strtoll(
      request(kAdd, key, std::to_string(delta), &status).c_str(), nullptr, 10);
}

std::string TcpStore::get(const std::string &key) {
  std::string value;
  wait({key});
  tryGet(key, &value);
  return value;
}

void TcpStore::wait(const std::vector<std::string> &keys) {
  const Deadline deadline = Clock::now() + options.timeout;
  std::string unused;
  size_t next = 0;
  for (auto pause = std::chrono::milliseconds(1); next < keys.size();) {
    if (tryGet(keys[next], &unused)) {
      ++next;
      continue;
    }
    if (Clock::now() >= deadline) {
      std::string missing;
      for (size_t i = next; i < keys.size(); ++i)
        if (!tryGet(keys[i], &unused))
          missing += (missing.empty() ? "'" : ", '") + keys[i] + "'";
      throw Error("rank " + std::to_string(options.rank) + " waited " +
                  secondsText(options.timeout) + " at the rendezvous store " +
                  address() + " for " + missing + ", which no rank set");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}
