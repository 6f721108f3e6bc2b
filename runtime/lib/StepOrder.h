//===- StepOrder.h - A rank's steps in an order of their dependencies -*- C++ -*-===//
//
// The steps of one rank in one order that respects program order and the
// dependencies between its threadblocks (Kahn's algorithm). A plan orders
// every access of a chunk against its writes (or it would race), so any
// such order sees the accesses of a chunk in the order of every run: the
// analyses that rewrite or mark a rank's steps walk it (OutOfPlace.h,
// DirectSends.h). Private to the runtime library.
//
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_LIB_STEPORDER_H
#define COLL_RUNTIME_LIB_STEPORDER_H

#include "coll/Runtime/Plan.h"

#include <cstddef>
#include <vector>

namespace coll {
namespace detail {

/// A rank's steps numbered threadblock by threadblock: step i of
/// threadblock b is first[b] + i.
struct StepOrder {
  std::vector<size_t> first; ///< Per threadblock, and the total at the end.
  std::vector<size_t> order; ///< Every step, each after those it follows.
  /// The threadblock and step of number \p s.
  std::pair<size_t, size_t> locate(size_t s) const;
};

/// The order of \p rp's steps, which serves as well for any rewrite of them
/// that keeps their dependencies (OutOfPlace.h); empty (none in `first`)
/// when they form a cycle or a dependency names a step that is not there.
StepOrder stepOrder(const RankPlan &rp);

/// Whether the dependencies and program order of rank \p rank's steps
/// (\p rp, in \p order, of a plan with \p info) order every write of an
/// Input or Output chunk against every other access of that chunk (through
/// the in-place alias in an in-place plan). A plan may order some of them
/// by messages alone (a step reads a chunk and sends, a peer answers, and
/// another threadblock receives into the chunk): every run then keeps them
/// apart, but one order of the steps, as the analyses walk, may not. Those
/// analyses hold only where this is true. False too for a plan too large
/// to check (steps times threadblocks beyond 2^26).
bool accessesOrderedByDependencies(const PlanInfo &info, uint32_t rank, const RankPlan &rp,
                                   const StepOrder &order);

} // namespace detail
} // namespace coll

#endif // COLL_RUNTIME_LIB_STEPORDER_H
