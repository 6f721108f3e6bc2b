//===- KernelAbi.h - Records shared by host and kernel ----------*- C++ -*-===//
/// \file
/// The records the host fills and the CUDA interpreter kernel reads (and
/// the ones the kernel writes back for the host): launch and threadblock
/// descriptors, connection FIFOs, the error record and the step trace.
/// Plain C++: host translation units compiled without nvcc include it, and
/// the static_asserts below hold both compilers to one layout.
///
/// Counters never go back: a run starts at `sliceBase` (the slices of the
/// runs before it), so consecutive launches need no reset in between. With
/// `launchState` the base lives in device memory and the kernel advances
/// it, so that graph replays go on counting.
///
/// A launch's connections run one protocol (KernelParams::protocol): the
/// counters above for Simple, flags in the lines for LL and LL128.
///
/// Tracing (KernelParams::trace, off unless asked for): thread 0 reads the
/// global timer after a step's waits and after its effects, and writes one
/// TraceRecord per step and a TraceHeader per CTA; a launch without a trace
/// pays one predictable branch per step.
//===----------------------------------------------------------------------===//
#ifndef COLL_KERNELS_LIB_KERNELABI_H
#define COLL_KERNELS_LIB_KERNELABI_H

#include "coll/Runtime/ChunkLayout.h"
#include "coll/Runtime/HostDevice.h"
#include "coll/Runtime/Plan.h"
#include "coll/Runtime/Protocol.h"

#include <cstddef>
#include <cstdint>

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

/// The most threads a CTA of the interpreter kernel may have: the kernel is
/// compiled for it (__launch_bounds__), which holds every variant, those
/// with a network too, to at most 128 registers per thread; without the
/// bound the network variants took more, and no CTA of 512 threads fit on
/// an SM.
constexpr uint32_t kMaxThreadsPerBlock = 512;

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
  /// Direct messages (DirectSends.h): per slot, in the receiver's memory,
  /// nonzero while the slot holds a direct message (each piece the address
  /// of the sender's data, which the receiver reads where it lies) rather
  /// than the data. The sender writes it before it publishes the message.
  /// Null: the FIFO carries no direct message (line protocols and the
  /// network never do).
  uint32_t *marks = nullptr;
  /// The rank on the other end (a receive FIFO's sender): whose memory a
  /// direct message's addresses are in (KernelParams::directViews).
  uint32_t peer = 0;
  uint32_t reserved = 0;
};

/// Where a receiver reads a sender's registered memory (a window):
/// [senderBase, senderBase + bytes) in rank `rank`'s address space is at
/// `view` in the receiver's.
struct DirectView {
  uint64_t senderBase = 0;
  uint64_t bytes = 0;
  char *view = nullptr;
  uint32_t rank = 0;
  uint32_t reserved = 0;
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
  uint64_t startNs;  ///< The CTA began.
  uint64_t endNs;    ///< The CTA ended (its last step, or a failed wait).
  uint64_t steps;    ///< Steps it ran; the first traceSteps have a record.
  uint64_t protocol; ///< The launch's ProtocolKind.
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
  char *const *rankBuffers; ///< numBufferKinds() per rank, indexed by BufferKind.
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
  /// ProtocolKind of the connections that use loads and stores (those over
  /// the network run Simple).
  uint32_t protocol;
  /// LL and LL128: two staging copies of stageBytes per CTA (send, then
  /// receive), where the steps write and read a message's data and the
  /// platform packs it into lines and unpacks it (DevicePlatform.cuh).
  char *stages;
  uint64_t stageBytes;
  /// Null, or device memory that holds the launch's slice base (word 0,
  /// instead of `sliceBase`) and a count of the CTAs that finished (word
  /// 1): the last CTA to finish advances the base by the launch's slices.
  /// A launch captured in a CUDA graph then replays with the base of each
  /// replay, not the one it was captured with.
  uint64_t *launchState;
  /// Direct sends (DirectSends.h): per instruction of `steps`, the bit
  /// (1 << BufferKind) of the buffer a send may leave its data in (the
  /// receiver reads it there), else 0. Null: no direct messages; every
  /// CTA of a launch, and every rank's launch, must agree on it.
  const uint8_t *directSteps;
  /// Counts the messages read in place: each CTA that received some adds
  /// its count at its end. Null: not counted.
  unsigned long long *directReceived;
  /// The buffers (bits 1 << BufferKind) this launch's sends may leave
  /// their data in: those the receivers can read.
  uint32_t directBuffers;
  /// Entries of directViews.
  uint32_t numDirectViews;
  /// Null: a direct message's addresses are the receiver's too (every rank
  /// in one address space). Else each is translated through the view of
  /// its sender that holds it.
  const DirectView *directViews;
};

