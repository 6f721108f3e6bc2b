//===- CpuPlatform.h - The interpreter's platform on CPU threads -*- C++ -*-===//
//
// The Platform of Interpreter.h for CPU ranks: connections are FIFOs in the
// receiver's memory with head and tail counters, and cross-threadblock
// dependencies are per-threadblock progress counters. The platform only
// points at them: LocalWorld keeps them in its own heap (every rank in one
// process), ProcessGroup in POSIX shared memory (one process per rank).
// Waits never block: they return WouldBlock, and the worker thread that runs
// the threadblock turns to its other threadblocks, or paces itself (spin,
// yield, sleep) until a time limit. Private to the runtime library.
//
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_LIB_CPUPLATFORM_H
#define COLL_RUNTIME_LIB_CPUPLATFORM_H

#include "Futex.h"
#include "HostKernels.h"
#include "LineProtocol.h"
#include "coll/Runtime/ChunkLayout.h"
#include "coll/Runtime/Executor.h"
#include "coll/Runtime/Interpreter.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace coll {
namespace detail {

using Clock = std::chrono::steady_clock;

/// A counter alone on its cache line, so that the sender's and the
/// receiver's counters (and neighbouring threadblocks' progress) do not
/// bounce one line between cores.
struct alignas(64) PaddedCounter {
  std::atomic<uint64_t> value{0};
};

/// Adds 1 to eventfd \p fd (wakes its reader).
void wakeEventFd(int fd);

/// A rank's doorbell: a futex word that whoever publishes something the
/// rank's workers may wait for bumps, and a count of the workers asleep on
/// it, so that a publisher pays for a wake-up system call only when somebody
/// sleeps. It lives where every process of the rank's peers can reach it
/// (shared memory, for ProcessGroup).
struct alignas(64) Doorbell {
  std::atomic<uint32_t> seq{0};      ///< Bumped after each publication.
  std::atomic<uint32_t> sleepers{0}; ///< Workers in futexWait() on seq.
  /// 0, or an eventfd plus one that its sleeper waits on instead of the
  /// futex (NetEngine's thread, which also waits for the network). Only
  /// for a doorbell of this process's own memory.
  int32_t wakeFd = 0;

  /// Tells the rank's workers that something changed. Call after the
  /// release store that published it. seq_cst on both: either the sleeper
  /// registered itself before our load of `sleepers` (and we wake it), or
  /// its load of `seq` (before it sleeps, and the kernel's compare) sees our
  /// increment and it does not sleep (Dekker's pattern; the sleeping side
  /// is ProcessGroup.cpp's pacer).
  void ring() {
    seq.fetch_add(1, std::memory_order_seq_cst);
    if (sleepers.load(std::memory_order_seq_cst) != 0) {
      if (wakeFd)
        wakeEventFd(wakeFd - 1);
      else
        futexWakeAll(&seq);
    }
  }
};

/// Whether the \p n bytes at address \p a lie within the \p bytes at
/// \p base (no overflow for any values).
inline bool rangeHolds(uint64_t base, uint64_t bytes, uint64_t a, uint64_t n) {
  return a >= base && a - base <= bytes && n <= bytes - (a - base);
}

/// A part of a sender's memory (an allocation of its process) mapped into
/// the receiver's, valid while the sender's id for it stays `id`.
struct PeerWindow {
  uint64_t remoteBase = 0; ///< Where it lies in the sender's process.
  uint64_t bytes = 0;
  const char *local = nullptr; ///< Where it lies here.
  const std::atomic<uint64_t> *idNow = nullptr;
  uint64_t id = 0;

