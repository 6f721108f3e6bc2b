//===- ProcessGroup.cpp - One rank per process over POSIX shared memory ---===//
//
// Segments of job J (every name starts with "/coll-J."):
//  - "/coll-J.<rank>", the rank's control block (ControlBlock): who owns it
//    (pid, the pid's start time, a nonce), which instance of the job it
//    belongs to, whether it is ready, failed or closed, its heartbeat, its
//    doorbell, and its last two calls' descriptions (PublishedCall), for
//    the other ranks to check;
//  - "/coll-J.<rank>.<call>", the rank's data for one call (DataHeader):
//    its threadblocks' progress counters and the FIFOs of the connections
//    it receives on, found by its senders through a table (FifoEntry).
//
// Joining: a job name may be reused at once (a job that ends and starts
// again), so a segment of the right name may belong to the previous
// instance, still alive for a moment. Rank 0's nonce names the instance:
// every other rank asks to join it (ControlBlock::member = the nonce) and
// rank 0 admits each asking segment with a compare-and-swap (member = the
// nonce | 1), one segment per rank. A rank has joined once it is admitted
// and has found every other rank's admitted segment (segments of any other
// instance never carry that mark); create() returns once every rank has
// joined (ControlBlock::joined), so that no rank leaves while a peer still
// looks for its segment.
//
// A call: every rank creates its data segment, publishes its call's
// description (PreparedCall.h) and
// rings every peer's doorbell, then waits until every peer has published
// the same call. All ranks then hold the same N descriptions and reach the
// same verdict: an argument error or a mismatch fails the call everywhere
// (the group stays usable), anything else runs. Senders map their
// receivers' data segments; each rank's threadblocks run on its workers
// (Interpreter<CpuPlatform>, as in LocalWorld) until done. A data segment's
// name goes as soon as its last sender has mapped it (at once when it has
// none), and in any case when its owner's call ends: a job killed as a
// whole in the middle of a run leaves no call data behind. Control segments
// stay named while their group lives (a process that claims a live rank
// must find it taken); the next job to start on the host (its rank 0)
// removes those whose owners have been dead for a while
// (removeDeadSegments).
//
// A rank's descriptions of calls k and k+1 live in two slots: a rank cannot
// publish call k+2 before every rank published call k+1, which each does
// only after reading everybody's call k.
//
// Idle workers spin, yield, then sleep on their rank's doorbell (a futex
// word in its control block) that senders and receivers ring after they
// publish, with a bounded sleep: every livenessIntervalSeconds a waiting
// rank beats its heartbeat and checks that the peers it has not finished
// the call with are alive and have not failed.
//
//===----------------------------------------------------------------------===//

#include "coll/Runtime/ProcessGroup.h"

#include "ExecCommon.h"
#include "ShmSegment.h"
#include "coll/Runtime/PlanIO.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <limits>
#include <map>
#include <mutex>
#include <new>
#include <optional>
#include <random>
#include <sys/mman.h>
#include <sys/stat.h>
#include <system_error>
#include <thread>
#include <unistd.h>

#ifdef __linux__
#include <dirent.h>
#include <sys/prctl.h>
#endif

namespace coll {

using namespace detail;

namespace {

static_assert(std::atomic<uint64_t>::is_always_lock_free &&
                  std::atomic<int64_t>::is_always_lock_free,
              "counters in shared memory must be lock-free (address-free) atomics");

constexpr uint64_t controlMagic = 0x314c54434c4c4f43ull; ///< "COLLCTL1"
constexpr uint64_t dataMagic = 0x314154414c4c4f43ull;    ///< "COLLDAT1"
constexpr uint32_t controlVersion = 3;
/// The bytes of a control segment that every layout version shares: its
/// magic and version.
constexpr size_t controlPrefixBytes = 16;
/// How long the owner of a segment must have been silent (no heartbeat,
/// for a data segment no creation) before another job removes it.
constexpr int64_t deadSegmentGraceNs = 5'000'000'000;
constexpr size_t maxJobName = 200;

/// One rank's description of one call (PreparedCall.h), for the others to
/// compare.
struct PublishedCall {
  uint64_t seq = 0; ///< The call (1, 2, ...).
  CallDescription description;
};

/// The head of a rank's control segment. Plain fields are written before
/// `ready` is set (release) and never again; the atomics change later.
struct ControlBlock {
  uint64_t magic = 0;
  uint32_t version = 0;
  uint32_t bytes = 0;
  uint32_t nranks = 0;
  uint32_t rank = 0;
  int64_t pid = 0;
  uint64_t startTime = 0;    ///< processStartTime(pid).
  uint64_t nonce = 0;        ///< Random, even, per group: tells this rank's segments apart.
  uint64_t pidNamespace = 0; ///< pidNamespaceId() of the owner.

  alignas(64) std::atomic<uint32_t> ready{0}; ///< Set once the fields above are.
  /// The instance of the job this segment belongs to: rank 0's nonce (0:
  /// not yet known), | 1 once rank 0 has admitted it (rank 0: at once).
  std::atomic<uint64_t> member{0};
  std::atomic<uint32_t> joined{0};     ///< Has mapped every rank's admitted segment.
  std::atomic<uint32_t> failed{0};     ///< Set once `failure` is written.
  std::atomic<uint32_t> closed{0};     ///< The group was destroyed.
  std::atomic<uint32_t> failing{0};    ///< Claims the right to write `failure`.
  std::atomic<uint64_t> callSeq{0};    ///< Calls published (calls[seq % 2]).
  std::atomic<uint64_t> doneSeq{0};    ///< Calls finished, successfully or not.
  std::atomic<int64_t> heartbeatNs{0}; ///< Steady clock of the last sign of life.

  Doorbell bell; ///< Rung when something this rank may wait for changes.

