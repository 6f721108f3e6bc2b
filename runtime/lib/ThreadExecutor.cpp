//===- ThreadExecutor.cpp - Every rank of a plan in one process -----------===//
//
// LocalWorld::run: checks the call, binds each rank's buffers as the plan
// sees them (in place or out of place), builds the connections' FIFOs and
// the progress counters, runs one Interpreter<CpuPlatform> per threadblock
// on workers (threads of each rank, or the calling thread for everything),
// then finishes the results (copies out, Avg's division) or reports the
// first failure with its rank, threadblock, step and what it waited for.
//
// A worker runs its threadblocks round-robin, each until it finishes or a
// wait would block (the platform's waits never block), so a blocked
// threadblock never holds up another, and one thread per rank suffices: 8
// ranks need 8 threads, not one per threadblock, on a 2-core machine.
//
//===----------------------------------------------------------------------===//

#include "DirectSends.h"
#include "ExecCommon.h"
#include "OutOfPlace.h"
#include "coll/Runtime/Executor.h"
#include "coll/Runtime/PlanIO.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <system_error>
#include <tuple>
#include <utility>

namespace coll {

using namespace detail;

namespace detail {

struct LocalRun;

/// LocalWorld's last run, for the next call like it.
struct LocalRunCache {
  std::mutex mutex;
  std::unique_ptr<LocalRun> run;
  ~LocalRunCache();
};

} // namespace detail

namespace {

/// A worker's pacing in LocalWorld: Backoff; with a RunControl, a beat
/// after progress (at most once a millisecond) and a stop when cancelled.
struct ThreadPacer {
  ThreadPacer(double timeout, RunControl *control, Clock::duration spin = Clock::duration::zero())
      : backoff(timeout, spin), control(control) {}
  void beginRound() {}
  void reset() {
    backoff.reset();
    if (!control)
      return;
    Clock::time_point now = Clock::now();
    if (now - lastBeat >= std::chrono::milliseconds(1)) {
      control->beat.store(now.time_since_epoch().count(), std::memory_order_relaxed);
      lastBeat = now;
    }
  }
  PaceResult pause(std::string &why) {
    if (control && control->cancel.load(std::memory_order_relaxed)) {
      why = "the run was cancelled (a waiting rank saw no progress)";
      return PaceResult::Failed;
    }
    return backoff.pause() ? PaceResult::Continue : PaceResult::TimedOut;
  }
  Backoff backoff;
  RunControl *control;
  Clock::time_point lastBeat;
};

/// What a worker does besides its threadblocks: \p before(w) first,
/// \p after(w) once they have all finished (either may be empty).
struct WorkerHooks {
  std::function<void(size_t)> before, after;
};

/// Runs the workers on threads; the first failure (in time) is the error.
/// A worker that throws fails the run naming its rank; the others see the
/// failure at their next pause and stop.

Status runThreads(const std::vector<std::vector<TbRun *>> &workers, WorldState &world,
                  const ExecOptions &options, RunControl *control, ErrorKind &kind,
                  const WorkerHooks &hooks = {}) {
  FirstError first;
  const double timeout = options.timeoutSeconds;
  // Which workers have reached their threadblocks: a timeout names the
  // ranks of those held up before them (a fault injection that stalls),
  // for the threadblocks that time out may wait on them only indirectly.
  std::unique_ptr<std::atomic<bool>[]> started(new std::atomic<bool>[workers.size()]());
  auto notStarted = [&workers, &started] {
    std::string notes;
    uint32_t last = ~0u;
    for (size_t w = 0; w < workers.size(); ++w) {
      uint32_t r = workers[w].front()->rank;
      if (started[w].load(std::memory_order_relaxed) || r == last)
        continue;
      notes += cat("; rank ", r, " has a worker that has not reached its threadblocks");
      last = r;
    }
    return notes;
  };
  const Clock::duration spin = spinTime(workers.size());
  // The calling thread runs worker 0 itself, one thread handoff fewer,
  // unless it watches the run (a World's rendezvous steers it through
  // `control`).
  runWorkerThreads(
      workers.size(), /*callerWorks=*/control == nullptr, world, first,
      [&](size_t w) {
        const std::vector<TbRun *> &tbs = workers[w];
        const uint32_t rank = tbs.front()->rank;
        try {
          if (options.faultInjection)
            options.faultInjection(FaultSite::Worker, rank);
          if (hooks.before)
            hooks.before(w);
          started[w].store(true, std::memory_order_relaxed);
          ThreadPacer pacer(timeout, control, spin);
          WorkerResult r = runWorker(tbs, world, pacer, timeout, /*single=*/false);
          if (!r.ok && !r.aborted)
            first.set(world, ErrorKind::Timeout, r.message + notStarted());
          if (r.ok && hooks.after)
            hooks.after(w);
        } catch (...) {
          // Building the message may fail for want of memory in turn.
          try {
            auto [what, k] = currentException();
            first.set(world, k, cat("rank ", rank, " failed in a worker thread: ", what));
          } catch (...) {
            first.setKind(world, ErrorKind::SystemError);
          }
        }
      },
      [] { return std::string(); }, [] {});
  if (!world.failed.load(std::memory_order_relaxed))
    return Status::success();
  kind = first.kind == ErrorKind::None ? ErrorKind::Internal : first.kind;
  return Status::error(first.message.empty() ? "the run was aborted" : first.message);
}

/// Saturating a + b.
uint64_t addSaturated(uint64_t a, uint64_t b) {
  uint64_t s = 0;
  return __builtin_add_overflow(a, b, &s) ? ~uint64_t(0) : s;
}

} // namespace

namespace detail {

/// What a run builds besides the bindings: FIFOs, progress counters,
/// scratch and interpreters, for the calls of one plan, count, type,
/// operator and options. A later call with the same key runs on it again.
struct LocalRun {
  // The key.
  uint64_t checksum = 0;
  uint32_t nranks = 0;
  uint64_t count = 0;
  DataType type = DataType::Float32;
  RedOp op = RedOp::Sum;
  uint64_t sliceElements = 0;
  ExecMode mode = ExecMode::Threads;
  uint32_t workersPerRank = 0;
  ProtocolKind protocol = ProtocolKind::Simple; ///< Of every connection.