  /// Whether \p n bytes at \p remote lie in the window, and it is valid.
  bool covers(const char *remote, uint64_t n) const {
    return local && rangeHolds(remoteBase, bytes, uint64_t(uintptr_t(remote)), n) &&
           idNow->load(std::memory_order_acquire) == id;
  }
  const char *at(const char *remote) const {
    return local + (uint64_t(uintptr_t(remote)) - remoteBase);
  }
};

/// The senders' memory this process has mapped, found on demand.
class PeerWindows {
public:
  virtual ~PeerWindows() = default;
  /// A window of rank \p peer's memory that holds the \p n bytes at
  /// \p remote (an address in its process), mapping it when needed;
  /// false when there is none (the bytes lie in memory its peers cannot
  /// map).
  virtual bool find(uint32_t peer, const char *remote, uint64_t n, PeerWindow &out) = 0;
  /// Unmaps the windows whose memory their owners freed: between runs
  /// only, when no platform holds one.
  virtual void collect() = 0;
};

/// One connection: `depth` message slots in the receiver's memory. The
/// sender fills slot (tail % depth) and then advances tail; the receiver
/// reads slot (head % depth) and then advances head. Each counter has a
/// single writer, so plain stores suffice (no read-modify-write). The
/// storage belongs to the executor (FifoStorage, or shared memory).
///
/// With LL or LL128 (Protocol.h) the slots hold lines: the receiver waits
/// for the lines' flags instead of tail (which the sender still advances,
/// for diagnostics and the doorbells), and the counters must not go back
/// while the slots hold older lines. Such a connection has no direct
/// messages and does not cross the network.
struct Fifo {
  uint32_t depth = 0;
  uint64_t slotBytes = 0; ///< One slot: slotBytesFor(protocol, dataBytes).
  uint64_t dataBytes = 0; ///< One message's data: its largest chunk count times a piece.
  ProtocolKind protocol = ProtocolKind::Simple;
  char *memory = nullptr;
  std::atomic<uint64_t> *tail = nullptr; ///< Messages the sender has published.
  std::atomic<uint64_t> *head = nullptr; ///< Messages the receiver has released.
  /// Rung after a publication (the receiver's) and after a release (the
  /// sender's); null when the workers do not sleep on doorbells (LocalWorld).
  Doorbell *receiverBell = nullptr;
  Doorbell *senderBell = nullptr;
  /// Per slot, 1 while it holds a direct message (the addresses of the
  /// sender's pieces, DirectSends.h) rather than the data; written before
  /// the tail that publishes it. Null where the receiver cannot reach the
  /// sender's memory (no direct messages).
  uint8_t *direct = nullptr;
  /// The receiver's side: the process whose memory a direct message's
  /// addresses are in (readPeerMemory()), and its rank; 0: this process.
  int64_t senderPid = 0;
  uint32_t senderRank = 0;
  /// Where the sender's buffers are mapped here, or null: every direct
  /// message is then read with readPeerMemory().
  PeerWindows *windows = nullptr;
  /// Per slot, the bytes of the message in it (the extent its pieces
  /// were written to), written before the tail that publishes it; null
  /// where nobody needs it (set for a connection that crosses the network,
  /// which sends only those bytes).
  uint64_t *lengths = nullptr;

  char *slot(uint64_t message) const { return memory + (message % depth) * slotBytes; }
};

/// A Fifo with its storage in this process's heap: zeroed for a line
/// protocol (no line holds a flag yet).
struct FifoStorage {
  Fifo fifo;
  std::unique_ptr<char[]> memory;
  PaddedCounter tail, head;