  PublishedCall calls[2];
  uint32_t failureOrigin = 0; ///< The rank whose error `failure` is.
  char failure[1536] = {};    ///< Why the rank failed.
};

/// The head of a rank's data segment for one call. Written before the
/// segment gets its full size, `magic` last (release): a reader that sees
/// it (acquire) sees the rest.
struct alignas(64) DataHeader {
  std::atomic<uint64_t> magic{0};
  uint64_t nonce = 0; ///< The owner's ControlBlock::nonce.
  uint64_t seq = 0;
  uint64_t bytes = 0;
  uint32_t rank = 0;
  uint32_t numTbs = 0;
  uint32_t numFifos = 0;
  uint32_t pad = 0;
  // The owner, its start time and pid namespace, and when it created the
  // segment: for removeDeadSegments.
  int64_t pid = 0;
  uint64_t startTime = 0;
  uint64_t pidNamespace = 0;
  int64_t createdNs = 0;
  /// Sending ranks that have not mapped the segment yet: the one that
  /// brings it to 0 unlinks the name.
  std::atomic<uint32_t> unmappedSenders{0};
};

/// Where a FIFO of the owner's lies, for its sender.
struct FifoEntry {
  int32_t peer = -1; ///< The sending rank.
  uint32_t channel = 0;
  uint32_t depth = 0;
  uint32_t tb = 0; ///< The receiving threadblock.
  uint64_t slotBytes = 0;
  uint64_t countersOffset = 0; ///< Two PaddedCounters: tail, head.
  uint64_t slotsOffset = 0;
};

constexpr uint64_t align64(uint64_t n) {
  return (n + 63) & ~uint64_t(63);
}

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

std::string controlName(const std::string &job, uint32_t rank) {
  return cat("/coll-", job, ".", rank);
}

std::string dataName(const std::string &job, uint32_t rank, uint64_t seq) {
  return cat("/coll-", job, ".", rank, ".", seq);
}

std::string allocName(const std::string &job, uint32_t rank, uint64_t id) {
  return cat("/coll-", job, ".", rank, ".m", id);
}

void copyText(char *dst, size_t size, const std::string &text) {
  size_t n = std::min(size - 1, text.size());
  std::memcpy(dst, text.data(), n);
  dst[n] = 0;
}

/// A random, even, non-zero 64-bit number (the low bit marks admission).
uint64_t makeNonce() {
  std::random_device rd;
  uint64_t v = (uint64_t(rd()) << 32) ^ rd();
  v = (v ^ uint64_t(nowNs()) ^ (uint64_t(getpid()) << 20)) & ~uint64_t(1);
  return v ? v : 2;
}

/// The pid namespace of this process (the inode of /proc/self/ns/pid), or
/// 0 where unknown: a pid means something only within its namespace.
uint64_t pidNamespaceId() {
  struct stat st;
  if (stat("/proc/self/ns/pid", &st) != 0)
    return 0;
  return uint64_t(st.st_ino);
}

/// Whether the owner of a segment (\p pid started at \p startTime in pid
/// namespace \p ns, last seen alive at \p lastSeenNs) is dead, and has been
/// silent long enough that nobody is still busy with its segments.
bool ownerLongDead(int64_t pid, uint64_t startTime, uint64_t ns, int64_t lastSeenNs) {
  static const uint64_t ourNs = pidNamespaceId();
  return ns != 0 && ns == ourNs && nowNs() - lastSeenNs > deadSegmentGraceNs &&
         !processAlive(pid, startTime);
}

/// Whether a segment's owner lives in another pid namespace than ours: its
/// pid means nothing here, so it counts as alive, and its segments are
/// never removed.
bool otherPidNamespace(uint64_t ns) {
  static const uint64_t ourNs = pidNamespaceId();
  return ns != ourNs;
}

bool validJobName(const std::string &job);

/// Whether a control segment's \p version is another layout's (0: its
/// header is still being written).
bool otherVersion(uint32_t version) {
  return version != 0 && version != controlVersion;
}

/// The error for control segment \p name of layout \p version (not ours):
/// another Collc's, which we cannot judge.
std::string otherLayout(const std::string &name, uint32_t version) {
  return cat("shared memory ", name, " is a control segment of layout version ", version,
             " (this is version ", controlVersion,
             "): a job of another Collc version uses the name, or left it behind (remove it "
             "once no such job runs)");
}

/// Whether \p n (without the leading '/') is a control or data segment's
/// name: "coll-J.<rank>" or "coll-J.<rank>.<call>".
bool segmentNamePattern(const std::string &n) {
  if (n.compare(0, 5, "coll-") != 0)
    return false;
  size_t dot = n.find('.', 5);
  if (dot == std::string::npos || !validJobName(n.substr(5, dot - 5)))
    return false;
  int numbers = 0;
  for (size_t at = dot; at != std::string::npos && at < n.size(); ++numbers) {
    size_t next = n.find('.', at + 1);
    std::string part = n.substr(at + 1, next == std::string::npos ? next : next - at - 1);
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos)
      return false;
    at = next;
  }
  return numbers == 1 || numbers == 2;
}

bool validJobName(const std::string &job) {
  if (job.empty() || job.size() > maxJobName)
    return false;
  for (char c : job)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '-'))
      return false;
  return true;
}

/// An error and its kind.
struct Failure {
  ErrorKind kind = ErrorKind::None;
  std::string message;
  explicit operator bool() const { return kind != ErrorKind::None; }
};

} // namespace

struct ProcessGroup::State {
  std::string job;
  uint32_t rank = 0;
  uint32_t nranks = 0;
  ProcessGroupOptions options;
  ShmMapping own;                  ///< This rank's control segment.
  std::vector<ShmMapping> peers;   ///< Every peer's control segment (own: unmapped).
  std::vector<ControlBlock *> ctl; ///< Every rank's control block, this one included.
  /// Dead peers whose names were unlinked (by any of our workers).
  std::unique_ptr<std::atomic<bool>[]> cleaned;
  uint64_t seq = 0; ///< Calls made.
  Failure broken;   ///< A run failed: the group is unusable.
  /// Guards allocations and allocationsMade: allocate() and deallocate()
  /// may run on one thread while execute() runs on another.
  std::mutex allocationsMutex;
  std::map<char *, ShmMapping> allocations;
  uint64_t allocationsMade = 0;
  std::atomic<bool> inCall{false}; ///< An execute() runs.
  const char *phase = "";          ///< What the running execute() does, for errors.

  ControlBlock &me() const { return *ctl[rank]; }

  /// Rings every rank's doorbell but ours.
  void ringPeers() const {
    for (uint32_t q = 0; q < nranks; ++q)
      if (q != rank && ctl[q])
        ctl[q]->bell.ring();
  }

  void beat() const { me().heartbeatNs.store(nowNs(), std::memory_order_relaxed); }

  /// Whether peer \p q is gone: closed, or its process is dead.
  bool peerGone(uint32_t q) const {
    const ControlBlock &c = *ctl[q];
    return c.closed.load(std::memory_order_acquire) || !processAlive(c.pid, c.startTime);
  }

  /// Unlinks the names of dead peer \p q, once: its data segments of the
  /// calls it may have created (when they carry its nonce, or have no
  /// header yet), then its control segment (when the name is still the one
  /// we mapped).
  void cleanUpPeer(uint32_t q) {
    if (q == rank || cleaned[q].exchange(true, std::memory_order_relaxed))
      return;
    const ControlBlock &c = *ctl[q];
    std::string name = controlName(job, q);
    uint64_t last = c.callSeq.load(std::memory_order_acquire);
    for (uint64_t s = last; s <= last + 1; ++s) {
      if (s == 0)
        continue;
      ShmOps::unlinkIfStale(dataName(job, q, s), [&](const ShmMapping &m, const struct stat &) {
        const DataHeader *h = m.size() >= sizeof(DataHeader)
                                  ? reinterpret_cast<const DataHeader *>(m.data())
                                  : nullptr;
        if (h && h->nonce == c.nonce)
          return true;
        // No header yet: the peer died between creating the segment and
        // writing it. While its control segment is still the one we
        // mapped, no new process has claimed rank q, so the segment is the
        // dead peer's.
        return (!h || h->magic != dataMagic) &&
               segmentIs(name, peers[q].device(), peers[q].inode());
      });
    }
    ShmOps::unlinkIfStale(name, [&](const ShmMapping &, const struct stat &sb) {
      return sb.st_dev == peers[q].device() && sb.st_ino == peers[q].inode();
    });
  }

  /// Unlinks the names of every peer that died (of those create() found).
  void cleanUpDeadPeers() {
    for (uint32_t q = 0; q < nranks; ++q)
      if (q != rank && ctl[q] && !cleaned[q].load(std::memory_order_relaxed) &&
          !processAlive(ctl[q]->pid, ctl[q]->startTime))
        cleanUpPeer(q);
  }

  /// Records this rank's failure for its peers (the first one only) and
  /// wakes them.
  void publishFailure(const std::string &message, uint32_t origin) {
    ControlBlock &c = me();
    if (c.failing.exchange(1, std::memory_order_acq_rel) == 0) {
      c.failureOrigin = origin;
      copyText(c.failure, sizeof c.failure, message);
      c.failed.store(1, std::memory_order_release);
    }
    ringPeers();
  }

  /// A failed peer (preferring a rank whose failure is its own) as a
  /// Remote error with its message, or none.
  Failure failedPeer() const {
    int failedRank = -1;
    for (uint32_t q = 0; q < nranks; ++q) {
      const ControlBlock &c = *ctl[q];
      if (q != rank && c.failed.load(std::memory_order_acquire) &&
          (failedRank < 0 || (c.failureOrigin == q &&
                              ctl[uint32_t(failedRank)]->failureOrigin != uint32_t(failedRank))))
        failedRank = int(q);
    }
    if (failedRank < 0)
      return {};
    const ControlBlock &c = *ctl[uint32_t(failedRank)];
    std::string msg(c.failure, strnlen(c.failure, sizeof c.failure));
    return {ErrorKind::Remote, cat("rank ", failedRank, " failed: ", msg)};
  }

