//===- ProcessControl.h - A process rank's control segment -----*- C++ -*-===//
//
// The control side of a ProcessGroup (ProcessGroup.cpp): each rank's
// control segment "/coll-<job>.<rank>" (ControlBlock), the names of a job's
// segments, and JobControl, one rank's view of every rank's control block:
// heartbeat, doorbells, liveness of the peers, publication of a failure and
// cleanup of what dead peers left. Private to the runtime library.
//
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_LIB_PROCESSCONTROL_H
#define COLL_RUNTIME_LIB_PROCESSCONTROL_H

#include "CpuPlatform.h"
#include "NetEngine.h"
#include "ShmSegment.h"
#include "coll/Runtime/PreparedCall.h"
#include "coll/Runtime/ProcessGroup.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace coll {
namespace detail {

static_assert(std::atomic<uint64_t>::is_always_lock_free &&
                  std::atomic<int64_t>::is_always_lock_free,
              "counters in shared memory must be lock-free (address-free) atomics");

constexpr uint64_t controlMagic = 0x314c54434c4c4f43ull; ///< "COLLCTL1"
constexpr uint32_t controlVersion = 5;
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
  /// The call whose data segment, FIFOs and scratch this rank runs this one
  /// on (ProcessGroup.cpp's CachedCall); 0: a new data segment of this call.
  uint64_t reuses = 0;
  CallDescription description;
};

/// Memory of a rank from ProcessGroup::allocate() that its peers may map
/// (ShmOps::openPeerFd on the owner's descriptor `fd`): the owner writes
/// base, bytes and fd while `id` is 0, then publishes `id` (release), and
/// sets it to 0 again before the memory goes. A reader reads `id`
/// (acquire), the fields, and `id` again: the same non-zero id, and the
/// fields are that allocation's (ids are never reused).
struct SharedAllocation {
  std::atomic<uint64_t> id{0};
  std::atomic<uint64_t> base{0};
  std::atomic<uint64_t> bytes{0};
  std::atomic<int64_t> fd{-1};
};
/// How many allocations of a rank its peers may map at once; the others
/// are the rank's own (messages from them travel through the slots).
constexpr size_t maxSharedAllocations = 64;

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
  /// The one CPU the owner may run on (its affinity when it joined), or -1.
  int32_t cpu = -1;
  /// The address, in the owner's memory, of a word that holds ~nonce: a
  /// peer that can read it there (canReadPeerMemory()) can read the
  /// owner's direct messages.
  uint64_t probeAddress = 0;

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
  SharedAllocation allocations[maxSharedAllocations];
  uint32_t failureOrigin = 0; ///< The rank whose error `failure` is.
  char failure[1536] = {};    ///< Why the rank failed.
};

/// An error of a call, and whether it breaks the group: a failure during
/// the run, published for the peers, after which later calls fail at once.
/// Other errors (a bad argument, a mismatch, a peer that failed before the
/// call) leave the group usable.
struct CallFailure {
  CallError error;
  bool breaks = false;
  explicit operator bool() const { return bool(error); }
};

/// The steady clock in nanoseconds.
int64_t nowNs();
/// \p s seconds as a Clock duration.
Clock::duration seconds(double s);

/// "/coll-<job>.<rank>": a rank's control segment.
std::string controlName(const std::string &job, uint32_t rank);
/// "/coll-<job>.<rank>.<seq>": a rank's data segment of call \p seq.
std::string dataName(const std::string &job, uint32_t rank, uint64_t seq);
/// "/coll-<job>.<rank>.m<id>": memory from ProcessGroup::allocate().
std::string allocName(const std::string &job, uint32_t rank, uint64_t id);
/// Whether \p job is 1 to maxJobName characters of [A-Za-z0-9_-].
bool validJobName(const std::string &job);

/// A random, even, non-zero 64-bit number (the low bit marks admission).
uint64_t makeNonce();
/// The pid namespace of this process (the inode of /proc/self/ns/pid), or
/// 0 where unknown: a pid means something only within its namespace.
uint64_t pidNamespaceId();
/// Whether a segment's owner lives in another pid namespace than ours: its
/// pid means nothing here, so it counts as alive, and its segments are
/// never removed.
bool otherPidNamespace(uint64_t ns);
/// Whether a control segment's \p version is another layout's (0: its
/// header is still being written).
bool otherVersion(uint32_t version);
/// The error for control segment \p name of layout \p version (not ours):
/// another Collc's, which we cannot judge.
std::string otherLayout(const std::string &name, uint32_t version);

