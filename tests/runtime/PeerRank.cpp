//===- PeerRank.cpp - One rank of a PeerMessages test job -----------------===//
//
// runtime_peer_rank --job NAME --rank R --nranks N --case CASE
// Runs one scenario of point-to-point messages and exits 0 when every
// message arrived as it must (or failed as it must), 1 otherwise, saying why.
//
//===----------------------------------------------------------------------===//

#include "coll/Runtime/PeerMessages.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

using namespace coll;

namespace {

/// Element i of the message from \p src to \p dst with \p tag: distinct per
/// (source, destination, tag, element).
uint32_t value(int src, int dst, int64_t tag, uint64_t i) {
  return uint32_t(src) * 1000003u + uint32_t(dst) * 7919u + uint32_t(tag) * 104729u +
         uint32_t(i) * 2654435761u;
}

std::vector<uint32_t> message(int src, int dst, int64_t tag, uint64_t n) {
  std::vector<uint32_t> v(n);
  for (uint64_t i = 0; i < n; ++i)
    v[i] = value(src, dst, tag, i);
  return v;
}

int failures = 0;

void check(bool ok, const std::string &what) {
  if (!ok) {
    std::printf("FAIL: %s\n", what.c_str());
    ++failures;
  }
}

void expectMessage(const std::vector<uint32_t> &got, int src, int dst, int64_t tag,
                   const std::string &what) {
  std::vector<uint32_t> want = message(src, dst, tag, got.size());
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i]) {
      check(false, what + ": element " + std::to_string(i) + " is " + std::to_string(got[i]) +
                       ", not " + std::to_string(want[i]));
      return;
    }
}

} // namespace

int main(int argc, char **argv) {
  std::string job, scenario;
  int rank = -1, nranks = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i], v = argv[i + 1];
    if (a == "--job")
      job = v;
    else if (a == "--rank")
      rank = std::atoi(v.c_str());
    else if (a == "--nranks")
      nranks = std::atoi(v.c_str());
    else if (a == "--case")
      scenario = v;
  }
  PeerMessagesOptions options;
  options.setupTimeoutSeconds = 30;
  options.timeoutSeconds = scenario == "timeout" ? 1 : 60;
  options.channelBytes = 64 << 10; // Messages below are larger: they stream.
  Result<std::unique_ptr<PeerMessages>> pm = PeerMessages::create(job, rank, nranks, options);
  if (!pm) {
    std::printf("FAIL: create: %s\n", pm.message().c_str());
    return 1;
  }
  PeerMessages &p = **pm;
  const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;

  if (scenario == "ring") {
    // Every rank sends before it receives, messages larger than a channel:
    // buffered at the receiver, nobody waits for a posted receive.
    for (uint64_t n : {uint64_t(0), uint64_t(1), uint64_t(1000), uint64_t(300000)}) {
      std::vector<uint32_t> out = message(rank, next, 5, n);
      Status s = p.send(next, 5, out.data(), n * 4);
      check(s.ok(), "send: " + s.message());
      std::vector<uint32_t> in(n, 0xdeadbeef);
      int from = -1;
      s = p.recv(prev, 5, in.data(), n * 4, &from);
      check(s.ok(), "recv: " + s.message());
      check(from == prev, "recv's source");
      expectMessage(in, prev, rank, 5, "ring of " + std::to_string(n));
    }
  } else if (scenario == "tags") {
    // Rank 0 sends tags 1, 2, 3 to rank 1, which receives 3, 1, 2; two
    // messages of one tag arrive in order.
    const std::vector<std::pair<int64_t, uint64_t>> sent = {
        {1, 70001}, {2, 70002}, {3, 70003}, {2, 50000}, {9, 10}};
    const std::vector<std::pair<int64_t, uint64_t>> received = {
        {3, 70003}, {1, 70001}, {2, 70002}, {2, 50000}, {9, 10}};
    if (rank == 0) {
      for (auto [tag, n] : sent) {
        std::vector<uint32_t> out = message(0, 1, tag, n);
        Status s = p.send(1, tag, out.data(), n * 4);
        check(s.ok(), "send: " + s.message());
      }
    } else if (rank == 1) {
      for (auto [tag, n] : received) {
        std::vector<uint32_t> in(n);
        Status s = p.recv(0, tag, in.data(), n * 4);
        check(s.ok(), "recv tag " + std::to_string(tag) + " of " + std::to_string(n) +
                          " elements: " + s.message());
        expectMessage(in, 0, 1, tag, "tag " + std::to_string(tag));
      }
    }
  } else if (scenario == "any") {
    // Rank 0 receives one message from each other rank, from any source.
    if (rank == 0) {
      std::vector<int> seen(size_t(nranks), 0);
      for (int k = 1; k < nranks; ++k) {
        std::vector<uint32_t> in(5000);
        int from = -1;
        Status s = p.recv(PeerMessages::anySource, 7, in.data(), in.size() * 4, &from);
        check(s.ok(), "recv any: " + s.message());
        check(from > 0 && from < nranks && !seen[size_t(from)], "a new source");
        if (from > 0 && from < nranks) {
          seen[size_t(from)] = 1;
          expectMessage(in, from, 0, 7, "from any source");
        }
      }
    } else {
      std::vector<uint32_t> out = message(rank, 0, 7, 5000);
      check(p.send(0, 7, out.data(), out.size() * 4).ok(), "send to 0");
    }
  } else if (scenario == "length") {
    // A message of another length than the receive's is an error, and the
    // next message still arrives.
    if (rank == 0) {
      std::vector<uint32_t> out = message(0, 1, 4, 100);
      check(p.send(1, 4, out.data(), 400).ok(), "send");
      check(p.send(1, 4, out.data(), 400).ok(), "send");
    } else if (rank == 1) {
      std::vector<uint32_t> in(100);
      Status s = p.recv(0, 4, in.data(), 200);
      check(!s.ok() && s.message().find("sent 400 bytes") != std::string::npos,
            "a short receive fails naming the length: '" + s.message() + "'");
      s = p.recv(0, 4, in.data(), 400);
      check(s.ok(), "the next message: " + s.message());
      expectMessage(in, 0, 1, 4, "after the error");
    }
  } else if (scenario == "dies") {
    // Rank 1 dies without sending; rank 0's receive from it fails naming it.
    if (rank == 1)
      _exit(3);
    if (rank == 0) {
      std::vector<uint32_t> in(10);
      Status s = p.recv(1, 1, in.data(), 40);
      check(!s.ok() && s.message().find("rank 1") != std::string::npos &&
                s.message().find("died") != std::string::npos,
            "a receive from a dead rank fails naming it: '" + s.message() + "'");
    }
  } else if (scenario == "timeout") {
    // Nobody sends: the receive gives up after the timeout.
    if (rank == 0) {
      std::vector<uint32_t> in(10);
      Status s = p.recv(PeerMessages::anySource, 1, in.data(), 40);
      check(!s.ok() && s.message().find("within") != std::string::npos,
            "a receive that nothing answers times out: '" + s.message() + "'");
    } else {
      sleep(2);
    }
  } else {
    std::printf("FAIL: unknown case %s\n", scenario.c_str());
    return 1;
  }
  if (failures)
    return 1;
  std::printf("ok\n");
  return 0;
}