  /// The first problem among the peers that have not finished call \p seq:
  /// a dead or departed rank (named with its pid), else a failed one
  /// (preferring a rank whose failure is its own).
  Failure checkPeers(uint64_t seq) {
    Failure found;
    int failedRank = -1;
    for (uint32_t q = 0; q < nranks; ++q) {
      if (q == rank)
        continue;
      const ControlBlock &c = *ctl[q];
      // A failed rank matters even when it finished this call's setup:
      // doneSeq only counts calls that ended without breaking the group.
      if (c.failed.load(std::memory_order_acquire)) {
        failedRank = int(q);
        continue;
      }
      if (c.doneSeq.load(std::memory_order_acquire) >= seq)
        continue;
      // A rank finishes a call before it closes: read doneSeq again after
      // seeing it closed, or a rank that finished meanwhile looks departed.
      if (c.closed.load(std::memory_order_acquire) &&
          c.doneSeq.load(std::memory_order_acquire) < seq) {
        found = {ErrorKind::Remote,
                 cat("rank ", q, " (pid ", c.pid, ") left the job during call ", seq)};
        return found;
      }
      if (!processAlive(c.pid, c.startTime)) {
        cleanUpPeer(q);
        found = {ErrorKind::Remote, cat("rank ", q, " (pid ", c.pid, ") died during call ", seq)};
        return found;
      }
    }
    if (failedRank >= 0)
      found = failedPeer();
    return found;
  }

  /// How peer \p q is doing, for a timeout message.
  std::string describePeer(uint32_t q) const {
    const ControlBlock &c = *ctl[q];
    double ago = double(nowNs() - c.heartbeatNs.load(std::memory_order_relaxed)) / 1e9;
    char beat[32];
    std::snprintf(beat, sizeof beat, "%.3g", ago < 0 ? 0.0 : ago);
    return cat("rank ", q, " (pid ", c.pid, ") is ",
               processAlive(c.pid, c.startTime) ? "alive" : "dead", ", has published call ",
               c.callSeq.load(std::memory_order_acquire), " and finished call ",
               c.doneSeq.load(std::memory_order_acquire), ", last heartbeat ", beat, " s ago");
  }
};

namespace {

/// The pacing of an idle worker of a ProcessGroup run: spin, yield, then
/// sleep on the rank's doorbell; every liveness interval, check the peers.
class ShmPacer {
public:
  ShmPacer(ProcessGroup::State &st, uint64_t seq, const std::vector<TbRun *> &tbs)
      : st(st), seq(seq), tbs(tbs), bell(st.me().bell) {
    reset();
    nextCheck = Clock::now() + seconds(st.options.livenessIntervalSeconds);
  }

  void beginRound() {
    // seq_cst, before the pass over the threadblocks: a publication the
    // pass misses rings the bell after this load (see Doorbell::ring).
    seen = bell.seq.load(std::memory_order_seq_cst);
  }

  void reset() {
    rounds = 0;
    deadline = Clock::now() + seconds(st.options.timeoutSeconds);
  }

