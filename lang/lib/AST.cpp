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

llvm::StringRef coll::ast::bufferKindName(BufferKind kind) {
  switch (kind) {
  case BufferKind::Input:
    return "input";
  case BufferKind::Output:
    return "output";
  case BufferKind::Scratch:
    return "scratch";
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

llvm::ArrayRef<BuiltinCollectiveInfo> coll::ast::builtinCollectives() {
  static const BuiltinCollectiveInfo table[] = {
#define COLL_COLLECTIVE(Id, Name, HasRoot, InByN, OutByN, Reduces)                                 \
  {BuiltinCollective::Id, Name, HasRoot, InByN, OutByN, Reduces},
#include "coll/Lang/Builtins.def"
  };
  return table;
}

const BuiltinCollectiveInfo *coll::ast::findBuiltinCollective(llvm::StringRef name) {
  for (const BuiltinCollectiveInfo &info : builtinCollectives())
    if (info.name == name)
      return &info;
  return nullptr;
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
std::vector<CollectiveDecl *> Module::collectives() const {
  return declsOf<CollectiveDecl>(decls);
}
std::vector<AlgorithmDecl *> Module::algorithms() const {
  return declsOf<AlgorithmDecl>(decls);
}
