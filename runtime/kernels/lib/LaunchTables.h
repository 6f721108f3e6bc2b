//===- LaunchTables.h - Host pieces shared by the CUDA executors -*- C++ -*-===//
/// \file
/// What DeviceWorld (every rank on one GPU) and NcclCommunicator (one rank
/// per GPU) share on the host: the kernel's tables for a set of ranks, the
/// slice shape of a launch, a prepared call (coll/Runtime/PreparedCall.h)
/// resolved to device pointers, the text of a device-side failure, and
/// small CUDA helpers. Everything but the helpers at the end is pure host
/// logic.
//===----------------------------------------------------------------------===//
#ifndef COLL_KERNELS_LIB_LAUNCHTABLES_H
#define COLL_KERNELS_LIB_LAUNCHTABLES_H

#include "DeviceKernel.h"
#include "Text.h"
#include "coll/Kernels/DeviceWorld.h"
#include "coll/Runtime/Plan.h"
#include "coll/Runtime/PreparedCall.h"
#include "coll/Runtime/Status.h"

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

namespace coll::kernels {

using coll::detail::cat;

inline uint64_t roundUp(uint64_t x, uint64_t a) {
  return (x + a - 1) / a * a;
}

/// 64-byte spacing of counters, so that neighbours do not share a line.
constexpr uint32_t kCounterStride = 8;
/// Programs of up to this many steps run from shared memory.
constexpr uint32_t kMaxSharedSteps = (40u << 10) / sizeof(Instruction);

/// One rank of a launch: its number in the plan and its section.
struct RankSection {
  uint32_t rank = 0;
  const RankPlan *plan = nullptr;
};

/// A connection whose receiving end is not among the launch's ranks: its
/// FIFO lives in another GPU's memory (NcclCommunicator fills it in).
struct RemoteSend {
  uint32_t fifo = 0;     ///< In LaunchTables::fifos.
  uint32_t block = 0;    ///< The sending CTA.
  uint32_t peer = 0;     ///< The receiving rank.
  uint32_t channel = 0;  ///< The connection's channel.
  uint32_t maxCount = 1; ///< Chunks of the largest message sent.
};

/// The kernel's tables for a set of ranks, in their order: threadblocks rank
/// by rank (TbDesc::rank is the index in the sections, which is where the
/// launch's buffer table holds that rank's buffers), their instructions and
/// dependencies concatenated, and one FIFO per receiving threadblock, which
/// the sender on the other end of the connection shares. FIFO pointers and
/// slot sizes are left for the executor.
struct LaunchTables {
  std::vector<TbDesc> tbs;
  std::vector<Instruction> steps;
  /// Per instruction of `steps`: where it may send direct, the bit of the
  /// buffer its data lies in (DirectSends.h), else 0.
  std::vector<uint8_t> directSteps;
  std::vector<Dependency> deps;
  std::vector<FifoDesc> fifos;        ///< Receive FIFOs, then RemoteSend ones.
  std::vector<uint32_t> fifoMaxCount; ///< Chunks of the largest message.
  std::vector<uint32_t> fifoBlock;    ///< The receiving CTA (receive FIFOs).
  uint32_t numRecvFifos = 0;          ///< fifos[0, numRecvFifos) are receive FIFOs.
  std::vector<RemoteSend> remoteSends;
  uint32_t sharedSteps = 0; ///< Steps held in shared memory per CTA.
};

/// Tables for \p sections of a plan with \p info (validated). A send to a
/// rank in \p sections uses that rank's receive FIFO; a send to any other
/// rank gets a FIFO of its own, listed in LaunchTables::remoteSends.
LaunchTables buildLaunchTables(const PlanInfo &info, const std::vector<RankSection> &sections);

/// How a launch of \p count elements of \p elementBytes moves through the
/// plan's \p chunks chunks: slices of at most \p sliceBytes, no larger than
/// the largest chunk, and the 16-byte aligned stride between the pieces of
/// one message in a FIFO slot.
struct SliceShape {
  ChunkLayout layout;
  uint64_t pieceStride = 0;
};
SliceShape sliceShape(uint64_t count, uint32_t chunks, uint64_t sliceBytes, uint64_t elementBytes);
/// The largest pieceStride of sliceShape() for \p sliceBytes, any count
/// and any data type.
uint64_t maxPieceStride(uint64_t sliceBytes);

/// The CallOptions of a launch of \p type with slices of \p sliceBytes:
/// device buffers must be aligned to their elements, and the slice is
/// sliceShape()'s, so that the prepared call's layout is the launch's.
CallOptions launchCallOptions(uint64_t sliceBytes, DataType type);

/// Where a launch keeps, in device memory of its own, what it needs
/// besides the user's buffers: FIFO slots (DeviceWorld, where every FIFO
/// is in the launch), each section's scratch and private input copies.
/// Offsets are 256-byte aligned.
struct LaunchMemory {
  uint64_t slotBytes = 0;                          ///< FIFO slots.
  uint64_t stageBytes = 0;                         ///< One staging copy (line protocols).
  uint64_t stagesBytes = 0;                        ///< Every CTA's two staging copies.
  uint64_t scratchBytes = 0;                       ///< Every section's scratch.
  uint64_t copyBytes = 0;                          ///< Private input copies.
  std::vector<uint64_t> scratchOffset, copyOffset; ///< Per section.
};

/// What a launch's memory is checked against.
struct MemoryCap {
  uint64_t limitBytes = 0;  ///< The option's value: 0 for the default, noMemoryLimit.
  uint64_t bufferBytes = 0; ///< The launch's buffers, which the default scales with.
  const char *option = "";  ///< The option's name, for the error.
  uint64_t heldBytes = 0;   ///< Memory held already (connection memory), counted too.
  std::string heldWhat;     ///< What that is.
};

/// Lays out the memory of a launch of \p tables (built for \p sections) in
/// \p layout with \p es-byte elements: the FIFO slots of \p pieceStride
/// bytes per chunk when \p slots, each section's scratch, and each
/// section's private copy of its input of \p copyBytes (PreparedCall::
/// copyBytes; 0 or missing: none). Every size is computed with overflow checks and
/// the total held against \p cap before anything is allocated: an error
/// names the plan field behind the size that overflows, or the largest
/// part of a total above the cap. With a line protocol, \p slots holds
/// its lines (slotBytesFor()), and every CTA gets two staging copies of the
/// largest message (stageBytesFor()).
Result<LaunchMemory> layoutLaunchMemory(const LaunchTables &tables,
                                        const std::vector<RankSection> &sections,
                                        const ChunkLayout &layout, uint64_t pieceStride, size_t es,
                                        bool slots, const std::vector<uint64_t> &copyBytes,
                                        const MemoryCap &cap,
                                        ProtocolKind protocol = ProtocolKind::Simple);

/// A device-to-device copy on the launch's stream.
struct StagingCopy {
  char *to = nullptr;
  const char *from = nullptr;
  uint64_t bytes = 0;
};

/// Enqueues \p copies on \p stream, all at once: no copy's destination
/// may overlap another copy's source or destination (one wave of a
/// launch's staging copies). Copies below 1 MiB, and those below 16 MiB
/// that the kernel copies in words, share a kernel launch, up to 64 at a
/// time; the others are cudaMemcpyAsync calls.
cudaError_t launchStagingCopies(const std::vector<StagingCopy> &copies, cudaStream_t stream);

/// Enqueues p[i] = p[i] / nranks for n elements of \p type in every buffer
/// of \p ptrs, with one kernel launch per 64 buffers.
cudaError_t launchDivide(DataType type, const std::vector<void *> &ptrs, uint64_t n,
                         uint32_t nranks, cudaStream_t stream);

/// A prepared call's buffers on the device: the plan's Input and Output,
/// and the staging copies before and after the run, resolved against the
/// call's send and receive buffers and \p copy, the launch's private copy
/// of the input (PreparedCall::copyBytes of it; may be null when there is
/// none).
struct DeviceBinding {
  char *input = nullptr;
  char *output = nullptr;
  std::vector<StagingCopy> before; ///< In order, before the kernel.
  std::vector<StagingCopy> after;  ///< After the kernel (the result, copied out).
};
DeviceBinding bindCall(const PreparedCall &call, char *copy);

/// Whether \p threads is a CTA size the interpreter kernel takes: a multiple
/// of 32 in [32, kMaxThreadsPerBlock].
Status checkThreadsPerBlock(uint32_t threads);

/// The message of device-side failure \p e of a launch of \p tables built
/// for \p sections (connections of \p depth slots, waits of
/// \p timeoutSeconds): the rank, threadblock, step, slice and what it
/// waited for.
Status describeDeviceFailure(const DeviceError &e, const LaunchTables &tables,
                             const std::vector<RankSection> &sections, uint32_t depth,
                             double timeoutSeconds);

/// Decodes the step trace that a launch of \p tables (for \p sections)
/// wrote to \p raw, traceBytesPerCta(\p traceSteps) bytes per CTA, into
/// \p out (DeviceWorld.h): each CTA's steps in the order they ran, CTAs by
/// rank and threadblock. A CTA whose header was never written is an error,
/// as is a record that names no step of its threadblock.
Status decodeTrace(const std::vector<char> &raw, uint32_t traceSteps, const LaunchTables &tables,
                   const std::vector<RankSection> &sections, DeviceTrace &out);

//===----------------------------------------------------------------------===//
// CUDA helpers
//===----------------------------------------------------------------------===//

inline std::string cudaText(cudaError_t err) {
  return cat(cudaGetErrorName(err), ": ", cudaGetErrorString(err));
}

/// Device memory that grows on demand and is freed with its owner.
struct DeviceBuffer {
  char *ptr = nullptr;
  uint64_t bytes = 0;
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  ~DeviceBuffer() { release(); }
  void release() {
    if (ptr)
      cudaFree(ptr);
    ptr = nullptr;
    bytes = 0;
  }
  /// At least \p n bytes; the contents are lost when it grows.
  cudaError_t reserve(uint64_t n) {
    if (n <= bytes && ptr)
      return cudaSuccess;
    release();
    cudaError_t err = cudaMalloc(&ptr, n ? n : 1);
    if (err == cudaSuccess)
      bytes = n;
    else
      ptr = nullptr;
    return err;
  }
  template <class T> T *as() const { return reinterpret_cast<T *>(ptr); }
};

/// The 64-bit counter at the start of \p buf (device memory of the
/// current device); 0 when there is none or it cannot be read.
inline uint64_t readDeviceCounter(const DeviceBuffer &buf) {
  unsigned long long n = 0;
  if (!buf.ptr || cudaMemcpy(&n, buf.ptr, sizeof n, cudaMemcpyDeviceToHost) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

template <class T> cudaError_t upload(DeviceBuffer &buf, const std::vector<T> &v) {
  if (cudaError_t err = buf.reserve(v.size() * sizeof(T)))
    return err;
  return v.empty() ? cudaSuccess
                   : cudaMemcpy(buf.ptr, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice);
}

/// A launch's direct messages (KernelParams::directSteps): none by default.
struct DirectLaunch {
  const uint8_t *steps = nullptr;         ///< Device copy of LaunchTables::directSteps.
  uint32_t buffers = 0;                   ///< Bits (1 << BufferKind) the receivers can read.
  unsigned long long *received = nullptr; ///< Device counter of messages read in place.
  const DirectView *views = nullptr;      ///< KernelParams::directViews.
  uint32_t numViews = 0;
};

/// Launches the interpreter kernel \p fn over \p w's tables: \p w is the
/// state of a DeviceWorld or an NcclCommunicator (tbTable, stepTable,
/// depTable, fifoTable, rankBufferTable, progress, abortFlag, error,
/// tables, sliceBase, numBlocks, options). \p systemScope: peers on other
/// GPUs (DeviceSync.cuh). \p network: what \p fn's network reads (device
/// memory), null for a kernel without one. \p trace: null, or the step
/// trace of every CTA, \p traceSteps records each (KernelParams::trace).
/// \p bufferTable: device memory that replaces \p w's rankBufferTable for
/// this launch (a launch captured into a CUDA graph keeps its own).
/// \p direct: the launch's direct messages.
template <class State>
cudaError_t launchInterpreter(const State &w, KernelFn fn, const ChunkLayout &layout,
                              uint64_t pieceStride, bool systemScope, cudaStream_t stream,
                              const void *network = nullptr, char *trace = nullptr,
                              uint32_t traceSteps = 0, ProtocolKind protocol = ProtocolKind::Simple,
                              char *stages = nullptr, uint64_t stageBytes = 0,
                              uint64_t *launchState = nullptr, char **bufferTable = nullptr,
                              const DirectLaunch &direct = DirectLaunch()) {
  KernelParams k;
  k.tbs = w.tbTable.template as<TbDesc>();
  k.steps = w.stepTable.template as<Instruction>();
  k.deps = w.depTable.template as<Dependency>();
  k.fifos = w.fifoTable.template as<FifoDesc>();
  k.rankBuffers = bufferTable ? bufferTable : w.rankBufferTable.template as<char *>();
  k.progress = w.progress.template as<uint64_t>();
  k.progressStride = kCounterStride;
  k.layout = layout;
  k.sliceBase = w.sliceBase;
  k.pieceStride = pieceStride;
  k.timeoutNs = uint64_t(w.options.timeoutSeconds * 1e9);
  k.abortFlag = w.abortFlag.template as<unsigned int>();
  k.error = w.error.template as<DeviceError>();
  k.maxSharedSteps = w.tables.sharedSteps;
  k.systemScope = systemScope;
  k.network = network;
  k.trace = trace;
  k.traceSteps = traceSteps;
  k.protocol = uint32_t(protocol);
  k.stages = stages;
  k.stageBytes = stageBytes;
  k.launchState = launchState;
  k.directSteps = direct.steps;
  k.directReceived = direct.received;
  k.directBuffers = direct.buffers;
  k.numDirectViews = direct.numViews;
  k.directViews = direct.views;
  void *args[] = {&k};
  const size_t shared = w.tables.sharedSteps * sizeof(Instruction);
  if (w.numBlocks == 0)
    return cudaSuccess;
  return w.options.cooperative
             ? cudaLaunchCooperativeKernel(reinterpret_cast<const void *>(fn), dim3(w.numBlocks),
                                           dim3(w.options.threadsPerBlock), args, shared, stream)
             : cudaLaunchKernel(reinterpret_cast<const void *>(fn), dim3(w.numBlocks),
                                dim3(w.options.threadsPerBlock), args, shared, stream);
}

} // namespace coll::kernels

#endif // COLL_KERNELS_LIB_LAUNCHTABLES_H
