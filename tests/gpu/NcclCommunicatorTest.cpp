//===- NcclCommunicatorTest.cpp - One rank per GPU over NCCL -------------===//
//
// NcclCommunicator and the host logic it shares with DeviceWorld:
//  - without a GPU: the kernel's tables for one rank, the in-place and
//    out-of-place binding rules, the checks of the setup exchange (plans
//    that differ, connections that do not match) and their messages, the
//    layout of connection memory with and without the network (staging,
//    GIN signals), how each end finds the other, the choice of transport,
//    and the text of a device-side failure;
//  - with one GPU: a one-rank communicator (ncclCommInitAll) running a
//    hand-written plan of local copies and reductions;
//  - with two GPUs or more: a thread per GPU running the hand-written ring
//    allreduce, several counts in a row, in place and out of place, over
//    CUDA IPC and over NCCL symmetric memory (LSA pointers).
// Peers on other nodes (GIN) need several nodes: only their host logic is
// tested here.
// GPU tests skip without the GPUs they need; results are checked against
// the reference collectives on data distinct per (rank, element).
//
//===----------------------------------------------------------------------===//

#include "coll/Kernels/NcclCommunicator.h"

#include "DeviceCheck.h"
#include "GpuTestSupport.h"
#include "HandPlans.h"
#include "LaunchTables.h"
#include "NcclSetup.h"
#include "coll/Runtime/Executor.h"
#include "coll/Runtime/PlanIO.h"
#include "coll/Runtime/Reference.h"

#include <cstdio>
#include <cstring>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <mutex>
#include <nccl.h>
#include <string>
#include <thread>
#include <vector>

using namespace coll;
using namespace coll::kernels;
using namespace coll::test;

namespace {

//===----------------------------------------------------------------------===//
// Host logic: no GPU
//===----------------------------------------------------------------------===//

TEST(LaunchTables, OneRankOfARing) {
  Plan p = ringAllReduce(4, 2);
  LaunchTables t = buildLaunchTables(p.info, {{1, &p.ranks[1]}});
  ASSERT_EQ(t.tbs.size(), 1u);
  EXPECT_EQ(t.tbs[0].rank, 0u) << "the index of the rank's buffers in the launch";
  EXPECT_EQ(t.tbs[0].rankFirst, 0u);
  EXPECT_EQ(t.tbs[0].sendsPerSlice, 6u); // s, 2 rrs, rrcs, 2 rcs.
  EXPECT_EQ(t.tbs[0].recvsPerSlice, 6u); // 2 rrs, rrcs, 2 rcs, r.
  EXPECT_EQ(t.numRecvFifos, 1u);
  EXPECT_EQ(t.tbs[0].recvFifo, 0);
  ASSERT_EQ(t.remoteSends.size(), 1u);
  EXPECT_EQ(t.remoteSends[0].peer, 2u);
  EXPECT_EQ(t.remoteSends[0].channel, 0u);
  EXPECT_EQ(t.remoteSends[0].maxCount, 1u);
  EXPECT_EQ(t.tbs[0].sendFifo, int32_t(t.remoteSends[0].fifo));
  ASSERT_EQ(t.fifos.size(), 2u);
  EXPECT_EQ(t.fifos[0].depth, 2u);
  EXPECT_EQ(t.fifoMaxCount, (std::vector<uint32_t>{1, 1}));
  EXPECT_EQ(t.steps.size(), p.ranks[1].threadblocks[0].steps.size());
  EXPECT_FALSE(writesInput(p.ranks[1]));
  EXPECT_EQ(t.tbs[0].progressSteps, 0u) << "no threadblock waits for another";
}

TEST(LaunchTables, ThreadsPerBlockWithinTheKernelsBound) {
  for (uint32_t t : {32u, 64u, 480u, 512u})
    EXPECT_TRUE(checkThreadsPerBlock(t).ok()) << t;
  EXPECT_EQ(checkThreadsPerBlock(0).message(),
            "threads per block must be a multiple of 32 in [32, 512], not 0");
  EXPECT_EQ(checkThreadsPerBlock(100).message(),
            "threads per block must be a multiple of 32 in [32, 512], not 100");
  EXPECT_EQ(checkThreadsPerBlock(544).message(),
            "threads per block must be a multiple of 32 in [32, 512], not 544");
}

TEST(LaunchTables, EveryRankResolvesItsSends) {
  Plan p = ringAllReduce(3, 2);
  std::vector<RankSection> all;
  for (uint32_t r = 0; r < 3; ++r)
    all.push_back({r, &p.ranks[r]});
  LaunchTables t = buildLaunchTables(p.info, all);
  ASSERT_EQ(t.tbs.size(), 3u);
  EXPECT_TRUE(t.remoteSends.empty());
  EXPECT_EQ(t.numRecvFifos, 3u);
  for (uint32_t r = 0; r < 3; ++r) {
    EXPECT_EQ(t.tbs[r].rank, r);
    EXPECT_EQ(t.tbs[r].recvFifo, int32_t(r));
    // Rank r sends into rank r+1's receive FIFO.
    EXPECT_EQ(t.tbs[r].sendFifo, int32_t((r + 1) % 3));
  }
}

TEST(LaunchTables, SliceShapeStaysWithinTheSlots) {
  for (uint64_t sliceBytes : {16ull, 100ull, 4096ull, 262144ull})
    for (uint64_t es : {1ull, 2ull, 4ull, 8ull})
      for (uint64_t count : {1ull, 7ull, 1000ull, 1000003ull}) {
        SliceShape s = sliceShape(count, 4, sliceBytes, es);
        EXPECT_LE(s.pieceStride, maxPieceStride(sliceBytes));
        EXPECT_EQ(s.pieceStride % 16, 0u);
        EXPECT_GE(s.layout.sliceElements * s.layout.numSlices, s.layout.maxChunk);
      }
}

TEST(LaunchTables, PreparedCallsHaveTheLaunchsSliceShape) {
  Plan p = ringAllReduce(4, 2);
  Result<ValidatedPlan> v = ValidatedPlan::make(p);
  ASSERT_TRUE(v) << v.message();
  std::vector<char> buffers(1 << 16);
  for (uint64_t sliceBytes : {16ull, 100ull, 4096ull})
    for (DataType type : {DataType::Uint8, DataType::Float32, DataType::Float64})
      for (uint64_t count : {1ull, 7ull, 1000ull}) {
        PreparedCall c = prepareCall(*v, 1, {buffers.data(), buffers.data(), count, type},
                                     launchCallOptions(sliceBytes, type));
        ASSERT_FALSE(c.error) << c.error.message;
        SliceShape s = sliceShape(count, v->chunksPerUnit(), sliceBytes, dataTypeSize(type));
        EXPECT_EQ(c.layout.sliceElements, s.layout.sliceElements);
        EXPECT_EQ(c.layout.numSlices, s.layout.numSlices);
        EXPECT_EQ(c.layout.maxChunk, s.layout.maxChunk);
      }
  PreparedCall c = prepareCall(*v, 1, {buffers.data(), buffers.data() + 2, 10},
                               launchCallOptions(4096, DataType::Float32));
  EXPECT_EQ(c.error.message, "rank 1: the receive buffer is not aligned to its 4-byte elements");
}

/// Host addresses standing in for device buffers (never dereferenced).
struct FakeBuffers {
  std::vector<char> memory = std::vector<char>(4096);
  char *at(uint64_t offset) { return memory.data() + offset; }
};

/// Rank \p rank's call of \p plan on \p count floats at \p send and
/// \p recv, and its buffers with the private copy at \p copy.
struct BoundCall {
  PreparedCall call;
  DeviceBinding b;
};
BoundCall bindOn(const Plan &plan, uint32_t rank, char *send, char *recv, uint64_t count,
                 char *copy) {
  Result<ValidatedPlan> v = ValidatedPlan::make(plan);
  if (!v) {
    ADD_FAILURE() << v.message();
    return {};
  }
  BoundCall out;
  out.call = prepareCall(*v, rank, {send, recv, count, DataType::Float32},
                         launchCallOptions(4096, DataType::Float32));
  EXPECT_FALSE(out.call.error) << out.call.error.message;
  out.b = bindCall(out.call, copy);
  return out;
}

/// A plan of \p n ranks without steps.
Plan stepless(CollectiveKind kind, uint32_t n, uint32_t in, uint32_t out, bool inplace) {
  Plan p = makePlan("stepless", kind, n, in, out, 1);
  p.info.inplace = inplace;
  return p;
}

TEST(Binding, OutOfPlacePlan) {
  FakeBuffers m;
  const Plan p = stepless(CollectiveKind::AllReduce, 2, 1, 1, false);
  // Separate buffers, a plan that does not write its input: nothing to copy.
  BoundCall c = bindOn(p, 1, m.at(0), m.at(1024), 100, m.at(2048));
  EXPECT_EQ(c.call.copyBytes, 0u);
  EXPECT_EQ(c.b.input, m.at(0));
  EXPECT_EQ(c.b.output, m.at(1024));
  EXPECT_TRUE(c.b.before.empty() && c.b.after.empty());
  // Called in place: the input is copied first.
  c = bindOn(p, 1, m.at(0), m.at(0), 100, m.at(2048));
  EXPECT_EQ(c.call.copyBytes, 400u);
  EXPECT_EQ(c.b.input, m.at(2048));
  EXPECT_EQ(c.b.output, m.at(0));
  ASSERT_EQ(c.b.before.size(), 1u);
  EXPECT_EQ(c.b.before[0].to, m.at(2048));
  EXPECT_EQ(c.b.before[0].from, m.at(0));
  EXPECT_EQ(c.b.before[0].bytes, 400u);
  // A plan that writes its input always runs on a copy.
  Plan writes = p;
  Threadblock tb;
  add(tb, step(Opcode::Copy, O, 0, I, 0, 1));
  writes.ranks[1].threadblocks = {tb};
  c = bindOn(writes, 1, m.at(0), m.at(1024), 100, m.at(2048));
  EXPECT_EQ(c.call.copyBytes, 400u);
  EXPECT_EQ(c.b.input, m.at(2048));
}

TEST(Binding, InPlacePlan) {
  FakeBuffers m;
  const Plan gather = stepless(CollectiveKind::AllGather, 4, 1, 4, true);
  // The alias: one buffer, no copies.
  BoundCall c = bindOn(gather, 2, m.at(200), m.at(0), 25, m.at(2048));
  EXPECT_EQ(c.call.copyBytes, 0u);
  EXPECT_EQ(c.b.input, m.at(200));
  EXPECT_TRUE(c.b.before.empty());
  // Out of place: the input goes to its place in the output first.
  c = bindOn(gather, 2, m.at(1024), m.at(0), 25, m.at(2048));
  EXPECT_EQ(c.call.copyBytes, 0u);
  EXPECT_EQ(c.b.input, m.at(200));
  ASSERT_EQ(c.b.before.size(), 1u);
  EXPECT_EQ(c.b.before[0].to, m.at(200));
  EXPECT_EQ(c.b.before[0].from, m.at(1024));
  // Reducescatter out of place: runs in a copy, block r copied out after.
  c = bindOn(stepless(CollectiveKind::ReduceScatter, 4, 4, 1, true), 1, m.at(0), m.at(1024), 25,
             m.at(2048));
  EXPECT_EQ(c.call.copyBytes, 400u);
  EXPECT_EQ(c.b.input, m.at(2048));
  EXPECT_EQ(c.b.output, m.at(2148));
  ASSERT_EQ(c.b.before.size(), 1u);
  EXPECT_EQ(c.b.before[0].to, m.at(2048));
  ASSERT_EQ(c.b.after.size(), 1u);
  EXPECT_EQ(c.b.after[0].to, m.at(1024));
  EXPECT_EQ(c.b.after[0].from, m.at(2148));
  EXPECT_EQ(c.b.after[0].bytes, 100u);
  // Allreduce out of place with overlapping buffers: through the copy.
  c = bindOn(stepless(CollectiveKind::AllReduce, 4, 1, 1, true), 0, m.at(0), m.at(100), 100,
             m.at(2048));
  EXPECT_EQ(c.call.copyBytes, 400u);
  ASSERT_EQ(c.b.before.size(), 2u);
  EXPECT_EQ(c.b.before[0].to, m.at(2048));
  EXPECT_EQ(c.b.before[1].to, m.at(100));
  EXPECT_EQ(c.b.before[1].from, m.at(2048));
  EXPECT_EQ(c.b.input, m.at(100));
}

uint64_t checksumOf(const Plan &p) {
  Result<ValidatedPlan> v = ValidatedPlan::make(p);
  EXPECT_TRUE(v) << v.message();
  return v ? v->checksum() : 0;
}

std::vector<PeerHello> hellosOf(const Plan &p) {
  std::vector<PeerHello> hellos(p.info.nranks);
  for (uint32_t r = 0; r < p.info.nranks; ++r) {
    hellos[r].rank = r;
    hellos[r].nranks = p.info.nranks;
    hellos[r].plan = checksumOf(p);
    hellos[r].sliceBytes = 1024;
  }
  return hellos;
}

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

TEST(Setup, SamePlanEverywhere) {
  Plan p = ringAllReduce(4, 2);
  EXPECT_TRUE(checkHellos(hellosOf(p)));
}

TEST(Setup, SectionLoadedAloneHasTheSameIdentity) {
  Plan p = ringAllReduce(3, 2);
  std::vector<uint8_t> bytes = serializePlan(p);
  Result<ValidatedPlan> whole = ValidatedPlan::parse(bytes.data(), bytes.size());
  Result<ValidatedPlan> one = ValidatedPlan::parse(bytes.data(), bytes.size(), 1);
  ASSERT_TRUE(whole) << whole.message();
  ASSERT_TRUE(one) << one.message();
  EXPECT_TRUE(whole->holdsEveryRank());
  EXPECT_FALSE(one->holdsEveryRank());
  EXPECT_EQ(whole->checksum(), one->checksum());
  // A plan made in memory: the checksum its file would store.
  EXPECT_EQ(checksumOf(p), whole->checksum());
  Plan q = ringAllReduce(3, 3);
  std::vector<uint8_t> other = serializePlan(q);
  Result<ValidatedPlan> otherOne = ValidatedPlan::parse(other.data(), other.size(), 1);
  ASSERT_TRUE(otherOne) << otherOne.message();
  EXPECT_NE(otherOne->checksum(), one->checksum());
}

TEST(Setup, DifferentPlansNameTheRanks) {
  Plan p = ringAllReduce(4, 2), q = ringAllReduce(4, 3);
  std::vector<PeerHello> hellos = hellosOf(p);
  hellos[2].plan = checksumOf(q);
  hellos[3].plan = checksumOf(q);
  Status st = checkHellos(hellos);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(), "the ranks hold different plans: ranks 2 and 3 hold a plan that differs "
                          "from rank 0's (checksum " +
                              hex(checksumOf(q)) + " on rank 2, " + hex(checksumOf(p)) +
                              " on rank 0)");

