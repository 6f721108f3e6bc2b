//===- coll-run.cpp - Run a plan on local ranks and check it --------------===//
//
// coll-run plan.bin [--ranks-as threads|single|processes|gpu] [--size 64M] [--dtype f32]
//                   [--op sum] [--check | --no-check] [--inplace]
//                   [--iters n] [--slice elements] [--workers n]
//                   [--timeout seconds] [--mem-limit bytes|none] [--trace out.json]
//                   [--max-processes n]
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
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <new>
#include <string>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using namespace coll;

namespace {

int usage() {
  std::cerr << "usage: coll-run plan.bin [--ranks-as threads|single|processes|gpu] [--size 64M]\n"
               "                [--dtype f32]"
               " [--op sum] [--check | --no-check] [--inplace] [--iters n]\n"
               "                [--slice elements] [--workers n] [--timeout seconds]\n"
               "                [--mem-limit bytes|none] [--trace out.json] [--max-processes n]\n";
  return 2;
}

int fail(const std::string &msg) {
  std::cerr << "coll-run: error: " << msg << "\n";
  return 1;
}

/// Parses "64M", "1K", "4096", "1G" (binary multiples; a trailing B is fine).
bool parseSize(const std::string &text, uint64_t &out) {
  char *end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (end == text.c_str() || errno || text[0] == '-')
    return false;
  uint64_t mult = 1;
  std::string suffix = end;
  if (!suffix.empty() && (suffix.back() == 'B' || suffix.back() == 'b'))
    suffix.pop_back();
  if (suffix == "K" || suffix == "k")
    mult = 1ull << 10;
  else if (suffix == "M" || suffix == "m")
    mult = 1ull << 20;
  else if (suffix == "G" || suffix == "g")
    mult = 1ull << 30;
  else if (!suffix.empty())
    return false;
  if (v > UINT64_MAX / mult)
    return false;
  out = v * mult;
  return true;
}

bool parseUnsigned(const std::string &text, uint64_t &out) {
  char *end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (end == text.c_str() || *end || errno || text[0] == '-')
    return false;
  out = v;
  return true;
}

/// How many per-rank units the larger buffer holds.
uint64_t sizeFactor(const PlanInfo &info) {
  BufferElements e = planBufferElements(info, 1);
  return e.input > e.output ? e.input : e.output;
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
  uint64_t slice = ExecOptions().sliceElements;
  uint64_t workers = ExecOptions().workersPerRank;
  double timeout = ExecOptions().timeoutSeconds;
  uint64_t memLimit = ExecOptions().memoryLimitBytes; ///< 0: the default cap.
  std::string tracePath;
  uint64_t maxProcesses = 256; ///< --ranks-as processes: at most this many.
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
    } else if (a == "--slice") {
      if (!value(v) || !parseUnsigned(v, o.slice) || o.slice == 0)
        return fail("--slice takes a positive number of elements");
      o.sliceGiven = true;
    } else if (a == "--workers") {
      if (!value(v) || !parseUnsigned(v, o.workers) || o.workers > 1024)
        return fail("--workers takes a number of threads per rank (0: one per threadblock)");
    } else if (a == "--timeout") {
      char *end = nullptr;
      if (!value(v) || (o.timeout = std::strtod(v.c_str(), &end), *end) || !(o.timeout > 0))
        return fail("--timeout takes a positive number of seconds");
    } else if (a == "--mem-limit") {
      if (!value(v) || (v == "none" ? (o.memLimit = noMemoryLimit, false)
                                    : !parseSize(v, o.memLimit) || o.memLimit == 0))
        return fail("--mem-limit takes a positive byte count such as 64K, 512M or 4G, or 'none'");
    } else if (a == "--max-processes") {
      if (!value(v) || !parseUnsigned(v, o.maxProcesses) || o.maxProcesses == 0)
        return fail("--max-processes takes a positive number of processes");
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
  return 0;
}

/// Memory shared with the processes this one forks (MAP_SHARED), handed
/// out in 64-byte aligned pieces.
class SharedArena {
public:
  ~SharedArena() {
    if (base)
      munmap(base, bytes);
  }
  /// Maps \p n bytes; false when the system refuses.
  bool reserve(uint64_t n) {
    bytes = n ? n : 1;
    void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      return false;
    base = static_cast<char *>(p);
    return true;
  }
  char *take(uint64_t n) {
    char *p = base + used;
    used += (n + 63) & ~uint64_t(63);
    return p;
  }

private:
  char *base = nullptr;
  uint64_t bytes = 0, used = 0;
};

/// What a rank's process reports back.
struct RankReport {
  int status = -1;    ///< 0: ran; 1: failed (message); -1: never reported.
  double totalUs = 0; ///< The timed runs.
  char message[2048] = {};
};

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
  RankReport *reports = reinterpret_cast<RankReport *>(arena.take(sizeof(RankReport) * nranks));
  for (uint32_t r = 0; r < nranks; ++r)
    new (&reports[r]) RankReport();
  std::string job = "coll-run-" + std::to_string(getpid()) + "-" +
                    std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  ProcessGroupOptions po;
  po.sliceElements = o.slice;
  po.workers = uint32_t(o.workers);
  po.timeoutSeconds = o.timeout;
  po.memoryLimitBytes = o.memLimit;
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids;
  std::string errors;
  for (uint32_t r = 0; r < nranks; ++r) {
    pid_t pid = fork();
    if (pid < 0) {
      errors = std::string("cannot start a process: ") + std::strerror(errno);
      break;
    }
    if (pid == 0) {
      // The rank's process: report, then leave without running this
      // process's exit handlers twice.
      RankReport &rep = reports[r];
      auto report = [&](const std::string &m) {
        std::snprintf(rep.message, sizeof rep.message, "%s", m.c_str());
        rep.status = 1;
      };
      {
        auto group = ProcessGroup::create(job, int(r), int(nranks), po);
        if (!group) {
          report(group.message());
        } else if (Status s =
                       (*group)->execute(plan, sendbufs[r], recvbufs[r], count, o.type, o.op);
                   !s) {
          report(s.message());
        } else {
          if (snapshots[r])
            std::memcpy(snapshots[r], recvbufs[r], outputBytes);
          rep.status = 0;
          auto start = std::chrono::steady_clock::now();
          for (uint64_t i = 0; i < o.iters && rep.status == 0; ++i)
            if (Status t = (*group)->execute(plan, sendbufs[r], recvbufs[r], count, o.type, o.op);
                !t)
              report(t.message());
          rep.totalUs =
              std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                  .count();
        }
      }
      _exit(rep.status == 0 ? 0 : 1);
    }
    pids.push_back(pid);
  }
  *timeUs = 0;
  for (uint32_t r = 0; r < pids.size(); ++r) {
    int st = 0;
    while (waitpid(pids[r], &st, 0) < 0 && errno == EINTR) {
    }
    const RankReport &rep = reports[r];
    std::string why;
    if (WIFSIGNALED(st))
      why = std::string("killed by signal ") + std::to_string(WTERMSIG(st));
    else if (rep.status != 0)
      why = rep.status < 0 ? "exited without a report" : rep.message;
    if (!why.empty())
      errors += (errors.empty() ? "" : "\ncoll-run: error: ") +
                ("rank " + std::to_string(r) + ": " + why);
    if (o.iters)
      *timeUs = std::max(*timeUs, rep.totalUs / double(o.iters));
  }
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
  Options o;
  if (int rc = parseArgs(argc, argv, o))
    return rc < 0 ? 0 : rc;

