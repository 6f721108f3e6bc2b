//===- ASTBuilder.cpp - Parse tree to owned AST ---------------------------===//
//
// A typed builder: one buildX(CollParser::XContext &) per grammar rule. It
// runs only on parse trees without syntax errors, so every mandatory child
// is present. Checks that need no scopes happen here: literal values,
// string escapes, the callee and arguments of calls.
//
//===----------------------------------------------------------------------===//

#include "ParserImpl.h"
#include "coll/Lang/IntArith.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"

using namespace coll;
using namespace coll::ast;
using namespace collgrammar;
using llvm::SMRange;

namespace {

class Builder {
public:
  Builder(const detail::SourceMap &map, DiagnosticEngine &diag) : map(map), diag(diag) {}

  std::unique_ptr<Module> buildProgram(CollParser::ProgramContext &ctx);

private:
  std::unique_ptr<Decl> buildTopDecl(CollParser::TopDeclContext &ctx);
  std::unique_ptr<ParamDecl> buildParam(CollParser::ParamDeclContext &ctx);
  std::unique_ptr<FuncDecl> buildFunc(CollParser::FuncDeclContext &ctx);
  std::unique_ptr<CollectiveDecl> buildCollective(CollParser::CollectiveDeclContext &ctx);
  StmtPtr buildCollectiveItem(CollParser::CollectiveItemContext &ctx);
  std::unique_ptr<AlgorithmDecl> buildAlgorithm(CollParser::AlgorithmDeclContext &ctx);
  NamedArg buildNamedArg(CollParser::NamedArgContext &ctx);
  std::unique_ptr<ForClause> buildForClause(CollParser::ForClauseContext &ctx);

  std::unique_ptr<BlockStmt> buildBlock(CollParser::BlockContext &ctx);
  StmtPtr buildStmt(CollParser::StmtContext &ctx);
  std::unique_ptr<LetStmt> buildLet(CollParser::LetStmtContext &ctx);
  StmtPtr buildIf(CollParser::IfStmtContext &ctx);
  std::unique_ptr<RequireStmt> buildRequire(CollParser::RequireStmtContext &ctx);

  ExprPtr buildExpr(CollParser::ExprContext &ctx);
  ExprPtr buildPrimary(CollParser::PrimaryContext &ctx);
  ExprPtr buildCall(CollParser::CallExprContext &ctx);
  ExprPtr buildTransfer(CollParser::CallExprContext &ctx, bool isCopy);
  ExprPtr invalid(SMRange r);

  std::string identText(CollParser::IdentContext *ctx) const {
    return map.text(ctx->getStart()).str();
  }
  SMRange range(antlr4::ParserRuleContext *ctx) const { return map.range(ctx); }
  SMRange range(antlr4::Token *tok) const { return map.range(tok); }
  std::optional<std::string> unescape(antlr4::Token *tok);

  /// Collects the names of every `def` in the file, in any scope.
  void collectFunctionNames(antlr4::tree::ParseTree *tree);

  const detail::SourceMap &map;
  DiagnosticEngine &diag;
  /// The built-in functions and every name that a `def` declares: a call of
  /// another name is an error here; Sema resolves the others.
  std::vector<std::string> functionNames = {
#define COLL_INT_FUNCTION(Id, Name, MinArgs, MaxArgs) Name,
#include "coll/Lang/Builtins.def"
      "copy", "reduce"};
  /// functionNames as a set, for the lookups (a program may declare many).
  llvm::StringSet<> knownFunctions = [this] {
    llvm::StringSet<> set;
    for (const std::string &name : functionNames)
      set.insert(name);
    return set;
  }();
};

} // namespace

ExprPtr Builder::invalid(SMRange r) {
  // A placeholder for an expression already diagnosed; Sema leaves it alone.
  auto e = std::make_unique<IntLitExpr>(r, 0);
  e->setInvalid();
  return e;
}

void Builder::collectFunctionNames(antlr4::tree::ParseTree *tree) {
  if (auto *f = dynamic_cast<CollParser::FuncDeclContext *>(tree)) {
    functionNames.push_back(identText(f->name));
    knownFunctions.insert(functionNames.back());
    return; // a function's body declares no functions
  }
  for (antlr4::tree::ParseTree *child : tree->children)
    collectFunctionNames(child);
}

