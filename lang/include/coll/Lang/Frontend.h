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

/// Reads \p path ("-": standard input) whole into \p out, but no more than
/// \p limit bytes: a larger file, or a device or pipe that goes on (as
/// /dev/zero does), fails with \p error saying so, after at most \p limit
/// bytes read. False with \p error ("cannot open 'p': ...") on failure.
bool readFileBounded(llvm::StringRef path, uint64_t limit, std::string &out, std::string &error);

/// Adds \p text as a buffer named \p name; returns its id.
unsigned addSourceString(llvm::StringRef text, llvm::StringRef name, DiagnosticEngine &diag);

/// Parses and analyses buffer \p bufferId. Returns the module when there
/// were no errors, null otherwise.
std::unique_ptr<ast::Module> parseAndAnalyze(unsigned bufferId, DiagnosticEngine &diag,
                                             const ParserLimits &limits = {});

} // namespace coll

#endif // COLL_LANG_FRONTEND_H
