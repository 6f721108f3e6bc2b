//===- NetGroupTest.cpp - ProcessGroup with ranks on several hosts --------===//
//
// Jobs whose ranks meet through a TcpStore (served by the test process) and
// are told apart into hosts by COLL_HOST (runtime_shm_rank --host): ranks of
// one "host" share memory, the others talk over UCX, here on loopback TCP.
// Every compiled plan runs every case with its ranks spread over hosts in
// several ways, each rank checking its output against the reference; a
// remote rank that is killed, stopped or calls differently fails the others
// with an error naming it. A real network between namespaces is
// tests/runtime/net-namespaces.sh.
//
//===----------------------------------------------------------------------===//

#include "ProcessJob.h"
#include "TestHelpers.h"
#include "coll/Runtime/ProcessGroup.h"
#include "coll/Runtime/TcpStore.h"

#include <csignal>
#include <gtest/gtest.h>
#include <string>
#include <sys/mman.h>
#include <sys/wait.h>
#include <thread>
#include <vector>

using namespace coll;
using namespace coll::test;

namespace {

/// How a job's ranks are spread over hosts.
enum class Spread {
  Alternate, ///< Rank r on host r % 2: every ring step crosses hosts.
  Halves,    ///< The first half on one host, the rest on another.
  Apart,     ///< Every rank on a host of its own.
};

std::string hostOf(Spread s, int r, int n) {
  switch (s) {
  case Spread::Alternate:
    return "h" + std::to_string(r % 2);
  case Spread::Halves:
    return "h" + std::to_string(r < (n + 1) / 2 ? 0 : 1);
  case Spread::Apart:
    break;
  }
  return "h" + std::to_string(r);
}

/// A job whose ranks meet through a store of this process.
class NetJob {
public:
  NetJob(const std::string &what, int n, Spread spread) : job(uniqueJob(what)), n(n) {
    auto s = TcpStoreServer::start("127.0.0.1", 0);
    if (!s) {
      error = s.message();
      return;
    }
    server = std::move(*s);
    for (int r = 0; r < n; ++r)
      hosts.push_back(hostOf(spread, r, n));
  }

  /// Starts rank \p r with \p extra arguments.
  void start(int r, std::vector<std::string> extra) {
    extra.insert(extra.end(), {"--store", "127.0.0.1:" + std::to_string(server->port()), "--host",
                               hosts[size_t(r)]});
    job.start(r, n, extra);
  }
  void startAll(const std::vector<std::string> &extra) {
    for (int r = 0; r < n; ++r)
      start(r, extra);
  }

