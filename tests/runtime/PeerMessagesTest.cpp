//===- PeerMessagesTest.cpp - Point-to-point messages between processes ---===//
//
// Jobs of runtime_peer_rank processes (PeerRank.cpp), each rank checking
// what it received against data distinct per source, destination, tag and
// element.
//
//===----------------------------------------------------------------------===//

#include "ProcessJob.h"

#include <gtest/gtest.h>

using namespace coll::test;

namespace {

/// Runs \p scenario on \p nranks ranks; every rank must exit 0, except
/// \p dead, which must exit 3.
void runCase(const std::string &scenario, int nranks, int dead = -1) {
  Job job(uniqueJob("p2p-" + scenario));
  for (int r = 0; r < nranks; ++r)
    job.start(r, nranks, {"--case", scenario});
  ASSERT_TRUE(job.wait(120)) << "the job did not end:\n" << job.outputs_();
  for (int r = 0; r < nranks; ++r) {
    const RankExit &e = job.exit(size_t(r));
    EXPECT_TRUE(e.exited) << "rank " << r << " was killed:\n" << e.output;
    EXPECT_EQ(e.code, r == dead ? 3 : 0) << "rank " << r << ":\n" << e.output;
  }
  // Every name of the job is gone.
  EXPECT_TRUE(shmEntries("collp2p-" + job.jobName()).empty());
}

} // namespace

TEST(PeerMessages, RingOfSendsBeforeReceives) {
  runCase("ring", 3);
}
TEST(PeerMessages, RingOfTwo) {
  runCase("ring", 2);
}
TEST(PeerMessages, TagsOutOfOrder) {
  runCase("tags", 2);
}
TEST(PeerMessages, AnySource) {
  runCase("any", 5);
}
TEST(PeerMessages, LengthMismatchIsAnError) {
  runCase("length", 2);
}
TEST(PeerMessages, ReceiveFromDeadRankFails) {
  runCase("dies", 2, 1);
}
TEST(PeerMessages, ReceiveTimesOut) {
  runCase("timeout", 2);
}
