//===- coll-calibrate.cpp - This host's figures for the predictor ---------===//
//
// coll-calibrate [-o host.topo] [--name NAME] [--threads N]
//
// Measures what the predictor's model (coll/Runtime/Predict.h) needs of
// this host for plans run with ranks as threads (LocalWorld), and writes a
// topology description (coll/Runtime/Topology.h):
//  - threadblock-bandwidth: what one thread copies per second (8 MiB
//    buffers, the median of several passes);
//  - node-bandwidth: what all the host's CPUs copy together, one thread
//    each;
//  - step-latency: the cost of a step that moves one element, from a rank
//    whose threadblock runs 1 and then 257 local copies;
//  - intra-latency: a message's trip beyond a step, from a ping-pong of
//    one-element messages between two ranks;
//  - call-latency: what a call costs besides its steps.
// Ports (intra-bandwidth) are set to the node's bandwidth: between threads
// a message is a copy like any other; and a chunk sent as it lies is read
// there by its receiver (direct-sends 1), as LocalWorld does.
//
//===----------------------------------------------------------------------===//

#include "coll/Runtime/Executor.h"
#include "coll/Runtime/Plan.h"
#include "coll/Runtime/PreparedCall.h"
#include "coll/Runtime/Topology.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sched.h>
#include <string>
#include <thread>
#include <vector>

using namespace coll;

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Bytes per second that \p threads threads copy together, each its own
/// buffers of \p bytes.
double copyRate(unsigned threads, size_t bytes) {
  std::vector<std::vector<char>> src(threads, std::vector<char>(bytes, 1)),
      dst(threads, std::vector<char>(bytes, 0));
  std::vector<double> rates;
  for (int pass = 0; pass < 7; ++pass) {
    std::vector<std::thread> workers;
    const auto start = Clock::now();
    for (unsigned t = 0; t < threads; ++t)
      workers.emplace_back([&, t] {
        for (int r = 0; r < 4; ++r)
          std::memcpy(dst[t].data(), src[t].data(), bytes);
      });
    for (std::thread &w : workers)
      w.join();
    rates.push_back(double(threads) * 4 * double(bytes) / seconds(start, Clock::now()));
  }
  return median(rates);
}

/// A one-chunk step of \p op.
Instruction step(Opcode op, BufferKind src, BufferKind dst) {
  return makeInstruction(op, src, 0, dst, 0, 1);
}

constexpr BufferKind I = BufferKind::Input, O = BufferKind::Output;

/// A plan of \p n ranks without threadblocks yet: one chunk in and out per
/// rank, two slots per connection.
Plan emptyPlan(const char *name, CollectiveKind kind, uint32_t n) {
  Plan p;
  p.info.name = name;
  p.info.collective = kind;
  p.info.nranks = n;
  p.info.inputChunks = p.info.outputChunks = 1;
  p.info.connectionDepth = 2;
  p.ranks.resize(n);
  return p;
}

/// One rank whose threadblock copies its input to its output \p k times.
Plan localSteps(uint32_t k) {
  Plan p = emptyPlan("calibrate_local", CollectiveKind::AllReduce, 1);
  Threadblock tb;
  for (uint32_t i = 0; i < k; ++i)
    tb.steps.push_back(step(Opcode::Copy, I, O));
  p.ranks[0].threadblocks.push_back(tb);
  return p;
}

/// Two ranks that pass one message back and forth \p k times.
Plan pingPong(uint32_t k) {
  Plan p = emptyPlan("calibrate_pingpong", CollectiveKind::Broadcast, 2);
  for (uint32_t r = 0; r < 2; ++r) {
    Threadblock tb;
    tb.sendPeer = tb.recvPeer = int32_t(1 - r);
    for (uint32_t i = 0; i < k; ++i) {
      if (r == 0) {
        tb.steps.push_back(step(Opcode::Send, I, O));
        tb.steps.push_back(step(Opcode::Recv, I, O));
      } else {
        tb.steps.push_back(step(Opcode::Recv, I, O));
        tb.steps.push_back(step(Opcode::Send, O, O));
      }
    }
    p.ranks[r].threadblocks.push_back(tb);
  }
  return p;
}

/// The median seconds of a call of \p plan with one element per rank.
Result<double> callTime(const Plan &plan) {
  Result<ValidatedPlan> vp = ValidatedPlan::make(plan);
  if (!vp)
    return vp.getStatus();
  const uint32_t n = plan.info.nranks;
  std::vector<std::vector<float>> in(n, std::vector<float>(1, 1)), out(n, std::vector<float>(1));
  std::vector<const void *> sends(n);
  std::vector<void *> recvs(n);
  for (uint32_t r = 0; r < n; ++r) {
    sends[r] = in[r].data();
    recvs[r] = out[r].data();
  }
  LocalWorld world;
  ExecOptions options;
  std::vector<double> times;
  for (int i = 0; i < 205; ++i) {
    const auto start = Clock::now();
    Status s = world.run(*vp, sends, recvs, 1, DataType::Float32, RedOp::Sum, options);
    const double t = seconds(start, Clock::now());
    if (!s)
      return s;
    if (i >= 5)
      times.push_back(t);
  }
  return median(times);
}

int fail(const std::string &msg) {
  std::fprintf(stderr, "coll-calibrate: error: %s\n", msg.c_str());
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  std::string out, name = "this-host";
  unsigned threads = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "-o" || a == "--name" || a == "--threads") && i + 1 < argc) {
      const std::string v = argv[++i];
      if (a == "-o")
        out = v;
      else if (a == "--name")
        name = v;
      else
        threads = unsigned(std::strtoul(v.c_str(), nullptr, 10));
    } else if (a == "-h" || a == "--help") {
      std::printf("usage: coll-calibrate [-o host.topo] [--name NAME] [--threads N]\n"
                  "Measures this host for the predictor (ranks as threads) and writes a\n"
                  "topology description (docs/prediction.md).\n");
      return 0;
    } else {
      return fail("unknown argument '" + a + "' (see --help)");
    }
  }
  if (threads == 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    threads = sched_getaffinity(0, sizeof set, &set) == 0 ? unsigned(CPU_COUNT(&set)) : 1;
    threads = std::max(1u, threads);
  }

  const double one = copyRate(1, 8 << 20);
  const double all = copyRate(threads, 8 << 20);
  Result<double> local1 = callTime(localSteps(1)), local257 = callTime(localSteps(257));
  Result<double> pp1 = callTime(pingPong(1)), pp65 = callTime(pingPong(65));
  for (const Result<double> *r : {&local1, &local257, &pp1, &pp65})
    if (!*r)
      return fail(r->message());
  const double step = std::max(0.0, (*local257 - *local1) / 256);
  const double call = std::max(0.0, *local1 - step);
  // A round trip is two messages, each a step on each side and a trip.
  const double hop = std::max(0.0, (*pp65 - *pp1) / 128);
  const double latency = std::max(0.0, hop - 2 * step);

  Topology t;
  t.name = name;
  t.ranksPerNode = 0;
  t.intra = {all, latency};
  t.threadblockBandwidth = one;
  t.nodeBandwidth = all;
  t.stepLatency = step;
  t.callLatency = call;
  t.directSends = true; // LocalWorld's default between threads.
  std::string text = "# coll-calibrate: ranks as threads on this host, " + std::to_string(threads) +
                     " CPUs\n" + formatTopology(t);
  if (out.empty()) {
    std::fputs(text.c_str(), stdout);
    return 0;
  }
  std::ofstream f(out);
  f << text;
  if (!f)
    return fail("cannot write '" + out + "'");
  return 0;
}
