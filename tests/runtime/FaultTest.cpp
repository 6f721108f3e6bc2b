//===- FaultTest.cpp - Randomized fault injection, threads and processes --===//
//
// One rank of a job of 2 to 8 ranks fails at a random point of a random
// collective (a random plan, count and delay), or the ranks call with
// different arguments, and every other rank must return an error that names
// the culprit, within the timeout plus a margin; a job of processes must
// leave /dev/shm as it found it.
//
//   processes  the victim is killed (SIGKILL), stopped (SIGSTOP), exits
//              (_exit) or aborts (abort()) in the middle of its calls
//   threads    the victim throws (ExecOptions::faultInjection, after a
//              random sleep, while its other threadblocks run) or stalls
//              (sleeps past the progress timeout)
//   both       the victim calls with another count, data type, operator or
//              plan
//
// The cases are drawn from a seed (COLL_FAULT_SEED, default below). A
// failure prints the case's draw and the seed; the case names (kind and
// place in the list) do not depend on it, so that
// `COLL_FAULT_SEED=<seed> ctest -L fault` or the test binary replays it.
//
//===----------------------------------------------------------------------===//

#include "HandPlans.h"
#include "ProcessJob.h"
#include "TestHelpers.h"
#include "coll/Runtime/Communicator.h"
#include "coll/Runtime/Executor.h"
#include "coll/Runtime/PlanIO.h"
#include "coll/Runtime/ProcessGroup.h"

#include <atomic>
#include <cctype>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <gtest/gtest.h>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <sys/mman.h>
#include <sys/wait.h>
#include <thread>
#include <vector>

using namespace coll;
using namespace coll::test;

namespace {

/// The seed of the case list, unless COLL_FAULT_SEED says otherwise.
constexpr uint64_t defaultSeed = 20261125;

/// The progress timeout of every case (ExecOptions / ProcessGroupOptions
/// timeoutSeconds, and the process groups' setup timeout).
constexpr double timeoutSeconds = 2;

/// How long after the fault (or, for a mismatch, the start) every
/// surviving rank must have returned: the timeout, plus a margin for
/// detection (a liveness interval), the pipeline draining and a loaded or
/// sanitized machine. Measured: well under a second beyond the timeout.
constexpr double marginSeconds = 3;

uint64_t seedFromEnvironment() {
  const char *s = std::getenv("COLL_FAULT_SEED");
  return s && *s ? std::strtoull(s, nullptr, 10) : defaultSeed;
}

enum class FaultKind {
  Kill,          ///< Processes: SIGKILL.
  Stop,          ///< Processes: SIGSTOP (killed by the test afterwards).
  Exit,          ///< Processes: _exit(5).
  Abort,         ///< Processes: abort().
  Throw,         ///< Threads: the fault injection throws.
  Stall,         ///< Threads: the fault injection sleeps past the timeout.
  MismatchCount, ///< Both: the victim calls with another count,
  MismatchType,  ///< another data type,
  MismatchOp,    ///< another operator,
  MismatchPlan,  ///< or another plan.
};

const char *faultName(FaultKind k) {
  switch (k) {
  case FaultKind::Kill:
    return "kill";
  case FaultKind::Stop:
    return "stop";
  case FaultKind::Exit:
    return "exit";
  case FaultKind::Abort:
    return "abort";
  case FaultKind::Throw:
    return "throw";
  case FaultKind::Stall:
    return "stall";
  case FaultKind::MismatchCount:
    return "count";
  case FaultKind::MismatchType:
    return "dtype";
  case FaultKind::MismatchOp:
    return "op";
  case FaultKind::MismatchPlan:
    return "plan";
  }
  return "?";
}

bool isMismatch(FaultKind k) {
  return k >= FaultKind::MismatchCount;
}

/// One drawn case.
struct FaultCase {
  bool processes = false;
  FaultKind fault = FaultKind::Kill;
  uint64_t seed = 0; ///< The list's seed.
  size_t index = 0;  ///< Its place in the list.
  int nranks = 2;
  int victim = 0;
  std::string plan;      ///< A compiled test plan; "" for the hand-written ring.
  std::string otherPlan; ///< MismatchPlan: the victim's; "" for the ring of depth 1.
  uint64_t count = 0;
  long delayMs = 0; ///< Before the fault (kill, stop, exit, abort, throw), or its length (stall).
  DataType type = DataType::Float32, victimType = DataType::Float32;
  RedOp op = RedOp::Sum, victimOp = RedOp::Sum;
  uint32_t workers = 1;

