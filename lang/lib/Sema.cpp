//===- Sema.cpp - Semantic analysis of .coll programs ---------------------===//

#include "coll/Lang/Sema.h"

#include "ParserImpl.h"
#include "coll/Lang/ConstEval.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"

using namespace coll;
using namespace coll::ast;
using llvm::SMRange;
using llvm::Twine;

namespace {

/// What the code being analysed belongs to.
enum class Context { File, Collective, Algorithm };

class Sema {
public:
  Sema(Module &module, DiagnosticEngine &diag) : module(module), diag(diag) {}
  void run();

private:
  // Scopes.
  void pushScope() { scopes.emplace_back(); }
  void popScope() { scopes.pop_back(); }
  Decl *lookup(llvm::StringRef name) const;
  /// Declares \p d in the innermost scope; a name already visible is an error.
  void declare(Decl &d);
  std::vector<std::string> visibleNames() const;
  void reportUndeclared(llvm::StringRef name, SMRange range);

  // Declarations.
  void checkParam(ParamDecl &p);
  void checkFunc(FuncDecl &f);
  /// Makes the collective's arguments visible in the algorithm's body.
  void declareCollectiveArgs(AlgorithmDecl &a);
  void checkCollective(CollectiveDecl &c);
  void checkAlgorithm(AlgorithmDecl &a);
  void checkCollectiveArgs(AlgorithmDecl &a);
  void checkOptions(AlgorithmDecl &a);
  void checkForClause(ForClause &clause);

  // Statements.
  void checkStmt(Stmt &s);
  void checkBlock(BlockStmt &b, bool newScope = true);
  void checkPost(PostStmt &p);

  // Expressions: each returns the expression's kind.
  ValueKind checkExpr(Expr &e);
  ValueKind checkName(NameExpr &e);
  ValueKind checkUnary(UnaryExpr &e);
  ValueKind checkBinary(BinaryExpr &e);
  ValueKind checkCond(CondExpr &e);
  ValueKind checkCall(CallExpr &e);
  ValueKind checkUserCall(UserCallExpr &e);
  ValueKind checkChunkRef(ChunkRefExpr &e);
  ValueKind checkTransfer(TransferExpr &e);
  ValueKind checkReduceAll(ReduceAllExpr &e);

  /// Checks \p e and requires an integer; \p what names its role.
  bool expectInt(Expr &e, const Twine &what);
  /// Checks \p e and requires a chunk reference.
  bool expectChunk(Expr &e, const Twine &what);
  /// Requires a constant \p e (already checked) in [lo, hi].
  void checkRange(const Expr &e, const Twine &what, int64_t lo, int64_t hi);
  /// Reports a failed constant operation; returns the empty optional.
  std::optional<int64_t> arithFailure(ArithError err, SMRange where);
  VarDecl &newVar(VarDecl &v, ValueKind kind);

  Module &module;
  DiagnosticEngine &diag;
  std::vector<llvm::StringMap<Decl *>> scopes;
  Context context = Context::File;
  BufferDecl *inputBuf = nullptr;
  BufferDecl *outputBuf = nullptr;
  AlgorithmDecl *algorithm = nullptr;
  unsigned numSlots = 0;
  unsigned blockDepth = 0;
  bool allowReduceAll = false;
  /// The function whose body is being checked.
  FuncDecl *currentFunc = nullptr;
  /// File parameters that hide a collective argument of the same name in
  /// the current algorithm's body, with that argument's value (null: the
  /// default); a use draws a warning when the two may differ.
  llvm::DenseMap<const Decl *, std::pair<const CollParamDecl *, const Expr *>> hiddenArgs;
};

} // namespace

//===----------------------------------------------------------------------===//
// Scopes
//===----------------------------------------------------------------------===//

Decl *Sema::lookup(llvm::StringRef name) const {
  for (auto it = scopes.rbegin(); it != scopes.rend(); ++it) {
    auto found = it->find(name);
    if (found != it->end())
      return found->second;
  }
  return nullptr;
}

void Sema::declare(Decl &d) {
  if (Decl *prev = lookup(d.name)) {
    if (llvm::isa<NRanksDecl>(prev)) {
      diag.error(d.nameRange, "'N' is the number of ranks and cannot be redeclared");
      return;
    }
    if (llvm::isa<CollParamDecl>(prev) && algorithm) {
      diag.error(d.nameRange, "'" + d.name +
                                  "' is already declared as an argument of collective '" +
                                  algorithm->collectiveName + "'");
      diag.note(prev->nameRange.isValid() ? prev->nameRange : algorithm->collectiveRange,
                "the collective's arguments are visible in the algorithm's body");
      return;
    }
    diag.error(d.nameRange, "'" + d.name + "' is already declared");
    if (prev->nameRange.isValid())
      diag.note(prev->nameRange, "previous declaration is here");
    return;
  }
  scopes.back()[d.name] = &d;
}

std::vector<std::string> Sema::visibleNames() const {
  std::vector<std::string> names;
  for (const auto &scope : scopes)
    for (const auto &entry : scope)
      names.push_back(entry.getKey().str());
  std::sort(names.begin(), names.end());
  return names;
}