  HostKernels kernels;
  ChunkLayout layout;
  WorldState world;
  std::vector<RankState> ranks;
  std::vector<std::unique_ptr<PaddedCounter[]>> progress;
  std::vector<std::vector<std::unique_ptr<FifoStorage>>> fifos;
  std::vector<std::vector<char>> scratch;
  std::vector<std::unique_ptr<TbRun>> runs;
  std::vector<std::vector<TbRun *>> workers; ///< Threads mode: each worker's threadblocks.
  std::vector<TbRun *> all;                  ///< Every threadblock, rank by rank.
  /// Per rank, its program for out-of-place calls of an in-place plan
  /// (OutOfPlace.h); empty where it has none.
  std::vector<OutOfPlaceProgram> outOfPlace;
  /// Per rank, its direct sends (DirectSends.h) on its own program and on
  /// its out-of-place program; empty where it has none.
  std::vector<RankDirectSends> direct;
  bool directSends = true; ///< ExecOptions::directSends.
  /// Per rank, the memory of its private input copies (ExecCommon.h).
  std::vector<KeptCopy> copies;

  bool serves(const ValidatedPlan &vp, uint64_t c, DataType t, RedOp o, ProtocolKind p,
              const ExecOptions &options) const {
    return checksum == vp.checksum() && nranks == vp.plan().info.nranks && count == c &&
           type == t && op == o && sliceElements == options.sliceElements && mode == options.mode &&
           workersPerRank == options.workersPerRank && directSends == options.directSends &&
           protocol == p;
  }
};

} // namespace detail

namespace {

/// Builds \p run for \p plan with \p layout and \p kernels (set in it).
Status buildLocalRun(const Plan &plan, LocalRun &run) {
  const PlanInfo &info = plan.info;
  const uint32_t nranks = info.nranks;
  const uint64_t numSlices = run.layout.numSlices;
  const size_t es = run.kernels.elementSize;
  const uint64_t pieceBytes = run.layout.sliceElements * es;
  run.ranks.resize(nranks);
  run.progress.resize(nranks);
  run.fifos.resize(nranks);
  run.scratch.resize(nranks);
  std::vector<std::map<std::pair<int32_t, uint32_t>, uint32_t>> recvTb(nranks);
  for (uint32_t r = 0; r < nranks; ++r) {
    const RankPlan &rp = plan.ranks[r];
    RankState &rs = run.ranks[r];
    if (Status s = allocateZeroed(run.scratch[r], *scratchBytes(plan, r, run.layout, es),
                                  scratchWhat(plan, r, run.layout, es));
        !s)
      return s;
    run.progress[r] = std::make_unique<PaddedCounter[]>(rp.threadblocks.size());
    rs.progress = run.progress[r].get();
    run.fifos[r].resize(rp.threadblocks.size());
    for (uint32_t b = 0; b < rp.threadblocks.size(); ++b) {
      const Threadblock &tb = rp.threadblocks[b];
      rs.numSteps.push_back(uint32_t(tb.steps.size()));
      if (tb.recvPeer < 0 || numSlices == 0)
        continue;
      uint32_t maxCount = maxMessageChunks(tb, /*recv=*/true);
      if (maxCount == 0)
        continue;
      try {
        run.fifos[r][b] = std::make_unique<FifoStorage>(info.connectionDepth, maxCount * pieceBytes,
                                                        run.protocol);
      } catch (const std::bad_alloc &) {
        std::string what;
        uint64_t bytes = *fifoSlotBytes(plan, r, b, pieceBytes, &what, run.protocol);
        return Status::error(
            cat("cannot allocate ", bytes, " bytes for ", what, ": out of memory"));
      }
      recvTb[r][{tb.recvPeer, tb.channel}] = b;
    }
  }
  for (uint32_t r = 0; r < nranks; ++r) {
    const RankPlan &rp = plan.ranks[r];
    for (uint32_t b = 0; b < rp.threadblocks.size(); ++b) {
      const Threadblock &tb = rp.threadblocks[b];
      auto t = makeTbRun(tb, r, b, run.world, run.ranks[r], run.layout, run.kernels, pieceBytes);
      CpuPlatform &p = t->platform;
      p.recvFifo = run.fifos[r][b] ? &run.fifos[r][b]->fifo : nullptr;
      if (tb.sendPeer >= 0) {
        auto &peerMap = recvTb[tb.sendPeer];
        auto it = peerMap.find({int32_t(r), tb.channel});
        if (it != peerMap.end())
          p.sendFifo = &run.fifos[tb.sendPeer][it->second]->fifo;
      }
      try {
        armLineStages(*t);
      } catch (const std::bad_alloc &) {
        return Status::error(cat("cannot allocate the ", protocolName(run.protocol),
                                 " staging copies of rank ", r, " threadblock ", b,
                                 ": out of memory"));
      }
      t->interp = std::make_unique<Interpreter<CpuPlatform>>(p, t->program, numSlices);
      run.all.push_back(t.get());
      run.runs.push_back(std::move(t));
    }
  }
  run.outOfPlace.resize(nranks);
  for (uint32_t r = 0; r < nranks; ++r)
    run.outOfPlace[r] = outOfPlaceProgram(info, plan.ranks[r]);
  // Direct sends put an address in a slot's piece: pieces must hold one.
  run.direct.resize(nranks);
  if (run.directSends && pieceBytes >= sizeof(char *))
    for (uint32_t r = 0; r < nranks; ++r)
      run.direct[r] = rankDirectSends(info, r, plan.ranks[r], run.outOfPlace[r]);
  // Threads mode gives each rank workersPerRank threads (0: one per
  // threadblock), threadblock b on worker b % workers.
  size_t first = 0;
  for (uint32_t r = 0; r < nranks; ++r) {
    size_t ntb = plan.ranks[r].threadblocks.size();
    size_t nworkers = run.workersPerRank ? std::min<size_t>(run.workersPerRank, ntb) : ntb;
    size_t base = run.workers.size();
    run.workers.resize(base + nworkers);
    for (size_t b = 0; b < ntb; ++b)
      run.workers[base + b % nworkers].push_back(run.runs[first + b].get());
    first += ntb;
  }
  return Status::success();
}

/// Makes \p run ready for a call of \p plan (the plan it was built for, or
/// one with the same content) on \p bindings: every progress counter zero,
/// every interpreter at its start, on its out-of-place program where
/// \p outOfPlace[r] says so. The connection counters go on from the last
/// call (which succeeded, or the run would not be kept: every message was
/// read), so that line protocols' flags never repeat.
void resetLocalRun(const Plan &plan, const std::vector<HostBinding> &bindings,
                   const std::vector<uint8_t> &outOfPlace, bool recording, LocalRun &run) {
  run.world.failed.store(false, std::memory_order_relaxed);
  run.world.recording = recording;
  for (uint32_t r = 0; r < run.ranks.size(); ++r) {
    RankState &rs = run.ranks[r];
    rs.buffers[unsigned(BufferKind::Input)] = bindings[r].input;
    rs.buffers[unsigned(BufferKind::Output)] = bindings[r].output;
    rs.blocks[unsigned(BufferKind::Input)] = bindings[r].inputBlocks;
    rs.blocks[unsigned(BufferKind::Output)] = bindings[r].outputBlocks;
    rs.buffers[unsigned(BufferKind::Scratch)] = run.scratch[r].data();
    rs.scratchBytes = run.scratch[r].size();
    const size_t ntb = plan.ranks[r].threadblocks.size();
    for (size_t b = 0; b < ntb; ++b) {
      rs.progress[b].value.store(0, std::memory_order_relaxed);
    }
  }
  for (TbRun *t : run.all) {
    const Threadblock &tb = plan.ranks[t->rank].threadblocks[t->index];
    restartTbRun(*t, tb,
                 outOfPlace[t->rank] ? run.outOfPlace[t->rank].steps[t->index].data()
                                     : tb.steps.data(),
                 run.layout.numSlices);
    // Ranks in one process read any of each other's buffers.
    armDirectSends(*t, run.direct[t->rank].of(outOfPlace[t->rank]), 0xff);
    t->platform.events.clear();
  }
}

/// Calls of at most this many bytes per rank (the larger buffer) run every
/// rank on the calling thread in Threads mode, as Single mode does: handing
/// them to other threads costs more than the data. More when the run's
/// \p workers outnumber the CPUs, whose threads would mostly take turns
/// (docs/performance.md, "Small calls").
uint64_t callingThreadBytes(size_t workers) {
  return workers <= usableCpus() ? uint64_t(16) << 10 : uint64_t(256) << 10;
}

Status runLocalWorldUnguarded(const ValidatedPlan &vp, const std::vector<const void *> &sendbufs,
                              const std::vector<void *> &recvbufs, uint64_t count, DataType type,
                              RedOp op, const ExecOptions &options, RunControl *control,
                              LocalRunCache *cache, ErrorKind &kind) {
  // Check the call: the run's own options, then every rank's call.
  const Plan &plan = vp.plan();
  const PlanInfo &info = plan.info;
  kind = ErrorKind::InvalidArgument;
  if (!vp.holdsEveryRank())
    return Status::error(
        cat("the plan was loaded for rank ", plan.loadedRank, " only; LocalWorld runs every rank"));
  const uint32_t nranks = info.nranks;
  if (sendbufs.size() != nranks || recvbufs.size() != nranks)
    return Status::error(cat("the plan has ", nranks, " ranks but ", sendbufs.size(), " send and ",
                             recvbufs.size(), " receive buffers were given"));
  if (options.sliceElements == 0)
    return Status::error("the slice size must be at least 1 element");
  if (!(options.timeoutSeconds > 0) || options.timeoutSeconds > 1e9)
    return Status::error(cat("the timeout must be in (0, 1e9] seconds, not ",
                             formatSeconds(options.timeoutSeconds)));
  CallOptions callOptions;
  callOptions.sliceElements = options.sliceElements;
  callOptions.worldRanks = nranks;
  callOptions.protocol = options.protocol;
  std::vector<PreparedCall> calls(nranks);
  bool copies = false;
  for (uint32_t r = 0; r < nranks; ++r) {
    calls[r] = prepareCall(vp, r, {sendbufs[r], recvbufs[r], count, type, op}, callOptions);
    if (calls[r].error) {
      kind = calls[r].error.kind;
      return calls[r].error.status();
    }
    copies |= calls[r].copyBytes != 0;
  }
  HostKernels kernels;
  if (!selectHostKernels(type, op, kernels))
    return Status::error(cat("no host kernel for ", dataTypeName(type), " and ", redOpName(op)));
  const size_t es = kernels.elementSize;
  const ChunkLayout &layout = calls[0].layout;
  const uint64_t numSlices = layout.numSlices;

  // The last run's FIFOs, counters, scratch and interpreters, when it was
  // a call like this one (and nobody else uses them now).
  std::unique_lock<std::mutex> cacheLock;
  std::unique_ptr<LocalRun> built;
  LocalRun *run = nullptr;
  if (cache) {
    cacheLock = std::unique_lock<std::mutex>(cache->mutex, std::try_to_lock);
    if (cacheLock.owns_lock() && cache->run &&
        cache->run->serves(vp, count, type, op, calls[0].protocol, options))
      run = cache->run.get();
  }

  // What the run will allocate, checked for overflow and against the cap
  // before anything is. A reused run has passed this check with the same
  // demand unless a rank now needs a private copy of its input.
  if (!run || copies) {
    MemoryDemand demand;
    uint64_t bufferBytes = 0;
    for (uint32_t r = 0; r < nranks; ++r) {
      kind = ErrorKind::InvalidPlan;
      if (Status s = addRankDemand(demand, plan, r, layout, es, /*fifos=*/true, calls[r].protocol);
          !s)
        return s;
      if (Status s =
              demand.add([&] { return cat("a copy of rank ", r, "'s input"); }, calls[r].copyBytes);
          !s)
        return s;
      bufferBytes =
          addSaturated(bufferBytes, addSaturated(calls[r].inputBytes, calls[r].outputBytes));
    }
    kind = ErrorKind::SystemError;
    if (Status s = checkMemoryLimit(demand, options.memoryLimitBytes, bufferBytes,
                                    "ExecOptions::memoryLimitBytes");
        !s)
      return s;
  }
  kind = ErrorKind::SystemError;

  if (!run) {
    built = std::make_unique<LocalRun>();
    run = built.get();
    run->checksum = vp.checksum();
    run->nranks = nranks;
    run->count = count;
    run->type = type;
    run->op = op;
    run->sliceElements = options.sliceElements;
    run->mode = options.mode;
    run->workersPerRank = options.workersPerRank;
    run->directSends = options.directSends;
    run->protocol = calls[0].protocol;
    run->kernels = kernels;
    run->layout = layout;
    if (Status s = buildLocalRun(plan, *run); !s)
      return s;
  }
  // Ranks that run an in-place plan out of place on their program for
  // that, without staging the input into the output.
  std::vector<uint8_t> outOfPlace(nranks, 0);
  for (uint32_t r = 0; r < run->outOfPlace.size(); ++r)
    outOfPlace[r] = !run->outOfPlace[r].empty() && runOutOfPlace(calls[r], info);

  // Which thread runs the ranks: all on the calling thread for Single
  // mode, and for a small call in Threads mode that nobody watches or
  // injects faults into; else each rank's workers on threads. A rank with
  // one worker makes its own staging copies and finishes its own results
  // there, in parallel with the others.
  uint64_t largestBytes = 0;
  for (const PreparedCall &c : calls)
    largestBytes = std::max({largestBytes, c.inputBytes, c.outputBytes});
  const bool onCaller = options.mode == ExecMode::Single ||
                        (!control && !options.faultInjection && !options.timeline &&
                         largestBytes <= callingThreadBytes(run->workers.size()));
  bool workersStage = !onCaller && numSlices > 0;
  for (uint32_t r = 0; r < nranks && workersStage; ++r)
    workersStage = options.workersPerRank == 1 || plan.ranks[r].threadblocks.size() == 1;

  // Bind every rank's buffers.
  std::vector<HostBinding> bindings(nranks);
  for (uint32_t r = 0; r < nranks; ++r) {
    HostBinding &b = bindings[r];
    try {
      if (options.faultInjection)
        options.faultInjection(FaultSite::Bind, r);
      if (run->copies.size() != nranks)
        run->copies.resize(nranks);
      if (Status s = bindHost(calls[r], b, !workersStage, &run->copies[r]); !s)
        return s;
    } catch (...) {
      auto [what, k] = currentException();
      kind = k;
      return Status::error(cat("rank ", r, " failed while binding its buffers: ", what));
    }
    if (control)
      control->beatNow();
  }

  resetLocalRun(plan, bindings, outOfPlace, options.timeline != nullptr, *run);
  {
    uint64_t footprint = 0;
    for (uint32_t r = 0; r < nranks; ++r)
      footprint = addSaturated(footprint, bufferFootprint(calls[r]));
    const bool stream = streamsStores(footprint, options.streamingStoresFrom);
    for (RankState &rs : run->ranks)
      rs.streamStores = stream;
  }

  // Run: Single mode is one worker for everything, and so is a small call
  // in Threads mode that nobody watches or injects faults into; Threads
  // mode otherwise runs each rank's workers on threads.
  WorldState &world = run->world;
  world.start = Clock::now();
  if (control)
    control->beatNow();
  Status status = Status::success();
  std::vector<uint8_t> finished(nranks, 0); // Results finished by the rank's worker.
  if (numSlices > 0 && onCaller) {
    uint32_t rank = 0;
    try {
      if (options.faultInjection)
        for (rank = 0; rank < nranks; ++rank)
          options.faultInjection(FaultSite::Worker, rank);
    } catch (...) {
      auto [what, k] = currentException();
      kind = k;
      return Status::error(cat("rank ", rank, " failed in a worker: ", what));
    }
    ThreadPacer pacer(options.timeoutSeconds, control);
    WorkerResult r = runWorker(run->all, world, pacer, options.timeoutSeconds, /*single=*/true);
    if (!r.ok && options.mode == ExecMode::Threads) {
      // Stuck: Threads mode's rules decide (its workers wait for the time
      // limit, and say so), from where the interpreters stopped.
      status = runThreads(run->workers, world, options, control, kind);
    } else if (!r.ok) {
      kind = ErrorKind::Timeout;
      status = Status::error(r.message);
    }
  } else if (numSlices > 0) {
    WorkerHooks hooks;
    if (workersStage) {
      // Worker w runs rank r's only worker (a rank without threadblocks has
      // none: the calling thread stages and finishes it).
      hooks.before = [&](size_t w) {
        const uint32_t r = run->workers[w].front()->rank;
        stageHost(calls[r], bindings[r]);
      };
      hooks.after = [&](size_t w) {
        const uint32_t r = run->workers[w].front()->rank;
        finishHost(calls[r], bindings[r], nranks, kernels);
        finished[r] = 1;
      };
      for (uint32_t r = 0; r < nranks; ++r)
        if (plan.ranks[r].threadblocks.empty())
          stageHost(calls[r], bindings[r]);
    }
    status = runThreads(run->workers, world, options, control, kind, hooks);
  }
  if (options.timeline) {
    std::vector<TraceEvent> &events = options.timeline->events;
    events.clear();
    options.timeline->protocol = run->protocol;
    for (auto &t : run->runs)
      events.insert(events.end(), t->platform.events.begin(), t->platform.events.end());
    std::stable_sort(events.begin(), events.end(), [](const TraceEvent &a, const TraceEvent &b) {
      return std::tie(a.rank, a.tb, a.beginUs) < std::tie(b.rank, b.tb, b.beginUs);
    });
  }
  if (!status) {
    // A failed run may leave messages in the FIFOs; a new one starts clean.
    if (cache && cacheLock.owns_lock() && run == cache->run.get())
      cache->run.reset();
    return status;
  }

  // Finish: results computed away from the user's output, then Avg.
  for (uint32_t r = 0; r < nranks; ++r)
    if (!finished[r])
      finishHost(calls[r], bindings[r], nranks, kernels);
  if (built && cache && cacheLock.owns_lock())
    cache->run = std::move(built);
  kind = ErrorKind::None;
  return Status::success();
}

} // namespace

uint64_t defaultMemoryLimit(uint64_t bufferBytes) {
  uint64_t eight = bufferBytes > (~uint64_t(0) >> 3) ? ~uint64_t(0) : bufferBytes * 8;
  return addSaturated(eight, uint64_t(256) << 20);
}

LocalRunCache::~LocalRunCache() = default;

Status detail::runLocalWorld(const ValidatedPlan &plan, const std::vector<const void *> &sendbufs,
                             const std::vector<void *> &recvbufs, uint64_t count, DataType type,
                             RedOp op, const ExecOptions &options, RunControl *control,
                             LocalRunCache *cache) {
  ErrorKind kind = ErrorKind::Internal;
  Status s = Status::success();
  try {
    s = runLocalWorldUnguarded(plan, sendbufs, recvbufs, count, type, op, options, control, cache,
                               kind);
  } catch (...) {
    auto [what, k] = currentException();
    kind = k;
    s = Status::error(cat("the run failed: ", what));
  }
  if (control)
    control->kind = s ? ErrorKind::None : kind;
  return s;
}

LocalWorld::LocalWorld() : cache(std::make_unique<LocalRunCache>()) {}
LocalWorld::~LocalWorld() = default;
LocalWorld::LocalWorld(LocalWorld &&) noexcept = default;
LocalWorld &LocalWorld::operator=(LocalWorld &&) noexcept = default;

Status LocalWorld::run(const ValidatedPlan &plan, const std::vector<const void *> &sendbufs,
                       const std::vector<void *> &recvbufs, uint64_t count, DataType type, RedOp op,
                       const ExecOptions &options) const {
  return runLocalWorld(plan, sendbufs, recvbufs, count, type, op, options, nullptr, cache.get());
}

Status LocalWorld::run(const Plan &plan, const std::vector<const void *> &sendbufs,
                       const std::vector<void *> &recvbufs, uint64_t count, DataType type, RedOp op,
                       const ExecOptions &options) const {
  Result<ValidatedPlan> valid = ValidatedPlan::borrow(plan);
  if (!valid)
    return valid.getStatus();
  return run(*valid, sendbufs, recvbufs, count, type, op, options);
}

} // namespace coll
