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
#include "coll/Runtime/Plan.h"
#include "coll/Runtime/Status.h"

#include <cstdint>
#include <vector>

namespace coll::kernels {

/// Hashes that identify a plan across ranks, whether a rank holds the whole
/// plan or only its section.
struct PlanIdentity {
  uint64_t info = 0;    ///< The plan's global facts (PlanInfo).
  uint64_t section = 0; ///< This rank's section.
  uint64_t whole = 0;   ///< Every section; 0 when the rank holds only its own.
};

/// A 64-bit hash of \p info.
uint64_t hashPlanInfo(const PlanInfo &info);
/// A 64-bit hash of one rank's section.
uint64_t hashRankPlan(const RankPlan &rp);
/// The identity of \p plan as rank \p rank holds it.
PlanIdentity planIdentity(const Plan &plan, uint32_t rank);

/// What each rank tells every other first; fixed size.
struct PeerHello {
  static constexpr uint64_t kMagic = 0x6c6c6f434c43434eull;
  uint64_t magic = kMagic;
  uint32_t rank = 0;   ///< The NCCL rank.
  uint32_t nranks = 0; ///< The plan's ranks.
  uint32_t failed = 0; ///< Nonzero: this rank could not prepare its part.
  uint32_t reserved = 0;
  PlanIdentity plan;
  uint64_t sliceBytes = 0;   ///< Options that shape the FIFOs and counters.
  uint64_t processToken = 0; ///< Equal for ranks of one process.
  int32_t device = -1;
  uint32_t numEntries = 0;    ///< ConnectionEntry records that follow.
  uint64_t base = 0;          ///< The connection memory, in the owner's address space.
  uint64_t bytes = 0;         ///< Its size.
  unsigned char ipc[64] = {}; ///< cudaIpcMemHandle_t of the connection memory.
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
  uint64_t counter = 0;   ///< Offset of the tail (Receive) or head (Send) counter.
  uint64_t slots = 0;     ///< Receive: offset of the slots.
  uint64_t slotBytes = 0; ///< Receive: bytes of one slot.
};

/// Checks that the gathered \p hellos (indexed by NCCL rank) agree with each
/// other and with rank \p self's view: no rank failed to prepare its part,
/// every rank found where it should be,
/// the same plan facts, the same slice size, the same whole plan wherever a
/// rank holds it, and, when \p self holds the whole plan (\p localSections
/// its sections' hashes, else empty), each rank's section as \p self has it.
/// The error names the ranks that differ.
Status checkHellos(const std::vector<PeerHello> &hellos, uint32_t self,
                   const std::vector<uint64_t> &localSections);

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

/// "rank 3", "ranks 1, 2 and 5".
std::string formatRanks(const std::vector<uint32_t> &ranks);

} // namespace coll::kernels

#endif // COLL_KERNELS_LIB_NCCLSETUP_H