/// One rank's view of its job's control segments: its own, which it
/// writes, and every peer's, mapped when the rank joined (ProcessJoin.h).
struct JobControl {
  std::string job;
  uint32_t rank = 0;
  uint32_t nranks = 0;
  ProcessGroupOptions options;
  ShmMapping own;                  ///< This rank's control segment.
  std::vector<ShmMapping> peers;   ///< Every peer's control segment (own: unmapped).
  std::vector<ControlBlock *> ctl; ///< Every rank's control block, this one included.
  /// Dead peers whose names were unlinked (by any of our workers).
  std::unique_ptr<std::atomic<bool>[]> cleaned;
  /// Every rank is bound to a CPU of its own (ControlBlock::cpu): a rank
  /// waited for is never on the waiter's CPU, and spins need not yield.
  bool pinnedApart = false;
  /// ~our nonce, at ControlBlock::probeAddress.
  uint64_t probeWord = 0;
  /// Per peer: 1 when this process can read its memory, 0 when not, -1
  /// not yet tried (peerReadable()).
  std::vector<int8_t> readable;
  /// The peers' allocations mapped here, for their direct messages.
  std::unique_ptr<PeerWindows> windows;
  /// Per rank, 1 where it is on another host (a job that spans hosts,
  /// ProcessGroup::create() with a store); empty: every rank is on ours.
  std::vector<uint8_t> remote;
  /// The copies of the remote ranks' control blocks (NetEngine.h), by rank.
  std::vector<std::unique_ptr<ControlBlock>> mirrors;
  /// The network side, when a rank is remote. Last: it goes first, while
  /// the control blocks it reads and writes are still there.
  std::unique_ptr<NetEngine> net;

  ControlBlock &me() const { return *ctl[rank]; }
  /// Whether rank \p q is on another host.
  bool isRemote(uint32_t q) const { return q < remote.size() && remote[q]; }
  /// Whether rank \p q's process lives: its pid here, or for a remote
  /// rank, its connection and heartbeats (NetEngine::lost()).
  bool peerAlive(uint32_t q) const;
  /// "pid P" of rank \p q, with "on another host" for a remote rank.
  std::string pidOf(uint32_t q) const;

  /// Whether this process can read peer \p q's memory (its direct
  /// messages): tried once, on its probe word.
  bool peerReadable(uint32_t q);
  /// The peers' allocations mapped here (made on first use).
  PeerWindows &peerWindows();

  /// Rings every rank's doorbell but ours.
  void ringPeers() const;
  /// Records a sign of life in our heartbeat.
  void beat() const;
  /// Whether peer \p q is gone: closed, or its process is dead.
  bool peerGone(uint32_t q) const;
  /// Unlinks the names of dead peer \p q, once: its data segments of the
  /// calls it may have created (when they carry its nonce, or have no
  /// header yet), then its control segment (when the name is still the one
  /// we mapped).
  void cleanUpPeer(uint32_t q);
  /// Unlinks the names of every peer that died (of those create() found).
  void cleanUpDeadPeers();
  /// Records this rank's failure for its peers (the first one only) and
  /// wakes them.
  void publishFailure(const std::string &message, uint32_t origin);
  /// publishFailure() of a fixed message, allocating nothing: for when even
  /// building the message failed.
  void publishFixedFailure(const char *message);
  /// A failed peer (preferring a rank whose failure is its own) as a
  /// Remote error with its message, or none.
  CallError failedPeer() const;
  /// The first problem among the peers that have not finished call \p seq:
  /// a dead or departed rank (named with its pid), else a failed one
  /// (preferring a rank whose failure is its own).
  CallError checkPeers(uint64_t seq);
  /// How peer \p q is doing, for a timeout message.
  std::string describePeer(uint32_t q) const;
};

} // namespace detail
} // namespace coll

#endif // COLL_RUNTIME_LIB_PROCESSCONTROL_H
