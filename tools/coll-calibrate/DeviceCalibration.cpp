//===- DeviceCalibration.cpp - One GPU's figures for the predictor --------===//
//
// Every figure comes from plans run by DeviceWorld, each call a launch and
// the stream's synchronisation, as a caller of a stream waits (the median
// of many calls, the least of three rounds; the calls with DeviceWorld::
// wait()'s check of the device's error record are printed beside them):
//  - step-latency: a rank whose threadblock runs 257 one-element copies
//    against one that runs 1;
//  - call-latency: the one-step call, less its step;
//  - call-rank-latency: one step on each of 8 ranks against each of 2 (the
//    host prepares every rank's call);
//  - piece-latency: steps that copy 8 one-element chunks against steps of
//    one chunk;
//  - dependency-latency: one step on each of 56 threadblocks of a rank,
//    each waiting for the one before, against the same side by side, less
//    a step per link;
//  - intra-latency: a message's trip beyond its two steps, from ping-pongs
//    of 65 and 1 round trips between two ranks;
//  - line-step-latency: the same ping-pongs under LL, the difference a
//    step's;
//  - threadblock-bandwidth: one threadblock copying 256 MiB in one step;
//  - node-bandwidth and intra-bandwidth: a threadblock on each SM copying
//    its share of 256 MiB.
// A receiver reads a sender's data where it lies (direct-sends 1), as
// DeviceWorld does by default.
//
//===----------------------------------------------------------------------===//

#include "DeviceCalibration.h"

#include "coll/Kernels/DeviceWorld.h"
#include "coll/Runtime/CalibrationPlans.h"
#include "coll/Runtime/Executor.h"
#include "coll/Runtime/Topology.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cuda_runtime_api.h>
#include <vector>

