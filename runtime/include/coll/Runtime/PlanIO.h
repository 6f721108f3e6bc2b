//===- PlanIO.h - Reading, writing, checking and printing plans -*- C++ -*-===//
/// \file
/// The binary plan format (docs/plan-format.md): little-endian, versioned,
/// checksummed, one section per rank reachable through an offset table so a
/// rank can load only its own. The loader trusts nothing: every failure is a
/// precise error, never an out-of-bounds access.
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_PLANIO_H
#define COLL_RUNTIME_PLANIO_H

#include "coll/Runtime/Plan.h"
#include "coll/Runtime/Status.h"

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace coll {

/// The plan's bytes. The same plan always gives the same bytes.
std::vector<uint8_t> serializePlan(const Plan &plan);

/// Writes serializePlan(plan) to \p path.
Status writePlanFile(const Plan &plan, const std::string &path);

/// Parses and validates a plan held in memory. With \p rank >= 0 only that
/// rank's section is decoded (Plan::loadedRank is set, Plan::ranks has one
/// entry) and cross-rank checks are skipped.
Result<Plan> parsePlan(const uint8_t *data, size_t size, int rank = -1);

/// Reads and parses a plan file.
Result<Plan> loadPlanFile(const std::string &path, int rank = -1);

/// The bytes of a plan file, unparsed: a directory, a file that cannot be
/// sized, or one over PlanLimits::maxFileBytes is refused before it is read.
Result<std::vector<uint8_t>> readPlanFile(const std::string &path);

/// Checks everything about a plan in memory: limits, opcodes, buffer ranges,
/// peers, channels, connection ownership, dependencies (in range, acyclic),
/// and, when all ranks are present, that both ends of every connection agree
/// on the number and sizes of messages.
Status validatePlan(const Plan &plan);

/// The checksum stored in the header: a 64-bit hash of the bytes after it.
uint64_t planChecksum(const uint8_t *data, size_t size);

/// A stable, readable dump (collc --emit=plan-text, coll-plan dump).
void printPlanText(const Plan &plan, std::ostream &os);

/// A plan's name as the tools print it: control, backslash and non-ASCII
/// bytes as \xNN, so that an output line stays one line whatever the name
/// holds; "(unnamed)" for an empty one.
std::string printablePlanName(const std::string &name);

} // namespace coll

#endif // COLL_RUNTIME_PLANIO_H
