//===- DeviceWorldTest.cpp - The CUDA executor against the reference -----===//
//
// Every rank of a plan on one GPU (DeviceWorld), checked element for element
// against the reference collectives:
//  - the device-side test data and reference against their host versions;
//  - hand-written plans (no compiler needed), argument errors, a plan too
//    large to be resident, consecutive launches without a wait;
//  - plans whose peer never sends: a device-side timeout, not a hang;
//  - the sweep: every plan in the plan directory (COLL_GPU_PLAN_DIR, else
//    the one the build compiled), every data type and operator, counts
//    {0, 1, 7, 1000, 1M+3, 64M}, in place and out of place.
// Every test skips without a usable GPU.
//
//===----------------------------------------------------------------------===//

#include "coll/Kernels/DeviceWorld.h"

#include "DeviceCheck.h"
#include "GpuTestSupport.h"
#include "HandPlans.h"
#include "LaunchTables.h"
#include "coll/Runtime/Executor.h"
#include "coll/Runtime/Interpreter.h"
#include "coll/Runtime/PlanIO.h"
#include "coll/Runtime/Reference.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime_api.h>
#include <fstream>
#include <gtest/gtest.h>
#include <iterator>
#include <regex>
#include <string>
#include <vector>

using namespace coll;
using namespace coll::test;

namespace {

#define REQUIRE_GPU()                                                                              \
  do {                                                                                             \
    if (!haveGpu())                                                                                \
      GTEST_SKIP() << "no usable CUDA device";                                                     \
  } while (0)

constexpr DataType kAllTypes[] = {
#define COLL_DATA_TYPE(Id, Name, Storage, Compute) DataType::Id,
#include "coll/Runtime/DataTypes.def"
};
constexpr RedOp kAllOps[] = {RedOp::Sum, RedOp::Prod, RedOp::Max, RedOp::Min, RedOp::Avg};
constexpr CollectiveKind kAllKinds[] = {CollectiveKind::AllReduce,     CollectiveKind::AllGather,
                                        CollectiveKind::ReduceScatter, CollectiveKind::Broadcast,
                                        CollectiveKind::Reduce,        CollectiveKind::Gather,
                                        CollectiveKind::Scatter,       CollectiveKind::AllToAll};

/// The device memory of one checked run, within a budget that also holds
/// what the executor takes (its scratch, connections and input copies,
/// which it keeps at their high-water mark). reset() frees the run's buffers.
class Arena {
public:
  ~Arena() { reset(); }
  /// A budget of up to \p want bytes, less if the device has less free.
  bool init(uint64_t want) {
    size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) != cudaSuccess)
      return false;
    uint64_t keep = 2ull << 30;
    capacity = std::min<uint64_t>(want, free > keep ? free - keep : free / 2);
    return capacity > 0;
  }
  /// Device memory of \p bytes, or null beyond the budget.
  char *take(uint64_t bytes) {
    bytes = (bytes + 255) / 256 * 256;
    void *p = nullptr;
    if (used + bytes > capacity || cudaMalloc(&p, bytes ? bytes : 256) != cudaSuccess)
      return nullptr;
    ptrs.push_back(p);
    used += bytes;
    return static_cast<char *>(p);
  }
  /// Frees the run's buffers; counts \p executorBytes (at least the
  /// executor's high-water mark) against the budget. False if it does not fit.
  bool reset(uint64_t executorBytes = 0) {
    for (void *p : ptrs)
      cudaFree(p);
    ptrs.clear();
    executorHigh = std::max(executorHigh, executorBytes);
    used = executorHigh;
    return used <= capacity;
  }
  /// A new executor: its memory starts from nothing.
  void newExecutor() { executorHigh = 0; }
  uint64_t size() const { return capacity; }

private:
  std::vector<void *> ptrs;
  uint64_t capacity = 0, used = 0, executorHigh = 0;
};

/// A bound on the device memory the executor takes for one run: scratch,
/// private input copies, and connection slots.
uint64_t executorBytes(const Plan &plan, uint64_t count, uint64_t es) {
  const PlanInfo &info = plan.info;
  Result<uint32_t> chunks = planChunksPerUnit(info);
  uint64_t maxChunk = chunks.ok() ? (count + *chunks - 1) / *chunks : count;
  BufferElements elems = collectiveBufferElements(info.collective, info.nranks, count);
  uint64_t bytes = 256ull << 20; // Connection slots and tables.
  for (const RankPlan &rp : plan.ranks)
    bytes += rp.scratchChunks * maxChunk * es + elems.input * es + 512;
  return bytes;
}

template <class T> std::vector<T> download(const void *p, uint64_t n) {
  std::vector<T> v(n);
  if (n)
    cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost);
  return v;
}