namespace coll::tools {

namespace {

using Clock = std::chrono::steady_clock;

Status cudaFailure(const char *what, cudaError_t err) {
  return Status::error(std::string(what) + ": " + cudaGetErrorString(err));
}

/// Device memory freed on scope exit.
struct DeviceBuffers {
  std::vector<void *> ptrs;
  ~DeviceBuffers() {
    for (void *p : ptrs)
      cudaFree(p);
  }
  Result<void *> allocate(uint64_t bytes) {
    void *p = nullptr;
    if (cudaError_t err = cudaMalloc(&p, std::max<uint64_t>(bytes, 16)))
      return cudaFailure("cannot allocate device memory", err);
    ptrs.push_back(p);
    if (cudaError_t err = cudaMemset(p, 0, std::max<uint64_t>(bytes, 16)))
      return cudaFailure("cannot clear device memory", err);
    return p;
  }
};

/// Seconds of calls of a plan on one GPU.
struct CallTimes {
  double synced = 0; ///< A launch and the stream's synchronisation.
  double waited = 0; ///< A launch and DeviceWorld::wait(), its error check.
};

/// The seconds of a call of \p plan of \p count floats on the GPU of
/// \p options: the least over three rounds of the median of \p reps calls,
/// after warm-up calls; synchronised as a caller of the stream does, and
/// with DeviceWorld::wait()'s check of the device's error record.
Result<CallTimes> callTime(const Plan &plan, uint64_t count, int reps,
                           const DeviceOptions &options) {
  Result<std::unique_ptr<DeviceWorld>> world = DeviceWorld::create(plan, options);
  if (!world)
    return world.getStatus();
  const BufferElements e = planBufferElements(plan.info, count);
  DeviceBuffers memory;
  std::vector<const void *> sends;
  std::vector<void *> recvs;
  for (uint32_t r = 0; r < plan.info.nranks; ++r) {
    Result<void *> in = memory.allocate(e.input * sizeof(float));
    Result<void *> out = memory.allocate(e.output * sizeof(float));
    if (!in || !out)
      return in ? out.getStatus() : in.getStatus();
    sends.push_back(*in);
    recvs.push_back(*out);
  }
  DeviceWorld &w = **world;
  auto median = [](std::vector<double> &v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  CallTimes best{1e30, 1e30};
  for (int round = 0; round < 3; ++round) {
    std::vector<double> synced, waited;
    for (int i = 0; i < reps + 5; ++i) {
      const auto start = Clock::now();
      if (Status s = w.launch(sends, recvs, count, DataType::Float32, RedOp::Sum); !s)
        return s;
      if (cudaError_t err = cudaStreamSynchronize(nullptr))
        return cudaFailure("the interpreter kernel failed", err);
      const double t = std::chrono::duration<double>(Clock::now() - start).count();
      if (i >= 5)
        synced.push_back(t);
    }
    if (Status s = w.wait(); !s)
      return s;
    for (int i = 0; i < reps + 5; ++i) {
      const auto start = Clock::now();
      if (Status s = w.run(sends, recvs, count, DataType::Float32, RedOp::Sum); !s)
        return s;
      if (i >= 5)
        waited.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    }
    best.synced = std::min(best.synced, median(synced));
    best.waited = std::min(best.waited, median(waited));
  }
  return best;
}

std::string us(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f us", seconds * 1e6);
  return buf;
}

std::string gbs(double bytesPerSecond) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GB/s", bytesPerSecond / 1e9);
  return buf;
}

} // namespace

Result<std::string> calibrateDevice(const std::string &name, int device) {
  if (device >= 0)
    if (cudaError_t err = cudaSetDevice(device))
      return cudaFailure("cannot use the GPU asked for", err);
  int current = 0;
  if (cudaError_t err = cudaGetDevice(&current))
    return cudaFailure("no GPU", err);
  cudaDeviceProp prop{};
  if (cudaError_t err = cudaGetDeviceProperties(&prop, current))
    return cudaFailure("cannot read the GPU's properties", err);
  const uint32_t sms = uint32_t(std::max(1, prop.multiProcessorCount));

  DeviceOptions options;
  options.device = current;
  // Small calls: many of them, one element per chunk.
  Result<CallTimes> local1 = callTime(localStepsPlan(1), 1, 400, options);
  Result<CallTimes> local257 = callTime(localStepsPlan(257), 1, 200, options);
  Result<CallTimes> ranks2 = callTime(localStepsPlan(1, 1, 2), 1, 400, options);
  Result<CallTimes> ranks8 = callTime(localStepsPlan(1, 1, 8), 1, 400, options);
  // Not in the model yet either: the launch of the staging copies an
  // in-place plan called out of place makes (its input put in its output
  // first, a copy kernel before the interpreter's). Printed only.
  Plan stagedPlan = localStepsPlan(1, 1, 8);
  stagedPlan.info.inplace = true;
  Result<CallTimes> ranks8Staged = callTime(stagedPlan, 1, 400, options);
  // Not in the model yet: whether a call's fixed cost grows with its
  // threadblocks (docs/prediction.md, "The GPU's one-device mode").
  const uint32_t manyTbs = std::min<uint32_t>(56, sms);
  Result<CallTimes> tbs1 = callTime(localCopyPlan(1), manyTbs, 400, options);
  Result<CallTimes> tbsMany = callTime(localCopyPlan(manyTbs), manyTbs, 400, options);
  // What a cross-threadblock dependency costs beyond its step: the same
  // threadblocks one after another.
  Result<CallTimes> chain = callTime(dependencyChainPlan(manyTbs), manyTbs, 400, options);
  Result<CallTimes> steps1 = callTime(localStepsPlan(65, 1), 1, 200, options);
  Result<CallTimes> steps8 = callTime(localStepsPlan(65, 8), 8, 200, options);
  Result<CallTimes> pp1 = callTime(pingPongPlan(1), 1, 400, options);
  Result<CallTimes> pp65 = callTime(pingPongPlan(65), 1, 200, options);
  DeviceOptions ll = options;
  ll.protocol.force = true;
  ll.protocol.forced = ProtocolKind::LL;
  Result<CallTimes> llPp1 = callTime(pingPongPlan(1), 1, 400, ll);
  Result<CallTimes> llPp65 = callTime(pingPongPlan(65), 1, 200, ll);
  // A receive that reduces (rrc) against one that copies: the model's
  // recv-reduce-latency. Not in the model: the ping-pong beside
  // threadblocks that poll for its end (printed only). Each only where it
  // ran.
  Result<CallTimes> rrcPp1 = callTime(pingPongPlan(1, Opcode::RecvReduceCopy), 1, 400, options);
  Result<CallTimes> rrcPp65 = callTime(pingPongPlan(65, Opcode::RecvReduceCopy), 1, 200, options);
  const uint32_t waiters = manyTbs > 2 ? manyTbs - 2 : 0;
  Result<CallTimes> waitPp1 = callTime(pingPongPlan(1, Opcode::Recv, waiters), 64, 400, options);
  Result<CallTimes> waitPp65 = callTime(pingPongPlan(65, Opcode::Recv, waiters), 64, 200, options);
  // Bandwidth: 256 MiB in one step of each threadblock (a slice as large as
  // its chunk), one threadblock and then one per SM.
  const uint64_t big = 64ull << 20; // Floats.
  DeviceOptions whole = options;
  whole.sliceBytes = big * sizeof(float);
  Result<CallTimes> copy1 = callTime(localCopyPlan(1), big, 10, whole);
  const uint64_t share = big / sms;
  whole.sliceBytes = share * sizeof(float);
  Result<CallTimes> copyAll = callTime(localCopyPlan(sms), share * sms, 10, whole);
  // A reduction reads two inputs where a copy reads one: 256 MiB of result
  // by one threadblock.
  whole.sliceBytes = big * sizeof(float);
  Result<CallTimes> reduce1 = callTime(localReducePlan(1), big, 10, whole);
  for (const Result<CallTimes> *r :
       {&local1, &local257, &ranks2, &ranks8, &tbs1, &tbsMany, &chain, &steps1, &steps8, &pp1,
        &pp65, &llPp1, &llPp65, &copy1, &copyAll, &reduce1})
    if (!*r)
      return r->getStatus();

  // Figures of calls synchronised as a stream's caller does (the
  // predictor's time of a call, as coll-gpu-bench's "synchronised").
  const double step = std::max(0.0, (local257->synced - local1->synced) / 256);
  const double call = std::max(0.0, local1->synced - step);
  const double rankCall = std::max(0.0, (ranks8->synced - ranks2->synced) / 6);
  // A chain's threadblocks run one after another: each link a step and a
  // dependency, where side by side they take one step.
  const double dependency =
      manyTbs > 1 ? std::max(0.0, (chain->synced - tbsMany->synced) / double(manyTbs - 1) - step)
                  : 0;
  const double piece = std::max(0.0, (steps8->synced - steps1->synced) / (65 * 7));
  // A round trip is two messages, each a step on each side and a trip:
  // a hop from ping-pongs of 1 and 65 round trips.
  auto hopOf = [](const CallTimes &one, const CallTimes &many) {
    return std::max(0.0, (many.synced - one.synced) / 128);
  };
  const double hop = hopOf(*pp1, *pp65);
  const double latency = std::max(0.0, hop - 2 * step);
  const double llHop = hopOf(*llPp1, *llPp65);
  const double lineStep = std::max(0.0, (llHop - latency) / 2);
  const double one = double(big) * sizeof(float) / std::max(1e-9, copy1->synced - call - step);
  const double all =
      double(share * sms) * sizeof(float) / std::max(1e-9, copyAll->synced - call - step);
  const double reduce = double(big) * sizeof(float) / std::max(1e-9, reduce1->synced - call - step);

  Topology t;
  t.name = name;
  t.ranksPerNode = 0;
  t.intra = {all, latency};
  t.copyBandwidth = one;
  t.threadblockBandwidth = one;
  t.nodeBandwidth = all;
  t.reduceBandwidth = reduce;
  t.stepLatency = step;
  t.lineStepLatency = lineStep;
  t.pieceLatency = piece;
  t.callLatency = call;
  t.callRankLatency = rankCall;
  t.dependencyLatency = dependency;
  double rrcHop = 0;
  if (rrcPp1 && rrcPp65) {
    rrcHop = hopOf(*rrcPp1, *rrcPp65);
    t.recvReduceLatency = std::max(0.0, rrcHop - hop);
  }
  t.directSends = true; // DeviceWorld's direct reads.
  std::string header = "# coll-calibrate --ranks-as gpu: every rank on one " +
                       std::string(prop.name) + " (" + std::to_string(sms) + " SMs), DeviceWorld\n";
  auto both = [](const CallTimes &c) { return us(c.synced) + " (" + us(c.waited) + ")"; };
  header += "# calls synchronised on the stream (and with DeviceWorld::wait()'s error check):\n";
  header += "# 1 step " + both(*local1) + ", 257 steps " + both(*local257) + "\n";
  header += "# 1 step on each of 2 ranks " + both(*ranks2) + ", of 8 ranks " + both(*ranks8) +
            " (" + us(rankCall) + " a rank)\n";
  header += ranks8Staged ? "# the same, an in-place plan called out of place (a staging copy "
                           "first) " +
                               both(*ranks8Staged) + "\n"
                         : "# an in-place plan called out of place: not measured (" +
                               ranks8Staged.message() + ")\n";
  header += "# 1 step on each of 1 and " + std::to_string(manyTbs) + " threadblocks of one rank " +
            both(*tbs1) + ", " + both(*tbsMany) + "\n";
  header += "# the same one after another, a chain of " + std::to_string(manyTbs - 1) +
            " dependencies, " + both(*chain) + " (" + us(dependency) +
            " a dependency beyond its step)\n";
  header += "# 65 steps of 1 chunk " + both(*steps1) + ", of 8 chunks " + both(*steps8) + "\n";
  header += "# ping-pong of 1 and 65 round trips " + both(*pp1) + ", " + both(*pp65) + " (a hop " +
            us(hop) + ")\n";
  header += "# under LL " + both(*llPp1) + ", " + both(*llPp65) + " (a hop " + us(llHop) + ")\n";
  if (rrcPp1 && rrcPp65) {
    header += "# received by rrc (reduced into the output) " + both(*rrcPp1) + ", " +
              both(*rrcPp65) + " (a hop " + us(rrcHop) + ", " + us(rrcHop - hop) +
              " more a step than r)\n";
  } else {
    header += "# received by rrc: not measured (" +
              (rrcPp1 ? rrcPp65.message() : rrcPp1.message()) + ")\n";
  }
  if (waitPp1 && waitPp65) {
    const double waitHop = hopOf(*waitPp1, *waitPp65);
    header += "# beside " + std::to_string(waiters) + " threadblocks that wait for its end " +
              both(*waitPp1) + ", " + both(*waitPp65) + " (a hop " + us(waitHop) + ")\n";
  } else {
    header += "# beside waiting threadblocks: not measured (" +
              (waitPp1 ? waitPp65.message() : waitPp1.message()) + ")\n";
  }
  header += "# 256 MiB copied by 1 threadblock " + both(*copy1) + " (" + gbs(one) + "), by " +
            std::to_string(sms) + " " + both(*copyAll) + " (" + gbs(all) + ")\n";
  header += "# 256 MiB reduced (fp32 sum) by 1 threadblock " + both(*reduce1) + " (" + gbs(reduce) +
            " of result)\n";
  return header + formatTopology(t);
}

} // namespace coll::tools
