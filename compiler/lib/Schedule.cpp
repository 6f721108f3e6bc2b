//===- Schedule.cpp - Printing the lowering IR ----------------------------===//

#include "coll/Compiler/Schedule.h"

#include <algorithm>

using namespace coll;
using namespace coll::compiler;

static void printOperand(const Trace &t, uint16_t buf, uint32_t off, uint32_t count,
                         llvm::raw_ostream &os) {
  if (buf >= FirstScratchBuffer)
    os << bufferKindName(BufferKind::Scratch);
  else
    os << t.bufferName(buf);
  os << "[" << off;
  if (count != 1)
    os << " .. " << off + count;
  os << "]";
}

void compiler::dagSuccessors(const Dag &dag, std::vector<uint64_t> &begin,
                             std::vector<uint32_t> &succ) {
  const size_t nops = dag.depth.size();
  begin.assign(nops + 1, 0);
  for (uint32_t k = 0; k < nops; ++k)
    for (uint64_t e = dag.predBegin[k]; e < dag.predBegin[k + 1]; ++e)
      ++begin[dag.preds[e] + 1];
  for (size_t k = 0; k < nops; ++k)
    begin[k + 1] += begin[k];
  succ.assign(begin[nops], 0);
  std::vector<uint64_t> fill(begin.begin(), begin.end() - 1);
  for (uint32_t k = 0; k < nops; ++k)
    for (uint64_t e = dag.predBegin[k]; e < dag.predBegin[k + 1]; ++e)
      succ[fill[dag.preds[e]]++] = k;
}

std::vector<uint32_t> compiler::stepsInKeyOrder(const RankSchedule &rs) {
  std::vector<uint32_t> order;
  for (uint32_t i = 0; i < rs.steps.size(); ++i)
    if (!rs.steps[i].dead)
      order.push_back(i);
  std::sort(order.begin(), order.end(),
            [&](uint32_t a, uint32_t b) { return rs.steps[a].key < rs.steps[b].key; });
  return order;
}

void compiler::printSchedule(const Schedule &s, llvm::raw_ostream &os) {
  const Trace &t = *s.trace;
  os << "schedule " << t.name << ": N = " << t.nranks << ", " << s.connections.size()
     << (s.connections.size() == 1 ? " connection" : " connections") << ", depth "
     << s.connectionDepth << ", " << s.numChannels << " channel" << (s.numChannels == 1 ? "" : "s")
     << "\n";
  for (uint32_t r = 0; r < s.ranks.size(); ++r) {
    const RankSchedule &rs = s.ranks[r];
    os << "rank " << r << ": " << rs.tbs.size() << " threadblock"
       << (rs.tbs.size() == 1 ? "" : "s");
    if (rs.scratchChunks)
      os << ", scratch " << rs.scratchChunks;
    os << "\n";
    if (rs.tbs.empty()) {
      // Before threadblock assignment: the rank's steps in program order.
      for (const Step &st : rs.steps) {
        const OpcodeInfo &info = opcodeInfo(st.op);
        os << "    " << info.mnemonic;
        if (info.readSrc) {
          os << " src ";
          printOperand(t, st.srcBuf, st.srcOff, st.count, os);
        }
        if (info.writeDst) {
          os << " dst ";
          printOperand(t, st.dstBuf, st.dstOff, st.count, os);
        }
        if (st.sendConn != NoIndex)
          os << " to rank " << s.connections[st.sendConn].to;
        if (st.recvConn != NoIndex)
          os << " from rank " << s.connections[st.recvConn].from;
        os << "  ; op " << st.traceOp << "\n";
      }
    }
    for (uint32_t b = 0; b < rs.tbs.size(); ++b) {
      const ThreadblockSchedule &tb = rs.tbs[b];
      os << "  tb " << b;
      if (tb.sendConn != NoIndex)
        os << " send " << s.connections[tb.sendConn].to;
      if (tb.recvConn != NoIndex)
        os << " recv " << s.connections[tb.recvConn].from;
      uint32_t ch = tb.sendConn != NoIndex   ? s.connections[tb.sendConn].channel
                    : tb.recvConn != NoIndex ? s.connections[tb.recvConn].channel
                                             : 0;
      os << " channel " << ch << "\n";
      for (uint32_t p = 0; p < tb.steps.size(); ++p) {
        const Step &st = rs.steps[tb.steps[p]];
        const OpcodeInfo &info = opcodeInfo(st.op);
        os << "    " << p << ": " << info.mnemonic;
        if (info.readSrc) {
          os << " src ";
          printOperand(t, st.srcBuf, st.srcOff, st.count, os);
        }
        if (info.writeDst) {
          os << " dst ";
          printOperand(t, st.dstBuf, st.dstOff, st.count, os);
        }
        if (!info.readSrc && !info.writeDst)
          os << " count " << st.count;
        os << "  ; op " << st.traceOp;
        if (st.fusedTraceOp != NoIndex)
          os << "+" << st.fusedTraceOp;
        if (!tb.depsOf(p).empty()) {
          os << " deps";
          for (const Dependency &d : tb.depsOf(p))
            os << " tb" << d.tb << ":" << d.step;
        }
        os << "\n";
      }
    }
  }
}