  std::unique_ptr<uint8_t[]> direct;
  FifoStorage(uint32_t depth, uint64_t dataBytes, ProtocolKind protocol = ProtocolKind::Simple)
      : memory(protocol == ProtocolKind::Simple
                   ? new char[depth * dataBytes]
                   : new char[depth * slotBytesFor(protocol, dataBytes)]()),
        direct(protocol == ProtocolKind::Simple ? new uint8_t[depth]() : nullptr) {
    fifo.depth = depth;
    fifo.dataBytes = dataBytes;
    fifo.slotBytes = slotBytesFor(protocol, dataBytes);
    fifo.protocol = protocol;
    fifo.memory = memory.get();
    fifo.tail = &tail.value;
    fifo.head = &head.value;
    fifo.direct = direct.get();
  }
};

/// A direct message whose data could not be read from the sender's
/// process (it died, or does not let this one read its memory).
struct PeerReadError : std::runtime_error {
  PeerReadError(uint32_t peer, int error, const std::string &what)
      : std::runtime_error(what), peer(peer), error(error) {}
  uint32_t peer; ///< The sending rank.
  int error;     ///< The errno of the read: ESRCH when the process is gone.
};

/// Copies \p bytes at \p src in process \p pid (rank \p peer) to \p dst
/// in this one, with a cross-memory-attach read (process_vm_readv): one
/// copy, by the kernel. Throws PeerReadError when it cannot.
void readPeerMemory(int64_t pid, uint32_t peer, char *dst, const char *src, uint64_t bytes);

/// Whether this process can read process \p pid's memory with
/// readPeerMemory(): reads the 8 bytes at \p address there and compares
/// them with \p expected.
bool canReadPeerMemory(int64_t pid, uint64_t address, uint64_t expected);

/// What every threadblock of a run shares.
struct WorldState {
  /// Set when any threadblock fails; the others stop waiting. Advisory
  /// only (relaxed): results are read after the threads are joined.
  std::atomic<bool> failed{false};
  bool recording = false; ///< Record a TraceEvent per step.
  Clock::time_point start;
};

/// What the threadblocks of one rank share.
struct RankState {
  char *buffers[numBufferKinds()] = {}; ///< Indexed by BufferKind.
  /// Per BufferKind: the buffer in blocks of one unit (block j / C holds
  /// user chunk j), or null: then `buffers` holds it whole.
  void *const *blocks[numBufferKinds()] = {};
  /// Per threadblock: steps finished over all slices (slice * steps + step
  /// + 1 after step `step` of slice `slice`). Monotonic. Owned by the
  /// executor.
  PaddedCounter *progress = nullptr;
  std::vector<uint32_t> numSteps; ///< Per threadblock.
  /// Rung after each step when the rank's threadblocks run on several
  /// workers that sleep on it; null otherwise.
  Doorbell *progressBell = nullptr;
  /// The bytes of buffers[Scratch].
  uint64_t scratchBytes = 0;
  /// Copies into the Input and Output stream their stores
  /// (streamBytes()): the call's data does not fit the cache.
  bool streamStores = false;
};

/// One pause of a spinning thread.
inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

/// The CPUs this process may run on (its affinity mask), at least 1.
uint32_t usableCpus();

/// How long a waiting worker spins before it yields and sleeps, when
/// \p threads threads (every rank's workers on this host) may all be busy:
/// long when each can have a CPU of its own, for then the thread waited for
/// runs too and answers within microseconds, and a sleep costs a system
/// call on each side (tens of microseconds here); none beyond a few pauses
/// when they share CPUs, for then spinning holds up the very thread waited
/// for (docs/performance.md).
inline Clock::duration spinTime(uint64_t threads) {
  return threads <= usableCpus() ? Clock::duration(std::chrono::microseconds(200))
                                 : Clock::duration::zero();
}

/// How long a waiting worker yields its CPU (sched_yield) before it sleeps
/// on a doorbell, when \p threads threads share this host's CPUs: while
/// they outnumber the CPUs, yielding hands the CPU to a thread with work at
/// the cost of a system call, where a sleep costs a wake-up system call on
/// the publisher's side and two context switches (docs/performance.md).
inline Clock::duration yieldTime(uint64_t threads) {
  return threads > usableCpus() ? Clock::duration(std::chrono::milliseconds(1))
                                : Clock::duration::zero();
}

/// Spins for up to a time limit between checks: a caller that waits calls
/// spinning() in its loop until it says stop. Reading the clock every
/// 64 pauses keeps the spin short of its limit without a clock read per
/// pause. Every 256 pauses it yields the CPU once: the scheduler sometimes
/// puts the thread waited for on the spinner's CPU for a while, and a spin
/// that never yields would hold it off for the whole limit at every wait
/// (where nothing else waits for the CPU, the yield returns at once).
class SpinBudget {
public:
  /// \p yields false: never yield (the thread waited for has a CPU of its
  /// own that nothing else may use).
  explicit SpinBudget(Clock::duration limit = Clock::duration::zero(), bool yields = true)
      : limit(limit), yields(yields) {}
  /// Starts over (progress was made).
  void reset() { rounds = 0; }
  /// Pauses once and says whether to go on spinning.
  bool spinning() {
    if (limit == Clock::duration::zero())
      return false;
    if (rounds == 0)
      until = Clock::now() + limit;
    else if (rounds % 64 == 0 && Clock::now() >= until)
      return false;
    ++rounds;
    if (yields && rounds % 256 == 0)
      std::this_thread::yield();
    else
      cpuRelax();
    return true;
  }

private:
  Clock::duration limit;
  bool yields;
  Clock::time_point until;
  uint64_t rounds = 0;
};

/// Paces a worker thread none of whose threadblocks can move: spins briefly
/// (the data is often a few hundred nanoseconds away; for spinTime() when
/// every thread has a CPU), then yields, then sleeps with a doubling
/// interval, so that 8 ranks' threads on 2 cores do not starve the threads
/// they wait for. Reset it after any progress.
class Backoff {
public:
  explicit Backoff(double timeoutSeconds, Clock::duration spin = Clock::duration::zero())
      : timeout(std::chrono::duration_cast<Clock::duration>(
            std::chrono::duration<double>(timeoutSeconds))),
        spin(spin) {
    reset();
  }

