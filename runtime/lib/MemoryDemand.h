//===- MemoryDemand.h - Checked sizes of a call's memory --------*- C++ -*-===//
/// \file
/// The memory a call allocates besides the user's buffers (scratch, FIFO
/// slots, private copies of inputs), computed from the plan's fields with
/// overflow checks and held against the memory cap
/// (ExecOptions::memoryLimitBytes), so that a plan field asking for too much
/// is an error naming it. Shared by the CPU executors (ExecCommon.h) and the
/// GPU executors (runtime/kernels). Private to the runtime; host code only.
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_LIB_MEMORYDEMAND_H
#define COLL_RUNTIME_LIB_MEMORYDEMAND_H

#include "Text.h"
#include "coll/Runtime/ChunkLayout.h"
#include "coll/Runtime/Executor.h"
#include "coll/Runtime/Interpreter.h"
#include "coll/Runtime/Plan.h"
#include "coll/Runtime/Status.h"

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <type_traits>

namespace coll {
namespace detail {

/// The text of \p what: a string, or a callable that makes one. The sizes
/// below take either, so that a call describes a part of its memory only
/// when an error (or the largest part so far) needs the words: formatting
/// a description for each FIFO of every call cost microseconds a call.
template <class What> std::string describe(const What &what) {
  if constexpr (std::is_invocable_v<const What &>)
    return what();
  else
    return std::string(what);
}

/// The most chunks one message of \p tb carries: received (\p recv) or
/// sent. 0 when it has no such step.
inline uint32_t maxMessageChunks(const Threadblock &tb, bool recv) {
  uint32_t maxCount = 0;
  for (const Instruction &in : tb.steps) {
    OpcodeFlags f = opcodeFlags(in.op);
    if (recv ? f.recv : f.send)
      maxCount = std::max(maxCount, in.count);
  }
  return maxCount;
}

/// The memory a call allocates besides the user's buffers, added up part
/// by part with overflow checks; remembers its largest part, so that an
/// error can name the plan field behind it.
struct MemoryDemand {
  uint64_t total = 0;
  uint64_t largestBytes = 0;
  std::string largest; ///< "rank 1's scratch (scratchChunks 4 x 1024 elements x 4 bytes)".

