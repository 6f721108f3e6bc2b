//===- FakeNcclLog.h - What the fake NCCL records, and test arguments -*- C++ -*-===//
/// \file
/// The fake NCCL library (FakeNccl.cpp) appends one line per call to the
/// file FAKE_NCCL_LOG names: the function's name and each argument, as
/// formatCall() writes them. The tests call every function with makeArgs()
/// and compare the log with formatCall() of the same values, so both sides
/// share this one formatting.
//===----------------------------------------------------------------------===//
#ifndef COLL_TESTS_NCCL_SHIM_FAKENCCLLOG_H
#define COLL_TESTS_NCCL_SHIM_FAKENCCLLOG_H

#include <cstdint>
#include <cstring>
#include <nccl.h>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace fake {

inline std::string formatArg(const ncclUniqueId &id) {
  static const char *hex = "0123456789abcdef";
  std::string s = "id:";
  for (int i = 0; i < 8; ++i) {
    s += hex[uint8_t(id.internal[i]) >> 4];
    s += hex[uint8_t(id.internal[i]) & 15];
  }
  return s;
}
template <class T> std::string formatArg(T v) {
  if constexpr (std::is_pointer<T>::value)
    return "p:" + std::to_string(reinterpret_cast<uintptr_t>(v));
  else if constexpr (std::is_enum<T>::value)
    return "e:" + std::to_string(static_cast<long long>(v));
  else
    return "i:" + std::to_string(v);
}

/// "ncclAllReduce p:4096 p:4097 i:1002 ...".
template <class... A> std::string formatCall(const char *name, const A &...args) {
  std::string s = name;
  ((s += " " + formatArg(args)), ...);
  return s;
}

/// A distinct value of type T for argument slot \p i of call \p seed:
/// pointers that are never followed, numbers, enums in range (0 or 1).
template <class T> T makeArg(int seed, int i) {
  using U = std::remove_cv_t<T>;
  const int v = seed * 16 + i;
  if constexpr (std::is_same<U, ncclUniqueId>::value) {
    ncclUniqueId id;
    std::memset(&id, 0, sizeof id);
    for (int k = 0; k < 8; ++k)
      id.internal[k] = char(v + k);
    return id;
  } else if constexpr (std::is_pointer<U>::value) {
    return reinterpret_cast<U>(uintptr_t(0x10000 + 64 * v));
  } else if constexpr (std::is_enum<U>::value) {
    return static_cast<U>(v % 2); // Every NCCL enum has 0 and 1.
  } else {
    return static_cast<U>(1000 + v);
  }
}

/// The number of parameters of a function pointer type.
template <class F> struct Arity;
template <class R, class... A> struct Arity<R (*)(A...)> {
  static constexpr size_t value = sizeof...(A);
};

/// Calls \p fn with makeArg() of each of its parameter types and returns
/// the line the fake should have logged for it.
template <class R, class... A, size_t... I>
std::string callWithArgs(R (*fn)(A...), const char *name, int seed, R *result,
                         std::index_sequence<I...>) {
  (void)seed; // Unused by a function without parameters.
  std::tuple<std::remove_cv_t<A>...> args(makeArg<A>(seed, int(I))...);
  if constexpr (std::is_void<R>::value)
    fn(std::get<I>(args)...);
  else
    *result = fn(std::get<I>(args)...);
  return formatCall(name, std::get<I>(args)...);
}

} // namespace fake

#endif // COLL_TESTS_NCCL_SHIM_FAKENCCLLOG_H
