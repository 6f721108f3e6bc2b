//===- OrderBySlots.cpp - An order that fits the connection depth ---------===//
//
// The order pass's fallback. Ordering by DAG depth sends everything a
// threadblock holds at one depth before it receives; with fewer slots per
// connection than those sends, every rank of a ring can be stuck in its
// second send while its successor is stuck in its own (a ring
// reduce-scatter of two chunks per block at depth 1). An interleaved order
// (send, receive and forward, send again) runs.
//
// This pass finds such an order by running the plan in rounds, as if every
// threadblock ran at once: in each round, each threadblock takes, among the
// next few steps of its depth order, the first one that can run (a receive
// whose message is at the head of its connection, a send with a free slot,
// every operation it depends on finished), so a blocked send no longer
// holds back the receive that would free its peer.
// The order of execution becomes the steps' keys, which keeps every rule
// of the order pass: each rank runs dependencies first, and both ends of a
// connection see its messages in the order they were sent. Nothing is
// paired for fusion. It is deterministic, and linear in the steps times the
// look-ahead.
//
// A step waits here for the whole of every operation it depends on (its
// send and its receive), which is stricter than the runtime, where a step
// waits only for steps of its own rank. The deadlock check proves the
// order found, as any other.
//
//===----------------------------------------------------------------------===//

#include "coll/Compiler/Lowering.h"

#include <algorithm>
#include <array>
#include <deque>

using namespace coll;
using namespace coll::compiler;

namespace {
/// How many unfinished steps of its order a threadblock looks at.
constexpr uint32_t LookAhead = 64;
} // namespace

