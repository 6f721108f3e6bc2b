//===- coll-calibrate.cpp - This host's figures for the predictor ---------===//
//
// coll-calibrate [-o host.topo] [--name NAME] [--threads N]
// coll-calibrate --network --bootstrap tcp://HOST:PORT --rank 0|1
//                [--ranks-per-node K] [-o cluster.topo] [--name NAME]
// coll-calibrate --ranks-as gpu [--gpu INDEX] [-o gpu.topo] [--name NAME]
//
// Measures what the predictor's model (coll/Runtime/Predict.h) needs of
// this host for plans run with ranks as threads (LocalWorld), and writes a
// topology description (coll/Runtime/Topology.h):
//  - threadblock-bandwidth: what one thread copies per second (buffers of
//    8 MiB, or of the last-level cache's size if larger, with the
//    streaming copy that the executors make into such buffers; the median
//    of several passes);
//  - node-bandwidth: what all the host's CPUs copy together, one thread
//    each;
//  - cache-bytes, cached-intra-bandwidth: the last-level cache's size, and
//    the ports' bandwidth in it: what all CPUs copy together on buffers
//    that take half the cache, plain copies (a call that fits the cache);
//  - step-latency: the cost of a step that moves one element, from a rank
//    whose threadblock runs 1 and then 257 local copies;
//  - intra-latency: a message's trip beyond a step, from a ping-pong of
//    one-element messages between two ranks;
//  - call-latency: what a call costs besides its steps;
//  - switch-latency (processes): what a hop gains when both processes
//    share one CPU, so that each message waits for its receiver to be
//    switched in;
//  - cpus-per-node: the CPUs this process may run on (--threads), which
//    the ranks share.
// Ports (intra-bandwidth) are set to the node's bandwidth: between threads
// a message is a copy like any other; and a chunk sent as it lies is read
// there by its receiver (direct-sends 1), as LocalWorld does.
//
// --ranks-as processes measures the same for ranks as processes on this
// host (ProcessGroup over shared memory, on ordinary buffers, as the
// PyTorch backend and coll-perf --ranks-as processes run): a second
// process joins; intra-latency and call-latency come from ping-pongs
// between the two, intra-bandwidth is 64 MiB sent one way through the
// connection's slots (a copy in by the sender, one out by the receiver,
// pipelined; cached-intra-bandwidth the same for an eighth of the cache),
// and a chunk sent as it lies travels through the slots like
// any other (direct-sends 0).
//
// --ranks-as gpu (when built with CUDA) measures one GPU that runs every
// rank of a plan (DeviceWorld), through the runtime's own calls
// (DeviceCalibration.cpp).
//
// --network measures the link between two hosts as the process executor
// crosses it (UCX): one process on each host, meeting in the store at
// HOST:PORT (rank 0 serves it). Besides this host's figures as above (for
// the ranks that share a node; with --ranks-per-node above 1, those of
// processes, as --ranks-as processes measures them), it measures
//  - inter-latency: a message's trip between the hosts beyond its steps,
//    from ping-pongs of one-element messages;
//  - inter-bandwidth: 64 MiB sent one way, less the one-element time;
// and rank 0 writes a description of nodes of K ranks (default 1), one NIC
// each, joined by that link.
//
//===----------------------------------------------------------------------===//

#include "ToolSupport.h"
#ifdef COLL_CALIBRATE_WITH_GPU
#include "DeviceCalibration.h"
#endif
#include "HostKernels.h"
#include "coll/Runtime/CalibrationPlans.h"
#include "coll/Runtime/Executor.h"
#include "coll/Runtime/Plan.h"
#include "coll/Runtime/PreparedCall.h"
#include "coll/Runtime/ProcessGroup.h"
#include "coll/Runtime/Topology.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <sched.h>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
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

/// The median seconds of \p reps calls of \p call, after \p warmup more;
/// the first error stops it.
Result<double> medianTime(int warmup, int reps, const std::function<Status()> &call) {
  std::vector<double> times;
  for (int i = 0; i < warmup + reps; ++i) {
    const auto start = Clock::now();
    Status s = call();
    const double t = seconds(start, Clock::now());
    if (!s)
      return s;
    if (i >= warmup)
      times.push_back(t);
  }
  return median(times);
}

