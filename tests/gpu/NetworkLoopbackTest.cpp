//===- NetworkLoopbackTest.cpp - The kernel's network path on one GPU -----===//
//
// Every rank of a plan on one GPU, each with its own tables, connection
// memory and launch, as NcclCommunicator sets up a rank, with every
// connection between ranks over the network: layoutConnections gives each
// rank staging slots and signals, resolveConnections the peers' window
// offsets and signals, and the kernel's network is a loopback
// (NetworkLoopback.h) instead of GIN. What runs is the kernel's network
// path: waits on signals, the staging slot and the extent of each put,
// slot and signal counts that go on across launches, and the device-side
// timeout of a wait on a signal. Results are compared with the reference
// on data distinct per (rank, element).
//
// The hand-written ring runs always (with a GPU); every plan in the GPU
// test plan directory (gpuPlanDir()) runs when there is one.
//
//===----------------------------------------------------------------------===//

#include "NetworkLoopback.h"

#include "GpuTestSupport.h"
#include "HandPlans.h"
#include "LaunchTables.h"
#include "NcclSetup.h"
#include "TestHelpers.h"
#include "coll/Runtime/PlanIO.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <memory>
#include <optional>
#include <string>
#include <vector>

using namespace coll;
using namespace coll::kernels;
using namespace coll::test;

namespace {

/// What setUp() says when the ranks' CTAs do not all fit on the GPU at once.
constexpr const char *kNotResident = "not resident";

/// One rank, set up as NcclCommunicator sets up its rank (the names are
/// those launchInterpreter reads).
struct LoopbackRank {
  uint32_t rank = 0;
  Plan plan; ///< This rank's section.
  std::vector<RankSection> sections;
  LaunchTables tables;
  ConnectionLayout connections;
  uint32_t numBlocks = 0;
  uint64_t sliceBase = 0;
  NcclOptions options;
  DeviceBuffer tbTable, stepTable, depTable, fifoTable, rankBufferTable;
  DeviceBuffer progress, abortFlag, error, window, scratch, privateCopy, params;
  cudaStream_t stream = nullptr;
  ~LoopbackRank() {
    if (stream)
      cudaStreamDestroy(stream);
  }
};

/// Every rank of a plan on this GPU, every connection over the loopback.
class LoopbackWorld {
public:
  /// "" or what went wrong.
  std::string setUp(const Plan &whole, uint64_t sliceBytes, double timeoutSeconds) {
    Result<ValidatedPlan> v = ValidatedPlan::make(whole);
    if (!v)
      return v.message();
    validated = *v;
    info = whole.info;
    const uint32_t n = info.nranks;
    const uint64_t stride = maxPieceStride(sliceBytes);
    ranks.clear();
    std::vector<bool> network(n, true);
    for (uint32_t r = 0; r < n; ++r) {
      auto rk = std::make_unique<LoopbackRank>();
      rk->rank = r;
      rk->plan.info = info;
      rk->plan.ranks = {whole.ranks[r]};
      rk->plan.loadedRank = int32_t(r);
      rk->sections = {{r, &rk->plan.ranks[0]}};
      rk->tables = buildLaunchTables(info, rk->sections);
      rk->numBlocks = uint32_t(rk->tables.tbs.size());
      rk->options.sliceBytes = sliceBytes;
      rk->options.timeoutSeconds = timeoutSeconds;
      rk->options.cooperative = false; // One launch per rank, all resident.
      std::vector<bool> others = network;
      others[r] = false;
      Result<ConnectionLayout> laidOut =
          layoutConnections(rk->tables, rk->plan.ranks[0], r, stride, others);
      if (!laidOut)
        return "layout: " + laidOut.message();
      rk->connections = std::move(*laidOut);
      signalsPerRank = std::max(signalsPerRank, rk->connections.signals);
      ranks.push_back(std::move(rk));
    }
    signalsPerRank = std::max(signalsPerRank, 1u);
    // Each rank is a launch of its own: all of them must fit at once.
    uint32_t ctas = 0, shared = 0;
    for (auto &rk : ranks) {
      ctas += rk->numBlocks;
      shared = std::max(shared, uint32_t(rk->tables.sharedSteps * sizeof(Instruction)));
    }
    int perSm = 0, sms = 0, device = 0;
    if (cudaGetDevice(&device) ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &perSm,
            reinterpret_cast<const void *>(selectLoopbackKernel(DataType::Float32, RedOp::Sum)),
            int(ranks[0]->options.threadsPerBlock), shared))
      return "cannot query the occupancy";
    if (ctas > uint32_t(perSm) * uint32_t(sms))
      return cat(kNotResident, ": ", ctas, " CTAs, the GPU holds ", perSm * sms);
    std::vector<std::vector<ConnectionEntry>> entries;
    for (auto &rk : ranks)
      entries.push_back(rk->connections.entries);
    std::vector<char *> windows;
    for (auto &rk : ranks) {
      if (rk->window.reserve(rk->connections.bytes) ||
          cudaMemset(rk->window.ptr, 0, rk->window.bytes))
        return "cannot allocate a window";
      windows.push_back(rk->window.ptr);
    }
    if (upload(windowTable, windows) ||
        signals.reserve(uint64_t(n) * signalsPerRank * sizeof(uint64_t)) ||
        cudaMemset(signals.ptr, 0, signals.bytes))
      return "cannot allocate the signals";
    for (auto &rk : ranks) {
      Result<ConnectionMatch> m = matchConnections(entries, rk->rank);
      if (!m)
        return "match: " + m.message();
      bindLocalConnections(rk->tables, rk->connections, rk->window.ptr);
      std::vector<PeerReference> refs = resolveConnections(rk->tables, rk->connections, *m);
      if (!refs.empty())
        return cat("rank ", rk->rank, " has ", refs.size(), " connection ends outside the network");
      LoopbackParams lp;
      lp.windows = windowTable.as<char *>();
      lp.signals = signals.as<uint64_t>();
      lp.signalsPerRank = signalsPerRank;
      lp.rank = rk->rank;
      std::vector<LoopbackParams> one = {lp};
      if (upload(rk->tbTable, rk->tables.tbs) || upload(rk->stepTable, rk->tables.steps) ||
          upload(rk->depTable, rk->tables.deps) || upload(rk->fifoTable, rk->tables.fifos) ||
          upload(rk->params, one) ||
          rk->progress.reserve(uint64_t(rk->numBlocks) * kCounterStride * 8) ||
          rk->abortFlag.reserve(sizeof(unsigned int)) || rk->error.reserve(sizeof(DeviceError)) ||
          rk->rankBufferTable.reserve(3 * sizeof(char *)) ||
          cudaMemset(rk->progress.ptr, 0, rk->progress.bytes) ||
          cudaMemset(rk->abortFlag.ptr, 0, rk->abortFlag.bytes) ||
          cudaMemset(rk->error.ptr, 0, rk->error.bytes) ||
          cudaStreamCreateWithFlags(&rk->stream, cudaStreamNonBlocking))
        return "cannot set up a rank";
    }
    return "";
  }

