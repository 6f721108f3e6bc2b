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
#include <cstdio>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>
#include <system_error>
#include <tuple>
#include <utility>

#ifdef __linux__
#include <sys/prctl.h>
#endif

namespace coll {

using namespace detail;

namespace {

/// A worker's pacing in LocalWorld: Backoff, nothing else to watch.
struct ThreadPacer {
  explicit ThreadPacer(double timeout) : backoff(timeout) {}
  void beginRound() {}
  void reset() { backoff.reset(); }
  PaceResult pause(std::string &) {
    return backoff.pause() ? PaceResult::Continue : PaceResult::TimedOut;
  }
  Backoff backoff;
};

/// Runs the workers on threads; the first failure (in time) is the error.
Status runThreads(const std::vector<std::vector<TbRun *>> &workers, WorldState &world,
                  double timeout) {
  std::mutex mutex;
  std::string error;
  auto fail = [&](std::string message) {
    world.failed.store(true, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(mutex);
    if (error.empty())
      error = std::move(message);
  };
  std::vector<std::thread> threads;
  threads.reserve(workers.size());
  for (const std::vector<TbRun *> &tbs : workers) {
    try {
      threads.emplace_back([&tbs, &world, timeout, &fail] {
#ifdef __linux__
        // Sleeps of a few microseconds, not the default 50 us of slack.
        prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
#endif
        ThreadPacer pacer(timeout);
        WorkerResult r = runWorker(tbs, world, pacer, timeout, /*single=*/false);
        if (!r.ok && !r.aborted)
          fail(r.message);
      });
    } catch (const std::system_error &e) {
      fail(cat("cannot start a worker thread: ", e.what()));
      break;
    }
  }
  for (std::thread &th : threads)
    th.join();
  if (!world.failed.load(std::memory_order_relaxed))
    return Status::success();
  return Status::error(error.empty() ? "the run was aborted" : error);
}

} // namespace

Status LocalWorld::run(const Plan &plan, const std::vector<const void *> &sendbufs,
                       const std::vector<void *> &recvbufs, uint64_t count, DataType type, RedOp op,
                       const ExecOptions &options) const {
  // Check the call.
  const PlanInfo &info = plan.info;
  if (plan.loadedRank >= 0)
    return Status::error(
        cat("the plan was loaded for rank ", plan.loadedRank, " only; LocalWorld runs every rank"));
  if (Status s = validatePlan(plan); !s)
    return Status::error("invalid plan: " + s.message());
  const uint32_t nranks = info.nranks;
  if (sendbufs.size() != nranks || recvbufs.size() != nranks)
    return Status::error(cat("the plan has ", nranks, " ranks but ", sendbufs.size(), " send and ",
                             recvbufs.size(), " receive buffers were given"));
  HostKernels kernels;
  if (!selectHostKernels(type, op, kernels))
    return Status::error(cat("invalid data type ", unsigned(type), " or operator ", unsigned(op)));
  if (options.sliceElements == 0)
    return Status::error("the slice size must be at least 1 element");
  if (!(options.timeoutSeconds > 0) || options.timeoutSeconds > 1e9)
    return Status::error(cat("the timeout must be in (0, 1e9] seconds, not ",
                             formatSeconds(options.timeoutSeconds)));
  Result<uint32_t> chunks = planChunksPerUnit(info);
  if (!chunks)
    return chunks.getStatus();
  const size_t es = kernels.elementSize;
  if (count > std::numeric_limits<uint64_t>::max() / es / nranks)
    return Status::error(cat("count ", count, " is too large"));
  const BufferElements elems = collectiveBufferElements(info.collective, nranks, count);
  if (count > 0)
    for (uint32_t r = 0; r < nranks; ++r)
      if (!sendbufs[r] || !recvbufs[r])
        return Status::error(
            cat("rank ", r, " has a null ", sendbufs[r] ? "receive" : "send", " buffer"));

  const ChunkLayout layout = runLayout(count, *chunks, options.sliceElements);
  const uint64_t numSlices = layout.numSlices;
  const uint64_t pieceBytes = layout.sliceElements * es;

  // Bind every rank's buffers.
  std::vector<RankBinding> bindings(nranks);
  for (uint32_t r = 0; r < nranks; ++r) {
    RankBinding &b = bindings[r];
    bindRank(plan, r, sendbufs[r], recvbufs[r], elems, count, es, b);
    b.scratch.assign(layout.scratchElements(plan.ranks[r].scratchChunks) * es, 0);
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
      fifos[r][b] = std::make_unique<FifoStorage>(info.connectionDepth, maxCount * pieceBytes);
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
  Status status = Status::success();
  if (numSlices > 0 && options.mode == ExecMode::Single) {
    std::vector<TbRun *> all;
    for (auto &t : runs)
      all.push_back(t.get());
    ThreadPacer pacer(options.timeoutSeconds);
    WorkerResult r = runWorker(all, world, pacer, options.timeoutSeconds, /*single=*/true);
    if (!r.ok)
      status = Status::error(r.message);
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
    status = runThreads(workers, world, options.timeoutSeconds);
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
    finishRank(info, r, bindings[r], recvbufs[r], count, op, kernels);
  return Status::success();
}

} // namespace coll