std::unique_ptr<Module> Builder::buildProgram(CollParser::ProgramContext &ctx) {
  collectFunctionNames(&ctx);
  auto module = std::make_unique<Module>();
  for (auto *top : ctx.topDecl())
    if (auto d = buildTopDecl(*top))
      module->decls.push_back(std::move(d));
  return module;
}

std::unique_ptr<Decl> Builder::buildTopDecl(CollParser::TopDeclContext &ctx) {
  if (auto *p = ctx.paramDecl())
    return buildParam(*p);
  if (auto *f = ctx.funcDecl())
    return buildFunc(*f);
  if (auto *c = ctx.collectiveDecl())
    return buildCollective(*c);
  return buildAlgorithm(*ctx.algorithmDecl());
}

std::unique_ptr<FuncDecl> Builder::buildFunc(CollParser::FuncDeclContext &ctx) {
  auto func = std::make_unique<FuncDecl>(range(&ctx), identText(ctx.name), range(ctx.name));
  for (auto *p : ctx.params)
    func->params.push_back(
        std::make_unique<VarDecl>(range(p), identText(p), range(p), VarKind::FuncParam));
  func->body = buildExpr(*ctx.body);
  return func;
}

std::unique_ptr<ParamDecl> Builder::buildParam(CollParser::ParamDeclContext &ctx) {
  return std::make_unique<ParamDecl>(range(&ctx), identText(ctx.name), range(ctx.name),
                                     buildExpr(*ctx.value));
}

std::unique_ptr<CollectiveDecl> Builder::buildCollective(CollParser::CollectiveDeclContext &ctx) {
  auto coll = std::make_unique<CollectiveDecl>(range(&ctx), identText(ctx.name), range(ctx.name));
  for (auto *p : ctx.collParam()) {
    ExprPtr def = p->value ? buildExpr(*p->value) : nullptr;
    coll->params.push_back(std::make_unique<CollParamDecl>(range(p), identText(p->name),
                                                           range(p->name), std::move(def)));
  }
  for (auto *item : ctx.collectiveItem()) {
    if (auto s = buildCollectiveItem(*item))
      coll->items.push_back(std::move(s));
    else
      coll->hasMalformedItems = true;
  }
  return coll;
}

StmtPtr Builder::buildCollectiveItem(CollParser::CollectiveItemContext &ctx) {
  if (auto *b = dynamic_cast<CollParser::BufferSizeItemContext *>(&ctx)) {
    BufferKind which = b->kw->getText() == bufferKindName(BufferKind::Input) ? BufferKind::Input
                                                                             : BufferKind::Output;
    return std::make_unique<BufferSizeStmt>(range(&ctx), which, buildExpr(*b->size));
  }
  if (auto *p = dynamic_cast<CollParser::PreItemContext *>(&ctx)) {
    auto clause = p->forClause() ? buildForClause(*p->forClause()) : nullptr;
    return std::make_unique<PreStmt>(range(&ctx), buildExpr(*p->ref), std::move(clause));
  }
  if (auto *p = dynamic_cast<CollParser::PostItemContext *>(&ctx)) {
    auto clause = p->forClause() ? buildForClause(*p->forClause()) : nullptr;
    ExprPtr cond = buildExpr(*p->cond);
    auto *eq = llvm::dyn_cast<BinaryExpr>(cond.get());
    if (!eq || eq->op != BinaryOp::Eq) {
      diag.error(cond->getRange(), "expected a post-condition of the form "
                                   "'post output[r][i] == value'");
      return nullptr;
    }
    return std::make_unique<PostStmt>(range(&ctx), std::move(eq->lhs), std::move(eq->rhs),
                                      std::move(clause));
  }
  if (auto *r = dynamic_cast<CollParser::RequireItemContext *>(&ctx))
    return buildRequire(*r->requireStmt());
  auto *l = dynamic_cast<CollParser::LetItemContext *>(&ctx);
  return buildLet(*l->letStmt());
}

NamedArg Builder::buildNamedArg(CollParser::NamedArgContext &ctx) {
  return NamedArg{identText(ctx.name), range(ctx.name), buildExpr(*ctx.value)};
}

std::unique_ptr<AlgorithmDecl> Builder::buildAlgorithm(CollParser::AlgorithmDeclContext &ctx) {
  auto algo = std::make_unique<AlgorithmDecl>(range(&ctx), identText(ctx.name), range(ctx.name));
  algo->collectiveName = identText(ctx.coll);
  algo->collectiveRange = range(ctx.coll);
  for (auto *a : ctx.args)
    algo->collArgs.push_back(buildNamedArg(*a));
  for (auto *o : ctx.opts)
    algo->options.push_back(buildNamedArg(*o));
  algo->body = buildBlock(*ctx.body);
  return algo;
}

