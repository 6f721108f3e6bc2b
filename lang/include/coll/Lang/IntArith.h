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
#include <string_view>

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

/// ceil(log2(a)) for a > 0: the smallest k with 2^k >= a.
inline ArithResult checkedCeilLog2(int64_t a) {
  if (a <= 0)
    return ArithResult::fail(ArithError::Domain);
  if (a == 1)
    return {0};
  return {64 - __builtin_clzll(static_cast<unsigned long long>(a - 1))};
}

/// 2^k for 0 <= k <= 62.
inline ArithResult checkedPow2(int64_t k) {
  if (k < 0 || k > 62)
    return ArithResult::fail(ArithError::Domain);
  return {int64_t(1) << k};
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

/// Parses an integer literal as the language writes it: decimal or `0x`
/// hexadecimal, `_` separators allowed, with an optional leading '-' when
/// \p allowSign (for `-D name=value`). Empty when it has no digit, a bad
/// character, or does not fit in 64 bits.
inline std::optional<int64_t> parseIntLiteral(std::string_view text, bool allowSign = false) {
  bool negative = false;
  if (allowSign && !text.empty() && text[0] == '-') {
    negative = true;
    text.remove_prefix(1);
  }
  // A literal starts with a digit, like the lexer's.
  if (text.empty() || text[0] < '0' || text[0] > '9')
    return std::nullopt;
  unsigned radix = 10;
  if (text.size() >= 2 && text[0] == '0' && text[1] == 'x') {
    radix = 16;
    text.remove_prefix(2);
  }
  uint64_t value = 0;
  bool anyDigit = false;
  for (char c : text) {
    if (c == '_')
      continue;
    unsigned digit;
    if (c >= '0' && c <= '9')
      digit = unsigned(c - '0');
    else if (radix == 16 && c >= 'a' && c <= 'f')
      digit = unsigned(c - 'a' + 10);
    else if (radix == 16 && c >= 'A' && c <= 'F')
      digit = unsigned(c - 'A' + 10);
    else
      return std::nullopt;
    if (__builtin_mul_overflow(value, radix, &value) ||
        __builtin_add_overflow(value, digit, &value))
      return std::nullopt;
    anyDigit = true;
  }
  if (!anyDigit)
    return std::nullopt;
  if (negative) {
    if (value > uint64_t(INT64_MAX) + 1)
      return std::nullopt;
    return int64_t(0 - value);
  }
  if (value > uint64_t(INT64_MAX))
    return std::nullopt;
  return int64_t(value);
}

} // namespace coll

#endif // COLL_LANG_INTARITH_H