  /// Progress was made: start over, with a fresh time limit.
  void reset() {
    rounds = 0;
    sleepUs = 1;
    spin.reset();
    deadline = Clock::now() + timeout;
  }

  /// Waits a little; false once the time limit has passed without a reset.
  bool pause() {
    ++rounds;
    if (rounds <= spinRounds) {
      cpuRelax();
      return true;
    }
    if (rounds == spinRounds + 1 && spin.spinning()) {
      --rounds; // Stay here while the spin lasts.
      return true;
    }
    if (rounds <= spinRounds + yieldRounds) {
      std::this_thread::yield();
      return true;
    }
    if (Clock::now() >= deadline)
      return false;
    std::this_thread::sleep_for(std::chrono::microseconds(sleepUs));
    sleepUs = sleepUs * 2 < maxSleepUs ? sleepUs * 2 : maxSleepUs;
    return true;
  }

private:
  static constexpr uint32_t spinRounds = 64;
  static constexpr uint32_t yieldRounds = 64;
  static constexpr uint32_t maxSleepUs = 128;

  Clock::duration timeout;
  SpinBudget spin;
  Clock::time_point deadline;
  uint32_t rounds = 0;
  uint32_t sleepUs = 1;
};

/// The Platform of Interpreter.h for one threadblock on a CPU thread.
class CpuPlatform {
public:
  // Set up by the executor before the run.
  WorldState *world = nullptr;
  RankState *rankState = nullptr;
  uint32_t rank = 0;
  uint32_t tb = 0;
  Fifo *sendFifo = nullptr; ///< The receiver's FIFO of our send connection.
  Fifo *recvFifo = nullptr; ///< Our receive connection's FIFO.
  const ChunkLayout *layout = nullptr;
  const HostKernels *kernels = nullptr;
  uint64_t pieceBytes = 0; ///< Stride of the pieces in a message slot (every FIFO's).

