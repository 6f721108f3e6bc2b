//===- NetworkLoopback.cu - The kernel's network path on one GPU ----------===//
//
// Ordering, as GIN promises it: a put's bytes are visible to the peer
// before its signal (thread 0 copies, then fence.acq_rel.sys, then a
// relaxed atomic add: the release pattern); readSignal is the counter's
// load, so the waiting side's acquire is the kernel's own.
//
//===----------------------------------------------------------------------===//

#include "NetworkLoopback.h"

namespace coll::test {

namespace {

using namespace coll::kernels;

class LoopbackNetwork {
public:
  static constexpr bool kEnabled = true;

  __device__ explicit LoopbackNetwork(const KernelParams &k)
      : p(static_cast<const LoopbackParams *>(k.network)) {}

  __device__ uint64_t readSignal(uint32_t id, bool acquire) const {
    const uint64_t *w = word(p->rank, id);
    return acquire ? loadAcquire(w, true) : loadRelaxed(w, true);
  }
  __device__ void put(uint32_t peer, uint64_t remoteOffset, uint64_t localOffset, uint64_t bytes,
                      uint32_t id) const {
    const char *src = p->windows[p->rank] + localOffset;
    char *dst = p->windows[peer] + remoteOffset;
    uint64_t i = 0;
    if (((uintptr_t(src) | uintptr_t(dst)) & 15) == 0)
      for (; i + 16 <= bytes; i += 16)
        *reinterpret_cast<uint4 *>(dst + i) = *reinterpret_cast<const uint4 *>(src + i);
    for (; i < bytes; ++i)
      dst[i] = src[i];
    signal(peer, id);
  }
  __device__ void signal(uint32_t peer, uint32_t id) const {
    fenceAcqRel(true);
    atomicAdd(reinterpret_cast<unsigned long long *>(word(peer, id)), 1ull);
  }

private:
  __device__ uint64_t *word(uint32_t rank, uint32_t id) const {
    return p->signals + uint64_t(rank) * p->signalsPerRank + id;
  }
  const LoopbackParams *p;
};

} // namespace

KernelFn selectLoopbackKernel(DataType type, RedOp op) {
  if (type == DataType::Float32 && (op == RedOp::Sum || op == RedOp::Avg))
    return interpretPlan<DataType::Float32, RedOp::Sum, LoopbackNetwork>;
  if (type == DataType::Int64 && op == RedOp::Max)
    return interpretPlan<DataType::Int64, RedOp::Max, LoopbackNetwork>;
  if (type == DataType::BFloat16 && (op == RedOp::Sum || op == RedOp::Avg))
    return interpretPlan<DataType::BFloat16, RedOp::Sum, LoopbackNetwork>;
  return nullptr;
}

} // namespace coll::test
