//===- ChunkLayout.h - From chunks to elements ------------------*- C++ -*-===//
/// \file
/// How a plan's chunks map to the user's elements at run time
/// (runtime/README.md). Host/device clean.
///
/// A plan's buffers are measured in chunks; the user's count U is the number
/// of elements in one rank's unit of C chunks (C is the input chunk count of
/// allreduce, the output chunk count of reducescatter, ...; see
/// chunksPerUnit in Executor.h). Chunk i of a C-chunk block covers elements
/// [i*U/C, (i+1)*U/C) of that block, and a buffer of B chunks is B/C such
/// blocks, so chunk j of any buffer has the size of chunk j % C of the
/// input: allgather's output chunk j*C+i is as large as input chunk i. Any U
/// works: 0, fewer elements than chunks (some chunks are empty), not
/// divisible by C (sizes differ by at most one).
///
/// Scratch chunks have no place in the user's data: every scratch chunk has
/// the largest chunk size, ceil(U/C), and scratch chunk j starts at element
/// j*ceil(U/C).
///
/// Chunks are processed in slices of S elements: slice s of a chunk is its
/// elements [s*S, (s+1)*S), shorter or empty at the chunk's end. Every
/// threadblock's program runs once per slice; a message of a step with count
/// k carries the k chunks' pieces of the current slice.
///
/// Every step handles as many elements of a piece as the smaller of the
/// pieces it touches locally holds, so data that passes through scratch
/// keeps the size of the chunk it came from.
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_CHUNKLAYOUT_H
#define COLL_RUNTIME_CHUNKLAYOUT_H

#include "coll/Runtime/HostDevice.h"

#include <cstdint>

namespace coll {

/// Elements of a slice of one chunk: where it starts in its buffer and how
/// many elements it has.
struct PieceRange {
  uint64_t begin = 0; ///< First element, from the start of the buffer.
  uint64_t length = 0;
};

/// The chunk-to-element map of one run.
struct ChunkLayout {
  uint64_t unit = 0;          ///< U: elements of one rank's C chunks (the user's count).
  uint64_t chunksPerUnit = 1; ///< C.
  uint64_t quotient = 0;      ///< U / C.
  uint64_t remainder = 0;     ///< U % C.
  uint64_t maxChunk = 0;      ///< ceil(U / C): the largest chunk, and every scratch chunk.
  uint64_t sliceElements = 1; ///< S.
  uint64_t numSlices = 0;     ///< ceil(maxChunk / S); 0 when U is 0.

  /// The layout of \p unit elements in \p chunksPerUnit chunks, processed in
  /// slices of \p sliceElements (both at least 1).
  COLL_HOST_DEVICE static ChunkLayout make(uint64_t unit, uint64_t chunksPerUnit,
                                           uint64_t sliceElements) {
    ChunkLayout l;
    l.unit = unit;
    l.chunksPerUnit = chunksPerUnit;
    l.quotient = unit / chunksPerUnit;
    l.remainder = unit % chunksPerUnit;
    l.maxChunk = l.quotient + (l.remainder ? 1 : 0);
    l.sliceElements = sliceElements;
    l.numSlices = (l.maxChunk + sliceElements - 1) / sliceElements;
    return l;
  }

  // The divisions below run in 32 bits whenever the operands fit (they
  // always do for chunk counts below 2^16): a GPU has no 64-bit divider,
  // and every step of the interpreter computes several chunk bounds.

  /// floor(i * U / C) for 0 <= i <= C, without overflowing 64 bits:
  /// i*U = i*q*C + i*r, and i*r < C*C.
  COLL_HOST_DEVICE uint64_t split(uint64_t i) const {
    if (chunksPerUnit <= 0xffff) // i*r < C*C < 2^32.
      return i * quotient + uint32_t(uint32_t(i) * uint32_t(remainder)) / uint32_t(chunksPerUnit);
    return i * quotient + (i * remainder) / chunksPerUnit;
  }

  /// First element of chunk \p j of a user buffer.
  COLL_HOST_DEVICE uint64_t chunkBegin(uint64_t j) const {
    if (j <= 0xffffffffu && chunksPerUnit <= 0xffffffffu) {
      uint32_t j32 = uint32_t(j), c32 = uint32_t(chunksPerUnit);
      return uint64_t(j32 / c32) * unit + split(j32 % c32);
    }
    return (j / chunksPerUnit) * unit + split(j % chunksPerUnit);
  }

  /// Elements of chunk \p j of a user buffer.
  COLL_HOST_DEVICE uint64_t chunkSize(uint64_t j) const {
    uint64_t i = j <= 0xffffffffu && chunksPerUnit <= 0xffffffffu
                     ? uint32_t(j) % uint32_t(chunksPerUnit)
                     : j % chunksPerUnit;
    return split(i + 1) - split(i);
  }

  /// Elements of a user buffer of \p chunks chunks.
  COLL_HOST_DEVICE uint64_t bufferElements(uint64_t chunks) const { return chunkBegin(chunks); }

  /// Elements of a scratch buffer of \p chunks chunks.
  COLL_HOST_DEVICE uint64_t scratchElements(uint64_t chunks) const { return chunks * maxChunk; }

  /// Slice \p slice of a chunk that starts at \p begin and holds \p size
  /// elements.
  COLL_HOST_DEVICE PieceRange piece(uint64_t begin, uint64_t size, uint64_t slice) const {
    uint64_t from = slice * sliceElements;
    PieceRange p;
    p.begin = begin + from;
    p.length = size > from ? (size - from < sliceElements ? size - from : sliceElements) : 0;
    return p;
  }

  /// Slice \p slice of chunk \p j of a user buffer.
  COLL_HOST_DEVICE PieceRange userPiece(uint64_t j, uint64_t slice) const {
    return piece(chunkBegin(j), chunkSize(j), slice);
  }

  /// Slice \p slice of chunk \p j of a scratch buffer.
  COLL_HOST_DEVICE PieceRange scratchPiece(uint64_t j, uint64_t slice) const {
    return piece(j * maxChunk, maxChunk, slice);
  }
};

} // namespace coll

#endif // COLL_RUNTIME_CHUNKLAYOUT_H