/// Bytes per second that \p threads threads copy together, each its own
/// buffers of \p bytes, with the executors' copy: streaming (a call whose
/// buffers outgrow the cache) or plain.
double copyRate(unsigned threads, size_t bytes, bool stream) {
  std::vector<std::vector<char>> src(threads, std::vector<char>(bytes, 1)),
      dst(threads, std::vector<char>(bytes, 0));
  std::vector<double> rates;
  for (int pass = 0; pass < 7; ++pass) {
    std::vector<std::thread> workers;
    const auto start = Clock::now();
    for (unsigned t = 0; t < threads; ++t)
      workers.emplace_back([&, t] {
        for (int r = 0; r < 4; ++r)
          if (stream)
            detail::streamBytes(dst[t].data(), src[t].data(), bytes);
          else
            detail::moveBytes(dst[t].data(), src[t].data(), bytes);
      });
    for (std::thread &w : workers)
      w.join();
    rates.push_back(double(threads) * 4 * double(bytes) / seconds(start, Clock::now()));
  }
  return median(rates);
}

/// Bytes of result per second of one thread's fp32 sum of two buffers of
/// \p bytes into a third, with the executors' host kernel (which does not
/// stream its stores): the median of 7 passes of 4.
double reduceRate(size_t bytes) {
  detail::HostKernels k;
  detail::selectHostKernels(DataType::Float32, RedOp::Sum, k);
  const size_t n = bytes / sizeof(float);
  std::vector<float> a(n, 1), b(n, 2), c(n, 0);
  std::vector<double> rates;
  for (int pass = 0; pass < 7; ++pass) {
    const auto start = Clock::now();
    for (int r = 0; r < 4; ++r)
      k.reduce(c.data(), a.data(), b.data(), n);
    rates.push_back(4 * double(n * sizeof(float)) / seconds(start, Clock::now()));
  }
  return median(rates);
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
  return medianTime(5, 200, [&] {
    return world.run(*vp, sends, recvs, 1, DataType::Float32, RedOp::Sum, options);
  });
}

/// The median seconds of \p reps calls of \p plan of \p count floats on
/// \p group, after 3 more to warm up.
Result<double> groupCallTime(ProcessGroup &group, const Plan &plan, uint64_t count, int reps) {
  Result<ValidatedPlan> vp = ValidatedPlan::make(plan);
  if (!vp)
    return vp.getStatus();
  const BufferElements e = planBufferElements(plan.info, count);
  std::vector<float> in(std::max<uint64_t>(1, e.input), 1), out(std::max<uint64_t>(1, e.output));
  return medianTime(3, reps, [&] {
    return group.execute(*vp, in.data(), out.data(), count, DataType::Float32, RedOp::Sum);
  });
}

/// The link between the two ranks of a group, as a process crosses it.
struct LinkFigures {
  double pingPong1 = 0; ///< Seconds per call of one round trip.
  double hop = 0;       ///< Seconds per one-element message beyond the first.
  double bandwidth = 0; ///< Bytes per second one way.
  /// Bytes per second one way of the calls that fit the cache; 0: not
  /// measured.
  double cachedBandwidth = 0;
};

/// Floats each rank sends one way to measure a link in the cache: an
/// eighth of the last-level cache, so that the two ranks' buffers take
/// half of it; 0 where the cache is unknown.
uint64_t cachedOneWayFloats() {
  return detail::lastLevelCacheBytes() / 8 / sizeof(float);
}

/// LinkFigures of \p group of two ranks (both ranks make the same calls):
/// ping-pongs of one and of \p roundTrips round trips of one element, and
/// 64 MiB sent one way, less 64 elements (and \p cachedFloats, when not 0,
/// for the cached bandwidth). Each figure is the least of
/// \p rounds rounds' medians: two processes of one host that wait for each
/// other sometimes fall into step with one of them asleep at every call (a
/// sleep on this machine lasts some 40 us, however short it was asked to
/// be), and stay so for a while; coll-perf's and the PyTorch backend's
/// calls mostly do not.
Result<LinkFigures> measureLink(ProcessGroup &group, uint32_t roundTrips, int rounds,
                                uint64_t cachedFloats = 0) {
  const uint64_t big = 16u << 20; // Floats: 64 MiB.
  double best[5] = {1e9, 1e9, 1e9, 1e9, 1e9};
  for (int round = 0; round < rounds; ++round) {
    Result<double> one = groupCallTime(group, pingPongPlan(1), 1, 41);
    Result<double> many = groupCallTime(group, pingPongPlan(roundTrips), 1, 41);
    Result<double> small = groupCallTime(group, oneWayPlan(64), 64, 9);
    Result<double> large = groupCallTime(group, oneWayPlan(64), big, 5);
    Result<double> cached =
        cachedFloats ? groupCallTime(group, oneWayPlan(64), cachedFloats, 9) : Result<double>(0.0);
    Result<double> *all[5] = {&one, &many, &small, &large, &cached};
    for (int k = 0; k < 5; ++k) {
      if (!*all[k])
        return all[k]->getStatus();
      best[k] = std::min(best[k], **all[k]);
    }
  }
  LinkFigures f;
  f.pingPong1 = best[0];
  f.hop = std::max(0.0, (best[1] - best[0]) / (2 * (roundTrips - 1)));
  f.bandwidth = double(big) * 4 / std::max(1e-9, best[3] - best[2]);
  if (cachedFloats)
    f.cachedBandwidth = double(cachedFloats) * 4 / std::max(1e-9, best[4] - best[2]);
  return f;
}