  PaceResult pause(std::string &why) {
    ++rounds;
    if (rounds <= spinRounds) {
      cpuRelax();
      return PaceResult::Continue;
    }
    if (rounds <= spinRounds + yieldRounds) {
      std::this_thread::yield();
      return PaceResult::Continue;
    }
    Clock::time_point now = Clock::now();
    if (now >= nextCheck) {
      st.beat();
      nextCheck = now + seconds(st.options.livenessIntervalSeconds);
      if (Failure f = st.checkPeers(seq)) {
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
    bell.sleepers.fetch_add(1, std::memory_order_seq_cst);
    if (bell.seq.load(std::memory_order_seq_cst) == seen)
      futexWait(&bell.seq, seen, std::max<int64_t>(ns, 1000));
    bell.sleepers.fetch_sub(1, std::memory_order_seq_cst);
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
      if (peer >= 0 && uint32_t(peer) != st.rank)
        ranks.push_back(uint32_t(peer));
    }
    const int64_t silentNs = int64_t(st.options.timeoutSeconds * 0.5e9);
    for (uint32_t q = 0; q < st.nranks; ++q)
      if (q != st.rank && st.ctl[q] &&
          nowNs() - st.ctl[q]->heartbeatNs.load(std::memory_order_relaxed) > silentNs)
        ranks.push_back(q);
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    std::string out;
    for (uint32_t q : ranks)
      out += "; " + st.describePeer(q);
    return out;
  }

  static constexpr uint32_t spinRounds = 32;
  static constexpr uint32_t yieldRounds = 8;

  ProcessGroup::State &st;
  uint64_t seq;
  const std::vector<TbRun *> &tbs;
  Doorbell &bell;
  uint32_t seen = 0;
  uint32_t rounds = 0;
  Clock::time_point deadline, nextCheck;
};

/// This rank's data segment of one call, laid out.
struct DataLayout {
  uint64_t bytes = 0;
  uint64_t tableOffset = 0;
  uint64_t progressOffset = 0;
  std::vector<FifoEntry> fifos;
};

/// Lays out rank \p r's data segment: header, FIFO table, progress
/// counters, then each receiving threadblock's counters and slots.
Result<DataLayout> layOutData(const Plan &plan, uint32_t r, uint64_t pieceBytes) {
  const RankPlan &rp = plan.ranks[r];
  DataLayout d;
  for (uint32_t b = 0; b < rp.threadblocks.size(); ++b) {
    const Threadblock &tb = rp.threadblocks[b];
    uint32_t maxCount = tb.recvPeer >= 0 ? maxMessageChunks(tb, /*recv=*/true) : 0;
    if (maxCount == 0)
      continue;
    FifoEntry e;
    e.peer = tb.recvPeer;
    e.channel = tb.channel;
    e.depth = plan.info.connectionDepth;
    e.tb = b;
    e.slotBytes = uint64_t(maxCount) * pieceBytes;
    d.fifos.push_back(e);
  }
  d.tableOffset = align64(sizeof(DataHeader));
  d.progressOffset = align64(d.tableOffset + d.fifos.size() * sizeof(FifoEntry));
  uint64_t at = d.progressOffset + rp.threadblocks.size() * sizeof(PaddedCounter);
  constexpr uint64_t limit = uint64_t(1) << 40;
  for (FifoEntry &e : d.fifos) {
    e.countersOffset = align64(at);
    e.slotsOffset = e.countersOffset + 2 * sizeof(PaddedCounter);
    if (e.slotBytes > limit / e.depth)
      return Status::error(cat("the FIFO of rank ", r, " threadblock ", e.tb, " would need ",
                               e.depth, " slots of ", e.slotBytes, " bytes"));
    at = e.slotsOffset + e.depth * e.slotBytes;
    if (at > limit)
      return Status::error(cat("rank ", r, "'s connections would need more than ", limit,
                               " bytes of shared memory"));
  }
  d.bytes = align64(at);
  return d;
}

} // namespace

ProcessGroup::ProcessGroup() : state(std::make_unique<State>()) {}

int ProcessGroup::rank() const {
  return int(state->rank);
}

int ProcessGroup::size() const {
  return int(state->nranks);
}

const std::string &ProcessGroup::jobName() const {
  return state->job;
}

Result<std::unique_ptr<ProcessGroup>> ProcessGroup::create(const std::string &jobName, int rank,
                                                           int nranks,
                                                           const ProcessGroupOptions &options,
                                                           ErrorKind *errorKind) {
  auto fail = [&](ErrorKind kind, std::string msg) -> Result<std::unique_ptr<ProcessGroup>> {
    if (errorKind)
      *errorKind = kind;
    return Status::error(std::move(msg));
  };
  if (errorKind)
    *errorKind = ErrorKind::None;
  if (!validJobName(jobName))
    return fail(ErrorKind::InvalidArgument,
                cat("invalid job name '", jobName, "': 1 to ", maxJobName,
                    " characters of A-Z, a-z, 0-9, '_' and '-'"));
  if (nranks < 1 || uint64_t(nranks) > PlanLimits::maxRanks)
    return fail(ErrorKind::InvalidArgument, cat("the number of ranks must be in [1, ",
                                                PlanLimits::maxRanks, "], not ", nranks));
  if (rank < 0 || rank >= nranks)
    return fail(ErrorKind::InvalidArgument,
                cat("rank ", rank, " is out of range: the job has ", nranks, " ranks"));
  auto badSeconds = [](double s) { return !(s > 0) || s > 1e9; };
  if (badSeconds(options.setupTimeoutSeconds) || badSeconds(options.timeoutSeconds) ||
      badSeconds(options.livenessIntervalSeconds))
    return fail(ErrorKind::InvalidArgument,
                cat("the setup timeout, timeout and liveness interval must be in (0, 1e9] "
                    "seconds, not ",
                    formatSeconds(options.setupTimeoutSeconds), ", ",
                    formatSeconds(options.timeoutSeconds), ", ",
                    formatSeconds(options.livenessIntervalSeconds)));
  if (options.sliceElements == 0)
    return fail(ErrorKind::InvalidArgument, "the slice size must be at least 1 element");

  // A good moment to remove what jobs killed as a whole left: once per job.
  // Our own job's names are left to their ranks, which replace them.
  if (rank == 0)
    removeDeadSegments(jobName);

  std::unique_ptr<ProcessGroup> group(new ProcessGroup());
  State &st = *group->state;
  st.job = jobName;
  st.rank = uint32_t(rank);
  st.nranks = uint32_t(nranks);
  st.options = options;
  st.peers.resize(st.nranks);
  st.ctl.assign(st.nranks, nullptr);
  st.cleaned.reset(new std::atomic<bool>[st.nranks]());
  const Clock::time_point deadline = Clock::now() + seconds(options.setupTimeoutSeconds);
  const std::string ownName = controlName(jobName, st.rank);

  // Our own segment. A segment of our name is stale when its owner is dead
  // (or closed it); one with a live owner means the rank is taken. One
  // without a header yet is being created: stale only when that has taken
  // a second. The stale one is judged again and unlinked under its lock
  // (ShmOps::unlinkIfStale), as every other judge of it does: a peer that
  // judged the old segment never unlinks the new one.
  auto staleControl = [](const ShmMapping &m, const struct stat &sb) {
    const ControlBlock *p = reinterpret_cast<const ControlBlock *>(m.data());
    if (m.size() >= controlPrefixBytes && p->magic == controlMagic && otherVersion(p->version))
      return false; // Not ours to judge.
    if (m.size() >= sizeof(ControlBlock)) {
      const ControlBlock &c = *p;
      if (c.magic == controlMagic && c.ready.load(std::memory_order_acquire))
        return c.closed.load(std::memory_order_acquire) ||
               (!otherPidNamespace(c.pidNamespace) && !processAlive(c.pid, c.startTime));
    }
    return segmentAgeNs(sb) > 1'000'000'000;
  };
  for (;;) {
    ShmOpenResult r;
    if (Status s = ShmOps::create(ownName, sizeof(ControlBlock), st.own, r); !s)
      return fail(ErrorKind::SystemError, s.message());
    if (r == ShmOpenResult::Mapped)
      break;
    // Magic and version first (another layout may be smaller), then
    // liveness.
    ShmMapping old;
    if (Status s = ShmOps::open(ownName, controlPrefixBytes, old, r); !s)
      return fail(ErrorKind::SystemError, s.message());
    if (r == ShmOpenResult::Mapped) {
      const ControlBlock &c = *reinterpret_cast<const ControlBlock *>(old.data());
      if (c.magic == controlMagic && otherVersion(c.version))
        return fail(ErrorKind::Mismatch, otherLayout(ownName, c.version));
      if (old.size() >= sizeof(ControlBlock) && c.magic == controlMagic &&
          c.ready.load(std::memory_order_acquire) && !c.closed.load(std::memory_order_acquire) &&
          (otherPidNamespace(c.pidNamespace) || processAlive(c.pid, c.startTime)))
        return fail(ErrorKind::InvalidArgument,
                    cat("rank ", rank, " of job '", jobName, "' is taken by process ", c.pid,
                        otherPidNamespace(c.pidNamespace) ? " of another pid namespace" : "",
                        " (shared memory ", ownName, ")"));
    }
    old.reset();
    if (!ShmOps::unlinkIfStale(ownName, staleControl))
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (Clock::now() > deadline)
      return fail(ErrorKind::Timeout, cat("cannot claim rank ", rank, " of job '", jobName,
                                          "': shared memory ", ownName, " stays in the way"));
  }
  ControlBlock *me = new (st.own.data()) ControlBlock();
  st.ctl[st.rank] = me;
  me->magic = controlMagic;
  me->version = controlVersion;
  me->bytes = uint32_t(sizeof(ControlBlock));
  me->nranks = st.nranks;
  me->rank = st.rank;
  me->pid = getpid();
  me->startTime = processStartTime(me->pid);
  me->nonce = makeNonce();
  me->pidNamespace = pidNamespaceId();
  if (st.rank == 0)
    me->member.store(me->nonce | 1, std::memory_order_relaxed);
  me->heartbeatNs.store(nowNs(), std::memory_order_relaxed);
  // Release: peers that see `ready` see every field above.
  me->ready.store(1, std::memory_order_release);

  // Join the instance of the job that rank 0 names (see the file comment).
  uint32_t sleepUs = 50;
  // Sleeps a little; fails when our name no longer names our segment (a
  // process of another job, or a cleanup tool, removed it): no peer could
  // find us any more.
  auto pause = [&]() -> Failure {
    st.beat();
    std::this_thread::sleep_for(std::chrono::microseconds(sleepUs));
    sleepUs = std::min<uint32_t>(sleepUs * 2, 10000);
    if (!segmentIs(ownName, st.own.device(), st.own.inode()))
      return {ErrorKind::SystemError,
              cat("rank ", rank, " of job '", jobName, "': its shared memory ", ownName,
                  " was removed by another process while the job was being set up")};
    return {};
  };
  // Maps rank q's segment when it is there and ready (else c is null);
  // `gone` when its owner closed it or died. A live segment of another
  // layout or shape is a mismatch.
  auto openPeer = [&](uint32_t q, ControlBlock *&c, bool &gone) -> Failure {
    c = nullptr;
    gone = false;
    ShmOpenResult r;
    if (Status s = ShmOps::open(controlName(jobName, q), controlPrefixBytes, st.peers[q], r); !s)
      return {ErrorKind::SystemError, s.message()};
    if (r != ShmOpenResult::Mapped)
      return {};
    ControlBlock *b = reinterpret_cast<ControlBlock *>(st.peers[q].data());
    // The version first: another layout may be smaller than ours.
    if (b->magic == controlMagic && otherVersion(b->version))
      return {ErrorKind::Mismatch,
              cat("rank ", q, " of job '", jobName, "' uses shared-memory layout version ",
                  b->version, ", rank ", rank, " version ", controlVersion)};
    if (st.peers[q].size() < sizeof(ControlBlock) || b->magic != controlMagic ||
        !b->ready.load(std::memory_order_acquire)) {
      st.peers[q].reset();
      return {};
    }
    // Pids (liveness, cleanup) mean nothing across pid namespaces: a job
    // must run in one.
    if (otherPidNamespace(b->pidNamespace) && !b->closed.load(std::memory_order_acquire)) {
      // Ask rank 0 to join all the same: it learns at once that we left.
      if (q == 0)
        me->member.store(b->nonce, std::memory_order_release);
      return {ErrorKind::InvalidArgument,
              cat("rank ", q, " of job '", jobName, "' (process ", b->pid,
                  ") runs in another pid namespace than rank ", rank,
                  ": the ranks of a job must share one pid namespace (in containers: "
                  "docker run --pid=host, or one container)")};
    }
    gone = b->closed.load(std::memory_order_acquire) || !processAlive(b->pid, b->startTime);
    if (!gone && (b->nranks != st.nranks || b->rank != q))
      return {ErrorKind::Mismatch,
              cat("rank ", q, " of job '", jobName, "' joined as rank ", b->rank, " of ", b->nranks,
                  " ranks, rank ", rank, " as rank ", rank, " of ", nranks)};
    c = b;
    return {};
  };
  auto notJoined = [&](uint32_t q, int64_t stalePid, const std::string &note) {
    return fail(
        ErrorKind::Timeout,
        cat("rank ", q, " of job '", jobName, "' did not join within ",
            formatSeconds(options.setupTimeoutSeconds), " s (rank ", rank,
            " waited for shared memory ", controlName(jobName, q),
            stalePid ? cat("; a segment of dead process ", stalePid, " is there") : std::string(),
            note, ")"));
  };

  if (st.rank == 0) {
    // Admit one live segment per rank that asks to join our instance. One
    // that asks for another instance is a previous job's, about to go.
    const uint64_t instance = me->nonce;
    for (uint32_t q = 1; q < st.nranks; ++q) {
      int64_t stalePid = 0;
      bool foreign = false;
      for (;;) {
        ControlBlock *c = nullptr;
        bool gone = false;
        if (Failure f = openPeer(q, c, gone))
          return fail(f.kind, f.message);
        if (c && gone && c->member.load(std::memory_order_acquire) == instance) {
          // It asked to join us, then died or left: it will not come back.
          // (Ours to clean up when it died, as the group goes.)
          st.ctl[q] = c;
          return fail(ErrorKind::Remote,
                      cat("rank ", q, " (pid ", c->pid,
                          otherPidNamespace(c->pidNamespace) ? " of another pid namespace" : "",
                          ") of job '", jobName, "' ", c->closed.load() ? "left" : "died",
                          " while joining"));
        } else if (c && gone) {
          stalePid = c->pid; // Left by an earlier job: its owner will replace it.
        } else if (c) {
          uint64_t asked = instance;
          if (c->member.compare_exchange_strong(asked, instance | 1, std::memory_order_acq_rel)) {
            st.ctl[q] = c;
            break;
          }
          foreign = asked != 0;
        }
        st.peers[q].reset();
        if (Clock::now() > deadline)
          return notJoined(q, stalePid,
                           foreign ? "; the segment there belongs to another instance of the job"
                                   : "");
        if (Failure f = pause())
          return fail(f.kind, f.message);
      }
    }
  } else {
    // Rank 0 first: ask to join its instance until it admits us. When the
    // rank 0 we asked goes (a previous instance ending), ask the next.
    const std::string zeroName = controlName(jobName, 0);
    ControlBlock *zero = nullptr;
    int64_t stalePid = 0;
    for (;;) {
      if (!zero) {
        bool gone = false;
        if (Failure f = openPeer(0, zero, gone))
          return fail(f.kind, f.message);
        if (zero && gone) {
          stalePid = zero->pid;
          zero = nullptr;
          st.peers[0].reset();
        }
        if (zero)
          me->member.store(zero->nonce, std::memory_order_release);
      }
      if (zero) {
        if (me->member.load(std::memory_order_acquire) == (zero->nonce | 1))
          break;
        if (zero->closed.load(std::memory_order_acquire) ||
            !processAlive(zero->pid, zero->startTime) ||
            !segmentIs(zeroName, st.peers[0].device(), st.peers[0].inode())) {
          uint64_t asked = zero->nonce;
          if (!me->member.compare_exchange_strong(asked, 0, std::memory_order_acq_rel))
            continue; // Admitted meanwhile.
          zero = nullptr;
          st.peers[0].reset();
        }
      }
      if (Clock::now() > deadline)
        return zero ? fail(ErrorKind::Timeout,
                           cat("rank 0 of job '", jobName, "' did not admit rank ", rank,
                               " within ", formatSeconds(options.setupTimeoutSeconds),
                               " s (rank 0 is process ", zero->pid, ")"))
                    : notJoined(0, stalePid, "");
      if (Failure f = pause())
        return fail(f.kind, f.message);
    }
    st.ctl[0] = zero;
    // Then every other rank: the segment of its name that rank 0 admitted.
    const uint64_t admitted = zero->nonce | 1;
    for (uint32_t q = 1; q < st.nranks; ++q) {
      if (q == st.rank)
        continue;
      stalePid = 0;
      for (;;) {
        ControlBlock *c = nullptr;
        bool gone = false;
        if (Failure f = openPeer(q, c, gone))
          return fail(f.kind, f.message);
        if (c && c->member.load(std::memory_order_acquire) == admitted) {
          st.ctl[q] = c; // Even when gone: execute() reports it.
          break;
        }
        if (c && gone && c->member.load(std::memory_order_acquire) == zero->nonce) {
          st.ctl[q] = c;
          return fail(ErrorKind::Remote,
                      cat("rank ", q, " (pid ", c->pid, ") of job '", jobName, "' ",
                          c->closed.load() ? "left" : "died", " while joining"));
        }
        if (c && gone)
          stalePid = c->pid;
        st.peers[q].reset();
        if (zero->closed.load(std::memory_order_acquire) ||
            !processAlive(zero->pid, zero->startTime))
          return fail(ErrorKind::Remote,
                      cat("rank 0 (pid ", zero->pid, ") of job '", jobName, "' ",
                          zero->closed.load() ? "left the job" : "died", " while rank ", rank,
                          " waited for rank ", q, " to join"));
        if (Clock::now() > deadline)
          return notJoined(q, stalePid, "");
        if (Failure f = pause())
          return fail(f.kind, f.message);
      }
    }
  }

  // Wait until every rank has joined: then each has mapped every segment,
  // and a rank may leave at once without stranding a peer that is still
  // looking for its segment.
  sleepUs = 50;
  me->joined.store(1, std::memory_order_release);
  for (uint32_t q = 0; q < st.nranks; ++q) {
    const ControlBlock &c = *st.ctl[q];
    while (!c.joined.load(std::memory_order_acquire)) {
      if (c.closed.load(std::memory_order_acquire) || !processAlive(c.pid, c.startTime)) {
        if (c.joined.load(std::memory_order_acquire))
          break;
        return fail(ErrorKind::Remote, cat("rank ", q, " (pid ", c.pid, ") of job '", jobName, "' ",
                                           c.closed.load() ? "left the job" : "died",
                                           " before every rank had joined"));
      }
      if (Clock::now() > deadline)
        return fail(ErrorKind::Timeout,
                    cat("rank ", q, " of job '", jobName, "' did not finish joining within ",
                        formatSeconds(options.setupTimeoutSeconds), " s"));
      if (Failure f = pause())
        return fail(f.kind, f.message);
    }
  }

#ifdef __linux__
  // Data segments of our rank that an earlier job of this name left.
  for (const std::string &n : listJobSegments(jobName)) {
    std::string prefix = cat("coll-", jobName, ".", rank, ".");
    if (n.compare(0, prefix.size(), prefix) == 0)
      unlinkSegment("/" + n);
  }
#endif
  return group;
}

ProcessGroup::~ProcessGroup() {
  State &st = *state;
  st.allocations.clear();
  if (!st.own.mapped())
    return;
  ControlBlock &me = st.me();
  me.closed.store(1, std::memory_order_release);
  st.ringPeers();
  st.cleanUpDeadPeers();
  ShmOps::unlinkIfStale(controlName(st.job, st.rank),
                        [&](const ShmMapping &, const struct stat &sb) {
                          return sb.st_dev == st.own.device() && sb.st_ino == st.own.inode();
                        });
}

std::vector<std::string> ProcessGroup::listJobSegments(const std::string &jobName) {
  std::vector<std::string> names;
#ifdef __linux__
  if (!validJobName(jobName))
    return names;
  std::string prefix = "coll-" + jobName + ".";
  if (DIR *d = opendir(shmDirectory)) {
    while (dirent *e = readdir(d))
      if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0)
        names.push_back(e->d_name);
    closedir(d);
  }
  std::sort(names.begin(), names.end());
#else
  (void)jobName;
#endif
  return names;
}

