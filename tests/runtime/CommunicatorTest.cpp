//===- CommunicatorTest.cpp - The C++ API: World and Communicator ---------===//
//
// 8 ranks as std::threads, each calling Communicator::execute() on its own
// communicator, checked against the reference with data distinct per
// (rank, element); mismatched plans and arguments fail on every rank
// instead of hanging; bad arguments give precise errors. Plans compiled by
// collc run too when it is built.
//
//===----------------------------------------------------------------------===//

#include "coll/Runtime/Communicator.h"

#include "HandPlans.h"
#include "coll/Runtime/PlanIO.h"
#include "coll/Runtime/Reference.h"

#include <cstring>
#include <functional>
#include <gtest/gtest.h>
#include <string>
#include <thread>
#include <vector>

using namespace coll;
using coll::test::ringAllReduce;

namespace {

/// What one rank's call returned.
struct RankOutcome {
  bool ok = false;
  ErrorKind kind = ErrorKind::Internal;
  std::string message;
};

/// One communicator per rank of \p world; calls \p body(rank, comm) on a
/// thread per rank and joins them.
std::vector<RankOutcome> onEveryRank(World &world,
                                     const std::function<Status(int, Communicator &)> &body) {
  const int n = world.size();
  std::vector<RankOutcome> out(static_cast<size_t>(n));
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int r = 0; r < n; ++r) {
    auto c = world.communicator(r);
    EXPECT_TRUE(c.ok()) << c.message();
    if (!c.ok())
      return out;
    comms.push_back(std::move(*c));
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      Status s = body(r, *comms[size_t(r)]);
      out[size_t(r)] = {s.ok(), comms[size_t(r)]->lastErrorKind(), s.message()};
    });
  for (std::thread &t : threads)
    t.join();
  return out;
}

/// Runs \p plans[r] on rank r (all the same plan, or copies) and compares
/// every rank's output with the reference. "" on success.
std::string runAndCheck(World &world, const std::vector<const Plan *> &plans, DataType type,
                        RedOp op, uint64_t count, bool inplace) {
  const Plan &plan = *plans[0];
  const PlanInfo &info = plan.info;
  const uint32_t n = info.nranks;
  const size_t es = dataTypeSize(type);
  BufferElements e = collectiveBufferElements(info.collective, n, count);
  if (inplace && e.input != e.output)
    return "in place is only tested where input and output have the same size";
  std::vector<std::vector<char>> original(n), in(n), out(n), want(n);
  std::vector<const void *> inputs(n);
  std::vector<void *> wantPtrs(n);
  for (uint32_t r = 0; r < n; ++r) {
    original[r].resize(e.input * es + 1);
    fillTestInput(type, op, n, r, e.input, original[r].data());
    in[r] = original[r];
    out[r].assign(e.output * es + 1, char(0xa5));
    want[r].resize(e.output * es + 1);
    inputs[r] = original[r].data();
    wantPtrs[r] = want[r].data();
  }
  std::vector<RankOutcome> got = onEveryRank(world, [&](int r, Communicator &comm) {
    const void *send = in[size_t(r)].data();
    void *recv = inplace ? in[size_t(r)].data() : out[size_t(r)].data();
    return comm.execute(*plans[size_t(r)], send, recv, count, type, op);
  });
  std::string where = std::string(info.name) + " " + dataTypeName(type) + " " + redOpName(op) +
                      " count " + std::to_string(count) + (inplace ? " in place" : "");
  for (uint32_t r = 0; r < n; ++r)
    if (!got[r].ok)
      return where + ": rank " + std::to_string(r) + ": " + got[r].message;
  if (Status s =
          referenceCollective(info.collective, n, info.root, count, type, op, inputs, wantPtrs);
      !s)
    return where + ": reference: " + s.message();
  for (uint32_t r = 0; r < n; ++r) {
    if (!collectiveDefinesOutput(info.collective, info.root, r))
      continue;
    const void *result = inplace ? in[r].data() : out[r].data();
    uint64_t first = 0;
    if (uint64_t wrong = countMismatches(type, result, want[r].data(), e.output, &first))
      return where + ": rank " + std::to_string(r) + " element " + std::to_string(first) + " is " +
             formatElement(type, result, first) + ", expected " +
             formatElement(type, want[r].data(), first) + " (" + std::to_string(wrong) + " wrong)";
    if (!inplace && std::memcmp(in[r].data(), original[r].data(), e.input * es) != 0)
      return where + ": rank " + std::to_string(r) + "'s send buffer was modified";
  }
  return "";
}

