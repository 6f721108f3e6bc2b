//===- GpuRun.h - coll-run's --ranks-as gpu ---------------------*- C++ -*-===//
//
// Runs every rank of a plan on one GPU (DeviceWorld) for coll-run: host
// buffers in, host buffers out, then timed launches. Built when the CUDA
// kernels are.
//
//===----------------------------------------------------------------------===//
#ifndef COLL_TOOLS_COLLRUN_GPURUN_H
#define COLL_TOOLS_COLLRUN_GPURUN_H

#include "coll/Runtime/DataType.h"
#include "coll/Runtime/Executor.h"
#include "coll/Runtime/Plan.h"
#include "coll/Runtime/PreparedCall.h"

#include <cstdint>
#include <string>
#include <vector>

namespace coll {

/// A rank's buffers on the host: \p base spans \p bytes and holds both the
/// send and the receive buffer at the given offsets (equal or overlapping
/// in place).
struct GpuRankBuffers {
  char *base = nullptr;
  uint64_t bytes = 0;
  uint64_t sendOffset = 0, recvOffset = 0;
};

/// Copies every rank's \p base to the device, runs \p plan once (with a
/// device-side timeout of \p timeoutSeconds), copies the bases back, then
/// times \p iters back-to-back launches; *timeUs receives the time per
/// launch. \p sliceBytes 0: the default. \p timeline, when not null,
/// receives the steps of the first run (the device's step trace). Returns
/// "" or the error.
std::string runOnGpu(const ValidatedPlan &plan, const std::vector<GpuRankBuffers> &ranks,
                     uint64_t count, DataType type, RedOp op, uint64_t sliceBytes,
                     double timeoutSeconds, uint64_t iters, double *timeUs,
                     Timeline *timeline = nullptr, const ProtocolChoice &protocol = {});

} // namespace coll

#endif // COLL_TOOLS_COLLRUN_GPURUN_H
