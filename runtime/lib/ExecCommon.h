//===- ExecCommon.h - What the CPU executors share -------------*- C++ -*-===//
//
// The parts of a CPU run that do not depend on where the ranks live:
// a prepared call (PreparedCall.h) resolved to host memory, one
// threadblock's interpreter and its platform, the messages that say where a
// threadblock stopped and what it waited for, the worker loop that runs
// threadblocks round-robin, and the one way worker threads start. LocalWorld (ThreadExecutor.cpp)
// and ProcessGroup (ProcessGroup.cpp) are built from them. Private to the
// runtime library.
//
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_LIB_EXECCOMMON_H
#define COLL_RUNTIME_LIB_EXECCOMMON_H

#include "CpuPlatform.h"
#include "DirectSends.h"
#include "MemoryDemand.h"
#include "WorkerPool.h"
#include "coll/Runtime/Communicator.h"
#include "coll/Runtime/Executor.h"
#include "coll/Runtime/PreparedCall.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <memory>
#include <mutex>
#include <new>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace coll {
namespace detail {

/// One threadblock of the run.
struct TbRun {
  CpuPlatform platform;
  ProgramView program;
  std::unique_ptr<Interpreter<CpuPlatform>> interp;
  const Threadblock *tb = nullptr;
  uint32_t rank = 0;
  uint32_t index = 0;
  ExecStatus status; ///< What the last run() returned.
  /// The platform's staging copies of line-protocol messages.
  std::unique_ptr<char[]> sendStage, recvStage;
  /// Whether its part of the call is over: its program ran to the end, and
  /// every message it sent direct has been read.
  bool done() const { return interp->finished() && platform.drained(); }
};

/// Gives \p t's platform the staging copies its connections need: one
/// message's data, in whole lines, for each connection that runs a line
/// protocol (Protocol.h). Call once its FIFOs are set.
inline void armLineStages(TbRun &t) {
  CpuPlatform &p = t.platform;
  auto stage = [](const Fifo *f, std::unique_ptr<char[]> &mem) -> char * {
    if (!f || f->protocol == ProtocolKind::Simple) {
      mem.reset();
      return nullptr;
    }
    mem.reset(new char[stageBytesFor(f->protocol, f->dataBytes)]());
    return mem.get();
  };
  p.sendStage = stage(p.sendFifo, t.sendStage);
  p.recvStage = stage(p.recvFifo, t.recvStage);
}

/// A run of threadblock \p index of rank \p rank, with its platform's
/// world, rank state, layout and kernels set; the caller sets the FIFOs
/// and creates the interpreter.
inline std::unique_ptr<TbRun> makeTbRun(const Threadblock &tb, uint32_t rank, uint32_t index,
                                        WorldState &world, RankState &rankState,
                                        const ChunkLayout &layout, const HostKernels &kernels,
                                        uint64_t pieceBytes) {
  auto t = std::make_unique<TbRun>();
  t->tb = &tb;
  t->rank = rank;
  t->index = index;
  t->program.steps = tb.steps.data();
  t->program.numSteps = uint32_t(tb.steps.size());
  t->program.deps = tb.deps.data();
  CpuPlatform &p = t->platform;
  p.world = &world;
  p.rankState = &rankState;
  p.rank = rank;
  p.tb = index;
  p.layout = &layout;
  p.kernels = &kernels;
  p.pieceBytes = pieceBytes;
  return t;
}

/// Starts \p t over for a new call: \p tb (its threadblock in the call's
/// plan, the same content as the one it was made for), running \p steps
/// (tb's own, or a rewrite of them: OutOfPlace.h) for \p numSlices slices.
/// The connection counters (platform.sent, received) are the executor's
/// to keep or zero.
inline void restartTbRun(TbRun &t, const Threadblock &tb, const Instruction *steps,
                         uint64_t numSlices) {
  t.tb = &tb;
  t.program.steps = steps;
  t.program.numSteps = uint32_t(tb.steps.size());
  t.program.deps = tb.deps.data();
  t.interp->restart(t.program, numSlices);
  t.status = ExecStatus();
}

/// Memory for the private copies of a rank's input, kept from call to
/// call: a fresh allocation of megabytes per call costs a page fault per
/// page on every call (the allocator hands large blocks back to the
/// system), several times the copy itself (docs/performance.md).
struct KeptCopy {
  /// Frees what ::operator new gave.
  struct FreeCopy {
    void operator()(char *p) const { ::operator delete(p); }
  };
  std::unique_ptr<char, FreeCopy> memory;
  uint64_t bytes = 0;
};

/// Arms \p t's direct sends for a call: its threadblock's steps of
/// \p direct send direct, from the buffers whose bits (1 << BufferKind)
/// \p buffers holds; none where its send connection takes no direct
/// message, or \p direct has no steps for it.
inline void armDirectSends(TbRun &t, const DirectSteps &direct, uint8_t buffers) {
  CpuPlatform &p = t.platform;
  p.directUntil = 0;
  p.directReceived = 0;
  p.directBuffers = buffers;
  p.directSteps =
      p.sendFifo && p.sendFifo->direct && t.index < direct.size() && !direct[t.index].empty()
          ? direct[t.index].data()
          : nullptr;
}

/// A prepared call (PreparedCall.h) resolved to host memory: the private
/// copy of the input, and the buffers the plan sees as Input and Output.
struct HostBinding {
  KeptCopy own;         ///< The copy's memory, when no KeptCopy was given.
  char *copy = nullptr; ///< The private copy of the input, or null.
  char *input = nullptr;
  char *output = nullptr;
  /// The Input and Output in blocks of one unit (CallArgs::sendBlocks,
  /// recvBlocks), or null: then `input` and `output` hold them whole (else
  /// only their first block's address).
  void *const *inputBlocks = nullptr;
  void *const *outputBlocks = nullptr;
  std::vector<char> scratch;
};

/// The staging copies of \p c that go before the run (bound in \p b).
inline void stageHost(const PreparedCall &c, const HostBinding &b) {
  char *copy = b.copy;
  for (const StagingCopy &s : c.before)
    std::memcpy(resolve(s.to, c, copy), resolve(s.from, c, copy), size_t(s.bytes));
}

/// The bytes of the caller's buffers that call \p c touches: the larger
/// buffer when they are the in-place alias (one buffer, the other inside
/// it), both otherwise (streamsStores()' footprint, per rank).
inline uint64_t bufferFootprint(const PreparedCall &c) {
  if (c.inPlace)
    return c.inputBytes > c.outputBytes ? c.inputBytes : c.outputBytes;
  uint64_t both;
  return __builtin_add_overflow(c.inputBytes, c.outputBytes, &both) ? ~uint64_t(0) : both;
}

/// Binds \p c in host memory: allocates the private copy (in \p kept,
/// which keeps it for the next calls, when given; it grows to the largest
/// copy), makes the staging copies that go before the run (unless \p stage
/// is false: the caller makes them with stageHost() before the rank's run)
/// and resolves Input and Output. An error when the copy's memory is not
/// there.
inline Status bindHost(const PreparedCall &c, HostBinding &b, bool stage = true,
                       KeptCopy *kept = nullptr) {
  if (c.copyBytes) {
    KeptCopy &k = kept ? *kept : b.own;
    if (k.bytes < c.copyBytes) {
      // Plain ::operator new, uninitialised: it goes through every
      // replacement of it (a test's allocation limit), as a call's other
      // allocations do; new[] need not (AddressSanitizer has its own).
      k.memory.reset();
      k.bytes = 0;
      try {
        k.memory.reset(static_cast<char *>(::operator new(size_t(c.copyBytes))));
      } catch (const std::bad_alloc &) {
        return Status::error(cat("rank ", c.rank, ": cannot allocate ", c.copyBytes,
                                 " bytes for a copy of its input: out of memory"));
      }
      k.bytes = c.copyBytes;
    }
    b.copy = k.memory.get();
  }
  char *copy = b.copy;
  if (stage)
    stageHost(c, b);
  b.input = resolve(c.input, c, copy);
  b.output = resolve(c.output, c, copy);
  // A plan writes send blocks only where each is its output unit (in
  // place); prepareCall() copies them first otherwise. An Input in the
  // receive buffer is one unit, at `input`.
  b.inputBlocks =
      c.input.memory == CallMemory::Send ? const_cast<void *const *>(c.args.sendBlocks) : nullptr;
  b.outputBlocks = c.output.memory == CallMemory::Recv ? c.args.recvBlocks : nullptr;
  return Status::success();
}

/// After a successful run of \p c on \p nranks ranks: the staging copies
/// that go after it, then Avg's division.
inline void finishHost(const PreparedCall &c, const HostBinding &b, uint32_t nranks,
                       const HostKernels &kernels) {
  char *copy = b.copy;
  for (const StagingCopy &s : c.after)
    std::memcpy(resolve(s.to, c, copy), resolve(s.from, c, copy), size_t(s.bytes));
  if (c.divideByRanks) // Of the one unit the reducing collectives leave.
    kernels.divide(recvAddress(c.args, c.unitBytes, 0), c.args.count, nranks);
}

/// Adds rank \p r's scratch and, when \p fifos, the FIFOs it receives on
/// (in its own memory, as LocalWorld allocates them) to \p d.
inline Status addRankDemand(MemoryDemand &d, const Plan &plan, uint32_t r,
                            const ChunkLayout &layout, size_t es, bool fifos,
                            ProtocolKind protocol = ProtocolKind::Simple) {
  Result<uint64_t> scratch = scratchBytes(plan, r, layout, es);
  if (!scratch)
    return scratch.getStatus();
  if (Status s = d.add([&] { return scratchWhat(plan, r, layout, es); }, *scratch); !s)
    return s;
  if (!fifos || layout.numSlices == 0)
    return Status::success();
  const uint64_t pieceBytes = layout.sliceElements * es;
  for (uint32_t b = 0; b < plan.ranks[r].threadblocks.size(); ++b) {
    Result<uint64_t> slots = fifoSlotBytes(plan, r, b, pieceBytes, nullptr, protocol);
    if (!slots)
      return slots.getStatus();
    auto what = [&] {
      std::string w;
      (void)fifoSlotBytes(plan, r, b, pieceBytes, &w, protocol);
      return w;
    };
    if (*slots)
      if (Status s = d.add(what, *slots); !s)
        return s;
  }
  return Status::success();
}

/// The allocation of \p allocations (keyed by start address, ordered)
/// that starts last at or before \p p, or end(): the only one that may
/// hold \p p.
template <class Map>
typename Map::const_iterator allocationAtOrBefore(const Map &allocations, const void *p) {
  auto it = allocations.upper_bound(static_cast<char *>(const_cast<void *>(p)));
  return it == allocations.begin() ? allocations.end() : std::prev(it);
}

/// "" when \p bytes from \p buf fit in the allocation of \p allocations
/// (keyed by start address, ordered) that holds \p buf, or when no
/// allocation holds it; otherwise an error naming the buffer (\p which:
/// "send", "receive"), the bytes needed and those left. \p sizeOf gives an
/// allocation's bytes.
template <class Map, class SizeOf>
std::string allocationOverrun(const char *which, const void *buf, uint64_t bytes,
                              const Map &allocations, SizeOf sizeOf) {
  const char *p = static_cast<const char *>(buf);
  if (!p || bytes == 0)
    return "";
  auto it = allocationAtOrBefore(allocations, p);
  if (it == allocations.end())
    return "";
  const uint64_t size = sizeOf(it->second);
  const uint64_t offset =
      uint64_t(reinterpret_cast<uintptr_t>(p) - reinterpret_cast<uintptr_t>(it->first));
  if (offset >= size)
    return "";
  const uint64_t left = size - offset;
  if (bytes <= left)
    return "";
  return cat("the ", which, " buffer needs ", bytes, " bytes, but only ", left,
             " bytes are left of the ", size, "-byte allocation it points into",
             offset ? cat(" at offset ", offset) : std::string());
}

/// Allocates \p bytes of zeroes in \p v for \p what; an error naming both
/// when the memory is not there.
inline Status allocateZeroed(std::vector<char> &v, uint64_t bytes, const std::string &what) {
  try {
    v.assign(size_t(bytes), 0);
  } catch (const std::bad_alloc &) {
    return Status::error(cat("cannot allocate ", bytes, " bytes for ", what, ": out of memory"));
  } catch (const std::length_error &) {
    return Status::error(cat("cannot allocate ", bytes, " bytes for ", what, ": too large"));
  }
  return Status::success();
}

/// "rank 1 threadblock 0 step 3 (rrs, slice 0)".
inline std::string where(const TbRun &t) {
  const ExecStatus &st = t.status;
  if (t.interp->finished())
    return cat("rank ", t.rank, " threadblock ", t.index, " (at the end of its program)");
  const char *mnemonic =
      st.step < t.tb->steps.size() ? opcodeInfo(t.tb->steps[st.step].op).mnemonic : "?";
  return cat("rank ", t.rank, " threadblock ", t.index, " step ", st.step, " (", mnemonic,
             ", slice ", st.slice, ")");
}

/// What a stopped threadblock was waiting for.
inline std::string waitedFor(const TbRun &t) {
  const ExecStatus &st = t.status;
  if (t.interp->finished())
    return cat("rank ", t.tb->sendPeer, " to read its direct messages on channel ", t.tb->channel,
               " (", t.platform.directUntil, " sent, ",
               t.platform.sendFifo->head->load(std::memory_order_acquire), " read)");
  switch (st.waitKind) {
  case WaitKind::Dependency:
    return cat("threadblock ", st.depTb, " to finish step ", st.depStep);
  case WaitKind::RecvMessage:
    return cat("message ", t.platform.received + 1, " from rank ", t.tb->recvPeer, " on channel ",
               t.tb->channel);
  case WaitKind::SendSlot: {
    const Fifo &f = *t.platform.sendFifo;
    return cat("a free slot to rank ", t.tb->sendPeer, " on channel ", t.tb->channel, " (all ",
               f.depth, " slots full: ", t.platform.sent, " messages sent, ",
               f.head->load(std::memory_order_acquire), " taken)");
  }
  case WaitKind::DirectRead: // The CPU executors drain after the program (above).
  case WaitKind::None:
    break;
  }
  return "nothing";
}

inline std::string formatSeconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

/// How a worker ended.
struct WorkerResult {
  bool ok = true;
  bool aborted = false; ///< Stopped because another worker failed.
  std::string message;
};

/// "<where><firstVerb><what>; <where> waits for <what>; ..." for the
/// unfinished threadblocks of \p tbs (at most 8, then a count).
inline std::string describeBlocked(const std::vector<TbRun *> &tbs, const std::string &firstVerb) {
  constexpr size_t maxListed = 8;
  std::string msg;
  size_t blocked = 0;
  for (const TbRun *t : tbs) {
    if (t->done() || ++blocked > maxListed)
      continue;
    msg += cat(blocked > 1 ? "; " : "", where(*t), blocked > 1 ? " waits for " : firstVerb.c_str(),
               waitedFor(*t));
  }
  if (blocked > maxListed)
    msg += cat("; and ", blocked - maxListed, " more");
  return msg;
}

/// What a worker's pacer says when none of its threadblocks can move.
enum class PaceResult : uint8_t {
  Continue, ///< Try again.
  TimedOut, ///< No progress for the time limit.
  Failed,   ///< Something outside the worker failed (the pacer says what).
};

/// Runs \p tbs round-robin, each until it finishes or blocks, until all
/// have finished. When none can move: in single mode (nothing else can
/// change the state) that is a deadlock, reported at once; otherwise the
/// worker stops when another worker has failed, or asks \p pacer, which
/// waits a little (spin, yield, sleep) and says whether to go on:
///
///   void beginRound();                 // before each pass over tbs
///   void reset();                      // a pass made progress
///   PaceResult pause(std::string &why); // none could move
///
/// A timeout names every blocked threadblock and what it waits for, then
/// `why`; a failure gives `why`, then the same list.
template <class Pacer>
WorkerResult runWorker(const std::vector<TbRun *> &tbs, WorldState &world, Pacer &pacer,
                       double timeout, bool single) {
  for (;;) {
    pacer.beginRound();
    bool progressed = false, unfinished = false;
    for (TbRun *t : tbs) {
      Interpreter<CpuPlatform> &interp = *t->interp;
      if (t->done())
        continue;
      uint64_t before = interp.stepsExecuted();
      if (!interp.finished())
        t->status = interp.run();
      progressed |= interp.stepsExecuted() != before;
      unfinished |= !t->done();
    }
    WorkerResult result;
    if (!unfinished)
      return result;
    if (progressed) {
      pacer.reset();
      continue;
    }
    result.ok = false;
    if (single) {
      result.message =
          "deadlock: no threadblock can make progress: " + describeBlocked(tbs, " waits for ");
      return result;
    }
    if (world.failed.load(std::memory_order_relaxed)) {
      result.aborted = true;
      return result;
    }
    std::string why;
    switch (pacer.pause(why)) {
    case PaceResult::Continue:
      continue;
    case PaceResult::TimedOut:
      result.message =
          describeBlocked(tbs, ": timed out after " + formatSeconds(timeout) + " s waiting for ") +
          why;
      return result;
    case PaceResult::Failed:
      result.message = why + ": " + describeBlocked(tbs, " waits for ");
      return result;
    }
  }
}

/// The message and kind of the exception being handled.
inline std::pair<std::string, ErrorKind> currentException() {
  try {
    throw;
  } catch (const std::bad_alloc &) {
    return {"out of memory", ErrorKind::SystemError};
  } catch (const std::exception &e) {
    return {e.what(), ErrorKind::Internal};
  } catch (...) {
    return {"an unknown exception", ErrorKind::Internal};
  }
}

/// The first failure of a run (in time), from any thread.
struct FirstError {
  std::mutex mutex;
  std::string message;
  ErrorKind kind = ErrorKind::None;

