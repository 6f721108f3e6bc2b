//===- coll-run.cpp - Run a plan on local ranks and check it --------------===//
//
// coll-run plan.bin [--ranks-as threads|single|processes|gpu] [--size 64M] [--dtype f32]
//                   [--op sum] [--check | --no-check] [--inplace]
//                   [--iters n] [--slice elements] [--workers n]
//                   [--timeout seconds] [--mem-limit bytes|none] [--trace out.json]
//                   [--max-processes n]
//                   [--bootstrap tcp://host:port --rank r [--nranks n] [--job name]]
//
// Loads a plan, gives every rank an input whose values are distinct per
// (rank, element) and exact under any order of reduction, runs it on
// LocalWorld, compares every defined output with the reference
// implementation, then times --iters more runs. Prints one table row in the
// style of nccl-tests; exits 1 on any wrong element or error.
//
// --ranks-as processes forks one process per rank, each of which runs its
// rank through ProcessGroup (POSIX shared memory, a job name unique to this
// run); the buffers live in memory this process shares with them, so it
// checks every rank's output itself. A run's time is the slowest rank's.
// It refuses a plan of more ranks than --max-processes (default 256)
// before it starts any process: a plan for 65,536 ranks is no reason to
// fork 65,536 processes.
//
// --bootstrap runs one rank of a job whose ranks may be on several hosts:
// start coll-run once per rank, each with its --rank, the same plan and
// options, and the same tcp://host:port, where rank 0 serves the store the
// ranks meet through (ProcessGroup::create() with a store). Ranks on one
// host share memory; ranks on different hosts (or network namespaces)
// talk over UCX. Each rank checks its own output (every rank's input is
// known everywhere); rank 0 prints the row, with the slowest rank's time
// and every rank's wrong elements.
//
// --ranks-as gpu (when built with CUDA) runs every rank on one GPU
// (DeviceWorld): the buffers are copied to the device and back, the check
// is the same, and the time is that of back-to-back launches. --trace
// records the checked run's steps with the device's global timer.
//
// --size is the per-rank size in bytes of the larger buffer, as in
// nccl-tests: the output of allgather and gather, the input of reducescatter
// and scatter, either of alltoall, the only one of the others. For a
// user-declared collective it is also the larger buffer, its count rounded
// down to a whole number of the plan's chunks per unit; the check compares
// the output chunks the plan's contract (its post-conditions) constrains.
//
// --mem-limit caps the memory a run allocates besides its buffers (scratch,
// FIFOs, copies of inputs): over all ranks for threads and single, per rank
// for processes. The default is 8 times the buffers' bytes plus 256 MiB;
// `none` removes the cap.
//
//===----------------------------------------------------------------------===//

#include "OutOfMemory.h"
#include "ToolSupport.h"
#include "coll/Runtime/Executor.h"
#include "coll/Runtime/PlanIO.h"
#include "coll/Runtime/PreparedCall.h"
#include "coll/Runtime/ProcessGroup.h"
#include "coll/Runtime/Reference.h"
#ifdef COLL_RUN_WITH_GPU
#include "GpuRun.h"
#endif

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

using namespace coll;
using namespace coll::tools;

