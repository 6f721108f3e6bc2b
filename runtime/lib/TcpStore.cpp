//===- TcpStore.cpp - A key-value store over TCP for bootstrapping --------===//
//
// One request per frame, one answer per request, in order:
//
//   request: op (1 byte: 'S' set, 'G' get, 'A' add), key length (u32),
//            value length (u64), key, value (set: the value; add: the
//            delta as 8 bytes; get: nothing)
//   answer:  status (1 byte: 0 ok, 1 error), length (u64), payload (get:
//            the value; add: the sum in decimal; an error: its message)
//
// A counter is a value in decimal ("-12"), as c10d's stores keep theirs:
// add() on a key that holds anything else is an error.
//
// Integers are little-endian (the hosts of one job share a byte order:
// the plans do too). The server is one thread polling its listening socket,
// its clients and a pipe that stops it; a get of a key not yet set waits in
// the server until a set of it answers every waiter.
//
//===----------------------------------------------------------------------===//

#include "coll/Runtime/TcpStore.h"

#include "Text.h"

#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace coll {

using detail::cat;

namespace {

constexpr size_t headerBytes = 1 + 4 + 8;

using Clock = std::chrono::steady_clock;

void putU32(char *p, uint32_t v) {
  std::memcpy(p, &v, sizeof v);
}
void putU64(char *p, uint64_t v) {
  std::memcpy(p, &v, sizeof v);
}
uint32_t getU32(const char *p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
uint64_t getU64(const char *p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

/// Writes all of \p n bytes, waiting for the socket up to \p deadline;
/// false on an error or at the deadline.
bool writeAll(int fd, const char *p, size_t n, Clock::time_point deadline) {
  while (n) {
    ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      p += k;
      n -= size_t(k);
      continue;
    }
    if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return false;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0)
      return false;
    pollfd pf{fd, POLLOUT, 0};
    ::poll(&pf, 1, int(std::min<int64_t>(left.count(), 1000)));
  }
  return true;
}

/// Reads all of \p n bytes up to \p deadline. "" when done, else why not.
std::string readAll(int fd, char *p, size_t n, Clock::time_point deadline) {
  while (n) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0)
      return "timed out";
    pollfd pf{fd, POLLIN, 0};
    int r = ::poll(&pf, 1, int(std::min<int64_t>(left.count(), 1000)));
    if (r < 0 && errno != EINTR)
      return std::string("poll failed: ") + std::strerror(errno);
    if (r <= 0)
      continue;
    ssize_t k = ::recv(fd, p, n, MSG_DONTWAIT);
    if (k == 0)
      return "the server closed the connection";
    if (k < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        continue;
      return std::string("receive failed: ") + std::strerror(errno);
    }
    p += k;
    n -= size_t(k);
  }
  return "";
}

/// \p text as a decimal int64 (an optional '-', then 1 to 19 digits, in
/// range), or false.
bool parseDecimal(const std::string &text, int64_t &out) {
  size_t i = text.size() > 0 && text[0] == '-' ? 1 : 0;
  if (text.size() == i || text.size() - i > 19)
    return false;
  __int128 v = 0;
  for (size_t k = i; k < text.size(); ++k) {
    if (text[k] < '0' || text[k] > '9')
      return false;
    v = v * 10 + (text[k] - '0');
  }
  if (i)
    v = -v;
  if (v < INT64_MIN || v > INT64_MAX)
    return false;
  out = int64_t(v);
  return true;
}

std::string answer(char status, const std::string &payload) {
  std::string a(1 + 8, '\0');
  a[0] = status;
  putU64(&a[1], payload.size());
  return a + payload;
}

bool parseIPv4(const std::string &host, in_addr &out) {
  if (inet_pton(AF_INET, host.c_str(), &out) == 1)
    return true;
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || !res)
    return false;
  out = reinterpret_cast<sockaddr_in *>(res->ai_addr)->sin_addr;
  freeaddrinfo(res);
  return true;
}

} // namespace

//===----------------------------------------------------------------------===//
// Server
//===----------------------------------------------------------------------===//

struct TcpStoreServer::State {
  int listenFd = -1;
  int stopPipe[2] = {-1, -1};
  uint16_t port = 0;
  std::thread thread;

  struct Client {
    int fd = -1;
    std::string in; ///< Bytes received, not yet a whole request.
  };
  std::map<int, Client> clients;
  std::map<std::string, std::string> values;
  std::map<std::string, std::vector<int>> waiting; ///< Gets by key.

