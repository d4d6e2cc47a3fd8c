//===- TcpStore.h - Where ranks meet without MPI ----------------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// torch.distributed's TCPStore idea, for ranks started by torchrun or by hand
// with RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT and no MPI: rank 0
// serves a key-value store at MASTER_ADDR:MASTER_PORT, every rank connects
// to it (retrying until a deadline, since rank 0 may start last), and the
// ranks trade what they need to find each other (the TCP communicator's
// addresses, hence also NCCL's unique id) as byte strings. Rendezvous is
// bounded: past the timeout the error names the ranks that never arrived.
// Plain POSIX sockets, no MLIR. docs/multi-node.md.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_TCPSTORE_H
#define DSC_RUNTIME_TCPSTORE_H

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace dsc::rt {

/// The store's server: a thread answering every rank's requests. Rank 0
/// hosts it (TcpStore::rendezvous does that when told to).
class TcpStoreServer {
public:
  /// Listens on every interface at `port` (0: a free port, see port()).
  /// Throws Error naming the port and the cause (e.g. in use).
  explicit TcpStoreServer(int port);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer &) = delete;
  TcpStoreServer &operator=(const TcpStoreServer &) = delete;
  int port() const { return boundPort; }

private:
  void serve();
  int listenFd = -1, wakeFds[2] = {-1, -1}, boundPort = 0;
  struct State;
  std::unique_ptr<State> state;
};

struct RendezvousOptions {
  std::string host = "127.0.0.1"; // MASTER_ADDR
  int port = 0;                   // MASTER_PORT
  int rank = 0, size = 1;         // RANK, WORLD_SIZE
  /// Rank 0 starts the server at `port` (false: one runs already).
  bool hostServer = true;
  /// How long to wait for the store and for every rank to arrive.
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  /// torchrun's default, 300 s, or DSC_RENDEZVOUS_TIMEOUT (seconds, e.g.
  /// "30" or "2.5"); a malformed value is an Error naming it.
  static std::chrono::milliseconds timeoutFromEnvironment();
};

/// One rank's connection to the store. Calls are serialized (a mutex), so
/// any thread may use it.
class TcpStore {
public:
  /// Connects (rank 0 first starts the server when options.hostServer),
  /// then waits until all options.size ranks have arrived. Throws Error
  /// "rendezvous at host:port timed out after 30 s: ranks 2, 3 of 4 never
  /// arrived", or naming two processes that claim one rank, or a world size
  /// that differs from rank 0's.
  static std::shared_ptr<TcpStore> rendezvous(const RendezvousOptions &options);
  ~TcpStore();
  TcpStore(const TcpStore &) = delete;
  TcpStore &operator=(const TcpStore &) = delete;

  void set(const std::string &key, const std::string &value);
  /// Waits until `key` is set (up to the timeout: Error naming the key).
  std::string get(const std::string &key);
  /// The value when `key` is set, false otherwise; does not wait.
  bool tryGet(const std::string &key, std::string *value);
  /// Adds `delta` to the integer at `key` (0 when unset); the new value.
  int64_t add(const std::string &key, int64_t delta);
  /// Waits until every key is set; the Error names those that are not.
  void wait(const std::vector<std::string> &keys);

  int rank() const { return options.rank; }
  int size() const { return options.size; }
  std::chrono::milliseconds timeout() const { return options.timeout; }
  /// "host:port", for messages.
  std::string address() const;
  /// Where peers can reach this rank: the local end of its connection to
  /// the store, or MASTER_ADDR on rank 0 when it serves the store.
  const std::string &localAddress() const { return localHost; }

private:
  TcpStore(RendezvousOptions options, std::unique_ptr<TcpStoreServer> server);
  std::string request(char op, const std::string &key, const std::string &value,
                      char *status);

  RendezvousOptions options;
  std::unique_ptr<TcpStoreServer> server;
  int fd = -1;
  std::string localHost;
  std::mutex mu;
};

} // namespace dsc::rt

#endif // DSC_RUNTIME_TCPSTORE_H