void Sema::reportUndeclared(llvm::StringRef name, SMRange range) {
  // A name with non-ASCII bytes was already reported by the lexer.
  if (llvm::any_of(name, [](char c) { return static_cast<unsigned char>(c) >= 0x80; }))
    return;
  diag.error(range, "use of undeclared identifier '" + name + "'");
  if (!diag.canGuess())
    return;
  std::vector<std::string> names = visibleNames();
  std::string guess = diag.spendOnGuess(names.size()) ? closestName(name, names) : std::string();
  if (!guess.empty()) {
    Decl *d = lookup(guess);
    if (d && d->nameRange.isValid())
      diag.note(d->nameRange, "did you mean '" + guess + "'?");
    else
      diag.note(range, "did you mean '" + guess + "'?");
  }
}

VarDecl &Sema::newVar(VarDecl &v, ValueKind kind) {
  v.valueKind = kind;
  v.slot = numSlots++;
  declare(v);
  return v;
}

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

bool Sema::expectInt(Expr &e, const Twine &what) {
  ValueKind k = checkExpr(e);
  if (k == ValueKind::Int)
    return true;
  if (k != ValueKind::Unknown)
    diag.error(e.getRange(), "expected an integer for " + what + ", found " + valueKindPhrase(k));
  return false;
}

bool Sema::expectChunk(Expr &e, const Twine &what) {
  ValueKind k = checkExpr(e);
  if (k == ValueKind::Chunk)
    return true;
  if (k != ValueKind::Unknown)
    diag.error(e.getRange(),
               "expected a chunk reference for " + what + ", found " + valueKindPhrase(k));
  return false;
}

void Sema::checkRange(const Expr &e, const Twine &what, int64_t lo, int64_t hi) {
  std::optional<int64_t> v = e.getConstant();
  if (v && (*v < lo || *v > hi))
    diag.error(e.getRange(),
               what + " " + Twine(*v) + " is out of range [" + Twine(lo) + ", " + Twine(hi) + "]");
}

std::optional<int64_t> Sema::arithFailure(ArithError err, SMRange where) {
  switch (err) {
  case ArithError::Overflow:
    diag.error(where, "integer overflow in constant expression");
    break;
  case ArithError::DivByZero:
    diag.error(where, "division by zero");
    break;
  case ArithError::BadShift:
    diag.error(where, "shift amount out of range [0, 63]");
    break;
  case ArithError::Domain:
  case ArithError::None:
    diag.error(where, "argument out of the function's domain");
    break;
  }
  return std::nullopt;
}

ValueKind Sema::checkExpr(Expr &e) {
  ValueKind k = ValueKind::Unknown;
  if (e.isInvalid()) {
    k = ValueKind::Unknown;
  } else if (auto *lit = llvm::dyn_cast<IntLitExpr>(&e)) {
    e.setConstant(lit->value);
    k = ValueKind::Int;
  } else if (auto *n = llvm::dyn_cast<NameExpr>(&e)) {
    k = checkName(*n);
  } else if (auto *u = llvm::dyn_cast<UnaryExpr>(&e)) {
    k = checkUnary(*u);
  } else if (auto *b = llvm::dyn_cast<BinaryExpr>(&e)) {
    k = checkBinary(*b);
  } else if (auto *c = llvm::dyn_cast<CondExpr>(&e)) {
    k = checkCond(*c);
  } else if (auto *call = llvm::dyn_cast<CallExpr>(&e)) {
    k = checkCall(*call);
  } else if (auto *uc = llvm::dyn_cast<UserCallExpr>(&e)) {
    k = checkUserCall(*uc);
  } else if (auto *ref = llvm::dyn_cast<ChunkRefExpr>(&e)) {
    k = checkChunkRef(*ref);
  } else if (auto *t = llvm::dyn_cast<TransferExpr>(&e)) {
    k = checkTransfer(*t);
  } else if (auto *r = llvm::dyn_cast<ReduceAllExpr>(&e)) {
    k = checkReduceAll(*r);
  }
  e.setValueKind(k);
  return k;
}

ValueKind Sema::checkName(NameExpr &e) {
  Decl *d = lookup(e.name);
  if (!d) {
    reportUndeclared(e.name, e.getRange());
    return ValueKind::Unknown;
  }
  if (llvm::isa<FuncDecl>(d)) {
    diag.error(e.getRange(), "'" + e.name + "' is a function; call it as '" + e.name + "(...)'");
    diag.note(d->nameRange, "'" + e.name + "' is declared here");
    return ValueKind::Unknown;
  }
  e.decl = d;
  if (auto hidden = hiddenArgs.find(d);
      hidden != hiddenArgs.end() && context == Context::Algorithm) {
    // `param root = 0; ... broadcast(root = 2) { ... root ... }`: the body
    // reads the parameter, which need not be the collective's root.
    diag.warning(e.getRange(), "'" + e.name + "' refers to the parameter '" + e.name +
                                   "', not to the argument '" + e.name + "' of collective '" +
                                   algorithm->collectiveName + "'");
    diag.note(hidden->second.second ? hidden->second.second->getRange()
                                    : algorithm->collectiveRange,
              "the argument is given here; rename the parameter or pass '" + e.name + " = " +
                  e.name + "'");
    hiddenArgs.erase(hidden);
  }
  if (auto *v = llvm::dyn_cast<VarDecl>(d))
    return v->valueKind;
  if (llvm::isa<BufferDecl>(d))
    return ValueKind::Buffer;
  return ValueKind::Int; // N, parameters, collective parameters
}

