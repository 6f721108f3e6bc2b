//===- CompilerLoweringTest.cpp - Passes from a verified trace to a plan --===//
//
// The deadlock checker on hand-built schedules and on the library ring at
// several connection depths; scratch allocation by liveness; the fused shape
// of the ring; instances; and threadblock hints.
//
//===----------------------------------------------------------------------===//

#include "CompilerTestUtil.h"

#include <fstream>
#include <gtest/gtest.h>
#include <set>
#include <sstream>

using namespace coll;
using namespace coll::compiler;
using coll::test::CompilerRun;
using coll::test::countOpcode;
using coll::test::ExpectedDiagnostics;
using coll::test::opcodeSequence;
using coll::test::RejectedProgram;
using coll::test::siteLine;

namespace {

//===--------------------------------------------------------------------===//
// Deadlock checker on hand-built schedules
//===--------------------------------------------------------------------===//

// Sites for the hand-built trace: one line per operation, op k on line
// siteLine(k).
const char *const SiteStatements[] = {
    "copy(input[0][2], to: output[1][0]);", // op 0
    "copy(input[0][3], to: output[1][1]);", // op 1
    "copy(input[1][0], to: output[0][2]);", // op 2
    "copy(input[1][1], to: output[0][3]);", // op 3
};
const std::string SitesSource =
    coll::test::sitesProgram("algorithm sites implements alltoall(chunks = 2)", SiteStatements);

Step send(uint32_t op, uint32_t conn) {
  Step st;
  st.op = Opcode::Send;
  st.traceOp = op;
  st.sendConn = conn;
  st.tb = 0;
  return st;
}
Step recv(uint32_t op, uint32_t conn) {
  Step st;
  st.op = Opcode::Recv;
  st.traceOp = op;
  st.recvConn = conn;
  st.tb = 0;
  return st;
}

class DeadlockCheck : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_TRUE(run.frontendOk()) << run.text();
    // Four transfers: ops 0, 1 from rank 0 to rank 1; ops 2, 3 back.
    std::optional<Trace> t = run.instantiate(2);
    ASSERT_TRUE(t) << run.text();
    trace = std::move(*t);
    ASSERT_EQ(trace.ops.size(), 4u);
  }

  static void oneThreadblock(RankSchedule &rs, uint32_t sendConn, uint32_t recvConn,
                             std::vector<Step> steps) {
    rs.steps = std::move(steps);
    ThreadblockSchedule tb;
    tb.sendConn = sendConn;
    tb.recvConn = recvConn;
    for (uint32_t i = 0; i < rs.steps.size(); ++i)
      tb.steps.push_back(i);
    rs.tbs = {tb};
  }

  /// Two ranks, connection 0 is 0 -> 1 and connection 1 is 1 -> 0, one
  /// threadblock each, doing \p rank0 and \p rank1 (their steps' ops and
  /// connections as given).
  Schedule twoRanks(uint32_t depth, std::vector<Step> rank0, std::vector<Step> rank1) {
    Schedule s;
    s.trace = &trace;
    s.connectionDepth = depth;
    s.connections = {Connection{0, 1, 0, 0, 0}, Connection{1, 0, 0, 0, 0}};
    s.ranks.resize(2);
    oneThreadblock(s.ranks[0], 0, 1, std::move(rank0));
    oneThreadblock(s.ranks[1], 1, 0, std::move(rank1));
    return s;
  }

  CompilerRun run{SitesSource};
  Trace trace;
};

/// A two-rank schedule (see DeadlockCheck::twoRanks), whether the checker
/// passes it, and what it reports.
struct TwoRankSchedule {
  std::string name;
  uint32_t depth;
  std::vector<Step> rank0, rank1;
  bool quiet;
  bool runs;
  /// No errors expected means no diagnostics at all.
  ExpectedDiagnostics expected;
};
void PrintTo(const TwoRankSchedule &c, std::ostream *os) {
  *os << c.name;
}

class DeadlockCheckTwoRanks : public DeadlockCheck,
                              public ::testing::WithParamInterface<TwoRankSchedule> {};

TEST_P(DeadlockCheckTwoRanks, ChecksAsExpected) {
  const TwoRankSchedule &c = GetParam();
  Schedule s = twoRanks(c.depth, c.rank0, c.rank1);
  EXPECT_EQ(checkDeadlock(s, run.diag, c.quiet), c.runs);
  if (c.expected.errors.empty()) {
    EXPECT_TRUE(run.diag.diagnostics().empty()) << run.text();
  } else {
    expectDiagnostics(run, c.expected);
  }
}

// Rank 0 sends ops 0, 1 then receives 2, 3, unless a case says otherwise.
const std::vector<Step> SendFirst0 = {send(0, 0), send(1, 0), recv(2, 1), recv(3, 1)};
const std::vector<Step> SendFirst1 = {send(2, 1), send(3, 1), recv(0, 0), recv(1, 0)};
const std::vector<Step> RecvFirst1 = {recv(0, 0), recv(1, 0), send(2, 1), send(3, 1)};

