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

#include "CpuPlatform.h"
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

/// Concatenates the streamed forms of \p args.
template <typename... Args> std::string cat(const Args &...args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

/// One threadblock of the run.
struct TbRun {
  CpuPlatform platform;
  ProgramView program;
  std::unique_ptr<Interpreter<CpuPlatform>> interp;
  const Threadblock *tb = nullptr;
  uint32_t rank = 0;
  uint32_t index = 0;
  ExecStatus status; ///< What the last run() returned.
};

/// A rank's buffers as the plan addresses them, and what to do around the
/// run so that the user's buffers end up right.
struct RankBinding {
  char *input = nullptr;
  char *output = nullptr;
  std::vector<char> inputCopy; ///< A private copy of the user's input, when needed.
  const char *copyOutFrom = nullptr;
  char *copyOutTo = nullptr;
  uint64_t copyOutBytes = 0;
  std::vector<char> scratch;
};

bool overlaps(const char *a, uint64_t aBytes, const char *b, uint64_t bBytes) {
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return aBytes && bBytes && x < y + bBytes && y < x + aBytes;
}

/// Whether rank \p rank's buffers are the collective's in-place alias.
bool isInPlaceCall(CollectiveKind kind, uint32_t rank, const char *in, const char *out,
                   uint64_t unitBytes) {
  switch (kind) {
  case CollectiveKind::AllReduce:
  case CollectiveKind::Broadcast:
  case CollectiveKind::Reduce:
    return in == out;
  case CollectiveKind::AllGather:
    return in == out + rank * unitBytes;
  case CollectiveKind::ReduceScatter:
    return out == in + rank * unitBytes;
  default:
    return false;
  }
}

/// Whether a rank's program writes its input buffer.
bool writesInput(const RankPlan &rp) {
  for (const Threadblock &tb : rp.threadblocks)
    for (const Instruction &in : tb.steps)
      if (opcodeFlags(in.op).writeDst && in.dstBuf == BufferKind::Input)
        return true;
  return false;
}

/// Sets up \p b for rank \p r (see LocalWorld::run in Executor.h).
void bindRank(const Plan &plan, uint32_t r, const void *sendbuf, void *recvbuf,
              const BufferElements &elems, uint64_t count, size_t es, RankBinding &b) {
  CollectiveKind kind = plan.info.collective;
  char *in = static_cast<char *>(const_cast<void *>(sendbuf));
  char *out = static_cast<char *>(recvbuf);
  uint64_t inBytes = elems.input * es, outBytes = elems.output * es, unitBytes = count * es;
  b.input = in;
  b.output = out;
  if (count == 0)
    return;
  bool alias = isInPlaceCall(kind, r, in, out, unitBytes);
  bool overlap = overlaps(in, inBytes, out, outBytes);
  auto snapshot = [&] {
    b.inputCopy.assign(in, in + inBytes);
    return b.inputCopy.data();
  };

  if (!plan.info.inplace) {
    // Out-of-place plan: it must not see its output change under its input,
    // and must not write the user's (const) input.
    if (overlap || writesInput(plan.ranks[r]))
      b.input = snapshot();
    return;
  }
  if (alias)
    return; // The plan's one buffer is the user's.

  // In-place plan called out of place: put the input where the plan expects
  // it, leaving sendbuf untouched.
  const char *src = overlap ? snapshot() : in;
  switch (kind) {
  case CollectiveKind::AllGather:
    // Rank r's input is block r of its output.
    std::memcpy(out + r * unitBytes, src, unitBytes);
    b.input = out + r * unitBytes;
    break;
  case CollectiveKind::ReduceScatter:
    // The plan works in the whole input and leaves the result in block r:
    // run on a copy and copy block r out.
    if (!overlap)
      snapshot();
    b.input = b.inputCopy.data();
    b.output = b.input + r * unitBytes;
    b.copyOutFrom = b.output;
    b.copyOutTo = out;
    b.copyOutBytes = unitBytes;
    break;
  default:
    // allreduce, broadcast, reduce: output and input are the same slots.
    std::memcpy(out, src, unitBytes);
    b.input = out;
    break;
  }
}

/// "rank 1 threadblock 0 step 3 (rrs, slice 0)".
std::string where(const TbRun &t) {
  const ExecStatus &st = t.status;
  const char *mnemonic =
      st.step < t.tb->steps.size() ? opcodeInfo(t.tb->steps[st.step].op).mnemonic : "?";
  return cat("rank ", t.rank, " threadblock ", t.index, " step ", st.step, " (", mnemonic,
             ", slice ", st.slice, ")");
}

/// What a stopped threadblock was waiting for.
std::string waitedFor(const TbRun &t) {
  const ExecStatus &st = t.status;
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
               f.head.value.load(std::memory_order_acquire), " taken)");
  }
  case WaitKind::None:
    break;
  }
  return "nothing";
}

