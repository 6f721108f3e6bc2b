//===- PredictTest.cpp - The simulator of plans on hand-computed cases ----===//
///
/// predictPlan() (Predict.h) on plans small enough to time by hand: one
/// transfer between two ranks, two flows into one port, a ring, LL and
/// LL128 against Simple, a transfer between nodes; and the topology format.
//===----------------------------------------------------------------------===//

#include "coll/Runtime/Predict.h"

#include "HandPlans.h"
#include "coll/Runtime/CalibrationPlans.h"
#include "coll/Runtime/Topology.h"

#include <gtest/gtest.h>
#include <set>

using namespace coll;
using namespace coll::test;

namespace {

/// One node; ports of \p bw bytes per second and \p lat seconds; free steps
/// and copies unless given.
Topology oneNode(double bw, double lat, double step = 0) {
  Topology t;
  t.name = "test";
  t.intra = {bw, lat};
  t.stepLatency = step;
  return t;
}

/// Rank 0 sends its input to rank 1, which receives it into its output,
/// in one message of \p chunks chunks.
Plan transfer(uint32_t chunks = 1) {
  Plan p = makePlan("transfer", CollectiveKind::Broadcast, 2, chunks, chunks, 2);
  Threadblock a, b;
  a.sendPeer = 1;
  add(a, step(Opcode::Send, I, 0, O, 0, chunks));
  b.recvPeer = 0;
  add(b, step(Opcode::Recv, I, 0, O, 0, chunks));
  p.ranks[0].threadblocks.push_back(a);
  p.ranks[1].threadblocks.push_back(b);
  return p;
}

/// One chunk from rank \p from to rank \p to of \p nranks (the others idle).
Plan transferBetween(uint32_t nranks, uint32_t from, uint32_t to) {
  Plan p = makePlan("transfer", CollectiveKind::Broadcast, nranks, 1, 1, 2);
  Threadblock a, b;
  a.sendPeer = int32_t(to);
  add(a, step(Opcode::Send, I, 0, O, 0, 1));
  b.recvPeer = int32_t(from);
  add(b, step(Opcode::Recv, I, 0, O, 0, 1));
  p.ranks[from].threadblocks.push_back(a);
  p.ranks[to].threadblocks.push_back(b);
  return p;
}

/// Ranks 0 and 1 each send their input to rank 2 at once (a gather).
Plan twoIntoOne() {
  Plan p = makePlan("two_into_one", CollectiveKind::Gather, 3, 1, 3, 2);
  p.info.root = 2;
  for (uint32_t r = 0; r < 2; ++r) {
    Threadblock s;
    s.sendPeer = 2;
    add(s, step(Opcode::Send, I, 0, O, 0, 1));
    p.ranks[r].threadblocks.push_back(s);
    Threadblock t;
    t.recvPeer = int32_t(r);
    add(t, step(Opcode::Recv, I, 0, O, r, 1));
    p.ranks[2].threadblocks.push_back(t);
  }
  return p;
}

PredictOptions oneSlice(uint64_t count) {
  PredictOptions o;
  o.sliceElements = count;
  return o;
}

/// \p count floats of \p plan on \p topo in one slice; on an error, a
/// failed expectation and an empty prediction.
Prediction whole(const Plan &plan, const Topology &topo, uint64_t count) {
  Result<Prediction> p = predictPlan(plan, topo, count, DataType::Float32, oneSlice(count));
  EXPECT_TRUE(p.ok()) << p.message();
  return p.ok() ? *p : Prediction();
}

TEST(Predict, TransferBetweenTwoRanks) {
  // 4 MB at 1 GB/s: 4 ms on the wire, then 10 us of latency.
  const uint64_t count = 1000000;
  Result<Prediction> p =
      predictPlan(transfer(), oneNode(1e9, 10e-6), count, DataType::Float32, oneSlice(count));
  ASSERT_TRUE(p.ok()) << p.message();
  EXPECT_NEAR(p->seconds, 4e-3 + 10e-6, 1e-12);
  EXPECT_EQ(p->sizeBytes, 4000000u);
  EXPECT_NEAR(p->algbw, 4e6 / (4e-3 + 10e-6), 1e-3);
  EXPECT_EQ(p->messages, 1u);
  EXPECT_EQ(p->steps, 2u);
  EXPECT_EQ(p->lastRank, 1u);
  // The critical path: rank 0's step moving 4 ms, the message's latency,
  // rank 1's step.
  EXPECT_NEAR(p->critical.moving, 4e-3, 1e-12);
  EXPECT_NEAR(p->critical.latency, 10e-6, 1e-12);
  EXPECT_EQ(p->critical.fixed, 0);
  EXPECT_EQ(p->critical.waiting, 0);
  EXPECT_EQ(p->critical.steps, 2u);
  EXPECT_EQ(p->critical.hops, 1u);
  EXPECT_EQ(p->critical.betweenNodes, 0u);
  // The flow crossed rank 0's port out and rank 1's port in, busy 4 ms each.
  ASSERT_EQ(p->links.size(), 2u);
  for (const LinkUsage &l : p->links) {
    EXPECT_DOUBLE_EQ(l.bytes, 4e6) << l.name;
    EXPECT_NEAR(l.busy, 4e-3, 1e-12) << l.name;
  }
}

TEST(Predict, RecordsEveryStepsSpan) {
  // The transfer in two slices: rank 0's sends take 2 ms each on the wire;
  // rank 1's receives start as each message arrives, 10 us after its send
  // ends, and take nothing (a receive moves no data over a port).
  const uint64_t count = 1000000;
  PredictOptions o = oneSlice(count / 2);
  o.recordSpans = true;
  Result<Prediction> p = predictPlan(transfer(), oneNode(1e9, 10e-6), count, DataType::Float32, o);
  ASSERT_TRUE(p.ok()) << p.message();
  ASSERT_EQ(p->spans.size(), 4u);
  std::vector<StepSpan> sends, recvs;
  for (const StepSpan &s : p->spans)
    (s.rank == 0 ? sends : recvs).push_back(s);
  ASSERT_EQ(sends.size(), 2u);
  ASSERT_EQ(recvs.size(), 2u);
  for (uint64_t k = 0; k < 2; ++k) {
    EXPECT_EQ(sends[k].slice, k);
    EXPECT_EQ(sends[k].step, 0u);
    EXPECT_EQ(sends[k].tb, 0u);
    EXPECT_NEAR(sends[k].start, 2e-3 * double(k), 1e-12);
    EXPECT_NEAR(sends[k].end, 2e-3 * double(k + 1), 1e-12);
    EXPECT_EQ(recvs[k].slice, k);
    EXPECT_NEAR(recvs[k].start, sends[k].end + 10e-6, 1e-12);
    EXPECT_GE(recvs[k].end, recvs[k].start);
  }
  EXPECT_NEAR(p->seconds, recvs[1].end, 1e-12);
  // Without recordSpans, none.
  Result<Prediction> q =
      predictPlan(transfer(), oneNode(1e9, 10e-6), count, DataType::Float32, oneSlice(count / 2));
  ASSERT_TRUE(q.ok());
  EXPECT_TRUE(q->spans.empty());
  EXPECT_EQ(q->seconds, p->seconds);
}

/// An in-place allgather of two ranks: each sends its block of the output
/// to the other, which receives it into its own output.
Plan inPlaceAllGather() {
  Plan p = makePlan("inplace_allgather", CollectiveKind::AllGather, 2, 1, 2, 2);
  p.info.inplace = true;
  for (uint32_t r = 0; r < 2; ++r) {
    Threadblock t;
    t.sendPeer = t.recvPeer = int32_t(1 - r);
    add(t, step(Opcode::Send, O, r, O, r, 1));
    add(t, step(Opcode::Recv, O, 1 - r, O, 1 - r, 1));
    p.ranks[r].threadblocks.push_back(t);
  }
  return p;
}

TEST(Predict, OutOfPlaceCallsStageAroundThePlan) {
  // Called out of place, each rank of an in-place allgather first copies
  // its 4 MB input into its block of the output: two copies at once over
  // their threadblocks' 2 GB/s and the node's 3 GB/s, 1.5 GB/s each. The
  // plan then runs as in place.
  const uint64_t count = 1000000;
  Topology t = oneNode(1e9, 10e-6);
  t.threadblockBandwidth = 2e9;
  t.nodeBandwidth = 3e9;
  PredictOptions o = oneSlice(count);
  Result<Prediction> inPlace = predictPlan(inPlaceAllGather(), t, count, DataType::Float32, o);
  ASSERT_TRUE(inPlace.ok()) << inPlace.message();
  o.outOfPlace = true;
  Result<Prediction> outOfPlace = predictPlan(inPlaceAllGather(), t, count, DataType::Float32, o);
  ASSERT_TRUE(outOfPlace.ok()) << outOfPlace.message();
  EXPECT_NEAR(outOfPlace->seconds - inPlace->seconds, 4e6 / 1.5e9, 1e-12);
  EXPECT_NEAR(outOfPlace->critical.moving - inPlace->critical.moving, 4e6 / 1.5e9, 1e-12);
  EXPECT_EQ(outOfPlace->steps, inPlace->steps);
  // The copies show on the node's link and each rank's staging link.
  double staged = 0, node = 0;
  for (const LinkUsage &l : outOfPlace->links) {
    if (l.name.find("staging") != std::string::npos)
      staged += l.bytes;
    if (l.name == "node 0")
      node = l.bytes;
  }
  EXPECT_DOUBLE_EQ(staged, 8e6);
  double nodeInPlace = 0;
  for (const LinkUsage &l : inPlace->links)
    if (l.name == "node 0")
      nodeInPlace = l.bytes;
  EXPECT_DOUBLE_EQ(node - nodeInPlace, 8e6);

  // With a private copy rate instead of caps: 4 MB at 2 GB/s.
  Topology priv = oneNode(1e9, 10e-6);
  priv.copyBandwidth = 2e9;
  o.outOfPlace = false;
  Result<Prediction> a = predictPlan(inPlaceAllGather(), priv, count, DataType::Float32, o);
  o.outOfPlace = true;
  Result<Prediction> b = predictPlan(inPlaceAllGather(), priv, count, DataType::Float32, o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NEAR(b->seconds - a->seconds, 4e6 / 2e9, 1e-12);

  // A plan written out of place stages nothing; nor does an in-place
  // allreduce, whose ranks read the input where it lies (OutOfPlace.h).
  for (const Plan &plan : {transfer(), ringAllReduce(4, 2, /*inPlace=*/true)}) {
    o.outOfPlace = false;
    Result<Prediction> x = predictPlan(plan, t, 4000, DataType::Float32, o);
    o.outOfPlace = true;
    Result<Prediction> y = predictPlan(plan, t, 4000, DataType::Float32, o);
    ASSERT_TRUE(x.ok() && y.ok()) << plan.info.name;
    EXPECT_EQ(x->seconds, y->seconds) << plan.info.name;
  }
}

TEST(Predict, StepLatencyAndCopyBandwidth) {
  // Each step costs 1 us before its data moves; the receiver's copy out of
  // the slot runs at 2 GB/s: 1 + 4000 + 10 + 1 + 2000 us.
  const uint64_t count = 1000000;
  Topology t = oneNode(1e9, 10e-6, 1e-6);
  t.copyBandwidth = 2e9;
  Result<Prediction> p = predictPlan(transfer(), t, count, DataType::Float32, oneSlice(count));
  ASSERT_TRUE(p.ok()) << p.message();
  EXPECT_NEAR(p->seconds, (1 + 4000 + 10 + 1 + 2000) * 1e-6, 1e-12);
  EXPECT_NEAR(p->critical.fixed, 2e-6, 1e-12);
  EXPECT_NEAR(p->critical.moving, 6000e-6, 1e-12);
  EXPECT_NEAR(p->critical.latency, 10e-6, 1e-12);
}

TEST(Predict, TwoFlowsShareAPort) {
  // Both flows enter rank 2's port: each gets half of it, so both take 2x.
  const uint64_t count = 250000; // 1 MB each
  Result<Prediction> p =
      predictPlan(twoIntoOne(), oneNode(1e9, 5e-6), count, DataType::Float32, oneSlice(count));
  ASSERT_TRUE(p.ok()) << p.message();
  EXPECT_NEAR(p->seconds, 2e-3 + 5e-6, 1e-12);
  for (const LinkUsage &l : p->links)
    if (l.name == "rank 2 in") {
      EXPECT_DOUBLE_EQ(l.bytes, 2e6);
      EXPECT_NEAR(l.busy, 2e-3, 1e-12);
    }
  // One flow alone takes half as long.
  Result<Prediction> one =
      predictPlan(transfer(), oneNode(1e9, 5e-6), count, DataType::Float32, oneSlice(count));
  ASSERT_TRUE(one.ok()) << one.message();
  EXPECT_NEAR(one->seconds, 1e-3 + 5e-6, 1e-12);
}

TEST(Predict, RingAllReduce) {
  // N = 4, one slice: 2(N - 1) messages of a chunk in a chain, each a
  // chunk's time on the wire plus a latency; depth 2 never stalls a send.
  const uint32_t n = 4;
  const uint64_t count = 4000000; // 16 MB per rank: chunks of 4 MB
  const double chunk = 4e6 / 1e9, lat = 20e-6;
  Result<Prediction> p = predictPlan(ringAllReduce(n, 2), oneNode(1e9, lat), count,
                                     DataType::Float32, oneSlice(count));
  ASSERT_TRUE(p.ok()) << p.message();
  EXPECT_NEAR(p->seconds, 2 * (n - 1) * (chunk + lat), 1e-9);
  EXPECT_EQ(p->messages, uint64_t(n) * 2 * (n - 1));
  // The chain is the 2(N - 1) messages, each a chunk's time and a latency.
  EXPECT_EQ(p->critical.hops, 2 * (n - 1));
  EXPECT_NEAR(p->critical.moving, 2 * (n - 1) * chunk, 1e-9);
  EXPECT_NEAR(p->critical.latency, 2 * (n - 1) * lat, 1e-9);
  EXPECT_NEAR(p->critical.fixed + p->critical.moving + p->critical.latency + p->critical.waiting,
              p->seconds, 1e-9);
  EXPECT_NEAR(p->busbw, 16e6 / p->seconds * 2 * (n - 1) / n, 1e-3);

  // Depth 1: each rank's fused receive-and-send step waits for a free slot
  // at its successor while holding its own: the runtime deadlocks there,
  // and so does the simulation, which says so.
  Result<Prediction> shallow = predictPlan(ringAllReduce(n, 1), oneNode(1e9, lat), count,
                                           DataType::Float32, oneSlice(count));
  ASSERT_FALSE(shallow.ok());
  EXPECT_NE(shallow.message().find("waiting for a free slot to send to rank"), std::string::npos)
      << shallow.message();
  EXPECT_NE(shallow.message().find("deadlock at connection depth 1"), std::string::npos)
      << shallow.message();

  // In 8 slices: a threadblock runs slice after slice, and each slice's
  // chain waits for the one before it (the ring's last step of a slice
  // precedes the next slice's first send), so the slices add their
  // latencies: 8 x 2(N - 1) x (chunk / 8 + latency).
  PredictOptions sliced;
  sliced.sliceElements = count / n / 8;
  Result<Prediction> slices =
      predictPlan(ringAllReduce(n, 2), oneNode(1e9, lat), count, DataType::Float32, sliced);
  ASSERT_TRUE(slices.ok()) << slices.message();
  EXPECT_EQ(slices->slices, 8u);
  EXPECT_NEAR(slices->seconds, 8 * 2 * (n - 1) * (chunk / 8 + lat), 1e-9);
}

TEST(Predict, LineProtocolsCarryLessPerByte) {
  const uint64_t count = 1000000; // 4 MB
  PredictOptions o = oneSlice(count);
  o.forceProtocol = true;
  o.protocol = ProtocolKind::LL;
  Result<Prediction> ll = predictPlan(transfer(), oneNode(1e9, 0), count, DataType::Float32, o);
  ASSERT_TRUE(ll.ok()) << ll.message();
  EXPECT_EQ(ll->protocol, ProtocolKind::LL);
  EXPECT_NEAR(ll->seconds, 8e-3, 1e-12); // 16-byte lines of 8 data bytes
  o.protocol = ProtocolKind::LL128;
  Result<Prediction> ll128 = predictPlan(transfer(), oneNode(1e9, 0), count, DataType::Float32, o);
  ASSERT_TRUE(ll128.ok()) << ll128.message();
  EXPECT_NEAR(ll128->seconds, (4000000 + 119) / 120 * 128 / 1e9, 1e-12);
  // A protocol's own step latency applies under it.
  Topology t = oneNode(1e9, 0, 5e-6);
  t.lineStepLatency = 1e-6;
  o.protocol = ProtocolKind::LL;
  Result<Prediction> fast = predictPlan(transfer(), t, 1, DataType::Float32, o);
  o.forceProtocol = false;
  Result<Prediction> simple = predictPlan(transfer(), t, 1, DataType::Float32, o);
  ASSERT_TRUE(fast.ok() && simple.ok());
  EXPECT_NEAR(fast->seconds, 2e-6 + 16 / 1e9, 1e-12);
  EXPECT_NEAR(simple->seconds, 10e-6 + 4 / 1e9, 1e-12);
}

/// A step of several chunks pays piece-latency for each beyond its first
/// (the GPU kernel moves each chunk as a copy of its own), on both ends.
TEST(Predict, PieceLatencyPerChunkBeyondTheFirst) {
  const Plan p = transfer(4);
  Topology t = oneNode(1e9, 0, 5e-6);
  Result<Prediction> plain = predictPlan(p, t, 4, DataType::Float32, oneSlice(4));
  ASSERT_TRUE(plain.ok()) << plain.message();
  EXPECT_NEAR(plain->seconds, 2 * 5e-6 + 16 / 1e9, 1e-12);
  t.pieceLatency = 1e-6;
  Result<Prediction> pieces = predictPlan(p, t, 4, DataType::Float32, oneSlice(4));
  ASSERT_TRUE(pieces.ok()) << pieces.message();
  EXPECT_NEAR(pieces->seconds, 2 * (5e-6 + 3 * 1e-6) + 16 / 1e9, 1e-12);
  EXPECT_NEAR(pieces->critical.fixed, 2 * (5e-6 + 3 * 1e-6), 1e-12);
  // A step of one chunk pays none.
  Result<Prediction> one = predictPlan(transfer(), t, 1, DataType::Float32, oneSlice(1));
  ASSERT_TRUE(one.ok()) << one.message();
  EXPECT_NEAR(one->seconds, 2 * 5e-6 + 4 / 1e9, 1e-12);
}

/// A step that waits for another threadblock's step starts
/// dependency-latency after it: two chains of steps of 5 us.
TEST(Predict, DependencyLatencyPerCrossThreadblockWait) {
  Topology t = oneNode(1e9, 0, 5e-6);
  Result<Prediction> free =
      predictPlan(dependencyChainPlan(3), t, 3, DataType::Float32, oneSlice(1));
  ASSERT_TRUE(free.ok()) << free.message();
  EXPECT_NEAR(free->seconds, 3 * 5e-6, 1e-12);
  t.dependencyLatency = 2e-6;
  Result<Prediction> paid =
      predictPlan(dependencyChainPlan(3), t, 3, DataType::Float32, oneSlice(1));
  ASSERT_TRUE(paid.ok()) << paid.message();
  EXPECT_NEAR(paid->seconds, 3 * 5e-6 + 2 * 2e-6, 1e-12);
  EXPECT_NEAR(paid->critical.latency, 2 * 2e-6, 1e-12);
  EXPECT_EQ(paid->critical.hops, 2u);
  // Threadblocks that wait for none pay nothing.
  Result<Prediction> apart = predictPlan(localCopyPlan(3), t, 3, DataType::Float32, oneSlice(1));
  ASSERT_TRUE(apart.ok()) << apart.message();
  EXPECT_NEAR(apart->seconds, 5e-6, 1e-12);
}

TEST(Predict, RecvReduceLatencyPerStepThatReducesAReceive) {
  // A ping-pong of 3 round trips: 6 messages, each a step on both sides
  // (5 us each) and a trip of 1 us (and 4 bytes at 1 TB/s, 4 ps, within the
  // tolerance); received by rrc, each receiving step costs 2 us more. A
  // receive that copies (r) does not.
  Topology t = oneNode(1e12, 1e-6, 5e-6);
  t.recvReduceLatency = 2e-6;
  EXPECT_NEAR(whole(pingPongPlan(3), t, 1).seconds, 6 * (2 * 5e-6 + 1e-6), 1e-10);
  EXPECT_NEAR(whole(pingPongPlan(3, Opcode::RecvReduceCopy), t, 1).seconds,
              6 * (2 * 5e-6 + 1e-6 + 2e-6), 1e-10);
  t.recvReduceLatency = 0;
  EXPECT_NEAR(whole(pingPongPlan(3, Opcode::RecvReduceCopy), t, 1).seconds, 6 * (2 * 5e-6 + 1e-6),
              1e-10);
}

/// A call pays call-latency, and call-rank-latency for each rank beyond
/// the first on its fullest node (one host thread prepares them all).
TEST(Predict, CallRankLatencyPerRankOfTheFullestNode) {
  Topology t = oneNode(1e9, 0, 5e-6);
  t.callLatency = 10e-6;
  t.callRankLatency = 1e-6;
  Result<Prediction> two = predictPlan(transfer(), t, 1, DataType::Float32, oneSlice(1));
  ASSERT_TRUE(two.ok()) << two.message();
  EXPECT_NEAR(two->seconds, 10e-6 + 1e-6 + 2 * 5e-6 + 4 / 1e9, 1e-12);
  // On nodes of one rank each, no rank shares its node's host thread.
  t.ranksPerNode = 1;
  t.inter = {1e9, 0};
  t.nicsPerNode = 1;
  Result<Prediction> apart = predictPlan(transfer(), t, 1, DataType::Float32, oneSlice(1));
  ASSERT_TRUE(apart.ok()) << apart.message();
  EXPECT_NEAR(apart->seconds, 10e-6 + 2 * 5e-6 + 4 / 1e9, 1e-12);
  EXPECT_DOUBLE_EQ(callSeconds(t, 8), 10e-6);
  t.ranksPerNode = 4;
  EXPECT_DOUBLE_EQ(callSeconds(t, 8), 13e-6);
  EXPECT_DOUBLE_EQ(callSeconds(t, 2), 11e-6);
  t.ranksPerNode = 0;
  EXPECT_DOUBLE_EQ(callSeconds(t, 1), 10e-6);
}

TEST(Predict, AcrossNodesUsesTheNics) {
  Topology t = oneNode(100e9, 1e-6);
  t.ranksPerNode = 1;
  t.inter = {1e9, 50e-6};
  const uint64_t count = 250000; // 1 MB
  Result<Prediction> p = predictPlan(transfer(), t, count, DataType::Float32, oneSlice(count));
  ASSERT_TRUE(p.ok()) << p.message();
  EXPECT_NEAR(p->seconds, 1e-3 + 50e-6, 1e-12);
  EXPECT_EQ(p->critical.betweenNodes, 1u);
  ASSERT_EQ(p->links.size(), 2u);
  EXPECT_EQ(p->links[0].name, "node 0 nic 0 out");
  EXPECT_EQ(p->links[1].name, "node 1 nic 0 in");
  // An oversubscribed core of half the NICs' bandwidth halves the rate.
  t.oversubscription = 4; // 2 nodes x 1 GB/s / 4 = 0.5 GB/s
  Result<Prediction> slow = predictPlan(transfer(), t, count, DataType::Float32, oneSlice(count));
  ASSERT_TRUE(slow.ok()) << slow.message();
  EXPECT_NEAR(slow->seconds, 2e-3 + 50e-6, 1e-12);
  // A core that its flows cannot fill (2 nodes x 1 GB/s / 2 = 1 GB/s for
  // one flow of at most 1 GB/s) costs nothing.
  t.oversubscription = 2;
  Result<Prediction> slack = predictPlan(transfer(), t, count, DataType::Float32, oneSlice(count));
  ASSERT_TRUE(slack.ok()) << slack.message();
  EXPECT_NEAR(slack->seconds, 1e-3 + 50e-6, 1e-12);
}

/// With leaf switches, the taper is between leaves only: a message under
/// one leaf crosses its NICs alone, one between leaves its leaves' uplink
/// and downlink (the leaf's ports times a NIC's bandwidth, over the
/// oversubscription); rail-optimised, a leaf's switch i serves NIC i.
TEST(Predict, LeavesTaperBetweenLeavesOnly) {
  Topology t = oneNode(100e9, 1e-6);
  t.ranksPerNode = 1;
  t.inter = {1e9, 50e-6};
  t.oversubscription = 4;
  t.nodesPerLeaf = 2;
  const uint64_t count = 250000; // 1 MB
  EXPECT_NEAR(whole(transferBetween(4, 0, 1), t, count).seconds, 1e-3 + 50e-6, 1e-12);
  // Leaf 0's uplink and leaf 1's downlink: 2 ports x 1 GB/s / 4 each.
  Prediction across = whole(transferBetween(4, 0, 2), t, count);
  EXPECT_NEAR(across.seconds, 2e-3 + 50e-6, 1e-12);
  std::set<std::string> names;
  for (const LinkUsage &l : across.links)
    names.insert(l.name);
  EXPECT_EQ(names, (std::set<std::string>{"node 0 nic 0 out", "leaf 0 up", "leaf 1 down",
                                          "node 2 nic 0 in"}));
  // A last leaf that is not full has fewer ports: node 2 alone, 1 GB/s / 4.
  EXPECT_NEAR(whole(transferBetween(3, 0, 2), t, count).seconds, 4e-3 + 50e-6, 1e-12);
  // Two NICs per node: one leaf switch holds both, its ports the nodes' NICs.
  t.ranksPerNode = 2;
  t.nicsPerNode = 2;
  EXPECT_NEAR(whole(transferBetween(8, 0, 3), t, count).seconds, 1e-3 + 50e-6, 1e-12);
  EXPECT_NEAR(whole(transferBetween(8, 0, 5), t, count).seconds, 1e-3 + 50e-6, 1e-12);
  // Rail-optimised: rank 0 (node 0, NIC 0) and rank 2 (node 1, NIC 0) share
  // switch 0 of leaf 0; rank 3 is on its switch 1, which a message reaches
  // through the spine: 2 ports x 1 GB/s / 4.
  t.railOptimised = true;
  EXPECT_NEAR(whole(transferBetween(8, 0, 2), t, count).seconds, 1e-3 + 50e-6, 1e-12);
  EXPECT_NEAR(whole(transferBetween(8, 0, 3), t, count).seconds, 2e-3 + 50e-6, 1e-12);
  // Full bisection: no taper anywhere.
  t.oversubscription = 1;
  EXPECT_NEAR(whole(transferBetween(8, 0, 7), t, count).seconds, 1e-3 + 50e-6, 1e-12);
}

TEST(Predict, BetweenNodesTheSenderHandsTheMessageOn) {
  // Across nodes a sending step hands its message to the network and ends
  // (the network engine, or a GIN put, moves it): rank 0's step ends after
  // its fixed cost; the message arrives 1 ms of wire and 50 us later, and
  // rank 1's step runs then. Within a node the sending step moves the data
  // itself and ends when it has.
  Topology t = oneNode(1e9, 50e-6, 2e-6);
  t.ranksPerNode = 1;
  t.inter = {1e9, 50e-6};
  const uint64_t count = 250000; // 1 MB
  PredictOptions o = oneSlice(count);
  o.recordSpans = true;
  Result<Prediction> p = predictPlan(transfer(), t, count, DataType::Float32, o);
  ASSERT_TRUE(p.ok()) << p.message();
  ASSERT_EQ(p->spans.size(), 2u);
  const StepSpan &send = p->spans[0].rank == 0 ? p->spans[0] : p->spans[1];
  const StepSpan &recv = p->spans[0].rank == 0 ? p->spans[1] : p->spans[0];
  EXPECT_NEAR(send.end - send.start, 2e-6, 1e-12);
  EXPECT_NEAR(recv.start, 2e-6 + 1e-3 + 50e-6, 1e-12);
  EXPECT_NEAR(p->seconds, 2e-6 + 1e-3 + 50e-6 + 2e-6, 1e-12);
  // The critical path still goes through the message: two steps, one hop.
  EXPECT_EQ(p->critical.steps, 2u);
  EXPECT_EQ(p->critical.hops, 1u);
  EXPECT_NEAR(p->critical.moving, 1e-3, 1e-12);
  t.ranksPerNode = 0;
  Result<Prediction> q = predictPlan(transfer(), t, count, DataType::Float32, o);
  ASSERT_TRUE(q.ok()) << q.message();
  const StepSpan &local = q->spans[0].rank == 0 ? q->spans[0] : q->spans[1];
  EXPECT_NEAR(local.end - local.start, 2e-6 + 1e-3, 1e-12);
}

TEST(Predict, DirectSendsStopAtTheNode) {
  // A chunk sent as it lies costs its sender nothing within a node (its
  // receiver reads it there), but across nodes every byte crosses the
  // NICs: the transfer between nodes takes as long with direct sends.
  Topology t = oneNode(100e9, 1e-6);
  t.ranksPerNode = 1;
  t.inter = {1e9, 50e-6};
  t.directSends = true;
  const uint64_t count = 250000; // 1 MB
  Result<Prediction> p = predictPlan(transfer(), t, count, DataType::Float32, oneSlice(count));
  ASSERT_TRUE(p.ok()) << p.message();
  EXPECT_NEAR(p->seconds, 1e-3 + 50e-6, 1e-12);
  ASSERT_EQ(p->links.size(), 2u);
  EXPECT_NEAR(p->links[0].bytes, 1e6, 1e-6);
  // On one node the send is free, and no port carries it.
  t.ranksPerNode = 0;
  Result<Prediction> q = predictPlan(transfer(), t, count, DataType::Float32, oneSlice(count));
  ASSERT_TRUE(q.ok()) << q.message();
  EXPECT_LT(q->seconds, 1e-4);
}

TEST(Predict, ThreadblockBandwidthCapsAThreadblocksWork) {
  // Ports of 1 GB/s, a threadblock that moves at most 0.25 GB/s: the send
  // takes 4 ms, and the receiver's copy out of the slot 4 ms more.
  Topology t = oneNode(1e9, 0);
  t.threadblockBandwidth = 0.25e9;
  const uint64_t count = 250000; // 1 MB
  Result<Prediction> p = predictPlan(transfer(), t, count, DataType::Float32, oneSlice(count));
  ASSERT_TRUE(p.ok()) << p.message();
  EXPECT_NEAR(p->seconds, 8e-3, 1e-12);
  ASSERT_EQ(p->links.size(), 4u);
  EXPECT_EQ(p->links[0].name, "rank 0 tb 0");
  EXPECT_EQ(p->links[1].name, "rank 1 tb 0");
}

TEST(Predict, ReductionsCostReduceBandwidth) {
  // One threadblock copies 1 MB, or reduces it (dst = src + dst), at a
  // threadblock's 1 GB/s; its reductions at 0.5 GB/s of result: 1 ms and
  // 2 ms. Without reduce-bandwidth, a reduction costs what a copy does.
  const uint64_t count = 250000; // 1 MB
  Topology t = oneNode(100e9, 0);
  t.threadblockBandwidth = 1e9;
  EXPECT_NEAR(whole(localCopyPlan(1), t, count).seconds, 1e-3, 1e-12);
  EXPECT_NEAR(whole(localReducePlan(1), t, count).seconds, 1e-3, 1e-12);
  t.reduceBandwidth = 0.5e9;
  EXPECT_DOUBLE_EQ(t.reduceCost(), 2);
  EXPECT_NEAR(whole(localCopyPlan(1), t, count).seconds, 1e-3, 1e-12);
  EXPECT_NEAR(whole(localReducePlan(1), t, count).seconds, 2e-3, 1e-12);
  // Two threadblocks, each reducing half of it, share the node's 1.5 GB/s
  // as 2 MB of copies: 2 x 0.5 MB x 2 / 1.5 GB/s (each alone would take
  // 1 ms).
  t.nodeBandwidth = 1.5e9;
  EXPECT_NEAR(whole(localReducePlan(2), t, count).seconds, 2e-3 / 1.5, 1e-12);
  // At the private copy-bandwidth, the same ratio.
  Topology c = oneNode(100e9, 0);
  c.copyBandwidth = 4e9;
  c.reduceBandwidth = 1e9;
  EXPECT_NEAR(whole(localReducePlan(1), c, count).seconds, 1e-3, 1e-12);
  // In the cache, the reduction keeps its cost against the cached copies.
  t.nodeBandwidth = 0;
  t.cacheBytes = 64 << 20;
  t.cachedThreadblockBandwidth = 4e9;
  const Topology cached = t.forFootprint(2 * 1000000);
  EXPECT_DOUBLE_EQ(cached.reduceBandwidth, 2e9);
  EXPECT_DOUBLE_EQ(cached.reduceCost(), 2);
  // Likewise against the copy-bandwidth where no threadblock cap is given.
  c.cacheBytes = 64 << 20;
  c.cachedThreadblockBandwidth = 8e9;
  EXPECT_DOUBLE_EQ(c.forFootprint(1000).reduceCost(), 4);
}

TEST(Predict, NodeBandwidthIsShared) {
  // Both senders' copies share the node's 1 GB/s (2 ms for 2 MB), then both
  // of rank 2's copies out of their slots share it again (2 ms); a call
  // costs 7 us besides.
  Topology t = oneNode(100e9, 5e-6);
  t.nodeBandwidth = 1e9;
  t.callLatency = 7e-6;
  const uint64_t count = 250000; // 1 MB each
  Result<Prediction> p = predictPlan(twoIntoOne(), t, count, DataType::Float32, oneSlice(count));
  ASSERT_TRUE(p.ok()) << p.message();
  EXPECT_NEAR(p->seconds, 4e-3 + 5e-6 + 7e-6, 1e-12);
}

TEST(Predict, ThreadsPerRankShareTheirThreadblocksWork) {
  // Ranks 0 and 1 each send 1 MB to rank 2, whose two receiving
  // threadblocks copy out of their slots at 1 GB/s each (ports and node
  // unlimited): 1 ms of sending, then 1 ms of copying out at once; on one
  // thread of rank 2, 2 ms of copying out.
  Topology t = oneNode(100e9, 0);
  t.threadblockBandwidth = 1e9;
  const uint64_t count = 250000; // 1 MB
  Result<Prediction> apart =
      predictPlan(twoIntoOne(), t, count, DataType::Float32, oneSlice(count));
  ASSERT_TRUE(apart.ok()) << apart.message();
  EXPECT_NEAR(apart->seconds, 2e-3, 1e-12);
  t.threadsPerRank = 1;
  Result<Prediction> one = predictPlan(twoIntoOne(), t, count, DataType::Float32, oneSlice(count));
  ASSERT_TRUE(one.ok()) << one.message();
  EXPECT_NEAR(one->seconds, 3e-3, 1e-12);
}

TEST(Predict, CallsThatFitTheCacheRunAtTheCachedFigures) {
  // Two ranks, 1 MB each way (input and output of 1 MB per rank: 4 MB on
  // the node). Under a cache of 4 MB and 1 byte the ports run at the cached
  // 4 GB/s and the threadblocks at 2 GB/s: the send's copy into the slot
  // 0.5 ms at the threadblock's cap, then the receiver's copy out 0.5 ms.
  // At a cache of 4 MB the buffers do not fit: the plain 1 GB/s of the
  // ports, 1 ms each.
  Topology t = oneNode(1e9, 0);
  t.threadblockBandwidth = 1e9;
  t.cachedIntraBandwidth = 4e9;
  t.cachedThreadblockBandwidth = 2e9;
  const uint64_t count = 250000; // 1 MB
  t.cacheBytes = 4000001;
  Result<Prediction> in = predictPlan(transfer(), t, count, DataType::Float32, oneSlice(count));
  ASSERT_TRUE(in.ok()) << in.message();
  EXPECT_NEAR(in->seconds, 1e-3, 1e-12);
  t.cacheBytes = 4000000;
  Result<Prediction> out = predictPlan(transfer(), t, count, DataType::Float32, oneSlice(count));
  ASSERT_TRUE(out.ok()) << out.message();
  EXPECT_NEAR(out->seconds, 2e-3, 1e-12);
  // Node bandwidth likewise: two senders into one receiver share the
  // node's 1 GB/s, or its cached 2 GB/s (a gather of 3 ranks: each rank's
  // input of 1 MB and output of 3 MB, 12 MB on the node).
  Topology n = oneNode(100e9, 0);
  n.nodeBandwidth = 1e9;
  n.cachedNodeBandwidth = 2e9;
  n.cacheBytes = 12000001;
  Result<Prediction> shared =
      predictPlan(twoIntoOne(), n, count, DataType::Float32, oneSlice(count));
  ASSERT_TRUE(shared.ok()) << shared.message();
  n.cacheBytes = 0;
  Result<Prediction> plain =
      predictPlan(twoIntoOne(), n, count, DataType::Float32, oneSlice(count));
  ASSERT_TRUE(plain.ok()) << plain.message();
  EXPECT_NEAR(plain->seconds, 4e-3, 1e-12);
  EXPECT_NEAR(shared->seconds, 2e-3, 1e-12);
}

TEST(Predict, NodeCpusBoundTheCall) {
  // Three ranks of one node, copies at 1 GB/s per threadblock, steps of
  // 1 us, calls of 2 us. Their CPU work: four steps (4 us), two 1 MB sends
  // and two 1 MB copies out of the slots (4 ms), three calls (6 us).
  Topology t = oneNode(100e9, 0, 1e-6);
  t.threadblockBandwidth = 1e9;
  t.callLatency = 2e-6;
  const uint64_t count = 250000; // 1 MB each
  // As many CPUs as needed: both sends at once (1 us + 1 ms), both copies
  // out at once (1 us + 1 ms), and the call.
  const Prediction free = whole(twoIntoOne(), t, count);
  EXPECT_NEAR(free.seconds, 2e-3 + 2e-6 + 2e-6, 1e-12);
  EXPECT_EQ(free.cpuSeconds, 0);
  const double work = 4e-6 + 4e-3 + 6e-6;
  // One CPU does all of it, one thing after another.
  t.cpusPerNode = 1;
  const Prediction one = whole(twoIntoOne(), t, count);
  EXPECT_NEAR(one.cpuSeconds, work, 1e-12);
  EXPECT_NEAR(one.seconds, work, 1e-12);
  EXPECT_EQ(one.cpuNode, 0u);
  // Three CPUs: the work fits beside the steps' own chain, which decides.
  t.cpusPerNode = 3;
  const Prediction three = whole(twoIntoOne(), t, count);
  EXPECT_NEAR(three.cpuSeconds, work / 3, 1e-12);
  EXPECT_EQ(three.seconds, free.seconds);
  // With more ranks than CPUs, a step that waited (rank 2's two receives;
  // the sends find their slots free) takes its CPU back with a switch.
  t.switchLatency = 50e-6;
  t.cpusPerNode = 1;
  EXPECT_NEAR(whole(twoIntoOne(), t, count).cpuSeconds, work + 2 * 50e-6, 1e-12);
  t.cpusPerNode = 2;
  EXPECT_NEAR(whole(twoIntoOne(), t, count).cpuSeconds, (work + 2 * 50e-6) / 2, 1e-12);
  // A CPU per rank: nothing to switch.
  t.cpusPerNode = 3;
  EXPECT_NEAR(whole(twoIntoOne(), t, count).cpuSeconds, work / 3, 1e-12);
}

TEST(Predict, ReceiversWithoutACpuWaitForASwitch) {
  // Two ranks on one CPU: the receiver gets it after the sender yields, so
  // a message's trip gains the 30 us switch; not with a CPU each.
  const uint64_t count = 1000000;
  Topology t = oneNode(1e9, 10e-6);
  t.switchLatency = 30e-6;
  t.cpusPerNode = 1;
  const Prediction one = whole(transfer(), t, count);
  EXPECT_NEAR(one.seconds, 4e-3 + 10e-6 + 30e-6, 1e-12);
  EXPECT_NEAR(one.critical.latency, 40e-6, 1e-12);
  t.cpusPerNode = 2;
  const Prediction two = whole(transfer(), t, count);
  EXPECT_NEAR(two.seconds, 4e-3 + 10e-6, 1e-12);
  // Without a CPU count there is nothing to run out of.
  t.cpusPerNode = 0;
  EXPECT_EQ(whole(transfer(), t, count).seconds, two.seconds);
  // Three ranks on one CPU: a receiver waits for the two others (two
  // switches), after both messages share rank 2's port (2 ms).
  t.cpusPerNode = 1;
  EXPECT_NEAR(whole(twoIntoOne(), t, 250000).seconds, 2e-3 + 10e-6 + 60e-6, 1e-12);
}

TEST(Predict, Deterministic) {
  Topology t = oneNode(37e9, 3e-6, 1.3e-6);
  t.copyBandwidth = 211e9;
  PredictOptions o;
  o.sliceElements = 1000;
  Result<Prediction> a = predictPlan(ringAllReduce(7, 3), t, 123457, DataType::BFloat16, o);
  Result<Prediction> b = predictPlan(ringAllReduce(7, 3), t, 123457, DataType::BFloat16, o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->seconds, b->seconds); // to the bit
  EXPECT_EQ(a->events, b->events);
  ASSERT_EQ(a->links.size(), b->links.size());
  for (size_t i = 0; i < a->links.size(); ++i)
    EXPECT_EQ(a->links[i].busy, b->links[i].busy);
}

/// predictPlans() on several threads gives each call's own predictPlan(),
/// in the calls' order, errors included.
TEST(Predict, ManyCallsSideBySideAsOneByOne) {
  Topology t = oneNode(37e9, 3e-6, 1.3e-6);
  t.copyBandwidth = 211e9;
  PredictOptions o;
  o.sliceElements = 1000;
  const Plan ring = ringAllReduce(7, 3), two = transfer(2);
  const Plan broken = transferBetween(3, 0, 2); // Rank 2's receive has no sender...
  Plan deadlocked = broken;
  deadlocked.ranks[0].threadblocks.clear(); // ... once rank 0 sends nothing.
  std::vector<PredictCall> calls;
  for (uint64_t count : {1ull, 999ull, 123457ull, 4000000ull}) {
    calls.push_back(PredictCall{&ring, count});
    calls.push_back(PredictCall{&two, count});
  }
  calls.insert(calls.begin() + 3, PredictCall{&deadlocked, 10});
  for (unsigned threads : {1u, 3u, 0u}) {
    std::vector<Result<Prediction>> many = predictPlans(calls, t, DataType::BFloat16, o, threads);
    ASSERT_EQ(many.size(), calls.size());
    for (size_t i = 0; i < calls.size(); ++i) {
      Result<Prediction> one =
          predictPlan(*calls[i].plan, t, calls[i].count, DataType::BFloat16, o);
      ASSERT_EQ(one.ok(), many[i].ok()) << "call " << i << " on " << threads << " threads";
      if (!one.ok()) {
        EXPECT_EQ(one.message(), many[i].message());
        continue;
      }
      EXPECT_EQ(one->seconds, many[i]->seconds) << "call " << i; // to the bit
      EXPECT_EQ(one->events, many[i]->events);
      EXPECT_EQ(one->lastRank, many[i]->lastRank);
    }
    EXPECT_FALSE(many[3].ok());
  }
  EXPECT_TRUE(predictPlans({}, t, DataType::Float32).empty());
}

TEST(Predict, SweepSizes) {
  using V = std::vector<uint64_t>;
  EXPECT_EQ(sweepSizes(1024, 1 << 20, 4), (V{1024, 4096, 16384, 65536, 262144, 1 << 20}));
  EXPECT_EQ(sweepSizes(1024, 5000, 2), (V{1024, 2048, 4096}));
  EXPECT_EQ(sweepSizes(7, 7, 2), (V{7}));
  EXPECT_EQ(sweepSizes(1024, 1 << 20, 1), (V{1024}));
  EXPECT_TRUE(sweepSizes(2048, 1024, 2).empty());
  // No size past the largest a 64-bit count holds.
  const uint64_t top = ~uint64_t(0);
  EXPECT_EQ(sweepSizes(uint64_t(1) << 62, top, 2), (V{uint64_t(1) << 62, uint64_t(1) << 63}));
}

TEST(Predict, ZeroCountAndErrors) {
  Result<Prediction> p = predictPlan(transfer(), oneNode(1e9, 0), 0, DataType::Float32);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->seconds, 0);
  Topology none;
  Result<Prediction> bad = predictPlan(transfer(), none, 10, DataType::Float32);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("without bandwidth"), std::string::npos) << bad.message();
}

