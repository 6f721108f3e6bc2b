//===- Protocol.h - How messages travel in a connection's slots -*- C++ -*-===//
/// \file
/// The three protocols of a plan (PlanInfo::protocol) and how a call
/// chooses one. Host/device clean: the CPU executors and the CUDA kernel
/// lay out a slot with the same geometry.
///
///  - Simple: the message's bytes as they are; the sender publishes the
///    connection's tail counter after them (a release), the receiver waits
///    for the counter (an acquire) and then reads the slot.
///  - LL (low latency): the slot is a sequence of 16-byte lines, each two
///    8-byte words of 4 bytes of data and a 4-byte flag. The sender writes
///    each word with one store, data and flag together; the receiver polls
///    the words themselves until every flag is the message's. A message
///    costs one one-way trip, and no fence and no counter, at twice the
///    bytes in the slot.
///  - LL128: 128-byte lines of 120 bytes of data and an 8-byte flag, which
///    the sender writes last (a release per line on a CPU; on a GPU, one
///    coalesced store of a warp's eight lanes). 16/15 of the bytes in the
///    slot.
///
/// A message's flag is its sequence number on the connection plus one
/// (message m carries m + 1; LL: m mod (2^32 - 1), plus one), never 0: the
/// counters of a connection never go back while its slots hold data, so a
/// slot's stale lines carry older numbers, and lines never written carry 0.
/// A false match needs a line left unwritten for exactly a multiple of
/// 2^32 - 1 messages of its connection (LL; 2^64 for LL128).
///
/// Both ends must know which lines a message fills without reading a
/// length: messageBytes() is the extent every step of the message may
/// touch, from the chunk count of the step and the slice, the same on
/// both sides. The sender fills (and the receiver polls) all its lines,
/// at least one.
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_PROTOCOL_H
#define COLL_RUNTIME_PROTOCOL_H

#include "coll/Runtime/ChunkLayout.h"
#include "coll/Runtime/HostDevice.h"
#include "coll/Runtime/Status.h"

#include <cstdint>
#include <string>

namespace coll {

/// Wire protocol (docs/plan-format.md).
enum class ProtocolKind : uint8_t { Simple, LL, LL128 };

/// The name of \p kind: "Simple", "LL" or "LL128".
const char *protocolName(ProtocolKind kind);

/// The protocol named \p name ("Simple", "LL", "LL128", in any case);
/// false when it names none.
bool parseProtocol(const char *name, ProtocolKind &kind);

/// Bytes of one line of a slot, and the data bytes it carries.
COLL_HOST_DEVICE constexpr uint64_t lineBytes(ProtocolKind p) {
  return p == ProtocolKind::LL ? 16 : p == ProtocolKind::LL128 ? 128 : 1;
}
COLL_HOST_DEVICE constexpr uint64_t lineDataBytes(ProtocolKind p) {
  return p == ProtocolKind::LL ? 8 : p == ProtocolKind::LL128 ? 120 : 1;
}

/// Lines of a message of \p bytes data bytes: at least one, so that every
/// message, empty ones too, has a flag to wait for.
COLL_HOST_DEVICE constexpr uint64_t messageLines(ProtocolKind p, uint64_t bytes) {
  return bytes == 0 ? 1 : (bytes + lineDataBytes(p) - 1) / lineDataBytes(p);
}

/// Bytes of a slot that holds messages of up to \p dataBytes data bytes.
COLL_HOST_DEVICE constexpr uint64_t slotBytesFor(ProtocolKind p, uint64_t dataBytes) {
  return p == ProtocolKind::Simple ? dataBytes : messageLines(p, dataBytes) * lineBytes(p);
}

/// The bytes of a staging copy (the CPU's and the kernel's) for messages
/// of up to \p dataBytes in \p protocol: whole lines' data, 16-byte aligned.
COLL_HOST_DEVICE constexpr uint64_t stageBytesFor(ProtocolKind p, uint64_t dataBytes) {
  return (messageLines(p, dataBytes) * lineDataBytes(p) + 15) / 16 * 16;
}

/// The data bytes a message of \p count pieces of slice \p slice may
/// occupy: pieces sit at a stride of \p pieceBytes, and none is longer than
/// the slice of a scratch chunk (the largest chunk), of \p elementBytes
/// bytes per element. The sender and the receiver of a message compute the
/// same value (their steps move the same number of chunks).
COLL_HOST_DEVICE inline uint64_t messageBytes(const ChunkLayout &layout, uint32_t count,
                                              uint64_t slice, uint64_t pieceBytes,
                                              uint64_t elementBytes) {
  if (count == 0)
    return 0;
  return uint64_t(count - 1) * pieceBytes + layout.scratchPiece(0, slice).length * elementBytes;
}

/// The flag of message \p message (a connection's sequence number) in LL:
/// never 0, the value of memory no message has written.
COLL_HOST_DEVICE constexpr uint32_t llFlag(uint64_t message) {
  return uint32_t(message % 0xffffffffu) + 1;
}

/// How calls choose their protocol. The default runs the plan's.
struct ProtocolChoice {
  /// Every call runs `forced`, whatever its plan says.
  bool force = false;
  ProtocolKind forced = ProtocolKind::Simple;
  /// Otherwise: calls of at most this many bytes per rank (the larger of
  /// the input and output buffers) run LL, ...
  uint64_t llMaxBytes = 0;
  /// ... then those of at most this many run LL128, and the rest the
  /// plan's protocol.
  uint64_t ll128MaxBytes = 0;

  bool operator==(const ProtocolChoice &o) const {
    return force == o.force && forced == o.forced && llMaxBytes == o.llMaxBytes &&
           ll128MaxBytes == o.ll128MaxBytes;
  }
  bool operator!=(const ProtocolChoice &o) const { return !(*this == o); }
};

/// The protocol of a call of \p callBytes bytes per rank on a plan of
/// protocol \p plan, by \p choice.
inline ProtocolKind chooseProtocol(ProtocolKind plan, const ProtocolChoice &choice,
                                   uint64_t callBytes) {
  if (choice.force)
    return choice.forced;
  if (choice.llMaxBytes && callBytes <= choice.llMaxBytes)
    return ProtocolKind::LL;
  if (choice.ll128MaxBytes && callBytes <= choice.ll128MaxBytes)
    return ProtocolKind::LL128;
  return plan;
}

/// Parses a protocol choice from text: "LL" (force), "auto" (the plan's),
/// or thresholds "LL:4096,LL128:262144" (LL up to 4096 bytes, LL128 up to
/// 256 KiB, then the plan's); sizes take K, M, G suffixes. An error that
/// says what is wrong when \p text is not one of these.
Status parseProtocolChoice(const std::string &text, ProtocolChoice &choice);

/// The text parseProtocolChoice() reads back: "auto", "LL", "LL:4096".
std::string formatProtocolChoice(const ProtocolChoice &choice);

} // namespace coll

#endif // COLL_RUNTIME_PROTOCOL_H
