//===- EmitPlan.cpp - The schedule as a runtime plan ----------------------===//
//
// Pass 11: one plan threadblock per schedule threadblock, one instruction per
// step, fields the opcode does not use left zero so the bytes are
// deterministic. The plan is written through the runtime's own writer.
//
//===----------------------------------------------------------------------===//

#include "Parallel.h"
#include "coll/Compiler/Lowering.h"

using namespace coll;
using namespace coll::compiler;

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
  return plan;
}
