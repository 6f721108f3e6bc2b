//===- EmitPlan.cpp - The schedule as a runtime plan ----------------------===//
//
// Pass 11: one plan threadblock per schedule threadblock, one instruction per
// step, fields the opcode does not use left zero so the bytes are
// deterministic; a user collective's plan also records its post-conditions
// (its contract). The plan is written through the runtime's own writer.
//
//===----------------------------------------------------------------------===//

#include "Parallel.h"
#include "coll/Compiler/Lowering.h"

#include <algorithm>
#include <map>

using namespace coll;
using namespace coll::compiler;

namespace {

/// Orders operands, and lists of them, by (rank, chunk).
struct OperandsLess {
  static bool less(const PlanContract::Operand &a, const PlanContract::Operand &b) {
    return a.rank != b.rank ? a.rank < b.rank : a.chunk < b.chunk;
  }
  bool operator()(const std::vector<PlanContract::Operand> &a,
                  const std::vector<PlanContract::Operand> &b) const {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), less);
  }
};

/// The post-conditions of a user collective, as the verifier checked them:
/// for each output chunk the first `post` that names it (the others hold
/// the same value, or verification failed), each term once. With k
/// instances, chunk c is fine chunks c * k .. c * k + k - 1, and fine chunk
/// c * k + i holds the term's operands' fine chunks j * k + i.
PlanContract emitContract(const Trace &t) {
  const uint32_t k = t.instances, outChunks = t.outputChunks * k;
  PlanContract c;
  c.outputs.assign(uint64_t(t.nranks) * outChunks, 0);
  std::map<std::vector<PlanContract::Operand>, uint32_t, OperandsLess> termOf;
  std::vector<PlanContract::Operand> ops;
  for (const PostFact &f : t.userPost) {
    if (f.rank >= t.nranks || f.index >= t.outputChunks || f.inputs.empty())
      continue;
    for (uint32_t i = 0; i < k; ++i) {
      uint32_t &entry = c.outputs[uint64_t(f.rank) * outChunks + uint64_t(f.index) * k + i];
      if (entry != 0)
        continue;
      ops.clear();
      for (auto [r, j] : f.inputs)
        ops.push_back({r, j * k + i});
      std::sort(ops.begin(), ops.end(), OperandsLess::less);
      auto [it, added] = termOf.try_emplace(ops, c.numTerms());
      if (added) {
        c.operands.insert(c.operands.end(), ops.begin(), ops.end());
        c.termBegin.push_back(uint32_t(c.operands.size()));
      }
      entry = it->second + 1;
    }
  }
  return c;
}

} // namespace

Plan compiler::emitPlan(const Schedule &s) {
  const Trace &t = *s.trace;
  Plan plan;
  PlanInfo &info = plan.info;
  info.name = t.name;
  info.collective = t.collective();
  info.nranks = t.nranks;
  info.root = t.root;
  info.inputChunks = t.inputChunks * t.instances;
  info.outputChunks = t.outputChunks * t.instances;
  info.protocol = t.protocol == ast::Protocol::Simple ? ProtocolKind::Simple
                  : t.protocol == ast::Protocol::LL   ? ProtocolKind::LL
                                                      : ProtocolKind::LL128;
  info.connectionDepth = s.connectionDepth;
  info.instances = t.instances;
  info.inplace = t.inplace;

  plan.ranks.resize(t.nranks);
  parallelForEach(t.nranks, [&](size_t r) {
    const RankSchedule &rs = s.ranks[r];
    RankPlan &rp = plan.ranks[r];
    rp.scratchChunks = rs.scratchChunks;
    rp.threadblocks.resize(rs.tbs.size());
    for (size_t b = 0; b < rs.tbs.size(); ++b) {
      const ThreadblockSchedule &tb = rs.tbs[b];
      Threadblock &out = rp.threadblocks[b];
      if (tb.sendConn != NoIndex) {
        out.sendPeer = int32_t(s.connections[tb.sendConn].to);
        out.channel = s.connections[tb.sendConn].channel;
      }
      if (tb.recvConn != NoIndex) {
        out.recvPeer = int32_t(s.connections[tb.recvConn].from);
        out.channel = s.connections[tb.recvConn].channel;
      }
      out.steps.reserve(tb.steps.size());
      for (size_t p = 0; p < tb.steps.size(); ++p) {
        const Step &st = rs.steps[tb.steps[p]];
        const OpcodeInfo &oi = opcodeInfo(st.op);
        Instruction in;
        in.op = st.op;
        in.count = st.count;
        if (oi.readSrc) {
          in.srcBuf = planBufferKind(st.srcBuf);
          in.srcOff = st.srcOff;
        }
        if (oi.writeDst) {
          in.dstBuf = planBufferKind(st.dstBuf);
          in.dstOff = st.dstOff;
        }
        llvm::ArrayRef<Dependency> deps = tb.depsOf(p);
        in.depCount = uint32_t(deps.size());
        in.depBegin = in.depCount ? uint32_t(out.deps.size()) : 0;
        out.deps.insert(out.deps.end(), deps.begin(), deps.end());
        out.steps.push_back(in);
      }
    }
  });
  if (!t.builtin)
    plan.contract = emitContract(t);
  return plan;
}