TEST(Topology, ParsesUnitsAndRoundTrips) {
  Topology t;
  Status s = parseTopology("name box  # a comment\n"
                           "ranks-per-node 4\n"
                           "intra-bandwidth 450GB/s\n"
                           "intra-latency 700ns\n"
                           "nics-per-node 2\n"
                           "inter-bandwidth 400Gbit/s\n"
                           "inter-latency 5us\n"
                           "oversubscription 2\n"
                           "nodes-per-leaf 16\n"
                           "rail-optimised 1\n"
                           "copy-bandwidth 1.5TB/s\n"
                           "step-latency 1.5us\n"
                           "cpus-per-node 16\n"
                           "switch-latency 4us\n"
                           "piece-latency 2us\n"
                           "call-rank-latency 1.5us\n"
                           "dependency-latency 1.9us\n"
                           "threads-per-rank 2\n"
                           "cache-bytes 32MiB\n"
                           "cached-intra-bandwidth 900GB/s\n"
                           "cached-threadblock-bandwidth 30GB/s\n"
                           "cached-node-bandwidth 2TB/s\n"
                           "reduce-bandwidth 25GB/s\n"
                           "recv-reduce-latency 0.9us\n",
                           "box.topo", t);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(t.name, "box");
  EXPECT_EQ(t.ranksPerNode, 4u);
  EXPECT_DOUBLE_EQ(t.intra.bandwidth, 450e9);
  EXPECT_DOUBLE_EQ(t.intra.latency, 700e-9);
  EXPECT_DOUBLE_EQ(t.inter.bandwidth, 50e9);
  EXPECT_DOUBLE_EQ(t.inter.latency, 5e-6);
  EXPECT_DOUBLE_EQ(t.copyBandwidth, 1.5e12);
  EXPECT_DOUBLE_EQ(t.oversubscription, 2);
  EXPECT_EQ(t.nodesPerLeaf, 16u);
  EXPECT_TRUE(t.railOptimised);
  EXPECT_EQ(t.leafOf(33, 1), 2u * 2 + 1);
  EXPECT_EQ(t.cpusPerNode, 16u);
  EXPECT_DOUBLE_EQ(t.switchLatency, 4e-6);
  EXPECT_DOUBLE_EQ(t.pieceLatency, 2e-6);
  EXPECT_DOUBLE_EQ(t.callRankLatency, 1.5e-6);
  EXPECT_DOUBLE_EQ(t.dependencyLatency, 1.9e-6);
  EXPECT_EQ(t.threadsPerRank, 2u);
  EXPECT_EQ(t.cacheBytes, uint64_t(32) << 20);
  EXPECT_DOUBLE_EQ(t.cachedIntraBandwidth, 900e9);
  EXPECT_DOUBLE_EQ(t.cachedThreadblockBandwidth, 30e9);
  EXPECT_DOUBLE_EQ(t.cachedNodeBandwidth, 2e12);
  EXPECT_DOUBLE_EQ(t.reduceBandwidth, 25e9);
  EXPECT_DOUBLE_EQ(t.recvReduceLatency, 0.9e-6);
  EXPECT_EQ(t.nodeOf(5), 1u);
  EXPECT_EQ(t.nicOf(7), 1u);
  Topology back;
  ASSERT_TRUE(parseTopology(formatTopology(t), "again", back).ok());
  EXPECT_EQ(formatTopology(back), formatTopology(t));
}