/// One checked run of \p world: inputs filled on the device, the reference
/// computed from them, the run, every defined output compared. Returns "" or
/// what went wrong; sets \p skipped when the buffers do not fit the arena.
std::string checkRun(DeviceWorld &world, const Plan &plan, Arena &arena, DataType type, RedOp op,
                     uint64_t count, bool inPlace, bool &skipped) {
  const PlanInfo &info = plan.info;
  const uint32_t n = info.nranks;
  const uint64_t es = dataTypeSize(type);
  const bool custom = info.collective == CollectiveKind::Custom;
  const BufferElements elems = planBufferElements(info, count);
  if (!arena.reset(executorBytes(plan, count, es))) {
    skipped = true;
    return "";
  }
  std::vector<const void *> send(n), inputs(n);
  std::vector<void *> recv(n), ref(n);
  for (uint32_t r = 0; r < n; ++r) {
    char *out = arena.take(elems.output * es), *want = arena.take(elems.output * es);
    char *in = inPlace ? nullptr : arena.take(elems.input * es);
    if (!out || !want || (!inPlace && !in)) {
      skipped = true;
      return "";
    }
    const InPlaceAlias alias = collectiveInfo(info.collective).inPlace;
    if (inPlace)
      in = alias == InPlaceAlias::InputInOutput
               ? out + inPlaceBlock(info.collective, r) * count * es
               : out;
    if (inPlace && alias == InPlaceAlias::OutputInInput) {
      // The output is block r of the input.
      in = arena.take(elems.input * es);
      if (!in) {
        skipped = true;
        return "";
      }
      out = in + inPlaceBlock(info.collective, r) * count * es;
    }
    cudaMemset(out, 0xa5, elems.output * es); // Unwritten elements show.
    if (Status s = deviceFillTestInput(type, op, n, r, elems.input, in); !s)
      return s.message();
    send[r] = inputs[r] = in;
    recv[r] = out;
    ref[r] = want;
  }
  if (custom) {
    // A user-declared collective's reference is its contract, on the host
    // (the host and device test inputs are the same, DeviceCheck says).
    std::vector<std::vector<char>> hin(n), hwant(n);
    std::vector<const void *> hinP(n);
    std::vector<void *> hwantP(n);
    for (uint32_t r = 0; r < n; ++r) {
      hin[r].resize(elems.input * es + 1);
      hwant[r].resize(elems.output * es + 1);
      fillTestInput(type, op, n, r, elems.input, hin[r].data());
      hinP[r] = hin[r].data();
      hwantP[r] = hwant[r].data();
    }
    if (Status s = referencePlan(plan, count, type, op, hinP, hwantP); !s)
      return "reference: " + s.message();
    for (uint32_t r = 0; r < n; ++r)
      if (cudaMemcpy(ref[r], hwant[r].data(), elems.output * es, cudaMemcpyHostToDevice))
        return "cannot upload the reference";
  } else if (Status s =
                 deviceReference(info.collective, n, info.root, count, type, op, inputs, ref);
             !s) {
    return "reference: " + s.message();
  }
  if (Status s = world.run(send, recv, count, type, op); !s)
    return s.message();
  for (uint32_t r = 0; r < n; ++r) {
    // Every defined element: the whole output, none (reduce and gather off
    // the root), or the chunks a user-declared collective's contract names.
    uint64_t first = 0, wrongCount = 0;
    for (auto [begin, end] : definedOutputElements(plan, r, count)) {
      uint64_t at = 0;
      Result<uint64_t> wrong =
          deviceCountMismatches(type, static_cast<char *>(recv[r]) + begin * es,
                                static_cast<char *>(ref[r]) + begin * es, end - begin, &at);
      if (!wrong)
        return wrong.message();
      if (*wrong && wrongCount == 0)
        first = begin + at;
      wrongCount += *wrong;
    }
    if (wrongCount) {
      std::vector<char> got = download<char>(static_cast<char *>(recv[r]) + first * es, es);
      std::vector<char> want = download<char>(static_cast<char *>(ref[r]) + first * es, es);
      return "rank " + std::to_string(r) + ": " + std::to_string(wrongCount) + " of " +
             std::to_string(elems.output) + " elements wrong, the first at " +
             std::to_string(first) + ": " + formatElement(type, got.data(), 0) + " instead of " +
             formatElement(type, want.data(), 0);
    }
  }
  // An out-of-place run leaves its input as it was.
  if (!inPlace && count <= (1u << 20) + 3) {
    char *fresh = arena.take(elems.input * es);
    for (uint32_t r = 0; fresh && r < n; ++r) {
      if (Status s = deviceFillTestInput(type, op, n, r, elems.input, fresh); !s)
        return s.message();
      Result<uint64_t> wrong = deviceCountMismatches(type, send[r], fresh, elems.input);
      if (!wrong || *wrong)
        return "rank " + std::to_string(r) + "'s input was written";
    }
  }
  return "";
}

//===----------------------------------------------------------------------===//
// The device-side checking code against its host version
//===----------------------------------------------------------------------===//

TEST(DeviceCheck, MatchesHostReference) {
  REQUIRE_GPU();
  const uint32_t n = 3, root = 1;
  const uint64_t count = 1001;
  for (CollectiveKind kind : kAllKinds)
    for (DataType type : kAllTypes)
      for (RedOp op : kAllOps) {
        SCOPED_TRACE(std::string(collectiveName(kind)) + " " + dataTypeName(type) + " " +
                     redOpName(op));
        const uint64_t es = dataTypeSize(type);
        BufferElements e = collectiveBufferElements(kind, n, count);
        std::vector<std::vector<char>> hin(n), hout(n);
        std::vector<const void *> hinP(n), dinP(n);
        std::vector<void *> houtP(n), doutP(n);
        for (uint32_t r = 0; r < n; ++r) {
          hin[r].resize(e.input * es);
          hout[r].assign(e.output * es, 0);
          fillTestInput(type, op, n, r, e.input, hin[r].data());
          hinP[r] = hin[r].data();
          houtP[r] = hout[r].data();
          void *din = nullptr, *dout = nullptr;
          ASSERT_EQ(cudaMalloc(&din, e.input * es), cudaSuccess);
          ASSERT_EQ(cudaMalloc(&dout, e.output * es), cudaSuccess);
          cudaMemset(dout, 0, e.output * es);
          ASSERT_TRUE(deviceFillTestInput(type, op, n, r, e.input, din).ok());
          EXPECT_EQ(download<char>(din, e.input * es), hin[r]) << "test input of rank " << r;
          dinP[r] = din;
          doutP[r] = dout;
        }
        ASSERT_TRUE(referenceCollective(kind, n, root, count, type, op, hinP, houtP).ok());
        Status s = deviceReference(kind, n, root, count, type, op, dinP, doutP);
        EXPECT_TRUE(s.ok()) << s.message();
        for (uint32_t r = 0; r < n; ++r) {
          std::vector<char> got = download<char>(doutP[r], e.output * es);
          EXPECT_EQ(countMismatches(type, got.data(), hout[r].data(), e.output), 0u)
              << "rank " << r;
          Result<uint64_t> wrong = deviceCountMismatches(type, doutP[r], dinP[r], 1);
          ASSERT_TRUE(wrong.ok());
          cudaFree(const_cast<void *>(dinP[r]));
          cudaFree(doutP[r]);
        }
      }
}

