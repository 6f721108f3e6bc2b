//===- DirectSendsTest.cpp - Sends whose receiver reads in place ----------===//
//
// directSendSteps() (runtime/lib/DirectSends.h): which sends may leave their
// data where it lies, on hand-written programs; and runs of LocalWorld with
// and without direct sends give the reference's results, on plans where
// some sends qualify and some do not.
//
//===----------------------------------------------------------------------===//

#include "DirectSends.h"

#include "HandPlans.h"
#include "TestHelpers.h"
#include "coll/Runtime/PlanIO.h"

#include <gtest/gtest.h>

using namespace coll;
using namespace coll::test;
using coll::detail::directSendSteps;
using coll::detail::DirectSteps;

namespace {

/// directSendSteps() as it is: per step, the bit of the buffer the data
/// lies in.
DirectSteps directBits(const Plan &p, uint32_t rank, bool aliased = false) {
  const RankPlan &rp = p.ranks[rank];
  return directSendSteps(p.info, rank, rp, coll::detail::stepOrder(rp), nullptr, aliased);
}

/// directSendSteps() as 1 (direct) or 0.
DirectSteps direct(const Plan &p, uint32_t rank, bool aliased = false) {
  DirectSteps d = directBits(p, rank, aliased);
  for (std::vector<uint8_t> &tb : d)
    for (uint8_t &v : tb)
      v = v != 0;
  return d;
}

constexpr uint8_t inBit = 1u << unsigned(BufferKind::Input);
constexpr uint8_t outBit = 1u << unsigned(BufferKind::Output);

TEST(DirectSends, SourcesWrittenAfterTheSendDoNotQualify) {
  Plan p = makePlan("direct", CollectiveKind::AllReduce, 2, 4, 4, 2);
  RankPlan &rp = p.ranks[0];
  rp.scratchChunks = 1;
  Threadblock a, b;
  a.sendPeer = 1;
  add(a, step(Opcode::Copy, I, 0, O, 0, 1));           // 0: O0 written ...
  add(a, step(Opcode::Send, O, 0, O, 0, 1));           // 1: ... before its send: direct
  add(a, step(Opcode::Send, I, 1, O, 0, 1));           // 2: the input, never written: direct
  add(a, step(Opcode::Send, O, 1, O, 0, 1));           // 3: O1, which b writes after it: not
  add(a, step(Opcode::Send, S, 0, O, 0, 1));           // 4: scratch: not
  add(a, step(Opcode::Send, O, 2, O, 0, 1), {{1, 1}}); // 5: after b wrote O2: direct
  add(a, step(Opcode::Send, O, 2, O, 0, 2));           // 6: O2 and O3 (b, unordered): not
  add(b, step(Opcode::Copy, I, 1, O, 1, 1), {{0, 3}}); // after a's step 3
  add(b, step(Opcode::Copy, I, 2, O, 2, 1));
  add(b, step(Opcode::Copy, I, 3, O, 3, 1), {{0, 6}}); // after a's step 6
  rp.threadblocks = {a, b};
  DirectSteps d = direct(p, 0);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0], (std::vector<uint8_t>{0, 1, 1, 0, 0, 1, 0}));
  EXPECT_EQ(d[1], (std::vector<uint8_t>{0, 0, 0}));
  // Each names the buffer its data lies in.
  EXPECT_EQ(directBits(p, 0)[0], (std::vector<uint8_t>{0, outBit, inBit, 0, 0, outBit, 0}));
}

