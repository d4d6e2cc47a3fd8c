//===- TcpSocket.cpp - Blocking socket calls with a deadline --------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Sockets are non-blocking and every wait is a poll(2) with the time left, so
// a deadline bounds each call however the peer behaves.
//
//===----------------------------------------------------------------------===//

#include "TcpSocket.h"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

namespace dsc::rt::detail {

int msUntil(Deadline deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                  deadline - Clock::now())
                  .count();
  return int(std::clamp<int64_t>(left, 0, 86400000));
}

std::string hostPort(const std::string &host, int port) {
  if (host.find(':') != std::string::npos)
    return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

std::string secondsText(std::chrono::milliseconds ms) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g s", double(ms.count()) / 1000.0);
  return buf;
}

void makeNonBlocking(int fd) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

namespace {

/// getaddrinfo for `host` (null: the wildcard) and `port`.
addrinfo *resolve(const char *host, int port, bool passive,
                  std::string *error) {
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo *list = nullptr;
  const std::string service = std::to_string(port);
  int rc = ::getaddrinfo(host, service.c_str(), &hints, &list);
  if (rc != 0) {
    *error = std::string("cannot resolve '") + (host ? host : "*") +
             "': " + ::gai_strerror(rc);
    return nullptr;
  }
  return list;
}

} // namespace

int listenTcp(const std::string &host, int port, int backlog, int *boundPort,
              std::string *error) {
  addrinfo *list =
      resolve(host.empty() ? nullptr : host.c_str(), port, true, error);
  if (!list)
    return -1;
  int fd = -1;
  // Prefer IPv6's wildcard, which also takes IPv4 connections.
  for (int pass = 0; pass < 2 && fd < 0; ++pass)
    for (addrinfo *a = list; a; a = a->ai_next) {
      if ((pass == 0) != (a->ai_family == AF_INET6))
        continue;
      int s =
          ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (s < 0)
        continue;
      int one = 1, zero = 0;
      ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
      if (a->ai_family == AF_INET6)
        ::setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
      if (::bind(s, a->ai_addr, a->ai_addrlen) == 0 &&
          ::listen(s, backlog) == 0) {
        fd = s;
        break;
      }
      *error = std::strerror(errno);
      ::close(s);
    }
  ::freeaddrinfo(list);
  if (fd < 0)
    return -1;
  sockaddr_storage addr = {};
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len);
  *boundPort = ntohs(addr.ss_family == AF_INET6
                         ? reinterpret_cast<sockaddr_in6 *>(&addr)->sin6_port
                         : reinterpret_cast<sockaddr_in *>(&addr)->sin_port);
  makeNonBlocking(fd);
  return fd;
}

int connectTcp(const std::string &host, int port, Deadline deadline,
               std::string *error) {
  auto pause = std::chrono::milliseconds(10);
  while (true) {
    addrinfo *list = resolve(host.c_str(), port, false, error);
    // A host name may not resolve yet either (DNS of a starting node).
    for (addrinfo *a = list; a; a = a->ai_next) {
      int s =
          ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (s < 0)
        continue;
      makeNonBlocking(s);
      int rc = ::connect(s, a->ai_addr, a->ai_addrlen);
      if (rc != 0 && errno == EINPROGRESS) {
        pollfd p = {s, POLLOUT, 0};
        rc = ::poll(&p, 1, std::min(msUntil(deadline), 5000));
        int soError = rc > 0 ? 0 : ETIMEDOUT;
        socklen_t len = sizeof(soError);
        if (rc > 0)
          ::getsockopt(s, SOL_SOCKET, SO_ERROR, &soError, &len);
        errno = soError;
        rc = soError ? -1 : 0;
      }
      if (rc == 0) {
        ::freeaddrinfo(list);
        return s;
      }
      *error = std::strerror(errno);
      ::close(s);
    }
    if (list)
      ::freeaddrinfo(list);
    if (Clock::now() + pause >= deadline)
      return -1;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(500));
  }
}

int acceptTcp(int listenFd, Deadline deadline, std::string *error) {
  error->clear();
  while (true) {
    int s = ::accept4(listenFd, nullptr, nullptr, SOCK_CLOEXEC);
    if (s >= 0) {
      makeNonBlocking(s);
      return s;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
        errno != ECONNABORTED) {
      *error = std::strerror(errno);
      return -1;
    }
    pollfd p = {listenFd, POLLIN, 0};
    int wait = msUntil(deadline);
    if (wait == 0 || (::poll(&p, 1, wait) == 0 && msUntil(deadline) == 0))
      return -1;
  }
}

Io readAll(int fd, void *buf, size_t len, Deadline deadline,
           std::string *error) {
  char *p = static_cast<char *>(buf);
  while (len) {
    ssize_t got = ::recv(fd, p, len, 0);
    if (got > 0) {
      p += got;
      len -= size_t(got);
      continue;
    }
    if (got == 0)
      return Io::Eof;
    if (errno == ECONNRESET)
      return Io::Eof;
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      *error = std::strerror(errno);
      return Io::Failed;
    }
    pollfd q = {fd, POLLIN, 0};
    int wait = msUntil(deadline);
    if (wait == 0 || ::poll(&q, 1, wait) == 0)
      return Io::Timeout;
  }
  return Io::Ok;
}

Io writeAll(int fd, const void *buf, size_t len, Deadline deadline,
            std::string *error) {
  const char *p = static_cast<const char *>(buf);
  while (len) {
    ssize_t put = ::send(fd, p, len, MSG_NOSIGNAL);
    if (put >= 0) {
      p += put;
      len -= size_t(put);
      continue;
    }
    if (errno == EPIPE || errno == ECONNRESET)
      return Io::Eof;
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      *error = std::strerror(errno);
      return Io::Failed;
    }
    pollfd q = {fd, POLLOUT, 0};
    int wait = msUntil(deadline);
    if (wait == 0 || ::poll(&q, 1, wait) == 0)
      return Io::Timeout;
  }
  return Io::Ok;
}

std::string localHostOf(int fd) {
  sockaddr_storage addr = {};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len) != 0)
    return "127.0.0.1";
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET6) {
    auto *a6 = reinterpret_cast<sockaddr_in6 *>(&addr);
    // An IPv4 peer on a dual-stack socket: its plain IPv4 form.
    if (IN6_IS_ADDR_V4MAPPED(&a6->sin6_addr))
      ::inet_ntop(AF_INET, &a6->sin6_addr.s6_addr[12], text, sizeof(text));
    else
      ::inet_ntop(AF_INET6, &a6->sin6_addr, text, sizeof(text));
  } else {
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in *>(&addr)->sin_addr,
                text, sizeof(text));
  }
  return text;
}

} // namespace dsc::rt::detail
