//===- Text.h - Building messages and fixed-size text fields ---*- C++ -*-===//
//
// The runtime's two text helpers, private to the runtime and its kernels
// library: concatenating the streamed forms of values into a message, and
// copying a message into a fixed-size field of a record that travels
// between processes.
//
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_LIB_TEXT_H
#define COLL_RUNTIME_LIB_TEXT_H

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <sstream>
#include <string>

namespace coll {
namespace detail {

/// Concatenates the streamed forms of \p args.
template <typename... Args> std::string cat(const Args &...args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

/// Copies \p text into \p dst of \p size (> 0) bytes, cut and NUL-terminated.
inline void copyText(char *dst, size_t size, const std::string &text) {
  size_t n = std::min(size - 1, text.size());
  std::memcpy(dst, text.data(), n);
  dst[n] = 0;
}

} // namespace detail
} // namespace coll

#endif // COLL_RUNTIME_LIB_TEXT_H
