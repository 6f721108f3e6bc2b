//===- NetworkLoopback.h - The kernel's network path on one GPU -*- C++ -*-===//
/// \file
/// A network for the interpreter kernel (DevicePlatform's Net) whose peers
/// are other ranks on this GPU: a put copies the bytes from this rank's
/// window to the peer's and then adds one to the peer's signal, a signal
/// adds one, and signals are words in device memory. With every connection
/// routed through it, one GPU runs the kernel's network path (staging
/// slots, the extent of each put, signals as the FIFO counters, window
/// offsets from resolveConnections) on real plans, as it runs over GIN,
/// with GIN itself replaced.
//===----------------------------------------------------------------------===//
#ifndef COLL_TESTS_GPU_NETWORKLOOPBACK_H
#define COLL_TESTS_GPU_NETWORKLOOPBACK_H

#include "DeviceKernel.h"

#include <cstdint>

namespace coll::test {

/// What the loopback kernels read (device memory, one per rank).
struct LoopbackParams {
  char *const *windows; ///< Per rank: its connection memory (device memory).
  uint64_t *signals;    ///< signalsPerRank words per rank.
  uint32_t signalsPerRank = 0;
  uint32_t rank = 0;
};

/// The interpreter kernel of \p type and \p op over the loopback network;
/// null except for (f32, sum), (i64, max) and (bf16, sum).
kernels::KernelFn selectLoopbackKernel(DataType type, RedOp op);

} // namespace coll::test

#endif // COLL_TESTS_GPU_NETWORKLOOPBACK_H
