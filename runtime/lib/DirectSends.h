//===- DirectSends.h - Sends whose receiver reads the data in place -*- C++ -*-===//
//
// A send (`s`) copies its source into a slot of the receiver's FIFO, and the
// receiver copies it out again. Where the source stays as it is until the
// call ends, the sender can instead leave it where it lies and put its
// address in the slot: the receiver then reads the sender's memory, and the
// data crosses memory once instead of twice. That is safe when no step of
// the sending rank writes the source after the send, and the sender does
// not end its call before every such message is read (CpuPlatform's
// drained()). A receive that sends on what it stores (`rcs`, `rrcs`) can
// do the same with its destination. LocalWorld's receivers read the sender's
// memory directly; ProcessGroup's fetch it from the sender's process
// (CpuPlatform's readPeerMemory). Private to the runtime library.
//
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_LIB_DIRECTSENDS_H
#define COLL_RUNTIME_LIB_DIRECTSENDS_H

#include "OutOfPlace.h"
#include "StepOrder.h"
#include "coll/Runtime/Plan.h"

#include <cstdint>
#include <vector>

namespace coll {
namespace detail {

/// Per threadblock, per step, where the step may be a direct send, the bit
/// (1 << BufferKind) of the buffer the data it sends lies in; else 0.
using DirectSteps = std::vector<std::vector<uint8_t>>;

/// The direct sends of rank \p rank (section \p rp of a plan with \p info)
/// running \p rewrite (per threadblock, a rewrite of rp's steps with the
/// same dependencies, OutOfPlace.h), or rp's own steps when it is null: the
/// sends (`s`) from Input or Output whose source chunks no step of the rank
/// writes after them, and the receives that send on what they store (`rcs`,
/// `rrcs`) into Input or Output chunks that no later step writes: these
/// store, then send the address of what they stored. \p aliased: Input and Output are the in-place
/// alias of each other (aliasedChunk()), as when an in-place plan runs in place; else they are
/// apart.
///
/// The steps are walked in \p order, stepOrder(rp): a plan orders every
/// access of a chunk against its writes (or it would race), so a write that
/// comes after a send in this order comes after it in every run. Empty (no
/// direct send) when \p order is (a cycle, a dependency on nothing).
DirectSteps directSendSteps(const PlanInfo &info, uint32_t rank, const RankPlan &rp,
                            const StepOrder &order,
                            const std::vector<std::vector<Instruction>> *rewrite, bool aliased);

/// A rank's direct sends on each program it may run.
struct RankDirectSends {
  /// On its own steps (Input and Output the alias of each other in an
  /// in-place plan, which works in one buffer).
  DirectSteps inPlace;
  /// On its out-of-place program (OutOfPlace.h), Input and Output apart;
  /// empty without one.
  DirectSteps outOfPlace;
  /// Those of a run of the out-of-place program, or of the rank's own.
  const DirectSteps &of(bool outOfPlaceRun) const { return outOfPlaceRun ? outOfPlace : inPlace; }
};

/// directSendSteps() of rank \p rank (section \p rp) on its own steps and
/// on \p outOfPlace, its out-of-place program, ordered once.
RankDirectSends rankDirectSends(const PlanInfo &info, uint32_t rank, const RankPlan &rp,
                                const OutOfPlaceProgram &outOfPlace);

} // namespace detail
} // namespace coll

#endif // COLL_RUNTIME_LIB_DIRECTSENDS_H