namespace {

int usage() {
  std::cerr << "usage: coll-run plan.bin [--ranks-as threads|single|processes|gpu] [--size 64M]\n"
               "                [--bootstrap tcp://host:port --rank r [--nranks n] [--job name]]\n"
               "                [--dtype f32]"
               " [--op sum] [--check | --no-check] [--inplace] [--iters n]\n"
               "                [--slice elements] [--workers n] [--timeout seconds]\n"
               "                [--protocol auto|Simple|LL|LL128|LL:4K,LL128:256K]\n"
               "                [--mem-limit bytes|none] [--trace out.json] [--max-processes n]\n";
  return 2;
}

int fail(const std::string &msg) {
  std::cerr << "coll-run: error: " << msg << "\n";
  return 1;
}

struct Options {
  std::string planPath;
  ExecMode mode = ExecMode::Threads;
  bool processes = false; ///< --ranks-as processes.
  bool gpu = false;       ///< --ranks-as gpu.
  bool sliceGiven = false;
  uint64_t size = 64ull << 20;
  DataType type = DataType::Float32;
  RedOp op = RedOp::Sum;
  bool check = true;
  bool inplace = false;
  uint64_t iters = 5;
  RunSettings run; ///< Slice, workers, timeout, memory cap.
  std::string tracePath;
  uint64_t maxProcesses = 256; ///< --ranks-as processes: at most this many.
  Bootstrap boot;              ///< --bootstrap, --rank, --nranks, --job.
};

/// Parses the command line; returns 0 to go on, else the exit status.
int parseArgs(int argc, char **argv, Options &o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](std::string &out) {
      if (i + 1 >= argc)
        return false;
      out = argv[++i];
      return true;
    };
    std::string v;
    if (a == "--help" || a == "-h") {
      usage();
      return -1;
    } else if (a == "--ranks-as") {
      if (!value(v) || (v != "threads" && v != "single" && v != "processes" && v != "gpu"))
        return fail("--ranks-as takes 'threads', 'single', 'processes' or 'gpu'");
      o.mode = v == "single" ? ExecMode::Single : ExecMode::Threads;
      o.processes = v == "processes";
      o.gpu = v == "gpu";
#ifndef COLL_RUN_WITH_GPU
      if (o.gpu)
        return fail("--ranks-as gpu: this coll-run was built without CUDA");
#endif
    } else if (a == "--size") {
      if (!value(v) || !parseSize(v, o.size))
        return fail("--size takes a byte count such as 4096, 64K, 64M or 1G");
    } else if (a == "--dtype") {
      if (!value(v) || !parseDataType(v.c_str(), o.type))
        return fail("unknown --dtype '" + v +
                    "' (int8 uint8 int32 uint32 int64 uint64 fp16 bf16 fp32 fp64)");
    } else if (a == "--op") {
      if (!value(v) || !parseRedOp(v.c_str(), o.op))
        return fail("unknown --op '" + v + "' (sum prod max min avg)");
    } else if (a == "--check") {
      o.check = true;
    } else if (a == "--no-check") {
      o.check = false;
    } else if (a == "--inplace") {
      o.inplace = true;
    } else if (a == "--iters") {
      if (!value(v) || !parseUnsigned(v, o.iters))
        return fail("--iters takes a number");
    } else if (a == "--protocol") {
      if (!value(v))
        return fail("--protocol takes auto, a protocol, or thresholds such as LL:4K,LL128:256K");
      if (Status s = parseProtocolChoice(v, o.run.protocol); !s)
        return fail(s.message());
    } else if (a == "--slice") {
      if (!value(v) || !parseUnsigned(v, o.run.sliceElements) || o.run.sliceElements == 0)
        return fail("--slice takes a positive number of elements");
      o.sliceGiven = true;
    } else if (a == "--workers") {
      uint64_t workers = 0;
      if (!value(v) || !parseUnsigned(v, workers) || workers > 1024)
        return fail("--workers takes a number of threads per rank (0: one per threadblock)");
      o.run.workers = uint32_t(workers);
    } else if (a == "--timeout") {
      if (!value(v) || !parseSeconds(v, o.run.timeoutSeconds))
        return fail("--timeout takes a positive number of seconds");
    } else if (a == "--mem-limit") {
      uint64_t &cap = o.run.memoryLimitBytes;
      if (!value(v) ||
          (v == "none" ? (cap = noMemoryLimit, false) : !parseSize(v, cap) || cap == 0))
        return fail("--mem-limit takes a positive byte count such as 64K, 512M or 4G, or 'none'");
    } else if (a == "--max-processes") {
      if (!value(v) || !parseUnsigned(v, o.maxProcesses) || o.maxProcesses == 0)
        return fail("--max-processes takes a positive number of processes");
    } else if (a == "--bootstrap") {
      if (!value(v) || !o.boot.parse(v))
        return fail("--bootstrap takes tcp://host:port");
    } else if (a == "--rank") {
      uint64_t r = 0;
      if (!value(v) || !parseUnsigned(v, r) || r > PlanLimits::maxRanks)
        return fail("--rank takes a rank number");
      o.boot.rank = int(r);
    } else if (a == "--nranks") {
      uint64_t n = 0;
      if (!value(v) || !parseUnsigned(v, n) || n == 0 || n > PlanLimits::maxRanks)
        return fail("--nranks takes a positive number of ranks");
      o.boot.nranks = int64_t(n);
    } else if (a == "--job") {
      if (!value(o.boot.job) || o.boot.job.empty())
        return fail("--job takes a job name");
    } else if (a == "--trace") {
      if (!value(o.tracePath))
        return fail("--trace takes a file name");
    } else if (!a.empty() && a[0] == '-') {
      usage();
      return fail("unknown option '" + a + "'");
    } else if (o.planPath.empty()) {
      o.planPath = a;
    } else {
      return usage();
    }
  }
  if (o.planPath.empty())
    return usage();
  if (o.processes && !o.tracePath.empty())
    return fail("--trace needs --ranks-as threads, single or gpu");
  if (o.boot.given() != (o.boot.rank >= 0))
    return fail("--bootstrap and --rank go together");
  if (!o.boot.given() && (o.boot.nranks >= 0 || !o.boot.job.empty()))
    return fail("--nranks and --job need --bootstrap");
  if (o.boot.given() && (o.processes || o.gpu || !o.tracePath.empty()))
    return fail("--bootstrap runs one rank in this process: no --ranks-as processes or gpu, no "
                "--trace");
  return 0;
}

