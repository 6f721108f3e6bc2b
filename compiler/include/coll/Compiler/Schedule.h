//===- Schedule.h - Per-rank instruction streams being built ----*- C++ -*-===//
/// \file
/// The IR of the lowering passes: the trace's dependence DAG, connections,
/// and per rank the steps (sends, receives, local copies and reductions) that
/// threadblock assignment, ordering, fusion, scratch allocation and the
/// dependency pass refine until it maps one to one onto a runtime plan.
//===----------------------------------------------------------------------===//
#ifndef COLL_COMPILER_SCHEDULE_H
#define COLL_COMPILER_SCHEDULE_H

#include "coll/Compiler/Trace.h"
#include "coll/Runtime/Plan.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <vector>

namespace coll::compiler {

constexpr uint32_t NoIndex = UINT32_MAX;

/// The dependence DAG of a trace: edges from each operation to the earlier
/// operations it must follow (RAW, WAR, WAW on any slot), and each
/// operation's depth (longest path from a source; sources have depth 1).
struct Dag {
  std::vector<uint32_t> depth;     ///< Per operation.
  std::vector<uint64_t> predBegin; ///< CSR offsets into preds, one past per op.
  std::vector<uint32_t> preds;
  /// Data dependences, and Fence: an earlier phase on a rank both touch.
  enum EdgeKind : uint8_t { Raw, War, Waw, Fence };
  std::vector<EdgeKind> predKinds; ///< Parallel to preds.

  // Value flow, for threadblock pairing and fusion (per operation):
  /// The operation that wrote every chunk this one reads as its source, or
  /// NoIndex (none, or several).
  std::vector<uint32_t> srcWriter;
  /// The one operation that reads what this one writes, or NoIndex (none,
  /// or several).
  std::vector<uint32_t> soleReader;
  /// Every chunk this operation writes is overwritten later.
  std::vector<uint8_t> overwritten;
};

/// A directed connection: a FIFO from one rank to another on a channel.
struct Connection {
  uint32_t from = 0, to = 0, channel = 0;
  uint32_t sendTb = NoIndex; ///< Owning threadblock on `from`.
  uint32_t recvTb = NoIndex; ///< Owning threadblock on `to`.
};

/// One step of one rank.
struct Step {
  Opcode op = Opcode::Nop;
  uint16_t srcBuf = 0, dstBuf = 0; ///< Trace buffer numbers (scratch: 2 + k).
  uint32_t srcOff = 0, dstOff = 0, count = 0;
  uint32_t traceOp = 0;            ///< The trace operation it comes from.
  uint32_t fusedTraceOp = NoIndex; ///< A fused step's second operation.
  uint32_t sendConn = NoIndex, recvConn = NoIndex;
  uint32_t tb = NoIndex;
  int16_t tbHint = -1; ///< From the program's tb/sendtb/recvtb.
  bool dead = false;   ///< Removed by fusion.
  /// Position in the rank's global order (set by the order pass): every
  /// threadblock runs its steps by increasing key, both ends of a connection
  /// see messages in key order, and every dependency points to a smaller key.
  uint64_t key = 0;
  /// A receive the order pass placed right before the send of what it
  /// received: the index of that send step (fused by the fuse pass).
  uint32_t forwardTo = NoIndex;
};

/// A step key: the DAG depth of the operation that places it, then its
/// class (0: a receive-and-forward pair, 1: any other step), then whether
/// it only receives (1) or sends or copies (0), then program order, then
/// which half of a pair (0: the receive, 1: the send). At one depth a
/// threadblock thus sends what it holds before it waits for what arrives:
/// the steps of one depth do not depend on each other, and a rank that
/// both sends and receives at once (a shift, a halo exchange) does not hold
/// its send back until its peer's message arrives. Both ends of a
/// connection still agree: its steps are all sends at one end and all
/// receives at the other.
inline uint64_t stepKey(const Dag &dag, uint32_t op, bool pair, bool second,
                        bool receiveOnly = false) {
  return (uint64_t(dag.depth[op]) << 35) | (uint64_t(pair ? 0 : 1) << 34) |
         (uint64_t(!pair && receiveOnly ? 1 : 0) << 33) | (uint64_t(op) << 1) | (second ? 1 : 0);
}

/// A threadblock of a rank: at most one send and one receive connection.
struct ThreadblockSchedule {
  uint32_t sendConn = NoIndex, recvConn = NoIndex;
  int16_t hint = -1;           ///< The program's number for it, if any.
  std::vector<uint32_t> steps; ///< Step indices, in execution order.
  /// Cross-threadblock waits, set by the dependency pass: those of the step
  /// at position p are depList[depStart[p] .. depStart[p + 1]).
  std::vector<Dependency> depList;
  std::vector<uint32_t> depStart;
  /// The waits of the step at position \p p (none before the dependency pass).
  llvm::ArrayRef<Dependency> depsOf(size_t p) const {
    if (p + 1 >= depStart.size())
      return {};
    return llvm::ArrayRef<Dependency>(depList).slice(depStart[p], depStart[p + 1] - depStart[p]);
  }
};

/// Everything one rank executes.
struct RankSchedule {
  std::vector<Step> steps;
  std::vector<ThreadblockSchedule> tbs;
  /// Scratch: physical chunk offset of each scratch buffer's chunk
  /// (per buffer, per index), set by scratch allocation.
  std::vector<std::vector<uint32_t>> scratchMap;
  uint32_t scratchChunks = 0;
};

/// The lowering IR.
struct Schedule {
  const Trace *trace = nullptr;
  Dag dag;
  std::vector<Connection> connections;
  std::vector<RankSchedule> ranks;
  uint32_t connectionDepth = 4;
  uint32_t numChannels = 1;
};

/// The successors of each operation of \p dag (which stores predecessors),
/// in CSR form: those of operation k are succ[begin[k] .. begin[k + 1]).
void dagSuccessors(const Dag &dag, std::vector<uint64_t> &begin, std::vector<uint32_t> &succ);

/// The steps of \p rs that survived fusion, in the rank's global key order.
std::vector<uint32_t> stepsInKeyOrder(const RankSchedule &rs);

/// Prints the per-rank, per-threadblock streams (--emit=ir, --print-after).
void printSchedule(const Schedule &s, llvm::raw_ostream &os);

/// Prints the DAG (--print-after=dag): each operation's depth and edges.
void printDag(const Trace &trace, const Dag &dag, llvm::raw_ostream &os);

/// Graphviz: the DAG, or with \p schedule the per-threadblock schedule and
/// its cross-threadblock dependencies.
void printDot(const Trace &trace, const Dag &dag, const Schedule *schedule, llvm::raw_ostream &os);

} // namespace coll::compiler

#endif // COLL_COMPILER_SCHEDULE_H
