//===- ShmRank.cpp - One rank of a ProcessGroup test job ------------------===//
//
// The process that ProcessExecutorTest.cpp starts once per rank: joins a
// job through ProcessGroup (or the C API), runs a list of calls on a plan
// and checks this rank's outputs against the reference.
//
//   runtime_shm_rank --job J --rank R --nranks N (--plan FILE | --hand-ring DEPTH)
//                    [--cases all|repeat | --count C] [--dtype T] [--op O] [--inplace]
//                    [--loop K] [--slice E] [--workers W] [--timeout S]
//                    [--protocol CHOICE]
//                    [--setup-timeout S] [--count-offset K] [--mismatch-at I]
//                    [--die-after-ms MS]
//                    [--stop-after-ms MS] [--exit-after-ms MS] [--abort-after-ms MS]
//                    [--capi] [--no-check] [--hand-idle]
//                    [--delay-ms MS] [--overlap] [--fail-alloc-above BYTES]
//                    [--recreate K] [--validated]
//                    [--registered] [--cross-memory] [--no-direct] [--expect-direct]
//                    [--streaming-stores BYTES]
//                    [--blocks]
//                    [--store HOST:PORT [--host NAME]]
//
// --die-after-ms, --stop-after-ms, --exit-after-ms and --abort-after-ms
// end this process with SIGKILL, stop it with SIGSTOP, end it with
// _exit(5) or with abort(), from a thread, that many milliseconds after its
// first call returned (or after it joined, when it makes no call), to play
// a rank that dies, stalls, exits or crashes in the middle of a run. --hand-idle runs the
// hand-written ring among ranks 0 and 1 only: the other ranks have no threadblocks (results
// unchecked). --delay-ms sleeps before the first call. --overlap (with
// --capi) makes the receive buffer start one element into the send buffer,
// so that the executor copies the input. --fail-alloc-above makes every
// C++ allocation larger than BYTES throw std::bad_alloc from the first
// call on. --recreate K joins, runs the calls and leaves the job K times in
// a row, under the same job name. --validated validates the plan once
// (ValidatedPlan) and calls execute() with it. --registered runs each call
// on copies of its buffers in memory from ProcessGroup::allocate() (made
// and freed around the call), which peers map; --cross-memory sets
// ProcessGroupOptions::crossMemoryReads for pieces of any size;
// --no-direct clears directReads; --expect-direct fails (status 1) unless
// some call read a message where its sender left it. --blocks gives
// each call's buffers of several units as separate blocks of one unit
// (CallArgs::sendBlocks, recvBlocks), laid out in reverse order in memory
// of their own (in place: the alias unit is the block), and copies the
// received ones back for the check (with --registered, the blocks are in
// memory from allocate()).
// --store joins through the TcpStore at HOST:PORT (ProcessGroup::create()
// with a store: a job whose ranks may span hosts), --host sets COLL_HOST
// first: ranks of different names talk over the network.
// Exit status: 0 every element right, 1 a wrong element, 2 bad usage, 3 an
// execute() error, 4 a create() error. Errors are printed as
// "error: <kind>: <message>".
//
//===----------------------------------------------------------------------===//

#include "HandPlans.h"
#include "TestHelpers.h"
#include "coll/Runtime/PlanIO.h"
#include "coll/Runtime/ProcessGroup.h"
#include "coll/Runtime/TcpStore.h"
#include "coll/coll.h"

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace coll;

namespace {
/// --fail-alloc-above: allocations larger than this throw (0: none do).
std::atomic<size_t> failAllocAbove{0};
} // namespace

// Every allocation of the process goes through this, the runtime's
// included: a rank whose own execute() runs out of memory.
void *operator new(size_t bytes) {
  size_t limit = failAllocAbove.load(std::memory_order_relaxed);
  if (limit && bytes > limit)
    throw std::bad_alloc();
  if (void *p = std::malloc(bytes ? bytes : 1))
    return p;
  throw std::bad_alloc();
}
// Its counterparts: the allocation came from malloc (AddressSanitizer
// reports a malloc freed by its own operator delete as a mismatch). GCC
// cannot tell that free() matches this operator new.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void *p) noexcept {
  std::free(p);
}
void operator delete(void *p, size_t) noexcept {
  std::free(p);
}
#pragma GCC diagnostic pop
using namespace coll::test;

