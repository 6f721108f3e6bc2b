//===- ucx-pingpong.cpp - UCX's two ways of moving a message, measured ----===//
//
// Two processes move a message back and forth over UCX, the network engine
// the process executor is to use across hosts, in the two ways a FIFO
// connection could map onto it:
//
//  - tag: the sender posts a tagged send, the receiver a tagged receive
//    (UCX matches them and copies into the receive buffer);
//  - put: the receiver's slot memory is registered; the sender puts the
//    message into it, fences, and puts a flag (the FIFO's tail) after it;
//    the receiver polls the flag while it progresses its worker.
//
// Half the round trip of each size, and the bandwidth that makes, for both
// ways in one run:
//
//   ucx-pingpong --local [-b 8] [-e 64M] [-f 4] [-n 1000]       (forks)
//   ucx-pingpong --listen PORT ...                               (rank 0)
//   ucx-pingpong --connect HOST:PORT ...                         (rank 1)
//
// The ranks exchange their worker addresses and registered memory keys
// over one TCP connection (rank 0 listens); UCX picks its transports from
// UCX_TLS and UCX_NET_DEVICES as usual (UCX_TLS=tcp for the network path
// between processes of one host). Every message carries a per-iteration
// pattern that the receiver checks at the end of each size.
//
//===----------------------------------------------------------------------===//

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string>
#include <sys/socket.h>
#include <sys/wait.h>
#include <ucp/api/ucp.h>
#include <unistd.h>
#include <vector>

namespace {

[[noreturn]] void die(const std::string &what) {
  std::fprintf(stderr, "ucx-pingpong: error: %s\n", what.c_str());
  std::exit(2);
}

void check(ucs_status_t s, const char *what) {
  if (s != UCS_OK)
    die(std::string(what) + ": " + ucs_status_string(s));
}

// The bootstrap connection: whole messages, length first.
void sendAll(int fd, const void *p, size_t n) {
  const char *c = static_cast<const char *>(p);
  while (n) {
    ssize_t k = ::send(fd, c, n, MSG_NOSIGNAL);
    if (k <= 0)
      die("bootstrap send failed");
    c += k;
    n -= size_t(k);
  }
}
void recvAll(int fd, void *p, size_t n) {
  char *c = static_cast<char *>(p);
  while (n) {
    ssize_t k = ::recv(fd, c, n, 0);
    if (k <= 0)
      die("bootstrap peer went away");
    c += k;
    n -= size_t(k);
  }
}
void sendBlob(int fd, const void *p, uint64_t n) {
  sendAll(fd, &n, sizeof n);
  sendAll(fd, p, n);
}
std::vector<char> recvBlob(int fd) {
  uint64_t n = 0;
  recvAll(fd, &n, sizeof n);
  if (n > (1u << 20))
    die("bootstrap message too large");
  std::vector<char> v(n);
  recvAll(fd, v.data(), n);
  return v;
}

int listenOn(int port) {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  if (::bind(s, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0 || ::listen(s, 1) != 0)
    die("cannot listen on port " + std::to_string(port) + ": " + std::strerror(errno));
  return s;
}

int connectTo(const std::string &hostPort) {
  size_t colon = hostPort.rfind(':');
  if (colon == std::string::npos)
    die("--connect takes HOST:PORT");
  std::string host = hostPort.substr(0, colon), port = hostPort.substr(colon + 1);
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0 || !res)
    die("cannot resolve " + hostPort);
  // The listener may not be up yet: retry for up to 10 s.
  for (int attempt = 0; attempt < 1000; ++attempt) {
    int s = ::socket(AF_INET, SOCK_STREAM, 0);
    if (::connect(s, res->ai_addr, res->ai_addrlen) == 0) {
      freeaddrinfo(res);
      int one = 1;
      setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      return s;
    }
    ::close(s);
    usleep(10000);
  }
  die("cannot connect to " + hostPort);
}

struct Options {
  uint64_t minBytes = 8, maxBytes = 64ull << 20, factor = 4, iters = 1000;
};

uint64_t parseSize(const char *t) {
  char *end = nullptr;
  uint64_t v = std::strtoull(t, &end, 10);
  switch (*end) {
  case 'K':
    return v << 10;
  case 'M':
    return v << 20;
  case 'G':
    return v << 30;
  default:
    return v;
  }
}

/// One rank's UCX side: context, worker, the endpoint to the peer, and a
/// registered receive region (message, then an 8-byte flag) whose key the
/// peer holds.
struct Side {
  ucp_context_h ctx = nullptr;
  ucp_worker_h worker = nullptr;
  ucp_ep_h ep = nullptr;
  ucp_mem_h memh = nullptr;
  ucp_rkey_h peerKey = nullptr;
  uint64_t peerBase = 0;
  std::vector<char> region; ///< maxBytes of message, then the flag.
  std::vector<char> source;
  uint64_t maxBytes = 0;

  volatile uint64_t *flag() { return reinterpret_cast<volatile uint64_t *>(&region[maxBytes]); }

