//===- LimitsTest.cpp - Failures inside a run, and what a plan may demand -===//
//
// A failure inside one rank's execution (an exception, an allocation that
// fails) reaches every rank of a threads world as an error naming that
// rank, within the timeouts; no rank hangs. The memory a plan makes a call
// allocate (scratch, FIFOs, input copies) is computed with overflow checks
// and capped (ExecOptions::memoryLimitBytes): a plan field that asks for
// too much is an error naming the field and the bytes, never a crash, on
// LocalWorld, a World's communicators and the C API.
//
//===----------------------------------------------------------------------===//

#include "HandPlans.h"
#include "TestHelpers.h"
#include "coll/Runtime/Communicator.h"
#include "coll/Runtime/Executor.h"
#include "coll/Runtime/PlanIO.h"
#include "coll/Runtime/ProcessGroup.h"
#include "coll/coll.h"

#include <chrono>
#include <functional>
#include <gtest/gtest.h>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace coll;
using namespace coll::test;

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

/// An allreduce of one chunk per rank that goes through scratch: each rank
/// copies its input to scratch chunk 0 and from there to its output. It
/// declares \p scratchChunks scratch chunks on rank \p bigRank (1 on the
/// others).
Plan scratchPlan(uint32_t n, uint32_t bigRank, uint32_t scratchChunks) {
  Plan p = makePlan("scratch_copy", CollectiveKind::AllReduce, n, 1, 1, 2);
  for (uint32_t r = 0; r < n; ++r) {
    Threadblock tb;
    add(tb, step(Opcode::Copy, I, 0, S, 0, 1));
    add(tb, step(Opcode::Copy, S, 0, O, 0, 1));
    p.ranks[r].threadblocks.push_back(tb);
    p.ranks[r].scratchChunks = r == bigRank ? scratchChunks : 1;
  }
  return p;
}

struct RankOutcome {
  bool ok = false;
  ErrorKind kind = ErrorKind::None;
  std::string message;
  double seconds = 0;
};

/// Runs \p plan on every rank of a new world of its ranks, each rank with
/// its own buffers of \p bufferElements floats and \p count.
std::vector<RankOutcome> runOnWorld(const Plan &plan, uint64_t count, uint64_t bufferElements,
                                    const WorldOptions &options = WorldOptions()) {
  const int n = int(plan.info.nranks);
  auto world = World::create(n, options);
  EXPECT_TRUE(world.ok()) << world.message();
  std::vector<RankOutcome> out(static_cast<size_t>(n));
  if (!world.ok())
    return out;
  std::vector<std::vector<float>> bufs(size_t(n), std::vector<float>(bufferElements, 1.0f));
  std::vector<std::thread> threads;
  Clock::time_point start = Clock::now();
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      auto comm = (*world)->communicator(r);
      if (!comm) {
        out[size_t(r)].message = comm.message();
        return;
      }
      float *b = bufs[size_t(r)].data();
      Status s = (*comm)->execute(plan, b, b, count, DataType::Float32, RedOp::Sum);
      out[size_t(r)] = {s.ok(), (*comm)->lastErrorKind(), s.message(), secondsSince(start)};
    });
  for (std::thread &t : threads)
    t.join();
  return out;
}

/// LocalWorld::run with one buffer per rank of \p bufferElements floats.
Status runLocal(const Plan &plan, uint64_t count, uint64_t bufferElements,
                const ExecOptions &options = ExecOptions()) {
  const uint32_t n = plan.info.nranks;
  std::vector<std::vector<float>> bufs(n, std::vector<float>(bufferElements, 1.0f));
  std::vector<const void *> send(n);
  std::vector<void *> recv(n);
  for (uint32_t r = 0; r < n; ++r)
    send[r] = recv[r] = bufs[r].data();
  return LocalWorld().run(plan, send, recv, count, DataType::Float32, RedOp::Sum, options);
}

// A loader-accepted scratchChunks of 2^28 on a call of 2^20 floats asks
// for 2^50 bytes of scratch.
constexpr uint32_t hugeScratch = 1u << 28;