ValueKind Sema::checkUnary(UnaryExpr &e) {
  if (!expectInt(*e.operand, "the operand of '" + unaryOpSpelling(e.op) + "'"))
    return ValueKind::Unknown;
  if (std::optional<int64_t> v = e.operand->getConstant()) {
    ArithResult r = evalUnaryOp(e.op, *v);
    e.setConstant(r.ok() ? std::optional<int64_t>(r.value) : arithFailure(r.error, e.getRange()));
  }
  return ValueKind::Int;
}

ValueKind Sema::checkBinary(BinaryExpr &e) {
  std::string what = ("the operands of '" + binaryOpSpelling(e.op) + "'").str();
  bool lhsOk = expectInt(*e.lhs, what);
  bool rhsOk = expectInt(*e.rhs, what);
  if (!lhsOk || !rhsOk)
    return ValueKind::Unknown;
  std::optional<int64_t> a = e.lhs->getConstant(), b = e.rhs->getConstant();
  // Division by a literal zero is an error even when the dividend varies.
  if ((e.op == BinaryOp::Div || e.op == BinaryOp::Mod) && b && *b == 0) {
    diag.error(e.rhs->getRange(), e.op == BinaryOp::Div ? "division by zero" : "modulo by zero");
    return ValueKind::Int;
  }
  if ((e.op == BinaryOp::Shl || e.op == BinaryOp::Shr) && b && (*b < 0 || *b > 63)) {
    diag.error(e.rhs->getRange(), "shift amount " + Twine(*b) + " is out of range [0, 63]");
    return ValueKind::Int;
  }
  if (!a || !b)
    return ValueKind::Int;
  ArithResult r = evalBinaryOp(e.op, *a, *b);
  e.setConstant(r.ok() ? std::optional<int64_t>(r.value) : arithFailure(r.error, e.getRange()));
  return ValueKind::Int;
}

ValueKind Sema::checkCond(CondExpr &e) {
  bool condOk = expectInt(*e.cond, "a condition");
  ValueKind a = checkExpr(*e.thenExpr);
  ValueKind b = checkExpr(*e.elseExpr);
  if (!condOk || a == ValueKind::Unknown || b == ValueKind::Unknown)
    return ValueKind::Unknown;
  if (a != b || a == ValueKind::Buffer) {
    diag.error(e.getRange(), "the branches of '?:' must both be integers or both chunk "
                             "references; found " +
                                 valueKindPhrase(a) + " and " + valueKindPhrase(b));
    return ValueKind::Unknown;
  }
  if (std::optional<int64_t> c = e.cond->getConstant())
    e.setConstant(*c ? e.thenExpr->getConstant() : e.elseExpr->getConstant());
  return a;
}

ValueKind Sema::checkCall(CallExpr &e) {
  bool ok = true;
  std::vector<int64_t> values;
  bool allConstant = true;
  for (auto &arg : e.args) {
    ok &= expectInt(*arg, "an argument of '" + intFunctionName(e.fn) + "'");
    if (std::optional<int64_t> v = arg->getConstant())
      values.push_back(*v);
    else
      allConstant = false;
  }
  if (!ok)
    return ValueKind::Unknown;
  if (e.fn == IntFunction::DivCeil) {
    if (auto d = e.args[1]->getConstant(); d && *d <= 0) {
      diag.error(e.args[1]->getRange(),
                 *d == 0 ? Twine("division by zero") : Twine("div_ceil needs a positive divisor"));
      return ValueKind::Int;
    }
  }
  if (!allConstant)
    return ValueKind::Int;
  ArithResult r = evalIntFunction(e.fn, values);
  if (r.error == ArithError::Domain) {
    std::string msg = intFunctionDomainMessage(e.fn, values, "");
    if (!msg.empty()) {
      diag.error(e.getRange(), msg);
      return ValueKind::Int;
    }
  }
  if (e.fn == IntFunction::DivCeil && r.error == ArithError::Domain) {
    diag.error(e.args[1]->getRange(), "div_ceil needs a positive divisor");
    return ValueKind::Int;
  }
  e.setConstant(r.ok() ? std::optional<int64_t>(r.value) : arithFailure(r.error, e.getRange()));
  return ValueKind::Int;
}

