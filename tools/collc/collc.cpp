//===- collc.cpp - The Collc compiler driver ------------------------------===//
//
// collc prog.coll [--emit=ast|summary] [-D name=value] [--algorithm=name]
//
//===----------------------------------------------------------------------===//

#include "coll/Lang/ASTDump.h"
#include "coll/Lang/Frontend.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"

using namespace coll;
using namespace coll::ast;
namespace cl = llvm::cl;

namespace {

cl::OptionCategory collcCategory("collc options");

cl::opt<std::string> inputFile(cl::Positional, cl::desc("<input.coll>"), cl::Required,
                               cl::cat(collcCategory));

enum class EmitKind { Check, Summary, Ast };
cl::opt<EmitKind>
    emit("emit", cl::desc("What to print (default: nothing; check the program only)"),
         cl::values(clEnumValN(EmitKind::Check, "check", "nothing: parse and check the program"),
                    clEnumValN(EmitKind::Summary, "summary",
                               "what the front end found: algorithms, collectives, parameters"),
                    clEnumValN(EmitKind::Ast, "ast", "the checked AST, one node per line")),
         cl::init(EmitKind::Check), cl::cat(collcCategory));

cl::list<std::string> defines("D", cl::Prefix, cl::value_desc("name=value"),
                              cl::desc("Override the default of parameter 'name'"),
                              cl::cat(collcCategory));

cl::opt<std::string> algorithmName("algorithm", cl::value_desc("name"),
                                   cl::desc("The algorithm to use when the file declares several"),
                                   cl::cat(collcCategory));

cl::opt<unsigned> errorLimit("error-limit", cl::value_desc("n"),
                             cl::desc("Stop after n errors (0: no limit; default 20)"),
                             cl::init(20), cl::cat(collcCategory));

/// The source text of \p e, for the summary.
llvm::StringRef sourceText(const Expr *e) {
  llvm::SMRange r = e->getRange();
  return llvm::StringRef(r.Start.getPointer(), r.End.getPointer() - r.Start.getPointer());
}

/// Counts what an algorithm body does, for the summary.
struct BodyStats {
  unsigned copies = 0, reduces = 0, loops = 0, requires_ = 0, maxLoopDepth = 0;

