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

#include "ExecCommon.h"
#include "coll/Runtime/Executor.h"
#include "coll/Runtime/PlanIO.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
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

namespace {

/// A worker's pacing in LocalWorld: Backoff; with a RunControl, a beat
/// after progress (at most once a millisecond) and a stop when cancelled.
struct ThreadPacer {
  ThreadPacer(double timeout, RunControl *control) : backoff(timeout), control(control) {}
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

/// Runs the workers on threads; the first failure (in time) is the error.
/// A worker that throws fails the run naming its rank; the others see the
/// failure at their next pause and stop.
Status runThreads(const std::vector<std::vector<TbRun *>> &workers, WorldState &world,
                  const ExecOptions &options, RunControl *control, ErrorKind &kind) {
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
          started[w].store(true, std::memory_order_relaxed);
          ThreadPacer pacer(timeout, control);
          WorkerResult r = runWorker(tbs, world, pacer, timeout, /*single=*/false);
          if (!r.ok && !r.aborted)
            first.set(world, ErrorKind::Timeout, r.message + notStarted());
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
      "", [] {});
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

Status runLocalWorldUnguarded(const ValidatedPlan &vp, const std::vector<const void *> &sendbufs,
                              const std::vector<void *> &recvbufs, uint64_t count, DataType type,
                              RedOp op, const ExecOptions &options, RunControl *control,
                              ErrorKind &kind) {
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
  std::vector<PreparedCall> calls(nranks);
  for (uint32_t r = 0; r < nranks; ++r) {
    calls[r] = prepareCall(vp, r, {sendbufs[r], recvbufs[r], count, type, op}, callOptions);
    if (calls[r].error) {
      kind = calls[r].error.kind;
      return calls[r].error.status();
    }
  }
  HostKernels kernels;
  if (!selectHostKernels(type, op, kernels))
    return Status::error(cat("no host kernel for ", dataTypeName(type), " and ", redOpName(op)));
  const size_t es = kernels.elementSize;
  const ChunkLayout &layout = calls[0].layout;
  const uint64_t numSlices = layout.numSlices;
  const uint64_t pieceBytes = layout.sliceElements * es;

  // What the run will allocate, checked for overflow and against the cap
  // before anything is.
  MemoryDemand demand;
  uint64_t bufferBytes = 0;
  for (uint32_t r = 0; r < nranks; ++r) {
    kind = ErrorKind::InvalidPlan;
    if (Status s = addRankDemand(demand, plan, r, layout, es, /*fifos=*/true); !s)
      return s;
    if (Status s = demand.add(cat("a copy of rank ", r, "'s input"), calls[r].copyBytes); !s)
      return s;
    bufferBytes =
        addSaturated(bufferBytes, addSaturated(calls[r].inputBytes, calls[r].outputBytes));
  }
  kind = ErrorKind::SystemError;
  if (Status s = checkMemoryLimit(demand, options.memoryLimitBytes, bufferBytes,
                                  "ExecOptions::memoryLimitBytes");
      !s)
    return s;

  // Bind every rank's buffers.
  std::vector<HostBinding> bindings(nranks);
  for (uint32_t r = 0; r < nranks; ++r) {
    HostBinding &b = bindings[r];
    try {
      if (options.faultInjection)
        options.faultInjection(FaultSite::Bind, r);
      if (Status s = bindHost(calls[r], b); !s)
        return s;
    } catch (...) {
      auto [what, k] = currentException();
      kind = k;
      return Status::error(cat("rank ", r, " failed while binding its buffers: ", what));
    }
    if (Status s = allocateZeroed(b.scratch, *scratchBytes(plan, r, layout, es),
                                  scratchWhat(plan, r, layout, es));
        !s)
      return s;
    if (control)
      control->beatNow();
  }

  // The shared state: world, ranks, FIFOs (one per receiving threadblock,
  // in the receiver's memory).
  WorldState world;
  world.recording = options.timeline != nullptr;
  std::vector<RankState> ranks(nranks);
  std::vector<std::unique_ptr<PaddedCounter[]>> progress(nranks);
  std::vector<std::vector<std::unique_ptr<FifoStorage>>> fifos(nranks);
  std::vector<std::map<std::pair<int32_t, uint32_t>, uint32_t>> recvTb(nranks);
  for (uint32_t r = 0; r < nranks; ++r) {
    const RankPlan &rp = plan.ranks[r];
    RankState &rs = ranks[r];
    rs.buffers[unsigned(BufferKind::Input)] = bindings[r].input;
    rs.buffers[unsigned(BufferKind::Output)] = bindings[r].output;
    rs.buffers[unsigned(BufferKind::Scratch)] = bindings[r].scratch.data();
    progress[r] = std::make_unique<PaddedCounter[]>(rp.threadblocks.size());
    rs.progress = progress[r].get();
    fifos[r].resize(rp.threadblocks.size());
    for (uint32_t b = 0; b < rp.threadblocks.size(); ++b) {
      const Threadblock &tb = rp.threadblocks[b];
      rs.numSteps.push_back(uint32_t(tb.steps.size()));
      if (tb.recvPeer < 0 || numSlices == 0)
        continue;
      uint32_t maxCount = maxMessageChunks(tb, /*recv=*/true);
      if (maxCount == 0)
        continue;
      try {
        fifos[r][b] = std::make_unique<FifoStorage>(info.connectionDepth, maxCount * pieceBytes);
      } catch (const std::bad_alloc &) {
        std::string what;
        uint64_t bytes = *fifoSlotBytes(plan, r, b, pieceBytes, &what);
        return Status::error(
            cat("cannot allocate ", bytes, " bytes for ", what, ": out of memory"));
      }
      recvTb[r][{tb.recvPeer, tb.channel}] = b;
    }
  }

  std::vector<std::unique_ptr<TbRun>> runs;
  for (uint32_t r = 0; r < nranks; ++r) {
    const RankPlan &rp = plan.ranks[r];
    for (uint32_t b = 0; b < rp.threadblocks.size(); ++b) {
      const Threadblock &tb = rp.threadblocks[b];
      auto t = makeTbRun(tb, r, b, world, ranks[r], layout, kernels, pieceBytes);
      CpuPlatform &p = t->platform;
      p.recvFifo = fifos[r][b] ? &fifos[r][b]->fifo : nullptr;
      if (tb.sendPeer >= 0) {
        auto &peerMap = recvTb[tb.sendPeer];
        auto it = peerMap.find({int32_t(r), tb.channel});
        if (it != peerMap.end())
          p.sendFifo = &fifos[tb.sendPeer][it->second]->fifo;
      }
      t->interp = std::make_unique<Interpreter<CpuPlatform>>(p, t->program, numSlices);
      runs.push_back(std::move(t));
    }
  }

  // Run: Single mode is one worker for everything; Threads mode gives each
  // rank workersPerRank threads (0: one per threadblock), threadblock b on
  // worker b % workers.
  world.start = Clock::now();
  if (control)
    control->beatNow();
  Status status = Status::success();
  if (numSlices > 0 && options.mode == ExecMode::Single) {
    std::vector<TbRun *> all;
    for (auto &t : runs)
      all.push_back(t.get());
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
    WorkerResult r = runWorker(all, world, pacer, options.timeoutSeconds, /*single=*/true);
    if (!r.ok) {
      kind = ErrorKind::Timeout;
      status = Status::error(r.message);
    }
  } else if (numSlices > 0) {
    std::vector<std::vector<TbRun *>> workers;
    size_t first = 0;
    for (uint32_t r = 0; r < nranks; ++r) {
      size_t ntb = plan.ranks[r].threadblocks.size();
      size_t nworkers =
          options.workersPerRank ? std::min<size_t>(options.workersPerRank, ntb) : ntb;
      size_t base = workers.size();
      workers.resize(base + nworkers);
      for (size_t b = 0; b < ntb; ++b)
        workers[base + b % nworkers].push_back(runs[first + b].get());
      first += ntb;
    }
    status = runThreads(workers, world, options, control, kind);
  }
  if (options.timeline) {
    std::vector<TraceEvent> &events = options.timeline->events;
    events.clear();
    for (auto &t : runs)
      events.insert(events.end(), t->platform.events.begin(), t->platform.events.end());
    std::stable_sort(events.begin(), events.end(), [](const TraceEvent &a, const TraceEvent &b) {
      return std::tie(a.rank, a.tb, a.beginUs) < std::tie(b.rank, b.tb, b.beginUs);
    });
  }
  if (!status)
    return status;

  // Finish: results computed away from the user's output, then Avg.
  for (uint32_t r = 0; r < nranks; ++r)
    finishHost(calls[r], bindings[r], nranks, kernels);
  kind = ErrorKind::None;
  return Status::success();
}

} // namespace

uint64_t defaultMemoryLimit(uint64_t bufferBytes) {
  uint64_t eight = bufferBytes > (~uint64_t(0) >> 3) ? ~uint64_t(0) : bufferBytes * 8;
  return addSaturated(eight, uint64_t(256) << 20);
}

Status detail::runLocalWorld(const ValidatedPlan &plan, const std::vector<const void *> &sendbufs,
                             const std::vector<void *> &recvbufs, uint64_t count, DataType type,
                             RedOp op, const ExecOptions &options, RunControl *control) {
  ErrorKind kind = ErrorKind::Internal;
  Status s = Status::success();
  try {
    s = runLocalWorldUnguarded(plan, sendbufs, recvbufs, count, type, op, options, control, kind);
  } catch (...) {
    auto [what, k] = currentException();
    kind = k;
    s = Status::error(cat("the run failed: ", what));
  }
  if (control)
    control->kind = s ? ErrorKind::None : kind;
  return s;
}

Status LocalWorld::run(const ValidatedPlan &plan, const std::vector<const void *> &sendbufs,
                       const std::vector<void *> &recvbufs, uint64_t count, DataType type, RedOp op,
                       const ExecOptions &options) const {
  return runLocalWorld(plan, sendbufs, recvbufs, count, type, op, options, nullptr);
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
