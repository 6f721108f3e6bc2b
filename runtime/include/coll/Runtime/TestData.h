//===- TestData.h - Test inputs that expose misplacement --------*- C++ -*-===//
/// \file
/// The element values of the test inputs (fillTestInput in Reference.h), as
/// one host/device function, so that the CPU tests and the GPU tests fill
/// buffers with the same bits (a GPU fills 64M-element buffers itself).
///
/// Integers are distinct per (rank, element) as far as the type's width
/// allows. Floating-point values are chosen so that every partial result of
/// nranks ranks is exact in any order: small integers for Sum and Avg,
/// +-2^k (k in {-1, 0, 1}) for Prod, any integers of the significand's width
/// for Max and Min.
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_TESTDATA_H
#define COLL_RUNTIME_TESTDATA_H

#include "coll/Runtime/Elementwise.h"

#include <cstdint>
#include <type_traits>

namespace coll {

/// A well-mixed 64-bit hash (splitmix64's finaliser).
COLL_HOST_DEVICE inline uint64_t testDataMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// Significand bits (with the implicit one) of a floating-point type: the
/// integers up to 2^digits are exact.
COLL_HOST_DEVICE constexpr int significandDigits(DataType type) {
  return type == DataType::Float16    ? 11
         : type == DataType::BFloat16 ? 8
         : type == DataType::Float32  ? 24
                                      : 53;
}

/// Element \p e of rank \p rank's test input for \p op on \p nranks ranks
/// (nranks >= 1), whose reductions have at most \p operands operands (0:
/// nranks; a user-declared collective's post-condition may reduce more
/// chunks than there are ranks, and the values must stay exact for them).
template <DataType D>
COLL_HOST_DEVICE inline typename DataTypeTraits<D>::Storage
testInputElement(RedOp op, uint32_t nranks, uint32_t rank, uint64_t e, uint32_t operands = 0) {
  const uint64_t bound = operands > nranks ? operands : nranks;
  using S = typename DataTypeTraits<D>::Storage;
  using C = typename DataTypeTraits<D>::Compute;
  if constexpr (std::is_integral_v<C>) {
    // x -> x * odd is a bijection modulo 2^bits: distinct for the first
    // 2^bits (rank, element) pairs.
    using U = std::make_unsigned_t<S>;
    return S(U((e * nranks + rank) * 0x9e3779b97f4a7c15ull));
  } else if (op == RedOp::Prod) {
    // +-2^k, k in {-1, 0, 1}: every product of nranks of them is exact
    // (fp16 keeps k = 0 past 14 ranks, where 2^nranks would overflow).
    bool small = D != DataType::Float16 || bound <= 14;
    uint64_t h = testDataMix(e * nranks + rank);
    C v = small ? C(h % 3 == 0 ? 0.5 : h % 3 == 1 ? 1.0 : 2.0) : C(1);
    return storeElement<D>((h >> 8) & 1 ? -v : v);
  } else {
    // Integers of at most `digits` bits; for Sum and Avg small enough that
    // nranks of them add up exactly.
    constexpr int digits = significandDigits(D);
    uint64_t limit = (op == RedOp::Max || op == RedOp::Min) ? (uint64_t(1) << (digits - 1))
                                                            : (uint64_t(1) << digits) / bound;
    int64_t v = int64_t(testDataMix(e * nranks + rank) % (2 * limit + 1)) - int64_t(limit);
    return storeElement<D>(C(v));
  }
}

} // namespace coll

#endif // COLL_RUNTIME_TESTDATA_H
