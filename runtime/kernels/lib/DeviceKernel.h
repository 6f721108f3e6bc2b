//===- DeviceKernel.h - The CUDA interpreter kernel ------------*- CUDA -*-===//
//
// Interpreter<DevicePlatform<D, Op>>: the shared interpreter core
// (coll/Runtime/Interpreter.h) on a GPU. One CTA runs one threadblock of
// the plan. Every thread of the CTA runs the interpreter's control flow
// (the same steps, the same counters); thread 0 alone polls and publishes
// the synchronisation words; every copy and reduction is spread over all
// threads with 16-byte accesses, several in flight per thread.
//
// Memory ordering (PTX memory model). A connection is a FIFO of `depth`
// slots in the receiver's memory with two counters: `tail` (messages the
// sender has published) and `head` (messages the receiver has consumed).
//  - Publishing (after a step's data movement): all threads' stores, then
//    __syncthreads() (the stores happen before thread 0's next operations,
//    at CTA scope), then thread 0 runs fence.acq_rel at the world's scope
//    and stores the counter relaxed: a release pattern, cumulative over the
//    CTA's stores that the barrier ordered before it.
//  - Waiting: thread 0 polls the counter with ld.acquire at the world's
//    scope, then __syncthreads_or(): the acquire makes the peer's stores
//    visible to thread 0, and the barrier extends that to every thread
//    before they read the slot.
// The same two patterns order cross-threadblock dependencies (per-CTA
// progress counters) and the release of a slot back to its sender (head).
// Scope: .gpu when every rank is on this GPU, .sys when peers are other
// GPUs reached over NVLink or PCIe.
//
// Peers on other nodes: a kernel may carry a network (the Net parameter of
// DevicePlatform, GIN in NcclSymmetric.cu). A FIFO with a netPeer then
// waits on the network's signals instead of counters in memory (the same
// poll, fence and timeout), and publishes a message with one put from a
// staging slot instead of stores into the peer's slot.
//
// Counters never go back: a run starts at `sliceBase` (the slices of the
// runs before it), so consecutive launches need no reset in between.
//
// Tracing (KernelParams::trace, off unless asked for): thread 0 reads the
// global timer after a step's waits and after its effects, and writes one
// TraceRecord per step and a TraceHeader per CTA; a launch without a trace
// pays one predictable branch per step.
//
//===----------------------------------------------------------------------===//
#ifndef COLL_KERNELS_LIB_DEVICEKERNEL_H
#define COLL_KERNELS_LIB_DEVICEKERNEL_H

#include "coll/Runtime/ChunkLayout.h"
#include "coll/Runtime/Elementwise.h"
#include "coll/Runtime/Interpreter.h"

#include <cstdint>
#include <cuda_runtime.h>

