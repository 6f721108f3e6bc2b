//===- Sema.h - Semantic analysis of .coll programs -------------*- C++ -*-===//
/// \file
/// Name resolution, kinds (integer, chunk reference, buffer), constant
/// folding and every check that needs no rank count: duplicate and unknown
/// names, collective arguments, options and hints in range. Annotates the AST
/// in place (NameExpr::decl, Expr kinds and constants, variable slots).
//===----------------------------------------------------------------------===//
#ifndef COLL_LANG_SEMA_H
#define COLL_LANG_SEMA_H

#include "coll/Lang/AST.h"
#include "coll/Lang/Diagnostics.h"

namespace coll {

/// Upper bounds on hints and options that the language accepts.
struct LanguageLimits {
  static constexpr int64_t maxChannels = 32;       ///< channel: in [0, 32)
  static constexpr int64_t maxThreadblocks = 1024; ///< tb/sendtb/recvtb in [0, 1024)
  static constexpr int64_t maxInstances = 32;      ///< instances in [1, 32]
  static constexpr int64_t maxRanks = 65536;       ///< nranks and --nranks in [1, 65536]
  /// Chunks of one buffer of one rank, after instantiation.
  static constexpr int64_t maxChunksPerBuffer = int64_t(1) << 24;
};

/// Analyses \p module. Returns true when no error was reported.
bool analyzeModule(ast::Module &module, DiagnosticEngine &diag);

} // namespace coll

#endif // COLL_LANG_SEMA_H
