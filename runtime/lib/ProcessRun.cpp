//===- ProcessRun.cpp - The run of one rank of a process call -------------===//
//
// Idle workers spin, yield, then sleep on their rank's doorbell (a futex
// word in its control block) that senders and receivers ring after they
// publish, with a bounded sleep: every livenessIntervalSeconds a waiting
// rank beats its heartbeat and checks that the peers it has not finished
// the call with are alive and have not failed.
//
//===----------------------------------------------------------------------===//

#include "ProcessRun.h"

#include "ProcessRendezvous.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

namespace coll {
namespace detail {

namespace {

/// The pacing of an idle worker of a ProcessGroup run: spin, yield, then
/// sleep on the rank's doorbell; every liveness interval, check the peers.
class ShmPacer {
public:
  /// \p caller: this worker is the thread that called execute(), which
  /// counts as driving the network for the whole call already
  /// (ProcessGroup.cpp); the others count while they run.
  ShmPacer(JobControl &jc, uint64_t seq, const std::vector<TbRun *> &tbs, Clock::duration spin,
           Clock::duration yield, const PublishedCall *watch, bool caller)
      : jc(jc), seq(seq), tbs(tbs), bell(jc.me().bell),
        spin(spin, yield == Clock::duration::zero() && !jc.pinnedApart), yield(yield), watch(watch),
        caller(caller) {
    reset();
    nextCheck = Clock::now() + seconds(jc.options.livenessIntervalSeconds);
    if (jc.net && !caller)
      jc.net->pollerEnter();
  }
  ~ShmPacer() {
    // Hand UCX the messages our threadblocks published last, at once.
    if (jc.net) {
      jc.net->poll();
      if (!caller)
        jc.net->pollerLeave();
    }
  }
  ShmPacer(const ShmPacer &) = delete;
  ShmPacer &operator=(const ShmPacer &) = delete;

  void beginRound() {
    // seq_cst, before the pass over the threadblocks: a publication the
    // pass misses rings the bell after this load (see Doorbell::ring).
    seen = bell.seq.load(std::memory_order_seq_cst);
  }

  void reset() {
    rounds = 0;
    spin.reset();
    deadline = Clock::now() + seconds(jc.options.timeoutSeconds);
  }

  PaceResult pause(std::string &why) {
    // Connections across hosts move when a worker drives the network: a
    // message sent or received is progress for the next pass.
    if (jc.net && jc.net->poll())
      return PaceResult::Continue;
    ++rounds;
    if (rounds <= spinRounds) {
      cpuRelax();
      return PaceResult::Continue;
    }
    if (rounds == spinRounds + 1 && spin.spinning()) {
      --rounds; // Stay here while the spin lasts.
      return PaceResult::Continue;
    }
    if (rounds <= spinRounds + yieldRounds) {
      if (rounds == spinRounds + 1)
        yieldUntil = Clock::now() + yield;
      std::this_thread::yield();
      return PaceResult::Continue;
    }
    if (yield != Clock::duration::zero() && Clock::now() < yieldUntil) {
      --rounds; // Stay here while the yielding lasts.
      std::this_thread::yield();
      return PaceResult::Continue;
    }
    // A peer that called differently never sends what we wait for; it
    // rang our bell when it published.
    if (watch && peerDisagrees(jc, seq, *watch)) {
      kind = ErrorKind::Mismatch;
      why = cat("rank ", jc.rank, ": a peer called differently (call ", seq, ")");
      return PaceResult::Failed;
    }
    Clock::time_point now = Clock::now();
    if (now >= nextCheck) {
      jc.beat();
      nextCheck = now + seconds(jc.options.livenessIntervalSeconds);
      if (CallError f = jc.checkPeers(seq)) {
        kind = f.kind;
        why = f.message;
        return PaceResult::Failed;
      }
    }
    if (now >= deadline) {
      kind = ErrorKind::Timeout;
      why = peerNotes();
      return PaceResult::TimedOut;
    }
    // Sleep until rung, the next check or the deadline. Registering as a
    // sleeper (seq_cst) before the kernel compares `seq` with what the
    // pass saw closes the window in which a ring could be missed.
    Clock::time_point until = std::min(nextCheck, deadline);
    int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(until - now).count();
    // The network is the engine's thread's while we sleep (it rings the
    // bell for what arrives).
    if (jc.net)
      jc.net->pollerLeave();
    bell.sleepers.fetch_add(1, std::memory_order_seq_cst);
    if (bell.seq.load(std::memory_order_seq_cst) == seen)
      futexWait(&bell.seq, seen, std::max<int64_t>(ns, 1000));
    bell.sleepers.fetch_sub(1, std::memory_order_seq_cst);
    if (jc.net)
      jc.net->pollerEnter();
    return PaceResult::Continue;
  }