size_t ProcessGroup::removeDeadSegments(const std::string &exceptJob) {
  size_t removed = 0;
#ifdef __linux__
  std::vector<std::string> names;
  if (DIR *d = opendir(shmDirectory)) {
    while (dirent *e = readdir(d))
      if (std::strncmp(e->d_name, "coll-", 5) == 0)
        names.push_back(e->d_name);
    closedir(d);
  }
  const std::string skip = exceptJob.empty() ? std::string() : "coll-" + exceptJob + ".";
  // Another user's segment does not open (mode 0600); one with a header
  // that is not ours is not ours to judge. One of our names without a
  // header yet (its owner was killed between creating it and writing it,
  // which takes microseconds) is judged by its age.
  auto dead = [](const std::string &n, const ShmMapping &m, const struct stat &sb) {
    uint64_t magic = 0;
    if (m.size() >= sizeof(uint64_t))
      magic = reinterpret_cast<const std::atomic<uint64_t> *>(m.data())->load(
          std::memory_order_acquire);
    if (magic == controlMagic) {
      // Not ready yet: judged by its age, like a segment without a header.
      const ControlBlock &c = *reinterpret_cast<const ControlBlock *>(m.data());
      if (m.size() < sizeof(ControlBlock) || otherVersion(c.version))
        return false;
      if (c.ready.load(std::memory_order_acquire))
        return ownerLongDead(c.pid, c.startTime, c.pidNamespace,
                             c.heartbeatNs.load(std::memory_order_relaxed));
    } else if (magic == dataMagic) {
      const DataHeader &h = *reinterpret_cast<const DataHeader *>(m.data());
      return m.size() >= sizeof(DataHeader) &&
             ownerLongDead(h.pid, h.startTime, h.pidNamespace, h.createdNs);
    } else if (magic != 0) {
      return false;
    }
    return segmentNamePattern(n) && segmentAgeNs(sb) > deadSegmentGraceNs;
  };
  for (const std::string &n : names)
    if ((skip.empty() || n.compare(0, skip.size(), skip) != 0) &&
        ShmOps::unlinkIfStale(
            "/" + n, [&](const ShmMapping &m, const struct stat &sb) { return dead(n, m, sb); }))
      ++removed;
#endif
  return removed;
}