INSTANTIATE_TEST_SUITE_P(
    DeadlockCheck, DeadlockCheckTwoRanks,
    ::testing::Values(
        // Each rank fills its one slot, then waits for room the other never makes.
        TwoRankSchedule{
            "BothRanksSendingTwiceFirstDeadlocksAtDepthOne", 1, SendFirst0, SendFirst1,
            /*quiet=*/false, /*runs=*/false,
            ExpectedDiagnostics()
                .error("the plan can deadlock for N = 2 with 1 slot per connection: 2 steps wait "
                       "for each other in a cycle",
                       siteLine(1))
                .note("rank 0 threadblock 0 step 1 (s) waits for a free slot on its connection "
                      "to rank 1",
                      siteLine(1))
                .note("rank 1 threadblock 0 step 1 (s) waits for a free slot on its connection "
                      "to rank 0",
                      siteLine(3))},
        TwoRankSchedule{"QuietCheckReportsNothing", 1, SendFirst0, SendFirst1, /*quiet=*/true,
                        /*runs=*/false, ExpectedDiagnostics()},
        TwoRankSchedule{"TheSameScheduleIsFineWithTwoSlots", 2, SendFirst0, SendFirst1,
                        /*quiet=*/false, /*runs=*/true, ExpectedDiagnostics()},
        TwoRankSchedule{"ReceivingFirstIsFineWithOneSlot", 1, SendFirst0, RecvFirst1,
                        /*quiet=*/false, /*runs=*/true, ExpectedDiagnostics()},
        TwoRankSchedule{
            "BothRanksReceivingFirstDeadlocksAtAnyDepth",
            64,
            {recv(2, 1), recv(3, 1), send(0, 0), send(1, 0)},
            RecvFirst1,
            /*quiet=*/false,
            /*runs=*/false,
            ExpectedDiagnostics()
                .error("the plan can deadlock for N = 2 with 64 slots per connection: 2 steps "
                       "wait for each other in a cycle")
                .note("rank 0 threadblock 0 step 0 (r) waits for data from rank 1", siteLine(2))
                .note("rank 1 threadblock 0 step 0 (r) waits for data from rank 0", siteLine(0))},
        TwoRankSchedule{"MessagesReceivedOutOfOrderAreAnInternalError",
                        2,
                        SendFirst0,
                        {recv(1, 0), recv(0, 0), send(2, 1), send(3, 1)},
                        /*quiet=*/false,
                        /*runs=*/false,
                        ExpectedDiagnostics().error("internal error: connection rank 0 -> rank 1 "
                                                    "delivers messages out of order",
                                                    siteLine(1))}),
    coll::test::CaseName());

TEST_F(DeadlockCheck, DependenciesThatWaitForEachOtherDeadlock) {
  // Rank 0: two threadblocks of one local step each, each waiting for the
  // other's step. Rank 1 does nothing.
  Schedule s;
  s.trace = &trace;
  s.ranks.resize(2);
  RankSchedule &rs = s.ranks[0];
  for (uint32_t b = 0; b < 2; ++b) {
    Step st;
    st.op = Opcode::Copy;
    st.traceOp = b;
    st.tb = b;
    rs.steps.push_back(st);
    ThreadblockSchedule tb;
    tb.steps = {b};
    tb.depList = {Dependency{1 - b, 0}};
    tb.depStart = {0, 1};
    rs.tbs.push_back(tb);
  }
  EXPECT_FALSE(checkDeadlock(s, run.diag));
  expectDiagnostics(
      run,
      ExpectedDiagnostics()
          .error("the plan can deadlock for N = 2 with 4 slots per connection: 2 steps wait for "
                 "each other in a cycle")
          .note("rank 0 threadblock 0 step 0 (cpy) waits for threadblock 1 to finish step 0")
          .note("rank 0 threadblock 1 step 0 (cpy) waits for threadblock 0 to finish step 0"));

  // Without the cycle it runs.
  s.ranks[0].tbs[1].depList.clear();
  s.ranks[0].tbs[1].depStart.clear();
  EXPECT_TRUE(checkDeadlock(s, run.diag, /*quiet=*/true));
}

/// The library ring allreduce, through the front end.
class LibraryRing : public ::testing::Test {
protected:
  void SetUp() override { ASSERT_TRUE(lib->frontendOk()) << lib->text(); }

  std::unique_ptr<CompilerRun> lib = CompilerRun::fromStdlib("ring_allreduce.coll");
};

PipelineOptions options(uint32_t connectionDepth, PipelineOptions::Fuse fuse) {
  PipelineOptions opts;
  opts.connectionDepth = connectionDepth;
  opts.fuse = fuse;
  return opts;
}

using DeadlockCompiled = LibraryRing;

TEST_F(DeadlockCompiled, CompiledRingPassesAndReorderedRingIsCaught) {
  auto c = lib->compile(3, options(1, PipelineOptions::Fuse::Never));
  ASSERT_TRUE(c) << lib->text();
  EXPECT_TRUE(checkDeadlock(c->schedule, lib->diag));
  EXPECT_TRUE(lib->diag.diagnostics().empty()) << lib->text();

  // Move every rank's receives after all of its sends: with one slot per
  // connection, every rank blocks on its second send.
  Schedule s = c->schedule;
  for (RankSchedule &rs : s.ranks) {
    ASSERT_EQ(rs.tbs.size(), 1u);
    ThreadblockSchedule &tb = rs.tbs[0];
    std::stable_partition(tb.steps.begin(), tb.steps.end(),
                          [&](uint32_t i) { return !opcodeInfo(rs.steps[i].op).recv; });
    EXPECT_TRUE(tb.depList.empty());
  }
  EXPECT_FALSE(checkDeadlock(s, lib->diag));
  ExpectedDiagnostics expected;
  expected.error("the plan can deadlock for N = 3 with 1 slot per connection: 3 steps wait for "
                 "each other in a cycle");
  for (uint32_t r = 0; r < 3; ++r)
    expected.note("rank " + std::to_string(r) +
                  " threadblock 0 step 1 (s) waits for a free slot on its connection to rank " +
                  std::to_string((r + 1) % 3));
  expectDiagnostics(*lib, expected);
}

//===--------------------------------------------------------------------===//
// Fusion and the connection depth, on the library ring
//===--------------------------------------------------------------------===//

/// The 1-based line of the first occurrence of \p needle in a library file.
unsigned stdlibLine(llvm::StringRef file, llvm::StringRef needle) {
  std::ifstream in(coll::test::stdlibPath(file));
  std::string line;
  for (unsigned n = 1; std::getline(in, line); ++n)
    if (line.find(needle.str()) != std::string::npos)
      return n;
  return 0;
}

using RingFusion = LibraryRing;

