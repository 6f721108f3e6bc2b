//===- Plan.h - The plan: contract between compiler and runtime -*- C++ -*-===//
/// \file
/// The in-memory form of a plan (docs/plan-format.md). A plan holds, for
/// every rank, its threadblocks; each threadblock owns at most one send and
/// one receive connection (peer, channel) and a list of fixed-size
/// instructions whose cross-threadblock dependencies live in a side array.
/// Offsets and counts are in chunks; the runtime maps chunks to elements.
/// PlanIO.h reads, writes, validates and prints plans.
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_PLAN_H
#define COLL_RUNTIME_PLAN_H

#include "coll/Runtime/BufferKind.h"
#include "coll/Runtime/Collective.h"
#include "coll/Runtime/Protocol.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace coll {

/// Every plan opcode, from Opcodes.def.
enum class Opcode : uint8_t {
#define COLL_OPCODE(Id, Mnemonic, Recv, Send, ReadSrc, WriteDst, Reduce) Id,
#include "coll/Runtime/Opcodes.def"
};

/// Static facts about an opcode, from Opcodes.def.
struct OpcodeInfo {
  const char *mnemonic;
  bool recv, send, readSrc, writeDst, reduce;
};
/// The facts of \p op. \p op must be a valid opcode.
const OpcodeInfo &opcodeInfo(Opcode op);
/// Number of opcodes.
constexpr unsigned numOpcodes() {
  return 0
#define COLL_OPCODE(Id, Mnemonic, Recv, Send, ReadSrc, WriteDst, Reduce) +1
#include "coll/Runtime/Opcodes.def"
      ;
}

/// A wait for another threadblock of the same rank to finish a step.
struct Dependency {
  uint32_t tb;   ///< Threadblock index within the rank.
  uint32_t step; ///< That threadblock's instruction index; wait until it is done.
  bool operator==(const Dependency &o) const { return tb == o.tb && step == o.step; }
};

/// One step of a threadblock. Fields an opcode does not use are zero.
struct Instruction {
  Opcode op = Opcode::Nop;
  BufferKind srcBuf = BufferKind::Input;
  BufferKind dstBuf = BufferKind::Input;
  uint32_t srcOff = 0;   ///< Chunk offset in srcBuf.
  uint32_t dstOff = 0;   ///< Chunk offset in dstBuf.
  uint32_t count = 0;    ///< Chunks moved.
  uint32_t depBegin = 0; ///< First of this step's dependencies in Threadblock::deps.
  uint32_t depCount = 0; ///< Number of dependencies.
  bool operator==(const Instruction &o) const {
    return op == o.op && srcBuf == o.srcBuf && dstBuf == o.dstBuf && srcOff == o.srcOff &&
           dstOff == o.dstOff && count == o.count && depBegin == o.depBegin &&
           depCount == o.depCount;
  }
};

/// A step of \p op on \p count chunks, with a source and a destination
/// only where the opcode reads or writes one (opcodeInfo()); no
/// dependencies.
Instruction makeInstruction(Opcode op, BufferKind srcBuf, uint32_t srcOff, BufferKind dstBuf,
                            uint32_t dstOff, uint32_t count);

/// A threadblock: one CTA on a GPU, one worker task on a CPU.
struct Threadblock {
  int32_t sendPeer = -1; ///< Rank this threadblock sends to, or -1.
  int32_t recvPeer = -1; ///< Rank this threadblock receives from, or -1.
  uint32_t channel = 0;  ///< Channel of both connections.
  std::vector<Instruction> steps;
  std::vector<Dependency> deps; ///< Indexed by Instruction::depBegin/depCount.
  bool operator==(const Threadblock &o) const {
    return sendPeer == o.sendPeer && recvPeer == o.recvPeer && channel == o.channel &&
           steps == o.steps && deps == o.deps;
  }
};

/// Everything one rank executes.
struct RankPlan {
  uint32_t scratchChunks = 0; ///< Scratch buffer size in chunks.
  std::vector<Threadblock> threadblocks;
  bool operator==(const RankPlan &o) const {
    return scratchChunks == o.scratchChunks && threadblocks == o.threadblocks;
  }
};

