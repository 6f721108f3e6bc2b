//===- Executor.h - Running plans on CPU ranks ------------------*- C++ -*-===//
/// \file
/// LocalWorld runs every rank of a plan in one process, on the shared
/// interpreter core (Interpreter.h): either one thread per threadblock, or
/// all threadblocks cooperatively in the calling thread (deterministic, and
/// able to record a timeline for chrome://tracing or Perfetto).
///
/// Counts follow NCCL: `count` is the number of elements of one rank's unit
/// of C chunks, i.e. the per-rank buffer of allreduce, broadcast and reduce,
/// the input of allgather and gather, the output of reducescatter and
/// scatter, and one rank's block of alltoall. collectiveBufferElements()
/// gives every buffer's size.
///
/// Connections are FIFOs of the plan's connectionDepth slots in the
/// receiver's memory, in the call's protocol (Protocol.h): the plan's, or
/// the one ExecOptions::protocol picks for the call's size.
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_EXECUTOR_H
#define COLL_RUNTIME_EXECUTOR_H

#include "coll/Runtime/DataType.h"
#include "coll/Runtime/Plan.h"
#include "coll/Runtime/Status.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace coll {

/// How LocalWorld runs the ranks. Either way a worker runs its threadblocks
/// round-robin, each until it finishes or a wait would block, so a blocked
/// threadblock never holds up another.
enum class ExecMode : uint8_t {
  Threads, ///< Worker threads per rank (ExecOptions::workersPerRank).
  Single,  ///< One worker, the calling thread, for every threadblock of every
           ///< rank: deterministic, and a deadlock is reported at once.
};

/// One step of one threadblock as it ran (its data movement, not its waits).
struct TraceEvent {
  uint32_t rank = 0;
  uint32_t tb = 0;
  uint64_t slice = 0;
  uint32_t step = 0;
  Opcode op = Opcode::Nop;
  uint32_t count = 0; ///< Chunks the step moved.
  double beginUs = 0; ///< Microseconds since the run started.
  double endUs = 0;
};

/// The steps of a run, for a timeline view.
struct Timeline {
  /// Sorted by rank, threadblock and start time.
  std::vector<TraceEvent> events;
  /// The protocol the run's connections used.
  ProtocolKind protocol = ProtocolKind::Simple;

  /// Writes Chrome trace JSON: one process per rank, one track per
  /// threadblock, one complete event per step.
  void writeChromeTrace(std::ostream &os, const Plan &plan) const;
  /// Writes writeChromeTrace() to \p path.
  Status writeChromeTraceFile(const std::string &path, const Plan &plan) const;
};

/// Where ExecOptions::faultInjection is called.
enum class FaultSite : uint8_t {
  Bind,   ///< Before rank `rank`'s buffers are bound, in the thread that sets up the run.
  Worker, ///< In each worker of rank `rank`, before it runs its first threadblock.
};

/// Options of LocalWorld::run.
struct ExecOptions {
  ExecMode mode = ExecMode::Threads;
  /// Elements of each chunk processed per pass of the program (at least 1).
  /// A message of k chunks carries at most k slices.
  uint64_t sliceElements = 16384;
  /// Threads mode: worker threads per rank; 0 gives every threadblock its
  /// own thread.
  uint32_t workersPerRank = 1;
  /// Ranks as threads: a send whose source stays as it is until the call
  /// ends leaves the data where it lies, and its receiver reads it there
  /// (one pass over the data instead of two through a FIFO slot). Off: every
  /// message goes through the slots, as between processes.
  bool directSends = true;
  /// Threads mode: a worker none of whose threadblocks could move for this
  /// long fails with an error naming the rank, threadblock, step and what
  /// each waited for. An idle worker spins, then yields, then sleeps with
  /// backoff.
  double timeoutSeconds = 30;
  /// When set, receives the steps of the run (replacing its events).
  Timeline *timeline = nullptr;
  /// The protocol of the call's connections: the plan's unless this says
  /// otherwise (for every call, or by the call's size).
  ProtocolChoice protocol;
  /// The most memory the run may allocate besides the user's buffers: the
  /// scratch buffers, the FIFOs' slots and the private copies of inputs,
  /// over all ranks the run executes. 0 (the default) is
  /// defaultMemoryLimit() of the call's buffer bytes; noMemoryLimit removes
  /// the cap. A call that would need more fails before it allocates
  /// anything, naming the plan field that asks for the memory.
  uint64_t memoryLimitBytes = 0;
  /// Copies into the user's buffers write past the caches (non-temporal
  /// stores) in calls whose input and output bytes (in place: the larger
  /// one), summed over the ranks, reach this: 0 (the default) is the size of the last-level cache,
  /// noStreamingStores never. Copies into scratch and message slots, read
  /// again soon, never do.
  uint64_t streamingStoresFrom = 0;
  /// For tests: called at each FaultSite with the rank concerned. An
  /// exception it throws fails the run as any failure inside that rank's
  /// execution does: every rank gets an error naming it. Empty (the
  /// default): never called, and costs nothing.
  std::function<void(FaultSite site, uint32_t rank)> faultInjection;
};

