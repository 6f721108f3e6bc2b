//===- DirectSends.cpp - Sends whose receiver reads the data in place -----===//
//
// One walk of the rank's steps in an order of program order and
// dependencies (StepOrder.h) records where each chunk of Input and Output is
// last written; a send qualifies when every chunk it reads was last written
// before it, and a receive that sends on what it stores (`rcs`, `rrcs`)
// when it is the last step to write that chunk.
//
//===----------------------------------------------------------------------===//

#include "DirectSends.h"

#include "coll/Runtime/Interpreter.h"

#include <tuple>

namespace coll {
namespace detail {

DirectSteps directSendSteps(const PlanInfo &info, uint32_t rank, const RankPlan &rp,
                            const StepOrder &order,
                            const std::vector<std::vector<Instruction>> *rewrite, bool aliased) {
  const size_t ntb = rp.threadblocks.size();
  if (order.first.size() != ntb + 1)
    return {}; // A cycle, or a dependency on nothing: no direct send.
  if (rewrite) {
    if (rewrite->size() != ntb)
      return {};
    for (size_t b = 0; b < ntb; ++b)
      if ((*rewrite)[b].size() != rp.threadblocks[b].steps.size())
        return {};
  }
  auto stepAt = [&](size_t b, size_t i) -> const Instruction & {
    return rewrite ? (*rewrite)[b][i] : rp.threadblocks[b].steps[i];
  };

  // Chunk (b, c) of Input or Output, as the memory it names: with the
  // in-place alias, Input and Output chunks that are one are one slot.
  const uint64_t inputChunks = info.inputChunks, outputChunks = info.outputChunks;
  const uint64_t numSlots = inputChunks + outputChunks;
  auto slotOf = [&](BufferKind b, uint32_t c, uint64_t &slot) {
    if (aliased)
      std::tie(b, c) = aliasedChunk(info, rank, b, c);
    if (b == BufferKind::Input && c < inputChunks)
      slot = c;
    else if (b == BufferKind::Output && c < outputChunks)
      slot = inputChunks + c;
    else
      return false;
    return true;
  };

  constexpr uint64_t never = ~uint64_t(0);
  std::vector<uint64_t> position(order.order.size(), 0), lastWrite(numSlots, never);
  for (size_t k = 0; k < order.order.size(); ++k) {
    const size_t s = order.order[k];
    position[s] = k;
    const auto [b, i] = order.locate(s);
    const Instruction &in = stepAt(b, i);
    if (opcodeFlags(in.op).writeDst)
      for (uint32_t j = 0; j < in.count; ++j) {
        uint64_t slot;
        if (slotOf(in.dstBuf, in.dstOff + j, slot))
          lastWrite[slot] = k;
      }
  }

  DirectSteps direct(ntb);
  for (size_t b = 0; b < ntb; ++b) {
    const size_t numSteps = rp.threadblocks[b].steps.size();
    direct[b].assign(numSteps, 0);
    for (size_t i = 0; i < numSteps; ++i) {
      const Instruction &in = stepAt(b, i);
      if (in.count == 0)
        continue;
      const uint64_t here = position[order.first[b] + i];
      bool stays = true;
      BufferKind lies = in.srcBuf; // Where the data sent lies.
      if (in.op == Opcode::Send) {
        // The source was last written before the send.
        for (uint32_t j = 0; stays && j < in.count; ++j) {
          uint64_t slot;
          stays = slotOf(in.srcBuf, in.srcOff + j, slot) &&
                  (lastWrite[slot] == never || lastWrite[slot] < here);
        }
      } else if (in.op == Opcode::RecvCopySend || in.op == Opcode::RecvReduceCopySend) {
        // The step sends what it writes to dst: dst's last write is its own.
        lies = in.dstBuf;
        for (uint32_t j = 0; stays && j < in.count; ++j) {
          uint64_t slot;
          stays = slotOf(in.dstBuf, in.dstOff + j, slot) && lastWrite[slot] == here;
        }
      } else {
        stays = false;
      }
      direct[b][i] = stays ? uint8_t(1u << unsigned(lies)) : 0;
    }
  }
  return direct;
}

RankDirectSends rankDirectSends(const PlanInfo &info, uint32_t rank, const RankPlan &rp,
                                const OutOfPlaceProgram &outOfPlace) {
  StepOrder order = stepOrder(rp);
  // A later write must come after a send in every run, not only in the
  // order walked: where messages alone order them, no send is direct.
  if (!accessesOrderedByDependencies(info, rank, rp, order))
    order = StepOrder();
  RankDirectSends d;
  d.inPlace = directSendSteps(info, rank, rp, order, nullptr, info.inplace);
  if (!outOfPlace.empty())
    d.outOfPlace = directSendSteps(info, rank, rp, order, &outOfPlace.steps, /*aliased=*/false);
  return d;
}

} // namespace detail
} // namespace coll