TEST_F(RingFusion, FourRanksGiveOneFusedThreadblockPerRank) {
  auto c = lib->compile(4);
  ASSERT_TRUE(c) << lib->text();
  EXPECT_TRUE(c->complete);
  ASSERT_EQ(c->plan.ranks.size(), 4u);
  for (uint32_t r = 0; r < 4; ++r) {
    const RankPlan &rp = c->plan.ranks[r];
    ASSERT_EQ(rp.threadblocks.size(), 1u) << "rank " << r;
    const Threadblock &tb = rp.threadblocks[0];
    EXPECT_EQ(opcodeSequence(tb), "s rrs rrs rrcs rcs rcs r") << "rank " << r;
    EXPECT_EQ(tb.sendPeer, int32_t((r + 1) % 4));
    EXPECT_EQ(tb.recvPeer, int32_t((r + 3) % 4));
    EXPECT_EQ(tb.channel, 0u);
    EXPECT_TRUE(tb.deps.empty());
    EXPECT_EQ(rp.scratchChunks, 0u);
    // Rank r starts with its own chunk r and ends receiving chunk r + 2.
    EXPECT_EQ(tb.steps.front().srcOff, r);
    EXPECT_EQ(tb.steps.back().dstOff, (r + 2) % 4);
  }
  EXPECT_TRUE(validatePlan(c->plan).ok());
}

TEST_F(RingFusion, DepthOneWithFusionForcedIsRejected) {
  EXPECT_FALSE(lib->compile(3, options(1, PipelineOptions::Fuse::Always)));
  auto errors = lib->errors();
  ASSERT_FALSE(errors.empty()) << lib->text();
  EXPECT_NE(errors[0]->message.find("can deadlock"), std::string::npos) << errors[0]->message;
  ExpectedDiagnostics expected;
  expected.error("the plan can deadlock for N = 3 with 1 slot per connection: 3 steps wait for "
                 "each other in a cycle",
                 stdlibLine("ring_allreduce.coll", "acc = reduce("));
  for (uint32_t r = 0; r < 3; ++r)
    expected.note("rank " + std::to_string(r) +
                  " threadblock 0 step 1 (rrs) waits for a free slot on its connection to rank " +
                  std::to_string((r + 1) % 3));
  expectDiagnostics(*lib, expected);
}

TEST_F(RingFusion, DepthOneWithAutoFusionFallsBackToUnfused) {
  auto c = lib->compile(3, options(1, PipelineOptions::Fuse::Auto));
  ASSERT_TRUE(c) << lib->text();
  EXPECT_TRUE(lib->diag.diagnostics().empty()) << lib->text();
  EXPECT_EQ(c->plan.info.connectionDepth, 1u);
  for (Opcode fused : {Opcode::RecvCopySend, Opcode::RecvReduceSend, Opcode::RecvReduceCopySend})
    EXPECT_EQ(countOpcode(c->plan, fused), 0u) << opcodeInfo(fused).mnemonic;
  // Per rank 2 (N - 1) sends, N - 1 receive-reduces and N - 1 receives.
  EXPECT_EQ(countOpcode(c->plan, Opcode::Send), 12u);
  EXPECT_EQ(countOpcode(c->plan, Opcode::RecvReduceCopy), 6u);
  EXPECT_EQ(countOpcode(c->plan, Opcode::Recv), 6u);
  for (const RankPlan &rp : c->plan.ranks) {
    ASSERT_EQ(rp.threadblocks.size(), 1u);
    EXPECT_EQ(rp.threadblocks[0].steps.size(), 8u);
  }
  EXPECT_TRUE(checkDeadlock(c->schedule, lib->diag));
  EXPECT_TRUE(validatePlan(c->plan).ok());
}

TEST_F(RingFusion, DepthOneWithoutFusionGivesTheSamePlanAsTheFallback) {
  auto fallback = lib->compile(3, options(1, PipelineOptions::Fuse::Auto));
  auto never = lib->compile(3, options(1, PipelineOptions::Fuse::Never));
  ASSERT_TRUE(fallback && never) << lib->text();
  EXPECT_TRUE(fallback->plan == never->plan);
}

/// ring_shift with two chunks: each rank sends two messages to its
/// successor and receives two from its predecessor, all at DAG depth 0. The
/// depth order sends both first, which one slot per connection cannot hold
/// on every rank at once; the order found by running the plan alternates.
TEST(OrderBySlots, TwoChunkShiftAtDepthOneAlternatesSendsAndReceives) {
  std::unique_ptr<CompilerRun> shift = CompilerRun::fromStdlib("ring_shift.coll");
  ASSERT_TRUE(shift->frontendOk()) << shift->text();
  for (PipelineOptions::Fuse fuse : {PipelineOptions::Fuse::Auto, PipelineOptions::Fuse::Never}) {
    PipelineOptions opts = options(1, fuse);
    opts.instantiate.defines["nchunks"] = 2;
    auto c = shift->compile(3, opts);
    ASSERT_TRUE(c) << shift->text();
    EXPECT_TRUE(shift->diag.diagnostics().empty()) << shift->text();
    for (uint32_t r = 0; r < 3; ++r) {
      const RankPlan &rp = c->plan.ranks[r];
      ASSERT_EQ(rp.threadblocks.size(), 1u) << "rank " << r;
      EXPECT_EQ(opcodeSequence(rp.threadblocks[0]), "s r s r") << "rank " << r;
      // Chunk 0 before chunk 1 on both ends.
      EXPECT_EQ(rp.threadblocks[0].steps[0].srcOff, 0u);
      EXPECT_EQ(rp.threadblocks[0].steps[2].srcOff, 1u);
    }
    EXPECT_TRUE(checkDeadlock(c->schedule, shift->diag));
    EXPECT_TRUE(validatePlan(c->plan).ok());
    // With two slots the depth order stands: both sends first.
    opts.connectionDepth = 2;
    auto two = shift->compile(3, opts);
    ASSERT_TRUE(two) << shift->text();
    EXPECT_EQ(opcodeSequence(two->plan.ranks[0].threadblocks[0]), "s s r r");
  }
}

