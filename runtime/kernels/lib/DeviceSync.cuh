//===- DeviceSync.cuh - Synchronisation words ------------------*- CUDA -*-===//
/// \file
/// Loads, stores and fences on the kernel's synchronisation words, and the
/// global timer, each at the world's scope.
///
/// Memory ordering (PTX memory model). A connection is a FIFO of `depth`
/// slots in the receiver's memory with two counters: `tail` (messages the
/// sender has published) and `head` (messages the receiver has consumed).
///  - Publishing (after a step's data movement): all threads' stores, then
///    __syncthreads() (the stores happen before thread 0's next operations,
///    at CTA scope), then thread 0 runs fence.acq_rel at the world's scope
///    and stores the counter relaxed: a release pattern, cumulative over the
///    CTA's stores that the barrier ordered before it.
///  - Waiting: thread 0 polls the counter with ld.acquire at the world's
///    scope, then __syncthreads_or(): the acquire makes the peer's stores
///    visible to thread 0, and the barrier extends that to every thread
///    before they read the slot.
/// The same two patterns order cross-threadblock dependencies (per-CTA
/// progress counters) and the release of a slot back to its sender (head).
/// Scope: .gpu when every rank is on this GPU, .sys when peers are other
/// GPUs reached over NVLink or PCIe.
//===----------------------------------------------------------------------===//
#ifndef COLL_KERNELS_LIB_DEVICESYNC_CUH
#define COLL_KERNELS_LIB_DEVICESYNC_CUH

#include <cstdint>

namespace coll::kernels {

__device__ __forceinline__ uint64_t loadAcquire(const uint64_t *p, bool sys) {
  uint64_t v;
  if (sys)
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  else
    asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ uint64_t loadRelaxed(const uint64_t *p, bool sys) {
  uint64_t v;
  if (sys)
    asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  else
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void storeRelaxed(uint64_t *p, uint64_t v, bool sys) {
  if (sys)
    asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  else
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ void fenceAcqRel(bool sys) {
  if (sys)
    asm volatile("fence.acq_rel.sys;" ::: "memory");
  else
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
}

__device__ __forceinline__ uint64_t globalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

} // namespace coll::kernels

#endif // COLL_KERNELS_LIB_DEVICESYNC_CUH