  // The same facts, another section on rank 1, whole or loaded alone.
  Plan r = p;
  r.ranks[1].threadblocks[0].steps[0].count = 3;
  std::vector<uint8_t> bytes = serializePlan(r);
  Result<ValidatedPlan> alone = ValidatedPlan::parse(bytes.data(), bytes.size(), 1);
  ASSERT_TRUE(alone) << alone.message();
  hellos = hellosOf(p);
  hellos[1].plan = alone->checksum();
  st = checkHellos(hellos);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("rank 1 holds a plan that differs from rank 0"), std::string::npos)
      << st.message();

  hellos = hellosOf(p);
  hellos[1].nranks = 3;
  st = checkHellos(hellos);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(), "the ranks hold different plans: rank 1 holds a plan of another number "
                          "of ranks than rank 0's 4");

  hellos = hellosOf(p);
  hellos[3].sliceBytes = 2048;
  st = checkHellos(hellos);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("rank 3 uses another slice size"), std::string::npos) << st.message();

  hellos = hellosOf(p);
  hellos[1].failed = 1;
  st = checkHellos(hellos);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("rank 1 could not prepare its part"), std::string::npos)
      << st.message();
}

ConnectionEntry entry(uint32_t kind, uint32_t peer, uint32_t messages, uint32_t maxCount,
                      uint64_t counter) {
  ConnectionEntry e;
  e.kind = kind;
  e.peer = peer;
  e.messagesPerSlice = messages;
  e.maxCount = maxCount;
  e.depth = 2;
  e.counter = counter;
  e.slots = counter + 4096;
  e.slotBytes = 1024;
  return e;
}

TEST(Setup, ConnectionsMatch) {
  // A ring of three: rank r receives from r-1 and sends to r+1.
  std::vector<std::vector<ConnectionEntry>> all(3);
  for (uint32_t r = 0; r < 3; ++r) {
    all[r].push_back(entry(ConnectionEntry::Receive, (r + 2) % 3, 4, 1, 100 * r));
    all[r].push_back(entry(ConnectionEntry::Send, (r + 1) % 3, 4, 1, 100 * r + 64));
  }
  Result<ConnectionMatch> m = matchConnections(all, 1);
  ASSERT_TRUE(m) << m.message();
  ASSERT_EQ(m->sendTo.size(), 1u);
  ASSERT_EQ(m->recvFrom.size(), 1u);
  EXPECT_EQ(m->sendTo[0].counter, 200u);  // Rank 2's tail.
  EXPECT_EQ(m->recvFrom[0].counter, 64u); // Rank 0's head.

  auto broken = all;
  broken[2][0].messagesPerSlice = 3;
  m = matchConnections(broken, 0);
  ASSERT_FALSE(m);
  EXPECT_EQ(m.message(), "rank 1 sends 4 messages per pass to rank 2 on channel 0, but rank 2 "
                         "receives 3");

  broken = all;
  broken[2].erase(broken[2].begin());
  m = matchConnections(broken, 0);
  ASSERT_FALSE(m);
  EXPECT_EQ(m.message(), "rank 1 sends to rank 2 on channel 0, but rank 2 has no threadblock "
                         "that receives from rank 1 on that channel");

  broken = all;
  broken[0][1].maxCount = 2;
  m = matchConnections(broken, 0);
  ASSERT_FALSE(m);
  EXPECT_NE(m.message().find("messages of up to 2 chunks"), std::string::npos) << m.message();
}

TEST(Setup, FormatRanks) {
  EXPECT_EQ(formatRanks({3}), "rank 3");
  EXPECT_EQ(formatRanks({1, 2}), "ranks 1 and 2");
  EXPECT_EQ(formatRanks({1, 2, 5}), "ranks 1, 2 and 5");
}