  // Local halves of the connection counters.
  uint64_t sent = 0;     ///< Messages published on sendFifo.
  uint64_t received = 0; ///< Messages released on recvFifo.
  /// Per step of the threadblock's program, where its send may leave the
  /// data where it lies, the bit of the buffer the data lies in
  /// (DirectSends.h); null: no direct sends. Only where sendFifo->direct
  /// is there and a piece holds an address.
  const uint8_t *directSteps = nullptr;
  /// The buffers (bits 1 << BufferKind) whose direct sends this call makes:
  /// all of them between threads; between processes, those the receiver
  /// can map or read.
  uint8_t directBuffers = 0xff;
  /// Messages up to this count were sent direct, the last of them as
  /// message directUntil - 1: the call ends only once they are released.
  uint64_t directUntil = 0;
  /// Direct messages received (read where they lay) since the executor
  /// last zeroed it.
  uint64_t directReceived = 0;
  /// The steps run, when the world records a timeline.
  std::vector<TraceEvent> events;
  /// Line protocols (LL, LL128): where the steps write the message to send,
  /// which publishSend() then packs into the slot's lines, and where
  /// waitRecv() unpacks the message received for the steps to read. Each
  /// holds its FIFO's dataBytes, rounded up to whole lines; owned by the
  /// executor (TbRun), null where the connection runs Simple.
  char *sendStage = nullptr;
  char *recvStage = nullptr;

  // Memory.

  MemPiece piece(BufferKind buf, uint32_t chunk, uint64_t slice) const {
    PieceRange r = buf == BufferKind::Scratch ? layout->scratchPiece(chunk, slice)
                                              : layout->userPiece(chunk, slice);
    MemPiece m;
    if (void *const *blocks = rankState->blocks[static_cast<unsigned>(buf)]) {
      const uint64_t block = chunk / layout->chunksPerUnit;
      m.ptr = static_cast<char *>(blocks[block]) +
              (r.begin - block * layout->unit) * kernels->elementSize;
    } else {
      m.ptr = rankState->buffers[static_cast<unsigned>(buf)] + r.begin * kernels->elementSize;
    }
    m.length = r.length;
    return m;
  }
  char *slotPiece(char *slot, uint32_t j) const { return slot + j * pieceBytes; }
  const char *recvPiece(char *slot, uint32_t j, uint64_t n) const {
    char *piece = slotPiece(slot, j);
    if (!recvDirect)
      return piece;
    if (!recvFifo->senderPid) {
      const char *where;
      std::memcpy(&where, piece, sizeof where);
      return where;
    }
    // In the sender's process: fetched into the slot, where the data would
    // have been, unless we have it mapped.
    return fromSender(piece, n, piece);
  }
  void recvCopy(char *dst, char *slot, uint32_t j, uint64_t n) {
    // From the sender's process: fetched straight into dst (copy() then
    // has nothing to do), unless we have it mapped.
    const char *src = recvDirect && recvFifo->senderPid ? fromSender(slotPiece(slot, j), n, dst)
                                                        : recvPiece(slot, j, n);
    copy(dst, src, n);
  }
  /// Whether a copy into \p dst (a piece of a buffer of this rank) streams
  /// its stores: in a call that streams, into the Input or Output, not
  /// into the scratch that a later step of this rank reads back.
  bool streamsInto(const char *dst) const {
    if (!rankState->streamStores)
      return false;
    const char *scratch = rankState->buffers[static_cast<unsigned>(BufferKind::Scratch)];
    return !(scratch && dst >= scratch && dst < scratch + rankState->scratchBytes);
  }
  bool sendsResult() const { return sendDirect; }
  void sendPiece(char *slot, uint32_t j, const char *src, uint64_t n) {
    if (sendDirect) {
      std::memcpy(slotPiece(slot, j), &src, sizeof src);
      noteSlotWrite(slotPiece(slot, j), sizeof src);
    } else {
      // Plain stores: the receiver reads the slot soon, from the cache.
      moveBytes(slotPiece(slot, j), src, n * kernels->elementSize);
      noteSlotWrite(slotPiece(slot, j), n * kernels->elementSize);
    }
  }
  /// Where the FIFO records message lengths: the message being written
  /// reaches at least to \p bytes past \p p, when \p p lies in its slot.
  void noteSlotWrite(const char *p, uint64_t bytes) {
    if (sendFifo && sendFifo->lengths && p >= sendSlot && p < sendSlot + sendFifo->slotBytes) {
      const uint64_t end = uint64_t(p - sendSlot) + bytes;
      slotUsed = end > slotUsed ? end : slotUsed;
    }
  }
  /// Whether every direct message this threadblock sent has been read: its
  /// sources may change once the call ends.
  bool drained() const {
    return directUntil == 0 || sendFifo->head->load(std::memory_order_acquire) >= directUntil;
  }

