//===- Passes.h - The compilation pipeline ----------------------*- C++ -*-===//
/// \file
/// Every pass of collc, each a function in its own file (docs/compiler.md).
/// Passes report user errors through the DiagnosticEngine and
/// return failure; they never exit.
//===----------------------------------------------------------------------===//
#ifndef COLL_COMPILER_PASSES_H
#define COLL_COMPILER_PASSES_H

#include "coll/Compiler/Trace.h"
#include "coll/Lang/AST.h"
#include "coll/Lang/Diagnostics.h"
#include "coll/Lang/Sema.h"
#include "coll/Runtime/Plan.h"

#include "llvm/ADT/StringMap.h"

#include <optional>

namespace coll::compiler {

// What the language accepts must fit in a plan. The plan may hold more
// chunks per buffer than a program declares (instances multiply them); the
// instantiate and instances passes check that product.
static_assert(LanguageLimits::maxRanks == PlanLimits::maxRanks);
static_assert(LanguageLimits::maxChannels == PlanLimits::maxChannels);
static_assert(LanguageLimits::maxThreadblocks == PlanLimits::maxThreadblocksPerRank);
static_assert(LanguageLimits::maxInstances == PlanLimits::maxInstances);
static_assert(LanguageLimits::maxChunksPerBuffer <= PlanLimits::maxChunks);

/// What instantiation needs beyond the program.
struct InstantiateOptions {
  uint32_t nranks = 0;
  llvm::StringMap<int64_t> defines; ///< -D name=value
  uint64_t maxOps = 20'000'000;     ///< Chunk operations per program.
  uint64_t maxIterations = 1'000'000'000;
  /// Calls of user functions (`def`) evaluated per program.
  uint64_t maxFunctionCalls = uint64_t(1) << 24;
  /// Levels of an expression under evaluation, counting the bodies of the
  /// functions it calls (each level takes stack).
  uint32_t maxEvalDepth = 1000;
  uint32_t maxRanks = LanguageLimits::maxRanks;
  uint32_t maxChunksPerBuffer = LanguageLimits::maxChunksPerBuffer;
  /// Chunks of every buffer of every rank together: verification and
  /// lowering keep state for each.
  uint64_t maxTotalChunks = uint64_t(1) << 27;
};

/// About how many bytes of verifier state one buffer chunk costs (the value
/// it holds and its last writer), for the limit's message.
constexpr unsigned BytesPerChunkState = 8;

/// Pass `instantiate`: unrolls \p algorithm for opts.nranks ranks.
std::optional<Trace> instantiate(const ast::Module &module, const ast::AlgorithmDecl &algorithm,
                                 const InstantiateOptions &opts, DiagnosticEngine &diag);

/// What the verifier found besides correctness.
struct VerifyReport {
  /// Every output chunk that must hold the same reduction as another (on
  /// another rank) holds the same expression tree.
  bool identicalAcrossRanks = true;
  /// Output indices whose expression trees differ between ranks (first few).
  std::vector<uint32_t> differingIndices;
  uint64_t reductions = 0; ///< Distinct reduction nodes built.
  uint64_t checkedSlots = 0;
};

/// Pass `verify`: symbolically executes the trace and checks the
/// collective's post-condition. Returns the report, or nothing after
/// reporting the first problems.
std::optional<VerifyReport> verify(const Trace &trace, DiagnosticEngine &diag);

/// Prints the report (--emit=verify-report).
void printVerifyReport(const Trace &trace, const VerifyReport &report, llvm::raw_ostream &os);

} // namespace coll::compiler

#endif // COLL_COMPILER_PASSES_H