/// Every rank's launch tables and connection layout for a ring of \p n over
/// two nodes: ranks [0, n/2) and [n/2, n), so that rank n/2 - 1 sends over
/// the network to rank n/2, and rank n - 1 to rank 0.
struct TwoNodeRing {
  Plan plan;
  std::vector<LaunchTables> tables;
  std::vector<ConnectionLayout> layouts;
  static constexpr uint64_t kStride = 4096;

  explicit TwoNodeRing(uint32_t n) : plan(ringAllReduce(n, 2)) {
    for (uint32_t r = 0; r < n; ++r) {
      tables.push_back(buildLaunchTables(plan.info, {{r, &plan.ranks[r]}}));
      std::vector<bool> network(n);
      for (uint32_t p = 0; p < n; ++p)
        network[p] = (p < n / 2) != (r < n / 2);
      layouts.push_back(
          std::move(layoutConnections(tables[r], plan.ranks[r], r, kStride, network).value()));
    }
  }
  std::vector<std::vector<ConnectionEntry>> entries() const {
    std::vector<std::vector<ConnectionEntry>> all;
    for (const ConnectionLayout &l : layouts)
      all.push_back(l.entries);
    return all;
  }
};

TEST(Setup, LayoutWithoutNetwork) {
  Plan p = ringAllReduce(4, 2);
  LaunchTables t = buildLaunchTables(p.info, {{1, &p.ranks[1]}});
  Result<ConnectionLayout> laidOut =
      layoutConnections(t, p.ranks[1], 1, 4096, std::vector<bool>(4));
  ASSERT_TRUE(laidOut) << laidOut.message();
  const ConnectionLayout &l = *laidOut;
  const uint64_t line = kCounterStride * sizeof(uint64_t);
  ASSERT_EQ(l.entries.size(), 2u);
  EXPECT_EQ(l.entries[0].kind, uint32_t(ConnectionEntry::Receive));
  EXPECT_EQ(l.entries[0].peer, 0u);
  EXPECT_EQ(l.entries[0].counter, 0u); // Tail of receive FIFO 0: line 0.
  EXPECT_EQ(l.entries[0].slots, 256u); // After three counter lines, rounded.
  EXPECT_EQ(l.entries[0].slotBytes, 4096u);
  EXPECT_EQ(l.entries[1].kind, uint32_t(ConnectionEntry::Send));
  EXPECT_EQ(l.entries[1].peer, 2u);
  EXPECT_EQ(l.entries[1].counter, 2 * line); // Head of remote send 0: line 2R.
  EXPECT_EQ(l.entryFifo, (std::vector<uint32_t>{0, t.remoteSends[0].fifo}));
  for (const ConnectionEntry &e : l.entries)
    EXPECT_EQ(e.network, 0u);
  EXPECT_EQ(l.signals, 0u);
  // Two slots of the receive FIFO, then their marks (a word each, rounded).
  EXPECT_EQ(l.entries[0].marks, 256u + 2 * 4096u);
  EXPECT_EQ(l.bytes, 256u + 2 * 4096u + 256u);
  EXPECT_FALSE(l.fifos[t.remoteSends[0].fifo].ownsSlots) << "no staging without the network";
  EXPECT_FALSE(l.fifos[t.remoteSends[0].fifo].ownsMarks) << "the receiver keeps the marks";
  EXPECT_TRUE(l.fifos[0].ownsTail);
  EXPECT_TRUE(l.fifos[0].ownsMarks);
  EXPECT_FALSE(l.fifos[0].ownsHead) << "the sender keeps the head";

  // Local pointers follow the offsets.
  std::vector<char> memory(l.bytes);
  char *base = memory.data();
  bindLocalConnections(t, l, base);
  EXPECT_EQ(reinterpret_cast<char *>(t.fifos[0].tail), base + 0);
  EXPECT_EQ(t.fifos[0].slots, base + 256);
  EXPECT_EQ(t.fifos[0].slotBytes, 4096u);
  EXPECT_EQ(reinterpret_cast<char *>(t.fifos[0].marks), base + l.entries[0].marks);
  EXPECT_EQ(reinterpret_cast<char *>(t.fifos[t.remoteSends[0].fifo].head), base + 2 * line);
  EXPECT_EQ(t.fifos[t.remoteSends[0].fifo].marks, nullptr) << "resolved from the receiver's";
}

TEST(Setup, LayoutStagesNetworkSendsAndNumbersSignals) {
  TwoNodeRing ring(4);
  // Rank 1 receives from rank 0 (its node) and sends to rank 2 (the other).
  const ConnectionLayout &l1 = ring.layouts[1];
  ASSERT_EQ(l1.entries.size(), 2u);
  EXPECT_EQ(l1.entries[0].network, 0u);
  EXPECT_EQ(l1.entries[1].network, 1u);
  EXPECT_EQ(l1.entries[1].signal, 0u);
  EXPECT_EQ(l1.signals, 1u);
  EXPECT_EQ(l1.entries[0].marks, 256u + 2 * 4096u) << "marks after the receive slots";
  EXPECT_EQ(l1.entries[1].slots, 256u + 2 * 4096u + 256u) << "staging after the marks";
  EXPECT_EQ(l1.bytes, 256u + 4 * 4096u + 256u);
  const uint32_t sendFifo = ring.tables[1].remoteSends[0].fifo;
  EXPECT_TRUE(l1.fifos[sendFifo].ownsSlots);
  // Rank 2 receives from rank 1 over the network: its signal 0 counts the
  // messages; it sends to rank 3 on its node.
  const ConnectionLayout &l2 = ring.layouts[2];
  EXPECT_EQ(l2.entries[0].network, 1u);
  EXPECT_EQ(l2.entries[0].signal, 0u);
  EXPECT_FALSE(l2.fifos[0].ownsMarks) << "no direct message over the network";
  EXPECT_EQ(l2.entries[1].network, 0u);
  EXPECT_EQ(l2.signals, 1u);
  // A rank with both ends over the network: receives numbered first.
  TwoNodeRing two(2);
  ASSERT_EQ(two.layouts[0].entries.size(), 2u);
  EXPECT_EQ(two.layouts[0].entries[0].kind, uint32_t(ConnectionEntry::Receive));
  EXPECT_EQ(two.layouts[0].entries[0].signal, 0u);
  EXPECT_EQ(two.layouts[0].entries[1].signal, 1u);
  EXPECT_EQ(two.layouts[0].signals, 2u);
}

TEST(Setup, ResolveNetworkAndDirectEnds) {
  TwoNodeRing ring(4);
  auto all = ring.entries();
  for (uint32_t r = 0; r < 4; ++r) {
    Result<ConnectionMatch> m = matchConnections(all, r);
    ASSERT_TRUE(m) << m.message();
    LaunchTables &t = ring.tables[r];
    const ConnectionLayout &l = ring.layouts[r];
    std::vector<char> memory(l.bytes);
    char *base = memory.data();
    bindLocalConnections(t, l, base);
    std::vector<PeerReference> refs = resolveConnections(t, l, *m);
    const uint32_t prev = (r + 3) % 4, next = (r + 1) % 4;
    const bool sendOverNetwork = (r < 2) != (next < 2);
    const bool recvOverNetwork = (r < 2) != (prev < 2);
    const FifoDesc &recv = t.fifos[0];
    const FifoDesc &send = t.fifos[t.remoteSends[0].fifo];
    const ConnectionLayout &lp = ring.layouts[prev], &ln = ring.layouts[next];
    size_t expectRefs = (recvOverNetwork ? 0 : 1) + (sendOverNetwork ? 0 : 3);
    ASSERT_EQ(refs.size(), expectRefs) << "rank " << r;
    if (recvOverNetwork) {
      EXPECT_EQ(recv.netPeer, prev);
      EXPECT_EQ(recv.tailSignal, l.entries[0].signal);
      EXPECT_EQ(recv.headSignal, lp.entries[1].signal) << "the sender's head signal";
    } else {
      EXPECT_EQ(recv.netPeer, kNoNetPeer);
      EXPECT_EQ(refs[0].field, PeerReference::Head);
      EXPECT_EQ(refs[0].peer, prev);
      EXPECT_EQ(refs[0].offset, lp.entries[1].counter);
    }
    if (sendOverNetwork) {
      EXPECT_EQ(send.netPeer, next);
      EXPECT_EQ(send.tailSignal, ln.entries[0].signal) << "the receiver's tail signal";
      EXPECT_EQ(send.headSignal, l.entries[1].signal);
      EXPECT_EQ(send.remoteSlots, ln.entries[0].slots);
      EXPECT_EQ(send.remoteSlotBytes, ln.entries[0].slotBytes);
      EXPECT_EQ(send.localSlots, l.entries[1].slots);
      EXPECT_EQ(send.slots, base + l.entries[1].slots) << "the staging slots";
    } else {
      EXPECT_EQ(send.netPeer, kNoNetPeer);
      const PeerReference &slots = refs[expectRefs - 3], &tail = refs[expectRefs - 2],
                          &marks = refs[expectRefs - 1];
      EXPECT_EQ(slots.field, PeerReference::Slots);
      EXPECT_EQ(slots.offset, ln.entries[0].slots);
      EXPECT_EQ(tail.field, PeerReference::Tail);
      EXPECT_EQ(tail.offset, ln.entries[0].counter);
      EXPECT_EQ(tail.peer, next);
      EXPECT_EQ(marks.field, PeerReference::Marks);
      EXPECT_EQ(marks.offset, ln.entries[0].marks);
      EXPECT_EQ(marks.peer, next);
      // The pointers land in the right fields.
      std::vector<char> peer(1 << 16);
      std::vector<char *> pointers;
      for (const PeerReference &ref : refs)
        pointers.push_back(peer.data() + ref.offset);
      applyPeerPointers(t, refs, pointers);
      EXPECT_EQ(send.slots, peer.data() + ln.entries[0].slots);
      EXPECT_EQ(reinterpret_cast<char *>(send.tail), peer.data() + ln.entries[0].counter);
      EXPECT_EQ(reinterpret_cast<char *>(send.marks), peer.data() + ln.entries[0].marks);
    }
  }
}