  void wait(void *request) {
    if (request == nullptr)
      return;
    if (UCS_PTR_IS_ERR(request))
      check(UCS_PTR_STATUS(request), "request");
    while (ucp_request_check_status(request) == UCS_INPROGRESS)
      ucp_worker_progress(worker);
    check(ucp_request_check_status(request), "request");
    ucp_request_free(request);
  }

  void setUp(int boot, uint64_t bytes) {
    maxBytes = bytes;
    ucp_params_t p{};
    p.field_mask = UCP_PARAM_FIELD_FEATURES;
    p.features = UCP_FEATURE_TAG | UCP_FEATURE_RMA;
    ucp_config_t *config = nullptr;
    check(ucp_config_read(nullptr, nullptr, &config), "ucp_config_read");
    check(ucp_init(&p, config, &ctx), "ucp_init");
    ucp_config_release(config);
    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    check(ucp_worker_create(ctx, &wp, &worker), "ucp_worker_create");
    ucp_address_t *addr = nullptr;
    size_t addrLen = 0;
    check(ucp_worker_get_address(worker, &addr, &addrLen), "ucp_worker_get_address");
    sendBlob(boot, addr, addrLen);
    ucp_worker_release_address(worker, addr);
    std::vector<char> peerAddr = recvBlob(boot);
    ucp_ep_params_t ep_params{};
    ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    ep_params.address = reinterpret_cast<const ucp_address_t *>(peerAddr.data());
    check(ucp_ep_create(worker, &ep_params, &ep), "ucp_ep_create");

    region.assign(maxBytes + sizeof(uint64_t), 0);
    source.assign(maxBytes, 0);
    ucp_mem_map_params_t mp{};
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address = region.data();
    mp.length = region.size();
    check(ucp_mem_map(ctx, &mp, &memh), "ucp_mem_map");
    void *packed = nullptr;
    size_t packedLen = 0;
    check(ucp_rkey_pack(ctx, memh, &packed, &packedLen), "ucp_rkey_pack");
    uint64_t base = uint64_t(uintptr_t(region.data()));
    sendAll(boot, &base, sizeof base);
    sendBlob(boot, packed, packedLen);
    ucp_rkey_buffer_release(packed);
    recvAll(boot, &peerBase, sizeof peerBase);
    std::vector<char> peerPacked = recvBlob(boot);
    check(ucp_ep_rkey_unpack(ep, peerPacked.data(), &peerKey), "ucp_ep_rkey_unpack");
  }

  void tearDown(int boot) {
    // Our operations are complete, and both sides are done with each
    // other's memory, before either closes or unmaps.
    ucp_request_param_t fp{};
    wait(ucp_worker_flush_nbx(worker, &fp));
    // The peer's flush may need our worker to answer it: progress it until
    // the peer says it is done too.
    char c = 0;
    sendAll(boot, &c, 1);
    for (;;) {
      ssize_t k = ::recv(boot, &c, 1, MSG_DONTWAIT);
      if (k == 1)
        break;
      if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
        die("bootstrap peer went away");
      ucp_worker_progress(worker);
    }
    ucp_rkey_destroy(peerKey);
    // Best effort: the peer may have closed its end first.
    ucp_request_param_t rp{};
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    rp.flags = UCP_EP_CLOSE_FLAG_FORCE;
    void *closing = ucp_ep_close_nbx(ep, &rp);
    if (UCS_PTR_IS_PTR(closing)) {
      while (ucp_request_check_status(closing) == UCS_INPROGRESS)
        ucp_worker_progress(worker);
      ucp_request_free(closing);
    }
    ucp_mem_unmap(ctx, memh);
    ucp_worker_destroy(worker);
    ucp_cleanup(ctx);
  }