void *ProcessGroup::allocate(size_t bytes, std::string *error) {
  State &st = *state;
  if (bytes == 0) {
    if (error)
      *error = "the size is 0";
    return nullptr;
  }
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(st.allocationsMutex);
    id = ++st.allocationsMade;
  }
  std::string name = allocName(st.job, st.rank, id);
  ShmMapping m;
  ShmOpenResult r;
  unlinkSegment(name);
  // Nobody else opens it: the name goes at once (before the memory is
  // reserved, which may take a while), and the memory with the last
  // mapping.
  Status s = ShmOps::create(name, bytes, m, r, /*keepName=*/false);
  if (!s || r != ShmOpenResult::Mapped) {
    if (error)
      *error = s ? cat("shared memory ", name, " exists") : s.message();
    return nullptr;
  }
  char *p = m.data();
  std::lock_guard<std::mutex> lock(st.allocationsMutex);
  st.allocations.emplace(p, std::move(m));
  return p;
}

void ProcessGroup::deallocate(void *ptr) {
  if (!ptr)
    return;
  ShmMapping gone; // Unmapped after the lock is released.
  std::lock_guard<std::mutex> lock(state->allocationsMutex);
  auto it = state->allocations.find(static_cast<char *>(ptr));
  if (it != state->allocations.end()) {
    gone = std::move(it->second);
    state->allocations.erase(it);
  }
}

Status ProcessGroup::execute(const Plan &plan, const void *sendbuf, void *recvbuf, size_t count,
                             DataType type, RedOp op, ErrorKind *errorKind) {
  return enter(&plan, nullptr, CallArgs{sendbuf, recvbuf, count, type, op}, errorKind);
}

Status ProcessGroup::execute(const ValidatedPlan &plan, const void *sendbuf, void *recvbuf,
                             size_t count, DataType type, RedOp op, ErrorKind *errorKind) {
  return enter(nullptr, &plan, CallArgs{sendbuf, recvbuf, count, type, op}, errorKind);
}

Status ProcessGroup::enter(const Plan *plan, const ValidatedPlan *validated, const CallArgs &args,
                           ErrorKind *errorKind) {
  State &st = *state;
  // One call at a time: a second one from another thread is refused, and
  // leaves the running call's state (lastErrorKind() included) alone.
  // Serializing them instead could pair the calls differently on different
  // ranks.
  if (st.inCall.exchange(true, std::memory_order_acq_rel)) {
    if (errorKind)
      *errorKind = ErrorKind::InvalidArgument;
    return Status::error(cat("rank ", st.rank,
                             ": execute() was called while another call of this process group is "
                             "in progress (one call at a time)"));
  }
  struct Leave {
    std::atomic<bool> &inCall;
    ~Leave() { inCall.store(false, std::memory_order_release); }
  } leave{st.inCall};
  Status s = Status::success();
  try {
    s = executeCall(plan, validated, args);
  } catch (...) {
    // Out of memory, most likely: fail this rank, and tell the peers at
    // once rather than leave them waiting for the timeout.
    ErrorKind kind = ErrorKind::SystemError;
    try {
      auto [what, k] = currentException();
      kind = k;
      std::string msg =
          cat("rank ", st.rank, ": ", what, " while ", st.phase, " (call ", st.seq, ")");
      st.publishFailure(msg, st.rank);
      st.broken = {kind, msg};
      st.cleanUpDeadPeers();
      lastKind = kind;
      lastMessage = msg;
      s = Status::error(msg);
    } catch (...) {
      // Not even the message fits: a fixed one for the peers, and this
      // rank's group is unusable all the same.
      static const char fixed[] = "out of memory while handling an error";
      ControlBlock &c = st.me();
      if (c.failing.exchange(1, std::memory_order_acq_rel) == 0) {
        c.failureOrigin = st.rank;
        std::memcpy(c.failure, fixed, sizeof fixed);
        c.failed.store(1, std::memory_order_release);
      }
      st.ringPeers();
      st.broken.kind = kind;
      lastKind = kind;
      lastMessage.clear();
      s = Status::error(fixed);
    }
  }
  if (errorKind)
    *errorKind = lastKind;
  return s;
}

