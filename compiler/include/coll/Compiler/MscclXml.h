//===- MscclXml.h - MSCCL-IR XML in ----------------------------*- C++ -*-===//
/// \file
/// Reads MSCCL-IR XML, the algorithm format of msccl-tools (MSCCLang), the
/// MSCCL executor and RCCL, into a Collc plan: `algo` becomes the plan's
/// info, each `gpu` a rank, each `tb` a threadblock (send and receive peer,
/// channel), each `step` an instruction with its dependency. The XML's
/// per-rank instruction streams are the plan as they are (nothing is
/// rescheduled), so running the plan runs what the file says; then
/// simulatePlan() (coll/Runtime/PlanSimulator.h) checks what it computes.
///
/// The reader streams the file (memory bounded by the plan it builds) and
/// stops at the first error, as `file:line:col: error: ...` naming the
/// element (gpu, tb and step).
//===----------------------------------------------------------------------===//
#ifndef COLL_COMPILER_MSCCLXML_H
#define COLL_COMPILER_MSCCLXML_H

#include "coll/Runtime/Plan.h"
#include "coll/Runtime/Status.h"

#include <cstdint>
#include <string>

namespace coll::compiler {

/// Options of importMscclXml().
struct MscclImportOptions {
  /// Slots per connection the plan is run and checked with.
  uint32_t connectionDepth = 4;
};

/// What the XML's `algo` says beyond the plan.
struct MscclAlgoInfo {
  std::string collName; ///< `coll` as written.
  uint32_t nchannels = 0;
  uint32_t nchunksperloop = 0;
  bool outOfPlace = true;              ///< `outofplace` (default: not in place).
  uint64_t minBytes = 0, maxBytes = 0; ///< 0: not given.
};

/// Parses the MSCCL-IR XML \p text (named \p fileName in errors) into a
/// plan that passed validatePlan().
Result<Plan> importMscclXml(const std::string &text, const std::string &fileName,
                            const MscclImportOptions &options = MscclImportOptions(),
                            MscclAlgoInfo *algo = nullptr);

} // namespace coll::compiler

#endif // COLL_COMPILER_MSCCLXML_H
