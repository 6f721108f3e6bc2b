//===- OutOfPlace.h - In-place plans run out of place without staging -*- C++ -*-===//
//
// An in-place plan (PlanInfo::inplace) works in one buffer. Called out of
// place, prepareCall() first copies the whole input into the output and
// runs the plan there: one more pass over the data than the plan itself
// makes. For a collective whose in-place alias is the whole buffer
// (InPlaceAlias::Same: allreduce, broadcast, reduce) a rank's program can
// instead read each chunk's original value from the input and write the
// output only, as a plan written out of place would: a read that comes
// before every write of its chunk (in the rank's order of steps and
// dependencies) reads the input, every other access the output. The
// dependencies stay those of the in-place plan, so nothing races. Private
// to the runtime library.
//
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_LIB_OUTOFPLACE_H
#define COLL_RUNTIME_LIB_OUTOFPLACE_H

#include "coll/Runtime/Plan.h"
#include "coll/Runtime/PreparedCall.h"

#include <vector>

namespace coll {
namespace detail {

/// A rank's program rewritten to run out of place (see the file comment):
/// per threadblock, its steps with Input and Output renamed. Empty when
/// the rank does not qualify: its steps and dependencies do not order
/// every step (a cycle), a step reads a range of chunks some of which are
/// written before it and some not, a local reduction (`re`) reads an
/// original value in its destination, or a chunk of the buffer is never
/// written (its value would have to be copied over anyway).
struct OutOfPlaceProgram {
  std::vector<std::vector<Instruction>> steps; ///< By threadblock.
  bool empty() const { return steps.empty(); }
};

/// The out-of-place program of \p rp, a rank's section of the plan with
/// \p info; empty too when that plan is not an in-place plan of a
/// collective whose in-place alias is the whole buffer.
OutOfPlaceProgram outOfPlaceProgram(const PlanInfo &info, const RankPlan &rp);

/// Whether \p c (rank c.rank's prepared call of the plan with \p info)
/// is an out-of-place call of an in-place plan that outOfPlaceProgram()
/// can serve; if so, drops the staging copy of the input into the output
/// and points the plan's Input at the caller's input (or its private copy,
/// when the buffers overlap).
bool runOutOfPlace(PreparedCall &c, const PlanInfo &info);

} // namespace detail
} // namespace coll

#endif // COLL_RUNTIME_LIB_OUTOFPLACE_H
