//===- ProcessExecutorTest.cpp - ProcessGroup with real processes ---------===//
//
// Each test starts one runtime_shm_rank process per rank (posix_spawn, so
// the test process never forks while it has threads), waits for all of them
// with a time limit (killing what is left when it passes) and checks their
// exit statuses and messages, and that the job leaves no shared memory
// behind. Hand-written plans always run; plans compiled by collc run when it
// is built.
//
//===----------------------------------------------------------------------===//

#include "HandPlans.h"
#include "ProcessJob.h"
#include "TestHelpers.h"
#include "coll/Runtime/ProcessGroup.h"

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <string>
#include <sys/mman.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace coll;
using namespace coll::test;

namespace {

/// Runs \p nranks ranks with the same arguments, expecting success.
void runAll(const std::string &what, int nranks, const std::vector<std::string> &extra,
            double limit = 120) {
  Job job(uniqueJob(what));
  for (int r = 0; r < nranks; ++r)
    job.start(r, nranks, extra);
  ASSERT_TRUE(job.wait(limit)) << "the job did not end within " << limit << " s\n"
                               << job.outputs_();
  for (size_t r = 0; r < job.size(); ++r)
    EXPECT_TRUE(job.exit(r).exited && job.exit(r).code == 0) << job.outputs_();
  EXPECT_EQ(ProcessGroup::listJobSegments(job.name), std::vector<std::string>());
}

// The hand-written ring allreduce on 4 processes: every count (0, odd,
// large), in place and out of place, types and operators in rotation.
TEST(ProcessExecutorTest, HandRingAllCases) {
  runAll("ring", 4, {"--hand-ring", "2", "--cases", "all", "--slice", "64"});
}

// A plan validated once (ValidatedPlan) and run many times.
TEST(ProcessExecutorTest, HandRingValidatedPlan) {
  runAll("ring-validated", 3,
         {"--hand-ring", "2", "--cases", "all", "--slice", "64", "--validated", "--loop", "2"});
}

// Calls of one description in a row run on the data side the first one
// made; other counts and types in between make new ones, and the next
// call of the first description runs right again. Each call has inputs of
// its own, so a run that read what an earlier call left would be caught.
TEST(ProcessExecutorTest, RepeatedCallsReuseTheirDataSide) {
  runAll("repeat", 3, {"--hand-ring", "2", "--cases", "repeat", "--slice", "64", "--loop", "2"});
}

// Two ranks, and the default slice size.
TEST(ProcessExecutorTest, HandRingTwoRanks) {
  runAll("ring2", 2, {"--hand-ring", "2", "--cases", "all"});
}

// The C API: collCommInitRankShm, collMemAlloc, collExecute.
TEST(ProcessExecutorTest, CApi) {
  runAll("capi", 3, {"--hand-ring", "2", "--capi", "--count", "100003"});
}

/// A compiled plan, its number of ranks, and how many workers each rank
/// has (0: one per threadblock).
struct CompiledCase {
  const char *plan;
  int nranks;
  const char *workers;
};

// Plans compiled by collc, every collective, 3 to 8 processes.
class CompiledProcessTest : public ::testing::TestWithParam<CompiledCase> {};

TEST_P(CompiledProcessTest, AllCases) {
#ifndef COLL_TEST_PLAN_DIR
  GTEST_SKIP() << "collc is not built; compiled plans are not available";
#endif
  const CompiledCase &c = GetParam();
  runAll(std::string("plan") + std::to_string(c.nranks), c.nranks,
         {"--plan", planFile(c.plan), "--cases", "all", "--slice", "256", "--workers", c.workers});
}

// The same on buffers from allocate(), which the peers map and read in
// place wherever a plan's send qualifies.
TEST_P(CompiledProcessTest, AllCasesOnRegisteredBuffers) {
#ifndef COLL_TEST_PLAN_DIR
  GTEST_SKIP() << "collc is not built; compiled plans are not available";
#endif
  const CompiledCase &c = GetParam();
  runAll(std::string("reg") + std::to_string(c.nranks), c.nranks,
         {"--plan", planFile(c.plan), "--cases", "all", "--slice", "256", "--workers", c.workers,
          "--registered"});
}

// Every copy into the buffers streams its stores (non-temporal, fenced
// before the step is published), with pieces of 16 KiB: every count, in
// place and out of place, on processes and on registered buffers (which
// the peers read while the receiver streams).
TEST(ProcessExecutorTest, StreamingStoresOfCompiledPlans) {
#ifndef COLL_TEST_PLAN_DIR
  GTEST_SKIP() << "collc is not built; compiled plans are not available";
#endif
  for (auto [plan, n] : {std::pair<const char *, int>{"alltoall_allpairs_n4", 4},
                         {"tree_broadcast_n4", 4},
                         {"ring_allreduce_x2_n4", 4},
                         {"ring_allgather_n3", 3}})
    for (bool registered : {false, true}) {
      std::vector<std::string> args = {
          "--plan", planFile(plan),       "--cases", "all", "--slice", "4096", "--workers",
          "1",      "--streaming-stores", "1"};
      if (registered)
        args.push_back("--registered");
      runAll(std::string("stream-") + plan + (registered ? "-reg" : ""), n, args);
    }
}

// The same with compiled plans: a reduction, a gather of blocks, and
// threadblocks on workers of their own.
TEST(ProcessExecutorTest, RepeatedCallsOfCompiledPlans) {
#ifndef COLL_TEST_PLAN_DIR
  GTEST_SKIP() << "collc is not built; compiled plans are not available";
#endif
  for (auto [plan, workers] : {std::pair<const char *, const char *>{"ring_allreduce_x2_n4", "0"},
                               {"ring_allgather_n3", "1"}}) {
    const int n = plan[std::strlen(plan) - 1] - '0';
    runAll(std::string("repeat-") + plan, n,
           {"--plan", planFile(plan), "--cases", "repeat", "--slice", "256", "--workers", workers});
  }
}

INSTANTIATE_TEST_SUITE_P(Plans, CompiledProcessTest,
                         ::testing::Values(CompiledCase{"ring_allreduce_n8", 8, "1"},
                                           CompiledCase{"tree_allreduce_n4", 4, "1"},
                                           CompiledCase{"ring_allreduce_x2_n4", 4, "0"},
                                           CompiledCase{"ring_allgather_n3", 3, "1"},
                                           CompiledCase{"ring_reducescatter_inplace_n4", 4, "1"},
                                           CompiledCase{"alltoall_allpairs_n4", 4, "2"},
                                           CompiledCase{"tree_broadcast_n4", 4, "1"},
                                           CompiledCase{"chain_reduce_inplace_n3", 3, "1"},
                                           CompiledCase{"direct_gather_n3", 3, "1"},
                                           CompiledCase{"direct_scatter_n3", 3, "1"},
                                           CompiledCase{"star_allreduce_n3", 3, "0"}),
                         [](const ::testing::TestParamInfo<CompiledCase> &info) {
                           return std::string(info.param.plan);
                         });

// Send and receive buffers in blocks of one unit (CallArgs::sendBlocks,
// recvBlocks: the list forms of torch.distributed): every count, in place
// and out of place.
class BufferBlocksTest : public ::testing::TestWithParam<CompiledCase> {};

TEST_P(BufferBlocksTest, AllCases) {
#ifndef COLL_TEST_PLAN_DIR
  GTEST_SKIP() << "collc is not built; compiled plans are not available";
#endif
  const CompiledCase &c = GetParam();
  runAll(std::string("blocks") + std::to_string(c.nranks), c.nranks,
         {"--plan", planFile(c.plan), "--cases", "all", "--slice", "256", "--workers", c.workers,
          "--blocks"});
}

// The same with the blocks in memory from allocate(): the peers read them
// in place (some call must).
TEST_P(BufferBlocksTest, AllCasesOnRegisteredBlocks) {
#ifndef COLL_TEST_PLAN_DIR
  GTEST_SKIP() << "collc is not built; compiled plans are not available";
#endif
  const CompiledCase &c = GetParam();
  runAll(std::string("regblocks") + std::to_string(c.nranks), c.nranks,
         {"--plan", planFile(c.plan), "--cases", "all", "--slice", "256", "--workers", c.workers,
          "--blocks", "--registered"});
}

// The ring forwards what it received from its output blocks: registered,
// its peers read them where they lie.
TEST(ProcessExecutorTest, DirectReadsOfRegisteredReceiveBlocks) {
#ifndef COLL_TEST_PLAN_DIR
  GTEST_SKIP() << "collc is not built; compiled plans are not available";
#endif
  runAll("directblocks", 3,
         {"--plan", planFile("ring_allgather_n3"), "--cases", "all", "--slice", "256", "--workers",
          "1", "--blocks", "--registered", "--expect-direct"});
}

INSTANTIATE_TEST_SUITE_P(Plans, BufferBlocksTest,
                         ::testing::Values(CompiledCase{"ring_allgather_n3", 3, "1"},
                                           CompiledCase{"alltoall_allpairs_n4", 4, "2"},
                                           CompiledCase{"direct_gather_n3", 3, "1"},
                                           CompiledCase{"direct_scatter_n3", 3, "1"},
                                           CompiledCase{"ring_reducescatter_inplace_n4", 4, "1"},
                                           CompiledCase{"ring_allreduce_x2_n4", 4, "0"}),
                         [](const ::testing::TestParamInfo<CompiledCase> &info) {
                           return std::string(info.param.plan);
                         });

// Direct sends between processes (ProcessGroupOptions::directReads): the
// ring's `rrcs` and `rcs` send what they store where it lies, and the
// receivers map the sender's buffers, from allocate() (a fresh allocation
// per call: the peers' windows follow the table); or, with
// crossMemoryReads, read ordinary buffers with process_vm_readv. Every
// rank checks that some call read a message in place.
TEST(ProcessExecutorTest, DirectReadsOfRegisteredBuffers) {
  for (int n : {2, 4})
    runAll(
        "registered" + std::to_string(n), n,
        {"--hand-ring", "2", "--cases", "all", "--slice", "64", "--registered", "--expect-direct"});
}

TEST(ProcessExecutorTest, DirectReadsAcrossProcessMemory) {
  runAll(
      "cross-memory", 3,
      {"--hand-ring", "3", "--cases", "all", "--slice", "64", "--cross-memory", "--expect-direct"});
}

// Compiled plans whose `s` read the input, with registered buffers and
// with cross-memory reads, several workers per rank.
TEST(ProcessExecutorTest, DirectReadsOfCompiledPlans) {
#ifndef COLL_TEST_PLAN_DIR
  GTEST_SKIP() << "collc is not built; compiled plans are not available";
#endif
  for (const char *how : {"--registered", "--cross-memory"})
    for (auto [plan, workers] : {std::pair<const char *, const char *>{"alltoall_allpairs_n4", "2"},
                                 {"ring_allgather_n3", "1"},
                                 {"ring_reducescatter_inplace_n4", "0"}}) {
      const int n = plan[std::strlen(plan) - 1] - '0';
      runAll(std::string("direct-") + plan, n,
             {"--plan", planFile(plan), "--cases", "all", "--slice", "256", "--workers", workers,
              how, "--expect-direct"});
    }
}

/// A rank killed (SIGKILL) in the middle of a run of the hand ring, whose
/// ranks run with \p extra: the others fail soon, naming it, and the job's
/// shared memory is gone.
void killedRankFailsTheOthers(const std::vector<std::string> &extra) {
  const int n = 4, victim = 2;
  Job job(uniqueJob("kill"));
  for (int r = 0; r < n; ++r) {
    std::vector<std::string> a = {"--hand-ring", "2",         "--count", "1000000",   "--loop",
                                  "100000",      "--timeout", "2",       "--no-check"};
    a.insert(a.end(), extra.begin(), extra.end());
    if (r == victim) {
      a.push_back("--die-after-ms");
      a.push_back("300");
    }
    job.start(r, n, a);
  }
  ASSERT_TRUE(job.wait(30)) << job.outputs_();
  const RankExit &dead = job.exit(victim);
  ASSERT_FALSE(dead.exited) << job.outputs_();
  EXPECT_EQ(dead.code, SIGKILL);
  for (int r = 0; r < n; ++r) {
    if (r == victim)
      continue;
    const RankExit &e = job.exit(size_t(r));
    EXPECT_TRUE(e.exited && e.code == 3) << job.outputs_();
    EXPECT_TRUE(contains(e.output, "remote error")) << e.output;
    EXPECT_TRUE(contains(e.output, "rank 2 (pid " + std::to_string(job.pid(victim)) + ") died"))
        << e.output;
    // The death is noticed within the liveness interval, long before the
    // 2 s timeout, let alone 10 s.
    EXPECT_LT(e.seconds - dead.seconds, 5.0) << job.outputs_();
  }
  EXPECT_EQ(ProcessGroup::listJobSegments(job.name), std::vector<std::string>());
}

TEST(ProcessExecutorTest, KilledRankFailsTheOthers) {
  killedRankFailsTheOthers({});
}

// The same while the ranks read each other's memory: a read of the dead
// rank's memory fails, and names its death the same way.
TEST(ProcessExecutorTest, KilledRankFailsTheOthersReadingItsMemory) {
  killedRankFailsTheOthers({"--cross-memory"});
  killedRankFailsTheOthers({"--registered"});
}

// A rank that stops (SIGSTOP) stalls the run: the others time out after
// the 2 s timeout, naming the rank they wait for.
TEST(ProcessExecutorTest, StalledRankTimesOut) {
  const int n = 3, victim = 1;
  Job job(uniqueJob("stall"));
  for (int r = 0; r < n; ++r) {
    // The stop may land inside a call (the run's timeout) or between two
    // (the wait for every rank to call): both limits are 2 s.
    std::vector<std::string> a = {"--hand-ring",     "2",      "--count",   "1000000",
                                  "--loop",          "100000", "--timeout", "2",
                                  "--setup-timeout", "2",      "--no-check"};
    if (r == victim) {
      a.push_back("--stop-after-ms");
      a.push_back("300");
    }
    job.start(r, n, a);
  }
  // The stopped rank stays; the others must end on their own.
  job.waitForOthers(victim, 20);
  kill(job.pid(victim), SIGKILL);
  ASSERT_TRUE(job.wait(60)) << job.outputs_();
  for (int r = 0; r < n; ++r) {
    if (r == victim)
      continue;
    const RankExit &e = job.exit(size_t(r));
    EXPECT_TRUE(e.exited && e.code == 3) << job.outputs_();
    // Its own timeout, or that of the rank that timed out first.
    EXPECT_TRUE(contains(e.output, "timeout: ") || contains(e.output, "remote error: rank "))
        << e.output;
    EXPECT_TRUE(contains(e.output, "timed out after 2 s waiting for")) << e.output;
    EXPECT_LT(e.seconds, 15.0) << job.outputs_();
  }
  // The stopped rank was alive when the others left, so its segments stay
  // (a later job of the name replaces them); nothing else does.
  for (const std::string &s : ProcessGroup::listJobSegments(job.name)) {
    EXPECT_EQ(s.rfind("coll-" + job.name + ".1", 0), 0u) << s;
    shm_unlink(("/" + s).c_str());
  }
}

// Ranks that disagree on the count, or on the plan, all fail with a
// mismatch that names the rank; no rank hangs, and nothing is left behind.
TEST(ProcessExecutorTest, MismatchedCount) {
  const int n = 4;
  Job job(uniqueJob("mismatch"));
  for (int r = 0; r < n; ++r) {
    std::vector<std::string> a = {"--hand-ring", "2", "--count", "1000"};
    if (r == 2) {
      a.push_back("--count-offset");
      a.push_back("1");
    }
    job.start(r, n, a);
  }
  ASSERT_TRUE(job.wait(60)) << job.outputs_();
  for (int r = 0; r < n; ++r) {
    const RankExit &e = job.exit(size_t(r));
    EXPECT_TRUE(e.exited && e.code == 3) << job.outputs_();
    EXPECT_TRUE(contains(e.output, "mismatch: the ranks called with different arguments: rank 0 "
                                   "with count 1000, fp32, sum; rank 2 with count 1001, fp32, "
                                   "sum"))
        << e.output;
  }
  EXPECT_EQ(ProcessGroup::listJobSegments(job.name), std::vector<std::string>());
}

// A mismatch in the middle of calls that run on a kept data side: the ranks
// that called as before run at once, and stop when they see the rank that
// did not; every rank fails that call with the same mismatch, and the calls
// after it run right (on a new data side). Rank 2 differs at call 5 (the
// second of three in a row of 50000 elements), then at call 0 of a second
// job (no kept data side yet).
TEST(ProcessExecutorTest, MismatchAfterReusedCalls) {
  for (const char *at : {"5", "0"}) {
    const int n = 4;
    Job job(uniqueJob("mismatch-reuse"));
    for (int r = 0; r < n; ++r) {
      std::vector<std::string> a = {"--hand-ring", "2",      "--cases", "repeat",        "--slice",
                                    "64",          "--loop", "2",       "--mismatch-at", at};
      if (r == 2)
        a.insert(a.end(), {"--count-offset", "1"});
      job.start(r, n, a);
    }
    ASSERT_TRUE(job.wait(60)) << job.outputs_();
    for (int r = 0; r < n; ++r) {
      const RankExit &e = job.exit(size_t(r));
      EXPECT_TRUE(e.exited && e.code == 0) << job.outputs_();
      EXPECT_TRUE(contains(e.output, std::string("call ") + at +
                                         ": the ranks called with different arguments: rank 0 "
                                         "with count "))
          << e.output;
      EXPECT_TRUE(contains(e.output, "calls right")) << e.output;
    }
    EXPECT_EQ(ProcessGroup::listJobSegments(job.name), std::vector<std::string>());
  }
}

TEST(ProcessExecutorTest, MismatchedPlans) {
  const int n = 3;
  Job job(uniqueJob("mismatch-plan"));
  for (int r = 0; r < n; ++r)
    job.start(r, n, {"--hand-ring", r == 1 ? "1" : "2", "--count", "1000"});
  ASSERT_TRUE(job.wait(60)) << job.outputs_();
  for (int r = 0; r < n; ++r) {
    const RankExit &e = job.exit(size_t(r));
    EXPECT_TRUE(e.exited && e.code == 3) << job.outputs_();
    EXPECT_TRUE(contains(e.output, "mismatch: the ranks called with different plans: rank 0 with "
                                   "'hand_ring_allreduce' (allreduce, 3 ranks, checksum "))
        << e.output;
    EXPECT_TRUE(contains(e.output, ", rank 1 with 'hand_ring_allreduce'")) << e.output;
  }
  EXPECT_EQ(ProcessGroup::listJobSegments(job.name), std::vector<std::string>());
}

// Segments a crashed job of the same name left behind: a rank's control
// segment (its process killed while it waited for its peers), a data
// segment, and a segment cut short before its header was written. A new
// job of that name runs, and leaves nothing.
TEST(ProcessExecutorTest, StaleSegmentsOfACrashedJob) {
  const std::string name = uniqueJob("stale");
  {
    Job crashed(name);
    crashed.start(0, 3, {"--hand-ring", "2", "--loop", "0", "--die-after-ms", "300"});
    ASSERT_TRUE(crashed.wait(30)) << crashed.outputs_();
    ASSERT_FALSE(crashed.exit(0).exited) << crashed.outputs_();
  }
  auto makeJunk = [](const std::string &shm, size_t bytes) {
    int fd = shm_open(shm.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    ASSERT_GE(fd, 0) << shm;
    ASSERT_EQ(ftruncate(fd, off_t(bytes)), 0);
    std::vector<char> junk(bytes, char(0x5a));
    ASSERT_EQ(write(fd, junk.data(), junk.size()), ssize_t(junk.size()));
    close(fd);
  };
  makeJunk("/coll-" + name + ".1.1", 4096);
  makeJunk("/coll-" + name + ".2", 16);
  std::vector<std::string> stale = ProcessGroup::listJobSegments(name);
  ASSERT_EQ(stale, (std::vector<std::string>{"coll-" + name + ".0", "coll-" + name + ".1.1",
                                             "coll-" + name + ".2"}));

  Job job(name);
  for (int r = 0; r < 3; ++r)
    job.start(r, 3, {"--hand-ring", "2", "--count", "100003", "--loop", "3"});
  ASSERT_TRUE(job.wait(60)) << job.outputs_();
  for (int r = 0; r < 3; ++r)
    EXPECT_TRUE(job.exit(size_t(r)).exited && job.exit(size_t(r)).code == 0) << job.outputs_();
  EXPECT_EQ(ProcessGroup::listJobSegments(name), std::vector<std::string>());
}

// A rank that never comes: the others give up after the setup timeout.
TEST(ProcessExecutorTest, MissingRankSetupTimeout) {
  Job job(uniqueJob("missing"));
  job.start(0, 2, {"--hand-ring", "2", "--setup-timeout", "1"});
  ASSERT_TRUE(job.wait(30)) << job.outputs_();
  const RankExit &e = job.exit(0);
  EXPECT_TRUE(e.exited && e.code == 4) << e.output;
  EXPECT_TRUE(
      contains(e.output, "timeout: rank 1 of job '" + job.name + "' did not join within 1 s"))
      << e.output;
  EXPECT_EQ(ProcessGroup::listJobSegments(job.name), std::vector<std::string>());
}

// A rank that dies after asking to join: the others fail at once, naming
// it, rather than wait for the setup timeout.
TEST(ProcessExecutorTest, RankDyingWhileJoining) {
  Job job(uniqueJob("die-joining"));
  const std::vector<std::string> a = {"--hand-ring", "2", "--loop", "0", "--setup-timeout", "30"};
  job.start(0, 3, a);
  std::vector<std::string> dying = a;
  dying.push_back("--die-after-ms");
  dying.push_back("300");
  job.start(2, 3, dying);
  // Rank 0 admits rank 1 first: rank 2 dies while it still asks.
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  job.start(1, 3, a);
  ASSERT_TRUE(job.wait(60)) << job.outputs_();
  // Started in the order rank 0, rank 2, rank 1.
  const std::string died = "rank 2 (pid " + std::to_string(job.pid(1)) + ") of job '" + job.name +
                           "' died while joining";
  for (size_t i : {size_t(0), size_t(2)}) {
    const RankExit &e = job.exit(i);
    EXPECT_TRUE(e.exited && e.code == 4) << job.outputs_();
    EXPECT_TRUE(contains(e.output, "remote error")) << e.output;
    EXPECT_LT(e.seconds, 10.0) << job.outputs_();
  }
  EXPECT_TRUE(contains(job.exit(0).output, died)) << job.exit(0).output;
  EXPECT_EQ(ProcessGroup::listJobSegments(job.name), std::vector<std::string>());
}

// Bad arguments of create(), in this process (no peers needed).
TEST(ProcessExecutorTest, CreateRejectsBadArguments) {
  ErrorKind kind = ErrorKind::None;
  auto g = ProcessGroup::create("bad/name", 0, 2, ProcessGroupOptions(), &kind);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(kind, ErrorKind::InvalidArgument);
  EXPECT_TRUE(contains(g.message(), "invalid job name 'bad/name'")) << g.message();
  g = ProcessGroup::create("ok", 2, 2, ProcessGroupOptions(), &kind);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.message(), "rank 2 is out of range: the job has 2 ranks");
  ProcessGroupOptions o;
  o.timeoutSeconds = 0;
  g = ProcessGroup::create("ok", 0, 2, o, &kind);
  ASSERT_FALSE(g.ok());
  EXPECT_TRUE(contains(g.message(), "must be in (0, 1e9] seconds")) << g.message();
}

// A job of one rank runs in this process, and rank 0's name is taken while
// its group lives.
TEST(ProcessExecutorTest, OneRankInProcess) {
  const std::string name = uniqueJob("one");
  auto g = ProcessGroup::create(name, 0, 1);
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(ProcessGroup::listJobSegments(name), std::vector<std::string>{"coll-" + name + ".0"});
  ErrorKind kind = ErrorKind::None;
  auto again = ProcessGroup::create(name, 0, 1, ProcessGroupOptions(), &kind);
  ASSERT_FALSE(again.ok());
  EXPECT_TRUE(contains(again.message(), "is taken by process " + std::to_string(getpid())))
      << again.message();
  void *p = (*g)->allocate(1 << 20);
  ASSERT_NE(p, nullptr);
  static_cast<char *>(p)[(1 << 20) - 1] = 1;
  (*g)->deallocate(p);
  g = Status::error("destroyed");
  EXPECT_EQ(ProcessGroup::listJobSegments(name), std::vector<std::string>());
}

// allocate() and deallocate() on one thread while execute() checks its
// buffers against the allocations on another (the pattern of a program that
// allocates while a communication thread runs calls).
/// The file descriptors this process holds open.
size_t openFds() {
  size_t n = 0;
  if (DIR *d = opendir("/proc/self/fd")) {
    while (readdir(d))
      ++n;
    closedir(d);
  }
  return n;
}

// Memory from allocate() keeps its descriptor open while the peers may map
// it (at most 64 allocations at a time); the others, and every freed one,
// hold none.
TEST(ProcessExecutorTest, AllocationsHoldDescriptorsOnlyWhileListed) {
  auto g = ProcessGroup::create(uniqueJob("alloc-fds"), 0, 1);
  ASSERT_TRUE(g.ok()) << g.message();
  const size_t before = openFds();
  std::vector<char *> blocks;
  for (int i = 0; i < 100; ++i) {
    std::string why;
    char *p = static_cast<char *>((*g)->allocate(4096 + size_t(i), &why));
    ASSERT_NE(p, nullptr) << why;
    std::memset(p, i, 4096);
    blocks.push_back(p);
  }
  const size_t during = openFds();
  EXPECT_GE(during, before + 64);
  EXPECT_LT(during, before + 70);
  for (size_t i = 0; i < blocks.size(); ++i)
    EXPECT_EQ(blocks[i][4095], char(i));
  for (char *p : blocks)
    (*g)->deallocate(p);
  EXPECT_LE(openFds(), before + 1);
}

TEST(ProcessExecutorTest, AllocateWhileExecuting) {
  const std::string name = uniqueJob("alloc-exec");
  auto g = ProcessGroup::create(name, 0, 1);
  ASSERT_TRUE(g.ok()) << g.message();
  ProcessGroup &group = **g;
  Plan plan = makePlan("local_copy", CollectiveKind::AllReduce, 1, 1, 1, 2);
  float *buf = static_cast<float *>(group.allocate(1024 * sizeof(float)));
  ASSERT_NE(buf, nullptr);
  std::atomic<bool> done{false};
  std::thread allocator([&] {
    while (!done.load()) {
      void *p = group.allocate(4096);
      EXPECT_NE(p, nullptr);
      group.deallocate(p);
    }
  });
  for (int i = 0; i < 300; ++i) {
    Status s = group.execute(plan, buf, buf, 1024, DataType::Float32, RedOp::Sum);
    EXPECT_TRUE(s.ok()) << s.message();
  }
  done = true;
  allocator.join();
  group.deallocate(buf);
  g = Status::error("destroyed");
  EXPECT_EQ(ProcessGroup::listJobSegments(name), std::vector<std::string>());
}

// A job whose ranks run in different pid namespaces (rank 1 under
// `unshare --pid --fork`, where it is pid 1) fails at once, saying why,
// rather than take a pid of one namespace for a process of the other.
// Needs unshare(1) and the privilege to use it; skips otherwise.
TEST(ProcessExecutorTest, RanksInDifferentPidNamespaces) {
  const std::string name = uniqueJob("pidns");
  const std::string out = ::testing::TempDir() + name + ".1.out";
  std::vector<std::string> args = {"unshare",  "--pid", "--fork",          COLL_SHM_RANK_HELPER,
                                   "--job",    name,    "--rank",          "1",
                                   "--nranks", "2",     "--hand-ring",     "2",
                                   "--loop",   "0",     "--setup-timeout", "3"};
  std::vector<char *> argv;
  for (std::string &a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid = -1;
  int rc = posix_spawnp(&pid, "unshare", &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0)
    GTEST_SKIP() << "cannot run unshare";
  ProcessGroupOptions o;
  o.setupTimeoutSeconds = 3;
  auto start = std::chrono::steady_clock::now();
  auto g = ProcessGroup::create(name, 0, 2, o);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  int status = 0;
  waitpid(pid, &status, 0);
  std::string childOut;
  if (FILE *f = std::fopen(out.c_str(), "r")) {
    char buf[4096];
    size_t n = std::fread(buf, 1, sizeof buf, f);
    childOut.assign(buf, n);
    std::fclose(f);
  }
  if (contains(childOut, "unshare:"))
    GTEST_SKIP() << childOut;
  // Neither rank joins. The first to see the other says why and leaves;
  // the other may see it leave (Remote), or miss it and time out.
  ASSERT_FALSE(g.ok());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 4) << childOut;
  EXPECT_TRUE(contains(g.message(), "pid namespace") ||
              contains(childOut, "rank 0 of job '" + name + "' (process " +
                                     std::to_string(getpid()) +
                                     ") runs in another pid namespace than rank 1"))
      << g.message() << "\n"
      << childOut;
  EXPECT_LT(took, 5.0);
  EXPECT_EQ(ProcessGroup::listJobSegments(name), std::vector<std::string>());
}

// A control segment of another layout version (here: an older, smaller
// one) holds our rank's name: create() says so and leaves it alone, rather
// than take it for a segment still being created and unlink it.
TEST(ProcessExecutorTest, SegmentOfAnotherLayoutVersionIsLeftAlone) {
  const std::string name = uniqueJob("layout");
  const std::string shm = "/coll-" + name + ".0";
  int fd = shm_open(shm.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  ASSERT_GE(fd, 0);
  const char header[16] = {'C', 'O', 'L', 'L', 'C', 'T', 'L', '1', 1, 0, 0, 0, 0, 0, 0, 0};
  ASSERT_EQ(write(fd, header, sizeof header), ssize_t(sizeof header));
  close(fd);
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  ProcessGroupOptions o;
  o.setupTimeoutSeconds = 3;
  ErrorKind kind = ErrorKind::None;
  auto g = ProcessGroup::create(name, 0, 1, o, &kind);
  EXPECT_FALSE(g.ok());
  EXPECT_EQ(kind, ErrorKind::Mismatch) << g.message();
  EXPECT_TRUE(
      contains(g.message(), "shared memory " + shm + " is a control segment of layout version 1"))
      << g.message();
  EXPECT_EQ(ProcessGroup::listJobSegments(name), std::vector<std::string>{shm.substr(1)});
  shm_unlink(shm.c_str());
}

// A plan of one rank, which has no threadblocks (star_allreduce at N = 1):
// every call is a local copy, on one worker or one per threadblock.
TEST(ProcessExecutorTest, OneRankPlan) {
#ifndef COLL_TEST_PLAN_DIR
  GTEST_SKIP() << "collc is not built; compiled plans are not available";
#endif
  runAll("n1", 1, {"--plan", planFile("star_allreduce_n1"), "--cases", "all"});
  runAll("n1w0", 1, {"--plan", planFile("star_allreduce_n1"), "--cases", "all", "--workers", "0"});
}

// Ranks 2 and 3 of a plan have no threadblocks: they take part in every
// call (the rendezvous) and run nothing.
TEST(ProcessExecutorTest, RanksWithoutThreadblocks) {
  runAll("idle", 4, {"--hand-idle", "--cases", "all"});
  runAll("idle-w0", 3, {"--hand-idle", "--cases", "all", "--workers", "0"});
}

// A rank whose own execute() fails (out of memory for the copy of its
// input, through the C API): collGetLastError(comm) says why on that rank,
// and the others fail at once with its message instead of waiting for the
// timeout.
TEST(ProcessExecutorTest, FailingRankPublishesItsError) {
  const int n = 3, victim = 1;
  Job job(uniqueJob("oom"));
  for (int r = 0; r < n; ++r) {
    std::vector<std::string> a = {"--hand-ring", "2",         "--capi", "--count",
                                  "100003",      "--timeout", "30"};
    if (r == victim)
      a.insert(a.end(), {"--overlap", "--fail-alloc-above", "65536"});
    job.start(r, n, a);
  }
  ASSERT_TRUE(job.wait(60)) << job.outputs_();
  for (int r = 0; r < n; ++r) {
    const RankExit &e = job.exit(size_t(r));
    EXPECT_TRUE(e.exited && e.code == 3) << job.outputs_();
    if (r == victim) {
      EXPECT_TRUE(contains(e.output, "error: system error: rank 1: ")) << e.output;
    } else {
      EXPECT_TRUE(contains(e.output, "error: remote process failed: rank 1 failed: rank 1: "))
          << e.output;
      EXPECT_LT(e.seconds, 10.0) << job.outputs_();
    }
    EXPECT_TRUE(contains(e.output, "out of memory")) << e.output;
  }
  EXPECT_EQ(ProcessGroup::listJobSegments(job.name), std::vector<std::string>());
}

// Rank 0 gives up waiting for rank 1 to call (setup timeout 1 s); rank 1,
// calling later, fails at once with rank 0's reason, not after its own
// 30 s timeout.
TEST(ProcessExecutorTest, LateRankGetsThePeersError) {
  Job job(uniqueJob("late"));
  job.start(0, 2, {"--hand-ring", "2", "--setup-timeout", "1", "--timeout", "30"});
  job.start(1, 2, {"--hand-ring", "2", "--delay-ms", "2500", "--timeout", "30"});
  ASSERT_TRUE(job.wait(60)) << job.outputs_();
  const RankExit &first = job.exit(0), &late = job.exit(1);
  EXPECT_TRUE(first.exited && first.code == 3) << job.outputs_();
  EXPECT_TRUE(contains(first.output, "timeout: rank 0: timed out after 1 s waiting for rank 1 to "
                                     "call execute() (call 1)"))
      << first.output;
  EXPECT_TRUE(late.exited && late.code == 3) << job.outputs_();
  EXPECT_TRUE(contains(late.output, "remote error: rank 0 failed: rank 0: timed out after 1 s "
                                    "waiting for rank 1"))
      << late.output;
  EXPECT_LT(late.seconds, 10.0) << job.outputs_();
  EXPECT_EQ(ProcessGroup::listJobSegments(job.name), std::vector<std::string>());
}

// A second call on a group while one is in progress (another thread) is
// refused at once; the first runs on.
TEST(ProcessExecutorTest, ConcurrentCallsAreRefused) {
  const std::string name = uniqueJob("concurrent");
  Job job(name);
  job.start(1, 2, {"--hand-ring", "2", "--count", "1000", "--delay-ms", "1500", "--no-check"});
  ProcessGroupOptions o;
  o.setupTimeoutSeconds = 10;
  o.timeoutSeconds = 10;
  auto g = ProcessGroup::create(name, 0, 2, o);
  ASSERT_TRUE(g.ok()) << g.message();
  Plan plan = test::ringAllReduce(2, 2);
  std::vector<float> in(1000, 1.0f), out(1000), in2(1000, 1.0f), out2(1000);
  Status first = Status::success();
  std::thread t([&] {
    first = (*g)->execute(plan, in.data(), out.data(), in.size(), DataType::Float32, RedOp::Sum);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  Clock::time_point start = Clock::now();
  Status second =
      (*g)->execute(plan, in2.data(), out2.data(), in2.size(), DataType::Float32, RedOp::Sum);
  double took = std::chrono::duration<double>(Clock::now() - start).count();
  t.join();
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.message(), "rank 0: execute() was called while another call of this process "
                              "group is in progress (one call at a time)");
  EXPECT_LT(took, 0.5);
  EXPECT_TRUE(first.ok()) << first.message();
  EXPECT_EQ((*g)->lastErrorKind(), ErrorKind::None);
  ASSERT_TRUE(job.wait(30)) << job.outputs_();
  EXPECT_TRUE(job.exit(0).exited && job.exit(0).code == 0) << job.outputs_();
  g = Status::error("destroyed");
  EXPECT_EQ(ProcessGroup::listJobSegments(name), std::vector<std::string>());
}

// Segments of our names without a header (their processes killed between
// creating them and writing it) are removed once older than 5 s; younger
// ones, which may still be being created, stay.
TEST(ProcessExecutorTest, HeaderlessSegmentsAreRemovedByAge) {
  const std::string name = uniqueJob("headerless");
  auto make = [](const std::string &shm, size_t bytes) {
    int fd = shm_open(shm.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    ASSERT_GE(fd, 0) << shm;
    ASSERT_EQ(ftruncate(fd, off_t(bytes)), 0);
    close(fd);
  };
  make("/coll-" + name + ".1.1", 0);
  make("/coll-" + name + ".2", 4096);
  std::this_thread::sleep_for(std::chrono::milliseconds(5500));
  make("/coll-" + name + ".3.7", 4096);
  ProcessGroup::removeDeadSegments();
  EXPECT_EQ(ProcessGroup::listJobSegments(name), std::vector<std::string>{"coll-" + name + ".3.7"});
  shm_unlink(("/coll-" + name + ".3.7").c_str());
}

// A rank whose control segment another process unlinks while the job is
// being set up (a cleanup that judged an older segment of that name) fails
// at once, saying so, rather than wait for peers that can no longer find it.
TEST(ProcessExecutorTest, OwnSegmentRemovedWhileJoining) {
  const std::string name = uniqueJob("own-removed");
  ProcessGroupOptions o;
  o.setupTimeoutSeconds = 60;
  ErrorKind kind = ErrorKind::None;
  std::string message;
  auto start = std::chrono::steady_clock::now();
  std::thread rank0([&] {
    auto g = ProcessGroup::create(name, 0, 2, o, &kind);
    if (!g.ok())
      message = g.message();
  });
  const std::string own = "coll-" + name + ".0";
  while (ProcessGroup::listJobSegments(name) != std::vector<std::string>{own} &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(10))
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  shm_unlink(("/" + own).c_str());
  rank0.join();
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(kind, ErrorKind::SystemError) << message;
  EXPECT_TRUE(contains(message, "its shared memory /" + own + " was removed by another process"))
      << message;
  EXPECT_LT(took, 10.0);
  EXPECT_EQ(ProcessGroup::listJobSegments(name), std::vector<std::string>());
}

// Every rank leaves the job and joins it again, under the same name, 40
// times in a row: a rank never mistakes a segment of the previous round
// for one of this round. Then the same without calls: a rank that leaves
// as soon as it has joined strands no peer.
TEST(ProcessExecutorTest, RecreateTheSameJobName) {
  runAll("recreate", 4,
         {"--hand-ring", "2", "--count", "1001", "--recreate", "40", "--timeout", "20",
          "--setup-timeout", "20"});
  runAll("recreate-join", 6,
         {"--hand-ring", "2", "--loop", "0", "--recreate", "40", "--timeout", "20",
          "--setup-timeout", "20"});
}

// A coll-run job of processes killed as a whole (SIGKILL to its process
// group) in the middle of a run: the next job to start on the host removes
// whatever of its shared memory is left.
TEST(ProcessExecutorTest, KilledJobLeavesNoSharedMemory) {
#if !defined(COLL_RUN_TOOL) || !defined(COLL_TEST_PLAN_DIR)
  GTEST_SKIP() << "coll-run or collc is not built";
#else
  std::vector<std::string> args = {COLL_RUN_TOOL, planFile("ring_allreduce_n4"),
                                   "--ranks-as",  "processes",
                                   "--size",      "16M",
                                   "--iters",     "100000",
                                   "--timeout",   "60",
                                   "--no-check"};
  std::vector<char *> argv;
  for (std::string &s : args)
    argv.push_back(s.data());
  argv.push_back(nullptr);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, args[0].c_str(), &fa, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  ASSERT_EQ(rc, 0) << "cannot start " << args[0];
  // coll-run's job is "coll-run-<pid>-<clock>".
  const std::string prefix = "coll-coll-run-" + std::to_string(pid) + "-";
  std::vector<std::string> before = shmEntries(prefix);
  EXPECT_EQ(before, std::vector<std::string>());
  // Wait until the job's ranks have joined and run for a while.
  Clock::time_point start = Clock::now();
  size_t seen = 0;
  while (std::chrono::duration<double>(Clock::now() - start).count() < 30 &&
         (seen = shmEntries(prefix).size()) < 4)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  kill(-pid, SIGKILL);
  int st = 0;
  waitpid(pid, &st, 0);
  ASSERT_GE(seen, 4u) << "the job's segments never appeared";
  // The next job to start (here one of one rank) removes the segments of
  // jobs whose owners are all dead. The killed processes may take a moment
  // to be gone.
  std::vector<std::string> after;
  start = Clock::now();
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto g = ProcessGroup::create(uniqueJob("next"), 0, 1);
    ASSERT_TRUE(g.ok()) << g.message();
    after = shmEntries(prefix);
  } while (!after.empty() && std::chrono::duration<double>(Clock::now() - start).count() < 10);
  EXPECT_EQ(after, before);
#endif
}

} // namespace
