//===- DevicePlatform.cuh - The interpreter on a GPU -----------*- CUDA -*-===//
/// \file
/// Interpreter<DevicePlatform<D, Op>>: the shared interpreter core
/// (coll/Runtime/Interpreter.h) on a GPU. One CTA runs one threadblock of
/// the plan. Every thread of the CTA runs the interpreter's control flow
/// (the same steps, the same counters); thread 0 alone polls and publishes
/// the synchronisation words; every copy and reduction is spread over all
/// threads with 16-byte accesses, several in flight per thread.
///
/// LL and LL128 (KernelParams::protocol, Protocol.h): the steps write and
/// read a message in the CTA's staging copies; publishSend() packs the send
/// copy into the peer's slot as lines whose flags carry the publication
/// (no fence, no tail counter), and waitRecv() has every thread poll its
/// lines of the message until their flags are the message's and unpack
/// them. LL: 16-byte lines of two (4 bytes of data, 4-byte flag) words,
/// each word one store. LL128: 128-byte lines, eight lanes of a warp each
/// storing 16 bytes in one coalesced store, lane 7's last 8 bytes the flag
/// (NCCL's LL128 assumption: a warp's aligned 128-byte store is seen whole).
///
/// Direct messages (KernelParams::directSteps, DirectSends.h): a send whose
/// data stays as it is until the call ends writes its address into the
/// slot and marks the slot (FifoDesc::marks); the receiver reads the data
/// where it lies, one copy where the slots take two. The sender's CTA ends
/// only once its receiver has read them all (drain()).
///
/// Peers on other nodes: a kernel may carry a network (the Net parameter of
/// DevicePlatform, GIN in NcclSymmetric.cu). A FIFO with a netPeer then
/// waits on the network's signals instead of counters in memory (the same
/// poll, fence and timeout), and publishes a message with one put from a
/// staging slot instead of stores into the peer's slot.
//===----------------------------------------------------------------------===//
#ifndef COLL_KERNELS_LIB_DEVICEPLATFORM_CUH
#define COLL_KERNELS_LIB_DEVICEPLATFORM_CUH

#include "DeviceCopy.cuh"
#include "DeviceSync.cuh"
#include "KernelAbi.h"
#include "coll/Runtime/Elementwise.h"
#include "coll/Runtime/Interpreter.h"

#include <cstdint>

