//===- ProcessRendezvous.h - The ranks of a process call meet --*- C++ -*-===//
//
// Before a ProcessGroup call runs, every rank publishes its description of
// the call (PreparedCall.h) in its control segment and waits for every
// peer's; then all ranks hold the same descriptions and reach the same
// verdict with agree(). Private to the runtime library.
//
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_LIB_PROCESSRENDEZVOUS_H
#define COLL_RUNTIME_LIB_PROCESSRENDEZVOUS_H

#include "ProcessControl.h"
#include "coll/Runtime/PreparedCall.h"

#include <cstdint>
#include <vector>

namespace coll {
namespace detail {

/// Publishes this rank's \p description of call \p seq and wakes the
/// peers. Release: a peer that sees the call published sees the
/// description and whatever this rank wrote before (its data segment).
/// \p reuses: PublishedCall::reuses.
void publishCall(JobControl &jc, uint64_t seq, const CallDescription &description, uint64_t reuses);

/// Whether \p a and \p b describe the same call: the same plan, count,
/// slices, type and operator, and neither an error.
bool sameCall(const CallDescription &a, const CallDescription &b);

/// Whether a peer has published call \p seq differently from \p ours
/// (another description, or another call's data side): a rank that runs
/// its call before it has seen the peers' (a reused data side) stops
/// waiting for them then.
bool peerDisagrees(const JobControl &jc, uint64_t seq, const PublishedCall &ours);

/// Waits until every peer has published call \p seq
/// (ProcessGroupOptions::setupTimeoutSeconds), checking every liveness
/// interval that the peers it waits for are alive and have not failed, and
/// puts every rank's description into \p calls (calls[q] is rank q's) and
/// whether every rank published the same PublishedCall::reuses as this one
/// into \p sameReuse. It spins a little before it sleeps: a peer that is
/// running publishes within microseconds. A
/// peer that failed or went before it called fails the call; a timeout, or
/// a peer that published the call and failed since, breaks the group.
CallFailure awaitCalls(JobControl &jc, uint64_t seq, std::vector<CallDescription> &calls,
                       bool &sameReuse);

} // namespace detail
} // namespace coll

#endif // COLL_RUNTIME_LIB_PROCESSRENDEZVOUS_H