ValueKind Sema::checkUserCall(UserCallExpr &e) {
  bool ok = true;
  std::vector<int64_t> values;
  for (auto &arg : e.args) {
    ok &= expectInt(*arg, "an argument of '" + e.callee + "'");
    if (std::optional<int64_t> v = arg->getConstant())
      values.push_back(*v);
  }
  Decl *d = lookup(e.callee);
  if (!d) {
    if (currentFunc && currentFunc->name == e.callee) {
      diag.error(e.calleeRange,
                 "function '" + e.callee + "' calls itself; recursion is not allowed");
      return ValueKind::Unknown;
    }
    diag.error(e.calleeRange, "unknown function '" + e.callee + "'");
    std::vector<std::string> candidates = {
#define COLL_INT_FUNCTION(Id, Name, MinArgs, MaxArgs) Name,
#include "coll/Lang/Builtins.def"
        "copy", "reduce"};
    for (const auto &scope : scopes)
      for (const auto &entry : scope)
        if (diag.canGuess() && llvm::isa<FuncDecl>(entry.getValue()))
          candidates.push_back(entry.getKey().str());
    std::sort(candidates.begin(), candidates.end());
    std::string guess =
        diag.spendOnGuess(candidates.size()) ? closestName(e.callee, candidates) : std::string();
    if (!guess.empty()) {
      Decl *g = lookup(guess);
      diag.note(g && g->nameRange.isValid() ? g->nameRange : e.calleeRange,
                "did you mean '" + guess + "'?");
    }
    return ValueKind::Unknown;
  }
  auto *f = llvm::dyn_cast<FuncDecl>(d);
  if (!f) {
    diag.error(e.calleeRange, "'" + e.callee + "' is not a function");
    if (d->nameRange.isValid())
      diag.note(d->nameRange, "'" + e.callee + "' is declared here");
    return ValueKind::Unknown;
  }
  if (e.args.size() != f->params.size()) {
    size_t n = f->params.size();
    diag.error(e.getRange(), "'" + e.callee + "' takes " + Twine(n) + " argument" +
                                 (n == 1 ? "" : "s") + ", " + Twine(e.args.size()) + " given");
    diag.note(f->nameRange, "'" + e.callee + "' is declared here");
    return ValueKind::Unknown;
  }
  e.func = f;
  if (!ok)
    return ValueKind::Unknown;
  // Constant arguments give a constant call when the body folds; an error
  // inside the body is reported where the call is evaluated.
  if (values.size() == e.args.size())
    e.setConstant(foldFunctionCall(*f, values));
  return ValueKind::Int;
}

/// Whether \p ref names the collective's buffer of \p kind (`input`,
/// `output`).
static bool namesBuffer(const ChunkRefExpr *ref, BufferKind kind) {
  return ref && ref->bufferName == bufferKindName(kind);
}

ValueKind Sema::checkChunkRef(ChunkRefExpr &e) {
  bool ok = true;
  bool isInput = namesBuffer(&e, BufferKind::Input);
  if (isInput || namesBuffer(&e, BufferKind::Output)) {
    e.buffer = isInput ? inputBuf : outputBuf;
    if (!e.buffer) {
      diag.error(e.bufferRange, "'" + e.bufferName +
                                    "' is only available inside an algorithm "
                                    "or a collective");
      ok = false;
    }
  } else if (Decl *d = lookup(e.bufferName)) {
    e.buffer = llvm::dyn_cast<BufferDecl>(d);
    if (!e.buffer) {
      diag.error(e.bufferRange, "'" + e.bufferName +
                                    "' is not a buffer; chunk references index "
                                    "'input', 'output' or a scratch buffer");
      if (d->nameRange.isValid())
        diag.note(d->nameRange, "'" + e.bufferName + "' is declared here");
      ok = false;
    }
  } else {
    reportUndeclared(e.bufferName, e.bufferRange);
    ok = false;
  }
  ok &= expectInt(*e.rank, "a rank");
  ok &= expectInt(*e.lo, "a chunk index");
  if (e.hi)
    ok &= expectInt(*e.hi, "a chunk index");
  if (e.step)
    ok &= expectInt(*e.step, "a chunk range step");
  if (e.width)
    ok &= expectInt(*e.width, "a chunk range width");
  if (!ok)
    return ValueKind::Unknown;
  if (e.step && context == Context::Collective) {
    diag.error(e.step->getRange(), "a strided chunk range moves data in an algorithm; a "
                                   "collective's conditions name single chunks or plain ranges");
    return ValueKind::Unknown;
  }
  if (auto r = e.rank->getConstant(); r && *r < 0)
    diag.error(e.rank->getRange(), "rank " + Twine(*r) + " is negative");
  if (auto lo = e.lo->getConstant(); lo && *lo < 0)
    diag.error(e.lo->getRange(), "chunk index " + Twine(*lo) + " is negative");
  if (e.hi) {
    auto lo = e.lo->getConstant(), hi = e.hi->getConstant();
    if (lo && hi && *hi <= *lo)
      diag.error(SMRange(e.lo->getRange().Start, e.hi->getRange().End),
                 "empty chunk range " + Twine(*lo) + " .. " + Twine(*hi));
  }
  std::optional<int64_t> step = e.step ? e.step->getConstant() : std::nullopt;
  std::optional<int64_t> width = e.width ? e.width->getConstant() : std::nullopt;
  if (step && *step <= 0)
    diag.error(e.step->getRange(), "chunk range step " + Twine(*step) + " must be positive");
  if (width && *width <= 0)
    diag.error(e.width->getRange(), "chunk range width " + Twine(*width) + " must be positive");
  if (step && width && *step > 0 && *width > *step)
    diag.error(e.width->getRange(), "chunk range width " + Twine(*width) + " exceeds its step " +
                                        Twine(*step) + ": the runs would overlap");
  return ValueKind::Chunk;
}

ValueKind Sema::checkTransfer(TransferExpr &e) {
  const char *name = llvm::isa<CopyExpr>(e) ? "copy" : "reduce";
  if (currentFunc) {
    diag.error(e.getRange(), "'" + Twine(name) +
                                 "' moves data and is not allowed in a function; a function "
                                 "computes an integer");
    return ValueKind::Unknown;
  }
  if (context != Context::Algorithm) {
    diag.error(e.getRange(), "'" + Twine(name) +
                                 "' moves data and is allowed only in an "
                                 "algorithm");
    return ValueKind::Unknown;
  }
  bool ok = expectChunk(*e.src, "the source of '" + Twine(name) + "'");
  ok &= expectChunk(*e.dst, "the destination of '" + Twine(name) + "'");
  auto hint = [&](ExprPtr &h, const char *label, int64_t max) {
    if (!h)
      return;
    if (expectInt(*h, "'" + Twine(label) + "'"))
      checkRange(*h, Twine(label), 0, max - 1);
  };
  hint(e.hints.channel, "channel", LanguageLimits::maxChannels);
  hint(e.hints.sendTb, e.hints.tbShared ? "tb" : "sendtb", LanguageLimits::maxThreadblocks);
  hint(e.hints.recvTb, "recvtb", LanguageLimits::maxThreadblocks);
  return ok ? ValueKind::Chunk : ValueKind::Unknown;
}

