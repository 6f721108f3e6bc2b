//===- CompilerTestUtil.h - Helpers for compiler unit tests -----*- C++ -*-===//
/// \file
/// Runs the front end and the compiler over a string or a library file and
/// keeps what they printed, plus helpers to inspect plans and diagnostics.
//===----------------------------------------------------------------------===//
#ifndef COLL_TESTS_UNIT_COMPILERTESTUTIL_H
#define COLL_TESTS_UNIT_COMPILERTESTUTIL_H

#include "TestUtil.h"
#include "coll/Compiler/Pipeline.h"
#include "coll/Lang/Frontend.h"
#include "coll/Runtime/PlanIO.h"

#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace coll::test {

/// The library directory (set by CMake).
inline std::string stdlibPath(llvm::StringRef file) {
  return std::string(COLL_STDLIB_DIR) + "/" + file.str();
}

/// One front-end run over an in-memory source or a file, and the compiler
/// runs made from it.
struct CompilerRun : DiagnosticRun {
  /// Parses and analyses \p source (named "test.coll").
  explicit CompilerRun(llvm::StringRef source) {
    diag.setErrorLimit(0);
    unsigned id = addSourceString(source, "test.coll", diag);
    module = parseAndAnalyze(id, diag);
    os.flush();
  }
  /// Parses and analyses the library file \p file.
  static std::unique_ptr<CompilerRun> fromStdlib(llvm::StringRef file) {
    return std::unique_ptr<CompilerRun>(new CompilerRun(FromFile{}, stdlibPath(file)));
  }

  bool frontendOk() const { return module != nullptr; }

  /// The algorithm called \p name, or the first one.
  const ast::AlgorithmDecl *algorithm(llvm::StringRef name = "") const {
    for (ast::AlgorithmDecl *a : module->algorithms())
      if (name.empty() || a->name == name)
        return a;
    return nullptr;
  }

  /// Compiles the (first or named) algorithm for \p nranks.
  std::unique_ptr<compiler::Compilation>
  compile(uint32_t nranks, compiler::PipelineOptions opts = {}, llvm::StringRef name = "") {
    opts.instantiate.nranks = nranks;
    std::string ignored;
    llvm::raw_string_ostream quiet(ignored);
    if (!opts.printStream)
      opts.printStream = &quiet;
    auto c = compiler::compile(*module, *algorithm(name), opts, diag);
    os.flush();
    return c;
  }

  /// Instantiates the (first or named) algorithm for \p nranks.
  std::optional<compiler::Trace> instantiate(uint32_t nranks, llvm::StringRef name = "") {
    compiler::InstantiateOptions opts;
    opts.nranks = nranks;
    auto t = compiler::instantiate(*module, *algorithm(name), opts, diag);
    os.flush();
    return t;
  }

  /// The TransferExpr of every top-level `copy(...);` / `reduce(...);`
  /// statement of the first algorithm's body, in source order.
  std::vector<const ast::TransferExpr *> topLevelTransfers() const {
    std::vector<const ast::TransferExpr *> out;
    for (const auto &s : algorithm()->body->body)
      if (auto *e = llvm::dyn_cast<ast::ExprStmt>(s.get()))
        if (auto *t = llvm::dyn_cast<ast::TransferExpr>(e->expr.get()))
          out.push_back(t);
    return out;
  }

private:
  struct FromFile {};
  CompilerRun(FromFile, const std::string &path) {
    diag.setErrorLimit(0);
    unsigned id = loadSourceFile(path, diag);
    if (id)
      module = parseAndAnalyze(id, diag);
    os.flush();
  }
};

/// A program whose body holds one statement a line from line 2 on. The
/// operations of hand-built traces and schedules borrow their source sites
/// from it, so a diagnostic's line says which operation it blames.
inline std::string sitesProgram(llvm::StringRef header, llvm::ArrayRef<const char *> statements) {
  std::string s = header.str() + " {\n";
  for (const char *statement : statements)
    s += "  " + std::string(statement) + "\n";
  return s + "}\n";
}
/// The source line of statement \p site of a sitesProgram().
constexpr unsigned siteLine(uint32_t site) {
  return site + 2;
}

/// A program that passes the front end but that the compiler rejects for
/// \p nranks ranks with \p expected.
struct RejectedProgram {
  std::string name;
  std::string source;
  uint32_t nranks;
  ExpectedDiagnostics expected;
};
inline void PrintTo(const RejectedProgram &c, std::ostream *os) {
  *os << c.name;
}

/// Compiles \p c's program and checks that it fails with \p c's diagnostics.
inline void expectRejected(const RejectedProgram &c) {
  CompilerRun run(c.source);
  ASSERT_TRUE(run.frontendOk()) << run.text();
  EXPECT_FALSE(run.compile(c.nranks));
  expectDiagnostics(run, c.expected);
}

/// The mnemonics of a threadblock's instructions, space-separated.
inline std::string opcodeSequence(const Threadblock &tb) {
  std::string s;
  for (const Instruction &in : tb.steps)
    s += (s.empty() ? "" : " ") + std::string(opcodeInfo(in.op).mnemonic);
  return s;
}

/// How many instructions of the whole plan have opcode \p op.
inline size_t countOpcode(const Plan &plan, Opcode op) {
  size_t n = 0;
  for (const RankPlan &r : plan.ranks)
    for (const Threadblock &tb : r.threadblocks)
      for (const Instruction &in : tb.steps)
        n += in.op == op;
  return n;
}

} // namespace coll::test

#endif // COLL_TESTS_UNIT_COMPILERTESTUTIL_H