  void run();
  void drop(int fd) {
    ::close(fd);
    clients.erase(fd);
    for (auto &[key, fds] : waiting)
      for (auto it = fds.begin(); it != fds.end();)
        it = *it == fd ? fds.erase(it) : it + 1;
  }
  /// Answers \p fd; drops it when the answer cannot go out within 10 s.
  bool reply(int fd, const std::string &a) {
    if (writeAll(fd, a.data(), a.size(), Clock::now() + std::chrono::seconds(10)))
      return true;
    drop(fd);
    return false;
  }
  /// Serves the whole requests in \p c's buffer; false when it dropped
  /// the client (a malformed request).
  bool serve(Client &c);
};

bool TcpStoreServer::State::serve(Client &c) {
  const int fd = c.fd;
  for (;;) {
    if (c.in.size() < headerBytes)
      return true;
    const char op = c.in[0];
    const uint64_t keyLen = getU32(&c.in[1]);
    const uint64_t valueLen = getU64(&c.in[5]);
    const bool valid = (op == 'S' || op == 'G' || op == 'A') && keyLen >= 1 &&
                       keyLen <= TcpStoreLimits::maxKeyBytes &&
                       valueLen <= TcpStoreLimits::maxValueBytes && (op != 'G' || valueLen == 0) &&
                       (op != 'A' || valueLen == 8);
    if (!valid) {
      // A client that does not speak the protocol: it gets one answer
      // saying so, and goes.
      reply(fd, answer(1, "malformed request"));
      if (clients.count(fd))
        drop(fd);
      return false;
    }
    if (c.in.size() < headerBytes + keyLen + valueLen)
      return true;
    std::string key = c.in.substr(headerBytes, keyLen);
    std::string value = c.in.substr(headerBytes + keyLen, valueLen);
    c.in.erase(0, headerBytes + keyLen + valueLen);
    if (op == 'S') {
      values[key] = value;
      if (!reply(fd, answer(0, "")))
        return false;
      auto w = waiting.find(key);
      if (w != waiting.end()) {
        std::vector<int> fds = std::move(w->second);
        waiting.erase(w);
        for (int other : fds)
          if (clients.count(other))
            reply(other, answer(0, value));
      }
    } else if (op == 'G') {
      auto v = values.find(key);
      if (v == values.end())
        waiting[key].push_back(fd);
      else if (!reply(fd, answer(0, v->second)))
        return false;
    } else {
      const int64_t delta = int64_t(getU64(value.data()));
      int64_t sum = delta, before = 0;
      auto v = values.find(key);
      if (v != values.end()) {
        if (!parseDecimal(v->second, before) || __builtin_add_overflow(before, delta, &sum)) {
          if (!reply(fd, answer(1, "key '" + key + "' holds no counter, or it would overflow")))
            return false;
          continue;
        }
      }
      std::string s = std::to_string(sum);
      values[key] = s;
      if (!reply(fd, answer(0, s)))
        return false;
    }
  }
}

void TcpStoreServer::State::run() {
  std::vector<char> buf(1 << 16);
  for (;;) {
    std::vector<pollfd> fds;
    fds.push_back({stopPipe[0], POLLIN, 0});
    fds.push_back({listenFd, POLLIN, 0});
    for (auto &[fd, c] : clients)
      fds.push_back({fd, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR)
        continue;
      return;
    }
    if (fds[0].revents)
      return;
    if (fds[1].revents & POLLIN) {
      int fd = ::accept4(listenFd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        clients[fd].fd = fd;
      }
    }
    for (size_t i = 2; i < fds.size(); ++i) {
      if (!fds[i].revents)
        continue;
      const int fd = fds[i].fd;
      auto it = clients.find(fd);
      if (it == clients.end())
        continue;
      ssize_t k = ::recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
      if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        drop(fd);
        continue;
      }
      if (k > 0) {
        it->second.in.append(buf.data(), size_t(k));
        serve(it->second);
      }
    }
  }
}

TcpStoreServer::TcpStoreServer() : state(std::make_unique<State>()) {}