std::string formatSeconds(double s) {
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
std::string describeBlocked(const std::vector<TbRun *> &tbs, const std::string &firstVerb) {
  constexpr size_t maxListed = 8;
  std::string msg;
  size_t blocked = 0;
  for (const TbRun *t : tbs) {
    if (t->interp->finished() || ++blocked > maxListed)
      continue;
    msg += cat(blocked > 1 ? "; " : "", where(*t), blocked > 1 ? " waits for " : firstVerb.c_str(),
               waitedFor(*t));
  }
  if (blocked > maxListed)
    msg += cat("; and ", blocked - maxListed, " more");
  return msg;
}

/// Runs \p tbs round-robin, each until it finishes or blocks, until all
/// have finished. When none can move: in single mode (nothing else can
/// change the state) that is a deadlock, reported at once; otherwise the
/// worker paces itself with Backoff and fails after \p timeout seconds
/// without progress, or stops when another worker has failed.
WorkerResult runWorker(const std::vector<TbRun *> &tbs, WorldState &world, double timeout,
                       bool single) {
  Backoff backoff(timeout);
  for (;;) {
    bool progressed = false, unfinished = false;
    for (TbRun *t : tbs) {
      Interpreter<CpuPlatform> &interp = *t->interp;
      if (interp.finished())
        continue;
      uint64_t before = interp.stepsExecuted();
      t->status = interp.run();
      progressed |= interp.stepsExecuted() != before;
      unfinished |= !interp.finished();
    }
    WorkerResult result;
    if (!unfinished)
      return result;
    if (progressed) {
      backoff.reset();
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
    if (!backoff.pause()) {
      result.message =
          describeBlocked(tbs, ": timed out after " + formatSeconds(timeout) + " s waiting for ");
      return result;
    }
  }
}

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
        WorkerResult r = runWorker(tbs, world, timeout, /*single=*/false);
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

  // Slices no larger than the largest chunk keep the FIFOs small for small
  // counts.
  ChunkLayout layout = ChunkLayout::make(count, *chunks, 1);
  layout = ChunkLayout::make(
      count, *chunks, std::max<uint64_t>(1, std::min(options.sliceElements, layout.maxChunk)));
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
  std::vector<std::vector<std::unique_ptr<Fifo>>> fifos(nranks);
  std::vector<std::map<std::pair<int32_t, uint32_t>, uint32_t>> recvTb(nranks);
  for (uint32_t r = 0; r < nranks; ++r) {
    const RankPlan &rp = plan.ranks[r];
    RankState &rs = ranks[r];
    rs.buffers[unsigned(BufferKind::Input)] = bindings[r].input;
    rs.buffers[unsigned(BufferKind::Output)] = bindings[r].output;
    rs.buffers[unsigned(BufferKind::Scratch)] = bindings[r].scratch.data();
    rs.progress = std::make_unique<PaddedCounter[]>(rp.threadblocks.size());
    fifos[r].resize(rp.threadblocks.size());
    for (uint32_t b = 0; b < rp.threadblocks.size(); ++b) {
      const Threadblock &tb = rp.threadblocks[b];
      rs.numSteps.push_back(uint32_t(tb.steps.size()));
      if (tb.recvPeer < 0 || numSlices == 0)
        continue;
      uint32_t maxCount = 0;
      for (const Instruction &in : tb.steps)
        if (opcodeFlags(in.op).recv)
          maxCount = std::max(maxCount, in.count);
      if (maxCount == 0)
        continue;
      auto fifo = std::make_unique<Fifo>();
      fifo->depth = info.connectionDepth;
      fifo->slotBytes = maxCount * pieceBytes;
      fifo->memory = std::make_unique<char[]>(fifo->depth * fifo->slotBytes);
      fifos[r][b] = std::move(fifo);
      recvTb[r][{tb.recvPeer, tb.channel}] = b;
    }
  }

  std::vector<std::unique_ptr<TbRun>> runs;
  for (uint32_t r = 0; r < nranks; ++r) {
    const RankPlan &rp = plan.ranks[r];
    for (uint32_t b = 0; b < rp.threadblocks.size(); ++b) {
      const Threadblock &tb = rp.threadblocks[b];
      auto t = std::make_unique<TbRun>();
      t->tb = &tb;
      t->rank = r;
      t->index = b;
      t->program.steps = tb.steps.data();
      t->program.numSteps = uint32_t(tb.steps.size());
      t->program.deps = tb.deps.data();
      CpuPlatform &p = t->platform;
      p.world = &world;
      p.rankState = &ranks[r];
      p.rank = r;
      p.tb = b;
      p.layout = &layout;
      p.kernels = &kernels;
      p.pieceBytes = pieceBytes;
      p.recvFifo = fifos[r][b].get();
      if (tb.sendPeer >= 0) {
        auto &peerMap = recvTb[tb.sendPeer];
        auto it = peerMap.find({int32_t(r), tb.channel});
        if (it != peerMap.end())
          p.sendFifo = fifos[tb.sendPeer][it->second].get();
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
    WorkerResult r = runWorker(all, world, options.timeoutSeconds, /*single=*/true);
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
  for (uint32_t r = 0; r < nranks; ++r) {
    const RankBinding &b = bindings[r];
    if (b.copyOutBytes)
      std::memcpy(b.copyOutTo, b.copyOutFrom, b.copyOutBytes);
    if (op == RedOp::Avg && count > 0 && collectiveReduces(info.collective) &&
        collectiveDefinesOutput(info.collective, info.root, r))
      kernels.divide(recvbufs[r], count, nranks);
  }
  return Status::success();
}

} // namespace coll
