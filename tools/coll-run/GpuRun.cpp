//===- GpuRun.cpp - coll-run's --ranks-as gpu -----------------------------===//

#include "GpuRun.h"

#include "coll/Kernels/DeviceWorld.h"

#include <cstdio>
#include <cuda_runtime_api.h>

namespace coll {

namespace {

std::string cudaError(const char *what, cudaError_t err) {
  return std::string(what) + ": " + cudaGetErrorString(err);
}

/// Device memory freed on scope exit.
struct DeviceMemory {
  std::vector<void *> ptrs;
  ~DeviceMemory() {
    for (void *p : ptrs)
      cudaFree(p);
  }
};

} // namespace

std::string runOnGpu(const ValidatedPlan &plan, const std::vector<GpuRankBuffers> &ranks,
                     uint64_t count, DataType type, RedOp op, uint64_t sliceBytes,
                     double timeoutSeconds, uint64_t iters, double *timeUs, Timeline *timeline,
                     const ProtocolChoice &protocol) {
  DeviceOptions options;
  options.protocol = protocol;
  if (sliceBytes)
    options.sliceBytes = sliceBytes;
  options.timeoutSeconds = timeoutSeconds;
  // Tracing records the steps of the checked run, up to this many per
  // threadblock (32 bytes each); the timed runs use a world without it.
  const uint32_t kTraceSteps = 1u << 14;
  DeviceOptions traced = options;
  if (timeline)
    traced.traceSteps = kTraceSteps;
  auto world = DeviceWorld::create(plan, traced);
  if (!world)
    return world.message();
  DeviceMemory memory;
  std::vector<const void *> send;
  std::vector<void *> recv;
  cudaError_t err;
  for (const GpuRankBuffers &r : ranks) {
    void *p = nullptr;
    if ((err = cudaMalloc(&p, r.bytes ? r.bytes : 1)))
      return cudaError("cannot allocate device memory", err);
    memory.ptrs.push_back(p);
    if ((err = cudaMemcpy(p, r.base, r.bytes, cudaMemcpyHostToDevice)))
      return cudaError("cannot copy an input to the device", err);
    send.push_back(static_cast<char *>(p) + r.sendOffset);
    recv.push_back(static_cast<char *>(p) + r.recvOffset);
  }
  if (Status s = (*world)->run(send, recv, count, type, op); !s)
    return s.message();
  if (timeline && count) {
    DeviceTrace trace;
    if (Status s = (*world)->trace(trace); !s)
      return s.message();
    if (trace.unrecorded)
      std::fprintf(stderr,
                   "coll-run: warning: the trace holds the first %u steps of each threadblock; "
                   "%llu more steps ran\n",
                   kTraceSteps, static_cast<unsigned long long>(trace.unrecorded));
    *timeline = std::move(trace.timeline);
    world = DeviceWorld::create(plan, options);
    if (!world)
      return world.message();
  }
  for (size_t i = 0; i < ranks.size(); ++i)
    if ((err = cudaMemcpy(ranks[i].base, memory.ptrs[i], ranks[i].bytes, cudaMemcpyDeviceToHost)))
      return cudaError("cannot copy an output from the device", err);

  cudaEvent_t begin, end;
  if ((err = cudaEventCreate(&begin)) || (err = cudaEventCreate(&end)))
    return cudaError("cannot create events", err);
  cudaEventRecord(begin);
  for (uint64_t i = 0; i < iters; ++i)
    if (Status s = (*world)->launch(send, recv, count, type, op); !s)
      return s.message();
  cudaEventRecord(end);
  Status s = (*world)->wait();
  float ms = 0;
  cudaEventElapsedTime(&ms, begin, end);
  cudaEventDestroy(begin);
  cudaEventDestroy(end);
  if (!s)
    return s.message();
  *timeUs = iters ? double(ms) * 1e3 / double(iters) : 0;
  return "";
}

} // namespace coll