TEST(Limits, HugeScratchIsAnErrorOnLocalWorld) {
  Plan plan = scratchPlan(2, 1, hugeScratch);
  ASSERT_TRUE(validatePlan(plan).ok());
  for (ExecMode mode : {ExecMode::Threads, ExecMode::Single}) {
    ExecOptions o;
    o.mode = mode;
    Status s = runLocal(plan, 1 << 20, 1 << 20, o);
    ASSERT_FALSE(s.ok());
    EXPECT_TRUE(contains(s.message(), "scratchChunks 268435456")) << s.message();
    EXPECT_TRUE(contains(s.message(), "rank 1")) << s.message();
    EXPECT_TRUE(contains(s.message(), "1125899906842624 bytes")) << s.message();
  }
}

TEST(Limits, HugeScratchIsAnErrorOnEveryRankOfAWorld) {
  Plan plan = scratchPlan(3, 1, hugeScratch);
  WorldOptions o;
  o.rendezvousTimeoutSeconds = 20;
  o.exec.timeoutSeconds = 5;
  std::vector<RankOutcome> got = runOnWorld(plan, 1 << 20, 1 << 20, o);
  for (size_t r = 0; r < got.size(); ++r) {
    EXPECT_FALSE(got[r].ok) << "rank " << r;
    EXPECT_TRUE(contains(got[r].message, "scratchChunks 268435456")) << got[r].message;
    EXPECT_TRUE(contains(got[r].message, "1125899906842624 bytes")) << got[r].message;
  }
}

// 2^28 scratch chunks of 2^36 one-byte elements: 2^64 bytes, 0 when the
// multiplication wraps.
TEST(Limits, OverflowingScratchIsAnError) {
  Plan plan = scratchPlan(1, 0, hugeScratch);
  // Out of place, so that no copy of the (too small) input is made first.
  std::vector<int8_t> in(4096), out(4096);
  const void *send = in.data();
  void *recv = out.data();
  for (ExecMode mode : {ExecMode::Threads, ExecMode::Single}) {
    ExecOptions o;
    o.mode = mode;
    Status s =
        LocalWorld().run(plan, {send}, {recv}, uint64_t(1) << 36, DataType::Int8, RedOp::Sum, o);
    ASSERT_FALSE(s.ok());
    EXPECT_TRUE(contains(s.message(), "scratchChunks 268435456")) << s.message();
    EXPECT_TRUE(contains(s.message(), "overflows")) << s.message();
  }
}

// Two ranks that exchange messages of 2^28 chunks through FIFOs of depth
// 64: with slices of 2^28 floats, a FIFO would need 2^64 bytes.
TEST(Limits, OverflowingFifoIsAnError) {
  const uint32_t chunks = 1u << 28;
  Plan plan = makePlan("big_messages", CollectiveKind::AllReduce, 2, chunks, chunks, 64);
  for (uint32_t r = 0; r < 2; ++r) {
    Threadblock tb;
    tb.sendPeer = tb.recvPeer = int32_t(1 - r);
    add(tb, step(Opcode::Send, I, 0, O, 0, chunks));
    add(tb, step(Opcode::Recv, I, 0, O, 0, chunks));
    plan.ranks[r].threadblocks.push_back(tb);
  }
  ASSERT_TRUE(validatePlan(plan).ok()) << validatePlan(plan).message();
  std::vector<float> in(1024), out(1024);
  ExecOptions o;
  o.sliceElements = chunks;
  Status s = LocalWorld().run(plan, {in.data(), in.data()}, {out.data(), out.data()},
                              uint64_t(chunks) * chunks, DataType::Float32, RedOp::Sum, o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "the FIFO of rank 0 threadblock 0 (connectionDepth 64 x 268435456 chunks "
                         "per message x 1073741824 bytes per slice) overflows 64 bits");
}