/// The kernel entry for one data type and operator (Avg runs as Sum).
using KernelFn = void (*)(KernelParams);

//===----------------------------------------------------------------------===//
// Layout checks: the host compiler and nvcc must agree on every record
//===----------------------------------------------------------------------===//

static_assert(sizeof(void *) == 8, "the kernel ABI assumes 64-bit pointers");

static_assert(sizeof(TbDesc) == 56 && alignof(TbDesc) == 8, "TbDesc layout changed");
static_assert(offsetof(TbDesc, stepsBegin) == 16 && offsetof(TbDesc, sendFifo) == 32 &&
                  offsetof(TbDesc, progressSteps) == 48,
              "TbDesc layout changed");

static_assert(sizeof(FifoDesc) == 88 && alignof(FifoDesc) == 8, "FifoDesc layout changed");
static_assert(sizeof(DirectView) == 32 && offsetof(DirectView, view) == 16,
              "DirectView layout changed");
static_assert(offsetof(FifoDesc, slotBytes) == 24 && offsetof(FifoDesc, netPeer) == 36 &&
                  offsetof(FifoDesc, localSlots) == 48 &&
                  offsetof(FifoDesc, remoteSlotBytes) == 64 && offsetof(FifoDesc, marks) == 72,
              "FifoDesc layout changed");

static_assert(sizeof(DeviceError) == 72 && alignof(DeviceError) == 8, "DeviceError layout changed");
static_assert(offsetof(DeviceError, claimed) == 0 && offsetof(DeviceError, block) == 12 &&
                  offsetof(DeviceError, depStep) == 32 && offsetof(DeviceError, slice) == 40 &&
                  offsetof(DeviceError, sliceBase) == 64,
              "DeviceError layout changed");

static_assert(sizeof(TraceHeader) == 32, "TraceHeader layout changed");
static_assert(offsetof(TraceHeader, endNs) == 8 && offsetof(TraceHeader, steps) == 16,
              "TraceHeader layout changed");
static_assert(sizeof(TraceRecord) == 32, "TraceRecord layout changed");
static_assert(offsetof(TraceRecord, step) == 8 && offsetof(TraceRecord, beginNs) == 16 &&
                  offsetof(TraceRecord, endNs) == 24,
              "TraceRecord layout changed");
static_assert(traceBytesPerCta(2) == 96, "a CTA's trace is its header and its records");

static_assert(alignof(KernelParams) == 8, "KernelParams layout changed");
static_assert(offsetof(KernelParams, rankBuffers) == 32 && offsetof(KernelParams, progress) == 40 &&
                  offsetof(KernelParams, layout) == 56 && offsetof(KernelParams, sliceBase) == 112,
              "KernelParams layout changed");
static_assert(offsetof(KernelParams, protocol) == 180 && offsetof(KernelParams, stages) == 184,
              "KernelParams layout changed");
static_assert(offsetof(KernelParams, directSteps) == 208 &&
                  offsetof(KernelParams, directBuffers) == 224 &&
                  offsetof(KernelParams, directViews) == 232,
              "KernelParams layout changed");
static_assert(sizeof(KernelParams) == 240, "KernelParams layout changed");

} // namespace coll::kernels

#endif // COLL_KERNELS_LIB_KERNELABI_H