  Job job;
  int n;
  std::vector<std::string> hosts;
  std::unique_ptr<TcpStoreServer> server;
  std::string error;
};

#define SKIP_WITHOUT_NETWORK()                                                                     \
  do {                                                                                             \
    if (!ProcessGroup::networkAvailable())                                                         \
      GTEST_SKIP() << "this build has no network transport (UCX)";                                 \
  } while (0)

/// Runs \p j with \p extra on every rank, expecting every rank to succeed
/// and nothing to be left in /dev/shm.
void expectSuccess(NetJob &j, const std::vector<std::string> &extra, double limit = 240) {
  ASSERT_TRUE(j.error.empty()) << j.error;
  j.startAll(extra);
  ASSERT_TRUE(j.job.wait(limit)) << "the job did not end within " << limit << " s\n"
                                 << j.job.outputs_();
  for (size_t r = 0; r < j.job.size(); ++r)
    EXPECT_TRUE(j.job.exit(r).exited && j.job.exit(r).code == 0) << j.job.outputs_();
  EXPECT_EQ(ProcessGroup::listJobSegments(j.job.name), std::vector<std::string>());
}

struct NetCase {
  const char *plan;
  int nranks;
  Spread spread;
  const char *workers;
};

std::string caseName(const NetCase &c) {
  const char *spread = c.spread == Spread::Alternate ? "alternate"
                       : c.spread == Spread::Halves  ? "halves"
                                                     : "apart";
  return std::string(c.plan) + "_" + spread;
}

class NetPlanTest : public ::testing::TestWithParam<NetCase> {};

// Every case of a compiled plan (counts from 0, odd and large, in place
// and out of place, types and operators in rotation, checked against the
// reference) with its ranks on several hosts.
TEST_P(NetPlanTest, AllCasesAcrossHosts) {
  SKIP_WITHOUT_NETWORK();
#ifndef COLL_TEST_PLAN_DIR
  GTEST_SKIP() << "collc is not built; compiled plans are not available";
#else
  const NetCase &c = GetParam();
  NetJob j("net", c.nranks, c.spread);
  expectSuccess(
      j, {"--plan", planFile(c.plan), "--cases", "all", "--slice", "256", "--workers", c.workers});
#endif
}

// Calls of the same description run on the kept data side again: the
// network links carry one call's messages after the other's.
TEST(NetGroupTest, RepeatedCallsAcrossHosts) {
  SKIP_WITHOUT_NETWORK();
  NetJob j("net-repeat", 4, Spread::Halves);
  expectSuccess(j, {"--hand-ring", "2", "--cases", "repeat", "--slice", "64", "--loop", "3"});
}

// LL and LL128 between the ranks of a host, Simple across hosts (the
// network's links carry whole messages), both in one call: every case in
// LL, repeated calls on the kept data side in LL128.
TEST(NetGroupTest, LineProtocolsOnEachHost) {
  SKIP_WITHOUT_NETWORK();
  NetJob ll("net-ll", 4, Spread::Halves);
  expectSuccess(ll, {"--hand-ring", "2", "--cases", "all", "--slice", "48", "--protocol", "LL"});
  NetJob ll128("net-ll128", 4, Spread::Halves);
  expectSuccess(ll128, {"--hand-ring", "2", "--cases", "repeat", "--slice", "64", "--loop", "3",
                        "--protocol", "LL128"});
}

// Every rank on a host of its own: every connection crosses the network.
TEST(NetGroupTest, HandRingEveryRankItsOwnHost) {
  SKIP_WITHOUT_NETWORK();
  NetJob j("net-apart", 3, Spread::Apart);
  expectSuccess(j, {"--hand-ring", "1", "--cases", "all", "--slice", "100"});
}

INSTANTIATE_TEST_SUITE_P(
    Plans, NetPlanTest,
    ::testing::Values(NetCase{"ring_allreduce_n4", 4, Spread::Alternate, "1"},
                      NetCase{"ring_allreduce_n3", 3, Spread::Apart, "1"},
                      NetCase{"tree_allreduce_n4", 4, Spread::Halves, "1"},
                      NetCase{"ring_allreduce_x2_n4", 4, Spread::Alternate, "0"},
                      NetCase{"ring_allgather_n3", 3, Spread::Halves, "1"},
                      NetCase{"ring_reducescatter_inplace_n4", 4, Spread::Alternate, "1"},
                      NetCase{"alltoall_allpairs_n4", 4, Spread::Halves, "2"},
                      NetCase{"alltoall_twostep_n4", 4, Spread::Halves, "1"},
                      NetCase{"tree_broadcast_n4", 4, Spread::Alternate, "1"},
                      NetCase{"chain_reduce_inplace_n3", 3, Spread::Apart, "1"},
                      NetCase{"direct_gather_n3", 3, Spread::Halves, "1"},
                      NetCase{"direct_scatter_n2", 2, Spread::Apart, "1"}),
    [](const ::testing::TestParamInfo<NetCase> &info) { return caseName(info.param); });

// A rank on the other host is killed in the middle of a run: every other
// rank, on either host, fails with an error naming it, soon; its
// neighbours on its host remove its shared memory.
TEST(NetGroupTest, KilledRemoteRankFailsTheOthers) {
  SKIP_WITHOUT_NETWORK();
  const int n = 4, victim = 3;
  NetJob j("net-kill", n, Spread::Halves);
  ASSERT_TRUE(j.error.empty()) << j.error;
  for (int r = 0; r < n; ++r) {
    std::vector<std::string> a = {"--hand-ring", "2",          "--count",   "200000", "--loop",
                                  "100000",      "--no-check", "--timeout", "20"};
    if (r == victim)
      a.insert(a.end(), {"--die-after-ms", "400"});
    j.start(r, a);
  }
  ASSERT_TRUE(j.job.wait(60)) << j.job.outputs_();
  const RankExit &dead = j.job.exit(victim);
  ASSERT_TRUE(!dead.exited && dead.code == SIGKILL) << j.job.outputs_();
  for (int r = 0; r < n; ++r) {
    if (r == victim)
      continue;
    const RankExit &e = j.job.exit(size_t(r));
    EXPECT_TRUE(e.exited && e.code == 3) << j.job.outputs_();
    EXPECT_TRUE(contains(e.output, "remote error")) << e.output;
    EXPECT_TRUE(contains(e.output, "rank 3 (pid " + std::to_string(j.job.pid(victim)))) << e.output;
    // Long before the 20 s timeout.
    EXPECT_LT(e.seconds - dead.seconds, 10.0) << j.job.outputs_();
  }
  EXPECT_EQ(ProcessGroup::listJobSegments(j.job.name), std::vector<std::string>());
}

// A remote rank that stops (SIGSTOP) falls silent: the others fail within
// the timeout, naming it (lost, or the rank they wait for).
TEST(NetGroupTest, StoppedRemoteRankFailsTheOthers) {
  SKIP_WITHOUT_NETWORK();
  const int n = 3, victim = 1;
  NetJob j("net-stop", n, Spread::Apart);
  ASSERT_TRUE(j.error.empty()) << j.error;
  for (int r = 0; r < n; ++r) {
    std::vector<std::string> a = {
        "--hand-ring", "2",         "--count", "100000",          "--loop", "100000",
        "--no-check",  "--timeout", "3",       "--setup-timeout", "3"};
    if (r == victim)
      a.insert(a.end(), {"--stop-after-ms", "300"});
    j.start(r, a);
  }
  j.job.waitForOthers(victim, 30);
  kill(j.job.pid(victim), SIGKILL);
  ASSERT_TRUE(j.job.wait(60)) << j.job.outputs_();
  for (int r = 0; r < n; ++r) {
    if (r == victim)
      continue;
    const RankExit &e = j.job.exit(size_t(r));
    EXPECT_TRUE(e.exited && e.code == 3) << j.job.outputs_();
    EXPECT_TRUE(contains(e.output, "rank 1 (pid " + std::to_string(j.job.pid(victim)))) << e.output;
    EXPECT_LT(e.seconds, 20.0) << j.job.outputs_();
  }
  for (const std::string &s : ProcessGroup::listJobSegments(j.job.name))
    shm_unlink(("/" + s).c_str());
}

// Ranks on different hosts that call with different counts: every rank
// fails the call with the same mismatch, and the calls after it run right.
TEST(NetGroupTest, MismatchAcrossHosts) {
  SKIP_WITHOUT_NETWORK();
  for (const char *at : {"0", "5"}) {
    const int n = 4;
    NetJob j("net-mismatch", n, Spread::Alternate);
    ASSERT_TRUE(j.error.empty()) << j.error;
    for (int r = 0; r < n; ++r) {
      std::vector<std::string> a = {"--hand-ring", "2",      "--cases", "repeat",        "--slice",
                                    "64",          "--loop", "2",       "--mismatch-at", at};
      if (r == 3)
        a.insert(a.end(), {"--count-offset", "1"});
      j.start(r, a);
    }
    ASSERT_TRUE(j.job.wait(120)) << j.job.outputs_();
    for (int r = 0; r < n; ++r) {
      const RankExit &e = j.job.exit(size_t(r));
      EXPECT_TRUE(e.exited && e.code == 0) << j.job.outputs_();
      EXPECT_TRUE(contains(e.output, std::string("call ") + at +
                                         ": the ranks called with different arguments: rank 0 "
                                         "with count "))
          << e.output;
      EXPECT_TRUE(contains(e.output, "calls right")) << e.output;
    }
    EXPECT_EQ(ProcessGroup::listJobSegments(j.job.name), std::vector<std::string>());
  }
}

// A rank that never comes: the others wait for it in the store, and fail
// naming it after the setup timeout.
TEST(NetGroupTest, MissingRankTimesOutInTheStore) {
  SKIP_WITHOUT_NETWORK();
  NetJob j("net-missing", 3, Spread::Apart);
  ASSERT_TRUE(j.error.empty()) << j.error;
  j.start(0, {"--hand-ring", "2", "--setup-timeout", "1"});
  j.start(1, {"--hand-ring", "2", "--setup-timeout", "1"});
  ASSERT_TRUE(j.job.wait(30)) << j.job.outputs_();
  for (int r = 0; r < 2; ++r) {
    const RankExit &e = j.job.exit(size_t(r));
    EXPECT_TRUE(e.exited && e.code == 4) << j.job.outputs_();
    EXPECT_TRUE(contains(e.output, "rank 2 of job")) << e.output;
  }
  EXPECT_EQ(ProcessGroup::listJobSegments(j.job.name), std::vector<std::string>());
}

} // namespace
