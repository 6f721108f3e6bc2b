//===- CompilerTestUtil.h - Helpers for compiler unit tests -----*- C++ -*-===//
/// \file
/// Runs the front end and the compiler over a string or a library file and
/// keeps what they printed, plus helpers to inspect plans and diagnostics.
//===----------------------------------------------------------------------===//
#ifndef COLL_TESTS_UNIT_COMPILERTESTUTIL_H
#define COLL_TESTS_UNIT_COMPILERTESTUTIL_H

#include "coll/Compiler/Pipeline.h"
#include "coll/Lang/Frontend.h"
#include "coll/Runtime/PlanIO.h"

#include <memory>
#include <string>
#include <vector>

namespace coll::test {

/// The library directory (set by CMake).
inline std::string stdlibPath(llvm::StringRef file) {
  return std::string(COLL_STDLIB_DIR) + "/" + file.str();
}

/// One front-end run over an in-memory source or a file, and the compiler
/// runs made from it. Not copyable: the engine refers to the source manager.
struct CompilerRun {
  llvm::SourceMgr srcMgr;
  std::string printed;
  llvm::raw_string_ostream os{printed};
  DiagnosticEngine diag{srcMgr, os};
  std::unique_ptr<ast::Module> module;

  CompilerRun(const CompilerRun &) = delete;
  CompilerRun &operator=(const CompilerRun &) = delete;

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
  /// What the engine printed so far.
  std::string text() {
    os.flush();
    return printed;
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
