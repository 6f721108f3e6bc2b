//===- MixedKey.h - Well-spread hashing of packed 64-bit keys ---*- C++ -*-===//
/// \file
/// DenseMap's default hash of an integer is a multiply whose low bits ignore
/// the high half of the key; keys that pack two numbers into 64 bits then
/// collide in long probe chains. This info mixes every bit.
//===----------------------------------------------------------------------===//
#ifndef COLL_COMPILER_LIB_MIXEDKEY_H
#define COLL_COMPILER_LIB_MIXEDKEY_H

#include "llvm/ADT/DenseMapInfo.h"

#include <cstdint>

namespace coll::compiler {

/// DenseMapInfo for packed 64-bit keys (never ~0 or ~0 - 1).
struct MixedKeyInfo {
  static uint64_t getEmptyKey() { return ~uint64_t(0); }
  static uint64_t getTombstoneKey() { return ~uint64_t(0) - 1; }
  static unsigned getHashValue(uint64_t x) {
    // splitmix64's finalizer.
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return unsigned(x);
  }
  static bool isEqual(uint64_t a, uint64_t b) { return a == b; }
};

} // namespace coll::compiler

#endif // COLL_COMPILER_LIB_MIXEDKEY_H