TEST(DeviceCheck, CountsMismatches) {
  REQUIRE_GPU();
  std::vector<int32_t> a(1000), b(1000);
  for (int i = 0; i < 1000; ++i)
    a[i] = b[i] = i * 7;
  b[17] = -1;
  b[901] = -2;
  void *da, *db;
  ASSERT_EQ(cudaMalloc(&da, 4000), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&db, 4000), cudaSuccess);
  cudaMemcpy(da, a.data(), 4000, cudaMemcpyHostToDevice);
  cudaMemcpy(db, b.data(), 4000, cudaMemcpyHostToDevice);
  uint64_t first = 0;
  Result<uint64_t> wrong = deviceCountMismatches(DataType::Int32, da, db, 1000, &first);
  ASSERT_TRUE(wrong.ok());
  EXPECT_EQ(*wrong, 2u);
  EXPECT_EQ(first, 17u);
  cudaFree(da);
  cudaFree(db);
}

//===----------------------------------------------------------------------===//
// Hand-written plans
//===----------------------------------------------------------------------===//

TEST(DeviceWorld, HandWrittenRing) {
  REQUIRE_GPU();
  Arena arena;
  ASSERT_TRUE(arena.init(1ull << 30));
  // Depth 2 at least: the hand-written ring forwards with fused rrs steps,
  // which need a free slot downstream while holding one upstream.
  for (uint32_t depth : {2u, 3u}) {
    Plan plan = ringAllReduce(4, depth);
    auto world = DeviceWorld::create(plan);
    ASSERT_TRUE(world.ok()) << world.message();
    for (uint64_t count : {0ull, 1ull, 7ull, 1000ull, 100003ull, 3000001ull})
      for (DataType type : {DataType::Float32, DataType::Int8, DataType::BFloat16})
        for (RedOp op : {RedOp::Sum, RedOp::Prod, RedOp::Avg}) {
          bool skipped = false;
          EXPECT_EQ(checkRun(**world, plan, arena, type, op, count, false, skipped), "")
              << "depth " << depth << " count " << count << " " << dataTypeName(type) << " "
              << redOpName(op);
        }
  }
}

/// The direct sends of the hand-written ring, per rank: the `rrcs` that
/// completes a chunk and the `rcs` steps that pass completed chunks on
/// store their chunk for good, and send it where it lies; the first `s`
/// does not (a later `rcs` overwrites its chunk), nor do the `rrs` steps
/// (they store nothing). Host logic: runs without a GPU.
TEST(DirectReads, LaunchTablesMarkTheSendsWhoseDataStays) {
  for (bool inPlace : {false, true}) {
    const uint32_t n = 4;
    Plan plan = ringAllReduce(n, 2, inPlace);
    std::vector<kernels::RankSection> all;
    for (uint32_t r = 0; r < n; ++r)
      all.push_back({r, &plan.ranks[r]});
    kernels::LaunchTables t = kernels::buildLaunchTables(plan.info, all);
    ASSERT_EQ(t.directSteps.size(), t.steps.size());
    const uint8_t output = uint8_t(1u << unsigned(BufferKind::Output));
    for (const kernels::TbDesc &d : t.tbs)
      for (uint32_t i = 0; i < d.numSteps; ++i) {
        const Opcode op = t.steps[d.stepsBegin + i].op;
        const bool stays = op == Opcode::RecvReduceCopySend || op == Opcode::RecvCopySend;
        EXPECT_EQ(t.directSteps[d.stepsBegin + i], stays ? output : 0)
            << (inPlace ? "in place" : "out of place") << ", rank " << d.rank << " step " << i
            << " (" << opcodeInfo(op).mnemonic << ")";
      }
    // A receive FIFO names its sender, whose addresses a direct message
    // carries; a FIFO to a rank outside the launch names the receiver.
    for (const kernels::TbDesc &d : t.tbs) {
      ASSERT_GE(d.recvFifo, 0);
      EXPECT_EQ(t.fifos[d.recvFifo].peer, uint32_t(plan.ranks[d.rank].threadblocks[d.tb].recvPeer));
    }
    kernels::LaunchTables one = kernels::buildLaunchTables(plan.info, {{2, &plan.ranks[2]}});
    ASSERT_EQ(one.remoteSends.size(), 1u);
    EXPECT_EQ(one.fifos[one.remoteSends[0].fifo].peer, 3u);
    EXPECT_EQ(one.fifos[0].peer, 1u);
  }
}

/// Every message the tables mark is read in place on the device, no other
/// (the kernel's count, exactly), with the same results as through the
/// slots; with DeviceOptions::directReads off, none.
TEST(DirectReads, ReceiversReadTheMarkedSendsInPlace) {
  REQUIRE_GPU();
  Arena arena;
  ASSERT_TRUE(arena.init(1ull << 30));
  const uint32_t n = 4;
  for (bool inPlacePlan : {false, true}) {
    Plan plan = ringAllReduce(n, 2, inPlacePlan);
    std::vector<kernels::RankSection> all;
    for (uint32_t r = 0; r < n; ++r)
      all.push_back({r, &plan.ranks[r]});
    const kernels::LaunchTables t = kernels::buildLaunchTables(plan.info, all);
    const uint64_t marked = uint64_t(
        std::count_if(t.directSteps.begin(), t.directSteps.end(), [](uint8_t b) { return b; }));
    ASSERT_EQ(marked, uint64_t(n) * (n - 1)); // One rrcs and n - 2 rcs per rank.
    for (bool direct : {true, false}) {
      DeviceOptions o;
      o.directReads = direct;
      o.sliceBytes = 4096;
      auto world = DeviceWorld::create(plan, o);
      ASSERT_TRUE(world.ok()) << world.message();
      uint64_t expected = 0;
      for (uint64_t count : {1ull, 1000ull, 100003ull, 3000001ull})
        for (DataType type : {DataType::Float32, DataType::Int8, DataType::Float64})
          for (bool inPlaceCall : {false, true}) {
            bool skipped = false;
            EXPECT_EQ(checkRun(**world, plan, arena, type, RedOp::Sum, count, inPlaceCall, skipped),
                      "")
                << (direct ? "direct" : "slots") << " count " << count << " " << dataTypeName(type);
            ASSERT_FALSE(skipped);
            const kernels::SliceShape shape = kernels::sliceShape(
                count, *planChunksPerUnit(plan.info), o.sliceBytes, dataTypeSize(type));
            expected += direct ? marked * shape.layout.numSlices : 0;
            EXPECT_EQ((*world)->directMessages(), expected)
                << (direct ? "direct" : "slots") << " count " << count << " " << dataTypeName(type);
          }
    }
  }
}

