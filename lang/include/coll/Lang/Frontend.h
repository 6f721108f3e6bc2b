//===- Frontend.h - Source file to checked AST ------------------*- C++ -*-===//
/// \file
/// The whole front end in one call, for tools and tests: read a file (or a
/// string), parse it and run Sema, with every problem reported through the
/// DiagnosticEngine.
//===----------------------------------------------------------------------===//
#ifndef COLL_LANG_FRONTEND_H
#define COLL_LANG_FRONTEND_H

#include "coll/Lang/AST.h"
#include "coll/Lang/Diagnostics.h"
#include "coll/Lang/Parser.h"

namespace coll {

/// Reads \p path into the engine's SourceMgr. On failure (missing file, a
/// directory, unreadable) reports a one-line error and returns 0; otherwise
/// returns the buffer id.
unsigned loadSourceFile(llvm::StringRef path, DiagnosticEngine &diag,
                        const ParserLimits &limits = {});

/// Adds \p text as a buffer named \p name; returns its id.
unsigned addSourceString(llvm::StringRef text, llvm::StringRef name, DiagnosticEngine &diag);

/// Parses and analyses buffer \p bufferId. Returns the module when there
/// were no errors, null otherwise.
std::unique_ptr<ast::Module> parseAndAnalyze(unsigned bufferId, DiagnosticEngine &diag,
                                             const ParserLimits &limits = {});

} // namespace coll

#endif // COLL_LANG_FRONTEND_H
