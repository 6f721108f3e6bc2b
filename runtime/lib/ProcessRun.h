//===- ProcessRun.h - The run of one rank of a process call ----*- C++ -*-===//
//
// The last step of a ProcessGroup call: this rank's threadblocks run on its
// workers (Interpreter<CpuPlatform>, as in LocalWorld), paced by
// ShmPacer: spin, yield, then sleep on the rank's doorbell, and every
// liveness interval check on the peers. Private to the runtime library.
//
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_LIB_PROCESSRUN_H
#define COLL_RUNTIME_LIB_PROCESSRUN_H

#include "ExecCommon.h"
#include "ProcessControl.h"
#include "ProcessData.h"

namespace coll {
namespace detail {

/// Runs the threadblocks of \p rp (this rank's section, at least one) for
/// call \p seq as \p call says, on the buffers of \p binding, the FIFOs
/// of \p fifos and the progress counters of \p own, with
/// ProcessGroupOptions::workers workers (the calling thread is one). The
/// first failure (in time) is the error; it breaks the group.
CallError runRank(JobControl &jc, uint64_t seq, const PreparedCall &call, const RankPlan &rp,
                  HostBinding &binding, CallFifos &fifos, const OwnDataSegment &own,
                  const HostKernels &kernels);

} // namespace detail
} // namespace coll

#endif // COLL_RUNTIME_LIB_PROCESSRUN_H