  // One message each way.
  void tagSend(uint64_t n, uint64_t tag) {
    ucp_request_param_t rp{};
    wait(ucp_tag_send_nbx(ep, source.data(), n, tag, &rp));
  }
  void tagRecv(uint64_t n, uint64_t tag) {
    ucp_request_param_t rp{};
    wait(ucp_tag_recv_nbx(worker, region.data(), n, tag, ~uint64_t(0), &rp));
  }
  void putSend(uint64_t n, uint64_t seq) {
    ucp_request_param_t rp{};
    if (n)
      wait(ucp_put_nbx(ep, source.data(), n, peerBase, peerKey, &rp));
    check(ucp_worker_fence(worker), "ucp_worker_fence");
    static uint64_t value;
    value = seq;
    wait(ucp_put_nbx(ep, &value, sizeof value, peerBase + maxBytes, peerKey, &rp));
  }
  void putRecv(uint64_t seq) {
    while (*flag() < seq)
      ucp_worker_progress(worker);
  }
};

/// The pattern of iteration \p it from rank \p r at byte \p i.
char pattern(uint64_t it, int r, uint64_t i) {
  return char((it * 131 + uint64_t(r) * 17 + i * 7) & 0xff);
}

void fill(std::vector<char> &v, uint64_t n, uint64_t it, int r) {
  // The first and last 64 bytes carry the pattern: enough to catch a
  // message from the wrong iteration or rank, without a pass per message.
  for (uint64_t i = 0; i < n && i < 64; ++i)
    v[i] = pattern(it, r, i);
  for (uint64_t i = n > 64 ? n - 64 : 0; i < n; ++i)
    v[i] = pattern(it, r, i);
}

bool matches(const std::vector<char> &v, uint64_t n, uint64_t it, int r) {
  for (uint64_t i = 0; i < n && i < 64; ++i)
    if (v[i] != pattern(it, r, i))
      return false;
  for (uint64_t i = n > 64 ? n - 64 : 0; i < n; ++i)
    if (v[i] != pattern(it, r, i))
      return false;
  return true;
}

int runRank(int rank, int boot, const Options &o) {
  Side s;
  s.setUp(boot, o.maxBytes);
  const int peer = 1 - rank;
  if (rank == 0)
    std::printf("# ucx-pingpong: UCX %s, UCX_TLS=%s; half round trip, mean of -n "
                "iterations after one warm-up\n"
                "%12s %12s %10s %12s %10s %6s\n",
                ucp_get_version_string(), std::getenv("UCX_TLS") ? std::getenv("UCX_TLS") : "(all)",
                "bytes", "tag us", "tag GB/s", "put us", "put GB/s", "wrong");
  uint64_t seq = 0;
  int status = 0;
  for (uint64_t n = o.minBytes; n <= o.maxBytes; n *= o.factor) {
    const uint64_t iters = n >= (16u << 20)  ? std::max<uint64_t>(o.iters / 100, 5)
                           : n >= (1u << 20) ? std::max<uint64_t>(o.iters / 10, 10)
                                             : o.iters;
    double us[2] = {0, 0};
    uint64_t wrong = 0;
    for (int way = 0; way < 2; ++way) {
      auto start = std::chrono::steady_clock::now();
      for (uint64_t it = 0; it < iters + 1; ++it) {
        if (it == 1)
          start = std::chrono::steady_clock::now(); // The first is a warm-up.
        ++seq;
        fill(s.source, n, seq, rank);
        if (rank == 0) {
          way ? s.putSend(n, seq) : s.tagSend(n, seq);
          way ? s.putRecv(seq) : s.tagRecv(n, seq);
        } else {
          way ? s.putRecv(seq) : s.tagRecv(n, seq);
          way ? s.putSend(n, seq) : s.tagSend(n, seq);
        }
        wrong += !matches(s.region, n, seq, peer);
      }
      us[way] = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                    .count() /
                double(iters) / 2;
    }
    if (rank == 0)
      std::printf("%12llu %12.2f %10.3f %12.2f %10.3f %6llu\n", static_cast<unsigned long long>(n),
                  us[0], double(n) / us[0] / 1e3, us[1], double(n) / us[1] / 1e3,
                  static_cast<unsigned long long>(wrong));
    std::fflush(stdout);
    if (wrong)
      status = 1;
    if (n > o.maxBytes / o.factor)
      break;
  }
  s.tearDown(boot);
  return status;
}

} // namespace

int main(int argc, char **argv) {
  Options o;
  int listenPort = -1;
  std::string connect;
  bool local = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char * {
      if (i + 1 >= argc)
        die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--local")
      local = true;
    else if (a == "--listen")
      listenPort = std::atoi(value());
    else if (a == "--connect")
      connect = value();
    else if (a == "-b")
      o.minBytes = parseSize(value());
    else if (a == "-e")
      o.maxBytes = parseSize(value());
    else if (a == "-f")
      o.factor = parseSize(value());
    else if (a == "-n")
      o.iters = parseSize(value());
    else
      die("unknown argument " + a +
          " (--local | --listen PORT | --connect HOST:PORT, -b -e -f -n)");
  }
  if (o.minBytes == 0 || o.maxBytes < o.minBytes || o.factor < 2 || o.iters == 0)
    die("sizes must satisfy 0 < -b <= -e, -f >= 2, -n >= 1");
  if (local) {
    int l = listenOn(0);
    sockaddr_in a{};
    socklen_t len = sizeof a;
    getsockname(l, reinterpret_cast<sockaddr *>(&a), &len);
    const std::string where = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
    pid_t child = fork();
    if (child == 0) {
      ::close(l);
      int boot = connectTo(where);
      _exit(runRank(1, boot, o));
    }
    int boot = ::accept(l, nullptr, nullptr);
    int rc = runRank(0, boot, o);
    int st = 0;
    waitpid(child, &st, 0);
    return rc ? rc : (WIFEXITED(st) ? WEXITSTATUS(st) : 3);
  }
  if (listenPort >= 0) {
    int l = listenOn(listenPort);
    int boot = ::accept(l, nullptr, nullptr);
    int one = 1;
    setsockopt(boot, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return runRank(0, boot, o);
  }
  if (!connect.empty())
    return runRank(1, connectTo(connect), o);
  die("give --local, --listen PORT or --connect HOST:PORT");
}
