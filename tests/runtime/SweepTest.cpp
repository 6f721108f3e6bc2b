//===- SweepTest.cpp - The stdlib plans on every axis ---------------------===//
//
// Every plan that tests/runtime/CMakeLists.txt compiles for the sweep (each
// stdlib program for N = 2 .. 16) runs on every CPU executor (LocalWorld's
// threads and single-thread modes, and the shared-memory ProcessGroup), in
// every protocol (Simple, LL, LL128), for every data type, operator,
// placement (in place and out of place) and count in
// {0, 1, 7, N - 1, 1000, 2^20 + 3}, and each run is compared with the
// reference element for element. Integers must match exactly. Floating-point
// inputs are values for which every order of combining is exact
// (fillTestInput), so the tolerance for the reduction order is zero there
// too, and any difference is a wrong or misplaced element.
//
// The same source builds two executables:
//  - COLL_SWEEP_FULL=1: the full product, one test per (plan, data type);
//    ctest label `exhaustive`, which CI leaves out;
//  - COLL_SWEEP_FULL=0: a subset for every CI run, one test per plan (every
//    program at N = 2, 7 and 16), which visits every count, placement and
//    executor of the plan and lets the data type and operator rotate so
//    that the subset as a whole meets every data type and operator on every
//    program.
//
// The inputs and the reference's outputs of a (plan, type, operator, count)
// are computed once and shared by the runs of every executor and placement.
// Without collc (a runtime-only build) the tests skip.
//
//===----------------------------------------------------------------------===//

#include "TestHelpers.h"
#include "coll/Runtime/PlanIO.h"
#include "coll/Runtime/ProcessGroup.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <gtest/gtest.h>
#include <thread>
#include <tuple>
#include <unistd.h>

namespace coll {
/// Shows a data type by name in test parameters.
void PrintTo(DataType type, std::ostream *os) {
  *os << dataTypeName(type);
}
} // namespace coll

using namespace coll;
using namespace coll::test;

namespace {

//===----------------------------------------------------------------------===//
// The executor axis
//===----------------------------------------------------------------------===//

/// Runs every rank of a plan with the contract of LocalWorld::run: rank r's
/// buffers are sendbufs[r] and recvbufs[r], in place when they are the
/// collective's alias; c gives the count, type, operator, slice size,
/// workers and timeout.
using RunAllRanks = std::function<Status(const Plan &plan, const RunCase &c,
                                         const std::vector<const void *> &sendbufs,
                                         const std::vector<void *> &recvbufs)>;

/// One executor of the sweep.
struct SweepExecutor {
  const char *name;
  ExecMode mode; ///< What RunCase::mode says (and describe() prints).
  RunAllRanks run;
};

Status runLocalWorld(const Plan &plan, const RunCase &c, const std::vector<const void *> &sendbufs,
                     const std::vector<void *> &recvbufs) {
  ExecOptions o;
  o.mode = c.mode;
  o.sliceElements = c.slice;
  o.workersPerRank = c.workersPerRank;
  o.timeoutSeconds = c.timeout;
  o.protocol = c.protocol;
  return LocalWorld().run(plan, sendbufs, recvbufs, c.count, c.type, c.op, o);
}

/// The executors every case runs on. Another executor is one more entry:
/// a function that runs all ranks of the plan on the given buffers.
const std::vector<SweepExecutor> &sweepExecutors() {
  static const std::vector<SweepExecutor> executors = {
      {"threads", ExecMode::Threads, runLocalWorld},
      {"single", ExecMode::Single, runLocalWorld},
      {"processes", ExecMode::Threads, runOnProcessGroup},
  };
  return executors;
}

//===----------------------------------------------------------------------===//
// Cases
//===----------------------------------------------------------------------===//

/// 2^20 + 3: more than one slice per chunk for every plan, and a count that
/// no chunk count divides.
constexpr uint64_t LargeCount = (uint64_t(1) << 20) + 3;

/// The counts of the sweep for \p nranks ranks, ascending, without repeats.
std::vector<uint64_t> sweepCounts(uint32_t nranks) {
  std::vector<uint64_t> v = {0, 1, 7, nranks - 1u, 1000, LargeCount};
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

/// Slices of a few elements for small counts, so that a chunk takes several
/// passes and the FIFOs wrap; dozens per chunk at 1000; the default for the
/// large count. In threads mode the small counts also vary the workers per
/// rank: one, two, or a thread per threadblock.
void setSchedule(RunCase &c, size_t countIndex) {
  c.slice = c.count >= LargeCount ? 16384 : c.count >= 1000 ? 16 : 3;
  c.workersPerRank = c.count >= LargeCount ? 1 : uint32_t((countIndex + 1) % 3);
  c.timeout = 120;
}

/// A 64-bit hash of \p n bytes (FNV-1a over 8-byte words, then the tail):
/// checks that a run left an input it shares with later runs untouched,
/// without keeping a second copy.
uint64_t hashBytes(const char *p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
  }
  for (; i < n; ++i)
    h = (h ^ uint8_t(p[i])) * 0x100000001b3ull;
  return h;
}

/// The inputs and expected outputs of one (plan, type, operator, count).
class CaseData {
public:
  /// Fills the inputs and runs the reference; "" or what went wrong.
  std::string prepare(const Plan &plan, const RunCase &c) {
    fillInputs(plan, c, buffers);
    for (const std::vector<char> &in : buffers.original)
      inputHashes.push_back(hashBytes(in.data(), in.size()));
    return referenceOutputs(plan, c, buffers.original, want);
  }

