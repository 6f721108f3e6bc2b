//===- CompilerStdlibTest.cpp - The library programs, end to end ----------===//
//
// stdlib/ring_allreduce.coll and stdlib/tree_allreduce.coll compiled for
// every rank count from 2 to 64: the verifier's report, a valid plan, the
// plan's shape, a byte-exact round trip through the plan format, and
// deterministic output.
//
//===----------------------------------------------------------------------===//

#include "CompilerTestUtil.h"

#include <gtest/gtest.h>

using namespace coll;
using namespace coll::compiler;
using coll::test::CompilerRun;
using coll::test::countOpcode;

namespace {

class Stdlib : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    ring = CompilerRun::fromStdlib("ring_allreduce.coll").release();
    tree = CompilerRun::fromStdlib("tree_allreduce.coll").release();
  }
  static void TearDownTestSuite() {
    delete ring;
    delete tree;
    ring = tree = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(ring->frontendOk()) << ring->text();
    ASSERT_TRUE(tree->frontendOk()) << tree->text();
  }
  static CompilerRun *ring, *tree;
};
CompilerRun *Stdlib::ring = nullptr;
CompilerRun *Stdlib::tree = nullptr;

/// The number of ranks' output chunks a tree allreduce checks.
constexpr uint32_t TreeChunks = 4; // param nchunks = 4

TEST_F(Stdlib, RingAllreduceForEveryRankCountUpTo64) {
  for (uint32_t n = 2; n <= 64; ++n) {
    SCOPED_TRACE("N = " + std::to_string(n));
    auto c = ring->compile(n);
    ASSERT_TRUE(c) << ring->text();
    ASSERT_TRUE(c->complete);
    // Verification: N chunks, each reduced N - 1 times in one order.
    EXPECT_TRUE(c->report.identicalAcrossRanks);
    EXPECT_TRUE(c->report.differingIndices.empty());
    EXPECT_EQ(c->report.checkedSlots, uint64_t(n) * n);
    EXPECT_EQ(c->report.reductions, uint64_t(n) * (n - 1));
    EXPECT_EQ(c->trace->ops.size(), size_t(n) * 2 * (n - 1));
    // The plan.
    Status st = validatePlan(c->plan);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(c->plan.info.nranks, n);
    EXPECT_EQ(c->plan.info.collective, CollectiveKind::AllReduce);
    EXPECT_EQ(c->plan.info.inputChunks, n);
    EXPECT_TRUE(c->plan.info.inplace);
    for (uint32_t r = 0; r < n; ++r) {
      const RankPlan &rp = c->plan.ranks[r];
      ASSERT_EQ(rp.threadblocks.size(), 1u) << "rank " << r;
      const Threadblock &tb = rp.threadblocks[0];
      EXPECT_EQ(tb.sendPeer, int32_t((r + 1) % n));
      EXPECT_EQ(tb.recvPeer, int32_t((r + n - 1) % n));
      // One step per chunk per lap, with receive-and-forward fused.
      ASSERT_EQ(tb.steps.size(), size_t(2 * n - 1)) << "rank " << r;
    }
    // Per rank: s, (N - 2) rrs, rrcs, (N - 2) rcs, r.
    EXPECT_EQ(countOpcode(c->plan, Opcode::Send), n);
    EXPECT_EQ(countOpcode(c->plan, Opcode::RecvReduceSend), size_t(n) * (n - 2));
    EXPECT_EQ(countOpcode(c->plan, Opcode::RecvReduceCopySend), n);
    EXPECT_EQ(countOpcode(c->plan, Opcode::RecvCopySend), size_t(n) * (n - 2));
    EXPECT_EQ(countOpcode(c->plan, Opcode::Recv), n);
  }
  EXPECT_TRUE(ring->errors().empty()) << ring->text();
}

TEST_F(Stdlib, TreeAllreduceForEveryRankCountUpTo64) {
  for (uint32_t n = 2; n <= 64; ++n) {
    SCOPED_TRACE("N = " + std::to_string(n));
    auto c = tree->compile(n);
    ASSERT_TRUE(c) << tree->text();
    ASSERT_TRUE(c->complete);
    // The total is computed once, at the root, and copied down.
    EXPECT_TRUE(c->report.identicalAcrossRanks);
    EXPECT_TRUE(c->report.differingIndices.empty());
    EXPECT_EQ(c->report.checkedSlots, uint64_t(n) * TreeChunks);
    EXPECT_EQ(c->report.reductions, uint64_t(n - 1) * TreeChunks);
    EXPECT_EQ(c->trace->ops.size(), size_t(2) * (n - 1) * TreeChunks);
    Status st = validatePlan(c->plan);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(c->plan.info.inputChunks, TreeChunks);
    // Every rank talks to its parent and its children only.
    for (uint32_t r = 0; r < n; ++r) {
      for (const Threadblock &tb : c->plan.ranks[r].threadblocks) {
        for (int32_t peer : {tb.sendPeer, tb.recvPeer}) {
          if (peer < 0)
            continue;
          bool parent = r > 0 && uint32_t(peer) == (r - 1) / 2;
          bool child = uint32_t(peer) == 2 * r + 1 || uint32_t(peer) == 2 * r + 2;
          EXPECT_TRUE(parent || child) << "rank " << r << " peer " << peer;
        }
      }
    }
    // Each non-root rank sends its sum up and receives the total once per
    // chunk; the messages are counted at both ends.
    size_t sends = 0, recvs = 0;
    for (const RankPlan &rp : c->plan.ranks)
      for (const Threadblock &tb : rp.threadblocks)
        for (const Instruction &in : tb.steps) {
          sends += opcodeInfo(in.op).send;
          recvs += opcodeInfo(in.op).recv;
        }
    EXPECT_EQ(sends, size_t(2) * (n - 1) * TreeChunks);
    EXPECT_EQ(recvs, size_t(2) * (n - 1) * TreeChunks);
  }
  EXPECT_TRUE(tree->errors().empty()) << tree->text();
}

