//===- SplitTransfers.cpp - Operations to per-rank steps ------------------===//
//
// Pass 3b: a copy or reduce within one rank is one local step; between two
// ranks it is a send on the source rank and a receive on the destination
// rank over the connection (sender, receiver, channel). A reduce's receive
// combines the incoming value with the destination: dst = recv (op) dst.
//
//===----------------------------------------------------------------------===//

#include "MixedKey.h"
#include "coll/Compiler/Lowering.h"

#include "llvm/ADT/DenseMap.h"

using namespace coll;
using namespace coll::compiler;

std::optional<Schedule> compiler::splitTransfers(const Trace &t, Dag dag, uint32_t connectionDepth,
                                                 DiagnosticEngine &diag) {
  Schedule s;
  s.trace = &t;
  s.dag = std::move(dag);
  s.connectionDepth = connectionDepth;
  s.ranks.resize(t.nranks);

  llvm::DenseMap<uint64_t, uint32_t, MixedKeyInfo> connIndex;
  auto connection = [&](uint32_t from, uint32_t to, uint32_t channel) {
    uint64_t key = (uint64_t(from) << 40) | (uint64_t(to) << 16) | channel;
    auto [it, inserted] = connIndex.try_emplace(key, uint32_t(s.connections.size()));
    if (inserted)
      s.connections.push_back(Connection{from, to, channel});
    return it->second;
  };

  // Size every rank's step list first: one allocation each.
  std::vector<uint32_t> perRank(t.nranks, 0);
  for (const ChunkOp &op : t.ops) {
    ++perRank[op.src.rank];
    if (op.src.rank != op.dst.rank)
      ++perRank[op.dst.rank];
  }
  for (uint32_t r = 0; r < t.nranks; ++r)
    s.ranks[r].steps.reserve(perRank[r]);

  uint32_t maxChannel = 0;
  for (uint32_t k = 0; k < t.ops.size(); ++k) {
    const ChunkOp &op = t.ops[k];
    bool reduce = op.kind == OpKind::Reduce;
    if (op.channel >= 0 && uint32_t(op.channel) * t.instances >= PlanLimits::maxChannels) {
      diag.error(t.sites[op.site]->getRange(),
                 "channel " + llvm::Twine(op.channel) + " with " + llvm::Twine(t.instances) +
                     " instances needs more than the runtime's " +
                     llvm::Twine(PlanLimits::maxChannels) + " channels");
      return std::nullopt;
    }
    if (op.src.rank == op.dst.rank) {
      Step st;
      st.op = reduce ? Opcode::Reduce : Opcode::Copy;
      st.srcBuf = op.src.buffer;
      st.srcOff = op.src.index;
      st.dstBuf = op.dst.buffer;
      st.dstOff = op.dst.index;
      st.count = op.src.count;
      st.traceOp = k;
      st.tbHint = op.sendTb >= 0 ? op.sendTb : op.recvTb;
      s.ranks[op.src.rank].steps.push_back(st);
      continue;
    }
    uint32_t channel = op.channel >= 0 ? uint32_t(op.channel) : 0;
    maxChannel = std::max(maxChannel, channel);
    uint32_t conn = connection(op.src.rank, op.dst.rank, channel);

    Step send;
    send.op = Opcode::Send;
    send.srcBuf = op.src.buffer;
    send.srcOff = op.src.index;
    send.count = op.src.count;
    send.traceOp = k;
    send.sendConn = conn;
    send.tbHint = op.sendTb;
    s.ranks[op.src.rank].steps.push_back(send);

    Step recv;
    recv.op = reduce ? Opcode::RecvReduceCopy : Opcode::Recv;
    if (reduce) {
      // The local operand of the reduction is the destination itself.
      recv.srcBuf = op.dst.buffer;
      recv.srcOff = op.dst.index;
    }
    recv.dstBuf = op.dst.buffer;
    recv.dstOff = op.dst.index;
    recv.count = op.dst.count;
    recv.traceOp = k;
    recv.recvConn = conn;
    recv.tbHint = op.recvTb;
    s.ranks[op.dst.rank].steps.push_back(recv);
  }
  s.numChannels = maxChannel + 1;
  return s;
}
