//===- TestUtil.h - Helpers for front-end unit tests ------------*- C++ -*-===//
/// \file
/// Runs the front end over a string and keeps what it printed, and checks a
/// run's diagnostics against a list of expected ones.
//===----------------------------------------------------------------------===//
#ifndef COLL_TESTS_UNIT_TESTUTIL_H
#define COLL_TESTS_UNIT_TESTUTIL_H

#include "coll/Lang/Frontend.h"

#include <gtest/gtest.h>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace coll::test {

/// A source manager, a diagnostic engine that prints into a string, and the
/// module a run parsed. Not copyable: the engine refers to the source manager.
struct DiagnosticRun {
  llvm::SourceMgr srcMgr;
  std::string printed;
  llvm::raw_string_ostream os{printed};
  DiagnosticEngine diag{srcMgr, os};
  std::unique_ptr<ast::Module> module;

  DiagnosticRun() = default;
  DiagnosticRun(const DiagnosticRun &) = delete;
  DiagnosticRun &operator=(const DiagnosticRun &) = delete;

  /// Every diagnostic of \p kind, in order.
  std::vector<const Diagnostic *> all(DiagKind kind) const {
    std::vector<const Diagnostic *> out;
    for (const Diagnostic &d : diag.diagnostics())
      if (d.kind == kind)
        out.push_back(&d);
    return out;
  }
  std::vector<const Diagnostic *> errors() const { return all(DiagKind::Error); }
  std::vector<const Diagnostic *> notes() const { return all(DiagKind::Note); }
  /// The first error, or null when there is none.
  const Diagnostic *firstErrorDiag() const {
    for (const Diagnostic &d : diag.diagnostics())
      if (d.kind == DiagKind::Error)
        return &d;
    return nullptr;
  }
  /// The first error's text, or "" when there is none.
  std::string firstError() const {
    const Diagnostic *d = firstErrorDiag();
    return d ? d->message : "";
  }
  /// What the engine printed so far.
  std::string text() {
    os.flush();
    return printed;
  }
};

/// One front-end run over an in-memory source.
struct FrontendRun : DiagnosticRun {
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
};

/// One diagnostic a test expects: its exact message and, where given, its
/// line and column.
struct ExpectedDiag {
  std::string message;
  std::optional<unsigned> line;
  std::optional<unsigned> column;
};

/// The diagnostics a run should end with: exactly these errors, in order,
/// and (once a note or noNotes() is given) exactly these notes.
struct ExpectedDiagnostics {
  std::vector<ExpectedDiag> errors;
  std::vector<ExpectedDiag> notes;
  bool checkNotes = false;

  ExpectedDiagnostics &error(std::string message, std::optional<unsigned> line = std::nullopt,
                             std::optional<unsigned> column = std::nullopt) {
    errors.push_back(ExpectedDiag{std::move(message), line, column});
    return *this;
  }
  ExpectedDiagnostics &note(std::string message, std::optional<unsigned> line = std::nullopt,
                            std::optional<unsigned> column = std::nullopt) {
    notes.push_back(ExpectedDiag{std::move(message), line, column});
    checkNotes = true;
    return *this;
  }
  ExpectedDiagnostics &noNotes() {
    checkNotes = true;
    return *this;
  }
};

/// Checks that \p got are exactly \p want, in order.
inline void expectDiagList(DiagnosticRun &run, const char *what,
                           const std::vector<const Diagnostic *> &got,
                           const std::vector<ExpectedDiag> &want) {
  ASSERT_EQ(got.size(), want.size()) << what << "s:\n" << run.text();
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i]->message, want[i].message) << what << " " << i;
    if (want[i].line) {
      EXPECT_EQ(got[i]->line, *want[i].line) << what << " " << i << ": " << got[i]->message;
    }
    if (want[i].column) {
      EXPECT_EQ(got[i]->column, *want[i].column) << what << " " << i << ": " << got[i]->message;
    }
  }
}

/// Checks \p run's errors, and its notes where \p want says so.
inline void expectDiagnostics(DiagnosticRun &run, const ExpectedDiagnostics &want) {
  expectDiagList(run, "error", run.errors(), want.errors);
  if (want.checkNotes)
    expectDiagList(run, "note", run.notes(), want.notes);
}

/// Names each instance of a parameterised test after its case's `name`.
struct CaseName {
  template <typename Case>
  std::string operator()(const ::testing::TestParamInfo<Case> &info) const {
    return info.param.name;
  }
};

} // namespace coll::test

#endif // COLL_TESTS_UNIT_TESTUTIL_H