/// The C API on a world of \p plan's ranks: every rank's collExecute
/// result and collGetLastError().
std::vector<std::pair<collResult_t, std::string>>
runOnCWorld(const Plan &plan, size_t count, size_t bufferElements,
            const collWorldConfig_t *config = nullptr) {
  std::vector<uint8_t> bytes = serializePlan(plan);
  collPlan_t p = nullptr;
  EXPECT_EQ(collPlanLoadMemory(bytes.data(), bytes.size(), &p), collSuccess)
      << collGetLastError(nullptr);
  const int n = int(plan.info.nranks);
  collWorld_t w = nullptr;
  EXPECT_EQ(collWorldCreateConfig(n, config, &w), collSuccess) << collGetLastError(nullptr);
  std::vector<std::pair<collResult_t, std::string>> out(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      std::vector<float> buf(bufferElements, 1.0f);
      collComm_t c = nullptr;
      if (collCommInitRank(w, r, &c) != collSuccess) {
        out[size_t(r)] = {collInternalError, collGetLastError(nullptr)};
        return;
      }
      collResult_t res = collExecute(buf.data(), buf.data(), count, collFloat32, collSum, p, c);
      out[size_t(r)] = {res, collGetLastError(c)};
      collCommDestroy(c);
    });
  for (std::thread &t : threads)
    t.join();
  collWorldDestroy(w);
  collPlanFree(p);
  return out;
}

TEST(Limits, HugeScratchIsAnErrorThroughTheCApi) {
  Plan plan = scratchPlan(2, 0, hugeScratch);
  for (auto &[res, message] : runOnCWorld(plan, 1 << 20, 1 << 20)) {
    EXPECT_NE(res, collSuccess);
    EXPECT_TRUE(contains(message, "scratchChunks 268435456")) << message;
  }
}

/// A fault injection that throws \p what at \p site of rank \p rank.
std::function<void(FaultSite, uint32_t)> throwAt(FaultSite site, uint32_t rank,
                                                 std::function<void()> what) {
  return [=](FaultSite s, uint32_t r) {
    if (s == site && r == rank)
      what();
  };
}

TEST(Failures, AThrowingWorkerFailsEveryRankOfAWorld) {
  Plan plan = ringAllReduce(4, 2);
  for (uint32_t workers : {1u, 0u}) {
    WorldOptions o;
    o.rendezvousTimeoutSeconds = 30;
    o.exec.timeoutSeconds = 10;
    o.exec.workersPerRank = workers;
    o.exec.faultInjection =
        throwAt(FaultSite::Worker, 2, [] { throw std::runtime_error("injected fault"); });
    std::vector<RankOutcome> got = runOnWorld(plan, 100000, 100000, o);
    for (size_t r = 0; r < got.size(); ++r) {
      EXPECT_FALSE(got[r].ok) << "rank " << r;
      EXPECT_EQ(got[r].kind, ErrorKind::Internal) << got[r].message;
      EXPECT_EQ(got[r].message, "rank 2 failed in a worker thread: injected fault");
      // The others stop at once, not after the progress timeout.
      EXPECT_LT(got[r].seconds, 5.0);
    }
  }
}

TEST(Failures, AnAllocationFailureWhileBindingFailsEveryRank) {
  Plan plan = ringAllReduce(3, 2);
  WorldOptions o;
  o.rendezvousTimeoutSeconds = 30;
  o.exec.timeoutSeconds = 10;
  o.exec.faultInjection = throwAt(FaultSite::Bind, 1, [] { throw std::bad_alloc(); });
  std::vector<RankOutcome> got = runOnWorld(plan, 1000, 1000, o);
  for (size_t r = 0; r < got.size(); ++r) {
    EXPECT_FALSE(got[r].ok);
    EXPECT_EQ(got[r].kind, ErrorKind::SystemError);
    EXPECT_EQ(got[r].message, "rank 1 failed while binding its buffers: out of memory");
  }
  // The world is still usable.
  o.exec.faultInjection = nullptr;
  for (const RankOutcome &g : runOnWorld(plan, 1000, 1000, o))
    EXPECT_TRUE(g.ok) << g.message;
}