namespace {

struct Args {
  std::string job, planPath;
  int rank = -1, nranks = 0;
  uint32_t handRingDepth = 0;
  bool allCases = false;
  bool repeatCases = false; ///< --cases repeat
  uint64_t count = 1000;
  DataType type = DataType::Float32;
  RedOp op = RedOp::Sum;
  bool inplace = false;
  uint64_t loop = 1;
  ProcessGroupOptions options;
  int64_t countOffset = 0;
  /// --mismatch-at: the call (counted from 0 over every loop) that alone
  /// takes --count-offset, and that every rank expects to fail with a
  /// mismatch; -1: every call takes it.
  int64_t mismatchAt = -1;
  /// --die-after-ms and the like: what befalls this process (FaultKind),
  /// and when (-1: nothing does).
  enum class FaultKind { Kill, Stop, Exit, Abort } fault = FaultKind::Kill;
  long faultAfterMs = -1;
  bool capi = false;
  bool check = true;
  bool handIdle = false;
  long delayMs = 0;
  bool overlap = false;
  size_t failAllocAbove = 0;
  uint64_t recreate = 1;
  bool validated = false;
  bool registered = false;
  bool blocks = false;
  bool expectDirect = false;
  std::string storeHost; ///< --store: join through the store there.
  uint16_t storePort = 0;
};

/// The hand-written ring between ranks 0 and 1 in a plan of \p n ranks:
/// ranks 2 and up have no threadblocks.
Plan idleRanksPlan(uint32_t n) {
  Plan p = ringAllReduce(2, 2);
  p.info.name = "hand_idle_ranks";
  p.info.nranks = n;
  p.ranks.resize(n);
  return p;
}

/// Sleeps --delay-ms, then arms --fail-alloc-above: before the first call.
void beforeFirstCall(const Args &a) {
  static bool done = false;
  if (done)
    return;
  done = true;
  if (a.delayMs > 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(a.delayMs));
  failAllocAbove.store(a.failAllocAbove, std::memory_order_relaxed);
}

int usage(const char *why) {
  std::fprintf(stderr, "runtime_shm_rank: %s\n", why);
  return 2;
}

/// The calls of --cases all: counts 0, 1, 7, 1001 and 100003, in place and
/// out of place, data types and operators in rotation.
std::vector<RunCase> allCases(const Plan &plan) {
  std::vector<RunCase> cases;
  std::vector<DataType> types = allDataTypes();
  std::vector<RedOp> ops = opsFor(plan.info.collective);
  size_t i = 0;
  for (uint64_t count : {uint64_t(0), uint64_t(1), uint64_t(7), uint64_t(1001), uint64_t(100003)})
    for (bool inplace : {false, true})
      for (int k = 0; k < 3; ++k, ++i) {
        RunCase c;
        c.count = count;
        c.inplace = inplace;
        c.type = types[(i * 7) % types.size()];
        c.op = ops[i % ops.size()];
        cases.push_back(c);
      }
  return cases;
}

/// The calls of --cases repeat: runs of calls of one description (which
/// the executor serves from the data side it kept), in place and out of
/// place in turn, broken by other counts and types and coming back, then
/// three descriptions in turn; each call gets inputs of its own
/// (fillCallInput()).
std::vector<RunCase> repeatCases(const Plan &plan) {
  std::vector<RunCase> cases;
  const RedOp op = opsFor(plan.info.collective).front();
  auto add = [&](uint64_t count, DataType type, int times) {
    for (int k = 0; k < times; ++k) {
      RunCase c;
      c.count = count;
      c.type = type;
      c.op = op;
      c.inplace = k % 2 == 1;
      cases.push_back(c);
    }
  };
  add(1001, DataType::Int32, 4);
  add(50000, DataType::Int32, 3);
  add(1001, DataType::Int32, 3);
  add(1001, DataType::Float64, 2);
  add(1001, DataType::Int32, 2);
  add(0, DataType::Int32, 1);
  add(1001, DataType::Int32, 2);
  // Descriptions in turn, as a training step's buckets: each call reuses a
  // data side kept beside the others (ProcessGroupOptions::keptCalls).
  for (int k = 0; k < 3; ++k) {
    add(50000, DataType::Int32, 1);
    add(1001, DataType::Float64, 1);
    add(1001, DataType::Int32, 1);
  }
  return cases;
}

/// Compares this rank's result of \p c with the reference; "" when right.
std::string check(const Plan &plan, const RunCase &c, const WorldBuffers &b, uint32_t me) {
  const PlanInfo &info = plan.info;
  const size_t es = dataTypeSize(c.type);
  BufferElements e = planBufferElements(info, c.count);
  if (!c.inplace && std::memcmp(b.in[me].data(), b.original[me].data(), e.input * es) != 0)
    return describe(c) + ": the input was modified";
  std::vector<std::vector<char>> want;
  if (std::string err = referenceOutputs(plan, c, b.original, want); !err.empty())
    return err;
  uint64_t first = 0;
  uint64_t wrong = countMismatchesIn(c.type, b.recv[me], want[me].data(),
                                     definedOutputElements(plan, me, c.count), &first);
  if (!wrong)
    return "";
  return describe(c) + ": output element " + std::to_string(first) + " is " +
         formatElement(c.type, b.recv[me], first) + ", expected " +
         formatElement(c.type, want[me].data(), first) + " (" + std::to_string(wrong) +
         " checked elements wrong)";
}

/// The C API's path: join, allocate the buffers in shared memory, run an
/// allreduce of floats, check it.
int runCApi(const Args &a, const Plan &plan) {
  std::vector<uint8_t> bytes = serializePlan(plan);
  collPlan_t p = nullptr;
  if (collPlanLoadMemory(bytes.data(), bytes.size(), &p) != collSuccess)
    return std::fprintf(stderr, "error: collPlanLoadMemory: %s\n", collGetLastError(nullptr)), 3;
  collShmConfig_t config;
  collShmConfigInit(&config);
  config.timeoutSeconds = a.options.timeoutSeconds;
  config.setupTimeoutSeconds = a.options.setupTimeoutSeconds;
  collComm_t comm = nullptr;
  collResult_t res = collCommInitRankShm(a.job.c_str(), a.nranks, a.rank, &config, &comm);
  if (res != collSuccess) {
    std::fprintf(stderr, "error: %s: %s\n", collGetErrorString(res), collGetLastError(nullptr));
    collPlanFree(p);
    return 4;
  }
  int rank = -1, count = 0;
  collCommUserRank(comm, &rank);
  collCommCount(comm, &count);
  const size_t n = size_t(a.count);
  float *send = nullptr, *recv = nullptr;
  int status = 0;
  if (collMemAlloc(comm, (n + 1) * sizeof(float), reinterpret_cast<void **>(&send)) !=
          collSuccess ||
      collMemAlloc(comm, n * sizeof(float), reinterpret_cast<void **>(&recv)) != collSuccess) {
    std::fprintf(stderr, "error: %s\n", collGetLastError(nullptr));
    status = 3;
  } else {
    for (size_t i = 0; i < n; ++i)
      send[i] = float((i % 1000) * size_t(count) + size_t(rank));
    beforeFirstCall(a);
    res = collExecute(send, a.overlap ? send + 1 : recv, n, collFloat32, collSum, p, comm);
    if (res != collSuccess) {
      std::fprintf(stderr, "error: %s: %s\n", collGetErrorString(res), collGetLastError(comm));
      status = 3;
    }
    for (size_t i = 0; status == 0 && i < n; ++i) {
      float want =
          float((i % 1000) * size_t(count) * size_t(count) + size_t(count * (count - 1) / 2));
      if (recv[i] != want) {
        std::fprintf(stderr, "rank %d: element %zu is %g, expected %g\n", rank, i, recv[i], want);
        status = 1;
      }
    }
  }
  collMemFree(comm, send);
  collMemFree(comm, recv);
  collCommDestroy(comm);
  collPlanFree(p);
  return status;
}

} // namespace

