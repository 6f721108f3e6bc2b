//===- AllocateScratch.cpp - Scratch slots by liveness --------------------===//
//
// Pass 7: the program's scratch buffers are virtual; each rank gets one
// physical scratch area. Walking a rank's steps in the global key order (a
// topological order of the DAG, so every read of a value comes before the
// write that replaces it), each value written to scratch takes the lowest
// free physical chunk, and a chunk is free again once the last read of its
// value has passed. A reduction into scratch (a received rrc, or a local re,
// which also reads its destination) updates its value in place.
// The dependency pass then orders reuse across threadblocks.
//
// Steps that move several scratch chunks at once need them contiguous; a
// rank with such steps keeps the program's layout (no reuse).
//
//===----------------------------------------------------------------------===//

#include "Parallel.h"
#include "coll/Compiler/Lowering.h"

#include "llvm/ADT/DenseMap.h"

#include <queue>

using namespace coll;
using namespace coll::compiler;

namespace {

bool readsScratch(const Step &st) {
  const OpcodeInfo &info = opcodeInfo(st.op);
  return info.readSrc && st.srcBuf >= FirstScratchBuffer;
}
bool writesScratch(const Step &st) {
  const OpcodeInfo &info = opcodeInfo(st.op);
  return info.writeDst && st.dstBuf >= FirstScratchBuffer;
}

} // namespace

void compiler::allocateScratch(Schedule &s) {
  const Trace &t = *s.trace;
  size_t numScratch = t.scratchChunks.size();
  std::vector<uint32_t> layoutBase(numScratch + 1, 0);
  for (size_t k = 0; k < numScratch; ++k)
    layoutBase[k + 1] = layoutBase[k] + t.scratchChunks[k];

  if (numScratch == 0)
    return;
  parallelForEach(s.ranks.size(), [&](size_t rank) {
    RankSchedule &rs = s.ranks[rank];
    std::vector<uint32_t> order = stepsInKeyOrder(rs);
    bool wide = false;
    for (uint32_t i : order) {
      const Step &st = rs.steps[i];
      if ((readsScratch(st) || writesScratch(st)) && st.count != 1)
        wide = true;
    }
    auto virtualSlot = [&](uint16_t buf, uint32_t off) {
      return layoutBase[buf - FirstScratchBuffer] + off;
    };
    if (wide) {
      // The program's own layout: every scratch buffer after the previous.
      for (uint32_t i : order) {
        Step &st = rs.steps[i];
        if (readsScratch(st))
          st.srcOff = virtualSlot(st.srcBuf, st.srcOff);
        if (writesScratch(st))
          st.dstOff = virtualSlot(st.dstBuf, st.dstOff);
        if (readsScratch(st))
          st.srcBuf = FirstScratchBuffer;
        if (writesScratch(st))
          st.dstBuf = FirstScratchBuffer;
      }
      rs.scratchChunks = layoutBase[numScratch];
      return;
    }

    // Pass 1: the live segment of every value and the position of its last
    // read. A step that reads and writes the same chunk (a reduction into
    // scratch) extends the segment.
    llvm::DenseMap<uint32_t, uint32_t> current; // virtual slot -> segment
    std::vector<uint32_t> lastUse;              // per segment
    std::vector<uint32_t> writeSegment(order.size(), NoIndex);
    std::vector<uint32_t> readSegment(order.size(), NoIndex);
    for (uint32_t pos = 0; pos < order.size(); ++pos) {
      const Step &st = rs.steps[order[pos]];
      uint32_t readV = readsScratch(st) ? virtualSlot(st.srcBuf, st.srcOff) : NoIndex;
      if (readV != NoIndex) {
        auto it = current.find(readV);
        if (it != current.end()) {
          readSegment[pos] = it->second;
          lastUse[it->second] = pos;
        }
      }
      // A local reduce also reads its destination (dst = src (op) dst).
      uint32_t rmwSegment = NoIndex;
      if (st.op == Opcode::Reduce && st.dstBuf >= FirstScratchBuffer) {
        auto it = current.find(virtualSlot(st.dstBuf, st.dstOff));
        if (it != current.end()) {
          rmwSegment = it->second;
          lastUse[it->second] = pos;
        }
      }
      if (!writesScratch(st))
        continue;
      uint32_t writeV = virtualSlot(st.dstBuf, st.dstOff);
      if (writeV == readV && readSegment[pos] != NoIndex) {
        writeSegment[pos] = readSegment[pos];
        continue;
      }
      if (rmwSegment != NoIndex) {
        writeSegment[pos] = rmwSegment;
        continue;
      }
      uint32_t seg = uint32_t(lastUse.size());
      lastUse.push_back(pos);
      current[writeV] = seg;
      writeSegment[pos] = seg;
    }

    // Pass 2: lowest free physical chunk for each new segment.
    std::vector<uint32_t> physical(lastUse.size(), NoIndex);
    using Busy = std::pair<uint32_t, uint32_t>; // (last use, physical)
    std::priority_queue<Busy, std::vector<Busy>, std::greater<Busy>> busy;
    std::priority_queue<uint32_t, std::vector<uint32_t>, std::greater<uint32_t>> freeSlots;
    uint32_t used = 0;
    for (uint32_t pos = 0; pos < order.size(); ++pos) {
      while (!busy.empty() && busy.top().first < pos) {
        freeSlots.push(busy.top().second);
        busy.pop();
      }
      Step &st = rs.steps[order[pos]];
      if (readSegment[pos] != NoIndex) {
        st.srcOff = physical[readSegment[pos]];
        st.srcBuf = FirstScratchBuffer;
      }
      uint32_t seg = writeSegment[pos];
      if (seg == NoIndex)
        continue;
      if (physical[seg] == NoIndex) {
        if (freeSlots.empty()) {
          physical[seg] = used++;
        } else {
          physical[seg] = freeSlots.top();
          freeSlots.pop();
        }
        busy.push({lastUse[seg], physical[seg]});
      }
      st.dstOff = physical[seg];
      st.dstBuf = FirstScratchBuffer;
    }
    rs.scratchChunks = used;
  });
}