TEST(Topology, ErrorsNameTheLine) {
  Topology t;
  auto error = [&](const char *text) {
    Status s = parseTopology(text, "t.topo", t);
    return s.ok() ? std::string("ok") : s.message();
  };
  EXPECT_EQ(error("intra-bandwidth 1GB/s\nbandwith 3GB/s\n"), "t.topo:2: unknown key 'bandwith'");
  EXPECT_EQ(error("intra-bandwidth 1GB\n"),
            "t.topo:1: 'intra-bandwidth' expects a bandwidth above 0 such as 450GB/s or "
            "400Gbit/s, not '1GB'");
  EXPECT_EQ(error("intra-bandwidth -1GB/s\n"),
            "t.topo:1: 'intra-bandwidth' expects a bandwidth above 0 such as 450GB/s or "
            "400Gbit/s, not '-1GB/s'");
  EXPECT_EQ(
      error("intra-latency 5\nintra-bandwidth 1GB/s\n"),
      "t.topo:1: 'intra-latency' expects a latency such as 5us or 1ms, at most 3600s, not '5'");
  EXPECT_EQ(error("intra-bandwidth 1e308GB/s\n"),
            "t.topo:1: 'intra-bandwidth' expects a bandwidth above 0 such as 450GB/s or "
            "400Gbit/s, not '1e308GB/s'");
  EXPECT_EQ(error("intra-bandwidth 1GB/s\nthreadblock-bandwidth 1e-300GB/s\n"),
            "t.topo:2: 'threadblock-bandwidth' expects a bandwidth such as 1500GB/s, or 0, not "
            "'1e-300GB/s'");
  EXPECT_EQ(
      error("intra-bandwidth 1GB/s\nstep-latency 2h\n"),
      "t.topo:2: 'step-latency' expects a latency such as 5us or 1ms, at most 3600s, not '2h'");
  EXPECT_EQ(error("intra-bandwidth 1GB/s\ncall-latency 7200s\n"),
            "t.topo:2: 'call-latency' expects a latency such as 5us or 1ms, at most 3600s, not "
            "'7200s'");
  EXPECT_EQ(error("intra-bandwidth\n"), "t.topo:1: 'intra-bandwidth' needs a value");
  EXPECT_EQ(error("intra-bandwidth 1GB/s 2GB/s\n"),
            "t.topo:1: 'intra-bandwidth' takes one value, not '1GB/s 2GB/s'");
  EXPECT_EQ(error("name x\n"), "t.topo: no intra-bandwidth (each rank's port into its node)");
  EXPECT_EQ(error("intra-bandwidth 1GB/s\nranks-per-node 8\n"),
            "t.topo: ranks-per-node 8 needs an inter-bandwidth (each NIC's)");
  EXPECT_EQ(error("intra-bandwidth 1GB/s\nrail-optimised 1\n"),
            "t.topo: rail-optimised needs nodes-per-leaf (the nodes under a leaf)");
  EXPECT_EQ(error("intra-bandwidth 1GB/s\nrail-optimised yes\n"),
            "t.topo:2: 'rail-optimised' expects 0 or 1, not 'yes'");
  EXPECT_EQ(error("intra-bandwidth 1GB/s\noversubscription 0.5\n"),
            "t.topo:2: 'oversubscription' expects a ratio from 1 to 1000000, not '0.5'");
  EXPECT_EQ(error("intra-bandwidth 1GB/s\noversubscription 1e300\n"),
            "t.topo:2: 'oversubscription' expects a ratio from 1 to 1000000, not '1e300'");
  EXPECT_EQ(error("intra-bandwidth 1GB/s\noversubscription 0x10\n"),
            "t.topo:2: 'oversubscription' expects a ratio from 1 to 1000000, not '0x10'");
  EXPECT_EQ(error("intra-bandwidth 0x10GB/s\n"),
            "t.topo:1: 'intra-bandwidth' expects a bandwidth above 0 such as 450GB/s or "
            "400Gbit/s, not '0x10GB/s'");
  // A bare 0 needs no unit; a byte order mark is no text.
  EXPECT_EQ(error("intra-bandwidth 1GB/s\nnode-bandwidth 0\n"), "ok");
  EXPECT_EQ(error("\xEF\xBB\xBFintra-bandwidth 1GB/s\n"), "ok");
  EXPECT_EQ(error("intra-bandwidth 1GB/s\nnics-per-node 0\n"),
            "t.topo:2: 'nics-per-node' expects a number of NICs, at least 1, not '0'");
  EXPECT_EQ(error("intra-bandwidth 1GB/s\ncache-bytes 32MB/s\n"),
            "t.topo:2: 'cache-bytes' expects a size such as 32MiB, or 0, not '32MB/s'");
  EXPECT_EQ(error("intra-bandwidth 1GB/s\ncached-intra-bandwidth fast\n"),
            "t.topo:2: 'cached-intra-bandwidth' expects a bandwidth such as 1500GB/s, or 0, not "
            "'fast'");
  EXPECT_EQ(error("intra-bandwidth 1GB/s\ncpus-per-node -2\n"),
            "t.topo:2: 'cpus-per-node' expects a number of CPUs, or 0 for no limit, not '-2'");
}