TEST(DirectSends, TheInPlaceAliasJoinsInputAndOutput) {
  // Send input chunk 0, then write output chunk 0: in place, one chunk.
  Plan p = makePlan("alias", CollectiveKind::AllReduce, 2, 2, 2, 2);
  p.info.inplace = true;
  Threadblock tb;
  tb.sendPeer = 1;
  add(tb, step(Opcode::Send, I, 0, O, 0, 1));
  add(tb, step(Opcode::Send, I, 1, O, 0, 1));
  add(tb, step(Opcode::Copy, I, 1, O, 0, 1));
  p.ranks[0].threadblocks.push_back(tb);
  EXPECT_EQ(direct(p, 0, /*aliased=*/true)[0], (std::vector<uint8_t>{0, 1, 0}));
  EXPECT_EQ(direct(p, 0, /*aliased=*/false)[0], (std::vector<uint8_t>{1, 1, 0}));

  // Allgather in place: rank 1's input is output chunk 1.
  Plan g = makePlan("gather_alias", CollectiveKind::AllGather, 2, 1, 2, 2);
  g.info.inplace = true;
  Threadblock t1;
  t1.sendPeer = 0;
  add(t1, step(Opcode::Send, I, 0, O, 0, 1));
  add(t1, step(Opcode::Copy, O, 0, O, 1, 1));
  g.ranks[1].threadblocks.push_back(t1);
  EXPECT_EQ(direct(g, 1, true)[0], (std::vector<uint8_t>{0, 0}));
  EXPECT_EQ(direct(g, 1, false)[0], (std::vector<uint8_t>{1, 0}));
}

TEST(DirectSends, ACycleOrAMissingStepGivesNone) {
  Plan p = makePlan("cycle", CollectiveKind::AllReduce, 2, 1, 1, 2);
  Threadblock a, b;
  add(a, step(Opcode::Send, I, 0, O, 0, 1), {{1, 0}});
  add(b, step(Opcode::Copy, I, 0, O, 0, 1), {{0, 0}});
  p.ranks[0].threadblocks = {a, b};
  EXPECT_TRUE(direct(p, 0).empty());
  p.ranks[0].threadblocks[1].deps[0].step = 7; // No such step.
  EXPECT_TRUE(direct(p, 0).empty());
}

TEST(DirectSends, HandPlans) {
  // Every send of the all-pairs alltoall reads the input.
  Plan a2a = allPairsAllToAll(4, 3);
  for (uint32_t r = 0; r < 4; ++r) {
    DirectSteps d = direct(a2a, r);
    const RankPlan &rp = a2a.ranks[r];
    ASSERT_EQ(d.size(), rp.threadblocks.size());
    for (size_t b = 0; b < d.size(); ++b)
      for (size_t i = 0; i < d[b].size(); ++i)
        EXPECT_EQ(d[b][i], rp.threadblocks[b].steps[i].op == Opcode::Send)
            << "rank " << r << " tb " << b << " step " << i;
  }
  // The out-of-place ring copies its input to the output, sends from
  // there, and writes every chunk again later: no `s` qualifies. Its
  // `rrcs` and `rcs` store each chunk for the last time: they send what
  // they stored where it lies.
  for (bool inPlace : {false, true}) {
    Plan ring = ringAllReduce(4, 2, inPlace);
    for (uint32_t r = 0; r < 4; ++r) {
      DirectSteps d = direct(ring, r, inPlace);
      const Threadblock &tb = ring.ranks[r].threadblocks[0];
      ASSERT_EQ(d.size(), 1u);
      ASSERT_EQ(d[0].size(), tb.steps.size());
      for (size_t i = 0; i < tb.steps.size(); ++i)
        EXPECT_EQ(d[0][i], tb.steps[i].op == Opcode::RecvReduceCopySend ||
                               tb.steps[i].op == Opcode::RecvCopySend)
            << "rank " << r << " step " << i << (inPlace ? " in place" : "");
    }
  }
}