  /// Runs ranks \p active (all when empty) on device buffers send[r] and
  /// recv[r]; "" or what went wrong (a device-side failure included).
  std::string run(const std::vector<void *> &send, const std::vector<void *> &recv, uint64_t count,
                  DataType type, RedOp op, const std::vector<uint32_t> &active = {}) {
    const uint32_t n = info.nranks;
    KernelFn fn = selectLoopbackKernel(type, op);
    if (!fn)
      return "no loopback kernel for this type and operator";
    const size_t es = dataTypeSize(type);
    const uint32_t chunks = *planChunksPerUnit(info);
    std::vector<uint32_t> which = active;
    if (which.empty())
      for (uint32_t r = 0; r < n; ++r)
        which.push_back(r);
    std::vector<DeviceBinding> bindings(n);
    for (uint32_t r : which) {
      LoopbackRank &rk = *ranks[r];
      const SliceShape shape = sliceShape(count, chunks, rk.options.sliceBytes, es);
      CallOptions o = launchCallOptions(rk.options.sliceBytes, type);
      o.worldRanks = n;
      PreparedCall call = prepareCall(*validated, r, {send[r], recv[r], count, type, op}, o);
      if (call.error)
        return call.error.message;
      const uint64_t scratchBytes =
          shape.layout.scratchElements(rk.plan.ranks[0].scratchChunks) * es;
      if (rk.scratch.reserve(scratchBytes) || rk.privateCopy.reserve(call.copyBytes))
        return "cannot allocate scratch";
      DeviceBinding &b = bindings[r] = bindCall(call, rk.privateCopy.ptr);
      for (const kernels::StagingCopy &c : b.before)
        if (cudaMemcpy(c.to, c.from, c.bytes, cudaMemcpyDeviceToDevice))
          return "cannot stage an input";
      std::vector<char *> table(numBufferKinds());
      table[unsigned(BufferKind::Input)] = b.input;
      table[unsigned(BufferKind::Output)] = b.output;
      table[unsigned(BufferKind::Scratch)] = rk.scratch.ptr;
      if (cudaMemcpy(rk.rankBufferTable.ptr, table.data(), 3 * sizeof(char *),
                     cudaMemcpyHostToDevice))
        return "cannot upload the buffer table";
    }
    if (cudaDeviceSynchronize())
      return "cannot prepare the launch";
    for (uint32_t r : which) {
      LoopbackRank &rk = *ranks[r];
      const SliceShape shape = sliceShape(count, chunks, rk.options.sliceBytes, es);
      if (cudaError_t err = launchInterpreter(rk, fn, shape.layout, shape.pieceStride,
                                              /*systemScope=*/true, rk.stream, rk.params.ptr))
        return "launch: " + cudaText(err);
      rk.sliceBase += shape.layout.numSlices;
    }
    if (cudaError_t err = cudaDeviceSynchronize())
      return "the kernels failed: " + cudaText(err);
    for (uint32_t r : which) {
      LoopbackRank &rk = *ranks[r];
      DeviceError e;
      if (cudaMemcpy(&e, rk.error.ptr, sizeof e, cudaMemcpyDeviceToHost))
        return "cannot read an error record";
      if (e.claimed || e.abortedCtas)
        return e.claimed ? describeDeviceFailure(e, rk.tables, rk.sections, info.connectionDepth,
                                                 rk.options.timeoutSeconds)
                               .message()
                         : "stopped without a recorded failure";
      for (const kernels::StagingCopy &c : bindings[r].after)
        if (cudaMemcpy(c.to, c.from, c.bytes, cudaMemcpyDeviceToDevice))
          return "cannot copy a result out";
    }
    return "";
  }