void compiler::printDag(const Trace &t, const Dag &dag, llvm::raw_ostream &os) {
  static const char *const kinds[] = {"raw", "war", "waw", "fence"};
  os << "dag " << t.name << ": " << t.ops.size() << " operations, " << dag.preds.size()
     << " edges\n";
  for (uint32_t k = 0; k < t.ops.size(); ++k) {
    os << "  " << k << ": depth " << dag.depth[k];
    for (uint64_t e = dag.predBegin[k]; e < dag.predBegin[k + 1]; ++e)
      os << (e == dag.predBegin[k] ? " after " : ", ") << dag.preds[e] << " ("
         << kinds[dag.predKinds[e]] << ")";
    os << "\n";
  }
}

void compiler::printDot(const Trace &t, const Dag &dag, const Schedule *s, llvm::raw_ostream &os) {
  if (!s) {
    static const char *const styles[] = {"solid", "dashed", "dotted", "bold"};
    os << "digraph dag {\n  node [shape=box, fontname=monospace];\n";
    for (uint32_t k = 0; k < t.ops.size(); ++k) {
      const ChunkOp &op = t.ops[k];
      os << "  op" << k << " [label=\"" << k << ": "
         << (op.kind == OpKind::Copy ? "copy " : "reduce ");
      printSlotRange(t, op.src, os);
      os << " -> ";
      printSlotRange(t, op.dst, os);
      os << "\"];\n";
    }
    // Solid: read after write; dashed: write after read; dotted: write after
    // write; bold: a fence.
    for (uint32_t k = 0; k < t.ops.size(); ++k)
      for (uint64_t e = dag.predBegin[k]; e < dag.predBegin[k + 1]; ++e)
        os << "  op" << dag.preds[e] << " -> op" << k << " [style=" << styles[dag.predKinds[e]]
           << "];\n";
    os << "}\n";
    return;
  }
  os << "digraph schedule {\n  node [shape=box, fontname=monospace];\n";
  for (uint32_t r = 0; r < s->ranks.size(); ++r) {
    const RankSchedule &rs = s->ranks[r];
    for (uint32_t b = 0; b < rs.tbs.size(); ++b) {
      const ThreadblockSchedule &tb = rs.tbs[b];
      os << "  subgraph cluster_r" << r << "_tb" << b << " {\n    label=\"rank " << r << " tb " << b
         << "\";\n";
      for (uint32_t p = 0; p < tb.steps.size(); ++p) {
        const Step &st = rs.steps[tb.steps[p]];
        os << "    r" << r << "_t" << b << "_s" << p << " [label=\"" << p << ": "
           << opcodeInfo(st.op).mnemonic << "\"];\n";
        if (p)
          os << "    r" << r << "_t" << b << "_s" << p - 1 << " -> r" << r << "_t" << b << "_s" << p
             << ";\n";
      }
      os << "  }\n";
      for (uint32_t p = 0; p < tb.steps.size(); ++p)
        for (const Dependency &d : tb.depsOf(p))
          os << "  r" << r << "_t" << d.tb << "_s" << d.step << " -> r" << r << "_t" << b << "_s"
             << p << " [style=dashed];\n";
    }
  }
  os << "}\n";
}