namespace coll::kernels {

/// One threadblock of the launch (one CTA).
struct TbDesc {
  uint32_t rank = 0;
  uint32_t tb = 0;        ///< Index within its rank.
  uint32_t rankFirst = 0; ///< Global index of the rank's threadblock 0.
  uint32_t numSteps = 0;
  uint64_t stepsBegin = 0;    ///< In KernelParams::steps.
  uint64_t depsBegin = 0;     ///< In KernelParams::deps.
  int32_t sendFifo = -1;      ///< In KernelParams::fifos: the peer's FIFO we fill.
  int32_t recvFifo = -1;      ///< Our own receive FIFO.
  uint32_t sendsPerSlice = 0; ///< Send steps in the program.
  uint32_t recvsPerSlice = 0; ///< Receive steps in the program.
  /// Steps [0, progressSteps) are waited for by other threadblocks of the
  /// rank: only they publish the progress counter (a fence and a store).
  uint32_t progressSteps = 0;
};

/// FifoDesc::netPeer of a FIFO whose both ends use loads and stores.
constexpr uint32_t kNoNetPeer = ~0u;

/// A connection's FIFO.
///
/// Over the network (GIN, NcclCommunicator's symmetric transport), the
/// sender fills staging slots in its own window (`slots`), and a put carries
/// each message into the receiver's slot; the counters are GIN signals, each
/// at the end that waits on it: `tailSignal` at the receiver (a put adds one
/// when its data has landed), `headSignal` at the sender (the receiver adds
/// one when it has consumed a slot).
struct FifoDesc {
  char *slots = nullptr;    ///< depth slots of slotBytes, in the receiver's memory.
  uint64_t *tail = nullptr; ///< Written by the sender, read by the receiver.
  uint64_t *head = nullptr; ///< Written by the receiver, read by the sender.
  uint64_t slotBytes = 0;
  uint32_t depth = 0;
  uint32_t netPeer = kNoNetPeer; ///< The peer's rank when it is reached over the network.
  uint32_t tailSignal = 0;
  uint32_t headSignal = 0;
  uint64_t localSlots = 0;  ///< Network: the window offset of `slots`.
  uint64_t remoteSlots = 0; ///< Network send: the window offset of the receiver's slots.
  uint64_t remoteSlotBytes = 0;
};

/// The first failure of a launch, written by the CTA that timed out (device
/// memory; the host reads it after the stream has finished).
struct DeviceError {
  unsigned int claimed;     ///< 0 until a CTA records its failure.
  unsigned int failedCtas;  ///< CTAs that timed out.
  unsigned int abortedCtas; ///< CTAs that stopped because another failed.
  uint32_t block;           ///< The global threadblock index.
  uint32_t result;          ///< WaitResult.
  uint32_t waitKind;        ///< WaitKind.
  uint32_t step, depTb, depStep;
  uint64_t slice;    ///< Slice of this launch.
  uint64_t observed; ///< The counter's value when the wait gave up.
  uint64_t expected; ///< The value it waited for (a bound; see DeviceWorld.cu).
  uint64_t sliceBase;
};

/// The head of one CTA's step trace (KernelParams::trace): global timer
/// readings in nanoseconds, written by thread 0 when the CTA ends.
struct TraceHeader {
  uint64_t startNs; ///< The CTA began.
  uint64_t endNs;   ///< The CTA ended (its last step, or a failed wait).
  uint64_t steps;   ///< Steps it ran; the first traceSteps have a record.
  uint64_t reserved;
};

/// One step of a CTA's trace: its data movement and publication, from
/// after its waits to after its progress counter.
struct TraceRecord {
  uint64_t slice;
  uint32_t step;
  uint32_t reserved;
  uint64_t beginNs;
  uint64_t endNs;
};

/// Bytes of one CTA's trace of up to \p traceSteps records.
COLL_HOST_DEVICE constexpr uint64_t traceBytesPerCta(uint32_t traceSteps) {
  return sizeof(TraceHeader) + uint64_t(traceSteps) * sizeof(TraceRecord);
}

/// Everything a launch needs, passed by value.
struct KernelParams {
  const TbDesc *tbs;
  const Instruction *steps;
  const Dependency *deps;
  const FifoDesc *fifos;
  char *const *rankBuffers; ///< 3 per rank, indexed by BufferKind.
  uint64_t *progress;       ///< Per CTA, at a stride of progressStride words.
  uint32_t progressStride;
  ChunkLayout layout;
  uint64_t sliceBase;
  uint64_t pieceStride; ///< Bytes between the pieces of a message slot.
  uint64_t timeoutNs;
  unsigned int *abortFlag; ///< Device memory; nonzero stops every wait.
  DeviceError *error;      ///< Device memory.
  uint32_t maxSharedSteps; ///< Programs up to this long run from shared memory.
  bool systemScope;        ///< Peers on other devices: .sys instead of .gpu.
  /// Device memory the kernel's network (the Net parameter of
  /// DevicePlatform) reads; null for kernels without one.
  const void *network;
  /// Null, or traceBytesPerCta(traceSteps) bytes per CTA of device memory
  /// that receive each CTA's TraceHeader and TraceRecords.
  char *trace;
  uint32_t traceSteps;
};

/// The kernel entry for one data type and operator (Avg runs as Sum).
using KernelFn = void (*)(KernelParams);
/// The kernel of \p type and \p op; null when invalid.
KernelFn selectKernel(DataType type, RedOp op);
/// Enqueues p[i] = p[i] / nranks for n elements of \p type.
cudaError_t launchDivide(DataType type, void *p, uint64_t n, uint32_t nranks, cudaStream_t stream);

#ifdef __CUDACC__

//===----------------------------------------------------------------------===//
// Synchronisation words
//===----------------------------------------------------------------------===//

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

//===----------------------------------------------------------------------===//
// Data movement: every thread of the CTA takes part
//===----------------------------------------------------------------------===//

/// Vectors in flight per thread and loop iteration.
constexpr int kUnroll = 4;

// The data movement functions are not inlined: one copy of each loop in the
// kernel keeps the per-step control path small, and a cold instruction cache
// (a fresh launch) costs a few lines instead of a copy per opcode handler.

/// dst[i] = src[i] for n words of type W, then dst1 too when not null.
template <class W>
__device__ __forceinline__ void copyWords(W *dst0, W *dst1, const W *src, uint64_t n) {
  const uint64_t t = threadIdx.x, nt = blockDim.x;
  uint64_t i = t;
  for (; i + (kUnroll - 1) * nt < n; i += kUnroll * nt) {
    W v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      v[u] = src[i + u * nt];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      dst0[i + u * nt] = v[u];
      if (dst1)
        dst1[i + u * nt] = v[u];
    }
  }
  for (; i < n; i += nt) {
    W v = src[i];
    dst0[i] = v;
    if (dst1)
      dst1[i] = v;
  }
}