  std::string describe() const {
    std::ostringstream os;
    os << (processes ? "processes" : "threads") << ", " << faultName(fault) << " of rank " << victim
       << " of " << nranks << ", plan " << (plan.empty() ? "hand ring" : plan);
    if (fault == FaultKind::MismatchPlan)
      os << " vs " << (otherPlan.empty() ? "hand ring of depth 1" : otherPlan);
    os << ", count " << count << ", " << dataTypeName(type) << " " << redOpName(op);
    if (fault == FaultKind::MismatchType)
      os << " vs " << dataTypeName(victimType);
    if (fault == FaultKind::MismatchOp)
      os << " vs " << redOpName(victimOp);
    os << ", delay " << delayMs << " ms, workers " << workers << " (COLL_FAULT_SEED=" << seed
       << ", case " << index << ")";
    return os.str();
  }
};

/// The case's draw, in test listings and failure messages.
void PrintTo(const FaultCase &c, std::ostream *os) {
  *os << c.describe();
}

/// The compiled test plans of 2 to 8 ranks, by number of ranks (none when
/// collc is not built).
std::vector<std::vector<std::string>> plansByRanks() {
  std::vector<std::vector<std::string>> by(9);
#ifdef COLL_TEST_PLAN_DIR
  for (const std::string &name : splitNames(COLL_TEST_PLANS)) {
    size_t at = name.rfind("_n");
    int n = at == std::string::npos ? 0 : std::atoi(name.c_str() + at + 2);
    if (n >= 2 && n <= 8)
      by[size_t(n)].push_back(name);
  }
#endif
  return by;
}

/// The case list: every fault kind of each mode a few times, each with a
/// random number of ranks, victim, plan, count and delay.
std::vector<FaultCase> drawCases() {
  const uint64_t seed = seedFromEnvironment();
  std::mt19937_64 rng(seed);
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const std::vector<std::vector<std::string>> plans = plansByRanks();
  struct Kind {
    bool processes;
    FaultKind fault;
    int times;
  };
  const Kind kinds[] = {
      {true, FaultKind::Kill, 2},          {true, FaultKind::Stop, 2},
      {true, FaultKind::Exit, 2},          {true, FaultKind::Abort, 2},
      {false, FaultKind::Throw, 3},        {false, FaultKind::Stall, 2},
      {true, FaultKind::MismatchCount, 1}, {false, FaultKind::MismatchCount, 1},
      {true, FaultKind::MismatchType, 1},  {false, FaultKind::MismatchType, 1},
      {true, FaultKind::MismatchOp, 1},    {false, FaultKind::MismatchOp, 1},
      {true, FaultKind::MismatchPlan, 1},  {false, FaultKind::MismatchPlan, 1},
  };
  std::vector<FaultCase> cases;
  for (const Kind &k : kinds)
    for (int i = 0; i < k.times; ++i) {
      FaultCase c;
      c.processes = k.processes;
      c.fault = k.fault;
      c.seed = seed;
      c.index = cases.size();
      c.nranks = int(uniform(2, 8));
      c.victim = int(uniform(0, c.nranks - 1));
      const std::vector<std::string> &ofN = plans[size_t(c.nranks)];
      if (!ofN.empty())
        c.plan = ofN[size_t(uniform(0, int64_t(ofN.size()) - 1))];
      if (c.fault == FaultKind::MismatchPlan && ofN.size() > 1)
        while (c.otherPlan.empty() || c.otherPlan == c.plan)
          c.otherPlan = ofN[size_t(uniform(0, int64_t(ofN.size()) - 1))];
      // Processes loop over their calls, so any count keeps the collective
      // running; in a single call of threads, the victim's worker that
      // sleeps holds up the others (and its own other workers run).
      c.count = uint64_t(c.processes ? uniform(1 << 15, 1 << 18) : uniform(1 << 16, 1 << 19));
      c.delayMs = c.fault == FaultKind::Stall
                      ? long(timeoutSeconds * 1000) + long(uniform(300, 1500))
                      : long(uniform(0, 400));
      c.workers = uint32_t(uniform(0, 2));
      // Reductions and types: the victim's differ where the case says so.
      std::vector<DataType> types = allDataTypes();
      c.type = types[size_t(uniform(0, int64_t(types.size()) - 1))];
      c.victimType = c.type;
      if (c.fault == FaultKind::MismatchType)
        while (c.victimType == c.type)
          c.victimType = types[size_t(uniform(0, int64_t(types.size()) - 1))];
      std::vector<RedOp> ops;
      for (unsigned o = 0; o < numRedOps(); ++o)
        ops.push_back(RedOp(o));
      c.op = RedOp::Sum;
      c.victimOp = c.op;
      if (c.fault == FaultKind::MismatchOp)
        while (c.victimOp == c.op)
          c.victimOp = ops[size_t(uniform(0, int64_t(ops.size()) - 1))];
      cases.push_back(c);
    }
  return cases;
}

Result<Plan> loadCasePlan(const FaultCase &c, const std::string &name, uint32_t handDepth) {
  if (name.empty())
    return ringAllReduce(uint32_t(c.nranks), handDepth);
  return loadPlanFile(planFile(name));
}

/// Whether \p s names rank \p r: "rank 3" (not "rank 30"), or 3 in a
/// list "ranks 0, 3".
bool namesRank(const std::string &s, int r) {
  for (size_t at = s.find("rank"); at != std::string::npos; at = s.find("rank", at + 1)) {
    size_t i = at + 4;
    if (i < s.size() && s[i] == 's')
      ++i;
    while (i < s.size() && s[i] == ' ' && i + 1 < s.size() &&
           std::isdigit(static_cast<unsigned char>(s[i + 1]))) {
      size_t end = i + 1;
      while (end < s.size() && std::isdigit(static_cast<unsigned char>(s[end])))
        ++end;
      if (std::atoi(s.c_str() + i + 1) == r)
        return true;
      // The list goes on after ", " or " and ".
      i = end;
      if (s.compare(i, 1, ",") == 0)
        ++i;
      else if (s.compare(i, 4, " and") == 0)
        i += 4;
      else
        break;
    }
  }
  return false;
}

class FaultTest : public ::testing::TestWithParam<FaultCase> {};

/// Threads: a World of the case's ranks, one thread per rank, one call each.
void runThreadsCase(const FaultCase &c) {
  Result<Plan> plan = loadCasePlan(c, c.plan, 2);
  ASSERT_TRUE(plan.ok()) << plan.message();
  Result<Plan> other = loadCasePlan(c, c.otherPlan, 1);
  ASSERT_TRUE(other.ok()) << other.message();
  const int n = c.nranks;
  WorldOptions o;
  o.rendezvousTimeoutSeconds = 20;
  o.exec.timeoutSeconds = timeoutSeconds;
  o.exec.workersPerRank = c.workers;
  // The victim's first worker to get here sleeps, then throws (or just
  // sleeps, past the timeout); its other workers run meanwhile.
  std::atomic<bool> fired{false};
  if (c.fault == FaultKind::Throw || c.fault == FaultKind::Stall)
    o.exec.faultInjection = [&](FaultSite site, uint32_t rank) {
      if (site != FaultSite::Worker || rank != uint32_t(c.victim) || fired.exchange(true))
        return;
      std::this_thread::sleep_for(std::chrono::milliseconds(c.delayMs));
      if (c.fault == FaultKind::Throw)
        throw std::runtime_error("injected fault");
    };
  auto world = World::create(n, o);
  ASSERT_TRUE(world.ok()) << world.message();

  struct Outcome {
    bool ok = false;
    ErrorKind kind = ErrorKind::None;
    std::string message;
    double seconds = 0;
  };
  std::vector<Outcome> out(static_cast<size_t>(n));
  std::vector<WorldBuffers> bufs(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  const Clock::time_point start = Clock::now();
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      const bool v = r == c.victim;
      const Plan &p = v && c.fault == FaultKind::MismatchPlan ? *other : *plan;
      RunCase rc;
      rc.count = c.count + (v && c.fault == FaultKind::MismatchCount ? 1 : 0);
      rc.type = v ? c.victimType : c.type;
      rc.op = v ? c.victimOp : c.op;
      WorldBuffers &b = bufs[size_t(r)];
      makeBuffers(p, rc, b, [](uint32_t, uint64_t, void *) {});
      auto comm = (*world)->communicator(r);
      if (!comm) {
        out[size_t(r)].message = comm.message();
        return;
      }
      Status s =
          (*comm)->execute(p, b.send[size_t(r)], b.recv[size_t(r)], rc.count, rc.type, rc.op);
      out[size_t(r)] = {s.ok(), (*comm)->lastErrorKind(), s.message(),
                        std::chrono::duration<double>(Clock::now() - start).count()};
    });
  for (std::thread &t : threads)
    t.join();
  // Mismatches fail before anything runs; a throw comes after the delay,
  // a stall's timeout at most after the delay too.
  const double limit = (isMismatch(c.fault) ? 0 : double(c.delayMs) / 1000) +
                       (c.fault == FaultKind::Throw || isMismatch(c.fault) ? 0 : timeoutSeconds) +
                       marginSeconds;
  for (int r = 0; r < n; ++r) {
    const Outcome &g = out[size_t(r)];
    SCOPED_TRACE("rank " + std::to_string(r) + " after " + std::to_string(g.seconds) +
                 " s: " + g.message);
    EXPECT_FALSE(g.ok);
    EXPECT_TRUE(namesRank(g.message, c.victim));
    EXPECT_LT(g.seconds, limit);
    switch (c.fault) {
    case FaultKind::Throw:
      EXPECT_EQ(g.message,
                "rank " + std::to_string(c.victim) + " failed in a worker thread: injected fault");
      break;
    case FaultKind::Stall:
      EXPECT_EQ(g.kind, ErrorKind::Timeout);
      break;
    default:
      EXPECT_EQ(g.kind, ErrorKind::Mismatch);
      break;
    }
  }
}