Status ProcessGroup::executeCall(const Plan *rawPlan, const ValidatedPlan *validated,
                                 const CallArgs &args) {
  State &st = *state;
  st.phase = "setting up";
  auto finish = [&](ErrorKind kind, std::string msg) {
    lastKind = kind;
    lastMessage = std::move(msg);
    return kind == ErrorKind::None ? Status::success() : Status::error(lastMessage);
  };
  if (st.broken)
    return finish(st.broken.kind,
                  "the process group failed in an earlier call: " + st.broken.message);
  const uint64_t seq = ++st.seq;
  const uint32_t me = st.rank, n = st.nranks;
  ControlBlock &ctl = st.me();

  // This rank's own call; an error is published like a call, so that every
  // rank fails instead of waiting. A plan not yet validated is validated
  // after the arguments are checked: a bad argument is reported as such
  // whatever the plan.
  CallOptions callOptions;
  callOptions.sliceElements = st.options.sliceElements;
  callOptions.worldRanks = n;
  callOptions.worldName = "job";
  std::optional<ValidatedPlan> borrowed;
  PreparedCall call;
  if (!validated) {
    call.error = checkCall(*rawPlan, me, args, callOptions);
    if (!call.error) {
      Result<ValidatedPlan> v = ValidatedPlan::borrow(*rawPlan);
      if (v)
        validated = &borrowed.emplace(std::move(*v));
      else
        call.error = {ErrorKind::InvalidPlan, cat("rank ", me, ": ", v.message())};
    }
  }
  HostKernels kernels;
  if (validated) {
    call = prepareCall(*validated, me, args, callOptions);
    if (!call.error && !selectHostKernels(args.type, args.op, kernels))
      call.error = {ErrorKind::InvalidArgument,
                    cat("rank ", me, ": invalid data type ", unsigned(args.type),
                        " or reduction operator ", unsigned(args.op))};
  }
  if (!call.error && args.count > 0) {
    // Buffers from allocate() must hold what the call reads and writes.
    auto size = [](const ShmMapping &m) { return uint64_t(m.size()); };
    std::string sendOver, recvOver;
    {
      std::lock_guard<std::mutex> lock(st.allocationsMutex);
      sendOver = allocationOverrun("send", args.sendbuf, call.inputBytes, st.allocations, size);
      recvOver = allocationOverrun("receive", args.recvbuf, call.outputBytes, st.allocations, size);
    }
    for (const std::string *over : {&sendOver, &recvOver})
      if (!call.error && !over->empty())
        call.error = {ErrorKind::InvalidArgument, cat("rank ", me, ": ", *over)};
  }
  const ChunkLayout &layout = call.layout;
  DataLayout data;
  std::vector<int32_t> senders; ///< The ranks that send to us, once each.
  ShmMapping ownData;
  const std::string ownDataName = dataName(st.job, me, seq);
  if (!call.error && !call.empty()) {
    const RankPlan &rp = *validated->section(me);
    Result<DataLayout> d =
        layOutData(validated->plan(), me, layout.sliceElements * call.elementSize);
    ErrorKind memoryKind = ErrorKind::SystemError;
    Status memory = d ? checkRankMemory(*validated, call, d->bytes, st.options.memoryLimitBytes,
                                        "ProcessGroupOptions::memoryLimitBytes", &memoryKind)
                      : Status::success();
    if (!d) {
      call.error = {ErrorKind::InvalidArgument, cat("rank ", me, ": ", d.message())};
    } else if (!memory) {
      call.error = {memoryKind, cat("rank ", me, ": ", memory.message())};
    } else {
      data = std::move(*d);
      for (const FifoEntry &e : data.fifos)
        senders.push_back(e.peer);
      std::sort(senders.begin(), senders.end());
      senders.erase(std::unique(senders.begin(), senders.end()), senders.end());
      // The header first, published by its magic: whoever finds the
      // segment (another job's removeDeadSegments) can tell whose it is
      // from the start, even while its memory is being reserved.
      auto writeHeader = [&](char *p) {
        DataHeader *h = new (p) DataHeader();
        h->nonce = ctl.nonce;
        h->seq = seq;
        h->bytes = data.bytes;
        h->rank = me;
        h->numTbs = uint32_t(rp.threadblocks.size());
        h->numFifos = uint32_t(data.fifos.size());
        h->pid = ctl.pid;
        h->startTime = ctl.startTime;
        h->pidNamespace = ctl.pidNamespace;
        h->createdNs = nowNs();
        h->unmappedSenders.store(uint32_t(senders.size()), std::memory_order_relaxed);
        h->magic.store(dataMagic, std::memory_order_release);
      };
      ShmOpenResult r;
      Status s = ShmOps::create(ownDataName, data.bytes, ownData, r, /*keepName=*/true, writeHeader,
                                sizeof(DataHeader));
      if (s && r == ShmOpenResult::Exists) {
        // Left by an earlier job of this name (this rank's names are ours).
        unlinkSegment(ownDataName);
        s = ShmOps::create(ownDataName, data.bytes, ownData, r, /*keepName=*/true, writeHeader,
                           sizeof(DataHeader));
        if (s && r == ShmOpenResult::Exists)
          s = Status::error(cat("shared memory ", ownDataName, " exists"));
      }
      if (!s)
        call.error = {ErrorKind::SystemError, cat("rank ", me, ": ", s.message())};
    }
  }
  if (call.error) {
    call.description.errorKind = unsigned(call.error.kind);
    copyText(call.description.error, sizeof call.description.error, call.error.message);
  }
  // Unlinks our data segment when the call ends, however it ends.
  struct Unlinker {
    const std::string &name;
    ShmMapping &m;
    ~Unlinker() {
      if (m.mapped()) {
        if (segmentIs(name, m.device(), m.inode()))
          unlinkSegment(name);
        m.reset();
      }
    }
  } unlinker{ownDataName, ownData};

  // Our data segment: the header is written; the FIFO table and counters
  // (zero, as created).
  if (ownData.mapped()) {
    char *base = ownData.data();
    if (!data.fifos.empty()) // A rank may receive nothing (a broadcast's root).
      std::memcpy(base + data.tableOffset, data.fifos.data(),
                  data.fifos.size() * sizeof(FifoEntry));
    for (uint32_t b = 0; b < validated->section(me)->threadblocks.size(); ++b)
      new (base + data.progressOffset + b * sizeof(PaddedCounter)) PaddedCounter();
    for (const FifoEntry &e : data.fifos) {
      new (base + e.countersOffset) PaddedCounter();
      new (base + e.countersOffset + sizeof(PaddedCounter)) PaddedCounter();
    }
    // Nobody sends to us: nobody maps the segment, and the name can go now.
    if (senders.empty())
      unlinkSegment(ownDataName);
  }

  // Publish the call, then wait for every peer's.
  PublishedCall &mine = ctl.calls[seq % 2];
  mine.seq = seq;
  mine.description = call.error && !validated ? describeFailedCall(call.error) : call.description;
  // Release: a peer that sees callSeq >= seq sees the description and our
  // data segment's header.
  ctl.callSeq.store(seq, std::memory_order_release);
  st.beat();
  st.ringPeers();

  // Ends the call. An error that breaks the group (one during the run) is
  // published for the peers, with the rank it comes from (none: it is
  // another rank's); any other outcome counts the call as done.
  auto endCall = [&](Failure f, bool breaks) {
    if (breaks) {
      st.publishFailure(f.message, f.kind == ErrorKind::Remote ? n : me);
      st.broken = f;
      st.cleanUpDeadPeers();
    } else {
      ctl.doneSeq.store(seq, std::memory_order_release);
    }
    return finish(f.kind, f.message);
  };

  {
    const Clock::time_point deadline = Clock::now() + seconds(st.options.setupTimeoutSeconds);
    Clock::time_point nextCheck = Clock::now();
    for (;;) {
      uint32_t seen = ctl.bell.seq.load(std::memory_order_seq_cst);
      std::vector<uint32_t> missing;
      for (uint32_t q = 0; q < n; ++q)
        if (q != me && st.ctl[q]->callSeq.load(std::memory_order_acquire) < seq)
          missing.push_back(q);
      if (missing.empty())
        break;
      Clock::time_point now = Clock::now();
      if (now >= nextCheck) {
        st.beat();
        nextCheck = now + seconds(st.options.livenessIntervalSeconds);
        for (uint32_t q : missing) {
          const ControlBlock &c = *st.ctl[q];
          // The list is from before the pause: a rank that has called
          // since (and perhaps finished and left) is not missing.
          if (c.callSeq.load(std::memory_order_acquire) >= seq)
            continue;
          if (c.failed.load(std::memory_order_acquire))
            return endCall({ErrorKind::Remote,
                            cat("rank ", q, " failed: ",
                                std::string(c.failure, strnlen(c.failure, sizeof c.failure)))},
                           false);
          if (st.peerGone(q)) {
            // A rank calls before it closes: read callSeq again after seeing
            // it gone, or one that called, finished and left in between
            // (a quick call: count 0) looks as if it never called.
            if (c.callSeq.load(std::memory_order_acquire) >= seq)
              continue;
            st.cleanUpPeer(q);
            return endCall({ErrorKind::Remote, cat("rank ", q, " (pid ", c.pid, ") ",
                                                   c.closed.load() ? "left the job" : "died",
                                                   " before calling execute() for call ", seq)},
                           false);
          }
        }
      }
      if (now >= deadline) {
        std::string list;
        for (size_t i = 0; i < missing.size() && i < 8; ++i)
          list += cat(i ? ", " : "", missing[i]);
        if (missing.size() > 8)
          list += cat(" and ", missing.size() - 8, " more");
        // Published: a rank that calls later fails at once with this.
        return endCall(
            {ErrorKind::Timeout,
             cat("rank ", me, ": timed out after ", formatSeconds(st.options.setupTimeoutSeconds),
                 " s waiting for rank", missing.size() > 1 ? "s " : " ", list,
                 " to call execute() (call ", seq, ")")},
            true);
      }
      Clock::time_point until = std::min(nextCheck, deadline);
      int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(until - now).count();
      ctl.bell.sleepers.fetch_add(1, std::memory_order_seq_cst);
      if (ctl.bell.seq.load(std::memory_order_seq_cst) == seen)
        futexWait(&ctl.bell.seq, seen, std::max<int64_t>(ns, 1000));
      ctl.bell.sleepers.fetch_sub(1, std::memory_order_seq_cst);
    }
  }

  // A peer that published this call and failed since (a setup timeout, a
  // run error) has given up on it.
  if (Failure f = st.failedPeer())
    return endCall(f, true);

  // Every rank now holds the same descriptions: the same verdict
  // everywhere. Argument errors first (the rank itself gets its message),
  // then agreement with rank 0.
  std::vector<CallDescription> calls(n);
  for (uint32_t q = 0; q < n; ++q) {
    const PublishedCall &c = st.ctl[q]->calls[seq % 2];
    if (c.seq != seq)
      return endCall({ErrorKind::Internal, cat("rank ", q, " published call ", c.seq,
                                               " where call ", seq, " was expected")},
                     true);
    calls[q] = c.description;
  }
  if (CallError verdict = agree(calls.data(), n, me))
    return endCall({verdict.kind, verdict.message}, false);

  // Bind our buffers (LocalWorld's rules).
  HostBinding binding;
  if (Status s = bindHost(call, binding); !s)
    return endCall({ErrorKind::SystemError, s.message()}, true);
  if (call.empty()) {
    finishHost(call, binding, n, kernels);
    return endCall({}, false);
  }
  const Plan &plan = validated->plan();
  const PlanInfo &info = plan.info;
  const size_t es = call.elementSize;
  if (Status s = allocateZeroed(binding.scratch, *scratchBytes(plan, me, layout, es),
                                scratchWhat(plan, me, layout, es));
      !s)
    return endCall({ErrorKind::SystemError, cat("rank ", me, ": ", s.message())}, true);

  // Map the data segments of the ranks we send to, and find our FIFOs in
  // them.
  const RankPlan &rp = *validated->section(me);
  const uint64_t pieceBytes = layout.sliceElements * es;
  std::vector<ShmMapping> peerData(n);
  std::vector<Fifo> sendFifos(rp.threadblocks.size()), recvFifos(rp.threadblocks.size());
  std::vector<bool> hasSend(rp.threadblocks.size(), false), hasRecv(rp.threadblocks.size(), false);
  for (uint32_t b = 0; b < rp.threadblocks.size(); ++b) {
    const Threadblock &tb = rp.threadblocks[b];
    uint32_t maxSend = tb.sendPeer >= 0 ? maxMessageChunks(tb, /*recv=*/false) : 0;
    if (maxSend == 0)
      continue;
    const uint32_t q = uint32_t(tb.sendPeer);
    if (!peerData[q].mapped()) {
      ShmOpenResult r = ShmOpenResult::Absent;
      std::string name = dataName(st.job, q, seq);
      Status s = ShmOps::open(name, sizeof(DataHeader), peerData[q], r);
      const DataHeader *h = reinterpret_cast<const DataHeader *>(peerData[q].data());
      if (!s)
        return endCall({ErrorKind::SystemError, s.message()}, true);
      if (r != ShmOpenResult::Mapped || h->magic != dataMagic || h->nonce != st.ctl[q]->nonce ||
          h->seq != seq || h->bytes > peerData[q].size()) {
        if (Failure f = st.checkPeers(seq))
          return endCall(f, true);
        return endCall(
            {ErrorKind::Internal, cat("rank ", me, ": the shared memory ", name, " of rank ", q,
                                      " for call ", seq, " is missing or not rank ", q, "'s")},
            true);
      }
      // The last of its senders to map it unlinks its name.
      DataHeader *mh = reinterpret_cast<DataHeader *>(peerData[q].data());
      if (mh->unmappedSenders.fetch_sub(1, std::memory_order_acq_rel) == 1 &&
          segmentIs(name, peerData[q].device(), peerData[q].inode()))
        unlinkSegment(name);
    }
    const char *base = peerData[q].data();
    const DataHeader *h = reinterpret_cast<const DataHeader *>(base);
    const FifoEntry *table =
        reinterpret_cast<const FifoEntry *>(base + align64(sizeof(DataHeader)));
    const FifoEntry *found = nullptr;
    for (uint32_t i = 0; i < h->numFifos; ++i)
      if (table[i].peer == int32_t(me) && table[i].channel == tb.channel)
        found = &table[i];
    if (!found || found->depth != info.connectionDepth ||
        found->slotBytes < uint64_t(maxSend) * pieceBytes ||
        found->slotsOffset + found->depth * found->slotBytes > h->bytes)
      return endCall({ErrorKind::Internal,
                      cat("rank ", me, " threadblock ", b, ": rank ", q,
                          " has no fitting FIFO for channel ", tb.channel, " in call ", seq)},
                     true);
    Fifo &f = sendFifos[b];
    char *mbase = peerData[q].data();
    f.depth = found->depth;
    f.slotBytes = found->slotBytes;
    f.memory = mbase + found->slotsOffset;
    f.tail = &reinterpret_cast<PaddedCounter *>(mbase + found->countersOffset)[0].value;
    f.head = &reinterpret_cast<PaddedCounter *>(mbase + found->countersOffset)[1].value;
    f.receiverBell = &st.ctl[q]->bell;
    hasSend[b] = true;
  }
  char *base = ownData.data();
  for (const FifoEntry &e : data.fifos) {
    Fifo &f = recvFifos[e.tb];
    f.depth = e.depth;
    f.slotBytes = e.slotBytes;
    f.memory = base + e.slotsOffset;
    f.tail = &reinterpret_cast<PaddedCounter *>(base + e.countersOffset)[0].value;
    f.head = &reinterpret_cast<PaddedCounter *>(base + e.countersOffset)[1].value;
    f.senderBell = &st.ctl[uint32_t(e.peer)]->bell;
    hasRecv[e.tb] = true;
  }

  // Our threadblocks, on our workers. A rank without any (a plan of one
  // rank, or one in which this rank does nothing) is done.
  const size_t ntb = rp.threadblocks.size();
  if (ntb == 0) {
    finishHost(call, binding, n, kernels);
    return endCall({}, false);
  }
  st.phase = "running";
  const size_t nworkers = st.options.workers ? std::min<size_t>(st.options.workers, ntb) : ntb;
  WorldState world;
  RankState rs;
  rs.buffers[unsigned(BufferKind::Input)] = binding.input;
  rs.buffers[unsigned(BufferKind::Output)] = binding.output;
  rs.buffers[unsigned(BufferKind::Scratch)] = binding.scratch.data();
  rs.progress = reinterpret_cast<PaddedCounter *>(base + data.progressOffset);
  rs.progressBell = nworkers > 1 ? &ctl.bell : nullptr;
  std::vector<std::unique_ptr<TbRun>> runs;
  for (uint32_t b = 0; b < ntb; ++b) {
    const Threadblock &tb = rp.threadblocks[b];
    rs.numSteps.push_back(uint32_t(tb.steps.size()));
    auto t = makeTbRun(tb, me, b, world, rs, layout, kernels, pieceBytes);
    CpuPlatform &p = t->platform;
    p.recvFifo = hasRecv[b] ? &recvFifos[b] : nullptr;
    p.sendFifo = hasSend[b] ? &sendFifos[b] : nullptr;
    runs.push_back(std::move(t));
  }
  for (auto &t : runs)
    t->interp =
        std::make_unique<Interpreter<CpuPlatform>>(t->platform, t->program, layout.numSlices);
  std::vector<std::vector<TbRun *>> workers(nworkers);
  for (size_t b = 0; b < ntb; ++b)
    workers[b % nworkers].push_back(runs[b].get());

  FirstError first;
  auto fail = [&](ErrorKind kind, std::string message) {
    first.set(world, kind, std::move(message));
    ctl.bell.ring(); // Our other workers may sleep.
  };
  runWorkerThreads(nworkers, /*callerWorks=*/true, world, first, [&](size_t w) {
    const std::vector<TbRun *> &tbs = workers[w];
    try {
      ShmPacer pacer(st, seq, tbs);
      WorkerResult r = runWorker(tbs, world, pacer, st.options.timeoutSeconds, /*single=*/false);
      if (!r.ok && !r.aborted)
        fail(pacer.kind == ErrorKind::None ? ErrorKind::Internal : pacer.kind, r.message);
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
  });
  if (world.failed.load(std::memory_order_relaxed)) {
    Failure error{first.kind, first.message};
    if (error.message.empty())
      error = {error ? error.kind : ErrorKind::Internal, cat("rank ", me, ": the run was aborted")};
    return endCall(error, true);
  }
  finishHost(call, binding, n, kernels);
  return endCall({}, false);
}

} // namespace coll