/// One rank: an in-place plan without threadblocks (a launch of no CTA
/// at all: only the staging copy of an out-of-place call and Avg's division
/// by 1 run) and an out-of-place plan of one copy.
TEST(DeviceWorld, OneRankPlans) {
  REQUIRE_GPU();
  Arena arena;
  ASSERT_TRUE(arena.init(1ull << 30));
  Plan empty = makePlan("one_rank_nothing", CollectiveKind::AllReduce, 1, 1, 1, 2);
  empty.info.inplace = true;
  Plan copy = makePlan("one_rank_copy", CollectiveKind::AllReduce, 1, 1, 1, 2);
  Threadblock tb;
  add(tb, step(Opcode::Copy, I, 0, O, 0, 1));
  copy.ranks[0].threadblocks = {tb};
  for (const Plan *plan : {&empty, &copy}) {
    DeviceOptions o;
    o.traceSteps = 16;
    auto world = DeviceWorld::create(*plan, o);
    ASSERT_TRUE(world.ok()) << plan->info.name << ": " << world.message();
    EXPECT_EQ((*world)->numBlocks(), plan->ranks[0].threadblocks.size());
    arena.newExecutor();
    for (uint64_t count : {0ull, 1ull, 7ull, 1000ull, 1048579ull})
      for (DataType type : {DataType::Float32, DataType::Int8, DataType::BFloat16})
        for (RedOp op : {RedOp::Sum, RedOp::Avg})
          for (bool inPlace : {false, true}) {
            bool skipped = false;
            EXPECT_EQ(checkRun(**world, *plan, arena, type, op, count, inPlace, skipped), "")
                << plan->info.name << " count " << count << " " << dataTypeName(type) << " "
                << redOpName(op) << (inPlace ? " in place" : "");
          }
    DeviceTrace trace;
    ASSERT_TRUE((*world)->trace(trace)) << plan->info.name;
    EXPECT_EQ(trace.ctaBeginUs.size(), plan->ranks[0].threadblocks.size());
  }
}

/// Ranks 0 and 1 run the hand-written ring; ranks 2 and 3 have no
/// threadblocks. Their buffers are bound but nothing runs for them.
TEST(DeviceWorld, RanksWithoutThreadblocks) {
  REQUIRE_GPU();
  Plan plan = ringAllReduce(2, 2);
  plan.info.nranks = 4;
  plan.ranks.resize(4);
  auto world = DeviceWorld::create(plan);
  ASSERT_TRUE(world.ok()) << world.message();
  EXPECT_EQ((*world)->numBlocks(), 2u);
  for (uint64_t count : {1ull, 7ull, 1000ull, 100003ull}) {
    std::vector<std::vector<float>> inputs(4, std::vector<float>(count));
    std::vector<const void *> send(4);
    std::vector<void *> recv(4);
    for (uint32_t r = 0; r < 4; ++r) {
      for (uint64_t i = 0; i < count; ++i)
        inputs[r][i] = float(r * 1000 + i % 997);
      void *in = nullptr, *out = nullptr;
      ASSERT_EQ(cudaMalloc(&in, count * 4), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&out, count * 4), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(in, inputs[r].data(), count * 4, cudaMemcpyHostToDevice), cudaSuccess);
      send[r] = in;
      recv[r] = out;
    }
    Status s = (*world)->run(send, recv, count, DataType::Float32, RedOp::Sum);
    EXPECT_TRUE(s) << "count " << count << ": " << s.message();
    for (uint32_t r = 0; s && r < 2; ++r) {
      std::vector<float> got = download<float>(recv[r], count);
      uint64_t wrong = 0;
      for (uint64_t i = 0; i < count; ++i)
        wrong += got[i] != inputs[0][i] + inputs[1][i];
      EXPECT_EQ(wrong, 0u) << "rank " << r << " count " << count;
    }
    for (uint32_t r = 0; r < 4; ++r) {
      cudaFree(const_cast<void *>(send[r]));
      cudaFree(recv[r]);
    }
  }
}

/// A launch captured in a CUDA graph replays correctly, many times, in each
/// protocol: the slice base lives in device memory and the kernel advances
/// it, so each replay counts on from the last (PyTorch captures collectives
/// in graphs). Inputs change between replays; a plain launch after them
/// must still be right.
TEST(DeviceWorld, GraphCapturedLaunchReplays) {
  REQUIRE_GPU();
  const uint32_t n = 4;
  const uint64_t count = 4099;
  Plan plan = ringAllReduce(n, 2);
  for (ProtocolKind p : {ProtocolKind::Simple, ProtocolKind::LL, ProtocolKind::LL128}) {
    for (bool cooperative : {true, false}) {
      DeviceOptions o;
      o.sliceBytes = 1024; // Several slices per launch.
      o.cooperative = cooperative;
      o.protocol.force = true;
      o.protocol.forced = p;
      auto world = DeviceWorld::create(plan, o);
      ASSERT_TRUE(world.ok()) << world.message();
      std::vector<const void *> send(n);
      std::vector<void *> recv(n);
      for (uint32_t r = 0; r < n; ++r) {
        void *in = nullptr, *out = nullptr;
        ASSERT_EQ(cudaMalloc(&in, count * 4), cudaSuccess);
        ASSERT_EQ(cudaMalloc(&out, count * 4), cudaSuccess);
        send[r] = in;
        recv[r] = out;
      }
      cudaStream_t stream;
      ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
      std::vector<std::vector<float>> inputs(n, std::vector<float>(count));
      auto fill = [&](uint32_t round) {
        for (uint32_t r = 0; r < n; ++r) {
          for (uint64_t i = 0; i < count; ++i)
            inputs[r][i] = float((round * 31 + r * 1000 + i) % 4093);
          ASSERT_EQ(cudaMemcpy(const_cast<void *>(send[r]), inputs[r].data(), count * 4,
                               cudaMemcpyHostToDevice),
                    cudaSuccess);
        }
      };
      auto expectSums = [&](const std::string &what) {
        for (uint32_t r = 0; r < n; ++r) {
          std::vector<float> got = download<float>(recv[r], count);
          uint64_t wrong = 0;
          for (uint64_t i = 0; i < count; ++i) {
            float sum = 0;
            for (uint32_t q = 0; q < n; ++q)
              sum += inputs[q][i];
            wrong += got[i] != sum;
          }
          EXPECT_EQ(wrong, 0u) << protocolName(p) << (cooperative ? " cooperative " : " plain ")
                               << what << ": rank " << r;
        }
      };
      // A first launch on the stream lays out the memory for this count.
      fill(0);
      ASSERT_TRUE((*world)->launch(send, recv, count, DataType::Float32, RedOp::Sum, stream));
      ASSERT_TRUE((*world)->wait(stream));
      expectSums("first launch");
      cudaGraph_t graph = nullptr;
      ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
      Status captured = (*world)->launch(send, recv, count, DataType::Float32, RedOp::Sum, stream);
      cudaError_t ended = cudaStreamEndCapture(stream, &graph);
      ASSERT_TRUE(captured) << protocolName(p) << ": " << captured.message();
      ASSERT_EQ(ended, cudaSuccess) << cudaGetErrorString(ended);
      cudaGraphExec_t exec = nullptr;
      ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
      for (uint32_t round = 1; round <= 5; ++round) {
        fill(round);
        ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
        ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
        expectSums("replay " + std::to_string(round));
      }
      fill(6);
      ASSERT_TRUE((*world)->launch(send, recv, count, DataType::Float32, RedOp::Sum, stream));
      Status after = (*world)->wait(stream);
      EXPECT_TRUE(after) << after.message();
      expectSums("launch after the replays");
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
      cudaStreamDestroy(stream);
      for (uint32_t r = 0; r < n; ++r) {
        cudaFree(const_cast<void *>(send[r]));
        cudaFree(recv[r]);
      }
    }
  }
}