  /// Runs \p c (its placement and mode) on \p exec and checks every
  /// output, and that an out-of-place run left its inputs alone.
  std::string check(const Plan &plan, const RunCase &c, const SweepExecutor &exec) {
    // Out of place, the runs read the shared inputs directly.
    placeBuffers(plan, c, buffers, /*copyInputs=*/false);
    std::string where = std::string(exec.name) + ": ";
    if (Status s = exec.run(plan, c, buffers.send, buffers.recv); !s)
      return where + describe(c) + ": " + s.message();
    for (uint32_t r = 0; r < plan.info.nranks && !c.inplace; ++r)
      if (hashBytes(buffers.original[r].data(), buffers.original[r].size()) != inputHashes[r])
        return where + describe(c) + ": rank " + std::to_string(r) + "'s input was modified";
    std::string err = compareOutputs(plan, c, buffers.recv, want);
    // Free this run's buffers before the next one allocates its own.
    buffers.in.clear();
    buffers.out.clear();
    buffers.both.clear();
    return err.empty() ? err : where + err;
  }

private:
  WorldBuffers buffers;
  std::vector<uint64_t> inputHashes;
  std::vector<std::vector<char>> want;
};

//===----------------------------------------------------------------------===//
// Tests
//===----------------------------------------------------------------------===//

std::vector<std::string> sweepPlanNames() {
  return splitNames(COLL_SWEEP_PLANS);
}

/// Loads sweep plan \p name into \p plan; false (with a failure or skip
/// recorded) when it cannot.
bool loadSweepPlan(const std::string &name, Plan &plan) {
#ifndef COLL_SWEEP_PLAN_DIR
  (void)name;
  (void)plan;
  // GTEST_SKIP returns from a void function: the lambda's.
  [] { GTEST_SKIP() << "collc is not built; compiled plans are not available"; }();
  return false;
#else
  Result<Plan> p = loadPlanFile(std::string(COLL_SWEEP_PLAN_DIR) + "/" + name + ".bin");
  if (!p.ok()) {
    ADD_FAILURE() << name << ": " << p.message();
    return false;
  }
  plan = std::move(*p);
  return true;
#endif
}

/// Failures reported per test before it gives up: a broken plan fails
/// every case, and the first few say enough.
constexpr int MaxFailures = 8;

/// One executor, placement and protocol.
struct Target {
  const SweepExecutor *exec;
  bool inplace;
  ProtocolKind protocol;
};

/// Every executor, in both placements, in every protocol: the protocol
/// turns fastest, so that every run of consecutive targets meets each.
std::vector<Target> allTargets() {
  std::vector<Target> v;
  for (const SweepExecutor &exec : sweepExecutors())
    for (bool inplace : {false, true})
      for (ProtocolKind p : {ProtocolKind::Simple, ProtocolKind::LL, ProtocolKind::LL128})
        v.push_back({&exec, inplace, p});
  return v;
}

/// Runs \p base (type, operator, count) on every target, reporting each
/// failure; returns how many failed.
int checkCase(const Plan &plan, const RunCase &base, size_t countIndex,
              const std::vector<Target> &targets) {
  RunCase c = base;
  setSchedule(c, countIndex);
  CaseData data;
  if (std::string err = data.prepare(plan, c); !err.empty()) {
    ADD_FAILURE() << plan.info.name << " n" << plan.info.nranks << ": " << err;
    return 1;
  }
  int failures = 0;
  for (const Target &t : targets) {
    c.mode = t.exec->mode;
    c.processGroup = std::string(t.exec->name) == "processes";
    c.inplace = t.inplace;
    c.protocol = ProtocolChoice();
    c.protocol.force = true;
    c.protocol.forced = t.protocol;
    if (std::string err = data.check(plan, c, *t.exec); !err.empty()) {
      ADD_FAILURE() << plan.info.name << " n" << plan.info.nranks << ": " << err;
      ++failures;
    }
  }
  return failures;
}

#if COLL_SWEEP_FULL

std::string nameOf(DataType type) {
  std::string s = dataTypeName(type);
  for (char &ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch)))
      ch = '_';
  return s;
}