std::unique_ptr<ForClause> Builder::buildForClause(CollParser::ForClauseContext &ctx) {
  auto clause = std::make_unique<ForClause>();
  clause->range = range(&ctx);
  for (auto *b : ctx.binder()) {
    Binder binder;
    binder.var =
        std::make_unique<VarDecl>(range(b), identText(b->name), range(b->name), VarKind::Binder);
    binder.lo = buildExpr(*b->lo);
    binder.hi = buildExpr(*b->hi);
    clause->binders.push_back(std::move(binder));
  }
  if (ctx.cond)
    clause->cond = buildExpr(*ctx.cond);
  return clause;
}

//===----------------------------------------------------------------------===//
// Statements
//===----------------------------------------------------------------------===//

std::unique_ptr<BlockStmt> Builder::buildBlock(CollParser::BlockContext &ctx) {
  auto block = std::make_unique<BlockStmt>(range(&ctx));
  for (auto *s : ctx.stmt())
    if (auto stmt = buildStmt(*s))
      block->body.push_back(std::move(stmt));
  return block;
}

StmtPtr Builder::buildStmt(CollParser::StmtContext &ctx) {
  if (auto *l = ctx.letStmt())
    return buildLet(*l);
  if (auto *a = ctx.assignStmt())
    return std::make_unique<AssignStmt>(range(a), identText(a->name), range(a->name),
                                        buildExpr(*a->value));
  if (auto *f = ctx.forStmt()) {
    auto var =
        std::make_unique<VarDecl>(range(f->var), identText(f->var), range(f->var), VarKind::Loop);
    ExprPtr step = f->step ? buildExpr(*f->step) : nullptr;
    return std::make_unique<ForStmt>(range(f), std::move(var), buildExpr(*f->lo), buildExpr(*f->hi),
                                     std::move(step), buildBlock(*f->body));
  }
  if (auto *i = ctx.ifStmt())
    return buildIf(*i);
  if (auto *r = ctx.requireStmt())
    return buildRequire(*r);
  if (auto *s = ctx.scratchDecl()) {
    auto buf = std::make_unique<BufferDecl>(range(s), identText(s->name), range(s->name),
                                            BufferKind::Scratch);
    return std::make_unique<ScratchStmt>(range(s), std::move(buf), buildExpr(*s->size));
  }
  if (auto *fn = ctx.funcDecl())
    return std::make_unique<DefStmt>(range(fn), buildFunc(*fn));
  if (auto *b = ctx.block())
    return buildBlock(*b);
  if (auto *f = ctx.fenceStmt())
    return std::make_unique<FenceStmt>(range(f));
  auto *e = ctx.exprStmt();
  return std::make_unique<ExprStmt>(range(e), buildExpr(*e->expr()));
}

std::unique_ptr<LetStmt> Builder::buildLet(CollParser::LetStmtContext &ctx) {
  auto var =
      std::make_unique<VarDecl>(range(&ctx), identText(ctx.name), range(ctx.name), VarKind::Let);
  return std::make_unique<LetStmt>(range(&ctx), std::move(var), buildExpr(*ctx.value));
}

StmtPtr Builder::buildIf(CollParser::IfStmtContext &ctx) {
  StmtPtr elseStmt;
  if (ctx.elseIf)
    elseStmt = buildIf(*ctx.elseIf);
  else if (ctx.elseBlock)
    elseStmt = buildBlock(*ctx.elseBlock);
  return std::make_unique<IfStmt>(range(&ctx), buildExpr(*ctx.cond), buildBlock(*ctx.then),
                                  std::move(elseStmt));
}

std::optional<std::string> Builder::unescape(antlr4::Token *tok) {
  // The text starts with its quote; it ends at the first unescaped quote, or
  // at the end of the token for an unterminated string (already reported).
  llvm::StringRef text = map.text(tok);
  std::string out;
  bool ok = true;
  for (size_t i = 1; i < text.size(); ++i) {
    char c = text[i];
    if (c == '"')
      break;
    if (c != '\\' || i + 1 == text.size()) {
      out += c;
      continue;
    }
    char e = text[++i];
    switch (e) {
    case 'n':
      out += '\n';
      break;
    case 't':
      out += '\t';
      break;
    case '\\':
      out += '\\';
      break;
    case '"':
      out += '"';
      break;
    default: {
      llvm::SMLoc at = map.loc(tok->getStartIndex() + i - 1);
      diag.error(at, "unknown escape sequence '\\" + llvm::Twine(e) + "'",
                 {SMRange(at, llvm::SMLoc::getFromPointer(at.getPointer() + 2))});
      ok = false;
    }
    }
  }
  if (!ok)
    return std::nullopt;
  return out;
}