TEST(Setup, BothEndsMustAgreeOnTheNetwork) {
  TwoNodeRing ring(4);
  auto all = ring.entries();
  all[2][0].network = 0; // Rank 2 thinks rank 1 shares its node.
  Result<ConnectionMatch> m = matchConnections(all, 0);
  ASSERT_FALSE(m);
  EXPECT_EQ(m.message(), "ranks 1 and 2 disagree on whether they reach each other over the "
                         "network (their LSA teams differ)");
}

TEST(Setup, ChooseTransport) {
  std::vector<PeerHello> hellos(4);
  for (uint32_t r = 0; r < 4; ++r)
    hellos[r].rank = r;
  Result<NcclTransport> t = chooseTransport(hellos);
  ASSERT_TRUE(t) << t.message();
  EXPECT_EQ(*t, NcclTransport::Ipc) << "one node: IPC";
  hellos[1].offNode = hellos[2].offNode = 1;
  t = chooseTransport(hellos);
  ASSERT_TRUE(t) << t.message();
  EXPECT_EQ(*t, NcclTransport::Symmetric) << "two nodes: symmetric memory and GIN";
  for (PeerHello &h : hellos)
    h.transport = uint32_t(NcclTransport::Ipc);
  t = chooseTransport(hellos);
  ASSERT_FALSE(t);
  EXPECT_EQ(t.message(), "ranks 1 and 2 talk to peers outside their LSA team (another node), "
                         "which CUDA IPC cannot reach; use the symmetric transport");
  for (PeerHello &h : hellos)
    h.transport = uint32_t(NcclTransport::Symmetric);
  hellos[0].offNode = hellos[1].offNode = hellos[2].offNode = 0;
  t = chooseTransport(hellos);
  ASSERT_TRUE(t) << t.message();
  EXPECT_EQ(*t, NcclTransport::Symmetric) << "asked for";
  hellos[3].transport = uint32_t(NcclTransport::Auto);
  t = chooseTransport(hellos);
  ASSERT_FALSE(t);
  EXPECT_EQ(t.message(), "rank 3 asks for another transport than rank 0");
}

TEST(DeviceFailure, NamesTheRankAndWhatItWaitedFor) {
  Plan p = ringAllReduce(4, 2);
  std::vector<RankSection> sections = {{2, &p.ranks[2]}};
  LaunchTables t = buildLaunchTables(p.info, sections);
  DeviceError e = {};
  e.claimed = 1;
  e.failedCtas = 1;
  e.block = 0;
  e.result = uint32_t(WaitResult::TimedOut);
  e.waitKind = uint32_t(WaitKind::RecvMessage);
  e.step = 2;
  e.slice = 0;
  e.sliceBase = 3;
  e.expected = 3 * 6 + 2; // Message 2 of this launch.
  Status st = describeDeviceFailure(e, t, sections, 2, 1.5);
  EXPECT_EQ(st.message(), "rank 2 threadblock 0 step 2 (rrs, slice 0): timed out after 1.5 s on "
                          "the GPU waiting for message 2 from rank 1 on channel 0");
  // After its last step, waiting for its receiver to read what it sent
  // direct: counts are this launch's (6 sends a slice, 3 slices before).
  e.waitKind = uint32_t(WaitKind::DirectRead);
  e.step = t.tbs[0].numSteps;
  e.expected = 3 * 6 + 5;
  e.observed = 3 * 6 + 3;
  EXPECT_EQ(describeDeviceFailure(e, t, sections, 2, 1.5).message(),
            "rank 2 threadblock 0 (after its last step): timed out after 1.5 s on the GPU waiting "
            "for rank 3 to read the messages sent to it direct on channel 0 (5 sent, 3 read)");
  e.block = 5;
  EXPECT_EQ(describeDeviceFailure(e, t, sections, 2, 1.5).message(),
            "the device reported a failure of an unknown threadblock");
}

/// A step trace as the kernel writes it: per CTA a header, then records.
struct RawTrace {
  uint32_t traceSteps;
  std::vector<char> bytes;
  RawTrace(size_t ctas, uint32_t traceSteps)
      : traceSteps(traceSteps), bytes(ctas * traceBytesPerCta(traceSteps)) {}
  void header(size_t cta, TraceHeader h) {
    std::memcpy(bytes.data() + cta * traceBytesPerCta(traceSteps), &h, sizeof h);
  }
  void record(size_t cta, uint32_t i, TraceRecord r) {
    std::memcpy(bytes.data() + cta * traceBytesPerCta(traceSteps) + sizeof(TraceHeader) +
                    i * sizeof(TraceRecord),
                &r, sizeof r);
  }
};

TEST(Trace, DecodesEveryCtaIntoATimeline) {
  Plan p = ringAllReduce(4, 2);
  // Ranks 3 and 1, in that order: events name the plan's ranks.
  std::vector<RankSection> sections = {{3, &p.ranks[3]}, {1, &p.ranks[1]}};
  LaunchTables t = buildLaunchTables(p.info, sections);
  ASSERT_EQ(t.tbs.size(), 2u);
  RawTrace raw(2, 3);
  // CTA 0 ran 5 steps, 3 recorded; CTA 1 ran 2. Times in ns; the first CTA
  // starts at 7000, the origin.
  raw.header(0, {9000, 20000, 5, 0});
  raw.header(1, {7000, 15000, 2, 0});
  raw.record(0, 0, {0, 0, 0, 9500, 10000});
  raw.record(0, 1, {0, 1, 0, 10250, 11000});
  raw.record(0, 2, {0, 2, 0, 12000, 12000});
  raw.record(1, 0, {0, 5, 0, 7500, 7600});
  raw.record(1, 1, {1, 0, 0, 8000, 7900}); // The timer stepped back: end = begin.
  DeviceTrace out;
  ASSERT_TRUE(decodeTrace(raw.bytes, 3, t, sections, out));
  EXPECT_EQ(out.unrecorded, 2u);
  EXPECT_EQ(out.ctaBeginUs, (std::vector<double>{2.0, 0.0}));
  EXPECT_EQ(out.ctaEndUs, (std::vector<double>{13.0, 8.0}));
  const std::vector<TraceEvent> &e = out.timeline.events;
  ASSERT_EQ(e.size(), 5u);
  // Rank 1's CTA first (sorted by rank), its steps in record order.
  EXPECT_EQ(e[0].rank, 1u);
  EXPECT_EQ(e[0].slice, 0u);
  EXPECT_EQ(e[0].step, 5u);
  EXPECT_EQ(e[0].op, p.ranks[1].threadblocks[0].steps[5].op);
  EXPECT_EQ(e[0].count, p.ranks[1].threadblocks[0].steps[5].count);
  EXPECT_DOUBLE_EQ(e[0].beginUs, 0.5);
  EXPECT_DOUBLE_EQ(e[0].endUs, 0.6);
  EXPECT_EQ(e[1].rank, 1u);
  EXPECT_EQ(e[1].slice, 1u);
  EXPECT_EQ(e[1].step, 0u);
  EXPECT_DOUBLE_EQ(e[1].beginUs, 1.0);
  EXPECT_DOUBLE_EQ(e[1].endUs, 1.0);
  for (uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(e[2 + i].rank, 3u);
    EXPECT_EQ(e[2 + i].tb, 0u);
    EXPECT_EQ(e[2 + i].step, i);
    EXPECT_EQ(e[2 + i].op, p.ranks[3].threadblocks[0].steps[i].op);
  }
  EXPECT_DOUBLE_EQ(e[2].beginUs, 2.5);
  EXPECT_DOUBLE_EQ(e[3].endUs, 4.0);
  EXPECT_DOUBLE_EQ(e[4].beginUs, e[4].endUs);
}

TEST(Trace, RejectsMissingAndForeignRecords) {
  Plan p = ringAllReduce(4, 2);
  std::vector<RankSection> sections = {{0, &p.ranks[0]}, {2, &p.ranks[2]}};
  LaunchTables t = buildLaunchTables(p.info, sections);
  const uint32_t numSteps = t.tbs[1].numSteps;
  RawTrace raw(2, 2);
  raw.header(0, {100, 200, 0, 0});
  DeviceTrace out;
  // CTA 1 never wrote its header.
  EXPECT_EQ(decodeTrace(raw.bytes, 2, t, sections, out).message(),
            "threadblock 0 of rank 2 left no trace");
  raw.header(1, {100, 200, 2, 0});
  raw.record(1, 0, {0, 0, 0, 120, 130});
  raw.record(1, 1, {0, numSteps, 0, 140, 150});
  EXPECT_EQ(decodeTrace(raw.bytes, 2, t, sections, out).message(),
            "threadblock 0 of rank 2: trace record 1 is not a step it has");
  raw.record(1, 1, {0, 1, 0, 140, 150});
  EXPECT_TRUE(decodeTrace(raw.bytes, 2, t, sections, out));
  EXPECT_EQ(out.timeline.events.size(), 2u);
  std::vector<char> shorter(raw.bytes.begin(), raw.bytes.end() - 1);
  EXPECT_EQ(decodeTrace(shorter, 2, t, sections, out).message(),
            "the trace holds " + std::to_string(shorter.size()) + " bytes, not the " +
                std::to_string(raw.bytes.size()) + " of 2 threadblocks");
}