namespace coll::kernels {

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
      : k(params), tb(desc), block(block), net(params),
        base(params.launchState ? *reinterpret_cast<volatile uint64_t *>(params.launchState)
                                : params.sliceBase) {
    for (unsigned b = 0; b < NumBuffers; ++b)
      buffers[b] = k.rankBuffers[NumBuffers * tb.rank + b];
    if (tb.sendFifo >= 0)
      send = k.fifos[tb.sendFifo];
    if (tb.recvFifo >= 0)
      recv = k.fifos[tb.recvFifo];
    sent = base * tb.sendsPerSlice;
    received = base * tb.recvsPerSlice;
    lineProtocol = ProtocolKind(k.protocol);
    if (lineProtocol != ProtocolKind::Simple && k.stages) {
      sendStage = k.stages + uint64_t(2 * block) * k.stageBytes;
      recvStage = sendStage + k.stageBytes;
    }
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
  /// A direct message's piece holds the address of the sender's data.
  __device__ const char *recvPiece(char *slot, uint32_t j, uint64_t) const {
    if (!recvDirect)
      return slotPiece(slot, j);
    const char *at = *reinterpret_cast<const char *const volatile *>(slotPiece(slot, j));
    // In another address space: through the view of the sender's window
    // that holds it (the sender sends direct only from its windows).
    for (uint32_t v = 0; v < k.numDirectViews; ++v) {
      const DirectView &w = k.directViews[v];
      const uint64_t off = uint64_t(at) - w.senderBase;
      if (w.rank == recv.peer && uint64_t(at) >= w.senderBase && off < w.bytes)
        return w.view + off;
    }
    return at;
  }
  __device__ void recvCopy(char *dst, char *slot, uint32_t j, uint64_t n) {
    copy(dst, recvPiece(slot, j, n), n);
  }
  /// A direct send writes the address of its data, thread 0 alone (the
  /// publication that follows is thread 0's too).
  __device__ void sendPiece(char *slot, uint32_t j, const char *src, uint64_t n) {
    if (!sendDirect) {
      copy(slotPiece(slot, j), src, n);
      return;
    }
    if (threadIdx.x == 0)
      *reinterpret_cast<const char *volatile *>(slotPiece(slot, j)) = src;
  }
  __device__ bool sendsResult() const { return sendDirect; }

  // Waits. Thread 0 polls; the others meet it at the barrier.

  /// The waits poll the abort flag themselves; nothing to do between steps.
  __device__ WaitResult checkAbort() const { return WaitResult::Ready; }

  __device__ WaitResult waitDependency(uint32_t otherTb, uint32_t step, uint64_t slice) {
    const uint32_t other = tb.rankFirst + otherTb;
    const uint64_t target = (base + slice) * k.tbs[other].numSteps + step + 1;
    const uint64_t *counter = k.progress + uint64_t(other) * k.progressStride;
    return waitUntil(
        memoryWord(counter), [&](uint64_t v) { return v >= target; }, target);
  }

  __device__ WaitResult waitRecv(char *&slot, uint32_t count, uint64_t slice) {
    recvDirect = false;
    if (linesOn(recv)) {
      slot = recvStage;
      return unpack(recv.slots + recvSlot * recv.slotBytes, messageBytes(count, slice));
    }
    const uint64_t want = received + 1;
    auto ready = [&](uint64_t v) { return v >= want; };
    WaitResult r = overNetwork(recv) ? waitUntil(signalWord(recv.tailSignal), ready, want)
                                     : waitUntil(memoryWord(recv.tail), ready, want);
    slot = recv.slots + recvSlot * recv.slotBytes;
    // The mark was written before the tail the wait acquired.
    recvDirect = r == WaitResult::Ready && k.directSteps && recv.marks &&
                 reinterpret_cast<const volatile uint32_t *>(recv.marks)[recvSlot] != 0;
    directReceived += recvDirect;
    return r;
  }

  __device__ WaitResult waitSend(char *&slot, uint32_t count, uint64_t slice) {
    // Slot `sent` is free once the receiver has consumed message sent - depth.
    const uint64_t need = sent + 1 > send.depth ? sent + 1 - send.depth : 0;
    auto ready = [&](uint64_t v) { return v >= need; };
    WaitResult r = overNetwork(send) ? waitUntil(signalWord(send.headSignal), ready, need)
                                     : waitUntil(memoryWord(send.head), ready, need);
    slot = send.slots + sendSlot * send.slotBytes;
    if constexpr (Net::kEnabled)
      staging = slot;
    if (linesOn(send)) {
      slot = sendStage;
      sendBytes = messageBytes(count, slice);
    }
    return r;
  }

  __device__ void releaseRecv() {
    if (linesOn(recv)) {
      // The message's data was read into the staging copy (used by the
      // step, whose barrier is behind us): hand the slot back without a
      // fence, as NCCL's LL does.
      if (threadIdx.x == 0)
        storeRelaxed(recv.head, received + 1, k.systemScope);
    } else if (overNetwork(recv)) {
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
    if (linesOn(send)) {
      // The lines carry the publication: no fence, no tail counter.
      pack(send.slots + sendSlot * send.slotBytes, sendBytes);
    } else if (overNetwork(send)) {
      // The staging slot's stores are ordered before thread 0 by the data
      // movement's barrier; the put releases them at system scope before the
      // NIC reads them, and adds to the receiver's tail signal once they
      // have landed there.
      if (threadIdx.x == 0)
        net.put(send.netPeer, send.remoteSlots + sendSlot * send.remoteSlotBytes,
                send.localSlots + sendSlot * send.slotBytes, stagedBytes, send.tailSignal);
      stagedBytes = 0;
    } else {
      // The mark, then the tail that publishes it: both thread 0's, in
      // order through publish()'s fence. Written for every message where
      // the FIFO has marks, so that a receiver never reads an old one.
      if (send.marks && threadIdx.x == 0)
        reinterpret_cast<volatile uint32_t *>(send.marks)[sendSlot] = sendDirect ? 1u : 0u;
      publish(send.tail, sent + 1);
    }
    sendSlot = sendSlot + 1 == send.depth ? 0 : sendSlot + 1;
    ++sent;
    if (sendDirect)
      directUntil = sent;
  }
  /// Publishes only what another threadblock waits for: the counter of a
  /// later step would do as well (waits test >=), and one that nobody waits
  /// for costs a fence.
  __device__ void markProgress(uint64_t slice, uint32_t step) {
    if (step < tb.progressSteps)
      publish(k.progress + uint64_t(block) * k.progressStride,
              (base + slice) * tb.numSteps + step + 1);
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

  __device__ void stepBegin(uint64_t, uint32_t step) {
    fenced = false;
    // Direct: a send the host marked whose data lies in a buffer the
    // receiver can read, on a connection of loads and stores that runs
    // Simple (the counters publish it, and the mark with it).
    sendDirect = k.directSteps && tb.sendFifo >= 0 && send.marks && !linesOn(send) &&
                 !overNetwork(send) && (k.directSteps[tb.stepsBegin + step] & k.directBuffers) != 0;
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
  /// After the last step: waits until the receiver has read every message
  /// this CTA sent direct, whose data lies in this rank's buffers, which the
  /// next operation on the stream may change. Then adds the messages it
  /// read in place to KernelParams::directReceived.
  __device__ ExecStatus drain(const ExecStatus &st, uint32_t numSteps) {
    if (k.directReceived && directReceived && threadIdx.x == 0)
      atomicAdd(k.directReceived, (unsigned long long)directReceived);
    if (st.result != WaitResult::Ready || directUntil == 0)
      return st;
    const uint64_t want = directUntil;
    ExecStatus out = st;
    out.result = waitUntil(
        memoryWord(send.head), [&](uint64_t v) { return v >= want; }, want);
    if (out.result != WaitResult::Ready) {
      out.waitKind = WaitKind::DirectRead;
      out.step = numSteps;
    }
    return out;
  }

  /// The last CTA of the launch to get here advances the slice base in
  /// KernelParams::launchState by the launch's slices (every CTA has read
  /// it by then: they all started before the last one finished).
  __device__ void finishLaunch() {
    if (!k.launchState || threadIdx.x != 0)
      return;
    __threadfence();
    unsigned int *done = reinterpret_cast<unsigned int *>(k.launchState + 1);
    if (atomicAdd(done, 1u) + 1 == gridDim.x) {
      *reinterpret_cast<volatile uint64_t *>(k.launchState) = base + k.layout.numSlices;
      atomicExch(done, 0u);
      __threadfence();
    }
  }

  /// Tracing: thread 0 writes the CTA's header, begun at \p startNs.
  __device__ void traceEnd(uint64_t startNs) {
    if (k.trace && threadIdx.x == 0)
      *reinterpret_cast<TraceHeader *>(traceOfCta()) =
          TraceHeader{startNs, globalTimerNs(), traced, k.protocol};
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
    e.sliceBase = base;
  }

private:
  __device__ char *traceOfCta() const { return k.trace + block * traceBytesPerCta(k.traceSteps); }

  /// Whether \p f runs a line protocol (never over the network).
  __device__ bool linesOn(const FifoDesc &f) const {
    return lineProtocol != ProtocolKind::Simple && !overNetwork(f);
  }

  /// Protocol.h's messageBytes() for this launch.
  __device__ uint64_t messageBytes(uint32_t count, uint64_t slice) const {
    return coll::messageBytes(k.layout, count, slice, k.pieceStride, sizeof(S));
  }

  /// After poll \p spins of a wait begun at \p start: every 256 polls,
  /// checks the abort flag and the time limit (false, with \p result set,
  /// when the wait must end); past 4096 polls, sleeps 100 ns between them.
  __device__ bool keepPolling(uint32_t spins, uint64_t start, uint32_t &result) const {
    if ((spins & 255) != 0)
      return true;
    if (*reinterpret_cast<volatile unsigned int *>(k.abortFlag)) {
      result = uint32_t(WaitResult::Aborted);
      return false;
    }
    if (globalTimerNs() - start > k.timeoutNs) {
      result = uint32_t(WaitResult::TimedOut);
      return false;
    }
    if (spins > 4096)
      __nanosleep(100);
    return true;
  }

  /// Packs the \p bytes of the send staging copy into \p lines as message
  /// `sent`, every thread its share of the lines.
  __device__ void pack(char *lines, uint64_t bytes) {
    const uint64_t n = coll::messageLines(lineProtocol, bytes);
    if (lineProtocol == ProtocolKind::LL) {
      const uint32_t flag = llFlag(sent);
      for (uint64_t i = threadIdx.x; i < n; i += blockDim.x) {
        uint32_t d[2] = {0, 0};
        const uint64_t at = 8 * i, take = bytes - at < 8 ? bytes - at : 8;
        if (take == 8) {
          const uint2 v = *reinterpret_cast<const uint2 *>(sendStage + at);
          d[0] = v.x;
          d[1] = v.y;
        } else {
          for (uint64_t b = 0; b < take; ++b)
            reinterpret_cast<char *>(d)[b] = sendStage[at + b];
        }
        uint32_t *line = reinterpret_cast<uint32_t *>(lines + 16 * i);
        asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(line), "r"(d[0]),
                     "r"(flag), "r"(d[1]), "r"(flag)
                     : "memory");
      }
      return;
    }
    // LL128: lane j of each group of eight stores bytes [16j, 16j + 16) of
    // a line; lane 7 stores its 8 bytes of data and the flag.
    const uint64_t flag = sent + 1;
    const uint32_t lane = threadIdx.x & 7, group = threadIdx.x >> 3, groups = blockDim.x >> 3;
    for (uint64_t i = group; i < n; i += groups) {
      const uint64_t at = 120 * i + 16 * lane;
      const uint64_t want = lane == 7 ? 8 : 16;
      uint64_t d[2] = {0, 0};
      if (at < bytes) {
        const uint64_t take = bytes - at < want ? bytes - at : want;
        for (uint64_t b = 0; b < take; ++b)
          reinterpret_cast<char *>(d)[b] = sendStage[at + b];
      }
      if (lane == 7)
        d[1] = flag;
      uint64_t *line = reinterpret_cast<uint64_t *>(lines + 128 * i + 16 * lane);
      asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" ::"l"(line), "l"(d[0]), "l"(d[1])
                   : "memory");
    }
  }

  /// Waits until every line of message `received` (\p bytes of data) in
  /// \p lines has arrived, every thread polling its own, and unpacks them
  /// into the receive staging copy; the barrier hands the copy to every
  /// thread.
  __device__ WaitResult unpack(const char *lines, uint64_t bytes) {
    __shared__ uint32_t outcome;
    const uint64_t n = coll::messageLines(lineProtocol, bytes);
    uint32_t result = uint32_t(WaitResult::Ready);
    const uint64_t start = globalTimerNs();
    if (lineProtocol == ProtocolKind::LL) {
      const uint32_t flag = llFlag(received);
      for (uint64_t i = threadIdx.x; i < n && result == uint32_t(WaitResult::Ready);
           i += blockDim.x) {
        const uint32_t *line = reinterpret_cast<const uint32_t *>(lines + 16 * i);
        uint32_t d0, f0, d1, f1;
        for (uint32_t spins = 1;; ++spins) {
          asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                       : "=r"(d0), "=r"(f0), "=r"(d1), "=r"(f1)
                       : "l"(line)
                       : "memory");
          if (f0 == flag && f1 == flag)
            break;
          if (!keepPolling(spins, start, result)) {
            lastObserved = f0 != flag ? f0 : f1;
            lastExpected = flag;
            break;
          }
        }
        if (result != uint32_t(WaitResult::Ready))
          break;
        const uint64_t at = 8 * i, take = bytes - at < 8 ? bytes - at : 8;
        if (take == 8) {
          *reinterpret_cast<uint2 *>(recvStage + at) = make_uint2(d0, d1);
        } else {
          const uint32_t d[2] = {d0, d1};
          for (uint64_t b = 0; b < take; ++b)
            recvStage[at + b] = reinterpret_cast<const char *>(d)[b];
        }
      }
    } else {
      // LL128: lanes in groups of eight read a line; lane 7 holds the flag,
      // and the group reads again until lane 7 sees it. The groups of a
      // warp take their lines together (the shuffles need the whole warp).
      const uint64_t flag = received + 1;
      const uint32_t lane = threadIdx.x & 7, group = threadIdx.x >> 3, groups = blockDim.x >> 3;
      const uint64_t rounds = (n + groups - 1) / groups;
      for (uint64_t round = 0; round < rounds; ++round) {
        const uint64_t i = round * groups + group;
        const bool mine = i < n;
        const uint64_t *line = reinterpret_cast<const uint64_t *>(lines + 128 * i + 16 * lane);
        uint64_t d0 = 0, d1 = 0;
        bool failed = false;
        for (uint32_t spins = 1;; ++spins) {
          if (mine && !failed)
            asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];"
                         : "=l"(d0), "=l"(d1)
                         : "l"(line)
                         : "memory");
          const uint64_t groupFlag = __shfl_sync(0xffffffffu, d1, (threadIdx.x & 31) | 7);
          const bool here = !mine || failed || groupFlag == flag;
          if (__all_sync(0xffffffffu, here))
            break;
          if (!here && !keepPolling(spins, start, result)) {
            lastObserved = groupFlag;
            lastExpected = flag;
            failed = true;
          }
        }
        if (mine && !failed) {
          const uint64_t at = 120 * i + 16 * lane, want = lane == 7 ? 8 : 16;
          if (at < bytes) {
            const uint64_t take = bytes - at < want ? bytes - at : want;
            const uint64_t d[2] = {d0, d1};
            for (uint64_t b = 0; b < take; ++b)
              recvStage[at + b] = reinterpret_cast<const char *>(d)[b];
          }
        }
        if (__any_sync(0xffffffffu, failed))
          break;
      }
    }
    const bool failed = result != uint32_t(WaitResult::Ready);
    if (failed)
      outcome = result; // Any failing thread's: TimedOut or Aborted.
    if (__syncthreads_or(failed))
      return WaitResult(outcome);
    return WaitResult::Ready;
  }

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
          if (!keepPolling(spins, start, result))
            break;
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
  uint64_t base; ///< The launch's slice base (KernelParams::launchState, or sliceBase).
  /// A rank's buffer table: one per BufferKind.
  static constexpr unsigned NumBuffers = numBufferKinds();
  char *buffers[NumBuffers];
  FifoDesc send, recv;
  char *staging = nullptr;  ///< Network sends: the slot being filled.
  uint64_t stagedBytes = 0; ///< Its bytes written so far.
  uint64_t sent = 0, received = 0;
  uint32_t sendSlot = 0, recvSlot = 0; ///< sent % depth, received % depth.
  uint64_t lastObserved = 0, lastExpected = 0;
  uint64_t stepStartNs = 0, traced = 0; ///< Tracing (thread 0).
  bool fenced = false;
  ProtocolKind lineProtocol = ProtocolKind::Simple; ///< KernelParams::protocol.
  char *sendStage = nullptr, *recvStage = nullptr;
  uint64_t sendBytes = 0;      ///< Line protocols: the data bytes of the message being written.
  bool sendDirect = false;     ///< The current step sends direct.
  bool recvDirect = false;     ///< The message being read is direct.
  uint64_t directUntil = 0;    ///< Messages up to this count were sent direct, the last one last.
  uint32_t directReceived = 0; ///< Direct messages read.
};

} // namespace coll::kernels

#endif // COLL_KERNELS_LIB_DEVICEPLATFORM_CUH