TEST(Failures, AThrowingRankFailsLocalWorldInEveryMode) {
  Plan plan = ringAllReduce(3, 2);
  for (ExecMode mode : {ExecMode::Threads, ExecMode::Single})
    for (FaultSite site : {FaultSite::Bind, FaultSite::Worker}) {
      ExecOptions o;
      o.mode = mode;
      o.timeoutSeconds = 10;
      o.faultInjection = throwAt(site, 1, [] { throw 42; });
      Clock::time_point start = Clock::now();
      Status s = runLocal(plan, 1000, 1000, o);
      EXPECT_FALSE(s.ok());
      EXPECT_EQ(s.message().rfind("rank 1 failed ", 0), 0u) << s.message();
      EXPECT_TRUE(contains(s.message(), "an unknown exception")) << s.message();
      EXPECT_LT(secondsSince(start), 5.0);
    }
}

/// A world whose workers get stuck in the fault injection for 5 s, far
/// beyond the progress timeout of 0.25 s.
WorldOptions stuckWorkerOptions() {
  WorldOptions o;
  o.rendezvousTimeoutSeconds = 30;
  o.exec.timeoutSeconds = 0.25;
  o.exec.faultInjection = [](FaultSite s, uint32_t) {
    if (s == FaultSite::Worker)
      std::this_thread::sleep_for(std::chrono::seconds(5));
  };
  return o;
}

// A round that stops showing signs of life (here: a worker stuck in the
// fault injection) is cancelled by the ranks that wait for it, which leave
// with a timeout after twice the progress timeout and a second, cancelled,
// then as long again.
TEST(Failures, WaitersLeaveAStuckRound) {
  Plan plan = ringAllReduce(2, 2);
  WorldOptions o = stuckWorkerOptions();
  std::vector<RankOutcome> got = runOnWorld(plan, 1000, 1000, o);
  int waiters = 0;
  for (const RankOutcome &g : got) {
    EXPECT_FALSE(g.ok);
    EXPECT_EQ(g.kind, ErrorKind::Timeout) << g.message;
    if (contains(g.message, "showed no sign of life for 1.5 s")) {
      ++waiters;
      EXPECT_LT(g.seconds, 4.5);
    } else {
      EXPECT_TRUE(contains(g.message, "cancelled")) << g.message;
    }
  }
  EXPECT_EQ(waiters, 1);
}

// A rank that left a stuck round may free its plan at once (the round runs
// on the runner's); its buffers stay in use until the round ends: until
// then its calls fail at once, and its communicator's destructor waits.
TEST(Failures, ARankThatLeftAStuckRoundWaitsForItsEnd) {
  WorldOptions o = stuckWorkerOptions();
  auto world = World::create(2, o);
  ASSERT_TRUE(world.ok()) << world.message();
  std::vector<std::vector<float>> bufs(2, std::vector<float>(1000, 1.0f));
  std::vector<RankOutcome> first(2), again(2);
  std::vector<double> destroyed(2);
  Clock::time_point start = Clock::now();
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      auto plan = std::make_unique<Plan>(ringAllReduce(2, 2));
      auto comm = (*world)->communicator(r);
      ASSERT_TRUE(comm.ok()) << comm.message();
      float *b = bufs[size_t(r)].data();
      Status s = (*comm)->execute(*plan, b, b, 1000, DataType::Float32, RedOp::Sum);
      first[size_t(r)] = {s.ok(), (*comm)->lastErrorKind(), s.message(), secondsSince(start)};
      plan.reset();
      if (contains(s.message(), "showed no sign of life")) {
        Plan other = ringAllReduce(2, 2);
        s = (*comm)->execute(other, b, b, 1000, DataType::Float32, RedOp::Sum);
        again[size_t(r)] = {s.ok(), (*comm)->lastErrorKind(), s.message(), secondsSince(start)};
      }
      comm = Status::error("destroyed");
      destroyed[size_t(r)] = secondsSince(start);
    });
  for (std::thread &t : threads)
    t.join();
  int leavers = 0;
  for (size_t r = 0; r < 2; ++r) {
    if (!contains(first[r].message, "showed no sign of life"))
      continue;
    ++leavers;
    EXPECT_LT(first[r].seconds, 4.5);
    EXPECT_FALSE(again[r].ok);
    EXPECT_EQ(again[r].kind, ErrorKind::Timeout);
    EXPECT_TRUE(contains(again[r].message, "is still running on this rank's buffers"))
        << again[r].message;
    // The worker sleeps 5 s: the destructor waited for the round.
    EXPECT_GE(destroyed[r], 4.9);
  }
  EXPECT_EQ(leavers, 1);
}