/// ExecOptions::memoryLimitBytes: no cap.
constexpr uint64_t noMemoryLimit = ~uint64_t(0);

/// ExecOptions::streamingStoresFrom, ProcessGroupOptions::streamingStoresFrom:
/// never stream.
constexpr uint64_t noStreamingStores = ~uint64_t(0);

/// The default memory cap of a call whose buffers (every input and output
/// it is given) take \p bufferBytes: 8 times that, plus 256 MiB.
uint64_t defaultMemoryLimit(uint64_t bufferBytes);

/// Elements of one rank's input and output buffers.
struct BufferElements {
  uint64_t input = 0;
  uint64_t output = 0;
};

/// The buffer sizes of the built-in collective \p kind on \p nranks ranks
/// for the per-rank \p count (see the file comment; Collectives.def's InByN
/// and OutByN). Custom: count and count; planBufferElements() knows better.
BufferElements collectiveBufferElements(CollectiveKind kind, uint32_t nranks, uint64_t count);

/// A user-declared collective's unit: gcd(input chunks, output chunks) of
/// \p info (0 when either is 0). Its buffers hold their chunks / unit
/// units, and a call's count is a whole number of them.
uint32_t userCollectiveUnit(const PlanInfo &info);

/// The buffer sizes of a call of \p count on a plan with \p info: those of
/// collectiveBufferElements() for a built-in collective. A user-declared
/// collective's unit is its C = gcd(input chunks, output chunks) chunks,
/// and each buffer holds its chunks / C units of \p count elements: a
/// send/recv of one chunk moves `count` elements, a neighbour exchange of
/// `input[c]` into `output[2 * c]` has an output of 2 * count.
BufferElements planBufferElements(const PlanInfo &info, uint64_t count);

/// C, the plan's chunks per rank unit, from its collective and chunk counts;
/// an error when they do not fit the collective. For a user-declared
/// collective, gcd(input chunks, output chunks).
Result<uint32_t> planChunksPerUnit(const PlanInfo &info);

class ValidatedPlan;

namespace detail {
struct LocalRunCache;
} // namespace detail

/// Every rank of a plan, in this process. A LocalWorld keeps what its last
/// run built (FIFOs, progress counters, scratch, interpreters) and runs the
/// next call of the same plan, count, type, operator and options on it
/// again, so that a loop of calls allocates nothing; calls that differ
/// build anew. Calls from several threads at once are safe (one of them
/// reuses, the others build their own).
class LocalWorld {
public:
  LocalWorld();
  ~LocalWorld();
  LocalWorld(LocalWorld &&) noexcept;
  LocalWorld &operator=(LocalWorld &&) noexcept;

  /// Runs \p plan once. sendbufs[r] and recvbufs[r] are rank r's buffers,
  /// sized by collectiveBufferElements(); all must be non-null when count >
  /// 0. A rank runs in place when its buffers are the collective's in-place
  /// alias (allreduce, broadcast, reduce: sendbuf == recvbuf; allgather:
  /// sendbuf == recvbuf + r*count; reducescatter: recvbuf == sendbuf +
  /// r*count), and ranks may differ in that choice:
  ///  - an in-place plan run in place uses the one buffer; reducescatter
  ///    may overwrite the rest of its input;
  ///  - an in-place plan run out of place first copies the input to its
  ///    alias position in the output (reducescatter: runs in a copy of the
  ///    input and copies block r out), so sendbuf is never written;
  ///  - an out-of-place plan whose input overlaps its output (e.g. called in
  ///    place), or which writes its input, runs on a copy of the input.
  /// With RedOp::Avg the plan runs as Sum and each rank divides its
  /// complete result by nranks at the end (reduce: the root only).
  Status run(const ValidatedPlan &plan, const std::vector<const void *> &sendbufs,
             const std::vector<void *> &recvbufs, uint64_t count, DataType type, RedOp op,
             const ExecOptions &options = ExecOptions()) const;
  /// run() of \p plan, validated for this call (ValidatedPlan::borrow()).
  Status run(const Plan &plan, const std::vector<const void *> &sendbufs,
             const std::vector<void *> &recvbufs, uint64_t count, DataType type, RedOp op,
             const ExecOptions &options = ExecOptions()) const;

private:
  std::unique_ptr<detail::LocalRunCache> cache;
};

} // namespace coll

#endif // COLL_RUNTIME_EXECUTOR_H