  ErrorKind kind = ErrorKind::None;

private:
  /// "; rank 3 (pid 77) is alive, ..." for every peer a blocked
  /// threadblock waits on, and for every other peer that has been silent
  /// (no heartbeat) for half the timeout: a stalled rank (stopped, stuck)
  /// that the peers waited on in turn.
  std::string peerNotes() const {
    std::vector<uint32_t> ranks;
    for (const TbRun *t : tbs) {
      if (t->interp->finished())
        continue;
      int32_t peer = t->status.waitKind == WaitKind::RecvMessage ? t->tb->recvPeer
                     : t->status.waitKind == WaitKind::SendSlot  ? t->tb->sendPeer
                                                                 : -1;
      if (peer >= 0 && uint32_t(peer) != jc.rank)
        ranks.push_back(uint32_t(peer));
    }
    const int64_t silentNs = int64_t(jc.options.timeoutSeconds * 0.5e9);
    for (uint32_t q = 0; q < jc.nranks; ++q)
      if (q != jc.rank && jc.ctl[q] &&
          nowNs() - jc.ctl[q]->heartbeatNs.load(std::memory_order_relaxed) > silentNs)
        ranks.push_back(q);
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    std::string out;
    for (uint32_t q : ranks)
      out += "; " + jc.describePeer(q);
    return out;
  }

  static constexpr uint32_t spinRounds = 32;
  static constexpr uint32_t yieldRounds = 8;