/// The one-element hop of \p group of two ranks, the least of \p rounds
/// rounds' medians: ping-pongs of one and of \p roundTrips round trips.
/// Both ranks make the same calls.
Result<double> hopOf(ProcessGroup &group, uint32_t roundTrips, int rounds) {
  double best[2] = {1e9, 1e9};
  for (int round = 0; round < rounds; ++round) {
    Result<double> a = groupCallTime(group, pingPongPlan(1), 1, 41);
    if (!a)
      return a;
    Result<double> b = groupCallTime(group, pingPongPlan(roundTrips), 1, 41);
    if (!b)
      return b;
    best[0] = std::min(best[0], *a);
    best[1] = std::min(best[1], *b);
  }
  return std::max(0.0, (best[1] - best[0]) / (2 * (roundTrips - 1)));
}

/// Pins this process to the first CPU it may run on.
void pinToOneCpu() {
  cpu_set_t mine, one;
  CPU_ZERO(&mine);
  CPU_ZERO(&one);
  if (sched_getaffinity(0, sizeof mine, &mine) != 0)
    return;
  int first = 0;
  while (first < CPU_SETSIZE && !CPU_ISSET(first, &mine))
    ++first;
  CPU_SET(first, &one);
  sched_setaffinity(0, sizeof one, &one);
}

int fail(const std::string &msg) {
  std::fprintf(stderr, "coll-calibrate: error: %s\n", msg.c_str());
  return 2;
}

/// Writes \p text to \p out, or to standard output when it is empty.
int writeDescription(const std::string &text, const std::string &out) {
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

} // namespace