TEST(Topology, ReadsNcclTopologyXml) {
  // Two GPUs of sm 90 with 18 and 16 NVLinks, two NICs of 400 and 200
  // Gbit/s: ports of the smaller GPU's 16 x 20.6 GB/s, NICs of 25 GB/s.
  const char *xml = R"(<?xml version="1.0"?>
<!-- as NCCL_TOPO_DUMP_FILE writes it -->
<system version="1">
  <cpu numaid="0" arch="x86_64">
    <pci busid="0000:01:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16">
      <gpu dev="0" sm="90" rank="0" gdr="1">
        <nvlink target="0000:a0:00.0" count="18" tclass="0x068000"/>
      </gpu>
    </pci>
    <pci busid="0000:02:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16">
      <gpu dev="1" sm="90" rank="1" gdr="1">
        <nvlink target="0000:a0:00.0" count="16" tclass="0x068000"/>
      </gpu>
    </pci>
    <pci busid="0000:03:00.0" class="0x020700" link_speed="32.0 GT/s PCIe" link_width="16">
      <nic><net name="mlx5_0" dev="0" speed="400000" port="1" latency="0.000000"/></nic>
    </pci>
    <pci busid="0000:04:00.0" class="0x020700" link_speed="32.0 GT/s PCIe" link_width="16">
      <nic><net name="mlx5_1" dev="1" speed="200000" port="1" latency="2.5"/></nic>
    </pci>
  </cpu>
</system>
)";
  Topology t;
  Status s = parseTopology(xml, "node.xml", t);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(t.ranksPerNode, 2u);
  EXPECT_DOUBLE_EQ(t.intra.bandwidth, 16 * 20.6e9);
  EXPECT_EQ(t.nicsPerNode, 2u);
  EXPECT_DOUBLE_EQ(t.inter.bandwidth, 25e9);
  EXPECT_DOUBLE_EQ(t.inter.latency, 2.5e-6);
  EXPECT_GT(t.stepLatency, 0);

  // Without NVLink, a GPU's port is its PCIe link: Gen4 x16 is 24 GB/s.
  const char *pcie = R"(<system version="1"><cpu><pci link_speed="16.0 GT/s PCIe" link_width="16">
    <gpu dev="0" sm="80" rank="0"/></pci></cpu></system>)";
  ASSERT_TRUE(parseTopology(pcie, "pcie.xml", t).ok());
  EXPECT_EQ(t.ranksPerNode, 1u);
  EXPECT_DOUBLE_EQ(t.intra.bandwidth, 24e9);
}

