//===- IntArith.h - Checked integer arithmetic of .coll ---------*- C++ -*-===//
/// \file
/// The integer semantics of the language, shared by constant folding in Sema
/// and by the compiler's evaluator so that both agree: 64-bit signed values,
/// every overflow detected, floored division and modulo (the sign of the
/// result follows the divisor, so `(r - 1) % N` is a rank).
//===----------------------------------------------------------------------===//
#ifndef COLL_LANG_INTARITH_H
#define COLL_LANG_INTARITH_H

#include <cstdint>
#include <optional>

namespace coll {

/// Why an integer operation has no result.
enum class ArithError { None, Overflow, DivByZero, BadShift, Domain };

/// The result of a checked operation: a value or the reason there is none.
struct ArithResult {
  int64_t value = 0;
  ArithError error = ArithError::None;
  bool ok() const { return error == ArithError::None; }
  static ArithResult fail(ArithError e) { return {0, e}; }
};

inline ArithResult checkedAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r))
    return ArithResult::fail(ArithError::Overflow);
  return {r};
}
inline ArithResult checkedSub(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r))
    return ArithResult::fail(ArithError::Overflow);
  return {r};
}
inline ArithResult checkedMul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    return ArithResult::fail(ArithError::Overflow);
  return {r};
}
inline ArithResult checkedNeg(int64_t a) {
  return checkedSub(0, a);
}

/// Floored division: rounds toward negative infinity.
inline ArithResult checkedDiv(int64_t a, int64_t b) {
  if (b == 0)
    return ArithResult::fail(ArithError::DivByZero);
  if (a == INT64_MIN && b == -1)
    return ArithResult::fail(ArithError::Overflow);
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0)))
    --q;
  return {q};
}

/// Floored modulo: the result has the sign of the divisor.
inline ArithResult checkedMod(int64_t a, int64_t b) {
  if (b == 0)
    return ArithResult::fail(ArithError::DivByZero);
  if (b == -1)
    return {0};
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0)))
    r += b;
  return {r};
}

/// Shifts take an amount in [0, 63]; a left shift that loses bits overflows.
inline ArithResult checkedShl(int64_t a, int64_t b) {
  if (b < 0 || b > 63)
    return ArithResult::fail(ArithError::BadShift);
  if (a == 0 || b == 0)
    return {a};
  int64_t r = static_cast<int64_t>(static_cast<uint64_t>(a) << b);
  if ((r >> b) != a)
    return ArithResult::fail(ArithError::Overflow);
  return {r};
}
inline ArithResult checkedShr(int64_t a, int64_t b) {
  if (b < 0 || b > 63)
    return ArithResult::fail(ArithError::BadShift);
  return {a >> b};
}

/// floor(log2(a)) for a > 0.
inline ArithResult checkedLog2(int64_t a) {
  if (a <= 0)
    return ArithResult::fail(ArithError::Domain);
  return {63 - __builtin_clzll(static_cast<unsigned long long>(a))};
}

inline ArithResult checkedAbs(int64_t a) {
  if (a == INT64_MIN)
    return ArithResult::fail(ArithError::Overflow);
  return {a < 0 ? -a : a};
}

/// ceil(a / b) for b > 0.
inline ArithResult checkedDivCeil(int64_t a, int64_t b) {
  if (b <= 0)
    return ArithResult::fail(b == 0 ? ArithError::DivByZero : ArithError::Domain);
  ArithResult q = checkedDiv(a, b);
  if (!q.ok())
    return q;
  if (q.value * b != a)
    return checkedAdd(q.value, 1);
  return q;
}

} // namespace coll

#endif // COLL_LANG_INTARITH_H
