//===- OutOfPlaceTest.cpp - In-place plans run out of place ---------------===//
//
// outOfPlaceProgram() (runtime/lib/OutOfPlace.h): which reads of an
// in-place program take the input, which ranks qualify, and that runs on
// the rewritten programs give the reference's results without touching
// the input.
//
//===----------------------------------------------------------------------===//

#include "OutOfPlace.h"

#include "HandPlans.h"
#include "TestHelpers.h"
#include "coll/Runtime/Interpreter.h"
#include "coll/Runtime/PlanIO.h"

#include <gtest/gtest.h>

using namespace coll;
using namespace coll::test;
using coll::detail::outOfPlaceProgram;
using coll::detail::OutOfPlaceProgram;

namespace {

/// The hand ring allreduce in place: no copy step, every step on the
/// output.
Plan inPlaceRing(uint32_t n) {
  return ringAllReduce(n, 2, /*inPlace=*/true);
}

TEST(OutOfPlace, RingReadsEachChunkFromTheInputUntilItIsWritten) {
  const uint32_t n = 4;
  Plan p = inPlaceRing(n);
  ASSERT_TRUE(validatePlan(p).ok()) << validatePlan(p).message();
  for (uint32_t r = 0; r < n; ++r) {
    OutOfPlaceProgram o = outOfPlaceProgram(p.info, p.ranks[r]);
    ASSERT_FALSE(o.empty()) << "rank " << r;
    const std::vector<Instruction> &s = o.steps[0];
    ASSERT_EQ(s.size(), p.ranks[r].threadblocks[0].steps.size());
    // The reduce-scatter reads original values; the all-gather writes.
    for (uint32_t k = 0; k < n; ++k) {
      const OpcodeFlags f = opcodeFlags(s[k].op);
      if (f.readSrc) {
        EXPECT_EQ(s[k].srcBuf, BufferKind::Input) << "rank " << r << " step " << k;
      }
      if (f.writeDst) {
        EXPECT_EQ(s[k].dstBuf, BufferKind::Output) << "rank " << r << " step " << k;
      }
    }
    for (size_t k = n; k < s.size(); ++k)
      EXPECT_EQ(s[k].dstBuf, BufferKind::Output);
    // Everything else is as it was.
    for (size_t k = 0; k < s.size(); ++k) {
      const Instruction &a = s[k], &b = p.ranks[r].threadblocks[0].steps[k];
      EXPECT_TRUE(a.op == b.op && a.srcOff == b.srcOff && a.dstOff == b.dstOff &&
                  a.count == b.count && a.depBegin == b.depBegin && a.depCount == b.depCount);
    }
  }
}

TEST(OutOfPlace, ReadsAfterAWriteTakeTheOutput) {
  // Rank 0: copy chunk 1 over chunk 0, then send chunk 0 (written) and
  // chunk 1 (never written before the send), then write chunk 1.
  Plan p = makePlan("reads", CollectiveKind::AllReduce, 1, 2, 2, 1);
  p.info.inplace = true;
  Threadblock tb;
  add(tb, step(Opcode::Copy, O, 1, O, 0, 1));
  add(tb, step(Opcode::Copy, O, 0, O, 1, 1));
  p.ranks[0].threadblocks.push_back(tb);
  OutOfPlaceProgram o = outOfPlaceProgram(p.info, p.ranks[0]);
  ASSERT_FALSE(o.empty());
  EXPECT_EQ(o.steps[0][0].srcBuf, BufferKind::Input);
  EXPECT_EQ(o.steps[0][0].dstBuf, BufferKind::Output);
  EXPECT_EQ(o.steps[0][1].srcBuf, BufferKind::Output);
  EXPECT_EQ(o.steps[0][1].dstBuf, BufferKind::Output);
}

TEST(OutOfPlace, RanksThatDoNotQualify) {
  auto oneRank = [](std::vector<Instruction> steps,
                    std::vector<std::vector<Dependency>> deps = {}) {
    Plan p = makePlan("q", CollectiveKind::AllReduce, 1, 2, 2, 1);
    p.info.inplace = true;
    Threadblock tb;
    for (size_t i = 0; i < steps.size(); ++i)
      add(tb, steps[i], i < deps.size() ? deps[i] : std::vector<Dependency>{});
    p.ranks[0].threadblocks.push_back(tb);
    return outOfPlaceProgram(p.info, p.ranks[0]);
  };
  // Everything written: qualifies (the control case).
  EXPECT_FALSE(
      oneRank({step(Opcode::Copy, O, 0, O, 1, 1), step(Opcode::Copy, O, 1, O, 0, 1)}).empty());
  // A chunk never written: its value would still need copying.
  EXPECT_TRUE(oneRank({step(Opcode::Copy, O, 0, O, 1, 1)}).empty());
  // `re` reading an original destination.
  EXPECT_TRUE(
      oneRank({step(Opcode::Reduce, O, 1, O, 0, 1), step(Opcode::Copy, O, 0, O, 1, 1)}).empty());
  // A range read of one written and one original chunk.
  EXPECT_TRUE(oneRank({step(Opcode::Copy, O, 1, O, 0, 1), step(Opcode::Copy, O, 0, S, 0, 2),
                       step(Opcode::Copy, S, 0, O, 0, 2)})
                  .empty());
  // A plan that is not in place has nothing to rewrite.
  {
    Plan p = makePlan("q", CollectiveKind::AllReduce, 1, 2, 2, 1);
    Threadblock tb;
    add(tb, step(Opcode::Copy, I, 0, O, 1, 1));
    add(tb, step(Opcode::Copy, I, 1, O, 0, 1));
    p.ranks[0].threadblocks.push_back(tb);
    EXPECT_TRUE(outOfPlaceProgram(p.info, p.ranks[0]).empty());
  }
  // A dependency on a later step of the same threadblock: a cycle.
  EXPECT_TRUE(oneRank({step(Opcode::Copy, O, 0, O, 1, 1), step(Opcode::Copy, O, 1, O, 0, 1)},
                      {{Dependency{0, 1}}})
                  .empty());
}

// Runs of the in-place ring called out of place (the rewritten programs)
// and in place, on both executors' paths: the reference's results, and
// the input untouched.
TEST(OutOfPlace, RunsMatchTheReference) {
  for (uint32_t n : {2u, 3u, 5u}) {
    Plan p = inPlaceRing(n);
    p.ranks.front().scratchChunks = 0;
    for (uint64_t count : {uint64_t(1), uint64_t(1000), uint64_t(70001)})
      for (bool inplace : {false, true})
        for (ExecMode mode : {ExecMode::Threads, ExecMode::Single}) {
          RunCase c;
          c.count = count;
          c.inplace = inplace;
          c.mode = mode;
          c.slice = 999;
          c.type = DataType::Int64;
          EXPECT_EQ(runAndCheck(p, c), "") << "n " << n;
          c.processGroup = true;
          if (mode == ExecMode::Threads) {
            EXPECT_EQ(runAndCheck(p, c), "") << "n " << n << " processes";
          }
        }
  }
}

} // namespace