  void set(WorldState &world, ErrorKind k, std::string m) {
    world.failed.store(true, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(mutex);
    if (kind == ErrorKind::None) {
      kind = k;
      message = std::move(m);
    }
  }
  /// set() without a message (the run's error says "the run was aborted"),
  /// for when building one fails: allocates nothing.
  void setKind(WorldState &world, ErrorKind k) {
    world.failed.store(true, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(mutex);
    if (kind == ErrorKind::None)
      kind = k;
  }
};

/// Runs work(w) for every worker w in [0, \p n): workers 1 to n - 1 on
/// threads of their own from the process's pool (WorkerPool.h: started
/// once, timer slack 1 us so that short sleeps stay short, reused by the
/// next run), worker 0 on the calling thread when \p callerWorks, else on
/// a pool thread too; then waits for them all. A thread that cannot start
/// is \p first's error ("<who()>cannot start a worker thread: ..."), after
/// which \p wake() runs (to wake workers that may sleep) and no more start;
/// those started are waited for. work must not throw.
template <class Work, class Who, class Wake>
void runWorkerThreads(size_t n, bool callerWorks, WorldState &world, FirstError &first, Work work,
                      Who who, Wake wake) {
  WorkerBatch batch;
  std::string error;
  const size_t begin = callerWorks ? 1 : 0;
  if (begin < n && batch.start(
                       begin, n, [&work](size_t w) { work(w); }, error) < n - begin) {
    try {
      first.set(world, ErrorKind::SystemError, cat(who(), "cannot start a worker thread: ", error));
    } catch (...) {
      first.setKind(world, ErrorKind::SystemError);
    }
    wake();
  }
  if (callerWorks && n > 0 && !world.failed.load(std::memory_order_relaxed))
    work(0);
  batch.wait();
}

/// What the caller of a run of every rank in this process (a World's
/// rendezvous) watches and steers.
struct RunControl {
  /// Set by the caller: the workers stop at their next pause, and the run
  /// fails.
  std::atomic<bool> cancel{false};
  /// Clock ticks (since the clock's epoch) of the run's last sign of life:
  /// its start, each rank bound, a worker's progress (at most once a
  /// millisecond per worker).
  std::atomic<int64_t> beat{0};
  /// The kind of the run's error, set before it returns.
  ErrorKind kind = ErrorKind::None;

  void beatNow() { beat.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed); }
};

struct LocalRunCache;

/// LocalWorld::run, watched and steered by \p control (may be null), on
/// the last run kept in \p cache when the call is like it (may be null:
/// nothing kept). Never throws: any exception inside a rank's execution is
/// an error naming the rank.
Status runLocalWorld(const ValidatedPlan &plan, const std::vector<const void *> &sendbufs,
                     const std::vector<void *> &recvbufs, uint64_t count, DataType type, RedOp op,
                     const ExecOptions &options, RunControl *control,
                     LocalRunCache *cache = nullptr);

/// Checks the memory rank \p c.rank of a job of processes allocates
/// besides its buffers for its prepared call \p c of \p plan: its scratch, its call's shared-memory
/// segment of \p segmentBytes and the private copy of its input (PreparedCall::copyBytes), against
/// the cap \p limitOption (0: the default of its buffers' bytes), named \p optionName in the error;
/// with overflow checks.
inline Status checkRankMemory(const ValidatedPlan &plan, const PreparedCall &c,
                              uint64_t segmentBytes, uint64_t limitOption, const char *optionName,
                              ErrorKind *kind = nullptr) {
  // A size that overflows is the plan's fault; one over the cap is not.
  if (kind)
    *kind = ErrorKind::InvalidPlan;
  MemoryDemand d;
  if (Status s = addRankDemand(d, plan.plan(), c.rank, c.layout, c.elementSize, /*fifos=*/false);
      !s)
    return s;
  if (Status s = d.add([&] { return cat("rank ", c.rank, "'s connections (shared memory)"); },
                       segmentBytes);
      !s)
    return s;
  if (Status s = d.add([&] { return cat("a copy of rank ", c.rank, "'s input"); }, c.copyBytes); !s)
    return s;
  uint64_t bufferBytes = 0;
  if (__builtin_add_overflow(c.inputBytes, c.outputBytes, &bufferBytes))
    bufferBytes = ~uint64_t(0);
  if (kind)
    *kind = ErrorKind::SystemError;
  return checkMemoryLimit(d, limitOption, bufferBytes, optionName);
}

} // namespace detail
} // namespace coll

#endif // COLL_RUNTIME_LIB_EXECCOMMON_H
