//===- AssignThreadblocks.cpp - Steps to threadblocks ---------------------===//
//
// Pass 4: every connection end is owned by one threadblock of its rank, and
// a threadblock owns at most one send and one receive connection, both on
// one channel. The program's hints (tb, sendtb, recvtb) are honoured and
// checked; the remaining connections are paired automatically, a receive
// connection with the send connection its data flows on to (so a receive
// and the following send can fuse), then leftovers with the same peer, then
// in order. Local steps run on the threadblock that received their source.
//
//===----------------------------------------------------------------------===//

#include "coll/Compiler/Lowering.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <map>

using namespace coll;
using namespace coll::compiler;
using llvm::Twine;

namespace {

class Assigner {
public:
  Assigner(Schedule &s, DiagnosticEngine &diag) : s(s), t(*s.trace), diag(diag) {}
  bool run();

private:
  bool assignRank(uint32_t rank);
  llvm::SMRange site(const Step &st) const { return t.sites[t.ops[st.traceOp].site]->getRange(); }
  std::string describe(uint32_t conn) const {
    const Connection &c = s.connections[conn];
    return "rank " + std::to_string(c.from) + " -> rank " + std::to_string(c.to) + " (channel " +
           std::to_string(c.channel) + ")";
  }

  Schedule &s;
  const Trace &t;
  DiagnosticEngine &diag;
  std::vector<uint32_t> recvConnOfOp; ///< Per trace operation; NoIndex if local.
};

} // namespace

