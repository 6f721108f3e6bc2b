//===- ConstEval.cpp - The values of the language's integer operators -----===//

#include "coll/Lang/ConstEval.h"

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
  case IntFunction::IsPow2:
    return {args[0] > 0 && (args[0] & (args[0] - 1)) == 0};
  case IntFunction::DivCeil:
    return checkedDivCeil(args[0], args[1]);
  }
  return ArithResult::fail(ArithError::Domain);
}
