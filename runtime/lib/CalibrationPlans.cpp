//===- CalibrationPlans.cpp - Small plans that measure a platform ---------===//

#include "coll/Runtime/CalibrationPlans.h"

namespace coll {

namespace {

constexpr BufferKind I = BufferKind::Input, O = BufferKind::Output;

/// A step of \p op over \p chunks chunks from chunk 0 of \p src to chunk 0
/// of \p dst.
Instruction step(Opcode op, BufferKind src, BufferKind dst, uint32_t chunks = 1) {
  return makeInstruction(op, src, 0, dst, 0, chunks);
}

} // namespace

Plan calibrationPlan(const char *name, CollectiveKind kind, uint32_t nranks) {
  Plan p;
  p.info.name = name;
  p.info.collective = kind;
  p.info.nranks = nranks;
  p.info.inputChunks = p.info.outputChunks = 1;
  p.info.connectionDepth = 2;
  p.ranks.resize(nranks);
  return p;
}

Plan localStepsPlan(uint32_t steps, uint32_t chunks, uint32_t ranks) {
  Plan p = calibrationPlan("calibrate_local", CollectiveKind::AllReduce, ranks);
  p.info.inputChunks = p.info.outputChunks = chunks;
  Threadblock tb;
  for (uint32_t i = 0; i < steps; ++i)
    tb.steps.push_back(step(Opcode::Copy, I, O, chunks));
  for (RankPlan &rank : p.ranks)
    rank.threadblocks.push_back(tb);
  return p;
}

Plan localCopyPlan(uint32_t threadblocks) {
  Plan p = calibrationPlan("calibrate_copy", CollectiveKind::AllReduce, 1);
  p.info.inputChunks = p.info.outputChunks = threadblocks;
  for (uint32_t t = 0; t < threadblocks; ++t) {
    Threadblock tb;
    tb.steps.push_back(makeInstruction(Opcode::Copy, I, t, O, t, 1));
    p.ranks[0].threadblocks.push_back(tb);
  }
  return p;
}

Plan localReducePlan(uint32_t threadblocks) {
  Plan p = localCopyPlan(threadblocks);
  p.info.name = "calibrate_reduce";
  for (Threadblock &tb : p.ranks[0].threadblocks)
    tb.steps[0].op = Opcode::Reduce;
  return p;
}

Plan dependencyChainPlan(uint32_t threadblocks) {
  Plan p = calibrationPlan("calibrate_dependencies", CollectiveKind::AllReduce, 1);
  p.info.inputChunks = p.info.outputChunks = threadblocks;
  for (uint32_t t = 0; t < threadblocks; ++t) {
    Threadblock tb;
    Instruction in = t == 0 ? makeInstruction(Opcode::Copy, I, 0, O, 0, 1)
                            : makeInstruction(Opcode::Copy, O, t - 1, O, t, 1);
    if (t > 0) {
      in.depBegin = 0;
      in.depCount = 1;
      tb.deps.push_back(Dependency{t - 1, 0});
    }
    tb.steps.push_back(in);
    p.ranks[0].threadblocks.push_back(tb);
  }
  return p;
}

Plan pingPongPlan(uint32_t roundTrips, Opcode recvOp, uint32_t waiters) {
  Plan p = calibrationPlan("calibrate_pingpong", CollectiveKind::Broadcast, 2);
  p.info.inputChunks = p.info.outputChunks = 1 + (waiters + 1) / 2;
  for (uint32_t r = 0; r < 2; ++r) {
    Threadblock tb;
    tb.sendPeer = tb.recvPeer = int32_t(1 - r);
    for (uint32_t i = 0; i < roundTrips; ++i) {
      if (r == 0) {
        tb.steps.push_back(step(Opcode::Send, I, O));
        tb.steps.push_back(step(recvOp, I, O));
      } else {
        tb.steps.push_back(step(recvOp, I, O));
        tb.steps.push_back(step(Opcode::Send, O, O));
      }
    }
    p.ranks[r].threadblocks.push_back(tb);
    // Threadblocks that wait for the ping-pong's last step, each then
    // copying a chunk of its own: they poll while it runs.
    for (uint32_t w = r; w < waiters; w += 2) {
      Threadblock waiter;
      Instruction in = makeInstruction(Opcode::Copy, I, 1 + w / 2, O, 1 + w / 2, 1);
      in.depBegin = 0;
      in.depCount = 1;
      waiter.deps.push_back(Dependency{0, 2 * roundTrips - 1});
      waiter.steps.push_back(in);
      p.ranks[r].threadblocks.push_back(waiter);
    }
  }
  return p;
}

Plan oneWayPlan(uint32_t messages) {
  Plan p = calibrationPlan("calibrate_one_way", CollectiveKind::Broadcast, 2);
  p.info.inputChunks = p.info.outputChunks = messages;
  p.info.connectionDepth = 4; // As compiled plans have it: slots in flight.
  Threadblock a, b;
  a.sendPeer = 1;
  b.recvPeer = 0;
  for (uint32_t i = 0; i < messages; ++i) {
    a.steps.push_back(makeInstruction(Opcode::Send, I, i, O, i, 1));
    b.steps.push_back(makeInstruction(Opcode::Recv, I, i, O, i, 1));
  }
  p.ranks[0].threadblocks.push_back(a);
  p.ranks[1].threadblocks.push_back(b);
  return p;
}

} // namespace coll