/// Copies \p bytes from \p src to \p dst0 (and \p dst1 when not null) with
/// the widest accesses the pointers' common alignment allows: bytes up to a
/// 16-byte boundary, 16-byte words, then the tail.
static __device__ __noinline__ void copyBytes(char *dst0, char *dst1, const char *src,
                                              uint64_t bytes) {
  uintptr_t mis = uintptr_t(src) & 15;
  bool same = (uintptr_t(dst0) & 15) == mis && (!dst1 || (uintptr_t(dst1) & 15) == mis);
  uint64_t head = same ? ((16 - mis) & 15) : bytes;
  head = head < bytes ? head : bytes;
  const uint64_t t = threadIdx.x, nt = blockDim.x;
  if (!same && ((uintptr_t(src) | uintptr_t(dst0) | uintptr_t(dst1)) & 3) == 0) {
    // Differently aligned, but all to 4 bytes.
    uint64_t n = bytes / 4;
    copyWords(reinterpret_cast<uint32_t *>(dst0), reinterpret_cast<uint32_t *>(dst1),
              reinterpret_cast<const uint32_t *>(src), n);
    for (uint64_t i = n * 4 + t; i < bytes; i += nt) {
      dst0[i] = src[i];
      if (dst1)
        dst1[i] = src[i];
    }
    return;
  }
  for (uint64_t i = t; i < head; i += nt) {
    dst0[i] = src[i];
    if (dst1)
      dst1[i] = src[i];
  }
  uint64_t vecs = (bytes - head) / 16;
  copyWords(reinterpret_cast<uint4 *>(dst0 + head),
            dst1 ? reinterpret_cast<uint4 *>(dst1 + head) : nullptr,
            reinterpret_cast<const uint4 *>(src + head), vecs);
  for (uint64_t i = head + vecs * 16 + t; i < bytes; i += nt) {
    dst0[i] = src[i];
    if (dst1)
      dst1[i] = src[i];
  }
}

