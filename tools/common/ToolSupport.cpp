//===- ToolSupport.cpp - What coll-run and coll-perf share ----------------===//

#include "ToolSupport.h"

#include "coll/Runtime/Collective.h"
#include "coll/Runtime/Reference.h"
#include "coll/Runtime/Selection.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace coll::tools {

//===----------------------------------------------------------------------===//
// Option values
//===----------------------------------------------------------------------===//

bool parseSize(const std::string &text, uint64_t &out) {
  return parseByteSize(text, out);
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

bool parseSeconds(const std::string &text, double &out) {
  char *end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end || !(v > 0))
    return false;
  out = v;
  return true;
}

bool parseStreamingStores(const std::string &text, uint64_t &out) {
  if (text == "auto") {
    out = 0;
    return true;
  }
  if (text == "off") {
    out = noStreamingStores;
    return true;
  }
  return parseSize(text, out) && out > 0;
}

ExecOptions RunSettings::execOptions(ExecMode mode) const {
  ExecOptions eo;
  eo.mode = mode;
  eo.sliceElements = sliceElements;
  eo.directSends = directSends;
  eo.workersPerRank = workers;
  eo.timeoutSeconds = timeoutSeconds;
  eo.memoryLimitBytes = memoryLimitBytes;
  eo.protocol = protocol;
  eo.streamingStoresFrom = streamingStoresFrom;
  return eo;
}

ProcessGroupOptions RunSettings::processGroupOptions() const {
  ProcessGroupOptions po;
  po.sliceElements = sliceElements;
  po.workers = workers;
  po.timeoutSeconds = timeoutSeconds;
  po.memoryLimitBytes = memoryLimitBytes;
  po.directReads = directSends;
  po.crossMemoryReads = directSends && crossMemoryReads;
  po.protocol = protocol;
  po.streamingStoresFrom = streamingStoresFrom;
  return po;
}

//===----------------------------------------------------------------------===//
// Sizes and buffers
//===----------------------------------------------------------------------===//

uint64_t sizeFactor(const PlanInfo &info) {
  BufferElements e = planBufferElements(info, 1);
  return e.input > e.output ? e.input : e.output;
}

uint64_t countForBytes(const ValidatedPlan &plan, DataType type, uint64_t bytes) {
  const PlanInfo &info = plan.info();
  const uint64_t perUnit = info.collective == CollectiveKind::Custom ? plan.chunksPerUnit() : 1;
  return bytes / dataTypeSize(type) / sizeFactor(info) / perUnit * perUnit;
}

RankPointers inPlacePointers(CollectiveKind kind, uint32_t rank, uint64_t unitBytes, char *buffer) {
  const InPlaceAlias alias = collectiveInfo(kind).inPlace;
  const uint64_t inner = inPlaceBlock(kind, rank) * unitBytes;
  RankPointers p;
  p.send = alias == InPlaceAlias::InputInOutput ? buffer + inner : buffer;
  p.recv = alias == InPlaceAlias::OutputInInput ? buffer + inner : buffer;
  return p;
}

SharedArena::~SharedArena() {
  if (base)
    munmap(base, bytes);
}

bool SharedArena::reserve(uint64_t n) {
  bytes = n ? n : 1;
  void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return false;
  base = static_cast<char *>(p);
  return true;
}

char *SharedArena::take(uint64_t n) {
  char *p = base + used;
  used += footprint(n);
  return p;
}

//===----------------------------------------------------------------------===//
// Ranks as processes
//===----------------------------------------------------------------------===//

bool Bootstrap::parse(const std::string &url) {
  const std::string scheme = "tcp://";
  if (url.compare(0, scheme.size(), scheme) != 0)
    return false;
  std::string rest = url.substr(scheme.size());
  size_t colon = rest.rfind(':');
  uint64_t p = 0;
  if (colon == std::string::npos || colon == 0 || !parseUnsigned(rest.substr(colon + 1), p) ||
      p == 0 || p > 65535)
    return false;
  host = rest.substr(0, colon);
  port = uint16_t(p);
  return true;
}

std::string Bootstrap::connect(double timeoutSeconds) {
  if (rank == 0) {
    auto s = TcpStoreServer::start("0.0.0.0", port);
    if (!s)
      return "rank 0 cannot serve the store on port " + std::to_string(port) + ": " + s.message();
    server = std::move(*s);
  }
  auto c = TcpStore::connect(host, port, timeoutSeconds);
  if (!c)
    return c.message();
  store = std::move(*c);
  return "";
}

std::string Bootstrap::jobName() const {
  return job.empty() ? "tcp" + std::to_string(port) : job;
}

std::string uniqueJobName(const std::string &prefix) {
  return prefix + "-" + std::to_string(getpid()) + "-" +
         std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
}

/// What a rank's process reports back.
struct RankProcesses::Report {
  int status = -1; ///< 0: ran; 1: failed (message); -1: never reported.
  char message[2048] = {};
};

uint64_t RankProcesses::arenaBytes(uint32_t nranks) {
  return SharedArena::footprint(sizeof(Report) * nranks);
}