//===----------------------------------------------------------------------===//
// On GPUs
//===----------------------------------------------------------------------===//

int gpuCount() {
  int n = 0;
  if (!haveGpu() || cudaGetDeviceCount(&n) != cudaSuccess)
    return 0;
  return n;
}

/// Runs \p comm's rank of an allreduce of \p count elements of \p type with
/// \p op on fresh device buffers (in place or not) and compares the result
/// with the reference computed on the host from every rank's input.
/// Returns "" or what went wrong.
std::string checkAllReduce(NcclCommunicator &comm, uint64_t count, DataType type, RedOp op,
                           bool inPlace, cudaStream_t stream, char *sendIn = nullptr,
                           char *recvIn = nullptr) {
  const uint32_t n = comm.size(), rank = comm.rank();
  const uint64_t es = dataTypeSize(type), bytes = count * es;
  std::vector<std::vector<char>> inputs(n, std::vector<char>(bytes));
  for (uint32_t r = 0; r < n; ++r)
    fillTestInput(type, op, n, r, count, inputs[r].data());
  std::vector<std::vector<char>> want(n, std::vector<char>(bytes));
  std::vector<const void *> ins;
  std::vector<void *> outs;
  for (uint32_t r = 0; r < n; ++r) {
    ins.push_back(inputs[r].data());
    outs.push_back(want[r].data());
  }
  if (Status st = referenceCollective(CollectiveKind::AllReduce, n, 0, count, type, op, ins, outs);
      !st)
    return "reference: " + st.message();

  // The caller's buffers (a registered window), else buffers of its own.
  char *send = sendIn, *recv = recvIn;
  const bool own = !sendIn;
  if (own && (cudaMalloc(&send, bytes) || cudaMalloc(&recv, bytes)))
    return "cannot allocate the buffers";
  std::string out;
  // Pageable copies and memsets may still be in flight when they return,
  // and \p stream need not wait for the default stream: synchronise.
  if (cudaMemcpy(send, inputs[rank].data(), bytes, cudaMemcpyHostToDevice) ||
      cudaMemset(recv, 0xcd, bytes) || cudaDeviceSynchronize())
    out = "cannot fill the input";
  char *dst = inPlace ? send : recv;
  if (out.empty()) {
    if (Status st = comm.run(send, dst, count, type, op, stream); !st)
      out = "run: " + st.message();
  }
  if (out.empty()) {
    std::vector<char> got(bytes);
    if (cudaMemcpy(got.data(), dst, bytes, cudaMemcpyDeviceToHost))
      out = "cannot read the output";
    uint64_t first = 0;
    if (out.empty())
      if (uint64_t bad = countMismatches(type, got.data(), want[rank].data(), count, &first))
        out = cat("rank ", rank, ": ", bad, " of ", count, " elements differ; first at ", first,
                  ": ", formatElement(type, got.data(), first), " instead of ",
                  formatElement(type, want[rank].data(), first));
  }
  if (own) {
    cudaFree(send);
    cudaFree(recv);
  }
  return out;
}

