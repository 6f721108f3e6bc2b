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
  return makeInstruction(op, srcBuf, srcOff, dstBuf, dstOff, count);
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
/// with s / rrs / rrcs, all-gather with rcs / r. \p inPlace: an in-place
/// plan instead, without the copy.
inline Plan ringAllReduce(uint32_t n, uint32_t depth, bool inPlace = false) {
  Plan p = makePlan(inPlace ? "hand_ring_inplace" : "hand_ring_allreduce",
                    CollectiveKind::AllReduce, n, n, n, depth);
  p.info.inplace = inPlace;
  for (uint32_t r = 0; r < n; ++r) {
    Threadblock tb;
    tb.sendPeer = int32_t((r + 1) % n);
    tb.recvPeer = int32_t((r + n - 1) % n);
    if (!inPlace)
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

/// Two ranks that each wait for the other's message before sending theirs:
/// valid (the connections agree), but neither peer ever sends.
inline Plan recvRecvDeadlock() {
  Plan p = makePlan("recv_recv", CollectiveKind::AllReduce, 2, 1, 1, 1);
  for (uint32_t r = 0; r < 2; ++r) {
    Threadblock tb;
    tb.sendPeer = tb.recvPeer = int32_t(1 - r);
    add(tb, step(Opcode::Recv, I, 0, O, 0, 1));
    add(tb, step(Opcode::Send, O, 0, O, 0, 1));
    p.ranks[r].threadblocks.push_back(tb);
  }
  return p;
}

/// Rank 0 sends three messages on a one-slot connection; rank 1 takes the
/// first only after a message that rank 0 sends after its third.
inline Plan fullFifoDeadlock() {
  Plan p = makePlan("full_fifo", CollectiveKind::AllReduce, 2, 1, 1, 1);
  Threadblock s0, s1, r0, r1;
  s0.sendPeer = 1;
  for (int i = 0; i < 3; ++i)
    add(s0, step(Opcode::Send, I, 0, O, 0, 1));
  s1.sendPeer = 1;
  s1.channel = 1;
  add(s1, step(Opcode::Send, I, 0, O, 0, 1), {{0, 2}});
  r0.recvPeer = 0;
  add(r0, step(Opcode::Recv, I, 0, O, 0, 1), {{1, 0}});
  add(r0, step(Opcode::Recv, I, 0, O, 0, 1));
  add(r0, step(Opcode::Recv, I, 0, O, 0, 1));
  r1.recvPeer = 0;
  r1.channel = 1;
  add(r1, step(Opcode::Recv, I, 0, O, 0, 1));
  p.ranks[0].threadblocks = {s0, s1};
  p.ranks[1].threadblocks = {r0, r1};
  return p;
}

/// A ring allgather with C chunks per rank and two threadblocks per rank:
/// tb 0 copies the rank's own block into place (and, through scratch, back
/// again); tb 1 runs the ring and waits for tb 0 before sending.
inline Plan ringAllGather(uint32_t n, uint32_t c) {
  Plan p = makePlan("hand_ring_allgather", CollectiveKind::AllGather, n, c, n * c, 2);
  for (uint32_t r = 0; r < n; ++r) {
    RankPlan &rp = p.ranks[r];
    rp.scratchChunks = c + 1;
    Threadblock local, ring;
    // Through scratch at an offset of one chunk: scratch chunks all have the
    // largest chunk size, the data keeps its own.
    add(local, step(Opcode::Copy, I, 0, S, 1, c));
    add(local, step(Opcode::Copy, S, 1, O, r * c, c));
    ring.sendPeer = int32_t((r + 1) % n);
    ring.recvPeer = int32_t((r + n - 1) % n);
    add(ring, step(Opcode::Send, O, r * c, O, 0, c), {{0, 1}});
    for (uint32_t k = 1; k + 1 < n; ++k)
      add(ring, step(Opcode::RecvCopySend, O, 0, O, mod(int64_t(r) - k, n) * c, c));
    add(ring, step(Opcode::Recv, O, 0, O, mod(int64_t(r) - (n - 1), n) * c, c));
    rp.threadblocks = {local, ring};
  }
  return p;
}

/// An all-pairs alltoall with C chunks per block: one threadblock per peer
/// sends and receives one C-chunk message; the own block is a local copy.
inline Plan allPairsAllToAll(uint32_t n, uint32_t c) {
  Plan p = makePlan("hand_alltoall", CollectiveKind::AllToAll, n, n * c, n * c, 1);
  for (uint32_t r = 0; r < n; ++r) {
    RankPlan &rp = p.ranks[r];
    Threadblock self;
    add(self, step(Opcode::Copy, I, r * c, O, r * c, c));
    rp.threadblocks.push_back(self);
    for (uint32_t q = 0; q < n; ++q) {
      if (q == r)
        continue;
      Threadblock tb;
      tb.sendPeer = tb.recvPeer = int32_t(q);
      add(tb, step(Opcode::Send, I, q * c, O, 0, c));
      add(tb, step(Opcode::Recv, I, 0, O, q * c, c));
      rp.threadblocks.push_back(tb);
    }
  }
  return p;
}

} // namespace coll::test

#endif // COLL_TESTS_RUNTIME_HANDPLANS_H
