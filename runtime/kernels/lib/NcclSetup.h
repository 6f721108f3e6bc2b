//===- NcclSetup.h - What NcclCommunicator's ranks exchange -----*- C++ -*-===//
/// \file
/// The records NcclCommunicator's ranks exchange when they connect (with
/// ncclAllGather, so every rank sees every record) and the checks made on
/// them. Each check is a function of the gathered records alone, so every
/// rank reaches the same verdict and none goes on to launch while another
/// gave up. Pure host logic.
//===----------------------------------------------------------------------===//
#ifndef COLL_KERNELS_LIB_NCCLSETUP_H
#define COLL_KERNELS_LIB_NCCLSETUP_H

#include "LaunchTables.h"
#include "coll/Kernels/NcclCommunicator.h"
#include "coll/Runtime/Plan.h"
#include "coll/Runtime/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace coll::kernels {

/// What each rank tells every other first; fixed size.
struct PeerHello {
  static constexpr uint64_t kMagic = 0x6c6c6f434c43434eull;
  uint64_t magic = kMagic;
  uint32_t rank = 0;   ///< The NCCL rank.
  uint32_t nranks = 0; ///< The plan's ranks.
  uint32_t failed = 0; ///< Nonzero: this rank could not prepare its part.
  uint32_t reserved = 0;
  /// The plan's identity, ValidatedPlan::checksum(): that of the file it
  /// was loaded from, whole or for one rank.
  uint64_t plan = 0;
  uint64_t sliceBytes = 0;   ///< Options that shape the FIFOs and counters.
  uint64_t processToken = 0; ///< Equal for ranks of one process.
  int32_t device = -1;
  uint32_t numEntries = 0; ///< ConnectionEntry records that follow.
  uint32_t transport = 0;  ///< The NcclTransport asked for.
  uint32_t offNode = 0;    ///< Peers this rank talks to outside its LSA team.
  uint32_t signals = 0;    ///< GIN signals its connections need.
  uint64_t bytes = 0;      ///< Its connection memory (ConnectionLayout::bytes).
};

/// Where each rank's connection memory is, exchanged once it is allocated.
struct PeerMemory {
  uint32_t failed = 0; ///< Nonzero: this rank could not allocate it.
  uint32_t reserved = 0;
  uint64_t base = 0;          ///< In the owner's address space.
  unsigned char ipc[64] = {}; ///< cudaIpcMemHandle_t (the IPC transport).
};

/// One end of a connection, as its rank lays it out in its connection memory.
struct ConnectionEntry {
  enum : uint32_t { Receive = 0, Send = 1 };
  uint32_t kind = Receive;
  uint32_t peer = 0; ///< The rank on the other end.
  uint32_t channel = 0;
  uint32_t messagesPerSlice = 0; ///< Receives (sends) of the threadblock per pass.
  uint32_t maxCount = 0;         ///< Chunks of its largest message.
  uint32_t depth = 0;
  uint32_t network = 0;   ///< Nonzero: the peer is reached over the network (GIN).
  uint32_t signal = 0;    ///< Network: this end's GIN signal (Receive: tail, Send: head).
  uint64_t counter = 0;   ///< Offset of the tail (Receive) or head (Send) counter.
  uint64_t slots = 0;     ///< Receive: offset of the slots; network Send: of the staging.
  uint64_t slotBytes = 0; ///< Bytes of one slot (Send: of one staging slot).
  /// Receive, not over the network: offset of the slots' marks (FifoDesc::marks).
  uint64_t marks = 0;
};

/// Where one FIFO of LaunchTables::fifos sits in its rank's connection
/// memory (offsets; what the peer owns is filled in by resolveConnections).
struct FifoOffsets {
  uint64_t tail = 0, head = 0; ///< Counters this rank owns.
  uint64_t slots = 0;          ///< Receive: the slots; network Send: the staging.
  uint64_t slotBytes = 0;      ///< Of the slots this rank owns.
  uint64_t marks = 0;          ///< Receive, loads and stores: the slots' marks.
  bool ownsTail = false, ownsHead = false, ownsSlots = false, ownsMarks = false;
};

/// A rank's connection memory: counters, receive slots, staging slots for
/// the sends that go over the network, and the entries its peers need.
struct ConnectionLayout {
  uint64_t bytes = 0;
  std::vector<ConnectionEntry> entries; ///< Receives from peers, then sends to peers.
  std::vector<uint32_t> entryFifo;      ///< The FIFO of each entry.
  std::vector<FifoOffsets> fifos;       ///< Per LaunchTables::fifos.
  uint32_t signals = 0;                 ///< GIN signals of the network ends.
  uint64_t largestBytes = 0;            ///< The largest part of bytes,
  std::string largest;                  ///< and what it is.
};

