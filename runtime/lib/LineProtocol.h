//===- LineProtocol.h - LL and LL128 lines on a CPU -------------*- C++ -*-===//
//
// Packing a message's data into the lines of a slot, and unpacking it, for
// the CPU executors (Protocol.h gives the geometry and the flags).
//
//  - LL: each 8-byte word holds 4 bytes of data (low half) and the flag
//    (high half), written with one relaxed atomic store and read with one
//    relaxed atomic load: the flag vouches for the data of its own word, so
//    no other ordering is needed.
//  - LL128: each 128-byte line holds 120 bytes of data and then a 64-bit
//    flag, stored with release after the data; the reader loads the flag
//    with acquire before it copies the data.
//
// A slot is reused only after the receiver released it (the connection's
// head counter, as with Simple), so a line's data never changes while a
// reader that saw its flag copies it. Private to the runtime library.
//
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_LIB_LINEPROTOCOL_H
#define COLL_RUNTIME_LIB_LINEPROTOCOL_H

#include "coll/Runtime/Protocol.h"

#include <cstdint>
#include <cstring>

namespace coll {
namespace detail {

/// Writes the \p bytes of \p src as message \p message into \p lines
/// (messageLines() lines of protocol \p p; a shorter last line is padded
/// with zeros).
inline void packLines(ProtocolKind p, char *lines, const char *src, uint64_t bytes,
                      uint64_t message) {
  const uint64_t n = messageLines(p, bytes);
  if (p == ProtocolKind::LL) {
    const uint64_t flag = uint64_t(llFlag(message)) << 32;
    uint64_t *words = reinterpret_cast<uint64_t *>(lines);
    const uint64_t full = bytes / 8;
    for (uint64_t i = 0; i < full; ++i) {
      uint64_t d;
      std::memcpy(&d, src + 8 * i, 8);
      __atomic_store_n(&words[2 * i], flag | (d & 0xffffffffu), __ATOMIC_RELAXED);
      __atomic_store_n(&words[2 * i + 1], flag | (d >> 32), __ATOMIC_RELAXED);
    }
    if (full < n) { // A shorter last line, or the one line of an empty message.
      uint64_t d = 0;
      if (bytes > 8 * full)
        std::memcpy(&d, src + 8 * full, bytes - 8 * full);
      __atomic_store_n(&words[2 * full], flag | (d & 0xffffffffu), __ATOMIC_RELAXED);
      __atomic_store_n(&words[2 * full + 1], flag | (d >> 32), __ATOMIC_RELAXED);
    }
    return;
  }
  const uint64_t flag = message + 1;
  const uint64_t full = bytes / 120;
  for (uint64_t i = 0; i < full; ++i) {
    char *line = lines + 128 * i;
    std::memcpy(line, src + 120 * i, 120); // A constant size: inlined moves.
    __atomic_store_n(reinterpret_cast<uint64_t *>(line + 120), flag, __ATOMIC_RELEASE);
  }
  if (full < n) { // A shorter last line, or the one line of an empty message.
    char *line = lines + 128 * full;
    const uint64_t take = bytes - 120 * full;
    if (take)
      std::memcpy(line, src + 120 * full, take);
    std::memset(line + take, 0, 120 - take);
    __atomic_store_n(reinterpret_cast<uint64_t *>(line + 120), flag, __ATOMIC_RELEASE);
  }
}

/// Copies the \p bytes of message \p message from \p lines to \p dst when
/// every line of it has arrived; false when one has not (then \p dst may
/// hold part of it). The last line first: it is the sender's last store.
inline bool unpackLines(ProtocolKind p, char *dst, const char *lines, uint64_t bytes,
                        uint64_t message) {
  const uint64_t n = messageLines(p, bytes);
  if (p == ProtocolKind::LL) {
    const uint64_t flag = uint64_t(llFlag(message));
    const uint64_t *words = reinterpret_cast<const uint64_t *>(lines);
    if (__atomic_load_n(&words[2 * n - 1], __ATOMIC_RELAXED) >> 32 != flag)
      return false;
    const uint64_t full = bytes / 8;
    for (uint64_t i = 0; i < full; ++i) {
      const uint64_t w0 = __atomic_load_n(&words[2 * i], __ATOMIC_RELAXED);
      const uint64_t w1 = __atomic_load_n(&words[2 * i + 1], __ATOMIC_RELAXED);
      if ((w0 >> 32 != flag) | (w1 >> 32 != flag))
        return false;
      const uint64_t d = (w0 & 0xffffffffu) | (w1 << 32);
      std::memcpy(dst + 8 * i, &d, 8);
    }
    if (full < n) {
      const uint64_t w0 = __atomic_load_n(&words[2 * full], __ATOMIC_RELAXED);
      const uint64_t w1 = __atomic_load_n(&words[2 * full + 1], __ATOMIC_RELAXED);
      if ((w0 >> 32 != flag) | (w1 >> 32 != flag))
        return false;
      const uint64_t d = (w0 & 0xffffffffu) | (w1 << 32);
      if (bytes > 8 * full)
        std::memcpy(dst + 8 * full, &d, bytes - 8 * full);
    }
    return true;
  }
  const uint64_t flag = message + 1;
  auto arrived = [&](uint64_t i) {
    return __atomic_load_n(reinterpret_cast<const uint64_t *>(lines + 128 * i + 120),
                           __ATOMIC_ACQUIRE) == flag;
  };
  if (!arrived(n - 1))
    return false;
  const uint64_t full = bytes / 120;
  for (uint64_t i = 0; i < full; ++i) {
    if (!arrived(i))
      return false;
    std::memcpy(dst + 120 * i, lines + 128 * i, 120);
  }
  if (full < n) {
    if (!arrived(full))
      return false;
    if (bytes > 120 * full)
      std::memcpy(dst + 120 * full, lines + 128 * full, bytes - 120 * full);
  }
  return true;
}

} // namespace detail
} // namespace coll

#endif // COLL_RUNTIME_LIB_LINEPROTOCOL_H