/// Prints the run's table: the plan, how the ranks ran (\p ranksAs), and
/// the row of \p count elements in \p timeUs with \p wrong elements.
/// Returns the exit status: 1 when an element was wrong.
int report(const ValidatedPlan &plan, const Options &o, const std::string &ranksAs, uint64_t count,
           double timeUs, uint64_t wrong) {
  const PlanInfo &info = plan.info();
  const uint64_t bytes = count * dataTypeSize(o.type) * sizeFactor(info);
  std::printf("# plan %s: %s, %u ranks, %u chunks per rank unit, %s plan, protocol %s, depth %u\n",
              printablePlanName(info.name).c_str(), collectiveName(info.collective), info.nranks,
              plan.chunksPerUnit(), info.inplace ? "in-place" : "out-of-place",
              protocolName(info.protocol), info.connectionDepth);
  std::printf("# ranks as %s, slice %" PRIu64 " elements, %s call, %" PRIu64
              " timed runs, protocol %s\n",
              ranksAs.c_str(), o.run.sliceElements, o.inplace ? "in-place" : "out-of-place",
              o.iters, protocolName(chooseProtocol(info.protocol, o.run.protocol, bytes)));
  std::printf("# %12s %12s %8s %6s %12s %12s %8s\n", "size(B)", "count", "type", "redop",
              "time(us)", "algbw(GB/s)", "#wrong");
  std::printf("  %12" PRIu64 " %12" PRIu64 " %8s %6s %12.1f %12.3f %8s\n", bytes, count,
              dataTypeName(o.type), redOpName(o.op), timeUs,
              timeUs > 0 ? double(bytes) / timeUs / 1e3 : 0.0,
              o.check ? std::to_string(wrong).c_str() : "n/a");
  return wrong ? 1 : 0;
}

