//===- PerfDriver.h - coll-perf's sweep over sizes --------------*- C++ -*-===//
/// \file
/// Runs one plan at every size of a sweep, out of place and in place, on
/// LocalWorld's threads or on one forked process per rank, checks the
/// first run of each (size, placement) against the reference, times the
/// others as nccl-tests does, and prints a table or CSV rows.
//===----------------------------------------------------------------------===//
#ifndef COLL_TOOLS_COLLPERF_PERFDRIVER_H
#define COLL_TOOLS_COLLPERF_PERFDRIVER_H

#include "ToolSupport.h"
#include "coll/Runtime/DataType.h"
#include "coll/Runtime/PreparedCall.h"
#include "coll/Runtime/Topology.h"

#include <cstdint>
#include <string>
#include <vector>

namespace coll::perf {

/// Which of a collective's two forms a sweep measures.
enum class PlacementKind : uint8_t { OutOfPlace, InPlace, Both };

/// A sweep: nccl-tests' flags and how the ranks run.
struct PerfOptions {
  uint64_t minBytes = 32ull << 20; ///< -b
  uint64_t maxBytes = 32ull << 20; ///< -e
  uint64_t stepFactor = 2;         ///< -f
  uint64_t iters = 20;             ///< -n
  uint64_t warmup = 5;             ///< -w
  bool check = true;               ///< -c
  DataType type = DataType::Float32;
  RedOp op = RedOp::Sum;
  PlacementKind placement = PlacementKind::Both;
  bool processes = false; ///< --ranks-as processes (else threads).
  /// --bind: with processes, pin rank r to the r-th CPU this process may
  /// use, when there are at least as many CPUs as ranks (as mpirun binds
  /// to cores); none: leave them to the scheduler.
  bool bind = true;
  /// -R 1: with processes, the buffers come from ProcessGroup::allocate()
  /// (registered: peers map them and read them where they lie), as
  /// nccl-tests' -R registers its buffers.
  bool registered = false;
  bool csv = false;
  tools::RunSettings run; ///< --slice, --timeout.
  /// --bootstrap tcp://host:port --rank r: this process is one rank of a
  /// job whose ranks may be on several hosts (or network namespaces); rank
  /// 0 prints the sweep, each step's time the slowest rank's.
  tools::Bootstrap *boot = nullptr;
  /// --predict: each size's predicted time on this topology beside it.
  const Topology *predict = nullptr;
};

/// The short name of \p type that the CSV and the peers use: f32, i8, bf16...
const char *shortTypeName(DataType type);

/// One plan of a sweep and the sizes it runs: nccl-tests' sizes up to
/// \p maxBytes that no earlier plan of the sweep takes.
struct SweepPlan {
  const ValidatedPlan *plan = nullptr;
  uint64_t maxBytes = ~uint64_t(0);
};

/// Runs the sweep of \p opts over \p plans (at least one, all of one
/// collective and rank count; the last takes every size left) and prints it
/// on stdout; each row names the plan that ran it. Returns 0, 1 when an
/// element was wrong, 2 on an error (reported on stderr with the prefix
/// "coll-perf: error: ").
int runSweep(const std::vector<SweepPlan> &plans, const PerfOptions &opts);

/// runSweep() of \p plan alone.
int runSweep(const ValidatedPlan &plan, const PerfOptions &opts);

} // namespace coll::perf

#endif // COLL_TOOLS_COLLPERF_PERFDRIVER_H
