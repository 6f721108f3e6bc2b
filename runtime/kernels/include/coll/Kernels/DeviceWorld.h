//===- DeviceWorld.h - Every rank of a plan on one GPU ----------*- C++ -*-===//
/// \file
/// DeviceWorld runs all ranks of a plan on one GPU with the CUDA interpreter
/// kernel (docs/gpu.md): every rank's buffers, scratch and connections live
/// in that GPU's memory, and one launch makes every threadblock of every
/// rank a CTA, all resident at once, so the real kernel with its real memory
/// ordering between CTAs runs without a multi-GPU machine.
///
/// The kernel is the shared interpreter core (coll/Runtime/Interpreter.h)
/// with a device platform: one CTA per threadblock, its instructions in
/// shared memory, connections as FIFOs of the plan's depth with
/// release/acquire counters, cross-threadblock dependencies as progress
/// counters, and a device-side time limit on every wait. A run that times
/// out stops every CTA and wait() names the rank, threadblock, step and what
/// it waited for.
///
/// Buffers are device pointers; each rank's call is prepared as every
/// executor's is (prepareCall(), coll/Runtime/PreparedCall.h): counts,
/// in-place rules and Avg follow LocalWorld (coll/Runtime/Executor.h), and
/// buffers must be aligned to their elements.
//===----------------------------------------------------------------------===//
#ifndef COLL_KERNELS_DEVICEWORLD_H
#define COLL_KERNELS_DEVICEWORLD_H

#include "coll/Runtime/DataType.h"
#include "coll/Runtime/Executor.h"
#include "coll/Runtime/Plan.h"
#include "coll/Runtime/PreparedCall.h"
#include "coll/Runtime/Status.h"

#include <cstdint>
#include <cuda_runtime_api.h>
#include <memory>
#include <vector>

namespace coll {

/// Options of DeviceWorld.
struct DeviceOptions {
  /// Bytes of each chunk processed per pass of the program (a slice); a
  /// message of k chunks carries k slices. Rounded down to whole elements.
  uint64_t sliceBytes = 256 << 10;
  /// Threads per CTA (a multiple of 32, at most 512).
  uint32_t threadsPerBlock = 512;
  /// A wait that does not succeed for this long stops the run with an
  /// error (the device's global timer; no host involvement).
  double timeoutSeconds = 10;
  /// The CUDA device; -1: the current one.
  int device = -1;
  /// Launch as a cooperative grid, which CUDA guarantees to be resident at
  /// once (or fails to launch); otherwise a plain launch, resident at once
  /// when the device runs nothing else (create() checks that the grid fits;
  /// a CTA that never got a place shows as a device-side timeout).
  bool cooperative = true;
  /// Record a trace of every launch's steps, up to this many per CTA (0:
  /// none): thread 0 of each CTA reads the device's global timer around
  /// each step's data movement. DeviceWorld::trace() reads it back.
  uint32_t traceSteps = 0;
  /// The most device memory a launch may take besides the user's buffers
  /// (FIFO slots, scratch, private copies of inputs, over every rank), as
  /// ExecOptions::memoryLimitBytes: 0 (the default) is
  /// defaultMemoryLimit() of the launch's buffer bytes, noMemoryLimit
  /// removes the cap. A launch that would need more fails before it
  /// allocates anything, naming the plan field that asks for the memory.
  uint64_t memoryLimitBytes = 0;
  /// The protocol of each launch's connections: the plan's unless this says
  /// otherwise (for every launch, or by its size; ExecOptions::protocol).
  ProtocolChoice protocol;
  /// Direct reads: a send whose data stays as it is until the launch ends
  /// (DirectSends.h: a send from Input or Output that no later step of its
  /// rank writes, or a receive that sends on what it stores) leaves the
  /// data where it lies, and the receiver reads it there: one copy where
  /// the slots take two. Simple connections only (LL and LL128 always go
  /// through the slots). Off: every message through the slots.
  bool directReads = true;
};

/// The step trace of a launch (DeviceOptions::traceSteps). Times are
/// microseconds since the first CTA began, from the device's global timer.
struct DeviceTrace {
  /// Every recorded step (its data movement and publication, not its
  /// waits), by rank and threadblock, each threadblock's in the order they
  /// ran.
  Timeline timeline;
  /// Per CTA, threadblocks rank by rank: when it began and when it ended.
  std::vector<double> ctaBeginUs, ctaEndUs;
  /// Steps beyond DeviceOptions::traceSteps of their CTA: not recorded.
  uint64_t unrecorded = 0;
};

struct DeviceWorldState;

/// Every rank of one plan on one GPU. Not thread-safe; one DeviceWorld
/// serves one stream at a time.
class DeviceWorld {
public:
  /// Uploads \p plan, which must hold every rank, and checks that its
  /// threadblocks fit on the device at once. The world keeps \p plan
  /// (shared; a borrowed plan must outlive the world).
  static Result<std::unique_ptr<DeviceWorld>> create(const ValidatedPlan &plan,
                                                     const DeviceOptions &options = {});
  /// Validates a copy of \p plan, then create() of that.
  static Result<std::unique_ptr<DeviceWorld>> create(const Plan &plan,
                                                     const DeviceOptions &options = {});
  ~DeviceWorld();
  DeviceWorld(const DeviceWorld &) = delete;
  DeviceWorld &operator=(const DeviceWorld &) = delete;

  /// Enqueues one run on \p stream: sendbufs[r] and recvbufs[r] are rank
  /// r's device buffers, sized by planBufferElements(). Errors found
  /// on the host are returned here (prepareCall()'s, naming the rank); errors on the device (a wait
  /// that timed out) by wait().
  Status launch(const std::vector<const void *> &sendbufs, const std::vector<void *> &recvbufs,
                uint64_t count, DataType type, RedOp op, cudaStream_t stream = nullptr);
  /// Waits for \p stream and reports the first failure of the runs launched
  /// since the last wait(); after a failure the world is reset and usable.
  Status wait(cudaStream_t stream = nullptr);
  /// The step trace of the last launch that ran, after wait(); an error
  /// when DeviceOptions::traceSteps is 0 or nothing has run.
  Status trace(DeviceTrace &out) const;
  /// launch() then wait().
  Status run(const std::vector<const void *> &sendbufs, const std::vector<void *> &recvbufs,
             uint64_t count, DataType type, RedOp op, cudaStream_t stream = nullptr);

  /// CTAs of one launch: the plan's threadblocks over all ranks.
  uint32_t numBlocks() const;
  /// The messages read where the sender's data lay (DeviceOptions::
  /// directReads) by the launches since create(), all finished (wait()
  /// first). 0 on a device error.
  uint64_t directMessages() const;
  /// CTAs of this kernel that the device holds at once.
  uint32_t maxResidentBlocks() const;

private:
  explicit DeviceWorld(std::unique_ptr<DeviceWorldState> state);
  std::unique_ptr<DeviceWorldState> s;
};

} // namespace coll

#endif // COLL_KERNELS_DEVICEWORLD_H