ValueKind Sema::checkReduceAll(ReduceAllExpr &e) {
  if (!allowReduceAll) {
    diag.error(e.getRange(), "'reduce(... for ...)' describes a result and is allowed only as the "
                             "value of a post-condition");
    return ValueKind::Unknown;
  }
  pushScope();
  checkForClause(*e.clause);
  bool ok = expectChunk(*e.element, "the element of a reduction");
  popScope();
  if (ok) {
    auto *ref = llvm::dyn_cast<ChunkRefExpr>(e.element.get());
    if (!namesBuffer(ref, BufferKind::Input)) {
      diag.error(e.element->getRange(), "a reduction in a post-condition combines input chunks; "
                                        "expected input[rank][index]");
      return ValueKind::Unknown;
    }
  }
  return ok ? ValueKind::Chunk : ValueKind::Unknown;
}

//===----------------------------------------------------------------------===//
// Statements
//===----------------------------------------------------------------------===//

void Sema::checkBlock(BlockStmt &b, bool newScope) {
  if (newScope)
    pushScope();
  ++blockDepth;
  for (auto &s : b.body) {
    if (diag.shouldStop())
      break;
    checkStmt(*s);
  }
  --blockDepth;
  if (newScope)
    popScope();
}

void Sema::checkStmt(Stmt &s) {
  if (auto *b = llvm::dyn_cast<BlockStmt>(&s)) {
    checkBlock(*b);
  } else if (auto *l = llvm::dyn_cast<LetStmt>(&s)) {
    ValueKind k = checkExpr(*l->value);
    if (k == ValueKind::Buffer) {
      diag.error(l->value->getRange(), "a variable cannot hold a whole buffer; refer to its "
                                       "chunks as buffer[rank][index]");
      k = ValueKind::Unknown;
    }
    newVar(*l->var, k);
  } else if (auto *a = llvm::dyn_cast<AssignStmt>(&s)) {
    ValueKind k = checkExpr(*a->value);
    Decl *d = lookup(a->name);
    if (!d) {
      reportUndeclared(a->name, a->nameRange);
      return;
    }
    auto *v = llvm::dyn_cast<VarDecl>(d);
    if (!v || !v->isMutable()) {
      const char *what = llvm::isa<BufferDecl>(d)           ? "a buffer"
                         : llvm::isa<FuncDecl>(d)           ? "a function"
                         : llvm::isa<CollParamDecl>(d)      ? "an argument of the collective"
                         : !v                               ? "a parameter"
                         : v->varKind == VarKind::Loop      ? "a loop variable"
                         : v->varKind == VarKind::FuncParam ? "a function parameter"
                                                            : "a for-clause variable";
      if (llvm::isa<NRanksDecl>(d))
        diag.error(a->nameRange, "cannot assign to 'N', the number of ranks");
      else
        diag.error(a->nameRange, "cannot assign to '" + a->name + "', which is " + what);
      if (d->nameRange.isValid())
        diag.note(d->nameRange, "'" + a->name + "' is declared here");
      return;
    }
    a->target = v;
    if (k != ValueKind::Unknown && v->valueKind != ValueKind::Unknown && k != v->valueKind) {
      diag.error(a->value->getRange(), "cannot assign " + valueKindPhrase(k) + " to '" + a->name +
                                           "', which holds " + valueKindPhrase(v->valueKind));
      diag.note(v->nameRange, "'" + a->name + "' is declared here");
    }
  } else if (auto *e = llvm::dyn_cast<ExprStmt>(&s)) {
    ValueKind k = checkExpr(*e->expr);
    if (k != ValueKind::Unknown && !llvm::isa<TransferExpr>(e->expr.get()))
      diag.warning(e->expr->getRange(), "expression result unused; only 'copy' and 'reduce' "
                                        "have an effect");
  } else if (auto *f = llvm::dyn_cast<ForStmt>(&s)) {
    expectInt(*f->lo, "a loop bound");
    expectInt(*f->hi, "a loop bound");
    if (f->step && expectInt(*f->step, "a loop step")) {
      if (auto v = f->step->getConstant(); v && *v == 0)
        diag.error(f->step->getRange(), "loop step is zero");
    }
    pushScope();
    newVar(*f->var, ValueKind::Int);
    checkBlock(*f->body);
    popScope();
  } else if (auto *i = llvm::dyn_cast<IfStmt>(&s)) {
    expectInt(*i->cond, "a condition");
    checkBlock(*i->thenBlock);
    if (i->elseStmt)
      checkStmt(*i->elseStmt);
  } else if (auto *r = llvm::dyn_cast<RequireStmt>(&s)) {
    expectInt(*r->cond, "a 'require' condition");
  } else if (auto *sc = llvm::dyn_cast<ScratchStmt>(&s)) {
    if (blockDepth != 1) {
      diag.error(sc->buffer->nameRange, "scratch buffers are declared at the top level of an "
                                        "algorithm");
      return;
    }
    if (expectInt(*sc->size, "a scratch buffer size")) {
      if (auto v = sc->size->getConstant(); v && *v <= 0)
        diag.error(sc->size->getRange(), "scratch buffer size must be positive, not " + Twine(*v));
    }
    sc->buffer->index = algorithm->scratch.size();
    algorithm->scratch.push_back(sc);
    declare(*sc->buffer);
  } else if (auto *bs = llvm::dyn_cast<BufferSizeStmt>(&s)) {
    if (expectInt(*bs->size, "a buffer size")) {
      if (auto v = bs->size->getConstant(); v && *v <= 0)
        diag.error(bs->size->getRange(), "buffer size must be positive, not " + Twine(*v));
    }
  } else if (auto *p = llvm::dyn_cast<PreStmt>(&s)) {
    pushScope();
    if (p->clause)
      checkForClause(*p->clause);
    if (expectChunk(*p->ref, "a pre-condition")) {
      auto *ref = llvm::dyn_cast<ChunkRefExpr>(p->ref.get());
      if (!namesBuffer(ref, BufferKind::Input))
        diag.error(p->ref->getRange(), "a pre-condition names input chunks that hold data; "
                                       "expected input[rank][index]");
    }
    popScope();
  } else if (auto *post = llvm::dyn_cast<PostStmt>(&s)) {
    checkPost(*post);
  } else if (auto *def = llvm::dyn_cast<DefStmt>(&s)) {
    checkFunc(*def->func);
  }
}

