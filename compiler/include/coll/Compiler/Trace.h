//===- Trace.h - A program instantiated for one rank count ------*- C++ -*-===//
/// \file
/// The output of the instantiate pass: every copy and reduce of the program,
/// unrolled for a rank count N and the parameters, in program order, with the
/// collective's facts (buffer sizes, root, post-conditions) evaluated.
//===----------------------------------------------------------------------===//
#ifndef COLL_COMPILER_TRACE_H
#define COLL_COMPILER_TRACE_H

#include "coll/Lang/AST.h"

#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>
#include <vector>

namespace coll::compiler {

/// Buffer numbers in a trace: input and output as BufferKind numbers them,
/// then scratch buffer k as FirstScratchBuffer + k.
enum : uint16_t {
  InputBuffer = uint16_t(BufferKind::Input),
  OutputBuffer = uint16_t(BufferKind::Output),
  FirstScratchBuffer = uint16_t(BufferKind::Scratch),
};
static_assert(InputBuffer < FirstScratchBuffer && OutputBuffer < FirstScratchBuffer,
              "scratch buffers number after input and output");

/// The plan's buffer of trace buffer \p b.
inline BufferKind planBufferKind(uint16_t b) {
  return b >= FirstScratchBuffer ? BufferKind::Scratch : BufferKind(b);
}

/// `count` consecutive chunks of one rank's buffer.
struct SlotRange {
  uint32_t rank = 0;
  uint16_t buffer = 0;
  uint32_t index = 0;
  uint32_t count = 1;
};

/// What one chunk operation does.
enum class OpKind : uint8_t { Copy, Reduce };

/// One copy or reduce of the instantiated program.
struct ChunkOp {
  OpKind kind = OpKind::Copy;
  SlotRange src, dst;   ///< Same count.
  int16_t channel = -1; ///< Hint, -1 when none.
  int16_t sendTb = -1;  ///< Hint for the sending (or only) rank, -1 when none.
  int16_t recvTb = -1;  ///< Hint for the receiving rank, -1 when none.
  uint32_t site = 0;    ///< Index into Trace::sites: the source expression.
  /// Fences executed before it: on each rank it touches, it starts after
  /// every operation of an earlier phase on that rank has finished.
  uint32_t phase = 0;
};

/// A post-condition for one output slot: it must hold one input chunk, or
/// the reduction of a set of input chunks (any order).
struct PostFact {
  uint32_t rank = 0;
  uint32_t index = 0;
  bool isReduction = false;
  std::vector<std::pair<uint32_t, uint32_t>> inputs; ///< (rank, index); one for a copy
  const ast::Node *site = nullptr;                   ///< The post item, for user collectives.
};

/// A program instantiated for one rank count.
struct Trace {
  const ast::AlgorithmDecl *algorithm = nullptr;
  std::string name;
  std::string collectiveName;
  const CollectiveInfo *builtin = nullptr; ///< Null for a user collective.
  uint32_t nranks = 0;
  uint32_t chunks = 1; ///< The collective's `chunks` (C).
  uint32_t root = 0;
  uint32_t inputChunks = 0;  ///< Per rank, before in-place aliasing.
  uint32_t outputChunks = 0; ///< Per rank.
  bool inplace = false;
  ast::Protocol protocol = ast::Protocol::Simple;
  uint32_t instances = 1;
  std::vector<uint32_t> scratchChunks; ///< Per scratch buffer, per rank.
  std::vector<std::string> scratchNames;
  std::vector<ChunkOp> ops;
  std::vector<const ast::TransferExpr *> sites;
  /// User collectives: explicit post-conditions; and which input slots hold
  /// data at the start (empty: all).
  std::vector<PostFact> userPost;
  std::vector<std::pair<uint32_t, uint32_t>> userPre;
  bool hasUserPre = false;

  /// The collective a plan of this trace implements: Custom for a user
  /// collective.
  CollectiveKind collective() const { return builtin ? builtin->kind : CollectiveKind::Custom; }
  /// In-place programs: the buffer that both `input` and `output` name (the
  /// one of the collective's alias that holds the other).
  uint16_t inPlaceBuffer() const {
    return collectiveInfo(collective()).inPlace == InPlaceAlias::InputInOutput ? OutputBuffer
                                                                               : InputBuffer;
  }
  /// In-place programs: the chunk of inPlaceBuffer() on rank \p rank where
  /// the other buffer starts.
  uint32_t inPlaceOffset(uint32_t rank) const {
    return uint32_t(inPlaceBlock(collective(), rank)) * chunks;
  }

  /// Chunks per rank of buffer \p b.
  uint32_t bufferChunks(uint16_t b) const {
    return b == InputBuffer    ? inputChunks
           : b == OutputBuffer ? outputChunks
                               : scratchChunks[b - FirstScratchBuffer];
  }
  /// "input", "output" or the scratch buffer's name.
  llvm::StringRef bufferName(uint16_t b) const {
    if (b < FirstScratchBuffer)
      return bufferKindName(planBufferKind(b));
    return scratchNames[b - FirstScratchBuffer];
  }
};

/// Prints `buffer[rank][index]` or `buffer[rank][lo .. hi]`.
void printSlotRange(const Trace &trace, const SlotRange &r, llvm::raw_ostream &os);

/// Prints the trace, one operation per line (--print-after=instantiate).
void printTrace(const Trace &trace, llvm::raw_ostream &os);

} // namespace coll::compiler

#endif // COLL_COMPILER_TRACE_H
