//===- NetEngine.h - A process rank's connections across hosts -*- C++ -*-===//
//
// The network side of a ProcessGroup whose ranks span hosts (ProcessGroup.h,
// "Across hosts"): one UCX worker per rank and a thread that drives it.
//
//  - Control: a rank's peers on other hosts cannot map its control block,
//    so the engine keeps a copy of each one's (its mirror, which
//    JobControl::ctl points to) and sends its own rank's whenever it
//    changes (JobControl::ringPeers) and every heartbeat interval. Every
//    update is a heartbeat; a peer silent for longer than the silence limit,
//    or whose connection UCX reports broken, is lost (lost()).
//  - Data: a connection whose ends are on different hosts is a NetLink
//    with FIFO memory on each side (this process's heap): the sender's
//    threadblock fills its slots as it would fill a receiver's, and the
//    engine sends each published message (its bytes only, Fifo::lengths)
//    as one tagged message, freeing the slot once UCX is done with it; on
//    the receiving side it keeps a receive posted into every free slot, and
//    publishes each message that arrives, in order. Tagged messages beat
//    one-sided puts plus a flag over UCX's TCP transport at every size
//    measured (docs/performance.md, "Across hosts").
//
// Every UCX call is made on the engine's thread, but for setup (create(),
// connect()) before start() and teardown after the thread has stopped.
// Private to the runtime library.
//
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_LIB_NETENGINE_H
#define COLL_RUNTIME_LIB_NETENGINE_H

#include "CpuPlatform.h"
#include "coll/Runtime/Status.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace coll {
namespace detail {

struct ControlBlock;
struct JobControl;

/// Whether this build has the network transport (UCX).
bool netAvailable();

/// One connection that crosses the network, as seen from one end: its FIFO
/// (slots and counters in this process), which the local threadblock uses
/// as any other, and the tags of its messages. Shared between the call's
/// data side and the engine, which lets go of it once no request of UCX
/// refers to its memory.
struct NetLink {
  NetLink(bool sending, uint32_t peer, uint64_t tagBase, uint32_t depth, uint64_t slotBytes);

  /// One slot's request of UCX, and its completion (set on the engine's
  /// thread by the request's callback).
  struct Slot {
    void *request = nullptr;
    uint8_t done = 0; ///< 1: completed; 2: failed (status).
    int32_t status = 0;
    uint64_t length = 0; ///< Bytes received.
  };

  const bool sending; ///< This end sends (else it receives).
  const uint32_t peer;
  /// The tag of message m is tagBase | (m & the message mask).
  const uint64_t tagBase;
  FifoStorage storage;
  std::unique_ptr<uint64_t[]> lengths; ///< Fifo::lengths of a sending end.
  std::unique_ptr<Slot[]> slots;       ///< By message % depth.
  uint64_t issued = 0;                 ///< Messages handed to UCX (sent, or receives posted).
  uint64_t completed = 0;              ///< Of them, those completed, in order.
  std::atomic<bool> detached{false};

  Fifo &fifo() { return storage.fifo; }
};

/// The tag base of the connection from rank \p sender on channel
/// \p channel, of the data side \p side (a number every rank gives the
/// same call's data side).
uint64_t netTagBase(uint64_t side, uint32_t sender, uint32_t channel);

/// One rank's network engine.
class NetEngine {
public:
  /// A UCX context and worker for rank \p jc.rank; its address is
  /// address().
  static Result<std::unique_ptr<NetEngine>> create(JobControl &jc);
  virtual ~NetEngine() = default;

  /// The worker's address, for the peers to connect to.
  virtual const std::string &address() const = 0;
  /// Connects to rank \p q at \p address, and makes \p mirror (which
  /// JobControl::ctl[q] points to) the copy of its control block.
  virtual Status connect(uint32_t q, const std::string &address, ControlBlock *mirror) = 0;
  /// Starts the thread. Until then no update is sent or applied.
  virtual void start() = 0;
  /// Sends this rank's control block to every remote peer now, and waits
  /// (at most \p seconds) until each has it or is lost: for the last
  /// update before the group goes.
  virtual void flush(double seconds) = 0;

  /// This rank's control block changed: send it soon.
  virtual void controlChanged() = 0;
  /// Whether remote peer \p q is lost (its connection broke, or it fell
  /// silent), and why.
  virtual bool lost(uint32_t q, std::string *why = nullptr) const = 0;
  /// The doorbell the engine's thread sleeps on (rung by the threadblocks
  /// of this process when they publish into, or release, a NetLink's slot).
  virtual Doorbell &bell() = 0;

  /// One pass over the network and the links, on the calling thread (a
  /// run's worker with nothing else to do), unless another thread is at
  /// it: true when a link's message moved. Between pollerEnter() and pollerLeave()
  /// the engine's thread leaves the network to such workers.
  virtual bool poll() = 0;
  virtual void pollerEnter() = 0;
  virtual void pollerLeave() = 0;

  /// Starts serving \p links (their FIFOs then move).
  virtual void attach(const std::vector<std::shared_ptr<NetLink>> &links) = 0;
  /// Stops serving \p links: cancels their receives; the engine keeps them
  /// until UCX is done with their memory.
  virtual void detach(const std::vector<std::shared_ptr<NetLink>> &links) = 0;
  /// A link whose message failed (a broken connection, a message longer
  /// than its slot), with why, or "" when none has.
  virtual std::string linkFailure() const = 0;
};

/// Sets the UCX transport settings Collc's messages want in this process's
/// environment, where the user has not set them: TCP segments of 256 KiB
/// (UCX_TCP_TX_SEG_SIZE, UCX_TCP_RX_SEG_SIZE; UCX's default is 8 KiB).
/// UCX reads them only from there, when a context is made.
void tuneUcx();

/// This host as ranks on other hosts tell it apart: the environment's
/// COLL_HOST when set, else the host name, the boot id, the /dev/shm
/// directory and the network namespace (ranks that do not share /dev/shm,
/// or a network namespace, are on different hosts).
std::string hostIdentity();

} // namespace detail
} // namespace coll

#endif // COLL_RUNTIME_LIB_NETENGINE_H