void Sema::checkPost(PostStmt &p) {
  pushScope();
  if (p.clause)
    checkForClause(*p.clause);
  if (expectChunk(*p.target, "a post-condition")) {
    auto *ref = llvm::dyn_cast<ChunkRefExpr>(p.target.get());
    if (!namesBuffer(ref, BufferKind::Output))
      diag.error(p.target->getRange(), "a post-condition states what an output chunk holds; "
                                       "expected output[rank][index] on the left of '=='");
  }
  allowReduceAll = true;
  if (expectChunk(*p.value, "the value of a post-condition")) {
    auto *ref = llvm::dyn_cast<ChunkRefExpr>(p.value.get());
    if (!llvm::isa<ReduceAllExpr>(p.value.get()) && (!namesBuffer(ref, BufferKind::Input)))
      diag.error(p.value->getRange(), "the value of a post-condition is an input chunk or "
                                      "'reduce(input[j][i] for j in ...)'");
  }
  allowReduceAll = false;
  popScope();
}

void Sema::checkForClause(ForClause &clause) {
  for (Binder &b : clause.binders) {
    expectInt(*b.lo, "a range bound");
    expectInt(*b.hi, "a range bound");
    newVar(*b.var, ValueKind::Int);
  }
  if (clause.cond)
    expectInt(*clause.cond, "a condition");
}

//===----------------------------------------------------------------------===//
// Declarations
//===----------------------------------------------------------------------===//

void Sema::checkParam(ParamDecl &p) {
  expectInt(*p.defaultValue, "the default of parameter '" + p.name + "'");
  declare(p);
}

void Sema::checkFunc(FuncDecl &f) {
  static const char *const builtins[] = {
#define COLL_INT_FUNCTION(Id, Name, MinArgs, MaxArgs) Name,
#include "coll/Lang/Builtins.def"
      "copy", "reduce"};
  for (const char *b : builtins)
    if (f.name == b)
      diag.error(f.nameRange, "'" + f.name + "' is a built-in function; choose another name");
  pushScope();
  for (unsigned i = 0; i < f.params.size(); ++i) {
    VarDecl &p = *f.params[i];
    p.valueKind = ValueKind::Int;
    p.slot = i;
    declare(p);
  }
  // The function is visible only after its body: it cannot call itself.
  FuncDecl *outer = currentFunc;
  currentFunc = &f;
  expectInt(*f.body, "the body of function '" + f.name + "'");
  currentFunc = outer;
  popScope();
  declare(f);
}

void Sema::declareCollectiveArgs(AlgorithmDecl &a) {
  std::vector<CollParamDecl *> params;
  if (a.builtin) {
    for (size_t i = 0; i < a.collParamNames.size(); ++i) {
      SMRange where;
      for (const NamedArg &arg : a.collArgs)
        if (arg.name == a.collParamNames[i])
          where = arg.nameRange;
      auto p = std::make_unique<CollParamDecl>(where, a.collParamNames[i], where, nullptr);
      p->index = i;
      params.push_back(p.get());
      a.builtinParams.push_back(std::move(p));
    }
  } else if (a.userCollective) {
    for (auto &p : a.userCollective->params)
      params.push_back(p.get());
  }
  for (size_t i = 0; i < params.size(); ++i) {
    CollParamDecl *p = params[i];
    const Expr *value = i < a.collParamValues.size() ? a.collParamValues[i] : nullptr;
    if (Decl *prev = lookup(p->name)) {
      // A file parameter keeps its name; `root = root` passes it unchanged.
      auto *n = llvm::dyn_cast_or_null<NameExpr>(value);
      if (!n || n->decl != prev)
        hiddenArgs[prev] = {p, value};
      continue;
    }
    scopes.back()[p->name] = p;
  }
}

