//===- TestUtil.h - Helpers for front-end unit tests ------------*- C++ -*-===//
/// \file
/// Runs the front end over a string and keeps what it printed.
//===----------------------------------------------------------------------===//
#ifndef COLL_TESTS_UNIT_TESTUTIL_H
#define COLL_TESTS_UNIT_TESTUTIL_H

#include "coll/Lang/Frontend.h"

#include <memory>
#include <string>

namespace coll::test {

/// One front-end run over an in-memory source.
struct FrontendRun {
  llvm::SourceMgr srcMgr;
  std::string printed;
  llvm::raw_string_ostream os{printed};
  DiagnosticEngine diag{srcMgr, os};
  std::unique_ptr<ast::Module> module;

  /// Parses and analyses \p source (named "test.coll").
  explicit FrontendRun(llvm::StringRef source, bool analyze = true) {
    unsigned id = addSourceString(source, "test.coll", diag);
    if (analyze)
      module = parseAndAnalyze(id, diag);
    else
      module = parseModule(id, diag);
    os.flush();
  }
  bool ok() const { return module != nullptr && !diag.hasErrors(); }
  /// The first error's text, or "" when there is none.
  std::string firstError() const {
    for (const Diagnostic &d : diag.diagnostics())
      if (d.kind == DiagKind::Error)
        return d.message;
    return "";
  }
  const Diagnostic *firstErrorDiag() const {
    for (const Diagnostic &d : diag.diagnostics())
      if (d.kind == DiagKind::Error)
        return &d;
    return nullptr;
  }
};

} // namespace coll::test

#endif // COLL_TESTS_UNIT_TESTUTIL_H