/// --bootstrap: this process is rank o.boot.rank of a job whose ranks meet
/// through the store; returns the exit status.
int runBootstrapped(const ValidatedPlan &plan, Options &o) {
  const PlanInfo &info = plan.info();
  const uint32_t nranks = info.nranks;
  const int rank = o.boot.rank;
  if (o.boot.nranks >= 0 && uint64_t(o.boot.nranks) != nranks)
    return fail("--nranks " + std::to_string(o.boot.nranks) + ", but the plan has " +
                std::to_string(nranks) + " ranks");
  if (uint32_t(rank) >= nranks)
    return fail("--rank " + std::to_string(rank) + " is out of range: the plan has " +
                std::to_string(nranks) + " ranks");
  const ProcessGroupOptions po = o.run.processGroupOptions();
  if (std::string err = o.boot.connect(po.setupTimeoutSeconds); !err.empty())
    return fail("rank " + std::to_string(rank) + ": " + err);
  auto group = ProcessGroup::create(o.boot.jobName(), rank, int(nranks), *o.boot.store, po);
  if (!group)
    return fail(group.message());

  // Every rank's input (the reference needs them all); our buffers.
  const size_t es = dataTypeSize(o.type);
  const uint64_t count = countForBytes(plan, o.type, o.size);
  const BufferElements elems = planBufferElements(info, count);
  std::vector<std::vector<char>> inputs(nranks);
  std::vector<const void *> originals(nranks);
  for (uint32_t r = 0; r < nranks; ++r) {
    inputs[r].resize(elems.input * es);
    fillTestInput(o.type, o.op, nranks, r, elems.input, inputs[r].data(),
                  testInputOperands(plan.plan()));
    originals[r] = inputs[r].data();
  }
  std::vector<char> in, out, both;
  const void *send = nullptr;
  void *recv = nullptr;
  if (o.inplace) {
    both.resize(std::max(elems.input, elems.output) * es + 64);
    RankPointers p = inPlacePointers(info.collective, uint32_t(rank), count * es, both.data());
    send = p.send;
    recv = p.recv;
  } else {
    in.resize(elems.input * es);
    out.resize(elems.output * es);
    send = in.data();
    recv = out.data();
  }
  std::memcpy(const_cast<void *>(send), inputs[size_t(rank)].data(), inputs[size_t(rank)].size());
  if (Status s = (*group)->execute(plan, send, recv, count, o.type, o.op); !s)
    return fail(s.message());
  uint64_t wrong = 0;
  if (o.check) {
    std::vector<const void *> outputs(nranks, nullptr);
    outputs[size_t(rank)] = recv;
    Result<CheckOutcome> outcome =
        checkOutputs(plan.plan(), count, o.type, o.op, originals, outputs, rank);
    if (!outcome)
      return fail(outcome.message());
    if (outcome->wrong)
      std::cerr << "coll-run: " << outcome->firstMismatch << "\n";
    wrong = outcome->wrong;
  }
  auto start = std::chrono::steady_clock::now();
  for (uint64_t i = 0; i < o.iters; ++i)
    if (Status s = (*group)->execute(plan, send, recv, count, o.type, o.op); !s)
      return fail(s.message());
  double timeUs =
      o.iters ? std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                        .count() /
                    double(o.iters)
              : 0;

  // Rank 0 reports for all: the slowest time, every wrong element.
  const std::string key = "coll-run/" + o.boot.jobName() + "/result/";
  char mine[64];
  std::snprintf(mine, sizeof mine, "%.3f %" PRIu64, timeUs, wrong);
  if (Status s = o.boot.store->set(key + std::to_string(rank), mine); !s)
    return fail(s.message());
  if (rank != 0)
    return wrong ? 1 : 0;
  uint64_t allWrong = 0;
  double slowest = 0;
  uint32_t remote = 0;
  for (uint32_t r = 0; r < nranks; ++r) {
    Result<std::string> v = o.boot.store->get(key + std::to_string(r));
    if (!v)
      return fail("rank " + std::to_string(r) + " did not report: " + v.message());
    double t = 0;
    unsigned long long w = 0;
    if (std::sscanf(v->c_str(), "%lf %llu", &t, &w) != 2)
      return fail("rank " + std::to_string(r) + " reported '" + *v + "'");
    slowest = std::max(slowest, t);
    allWrong += w;
    remote += (*group)->isRemote(int(r));
  }
  return report(plan, o,
                "processes met through " + o.boot.host + ":" + std::to_string(o.boot.port) + " (" +
                    std::to_string(remote) + " of " + std::to_string(nranks) +
                    " ranks on other hosts than rank 0)",
                count, slowest, allWrong);
}

/// The processes mode: forks a process per rank that runs the checked call
/// and \p iters timed calls through ProcessGroup; \p snapshots[r], when not
/// null, receives rank r's output after the checked call (in place, the
/// timed calls change it). Returns "" or the errors; *timeUs receives the
/// slowest rank's mean time of a timed call.
std::string runProcesses(const ValidatedPlan &plan, const Options &o, uint64_t count,
                         const std::vector<const void *> &sendbufs,
                         const std::vector<void *> &recvbufs, const std::vector<char *> &snapshots,
                         uint64_t outputBytes, SharedArena &arena, double *timeUs) {
  const uint32_t nranks = plan.info().nranks;
  double *totalUs = reinterpret_cast<double *>(arena.take(sizeof(double) * nranks));
  std::fill_n(totalUs, nranks, 0.0);
  const std::string job = uniqueJobName("coll-run");
  const ProcessGroupOptions po = o.run.processGroupOptions();
  RankProcesses ranks;
  ranks.start(nranks, arena, [&](uint32_t r) -> std::string {
    auto group = ProcessGroup::create(job, int(r), int(nranks), po);
    if (!group)
      return group.message();
    if (Status s = (*group)->execute(plan, sendbufs[r], recvbufs[r], count, o.type, o.op); !s)
      return s.message();
    if (snapshots[r])
      std::memcpy(snapshots[r], recvbufs[r], outputBytes);
    auto start = std::chrono::steady_clock::now();
    for (uint64_t i = 0; i < o.iters; ++i)
      if (Status t = (*group)->execute(plan, sendbufs[r], recvbufs[r], count, o.type, o.op); !t)
        return t.message();
    totalUs[r] =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    return "";
  });
  std::string errors = ranks.finish("coll-run");
  *timeUs = 0;
  for (uint32_t r = 0; r < nranks && o.iters; ++r)
    *timeUs = std::max(*timeUs, totalUs[r] / double(o.iters));
  return errors;
}