void Sema::checkCollective(CollectiveDecl &c) {
  context = Context::Collective;
  inputBuf = &c.input;
  outputBuf = &c.output;
  numSlots = 0;
  pushScope();
  for (unsigned i = 0; i < c.params.size(); ++i) {
    CollParamDecl &p = *c.params[i];
    p.index = i;
    if (p.defaultValue)
      expectInt(*p.defaultValue, "the default of '" + p.name + "'");
    declare(p);
  }
  bool hasPost = false;
  for (auto &item : c.items) {
    if (auto *bs = llvm::dyn_cast<BufferSizeStmt>(item.get())) {
      BufferSizeStmt *&slot = bs->which == BufferKind::Input ? c.inputSize : c.outputSize;
      if (slot) {
        diag.error(bs->getRange(),
                   Twine("the ") + bufferKindName(bs->which) + " size is declared twice");
        diag.note(slot->getRange(), "first declared here");
      } else {
        slot = bs;
      }
    }
    hasPost |= llvm::isa<PostStmt>(item.get());
    checkStmt(*item);
  }
  popScope();
  if (!c.inputSize)
    diag.error(c.nameRange, "collective '" + c.name +
                                "' does not declare its input size; add "
                                "'input[chunks];'");
  if (!c.outputSize)
    diag.error(c.nameRange, "collective '" + c.name +
                                "' does not declare its output size; add "
                                "'output[chunks];'");
  if (!hasPost && !c.hasMalformedItems)
    diag.error(c.nameRange, "collective '" + c.name +
                                "' has no post-condition; add "
                                "'post output[r][i] == ...;'");
  c.numSlots = numSlots;
  context = Context::File;
  inputBuf = outputBuf = nullptr;
}

void Sema::checkCollectiveArgs(AlgorithmDecl &a) {
  // The collective's parameter names and whether each has a default.
  std::vector<std::string> names;
  std::vector<const Expr *> defaults;
  std::vector<bool> hasDefault;
  if (a.builtin) {
    if (a.builtin->rooted) {
      names.push_back("root");
      defaults.push_back(nullptr);
      hasDefault.push_back(false);
    }
    names.push_back("chunks");
    defaults.push_back(nullptr); // the built-in default, 1
    hasDefault.push_back(true);
  } else if (a.userCollective) {
    for (auto &p : a.userCollective->params) {
      names.push_back(p->name);
      defaults.push_back(p->defaultValue.get());
      hasDefault.push_back(p->defaultValue != nullptr);
    }
  } else {
    for (auto &arg : a.collArgs)
      expectInt(*arg.value, "a collective argument");
    return;
  }

  std::vector<const NamedArg *> given(names.size(), nullptr);
  for (auto &arg : a.collArgs) {
    expectInt(*arg.value, "collective argument '" + arg.name + "'");
    auto it = std::find(names.begin(), names.end(), arg.name);
    if (it == names.end()) {
      diag.error(arg.nameRange, "'" + a.collectiveName + "' has no parameter '" + arg.name + "'");
      std::string list;
      for (size_t i = 0; i < names.size(); ++i)
        list += (i ? (i + 1 == names.size() ? " and '" : ", '") : "'") + names[i] + "'";
      diag.note(a.collectiveRange,
                "'" + a.collectiveName + "' takes " + (names.empty() ? "no parameters" : list));
      continue;
    }
    size_t idx = it - names.begin();
    if (given[idx]) {
      diag.error(arg.nameRange, "argument '" + arg.name + "' given twice");
      diag.note(given[idx]->nameRange, "first given here");
      continue;
    }
    given[idx] = &arg;
    if (auto v = arg.value->getConstant(); arg.name == "chunks" && v && *v < 1)
      diag.error(arg.value->getRange(), "chunks must be at least 1, not " + Twine(*v));
    if (auto v = arg.value->getConstant(); arg.name == "root" && v && *v < 0)
      diag.error(arg.value->getRange(), "root must not be negative, not " + Twine(*v));
  }
  for (size_t i = 0; i < names.size(); ++i) {
    if (!given[i] && !hasDefault[i]) {
      diag.error(a.collectiveRange,
                 "missing argument '" + names[i] + "' for collective '" + a.collectiveName + "'");
    }
    a.collParamNames.push_back(names[i]);
    a.collParamValues.push_back(given[i] ? given[i]->value.get() : defaults[i]);
  }
}

