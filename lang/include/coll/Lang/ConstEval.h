//===- ConstEval.h - The values of the language's integer operators -*- C++ -*-===//
/// \file
/// What every integer operator and function of .coll computes, in one place:
/// Sema folds constant expressions with it and the compiler's instantiation
/// evaluates every expression with it, so the two cannot disagree. Each
/// takes operand values and returns a value or why there is none
/// (IntArith.h); the callers decide the order of evaluation (`&&` and `||`
/// skip their right side at run time) and word the diagnostics.
//===----------------------------------------------------------------------===//
#ifndef COLL_LANG_CONSTEVAL_H
#define COLL_LANG_CONSTEVAL_H

#include "coll/Lang/AST.h"
#include "coll/Lang/IntArith.h"

#include "llvm/ADT/ArrayRef.h"

#include <string>

namespace coll {

/// `op v`.
ArithResult evalUnaryOp(ast::UnaryOp op, int64_t v);

/// `a op b`, both operands given (`&&` and `||` as operators on values).
ArithResult evalBinaryOp(ast::BinaryOp op, int64_t a, int64_t b);

/// `fn(args...)`, with as many arguments as Builtins.def allows.
/// ArithError::Domain: log2 or ceil_log2 of a non-positive value, pow2 of an
/// exponent outside [0, 62], div_ceil by a negative divisor.
ArithResult evalIntFunction(ast::IntFunction fn, llvm::ArrayRef<int64_t> args);

/// Why \p fn has no value for \p args when evalIntFunction reports
/// ArithError::Domain ("log2 of 0; the argument must be positive"), with
/// \p suffix (" for N = 4", or empty) after the offending call; empty when
/// the function has no domain restriction of its own.
std::string intFunctionDomainMessage(ast::IntFunction fn, llvm::ArrayRef<int64_t> args,
                                     llvm::StringRef suffix);

/// The value of a call of \p f with the arguments \p args, when its body is
/// constant for them: it uses only its parameters, constants and functions
/// that are constant in turn, and no operation fails. Empty otherwise (the
/// instantiation evaluates the call and reports any failure).
std::optional<int64_t> foldFunctionCall(const ast::FuncDecl &f, llvm::ArrayRef<int64_t> args);

} // namespace coll

#endif // COLL_LANG_CONSTEVAL_H