/// A launch that needs more memory than DeviceOptions::memoryLimitBytes
/// fails before it allocates, naming the largest part; the world stays
/// usable.
TEST(DeviceWorld, MemoryLimit) {
  REQUIRE_GPU();
  Plan plan = ringAllReduce(2, 2);
  DeviceOptions o;
  o.memoryLimitBytes = 1000;
  auto world = DeviceWorld::create(plan, o);
  ASSERT_TRUE(world.ok()) << world.message();
  void *a = nullptr, *b = nullptr;
  ASSERT_EQ(cudaMalloc(&a, 1 << 20), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&b, 1 << 20), cudaSuccess);
  Status s = (*world)->run({a, b}, {a, b}, 1 << 16, DataType::Float32, RedOp::Sum);
  EXPECT_NE(s.message().find("more than the memory limit of 1000 bytes"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("DeviceOptions::memoryLimitBytes"), std::string::npos) << s.message();
  EXPECT_TRUE((*world)->run({a, b}, {a, b}, 10, DataType::Float32, RedOp::Sum));
  cudaFree(a);
  cudaFree(b);
}

TEST(DeviceWorld, SmallSlicesPipelineThroughTheFifo) {
  REQUIRE_GPU();
  Arena arena;
  ASSERT_TRUE(arena.init(1ull << 30));
  Plan plan = ringAllReduce(3, 2);
  DeviceOptions o;
  o.sliceBytes = 16; // Many slices through two-slot connections.
  o.threadsPerBlock = 64;
  auto world = DeviceWorld::create(plan, o);
  ASSERT_TRUE(world.ok()) << world.message();
  bool skipped = false;
  EXPECT_EQ(checkRun(**world, plan, arena, DataType::Float64, RedOp::Max, 4099, false, skipped),
            "");
  EXPECT_EQ(checkRun(**world, plan, arena, DataType::Uint8, RedOp::Sum, 4099, false, skipped), "");
}

TEST(DeviceWorld, ConsecutiveLaunchesWithoutWaiting) {
  REQUIRE_GPU();
  Plan plan = ringAllReduce(4, 2);
  auto world = DeviceWorld::create(plan);
  ASSERT_TRUE(world.ok()) << world.message();
  const uint64_t count = 50001;
  const uint32_t n = 4, runs = 5;
  std::vector<void *> in(n), ref(n);
  std::vector<std::vector<void *>> out(runs, std::vector<void *>(n));
  for (uint32_t r = 0; r < n; ++r) {
    ASSERT_EQ(cudaMalloc(&in[r], count * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&ref[r], count * 4), cudaSuccess);
    ASSERT_TRUE(deviceFillTestInput(DataType::Int32, RedOp::Sum, n, r, count, in[r]).ok());
    for (uint32_t k = 0; k < runs; ++k)
      ASSERT_EQ(cudaMalloc(&out[k][r], count * 4), cudaSuccess);
  }
  std::vector<const void *> cin(in.begin(), in.end());
  ASSERT_TRUE(
      deviceReference(CollectiveKind::AllReduce, n, 0, count, DataType::Int32, RedOp::Sum, cin, ref)
          .ok());
  // Counts differ per launch: the counters carry over from one to the next.
  for (uint32_t k = 0; k < runs; ++k) {
    Status s = (*world)->launch(cin, out[k], count - k * 1000, DataType::Int32, RedOp::Sum);
    ASSERT_TRUE(s.ok()) << s.message();
  }
  Status s = (*world)->wait();
  ASSERT_TRUE(s.ok()) << s.message();
  for (uint32_t k = 0; k < runs; ++k) {
    std::vector<const void *> cin2(cin);
    std::vector<void *> ref2(n);
    for (uint32_t r = 0; r < n; ++r)
      ref2[r] = ref[r];
    ASSERT_TRUE(deviceReference(CollectiveKind::AllReduce, n, 0, count - k * 1000, DataType::Int32,
                                RedOp::Sum, cin2, ref2)
                    .ok());
    for (uint32_t r = 0; r < n; ++r) {
      Result<uint64_t> wrong =
          deviceCountMismatches(DataType::Int32, out[k][r], ref[r], count - k * 1000);
      ASSERT_TRUE(wrong.ok());
      EXPECT_EQ(*wrong, 0u) << "launch " << k << " rank " << r;
    }
  }
  for (uint32_t r = 0; r < n; ++r) {
    cudaFree(in[r]);
    cudaFree(ref[r]);
    for (uint32_t k = 0; k < runs; ++k)
      cudaFree(out[k][r]);
  }
}