// One plan field can make a call of 4 KiB ask for 16 GiB.
TEST(Limits, TheDefaultCapRefusesWhatTheCallsSizeDoesNotJustify) {
  Plan plan = scratchPlan(1, 0, 1u << 22);
  Status s = runLocal(plan, 1024, 1024);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(contains(s.message(), "17179869184 bytes for rank 0's scratch (scratchChunks "
                                    "4194304 x 1024 elements x 4 bytes)"))
      << s.message();
  EXPECT_TRUE(contains(s.message(), "the default: 8 x the call's 8192 buffer bytes + 256 MiB"))
      << s.message();
  std::vector<RankOutcome> got = runOnWorld(plan, 1024, 1024);
  EXPECT_FALSE(got[0].ok);
  EXPECT_EQ(got[0].kind, ErrorKind::SystemError);
  EXPECT_TRUE(contains(got[0].message, "17179869184 bytes for rank 0's scratch")) << got[0].message;
}

TEST(Limits, AnExplicitCapRefusesOrAllows) {
  // Just over the default cap of a 4 KiB call: 256 MiB + 256 KiB of scratch.
  Plan plan = scratchPlan(1, 0, (1u << 16) + 64);
  EXPECT_FALSE(runLocal(plan, 1024, 1024).ok());
  ExecOptions o;
  o.memoryLimitBytes = 300u << 20;
  Status s = runLocal(plan, 1024, 1024, o);
  EXPECT_TRUE(s.ok()) << s.message();
  o.memoryLimitBytes = noMemoryLimit;
  s = runLocal(plan, 1024, 1024, o);
  EXPECT_TRUE(s.ok()) << s.message();

  // A cap lower than an ordinary call needs: the FIFOs are named.
  Plan ring = ringAllReduce(4, 2);
  o.memoryLimitBytes = 1000;
  s = runLocal(ring, 4000, 4000, o);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(contains(s.message(), "the call needs 96000 bytes of memory besides its buffers, "
                                    "more than the memory limit of 1000 bytes: 16000 bytes for a "
                                    "copy of rank 0's input"))
      << s.message();
  EXPECT_TRUE(contains(s.message(), "raise the limit with ExecOptions::memoryLimitBytes"))
      << s.message();

  // Through a world's options.
  WorldOptions w;
  w.exec.memoryLimitBytes = 1000;
  for (const RankOutcome &g : runOnWorld(ring, 4000, 4000, w)) {
    EXPECT_FALSE(g.ok);
    EXPECT_TRUE(contains(g.message, "more than the memory limit of 1000 bytes")) << g.message;
  }
  w.exec.memoryLimitBytes = 1 << 20;
  for (const RankOutcome &g : runOnWorld(ring, 4000, 4000, w))
    EXPECT_TRUE(g.ok) << g.message;
}

