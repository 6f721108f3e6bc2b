//===- CheckDeadlock.cpp - Prove the plan cannot block forever ------------===//
//
// Pass 9: simulate every threadblock of every rank as the runtime will run
// it: steps in order; a receive waits for a message, a send for a free slot
// among the connection's `depth`, a dependency for another threadblock's
// progress. The simulation is event driven (a blocked threadblock waits on
// the one thing it needs and is woken when that changes), so it is linear
// in the number of steps. If it ends with threadblocks still blocked, they
// wait for each other in a cycle, which is reported step by step. It also
// checks that both ends of every connection agree on the order of messages.
//
//===----------------------------------------------------------------------===//

#include "coll/Compiler/Lowering.h"

using namespace coll;
using namespace coll::compiler;
using llvm::Twine;

namespace {

enum class Wait : uint8_t { None, Data, Space, Progress };

struct TbState {
  uint32_t rank = 0, tb = 0;
  uint32_t pc = 0;
  Wait wait = Wait::None;
  uint32_t on = NoIndex; ///< Connection, or global threadblock for Progress.
  uint32_t onStep = 0;   ///< Progress: the step awaited.
};

} // namespace

bool compiler::checkDeadlock(const Schedule &s, DiagnosticEngine &diag, bool quiet) {
  const Trace &t = *s.trace;
  std::vector<uint32_t> base(s.ranks.size() + 1, 0);
  for (size_t r = 0; r < s.ranks.size(); ++r)
    base[r + 1] = base[r] + s.ranks[r].tbs.size();
  std::vector<TbState> tbs(base.back());
  for (uint32_t r = 0; r < s.ranks.size(); ++r)
    for (uint32_t b = 0; b < s.ranks[r].tbs.size(); ++b) {
      tbs[base[r] + b].rank = r;
      tbs[base[r] + b].tb = b;
    }

  size_t nconn = s.connections.size();
  std::vector<uint64_t> sent(nconn, 0), received(nconn, 0);
  std::vector<std::vector<uint32_t>> inFlight(nconn); // trace ops, FIFO order
  std::vector<size_t> inFlightHead(nconn, 0);
  std::vector<uint32_t> dataWaiter(nconn, NoIndex), spaceWaiter(nconn, NoIndex);
  std::vector<std::vector<uint32_t>> progressWaiters(tbs.size());
  std::vector<uint32_t> work;
  for (uint32_t g = 0; g < tbs.size(); ++g)
    work.push_back(g);

  auto stepOf = [&](const TbState &st) -> const Step & {
    const RankSchedule &rs = s.ranks[st.rank];
    return rs.steps[rs.tbs[st.tb].steps[st.pc]];
  };
  auto wake = [&](uint32_t &waiter) {
    if (waiter != NoIndex) {
      work.push_back(waiter);
      waiter = NoIndex;
    }
  };

  while (!work.empty()) {
    uint32_t g = work.back();
    work.pop_back();
    TbState &st = tbs[g];
    const ThreadblockSchedule &tb = s.ranks[st.rank].tbs[st.tb];
    st.wait = Wait::None;
    while (st.pc < tb.steps.size()) {
      const Step &step = stepOf(st);
      const OpcodeInfo &info = opcodeInfo(step.op);
      bool blocked = false;
      for (const Dependency &d : tb.depsOf(st.pc)) {
        uint32_t other = base[st.rank] + d.tb;
        if (tbs[other].pc <= d.step) {
          st.wait = Wait::Progress;
          st.on = other;
          st.onStep = d.step;
          progressWaiters[other].push_back(g);
          blocked = true;
          break;
        }
      }
      if (!blocked && info.recv && sent[step.recvConn] == received[step.recvConn]) {
        st.wait = Wait::Data;
        st.on = step.recvConn;
        dataWaiter[step.recvConn] = g;
        blocked = true;
      }
      if (!blocked && info.send &&
          sent[step.sendConn] - received[step.sendConn] >= s.connectionDepth) {
        st.wait = Wait::Space;
        st.on = step.sendConn;
        spaceWaiter[step.sendConn] = g;
        blocked = true;
      }
      if (blocked)
        break;
      // Execute: consume, then produce.
      if (info.recv) {
        uint32_t c = step.recvConn;
        uint32_t expected = inFlight[c][inFlightHead[c]++];
        if (expected != step.traceOp) {
          diag.error(t.sites[t.ops[step.traceOp].site]->getRange(),
                     "internal error: connection rank " + Twine(s.connections[c].from) +
                         " -> rank " + Twine(s.connections[c].to) +
                         " delivers messages out of order");
          return false;
        }
        ++received[c];
        wake(spaceWaiter[c]);
      }
      if (info.send) {
        uint32_t c = step.sendConn;
        inFlight[c].push_back(step.fusedTraceOp != NoIndex ? step.fusedTraceOp : step.traceOp);
        ++sent[c];
        wake(dataWaiter[c]);
      }
      ++st.pc;
      auto &waiters = progressWaiters[g];
      for (uint32_t w : waiters)
        work.push_back(w);
      waiters.clear();
    }
  }

  // Everyone finished?
  uint32_t stuck = NoIndex;
  for (uint32_t g = 0; g < tbs.size(); ++g)
    if (tbs[g].pc < s.ranks[tbs[g].rank].tbs[tbs[g].tb].steps.size()) {
      stuck = g;
      break;
    }
  if (stuck == NoIndex)
    return true;
  if (quiet)
    return false;

  // Follow who waits for whom until a threadblock repeats: that is the cycle.
  auto waitsFor = [&](const TbState &st) -> uint32_t {
    switch (st.wait) {
    case Wait::Data:
      return base[s.connections[st.on].from] + s.connections[st.on].sendTb;
    case Wait::Space:
      return base[s.connections[st.on].to] + s.connections[st.on].recvTb;
    case Wait::Progress:
      return st.on;
    case Wait::None:
      break;
    }
    return NoIndex;
  };
  std::vector<uint32_t> path;
  std::vector<int64_t> seenAt(tbs.size(), -1);
  uint32_t g = stuck;
  while (g != NoIndex && seenAt[g] < 0) {
    seenAt[g] = int64_t(path.size());
    path.push_back(g);
    g = waitsFor(tbs[g]);
  }
  std::vector<uint32_t> cycle(path.begin() + (g == NoIndex ? 0 : seenAt[g]), path.end());

  auto describe = [&](uint32_t gi) {
    const TbState &st = tbs[gi];
    const Step &step = stepOf(st);
    std::string what;
    const Connection *c = st.wait == Wait::Progress ? nullptr : &s.connections[st.on];
    switch (st.wait) {
    case Wait::Data:
      what = "waits for data from rank " + std::to_string(c->from);
      break;
    case Wait::Space:
      what = "waits for a free slot on its connection to rank " + std::to_string(c->to);
      break;
    case Wait::Progress:
      what = "waits for threadblock " + std::to_string(tbs[st.on].tb) + " to finish step " +
             std::to_string(st.onStep);
      break;
    case Wait::None:
      break;
    }
    return std::make_pair("rank " + std::to_string(st.rank) + " threadblock " +
                              std::to_string(st.tb) + " step " + std::to_string(st.pc) + " (" +
                              opcodeInfo(step.op).mnemonic + ") " + what,
                          t.sites[t.ops[step.traceOp].site]->getRange());
  };
  auto first = describe(cycle.front());
  diag.error(first.second, "the plan can deadlock for N = " + Twine(t.nranks) + " with " +
                               Twine(s.connectionDepth) + " slot" +
                               (s.connectionDepth == 1 ? "" : "s") + " per connection: " +
                               Twine(cycle.size()) + " steps wait for each other in a cycle");
  for (uint32_t gi : cycle) {
    auto d = describe(gi);
    diag.note(d.second, d.first);
  }
  return false;
}
