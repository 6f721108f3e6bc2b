//===- PlanPage.h - A plan as a self-contained HTML page --------*- C++ -*-===//
/// \file
/// `collc --emit=html`: one HTML file, with its script and styles inside and
/// nothing fetched, that shows a plan: its ranks and the links between them,
/// the schedule as a timeline per rank and threadblock (the simulator's
/// spans, coll/Runtime/Predict.h), a step slider that shows which chunks
/// move where, the links' utilisation, and, on a described system, the
/// predicted table. Without a topology the times are those of a nominal
/// system (said on the page). Large plans are aggregated: threadblocks into
/// ranks, ranks into groups, so that N = 256 and beyond stays readable.
//===----------------------------------------------------------------------===//
#ifndef COLL_COMPILER_PLANPAGE_H
#define COLL_COMPILER_PLANPAGE_H

#include "coll/Runtime/DataType.h"
#include "coll/Runtime/Plan.h"
#include "coll/Runtime/Status.h"
#include "coll/Runtime/Topology.h"

#include <cstdint>
#include <string>

namespace coll::compiler {

/// What the page shows.
struct PlanPageOptions {
  /// The described system; null: a nominal one (every rank on one node).
  const Topology *topology = nullptr;
  /// The size of the call on the timeline and the slider (nccl-tests' size).
  uint64_t timelineBytes = 1 << 20;
  /// The predicted table, with a topology: sizes from minBytes to maxBytes
  /// by factor.
  uint64_t minBytes = 1024, maxBytes = 1ull << 30;
  unsigned factor = 4;
  DataType type = DataType::Float32;
  /// Sizes simulated at once (predictPlans()); 0: the machine's CPUs, at most 8.
  unsigned threads = 0;
  /// Elements of a chunk per slice (PredictOptions::sliceElements).
  uint64_t sliceElements = 16384;
  /// Where the plan came from, for the title.
  std::string source;
  /// The most step spans the page carries; beyond, only the first
  /// slice's, and of those the earliest.
  uint64_t maxSpans = 250000;
};

/// The system a page without a topology is drawn on: every rank on one
/// node, ports of 10 GB/s and 1 us, steps of 1 us.
Topology nominalTopology();

/// The page, or the error of its prediction (a plan that deadlocks).
Result<std::string> renderPlanPage(const Plan &plan, const PlanPageOptions &options);

} // namespace coll::compiler

#endif // COLL_COMPILER_PLANPAGE_H