/// A plan whose order must be run as it is (--fuse=always) is not
/// reordered: it is refused as before.
TEST(OrderBySlots, FusionForcedIsNotReordered) {
  std::unique_ptr<CompilerRun> shift = CompilerRun::fromStdlib("ring_shift.coll");
  ASSERT_TRUE(shift->frontendOk()) << shift->text();
  PipelineOptions opts = options(1, PipelineOptions::Fuse::Always);
  opts.instantiate.defines["nchunks"] = 2;
  EXPECT_FALSE(shift->compile(3, opts));
  auto errors = shift->errors();
  ASSERT_FALSE(errors.empty());
  EXPECT_NE(errors[0]->message.find("can deadlock for N = 3 with 1 slot"), std::string::npos)
      << errors[0]->message;
}

TEST_F(RingFusion, DepthFourFusesForThreeRanks) {
  auto c = lib->compile(3, options(4, PipelineOptions::Fuse::Always));
  ASSERT_TRUE(c) << lib->text();
  EXPECT_EQ(c->plan.info.connectionDepth, 4u);
  for (const RankPlan &rp : c->plan.ranks) {
    ASSERT_EQ(rp.threadblocks.size(), 1u);
    EXPECT_EQ(opcodeSequence(rp.threadblocks[0]), "s rrs rrcs rcs r");
  }
  EXPECT_EQ(countOpcode(c->plan, Opcode::RecvReduceSend), 3u);
  EXPECT_EQ(countOpcode(c->plan, Opcode::RecvReduceCopySend), 3u);
  EXPECT_EQ(countOpcode(c->plan, Opcode::RecvCopySend), 3u);
  // Auto makes the same choice.
  auto autoFused = lib->compile(3, options(4, PipelineOptions::Fuse::Auto));
  ASSERT_TRUE(autoFused) << lib->text();
  EXPECT_TRUE(autoFused->plan == c->plan);
}

TEST_F(RingFusion, NeverFusingGivesOnlyPlainSteps) {
  auto c = lib->compile(4, options(4, PipelineOptions::Fuse::Never));
  ASSERT_TRUE(c) << lib->text();
  // Per rank: 2 (N - 1) sends, N - 1 rrc and N - 1 r.
  EXPECT_EQ(countOpcode(c->plan, Opcode::Send), 24u);
  EXPECT_EQ(countOpcode(c->plan, Opcode::RecvReduceCopy), 12u);
  EXPECT_EQ(countOpcode(c->plan, Opcode::Recv), 12u);
  EXPECT_EQ(countOpcode(c->plan, Opcode::RecvReduceSend), 0u);
}

//===--------------------------------------------------------------------===//
// Scratch allocation
//===--------------------------------------------------------------------===//

// Rank 1 passes the value through tmp[0], tmp[1], tmp[2] in turn.
const char *const ChainSource = "algorithm chain implements broadcast(root = 0) {\n"
                                "  scratch tmp[3];\n"
                                "  copy(input[0][0], to: output[0][0]);\n"
                                "  copy(input[0][0], to: tmp[1][0]);\n"
                                "  copy(tmp[1][0], to: tmp[1][1]);\n"
                                "  copy(tmp[1][1], to: tmp[1][2]);\n"
                                "  copy(tmp[1][2], to: output[1][0]);\n"
                                "}\n";

/// Allocation on its own: local chains would fuse the staging away.
PipelineOptions withoutFusion() {
  PipelineOptions opts;
  opts.fuse = PipelineOptions::Fuse::Never;
  return opts;
}

TEST(ScratchAllocation, DisjointLifetimesShareChunks) {
  // Rank 1 passes the value through tmp[0], tmp[1], tmp[2] in turn: tmp[0]
  // is dead once tmp[1] is written, so tmp[2] can take its place.
  CompilerRun run(ChainSource);
  ASSERT_TRUE(run.frontendOk()) << run.text();
  auto c = run.compile(2, withoutFusion());
  ASSERT_TRUE(c) << run.text();
  ASSERT_EQ(c->trace->scratchChunks, std::vector<uint32_t>{3});
  const Plan &plan = c->plan;
  EXPECT_EQ(plan.ranks[0].scratchChunks, 0u);
  EXPECT_EQ(plan.ranks[1].scratchChunks, 2u);
  EXPECT_TRUE(validatePlan(plan).ok()) << validatePlan(plan).message();

  ASSERT_EQ(plan.ranks[1].threadblocks.size(), 1u);
  const Threadblock &tb = plan.ranks[1].threadblocks[0];
  EXPECT_EQ(opcodeSequence(tb), "r cpy cpy cpy");
  ASSERT_EQ(tb.steps.size(), 4u);
  auto at = [](BufferKind b, uint32_t off) { return std::make_pair(b, off); };
  EXPECT_EQ(at(tb.steps[0].dstBuf, tb.steps[0].dstOff), at(BufferKind::Scratch, 0));
  EXPECT_EQ(at(tb.steps[1].srcBuf, tb.steps[1].srcOff), at(BufferKind::Scratch, 0));
  EXPECT_EQ(at(tb.steps[1].dstBuf, tb.steps[1].dstOff), at(BufferKind::Scratch, 1));
  EXPECT_EQ(at(tb.steps[2].srcBuf, tb.steps[2].srcOff), at(BufferKind::Scratch, 1));
  EXPECT_EQ(at(tb.steps[2].dstBuf, tb.steps[2].dstOff), at(BufferKind::Scratch, 0)); // reused
  EXPECT_EQ(at(tb.steps[3].srcBuf, tb.steps[3].srcOff), at(BufferKind::Scratch, 0));
  EXPECT_EQ(at(tb.steps[3].dstBuf, tb.steps[3].dstOff), at(BufferKind::Output, 0));
}

