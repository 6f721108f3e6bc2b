//===- ASTDump.cpp - Stable textual dump of the AST -----------------------===//

#include "coll/Lang/ASTDump.h"

using namespace coll;
using namespace coll::ast;

namespace {

class Dumper {
public:
  Dumper(const llvm::SourceMgr &srcMgr, llvm::raw_ostream &os) : srcMgr(srcMgr), os(os) {}

  void module(const Module &m);

private:
  llvm::raw_ostream &line(const Node *n, llvm::StringRef label = "");
  void range(llvm::SMRange r);
  void decl(const Decl &d);
  void stmt(const Stmt &s);
  void expr(const Expr &e, llvm::StringRef label = "");
  void forClause(const ForClause &c);
  void namedArgs(llvm::StringRef what, const std::vector<NamedArg> &args);

  struct Indent {
    Dumper &d;
    explicit Indent(Dumper &d) : d(d) { ++d.depth; }
    ~Indent() { --d.depth; }
  };

  const llvm::SourceMgr &srcMgr;
  llvm::raw_ostream &os;
  unsigned depth = 0;
};

} // namespace

void Dumper::range(llvm::SMRange r) {
  if (!r.isValid())
    return;
  auto b = srcMgr.getLineAndColumn(r.Start);
  auto e = srcMgr.getLineAndColumn(r.End);
  os << " <" << b.first << ":" << b.second << "-" << e.first << ":" << e.second << ">";
}

llvm::raw_ostream &Dumper::line(const Node *n, llvm::StringRef label) {
  os.indent(depth * 2);
  if (!label.empty())
    os << label << ": ";
  if (n)
    os << nodeKindName(n->getKind());
  return os;
}

void Dumper::module(const Module &m) {
  os << "Module '" << m.fileName << "'\n";
  Indent in(*this);
  for (const auto &d : m.decls)
    decl(*d);
}

void Dumper::namedArgs(llvm::StringRef what, const std::vector<NamedArg> &args) {
  for (const NamedArg &a : args) {
    os.indent(depth * 2) << what << " " << a.name;
    range(a.nameRange);
    os << "\n";
    Indent in(*this);
    expr(*a.value);
  }
}

void Dumper::forClause(const ForClause &c) {
  os.indent(depth * 2) << "ForClause";
  range(c.range);
  os << "\n";
  Indent in(*this);
  for (const Binder &b : c.binders) {
    decl(*b.var);
    Indent in2(*this);
    expr(*b.lo, "lo");
    expr(*b.hi, "hi");
  }
  if (c.cond)
    expr(*c.cond, "if");
}

void Dumper::decl(const Decl &d) {
  line(&d) << " " << d.name;
  range(d.getRange());
  if (auto *v = llvm::dyn_cast<VarDecl>(&d)) {
    static const char *const kinds[] = {"let", "loop", "binder", "param"};
    os << " " << kinds[static_cast<int>(v->varKind)];
    if (v->valueKind != ValueKind::Unknown)
      os << " " << (v->valueKind == ValueKind::Int ? "int" : "chunk") << " slot=" << v->slot;
    os << "\n";
    return;
  }
  if (auto *p = llvm::dyn_cast<ParamDecl>(&d)) {
    os << "\n";
    Indent in(*this);
    expr(*p->defaultValue, "default");
    return;
  }
  if (auto *b = llvm::dyn_cast<BufferDecl>(&d)) {
    os << " " << bufferKindName(b->bufferKind) << "\n";
    return;
  }
  if (auto *f = llvm::dyn_cast<FuncDecl>(&d)) {
    os << "\n";
    Indent in(*this);
    for (const auto &p : f->params)
      decl(*p);
    expr(*f->body, "body");
    return;
  }
  if (auto *c = llvm::dyn_cast<CollectiveDecl>(&d)) {
    os << "\n";
    Indent in(*this);
    for (const auto &p : c->params) {
      line(p.get()) << " " << p->name;
      range(p->getRange());
      os << "\n";
      if (p->defaultValue) {
        Indent in2(*this);
        expr(*p->defaultValue, "default");
      }
    }
    for (const auto &item : c->items)
      stmt(*item);
    return;
  }
  if (auto *a = llvm::dyn_cast<AlgorithmDecl>(&d)) {
    os << " implements " << a->collectiveName;
    if (a->builtin)
      os << " (built-in)";
    else if (a->userCollective)
      os << " (declared)";
    os << "\n";
    Indent in(*this);
    namedArgs("arg", a->collArgs);
    namedArgs("option", a->options);
    stmt(*a->body);
    return;
  }
  os << "\n";
}