std::shared_ptr<World> makeWorld(int n, double rendezvousTimeout = 60) {
  WorldOptions o;
  o.rendezvousTimeoutSeconds = rendezvousTimeout;
  o.exec.timeoutSeconds = 20;
  auto w = World::create(n, o);
  EXPECT_TRUE(w.ok()) << w.message();
  return w.ok() ? *w : nullptr;
}

TEST(Communicator, EightRanksMatchTheReference) {
  Plan plan = ringAllReduce(8, 2);
  std::shared_ptr<World> world = makeWorld(8);
  ASSERT_TRUE(world);
  std::vector<const Plan *> same(8, &plan);
  // Several rounds on one world: every type with Sum, every operator with
  // int32 and fp32, in place and out of place, counts around the chunking.
  for (uint64_t count : {0, 1, 7, 8, 1003})
    for (bool inplace : {false, true}) {
      for (unsigned t = 0; t < numDataTypes(); ++t)
        ASSERT_EQ(runAndCheck(*world, same, DataType(t), RedOp::Sum, count, inplace), "");
      for (unsigned o = 0; o < numRedOps(); ++o)
        for (DataType t : {DataType::Int32, DataType::Float32})
          ASSERT_EQ(runAndCheck(*world, same, t, RedOp(o), count, inplace), "");
    }
}

TEST(Communicator, EqualPlansInDifferentObjects) {
  std::vector<Plan> copies(8, ringAllReduce(8, 2));
  std::vector<const Plan *> plans;
  for (const Plan &p : copies)
    plans.push_back(&p);
  std::shared_ptr<World> world = makeWorld(8);
  ASSERT_TRUE(world);
  EXPECT_EQ(runAndCheck(*world, plans, DataType::Int64, RedOp::Max, 100, false), "");
}

TEST(Communicator, CompiledPlans) {
#ifndef COLL_TEST_PLAN_DIR
  GTEST_SKIP() << "collc is not built; compiled plans are not available";
#else
  for (const char *name : {"ring_allreduce_n8", "tree_allreduce_n8", "alltoall_allpairs_n8",
                           "ring_allgather_n8", "ring_reducescatter_n8", "direct_reduce_n8"}) {
    Result<Plan> p = loadPlanFile(std::string(COLL_TEST_PLAN_DIR) + "/" + name + ".bin");
    ASSERT_TRUE(p.ok()) << p.message();
    std::shared_ptr<World> world = makeWorld(8);
    ASSERT_TRUE(world);
    std::vector<const Plan *> same(8, &*p);
    for (uint64_t count : {1, 1000})
      EXPECT_EQ(runAndCheck(*world, same, DataType::Float32, RedOp::Sum, count, false), "");
  }
#endif
}

TEST(Communicator, MismatchedPlansFailOnEveryRank) {
  Plan a = ringAllReduce(8, 2), b = ringAllReduce(8, 1);
  std::shared_ptr<World> world = makeWorld(8);
  ASSERT_TRUE(world);
  std::vector<float> in(8 * 16, 1.0f), out(8 * 16);
  std::vector<RankOutcome> got = onEveryRank(*world, [&](int r, Communicator &comm) {
    return comm.execute(r == 5 ? b : a, &in[size_t(r) * 16], &out[size_t(r) * 16], 16,
                        DataType::Float32, RedOp::Sum);
  });
  for (int r = 0; r < 8; ++r) {
    EXPECT_FALSE(got[size_t(r)].ok) << "rank " << r;
    EXPECT_EQ(got[size_t(r)].kind, ErrorKind::Mismatch) << got[size_t(r)].message;
    EXPECT_NE(got[size_t(r)].message.find("different plans"), std::string::npos)
        << got[size_t(r)].message;
    EXPECT_NE(got[size_t(r)].message.find("rank 5"), std::string::npos) << got[size_t(r)].message;
  }
  // The world is still usable.
  std::vector<const Plan *> same(8, &a);
  EXPECT_EQ(runAndCheck(*world, same, DataType::Float32, RedOp::Sum, 16, false), "");
}

TEST(Communicator, MismatchedCountsFailOnEveryRank) {
  Plan plan = ringAllReduce(8, 2);
  std::shared_ptr<World> world = makeWorld(8);
  ASSERT_TRUE(world);
  std::vector<int32_t> in(8 * 32, 1), out(8 * 32);
  std::vector<RankOutcome> got = onEveryRank(*world, [&](int r, Communicator &comm) {
    return comm.execute(plan, &in[size_t(r) * 32], &out[size_t(r) * 32], r == 2 ? 31 : 32,
                        DataType::Int32, RedOp::Sum);
  });
  for (const RankOutcome &o : got) {
    EXPECT_EQ(o.kind, ErrorKind::Mismatch) << o.message;
    EXPECT_NE(o.message.find("rank 2 with count 31"), std::string::npos) << o.message;
  }
}

