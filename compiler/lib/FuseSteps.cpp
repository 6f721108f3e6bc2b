//===- FuseSteps.cpp - Receive-and-forward steps --------------------------===//
//
// Pass 6: a receive that the order pass placed right before the send of what
// it received becomes one step that forwards the data as it arrives:
// recv + send = rcs, recv-reduce + send = rrcs, and rrs when the reduced
// value is dead once sent (nothing else reads it, and it is overwritten
// later or lives in scratch), which saves the store.
//
// Local chains: a step that writes a chunk only for the next step of its
// threadblock to copy it elsewhere (a receive or copy into a staging chunk
// that is dead afterwards) writes the final place directly, and the copy
// goes away.
//
//===----------------------------------------------------------------------===//

#include "Parallel.h"
#include "coll/Compiler/Lowering.h"

using namespace coll;
using namespace coll::compiler;

/// Whether `next` is a local copy of exactly what `first` wrote, that value
/// is dead afterwards, and no other step of the rank comes between them in
/// the global order (so nothing can observe the destination early); if so,
/// `first` writes `next`'s destination and `next` is marked dead.
static bool fuseLocalChain(const Dag &dag, const std::vector<uint64_t> &rankKeys, uint64_t lastKey,
                           Step &first, Step &next) {
  auto after = std::upper_bound(rankKeys.begin(), rankKeys.end(), lastKey);
  if (after == rankKeys.end() || *after != next.key)
    return false;
  bool retargetable =
      first.op == Opcode::Recv || first.op == Opcode::Copy || first.op == Opcode::RecvReduceCopy;
  // The operation whose value `first` writes now: the last copy it absorbed.
  uint32_t writer = first.fusedTraceOp != NoIndex ? first.fusedTraceOp : first.traceOp;
  if (!retargetable || next.op != Opcode::Copy || next.srcBuf != first.dstBuf ||
      next.srcOff != first.dstOff || next.count != first.count ||
      dag.srcWriter[next.traceOp] != writer || dag.soleReader[writer] != next.traceOp ||
      !(dag.overwritten[writer] || first.dstBuf >= FirstScratchBuffer))
    return false;
  first.dstBuf = next.dstBuf;
  first.dstOff = next.dstOff;
  first.fusedTraceOp = next.traceOp;
  next.dead = true;
  return true;
}

void compiler::fuseSteps(Schedule &s, bool localChains) {
  const Dag &dag = s.dag;
  parallelForEach(s.ranks.size(), [&](size_t r) {
    RankSchedule &rs = s.ranks[r];
    std::vector<uint64_t> rankKeys;
    if (localChains) {
      for (const ThreadblockSchedule &tb : rs.tbs)
        for (uint32_t i : tb.steps)
          rankKeys.push_back(rs.steps[i].key);
      std::sort(rankKeys.begin(), rankKeys.end());
    }
    for (ThreadblockSchedule &tb : rs.tbs) {
      std::vector<uint32_t> kept;
      kept.reserve(tb.steps.size());
      for (size_t i = 0; i < tb.steps.size(); ++i) {
        Step &first = rs.steps[tb.steps[i]];
        kept.push_back(tb.steps[i]);
        // A chain of copies through dead staging chunks collapses entirely.
        bool chained = false;
        uint64_t lastKey = first.key;
        // Never across a fence: the copy after it must not happen before it.
        while (localChains && i + 1 < tb.steps.size() &&
               s.trace->ops[rs.steps[tb.steps[i + 1]].traceOp].phase ==
                   s.trace->ops[first.traceOp].phase &&
               fuseLocalChain(dag, rankKeys, lastKey, first, rs.steps[tb.steps[i + 1]])) {
          ++i;
          lastKey = rs.steps[tb.steps[i]].key;
          chained = true;
        }
        if (chained)
          continue;
        if (first.forwardTo == NoIndex || i + 1 == tb.steps.size() ||
            tb.steps[i + 1] != first.forwardTo)
          continue;
        Step &next = rs.steps[first.forwardTo];
        bool dead = dag.soleReader[first.traceOp] == next.traceOp &&
                    (dag.overwritten[first.traceOp] || first.dstBuf >= FirstScratchBuffer);
        if (first.op == Opcode::Recv) {
          first.op = Opcode::RecvCopySend;
        } else if (dead) {
          first.op = Opcode::RecvReduceSend;
          first.dstBuf = 0;
          first.dstOff = 0;
        } else {
          first.op = Opcode::RecvReduceCopySend;
        }
        first.sendConn = next.sendConn;
        first.fusedTraceOp = next.traceOp;
        next.dead = true;
        ++i;
      }
      tb.steps = std::move(kept);
    }
  });
}