TEST(DirectSends, ReceivesSendWhatTheyStoreForTheLastTime) {
  Plan p = makePlan("store_and_send", CollectiveKind::AllReduce, 2, 4, 4, 2);
  RankPlan &rp = p.ranks[0];
  rp.scratchChunks = 1;
  Threadblock a, b;
  a.sendPeer = a.recvPeer = 1;
  add(a, step(Opcode::RecvReduceCopySend, I, 0, O, 0, 1)); // 0: O0, copied over below: not
  add(a, step(Opcode::RecvReduceCopySend, I, 1, O, 1, 1)); // 1: O1, last write: direct
  add(a, step(Opcode::RecvCopySend, I, 0, S, 0, 1));       // 2: scratch: not
  add(a, step(Opcode::RecvCopySend, I, 0, O, 2, 1));       // 3: O2, written again at 4: not
  add(a, step(Opcode::RecvCopySend, I, 0, O, 2, 1));       // 4: O2's last write: direct
  add(a, step(Opcode::RecvReduceSend, I, 3, O, 3, 1));     // 5: stores nothing: not
  add(a, step(Opcode::RecvCopySend, I, 0, O, 3, 1));       // 6: O3, which b writes later: not
  add(b, step(Opcode::Copy, I, 0, O, 0, 1), {{0, 0}});     // after a's step 0
  add(b, step(Opcode::Copy, I, 3, O, 3, 1), {{0, 6}});     // after a's step 6
  rp.threadblocks = {a, b};
  DirectSteps d = direct(p, 0);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0], (std::vector<uint8_t>{0, 1, 0, 0, 1, 0, 0}));
  EXPECT_EQ(d[1], (std::vector<uint8_t>{0, 0}));
  // What they send lies where they store it: Output.
  EXPECT_EQ(directBits(p, 0)[0], (std::vector<uint8_t>{0, outBit, 0, 0, outBit, 0, 0}));
  // In place, input chunk 1 is output chunk 1: the later read of I1 does
  // not matter, but a later write of I1 would.
  p.info.inplace = true;
  add(rp.threadblocks[1], step(Opcode::Copy, I, 2, I, 1, 1), {{0, 1}});
  EXPECT_EQ(direct(p, 0, /*aliased=*/true)[0], (std::vector<uint8_t>{0, 0, 0, 0, 1, 0, 0}));
  EXPECT_EQ(direct(p, 0, /*aliased=*/false)[0], (std::vector<uint8_t>{0, 1, 0, 0, 1, 0, 0}));
}

/// A plan where a direct read of a source written after its send would
/// give the wrong value: each rank sends output chunk 0 and then
/// overwrites it, while the direct send of its input waits at the receiver.
Plan overwriteAfterSend() {
  Plan p = makePlan("overwrite_after_send", CollectiveKind::AllGather, 2, 1, 2, 2);
  for (uint32_t r = 0; r < 2; ++r) {
    Threadblock tb;
    tb.sendPeer = tb.recvPeer = int32_t(1 - r);
    add(tb, step(Opcode::Copy, I, 0, O, 1 - r, 1)); // A value to send ...
    add(tb, step(Opcode::Send, O, 1 - r, O, 0, 1)); // ... not direct: overwritten below
    add(tb, step(Opcode::Send, I, 0, O, 0, 1));     // direct
    add(tb, step(Opcode::Recv, I, 0, O, 1 - r, 1)); // the peer's first message ...
    add(tb, step(Opcode::Recv, I, 0, O, 1 - r, 1)); // ... overwritten by its second
    add(tb, step(Opcode::Copy, I, 0, O, r, 1));     // own block
    p.ranks[r].threadblocks.push_back(tb);
  }
  return p;
}

TEST(DirectSends, RunsMatchTheReference) {
  Plan over = overwriteAfterSend();
  ASSERT_TRUE(validatePlan(over).ok()) << validatePlan(over).message();
  EXPECT_EQ(direct(over, 0)[0], (std::vector<uint8_t>{0, 0, 1, 0, 0, 0}));
  for (const Plan &plan : {over, allPairsAllToAll(4, 3), ringAllReduce(3, 2), ringAllGather(3, 2)})
    for (bool direct : {true, false})
      for (uint64_t count : {uint64_t(1), uint64_t(1000), uint64_t(100003)})
        for (bool inplace : {false, true}) {
          RunCase c;
          c.type = DataType::Int32;
          c.count = count;
          c.inplace = inplace;
          c.slice = count > 10000 ? 4096 : 16;
          ExecOptions o;
          o.directSends = direct;
          ASSERT_EQ(runAndCheck(plan, c, &o), "")
              << plan.info.name << (direct ? " direct" : " through the slots");
        }
}

} // namespace