/// 16 bytes as elements of S.
template <class S> union Vec16 {
  uint4 raw;
  S e[16 / sizeof(S)];
};

/// dst0[i] (and dst1[i]) = in[i] (op) local[i] for n elements: elements up
/// to a 16-byte boundary, 16-byte vectors, then the tail; one element at a
/// time (several in flight) when the pointers are differently aligned.
template <DataType D, RedOp Op>
__device__ __noinline__ void reduceElements(char *dst0, char *dst1, const char *in,
                                            const char *local, uint64_t n) {
  using S = typename DataTypeTraits<D>::Storage;
  constexpr uint64_t es = sizeof(S), per = 16 / es;
  auto one = [](S a, S b) {
    return storeElement<D>(combine<Op>(loadElement<D>(a), loadElement<D>(b)));
  };
  S *d0 = reinterpret_cast<S *>(dst0);
  S *d1 = reinterpret_cast<S *>(dst1);
  const S *a = reinterpret_cast<const S *>(in);
  const S *b = reinterpret_cast<const S *>(local);
  const uint64_t t = threadIdx.x, nt = blockDim.x;
  uintptr_t mis = uintptr_t(in) & 15;
  bool same = (uintptr_t(local) & 15) == mis && (uintptr_t(dst0) & 15) == mis &&
              (!dst1 || (uintptr_t(dst1) & 15) == mis);
  uint64_t head = same ? ((16 - mis) & 15) / es : n;
  head = head < n ? head : n;
  uint64_t i = t;
  if (!same) {
    for (; i + (kUnroll - 1) * nt < n; i += kUnroll * nt) {
      S x[kUnroll], y[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        x[u] = a[i + u * nt];
        y[u] = b[i + u * nt];
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        S v = one(x[u], y[u]);
        d0[i + u * nt] = v;
        if (d1)
          d1[i + u * nt] = v;
      }
    }
  }
  for (; i < head; i += nt) {
    S v = one(a[i], b[i]);
    d0[i] = v;
    if (d1)
      d1[i] = v;
  }
  if (!same)
    return;
  const uint64_t vecs = (n - head) / per;
  const uint4 *va = reinterpret_cast<const uint4 *>(a + head);
  const uint4 *vb = reinterpret_cast<const uint4 *>(b + head);
  uint4 *vd0 = reinterpret_cast<uint4 *>(d0 + head);
  uint4 *vd1 = d1 ? reinterpret_cast<uint4 *>(d1 + head) : nullptr;
  uint64_t v = t;
  for (; v + (kUnroll - 1) * nt < vecs; v += kUnroll * nt) {
    Vec16<S> x[kUnroll], y[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      x[u].raw = va[v + u * nt];
      y[u].raw = vb[v + u * nt];
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (uint64_t e = 0; e < per; ++e)
        x[u].e[e] = one(x[u].e[e], y[u].e[e]);
      vd0[v + u * nt] = x[u].raw;
      if (vd1)
        vd1[v + u * nt] = x[u].raw;
    }
  }
  for (; v < vecs; v += nt) {
    Vec16<S> x, y;
    x.raw = va[v];
    y.raw = vb[v];
#pragma unroll
    for (uint64_t e = 0; e < per; ++e)
      x.e[e] = one(x.e[e], y.e[e]);
    vd0[v] = x.raw;
    if (vd1)
      vd1[v] = x.raw;
  }
  for (uint64_t k = head + vecs * per + t; k < n; k += nt) {
    S r = one(a[k], b[k]);
    d0[k] = r;
    if (d1)
      d1[k] = r;
  }
}

//===----------------------------------------------------------------------===//
// The platform
//===----------------------------------------------------------------------===//

/// The network of a kernel whose connections all use loads and stores.
struct NoNetwork {
  static constexpr bool kEnabled = false;
  __device__ explicit NoNetwork(const KernelParams &) {}
  __device__ uint64_t readSignal(uint32_t, bool) const { return 0; }
  __device__ void put(uint32_t, uint64_t, uint64_t, uint64_t, uint32_t) const {}
  __device__ void signal(uint32_t, uint32_t) const {}
};

