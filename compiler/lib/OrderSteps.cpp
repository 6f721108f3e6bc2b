//===- OrderSteps.cpp - One global order for every threadblock ------------===//
//
// Pass 5: every step gets a key, and each threadblock runs its steps by
// increasing key. The key of an operation is (DAG depth, program order):
// depth grows along every dependency, so it is a topological order, and a
// send and its receive share it, so both ends of every connection agree on
// message order. Sorting by depth first lets independent operations (the N
// chunks of a ring) proceed side by side instead of one after the other.
// Within a depth, steps that send or copy go before steps that only
// receive (stepKey()), so a threadblock that both sends and receives does
// not hold back data that is ready.
//
// A receive whose data the same threadblock sends on next is keyed just
// before that send, so the fuse pass can merge the two (a ring's
// receive-reduce-forward). Such pairs sort first within their depth, so a
// forwarded message and a final one arriving on the same connection keep
// their order. Moving a receive later is done only where no step that
// depends on it comes in between, and pairs are undone on any connection
// whose two ends would then disagree on order.
//
//===----------------------------------------------------------------------===//

#include "Parallel.h"
#include "coll/Compiler/Lowering.h"

#include "llvm/ADT/DenseMap.h"

using namespace coll;
using namespace coll::compiler;

namespace {
/// Whether \p st only waits for a message (it sends nothing).
bool isReceiveOnly(const Step &st) {
  return st.recvConn != NoIndex && st.sendConn == NoIndex;
}
} // namespace

void compiler::orderSteps(Schedule &s, bool pairForwards) {
  const Dag &dag = s.dag;
  const Trace &t = *s.trace;
  size_t nops = t.ops.size();

  // Successors of each operation (the DAG stores predecessors).
  std::vector<uint64_t> succBegin;
  std::vector<uint32_t> succ;
  dagSuccessors(dag, succBegin, succ);

  // Candidate forwards: a receive and, on the same threadblock, the send of
  // exactly the chunks it wrote, reading the value it wrote.
  // Each operation is received on at most one rank: its receive step there.
  std::vector<uint32_t> recvOfOp(nops, NoIndex);
  parallelForEach(s.ranks.size(), [&](size_t rank) {
    RankSchedule &rs = s.ranks[rank];
    for (uint32_t i = 0; i < rs.steps.size(); ++i) {
      Step &st = rs.steps[i];
      st.key = stepKey(dag, st.traceOp, false, false, isReceiveOnly(st));
      if (st.recvConn != NoIndex)
        recvOfOp[st.traceOp] = i;
    }
    for (uint32_t j = 0; j < rs.steps.size() && pairForwards; ++j) {
      Step &send = rs.steps[j];
      if (send.op != Opcode::Send)
        continue;
      // The writer's receive must be on this rank (other ranks' entries of
      // recvOfOp are theirs to write).
      uint32_t writer = dag.srcWriter[send.traceOp];
      if (writer == NoIndex || t.ops[writer].dst.rank != rank || t.ops[writer].src.rank == rank ||
          recvOfOp[writer] == NoIndex || t.ops[writer].phase != t.ops[send.traceOp].phase)
        continue;
      Step &recv = rs.steps[recvOfOp[writer]];
      if (recv.tb != send.tb || recv.forwardTo != NoIndex || recv.dstBuf != send.srcBuf ||
          recv.dstOff != send.srcOff || recv.count != send.count)
        continue;
      // Moving the receive to the send's key must not pass a step that
      // depends on the receive.
      uint64_t pairKey = stepKey(dag, send.traceOp, true, false);
      bool legal = true;
      for (uint64_t e = succBegin[recv.traceOp]; e < succBegin[recv.traceOp + 1] && legal; ++e)
        legal = succ[e] == send.traceOp || stepKey(dag, succ[e], false, false) > pairKey;
      if (!legal)
        continue;
      recv.forwardTo = j;
      recv.key = pairKey;
      send.key = stepKey(dag, send.traceOp, true, true);
    }
  });

  auto sortTbs = [&](RankSchedule &rs) {
    for (ThreadblockSchedule &tb : rs.tbs)
      std::stable_sort(tb.steps.begin(), tb.steps.end(),
                       [&](uint32_t a, uint32_t b) { return rs.steps[a].key < rs.steps[b].key; });
  };
  parallelForEach(s.ranks.size(), [&](size_t rank) { sortTbs(s.ranks[rank]); });

  // Both ends of every connection must see the same message order; where a
  // moved receive breaks that, keep that connection's receives in place.
  for (bool changed = true; changed;) {
    changed = false;
    std::vector<std::vector<uint32_t>> sends(s.connections.size()), recvs(s.connections.size());
    for (RankSchedule &rs : s.ranks)
      for (ThreadblockSchedule &tb : rs.tbs)
        for (uint32_t i : tb.steps) {
          const Step &st = rs.steps[i];
          if (st.sendConn != NoIndex)
            sends[st.sendConn].push_back(st.traceOp);
          if (st.recvConn != NoIndex)
            recvs[st.recvConn].push_back(st.traceOp);
        }
    for (uint32_t c = 0; c < s.connections.size(); ++c) {
      if (sends[c] == recvs[c])
        continue;
      // Undo the pairs at both ends of this connection.
      for (uint32_t rank : {s.connections[c].from, s.connections[c].to}) {
        RankSchedule &rs = s.ranks[rank];
        for (Step &st : rs.steps) {
          if (st.forwardTo == NoIndex)
            continue;
          Step &send = rs.steps[st.forwardTo];
          if (st.recvConn != c && send.sendConn != c)
            continue;
          st.key = stepKey(dag, st.traceOp, false, false, isReceiveOnly(st));
          send.key = stepKey(dag, send.traceOp, false, false, isReceiveOnly(send));
          st.forwardTo = NoIndex;
          changed = true;
        }
        sortTbs(rs);
      }
    }
  }
}
