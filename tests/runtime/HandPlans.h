//===- HandPlans.h - Plans written by hand for executor tests ---*- C++ -*-===//
/// \file
/// Building blocks for plans written instruction by instruction, and the
/// hand-written ring allreduce that several executor tests run.
//===----------------------------------------------------------------------===//
#ifndef COLL_TESTS_RUNTIME_HANDPLANS_H
#define COLL_TESTS_RUNTIME_HANDPLANS_H

#include "coll/Runtime/Plan.h"

#include <vector>

namespace coll::test {

inline Instruction step(Opcode op, BufferKind srcBuf, uint32_t srcOff, BufferKind dstBuf,
                        uint32_t dstOff, uint32_t count) {
  Instruction in;
  in.op = op;
  const OpcodeInfo &info = opcodeInfo(op);
  if (info.readSrc) {
    in.srcBuf = srcBuf;
    in.srcOff = srcOff;
  }
  if (info.writeDst) {
    in.dstBuf = dstBuf;
    in.dstOff = dstOff;
  }
  in.count = count;
  return in;
}

constexpr BufferKind I = BufferKind::Input, O = BufferKind::Output, S = BufferKind::Scratch;

/// Appends \p in to \p tb, waiting for \p deps (threadblock, step).
inline void add(Threadblock &tb, Instruction in, std::vector<Dependency> deps = {}) {
  in.depBegin = deps.empty() ? 0 : uint32_t(tb.deps.size());
  in.depCount = uint32_t(deps.size());
  tb.deps.insert(tb.deps.end(), deps.begin(), deps.end());
  tb.steps.push_back(in);
}

inline Plan makePlan(const char *name, CollectiveKind kind, uint32_t n, uint32_t in, uint32_t out,
                     uint32_t depth) {
  Plan p;
  p.info.name = name;
  p.info.collective = kind;
  p.info.nranks = n;
  p.info.inputChunks = in;
  p.info.outputChunks = out;
  p.info.connectionDepth = depth;
  p.ranks.resize(n);
  return p;
}

inline uint32_t mod(int64_t a, uint32_t n) {
  return uint32_t(((a % n) + n) % n);
}

/// An out-of-place ring allreduce in one threadblock per rank: copy the
/// input to the output (one N-chunk step), reduce-scatter around the ring
/// with s / rrs / rrcs, all-gather with rcs / r.
inline Plan ringAllReduce(uint32_t n, uint32_t depth) {
  Plan p = makePlan("hand_ring_allreduce", CollectiveKind::AllReduce, n, n, n, depth);
  for (uint32_t r = 0; r < n; ++r) {
    Threadblock tb;
    tb.sendPeer = int32_t((r + 1) % n);
    tb.recvPeer = int32_t((r + n - 1) % n);
    add(tb, step(Opcode::Copy, I, 0, O, 0, n));
    add(tb, step(Opcode::Send, O, r, O, 0, 1));
    for (uint32_t k = 1; k + 1 < n; ++k)
      add(tb, step(Opcode::RecvReduceSend, O, mod(int64_t(r) - k, n), O, 0, 1));
    uint32_t full = (r + 1) % n; // The chunk this rank completes.
    add(tb, step(Opcode::RecvReduceCopySend, O, full, O, full, 1));
    for (uint32_t k = 1; k + 1 < n; ++k)
      add(tb, step(Opcode::RecvCopySend, O, 0, O, mod(int64_t(full) - k, n), 1));
    add(tb, step(Opcode::Recv, O, 0, O, mod(int64_t(full) - (n - 1), n), 1));
    p.ranks[r].threadblocks.push_back(tb);
  }
  return p;
}

} // namespace coll::test

#endif // COLL_TESTS_RUNTIME_HANDPLANS_H
