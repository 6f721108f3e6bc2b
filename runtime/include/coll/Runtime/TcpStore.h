//===- TcpStore.h - A key-value store over TCP for bootstrapping -*- C++ -*-===//
/// \file
/// The ranks of a job that spans hosts meet through a key-value store
/// before anything else connects them: each publishes what the others need
/// (its network address, the host it is on) and reads theirs. Under
/// PyTorch that is the c10d store; under mpirun, MPI; for `coll-run` and
/// `coll-perf`, this one: rank 0 serves it on a TCP port, every rank
/// (rank 0 included) is a client.
///
/// \code
///   // Rank 0:
///   auto server = coll::TcpStoreServer::start("0.0.0.0", 29500);
///   // Every rank:
///   auto store = coll::TcpStore::connect("10.0.0.1", 29500, /*timeoutSeconds=*/60);
///   (*store)->set("addr/3", myAddress);
///   coll::Result<std::string> peer = (*store)->get("addr/0"); // waits for it
/// \endcode
///
/// Keys are 1 to 1024 bytes, values at most 64 MiB; get() waits until the
/// key is set, up to the client's timeout. A server that goes away fails
/// every call of its clients at once (never a hang); a client that sends
/// something malformed is disconnected, and the others go on.
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_TCPSTORE_H
#define COLL_RUNTIME_TCPSTORE_H

#include "coll/Runtime/KeyValueStore.h"
#include "coll/Runtime/Status.h"

#include <cstdint>
#include <memory>
#include <string>

namespace coll {

/// Limits of a TcpStore's keys and values.
struct TcpStoreLimits {
  static constexpr uint64_t maxKeyBytes = 1024;
  static constexpr uint64_t maxValueBytes = uint64_t(64) << 20;
};

/// The server: a thread that holds the keys and answers its clients until
/// it is destroyed.
class TcpStoreServer {
public:
  /// Listens on \p host (an IPv4 address; "0.0.0.0": every interface) and
  /// \p port (0: one the kernel picks, see port()).
  static Result<std::unique_ptr<TcpStoreServer>> start(const std::string &host, uint16_t port);
  /// Stops serving: every client's next call fails.
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer &) = delete;
  TcpStoreServer &operator=(const TcpStoreServer &) = delete;

  /// The port it listens on.
  uint16_t port() const;

  struct State; ///< lib/TcpStore.cpp.

private:
  TcpStoreServer();
  std::unique_ptr<State> state;
};

/// A client: one connection to the server; calls from one thread at a
/// time.
class TcpStore final : public KeyValueStore {
public:
  /// Connects to the server at \p host:\p port, retrying until
  /// \p timeoutSeconds have passed (the server may start later). Every
  /// later call waits at most \p timeoutSeconds too.
  static Result<std::unique_ptr<TcpStore>> connect(const std::string &host, uint16_t port,
                                                   double timeoutSeconds);
  ~TcpStore() override;
  TcpStore(const TcpStore &) = delete;
  TcpStore &operator=(const TcpStore &) = delete;

  /// Sets \p key to \p value (replacing it), and wakes the gets waiting
  /// for it.
  Status set(const std::string &key, const std::string &value) override;
  /// The value of \p key, once some client has set it.
  Result<std::string> get(const std::string &key) override;
  /// Adds \p delta to the counter at \p key (0 when unset; a counter is a
  /// value in decimal, such as set(key, "12") makes) and returns the sum:
  /// for barriers. An error when the key holds something else.
  Result<int64_t> add(const std::string &key, int64_t delta);

private:
  TcpStore() = default;
  Result<std::string> request(char op, const std::string &key, const std::string &value);
  int fd = -1;
  double timeoutSeconds = 0;
  std::string where;  ///< host:port, for errors.
  std::string broken; ///< Why the connection is unusable ("" while it is).
};

} // namespace coll

#endif // COLL_RUNTIME_TCPSTORE_H