/// The Platform of Interpreter.h for one CTA (see the file comment).
/// \p Net reaches the peers whose FIFOs have a
/// netPeer (see FifoDesc): readSignal(id, acquire) reads one of this rank's
/// signals; put(peer, remoteOffset, localOffset, bytes, signal) and
/// signal(peer, id), called by thread 0 alone, add one to a peer's signal
/// once the bytes (if any) have landed there.
template <DataType D, RedOp Op, class Net = NoNetwork> class DevicePlatform {
public:
  using S = typename DataTypeTraits<D>::Storage;

  __device__ DevicePlatform(const KernelParams &params, const TbDesc &desc, uint32_t block)
      : k(params), tb(desc), block(block), net(params) {
    for (int b = 0; b < 3; ++b)
      buffers[b] = k.rankBuffers[3 * tb.rank + b];
    if (tb.sendFifo >= 0)
      send = k.fifos[tb.sendFifo];
    if (tb.recvFifo >= 0)
      recv = k.fifos[tb.recvFifo];
    sent = k.sliceBase * tb.sendsPerSlice;
    received = k.sliceBase * tb.recvsPerSlice;
    // Slot indices follow the counters; one 64-bit division per CTA here,
    // none per step.
    sendSlot = tb.sendFifo >= 0 ? uint32_t(sent % send.depth) : 0;
    recvSlot = tb.recvFifo >= 0 ? uint32_t(received % recv.depth) : 0;
  }

  // Memory.

  __device__ MemPiece piece(BufferKind buf, uint32_t chunk, uint64_t slice) const {
    PieceRange r = buf == BufferKind::Scratch ? k.layout.scratchPiece(chunk, slice)
                                              : k.layout.userPiece(chunk, slice);
    MemPiece m;
    m.ptr = buffers[static_cast<unsigned>(buf)] + r.begin * sizeof(S);
    m.length = r.length;
    return m;
  }
  __device__ char *slotPiece(char *slot, uint32_t j) const { return slot + j * k.pieceStride; }

  // Waits. Thread 0 polls; the others meet it at the barrier.

  /// The waits poll the abort flag themselves; nothing to do between steps.
  __device__ WaitResult checkAbort() const { return WaitResult::Ready; }

  __device__ WaitResult waitDependency(uint32_t otherTb, uint32_t step, uint64_t slice) {
    const uint32_t other = tb.rankFirst + otherTb;
    const uint64_t target = (k.sliceBase + slice) * k.tbs[other].numSteps + step + 1;
    const uint64_t *counter = k.progress + uint64_t(other) * k.progressStride;
    return waitUntil(
        memoryWord(counter), [&](uint64_t v) { return v >= target; }, target);
  }

  __device__ WaitResult waitRecv(char *&slot) {
    const uint64_t want = received + 1;
    auto ready = [&](uint64_t v) { return v >= want; };
    WaitResult r = overNetwork(recv) ? waitUntil(signalWord(recv.tailSignal), ready, want)
                                     : waitUntil(memoryWord(recv.tail), ready, want);
    slot = recv.slots + recvSlot * recv.slotBytes;
    return r;
  }

  __device__ WaitResult waitSend(char *&slot) {
    // Slot `sent` is free once the receiver has consumed message sent - depth.
    const uint64_t need = sent + 1 > send.depth ? sent + 1 - send.depth : 0;
    auto ready = [&](uint64_t v) { return v >= need; };
    WaitResult r = overNetwork(send) ? waitUntil(signalWord(send.headSignal), ready, need)
                                     : waitUntil(memoryWord(send.head), ready, need);
    slot = send.slots + sendSlot * send.slotBytes;
    if constexpr (Net::kEnabled)
      staging = slot;
    return r;
  }

  __device__ void releaseRecv() {
    if (overNetwork(recv)) {
      // The step's reads of the slot are done (its barrier); the signal
      // releases them (GIN fences before it signals).
      if (threadIdx.x == 0)
        net.signal(recv.netPeer, recv.headSignal);
    } else {
      publish(recv.head, received + 1);
    }
    recvSlot = recvSlot + 1 == recv.depth ? 0 : recvSlot + 1;
    ++received;
  }
  __device__ void publishSend() {
    if (overNetwork(send)) {
      // The staging slot's stores are ordered before thread 0 by the data
      // movement's barrier; the put releases them at system scope before the
      // NIC reads them, and adds to the receiver's tail signal once they
      // have landed there.
      if (threadIdx.x == 0)
        net.put(send.netPeer, send.remoteSlots + sendSlot * send.remoteSlotBytes,
                send.localSlots + sendSlot * send.slotBytes, stagedBytes, send.tailSignal);
      stagedBytes = 0;
    } else {
      publish(send.tail, sent + 1);
    }
    sendSlot = sendSlot + 1 == send.depth ? 0 : sendSlot + 1;
    ++sent;
  }
  /// Publishes only what another threadblock waits for: the counter of a
  /// later step would do as well (waits test >=), and one that nobody waits
  /// for costs a fence.
  __device__ void markProgress(uint64_t slice, uint32_t step) {
    if (step < tb.progressSteps)
      publish(k.progress + uint64_t(block) * k.progressStride,
              (k.sliceBase + slice) * tb.numSteps + step + 1);
  }

  // Arithmetic; each ends with a barrier, so that the next step (and the
  // publication after this one) sees the whole result.

  __device__ void copy(char *dst, const char *src, uint64_t n) {
    if (n && dst != src)
      copyBytes(dst, nullptr, src, n * sizeof(S));
    noteStaged(dst, n);
    __syncthreads();
  }
  __device__ void copy2(char *dst0, char *dst1, const char *src, uint64_t n) {
    if (n)
      copyBytes(dst0, dst1, src, n * sizeof(S));
    noteStaged(dst0, n);
    noteStaged(dst1, n);
    __syncthreads();
  }
  __device__ void reduce(char *dst, const char *in, const char *local, uint64_t n) {
    if (n)
      reduceElements<D, Op>(dst, nullptr, in, local, n);
    noteStaged(dst, n);
    __syncthreads();
  }
  __device__ void reduce2(char *dst0, char *dst1, const char *in, const char *local, uint64_t n) {
    if (n)
      reduceElements<D, Op>(dst0, dst1, in, local, n);
    noteStaged(dst0, n);
    noteStaged(dst1, n);
    __syncthreads();
  }

  __device__ void stepBegin(uint64_t, uint32_t) {
    fenced = false;
    if (k.trace && threadIdx.x == 0)
      stepStartNs = globalTimerNs();
  }
  /// Tracing: thread 0 records the step once it has published its effects.
  __device__ void stepEnd(uint64_t slice, uint32_t step, const Instruction &) {
    if (!k.trace || threadIdx.x != 0)
      return;
    if (traced < k.traceSteps) {
      TraceRecord *r = reinterpret_cast<TraceRecord *>(traceOfCta() + sizeof(TraceHeader));
      r[traced] = TraceRecord{slice, step, 0, stepStartNs, globalTimerNs()};
    }
    ++traced;
  }
  /// Tracing: thread 0 writes the CTA's header, begun at \p startNs.
  __device__ void traceEnd(uint64_t startNs) {
    if (k.trace && threadIdx.x == 0)
      *reinterpret_cast<TraceHeader *>(traceOfCta()) =
          TraceHeader{startNs, globalTimerNs(), traced, 0};
  }

  /// Thread 0 records why run() stopped: the first CTA that timed out
  /// fills the error record and raises the abort flag.
  __device__ void recordStop(const ExecStatus &st) {
    if (threadIdx.x != 0)
      return;
    if (st.result != WaitResult::TimedOut) {
      atomicAdd(&k.error->abortedCtas, 1u);
      return;
    }
    atomicAdd(&k.error->failedCtas, 1u);
    atomicExch(k.abortFlag, 1u);
    if (atomicCAS(&k.error->claimed, 0u, 1u) != 0u)
      return;
    DeviceError &e = *k.error;
    e.block = block;
    e.result = uint32_t(st.result);
    e.waitKind = uint32_t(st.waitKind);
    e.step = st.step;
    e.depTb = st.depTb;
    e.depStep = st.depStep;
    e.slice = st.slice;
    e.observed = lastObserved;
    e.expected = lastExpected;
    e.sliceBase = k.sliceBase;
  }

private:
  __device__ char *traceOfCta() const { return k.trace + block * traceBytesPerCta(k.traceSteps); }

  /// Whether \p f's peer is reached over the network (never without one).
  __device__ bool overNetwork(const FifoDesc &f) const {
    if constexpr (Net::kEnabled)
      return f.netPeer != kNoNetPeer;
    return false;
  }

  /// Network sends: how far the step wrote into the staging slot, which is
  /// what the put carries.
  __device__ void noteStaged(const char *dst, uint64_t n) {
    if constexpr (Net::kEnabled) {
      if (dst && overNetwork(send) && dst >= staging && dst < staging + send.slotBytes) {
        uint64_t end = uint64_t(dst - staging) + n * sizeof(S);
        stagedBytes = end > stagedBytes ? end : stagedBytes;
      }
    }
  }

  /// A synchronisation word in memory: load(true) with acquire semantics,
  /// load(false) relaxed.
  __device__ auto memoryWord(const uint64_t *p) const {
    const bool sys = k.systemScope;
    return [p, sys](bool acquire) { return acquire ? loadAcquire(p, sys) : loadRelaxed(p, sys); };
  }
  /// One of this rank's network signals, read the same two ways.
  __device__ auto signalWord(uint32_t id) const {
    const Net *n = &net;
    return [n, id](bool acquire) { return n->readSignal(id, acquire); };
  }

  /// Thread 0 polls the word until ready(value) (then acquires), giving up
  /// when the abort flag rises or the time limit passes; the barrier hands
  /// the outcome, and the acquired view of memory, to every thread.
  template <class Load, class Ready>
  __device__ WaitResult waitUntil(Load load, Ready ready, uint64_t expected) {
    __shared__ uint32_t outcome;
    bool failed = false;
    if (threadIdx.x == 0) {
      uint32_t result = uint32_t(WaitResult::Ready);
      uint64_t v = load(true);
      if (!ready(v)) {
        // Poll relaxed (an acquire per poll would also discard the SM's L1
        // each time), then acquire once with a fence: the acquire pattern.
        const uint64_t start = globalTimerNs();
        for (uint32_t spins = 1;; ++spins) {
          v = load(false);
          if (ready(v)) {
            fenceAcqRel(k.systemScope);
            break;
          }
          if ((spins & 255) == 0) {
            if (*reinterpret_cast<volatile unsigned int *>(k.abortFlag)) {
              result = uint32_t(WaitResult::Aborted);
              break;
            }
            if (globalTimerNs() - start > k.timeoutNs) {
              result = uint32_t(WaitResult::TimedOut);
              break;
            }
            if (spins > 4096)
              __nanosleep(100);
          }
        }
      }
      lastObserved = v;
      lastExpected = expected;
      outcome = result;
      failed = result != uint32_t(WaitResult::Ready);
    }
    if (__syncthreads_or(failed))
      return WaitResult(outcome); // Written before the barrier; nobody writes it again.
    return WaitResult::Ready;
  }

  /// Thread 0 makes the step's stores (ordered before it by the data
  /// movement's barrier) visible, then writes \p value to \p counter.
  __device__ void publish(uint64_t *counter, uint64_t value) {
    if (threadIdx.x != 0)
      return;
    if (!fenced) {
      fenceAcqRel(k.systemScope);
      fenced = true;
    }
    storeRelaxed(counter, value, k.systemScope);
  }

  const KernelParams &k;
  const TbDesc &tb;
  uint32_t block;
  Net net;
  char *buffers[3];
  FifoDesc send, recv;
  char *staging = nullptr;  ///< Network sends: the slot being filled.
  uint64_t stagedBytes = 0; ///< Its bytes written so far.
  uint64_t sent = 0, received = 0;
  uint32_t sendSlot = 0, recvSlot = 0; ///< sent % depth, received % depth.
  uint64_t lastObserved = 0, lastExpected = 0;
  uint64_t stepStartNs = 0, traced = 0; ///< Tracing (thread 0).
  bool fenced = false;
};