/// Processes: one runtime_shm_rank per rank, looping over calls.
void runProcessesCase(const FaultCase &c) {
  const int n = c.nranks;
  const std::string name = uniqueJob("fault");
  const std::string prefix = "coll-" + name;
  // Every entry of this test process's jobs ("gt-fault-<pid>-"): other
  // tests may run beside this one, and their entries come and go.
  const std::string ours = "coll-gt-fault-" + std::to_string(getpid()) + "-";
  const std::vector<std::string> before = shmEntries(ours);
  ASSERT_EQ(shmEntries(prefix), std::vector<std::string>());
  const bool death = !isMismatch(c.fault);
  Job job(name);
  for (int r = 0; r < n; ++r) {
    const bool v = r == c.victim;
    std::vector<std::string> a = {"--timeout", std::to_string(timeoutSeconds), "--setup-timeout",
                                  std::to_string(timeoutSeconds), "--no-check"};
    const std::string &p = v && c.fault == FaultKind::MismatchPlan ? c.otherPlan : c.plan;
    if (!p.empty())
      a.insert(a.end(), {"--plan", planFile(p)});
    else
      a.insert(a.end(), {"--hand-ring", v && c.fault == FaultKind::MismatchPlan ? "1" : "2"});
    a.insert(a.end(), {"--count", std::to_string(c.count), "--dtype",
                       dataTypeName(v ? c.victimType : c.type), "--op",
                       redOpName(v ? c.victimOp : c.op), "--workers", std::to_string(c.workers)});
    if (v && c.fault == FaultKind::MismatchCount)
      a.insert(a.end(), {"--count-offset", "1"});
    if (death)
      a.insert(a.end(), {"--loop", "1000000"});
    if (v && death) {
      const char *flag = c.fault == FaultKind::Kill   ? "--die-after-ms"
                         : c.fault == FaultKind::Stop ? "--stop-after-ms"
                         : c.fault == FaultKind::Exit ? "--exit-after-ms"
                                                      : "--abort-after-ms";
      a.insert(a.end(), {flag, std::to_string(c.delayMs)});
    }
    job.start(r, n, a);
  }
  // A stopped victim stays: wait for the others (and note when it
  // stopped), then kill it.
  double stoppedAt = -1;
  if (c.fault == FaultKind::Stop) {
    const Clock::time_point start = Clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
    while (elapsed() < 60) {
      siginfo_t info{};
      if (stoppedAt < 0 &&
          waitid(P_PID, id_t(job.pid(size_t(c.victim))), &info,
                 WSTOPPED | WEXITED | WNOHANG | WNOWAIT) == 0 &&
          info.si_pid != 0)
        stoppedAt = elapsed();
      if (job.othersExited(size_t(c.victim)))
        break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    kill(job.pid(size_t(c.victim)), SIGKILL);
  }
  ASSERT_TRUE(job.wait(60)) << job.outputs_();
  double faultAt = 0;
  if (death) {
    const RankExit &dead = job.exit(size_t(c.victim));
    faultAt = c.fault == FaultKind::Stop ? stoppedAt : dead.seconds;
    ASSERT_GE(faultAt, 0) << job.outputs_();
    switch (c.fault) {
    case FaultKind::Kill:
    case FaultKind::Stop:
      EXPECT_TRUE(!dead.exited && dead.code == SIGKILL) << job.outputs_();
      break;
    case FaultKind::Exit:
      EXPECT_TRUE(dead.exited && dead.code == 5) << job.outputs_();
      break;
    default:
      EXPECT_TRUE(!dead.exited && dead.code == SIGABRT) << job.outputs_();
      break;
    }
  }
  // A stall is noticed after the timeout; a death within a liveness
  // interval; a mismatch before anything moves.
  const double limit = faultAt + (c.fault == FaultKind::Stop ? timeoutSeconds : 0) + marginSeconds;
  for (int r = 0; r < n; ++r) {
    if (death && r == c.victim)
      continue;
    const RankExit &e = job.exit(size_t(r));
    SCOPED_TRACE("rank " + std::to_string(r) + " after " + std::to_string(e.seconds) +
                 " s: " + e.output);
    EXPECT_TRUE(e.exited && e.code == 3);
    EXPECT_TRUE(namesRank(e.output, c.victim));
    EXPECT_LT(e.seconds, limit) << "the fault came after " << faultAt << " s";
    if (isMismatch(c.fault))
      EXPECT_TRUE(contains(e.output, "error: mismatch: the ranks called with different "));
    else if (c.fault == FaultKind::Stop)
      EXPECT_TRUE(contains(e.output, "timed out after 2 s"));
    else
      EXPECT_TRUE(contains(e.output, "rank " + std::to_string(c.victim) + " (pid " +
                                         std::to_string(job.pid(size_t(c.victim))) + ")"));
  }
  // A stopped rank was alive when the others left, so its own segments
  // stay (docs/runtime.md, "Cleanup"): they must be its, and are removed
  // here; nothing else of the job may be left.
  if (c.fault == FaultKind::Stop)
    for (const std::string &s : shmEntries(prefix)) {
      EXPECT_EQ(s.rfind(prefix + "." + std::to_string(c.victim), 0), 0u) << s;
      shm_unlink(("/" + s).c_str());
    }
  EXPECT_EQ(shmEntries(prefix), std::vector<std::string>());
  EXPECT_EQ(shmEntries(ours), before);
}

TEST_P(FaultTest, EverySurvivorNamesTheCulprit) {
  const FaultCase &c = GetParam();
  SCOPED_TRACE(c.describe());
  if (c.processes)
    runProcessesCase(c);
  else
    runThreadsCase(c);
}

INSTANTIATE_TEST_SUITE_P(Seeded, FaultTest, ::testing::ValuesIn(drawCases()),
                         [](const ::testing::TestParamInfo<FaultCase> &info) {
                           const FaultCase &c = info.param;
                           return std::string(c.processes ? "processes_" : "threads_") +
                                  faultName(c.fault) + "_" + std::to_string(c.index);
                         });

} // namespace