TEST(DeviceWorld, TraceRecordsEveryStepInOrder) {
  REQUIRE_GPU();
  Arena arena;
  ASSERT_TRUE(arena.init(1ull << 30));
  const uint32_t n = 4;
  Plan plan = ringAllReduce(n, 2);
  DeviceOptions o;
  o.traceSteps = 256;
  o.sliceBytes = 1024; // Several slices per run.
  o.threadsPerBlock = 128;
  auto world = DeviceWorld::create(plan, o);
  ASSERT_TRUE(world.ok()) << world.message();
  DeviceTrace trace;
  EXPECT_EQ((*world)->trace(trace).message(), "no launch has run since the world was made");
  bool skipped = false;
  ASSERT_EQ(checkRun(**world, plan, arena, DataType::Float32, RedOp::Sum, n * 1000, false, skipped),
            "");
  if (skipped)
    GTEST_SKIP() << "the buffers do not fit the device";
  ASSERT_TRUE((*world)->trace(trace));
  EXPECT_EQ(trace.unrecorded, 0u);
  ASSERT_EQ(trace.ctaBeginUs.size(), n);
  // Per CTA: every (slice, step) once, in program order, one after the
  // other, within the CTA's lifetime; the sends and receives in order.
  const std::vector<TraceEvent> &events = trace.timeline.events;
  std::vector<std::vector<const TraceEvent *>> sends(n), recvs(n);
  uint64_t slices = 0;
  for (const TraceEvent &e : events)
    slices = std::max<uint64_t>(slices, e.slice + 1);
  EXPECT_GE(slices, 2u);
  size_t i = 0;
  for (uint32_t r = 0; r < n; ++r) {
    const Threadblock &tb = plan.ranks[r].threadblocks[0];
    const TraceEvent *prev = nullptr;
    for (uint64_t slice = 0; slice < slices; ++slice)
      for (uint32_t step = 0; step < tb.steps.size(); ++step, ++i) {
        ASSERT_LT(i, events.size());
        const TraceEvent &e = events[i];
        ASSERT_EQ(e.rank, r);
        ASSERT_EQ(e.tb, 0u);
        ASSERT_EQ(e.slice, slice);
        ASSERT_EQ(e.step, step);
        EXPECT_EQ(e.op, tb.steps[step].op);
        EXPECT_LE(e.beginUs, e.endUs);
        EXPECT_GE(e.beginUs, prev ? prev->endUs : trace.ctaBeginUs[r]);
        prev = &e;
        if (opcodeFlags(e.op).send)
          sends[r].push_back(&e);
        if (opcodeFlags(e.op).recv)
          recvs[r].push_back(&e);
      }
    ASSERT_TRUE(prev);
    EXPECT_LE(prev->endUs, trace.ctaEndUs[r]);
  }
  EXPECT_EQ(i, events.size());
  // Rank r's k-th receive consumes rank r-1's k-th message, which the
  // sender's step published before the receiver's step could begin.
  for (uint32_t r = 0; r < n; ++r) {
    const auto &in = recvs[r], &out = sends[(r + n - 1) % n];
    ASSERT_EQ(in.size(), out.size());
    for (size_t k = 0; k < in.size(); ++k)
      EXPECT_GE(in[k]->beginUs, out[k]->beginUs) << "rank " << r << " message " << k;
  }

  // A short trace keeps each CTA's first steps and counts the rest.
  o.traceSteps = 2;
  auto shortWorld = DeviceWorld::create(plan, o);
  ASSERT_TRUE(shortWorld.ok()) << shortWorld.message();
  ASSERT_EQ(
      checkRun(**shortWorld, plan, arena, DataType::Int32, RedOp::Max, n * 1000, true, skipped),
      "");
  DeviceTrace brief;
  ASSERT_TRUE((*shortWorld)->trace(brief));
  EXPECT_EQ(brief.timeline.events.size(), 2u * n);
  EXPECT_EQ(brief.unrecorded, events.size() - 2u * n);

  o.traceSteps = 0;
  auto untraced = DeviceWorld::create(plan, o);
  ASSERT_TRUE(untraced.ok()) << untraced.message();
  EXPECT_EQ((*untraced)->trace(brief).message(), "tracing is off (DeviceOptions::traceSteps is 0)");
}

TEST(DeviceWorld, ArgumentErrors) {
  REQUIRE_GPU();
  Plan plan = ringAllReduce(2, 2);
  auto world = DeviceWorld::create(plan);
  ASSERT_TRUE(world.ok()) << world.message();
  void *a = nullptr;
  ASSERT_EQ(cudaMalloc(&a, 4096), cudaSuccess);
  Status s = (*world)->run({a}, {a}, 10, DataType::Float32, RedOp::Sum);
  EXPECT_EQ(s.message(), "the plan has 2 ranks but 1 send and 1 receive buffers were given");
  s = (*world)->run({a, nullptr}, {a, a}, 10, DataType::Float32, RedOp::Sum);
  EXPECT_EQ(s.message(), "rank 1: the send buffer is null (count is not 0)");
  s = (*world)->run({a, a}, {a, static_cast<char *>(a) + 2}, 10, DataType::Float32, RedOp::Sum);
  EXPECT_EQ(s.message(), "rank 1: the receive buffer is not aligned to its 4-byte elements");
  s = (*world)->run({a, a}, {a, a}, 10, DataType(200), RedOp::Sum);
  EXPECT_EQ(s.message(), "rank 0: invalid data type 200");
  EXPECT_TRUE(
      (*world)->run({nullptr, nullptr}, {nullptr, nullptr}, 0, DataType::Float32, RedOp::Sum).ok());
  DeviceOptions o;
  o.threadsPerBlock = 100;
  EXPECT_EQ(DeviceWorld::create(plan, o).message(),
            "threads per block must be a multiple of 32 in [32, 512], not 100");
  o.threadsPerBlock = 1024; // More than the kernel is compiled for.
  EXPECT_EQ(DeviceWorld::create(plan, o).message(),
            "threads per block must be a multiple of 32 in [32, 512], not 1024");
  cudaFree(a);
}

