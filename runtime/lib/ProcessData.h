//===- ProcessData.h - A process rank's data segment of one call -*- C++ -*-===//
//
// The data side of a ProcessGroup call (ProcessGroup.cpp): each rank's
// segment "/coll-<job>.<rank>.<call>" holds its threadblocks' progress
// counters and the FIFOs of the connections it receives on, listed in a
// table (FifoEntry) where its senders find them. Private to the runtime
// library.
//
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_LIB_PROCESSDATA_H
#define COLL_RUNTIME_LIB_PROCESSDATA_H

#include "CpuPlatform.h"
#include "ProcessControl.h"
#include "ShmSegment.h"
#include "coll/Runtime/Plan.h"
#include "coll/Runtime/Status.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace coll {
namespace detail {

constexpr uint64_t dataMagic = 0x314154414c4c4f43ull; ///< "COLLDAT1"

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
  /// 1: the owner reads the sender's memory, and the sender may send
  /// direct (DirectSends.h), marking such slots in the `depth` bytes at
  /// directOffset; 0: every message in the slots.
  uint32_t peerReads = 0;
  uint32_t protocol = 0; ///< ProtocolKind of the slots (Protocol.h).
  uint64_t directOffset = 0;
  uint64_t dataBytes = 0; ///< One message's data (slotBytes for Simple).
};

/// This rank's data segment of one call, laid out.
struct DataLayout {
  uint64_t bytes = 0;
  uint64_t tableOffset = 0;
  uint64_t progressOffset = 0;
  std::vector<FifoEntry> fifos;
};

/// Lays out rank \p r's data segment: header, FIFO table, progress
/// counters, then each receiving threadblock's counters, direct marks and
/// slots. \p directFrom: per rank, whether r takes direct messages from it
/// (FifoEntry::peerReads). The connections from ranks that \p remote marks
/// (on other hosts) have no FIFO here: theirs are NetLinks. The slots are
/// laid out for \p protocol, whose connections take no direct messages.
Result<DataLayout> layOutData(const RankPlan &rp, uint32_t r, uint32_t depth, uint64_t pieceBytes,
                              const std::vector<uint8_t> &directFrom,
                              const std::vector<uint8_t> &remote = {},
                              ProtocolKind protocol = ProtocolKind::Simple);

/// This rank's data segment of one call. Its name goes as soon as every
/// rank that sends to it has mapped it (at once when there is none), and at
/// the latest when this object does.
class OwnDataSegment {
public:
  explicit OwnDataSegment(std::string name) : segName(std::move(name)) {}
  /// Unlinks the name, when it is still the segment's, and unmaps it.
  ~OwnDataSegment();
  OwnDataSegment(const OwnDataSegment &) = delete;
  OwnDataSegment &operator=(const OwnDataSegment &) = delete;

  /// Creates the segment of \p layout for call \p seq of \p owner's rank,
  /// whose section is \p rp: the header (published by its magic), the FIFO
  /// table and zeroed counters. A segment of the name left by an earlier
  /// job of the name is replaced.
  Status create(const ControlBlock &owner, uint64_t seq, const RankPlan &rp, DataLayout layout);

  /// Unlinks the name now, when it is still the segment's: once every
  /// sender has mapped it, for a segment kept for later calls.
  void unlinkName();

  bool mapped() const { return m.mapped(); }
  char *base() const { return m.data(); }
  const DataLayout &layout() const { return data; }
  /// The progress counters of the rank's threadblocks.
  PaddedCounter *progress() const {
    return reinterpret_cast<PaddedCounter *>(m.data() + data.progressOffset);
  }

private:
  std::string segName;
  ShmMapping m;
  DataLayout data;
};

/// The FIFOs of a rank's threadblocks in one call: those it sends on, in
/// its receivers' data segments (mapped here), and those it receives on, in
/// its own.
struct CallFifos {
  CallFifos() = default;
  CallFifos(const CallFifos &) = delete;
  CallFifos &operator=(const CallFifos &) = delete;
  /// Hands the links back to the engine, which lets them go once UCX is
  /// done with their memory.
  ~CallFifos();

  std::vector<ShmMapping> peerData; ///< By rank; mapped for the ranks we send to.
  std::vector<Fifo> send, recv;     ///< By threadblock.
  std::vector<bool> hasSend, hasRecv;
  /// The connections with ranks on other hosts, served by `engine`.
  std::vector<std::shared_ptr<NetLink>> links;
  NetEngine *engine = nullptr;

  Fifo *sendFifo(uint32_t tb) { return hasSend[tb] ? &send[tb] : nullptr; }
  Fifo *recvFifo(uint32_t tb) { return hasRecv[tb] ? &recv[tb] : nullptr; }
};

/// Maps the data segments of call \p seq of the ranks that \p rp (this
/// rank's section) sends to and finds its FIFOs there (of \p depth slots
/// of at least \p pieceBytes per chunk), and those it receives on in
/// \p own; a connection with a rank on another host gets a NetLink, which
/// the engine serves from then on (in Simple, whatever \p protocol the
/// shared-memory FIFOs run). Every error breaks the group.
CallError connectFifos(JobControl &jc, uint64_t seq, const RankPlan &rp, uint32_t depth,
                       uint64_t pieceBytes, const OwnDataSegment &own, CallFifos &fifos,
                       ProtocolKind protocol);

} // namespace detail
} // namespace coll

#endif // COLL_RUNTIME_LIB_PROCESSDATA_H