TEST(Fusion, LocalChainsThroughDeadStagingCollapse) {
  // The same relay through three staging chunks: with fusion, the receive
  // writes the output directly and no scratch is left.
  CompilerRun run(ChainSource);
  ASSERT_TRUE(run.frontendOk()) << run.text();
  auto c = run.compile(2);
  ASSERT_TRUE(c) << run.text();
  EXPECT_EQ(c->plan.ranks[1].scratchChunks, 0u);
  ASSERT_EQ(c->plan.ranks[1].threadblocks.size(), 1u);
  const Threadblock &tb = c->plan.ranks[1].threadblocks[0];
  EXPECT_EQ(opcodeSequence(tb), "r");
  EXPECT_EQ(tb.steps[0].dstBuf, BufferKind::Output);
  EXPECT_EQ(tb.steps[0].dstOff, 0u);
  EXPECT_TRUE(validatePlan(c->plan).ok());

  // A staging chunk that is read twice must stay.
  CompilerRun twice("algorithm fan implements broadcast(root = 0) {\n"
                    "  scratch tmp[1];\n"
                    "  copy(input[0][0], to: output[0][0]);\n"
                    "  let t = copy(input[0][0], to: tmp[1][0]);\n"
                    "  copy(t, to: output[1][0]);\n"
                    "  for r in 2 .. N { copy(t, to: output[r][0]); }\n"
                    "}\n");
  ASSERT_TRUE(twice.frontendOk()) << twice.text();
  auto d = twice.compile(3);
  ASSERT_TRUE(d) << twice.text();
  EXPECT_EQ(d->plan.ranks[1].scratchChunks, 1u);
}

TEST(ScratchAllocation, TwoBuffersWithDisjointLifetimesShareOneChunk) {
  // Two scratch buffers, each used for one hop after the other: one
  // physical chunk holds both.
  CompilerRun run("algorithm hop implements broadcast(root = 0) {\n"
                  "  scratch a[1];\n"
                  "  scratch b[1];\n"
                  "  copy(input[0][0], to: output[0][0]);\n"
                  "  copy(input[0][0], to: a[1][0]);\n"
                  "  copy(a[1][0], to: output[1][0]);\n"
                  "  copy(output[1][0], to: b[1][0]);\n"
                  "  copy(b[1][0], to: output[1][0]);\n"
                  "}\n");
  ASSERT_TRUE(run.frontendOk()) << run.text();
  auto c = run.compile(2, withoutFusion());
  ASSERT_TRUE(c) << run.text();
  EXPECT_EQ(c->plan.ranks[1].scratchChunks, 1u);
  EXPECT_TRUE(validatePlan(c->plan).ok());
}

TEST(ScratchAllocation, OverlappingLifetimesStayApart) {
  // Rank 1 receives all three chunks into scratch before copying any out.
  CompilerRun run("algorithm keep implements broadcast(root = 0, chunks = 3) {\n"
                  "  scratch tmp[3];\n"
                  "  for i in 0 .. 3 {\n"
                  "    copy(input[0][i], to: output[0][i]);\n"
                  "    copy(input[0][i], to: tmp[1][i]);\n"
                  "  }\n"
                  "  for i in 0 .. 3 {\n"
                  "    copy(tmp[1][i], to: output[1][i]);\n"
                  "  }\n"
                  "}\n");
  ASSERT_TRUE(run.frontendOk()) << run.text();
  auto c = run.compile(2);
  ASSERT_TRUE(c) << run.text();
  const Plan &plan = c->plan;
  EXPECT_EQ(plan.ranks[1].scratchChunks, 3u);
  EXPECT_TRUE(validatePlan(plan).ok());
  ASSERT_EQ(plan.ranks[1].threadblocks.size(), 1u);
  const Threadblock &tb = plan.ranks[1].threadblocks[0];
  ASSERT_EQ(opcodeSequence(tb), "r r r cpy cpy cpy");
  std::set<uint32_t> offsets;
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(tb.steps[k].dstBuf, BufferKind::Scratch);
    offsets.insert(tb.steps[k].dstOff);
    // Each chunk goes out from where it came in.
    EXPECT_EQ(tb.steps[k + 3].srcBuf, BufferKind::Scratch);
    EXPECT_EQ(tb.steps[k + 3].srcOff, tb.steps[k].dstOff);
    EXPECT_EQ(tb.steps[k + 3].dstOff, uint32_t(k));
  }
  EXPECT_EQ(offsets, (std::set<uint32_t>{0, 1, 2}));
}

TEST(ScratchAllocation, RangeStepsKeepTheProgramLayout) {
  // A two-chunk scratch move needs its chunks contiguous, so the rank keeps
  // the declared layout: buffer b follows buffer a.
  CompilerRun run("algorithm wide implements broadcast(root = 0, chunks = 2) {\n"
                  "  scratch a[2];\n"
                  "  scratch b[2];\n"
                  "  copy(input[0][0 .. 2], to: output[0][0 .. 2]);\n"
                  "  copy(input[0][0 .. 2], to: a[1][0 .. 2]);\n"
                  "  copy(a[1][0 .. 2], to: b[1][0 .. 2]);\n"
                  "  copy(b[1][0 .. 2], to: output[1][0 .. 2]);\n"
                  "}\n");
  ASSERT_TRUE(run.frontendOk()) << run.text();
  auto c = run.compile(2, withoutFusion());
  ASSERT_TRUE(c) << run.text();
  EXPECT_EQ(c->plan.ranks[1].scratchChunks, 4u);
  EXPECT_TRUE(validatePlan(c->plan).ok());
  const Threadblock &tb = c->plan.ranks[1].threadblocks[0];
  ASSERT_EQ(opcodeSequence(tb), "r cpy cpy");
  EXPECT_EQ(tb.steps[0].dstOff, 0u);
  EXPECT_EQ(tb.steps[1].srcOff, 0u);
  EXPECT_EQ(tb.steps[1].dstOff, 2u);
  EXPECT_EQ(tb.steps[2].srcOff, 2u);
  EXPECT_EQ(tb.steps[0].count, 2u);
}

//===--------------------------------------------------------------------===//
// Instances
//===--------------------------------------------------------------------===//

const char *const RingAllgatherSource =
    "param k = 1;\n"
    "param nchunks = 1;\n"
    "algorithm ring_allgather implements allgather(chunks = nchunks) with instances = k {\n"
    "  for r in 0 .. N {\n"
    "    let lo = r * nchunks;\n"
    "    let blk = copy(input[r][0 .. nchunks], to: output[r][lo .. lo + nchunks]);\n"
    "    for s in 1 .. N {\n"
    "      blk = copy(blk, to: output[(r + s) % N][lo .. lo + nchunks]);\n"
    "    }\n"
    "  }\n"
    "}\n";