bool compiler::orderStepsBySlots(Schedule &s) {
  const Dag &dag = s.dag;
  const size_t nops = s.trace->ops.size();

  // Threadblocks, numbered globally, and where each operation has steps.
  std::vector<uint32_t> base(s.ranks.size() + 1, 0);
  for (size_t r = 0; r < s.ranks.size(); ++r)
    base[r + 1] = base[r] + uint32_t(s.ranks[r].tbs.size());
  const uint32_t ntbs = base.back();
  std::vector<uint32_t> rankOf(ntbs);
  for (uint32_t r = 0; r < s.ranks.size(); ++r)
    for (uint32_t g = base[r]; g < base[r + 1]; ++g)
      rankOf[g] = r;
  // Steps left per operation (a transfer has two), and the threadblocks
  // that hold them (at most two).
  std::vector<uint8_t> left(nops, 0);
  std::vector<std::array<uint32_t, 2>> tbsOf(nops, {NoIndex, NoIndex});
  for (uint32_t r = 0; r < s.ranks.size(); ++r)
    for (const Step &st : s.ranks[r].steps) {
      if (st.dead || st.tb == NoIndex)
        continue;
      uint8_t &n = left[st.traceOp];
      if (n < 2)
        tbsOf[st.traceOp][n] = base[r] + st.tb;
      ++n;
    }

  // Successors, to wake the threadblocks waiting for an operation.
  std::vector<uint64_t> succBegin;
  std::vector<uint32_t> succ;
  dagSuccessors(dag, succBegin, succ);

  // A rank runs a phase (after a `fence`) once every step of the phases
  // before it has run: steps left per rank and phase.
  std::vector<std::vector<uint64_t>> phaseLeft(s.ranks.size());
  std::vector<uint32_t> phaseNow(s.ranks.size(), 0);
  for (uint32_t r = 0; r < s.ranks.size(); ++r)
    for (const ThreadblockSchedule &tb : s.ranks[r].tbs)
      for (uint32_t i : tb.steps) {
        const uint32_t phase = s.trace->ops[s.ranks[r].steps[i].traceOp].phase;
        if (phaseLeft[r].size() <= phase)
          phaseLeft[r].resize(phase + 1, 0);
        ++phaseLeft[r][phase];
      }
  for (uint32_t r = 0; r < s.ranks.size(); ++r)
    while (phaseNow[r] < phaseLeft[r].size() && phaseLeft[r][phaseNow[r]] == 0)
      ++phaseNow[r];

  // Per threadblock: its steps in the current order, which have run, and
  // the first that has not.
  std::vector<std::vector<uint8_t>> ran(ntbs);
  std::vector<uint32_t> head(ntbs, 0);
  for (uint32_t g = 0; g < ntbs; ++g)
    ran[g].assign(s.ranks[rankOf[g]].tbs[g - base[rankOf[g]]].steps.size(), 0);

  const size_t nconn = s.connections.size();
  std::vector<std::deque<uint32_t>> inFlight(nconn);

  auto ready = [&](uint32_t r, const Step &st) {
    if (s.trace->ops[st.traceOp].phase != phaseNow[r])
      return false;
    if (st.recvConn != NoIndex &&
        (inFlight[st.recvConn].empty() || inFlight[st.recvConn].front() != st.traceOp))
      return false;
    if (st.sendConn != NoIndex && inFlight[st.sendConn].size() >= s.connectionDepth)
      return false;
    for (uint64_t e = dag.predBegin[st.traceOp]; e < dag.predBegin[st.traceOp + 1]; ++e)
      if (left[dag.preds[e]] != 0)
        return false;
    return true;
  };

  std::vector<std::vector<uint64_t>> keptKeys(s.ranks.size());
  for (uint32_t r = 0; r < s.ranks.size(); ++r)
    for (const Step &st : s.ranks[r].steps)
      keptKeys[r].push_back(st.key);

  // Rounds, as if every threadblock ran at once: in each, every threadblock
  // that may move picks its step from the state the round began with, then
  // all picked steps run. Picks cannot conflict: a connection has one
  // sender and one receiver, a receive takes a message that was there
  // already, a send counts the slots taken at the start, and a step whose
  // dependencies had finished depends on no step of the round.
  std::vector<uint32_t> active(ntbs), next;
  for (uint32_t g = 0; g < ntbs; ++g)
    active[g] = g;
  std::vector<uint8_t> woken(ntbs, 0);
  auto wake = [&](uint32_t g) {
    if (g != NoIndex && !woken[g]) {
      woken[g] = 1;
      next.push_back(g);
    }
  };
  std::vector<std::pair<uint32_t, uint32_t>> picked; // (threadblock, position)

  uint64_t clock = 0;
  uint64_t remaining = 0;
  for (uint32_t g = 0; g < ntbs; ++g)
    remaining += ran[g].size();
  while (!active.empty()) {
    picked.clear();
    for (uint32_t g : active) {
      const uint32_t r = rankOf[g];
      const RankSchedule &rs = s.ranks[r];
      const std::vector<uint32_t> &order = rs.tbs[g - base[r]].steps;
      while (head[g] < order.size() && ran[g][head[g]])
        ++head[g];
      uint32_t seen = 0;
      for (uint32_t p = head[g]; p < order.size() && seen < LookAhead; ++p) {
        if (ran[g][p])
          continue;
        ++seen;
        if (ready(r, rs.steps[order[p]])) {
          picked.emplace_back(g, p);
          break;
        }
      }
    }
    next.clear();
    for (auto [g, p] : picked) {
      const uint32_t r = rankOf[g];
      RankSchedule &rs = s.ranks[r];
      Step &st = rs.steps[rs.tbs[g - base[r]].steps[p]];
      // Consume, then produce.
      if (st.recvConn != NoIndex) {
        const Connection &c = s.connections[st.recvConn];
        inFlight[st.recvConn].pop_front();
        wake(base[c.from] + c.sendTb); // A slot is free.
      }
      if (st.sendConn != NoIndex) {
        const Connection &c = s.connections[st.sendConn];
        inFlight[st.sendConn].push_back(st.traceOp);
        wake(base[c.to] + c.recvTb); // Data arrived.
      }
      st.key = clock++;
      ran[g][p] = 1;
      --remaining;
      wake(g); // Its next step.
      if (--left[st.traceOp] == 0)
        for (uint64_t e = succBegin[st.traceOp]; e < succBegin[st.traceOp + 1]; ++e)
          for (uint32_t other : tbsOf[succ[e]])
            wake(other);
    }
    // Phases end once the round's steps have all run.
    for (auto [g, p] : picked) {
      const uint32_t r = rankOf[g];
      const RankSchedule &rs = s.ranks[r];
      uint64_t &n =
          phaseLeft[r][s.trace->ops[rs.steps[rs.tbs[g - base[r]].steps[p]].traceOp].phase];
      if (--n != 0)
        continue;
      const uint32_t was = phaseNow[r];
      while (phaseNow[r] < phaseLeft[r].size() && phaseLeft[r][phaseNow[r]] == 0)
        ++phaseNow[r];
      if (phaseNow[r] != was)
        for (uint32_t other = base[r]; other < base[r + 1]; ++other)
          wake(other);
    }
    std::sort(next.begin(), next.end());
    for (uint32_t g : next)
      woken[g] = 0;
    active.swap(next);
  }
  if (remaining != 0) {
    for (uint32_t r = 0; r < s.ranks.size(); ++r)
      for (size_t i = 0; i < s.ranks[r].steps.size(); ++i)
        s.ranks[r].steps[i].key = keptKeys[r][i];
    return false;
  }
  for (RankSchedule &rs : s.ranks)
    for (ThreadblockSchedule &tb : rs.tbs)
      std::stable_sort(tb.steps.begin(), tb.steps.end(),
                       [&](uint32_t a, uint32_t b) { return rs.steps[a].key < rs.steps[b].key; });
  return true;
}
