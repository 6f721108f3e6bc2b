//===- ExecutorTest.cpp - LocalWorld on hand-written plans ----------------===//
//
// Plans built with the Plan structs: a ring allreduce, an allgather whose
// two threadblocks depend on each other, an alltoall with multi-chunk
// messages; plans that deadlock (timeouts and the single-thread executor's
// deadlock report); argument errors; timelines.
//
//===----------------------------------------------------------------------===//

#include "HandPlans.h"
#include "TestHelpers.h"
#include "coll/Runtime/PlanIO.h"

#include <chrono>
#include <gtest/gtest.h>
#include <regex>
#include <sstream>
#include <tuple>

using namespace coll;
using namespace coll::test;

namespace {

/// A local-only reduce-scatter on one rank is trivial; this one exercises
/// `re` (dst = src (op) dst) with two ranks exchanging blocks: each rank
/// receives the peer's copy of its block into scratch and adds its own.
Plan exchangeReduceScatter() {
  Plan p = makePlan("hand_reducescatter", CollectiveKind::ReduceScatter, 2, 2, 1, 1);
  for (uint32_t r = 0; r < 2; ++r) {
    RankPlan &rp = p.ranks[r];
    rp.scratchChunks = 1;
    Threadblock tb;
    tb.sendPeer = tb.recvPeer = int32_t(1 - r);
    add(tb, step(Opcode::Send, I, 1 - r, O, 0, 1));
    add(tb, step(Opcode::Recv, I, 0, S, 0, 1));
    add(tb, step(Opcode::Copy, I, r, O, 0, 1));
    add(tb, step(Opcode::Reduce, S, 0, O, 0, 1));
    rp.threadblocks.push_back(tb);
  }
  return p;
}

/// An out-of-place allreduce of two ranks that accumulates in its input
/// buffer: the executor must run it on a copy, leaving the user's send
/// buffer as it was.
Plan exchangeAllReduceInInput() {
  Plan p = makePlan("hand_allreduce_in_input", CollectiveKind::AllReduce, 2, 2, 2, 2);
  for (uint32_t r = 0; r < 2; ++r) {
    Threadblock tb;
    tb.sendPeer = tb.recvPeer = int32_t(1 - r);
    add(tb, step(Opcode::Send, I, 0, O, 0, 2));
    add(tb, step(Opcode::RecvReduceCopy, I, 0, I, 0, 2));
    add(tb, step(Opcode::Copy, I, 0, O, 0, 2));
    p.ranks[r].threadblocks.push_back(tb);
  }
  return p;
}

std::vector<uint64_t> counts(uint32_t n) {
  return {0, 1, 7, n - 1u, 1000, 100003};
}

/// Runs \p plan for every count, in and out of place, on both executors,
/// for the types and operators given.
void checkPlan(const Plan &plan, std::vector<DataType> types, std::vector<RedOp> ops) {
  for (uint64_t count : counts(plan.info.nranks))
    for (bool inplace : {false, true})
      for (ExecMode mode : {ExecMode::Threads, ExecMode::Single})
        for (DataType type : types)
          for (RedOp op : ops) {
            RunCase c;
            c.type = type;
            c.op = op;
            c.count = count;
            c.inplace = inplace;
            c.mode = mode;
            c.slice = count > 10000 ? 4096 : count >= 1000 ? 16 : 5;
            c.workersPerRank = uint32_t(count % 3);
            ASSERT_EQ(runAndCheck(plan, c), "") << plan.info.name;
          }
}

TEST(HandPlans, PlansAreValid) {
  for (const Plan &p :
       {ringAllReduce(2, 2), ringAllReduce(5, 2), ringAllGather(3, 2), allPairsAllToAll(4, 3),
        exchangeReduceScatter(), exchangeAllReduceInInput()}) {
    Status s = validatePlan(p);
    EXPECT_TRUE(s.ok()) << p.info.name << ": " << s.message();
  }
}

TEST(HandPlans, RingAllReduce) {
  for (uint32_t n : {2u, 3u, 5u})
    checkPlan(ringAllReduce(n, n == 3 ? 2 : 3), {DataType::Float32, DataType::Int8},
              {RedOp::Sum, RedOp::Max});
}

TEST(HandPlans, RingAllReduceEveryTypeAndOp) {
  Plan plan = ringAllReduce(3, 2);
  for (DataType type : allDataTypes())
    for (RedOp op : opsFor(plan.info.collective))
      for (uint64_t count : {1ull, 10ull, 301ull}) {
        RunCase c;
        c.type = type;
        c.op = op;
        c.count = count;
        c.mode = ExecMode::Single;
        c.slice = 7;
        ASSERT_EQ(runAndCheck(plan, c), "");
      }
}

TEST(HandPlans, RingAllGatherWithDependencies) {
  checkPlan(ringAllGather(3, 2), {DataType::Uint8, DataType::Float64}, {RedOp::Sum});
  checkPlan(ringAllGather(4, 3), {DataType::BFloat16}, {RedOp::Sum});
}

TEST(HandPlans, AllToAllMultiChunkMessages) {
  checkPlan(allPairsAllToAll(3, 2), {DataType::Int32}, {RedOp::Sum});
  checkPlan(allPairsAllToAll(4, 3), {DataType::Float16}, {RedOp::Sum});
}

TEST(HandPlans, ReduceScatterWithLocalReduce) {
  checkPlan(exchangeReduceScatter(), {DataType::Int64, DataType::Float32},
            {RedOp::Sum, RedOp::Prod, RedOp::Min, RedOp::Avg});
}

TEST(HandPlans, OutOfPlacePlanWritingItsInput) {
  checkPlan(exchangeAllReduceInInput(), {DataType::Int32, DataType::BFloat16},
            {RedOp::Sum, RedOp::Avg});
}

TEST(HandPlans, OneElementSlicesThroughDepthOne) {
  // 40 elements in slices of one: every threadblock's program runs 20
  // times, and the one-slot FIFOs fill and drain at every message.
  Plan plan = allPairsAllToAll(4, 2);
  for (ExecMode mode : {ExecMode::Threads, ExecMode::Single}) {
    RunCase c;
    c.count = 40;
    c.mode = mode;
    c.slice = 1;
    c.type = DataType::Uint32;
    EXPECT_EQ(runAndCheck(plan, c), "");
  }
}

TEST(HandPlans, AvgDividesIntegersTowardZero) {
  Plan plan = ringAllReduce(3, 2);
  std::vector<int32_t> in[3] = {{1, -1, 5}, {2, -2, 5}, {4, -4, 5}};
  std::vector<int32_t> out[3];
  std::vector<const void *> send;
  std::vector<void *> recv;
  for (int r = 0; r < 3; ++r) {
    out[r].assign(3, 0);
    send.push_back(in[r].data());
    recv.push_back(out[r].data());
  }
  for (ExecMode mode : {ExecMode::Threads, ExecMode::Single}) {
    ExecOptions o;
    o.mode = mode;
    Status s = LocalWorld().run(plan, send, recv, 3, DataType::Int32, RedOp::Avg, o);
    ASSERT_TRUE(s.ok()) << s.message();
    for (int r = 0; r < 3; ++r)
      EXPECT_EQ(out[r], (std::vector<int32_t>{2, -2, 5})) << "rank " << r;
  }
}

//===----------------------------------------------------------------------===//
// Plans that never finish
//===----------------------------------------------------------------------===//

Status runBlocked(const Plan &plan, ExecMode mode, double timeout, uint64_t count = 10,
                  uint32_t workersPerRank = 1) {
  std::vector<float> a(count), b(count), c(count), d(count);
  ExecOptions o;
  o.mode = mode;
  o.workersPerRank = workersPerRank;
  o.timeoutSeconds = timeout;
  return LocalWorld().run(plan, {a.data(), b.data()}, {c.data(), d.data()}, count,
                          DataType::Float32, RedOp::Sum, o);
}

// One LocalWorld: calls of one description in a row run on what the first
// one built (FIFOs, counters, scratch, interpreters), in place and out of
// place in turn; other counts, types and modes in between build anew, and a
// failed call in the middle leaves the next one right. Every call has
// inputs of its own, so a run that read what an earlier call left would be
// caught. 50000 elements run on worker threads, 1001 on the calling thread.
TEST(LocalWorldReuse, RepeatedCallsRunRight) {
  const LocalWorld world;
  const Plan plan = ringAllReduce(3, 2);
  uint64_t call = 0;
  auto fill = [&call](DataType type) {
    return
        [&call, type](uint32_t r, uint64_t n, void *buf) { fillCallInput(type, call, r, n, buf); };
  };
  struct Step {
    uint64_t count;
    DataType type;
    ExecMode mode;
    uint32_t workers;
  };
  const std::vector<Step> steps = {{1001, DataType::Int32, ExecMode::Threads, 1},
                                   {1001, DataType::Int32, ExecMode::Threads, 1},
                                   {1001, DataType::Int32, ExecMode::Threads, 1},
                                   {50000, DataType::Int32, ExecMode::Threads, 1},
                                   {50000, DataType::Int32, ExecMode::Threads, 1},
                                   {50000, DataType::Int32, ExecMode::Threads, 0},
                                   {50000, DataType::Int32, ExecMode::Threads, 0},
                                   {1001, DataType::Float64, ExecMode::Threads, 1},
                                   {1001, DataType::Int32, ExecMode::Single, 1},
                                   {1001, DataType::Int32, ExecMode::Single, 1},
                                   {0, DataType::Int32, ExecMode::Threads, 1},
                                   {1001, DataType::Int32, ExecMode::Threads, 1},
                                   {1001, DataType::Int32, ExecMode::Threads, 1}};
  for (int round = 0; round < 2; ++round)
    for (const Step &st : steps) {
      RunCase c;
      c.count = st.count;
      c.type = st.type;
      c.mode = st.mode;
      c.workersPerRank = st.workers;
      c.slice = 300;
      c.inplace = call % 2 == 1;
      EXPECT_EQ(runAndCheck(plan, c, nullptr, &world, fill(st.type)), "") << "call " << call;
      ++call;
      if (call == 5) {
        // A failed call: rank 1's buffers are missing.
        std::vector<std::vector<char>> in(3, std::vector<char>(4004)), out = in;
        Status s = world.run(plan, {in[0].data(), nullptr, in[2].data()},
                             {out[0].data(), out[1].data(), out[2].data()}, 1001, DataType::Int32,
                             RedOp::Sum);
        EXPECT_FALSE(s.ok());
      }
    }
}

TEST(Deadlocks, TimeoutNamesRankThreadblockStep) {
  Plan plan = recvRecvDeadlock();
  ASSERT_TRUE(validatePlan(plan).ok());
  auto start = std::chrono::steady_clock::now();
  Status s = runBlocked(plan, ExecMode::Threads, 0.3);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(std::regex_match(
      s.message(), std::regex("rank [01] threadblock 0 step 0 \\(r, slice 0\\): timed out after "
                              "0.3 s waiting for message 1 from rank [01] on channel 0.*")))
      << s.message();
  EXPECT_LT(seconds, 5.0);
}

TEST(Deadlocks, TimeoutOnDependencyAndFullFifo) {
  Plan plan = fullFifoDeadlock();
  ASSERT_TRUE(validatePlan(plan).ok()) << validatePlan(plan).message();
  // One worker per rank, then a thread per threadblock.
  for (uint32_t workers : {1u, 0u}) {
    Status s = runBlocked(plan, ExecMode::Threads, 0.3, 10, workers);
    ASSERT_FALSE(s.ok());
    // Every threadblock blocks; any worker may time out first.
    EXPECT_TRUE(std::regex_match(
        s.message(),
        std::regex("(rank 0 threadblock 0 step 1 \\(s, slice 0\\): timed out after 0.3 s waiting "
                   "for a free slot to rank 1 on channel 0 \\(all 1 slots full: 1 messages sent, "
                   "0 taken\\)"
                   "|rank 0 threadblock 1 step 0 \\(s, slice 0\\): timed out after 0.3 s waiting "
                   "for threadblock 0 to finish step 2"
                   "|rank 1 threadblock 0 step 0 \\(r, slice 0\\): timed out after 0.3 s waiting "
                   "for threadblock 1 to finish step 0"
                   "|rank 1 threadblock 1 step 0 \\(r, slice 0\\): timed out after 0.3 s waiting "
                   "for message 1 from rank 0 on channel 1).*")))
        << s.message();
    if (workers == 1) {
      // The worker of the rank lists its other blocked threadblock too.
      EXPECT_TRUE(s.message().find("; rank ") != std::string::npos) << s.message();
    }
  }
}

TEST(Deadlocks, SingleThreadReportsDeadlockAtOnce) {
  Status s = runBlocked(recvRecvDeadlock(), ExecMode::Single, 30);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "deadlock: no threadblock can make progress: rank 0 threadblock 0 step 0 "
                         "(r, slice 0) waits for message 1 from rank 1 on channel 0; rank 1 "
                         "threadblock 0 step 0 (r, slice 0) waits for message 1 from rank 0 on "
                         "channel 0");
  s = runBlocked(fullFifoDeadlock(), ExecMode::Single, 30);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "deadlock: no threadblock can make progress: rank 0 threadblock 0 step 1 (s, slice "
            "0) waits for a free slot to rank 1 on channel 0 (all 1 slots full: 1 messages sent, "
            "0 taken); rank 0 threadblock 1 step 0 (s, slice 0) waits for threadblock 0 to "
            "finish step 2; rank 1 threadblock 0 step 0 (r, slice 0) waits for threadblock 1 to "
            "finish step 0; rank 1 threadblock 1 step 0 (r, slice 0) waits for message 1 from "
            "rank 0 on channel 1");
}