// The full product for one (plan, data type): every operator and count on
// every executor and placement, except the large count, which takes most
// of the time (allgather, reduce-scatter and alltoall move N times the
// count per rank): it runs once per (plan, data type), with the operator
// and the executor and placement rotating with the data type, so that
// every plan meets the large count with every data type, and with every
// operator, executor and placement. COLL_SWEEP_LARGE_EVERYWHERE=1 in the
// environment runs the large count like the others.
class FullSweepTest : public ::testing::TestWithParam<std::tuple<std::string, DataType>> {};

TEST_P(FullSweepTest, MatchesReference) {
  Plan plan;
  if (!loadSweepPlan(std::get<0>(GetParam()), plan))
    return;
  const char *everywhere = std::getenv("COLL_SWEEP_LARGE_EVERYWHERE");
  const bool largeEverywhere = everywhere && std::string(everywhere) == "1";
  const std::vector<Target> targets = allTargets();
  const std::vector<RedOp> ops = opsFor(plan.info.collective);
  const size_t rotation = size_t(std::get<1>(GetParam()));
  int failures = 0;
  std::vector<uint64_t> counts = sweepCounts(plan.info.nranks);
  for (size_t k = 0; k < counts.size() && failures < MaxFailures; ++k)
    for (size_t o = 0; o < ops.size(); ++o) {
      RunCase c;
      c.type = std::get<1>(GetParam());
      c.op = ops[o];
      c.count = counts[k];
      if (c.count < LargeCount || largeEverywhere)
        failures += checkCase(plan, c, k, targets);
      else if (o == rotation % ops.size())
        failures += checkCase(plan, c, k, {targets[rotation % targets.size()]});
    }
}

INSTANTIATE_TEST_SUITE_P(Plans, FullSweepTest,
                         ::testing::Combine(::testing::ValuesIn(sweepPlanNames()),
                                            ::testing::ValuesIn(allDataTypes())),
                         [](const ::testing::TestParamInfo<FullSweepTest::ParamType> &info) {
                           return std::get<0>(info.param) + "_" + nameOf(std::get<1>(info.param));
                         });

#else

// The CI subset, one test per plan:
//  1. every (data type, operator) pair once, at the counts below the large
//     one in turn, the targets (executor and placement) in turn;
//  2. every count on every target, the pairs in turn; the large count only
//     on one target per plan, which rotates with the plan, and not at
//     N = 16, where it takes longest (allgather, reduce-scatter and alltoall
//     move N times the count per rank).
class SweepSubsetTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SweepSubsetTest, MatchesReference) {
  Plan plan;
  if (!loadSweepPlan(GetParam(), plan))
    return;
  std::vector<std::pair<DataType, RedOp>> pairs;
  for (DataType type : allDataTypes())
    for (RedOp op : opsFor(plan.info.collective))
      pairs.push_back({type, op});
  const std::vector<Target> targets = allTargets();
  std::vector<uint64_t> counts = sweepCounts(plan.info.nranks);
  const size_t small = counts.size() - 1; // All but LargeCount.
  int failures = 0;
  auto run = [&](size_t pair, size_t countIndex, size_t target) {
    RunCase c;
    c.type = pairs[pair % pairs.size()].first;
    c.op = pairs[pair % pairs.size()].second;
    c.count = counts[countIndex];
    failures += checkCase(plan, c, countIndex, {targets[target % targets.size()]});
  };

  for (size_t i = 0; i < pairs.size() && failures < MaxFailures; ++i)
    run(i, i % small, i / small);
  const std::string &name = GetParam();
  const size_t largeTarget = hashBytes(name.data(), name.size()) % targets.size();
  size_t next = plan.info.nranks;
  for (size_t k = 0; k < counts.size() && failures < MaxFailures; ++k)
    for (size_t t = 0; t < targets.size(); ++t)
      if (counts[k] < LargeCount || (t == largeTarget && plan.info.nranks < 16))
        run(next++, k, t);
}

INSTANTIATE_TEST_SUITE_P(Plans, SweepSubsetTest, ::testing::ValuesIn(sweepPlanNames()),
                         [](const ::testing::TestParamInfo<std::string> &info) {
                           return info.param;
                         });

#endif

} // namespace
