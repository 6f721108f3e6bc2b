//===- HostKernels.h - Element kernels of the CPU executors -----*- C++ -*-===//
//
// Function pointers to the Elementwise.h loops for one data type and
// operator, chosen once per run so the per-piece work is a plain call.
// Private to the runtime library.
//
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_LIB_HOSTKERNELS_H
#define COLL_RUNTIME_LIB_HOSTKERNELS_H

#include "coll/Runtime/DataType.h"

#include <cstddef>
#include <cstdint>

namespace coll {
namespace detail {

/// dst[i] = in[i] (op) local[i] for n elements.
using ReduceFn = void (*)(void *dst, const void *in, const void *local, uint64_t n);
/// dst0[i] = dst1[i] = in[i] (op) local[i].
using Reduce2Fn = void (*)(void *dst0, void *dst1, const void *in, const void *local, uint64_t n);
/// p[i] = p[i] / nranks.
using DivideFn = void (*)(void *p, uint64_t n, uint32_t nranks);

/// The kernels of one data type and operator.
struct HostKernels {
  size_t elementSize = 0;
  ReduceFn reduce = nullptr;
  Reduce2Fn reduce2 = nullptr;
  DivideFn divide = nullptr;
};

/// The kernels of \p type and \p op; false when either is invalid.
bool selectHostKernels(DataType type, RedOp op, HostKernels &out);

/// memmove(\p dst, \p src, \p n), without the stall that a forward copy
/// meets when \p dst lies a little past \p src within a page (their
/// addresses 1 to 63 bytes apart modulo 4096): each load then seems to
/// depend on a store just made to the same low address bits, and the
/// string copy of large memcpys ran at a quarter of its speed on an AMD
/// EPYC (docs/performance.md, "Copies a few bytes apart"). Those copies
/// run backwards, where no load follows a store of its low bits.
void moveBytes(void *dst, const void *src, size_t n);

/// memmove(\p dst, \p src, \p n) with non-temporal stores where the
/// ranges do not overlap: \p dst is written to memory without being read
/// into the cache first, and without evicting what the cache holds. For a
/// destination that is not read again soon, in a call whose data does not
/// fit the cache: a copy out of cache into memory then ran at twice a
/// plain copy's speed on an AMD EPYC (docs/performance.md, "Streaming
/// stores"). Ends with a store fence, so a release store after it
/// publishes the data as it does a plain copy's.
void streamBytes(void *dst, const void *src, size_t n);

/// The bytes of the last-level cache of the CPU this process runs on (from
/// /sys/devices/system/cpu), or 0 when it is not known.
uint64_t lastLevelCacheBytes();

/// Whether a call whose ranks on this host touch \p footprint bytes of
/// their buffers (input and output, all ranks together) streams its stores
/// into them (streamBytes()), under the threshold \p from: 0 is the
/// last-level cache (32 MiB when unknown), noStreamingStores never.
bool streamsStores(uint64_t footprint, uint64_t from);

} // namespace detail
} // namespace coll

#endif // COLL_RUNTIME_LIB_HOSTKERNELS_H