std::unique_ptr<Compilation> compileWith(CompilerRun &run, uint32_t n, int64_t k, int64_t nchunks) {
  PipelineOptions opts;
  opts.instantiate.defines["k"] = k;
  opts.instantiate.defines["nchunks"] = nchunks;
  return run.compile(n, opts);
}

TEST(Instances, TwoInstancesDoubleThreadblocksChannelsAndChunks) {
  CompilerRun run(RingAllgatherSource);
  ASSERT_TRUE(run.frontendOk()) << run.text();
  auto one = compileWith(run, 4, 1, 1);
  auto two = compileWith(run, 4, 2, 1);
  ASSERT_TRUE(one && two) << run.text();
  const Plan &p1 = one->plan, &p2 = two->plan;
  EXPECT_EQ(p1.info.instances, 1u);
  EXPECT_EQ(p2.info.instances, 2u);
  EXPECT_EQ(p1.info.inputChunks, 1u);
  EXPECT_EQ(p1.info.outputChunks, 4u);
  EXPECT_EQ(p2.info.inputChunks, 2u);
  EXPECT_EQ(p2.info.outputChunks, 8u);
  EXPECT_EQ(one->schedule.numChannels, 1u);
  EXPECT_EQ(two->schedule.numChannels, 2u);
  EXPECT_EQ(two->schedule.connections.size(), 2 * one->schedule.connections.size());
  EXPECT_TRUE(validatePlan(p2).ok()) << validatePlan(p2).message();

  for (uint32_t r = 0; r < 4; ++r) {
    const auto &tbs1 = p1.ranks[r].threadblocks, &tbs2 = p2.ranks[r].threadblocks;
    ASSERT_EQ(tbs2.size(), 2 * tbs1.size()) << "rank " << r;
    std::set<uint32_t> channels;
    for (const Threadblock &tb : tbs2)
      channels.insert(tb.channel);
    EXPECT_EQ(channels, (std::set<uint32_t>{0, 1})) << "rank " << r;
    // Instance i is a copy of the single instance on channel i, moving
    // slice i of every chunk: chunk c becomes c * 2 + i.
    size_t ntb = tbs1.size();
    for (uint32_t i = 0; i < 2; ++i)
      for (size_t b = 0; b < ntb; ++b) {
        const Threadblock &a = tbs1[b], &x = tbs2[i * ntb + b];
        EXPECT_EQ(x.channel, a.channel + i);
        EXPECT_EQ(x.sendPeer, a.sendPeer);
        EXPECT_EQ(x.recvPeer, a.recvPeer);
        EXPECT_EQ(opcodeSequence(x), opcodeSequence(a));
        ASSERT_EQ(x.steps.size(), a.steps.size());
        for (size_t p = 0; p < a.steps.size(); ++p) {
          const OpcodeInfo &info = opcodeInfo(a.steps[p].op);
          if (info.readSrc) {
            EXPECT_EQ(x.steps[p].srcOff, a.steps[p].srcOff * 2 + i);
          }
          if (info.writeDst) {
            EXPECT_EQ(x.steps[p].dstOff, a.steps[p].dstOff * 2 + i);
          }
          EXPECT_EQ(x.steps[p].count, a.steps[p].count);
        }
        ASSERT_EQ(x.deps.size(), a.deps.size());
        for (size_t d = 0; d < a.deps.size(); ++d)
          EXPECT_EQ(x.deps[d], (Dependency{uint32_t(a.deps[d].tb + i * ntb), a.deps[d].step}));
      }
  }
}

TEST(Instances, RangeOperationsAreSplitPerChunk) {
  CompilerRun run(RingAllgatherSource);
  ASSERT_TRUE(run.frontendOk()) << run.text();
  auto one = compileWith(run, 3, 1, 2);
  auto two = compileWith(run, 3, 2, 2);
  ASSERT_TRUE(one && two) << run.text();
  // 3 ranks x 3 copies, of two chunks each, or of one chunk each.
  EXPECT_EQ(one->trace->ops.size(), 9u);
  EXPECT_EQ(two->trace->ops.size(), 18u);
  EXPECT_EQ(two->plan.info.inputChunks, 4u);
  EXPECT_EQ(two->plan.info.outputChunks, 12u);
  for (const RankPlan &rp : two->plan.ranks)
    for (const Threadblock &tb : rp.threadblocks)
      for (const Instruction &in : tb.steps)
        EXPECT_EQ(in.count, 1u);
  EXPECT_TRUE(validatePlan(two->plan).ok()) << validatePlan(two->plan).message();
}

TEST(Instances, LibraryRingWithInstances) {
  // The library ring, declared with two instances.
  std::ifstream in(coll::test::stdlibPath("ring_allreduce.coll"));
  std::stringstream text;
  text << in.rdbuf();
  std::string source = text.str();
  size_t at = source.find("with ", source.find("algorithm ring_allreduce"));
  ASSERT_NE(at, std::string::npos);
  source.insert(at + 5, "instances = 2, ");
  CompilerRun run(source);
  ASSERT_TRUE(run.frontendOk()) << run.text();
  auto c = run.compile(4);
  ASSERT_TRUE(c) << run.text();
  EXPECT_EQ(c->trace->instances, 2u);
  EXPECT_EQ(c->plan.info.inputChunks, 8u);
  EXPECT_EQ(c->plan.info.outputChunks, 8u);
  for (const RankPlan &rp : c->plan.ranks) {
    ASSERT_EQ(rp.threadblocks.size(), 2u);
    EXPECT_EQ(rp.threadblocks[0].channel, 0u);
    EXPECT_EQ(rp.threadblocks[1].channel, 1u);
    EXPECT_EQ(opcodeSequence(rp.threadblocks[1]), "s rrs rrs rrcs rcs rcs r");
  }
  EXPECT_TRUE(validatePlan(c->plan).ok());
}