/// Facts about the whole plan.
struct PlanInfo {
  std::string name; ///< The algorithm's name.
  CollectiveKind collective = CollectiveKind::AllReduce;
  uint32_t nranks = 0;
  uint32_t root = 0;         ///< Rooted collectives only.
  uint32_t inputChunks = 0;  ///< Input buffer size per rank, in chunks.
  uint32_t outputChunks = 0; ///< Output buffer size per rank, in chunks.
  ProtocolKind protocol = ProtocolKind::Simple;
  uint32_t connectionDepth = 0; ///< Slots per connection FIFO.
  uint32_t instances = 1;       ///< Replicas on separate channels (already applied).
  bool inplace = false;         ///< Instructions address one aliased buffer (see docs).
  bool operator==(const PlanInfo &o) const {
    return name == o.name && collective == o.collective && nranks == o.nranks && root == o.root &&
           inputChunks == o.inputChunks && outputChunks == o.outputChunks &&
           protocol == o.protocol && connectionDepth == o.connectionDepth &&
           instances == o.instances && inplace == o.inplace;
  }
};

/// Where chunk \p chunk of buffer \p b of rank \p rank of a plan with
/// \p info really is. In an in-place plan of a built-in collective the
/// collective's alias decides: allreduce's (broadcast's, reduce's) output
/// is its input, allgather's input is the output at rank * inputChunks,
/// reducescatter's output is the input at rank * outputChunks. Anything
/// else is itself.
std::pair<BufferKind, uint32_t> aliasedChunk(const PlanInfo &info, uint32_t rank, BufferKind b,
                                             uint32_t chunk);

/// What the output of a user-declared collective must hold: its post-
/// conditions as the compiler proved them, so that a run can be checked
/// without the program (docs/plan-format.md). Built-in collectives carry none;
/// their post-conditions are fixed (Collective.h).
///
/// A term is a multiset of input chunks: one chunk is a copy of it, several
/// are their reduction with the call's operator (in any order). Output chunk
/// `i` of rank `r` must hold term `outputs[r * outputChunks + i] - 1`, or is
/// free when that entry is 0.
struct PlanContract {
  /// One input chunk of one rank.
  struct Operand {
    uint32_t rank = 0;
    uint32_t chunk = 0;
    bool operator==(const Operand &o) const { return rank == o.rank && chunk == o.chunk; }
  };
  /// Term t's operands are operands[termBegin[t] .. termBegin[t + 1]);
  /// termBegin has one entry more than there are terms, and starts at 0.
  std::vector<uint32_t> termBegin{0};
  std::vector<Operand> operands;
  /// One entry per output chunk of every rank, rank by rank: 0 (free) or
  /// 1 + the term the chunk must hold.
  std::vector<uint32_t> outputs;

  uint32_t numTerms() const { return termBegin.empty() ? 0 : uint32_t(termBegin.size() - 1); }
  bool operator==(const PlanContract &o) const {
    return termBegin == o.termBegin && operands == o.operands && outputs == o.outputs;
  }
};

/// A whole plan. `ranks` holds every rank, or just one when loaded for a
/// single rank (then `loadedRank` says which).
struct Plan {
  PlanInfo info;
  std::vector<RankPlan> ranks;
  /// A user-declared collective's post-conditions (empty: not recorded; a
  /// built-in collective's plan never has one).
  std::optional<PlanContract> contract;
  int32_t loadedRank = -1; ///< -1: all ranks are present.
  /// For a plan parsed for one rank: the checksum its file stores, which
  /// names the whole plan (ValidatedPlan), and the checksum of the section's
  /// own bytes as parsed, which tells whether it was changed since. 0: built
  /// in memory, or parsed whole. Not compared by ==.
  uint64_t sourceChecksum = 0;
  uint64_t parsedChecksum = 0;
  bool operator==(const Plan &o) const {
    return info == o.info && ranks == o.ranks && contract == o.contract &&
           loadedRank == o.loadedRank;
  }
};

/// Limits the runtime accepts; plans beyond them are rejected with an error
/// naming the limit.
struct PlanLimits {
  static constexpr uint32_t maxRanks = 65536;
  static constexpr uint32_t maxChannels = 32;
  static constexpr uint32_t maxThreadblocksPerRank = 1024;
  static constexpr uint32_t maxStepsPerThreadblock = 1u << 24;
  static constexpr uint32_t maxChunks = 1u << 28; ///< Per buffer.
  static constexpr uint32_t maxConnectionDepth = 64;
  static constexpr uint32_t maxDepsPerStep = 1024;
  static constexpr uint32_t maxInstances = 32;
  static constexpr uint64_t maxFileBytes = 4ull << 30;
  static constexpr uint32_t maxNameBytes = 1024; ///< PlanInfo::name, in bytes.
};

} // namespace coll

#endif // COLL_RUNTIME_PLAN_H