TEST(Topology, NcclXmlErrorsNameTheLine) {
  Topology t;
  auto error = [&](const char *text) {
    Status s = parseTopology(text, "n.xml", t);
    return s.ok() ? std::string("ok") : s.message();
  };
  EXPECT_EQ(error("<system>\n  <cpu>\n</system>"), "n.xml:3:1: error: </system> closes <cpu>");
  EXPECT_EQ(error("<system>\n <cpu>"), "n.xml:2:2: error: <cpu> is not closed");
  EXPECT_EQ(error("<system version=\"1\"></system>"), "n.xml: the topology has no <gpu>");
  EXPECT_EQ(error("<cpu><gpu sm=\"90\" nvlinks=\"x\"/></cpu>"),
            "n.xml:1:6: error: <gpu> has neither NVLinks nor a PCIe link speed and width");
  EXPECT_EQ(error("<cpu></cpu>"), "n.xml: not NCCL's topology XML (no <system>)");
  EXPECT_EQ(error("<system>text</system>"),
            "n.xml:1:9: error: unexpected text 'text' (NCCL's topology XML has elements and "
            "attributes only)");
  EXPECT_EQ(error("<system><net speed=\"0\"/></system>"),
            "n.xml:1:9: error: <net> has no speed (Mbit/s, at least 0.001)");
  // Numbers: whole, finite, within bounds.
  EXPECT_EQ(error("<system><net speed=\"1e300\"/></system>"),
            "n.xml:1:9: error: <net> attribute speed=\"1e300\" is not a number from 0 to 1e+09");
  EXPECT_EQ(error("<system><net speed=\"100\" latency=\"inf\"/></system>"),
            "n.xml:1:9: error: <net> attribute latency=\"inf\" is not a number from 0 to "
            "3.6e+09");
  EXPECT_EQ(error("<system><net speed=\"100 fast\"/></system>"),
            "n.xml:1:9: error: <net> attribute speed=\"100 fast\" is not a number from 0 to "
            "1e+09");
  EXPECT_EQ(error("<system><gpu sm=\"90\"><nvlink count=\"nan\"/></gpu></system>"),
            "n.xml:1:22: error: <nvlink> attribute count=\"nan\" is not a number from 1 to 1024");
  EXPECT_EQ(error("<system><pci link_speed=\"16.0 GT/s PCIe\" link_width=\"0x10\"><gpu "
                  "sm=\"80\"/></pci></system>"),
            "n.xml:1:9: error: <pci> attribute link_width=\"0x10\" is not a number from 0 to 1024");
  EXPECT_EQ(error("<system><pci link_speed=\"16.0 GT/s PCIe\" link_width=\"1e-300\"><gpu "
                  "sm=\"80\"/></pci></system>"),
            "n.xml:1:62: error: <gpu> has neither NVLinks nor a PCIe link speed and width");
  // XML has no NUL: one in a value would cut it short.
  const std::string nul("<system>\n<net speed=\"1\0009\"/></system>", 36);
  Status s = parseTopology(nul, "n.xml", t);
  EXPECT_EQ(s.ok() ? std::string("ok") : s.message(),
            "n.xml:2:14: error: a NUL byte (XML has none)");
}

} // namespace
