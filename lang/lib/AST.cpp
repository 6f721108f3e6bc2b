//===- AST.cpp - AST names and tables -------------------------------------===//

#include "coll/Lang/AST.h"

using namespace coll::ast;

llvm::StringRef coll::ast::nodeKindName(NodeKind kind) {
  switch (kind) {
#define COLL_NODE(Name, Class)                                                                     \
  case NodeKind::Name:                                                                             \
    return #Class;
#include "coll/Lang/ASTNodes.def"
  }
  return "?";
}

llvm::StringRef coll::ast::valueKindPhrase(ValueKind kind) {
  switch (kind) {
  case ValueKind::Unknown:
    return "an erroneous expression";
  case ValueKind::Int:
    return "an integer";
  case ValueKind::Chunk:
    return "a chunk reference";
  case ValueKind::Buffer:
    return "a buffer";
  }
  return "?";
}

llvm::StringRef coll::ast::unaryOpSpelling(UnaryOp op) {
  switch (op) {
  case UnaryOp::Neg:
    return "-";
  case UnaryOp::Not:
    return "!";
  case UnaryOp::BitNot:
    return "~";
  }
  return "?";
}

llvm::StringRef coll::ast::binaryOpSpelling(BinaryOp op) {
  static const char *const names[] = {"*", "/",  "%",  "+",  "-", "<<", ">>", "<",  "<=",
                                      ">", ">=", "==", "!=", "&", "^",  "|",  "&&", "||"};
  return names[static_cast<unsigned>(op)];
}

llvm::StringRef coll::ast::intFunctionName(IntFunction f) {
  switch (f) {
#define COLL_INT_FUNCTION(Id, Name, MinArgs, MaxArgs)                                              \
  case IntFunction::Id:                                                                            \
    return Name;
#include "coll/Lang/Builtins.def"
  }
  return "?";
}

llvm::StringRef coll::ast::protocolName(Protocol p) {
  switch (p) {
  case Protocol::Simple:
    return "Simple";
  case Protocol::LL:
    return "LL";
  case Protocol::LL128:
    return "LL128";
  }
  return "?";
}

template <typename T>
static std::vector<T *> declsOf(const std::vector<std::unique_ptr<Decl>> &ds) {
  std::vector<T *> out;
  for (const auto &d : ds)
    if (auto *t = llvm::dyn_cast<T>(d.get()))
      out.push_back(t);
  return out;
}

std::vector<ParamDecl *> Module::params() const {
  return declsOf<ParamDecl>(decls);
}
std::vector<FuncDecl *> Module::functions() const {
  return declsOf<FuncDecl>(decls);
}
std::vector<CollectiveDecl *> Module::collectives() const {
  return declsOf<CollectiveDecl>(decls);
}
std::vector<AlgorithmDecl *> Module::algorithms() const {
  return declsOf<AlgorithmDecl>(decls);
}