std::unique_ptr<RequireStmt> Builder::buildRequire(CollParser::RequireStmtContext &ctx) {
  std::optional<std::string> message;
  if (ctx.message)
    message = unescape(ctx.message);
  return std::make_unique<RequireStmt>(range(&ctx), buildExpr(*ctx.cond), std::move(message));
}

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

static BinaryOp binaryOpFor(llvm::StringRef text) {
  return llvm::StringSwitch<BinaryOp>(text)
      .Case("*", BinaryOp::Mul)
      .Case("/", BinaryOp::Div)
      .Case("%", BinaryOp::Mod)
      .Case("+", BinaryOp::Add)
      .Case("-", BinaryOp::Sub)
      .Case("<<", BinaryOp::Shl)
      .Case(">>", BinaryOp::Shr)
      .Case("<", BinaryOp::Lt)
      .Case("<=", BinaryOp::Le)
      .Case(">", BinaryOp::Gt)
      .Case(">=", BinaryOp::Ge)
      .Case("==", BinaryOp::Eq)
      .Case("!=", BinaryOp::Ne)
      .Case("&", BinaryOp::BitAnd)
      .Case("^", BinaryOp::BitXor)
      .Case("|", BinaryOp::BitOr)
      .Case("&&", BinaryOp::And)
      .Default(BinaryOp::Or);
}

ExprPtr Builder::buildExpr(CollParser::ExprContext &ctx) {
  if (auto *p = dynamic_cast<CollParser::PrimaryExprContext *>(&ctx))
    return buildPrimary(*p->primary());
  if (auto *u = dynamic_cast<CollParser::UnaryExprContext *>(&ctx)) {
    char c = u->op->getText()[0];
    UnaryOp op = c == '-' ? UnaryOp::Neg : c == '!' ? UnaryOp::Not : UnaryOp::BitNot;
    return std::make_unique<UnaryExpr>(range(&ctx), op, buildExpr(*u->operand));
  }
  if (auto *b = dynamic_cast<CollParser::BinaryExprContext *>(&ctx)) {
    ExprPtr lhs = buildExpr(*b->lhs);
    ExprPtr rhs = buildExpr(*b->rhs);
    return std::make_unique<BinaryExpr>(range(&ctx), binaryOpFor(map.text(b->op)), range(b->op),
                                        std::move(lhs), std::move(rhs));
  }
  auto *c = dynamic_cast<CollParser::CondExprContext *>(&ctx);
  ExprPtr cond = buildExpr(*c->cond);
  ExprPtr thenExpr = buildExpr(*c->then);
  ExprPtr elseExpr = buildExpr(*c->otherwise);
  return std::make_unique<CondExpr>(range(&ctx), std::move(cond), std::move(thenExpr),
                                    std::move(elseExpr));
}