void Dumper::stmt(const Stmt &s) {
  line(&s);
  range(s.getRange());
  if (auto *b = llvm::dyn_cast<BlockStmt>(&s)) {
    os << "\n";
    Indent in(*this);
    for (const auto &c : b->body)
      stmt(*c);
  } else if (auto *l = llvm::dyn_cast<LetStmt>(&s)) {
    os << "\n";
    Indent in(*this);
    decl(*l->var);
    expr(*l->value, "value");
  } else if (auto *a = llvm::dyn_cast<AssignStmt>(&s)) {
    os << " " << a->name;
    if (a->target)
      os << " -> slot " << a->target->slot;
    os << "\n";
    Indent in(*this);
    expr(*a->value, "value");
  } else if (auto *e = llvm::dyn_cast<ExprStmt>(&s)) {
    os << "\n";
    Indent in(*this);
    expr(*e->expr);
  } else if (auto *f = llvm::dyn_cast<ForStmt>(&s)) {
    os << "\n";
    Indent in(*this);
    decl(*f->var);
    expr(*f->lo, "lo");
    expr(*f->hi, "hi");
    if (f->step)
      expr(*f->step, "step");
    stmt(*f->body);
  } else if (auto *i = llvm::dyn_cast<IfStmt>(&s)) {
    os << "\n";
    Indent in(*this);
    expr(*i->cond, "cond");
    stmt(*i->thenBlock);
    if (i->elseStmt) {
      os.indent(depth * 2) << "else:\n";
      Indent in2(*this);
      stmt(*i->elseStmt);
    }
  } else if (auto *r = llvm::dyn_cast<RequireStmt>(&s)) {
    if (r->message) {
      os << " \"";
      os.write_escaped(*r->message);
      os << "\"";
    }
    os << "\n";
    Indent in(*this);
    expr(*r->cond, "cond");
  } else if (auto *def = llvm::dyn_cast<DefStmt>(&s)) {
    os << "\n";
    Indent in(*this);
    decl(*def->func);
  } else if (auto *sc = llvm::dyn_cast<ScratchStmt>(&s)) {
    os << " " << sc->buffer->name << "\n";
    Indent in(*this);
    expr(*sc->size, "size");
  } else if (auto *bs = llvm::dyn_cast<BufferSizeStmt>(&s)) {
    os << " " << bufferKindName(bs->which) << "\n";
    Indent in(*this);
    expr(*bs->size, "size");
  } else if (auto *p = llvm::dyn_cast<PreStmt>(&s)) {
    os << "\n";
    Indent in(*this);
    expr(*p->ref, "ref");
    if (p->clause)
      forClause(*p->clause);
  } else if (auto *p = llvm::dyn_cast<PostStmt>(&s)) {
    os << "\n";
    Indent in(*this);
    expr(*p->target, "target");
    expr(*p->value, "value");
    if (p->clause)
      forClause(*p->clause);
  } else {
    os << "\n";
  }
}

void Dumper::expr(const Expr &e, llvm::StringRef label) {
  line(&e, label);
  if (auto *lit = llvm::dyn_cast<IntLitExpr>(&e)) {
    if (e.isInvalid())
      os << " <invalid>";
    else
      os << " " << lit->value;
  } else if (auto *n = llvm::dyn_cast<NameExpr>(&e)) {
    os << " " << n->name;
  } else if (auto *u = llvm::dyn_cast<UnaryExpr>(&e)) {
    os << " '" << unaryOpSpelling(u->op) << "'";
  } else if (auto *b = llvm::dyn_cast<BinaryExpr>(&e)) {
    os << " '" << binaryOpSpelling(b->op) << "'";
  } else if (auto *c = llvm::dyn_cast<CallExpr>(&e)) {
    os << " " << intFunctionName(c->fn);
  } else if (auto *c = llvm::dyn_cast<UserCallExpr>(&e)) {
    os << " " << c->callee;
  } else if (auto *r = llvm::dyn_cast<ChunkRefExpr>(&e)) {
    os << " " << r->bufferName;
  }
  range(e.getRange());
  switch (e.getValueKind()) {
  case ValueKind::Int:
    os << " int";
    break;
  case ValueKind::Chunk:
    os << " chunk";
    break;
  case ValueKind::Buffer:
    os << " buffer";
    break;
  case ValueKind::Unknown:
    break;
  }
  if (auto v = e.getConstant())
    os << " = " << *v;
  if (auto *n = llvm::dyn_cast<NameExpr>(&e); n && n->decl) {
    os << " -> " << nodeKindName(n->decl->getKind());
    if (auto *v = llvm::dyn_cast<VarDecl>(n->decl))
      os << " slot " << v->slot;
  }
  os << "\n";

  Indent in(*this);
  if (auto *u = llvm::dyn_cast<UnaryExpr>(&e)) {
    expr(*u->operand);
  } else if (auto *b = llvm::dyn_cast<BinaryExpr>(&e)) {
    expr(*b->lhs);
    expr(*b->rhs);
  } else if (auto *c = llvm::dyn_cast<CondExpr>(&e)) {
    expr(*c->cond, "cond");
    expr(*c->thenExpr, "then");
    expr(*c->elseExpr, "else");
  } else if (auto *c = llvm::dyn_cast<CallExpr>(&e)) {
    for (const auto &a : c->args)
      expr(*a);
  } else if (auto *c = llvm::dyn_cast<UserCallExpr>(&e)) {
    for (const auto &a : c->args)
      expr(*a);
  } else if (auto *r = llvm::dyn_cast<ChunkRefExpr>(&e)) {
    expr(*r->rank, "rank");
    expr(*r->lo, r->hi ? "lo" : "index");
    if (r->hi)
      expr(*r->hi, "hi");
    if (r->step)
      expr(*r->step, "step");
    if (r->width)
      expr(*r->width, "width");
  } else if (auto *t = llvm::dyn_cast<TransferExpr>(&e)) {
    expr(*t->src, "src");
    expr(*t->dst, "dst");
    if (t->hints.channel)
      expr(*t->hints.channel, "channel");
    if (t->hints.sendTb)
      expr(*t->hints.sendTb, t->hints.tbShared ? "tb" : "sendtb");
    if (t->hints.recvTb)
      expr(*t->hints.recvTb, "recvtb");
  } else if (auto *r = llvm::dyn_cast<ReduceAllExpr>(&e)) {
    expr(*r->element, "element");
    forClause(*r->clause);
  }
}

void coll::dumpModule(const Module &module, const llvm::SourceMgr &srcMgr, llvm::raw_ostream &os) {
  Dumper(srcMgr, os).module(module);
}