/// The kernel: CTA blockIdx.x runs its threadblock's program over every
/// slice, from shared memory when it fits.
template <DataType D, RedOp Op, class Net = NoNetwork>
__global__ void interpretPlan(const __grid_constant__ KernelParams k) {
  extern __shared__ uint32_t sharedSteps[];
  __shared__ TbDesc tb;
  const uint64_t startNs = k.trace && threadIdx.x == 0 ? globalTimerNs() : 0;
  if (threadIdx.x == 0)
    tb = k.tbs[blockIdx.x];
  __syncthreads();
  const Instruction *steps = k.steps + tb.stepsBegin;
  if (tb.numSteps <= k.maxSharedSteps) {
    constexpr uint32_t words = sizeof(Instruction) / sizeof(uint32_t);
    static_assert(sizeof(Instruction) % sizeof(uint32_t) == 0, "instructions are whole words");
    const uint32_t *from = reinterpret_cast<const uint32_t *>(steps);
    for (uint32_t i = threadIdx.x; i < tb.numSteps * words; i += blockDim.x)
      sharedSteps[i] = from[i];
    __syncthreads();
    steps = reinterpret_cast<const Instruction *>(sharedSteps);
  }
  DevicePlatform<D, Op, Net> platform(k, tb, blockIdx.x);
  ProgramView program;
  program.steps = steps;
  program.numSteps = tb.numSteps;
  program.deps = k.deps + tb.depsBegin;
  Interpreter<DevicePlatform<D, Op, Net>> interp(platform, program, k.layout.numSlices);
  ExecStatus st = interp.run();
  if (st.result != WaitResult::Ready)
    platform.recordStop(st);
  platform.traceEnd(startNs);
}

/// interpretPlan over \p Net for \p type and \p op (Avg runs as Sum); null
/// when invalid. Instantiates the kernel of every data type and operator.
template <class Net> KernelFn selectInterpreter(DataType type, RedOp op) {
  switch (type) {
#define COLL_DATA_TYPE(Id, Name, Storage, Compute)                                                 \
  case DataType::Id:                                                                               \
    switch (op) {                                                                                  \
    case RedOp::Sum:                                                                               \
    case RedOp::Avg:                                                                               \
      return interpretPlan<DataType::Id, RedOp::Sum, Net>;                                         \
    case RedOp::Prod:                                                                              \
      return interpretPlan<DataType::Id, RedOp::Prod, Net>;                                        \
    case RedOp::Max:                                                                               \
      return interpretPlan<DataType::Id, RedOp::Max, Net>;                                         \
    case RedOp::Min:                                                                               \
      return interpretPlan<DataType::Id, RedOp::Min, Net>;                                         \
    }                                                                                              \
    return nullptr;
#include "coll/Runtime/DataTypes.def"
  }
  return nullptr;
}

#endif // __CUDACC__

} // namespace coll::kernels

#endif // COLL_KERNELS_LIB_DEVICEKERNEL_H