ExprPtr Builder::buildPrimary(CollParser::PrimaryContext &ctx) {
  if (auto *lit = dynamic_cast<CollParser::IntLitContext *>(&ctx)) {
    llvm::StringRef text = map.text(lit->getStart());
    if (text.drop_front(text.startswith("0x") ? 2 : 0).find_first_not_of('_') ==
        llvm::StringRef::npos) {
      diag.error(range(&ctx), "integer literal '" + text + "' has no digits");
      return invalid(range(&ctx));
    }
    std::optional<int64_t> v = parseIntLiteral(text);
    if (!v) {
      diag.error(range(&ctx), "integer literal '" + text + "' does not fit in 64 bits");
      return invalid(range(&ctx));
    }
    return std::make_unique<IntLitExpr>(range(&ctx), *v);
  }
  if (auto *b = dynamic_cast<CollParser::BoolLitContext *>(&ctx))
    return std::make_unique<IntLitExpr>(range(&ctx), b->kw->getText() == "true" ? 1 : 0);
  if (auto *call = dynamic_cast<CollParser::CallExprContext *>(&ctx))
    return buildCall(*call);
  if (auto *ref = dynamic_cast<CollParser::ChunkRefContext *>(&ctx)) {
    std::string bufName = ref->buf->kw ? ref->buf->kw->getText() : identText(ref->buf->name);
    ExprPtr hi = ref->hi ? buildExpr(*ref->hi) : nullptr;
    ExprPtr step = ref->step ? buildExpr(*ref->step) : nullptr;
    ExprPtr width = ref->width ? buildExpr(*ref->width) : nullptr;
    return std::make_unique<ChunkRefExpr>(range(&ctx), bufName, range(ref->buf),
                                          buildExpr(*ref->rank), buildExpr(*ref->lo), std::move(hi),
                                          std::move(step), std::move(width));
  }
  if (auto *n = dynamic_cast<CollParser::NameExprContext *>(&ctx))
    return std::make_unique<NameExpr>(range(&ctx), identText(n->name));
  auto *paren = dynamic_cast<CollParser::ParenExprContext *>(&ctx);
  ExprPtr inner = buildExpr(*paren->inner);
  // Parentheses leave no node; the inner expression keeps its own range.
  return inner;
}

ExprPtr Builder::buildCall(CollParser::CallExprContext &ctx) {
  std::string callee = identText(ctx.callee);
  if (callee == "copy" || callee == "reduce")
    return buildTransfer(ctx, callee == "copy");

  struct FnInfo {
    IntFunction fn;
    const char *name;
    unsigned minArgs, maxArgs;
  };
  static const FnInfo table[] = {
#define COLL_INT_FUNCTION(Id, Name, MinArgs, MaxArgs) {IntFunction::Id, Name, MinArgs, MaxArgs},
#include "coll/Lang/Builtins.def"
  };
  const FnInfo *info = nullptr;
  for (const FnInfo &f : table)
    if (callee == f.name)
      info = &f;
  if (!info && !knownFunctions.contains(callee)) {
    diag.error(range(ctx.callee), "unknown function '" + callee + "'");
    // The guess compares every name: only for errors that are printed.
    std::string guess = diag.shouldStop() || !diag.spendOnGuess(functionNames.size())
                            ? ""
                            : closestName(callee, functionNames);
    if (!guess.empty())
      diag.note(range(ctx.callee), "did you mean '" + guess + "'?");
    return invalid(range(&ctx));
  }
  std::vector<ExprPtr> args;
  bool ok = true;
  for (auto *arg : ctx.callArg()) {
    if (arg->label) {
      diag.error(range(arg->label), "'" + callee + "' takes no named arguments");
      ok = false;
    }
    if (arg->forClause()) {
      diag.error(range(arg->forClause()), "a 'for' clause is allowed only in 'reduce(...)' "
                                          "inside a post-condition");
      ok = false;
    }
    args.push_back(buildExpr(*arg->value));
  }
  // Any other name may be a function declared with `def`: Sema resolves it.
  if (!info) {
    if (!ok)
      return invalid(range(&ctx));
    return std::make_unique<UserCallExpr>(range(&ctx), callee, range(ctx.callee), std::move(args));
  }
  size_t n = args.size();
  if (n < info->minArgs || (info->maxArgs != 0 && n > info->maxArgs)) {
    std::string expected =
        info->maxArgs == 0 ? "at least " + std::to_string(info->minArgs)
        : info->minArgs == info->maxArgs
            ? std::to_string(info->minArgs)
            : std::to_string(info->minArgs) + " to " + std::to_string(info->maxArgs);
    diag.error(range(&ctx), "'" + callee + "' takes " + expected + " argument" +
                                (expected == "1" ? "" : "s") + ", " + std::to_string(n) + " given");
    ok = false;
  }
  if (!ok)
    return invalid(range(&ctx));
  return std::make_unique<CallExpr>(range(&ctx), info->fn, range(ctx.callee), std::move(args));
}