  /// The \p n elements of the direct message piece \p piece (an address
  /// in the sender's process) where this process can read them: where it
  /// has the sender's memory mapped, else fetched into \p into.
  const char *fromSender(const char *piece, uint64_t n, char *into) const {
    const char *where;
    std::memcpy(&where, piece, sizeof where);
    const uint64_t bytes = n * kernels->elementSize;
    if (const char *mapped = peerMapped(where, bytes))
      return mapped;
    readPeerMemory(recvFifo->senderPid, recvFifo->senderRank, into, where, bytes);
    return into;
  }

  /// Where the \p n bytes at \p remote in the sender's process are mapped
  /// here, or null.
  const char *peerMapped(const char *remote, uint64_t n) const {
    if (!recvFifo->windows)
      return nullptr;
    if (!window.covers(remote, n) &&
        !recvFifo->windows->find(recvFifo->senderRank, remote, n, window)) {
      window = PeerWindow();
      return nullptr;
    }
    return window.at(remote);
  }

  // Waits.

  WaitResult checkAbort() const {
    return world->failed.load(std::memory_order_relaxed) ? WaitResult::Aborted : WaitResult::Ready;
  }

  WaitResult waitDependency(uint32_t otherTb, uint32_t step, uint64_t slice) {
    uint64_t target = slice * rankState->numSteps[otherTb] + step + 1;
    std::atomic<uint64_t> &counter = rankState->progress[otherTb].value;
    // Acquire: pairs with the release in the other threadblock's
    // markProgress, so that what its step wrote is visible to ours.
    return waitFor([&] { return counter.load(std::memory_order_acquire) >= target; });
  }

  WaitResult waitRecv(char *&slot, uint32_t count, uint64_t slice) {
    if (recvFifo->protocol != ProtocolKind::Simple) {
      // The lines carry their own flags: the message is there when every
      // line of it is, and the steps read the unpacked copy.
      const uint64_t bytes = messageBytes(*layout, count, slice, pieceBytes, kernels->elementSize);
      if (!unpackLines(recvFifo->protocol, recvStage, recvFifo->slot(received), bytes, received))
        return WaitResult::WouldBlock;
      slot = recvStage;
      recvDirect = false;
      return WaitResult::Ready;
    }
    // Acquire: pairs with the sender's release in publishSend, so that the
    // message's bytes are visible before we read the slot.
    WaitResult r =
        waitFor([&] { return recvFifo->tail->load(std::memory_order_acquire) > received; });
    if (r == WaitResult::Ready) {
      slot = recvFifo->slot(received);
      recvDirect = recvFifo->direct && recvFifo->direct[received % recvFifo->depth];
      directReceived += recvDirect;
    }
    return r;
  }

  WaitResult waitSend(char *&slot, uint32_t count, uint64_t slice) {
    // Acquire: pairs with the receiver's release in releaseRecv, so that its
    // reads of the slot are complete before we overwrite it.
    WaitResult r = waitFor(
        [&] { return sent - sendFifo->head->load(std::memory_order_acquire) < sendFifo->depth; });
    if (r == WaitResult::Ready) {
      if (sendFifo->protocol != ProtocolKind::Simple) {
        slot = sendStage;
        sendBytes = messageBytes(*layout, count, slice, pieceBytes, kernels->elementSize);
      } else {
        slot = sendFifo->slot(sent);
      }
      sendSlot = slot;
      slotUsed = 0;
    }
    return r;
  }

  void releaseRecv() {
    // Release: our reads of the slot happen before the sender's next write
    // to it (it acquires head in waitSend).
    recvFifo->head->store(++received, std::memory_order_release);
    if (recvFifo->senderBell)
      recvFifo->senderBell->ring();
  }