TEST(Communicator, NullBufferIsAPreciseErrorOnEveryRank) {
  Plan plan = ringAllReduce(8, 2);
  std::shared_ptr<World> world = makeWorld(8);
  ASSERT_TRUE(world);
  std::vector<int32_t> in(8 * 32, 1), out(8 * 32);
  std::vector<RankOutcome> got = onEveryRank(*world, [&](int r, Communicator &comm) {
    return comm.execute(plan, r == 3 ? nullptr : &in[size_t(r) * 32], &out[size_t(r) * 32], 32,
                        DataType::Int32, RedOp::Sum);
  });
  for (int r = 0; r < 8; ++r) {
    const RankOutcome &o = got[size_t(r)];
    EXPECT_EQ(o.kind, ErrorKind::InvalidArgument) << o.message;
    if (r == 3)
      EXPECT_EQ(o.message, "rank 3: the send buffer is null (count is not 0)");
    else
      EXPECT_EQ(o.message, "rank 3 failed: rank 3: the send buffer is null (count is not 0)");
  }
}

TEST(Communicator, BadTypeOperatorAndPlanSize) {
  std::shared_ptr<World> world = makeWorld(1);
  ASSERT_TRUE(world);
  auto comm = world->communicator(0);
  ASSERT_TRUE(comm.ok()) << comm.message();
  Communicator &c = **comm;
  Plan one = ringAllReduce(2, 1);
  one.info.nranks = 1;
  one.ranks.resize(1);
  float x = 0;
  Status s = c.execute(ringAllReduce(2, 1), &x, &x, 1, DataType::Float32, RedOp::Sum);
  EXPECT_EQ(c.lastErrorKind(), ErrorKind::InvalidPlan);
  EXPECT_EQ(s.message(),
            "rank 0: the plan 'hand_ring_allreduce' is for 2 ranks, but the world has 1");
  s = c.execute(one, &x, &x, 1, DataType(77), RedOp::Sum);
  EXPECT_EQ(c.lastErrorKind(), ErrorKind::InvalidArgument);
  EXPECT_EQ(s.message(), "rank 0: invalid data type 77");
  s = c.execute(one, &x, &x, 1, DataType::Float32, RedOp(9));
  EXPECT_EQ(s.message(), "rank 0: invalid reduction operator 9");
  // A plan that fails validation: its only threadblock sends to rank 1.
  s = c.execute(one, &x, &x, 1, DataType::Float32, RedOp::Sum);
  EXPECT_EQ(c.lastErrorKind(), ErrorKind::InvalidPlan) << s.message();
  EXPECT_EQ(s.message().rfind("invalid plan: ", 0), 0u) << s.message();
  // Count 0 with null buffers is fine.
  Plan trivial = one;
  trivial.ranks[0].threadblocks.clear();
  s = c.execute(trivial, nullptr, nullptr, 0, DataType::Float32, RedOp::Sum);
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(c.lastErrorKind(), ErrorKind::None);
}

TEST(Communicator, WorldAndRankErrors) {
  auto bad = World::create(0);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.message(), "the number of ranks must be in [1, 65536], not 0");
  std::shared_ptr<World> world = makeWorld(4);
  ASSERT_TRUE(world);
  auto out = world->communicator(4);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.message(), "rank 4 is out of range: the world has 4 ranks");
  auto c = world->communicator(1);
  ASSERT_TRUE(c.ok());
  auto again = world->communicator(1);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.message(), "rank 1 already has a communicator");
  c->reset();
  EXPECT_TRUE(world->communicator(1).ok());
}

TEST(Communicator, MissingRanksTimeOut) {
  Plan plan = ringAllReduce(2, 2); // Depth 1 would deadlock on 2 ranks.
  std::shared_ptr<World> world = makeWorld(2, /*rendezvousTimeout=*/0.2);
  ASSERT_TRUE(world);
  auto c0 = world->communicator(0);
  ASSERT_TRUE(c0.ok());
  float x[2] = {1, 2};
  Status s = (*c0)->execute(plan, x, x, 2, DataType::Float32, RedOp::Sum);
  EXPECT_EQ((*c0)->lastErrorKind(), ErrorKind::Timeout);
  EXPECT_EQ(s.message().rfind("rank 0: timed out after 0.2 s waiting for 1 of 2 ranks", 0), 0u)
      << s.message();
  // The timed-out call left the rendezvous: a full round still works.
  c0->reset();
  std::vector<const Plan *> same(2, &plan);
  EXPECT_EQ(runAndCheck(*world, same, DataType::Float32, RedOp::Sum, 10, true), "");
}

} // namespace
