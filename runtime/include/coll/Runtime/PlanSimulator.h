//===- PlanSimulator.h - What a plan computes, without running it -*- C++ -*-===//
/// \file
/// Runs a plan on symbolic values, as the executors would run it: every
/// threadblock's steps in order, a step after its dependencies, a receive
/// when its message is there, a send when the connection has a free slot
/// among `depth`. Every buffer chunk holds a value: an input chunk of some
/// rank, a reduction of several (a multiset), or nothing (never written).
/// At the end it checks
///
/// - that the run finished: threadblocks still blocked wait for each other
///   (a deadlock at that depth) or for a message nobody sends;
/// - that both ends of every connection agree: each receive pairs with the
///   sender's send of the same number of chunks, and no message is left;
/// - that every output chunk holds what the collective defines (for a
///   built-in collective; in place, through the collective's alias), or the
///   plan's contract (a user-declared collective);
/// - that no two threadblocks of a rank race: steps that touch the same
///   chunk, one of them writing, are ordered by dependencies, messages or
///   slots, so that no other order of the threadblocks gives another result;
/// - that a built-in collective's values keep their size: a step writes an
///   input or output chunk only with a value from chunks of the same place
///   within a unit, since chunks differ by one element by their place when
///   the count is not a multiple of the unit's chunks (ChunkLayout.h).
///
/// A value is kept as the number of input chunks it combines and two sums
/// of random 64-bit keys of those chunks: two different multisets have the
/// same summary with probability about 2^-128. Problems name the rank,
/// threadblock and step, as `gpu 2 tb 0 step 5` does in MSCCL-IR terms.
/// Used to check plans that no Collc program produced (imported MSCCL-IR)
/// and by `coll-plan check`.
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_PLANSIMULATOR_H
#define COLL_RUNTIME_PLANSIMULATOR_H

#include "coll/Runtime/Plan.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace coll {

/// Options of simulatePlan().
struct SimulateOptions {
  /// Slots per connection; 0: the plan's connectionDepth.
  uint32_t depth = 0;
  /// Stop after this many problems (at least 1).
  size_t maxProblems = 20;
  /// The number problems give step \p step of threadblock \p tb of rank
  /// \p rank (an imported file's own numbering); empty: the step index.
  std::function<uint32_t(uint32_t rank, uint32_t tb, uint32_t step)> position;
  /// For a user-declared collective's plan without a contract (an imported
  /// MSCCL-IR `coll="custom"`): instead of checking the outputs, the run
  /// writes here what every output chunk holds at the end (a chunk no step
  /// writes is free), when it finds no problem. Only with the race check:
  /// a plan too large for it gets a problem, as one whose outputs hold a
  /// value read from a chunk nobody wrote.
  PlanContract *derivedContract = nullptr;
  /// A plan too large for the race check is a problem (an imported file:
  /// another order of its threadblocks might compute something else).
  bool requireRaceCheck = false;
};

/// What simulatePlan() found: nothing when the plan computes its
/// collective and cannot deadlock at the depth.
struct SimulateReport {
  std::vector<std::string> problems;
  uint64_t stepsRun = 0;
  /// Whether races between threadblocks were looked for: in plans of at
  /// most maxRaceCheckedThreadblocks threadblocks with steps over all
  /// ranks, whose steps times those stay under 2^28 (the clocks' cost).
  bool racesChecked = false;
  bool ok() const { return problems.empty(); }
};

/// Plans with more threadblocks with steps over all ranks than this are not
/// checked for races (the vector clocks take threadblocks^2 words).
constexpr uint32_t maxRaceCheckedThreadblocks = 2048;

/// Simulates \p plan (structurally valid: validatePlan()), every rank. A
/// plan whose buffers hold more than 2^23 chunks over all ranks, or whose
/// steps move more than 2^24 chunks in all, is refused (a problem that says
/// so): memory and time grow with them.
SimulateReport simulatePlan(const Plan &plan, const SimulateOptions &options = SimulateOptions());

} // namespace coll

#endif // COLL_RUNTIME_PLANSIMULATOR_H
