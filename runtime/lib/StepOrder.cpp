//===- StepOrder.cpp - A rank's steps in an order of their dependencies ---===//

#include "StepOrder.h"

#include "coll/Runtime/Interpreter.h"

#include <algorithm>

namespace coll {
namespace detail {

std::pair<size_t, size_t> StepOrder::locate(size_t s) const {
  const size_t b = size_t(std::upper_bound(first.begin(), first.end(), s) - first.begin()) - 1;
  return {b, s - first[b]};
}

StepOrder stepOrder(const RankPlan &rp) {
  const size_t ntb = rp.threadblocks.size();
  StepOrder o;
  o.first.assign(ntb + 1, 0);
  for (size_t b = 0; b < ntb; ++b)
    o.first[b + 1] = o.first[b] + rp.threadblocks[b].steps.size();
  const size_t total = o.first[ntb];

  std::vector<uint32_t> indegree(total, 0);
  std::vector<std::vector<size_t>> after(total);
  for (size_t b = 0; b < ntb; ++b) {
    const Threadblock &tb = rp.threadblocks[b];
    for (size_t i = 0; i < tb.steps.size(); ++i) {
      const size_t me = o.first[b] + i;
      if (i > 0) {
        after[me - 1].push_back(me);
        ++indegree[me];
      }
      const Instruction &in = tb.steps[i];
      for (uint32_t d = 0; d < in.depCount; ++d) {
        if (uint64_t(in.depBegin) + d >= tb.deps.size())
          return {};
        const Dependency &dep = tb.deps[in.depBegin + d];
        if (dep.tb >= ntb || dep.step >= rp.threadblocks[dep.tb].steps.size())
          return {};
        after[o.first[dep.tb] + dep.step].push_back(me);
        ++indegree[me];
      }
    }
  }
  std::vector<size_t> ready;
  for (size_t s = 0; s < total; ++s)
    if (indegree[s] == 0)
      ready.push_back(s);
  o.order.reserve(total);
  while (!ready.empty()) {
    const size_t s = ready.back();
    ready.pop_back();
    o.order.push_back(s);
    for (size_t next : after[s])
      if (--indegree[next] == 0)
        ready.push_back(next);
  }
  if (o.order.size() != total)
    return {}; // A cycle: the plan would deadlock anyway.
  return o;
}

bool accessesOrderedByDependencies(const PlanInfo &info, uint32_t rank, const RankPlan &rp,
                                   const StepOrder &order) {
  const size_t ntb = rp.threadblocks.size();
  if (order.first.empty())
    return false;
  const size_t total = order.first[ntb];
  if (uint64_t(total) * ntb > (uint64_t(1) << 26))
    return false;
  // Vector clocks over the rank's threadblocks, by dependencies and program
  // order only: clock[t] of a step counts the steps of threadblock t that
  // happen before it or are it. Kept for the steps another step waits for.
  std::vector<uint8_t> waitedFor(total, 0);
  for (size_t b = 0; b < ntb; ++b)
    for (const Dependency &d : rp.threadblocks[b].deps)
      if (d.tb < ntb && d.step < rp.threadblocks[d.tb].steps.size())
        waitedFor[order.first[d.tb] + d.step] = 1;
  std::vector<std::vector<uint32_t>> current(ntb, std::vector<uint32_t>(ntb, 0));
  std::vector<std::vector<uint32_t>> kept(total);
  // Per chunk of the (aliased) user buffers: its last write and the reads
  // since, as (threadblock, that threadblock's count at the access).
  struct Access {
    uint32_t tb;
    uint32_t count;
  };
  struct ChunkAccesses {
    bool written = false;
    Access write{0, 0};
    std::vector<Access> reads;
  };
  const uint32_t in = info.inputChunks, out = info.outputChunks;
  std::vector<ChunkAccesses> chunks(size_t(in) + out);
  auto slotOf = [&](BufferKind b, uint32_t c) -> int64_t {
    if (b == BufferKind::Scratch)
      return -1;
    auto [kind, index] = info.inplace ? aliasedChunk(info, rank, b, c) : std::make_pair(b, c);
    if (kind == BufferKind::Input)
      return index < in ? int64_t(index) : -1;
    if (kind == BufferKind::Output)
      return index < out ? int64_t(in) + index : -1;
    return -1;
  };
  auto before = [&](const Access &a, const std::vector<uint32_t> &clock) {
    return clock[a.tb] >= a.count;
  };
  for (size_t s : order.order) {
    const auto [b, i] = order.locate(s);
    const Threadblock &tb = rp.threadblocks[b];
    const Instruction &step = tb.steps[i];
    std::vector<uint32_t> &clock = current[b];
    for (uint32_t d = 0; d < step.depCount; ++d) {
      const Dependency &dep = tb.deps[step.depBegin + d];
      const std::vector<uint32_t> &other = kept[order.first[dep.tb] + dep.step];
      for (size_t t = 0; t < ntb && t < other.size(); ++t)
        clock[t] = std::max(clock[t], other[t]);
    }
    ++clock[b];
    const Access me{uint32_t(b), clock[b]};
    const OpcodeFlags f = opcodeFlags(step.op);
    auto access = [&](BufferKind buf, uint32_t off, bool write) {
      for (uint32_t j = 0; j < step.count; ++j) {
        const int64_t slot = slotOf(buf, off + j);
        if (slot < 0)
          continue;
        ChunkAccesses &c = chunks[size_t(slot)];
        if (c.written && c.write.tb != b && !before(c.write, clock))
          return false;
        if (write) {
          for (const Access &r : c.reads)
            if (r.tb != b && !before(r, clock))
              return false;
          c.reads.clear();
          c.written = true;
          c.write = me;
        } else {
          c.reads.push_back(me);
        }
      }
      return true;
    };
    // A step that reads and writes one chunk reads it first.
    if (f.readSrc && !access(step.srcBuf, step.srcOff, false))
      return false;
    if (step.op == Opcode::Reduce && !access(step.dstBuf, step.dstOff, false))
      return false;
    if (f.writeDst && !access(step.dstBuf, step.dstOff, true))
      return false;
    if (waitedFor[s])
      kept[s] = clock;
  }
  return true;
}

} // namespace detail
} // namespace coll
