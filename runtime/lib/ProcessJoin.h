//===- ProcessJoin.h - A process rank joins its job ------------*- C++ -*-===//
//
// ProcessGroup::create()'s work: claiming a rank's control segment and
// joining the instance of the job that rank 0 names. Private to the runtime
// library.
//
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_LIB_PROCESSJOIN_H
#define COLL_RUNTIME_LIB_PROCESSJOIN_H

#include "ProcessControl.h"
#include "coll/Runtime/KeyValueStore.h"

namespace coll {
namespace detail {

/// Creates the control segment of \p jc's rank (replacing a stale one of
/// its name), then waits until every rank has joined the same instance of
/// the job (ProcessGroupOptions::setupTimeoutSeconds) and has mapped every
/// peer's segment into \p jc; finally removes data segments of this rank
/// that an earlier job of the name left. \p jc holds the job, the rank, the
/// number of ranks and the options, and room for nranks peers.
CallError joinJob(JobControl &jc);

/// joinJob() for a job whose ranks may span hosts: the ranks meet through
/// \p store (keys "coll/<job>/..."): each publishes its host, its nonce and
/// its network address, maps the control segments of the peers on its
/// host and connects to the others (NetEngine.h), whose control blocks it
/// mirrors. Returns once every rank has found every other.
CallError joinJobThroughStore(JobControl &jc, KeyValueStore &store);

} // namespace detail
} // namespace coll

#endif // COLL_RUNTIME_LIB_PROCESSJOIN_H
