//===- CompiledPlanTest.cpp - collc's plans on the CPU executors ----------===//
//
// Every plan that tests/runtime/CMakeLists.txt compiles (stdlib programs and
// Inputs/collectives.coll, several rank counts) runs against the reference:
// all data types and operators in the single-thread executor, every count in
// the threads executor, and the two executors give the same bits. Without
// collc (a runtime-only build) these tests skip.
//
//===----------------------------------------------------------------------===//

#include "StepOrder.h"
#include "TestHelpers.h"
#include "coll/Runtime/PlanIO.h"

#include <gtest/gtest.h>
#include <random>

using namespace coll;
using namespace coll::test;

namespace {

std::vector<std::string> planNames() {
  return splitNames(COLL_TEST_PLANS);
}

class CompiledPlanTest : public ::testing::TestWithParam<std::string> {
protected:
  void SetUp() override {
#ifndef COLL_TEST_PLAN_DIR
    GTEST_SKIP() << "collc is not built; compiled plans are not available";
#else
    Result<Plan> p = loadPlanFile(std::string(COLL_TEST_PLAN_DIR) + "/" + GetParam() + ".bin");
    ASSERT_TRUE(p.ok()) << p.message();
    plan = std::move(*p);
#endif
  }

  /// Counts the task asks for: 0, 1, 7, N-1, 1000 (and 100003, threads).
  std::vector<uint64_t> smallCounts() const {
    return {0, 1, 7, plan.info.nranks - 1u, 1000};
  }

  Plan plan;
};

// Every data type and operator, in place and out of place, in the
// deterministic single-thread executor. Slices of 64 elements make count
// 1000 run the program several times per chunk.
TEST_P(CompiledPlanTest, AllTypesAndOpsSingle) {
  for (uint64_t count : smallCounts())
    for (bool inplace : {false, true})
      for (DataType type : allDataTypes())
        for (RedOp op : opsFor(plan.info.collective)) {
          RunCase c;
          c.type = type;
          c.op = op;
          c.count = count;
          c.inplace = inplace;
          c.mode = ExecMode::Single;
          c.slice = 64;
          std::string err = runAndCheck(plan, c);
          ASSERT_EQ(err, "") << GetParam();
        }
}

// Every count, in place and out of place, on threads; the data type and
// operator rotate so that each plan meets many of them on threads too.
TEST_P(CompiledPlanTest, AllCountsThreads) {
  std::vector<uint64_t> counts = smallCounts();
  counts.push_back(100003);
  std::vector<DataType> types = allDataTypes();
  std::vector<RedOp> ops = opsFor(plan.info.collective);
  size_t k = std::hash<std::string>()(GetParam());
  for (uint64_t count : counts)
    for (bool inplace : {false, true}) {
      RunCase c;
      c.type = types[k % types.size()];
      c.op = ops[(k / types.size()) % ops.size()];
      ++k;
      c.count = count;
      c.inplace = inplace;
      c.mode = ExecMode::Threads;
      // One worker per rank, two, or a thread per threadblock.
      c.workersPerRank = uint32_t(k % 3);
      // Large counts: a few slices; 1000: dozens, so the FIFOs wrap many
      // times; small counts: slices of 3 elements, several per chunk.
      c.slice = count > 10000 ? 8192 : count >= 1000 ? 16 : 3;
      std::string err = runAndCheck(plan, c);
      ASSERT_EQ(err, "") << GetParam();
    }
}

// Every call streams its stores into the buffers (ExecOptions::
// streamingStoresFrom of 1 byte), with pieces large enough to stream (at
// least 4 KiB of every type), counts that leave odd heads and tails, in
// place and out of place, on threads and on the ProcessGroup.
TEST_P(CompiledPlanTest, AllCountsStreamingStores) {
  std::vector<DataType> types = allDataTypes();
  std::vector<RedOp> ops = opsFor(plan.info.collective);
  size_t k = std::hash<std::string>()(GetParam()) + 1;
  for (uint64_t count : {uint64_t(4097), uint64_t(65539), uint64_t(100003)})
    for (bool inplace : {false, true})
      for (bool processGroup : {false, true}) {
        RunCase c;
        c.type = types[k % types.size()];
        c.op = ops[(k / types.size()) % ops.size()];
        ++k;
        c.count = count;
        c.inplace = inplace;
        c.processGroup = processGroup;
        c.workersPerRank = uint32_t(k % 2);
        c.slice = count == 4097 ? 4096 : 8192 + 7;
        c.streamingStoresFrom = 1;
        std::string err = runAndCheck(plan, c);
        ASSERT_EQ(err, "") << GetParam();
      }
}

// With inexact floating-point data (random fractions, whose sums depend on
// the order), the threads executor and the single-thread executor give the
// same bits: the order of operations is the plan's, not the schedule's.
TEST_P(CompiledPlanTest, ThreadsMatchSingle) {
  const uint32_t n = plan.info.nranks;
  const uint64_t count = 999;
  auto fill = [&](uint32_t rank, uint64_t elems, void *buf) {
    std::mt19937 rng(rank * 7919 + 1);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    float *p = static_cast<float *>(buf);
    for (uint64_t i = 0; i < elems; ++i)
      p[i] = dist(rng);
  };
  std::vector<std::vector<char>> results[2];
  for (ExecMode mode : {ExecMode::Threads, ExecMode::Single}) {
    RunCase c;
    c.type = DataType::Float32;
    c.count = count;
    c.mode = mode;
    c.slice = 100;
    WorldBuffers b;
    makeBuffers(plan, c, b, fill);
    ExecOptions o;
    o.mode = mode;
    o.sliceElements = c.slice;
    Status s = LocalWorld().run(plan, b.send, b.recv, count, c.type, c.op, o);
    ASSERT_TRUE(s.ok()) << s.message();
    results[mode == ExecMode::Single] = b.out;
  }
  for (uint32_t r = 0; r < n; ++r)
    EXPECT_EQ(results[0][r], results[1][r]) << "rank " << r;
}

// The compiler orders every access of a chunk of the user's buffers by
// dependencies or program order, not by messages alone: the runtime's
// out-of-place program and direct sends serve its plans (StepOrder.h).
TEST_P(CompiledPlanTest, AccessesOrderedByDependencies) {
  for (uint32_t r = 0; r < plan.ranks.size(); ++r) {
    const coll::detail::StepOrder order = coll::detail::stepOrder(plan.ranks[r]);
    EXPECT_TRUE(coll::detail::accessesOrderedByDependencies(plan.info, r, plan.ranks[r], order))
        << GetParam() << " rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Plans, CompiledPlanTest, ::testing::ValuesIn(planNames()),
                         [](const ::testing::TestParamInfo<std::string> &info) {
                           return info.param;
                         });

} // namespace
