//===- Parser.h - From .coll source text to the AST -------------*- C++ -*-===//
/// \file
/// The parser driver: checks the characters and tokens of a source buffer,
/// runs the ANTLR-generated parser with compiler-style syntax errors and
/// recovery, and builds the owned AST.
//===----------------------------------------------------------------------===//
#ifndef COLL_LANG_PARSER_H
#define COLL_LANG_PARSER_H

#include "coll/Lang/AST.h"
#include "coll/Lang/Diagnostics.h"

#include <memory>

namespace coll {

/// Limits that keep hostile input from exhausting the stack or memory.
struct ParserLimits {
  /// Largest source file accepted, in bytes.
  size_t maxSourceBytes = 4u << 20;
  /// Deepest nesting of (), [] and {}.
  unsigned maxBracketDepth = 256;
  /// Deepest parse tree (long operator chains, unary chains).
  unsigned maxTreeDepth = 2000;
};

/// Parses buffer \p bufferId of \p diag's SourceMgr. Returns null when the
/// source has syntax errors. Lexical errors (bad characters, unterminated
/// comments and strings) are repaired in the token stream, so the module is
/// still returned for Sema to find more errors; callers check \p diag.
std::unique_ptr<ast::Module> parseModule(unsigned bufferId, DiagnosticEngine &diag,
                                         const ParserLimits &limits = {});

} // namespace coll

#endif // COLL_LANG_PARSER_H
