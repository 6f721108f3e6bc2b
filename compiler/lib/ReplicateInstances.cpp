//===- ReplicateInstances.cpp - Parallel copies of the schedule -----------===//
//
// Pass 10: with `instances = k`, every chunk is cut into k slices and the
// whole schedule runs k times side by side, instance i on its own channels
// (i * channels + channel) and threadblocks, moving slice i of every chunk.
// Input and output chunk c becomes fine chunk c * k + i, so each instance's
// slices keep the collective's layout; scratch is laid out instance by
// instance. Range operations were split into single chunks when the program
// was instantiated, because one instance's slices of consecutive chunks are
// not contiguous.
//
//===----------------------------------------------------------------------===//

#include "coll/Compiler/Lowering.h"

#include <algorithm>

using namespace coll;
using namespace coll::compiler;
using llvm::Twine;

bool compiler::replicateInstances(Schedule &s, DiagnosticEngine &diag) {
  const Trace &t = *s.trace;
  uint32_t k = t.instances;
  if (k == 1)
    return true;
  if (uint64_t(s.numChannels) * k > PlanLimits::maxChannels) {
    diag.error(t.algorithm->nameRange, Twine(k) + " instances of " + Twine(s.numChannels) +
                                           " channel" + (s.numChannels == 1 ? "" : "s") +
                                           " need more than the runtime's " +
                                           Twine(PlanLimits::maxChannels) + " channels");
    return false;
  }
  // Every chunk becomes k fine chunks: the plan must still hold them, and
  // the replicated steps must fit in memory.
  auto tooMany = [&](const Twine &what, uint64_t n, uint64_t limit) {
    diag.error(t.algorithm->nameRange, Twine(k) + " instances make " + what + " " + Twine(n) +
                                           " for N = " + Twine(t.nranks) + ", more than the " +
                                           Twine(limit) + " a plan may have");
    return false;
  };
  uint64_t ioChunks = uint64_t(std::max(t.inputChunks, t.outputChunks)) * k;
  if (ioChunks > PlanLimits::maxChunks)
    return tooMany("the chunks of a buffer", ioChunks, PlanLimits::maxChunks);
  uint64_t totalSteps = 0;
  for (const RankSchedule &rs : s.ranks) {
    if (uint64_t(rs.scratchChunks) * k > PlanLimits::maxChunks)
      return tooMany("the scratch chunks of a rank", uint64_t(rs.scratchChunks) * k,
                     PlanLimits::maxChunks);
    totalSteps += uint64_t(rs.steps.size()) * k;
  }
  if (totalSteps > MaxPlanSteps)
    return tooMany("the steps of all ranks", totalSteps, MaxPlanSteps);

  // Connections: instance i of connection c is i * n + c.
  size_t nconn = s.connections.size();
  std::vector<Connection> conns;
  conns.reserve(nconn * k);
  for (uint32_t i = 0; i < k; ++i)
    for (const Connection &c : s.connections) {
      Connection copy = c;
      copy.channel = i * s.numChannels + c.channel;
      conns.push_back(copy);
    }

  for (uint32_t r = 0; r < s.ranks.size(); ++r) {
    RankSchedule &rs = s.ranks[r];
    size_t nsteps = rs.steps.size(), ntb = rs.tbs.size();
    if (ntb * k > PlanLimits::maxThreadblocksPerRank) {
      diag.error(t.algorithm->nameRange,
                 Twine(k) + " instances need " + Twine(ntb * k) + " threadblocks on rank " +
                     Twine(r) + "; the runtime's limit is " +
                     Twine(PlanLimits::maxThreadblocksPerRank) + " per rank");
      return false;
    }
    std::vector<Step> steps;
    steps.reserve(nsteps * k);
    std::vector<ThreadblockSchedule> tbs;
    tbs.reserve(ntb * k);
    auto slice = [&](uint16_t buf, uint32_t off, uint32_t i) {
      return buf >= FirstScratchBuffer ? i * rs.scratchChunks + off : off * k + i;
    };
    for (uint32_t i = 0; i < k; ++i) {
      for (const Step &st : rs.steps) {
        Step copy = st;
        const OpcodeInfo &info = opcodeInfo(st.op);
        if (info.readSrc)
          copy.srcOff = slice(st.srcBuf, st.srcOff, i);
        if (info.writeDst)
          copy.dstOff = slice(st.dstBuf, st.dstOff, i);
        if (st.sendConn != NoIndex)
          copy.sendConn = i * nconn + st.sendConn;
        if (st.recvConn != NoIndex)
          copy.recvConn = i * nconn + st.recvConn;
        copy.tb = i * ntb + st.tb;
        steps.push_back(copy);
      }
      for (const ThreadblockSchedule &tb : rs.tbs) {
        ThreadblockSchedule copy = tb;
        for (uint32_t &step : copy.steps)
          step += i * nsteps;
        if (copy.sendConn != NoIndex)
          copy.sendConn += i * nconn;
        if (copy.recvConn != NoIndex)
          copy.recvConn += i * nconn;
        for (Dependency &d : copy.depList)
          d.tb += i * ntb;
        tbs.push_back(std::move(copy));
      }
    }
    rs.steps = std::move(steps);
    rs.tbs = std::move(tbs);
    rs.scratchChunks *= k;
  }
  for (size_t c = 0; c < conns.size(); ++c) {
    size_t i = c / nconn;
    uint32_t ntbFrom = s.ranks[conns[c].from].tbs.size() / k;
    uint32_t ntbTo = s.ranks[conns[c].to].tbs.size() / k;
    if (conns[c].sendTb != NoIndex)
      conns[c].sendTb += i * ntbFrom;
    if (conns[c].recvTb != NoIndex)
      conns[c].recvTb += i * ntbTo;
  }
  s.connections = std::move(conns);
  s.numChannels *= k;
  return true;
}
