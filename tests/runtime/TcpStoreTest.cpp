//===- TcpStoreTest.cpp - The bootstrap key-value store over TCP ----------===//
//
// TcpStore and TcpStoreServer (coll/Runtime/TcpStore.h) on the loopback
// interface: values, waiting gets, counters, timeouts, limits, a client
// that speaks garbage, and a server that goes away.
//
//===----------------------------------------------------------------------===//

#include "coll/Runtime/TcpStore.h"

#include <arpa/inet.h>
#include <atomic>
#include <chrono>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace coll;

namespace {

std::unique_ptr<TcpStoreServer> startServer() {
  auto s = TcpStoreServer::start("127.0.0.1", 0);
  EXPECT_TRUE(s) << s.message();
  return s ? std::move(*s) : nullptr;
}

std::unique_ptr<TcpStore> client(const TcpStoreServer &s, double timeout = 10) {
  auto c = TcpStore::connect("127.0.0.1", s.port(), timeout);
  EXPECT_TRUE(c) << c.message();
  return c ? std::move(*c) : nullptr;
}

bool contains(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}

TEST(TcpStore, ValuesAndCountersBetweenClients) {
  auto server = startServer();
  ASSERT_TRUE(server);
  auto a = client(*server), b = client(*server);
  ASSERT_TRUE(a && b);
  std::string big(3 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i)
    big[i] = char(i * 7 + i / 251);
  ASSERT_TRUE(a->set("addr/0", big));
  ASSERT_TRUE(a->set("empty", ""));
  Result<std::string> got = b->get("addr/0");
  ASSERT_TRUE(got) << got.message();
  EXPECT_EQ(*got, big);
  got = b->get("empty");
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, "");
  ASSERT_TRUE(b->set("addr/0", "replaced"));
  EXPECT_EQ(*a->get("addr/0"), "replaced");
  EXPECT_EQ(*a->add("count", 5), 5);
  EXPECT_EQ(*b->add("count", -2), 3);
  Result<int64_t> notCounter = a->add("addr/0", 1);
  ASSERT_FALSE(notCounter);
  EXPECT_TRUE(contains(notCounter.message(), "holds no counter")) << notCounter.message();
  // An error answer leaves the connection usable.
  EXPECT_EQ(*a->add("count", 0), 3);
  // A counter is its decimal value, which set() may give.
  EXPECT_EQ(*a->get("count"), "3");
  ASSERT_TRUE(a->set("count", "-40"));
  EXPECT_EQ(*b->add("count", 2), -38);
  ASSERT_TRUE(a->set("count", "9223372036854775807"));
  EXPECT_FALSE(b->add("count", 1)); // It would overflow.
  ASSERT_TRUE(a->set("count", "12a"));
  EXPECT_FALSE(b->add("count", 1));
}

// A get waits for the set; many ranks meet on a counter, as a barrier does.
TEST(TcpStore, GetsWaitForTheirSet) {
  auto server = startServer();
  ASSERT_TRUE(server);
  constexpr int n = 16;
  std::vector<std::thread> ranks;
  std::vector<std::string> seen(n);
  std::atomic<int> failures{0};
  for (int r = 0; r < n; ++r)
    ranks.emplace_back([&, r] {
      auto c = TcpStore::connect("127.0.0.1", server->port(), 20);
      if (!c) {
        ++failures;
        return;
      }
      if (!(*c)->set("rank/" + std::to_string(r), "value of " + std::to_string(r)))
        ++failures;
      // Every rank reads its right neighbour's, which may come later.
      Result<std::string> v = (*c)->get("rank/" + std::to_string((r + 1) % n));
      if (v)
        seen[r] = *v;
      else
        ++failures;
      Result<int64_t> arrived = (*c)->add("arrived", 1);
      if (!arrived || *arrived < 1 || *arrived > n)
        ++failures;
    });
  for (std::thread &t : ranks)
    t.join();
  EXPECT_EQ(failures.load(), 0);
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(seen[r], "value of " + std::to_string((r + 1) % n));
  auto c = client(*server);
  EXPECT_EQ(*c->add("arrived", 0), n);
}

TEST(TcpStore, AGetOfAKeyNobodySetsTimesOut) {
  auto server = startServer();
  ASSERT_TRUE(server);
  auto c = client(*server, 0.3);
  ASSERT_TRUE(c);
  auto start = std::chrono::steady_clock::now();
  Result<std::string> v = c->get("never");
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(v);
  EXPECT_TRUE(contains(v.message(), "timed out")) << v.message();
  EXPECT_TRUE(contains(v.message(), "'never'")) << v.message();
  EXPECT_GE(s, 0.25);
  EXPECT_LT(s, 5);
  // Out of step with the server for good: later calls fail at once.
  EXPECT_FALSE(c->set("k", "v"));
}

TEST(TcpStore, LimitsAreErrors) {
  auto server = startServer();
  ASSERT_TRUE(server);
  auto c = client(*server);
  ASSERT_TRUE(c);
  EXPECT_FALSE(c->set("", "v"));
  EXPECT_FALSE(c->set(std::string(TcpStoreLimits::maxKeyBytes + 1, 'k'), "v"));
  EXPECT_TRUE(c->set(std::string(TcpStoreLimits::maxKeyBytes, 'k'), "v"));
  EXPECT_FALSE(TcpStore::connect("127.0.0.1", server->port(), 0));
  EXPECT_FALSE(TcpStore::connect("no such host name.invalid", server->port(), 1));
  EXPECT_FALSE(TcpStoreServer::start("not an address!", 0));
}

// A connection that sends garbage is answered once and dropped; the
// others go on.
TEST(TcpStore, AClientThatSpeaksGarbageIsDropped) {
  auto server = startServer();
  ASSERT_TRUE(server);
  auto good = client(*server);
  ASSERT_TRUE(good);
  ASSERT_TRUE(good->set("k", "v"));
  for (const std::string &junk : {std::string("GET / HTTP/1.0\r\n\r\n"),
                                  std::string("S\xff\xff\xff\xff"
                                              "0123456789",
                                              15),
                                  std::string("A\x01\0\0\0\x03\0\0\0\0\0\0\0kabc", 17)}) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(server->port());
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof a), 0);
    ASSERT_EQ(::send(fd, junk.data(), junk.size(), 0), ssize_t(junk.size()));
    char buf[256];
    ssize_t total = 0, k;
    while ((k = ::recv(fd, buf + total, sizeof buf - size_t(total), 0)) > 0)
      total += k;
    ::close(fd);
    ASSERT_GE(total, 9);
    EXPECT_EQ(buf[0], 1); // An error answer, then the end of the connection.
    EXPECT_TRUE(contains(std::string(buf + 9, size_t(total - 9)), "malformed")) << junk;
  }
  EXPECT_EQ(*good->get("k"), "v");
}

// A server that goes away fails its clients' calls at once, waiting ones
// included.
TEST(TcpStore, AServerThatGoesAwayFailsItsClients) {
  auto server = startServer();
  ASSERT_TRUE(server);
  auto waiting = client(*server, 30), idle = client(*server, 30);
  ASSERT_TRUE(waiting && idle);
  Result<std::string> got = std::string();
  auto start = std::chrono::steady_clock::now();
  std::thread t([&] { got = waiting->get("never set"); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  server.reset();
  t.join();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(got);
  EXPECT_TRUE(contains(got.message(), "closed the connection")) << got.message();
  EXPECT_LT(s, 5);
  EXPECT_FALSE(idle->set("k", "v"));
}

} // namespace