TEST(DeviceWorld, RunsEveryRankOfThePlan) {
  // Refused before the device is touched.
  std::vector<uint8_t> bytes = serializePlan(ringAllReduce(2, 2));
  Result<ValidatedPlan> one = ValidatedPlan::parse(bytes.data(), bytes.size(), 1);
  ASSERT_TRUE(one) << one.message();
  EXPECT_EQ(DeviceWorld::create(*one).message(),
            "the plan was loaded for rank 1 only; a DeviceWorld runs every rank");
  EXPECT_EQ(DeviceWorld::create(one->plan()).message(),
            "the plan was loaded for rank 1 only; a DeviceWorld runs every rank");
}

TEST(DeviceWorld, TooManyThreadblocksForOneGpu) {
  REQUIRE_GPU();
  Plan plan = makePlan("wide", CollectiveKind::AllReduce, 2, 1, 1, 1);
  for (uint32_t r = 0; r < 2; ++r)
    for (uint32_t b = 0; b < 1024; ++b) {
      Threadblock tb;
      add(tb, step(Opcode::Nop, I, 0, I, 0, 0));
      plan.ranks[r].threadblocks.push_back(tb);
    }
  auto world = DeviceWorld::create(plan);
  ASSERT_FALSE(world.ok());
  EXPECT_TRUE(std::regex_search(world.message(),
                                std::regex("^the plan needs 2048 threadblocks resident at once "
                                           "\\(all ranks on one GPU\\), but the device holds at "
                                           "most [0-9]+ CTAs of 512 threads")))
      << world.message();
}

//===----------------------------------------------------------------------===//
// Plans that never finish: a device-side timeout, not a hung GPU
//===----------------------------------------------------------------------===//

Status runWithTimeout(DeviceWorld &world, uint64_t count, double &seconds) {
  std::vector<void *> bufs(4);
  for (void *&b : bufs)
    cudaMalloc(&b, std::max<uint64_t>(count, 1) * 4);
  auto start = std::chrono::steady_clock::now();
  Status s =
      world.run({bufs[0], bufs[1]}, {bufs[2], bufs[3]}, count, DataType::Float32, RedOp::Sum);
  seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (void *b : bufs)
    cudaFree(b);
  return s;
}

TEST(DeviceWorld, PeerThatNeverSendsTimesOut) {
  REQUIRE_GPU();
  DeviceOptions o;
  o.timeoutSeconds = 0.5;
  auto world = DeviceWorld::create(recvRecvDeadlock(), o);
  ASSERT_TRUE(world.ok()) << world.message();
  for (int attempt = 0; attempt < 2; ++attempt) { // The world is reset after a failure.
    double seconds = 0;
    Status s = runWithTimeout(**world, 10, seconds);
    ASSERT_FALSE(s.ok());
    EXPECT_TRUE(std::regex_match(
        s.message(), std::regex("rank [01] threadblock 0 step 0 \\(r, slice 0\\): timed out "
                                "after 0.5 s on the GPU waiting for message 1 from rank [01] on "
                                "channel 0(; 1 more threadblocks timed out)?(; 1 stopped with "
                                "it)?")))
        << s.message();
    EXPECT_GE(seconds, 0.45);
    EXPECT_LT(seconds, 5.0);
  }
  // The GPU is not wedged: a good plan runs afterwards.
  Arena arena;
  ASSERT_TRUE(arena.init(256 << 20));
  Plan ring = ringAllReduce(2, 2);
  auto good = DeviceWorld::create(ring);
  ASSERT_TRUE(good.ok());
  bool skipped = false;
  EXPECT_EQ(checkRun(**good, ring, arena, DataType::Int64, RedOp::Min, 1000, false, skipped), "");
}

TEST(DeviceWorld, FullFifoAndDependencyTimeOut) {
  REQUIRE_GPU();
  DeviceOptions o;
  o.timeoutSeconds = 0.3;
  auto world = DeviceWorld::create(fullFifoDeadlock(), o);
  ASSERT_TRUE(world.ok()) << world.message();
  double seconds = 0;
  Status s = runWithTimeout(**world, 10, seconds);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(std::regex_search(
      s.message(),
      std::regex("^(rank 0 threadblock 0 step 1 \\(s, slice 0\\): timed out after 0.3 s on the "
                 "GPU waiting for a free slot to rank 1 on channel 0 \\(all 1 slots full: 1 "
                 "messages sent, 0 taken\\)"
                 "|rank 0 threadblock 1 step 0 \\(s, slice 0\\): timed out after 0.3 s on the "
                 "GPU waiting for threadblock 0 to finish step 2"
                 "|rank 1 threadblock 0 step 0 \\(r, slice 0\\): timed out after 0.3 s on the "
                 "GPU waiting for threadblock 1 to finish step 0"
                 "|rank 1 threadblock 1 step 0 \\(r, slice 0\\): timed out after 0.3 s on the "
                 "GPU waiting for message 1 from rank 0 on channel 1)")))
      << s.message();
  EXPECT_LT(seconds, 5.0);
}

//===----------------------------------------------------------------------===//
// The sweep over compiled plans
//===----------------------------------------------------------------------===//

std::vector<std::string> planNames() {
  std::vector<std::string> names = planNamesIn(gpuPlanDir());
  if (names.empty())
    names.push_back("none");
  return names;
}

/// The counts of the sweep: COLL_GPU_COUNTS (comma-separated), else
/// {0, 1, 7, 1000, 1M+3, 64M}.
std::vector<uint64_t> sweepCounts() {
  const char *env = std::getenv("COLL_GPU_COUNTS");
  if (!env)
    return {0, 1, 7, 1000, (1u << 20) + 3, 64ull << 20};
  std::vector<uint64_t> counts;
  for (const char *p = env; *p;) {
    char *end = nullptr;
    counts.push_back(std::strtoull(p, &end, 10));
    p = *end == ',' ? end + 1 : end;
    if (end == p && *p)
      break;
  }
  return counts;
}

class PlanSweep : public testing::TestWithParam<std::string> {};