bool Assigner::assignRank(uint32_t rank) {
  RankSchedule &rs = s.ranks[rank];
  std::vector<ThreadblockSchedule> &tbs = rs.tbs;
  std::map<int16_t, uint32_t> hinted;                      // program number -> tb index
  llvm::DenseMap<uint32_t, uint32_t> sendOwner, recvOwner; // conn -> tb
  llvm::DenseMap<uint32_t, uint32_t> firstUse;             // conn -> step (for notes)

  auto newTb = [&](int16_t hint) {
    tbs.emplace_back();
    tbs.back().hint = hint;
    return uint32_t(tbs.size() - 1);
  };
  auto channelOf = [&](const ThreadblockSchedule &tb) -> int64_t {
    if (tb.sendConn != NoIndex)
      return s.connections[tb.sendConn].channel;
    if (tb.recvConn != NoIndex)
      return s.connections[tb.recvConn].channel;
    return -1;
  };
  // Gives connection `conn` (a send connection when `isSend`) to `tb`.
  auto own = [&](uint32_t tb, uint32_t conn, bool isSend, uint32_t stepIdx) -> bool {
    auto &owners = isSend ? sendOwner : recvOwner;
    firstUse.try_emplace(conn, stepIdx);
    auto it = owners.find(conn);
    if (it != owners.end()) {
      if (it->second == tb)
        return true;
      diag.error(site(rs.steps[stepIdx]),
                 "connection " + describe(conn) +
                     " would belong to two threadblocks; a connection belongs to one");
      diag.note(site(rs.steps[firstUse[conn]]), "its other threadblock is chosen here");
      return false;
    }
    ThreadblockSchedule &b = tbs[tb];
    uint32_t &slot = isSend ? b.sendConn : b.recvConn;
    if (slot != NoIndex && slot != conn) {
      diag.error(site(rs.steps[stepIdx]),
                 "threadblock " + Twine(b.hint) + " of rank " + Twine(rank) + " would " +
                     (isSend ? "send" : "receive") + " on two connections, " + describe(slot) +
                     " and " + describe(conn) + "; a threadblock owns at most one of each");
      diag.note(site(rs.steps[firstUse[slot]]), "the other connection is used here");
      return false;
    }
    int64_t ch = channelOf(b);
    if (ch >= 0 && ch != s.connections[conn].channel) {
      diag.error(site(rs.steps[stepIdx]), "threadblock " + Twine(b.hint) + " of rank " +
                                              Twine(rank) + " would use channels " + Twine(ch) +
                                              " and " + Twine(s.connections[conn].channel) +
                                              "; a threadblock's connections share one channel");
      return false;
    }
    slot = conn;
    owners[conn] = tb;
    return true;
  };

  // 1. Hinted steps, in the order of their program numbers.
  for (uint32_t i = 0; i < rs.steps.size(); ++i)
    if (rs.steps[i].tbHint >= 0 && !hinted.count(rs.steps[i].tbHint))
      hinted[rs.steps[i].tbHint] = 0;
  for (auto &[hint, index] : hinted)
    index = newTb(hint);
  for (uint32_t i = 0; i < rs.steps.size(); ++i) {
    Step &st = rs.steps[i];
    if (st.tbHint < 0)
      continue;
    st.tb = hinted[st.tbHint];
    if (st.sendConn != NoIndex && !own(st.tb, st.sendConn, true, i))
      return false;
    if (st.recvConn != NoIndex && !own(st.tb, st.recvConn, false, i))
      return false;
  }

  // 2. Pair free receive and send connections along the data flow.
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> flow; // (recv, send) -> chunks
  // The receive connection on this rank of the operation that wrote a step's
  // source, if that operation was received here.
  auto recvConnOfWriter = [&](uint32_t writer) -> uint32_t {
    if (writer == NoIndex || t.ops[writer].dst.rank != rank)
      return NoIndex;
    return recvConnOfOp[writer];
  };
  std::vector<uint32_t> freeSend, freeRecv;
  llvm::DenseSet<uint32_t> listed;
  for (const Step &st : rs.steps) {
    if (st.sendConn != NoIndex && !sendOwner.count(st.sendConn) &&
        listed.insert(st.sendConn).second)
      freeSend.push_back(st.sendConn);
    if (st.recvConn != NoIndex && !recvOwner.count(st.recvConn) &&
        listed.insert(st.recvConn).second)
      freeRecv.push_back(st.recvConn);
    if (st.sendConn == NoIndex || sendOwner.count(st.sendConn))
      continue;
    uint32_t recv = recvConnOfWriter(s.dag.srcWriter[st.traceOp]);
    if (recv != NoIndex && !recvOwner.count(recv) &&
        s.connections[recv].channel == s.connections[st.sendConn].channel)
      flow[{recv, st.sendConn}] += st.count;
  }
  std::vector<std::pair<uint64_t, std::pair<uint32_t, uint32_t>>> ranked;
  for (auto &[pair, chunks] : flow)
    ranked.push_back({chunks, pair});
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto &a, const auto &b) { return a.first > b.first; });
  for (auto &[chunks, pair] : ranked) {
    auto [recv, send] = pair;
    if (recvOwner.count(recv) || sendOwner.count(send))
      continue;
    uint32_t tb = newTb(-1);
    tbs[tb].recvConn = recv;
    tbs[tb].sendConn = send;
    recvOwner[recv] = sendOwner[send] = tb;
  }
  // Leftovers: a receive and a send with the same peer and channel share a
  // threadblock, then the rest pair up in order, then singles.
  auto stillFree = [&](std::vector<uint32_t> &v, llvm::DenseMap<uint32_t, uint32_t> &owners) {
    v.erase(std::remove_if(v.begin(), v.end(), [&](uint32_t c) { return owners.count(c); }),
            v.end());
  };
  stillFree(freeRecv, recvOwner);
  stillFree(freeSend, sendOwner);
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> sendTo; // (peer, channel) -> conn
  for (uint32_t send : freeSend)
    sendTo[{s.connections[send].to, s.connections[send].channel}] = send;
  for (uint32_t recv : freeRecv) {
    const Connection &rc = s.connections[recv];
    auto it = sendTo.find({rc.from, rc.channel});
    if (it == sendTo.end())
      continue;
    uint32_t tb = newTb(-1);
    tbs[tb].recvConn = recv;
    tbs[tb].sendConn = it->second;
    recvOwner[recv] = sendOwner[it->second] = tb;
    sendTo.erase(it);
  }
  stillFree(freeRecv, recvOwner);
  stillFree(freeSend, sendOwner);
  std::map<uint32_t, std::vector<uint32_t>> sendsByChannel; // in order, consumed from the front
  for (uint32_t send : freeSend)
    sendsByChannel[s.connections[send].channel].push_back(send);
  std::map<uint32_t, size_t> nextSend;
  for (uint32_t recv : freeRecv) {
    uint32_t tb = newTb(-1);
    tbs[tb].recvConn = recv;
    recvOwner[recv] = tb;
    uint32_t ch = s.connections[recv].channel;
    auto &queue = sendsByChannel[ch];
    size_t &next = nextSend[ch];
    if (next < queue.size()) {
      tbs[tb].sendConn = queue[next];
      sendOwner[queue[next]] = tb;
      ++next;
    }
  }
  for (auto &[ch, queue] : sendsByChannel)
    for (size_t j = nextSend[ch]; j < queue.size(); ++j) {
      uint32_t tb = newTb(-1);
      tbs[tb].sendConn = queue[j];
      sendOwner[queue[j]] = tb;
    }

  // 3. Every unhinted step follows its connection; local steps follow the
  // threadblock that received their source, else the first one.
  for (Step &st : rs.steps) {
    if (st.tb != NoIndex)
      continue;
    if (st.sendConn != NoIndex) {
      st.tb = sendOwner[st.sendConn];
    } else if (st.recvConn != NoIndex) {
      st.tb = recvOwner[st.recvConn];
    } else {
      uint32_t recv = recvConnOfWriter(s.dag.srcWriter[st.traceOp]);
      if (recv != NoIndex)
        st.tb = recvOwner[recv];
      else
        st.tb = tbs.empty() ? newTb(-1) : 0;
    }
  }
  for (uint32_t i = 0; i < rs.steps.size(); ++i)
    tbs[rs.steps[i].tb].steps.push_back(i);
  for (auto &[conn, tb] : sendOwner)
    s.connections[conn].sendTb = tb;
  for (auto &[conn, tb] : recvOwner)
    s.connections[conn].recvTb = tb;

  if (tbs.size() > PlanLimits::maxThreadblocksPerRank) {
    diag.error(t.algorithm->nameRange, "rank " + Twine(rank) + " needs " + Twine(tbs.size()) +
                                           " threadblocks for N = " + Twine(t.nranks) +
                                           "; the runtime's limit is " +
                                           Twine(PlanLimits::maxThreadblocksPerRank) + " per rank");
    return false;
  }
  return true;
}

bool Assigner::run() {
  recvConnOfOp.assign(t.ops.size(), NoIndex);
  for (const RankSchedule &rs : s.ranks)
    for (const Step &st : rs.steps)
      if (st.recvConn != NoIndex)
        recvConnOfOp[st.traceOp] = st.recvConn;
  for (uint32_t r = 0; r < t.nranks; ++r)
    if (!assignRank(r))
      return false;
  return true;
}

bool compiler::assignThreadblocks(Schedule &s, DiagnosticEngine &diag) {
  return Assigner(s, diag).run();
}