  void publishSend() {
    // Release: the slot's bytes (and its direct mark) happen before the
    // receiver's reads (it acquires tail in waitRecv); for a direct message,
    // so do the writes of the source that came before the send.
    if (sendFifo->direct)
      sendFifo->direct[sent % sendFifo->depth] = sendDirect;
    if (sendFifo->lengths)
      sendFifo->lengths[sent % sendFifo->depth] =
          slotUsed < sendFifo->slotBytes ? slotUsed : sendFifo->slotBytes;
    if (sendFifo->protocol != ProtocolKind::Simple)
      packLines(sendFifo->protocol, sendFifo->slot(sent), sendStage, sendBytes, sent);
    sendFifo->tail->store(++sent, std::memory_order_release);
    if (sendDirect)
      directUntil = sent;
    if (sendFifo->receiverBell)
      sendFifo->receiverBell->ring();
  }

  void markProgress(uint64_t slice, uint32_t step) {
    // Release: this step's writes happen before any step that depends on
    // it (waitDependency acquires). Only this threadblock writes its counter.
    rankState->progress[tb].value.store(slice * rankState->numSteps[tb] + step + 1,
                                        std::memory_order_release);
    if (rankState->progressBell)
      rankState->progressBell->ring();
  }

  // Arithmetic.

  /// Into a buffer of this rank (never a slot).
  void copy(char *dst, const char *src, uint64_t n) {
    // memmove: `cpy` may name the same chunk as source and destination.
    if (!n || dst == src)
      return;
    if (streamsInto(dst))
      streamBytes(dst, src, n * kernels->elementSize);
    else
      moveBytes(dst, src, n * kernels->elementSize);
  }
  void copy2(char *dst0, char *dst1, const char *src, uint64_t n) {
    copy(dst0, src, n);
    moveBytes(dst1, src, n * kernels->elementSize);
    noteSlotWrite(dst1, n * kernels->elementSize);
  }
  void reduce(char *dst, const char *in, const char *local, uint64_t n) {
    kernels->reduce(dst, in, local, n);
    noteSlotWrite(dst, n * kernels->elementSize);
  }
  void reduce2(char *dst0, char *dst1, const char *in, const char *local, uint64_t n) {
    kernels->reduce2(dst0, dst1, in, local, n);
    noteSlotWrite(dst1, n * kernels->elementSize);
  }

  // Observation.

  void stepBegin(uint64_t, uint32_t step) {
    sendDirect = directSteps && (directSteps[step] & directBuffers) != 0;
    if (world->recording)
      stepStartUs = nowUs();
  }
  void stepEnd(uint64_t slice, uint32_t step, const Instruction &in) {
    if (!world->recording)
      return;
    TraceEvent e;
    e.rank = rank;
    e.tb = tb;
    e.slice = slice;
    e.step = step;
    e.op = in.op;
    e.count = in.count;
    e.beginUs = stepStartUs;
    e.endUs = nowUs();
    events.push_back(e);
  }

private:
  double nowUs() const {
    return std::chrono::duration<double, std::micro>(Clock::now() - world->start).count();
  }

  /// Ready when \p ready() holds, else WouldBlock: the worker thread that
  /// runs this threadblock goes on with its others and paces itself when
  /// none can move (ThreadExecutor.cpp), so a blocked threadblock never
  /// holds up another.
  template <class Pred> WaitResult waitFor(Pred ready) const {
    return ready() ? WaitResult::Ready : WaitResult::WouldBlock;
  }

  double stepStartUs = 0;
  bool sendDirect = false;   ///< The current step sends direct.
  bool recvDirect = false;   ///< The message being read is direct.
  char *sendSlot = nullptr;  ///< The slot being written.
  uint64_t slotUsed = 0;     ///< Its bytes written so far (Fifo::lengths).
  uint64_t sendBytes = 0;    ///< Line protocols: the data bytes of the message being written.
  mutable PeerWindow window; ///< The sender's memory last read (peerMapped()).
};

} // namespace detail
} // namespace coll

#endif // COLL_RUNTIME_LIB_CPUPLATFORM_H