TEST_P(PlanSweep, EveryTypeOpCountAndPlacement) {
  REQUIRE_GPU();
  if (GetParam() == "none")
    GTEST_SKIP() << "no compiled plans in '" << gpuPlanDir() << "'";
  std::string path = gpuPlanDir() + "/" + GetParam() + ".bin";
  Result<Plan> plan = loadPlanFile(path);
  ASSERT_TRUE(plan.ok()) << path << ": " << plan.message();
  // One world per protocol: Simple at every count, LL and LL128 up to
  // 16M elements (the largest count, 64M, is Simple's alone).
  // A wait that times out stops that protocol's runs of the plan (the
  // rest count as skipped): COLL_GPU_TIMEOUT seconds (default 30) a wait.
  const ProtocolKind protocols[] = {ProtocolKind::Simple, ProtocolKind::LL, ProtocolKind::LL128};
  const char *timeoutEnv = std::getenv("COLL_GPU_TIMEOUT");
  const double timeout = timeoutEnv ? std::atof(timeoutEnv) : 30.0;
  std::vector<std::unique_ptr<DeviceWorld>> worlds;
  std::vector<bool> stopped;
  for (ProtocolKind p : protocols) {
    DeviceOptions o;
    o.timeoutSeconds = timeout > 0 ? timeout : 30.0;
    o.protocol.force = true;
    o.protocol.forced = p;
    auto world = DeviceWorld::create(*plan, o);
    ASSERT_TRUE(world.ok()) << world.message();
    worlds.push_back(std::move(*world));
    stopped.push_back(false);
  }
  static Arena arena;
  static bool ready = arena.init(~0ull);
  ASSERT_TRUE(ready);
  arena.newExecutor();
  const CollectiveKind kind = plan->info.collective;
  const std::vector<uint64_t> counts = sweepCounts();
  const uint64_t unit =
      kind == CollectiveKind::Custom ? std::max<uint64_t>(1, userCollectiveUnit(plan->info)) : 1;
  unsigned runs = 0, skipped = 0, failures = 0;
  auto start = std::chrono::steady_clock::now();
  for (DataType type : kAllTypes)
    for (RedOp op : kAllOps) {
      if (!collectiveReduces(kind) && op != RedOp::Sum)
        continue; // The operator plays no part.
      for (uint64_t perUnit : counts) {
        // A user-declared collective's count is a whole number of its units.
        const uint64_t count = perUnit * unit;
        for (size_t w = 0; w < worlds.size(); ++w) {
          if (w > 0 && perUnit > (16u << 20))
            continue;
          for (bool inPlace : {false, true}) {
            if (inPlace && !hasInPlaceForm(kind))
              continue;
            if (stopped[w]) {
              ++skipped;
              continue;
            }
            bool skip = false;
            std::string err = checkRun(*worlds[w], *plan, arena, type, op, count, inPlace, skip);
            runs += !skip;
            skipped += skip;
            if (!err.empty() && ++failures <= 10)
              ADD_FAILURE() << GetParam() << " " << protocolName(protocols[w]) << " "
                            << dataTypeName(type) << " " << redOpName(op) << " count " << count
                            << (inPlace ? " in place" : " out of place") << ": " << err;
            if (err.find("timed out") != std::string::npos)
              stopped[w] = true;
          }
        }
      }
    }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[ sweep    ] %s: %u runs, %u wrong, %u skipped (over %.0f GiB), %.1f s\n",
              GetParam().c_str(), runs, failures, skipped, double(arena.size()) / (1ull << 30),
              seconds);
  EXPECT_EQ(failures, 0u);
}

/// coll-run --ranks-as gpu checks a plan end to end, in place and out.
TEST(CollRun, RanksAsGpu) {
  REQUIRE_GPU();
#ifndef COLL_RUN_PATH
  GTEST_SKIP() << "coll-run is not built";
#else
  std::string plan = gpuPlanDir() + "/ring_allreduce_n4.bin";
  if (gpuPlanDir().empty() || !std::ifstream(plan))
    GTEST_SKIP() << "no compiled plans";
  for (const char *extra : {"", " --inplace", " --dtype bf16 --op avg", " --protocol LL",
                            " --protocol LL128 --inplace"}) {
    std::string cmd = std::string(COLL_RUN_PATH) + " " + plan +
                      " --ranks-as gpu --size 1M --iters 3" + extra + " 2>&1";
    FILE *pipe = popen(cmd.c_str(), "r");
    ASSERT_NE(pipe, nullptr);
    std::string out;
    char buf[256];
    while (size_t n = fread(buf, 1, sizeof buf, pipe))
      out.append(buf, n);
    int status = pclose(pipe);
    EXPECT_EQ(status, 0) << cmd << "\n" << out;
    EXPECT_NE(out.find("# ranks as gpu (one device)"), std::string::npos) << out;
    EXPECT_TRUE(std::regex_search(out, std::regex(" 0\n$"))) << out; // No wrong element.
  }

  // --trace: one event per step of every threadblock (64 KiB: one slice).
  Result<Plan> loaded = loadPlanFile(plan);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  size_t steps = 0;
  for (const RankPlan &rp : loaded->ranks)
    for (const Threadblock &tb : rp.threadblocks)
      steps += tb.steps.size();
  const std::string tracePath = ::testing::TempDir() + "coll_gpu_trace.json";
  std::remove(tracePath.c_str());
  std::string cmd = std::string(COLL_RUN_PATH) + " " + plan +
                    " --ranks-as gpu --size 64K --iters 1 --trace " + tracePath + " 2>&1";
  int status = std::system(cmd.c_str());
  ASSERT_EQ(status, 0) << cmd;
  std::ifstream f(tracePath);
  std::string json((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  size_t events = 0;
  for (size_t at = json.find("\"cat\":\"step\""); at != std::string::npos;
       at = json.find("\"cat\":\"step\"", at + 1))
    ++events;
  EXPECT_EQ(events, steps) << json.substr(0, 2000);
  std::remove(tracePath.c_str());
#endif
}

INSTANTIATE_TEST_SUITE_P(Plans, PlanSweep, testing::ValuesIn(planNames()),
                         [](const testing::TestParamInfo<std::string> &info) {
                           return info.param;
                         });

} // namespace