TEST(Deadlocks, CountZeroRunsNothing) {
  // No slices, no messages: even a plan that would deadlock finishes.
  EXPECT_TRUE(runBlocked(recvRecvDeadlock(), ExecMode::Threads, 0.3, 0).ok());
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

TEST(Errors, BadCalls) {
  Plan plan = ringAllReduce(2, 2);
  std::vector<float> a(4), b(4), c(4), d(4);
  std::vector<const void *> send = {a.data(), b.data()};
  std::vector<void *> recv = {c.data(), d.data()};
  LocalWorld w;
  auto run = [&](const Plan &p, std::vector<const void *> s, std::vector<void *> r,
                 ExecOptions o = ExecOptions(), DataType t = DataType::Float32) {
    return w.run(p, s, r, 4, t, RedOp::Sum, o).message();
  };
  EXPECT_EQ(run(plan, {a.data()}, recv),
            "the plan has 2 ranks but 1 send and 2 receive buffers were given");
  EXPECT_EQ(run(plan, {a.data(), nullptr}, recv),
            "rank 1: the send buffer is null (count is not 0)");
  EXPECT_EQ(run(plan, send, {c.data(), nullptr}),
            "rank 1: the receive buffer is null (count is not 0)");
  ExecOptions o;
  o.sliceElements = 0;
  EXPECT_EQ(run(plan, send, recv, o), "the slice size must be at least 1 element");
  o = ExecOptions();
  o.timeoutSeconds = 0;
  EXPECT_EQ(run(plan, send, recv, o), "the timeout must be in (0, 1e9] seconds, not 0");
  EXPECT_EQ(run(plan, send, recv, ExecOptions(), DataType(99)), "rank 0: invalid data type 99");

  Plan one = plan;
  one.ranks.resize(1);
  one.loadedRank = 0;
  EXPECT_EQ(run(one, send, recv),
            "the plan was loaded for rank 0 only; LocalWorld runs every rank");

  // A user-declared collective runs on a count that is a whole number of
  // its C = gcd(2, 2) chunks, without Avg and never in place.
  Plan custom = plan;
  custom.info.collective = CollectiveKind::Custom;
  EXPECT_EQ(run(custom, send, recv), "");
  EXPECT_EQ(w.run(custom, send, recv, 3, DataType::Float32, RedOp::Sum).message(),
            "rank 0: count 3 is not a multiple of 2, the chunks per unit of the plan "
            "'hand_ring_allreduce' (a user-declared collective's chunks must all be the same "
            "size)");
  EXPECT_EQ(w.run(custom, send, recv, 4, DataType::Float32, RedOp::Avg).message(),
            "rank 0: avg is defined for the built-in collectives only; the plan "
            "'hand_ring_allreduce' implements a user-declared collective (use sum, then divide)");
  custom.info.inplace = true;
  EXPECT_EQ(run(custom, send, recv),
            "invalid plan: plan 'hand_ring_allreduce' implements a user-declared collective, "
            "which has no in-place form, but the plan is in-place");

  Plan gather = plan;
  gather.info.collective = CollectiveKind::AllGather;
  EXPECT_EQ(run(gather, send, recv),
            "invalid plan: allgather plan has 2 input and 2 output chunks; expected "
            "nranks times as many output chunks as input chunks");

  Plan broken = plan;
  broken.ranks[0].threadblocks[0].steps[1].count = 0;
  EXPECT_EQ(run(broken, send, recv).rfind("invalid plan: rank 0 threadblock 0 step 1", 0), 0u)
      << run(broken, send, recv);
}

//===----------------------------------------------------------------------===//
// Timelines
//===----------------------------------------------------------------------===//

TEST(Timeline, SingleModeRecordsEveryStep) {
  Plan plan = ringAllGather(3, 2);
  RunCase c;
  c.count = 20;
  c.slice = 4; // ceil(10 / 4) = 3 slices
  c.mode = ExecMode::Single;
  Timeline timeline;
  ExecOptions o;
  o.timeline = &timeline;
  ASSERT_EQ(runAndCheck(plan, c, &o), "");
  size_t steps = 0;
  for (const RankPlan &rp : plan.ranks)
    for (const Threadblock &tb : rp.threadblocks)
      steps += tb.steps.size();
  ASSERT_EQ(timeline.events.size(), 3 * steps);
  for (size_t i = 1; i < timeline.events.size(); ++i) {
    const TraceEvent &a = timeline.events[i - 1], &b = timeline.events[i];
    EXPECT_LE(std::tie(a.rank, a.tb), std::tie(b.rank, b.tb));
    if (a.rank == b.rank && a.tb == b.tb) {
      EXPECT_LE(a.endUs, b.beginUs);
      EXPECT_EQ(a.slice * plan.ranks[a.rank].threadblocks[a.tb].steps.size() + a.step + 1,
                b.slice * plan.ranks[b.rank].threadblocks[b.tb].steps.size() + b.step);
    }
  }
  std::ostringstream os;
  timeline.writeChromeTrace(os, plan);
  std::string json = os.str();
  EXPECT_EQ(json.rfind("{\"displayTimeUnit\":\"ns\"", 0), 0u);
  EXPECT_NE(json.find("\"name\":\"rank 2\""), std::string::npos);
  EXPECT_NE(json.find("\"name\":\"tb 1 send 0 recv 1 ch 0\""), std::string::npos);
  EXPECT_NE(json.find("\"ph\":\"X\",\"name\":\"rcs\""), std::string::npos);
  EXPECT_EQ(json.substr(json.size() - 4), "\n]}\n");
}

TEST(Timeline, ThreadsModeRecordsToo) {
  Plan plan = ringAllReduce(3, 2);
  RunCase c;
  c.count = 9;
  Timeline timeline;
  ExecOptions o;
  o.timeline = &timeline;
  ASSERT_EQ(runAndCheck(plan, c, &o), "");
  EXPECT_EQ(timeline.events.size(), 3 * plan.ranks[0].threadblocks[0].steps.size());
}

} // namespace