void Sema::checkOptions(AlgorithmDecl &a) {
  static const std::vector<std::string> known = {"nranks", "instances", "protocol", "inplace"};
  std::vector<const NamedArg *> seen;
  for (auto &opt : a.options) {
    bool dup = false;
    for (const NamedArg *s : seen)
      if (s->name == opt.name) {
        diag.error(opt.nameRange, "option '" + opt.name + "' given twice");
        diag.note(s->nameRange, "first given here");
        dup = true;
      }
    if (dup)
      continue;
    seen.push_back(&opt);
    if (opt.name == "protocol") {
      auto *n = llvm::dyn_cast<NameExpr>(opt.value.get());
      llvm::StringRef v = n ? llvm::StringRef(n->name) : "";
      if (v == "Simple") {
        a.protocol = Protocol::Simple;
      } else if (v == "LL") {
        a.protocol = Protocol::LL;
      } else if (v == "LL128") {
        a.protocol = Protocol::LL128;
      } else {
        diag.error(opt.value->getRange(), "unknown protocol; expected Simple, LL or LL128");
      }
      continue;
    }
    if (opt.name == "nranks") {
      if (!expectInt(*opt.value, "option 'nranks'"))
        continue;
      if (!opt.value->getConstant()) {
        diag.error(opt.value->getRange(), "option 'nranks' must be a constant");
        continue;
      }
      checkRange(*opt.value, "nranks", 1, LanguageLimits::maxRanks);
      a.nranksDefault = opt.value.get();
      continue;
    }
    if (opt.name == "inplace") {
      if (!expectInt(*opt.value, "option 'inplace'"))
        continue;
      // A constant is checked here; any other value (over N and parameters)
      // when the program is instantiated.
      std::optional<int64_t> v = opt.value->getConstant();
      if (v && *v != 0 && *v != 1) {
        diag.error(opt.value->getRange(), "option 'inplace' must be true or false");
        continue;
      }
      a.inplace = v && *v == 1;
      if (!v)
        a.inplaceExpr = opt.value.get();
      bool hasAlias = a.builtin && hasInPlaceForm(a.builtin->kind);
      if ((a.inplace || a.inplaceExpr) && !hasAlias && (a.builtin || a.userCollective))
        diag.error(opt.value->getRange(), "collective '" + a.collectiveName +
                                              "' defines no in-place alias; write the result "
                                              "to 'output'");
      continue;
    }
    if (opt.name == "instances") {
      if (expectInt(*opt.value, "option 'instances'"))
        checkRange(*opt.value, "instances", 1, LanguageLimits::maxInstances);
      a.instances = opt.value.get();
      continue;
    }
    diag.error(opt.nameRange, "unknown option '" + opt.name + "'");
    std::string guess = closestName(opt.name, known);
    diag.note(opt.nameRange, guess.empty() ? "options are 'nranks', 'instances', 'protocol' and "
                                             "'inplace'"
                                           : "did you mean '" + guess + "'?");
  }
}

void Sema::checkAlgorithm(AlgorithmDecl &a) {
  algorithm = &a;
  a.builtin = findCollective(a.collectiveName);
  if (!a.builtin) {
    for (CollectiveDecl *c : module.collectives())
      if (c->name == a.collectiveName)
        a.userCollective = c;
    if (!a.userCollective) {
      diag.error(a.collectiveRange, "unknown collective '" + a.collectiveName + "'");
      std::vector<std::string> candidates;
      for (unsigned k = 0; k < numBuiltinCollectives(); ++k)
        candidates.push_back(collectiveName(CollectiveKind(k)));
      for (CollectiveDecl *c : module.collectives())
        candidates.push_back(c->name);
      std::string guess = diag.spendOnGuess(candidates.size())
                              ? closestName(a.collectiveName, candidates)
                              : std::string();
      if (!guess.empty())
        diag.note(a.collectiveRange, "did you mean '" + guess + "'?");
    }
  }
  checkCollectiveArgs(a);
  checkOptions(a);

  context = Context::Algorithm;
  inputBuf = &a.input;
  outputBuf = &a.output;
  numSlots = 0;
  blockDepth = 0;
  pushScope(); // the collective's arguments
  declareCollectiveArgs(a);
  checkBlock(*a.body);
  popScope();
  hiddenArgs.clear();
  a.numSlots = numSlots;
  context = Context::File;
  inputBuf = outputBuf = nullptr;
  algorithm = nullptr;
}

void Sema::run() {
  pushScope(); // file scope: N and the parameters
  scopes.back()["N"] = &module.nranks;

  // Top-level names: collectives and algorithms each have their own space.
  llvm::StringMap<Decl *> collectives, algorithms;
  for (auto &d : module.decls) {
    if (llvm::isa<ParamDecl>(d.get()) || llvm::isa<FuncDecl>(d.get()))
      continue;
    auto &space = llvm::isa<CollectiveDecl>(d.get()) ? collectives : algorithms;
    const char *what = llvm::isa<CollectiveDecl>(d.get()) ? "collective" : "algorithm";
    if (llvm::isa<CollectiveDecl>(d.get()) && findCollective(d->name)) {
      diag.error(d->nameRange, "collective '" + d->name + "' is built in; choose another name");
    } else if (Decl *prev = space.lookup(d->name)) {
      diag.error(d->nameRange, Twine(what) + " '" + d->name + "' is already declared");
      diag.note(prev->nameRange, "previous declaration is here");
    } else {
      space[d->name] = d.get();
    }
  }
  // Then everything in source order: a parameter is visible from its
  // declaration on, like any other name.
  unsigned paramIndex = 0;
  for (auto &d : module.decls) {
    if (diag.shouldStop())
      return;
    if (auto *p = llvm::dyn_cast<ParamDecl>(d.get())) {
      p->index = paramIndex++;
      checkParam(*p);
    } else if (auto *f = llvm::dyn_cast<FuncDecl>(d.get())) {
      checkFunc(*f);
    } else if (auto *c = llvm::dyn_cast<CollectiveDecl>(d.get())) {
      checkCollective(*c);
    } else if (auto *a = llvm::dyn_cast<AlgorithmDecl>(d.get())) {
      checkAlgorithm(*a);
    }
  }
  popScope();
}

bool coll::analyzeModule(Module &module, DiagnosticEngine &diag) {
  unsigned before = diag.errorCount();
  Sema(module, diag).run();
  return diag.errorCount() == before;
}
