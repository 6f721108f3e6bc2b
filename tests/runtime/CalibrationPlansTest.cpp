//===- CalibrationPlansTest.cpp - coll-calibrate's plans move data right --===//
//
// The calibration plans time real work, so each must do the work it names:
// run on LocalWorld with distinct values per rank and element, every
// output holds what the plan says it moves.
//
//===----------------------------------------------------------------------===//

#include "coll/Runtime/CalibrationPlans.h"

#include "coll/Runtime/Executor.h"
#include "coll/Runtime/PreparedCall.h"

#include <gtest/gtest.h>
#include <vector>

using namespace coll;

namespace {

/// Runs \p plan on LocalWorld with \p count floats; rank r's input element
/// i is 1000 r + i + 1 and its output starts at -1.
std::vector<std::vector<float>> runPlan(const Plan &plan, uint64_t count) {
  Result<ValidatedPlan> vp = ValidatedPlan::make(plan);
  EXPECT_TRUE(vp.ok()) << vp.message();
  if (!vp)
    return {};
  const uint32_t n = plan.info.nranks;
  const BufferElements e = planBufferElements(plan.info, count);
  std::vector<std::vector<float>> in(n), out(n);
  std::vector<const void *> sends(n);
  std::vector<void *> recvs(n);
  for (uint32_t r = 0; r < n; ++r) {
    for (uint64_t i = 0; i < e.input; ++i)
      in[r].push_back(float(1000 * r + i + 1));
    out[r].assign(e.output, -1);
    sends[r] = in[r].data();
    recvs[r] = out[r].data();
  }
  LocalWorld world;
  Status s = world.run(*vp, sends, recvs, count, DataType::Float32, RedOp::Sum, ExecOptions());
  EXPECT_TRUE(s.ok()) << s.message();
  return out;
}

} // namespace

TEST(CalibrationPlans, LocalStepsCopyEveryChunkOnEveryRank) {
  for (uint32_t ranks : {1u, 3u}) {
    const Plan p = localStepsPlan(5, 4, ranks);
    EXPECT_EQ(p.ranks.size(), ranks);
    EXPECT_EQ(p.ranks[0].threadblocks[0].steps.size(), 5u);
    std::vector<std::vector<float>> out = runPlan(p, 8);
    ASSERT_EQ(out.size(), ranks);
    for (uint32_t r = 0; r < ranks; ++r)
      for (uint64_t i = 0; i < 8; ++i)
        EXPECT_EQ(out[r][i], float(1000 * r + i + 1)) << "rank " << r << " element " << i;
  }
}

TEST(CalibrationPlans, LocalCopyGivesEachThreadblockItsChunk) {
  const Plan p = localCopyPlan(6);
  ASSERT_EQ(p.ranks[0].threadblocks.size(), 6u);
  std::vector<std::vector<float>> out = runPlan(p, 12);
  ASSERT_EQ(out.size(), 1u);
  for (uint64_t i = 0; i < 12; ++i)
    EXPECT_EQ(out[0][i], float(i + 1)) << "element " << i;
}

TEST(CalibrationPlans, LocalStepsRunAsAnInPlacePlanCalledOutOfPlace) {
  // The GPU calibration's probe of the staging copies: the input is
  // copied into the output first, and the step copies it onto itself.
  Plan p = localStepsPlan(1, 1, 8);
  p.info.inplace = true;
  std::vector<std::vector<float>> out = runPlan(p, 4);
  ASSERT_EQ(out.size(), 8u);
  for (uint32_t r = 0; r < 8; ++r)
    for (uint64_t i = 0; i < 4; ++i)
      EXPECT_EQ(out[r][i], float(1000 * r + i + 1)) << "rank " << r << " element " << i;
}

TEST(CalibrationPlans, DependencyChainCarriesTheFirstChunkThrough) {
  // Every output chunk ends as input chunk 0: each threadblock copies what
  // the one before it wrote, after it.
  const Plan p = dependencyChainPlan(5);
  ASSERT_EQ(p.ranks[0].threadblocks.size(), 5u);
  std::vector<std::vector<float>> out = runPlan(p, 15);
  ASSERT_EQ(out.size(), 1u);
  for (uint64_t i = 0; i < 15; ++i)
    EXPECT_EQ(out[0][i], float(i % 3 + 1)) << "element " << i;
}

TEST(CalibrationPlans, PingPongBringsRankZerosInputBack) {
  for (uint32_t trips : {1u, 4u}) {
    std::vector<std::vector<float>> out = runPlan(pingPongPlan(trips), 3);
    ASSERT_EQ(out.size(), 2u);
    for (uint32_t r = 0; r < 2; ++r)
      for (uint64_t i = 0; i < 3; ++i)
        EXPECT_EQ(out[r][i], float(i + 1)) << "rank " << r << " element " << i;
  }
}

TEST(CalibrationPlans, OneWayDeliversEveryMessage) {
  std::vector<std::vector<float>> out = runPlan(oneWayPlan(5), 10);
  ASSERT_EQ(out.size(), 2u);
  for (uint64_t i = 0; i < 10; ++i)
    EXPECT_EQ(out[1][i], float(i + 1)) << "element " << i;
}

TEST(CalibrationPlans, LocalReduceAddsTheInputToTheOutput) {
  // re: output = input + output, the output starting at -1.
  const Plan p = localReducePlan(3);
  ASSERT_EQ(p.ranks[0].threadblocks.size(), 3u);
  EXPECT_EQ(p.ranks[0].threadblocks[2].steps[0].op, Opcode::Reduce);
  std::vector<std::vector<float>> out = runPlan(p, 6);
  ASSERT_EQ(out.size(), 1u);
  for (uint64_t i = 0; i < 6; ++i)
    EXPECT_EQ(out[0][i], float(i)) << "element " << i;
}

TEST(CalibrationPlans, PingPongReceivedByReductions) {
  // Rank 1 reduces rank 0's input into its own, and rank 0 reduces that
  // with its input again, however many round trips.
  for (uint32_t trips : {1u, 3u}) {
    std::vector<std::vector<float>> out = runPlan(pingPongPlan(trips, Opcode::RecvReduceCopy), 3);
    ASSERT_EQ(out.size(), 2u);
    for (uint64_t i = 0; i < 3; ++i) {
      EXPECT_EQ(out[1][i], float(1002 + 2 * i)) << "trips " << trips << " element " << i;
      EXPECT_EQ(out[0][i], float(1003 + 3 * i)) << "trips " << trips << " element " << i;
    }
  }
}

TEST(CalibrationPlans, PingPongBesideWaitingThreadblocks) {
  // Five waiters, three on rank 0 and two on rank 1, each copying a chunk
  // of its own (chunks 1 to 3 of 2 elements) after the ping-pong, which
  // moves chunk 0.
  const Plan p = pingPongPlan(2, Opcode::Recv, 5);
  ASSERT_EQ(p.ranks[0].threadblocks.size(), 4u);
  ASSERT_EQ(p.ranks[1].threadblocks.size(), 3u);
  EXPECT_EQ(p.ranks[1].threadblocks[2].deps.at(0).step, 3u);
  std::vector<std::vector<float>> out = runPlan(p, 8);
  ASSERT_EQ(out.size(), 2u);
  for (uint32_t r = 0; r < 2; ++r)
    for (uint64_t i = 0; i < 8; ++i) {
      const uint64_t chunk = i / 2;
      const float want = chunk == 0             ? float(i + 1)
                         : chunk == 3 && r == 1 ? -1.0f
                                                : float(1000 * r + i + 1);
      EXPECT_EQ(out[r][i], want) << "rank " << r << " element " << i;
    }
}
