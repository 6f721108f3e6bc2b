//===- ConstEval.cpp - The values of the language's integer operators -----===//

#include "coll/Lang/ConstEval.h"

#include "llvm/ADT/Twine.h"

#include <algorithm>

using namespace coll;
using namespace coll::ast;

ArithResult coll::evalUnaryOp(UnaryOp op, int64_t v) {
  switch (op) {
  case UnaryOp::Neg:
    return checkedNeg(v);
  case UnaryOp::Not:
    return {v == 0};
  case UnaryOp::BitNot:
    return {~v};
  }
  return ArithResult::fail(ArithError::Domain);
}

ArithResult coll::evalBinaryOp(BinaryOp op, int64_t a, int64_t b) {
  switch (op) {
  case BinaryOp::Mul:
    return checkedMul(a, b);
  case BinaryOp::Div:
    return checkedDiv(a, b);
  case BinaryOp::Mod:
    return checkedMod(a, b);
  case BinaryOp::Add:
    return checkedAdd(a, b);
  case BinaryOp::Sub:
    return checkedSub(a, b);
  case BinaryOp::Shl:
    return checkedShl(a, b);
  case BinaryOp::Shr:
    return checkedShr(a, b);
  case BinaryOp::Lt:
    return {a < b};
  case BinaryOp::Le:
    return {a <= b};
  case BinaryOp::Gt:
    return {a > b};
  case BinaryOp::Ge:
    return {a >= b};
  case BinaryOp::Eq:
    return {a == b};
  case BinaryOp::Ne:
    return {a != b};
  case BinaryOp::BitAnd:
    return {a & b};
  case BinaryOp::BitXor:
    return {a ^ b};
  case BinaryOp::BitOr:
    return {a | b};
  case BinaryOp::And:
    return {a != 0 && b != 0};
  case BinaryOp::Or:
    return {a != 0 || b != 0};
  }
  return ArithResult::fail(ArithError::Domain);
}

ArithResult coll::evalIntFunction(IntFunction fn, llvm::ArrayRef<int64_t> args) {
  switch (fn) {
  case IntFunction::Min:
    return {*std::min_element(args.begin(), args.end())};
  case IntFunction::Max:
    return {*std::max_element(args.begin(), args.end())};
  case IntFunction::Abs:
    return checkedAbs(args[0]);
  case IntFunction::Log2:
    return checkedLog2(args[0]);
  case IntFunction::CeilLog2:
    return checkedCeilLog2(args[0]);
  case IntFunction::Pow2:
    return checkedPow2(args[0]);
  case IntFunction::IsPow2:
    return {args[0] > 0 && (args[0] & (args[0] - 1)) == 0};
  case IntFunction::DivCeil:
    return checkedDivCeil(args[0], args[1]);
  }
  return ArithResult::fail(ArithError::Domain);
}

std::string coll::intFunctionDomainMessage(IntFunction fn, llvm::ArrayRef<int64_t> args,
                                           llvm::StringRef suffix) {
  std::string head = (intFunctionName(fn) + " of " + llvm::Twine(args[0]) + suffix).str();
  switch (fn) {
  case IntFunction::Log2:
  case IntFunction::CeilLog2:
    return head + "; the argument must be positive";
  case IntFunction::Pow2:
    return head + "; the exponent must be in [0, 62]";
  default:
    return "";
  }
}

namespace {
/// What folding may spend: a call whose evaluation nests or multiplies
/// beyond it is left to the instantiation, which reports it.
struct FoldBudget {
  uint64_t calls = uint64_t(1) << 16; ///< Function calls left.
  uint32_t depth = 0;                 ///< Levels being folded.
  static constexpr uint32_t maxDepth = 1000;
};
} // namespace

/// The value of \p e inside a function whose parameters hold \p args, or
/// empty.
static std::optional<int64_t> foldInFunction(const Expr &e, llvm::ArrayRef<int64_t> args,
                                             FoldBudget &budget) {
  if (std::optional<int64_t> c = e.getConstant())
    return c;
  if (budget.depth >= FoldBudget::maxDepth)
    return std::nullopt;
  struct Level {
    uint32_t &depth;
    explicit Level(uint32_t &depth) : depth(depth) { ++depth; }
    ~Level() { --depth; }
  } level(budget.depth);
  auto value = [](ArithResult r) -> std::optional<int64_t> {
    if (r.ok())
      return r.value;
    return std::nullopt;
  };
  switch (e.getKind()) {
  case NodeKind::Name: {
    auto *v = llvm::dyn_cast_or_null<VarDecl>(llvm::cast<NameExpr>(e).decl);
    if (v && v->varKind == VarKind::FuncParam && v->slot < args.size())
      return args[v->slot];
    return std::nullopt;
  }
  case NodeKind::Unary: {
    auto &u = llvm::cast<UnaryExpr>(e);
    std::optional<int64_t> v = foldInFunction(*u.operand, args, budget);
    return v ? value(evalUnaryOp(u.op, *v)) : std::nullopt;
  }
  case NodeKind::Binary: {
    auto &b = llvm::cast<BinaryExpr>(e);
    std::optional<int64_t> l = foldInFunction(*b.lhs, args, budget);
    if (!l)
      return std::nullopt;
    if (b.op == BinaryOp::And && *l == 0)
      return 0;
    if (b.op == BinaryOp::Or && *l != 0)
      return 1;
    std::optional<int64_t> r = foldInFunction(*b.rhs, args, budget);
    return r ? value(evalBinaryOp(b.op, *l, *r)) : std::nullopt;
  }
  case NodeKind::Cond: {
    auto &c = llvm::cast<CondExpr>(e);
    std::optional<int64_t> v = foldInFunction(*c.cond, args, budget);
    if (!v)
      return std::nullopt;
    return foldInFunction(*v ? *c.thenExpr : *c.elseExpr, args, budget);
  }
  case NodeKind::Call:
  case NodeKind::UserCall: {
    auto *call = llvm::dyn_cast<CallExpr>(&e);
    auto *user = llvm::dyn_cast<UserCallExpr>(&e);
    const std::vector<ExprPtr> &operands = call ? call->args : user->args;
    std::vector<int64_t> values;
    for (const ExprPtr &a : operands) {
      std::optional<int64_t> v = foldInFunction(*a, args, budget);
      if (!v)
        return std::nullopt;
      values.push_back(*v);
    }
    if (call)
      return value(evalIntFunction(call->fn, values));
    if (!user->func || !user->func->body || values.size() != user->func->params.size() ||
        budget.calls == 0)
      return std::nullopt;
    --budget.calls;
    return foldInFunction(*user->func->body, values, budget);
  }
  default:
    return std::nullopt;
  }
}

std::optional<int64_t> coll::foldFunctionCall(const FuncDecl &f, llvm::ArrayRef<int64_t> args) {
  if (!f.body || args.size() != f.params.size())
    return std::nullopt;
  FoldBudget budget;
  return foldInFunction(*f.body, args, budget);
}
