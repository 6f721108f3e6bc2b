//===- FuseSteps.cpp - Receive-and-forward steps --------------------------===//
//
// Pass 6: a receive that the order pass placed right before the send of what
// it received becomes one step that forwards the data as it arrives:
// recv + send = rcs, recv-reduce + send = rrcs, and rrs when the reduced
// value is dead once sent (nothing else reads it, and it is overwritten
// later or lives in scratch), which saves the store.
//
//===----------------------------------------------------------------------===//

#include "Parallel.h"
#include "coll/Compiler/Lowering.h"

using namespace coll;
using namespace coll::compiler;

void compiler::fuseSteps(Schedule &s) {
  const Dag &dag = s.dag;
  parallelForEach(s.ranks.size(), [&](size_t r) {
    RankSchedule &rs = s.ranks[r];
    for (ThreadblockSchedule &tb : rs.tbs) {
      std::vector<uint32_t> kept;
      kept.reserve(tb.steps.size());
      for (size_t i = 0; i < tb.steps.size(); ++i) {
        Step &first = rs.steps[tb.steps[i]];
        kept.push_back(tb.steps[i]);
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
