//===- CalibrationPlans.h - Small plans that measure a platform -*- C++ -*-===//
///
/// \file
/// The hand-built plans that coll-calibrate runs to measure what the
/// predictor's model (Predict.h) needs of a platform: local steps, steps of
/// many chunks, ping-pongs and one-way streams. Each is a valid plan of
/// float chunks that any executor runs (LocalWorld, ProcessGroup,
/// DeviceWorld), so the figures are the runtime's own, not a
/// microbenchmark's.
///
//===----------------------------------------------------------------------===//

#ifndef COLL_RUNTIME_CALIBRATIONPLANS_H
#define COLL_RUNTIME_CALIBRATIONPLANS_H

#include "coll/Runtime/Plan.h"

#include <cstdint>

namespace coll {

/// A plan of \p nranks ranks without threadblocks yet: one chunk in and out
/// per rank, two slots per connection.
Plan calibrationPlan(const char *name, CollectiveKind kind, uint32_t nranks);

/// \p ranks ranks (default one), each of whose one threadblock runs
/// \p steps steps, each copying \p chunks chunks of its input to its output
/// (the plan's buffers hold \p chunks chunks). Of more than one rank, a
/// plan of no collective: every rank on its own, for the fixed cost of a
/// call of that many ranks.
Plan localStepsPlan(uint32_t steps, uint32_t chunks = 1, uint32_t ranks = 1);

/// One rank whose \p threadblocks threadblocks each copy a chunk of their
/// own, in one step, from its input to its output: the copy bandwidth of
/// that many threadblocks.
Plan localCopyPlan(uint32_t threadblocks);

/// The same with a reduction instead of the copy (re: output chunk t =
/// input chunk t op output chunk t): the reduction bandwidth.
Plan localReducePlan(uint32_t threadblocks);

/// One rank whose \p threadblocks threadblocks each run one step, in a
/// chain: threadblock 0 copies input chunk 0 to output chunk 0, and each
/// threadblock t after it waits for threadblock t - 1's step (a
/// cross-threadblock dependency) and copies output chunk t - 1 to output
/// chunk t. Against localCopyPlan() of as many: what a dependency costs.
Plan dependencyChainPlan(uint32_t threadblocks);

/// Two ranks that pass one message back and forth \p roundTrips times,
/// each received by a step of \p recvOp (r, or rrc: reduced with the
/// receiver's input into its output). \p waiters more threadblocks, split
/// between the ranks, each wait for the ping-pong's last step of their
/// rank (a cross-threadblock dependency) and then copy a chunk of their
/// own: what waiting threadblocks cost the others (on a GPU, their polls).
Plan pingPongPlan(uint32_t roundTrips, Opcode recvOp = Opcode::Recv, uint32_t waiters = 0);

/// Rank 0 sends \p messages messages of its input to rank 1, a chunk each
/// (a broadcast of \p messages chunks), four slots in flight.
Plan oneWayPlan(uint32_t messages);

} // namespace coll

#endif // COLL_RUNTIME_CALIBRATIONPLANS_H