  /// Adds \p bytes for \p what (a string, or a callable that makes one:
  /// describe()); an error when the total overflows.
  template <class What> Status add(const What &what, uint64_t bytes) {
    if (__builtin_add_overflow(total, bytes, &total))
      return Status::error(cat("the memory of the call overflows 64 bits at ", describe(what), ", ",
                               bytes, " bytes"));
    if (bytes > largestBytes) {
      largestBytes = bytes;
      largest = describe(what);
    }
    return Status::success();
  }
};

/// \p a * \p b * \p c bytes of \p what (describe()), or an error naming
/// it when the product overflows 64 bits.
template <class What>
Result<uint64_t> checkedBytes(const What &what, uint64_t a, uint64_t b, uint64_t c) {
  uint64_t ab = 0, abc = 0;
  if (__builtin_mul_overflow(a, b, &ab) || __builtin_mul_overflow(ab, c, &abc))
    return Status::error(cat(describe(what), " overflows 64 bits"));
  return abc;
}

/// \p x rounded up to a multiple of \p a (nonzero), or an error naming
/// \p what (describe()) when that overflows 64 bits.
template <class What> Result<uint64_t> checkedRoundUp(const What &what, uint64_t x, uint64_t a) {
  uint64_t up = 0;
  if (__builtin_add_overflow(x, a - 1, &up))
    return Status::error(cat(describe(what), " overflows 64 bits"));
  return up / a * a;
}

/// The scratch of rank \p rank with \p scratchChunks chunks: "rank 1's
/// scratch (scratchChunks 4 x 1024 elements x 4 bytes)".
inline std::string scratchWhat(uint32_t rank, uint32_t scratchChunks, const ChunkLayout &layout,
                               size_t es) {
  return cat("rank ", rank, "'s scratch (scratchChunks ", scratchChunks, " x ", layout.maxChunk,
             " elements x ", es, " bytes)");
}

/// Rank \p r's scratch in \p plan (which holds every rank).
inline std::string scratchWhat(const Plan &plan, uint32_t r, const ChunkLayout &layout, size_t es) {
  return scratchWhat(r, plan.ranks[r].scratchChunks, layout, es);
}

/// The bytes of the scratch of rank \p rank with \p scratchChunks chunks,
/// checked.
inline Result<uint64_t> scratchBytes(uint32_t rank, uint32_t scratchChunks,
                                     const ChunkLayout &layout, size_t es) {
  return checkedBytes([&] { return scratchWhat(rank, scratchChunks, layout, es); }, scratchChunks,
                      layout.maxChunk, es);
}

/// The bytes of rank \p r's scratch in \p plan (which holds every rank),
/// checked.
inline Result<uint64_t> scratchBytes(const Plan &plan, uint32_t r, const ChunkLayout &layout,
                                     size_t es) {
  return scratchBytes(r, plan.ranks[r].scratchChunks, layout, es);
}

/// The FIFO that threadblock \p b of rank \p rank receives on: "the FIFO
/// of rank 1 threadblock 0 (connectionDepth 2 x 3 chunks per message x
/// 4096 bytes per slice)", and ", in LL lines" for a line protocol.
inline std::string fifoWhat(uint32_t rank, uint32_t b, uint32_t depth, uint32_t maxCount,
                            uint64_t pieceBytes, ProtocolKind protocol = ProtocolKind::Simple) {
  return cat("the FIFO of rank ", rank, " threadblock ", b, " (connectionDepth ", depth, " x ",
             maxCount, " chunks per message x ", pieceBytes, " bytes per slice",
             protocol == ProtocolKind::Simple ? std::string()
                                              : cat(", in ", protocolName(protocol), " lines"),
             ")");
}

/// The bytes of \p depth slots of messages of up to \p dataBytes data
/// bytes in \p protocol, or an error naming \p what (describe()) when they
/// overflow.
template <class What>
Result<uint64_t> checkedSlotBytes(const What &what, uint32_t depth, uint64_t dataBytes,
                                  ProtocolKind protocol) {
  // A line protocol's slot is at most 2 bytes per data byte, plus a line.
  if (protocol != ProtocolKind::Simple && dataBytes > (~uint64_t(0) >> 2))
    return Status::error(cat(describe(what), " overflows 64 bits"));
  return checkedBytes(what, depth, slotBytesFor(protocol, dataBytes), 1);
}

/// The slot bytes of the FIFO that threadblock \p b of rank \p r receives
/// on in \p protocol (0: it receives nothing), checked; \p what, when not
/// null, receives its description (made only then).
inline Result<uint64_t> fifoSlotBytes(const Plan &plan, uint32_t r, uint32_t b, uint64_t pieceBytes,
                                      std::string *what = nullptr,
                                      ProtocolKind protocol = ProtocolKind::Simple) {
  const Threadblock &tb = plan.ranks[r].threadblocks[b];
  uint32_t maxCount = tb.recvPeer >= 0 ? maxMessageChunks(tb, /*recv=*/true) : 0;
  if (maxCount == 0)
    return uint64_t(0);
  auto w = [&] {
    return fifoWhat(r, b, plan.info.connectionDepth, maxCount, pieceBytes, protocol);
  };
  Result<uint64_t> data = checkedBytes(w, 1, maxCount, pieceBytes);
  if (!data)
    return data;
  Result<uint64_t> bytes = checkedSlotBytes(w, plan.info.connectionDepth, *data, protocol);
  if (what)
    *what = w();
  return bytes;
}

/// Checks \p d against the cap \p limitOption (ExecOptions::memoryLimitBytes:
/// 0 for the default, defaultMemoryLimit(\p bufferBytes)), named
/// \p optionName in the error.
inline Status checkMemoryLimit(const MemoryDemand &d, uint64_t limitOption, uint64_t bufferBytes,
                               const char *optionName) {
  const bool automatic = limitOption == 0;
  const uint64_t limit = automatic ? defaultMemoryLimit(bufferBytes) : limitOption;
  if (d.total <= limit)
    return Status::success();
  return Status::error(
      cat("the call needs ", d.total,
          " bytes of memory besides its buffers, more than the memory "
          "limit of ",
          limit, " bytes",
          automatic ? cat(" (the default: 8 x the call's ", bufferBytes, " buffer bytes + 256 MiB)")
                    : std::string(),
          ": ", d.largestBytes, " bytes for ", d.largest, "; raise the limit with ", optionName));
}

} // namespace detail
} // namespace coll

#endif // COLL_RUNTIME_LIB_MEMORYDEMAND_H