/// Checks rank \p self's connection memory \p layout against the cap
/// \p limitBytes (NcclOptions::memoryLimitBytes: 0 for
/// defaultMemoryLimit(0), noMemoryLimit for none).
Status checkConnectionMemory(const ConnectionLayout &layout, uint32_t self, uint64_t limitBytes);

/// Lays out the connection memory of rank \p self for \p tables (one rank's
/// section of \p plan) with slots of \p slotStride bytes per chunk:
///  - for receive FIFO i, its tail counter at line 2i and a head counter at
///    line 2i+1 (used when the sender is this rank; otherwise the head lives
///    in the sender's memory, where the sender polls it);
///  - for remote send j, its head counter at line 2R+j (R receive FIFOs);
///  - the slots of each receive FIFO, sized for the largest slice, so that
///    the layout does not depend on a launch's count, and, where the
///    sender is reached by loads and stores, a mark per slot (FifoDesc::
///    marks, for direct messages);
///  - for each send to a peer in \p network, staging slots of the same
///    shape: the kernel fills them, and a GIN put carries them over.
/// GIN signals are numbered per rank: receives from network peers first (each
/// counts the messages that arrived), then sends to them (slots freed).
/// Sizes are computed with overflow checks: an error names the FIFO and the
/// plan fields of a size that overflows 64 bits. ConnectionLayout::largest
/// names its largest part, for an error about the total.
Result<ConnectionLayout> layoutConnections(const LaunchTables &tables, const RankPlan &plan,
                                           uint32_t self, uint64_t slotStride,
                                           const std::vector<bool> &network);

/// Points \p tables' FIFOs at what rank \p self owns in its connection
/// memory at \p base (a device address, or the window's offset 0).
void bindLocalConnections(LaunchTables &tables, const ConnectionLayout &layout, char *base);

/// Checks that the gathered \p hellos (indexed by NCCL rank) agree with each
/// other: every rank found where it should be, no rank failed to prepare
/// its part, plans of as many ranks, the same plan (its checksum) and the
/// same slice size. Equal checksums mean equal plans also where a rank
/// holds only its section: it has the checksum of the file it was loaded
/// from. The error names every rank that differs from rank 0.
Status checkHellos(const std::vector<PeerHello> &hellos);

/// The other end of each of rank \p self's connections.
struct ConnectionMatch {
  /// For each Send entry of \p self (in order): the receiver's Receive entry.
  std::vector<ConnectionEntry> sendTo;
  /// For each Receive entry of \p self (in order): the sender's Send entry.
  std::vector<ConnectionEntry> recvFrom;
};

/// Matches every rank's entries (\p entries, indexed by rank) with their
/// other ends: each send has a receive on the peer and the other way round,
/// with as many messages per pass, messages that fit, and the same depth.
/// Checks every rank's connections, so every rank reaches the same verdict.
Result<ConnectionMatch> matchConnections(const std::vector<std::vector<ConnectionEntry>> &entries,
                                         uint32_t self);

/// A pointer into a peer's connection memory that one of this rank's FIFOs
/// needs: where a peer reached by loads and stores keeps it.
struct PeerReference {
  enum Field : uint32_t { Tail = 0, Head = 1, Slots = 2, Marks = 3 };
  uint32_t fifo = 0; ///< In LaunchTables::fifos.
  Field field = Tail;
  uint32_t peer = 0;
  uint64_t offset = 0; ///< In the peer's connection memory.
};

/// Completes \p tables' FIFOs with their other ends (\p match, for the
/// entries of \p layout): a network FIFO gets the peer, the signals and the
/// window offsets its puts need; for every other FIFO with a remote end, the
/// result lists the peer pointers to resolve (with IPC mappings or LSA).
std::vector<PeerReference> resolveConnections(LaunchTables &tables, const ConnectionLayout &layout,
                                              const ConnectionMatch &match);

/// Points each reference's field of its FIFO at \p pointers (one each).
void applyPeerPointers(LaunchTables &tables, const std::vector<PeerReference> &refs,
                       const std::vector<char *> &pointers);

/// The transport the ranks use, the same for all: each asked for the same
/// one (else an error naming the ranks that differ); Auto picks Symmetric
/// when some rank has a peer outside its LSA team, else Ipc; Ipc with such
/// a peer is an error.
Result<NcclTransport> chooseTransport(const std::vector<PeerHello> &hellos);

/// "rank 3", "ranks 1, 2 and 5".
std::string formatRanks(const std::vector<uint32_t> &ranks);

} // namespace coll::kernels

#endif // COLL_KERNELS_LIB_NCCLSETUP_H
