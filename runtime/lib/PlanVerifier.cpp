//===- PlanVerifier.cpp - Checking plans ----------------------------------===//
//
// validatePlan's checks: the plan info, every rank's threadblocks and steps
// (ranges, peers, dependencies, cycles), and that both ends of every
// connection agree. They serve loaded plans and plans built in memory alike.
//
//===----------------------------------------------------------------------===//

#include "PlanFormat.h"
#include "coll/Runtime/Executor.h"

#include <algorithm>
#include <tuple>
#include <vector>

namespace coll {

using namespace planformat;

Status planformat::checkInfo(const PlanInfo &info) {
  if (!isValidCollective(info.collective))
    return fail("unknown collective ", unsigned(info.collective));
  if (!isValidProtocol(info.protocol))
    return fail("unknown protocol ", unsigned(info.protocol));
  if (info.name.size() > PlanLimits::maxNameBytes)
    return fail("name length ", info.name.size(), " exceeds the limit maxNameBytes (",
                PlanLimits::maxNameBytes, ")");
  if (info.nranks == 0)
    return fail("nranks is 0, must be at least 1");
  if (info.nranks > PlanLimits::maxRanks)
    return fail("nranks ", info.nranks, " exceeds the limit maxRanks (", PlanLimits::maxRanks, ")");
  if (info.root >= info.nranks)
    return fail("root ", info.root, " is not a rank (nranks ", info.nranks, ")");
  // One encoding per plan: a collective without a root has root 0.
  if (info.root != 0 && !collectiveInfo(info.collective).rooted)
    return fail("root ", info.root, " given, but ", collectiveName(info.collective),
                " has no root (it must be 0)");
  if (info.inputChunks > PlanLimits::maxChunks)
    return fail("inputChunks ", info.inputChunks, " exceeds the limit maxChunks (",
                PlanLimits::maxChunks, ")");
  if (info.outputChunks > PlanLimits::maxChunks)
    return fail("outputChunks ", info.outputChunks, " exceeds the limit maxChunks (",
                PlanLimits::maxChunks, ")");
  if (info.connectionDepth == 0)
    return fail("connectionDepth is 0, must be at least 1");
  if (info.connectionDepth > PlanLimits::maxConnectionDepth)
    return fail("connectionDepth ", info.connectionDepth, " exceeds the limit maxConnectionDepth (",
                PlanLimits::maxConnectionDepth, ")");
  if (info.instances == 0)
    return fail("instances is 0, must be at least 1");
  if (info.instances > PlanLimits::maxInstances)
    return fail("instances ", info.instances, " exceeds the limit maxInstances (",
                PlanLimits::maxInstances, ")");
  // The buffers' shape for the collective, and an in-place form where the
  // plan is in place: what every executor needs before it runs a call.
  if (Result<uint32_t> c = planChunksPerUnit(info); !c)
    return c.getStatus();
  return Status::success();
}

namespace {

/// Checks a threadblock's peer: -1 or another rank.
Status checkPeer(const std::string &where, const char *dir, int32_t peer, uint32_t rank,
                 uint32_t nranks) {
  if (peer == -1)
    return Status::success();
  if (peer < -1 || uint32_t(peer) >= nranks)
    return fail(where, ": ", dir, " peer ", peer, " is not a rank (nranks ", nranks, ")");
  if (uint32_t(peer) == rank)
    return fail(where, ": ", dir, " peer ", peer, " is the threadblock's own rank");
  return Status::success();
}

/// Checks one operand of a step: in range when the opcode uses it, zero when
/// it does not. Returns the reason it is wrong, or an empty string.
std::string operandError(const char *role, bool used, const char *opName, BufferKind buf,
                         uint32_t off, uint32_t count, const PlanInfo &info, const RankPlan &rp) {
  if (!used) {
    if (buf != BufferKind::Input || off != 0)
      return cat("opcode ", opName, " has no ", role, ", but its ", role,
                 " fields are set (buffer kind ", unsigned(buf), ", offset ", off,
                 "); unused fields must be zero");
    return {};
  }
  if (!isValidBufferKind(buf))
    return cat("unknown ", role, " buffer kind ", unsigned(buf));
  uint32_t size = buf == BufferKind::Input    ? info.inputChunks
                  : buf == BufferKind::Output ? info.outputChunks
                                              : rp.scratchChunks;
  if (uint64_t(off) + count > size)
    return cat(role, " offset ", off, " + count ", count, " exceeds ", bufferKindName(buf),
               " buffer (", plural(size, "chunk"), ")");
  return {};
}

/// Finds a cycle among the rank's steps. Nodes are (threadblock, step);
/// a step waits for its predecessor in the threadblock and for its
/// dependencies. Iterative depth-first search over the wait-for edges,
/// O(nodes + edges).
Status checkCycles(const RankPlan &rp, uint32_t rank) {
  const auto &tbs = rp.threadblocks;
  std::vector<uint64_t> base(tbs.size() + 1, 0);
  for (size_t t = 0; t < tbs.size(); ++t)
    base[t + 1] = base[t] + tbs[t].steps.size();
  enum : uint8_t { White, Gray, Black };
  std::vector<uint8_t> color(base.back(), White);

  struct Frame {
    uint32_t tb, step;
    uint32_t next; ///< 0: the previous step; k >= 1: dependency k - 1.
  };
  std::vector<Frame> stack;
  auto node = [&](uint32_t tb, uint32_t step) { return base[tb] + step; };

  for (uint32_t root = 0; root < tbs.size(); ++root) {
    if (tbs[root].steps.empty())
      continue;
    // Every step of a threadblock is reachable from its last one.
    uint32_t lastStep = uint32_t(tbs[root].steps.size() - 1);
    if (color[node(root, lastStep)] != White)
      continue;
    color[node(root, lastStep)] = Gray;
    stack.push_back({root, lastStep, 0});
    while (!stack.empty()) {
      Frame &f = stack.back();
      const Instruction &in = tbs[f.tb].steps[f.step];
      if (f.next > in.depCount) {
        color[node(f.tb, f.step)] = Black;
        stack.pop_back();
        continue;
      }
      uint32_t k = f.next++;
      uint32_t pt, ps;
      if (k == 0) {
        if (f.step == 0)
          continue;
        pt = f.tb;
        ps = f.step - 1;
      } else {
        const Dependency &d = tbs[f.tb].deps[in.depBegin + k - 1];
        pt = d.tb;
        ps = d.step;
      }
      uint8_t c = color[node(pt, ps)];
      if (c == Black)
        continue;
      if (c == White) {
        color[node(pt, ps)] = Gray;
        stack.push_back({pt, ps, 0});
        continue;
      }
      // A gray node is on the stack: the frames from it to the top form the
      // cycle. Runs of steps within one threadblock are shown by their ends.
      size_t from = stack.size() - 1;
      while (stack[from].tb != pt || stack[from].step != ps)
        --from;
      std::ostringstream os;
      os << "rank " << rank << ": dependency cycle (each step waits for the next): ";
      const size_t maxShown = 32;
      size_t shown = 0;
      for (size_t i = from; i < stack.size(); ++i) {
        bool runInterior = i > from && i + 1 < stack.size() && stack[i - 1].tb == stack[i].tb &&
                           stack[i + 1].tb == stack[i].tb;
        if (runInterior)
          continue;
        if (shown == maxShown) {
          os << "... -> ";
          break;
        }
        os << "tb" << stack[i].tb << ':' << stack[i].step << " -> ";
        ++shown;
      }
      os << "tb" << pt << ':' << ps;
      return Status::error(os.str());
    }
  }
  return Status::success();
}

Status checkRank(const PlanInfo &info, const RankPlan &rp, uint32_t rank) {
  std::string where = cat("rank ", rank);
  if (rp.scratchChunks > PlanLimits::maxChunks)
    return fail(where, ": scratchChunks ", rp.scratchChunks, " exceeds the limit maxChunks (",
                PlanLimits::maxChunks, ")");
  if (rp.threadblocks.size() > PlanLimits::maxThreadblocksPerRank)
    return fail(where, ": ", rp.threadblocks.size(),
                " threadblocks exceed the limit maxThreadblocksPerRank (",
                PlanLimits::maxThreadblocksPerRank, ")");

  for (size_t t = 0; t < rp.threadblocks.size(); ++t) {
    const Threadblock &tb = rp.threadblocks[t];
    std::string tbWhere = cat(where, " threadblock ", t);
    if (tb.steps.size() > PlanLimits::maxStepsPerThreadblock)
      return fail(tbWhere, ": ", tb.steps.size(),
                  " steps exceed the limit maxStepsPerThreadblock (",
                  PlanLimits::maxStepsPerThreadblock, ")");
    if (tb.channel >= PlanLimits::maxChannels)
      return fail(tbWhere, ": channel ", tb.channel, " is beyond the limit maxChannels (",
                  PlanLimits::maxChannels, ")");
    if (Status s = checkPeer(tbWhere, "send", tb.sendPeer, rank, info.nranks); !s)
      return s;
    if (Status s = checkPeer(tbWhere, "receive", tb.recvPeer, rank, info.nranks); !s)
      return s;

    for (size_t i = 0; i < tb.steps.size(); ++i) {
      const Instruction &in = tb.steps[i];
      // Built only when a step fails, so the common path stays cheap.
      auto stepWhere = [&] { return cat(tbWhere, " step ", i); };
      if (!isValidOpcode(in.op))
        return fail(stepWhere(), ": unknown opcode ", unsigned(in.op));
      const OpcodeInfo &oi = opcodeInfo(in.op);
      if (oi.send && tb.sendPeer == -1)
        return fail(stepWhere(), ": opcode ", oi.mnemonic,
                    " sends, but the threadblock has no send peer");
      if (oi.recv && tb.recvPeer == -1)
        return fail(stepWhere(), ": opcode ", oi.mnemonic,
                    " receives, but the threadblock has no receive peer");
      if (in.op == Opcode::Nop) {
        if (in.count != 0)
          return fail(stepWhere(), ": opcode nop has count ", in.count,
                      "; unused fields must be zero");
      } else if (in.count == 0) {
        return fail(stepWhere(), ": count is 0, must be at least 1");
      }
      std::string bad =
          operandError("source", oi.readSrc, oi.mnemonic, in.srcBuf, in.srcOff, in.count, info, rp);
      if (bad.empty())
        bad = operandError("destination", oi.writeDst, oi.mnemonic, in.dstBuf, in.dstOff, in.count,
                           info, rp);
      if (!bad.empty())
        return fail(stepWhere(), ": ", bad);

      if (in.depCount > PlanLimits::maxDepsPerStep)
        return fail(stepWhere(), ": ", in.depCount,
                    " dependencies exceed the limit maxDepsPerStep (", PlanLimits::maxDepsPerStep,
                    ")");
      if (uint64_t(in.depBegin) + in.depCount > tb.deps.size())
        return fail(stepWhere(), ": dependencies ", in.depBegin, " + count ", in.depCount,
                    " exceed the threadblock's ", plural(tb.deps.size(), "dependency record"));
      for (uint32_t k = 0; k < in.depCount; ++k) {
        const Dependency &d = tb.deps[in.depBegin + k];
        if (d.tb >= rp.threadblocks.size())
          return fail(stepWhere(), " dependency ", k, ": threadblock ", d.tb,
                      " is out of range (the rank has ",
                      plural(rp.threadblocks.size(), "threadblock"), ")");
        if (d.tb == t)
          return fail(stepWhere(), " dependency ", k,
                      ": waits for its own threadblock (its steps already run in order)");
        size_t n = rp.threadblocks[d.tb].steps.size();
        if (d.step >= n)
          return fail(stepWhere(), " dependency ", k, ": step ", d.step,
                      " is out of range (threadblock ", d.tb, " has ", plural(n, "step"), ")");
      }
    }
  }

  // Each connection end belongs to one threadblock of the rank.
  std::vector<std::tuple<int32_t, uint32_t, uint32_t>> sends, recvs; // peer, channel, tb
  for (uint32_t t = 0; t < rp.threadblocks.size(); ++t) {
    const Threadblock &tb = rp.threadblocks[t];
    if (tb.sendPeer >= 0)
      sends.emplace_back(tb.sendPeer, tb.channel, t);
    if (tb.recvPeer >= 0)
      recvs.emplace_back(tb.recvPeer, tb.channel, t);
  }
  for (auto *list : {&sends, &recvs}) {
    std::sort(list->begin(), list->end());
    for (size_t i = 1; i < list->size(); ++i) {
      auto [p0, c0, t0] = (*list)[i - 1];
      auto [p1, c1, t1] = (*list)[i];
      if (p0 == p1 && c0 == c1)
        return fail(where, ": threadblocks ", t0, " and ", t1, " both ",
                    list == &sends ? "send to" : "receive from", " rank ", p0, " on channel ", c0);
    }
  }

  return checkCycles(rp, rank);
}

/// One end of a connection (from -> to, channel), owned by one threadblock.
struct ConnEnd {
  uint32_t from, to, channel, tb;
  bool operator<(const ConnEnd &o) const {
    return std::tie(from, to, channel) < std::tie(o.from, o.to, o.channel);
  }
};

/// Both ends of every connection agree on the number and sizes of messages.
Status checkConnections(const Plan &plan) {
  std::vector<ConnEnd> sends, recvs;
  for (uint32_t r = 0; r < plan.ranks.size(); ++r) {
    const auto &tbs = plan.ranks[r].threadblocks;
    for (uint32_t t = 0; t < tbs.size(); ++t) {
      if (tbs[t].sendPeer >= 0)
        sends.push_back({r, uint32_t(tbs[t].sendPeer), tbs[t].channel, t});
      if (tbs[t].recvPeer >= 0)
        recvs.push_back({uint32_t(tbs[t].recvPeer), r, tbs[t].channel, t});
    }
  }
  std::sort(sends.begin(), sends.end());
  std::sort(recvs.begin(), recvs.end());

  // The steps of \p tb that use the connection in direction \p send.
  auto messages = [](const Threadblock &tb, bool send) {
    std::vector<uint32_t> steps;
    for (uint32_t i = 0; i < tb.steps.size(); ++i) {
      const OpcodeInfo &oi = opcodeInfo(tb.steps[i].op);
      if (send ? oi.send : oi.recv)
        steps.push_back(i);
    }
    return steps;
  };

  size_t si = 0, ri = 0;
  while (si < sends.size() || ri < recvs.size()) {
    bool haveSend = si < sends.size(), haveRecv = ri < recvs.size();
    if (haveSend && (!haveRecv || sends[si] < recvs[ri])) {
      const ConnEnd &s = sends[si++];
      if (!messages(plan.ranks[s.from].threadblocks[s.tb], true).empty())
        return fail("rank ", s.from, " threadblock ", s.tb, " sends to rank ", s.to, " on channel ",
                    s.channel, ", but no threadblock of rank ", s.to, " receives from rank ",
                    s.from, " on channel ", s.channel);
      continue;
    }
    if (haveRecv && (!haveSend || recvs[ri] < sends[si])) {
      const ConnEnd &c = recvs[ri++];
      if (!messages(plan.ranks[c.to].threadblocks[c.tb], false).empty())
        return fail("rank ", c.to, " threadblock ", c.tb, " receives from rank ", c.from,
                    " on channel ", c.channel, ", but no threadblock of rank ", c.from,
                    " sends to rank ", c.to, " on channel ", c.channel);
      continue;
    }
    const ConnEnd &s = sends[si++];
    const ConnEnd &c = recvs[ri++];
    const Threadblock &stb = plan.ranks[s.from].threadblocks[s.tb];
    const Threadblock &rtb = plan.ranks[c.to].threadblocks[c.tb];
    std::vector<uint32_t> out = messages(stb, true), in = messages(rtb, false);
    std::string conn = cat("connection rank ", s.from, " -> rank ", s.to, " channel ", s.channel);
    if (out.size() != in.size())
      return fail(conn, ": rank ", s.from, " threadblock ", s.tb, " sends ",
                  plural(out.size(), "message"), ", but rank ", s.to, " threadblock ", c.tb,
                  " receives ", in.size());
    for (size_t m = 0; m < out.size(); ++m) {
      uint32_t sent = stb.steps[out[m]].count, got = rtb.steps[in[m]].count;
      if (sent != got)
        return fail(conn, ": message ", m, " is ", plural(sent, "chunk"), " from rank ", s.from,
                    " threadblock ", s.tb, " step ", out[m], ", but rank ", s.to, " threadblock ",
                    c.tb, " step ", in[m], " receives ", plural(got, "chunk"));
    }
  }
  return Status::success();
}

/// A contract belongs to a user-declared collective, and names only terms,
/// ranks and input chunks that exist.
Status checkContract(const PlanInfo &info, const PlanContract &c) {
  if (info.collective != CollectiveKind::Custom)
    return fail("the plan implements the built-in collective ", collectiveName(info.collective),
                ", whose post-condition is fixed, but carries a contract");
  if (c.termBegin.empty() || c.termBegin[0] != 0)
    return fail("contract: the term table does not start at operand 0");
  for (uint32_t t = 0; t < c.numTerms(); ++t) {
    if (c.termBegin[t + 1] <= c.termBegin[t])
      return fail("contract: term ", t, " ends at operand ", c.termBegin[t + 1],
                  ", not after its start ", c.termBegin[t], " (a term has at least one operand)");
    if (c.termBegin[t + 1] > c.operands.size())
      return fail("contract: term ", t, " ends at operand ", c.termBegin[t + 1], ", but there are ",
                  plural(c.operands.size(), "operand"));
  }
  if (c.termBegin.back() != c.operands.size())
    return fail("contract: the terms use ", plural(c.termBegin.back(), "operand"), " of ",
                c.operands.size());
  for (size_t i = 0; i < c.operands.size(); ++i) {
    const PlanContract::Operand &o = c.operands[i];
    if (o.rank >= info.nranks)
      return fail("contract: operand ", i, " names rank ", o.rank, ", not a rank (nranks ",
                  info.nranks, ")");
    if (o.chunk >= info.inputChunks)
      return fail("contract: operand ", i, " names input chunk ", o.chunk, " of rank ", o.rank,
                  ", but the input has ", plural(info.inputChunks, "chunk"));
  }
  if (c.outputs.size() != uint64_t(info.nranks) * info.outputChunks)
    return fail("contract: ", plural(c.outputs.size(), "output entry", "output entries"),
                ", expected one per output chunk of every rank (",
                uint64_t(info.nranks) * info.outputChunks, ")");
  for (size_t i = 0; i < c.outputs.size(); ++i)
    if (c.outputs[i] > c.numTerms())
      return fail("contract: output chunk ", i % info.outputChunks, " of rank ",
                  i / info.outputChunks, " names term ", c.outputs[i] - 1, ", but there are ",
                  plural(c.numTerms(), "term"));
  return Status::success();
}

} // namespace

Status validatePlan(const Plan &plan) {
  const PlanInfo &info = plan.info;
  if (Status s = checkInfo(info); !s)
    return s;
  if (plan.loadedRank == -1) {
    if (plan.ranks.size() != info.nranks)
      return fail("plan holds ", plural(plan.ranks.size(), "rank"), ", but nranks is ",
                  info.nranks);
  } else {
    if (plan.loadedRank < -1 || uint32_t(plan.loadedRank) >= info.nranks)
      return fail("loaded rank ", plan.loadedRank, " is not a rank (nranks ", info.nranks, ")");
    if (plan.ranks.size() != 1)
      return fail("plan loaded for rank ", plan.loadedRank, " holds ",
                  plural(plan.ranks.size(), "rank"), ", expected 1");
  }
  for (size_t i = 0; i < plan.ranks.size(); ++i) {
    uint32_t rank = plan.loadedRank >= 0 ? uint32_t(plan.loadedRank) : uint32_t(i);
    if (Status s = checkRank(info, plan.ranks[i], rank); !s)
      return s;
  }
  if (plan.contract)
    if (Status s = checkContract(info, *plan.contract); !s)
      return s;
  if (plan.loadedRank == -1)
    return checkConnections(plan);
  return Status::success();
}

} // namespace coll