  JobControl &jc;
  uint64_t seq;
  const std::vector<TbRun *> &tbs;
  Doorbell &bell;
  SpinBudget spin;
  Clock::duration yield;
  Clock::time_point yieldUntil;
  const PublishedCall *watch;
  const bool caller;
  uint32_t seen = 0;
  uint32_t rounds = 0;
  Clock::time_point deadline, nextCheck;
};

} // namespace

void RankRun::build(JobControl &jc, const RankPlan &rp, const ChunkLayout &layout,
                    const HostKernels &kernels, CallFifos &callFifos, const OwnDataSegment &own) {
  const uint32_t me = jc.rank;
  const uint64_t pieceBytes = layout.sliceElements * kernels.elementSize;
  const size_t ntb = rp.threadblocks.size();
  const size_t nworkers = jc.options.workers ? std::min<size_t>(jc.options.workers, ntb) : ntb;
  fifos = &callFifos;
  numSlices = layout.numSlices;
  rs.progress = own.progress();
  rs.progressBell = nworkers > 1 ? &jc.me().bell : nullptr;
  for (uint32_t b = 0; b < ntb; ++b) {
    const Threadblock &tb = rp.threadblocks[b];
    rs.numSteps.push_back(uint32_t(tb.steps.size()));
    auto t = makeTbRun(tb, me, b, world, rs, layout, kernels, pieceBytes);
    CpuPlatform &p = t->platform;
    p.recvFifo = callFifos.recvFifo(b);
    p.sendFifo = callFifos.sendFifo(b);
    armLineStages(*t);
    t->interp = std::make_unique<Interpreter<CpuPlatform>>(p, t->program, numSlices);
    runs.push_back(std::move(t));
  }
  workers.assign(nworkers, {});
  for (size_t b = 0; b < ntb; ++b)
    workers[b % nworkers].push_back(runs[b].get());
}

CallError RankRun::run(JobControl &jc, uint64_t seq, const RankPlan &rp,
                       const std::vector<std::vector<Instruction>> *steps,
                       const DirectSteps &direct, uint8_t directBuffers, char *input, char *output,
                       void *const *inputBlocks, void *const *outputBlocks, char *scratch,
                       const PublishedCall *watch) {
  const uint32_t me = jc.rank;
  ControlBlock &ctl = jc.me();
  world.failed.store(false, std::memory_order_relaxed);
  rs.buffers[unsigned(BufferKind::Input)] = input;
  rs.buffers[unsigned(BufferKind::Output)] = output;
  rs.blocks[unsigned(BufferKind::Input)] = inputBlocks;
  rs.blocks[unsigned(BufferKind::Output)] = outputBlocks;
  rs.buffers[unsigned(BufferKind::Scratch)] = scratch;
  for (size_t b = 0; b < runs.size(); ++b) {
    const Threadblock &tb = rp.threadblocks[b];
    restartTbRun(*runs[b], tb, steps ? (*steps)[b].data() : tb.steps.data(), numSlices);
    rs.progress[b].value.store(0, std::memory_order_relaxed);
    armDirectSends(*runs[b], direct, directBuffers);
  }
  const size_t nworkers = workers.size();
  // Ranks bound to CPUs of their own, one worker each, never wait for a
  // thread on their CPU; otherwise every rank has as many workers as this
  // one, as far as it can tell.
  const bool apart = jc.pinnedApart && nworkers == 1;
  const Clock::duration spin = apart ? spinTime(1) : spinTime(uint64_t(jc.nranks) * nworkers);
  const Clock::duration yield =
      apart ? Clock::duration::zero() : yieldTime(uint64_t(jc.nranks) * nworkers);

  FirstError first;
  auto fail = [&](ErrorKind kind, std::string message) {
    first.set(world, kind, std::move(message));
    ctl.bell.ring(); // Our other workers may sleep.
  };
  runWorkerThreads(
      nworkers, /*callerWorks=*/true, world, first,
      [&](size_t w) {
        const std::vector<TbRun *> &tbs = workers[w];
        try {
          ShmPacer pacer(jc, seq, tbs, spin, yield, watch, /*caller=*/w == 0);
          WorkerResult r =
              runWorker(tbs, world, pacer, jc.options.timeoutSeconds, /*single=*/false);
          if (!r.ok && !r.aborted)
            fail(pacer.kind == ErrorKind::None ? ErrorKind::Internal : pacer.kind, r.message);
        } catch (const PeerReadError &e) {
          // A direct message we could not fetch: its sender died (its
          // memory went with it), or no longer lets us read.
          try {
            if (CallError peer = jc.checkPeers(seq))
              fail(peer.kind, peer.message);
            else if (e.error == ESRCH && e.peer < jc.nranks)
              fail(ErrorKind::Remote,
                   cat("rank ", me, ": rank ", e.peer, " (pid ", jc.ctl[e.peer]->pid,
                       ") died during call ", seq, " (", e.what(), ")"));
            else
              fail(ErrorKind::SystemError,
                   cat("rank ", me, ": ", e.what(), " (", where(*tbs.front()), ")"));
          } catch (...) {
            first.setKind(world, ErrorKind::SystemError);
            ctl.bell.ring();
          }
        } catch (...) {
          // Building the message may throw in turn (out of memory again): no
          // exception may leave a worker thread.
          try {
            auto [what, kind] = currentException();
            fail(kind, cat("rank ", me, ": ", what, " while running call ", seq, " (",
                           where(*tbs.front()), ")"));
          } catch (...) {
            first.setKind(world, ErrorKind::SystemError);
            ctl.bell.ring();
          }
        }
      },
      [me] { return cat("rank ", me, ": "); }, [&] { ctl.bell.ring(); });
  if (!world.failed.load(std::memory_order_relaxed))
    return {};
  CallError error{first.kind, first.message};
  if (error.message.empty())
    error = {error ? error.kind : ErrorKind::Internal, cat("rank ", me, ": the run was aborted")};
  return error;
}

uint64_t RankRun::directReceived() const {
  uint64_t n = 0;
  for (const std::unique_ptr<TbRun> &t : runs)
    n += t->platform.directReceived;
  return n;
}

} // namespace detail
} // namespace coll