int main(int argc, char **argv) {
  std::string out, name;
  unsigned threads = 0, ranksPerNode = 1;
  bool network = false, processes = false, gpu = false;
  int gpuIndex = -1;
  tools::Bootstrap boot;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--network") {
      network = true;
    } else if (a == "--ranks-as" && i + 1 < argc) {
      const std::string v = argv[++i];
      if (v != "threads" && v != "processes" && v != "gpu")
        return fail("--ranks-as takes threads, processes or gpu, not '" + v + "'");
      processes = v == "processes";
      gpu = v == "gpu";
    } else if (a == "--gpu" && i + 1 < argc) {
      const std::string v = argv[++i];
      char *end = nullptr;
      const long index = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end || index < 0 || index > 1023)
        return fail("--gpu takes a GPU's index (0, 1, ...), not '" + v + "'");
      gpuIndex = int(index);
    } else if ((a == "-o" || a == "--name" || a == "--threads" || a == "--bootstrap" ||
                a == "--rank" || a == "--ranks-per-node") &&
               i + 1 < argc) {
      const std::string v = argv[++i];
      if (a == "-o")
        out = v;
      else if (a == "--name")
        name = v;
      else if (a == "--bootstrap") {
        if (!boot.parse(v))
          return fail("--bootstrap takes tcp://host:port");
      } else if (a == "--rank")
        boot.rank = int(std::strtol(v.c_str(), nullptr, 10));
      else if (a == "--ranks-per-node")
        ranksPerNode = unsigned(std::strtoul(v.c_str(), nullptr, 10));
      else
        threads = unsigned(std::strtoul(v.c_str(), nullptr, 10));
    } else if (a == "-h" || a == "--help") {
      std::printf("usage: coll-calibrate [-o host.topo] [--name NAME] [--threads N]\n"
                  "                      [--ranks-as threads|processes|gpu] [--gpu INDEX]\n"
                  "       coll-calibrate --network --bootstrap tcp://HOST:PORT --rank 0|1\n"
                  "                      [--ranks-per-node K] [-o cluster.topo] [--name NAME]\n"
                  "Measures this host for the predictor (ranks as threads) and writes a\n"
                  "topology description (docs/prediction.md); --ranks-as processes measures\n"
                  "messages between two processes of this host instead, --ranks-as gpu every\n"
                  "rank of a plan on one GPU (the one-device mode; --gpu picks it); --network\n"
                  "also measures the link to a second host as the process executor crosses it\n"
                  "(one process on each host, rank 0 serving the store and writing the\n"
                  "description).\n");
      return 0;
    } else {
      return fail("unknown argument '" + a + "' (see --help)");
    }
  }
  if (network && (!boot.given() || (boot.rank != 0 && boot.rank != 1)))
    return fail("--network needs --bootstrap tcp://host:port and --rank 0 or 1");
  if (!network && boot.given())
    return fail("--bootstrap and --rank go with --network");
  if (network && processes)
    return fail("--network measures ranks as processes already; leave out --ranks-as");
  if (gpu && (network || threads))
    return fail("--ranks-as gpu measures one GPU: no --network or --threads");
  if (gpuIndex >= 0 && !gpu)
    return fail("--gpu goes with --ranks-as gpu");
  if (ranksPerNode == 0)
    return fail("--ranks-per-node takes a number of at least 1");
  // The ranks that share a node are processes (the process executor), so
  // the description that rank 0 writes takes their figures from two
  // processes of this host, as --ranks-as processes does.
  if (network && boot.rank == 0 && ranksPerNode > 1)
    processes = true;
  if (name.empty())
    name = network ? "this-cluster" : gpu ? "this-gpu" : "this-host";
  if (gpu) {
#ifdef COLL_CALIBRATE_WITH_GPU
    Result<std::string> text = tools::calibrateDevice(name, gpuIndex);
    if (!text)
      return fail(text.message());
    return writeDescription(*text, out);
#else
    return fail("--ranks-as gpu: this coll-calibrate was built without CUDA");
#endif
  }
  if (threads == 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    threads = sched_getaffinity(0, sizeof set, &set) == 0 ? unsigned(CPU_COUNT(&set)) : 1;
    threads = std::max(1u, threads);
  }

  // Ranks as processes: a child joins as the second rank before this
  // process starts any thread, and makes the same calls.
  const std::string job = "coll-calibrate-" + std::to_string(getpid());
  ProcessGroupOptions processOptions;
  processOptions.setupTimeoutSeconds = 300; // Rank 0 measures threads first.
  pid_t child = -1;
  if (processes) {
    std::fflush(nullptr);
    child = fork();
    if (child < 0)
      return fail(std::string("fork: ") + std::strerror(errno));
    if (child == 0) {
      Result<std::unique_ptr<ProcessGroup>> group = ProcessGroup::create(job, 1, 2, processOptions);
      if (!group)
        _exit(fail(group.message()));
      Result<LinkFigures> f = measureLink(**group, 65, 5, cachedOneWayFloats());
      _exit(f ? 0 : fail(f.message()));
    }
  }
  // Two more processes measure the hop between two that share one CPU: each
  // pins itself to the first CPU before the runtime counts its CPUs, so
  // that it waits as ranks that outnumber their CPUs do (yielding the CPU
  // rather than spinning), then waits for this process's word, so as not to
  // disturb the measurements before. The first sends the hop back.
  int go[2] = {-1, -1}, back[2] = {-1, -1};
  pid_t sharers[2] = {-1, -1};
  if (processes) {
    if (pipe(go) != 0 || pipe(back) != 0)
      return fail(std::string("pipe: ") + std::strerror(errno));
    for (uint32_t r = 0; r < 2; ++r) {
      sharers[r] = fork();
      if (sharers[r] < 0)
        return fail(std::string("fork: ") + std::strerror(errno));
      if (sharers[r] == 0) {
        close(go[1]);
        close(back[0]);
        pinToOneCpu();
        char word = 0;
        if (read(go[0], &word, 1) != 1 || word != 'g')
          _exit(0); // Not wanted after all.
        Result<std::unique_ptr<ProcessGroup>> group =
            ProcessGroup::create(job + "-one-cpu", r, 2, processOptions);
        if (!group)
          _exit(fail(group.message()));
        Result<double> hop = hopOf(**group, 65, 5);
        if (!hop)
          _exit(fail(hop.message()));
        if (r == 0 && write(back[1], &*hop, sizeof(double)) != sizeof(double))
          _exit(fail("cannot report the one-CPU hop"));
        _exit(0);
      }
    }
    close(go[0]);
    close(back[1]);
  }

  // Out of the cache: buffers of 8 MiB a thread, or more, so that they
  // take twice the cache; the executors' copies into such buffers stream.
  // In it: buffers that take half of it.
  const uint64_t cache = detail::lastLevelCacheBytes();
  const size_t outBytes = std::max<size_t>(8 << 20, size_t(cache / threads));
  const double one = copyRate(1, outBytes, true);
  const double all = copyRate(threads, outBytes, true);
  const size_t inBytes = size_t(cache / (4 * threads));
  const double cachedAll = cache ? copyRate(threads, inBytes, false) : 0;
  const double reduceOne = reduceRate(outBytes);
  Result<double> local1 = callTime(localStepsPlan(1)), local257 = callTime(localStepsPlan(257));
  Result<double> pp1 = callTime(pingPongPlan(1)), pp65 = callTime(pingPongPlan(65));
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
  t.directSends = true;    // LocalWorld's default between threads.
  t.cpusPerNode = threads; // The CPUs the host's ranks share.
  // Only the ports get a cached figure: with the copy rates in the cache
  // as the threadblocks' and the node's caps too, calls of 64 KiB to 1 MiB
  // were predicted up to 2.5 times too fast, where costs the model does
  // not see take their time (docs/prediction.md, "The cache").
  t.cacheBytes = cache;
  t.cachedIntraBandwidth = cachedAll;
  std::string header = std::string("# coll-calibrate: ranks as ") +
                       (processes ? "processes" : "threads") + " on this host, " +
                       std::to_string(threads) + " CPUs\n";
  header += "# one thread copies " + std::to_string(one / 1e9) + " GB/s and reduces (fp32 sum) " +
            std::to_string(reduceOne / 1e9) + " GB/s of result, on " +
            std::to_string(outBytes >> 20) + " MiB buffers\n";
  if (processes) {
    double sharedHop = 0;
    Result<LinkFigures> f = [&]() -> Result<LinkFigures> {
      // The group is left before the child is waited for.
      Result<std::unique_ptr<ProcessGroup>> group = ProcessGroup::create(job, 0, 2, processOptions);
      if (!group)
        return group.getStatus();
      return measureLink(**group, 65, 5, cachedOneWayFloats());
    }();
    int status = 0;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      if (f)
        return fail("the second process failed");
    }
    // The one-CPU pair, now that the others are done.
    const char words[2] = {f ? 'g' : 's', f ? 'g' : 's'};
    bool shared = write(go[1], words, 2) == 2;
    close(go[1]);
    shared = shared && read(back[0], &sharedHop, sizeof sharedHop) == sizeof sharedHop;
    close(back[0]);
    for (pid_t s : sharers) {
      int st = 0;
      shared = waitpid(s, &st, 0) == s && WIFEXITED(st) && WEXITSTATUS(st) == 0 && shared;
    }
    if (!f)
      return fail(f.message());
    if (!shared)
      return fail("the processes that share one CPU failed");
    // A round trip is two messages, each a step on each side and a trip;
    // the rest of a one-message call is the call's cost.
    const double hop = f->hop;
    t.intra = {std::min(all, f->bandwidth), std::max(0.0, hop - 2 * step)};
    if (f->cachedBandwidth > 0)
      t.cachedIntraBandwidth = std::min(cachedAll, f->cachedBandwidth);
    t.callLatency = std::max(0.0, f->pingPong1 - 2 * hop);
    t.directSends = false; // Ordinary buffers: every message goes through the slots.
    t.switchLatency = std::max(0.0, sharedHop - hop);
    header += "# between two processes: a one-element hop " + std::to_string(hop * 1e6) + " us (" +
              std::to_string(sharedHop * 1e6) +
              " us on one CPU), 64 MiB one way through the slots at " +
              std::to_string(f->bandwidth / 1e9) + " GB/s, " +
              std::to_string(cachedOneWayFloats() * 4 >> 20) + " MiB at " +
              std::to_string(f->cachedBandwidth / 1e9) + " GB/s\n";
  }
  if (network) {
    // The link, as the process executor crosses it: one process per host.
    if (std::string err = boot.connect(60); !err.empty())
      return fail(err);
    ProcessGroupOptions po;
    Result<std::unique_ptr<ProcessGroup>> group =
        ProcessGroup::create(boot.jobName(), boot.rank, 2, *boot.store, po);
    if (!group)
      return fail(group.message());
    Result<LinkFigures> f = measureLink(**group, 33, 1);
    if (!f)
      return fail(f.message());
    if (boot.rank != 0)
      return 0;
    const double netHop = f->hop, bandwidth = f->bandwidth;
    t.ranksPerNode = ranksPerNode;
    t.nicsPerNode = 1;
    t.inter = {bandwidth, std::max(0.0, netHop - 2 * step)};
    header += "# and the link between two hosts as the process executor crosses it (UCX): a "
              "one-element hop " +
              std::to_string(netHop * 1e6) + " us, 64 MiB one way at " +
              std::to_string(bandwidth / 1e9) + " GB/s\n";
  }
  return writeDescription(header + formatTopology(t), out);
}