TEST_F(Stdlib, RingForOneRankFailsItsRequirement) {
  EXPECT_FALSE(ring->compile(1));
  auto errors = ring->errors();
  ASSERT_EQ(errors.size(), 1u) << ring->text();
  EXPECT_EQ(errors[0]->message, "requirement failed for N = 1: a ring needs at least two ranks");
}

TEST_F(Stdlib, TreeWithMoreChunks) {
  PipelineOptions opts;
  opts.instantiate.defines["nchunks"] = 8;
  auto c = tree->compile(8, opts);
  ASSERT_TRUE(c) << tree->text();
  EXPECT_EQ(c->plan.info.inputChunks, 8u);
  EXPECT_EQ(c->report.checkedSlots, 64u);
  EXPECT_TRUE(validatePlan(c->plan).ok());
}

//===--------------------------------------------------------------------===//
// Round trip and determinism
//===--------------------------------------------------------------------===//

TEST_F(Stdlib, PlansRoundTripThroughTheBinaryFormat) {
  for (CompilerRun *lib : {ring, tree})
    for (uint32_t n : {2u, 3u, 4u, 5u, 8u, 13u, 16u, 32u}) {
      SCOPED_TRACE(lib->module->fileName + " N = " + std::to_string(n));
      auto c = lib->compile(n);
      ASSERT_TRUE(c) << lib->text();
      std::vector<uint8_t> bytes = serializePlan(c->plan);
      ASSERT_FALSE(bytes.empty());
      Result<Plan> back = parsePlan(bytes.data(), bytes.size());
      ASSERT_TRUE(back.ok()) << back.message();
      EXPECT_TRUE(*back == c->plan);
      EXPECT_EQ(serializePlan(*back), bytes);
      // One rank alone.
      uint32_t last = n - 1;
      Result<Plan> one = parsePlan(bytes.data(), bytes.size(), int(last));
      ASSERT_TRUE(one.ok()) << one.message();
      EXPECT_EQ(one->loadedRank, int32_t(last));
      ASSERT_EQ(one->ranks.size(), 1u);
      EXPECT_TRUE(one->ranks[0] == c->plan.ranks[last]);
      EXPECT_TRUE(one->info == c->plan.info);
    }
}

TEST_F(Stdlib, CompilingTwiceGivesIdenticalBytes) {
  for (CompilerRun *lib : {ring, tree})
    for (uint32_t n : {2u, 7u, 16u, 33u}) {
      SCOPED_TRACE(lib->module->fileName + " N = " + std::to_string(n));
      auto a = lib->compile(n);
      ASSERT_TRUE(a) << lib->text();
      std::vector<uint8_t> first = serializePlan(a->plan);
      a.reset();
      // A fresh front end as well: nothing may depend on addresses.
      auto again =
          CompilerRun::fromStdlib(lib == ring ? "ring_allreduce.coll" : "tree_allreduce.coll");
      ASSERT_TRUE(again->frontendOk());
      auto b = again->compile(n);
      ASSERT_TRUE(b) << again->text();
      EXPECT_EQ(serializePlan(b->plan), first);
      auto c = lib->compile(n);
      ASSERT_TRUE(c);
      EXPECT_EQ(serializePlan(c->plan), first);
    }
}

TEST_F(Stdlib, FusionOptionsGiveDifferentButValidPlans) {
  PipelineOptions never;
  never.fuse = PipelineOptions::Fuse::Never;
  auto fused = ring->compile(6);
  auto plain = ring->compile(6, never);
  ASSERT_TRUE(fused && plain) << ring->text();
  EXPECT_FALSE(fused->plan == plain->plan);
  EXPECT_NE(serializePlan(fused->plan), serializePlan(plain->plan));
  EXPECT_TRUE(validatePlan(plain->plan).ok());
}

} // namespace