TEST(Limits, TheCApiTakesAMemoryCap) {
  // The default refuses 16 GiB for a call of 4 KiB.
  for (auto &[res, message] : runOnCWorld(scratchPlan(1, 0, 1u << 22), 1024, 1024)) {
    EXPECT_EQ(res, collSystemError);
    EXPECT_TRUE(contains(message, "17179869184 bytes for rank 0's scratch")) << message;
  }
  collWorldConfig_t config;
  ASSERT_EQ(collWorldConfigInit(&config), collSuccess);
  EXPECT_EQ(config.memoryLimitBytes, 0u);
  Plan ring = ringAllReduce(2, 2);
  config.memoryLimitBytes = 1000;
  for (auto &[res, message] : runOnCWorld(ring, 4000, 4000, &config)) {
    EXPECT_EQ(res, collSystemError);
    EXPECT_TRUE(contains(message, "more than the memory limit of 1000 bytes")) << message;
  }
  config.memoryLimitBytes = 1 << 20;
  for (auto &[res, message] : runOnCWorld(ring, 4000, 4000, &config))
    EXPECT_EQ(res, collSuccess) << message;
  config.memoryLimitBytes = collNoMemoryLimit;
  for (auto &[res, message] : runOnCWorld(ring, 4000, 4000, &config))
    EXPECT_EQ(res, collSuccess) << message;

  // A rank of processes.
  std::vector<uint8_t> bytes = serializePlan(scratchPlan(1, 0, 4));
  collPlan_t plan = nullptr;
  ASSERT_EQ(collPlanLoadMemory(bytes.data(), bytes.size(), &plan), collSuccess);
  collShmConfig_t shm;
  ASSERT_EQ(collShmConfigInit(&shm), collSuccess);
  EXPECT_EQ(shm.memoryLimitBytes, 0u);
  shm.memoryLimitBytes = 1000;
  collComm_t comm = nullptr;
  ASSERT_EQ(
      collCommInitRankShm(("limits-capi-" + std::to_string(getpid())).c_str(), 1, 0, &shm, &comm),
      collSuccess)
      << collGetLastError(nullptr);
  std::vector<float> in(1024), out(1024);
  EXPECT_EQ(collExecute(in.data(), out.data(), 1024, collFloat32, collSum, plan, comm),
            collSystemError);
  EXPECT_TRUE(contains(collGetLastError(comm), "more than the memory limit of 1000 bytes: 16384 "
                                               "bytes for rank 0's scratch (scratchChunks 4 x "
                                               "1024 elements x 4 bytes)"))
      << collGetLastError(comm);
  EXPECT_EQ(collCommDestroy(comm), collSuccess);
  EXPECT_EQ(collPlanFree(plan), collSuccess);
}

// A job of one process (this one): the cap and the overflow checks apply
// to a rank of processes too.
TEST(Limits, ProcessGroupChecksItsMemory) {
  ProcessGroupOptions o;
  o.timeoutSeconds = 10;
  auto group = ProcessGroup::create("limits-test-" + std::to_string(getpid()), 0, 1, o);
  ASSERT_TRUE(group.ok()) << group.message();
  std::vector<float> in(1024), out(1024);
  Plan big = scratchPlan(1, 0, 1u << 22);
  Status s = (*group)->execute(big, in.data(), out.data(), 1024, DataType::Float32, RedOp::Sum);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ((*group)->lastErrorKind(), ErrorKind::SystemError);
  EXPECT_TRUE(contains(s.message(), "17179869184 bytes for rank 0's scratch (scratchChunks "
                                    "4194304 x 1024 elements x 4 bytes)"))
      << s.message();
  EXPECT_TRUE(contains(s.message(), "ProcessGroupOptions::memoryLimitBytes")) << s.message();
  // Overflow: 2^28 scratch chunks of 2^36 bytes.
  std::vector<int8_t> bytesIn(4096), bytesOut(4096);
  s = (*group)->execute(scratchPlan(1, 0, hugeScratch), bytesIn.data(), bytesOut.data(),
                        uint64_t(1) << 36, DataType::Int8, RedOp::Sum);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ((*group)->lastErrorKind(), ErrorKind::InvalidPlan);
  EXPECT_TRUE(contains(s.message(), "scratchChunks 268435456 x 68719476736 elements x 1 bytes) "
                                    "overflows 64 bits"))
      << s.message();
  // The group is still usable, and an ordinary call fits the default.
  Plan small = scratchPlan(1, 0, 4);
  in.assign(1024, 2.0f);
  s = (*group)->execute(small, in.data(), out.data(), 1024, DataType::Float32, RedOp::Sum);
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(out[1023], 2.0f);
}

} // namespace