ExprPtr Builder::buildTransfer(CollParser::CallExprContext &ctx, bool isCopy) {
  const char *callee = isCopy ? "copy" : "reduce";
  const char *destLabel = isCopy ? "to" : "into";
  std::string usage = isCopy ? "copy(src, to: dst)" : "reduce(src, into: dst)";
  auto args = ctx.callArg();

  // `reduce(x for j in ...)`: the reduction of a set, for post-conditions.
  if (!isCopy && args.size() == 1 && args[0]->forClause() && !args[0]->label)
    return std::make_unique<ReduceAllExpr>(range(&ctx), buildExpr(*args[0]->value),
                                           buildForClause(*args[0]->forClause()));

  ExprPtr src, dst;
  TransferHints hints;
  llvm::SMRange tbRange, splitTbRange;
  std::vector<std::pair<std::string, llvm::SMRange>> seen;
  bool ok = true;
  for (size_t i = 0; i < args.size(); ++i) {
    auto *arg = args[i];
    if (arg->forClause()) {
      diag.error(range(arg->forClause()), "a 'for' clause is allowed only in 'reduce(...)' "
                                          "inside a post-condition");
      ok = false;
      continue;
    }
    if (!arg->label) {
      if (i != 0) {
        diag.error(range(arg), "unexpected positional argument to '" + llvm::Twine(callee) +
                                   "'; expected " + usage);
        ok = false;
        continue;
      }
      src = buildExpr(*arg->value);
      continue;
    }
    std::string label = identText(arg->label);
    SMRange labelRange = range(arg->label);
    bool dup = false;
    for (auto &[name, where] : seen)
      if (name == label) {
        diag.error(labelRange, "argument '" + label + "' given twice");
        diag.note(where, "first given here");
        dup = true;
      }
    if (dup) {
      ok = false;
      continue;
    }
    seen.emplace_back(label, labelRange);
    ExprPtr value = buildExpr(*arg->value);
    if (label == destLabel) {
      dst = std::move(value);
    } else if (label == "channel") {
      hints.channel = std::move(value);
    } else if (label == "tb") {
      tbRange = labelRange;
      hints.sendTb = std::move(value);
      hints.tbShared = true;
    } else if (label == "sendtb") {
      splitTbRange = labelRange;
      hints.sendTb = std::move(value);
    } else if (label == "recvtb") {
      splitTbRange = labelRange;
      hints.recvTb = std::move(value);
    } else {
      std::vector<std::string> known = {destLabel, "channel", "tb", "sendtb", "recvtb"};
      diag.error(labelRange, "unknown argument '" + label + "' to '" + callee + "'");
      // The other transfer's destination label is the likeliest slip.
      std::string guess = label == (isCopy ? "into" : "to") ? destLabel : closestName(label, known);
      if (guess.empty())
        diag.note(labelRange, "'" + llvm::Twine(callee) + "' takes '" + destLabel +
                                  "', 'channel', 'tb', 'sendtb' and 'recvtb'");
      else
        diag.note(labelRange, "did you mean '" + guess + "'?");
      ok = false;
    }
  }
  if (tbRange.isValid() && splitTbRange.isValid()) {
    diag.error(tbRange, "'tb' sets both threadblocks; do not combine it with 'sendtb' or "
                        "'recvtb'");
    diag.note(splitTbRange, "given here");
    ok = false;
  }
  if (ok && !src) {
    diag.error(range(&ctx),
               "'" + llvm::Twine(callee) + "' needs a source chunk; expected " + usage);
    ok = false;
  }
  if (ok && !dst) {
    diag.error(range(&ctx), "'" + llvm::Twine(callee) + "' needs a destination; expected " + usage);
    ok = false;
  }
  if (!ok)
    return invalid(range(&ctx));
  std::unique_ptr<TransferExpr> t;
  if (isCopy)
    t = std::make_unique<CopyExpr>(range(&ctx), std::move(src), std::move(dst));
  else
    t = std::make_unique<ReduceExpr>(range(&ctx), std::move(src), std::move(dst));
  t->hints = std::move(hints);
  return t;
}

std::unique_ptr<Module> detail::buildModule(CollParser::ProgramContext &program,
                                            const SourceMap &map, DiagnosticEngine &diag) {
  return Builder(map, diag).buildProgram(program);
}

std::string coll::closestName(llvm::StringRef name, llvm::ArrayRef<std::string> candidates) {
  std::string best;
  unsigned bestDist = 0;
  // Short names are within a small distance of every other short name
  // (`k` of `N`): suggest nothing for them.
  if (name.size() < 3)
    return "";
  unsigned maxDist = std::max<size_t>(1, name.size() / 3);
  for (const std::string &c : candidates) {
    if (c == name)
      continue;
    unsigned d = name.edit_distance(c, true, maxDist + 1);
    if (d <= maxDist && (best.empty() || d < bestDist)) {
      best = c;
      bestDist = d;
    }
  }
  return best;
}
