//===- BufferKind.h - The buffers a plan addresses --------------*- C++ -*-===//
/// \file
/// BufferKind and the columns of BufferKinds.def as constexpr lookups.
/// Header-only and free of dependencies, so that lang/ and the compiler read
/// the same table as the runtime without linking it.
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_BUFFERKIND_H
#define COLL_RUNTIME_BUFFERKIND_H

#include <cstdint>

namespace coll {

/// The buffers an instruction addresses, from BufferKinds.def.
enum class BufferKind : uint8_t {
#define COLL_BUFFER_KIND(Id, Name, Letter) Id,
#include "coll/Runtime/BufferKinds.def"
};
/// Number of buffer kinds: the size of a rank's buffer table.
constexpr unsigned numBufferKinds() {
  return 0
#define COLL_BUFFER_KIND(Id, Name, Letter) +1
#include "coll/Runtime/BufferKinds.def"
      ;
}
/// Whether \p kind is a value of BufferKind.
constexpr bool isValidBufferKind(BufferKind kind) {
  return unsigned(kind) < numBufferKinds();
}
/// "input", "output", "scratch"; "?" for an invalid value.
constexpr const char *bufferKindName(BufferKind kind) {
  switch (kind) {
#define COLL_BUFFER_KIND(Id, Name, Letter)                                                         \
  case BufferKind::Id:                                                                             \
    return Name;
#include "coll/Runtime/BufferKinds.def"
  }
  return "?";
}
/// "i", "o", "s"; "?" for an invalid value.
constexpr const char *bufferKindLetter(BufferKind kind) {
  switch (kind) {
#define COLL_BUFFER_KIND(Id, Name, Letter)                                                         \
  case BufferKind::Id:                                                                             \
    return Letter;
#include "coll/Runtime/BufferKinds.def"
  }
  return "?";
}

} // namespace coll

#endif // COLL_RUNTIME_BUFFERKIND_H