bool RankProcesses::start(uint32_t nranks, SharedArena &arena,
                          const std::function<std::string(uint32_t rank)> &body) {
  reports = reinterpret_cast<Report *>(arena.take(sizeof(Report) * nranks));
  for (uint32_t r = 0; r < nranks; ++r)
    new (&reports[r]) Report();
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t parent = getpid();
  for (uint32_t r = 0; r < nranks; ++r) {
    pid_t pid = fork();
    if (pid < 0) {
      startError = std::string("cannot start a process: ") + std::strerror(errno);
      return false;
    }
    if (pid == 0) {
      // The rank's process: it dies with its launcher, reports, then
      // leaves without running this process's exit handlers twice.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      Report &rep = reports[r];
      if (getppid() != parent) {
        _exit(1);
      }
      std::string error = body(r);
      if (error.empty()) {
        rep.status = 0;
      } else {
        std::snprintf(rep.message, sizeof rep.message, "%s", error.c_str());
        rep.status = 1;
      }
      _exit(rep.status == 0 ? 0 : 1);
    }
    pids.push_back(pid);
    exitStatus.push_back(-1);
  }
  return true;
}

bool RankProcesses::healthy() {
  bool ok = startError.empty();
  for (size_t r = 0; r < pids.size(); ++r) {
    if (exitStatus[r] < 0) {
      int st = 0;
      if (waitpid(pids[r], &st, WNOHANG) == pids[r])
        exitStatus[r] = st;
    }
    if (exitStatus[r] >= 0 && !(WIFEXITED(exitStatus[r]) && WEXITSTATUS(exitStatus[r]) == 0))
      ok = false;
  }
  return ok;
}

std::string RankProcesses::finish(const char *tool) {
  std::string errors = startError;
  for (size_t r = 0; r < pids.size(); ++r) {
    int st = exitStatus[r];
    if (st < 0)
      while (waitpid(pids[r], &st, 0) < 0 && errno == EINTR) {
      }
    const Report &rep = reports[r];
    std::string why;
    if (WIFSIGNALED(st))
      why = std::string("killed by signal ") + std::to_string(WTERMSIG(st));
    else if (rep.status != 0)
      why = rep.status < 0 ? "exited without a report" : rep.message;
    if (!why.empty())
      errors += (errors.empty() ? "" : std::string("\n") + tool + ": error: ") +
                ("rank " + std::to_string(r) + ": " + why);
  }
  pids.clear();
  exitStatus.clear();
  return errors;
}

bool SharedBarrier::wait(const std::function<bool()> &stillOk) {
  const uint32_t gen = generation.load(std::memory_order_acquire);
  if (arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == parties) {
    arrived.store(0, std::memory_order_relaxed);
    generation.store(gen + 1, std::memory_order_release);
    return stopped.load(std::memory_order_acquire) == 0;
  }
  // Spin briefly (the others are usually close), then sleep with backoff
  // up to 5 ms: a waiting party (the launcher, while the ranks run a timed
  // loop) must leave the CPUs to the working ones, which may be bound to
  // them and spin for each other.
  auto sleep = std::chrono::microseconds(20);
  for (uint64_t i = 0; generation.load(std::memory_order_acquire) == gen; ++i) {
    if (stopped.load(std::memory_order_acquire))
      return false;
    if (i < 1000)
      continue;
    if (stillOk && !stillOk()) {
      abort();
      return false;
    }
    std::this_thread::sleep_for(sleep);
    sleep = std::min(sleep * 2, std::chrono::microseconds(5000));
  }
  return stopped.load(std::memory_order_acquire) == 0;
}

//===----------------------------------------------------------------------===//
// Checking
//===----------------------------------------------------------------------===//

Result<CheckOutcome> checkOutputs(const Plan &plan, uint64_t count, DataType type, RedOp op,
                                  const std::vector<const void *> &inputs,
                                  const std::vector<const void *> &outputs, int onlyRank) {
  const uint32_t nranks = plan.info.nranks;
  const size_t es = dataTypeSize(type);
  const uint64_t outputElements = planBufferElements(plan.info, count).output;
  std::vector<std::vector<char>> want(nranks);
  std::vector<void *> wantPtrs(nranks);
  for (uint32_t r = 0; r < nranks; ++r) {
    want[r].resize(outputElements * es);
    wantPtrs[r] = want[r].data();
  }
  if (Status s = referencePlan(plan, count, type, op, inputs, wantPtrs); !s)
    return s;
  CheckOutcome out;
  for (uint32_t r = 0; r < nranks; ++r) {
    if (onlyRank >= 0 && r != uint32_t(onlyRank))
      continue;
    uint64_t first = 0;
    uint64_t n = countMismatchesIn(type, outputs[r], want[r].data(),
                                   definedOutputElements(plan, r, count), &first);
    if (n && !out.wrong)
      out.firstMismatch = "rank " + std::to_string(r) + " output element " + std::to_string(first) +
                          " is " + formatElement(type, outputs[r], first) + ", expected " +
                          formatElement(type, want[r].data(), first);
    out.wrong += n;
  }
  return out;
}

} // namespace coll::tools