TEST(LaunchHelpers, StagingCopiesInOneLaunch) {
  if (gpuCount() < 1)
    GTEST_SKIP() << "no usable CUDA device";
  // 80 small copies (two batches) and empty ones, every misalignment and
  // size class; of 3 MiB misaligned byte-wise (cudaMemcpyAsync), of 1 MiB
  // and 2 MiB aligned alike and to 4 bytes (in the batch kernel), and of
  // 17 MiB (cudaMemcpyAsync), into disjoint places of one buffer.
  const uint64_t srcBytes = 20ull << 20, dstBytes = 64ull << 20;
  std::vector<unsigned char> src(srcBytes);
  for (uint64_t i = 0; i < srcBytes; ++i)
    src[i] = static_cast<unsigned char>((i * 7 + i / 251) % 253);
  char *dsrc = nullptr, *ddst = nullptr;
  ASSERT_EQ(cudaMalloc(&dsrc, srcBytes), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&ddst, dstBytes), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dsrc, src.data(), srcBytes, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemset(ddst, 0xcd, dstBytes), cudaSuccess);
  const uint64_t sizes[] = {1, 15, 16, 17, 100, 4095, 65536 + 13, 200003, 1000000, 33};
  std::vector<kernels::StagingCopy> copies;
  uint64_t at = 0;
  for (uint32_t i = 0; i < 80; ++i) {
    uint64_t bytes = sizes[i % 10], from = (i * 37) % 4096 + i % 16, to = at + (i * 5) % 16;
    copies.push_back({ddst + to, dsrc + from, bytes});
    if (i % 20 == 0)
      copies.push_back({ddst, dsrc, 0});
    at = (to + bytes + 64 + 255) / 256 * 256;
  }
  copies.push_back({ddst + at + 3, dsrc + 1, 3ull << 20});
  at += (3ull << 20) + 4096;
  copies.push_back({ddst + at, dsrc, 1ull << 20});
  at += (1ull << 20) + 4096;
  copies.push_back({ddst + at + 4, dsrc + 8, (2ull << 20) + 3});
  at += (2ull << 20) + 4096;
  copies.push_back({ddst + at + 5, dsrc + 7, 17ull << 20});
  ASSERT_LE(at + 5 + (17ull << 20), dstBytes);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(launchStagingCopies(copies, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  std::vector<unsigned char> want(dstBytes, 0xcd), got(dstBytes);
  for (const kernels::StagingCopy &c : copies)
    std::memcpy(want.data() + (c.to - ddst), src.data() + (c.from - dsrc), c.bytes);
  ASSERT_EQ(cudaMemcpy(got.data(), ddst, dstBytes, cudaMemcpyDeviceToHost), cudaSuccess);
  uint64_t wrong = 0, first = 0;
  for (uint64_t i = 0; i < dstBytes; ++i)
    if (got[i] != want[i] && wrong++ == 0)
      first = i;
  EXPECT_EQ(wrong, 0u) << "first wrong byte at " << first;

  // Avg's division of 70 buffers (two launches): against the host's.
  const uint64_t n = 10007;
  const uint32_t nbufs = 70;
  std::vector<std::vector<int32_t>> host(nbufs, std::vector<int32_t>(n));
  std::vector<void *> bufs;
  for (uint32_t b = 0; b < nbufs; ++b) {
    for (uint64_t i = 0; i < n; ++i)
      host[b][i] = int32_t(i * 13 + b * 1000003) - 700000;
    bufs.push_back(ddst + b * n * 4);
    ASSERT_EQ(cudaMemcpy(bufs[b], host[b].data(), n * 4, cudaMemcpyHostToDevice), cudaSuccess);
    divideRange<DataType::Int32>(host[b].data(), n, 6);
  }
  ASSERT_EQ(launchDivide(DataType::Int32, bufs, n, 6, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  for (uint32_t b = 0; b < nbufs; ++b) {
    std::vector<int32_t> out(n);
    ASSERT_EQ(cudaMemcpy(out.data(), bufs[b], n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(out, host[b]) << "buffer " << b;
  }
  cudaStreamDestroy(stream);
  cudaFree(dsrc);
  cudaFree(ddst);
}

/// One rank, two threadblocks: tb 0 copies the input to scratch; tb 1
/// waits for it, copies scratch to the output, then reduces scratch into
/// the output (x op x = x for max and min).
Plan localPlan() {
  Plan p = makePlan("local_copy_reduce", CollectiveKind::AllReduce, 1, 2, 2, 1);
  p.ranks[0].scratchChunks = 2;
  Threadblock a, b;
  add(a, step(Opcode::Copy, I, 0, S, 0, 2));
  add(b, step(Opcode::Copy, S, 0, O, 0, 2), {{0, 0}});
  add(b, step(Opcode::Reduce, S, 0, O, 0, 1));
  add(b, step(Opcode::Reduce, S, 1, O, 1, 1));
  p.ranks[0].threadblocks = {a, b};
  return p;
}

TEST(LaunchTables, ProgressOnlyWhereWaitedFor) {
  Plan p = localPlan();
  // A second copy of the rank's program behind the first: the indices
  // are per rank.
  Threadblock c;
  add(c, step(Opcode::Copy, O, 0, S, 0, 1), {{1, 2}});
  add(c, step(Opcode::Copy, O, 1, S, 1, 1));
  p.ranks[0].threadblocks.push_back(c);
  std::vector<RankSection> sections = {{0, &p.ranks[0]}, {0, &p.ranks[0]}};
  LaunchTables t = buildLaunchTables(p.info, sections);
  ASSERT_EQ(t.tbs.size(), 6u);
  for (uint32_t s = 0; s < 2; ++s) {
    EXPECT_EQ(t.tbs[3 * s + 0].progressSteps, 1u) << "tb 1 waits for step 0";
    EXPECT_EQ(t.tbs[3 * s + 1].progressSteps, 3u) << "tb 2 waits for step 2";
    EXPECT_EQ(t.tbs[3 * s + 2].progressSteps, 0u) << "nobody waits";
  }
}

//===----------------------------------------------------------------------===//
// Ranks without work, and the memory a launch asks for: no GPU
//===----------------------------------------------------------------------===//

/// The hand-written ring between ranks 0 and 1 in a plan of four ranks:
/// ranks 2 and 3 have no threadblocks.
Plan idleRanksPlan() {
  Plan p = ringAllReduce(2, 2);
  p.info.name = "hand_idle_ranks";
  p.info.nranks = 4;
  p.ranks.resize(4);
  return p;
}

/// One rank and no threadblocks: an in-place allreduce that is the identity.
Plan emptyOneRankPlan() {
  Plan p = makePlan("one_rank_nothing", CollectiveKind::AllReduce, 1, 1, 1, 2);
  p.info.inplace = true;
  return p;
}

TEST(IdleRanks, ARankWithoutThreadblocksHasEmptyTables) {
  Plan p = idleRanksPlan();
  ASSERT_TRUE(validatePlan(p)) << validatePlan(p).message();
  const std::vector<RankSection> idle = {{2, &p.ranks[2]}};
  LaunchTables t = buildLaunchTables(p.info, idle);
  EXPECT_TRUE(t.tbs.empty());
  EXPECT_TRUE(t.fifos.empty());
  EXPECT_TRUE(t.remoteSends.empty());
  EXPECT_EQ(t.numRecvFifos, 0u);
  EXPECT_EQ(t.sharedSteps, 0u);
  EXPECT_FALSE(writesInput(p.ranks[2]));
  Result<ConnectionLayout> l = layoutConnections(t, p.ranks[2], 2, 4096, std::vector<bool>(4));
  ASSERT_TRUE(l) << l.message();
  EXPECT_TRUE(l->entries.empty());
  EXPECT_EQ(l->bytes, 0u);
  EXPECT_EQ(l->signals, 0u);
  EXPECT_TRUE(checkConnectionMemory(*l, 2, 0));

  // Every rank's connections match; the idle ranks' with nothing.
  std::vector<std::vector<ConnectionEntry>> all;
  for (uint32_t r = 0; r < 4; ++r) {
    LaunchTables tr = buildLaunchTables(p.info, {{r, &p.ranks[r]}});
    Result<ConnectionLayout> lr = layoutConnections(tr, p.ranks[r], r, 4096, std::vector<bool>(4));
    ASSERT_TRUE(lr) << lr.message();
    all.push_back(lr->entries);
  }
  for (uint32_t r = 0; r < 4; ++r) {
    Result<ConnectionMatch> m = matchConnections(all, r);
    ASSERT_TRUE(m) << m.message();
    EXPECT_EQ(m->sendTo.size(), r < 2 ? 1u : 0u) << "rank " << r;
    EXPECT_EQ(m->recvFrom.size(), r < 2 ? 1u : 0u) << "rank " << r;
  }

  // A launch of the idle rank allocates nothing but a copy it may need.
  const SliceShape shape = sliceShape(1000, *planChunksPerUnit(p.info), 4096, 4);
  Result<LaunchMemory> m = layoutLaunchMemory(t, idle, shape.layout, shape.pieceStride, 4,
                                              /*slots=*/false, {0}, MemoryCap());
  ASSERT_TRUE(m) << m.message();
  EXPECT_EQ(m->slotBytes + m->scratchBytes + m->copyBytes, 0u);
}

TEST(IdleRanks, EveryRankOnOneDevice) {
  // DeviceWorld's tables: the idle ranks add no CTA and no FIFO, and keep
  // their place in the buffer table.
  Plan p = idleRanksPlan();
  std::vector<RankSection> sections;
  for (uint32_t r = 0; r < 4; ++r)
    sections.push_back({r, &p.ranks[r]});
  LaunchTables t = buildLaunchTables(p.info, sections);
  ASSERT_EQ(t.tbs.size(), 2u);
  EXPECT_EQ(t.tbs[0].rank, 0u);
  EXPECT_EQ(t.tbs[1].rank, 1u);
  ASSERT_EQ(t.fifos.size(), 2u);
  EXPECT_TRUE(t.remoteSends.empty());
  EXPECT_EQ(t.tbs[0].sendFifo, t.tbs[1].recvFifo);
  EXPECT_EQ(t.tbs[1].sendFifo, t.tbs[0].recvFifo);
  const SliceShape shape = sliceShape(1000, *planChunksPerUnit(p.info), 4096, 4);
  Result<LaunchMemory> m = layoutLaunchMemory(t, sections, shape.layout, shape.pieceStride, 4,
                                              /*slots=*/true, {0, 0, 4000, 0}, MemoryCap());
  ASSERT_TRUE(m) << m.message();
  EXPECT_EQ(m->slotBytes, 2 * 2 * shape.pieceStride);
  EXPECT_EQ(m->scratchBytes, 0u);
  EXPECT_EQ(m->copyBytes, 4096u); // Rank 2's copy, rounded to 256 bytes.
  EXPECT_EQ(m->scratchOffset.size(), 4u);
  EXPECT_EQ(m->copyOffset, (std::vector<uint64_t>{0, 0, 0, 4096}));
}

TEST(IdleRanks, OneRankWithoutThreadblocks) {
  Plan p = emptyOneRankPlan();
  ASSERT_TRUE(validatePlan(p)) << validatePlan(p).message();
  const std::vector<RankSection> one = {{0, &p.ranks[0]}};
  LaunchTables t = buildLaunchTables(p.info, one);
  EXPECT_TRUE(t.tbs.empty());
  EXPECT_TRUE(t.fifos.empty());
  Result<ConnectionLayout> l = layoutConnections(t, p.ranks[0], 0, 4096, std::vector<bool>(1));
  ASSERT_TRUE(l) << l.message();
  EXPECT_EQ(l->bytes, 0u);
  Result<ConnectionMatch> m = matchConnections({l->entries}, 0);
  ASSERT_TRUE(m) << m.message();
  // Called out of place, the in-place plan's input is staged into the
  // output, and nothing else happens.
  std::vector<float> in(7), out(7);
  BoundCall c = bindOn(p, 0, reinterpret_cast<char *>(in.data()),
                       reinterpret_cast<char *>(out.data()), 7, nullptr);
  ASSERT_EQ(c.b.before.size(), 1u);
  EXPECT_EQ(c.b.before[0].to, reinterpret_cast<char *>(out.data()));
  EXPECT_EQ(c.b.before[0].bytes, 28u);
  EXPECT_EQ(c.call.copyBytes, 0u);
}

TEST(LaunchMemory, SizeOverflowNamesThePlanField) {
  Plan p = localPlan();
  p.ranks[0].scratchChunks = 0xffffffffu;
  const std::vector<RankSection> one = {{0, &p.ranks[0]}};
  LaunchTables t = buildLaunchTables(p.info, one);
  const ChunkLayout layout = ChunkLayout::make(uint64_t(1) << 40, 2, 1 << 20);
  Result<LaunchMemory> m =
      layoutLaunchMemory(t, one, layout, 16, 8, /*slots=*/true, {0}, MemoryCap());
  ASSERT_FALSE(m);
  EXPECT_EQ(m.message(), "rank 0's scratch (scratchChunks 4294967295 x 549755813888 elements x 8 "
                         "bytes) overflows 64 bits");

  // A FIFO: connectionDepth x the largest message x the slice.
  Plan ring = ringAllReduce(4, 2);
  ring.info.connectionDepth = 0xffffffffu;
  std::vector<RankSection> all;
  for (uint32_t r = 0; r < 4; ++r)
    all.push_back({r, &ring.ranks[r]});
  LaunchTables rt = buildLaunchTables(ring.info, all);
  m = layoutLaunchMemory(rt, all, layout, uint64_t(1) << 40, 8, /*slots=*/true, {}, MemoryCap());
  ASSERT_FALSE(m);
  EXPECT_EQ(m.message(), "the FIFO of rank 0 threadblock 0 (connectionDepth 4294967295 x 1 chunks "
                         "per message x 1099511627776 bytes per slice) overflows 64 bits");
  // The same FIFO laid out for NcclCommunicator's rank 1.
  LaunchTables r1 = buildLaunchTables(ring.info, {{1, &ring.ranks[1]}});
  Result<ConnectionLayout> l =
      layoutConnections(r1, ring.ranks[1], 1, uint64_t(1) << 40, std::vector<bool>(4));
  ASSERT_FALSE(l);
  EXPECT_EQ(l.message(), "the FIFO of rank 1 threadblock 0 (connectionDepth 4294967295 x 1 chunks "
                         "per message x 1099511627776 bytes per slice) overflows 64 bits");
}

TEST(LaunchMemory, CapNamesTheLargestPart) {
  Plan p = localPlan();
  p.ranks[0].scratchChunks = 4194304;
  const std::vector<RankSection> one = {{0, &p.ranks[0]}};
  LaunchTables t = buildLaunchTables(p.info, one);
  const ChunkLayout layout = ChunkLayout::make(2048, 2, 1024);
  MemoryCap cap;
  cap.bufferBytes = 16384;
  cap.option = "DeviceOptions::memoryLimitBytes";
  Result<LaunchMemory> m = layoutLaunchMemory(t, one, layout, 4096, 4, true, {0}, cap);
  ASSERT_FALSE(m);
  EXPECT_NE(m.message().find("17179869184 bytes for rank 0's scratch (scratchChunks 4194304 x 1024 "
                             "elements x 4 bytes); raise the limit with "
                             "DeviceOptions::memoryLimitBytes"),
            std::string::npos)
      << m.message();
  cap.limitBytes = noMemoryLimit;
  m = layoutLaunchMemory(t, one, layout, 4096, 4, true, {0}, cap);
  ASSERT_TRUE(m) << m.message();
  EXPECT_EQ(m->scratchBytes, uint64_t(1) << 34);

  // Memory held already counts.
  p.ranks[0].scratchChunks = 0;
  cap.limitBytes = 100;
  cap.heldBytes = 1000;
  cap.heldWhat = "rank 0's connection memory";
  cap.option = "NcclOptions::memoryLimitBytes";
  m = layoutLaunchMemory(t, one, layout, 4096, 4, false, {0}, cap);
  ASSERT_FALSE(m);
  EXPECT_EQ(m.message(), "the call needs 1000 bytes of memory besides its buffers, more than the "
                         "memory limit of 100 bytes: 1000 bytes for rank 0's connection memory; "
                         "raise the limit with NcclOptions::memoryLimitBytes");
}

TEST(LaunchMemory, ConnectionMemoryIsCappedAtSetup) {
  Plan p = ringAllReduce(4, 4096);
  LaunchTables t = buildLaunchTables(p.info, {{1, &p.ranks[1]}});
  Result<ConnectionLayout> l = layoutConnections(t, p.ranks[1], 1, 1 << 20, std::vector<bool>(4));
  ASSERT_TRUE(l) << l.message();
  EXPECT_EQ(l->largestBytes, uint64_t(4096) << 20);
  Status s = checkConnectionMemory(*l, 1, 0);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("rank 1 needs "), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("(the default at setup: 256 MiB): 4294967296 bytes for the FIFO of "
                             "rank 1 threadblock 0 (connectionDepth 4096 x 1 chunks per message x "
                             "1048576 bytes per slice); raise the limit with "
                             "NcclOptions::memoryLimitBytes"),
            std::string::npos)
      << s.message();
  EXPECT_TRUE(checkConnectionMemory(*l, 1, noMemoryLimit));
}

TEST(NcclGpu, OneRankLocalSteps) {
  if (!haveGpu())
    GTEST_SKIP() << "no usable CUDA device";
  Plan plan = localPlan();
  ASSERT_TRUE(validatePlan(plan)) << validatePlan(plan).message();
  ncclComm_t nccl = nullptr;
  int dev = 0;
  ASSERT_EQ(ncclCommInitAll(&nccl, 1, &dev), ncclSuccess);
  {
    NcclOptions options;
    options.sliceBytes = 4096; // Many slices: the counters move across launches.
    options.timeoutSeconds = 10;
    Result<std::unique_ptr<NcclCommunicator>> comm = NcclCommunicator::create(plan, nccl, options);
    ASSERT_TRUE(comm) << comm.message();
    EXPECT_EQ((*comm)->size(), 1u);
    EXPECT_EQ((*comm)->rank(), 0u);
    EXPECT_EQ((*comm)->numBlocks(), 2u);
    for (DataType type : {DataType::Float32, DataType::Int32})
      for (RedOp op : {RedOp::Max, RedOp::Min})
        for (uint64_t count : {1ull, 7ull, 1000ull, 1000003ull})
          for (bool inPlace : {false, true})
            EXPECT_EQ(checkAllReduce(**comm, count, type, op, inPlace, nullptr), "")
                << dataTypeName(type) << " count " << count << (inPlace ? " in place" : "");
    EXPECT_TRUE((*comm)->check());
  }
  ncclCommDestroy(nccl);
}

/// A launch captured into a CUDA graph replays with the slice base of each
/// replay (kept in device memory) and its own buffer table: the plan's
/// threadblocks wait on each other's progress counters, which go on
/// counting from launch to launch, so a replay with the base of its
/// capture would wait for steps long done or read a stale table.
TEST(NcclGpu, OneRankGraphCapturedLaunchReplays) {
  if (!haveGpu())
    GTEST_SKIP() << "no usable CUDA device";
  Plan plan = localPlan();
  ncclComm_t nccl = nullptr;
  int dev = 0;
  ASSERT_EQ(ncclCommInitAll(&nccl, 1, &dev), ncclSuccess);
  {
    NcclOptions options;
    options.sliceBytes = 4096; // Many slices per launch.
    options.timeoutSeconds = 10;
    Result<std::unique_ptr<NcclCommunicator>> comm = NcclCommunicator::create(plan, nccl, options);
    ASSERT_TRUE(comm) << comm.message();
    const uint64_t count = 100003;
    const uint64_t bytes = count * 4;
    // Two pairs of buffers: each captured launch keeps its own.
    std::vector<float *> in(2), out(2);
    for (int b = 0; b < 2; ++b) {
      ASSERT_EQ(cudaMalloc(&in[b], bytes), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&out[b], bytes), cudaSuccess);
    }
    cudaStream_t stream = nullptr;
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    std::vector<float> input(count);
    auto fill = [&](int b, uint32_t round) {
      for (uint64_t i = 0; i < count; ++i)
        input[i] = float((round * 7919 + b * 104729 + i * 31) % 1000003);
      ASSERT_EQ(cudaMemcpy(in[b], input.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_EQ(cudaMemset(out[b], 0xcd, bytes), cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    };
    // The plan's max of a value with itself: the input.
    auto expectInput = [&](int b, const std::string &what) {
      std::vector<float> got(count);
      ASSERT_EQ(cudaMemcpy(got.data(), out[b], bytes, cudaMemcpyDeviceToHost), cudaSuccess);
      uint64_t wrong = 0, first = count;
      for (uint64_t i = 0; i < count; ++i)
        if (got[i] != input[i] && wrong++ == 0)
          first = i;
      EXPECT_EQ(wrong, 0u) << what << ": first wrong element " << first;
    };
    fill(0, 0);
    ASSERT_TRUE((*comm)->run(in[0], out[0], count, DataType::Float32, RedOp::Max, stream));
    expectInput(0, "first launch");

    std::vector<cudaGraphExec_t> execs(2, nullptr);
    for (int b = 0; b < 2; ++b) {
      cudaGraph_t graph = nullptr;
      ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
      Status captured =
          (*comm)->launch(in[b], out[b], count, DataType::Float32, RedOp::Max, stream);
      cudaError_t ended = cudaStreamEndCapture(stream, &graph);
      ASSERT_TRUE(captured) << captured.message();
      ASSERT_EQ(ended, cudaSuccess) << cudaGetErrorString(ended);
      ASSERT_EQ(cudaGraphInstantiate(&execs[b], graph, 0), cudaSuccess);
      cudaGraphDestroy(graph);
    }
    // Replays of both graphs, normal launches between them.
    for (uint32_t round = 1; round <= 4; ++round) {
      for (int b = 0; b < 2; ++b) {
        fill(b, round);
        ASSERT_EQ(cudaGraphLaunch(execs[b], stream), cudaSuccess);
        ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
        expectInput(b, cat("replay ", round, " of graph ", b));
        ASSERT_TRUE((*comm)->check());
      }
      fill(1 - round % 2, round + 100);
      ASSERT_TRUE((*comm)->run(in[1 - round % 2], out[1 - round % 2], count, DataType::Float32,
                               RedOp::Max, stream));
      expectInput(1 - round % 2, cat("launch after replay ", round));
    }
    for (cudaGraphExec_t e : execs)
      cudaGraphExecDestroy(e);
    cudaStreamDestroy(stream);
    for (int b = 0; b < 2; ++b) {
      cudaFree(in[b]);
      cudaFree(out[b]);
    }
  }
  ncclCommDestroy(nccl);
}

TEST(NcclGpu, OneRankWithoutThreadblocks) {
  if (!haveGpu())
    GTEST_SKIP() << "no usable CUDA device";
  Plan plan = emptyOneRankPlan();
  ncclComm_t nccl = nullptr;
  int dev = 0;
  ASSERT_EQ(ncclCommInitAll(&nccl, 1, &dev), ncclSuccess);
  {
    Result<std::unique_ptr<NcclCommunicator>> comm = NcclCommunicator::create(plan, nccl);
    ASSERT_TRUE(comm) << comm.message();
    EXPECT_EQ((*comm)->numBlocks(), 0u);
    for (RedOp op : {RedOp::Sum, RedOp::Avg})
      for (uint64_t count : {1ull, 1000ull, 1000003ull})
        for (bool inPlace : {false, true})
          EXPECT_EQ(checkAllReduce(**comm, count, DataType::Float32, op, inPlace, nullptr), "")
              << "count " << count << (inPlace ? " in place" : "");
    EXPECT_TRUE((*comm)->check());
  }
  ncclCommDestroy(nccl);
}

TEST(NcclGpu, OneRankRejectsAPlanOfTwo) {
  if (!haveGpu())
    GTEST_SKIP() << "no usable CUDA device";
  ncclComm_t nccl = nullptr;
  int dev = 0;
  ASSERT_EQ(ncclCommInitAll(&nccl, 1, &dev), ncclSuccess);
  Result<std::unique_ptr<NcclCommunicator>> comm =
      NcclCommunicator::create(ringAllReduce(2, 2), nccl);
  ASSERT_FALSE(comm);
  EXPECT_EQ(comm.message(), "the plan has 2 ranks but the NCCL communicator has 1");
  ncclCommDestroy(nccl);
}

/// Runs \p rankMain(r, comm, stream, report) on \p n GPUs of one
/// communicator (ncclCommInitAll), a thread per rank on its own device and
/// stream; each failure \p report gets fails the test, naming its rank.
template <class RankMain> void onEveryGpu(int n, RankMain rankMain) {
  std::vector<ncclComm_t> comms(n);
  std::vector<int> devs(n);
  for (int d = 0; d < n; ++d)
    devs[d] = d;
  ASSERT_EQ(ncclCommInitAll(comms.data(), n, devs.data()), ncclSuccess);
  std::mutex mu;
  std::vector<std::string> errors;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      auto report = [&](const std::string &what) {
        std::lock_guard<std::mutex> lock(mu);
        errors.push_back(cat("rank ", r, ": ", what));
      };
      cudaSetDevice(r);
      cudaStream_t stream = nullptr;
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
      rankMain(r, comms[r], stream, report);
      cudaStreamDestroy(stream);
    });
  for (std::thread &t : threads)
    t.join();
  for (ncclComm_t c : comms)
    ncclCommDestroy(c);
  for (const std::string &e : errors)
    ADD_FAILURE() << e;
}

/// The hand-written ring across \p n GPUs, a thread per rank, over
/// \p transport.
void ringAcrossGpus(int n, NcclTransport transport) {
  const Plan plan = ringAllReduce(uint32_t(n), 2);
  onEveryGpu(n, [&](int, ncclComm_t nccl, cudaStream_t stream, auto &report) {
    {
      NcclOptions options;
      options.sliceBytes = 16384;
      options.timeoutSeconds = 20;
      options.transport = transport;
      Result<std::unique_ptr<NcclCommunicator>> comm =
          NcclCommunicator::create(plan, nccl, options);
      if (!comm) {
        // Every rank fails together; nothing else to run.
        report("create: " + comm.message());
      } else {
        // One node: Auto picks IPC; nobody is reached over the network.
        NcclTransport expected = transport == NcclTransport::Auto ? NcclTransport::Ipc : transport;
        if ((*comm)->transport() != expected || (*comm)->networkPeers() != 0)
          report(cat("transport ", uint32_t((*comm)->transport()), " with ",
                     (*comm)->networkPeers(), " peers over the network"));
        // The same sequence of calls on every rank: counts that differ from
        // launch to launch move the counters by different slice counts.
        for (uint64_t count : {1ull, 1000ull, 1000003ull, 5ull, 4ull << 20})
          for (bool inPlace : {false, true}) {
            std::string e =
                checkAllReduce(**comm, count, DataType::Float32, RedOp::Sum, inPlace, stream);
            if (!e.empty())
              report(cat("count ", count, inPlace ? " in place: " : ": ", e));
          }
        std::string e = checkAllReduce(**comm, 4097, DataType::Int64, RedOp::Max, false, stream);
        if (!e.empty())
          report("int64 max: " + e);
      }
      // The destructor waits for every rank here.
    }
  });
}

/// The ring across GPUs with its buffers in a registered window
/// (ncclMemAlloc, ncclCommWindowRegister, then registerWindow()): the
/// receivers read the `rrcs` and `rcs` results where the senders stored
/// them, through NCCL's mapping of the window; every output is right, and
/// each rank read in place exactly its sender's marked steps (n - 1 per
/// slice) of every launch. Then the window is deregistered and the ring
/// runs through the slots again.
void ringReadsWindowsInPlace(int n, NcclTransport transport) {
  const Plan plan = ringAllReduce(uint32_t(n), 2);
  onEveryGpu(n, [&](int, ncclComm_t nccl, cudaStream_t stream, auto &report) {
    const uint64_t most = 1000003, bytes = 2 * most * sizeof(float);
    void *memory = nullptr;
    ncclWindow_t window = nullptr;
    if (ncclMemAlloc(&memory, bytes) != ncclSuccess) {
      report("ncclMemAlloc failed");
    } else if (ncclCommWindowRegister(nccl, memory, bytes, &window, NCCL_WIN_COLL_SYMMETRIC) !=
               ncclSuccess) {
      report("ncclCommWindowRegister failed");
    } else {
      NcclOptions options;
      options.sliceBytes = 16384;
      options.timeoutSeconds = 20;
      options.transport = transport;
      Result<std::unique_ptr<NcclCommunicator>> comm =
          NcclCommunicator::create(plan, nccl, options);
      if (!comm) {
        report("create: " + comm.message());
      } else if (Status st = (*comm)->registerWindow(memory, bytes, window); !st) {
        report("registerWindow: " + st.message());
      } else {
        char *send = static_cast<char *>(memory), *recv = send + most * sizeof(float);
        uint64_t expected = 0;
        for (uint64_t count : {uint64_t(1), uint64_t(1000), most})
          for (bool inPlace : {false, true}) {
            std::string e = checkAllReduce(**comm, count, DataType::Float32, RedOp::Sum, inPlace,
                                           stream, send, recv);
            if (!e.empty())
              report(cat("count ", count, inPlace ? " in place: " : ": ", e));
            expected += uint64_t(n - 1) *
                        sliceShape(count, uint32_t(n), options.sliceBytes, 4).layout.numSlices;
          }
        if ((*comm)->directMessages() != expected)
          report(cat((*comm)->directMessages(), " messages read in place, not ", expected));
        if (Status st = (*comm)->deregisterWindow(window); !st)
          report("deregisterWindow: " + st.message());
        std::string e =
            checkAllReduce(**comm, 1000, DataType::Float32, RedOp::Sum, false, stream, send, recv);
        if (!e.empty())
          report("after deregistering: " + e);
        if ((*comm)->directMessages() != expected)
          report("messages read in place after the window was deregistered");
      }
      // The communicator is gone before the window (its destructor waits
      // for every rank).
      comm = Status::error("released");
      ncclCommWindowDeregister(nccl, window);
    }
    if (memory)
      ncclMemFree(memory);
  });
}

TEST(NcclGpu, RingAcrossGpusReadsRegisteredWindowsInPlace) {
  const int n = std::min(gpuCount(), 8);
  if (n < 2)
    GTEST_SKIP() << "needs two GPUs or more";
  ringReadsWindowsInPlace(n, NcclTransport::Auto);
  ringReadsWindowsInPlace(n, NcclTransport::Symmetric);
}

/// One rank: a window registered and deregistered, and runs with their
/// buffers in it (a rank sends nothing to itself here: no message is read
/// in place, and the results are right).
TEST(NcclGpu, OneRankRegistersAWindow) {
  if (!haveGpu())
    GTEST_SKIP() << "no usable CUDA device";
  Plan plan = localPlan();
  ncclComm_t nccl = nullptr;
  int dev = 0;
  ASSERT_EQ(ncclCommInitAll(&nccl, 1, &dev), ncclSuccess);
  const uint64_t most = 1000003, bytes = 2 * most * sizeof(float);
  void *memory = nullptr;
  ncclWindow_t window = nullptr;
  ASSERT_EQ(ncclMemAlloc(&memory, bytes), ncclSuccess);
  if (ncclCommWindowRegister(nccl, memory, bytes, &window, NCCL_WIN_COLL_SYMMETRIC) !=
      ncclSuccess) {
    ncclMemFree(memory);
    ncclCommDestroy(nccl);
    GTEST_SKIP() << "NCCL registers no window on this communicator";
  }
  {
    NcclOptions options;
    options.sliceBytes = 4096;
    options.timeoutSeconds = 10;
    Result<std::unique_ptr<NcclCommunicator>> comm = NcclCommunicator::create(plan, nccl, options);
    ASSERT_TRUE(comm) << comm.message();
    ASSERT_TRUE((*comm)->registerWindow(memory, bytes, window));
    EXPECT_EQ((*comm)->windows(), 1u);
    EXPECT_FALSE((*comm)->registerWindow(nullptr, 0, window)) << "an empty window";
    EXPECT_EQ((*comm)->windows(), 1u);
    char *send = static_cast<char *>(memory), *recv = send + most * sizeof(float);
    for (uint64_t count : {uint64_t(1), uint64_t(1000), most})
      for (bool inPlace : {false, true})
        EXPECT_EQ(checkAllReduce(**comm, count, DataType::Float32, RedOp::Max, inPlace, nullptr,
                                 send, recv),
                  "")
            << "count " << count << (inPlace ? " in place" : "");
    EXPECT_EQ((*comm)->directMessages(), 0u);
    EXPECT_TRUE((*comm)->deregisterWindow(window));
    EXPECT_EQ((*comm)->windows(), 0u);
    EXPECT_EQ(
        checkAllReduce(**comm, 1000, DataType::Float32, RedOp::Max, false, nullptr, send, recv),
        "");
  }
  ncclCommWindowDeregister(nccl, window);
  ncclMemFree(memory);
  ncclCommDestroy(nccl);
}

TEST(NcclGpu, RingAllReduceAcrossGpus) {
  const int n = std::min(gpuCount(), 8);
  if (n < 2)
    GTEST_SKIP() << "needs two GPUs or more";
  ringAcrossGpus(n, NcclTransport::Auto);
}

TEST(NcclGpu, RingAllReduceAcrossGpusInSymmetricMemory) {
  const int n = std::min(gpuCount(), 8);
  if (n < 2)
    GTEST_SKIP() << "needs two GPUs or more";
  ringAcrossGpus(n, NcclTransport::Symmetric);
}

} // namespace