//===--------------------------------------------------------------------===//
// Threadblock hints
//===--------------------------------------------------------------------===//

class ThreadblockHintErrors : public ::testing::TestWithParam<RejectedProgram> {};

TEST_P(ThreadblockHintErrors, AreReportedAtTheHint) {
  expectRejected(GetParam());
}

INSTANTIATE_TEST_SUITE_P(
    ThreadblockHints, ThreadblockHintErrors,
    ::testing::Values(
        RejectedProgram{"OneThreadblockCannotSendOnTwoConnections",
                        "algorithm direct implements allgather() {\n"
                        "  for r in 0 .. N {\n"
                        "    copy(input[r][0], to: output[r][r]);\n"
                        "  }\n"
                        "  copy(input[0][0], to: output[1][0], sendtb: 0);\n"
                        "  copy(input[0][0], to: output[2][0], sendtb: 0);\n"
                        "  copy(input[1][0], to: output[0][1]);\n"
                        "  copy(input[1][0], to: output[2][1]);\n"
                        "  copy(input[2][0], to: output[0][2]);\n"
                        "  copy(input[2][0], to: output[1][2]);\n"
                        "}\n",
                        3,
                        ExpectedDiagnostics()
                            .error("threadblock 0 of rank 0 would send on two connections, rank "
                                   "0 -> rank 1 (channel 0) and rank 0 -> rank 2 (channel 0); a "
                                   "threadblock owns at most one of each",
                                   6)
                            .note("the other connection is used here", 5)},
        RejectedProgram{"OneThreadblockCannotReceiveOnTwoConnections",
                        "algorithm direct implements allgather() {\n"
                        "  for r in 0 .. N {\n"
                        "    copy(input[r][0], to: output[r][r]);\n"
                        "  }\n"
                        "  copy(input[1][0], to: output[0][1], recvtb: 3);\n"
                        "  copy(input[2][0], to: output[0][2], recvtb: 3);\n"
                        "  copy(input[0][0], to: output[1][0]);\n"
                        "  copy(input[0][0], to: output[2][0]);\n"
                        "  copy(input[1][0], to: output[2][1]);\n"
                        "  copy(input[2][0], to: output[1][2]);\n"
                        "}\n",
                        3,
                        ExpectedDiagnostics().error(
                            "threadblock 3 of rank 0 would receive on two connections, rank 1 -> "
                            "rank 0 (channel 0) and rank 2 -> rank 0 (channel 0); a threadblock "
                            "owns at most one of each",
                            6)},
        RejectedProgram{"OneConnectionCannotBelongToTwoThreadblocks",
                        "algorithm two implements allgather(chunks = 2) {\n"
                        "  for r in 0 .. 2 {\n"
                        "    copy(input[r][0 .. 2], to: output[r][2 * r .. 2 * r + 2]);\n"
                        "  }\n"
                        "  copy(input[0][0], to: output[1][0], sendtb: 0);\n"
                        "  copy(input[0][1], to: output[1][1], sendtb: 1);\n"
                        "  copy(input[1][0 .. 2], to: output[0][2 .. 4]);\n"
                        "}\n",
                        2,
                        ExpectedDiagnostics()
                            .error("connection rank 0 -> rank 1 (channel 0) would belong to two "
                                   "threadblocks; a connection belongs to one",
                                   6)
                            .note("its other threadblock is chosen here", 5)},
        RejectedProgram{"OneThreadblockCannotUseTwoChannels",
                        "algorithm a implements allgather() {\n"
                        "  copy(input[0][0], to: output[0][0]);\n"
                        "  copy(input[1][0], to: output[1][1]);\n"
                        "  copy(input[0][0], to: output[1][0], channel: 0, tb: 0);\n"
                        "  copy(input[1][0], to: output[0][1], channel: 1, tb: 0);\n"
                        "}\n",
                        2,
                        ExpectedDiagnostics().error(
                            "threadblock 0 of rank 0 would use channels 0 and 1; a threadblock's "
                            "connections share one channel",
                            5)}),
    coll::test::CaseName());

TEST(ThreadblockHints, HintedGroupingIsKept) {
  // Sends on threadblock 0, receives on threadblock 1: unlike the automatic
  // assignment (one threadblock that forwards what it receives), nothing is
  // fused.
  const char *source = "algorithm hinted implements allgather() {\n"
                       "  for r in 0 .. N {\n"
                       "    let blk = copy(input[r][0], to: output[r][r]);\n"
                       "    for s in 1 .. N {\n"
                       "      blk = copy(blk, to: output[(r + s) % N][r]HINTS);\n"
                       "    }\n"
                       "  }\n"
                       "}\n";
  auto with = [&](llvm::StringRef hints) {
    std::string s = source;
    s.replace(s.find("HINTS"), 5, hints.str());
    return s;
  };
  const uint32_t n = 4;
  CompilerRun hinted(with(", sendtb: 0, recvtb: 1"));
  ASSERT_TRUE(hinted.frontendOk()) << hinted.text();
  auto c = hinted.compile(n);
  ASSERT_TRUE(c) << hinted.text();
  for (uint32_t r = 0; r < n; ++r) {
    const RankPlan &rp = c->plan.ranks[r];
    ASSERT_EQ(rp.threadblocks.size(), 2u) << "rank " << r;
    const Threadblock &sender = rp.threadblocks[0], &receiver = rp.threadblocks[1];
    EXPECT_EQ(sender.sendPeer, int32_t((r + 1) % n));
    EXPECT_EQ(sender.recvPeer, -1);
    EXPECT_EQ(receiver.sendPeer, -1);
    EXPECT_EQ(receiver.recvPeer, int32_t((r + n - 1) % n));
    // The local copy goes on the first threadblock.
    EXPECT_EQ(opcodeSequence(sender), "cpy s s s");
    EXPECT_EQ(opcodeSequence(receiver), "r r r");
    // Forwarding what was received waits for the receiving threadblock.
    EXPECT_FALSE(sender.deps.empty());
  }
  EXPECT_TRUE(validatePlan(c->plan).ok());

  // Reversed numbers put the sends on threadblock 1.
  CompilerRun reversed(with(", sendtb: 1, recvtb: 0"));
  ASSERT_TRUE(reversed.frontendOk()) << reversed.text();
  auto d = reversed.compile(n);
  ASSERT_TRUE(d) << reversed.text();
  for (const RankPlan &rp : d->plan.ranks) {
    ASSERT_EQ(rp.threadblocks.size(), 2u);
    EXPECT_EQ(opcodeSequence(rp.threadblocks[0]), "cpy r r r");
    EXPECT_EQ(opcodeSequence(rp.threadblocks[1]), "s s s");
  }

  CompilerRun automatic(with(""));
  ASSERT_TRUE(automatic.frontendOk()) << automatic.text();
  auto e = automatic.compile(n);
  ASSERT_TRUE(e) << automatic.text();
  for (const RankPlan &rp : e->plan.ranks) {
    ASSERT_EQ(rp.threadblocks.size(), 1u);
    EXPECT_EQ(opcodeSequence(rp.threadblocks[0]), "cpy s rcs rcs r");
  }
}

} // namespace