  std::optional<ValidatedPlan> validated;
  PlanInfo info;
  std::vector<std::unique_ptr<LoopbackRank>> ranks;
  uint32_t signalsPerRank = 0;
  DeviceBuffer windowTable, signals;
};

/// Runs \p plan for \p c on \p world (set up for it) and compares with the
/// reference; "" or what went wrong.
std::string runAndCompare(LoopbackWorld &world, const Plan &plan, const RunCase &c) {
  const uint32_t n = plan.info.nranks;
  WorldBuffers b;
  makeBuffers(plan, c, b);
  // Device copies of the host layout (placeBuffers): the same offsets.
  std::vector<DeviceBuffer> dev(n);
  std::vector<void *> send(n), recv(n);
  std::vector<std::vector<char> *> host(n);
  for (uint32_t r = 0; r < n; ++r) {
    std::vector<char> &whole = c.inplace ? b.both[r] : b.out[r];
    host[r] = &whole;
    const char *hsend = static_cast<const char *>(b.send[r]);
    const char *hrecv = static_cast<const char *>(b.recv[r]);
    if (c.inplace) {
      if (dev[r].reserve(whole.size()) ||
          cudaMemcpy(dev[r].ptr, whole.data(), whole.size(), cudaMemcpyHostToDevice))
        return "cannot copy the buffers in";
      send[r] = dev[r].ptr + (hsend - whole.data());
      recv[r] = dev[r].ptr + (hrecv - whole.data());
    } else {
      // The output after the input (with its spare byte), aligned as a
      // user's buffer would be.
      const std::vector<char> &in = b.in[r];
      const uint64_t at = roundUp(in.size(), 256);
      if (dev[r].reserve(at + whole.size()) ||
          cudaMemcpy(dev[r].ptr, in.data(), in.size(), cudaMemcpyHostToDevice) ||
          cudaMemcpy(dev[r].ptr + at, whole.data(), whole.size(), cudaMemcpyHostToDevice))
        return "cannot copy the buffers in";
      send[r] = dev[r].ptr;
      recv[r] = dev[r].ptr + at;
    }
  }
  if (std::string e = world.run(send, recv, c.count, c.type, c.op); !e.empty())
    return describe(c) + ": " + e;
  for (uint32_t r = 0; r < n; ++r) {
    const char *from = c.inplace ? dev[r].ptr : dev[r].ptr + roundUp(b.in[r].size(), 256);
    if (cudaMemcpy(host[r]->data(), from, host[r]->size(), cudaMemcpyDeviceToHost))
      return "cannot copy the outputs out";
  }
  std::vector<std::vector<char>> want;
  if (std::string e = referenceOutputs(plan, c, b.original, want); !e.empty())
    return e;
  return compareOutputs(plan, c, b.recv, want);
}

