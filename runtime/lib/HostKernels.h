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

} // namespace detail
} // namespace coll

#endif // COLL_RUNTIME_LIB_HOSTKERNELS_H