/// One rank's memory for a run.
struct RankBuffers {
  std::vector<char> original; ///< The test input, kept for the reference.
  std::vector<char> in, out;  ///< Separate buffers (out of place).
  std::vector<char> both;     ///< The one buffer (in place).
  const void *send = nullptr;
  void *recv = nullptr;
};

} // namespace

int main(int argc, char **argv) {
  coll::tools::exitCleanlyWhenOutOfMemory("coll-run");
  Options o;
  if (int rc = parseArgs(argc, argv, o))
    return rc < 0 ? 0 : rc;

  // Validated once: every run below reuses it.
  Result<ValidatedPlan> plan = ValidatedPlan::load(o.planPath);
  if (!plan)
    return fail(plan.message());
  if (o.boot.given())
    return runBootstrapped(*plan, o);
  const PlanInfo &info = plan->info();
  const uint32_t nranks = info.nranks;
  if (o.processes && nranks > o.maxProcesses)
    return fail("the plan has " + std::to_string(nranks) +
                " ranks, and --ranks-as processes would start a process for each: more than the "
                "limit of " +
                std::to_string(o.maxProcesses) + " (raise it with --max-processes " +
                std::to_string(nranks) + ")");
  const size_t es = dataTypeSize(o.type);
  // A user-declared collective's count is a whole number of its chunks.
  const uint64_t count = countForBytes(*plan, o.type, o.size);
  const BufferElements elems = planBufferElements(info, count);
  const uint64_t unitBytes = count * es;
  if (o.inplace && !hasInPlaceForm(info.collective))
    return fail(info.collective == CollectiveKind::Custom
                    ? "plan '" + printablePlanName(info.name) +
                          "' is a user-declared collective, which has no in-place form"
                    : std::string(collectiveName(info.collective)) + " has no in-place form");

  // Buffers and test data. Processes mode: the send and receive buffers
  // (and, in place, a snapshot of the checked output) in shared memory.
  SharedArena arena;
  if (o.processes) {
    uint64_t perRank = o.inplace ? std::max(elems.input, elems.output) * es + 64 + elems.output * es
                                 : elems.input * es + elems.output * es;
    if (!arena.reserve((perRank + 192) * nranks + RankProcesses::arenaBytes(nranks) +
                       SharedArena::footprint(sizeof(double) * nranks)))
      return fail(std::string("cannot map shared memory: ") + std::strerror(errno));
  }
  std::vector<char *> snapshots(nranks, nullptr);
  auto buffer = [&](std::vector<char> &v, uint64_t bytes) {
    if (o.processes)
      return arena.take(bytes);
    v.resize(bytes);
    return v.data();
  };
  std::vector<RankBuffers> ranks(nranks);
  std::vector<const void *> sendbufs(nranks), originals(nranks);
  std::vector<void *> recvbufs(nranks);
  for (uint32_t r = 0; r < nranks; ++r) {
    RankBuffers &b = ranks[r];
    b.original.resize(elems.input * es);
    fillTestInput(o.type, o.op, nranks, r, elems.input, b.original.data(),
                  testInputOperands(plan->plan()));
    originals[r] = b.original.data();
    if (o.inplace) {
      RankPointers p = inPlacePointers(info.collective, r, unitBytes,
                                       buffer(b.both, std::max(elems.input, elems.output) * es));
      b.send = p.send;
      b.recv = p.recv;
      if (o.processes)
        snapshots[r] = arena.take(elems.output * es);
    } else {
      b.send = buffer(b.in, elems.input * es);
      b.recv = buffer(b.out, elems.output * es);
    }
    sendbufs[r] = b.send;
    recvbufs[r] = b.recv;
  }
  auto resetInputs = [&] {
    for (uint32_t r = 0; r < nranks; ++r)
      if (!ranks[r].original.empty())
        std::memcpy(const_cast<void *>(ranks[r].send), ranks[r].original.data(),
                    ranks[r].original.size());
  };

  ExecOptions eo = o.run.execOptions(o.mode);
  Timeline timeline;
  if (!o.tracePath.empty())
    eo.timeline = &timeline;
  LocalWorld world;

  // The checked run (also the warm-up, and the one traced). Processes mode
  // runs the timed ones too, in the ranks' processes.
  resetInputs();
  double processTimeUs = 0;
  std::vector<void *> checked = recvbufs;
  if (o.processes) {
    std::string err = runProcesses(*plan, o, count, sendbufs, recvbufs, snapshots,
                                   elems.output * es, arena, &processTimeUs);
    if (!err.empty())
      return fail(err);
    for (uint32_t r = 0; r < nranks; ++r)
      if (snapshots[r])
        checked[r] = snapshots[r];
  } else if (o.gpu) {
#ifdef COLL_RUN_WITH_GPU
    std::vector<GpuRankBuffers> gpuRanks(nranks);
    for (uint32_t r = 0; r < nranks; ++r) {
      RankBuffers &b = ranks[r];
      GpuRankBuffers &g = gpuRanks[r];
      if (o.inplace) {
        g.base = b.both.data();
        g.bytes = b.both.size();
      } else {
        // Input and output side by side in one allocation per rank.
        b.both.resize(b.in.size() + b.out.size());
        std::memcpy(b.both.data(), b.in.data(), b.in.size());
        g.base = b.both.data();
        g.bytes = b.both.size();
        g.recvOffset = b.in.size();
        b.send = b.both.data();
        b.recv = b.both.data() + b.in.size();
        recvbufs[r] = checked[r] = b.recv;
        continue;
      }
      g.sendOffset = static_cast<const char *>(b.send) - b.both.data();
      g.recvOffset = static_cast<char *>(b.recv) - b.both.data();
    }
    std::string err =
        runOnGpu(*plan, gpuRanks, count, o.type, o.op, o.sliceGiven ? o.run.sliceElements * es : 0,
                 o.run.timeoutSeconds, o.iters, &processTimeUs,
                 o.tracePath.empty() ? nullptr : &timeline, o.run.protocol);
    if (!err.empty())
      return fail(err);
#endif
  } else if (Status s = world.run(*plan, sendbufs, recvbufs, count, o.type, o.op, eo); !s) {
    return fail(s.message());
  }
  if (!o.tracePath.empty()) {
    if (Status s = timeline.writeChromeTraceFile(o.tracePath, plan->plan()); !s)
      return fail(s.message());
    eo.timeline = nullptr;
  }
  uint64_t wrong = 0;
  if (o.check) {
    Result<CheckOutcome> outcome =
        checkOutputs(plan->plan(), count, o.type, o.op, originals,
                     std::vector<const void *>(checked.begin(), checked.end()));
    if (!outcome)
      return fail(outcome.message());
    if (outcome->wrong)
      std::cerr << "coll-run: " << outcome->firstMismatch << "\n";
    wrong = outcome->wrong;
  }

  // Timed runs. In place, the data changes from run to run; only the time
  // matters here.
  double totalUs = processTimeUs * double(o.iters);
  for (uint64_t i = 0; i < o.iters && !o.processes && !o.gpu; ++i) {
    auto start = std::chrono::steady_clock::now();
    if (Status s = world.run(*plan, sendbufs, recvbufs, count, o.type, o.op, eo); !s)
      return fail(s.message());
    totalUs +=
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  }
  double timeUs = o.iters ? totalUs / double(o.iters) : 0;
  return report(*plan, o,
                o.gpu                        ? "gpu (one device)"
                : o.processes                ? "processes"
                : o.mode == ExecMode::Single ? "single"
                                             : "threads",
                count, timeUs, wrong);
}