int main(int argc, char **argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    auto next = [&]() -> const char * { return i + 1 < argc ? argv[++i] : ""; };
    if (s == "--job")
      a.job = next();
    else if (s == "--rank")
      a.rank = std::atoi(next());
    else if (s == "--nranks")
      a.nranks = std::atoi(next());
    else if (s == "--plan")
      a.planPath = next();
    else if (s == "--hand-ring")
      a.handRingDepth = uint32_t(std::atoi(next()));
    else if (s == "--cases") {
      std::string which = next();
      a.allCases = which == "all";
      a.repeatCases = which == "repeat";
    } else if (s == "--count")
      a.count = std::strtoull(next(), nullptr, 10);
    else if (s == "--dtype") {
      if (!parseDataType(next(), a.type))
        return usage("bad --dtype");
    } else if (s == "--op") {
      if (!parseRedOp(next(), a.op))
        return usage("bad --op");
    } else if (s == "--inplace")
      a.inplace = true;
    else if (s == "--loop")
      a.loop = std::strtoull(next(), nullptr, 10);
    else if (s == "--slice")
      a.options.sliceElements = std::strtoull(next(), nullptr, 10);
    else if (s == "--validated")
      a.validated = true;
    else if (s == "--workers")
      a.options.workers = uint32_t(std::atoi(next()));
    else if (s == "--streaming-stores")
      a.options.streamingStoresFrom = std::strtoull(next(), nullptr, 10);
    else if (s == "--protocol") {
      if (Status st = parseProtocolChoice(next(), a.options.protocol); !st) {
        std::fprintf(stderr, "%s\n", st.message().c_str());
        return 2;
      }
    } else if (s == "--timeout")
      a.options.timeoutSeconds = std::atof(next());
    else if (s == "--setup-timeout")
      a.options.setupTimeoutSeconds = std::atof(next());
    else if (s == "--count-offset")
      a.countOffset = std::atoll(next());
    else if (s == "--mismatch-at")
      a.mismatchAt = std::atoll(next());
    else if (s == "--die-after-ms" || s == "--stop-after-ms" || s == "--exit-after-ms" ||
             s == "--abort-after-ms") {
      a.fault = s == "--die-after-ms"    ? Args::FaultKind::Kill
                : s == "--stop-after-ms" ? Args::FaultKind::Stop
                : s == "--exit-after-ms" ? Args::FaultKind::Exit
                                         : Args::FaultKind::Abort;
      a.faultAfterMs = std::atol(next());
    } else if (s == "--capi")
      a.capi = true;
    else if (s == "--no-check")
      a.check = false;
    else if (s == "--hand-idle")
      a.handIdle = true;
    else if (s == "--delay-ms")
      a.delayMs = std::atol(next());
    else if (s == "--overlap")
      a.overlap = true;
    else if (s == "--fail-alloc-above")
      a.failAllocAbove = std::strtoull(next(), nullptr, 10);
    else if (s == "--recreate")
      a.recreate = std::strtoull(next(), nullptr, 10);
    else if (s == "--registered")
      a.registered = true;
    else if (s == "--blocks")
      a.blocks = true;
    else if (s == "--cross-memory") {
      a.options.crossMemoryReads = true;
      a.options.crossMemoryMinBytes = 0;
    } else if (s == "--no-direct")
      a.options.directReads = false;
    else if (s == "--expect-direct")
      a.expectDirect = true;
    else if (s == "--store") {
      std::string where = next();
      size_t colon = where.rfind(':');
      if (colon == std::string::npos)
        return usage("--store takes HOST:PORT");
      a.storeHost = where.substr(0, colon);
      a.storePort = uint16_t(std::atoi(where.c_str() + colon + 1));
    } else if (s == "--host")
      setenv("COLL_HOST", next(), 1);
    else
      return usage(("unknown argument " + s).c_str());
  }
  if (a.job.empty() || a.rank < 0 || a.nranks < 1)
    return usage("--job, --rank and --nranks are needed");

  Plan plan;
  if (!a.planPath.empty()) {
    Result<Plan> p = loadPlanFile(a.planPath);
    if (!p) {
      std::fprintf(stderr, "error: %s\n", p.message().c_str());
      return 2;
    }
    plan = std::move(*p);
  } else if (a.handIdle) {
    plan = idleRanksPlan(uint32_t(a.nranks));
  } else {
    plan = ringAllReduce(uint32_t(a.nranks), a.handRingDepth ? a.handRingDepth : 2);
  }

  if (a.capi)
    return runCApi(a, plan);

  bool timerStarted = false;
  auto startTimer = [&] {
    if (timerStarted || a.faultAfterMs < 0)
      return;
    timerStarted = true;
    std::thread([ms = a.faultAfterMs, fault = a.fault] {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      switch (fault) {
      case Args::FaultKind::Kill:
        kill(getpid(), SIGKILL);
        break;
      case Args::FaultKind::Stop:
        kill(getpid(), SIGSTOP);
        break;
      case Args::FaultKind::Exit:
        _exit(5);
      case Args::FaultKind::Abort:
        std::abort();
      }
    }).detach();
  };
  if (a.loop == 0)
    startTimer(); // Dies while it waits for its peers.
  std::vector<RunCase> cases;
  if (a.allCases) {
    cases = allCases(plan);
  } else if (a.repeatCases) {
    cases = repeatCases(plan);
  } else {
    RunCase c;
    c.count = a.count;
    c.type = a.type;
    c.op = a.op;
    c.inplace = a.inplace;
    cases.push_back(c);
  }
  const uint32_t me = uint32_t(a.rank);
  int status = 0;
  // Without checks the buffers are made once, and the loop spends its time
  // in execute().
  std::vector<WorldBuffers> buffers(cases.size());
  uint64_t directMessages = 0;
  for (uint64_t round = 0; round < a.recreate && status == 0; ++round) {
    ErrorKind kind = ErrorKind::None;
    std::unique_ptr<TcpStore> store;
    if (!a.storeHost.empty()) {
      auto c = TcpStore::connect(a.storeHost, a.storePort, a.options.setupTimeoutSeconds);
      if (!c) {
        std::fprintf(stderr, "error: store: %s\n", c.message().c_str());
        return 4;
      }
      store = std::move(*c);
    }
    auto group = store ? ProcessGroup::create(a.job, a.rank, a.nranks, *store, a.options, &kind)
                       : ProcessGroup::create(a.job, a.rank, a.nranks, a.options, &kind);
    if (!group) {
      std::fprintf(stderr, "error: %s: %s (round %llu)\n", errorKindName(kind),
                   group.message().c_str(), static_cast<unsigned long long>(round));
      return 4;
    }
    ProcessGroup &g = **group;
    std::optional<ValidatedPlan> validated;
    if (a.validated) {
      Result<ValidatedPlan> v = ValidatedPlan::borrow(plan);
      if (!v) {
        std::fprintf(stderr, "error: %s\n", v.message().c_str());
        return 2;
      }
      validated.emplace(*v);
    }
    for (uint64_t iter = 0; iter < a.loop && status == 0; ++iter)
      for (size_t i = 0; i < cases.size(); ++i) {
        const RunCase &c = cases[i];
        WorldBuffers &b = buffers[i];
        if (a.repeatCases)
          makeBuffers(plan, c, b, [&](uint32_t r, uint64_t n, void *buf) {
            fillCallInput(c.type, (round * a.loop + iter) * cases.size() + i, r, n, buf);
          });
        else if (a.check || (iter == 0 && round == 0))
          makeBuffers(plan, c, b);
        const int64_t callIndex = int64_t((round * a.loop + iter) * cases.size() + i);
        const bool mismatch = a.mismatchAt >= 0 && callIndex == a.mismatchAt;
        uint64_t count =
            uint64_t(int64_t(c.count) + (a.mismatchAt < 0 || mismatch ? a.countOffset : 0));
        beforeFirstCall(a);
        // --registered: the call runs on copies in allocate()'s memory.
        struct Region {
          std::vector<char> *mine;
          char *own = nullptr;
        } regions[] = {{&b.in[me]}, {&b.out[me]}, {&b.both[me]}};
        const void *send = b.send[me];
        void *recv = b.recv[me];
        if (a.registered) {
          for (Region &r : regions) {
            if (r.mine->empty())
              continue;
            std::string why;
            r.own = static_cast<char *>(g.allocate(r.mine->size(), &why));
            if (!r.own) {
              std::fprintf(stderr, "error: allocate: %s\n", why.c_str());
              return 3;
            }
            std::memcpy(r.own, r.mine->data(), r.mine->size());
            const char *base = r.mine->data();
            auto moved = [&](const void *p) -> char * {
              const char *q = static_cast<const char *>(p);
              return q && q >= base && q < base + r.mine->size() ? r.own + (q - base) : nullptr;
            };
            if (char *p = moved(send))
              send = p;
            if (char *p = moved(recv))
              recv = p;
          }
        }
        // --blocks: each buffer of several units as blocks of their own, in
        // reverse order, in memory of their own; a buffer of one unit stays
        // where it is. The in-place alias moves with its blocks: an input
        // of one unit at a unit of the output is that block, an output of
        // one unit at a unit of the input is that block; otherwise the
        // blocks are apart (an alltoall called in place runs out of place).
        // With --registered, in memory from allocate() (which the peers
        // read in place), freed after the call.
        struct Arena {
          ProcessGroup *group = nullptr;
          std::vector<char> own;
          char *at = nullptr;
          char *data() { return at; }
          bool assign(uint64_t bytes, ProcessGroup *g) {
            group = g;
            if (g)
              return (at = static_cast<char *>(g->allocate(bytes))) != nullptr;
            own.assign(bytes, 0);
            return (at = own.data()) != nullptr;
          }
          ~Arena() {
            if (group && at)
              group->deallocate(at);
          }
        } sendArena, recvArena;
        ProcessGroup *arenaGroup = a.registered ? &g : nullptr;
        std::vector<const void *> sendBlocks;
        std::vector<void *> recvBlocks;
        const uint64_t unit = count * dataTypeSize(c.type);
        const BufferElements units =
            count ? BufferElements{planBufferElements(plan.info, count).input / count,
                                   planBufferElements(plan.info, count).output / count}
                  : BufferElements{0, 0};
        const char *sendBase = static_cast<const char *>(send);
        char *recvBase = static_cast<char *>(recv);
        if (a.blocks && units.output > 0) {
          if (units.output > 1)
            if (!recvArena.assign(units.output * unit + 64, arenaGroup)) {
              std::fprintf(stderr, "error: allocate: the receive blocks\n");
              return 3;
            }
          for (uint64_t k = 0; k < units.output; ++k) {
            char *block =
                units.output == 1 ? recvBase : recvArena.data() + (units.output - 1 - k) * unit;
            if (units.output > 1)
              std::memcpy(block, recvBase + k * unit, unit);
            recvBlocks.push_back(block);
          }
        }
        if (a.blocks && units.input > 1) {
          if (!sendArena.assign(units.input * unit + 64, arenaGroup)) {
            std::fprintf(stderr, "error: allocate: the send blocks\n");
            return 3;
          }
          for (uint64_t k = 0; k < units.input; ++k) {
            char *block = sendArena.data() + (units.input - 1 - k) * unit;
            std::memcpy(block, sendBase + k * unit, unit);
            sendBlocks.push_back(block);
          }
        }
        auto unitOf = [&](const char *p, const char *base, uint64_t n) -> int64_t {
          if (p < base || p >= base + n * unit)
            return -1;
          return (p - base) % unit == 0 ? (p - base) / unit : -2;
        };
        if (a.blocks && units.input == 1 && units.output > 1) {
          const int64_t k = unitOf(sendBase, recvBase, units.output);
          if (k == -2) {
            std::fprintf(stderr, "error: --blocks: the send buffer lies inside a unit\n");
            return 2;
          }
          if (k >= 0)
            send = recvBlocks[size_t(k)];
        }
        if (a.blocks && units.input > 1 && units.output == 1) {
          const int64_t k = unitOf(recvBase, sendBase, units.input);
          if (k == -2) {
            std::fprintf(stderr, "error: --blocks: the receive buffer lies inside a unit\n");
            return 2;
          }
          if (k >= 0)
            recvBlocks[0] = const_cast<void *>(sendBlocks[size_t(k)]);
        }
        Status s = Status::success();
        if (a.blocks) {
          static void *none[1] = {nullptr};
          if (!validated) {
            Result<ValidatedPlan> v = ValidatedPlan::borrow(plan);
            if (!v) {
              std::fprintf(stderr, "error: %s\n", v.message().c_str());
              return 2;
            }
            validated.emplace(*v);
          }
          CallArgs args{send, nullptr, count, c.type, c.op};
          args.recvBlocks = recvBlocks.empty() ? none : recvBlocks.data();
          args.numRecvBlocks = recvBlocks.size();
          if (!sendBlocks.empty()) {
            args.sendBlocks = sendBlocks.data();
            args.numSendBlocks = sendBlocks.size();
          }
          s = g.execute(*validated, args);
          for (uint64_t k = 0; k < recvBlocks.size(); ++k)
            if (recvBlocks[k] != recvBase + k * unit)
              std::memcpy(recvBase + k * unit, recvBlocks[k], unit);
        } else {
          s = validated ? g.execute(*validated, send, recv, count, c.type, c.op)
                        : g.execute(plan, send, recv, count, c.type, c.op);
        }
        directMessages += g.lastDirectMessages();
        for (Region &r : regions)
          if (r.own) {
            std::memcpy(r.mine->data(), r.own, r.mine->size());
            g.deallocate(r.own);
          }
        startTimer();
        if (mismatch) {
          // Every rank fails this call, naming the mismatch, and goes on.
          if (s || g.lastErrorKind() != ErrorKind::Mismatch) {
            std::fprintf(stderr, "rank %u: call %lld: expected a mismatch, got %s: %s\n", me,
                         static_cast<long long>(callIndex), errorKindName(g.lastErrorKind()),
                         s ? "success" : s.message().c_str());
            status = 3;
            break;
          }
          std::printf("rank %u: call %lld: %s\n", me, static_cast<long long>(callIndex),
                      s.message().c_str());
          continue;
        }
        if (!s) {
          std::fprintf(stderr, "error: %s: %s\n", errorKindName(g.lastErrorKind()),
                       s.message().c_str());
          status = 3;
          break;
        }
        if (!a.check || a.handIdle)
          continue;
        if (std::string err = check(plan, c, b, me); !err.empty()) {
          std::fprintf(stderr, "rank %u: %s\n", me, err.c_str());
          status = 1;
          break;
        }
      }
  }
  if (status == 0 && a.expectDirect && directMessages == 0 && !a.handIdle) {
    std::fprintf(stderr, "rank %u: no call read a message where its sender left it\n", me);
    status = 1;
  }
  if (status == 0)
    std::printf("rank %u: %zu calls right, %llu direct messages\n", me,
                size_t(a.recreate * a.loop) * cases.size(),
                static_cast<unsigned long long>(directMessages));
  return status;
}
