//===- Lowering.h - Passes from a verified trace to a plan ------*- C++ -*-===//
/// \file
/// The lowering passes, in pipeline order (PassList.def). Each is one
/// function in its own file; those that can reject a program report through
/// the DiagnosticEngine and return false.
//===----------------------------------------------------------------------===//
#ifndef COLL_COMPILER_LOWERING_H
#define COLL_COMPILER_LOWERING_H

#include "coll/Compiler/Schedule.h"
#include "coll/Lang/Diagnostics.h"

#include <optional>

namespace coll::compiler {

/// Pass `dag`: the dependence DAG of the trace (RAW, WAR, WAW per slot).
Dag buildDag(const Trace &trace);

/// Pass `split-transfers`: every operation becomes steps on the ranks it
/// involves; cross-rank ones become a send and a receive over a connection
/// (sender, receiver, channel). Fails when a channel hint is too large.
std::optional<Schedule> splitTransfers(const Trace &trace, Dag dag, uint32_t connectionDepth,
                                       DiagnosticEngine &diag);

/// Pass `assign-threadblocks`: gives every step a threadblock, from the
/// program's hints (validated) or automatically: each threadblock owns at
/// most one send and one receive connection, paired where data flows from
/// one to the other so fusion can apply.
bool assignThreadblocks(Schedule &s, DiagnosticEngine &diag);

/// Pass `order`: orders each threadblock's steps by (DAG depth, program
/// order), one global key, so both ends of every connection agree on message
/// order and every dependency points backwards.
/// With \p pairForwards false, no receive is moved next to its forward (and
/// so nothing fuses).
void orderSteps(Schedule &s, bool pairForwards = true);

/// The order pass's fallback, after orderSteps() without pairs, when that
/// order can deadlock with the connection depth: runs the plan with the
/// depth, each threadblock taking the first step of its next few that can
/// run, and keys the steps in the order they ran (both ends of every
/// connection agree, dependencies come first; nothing paired). False when
/// that run gets stuck too (the order is then left as it was).
bool orderStepsBySlots(Schedule &s);

/// Pass `fuse`: merges a receive and the send of what it received into one
/// step (rcs, rrcs; rrs where the received value is dead afterwards).
/// With \p localChains false, local chains are left alone.
void fuseSteps(Schedule &s, bool localChains = true);

/// Pass `allocate-scratch`: maps scratch chunks to physical slots, reusing
/// slots whose values are dead.
void allocateScratch(Schedule &s);

/// Pass `dependencies`: the cross-threadblock waits each step needs (RAW,
/// WAR, WAW on physical slots), reduced to a minimal set.
void insertDependencies(Schedule &s);

/// Pass `deadlock-check`: simulates every rank with the connection depth; on
/// a possible deadlock, reports the cycle of waiting steps (unless \p quiet).
bool checkDeadlock(const Schedule &s, DiagnosticEngine &diag, bool quiet = false);

/// The most steps a plan may have over all its ranks and instances: twice
/// the chunk operations of one instantiation (a transfer is a send and a
/// receive), which is what a plan without instances can reach.
constexpr uint64_t MaxPlanSteps = 40'000'000;

/// Pass `instances`: replicates the schedule `instances` times on separate
/// channels, each instance moving one slice of every chunk. An error when
/// the copies would exceed the plan's chunk limit or MaxPlanSteps.
bool replicateInstances(Schedule &s, DiagnosticEngine &diag);

/// Pass `emit`: the runtime plan of the schedule.
Plan emitPlan(const Schedule &s);

} // namespace coll::compiler

#endif // COLL_COMPILER_LOWERING_H