/// The counts and types of one plan, several launches in a row on one
/// world (signals and counters carry on).
/// Whether the plan ran: false when its CTAs do not fit on the GPU at once.
bool runPlan(const Plan &plan, const std::string &name) {
  LoopbackWorld world;
  std::string setUp = world.setUp(plan, 16384, 20);
  if (setUp.rfind(kNotResident, 0) == 0) {
    std::printf("[ skipped  ] %s: %s\n", name.c_str(), setUp.c_str());
    return false;
  }
  EXPECT_EQ(setUp, "") << name;
  if (!setUp.empty())
    return true;
  const bool reduces = collectiveReduces(plan.info.collective);
  const uint32_t n = plan.info.nranks;
  struct TypeOp {
    DataType type;
    RedOp op;
  };
  std::vector<TypeOp> kinds = {{DataType::Float32, RedOp::Sum}, {DataType::Int64, RedOp::Max}};
  if (reduces)
    kinds.push_back({DataType::BFloat16, RedOp::Sum});
  // A user-declared collective's count is a whole number of its units.
  const uint64_t unit = plan.info.collective == CollectiveKind::Custom
                            ? std::max<uint64_t>(1, userCollectiveUnit(plan.info))
                            : 1;
  for (uint64_t perUnit :
       {uint64_t(1), uint64_t(7), uint64_t(n - 1 ? n - 1 : 1), uint64_t(1000), uint64_t(100003)})
    for (const TypeOp &k : kinds)
      for (bool inplace : {false, true}) {
        RunCase c;
        c.type = k.type;
        c.op = k.op;
        c.count = perUnit * unit;
        c.inplace = inplace;
        std::string e = runAndCompare(world, plan, c);
        EXPECT_EQ(e, "") << name;
        if (!e.empty())
          return true;
      }
  return true;
}

TEST(NetworkLoopback, HandRingOverTheNetwork) {
  if (!haveGpu())
    GTEST_SKIP() << "no usable CUDA device";
  // Five CTAs fit on any GPU: every ring must run. (Depth 1 deadlocks the
  // hand ring by design: each rank's fused receive-and-send step waits for
  // a free slot at its successor before it takes its own message.)
  for (uint32_t n : {2u, 3u, 5u})
    for (uint32_t depth : {2u, 3u, 4u})
      EXPECT_TRUE(runPlan(ringAllReduce(n, depth), cat("hand ring of ", n, " depth ", depth)));
}

TEST(NetworkLoopback, PeerThatNeverRunsTimesOut) {
  if (!haveGpu())
    GTEST_SKIP() << "no usable CUDA device";
  const Plan plan = ringAllReduce(3, 2);
  LoopbackWorld world;
  ASSERT_EQ(world.setUp(plan, 16384, 0.5), "");
  std::vector<DeviceBuffer> bufs(3);
  std::vector<void *> send(3), recv(3);
  for (uint32_t r = 0; r < 3; ++r) {
    ASSERT_FALSE(bufs[r].reserve(2 * 3000 * sizeof(float)));
    ASSERT_FALSE(cudaMemset(bufs[r].ptr, 0, bufs[r].bytes));
    send[r] = bufs[r].ptr;
    recv[r] = bufs[r].ptr + 3000 * sizeof(float);
  }
  // Rank 2 never launches: rank 0 waits for its messages (a signal that
  // never comes), rank 1 for the slots rank 2 never frees or for rank 0.
  std::string e = world.run(send, recv, 3000, DataType::Float32, RedOp::Sum, {0, 1});
  EXPECT_NE(e.find("timed out"), std::string::npos) << e;
  EXPECT_NE(e.find("rank "), std::string::npos) << e;
}

TEST(NetworkLoopback, CompiledPlansOverTheNetwork) {
  if (!haveGpu())
    GTEST_SKIP() << "no usable CUDA device";
  const std::string dir = gpuPlanDir();
  std::vector<std::string> names = planNamesIn(dir);
  if (names.empty())
    GTEST_SKIP() << "no compiled plans in '" << dir << "' (COLL_GPU_PLAN_DIR)";
  unsigned ran = 0;
  for (const std::string &name : names) {
    Result<Plan> p = loadPlanFile(dir + "/" + name + ".bin");
    ASSERT_TRUE(p) << name << ": " << p.message();
    ran += runPlan(*p, name);
    if (HasFailure())
      return;
  }
  EXPECT_GT(ran, 0u) << "no plan fits on the GPU";
}

} // namespace