Result<std::unique_ptr<TcpStoreServer>> TcpStoreServer::start(const std::string &host,
                                                              uint16_t port) {
  std::unique_ptr<TcpStoreServer> server(new TcpStoreServer());
  State &st = *server->state;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  if (!parseIPv4(host, a.sin_addr))
    return Status::error("the store's host '" + host + "' is not an IPv4 address or name");
  st.listenFd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(st.listenFd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (st.listenFd < 0 || ::bind(st.listenFd, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0 ||
      ::listen(st.listenFd, 1024) != 0)
    return Status::error(cat("cannot listen on ", host, ":", port, ": ", std::strerror(errno)));
  socklen_t len = sizeof a;
  getsockname(st.listenFd, reinterpret_cast<sockaddr *>(&a), &len);
  st.port = ntohs(a.sin_port);
  if (::pipe2(st.stopPipe, O_CLOEXEC) != 0)
    return Status::error(std::string("cannot make a pipe: ") + std::strerror(errno));
  st.thread = std::thread([&st] { st.run(); });
  return server;
}

TcpStoreServer::~TcpStoreServer() {
  State &st = *state;
  if (st.thread.joinable()) {
    char c = 0;
    ssize_t ignored = ::write(st.stopPipe[1], &c, 1);
    (void)ignored;
    st.thread.join();
  }
  for (auto &[fd, c] : st.clients)
    ::close(fd);
  for (int fd : {st.listenFd, st.stopPipe[0], st.stopPipe[1]})
    if (fd >= 0)
      ::close(fd);
}

uint16_t TcpStoreServer::port() const {
  return state->port;
}

//===----------------------------------------------------------------------===//
// Client
//===----------------------------------------------------------------------===//

Result<std::unique_ptr<TcpStore>> TcpStore::connect(const std::string &host, uint16_t port,
                                                    double timeoutSeconds) {
  if (!(timeoutSeconds > 0) || timeoutSeconds > 1e9)
    return Status::error("the store's timeout must be in (0, 1e9] seconds");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  if (!parseIPv4(host, a.sin_addr))
    return Status::error("the store's host '" + host + "' is not an IPv4 address or name");
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeoutSeconds));
  std::string why;
  for (;;) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
      return Status::error(std::string("cannot make a socket: ") + std::strerror(errno));
    if (::connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      std::unique_ptr<TcpStore> store(new TcpStore());
      store->fd = fd;
      store->timeoutSeconds = timeoutSeconds;
      store->where = cat(host, ":", port);
      return store;
    }
    why = std::strerror(errno);
    ::close(fd);
    if (Clock::now() >= deadline)
      return Status::error(cat("cannot reach the store at ", host, ":", port, " within ",
                               timeoutSeconds, " s: ", why));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

TcpStore::~TcpStore() {
  if (fd >= 0)
    ::close(fd);
}

Result<std::string> TcpStore::request(char op, const std::string &key, const std::string &value) {
  if (!broken.empty())
    return Status::error(broken);
  if (key.empty() || key.size() > TcpStoreLimits::maxKeyBytes)
    return Status::error(
        cat("a store key has 1 to ", TcpStoreLimits::maxKeyBytes, " bytes, not ", key.size()));
  if (value.size() > TcpStoreLimits::maxValueBytes)
    return Status::error(cat("a store value has at most ", TcpStoreLimits::maxValueBytes,
                             " bytes, not ", value.size()));
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeoutSeconds));
  std::string frame(headerBytes, '\0');
  frame[0] = op;
  putU32(&frame[1], uint32_t(key.size()));
  putU64(&frame[5], value.size());
  frame += key;
  frame += value;
  auto fail = [&](const std::string &why) -> Result<std::string> {
    // The answer may still come: the connection is out of step for good.
    broken = cat("the store at ", where, ": ", why);
    return Status::error(broken);
  };
  if (!writeAll(fd, frame.data(), frame.size(), deadline))
    return fail("cannot send a request");
  char head[9];
  if (std::string why = readAll(fd, head, sizeof head, deadline); !why.empty())
    return fail(why == "timed out"
                    ? cat("timed out after ", timeoutSeconds, " s waiting for key '", key, "'")
                    : why);
  const uint64_t len = getU64(head + 1);
  if (len > TcpStoreLimits::maxValueBytes)
    return fail("an answer too large");
  std::string payload(len, '\0');
  if (std::string why = readAll(fd, payload.data(), len, deadline); !why.empty())
    return fail(why);
  if (head[0] != 0)
    return Status::error(cat("the store at ", where, ": ", payload));
  return payload;
}

Status TcpStore::set(const std::string &key, const std::string &value) {
  Result<std::string> r = request('S', key, value);
  return r ? Status::success() : r.getStatus();
}

Result<std::string> TcpStore::get(const std::string &key) {
  return request('G', key, "");
}

Result<int64_t> TcpStore::add(const std::string &key, int64_t delta) {
  std::string d(8, '\0');
  putU64(&d[0], uint64_t(delta));
  Result<std::string> r = request('A', key, d);
  if (!r)
    return r.getStatus();
  int64_t sum = 0;
  if (!parseDecimal(*r, sum))
    return Status::error(cat("the store at ", where, ": a counter answer that is no number"));
  return sum;
}

} // namespace coll