  void stmt(const Stmt &s, unsigned loopDepth) {
    if (auto *b = llvm::dyn_cast<BlockStmt>(&s)) {
      for (const auto &c : b->body)
        stmt(*c, loopDepth);
    } else if (auto *f = llvm::dyn_cast<ForStmt>(&s)) {
      ++loops;
      maxLoopDepth = std::max(maxLoopDepth, loopDepth + 1);
      stmt(*f->body, loopDepth + 1);
    } else if (auto *i = llvm::dyn_cast<IfStmt>(&s)) {
      stmt(*i->thenBlock, loopDepth);
      if (i->elseStmt)
        stmt(*i->elseStmt, loopDepth);
    } else if (llvm::isa<RequireStmt>(&s)) {
      ++requires_;
    } else if (auto *l = llvm::dyn_cast<LetStmt>(&s)) {
      expr(*l->value);
    } else if (auto *a = llvm::dyn_cast<AssignStmt>(&s)) {
      expr(*a->value);
    } else if (auto *e = llvm::dyn_cast<ExprStmt>(&s)) {
      expr(*e->expr);
    }
  }
  void expr(const Expr &e) {
    if (auto *t = llvm::dyn_cast<TransferExpr>(&e)) {
      ++(llvm::isa<CopyExpr>(&e) ? copies : reduces);
      expr(*t->src);
    } else if (auto *c = llvm::dyn_cast<CondExpr>(&e)) {
      expr(*c->thenExpr);
      expr(*c->elseExpr);
    }
  }
};

void printSummary(const Module &m, const std::vector<std::pair<std::string, int64_t>> &overrides,
                  llvm::raw_ostream &os) {
  os << m.fileName << ": front end OK\n";
  for (ParamDecl *p : m.params()) {
    os << "  param " << p->name << " = " << sourceText(p->defaultValue.get());
    for (const auto &[name, value] : overrides)
      if (name == p->name)
        os << " (-D " << value << ")";
    os << "\n";
  }
  for (CollectiveDecl *c : m.collectives()) {
    unsigned pre = 0, post = 0;
    for (const auto &item : c->items) {
      pre += llvm::isa<PreStmt>(item.get());
      post += llvm::isa<PostStmt>(item.get());
    }
    os << "  collective " << c->name << ": input[" << sourceText(c->inputSize->size.get())
       << "], output[" << sourceText(c->outputSize->size.get()) << "], " << pre << " pre-condition"
       << (pre == 1 ? "" : "s") << ", " << post << " post-condition" << (post == 1 ? "" : "s")
       << "\n";
  }
  for (AlgorithmDecl *a : m.algorithms()) {
    os << "  algorithm " << a->name << " implements " << a->collectiveName << "(";
    for (size_t i = 0; i < a->collParamNames.size(); ++i) {
      os << (i ? ", " : "") << a->collParamNames[i] << " = ";
      if (const Expr *v = a->collParamValues[i])
        os << sourceText(v);
      else
        os << "1";
    }
    os << ")\n";
    os << "    " << (a->inplace ? "in-place" : "out-of-place") << ", protocol "
       << protocolName(a->protocol) << ", instances "
       << (a->instances ? sourceText(a->instances) : llvm::StringRef("1")) << ", default ranks ";
    if (a->nranksDefault)
      os << *a->nranksDefault->getConstant();
    else
      os << "(none)";
    os << "\n";
    for (const ScratchStmt *s : a->scratch)
      os << "    scratch " << s->buffer->name << "[" << sourceText(s->size.get()) << "]\n";
    BodyStats stats;
    stats.stmt(*a->body, 0);
    os << "    " << stats.copies << " copy, " << stats.reduces << " reduce, " << stats.loops
       << " loop" << (stats.loops == 1 ? "" : "s") << " (nested " << stats.maxLoopDepth
       << " deep), " << stats.requires_ << " require, " << a->numSlots << " variable"
       << (a->numSlots == 1 ? "" : "s") << "\n";
  }
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(collcCategory);
  cl::SetVersionPrinter([](llvm::raw_ostream &os) { os << "collc 0.1\n"; });
  cl::ParseCommandLineOptions(
      argc, argv,
      "collc: the compiler of .coll collective-communication "
      "programs\n\n"
      "  collc prog.coll --emit=ast      print the checked AST\n"
      "  collc prog.coll --emit=summary  print what the program declares\n");

  llvm::SourceMgr srcMgr;
  DiagnosticEngine diag(srcMgr);
  diag.setErrorLimit(errorLimit);

  std::vector<std::pair<std::string, int64_t>> overrides;
  for (const std::string &d : defines) {
    auto [name, value] = llvm::StringRef(d).split('=');
    int64_t v = 0;
    if (name.empty() || value.empty() || value.getAsInteger(0, v)) {
      diag.errorNoLoc("bad -D '" + d + "': expected name=integer");
      return 1;
    }
    overrides.emplace_back(name.str(), v);
  }

  unsigned bufferId = loadSourceFile(inputFile, diag);
  if (!bufferId)
    return 1;
  std::unique_ptr<Module> module = parseAndAnalyze(bufferId, diag);
  if (!module)
    return 1;

  // -D names must be parameters of the file.
  std::vector<std::string> paramNames;
  for (ParamDecl *p : module->params())
    paramNames.push_back(p->name);
  for (const auto &[name, value] : overrides)
    if (std::find(paramNames.begin(), paramNames.end(), name) == paramNames.end())
      diag.errorNoLoc("-D " + name + ": '" + inputFile + "' declares no parameter '" + name + "'");

  std::vector<AlgorithmDecl *> algorithms = module->algorithms();
  if (algorithms.empty()) {
    diag.errorNoLoc("'" + inputFile + "' declares no algorithm");
  } else if (!algorithmName.empty()) {
    bool found = false;
    for (AlgorithmDecl *a : algorithms)
      found |= a->name == algorithmName;
    if (!found) {
      std::string names;
      for (AlgorithmDecl *a : algorithms)
        names += (names.empty() ? "'" : ", '") + a->name + "'";
      diag.errorNoLoc("'" + inputFile + "' declares no algorithm '" + algorithmName +
                      "'; it declares " + names);
    }
  }
  if (diag.hasErrors())
    return 1;

  switch (emit) {
  case EmitKind::Check:
    break;
  case EmitKind::Summary:
    printSummary(*module, overrides, llvm::outs());
    break;
  case EmitKind::Ast:
    dumpModule(*module, srcMgr, llvm::outs());
    break;
  }
  return 0;
}