namespace {

/// For every rank of \p c's schedule: every step of a phase starts after
/// every step of the rank's earlier phases has finished, through its
/// threadblock's order and its waits. Returns the first violation, or "".
std::string checkFenceOrder(const Compilation &c) {
  const Trace &t = *c.trace;
  for (uint32_t r = 0; r < c.schedule.ranks.size(); ++r) {
    const RankSchedule &rs = c.schedule.ranks[r];
    // Positions as (tb, pos); a node's ancestors by a search backwards.
    auto phaseOf = [&](uint32_t tb, uint32_t pos) {
      return t.ops[rs.steps[rs.tbs[tb].steps[pos]].traceOp].phase;
    };
    for (uint32_t tb = 0; tb < rs.tbs.size(); ++tb)
      for (uint32_t pos = 0; pos < rs.tbs[tb].steps.size(); ++pos) {
        const uint32_t phase = phaseOf(tb, pos);
        if (phase == 0)
          continue;
        // Everything this step follows.
        std::set<std::pair<uint32_t, uint32_t>> seen;
        std::vector<std::pair<uint32_t, uint32_t>> work = {{tb, pos}};
        while (!work.empty()) {
          auto [b, p] = work.back();
          work.pop_back();
          if (!seen.insert({b, p}).second)
            continue;
          if (p > 0)
            work.push_back({b, p - 1});
          for (const Dependency &d : rs.tbs[b].depsOf(p))
            work.push_back({d.tb, d.step});
        }
        for (uint32_t b = 0; b < rs.tbs.size(); ++b)
          for (uint32_t p = 0; p < rs.tbs[b].steps.size(); ++p)
            if (phaseOf(b, p) < phase && !seen.count({b, p}))
              return "rank " + std::to_string(r) + ": tb " + std::to_string(tb) + " step " +
                     std::to_string(pos) + " (phase " + std::to_string(phase) +
                     ") does not follow tb " + std::to_string(b) + " step " + std::to_string(p) +
                     " (phase " + std::to_string(phaseOf(b, p)) + ")";
      }
  }
  return "";
}

TEST(Fence, EveryPhaseFollowsTheEarlierOnesOnEveryRank) {
  // The library's pairwise exchange, a ring allreduce with a fence after
  // every step (receive-and-forward pairs must not be fused across one),
  // and local copies between fences.
  auto pairwise = CompilerRun::fromStdlib("pairwise_alltoall.coll");
  ASSERT_TRUE(pairwise->frontendOk()) << pairwise->text();
  for (uint32_t n : {2u, 3u, 5u, 8u}) {
    auto c = pairwise->compile(n);
    ASSERT_TRUE(c) << pairwise->text();
    EXPECT_EQ(checkFenceOrder(*c), "") << "pairwise N = " << n;
    // One exchange per phase: N - 1 phases of sends, each but the first
    // waiting for the previous phase on another threadblock.
    uint64_t deps = 0;
    for (const RankPlan &rp : c->plan.ranks)
      for (const Threadblock &tb : rp.threadblocks)
        deps += tb.deps.size();
    EXPECT_EQ(deps, uint64_t(n) * (n - 2)) << "pairwise N = " << n;
  }
  CompilerRun run(R"(
algorithm fenced_ring implements allreduce(chunks = N) with inplace = true {
  for s in 0 .. N - 1 {
    for r in 0 .. N {
      let c = (r - s) % N;
      reduce(input[r][c], into: input[(r + 1) % N][c]);
    }
    fence;
  }
  for s in 0 .. N - 1 {
    for r in 0 .. N {
      let c = (r + 1 - s) % N;
      copy(input[r][c], to: input[(r + 1) % N][c]);
    }
    fence;
  }
}

algorithm fenced_local implements allgather(chunks = 2) {
  scratch tmp[2];
  for r in 0 .. N {
    copy(input[r][0 .. 2], to: tmp[r][0 .. 2]);
    fence;
    copy(tmp[r][0 .. 2], to: output[r][2 * r .. 2 * r + 2]);
  }
  fence;
  for r in 0 .. N {
    for q in 0 .. N {
      if q != r {
        copy(input[q][0 .. 2], to: output[r][2 * q .. 2 * q + 2]);
      }
    }
  }
}
)");
  ASSERT_TRUE(run.frontendOk()) << run.text();
  for (const char *name : {"fenced_ring", "fenced_local"})
    for (uint32_t n : {2u, 3u, 4u, 7u}) {
      auto c = run.compile(n, {}, name);
      ASSERT_TRUE(c) << run.text();
      EXPECT_EQ(checkFenceOrder(*c), "") << name << " N = " << n;
    }
  // Without fences the same ring fuses its forwards into one step each.
  auto fenced = run.compile(4, {}, "fenced_ring");
  ASSERT_TRUE(fenced);
  EXPECT_EQ(countOpcode(fenced->plan, Opcode::RecvReduceSend), 0u);
}

} // namespace
