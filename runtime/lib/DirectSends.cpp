//===- DirectSends.cpp - Sends whose receiver reads the data in place -----===//
//
// One walk of the rank's steps in an order of program order and
// dependencies (Kahn's algorithm) records where each chunk of Input and
// Output is last written; a send qualifies when every chunk it reads was
// last written before it.
//
//===----------------------------------------------------------------------===//

#include "DirectSends.h"

#include "coll/Runtime/Interpreter.h"

#include <algorithm>
#include <tuple>

namespace coll {
namespace detail {

DirectSteps directSendSteps(const PlanInfo &info, uint32_t rank, const RankPlan &rp,
                            const std::vector<std::vector<Instruction>> &steps, bool aliased) {
  const size_t ntb = rp.threadblocks.size();
  if (steps.size() != ntb)
    return {};
  std::vector<size_t> first(ntb + 1, 0);
  for (size_t b = 0; b < ntb; ++b) {
    if (steps[b].size() != rp.threadblocks[b].steps.size())
      return {};
    first[b + 1] = first[b] + steps[b].size();
  }
  const size_t total = first[ntb];

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

  // Kahn's algorithm over program order and dependencies.
  std::vector<uint32_t> indegree(total, 0);
  std::vector<std::vector<size_t>> after(total);
  for (size_t b = 0; b < ntb; ++b) {
    const Threadblock &tb = rp.threadblocks[b];
    for (size_t i = 0; i < steps[b].size(); ++i) {
      const size_t me = first[b] + i;
      if (i > 0) {
        after[me - 1].push_back(me);
        ++indegree[me];
      }
      const Instruction &in = steps[b][i];
      for (uint32_t d = 0; d < in.depCount; ++d) {
        if (in.depBegin + d >= tb.deps.size())
          return {};
        const Dependency &dep = tb.deps[in.depBegin + d];
        if (dep.tb >= ntb || dep.step >= steps[dep.tb].size())
          return {};
        after[first[dep.tb] + dep.step].push_back(me);
        ++indegree[me];
      }
    }
  }
  std::vector<size_t> ready;
  for (size_t s = 0; s < total; ++s)
    if (indegree[s] == 0)
      ready.push_back(s);

  constexpr uint64_t never = ~uint64_t(0);
  std::vector<uint64_t> position(total, 0), lastWrite(numSlots, never);
  uint64_t visited = 0;
  while (!ready.empty()) {
    const size_t s = ready.back();
    ready.pop_back();
    position[s] = visited++;
    const size_t b = size_t(std::upper_bound(first.begin(), first.end(), s) - first.begin()) - 1;
    const Instruction &in = steps[b][s - first[b]];
    if (opcodeFlags(in.op).writeDst)
      for (uint32_t j = 0; j < in.count; ++j) {
        uint64_t slot;
        if (slotOf(in.dstBuf, in.dstOff + j, slot))
          lastWrite[slot] = position[s];
      }
    for (size_t next : after[s])
      if (--indegree[next] == 0)
        ready.push_back(next);
  }
  if (visited != total)
    return {}; // A cycle: the plan would deadlock anyway.

  DirectSteps direct(ntb);
  for (size_t b = 0; b < ntb; ++b) {
    direct[b].assign(steps[b].size(), 0);
    for (size_t i = 0; i < steps[b].size(); ++i) {
      const Instruction &in = steps[b][i];
      if (in.op != Opcode::Send || in.count == 0 ||
          (in.srcBuf != BufferKind::Input && in.srcBuf != BufferKind::Output))
        continue;
      bool stays = true;
      for (uint32_t j = 0; stays && j < in.count; ++j) {
        uint64_t slot;
        stays = slotOf(in.srcBuf, in.srcOff + j, slot) &&
                (lastWrite[slot] == never || lastWrite[slot] < position[first[b] + i]);
      }
      direct[b][i] = stays;
    }
  }
  return direct;
}

} // namespace detail
} // namespace coll