  // Validated once: every run below reuses it.
  Result<ValidatedPlan> plan = ValidatedPlan::load(o.planPath);
  if (!plan)
    return fail(plan.message());
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
  const uint64_t perUnit = info.collective == CollectiveKind::Custom ? plan->chunksPerUnit() : 1;
  const uint64_t count = o.size / es / sizeFactor(info) / perUnit * perUnit;
  const BufferElements elems = planBufferElements(info, count);
  const uint64_t unitBytes = count * es;
  if (o.inplace && !hasInPlaceForm(info.collective))
    return fail(std::string(collectiveName(info.collective)) + " has no in-place form");

  // Buffers and test data. Processes mode: the send and receive buffers
  // (and, in place, a snapshot of the checked output) in shared memory.
  SharedArena arena;
  if (o.processes) {
    uint64_t perRank = o.inplace ? std::max(elems.input, elems.output) * es + 64 + elems.output * es
                                 : elems.input * es + elems.output * es;
    if (!arena.reserve((perRank + 192) * nranks + sizeof(RankReport) * nranks + 64))
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
    fillTestInput(o.type, o.op, nranks, r, elems.input, b.original.data());
    originals[r] = b.original.data();
    if (o.inplace) {
      char *p = buffer(b.both, std::max(elems.input, elems.output) * es);
      // The collective's alias: one buffer holds the other at block
      // inPlaceBlock() (allgather's input, reducescatter's output).
      const InPlaceAlias alias = collectiveInfo(info.collective).inPlace;
      const uint64_t inner = inPlaceBlock(info.collective, r) * unitBytes;
      b.send = alias == InPlaceAlias::InputInOutput ? p + inner : p;
      b.recv = alias == InPlaceAlias::OutputInInput ? p + inner : p;
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

  ExecOptions eo;
  eo.mode = o.mode;
  eo.sliceElements = o.slice;
  eo.workersPerRank = uint32_t(o.workers);
  eo.timeoutSeconds = o.timeout;
  eo.memoryLimitBytes = o.memLimit;
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
        runOnGpu(*plan, gpuRanks, count, o.type, o.op, o.sliceGiven ? o.slice * es : 0, o.timeout,
                 o.iters, &processTimeUs, o.tracePath.empty() ? nullptr : &timeline);
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
    std::vector<std::vector<char>> want(nranks);
    std::vector<void *> wantPtrs(nranks);
    for (uint32_t r = 0; r < nranks; ++r) {
      want[r].resize(elems.output * es);
      wantPtrs[r] = want[r].data();
    }
    if (Status s = referencePlan(plan->plan(), count, o.type, o.op, originals, wantPtrs); !s)
      return fail(s.message());
    for (uint32_t r = 0; r < nranks; ++r) {
      uint64_t first = 0;
      uint64_t n = countMismatchesIn(o.type, checked[r], want[r].data(),
                                     definedOutputElements(plan->plan(), r, count), &first);
      if (n && !wrong)
        std::cerr << "coll-run: rank " << r << " output element " << first << " is "
                  << formatElement(o.type, checked[r], first) << ", expected "
                  << formatElement(o.type, want[r].data(), first) << "\n";
      wrong += n;
    }
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
  uint64_t bytes = count * es * sizeFactor(info);
  double algbw = timeUs > 0 ? double(bytes) / timeUs / 1e3 : 0;

  std::printf("# plan %s: %s, %u ranks, %u chunks per rank unit, %s plan, protocol %s, depth %u\n",
              info.name.c_str(), collectiveName(info.collective), nranks, plan->chunksPerUnit(),
              info.inplace ? "in-place" : "out-of-place", protocolName(info.protocol),
              info.connectionDepth);
  std::printf("# ranks as %s, slice %" PRIu64 " elements, %s call, %" PRIu64 " timed runs\n",
              o.gpu                        ? "gpu (one device)"
              : o.processes                ? "processes"
              : o.mode == ExecMode::Single ? "single"
                                           : "threads",
              o.slice, o.inplace ? "in-place" : "out-of-place", o.iters);
  std::printf("# %12s %12s %8s %6s %12s %12s %8s\n", "size(B)", "count", "type", "redop",
              "time(us)", "algbw(GB/s)", "#wrong");
  std::printf("  %12" PRIu64 " %12" PRIu64 " %8s %6s %12.1f %12.3f %8s\n", bytes, count,
              dataTypeName(o.type), redOpName(o.op), timeUs, algbw,
              o.check ? std::to_string(wrong).c_str() : "n/a");
  return wrong ? 1 : 0;
}
