//===- TcpSocket.h - Blocking socket calls with a deadline ------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The few POSIX socket steps the TCP store and the TCP communicator share:
// listen, connect (retrying while the listener is not up yet), read and
// write all of a buffer, each bounded by a deadline so that no rank hangs,
// and each reporting end-of-file apart from other failures so a caller can
// say which peer went away.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_LIB_RUNTIME_COMM_TCPSOCKET_H
#define DSC_LIB_RUNTIME_COMM_TCPSOCKET_H

#include <chrono>
#include <cstddef>
#include <string>

namespace dsc::rt::detail {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

/// Milliseconds until `deadline` for poll(2): 0 when past, capped at a day.
int msUntil(Deadline deadline);

/// "host:port", with brackets around an IPv6 host.
std::string hostPort(const std::string &host, int port);

/// "30 s", "2.5 s".
std::string secondsText(std::chrono::milliseconds ms);

enum class Io { Ok, Eof, Timeout, Failed };

/// Listens on `host` (empty: every interface) at `port` (0: a free one,
/// returned in *boundPort). -1 with *error set on failure.
int listenTcp(const std::string &host, int port, int backlog, int *boundPort,
              std::string *error);

/// Connects to host:port, retrying refused connections until `deadline`
/// (the listener may not be up yet). -1 with *error set (the last cause).
int connectTcp(const std::string &host, int port, Deadline deadline,
               std::string *error);

/// Accepts one connection on `listenFd` before `deadline`; -1 on timeout
/// (*error empty) or failure (*error set).
int acceptTcp(int listenFd, Deadline deadline, std::string *error);

/// Reads or writes all `len` bytes before `deadline`. On Failed, *error
/// holds strerror. A write to a closed peer is Eof (no SIGPIPE).
Io readAll(int fd, void *buf, size_t len, Deadline deadline,
           std::string *error);
Io writeAll(int fd, const void *buf, size_t len, Deadline deadline,
            std::string *error);

/// The local end's address of a connected socket ("10.0.0.5").
std::string localHostOf(int fd);

/// Sets O_NONBLOCK and TCP_NODELAY.
void makeNonBlocking(int fd);

} // namespace dsc::rt::detail

#endif // DSC_LIB_RUNTIME_COMM_TCPSOCKET_H
