//===- InsertDependencies.cpp - Minimal cross-threadblock waits -----------===//
//
// Pass 8: threadblocks of one rank run concurrently, so a step that touches a
// chunk another threadblock touched earlier (in the global key order) must
// wait for it: read-after-write, write-after-read and write-after-write on
// physical slots. Steps of one threadblock already run in order.
//
// The set is kept minimal: each threadblock carries, per step, what it
// already knows to be finished elsewhere (a sparse vector clock, merged
// through the clocks of the steps it waits for), and a wait implied by that
// knowledge is dropped. Only the latest step per other threadblock is kept.
//
//===----------------------------------------------------------------------===//

#include "Parallel.h"
#include "coll/Compiler/Lowering.h"

#include "llvm/ADT/SmallVector.h"

#include <map>

using namespace coll;
using namespace coll::compiler;

namespace {

/// What a threadblock knows is finished: other threadblock -> last step.
using Clock = std::map<uint32_t, uint32_t>;

void merge(Clock &into, const Clock &from) {
  for (auto [tb, step] : from) {
    auto [it, inserted] = into.emplace(tb, step);
    if (!inserted && it->second < step)
      it->second = step;
  }
}

} // namespace

void compiler::insertDependencies(Schedule &s) {
  parallelForEach(s.ranks.size(), [&](size_t rank) {
    RankSchedule &rs = s.ranks[rank];
    size_t ntb = rs.tbs.size();
    // Position of each step in its threadblock.
    std::vector<uint32_t> position(rs.steps.size(), NoIndex);
    for (auto &tb : rs.tbs) {
      tb.depList.clear();
      tb.depStart.assign(tb.steps.size() + 1, 0);
      for (uint32_t p = 0; p < tb.steps.size(); ++p)
        position[tb.steps[p]] = p;
    }
    std::vector<uint32_t> order = stepsInKeyOrder(rs);

    struct Access {
      uint32_t tb = NoIndex, pos = 0;
    };
    struct SlotState {
      Access writer;
      llvm::SmallVector<Access, 2> readers; ///< Since the write; one per threadblock.
    };
    // One state per physical chunk: input, then output, then scratch.
    const Trace &t = *s.trace;
    uint32_t outputBase = t.inputChunks, scratchBase = t.inputChunks + t.outputChunks;
    std::vector<SlotState> slots(size_t(scratchBase) + rs.scratchChunks);
    std::vector<Clock> clock(ntb);
    // Snapshots of each threadblock's clock at the steps where it changed.
    std::vector<std::vector<std::pair<uint32_t, Clock>>> history(ntb);

    auto clockAt = [&](uint32_t tb, uint32_t pos) -> const Clock * {
      auto &h = history[tb];
      auto it = std::upper_bound(h.begin(), h.end(), pos,
                                 [](uint32_t p, const auto &e) { return p < e.first; });
      return it == h.begin() ? nullptr : &std::prev(it)->second;
    };

    for (uint32_t i : order) {
      const Step &st = rs.steps[i];
      uint32_t tb = st.tb, pos = position[i];
      const OpcodeInfo &info = opcodeInfo(st.op);
      // Other threadblock -> latest step needed; few entries, kept sorted
      // by threadblock so the result is deterministic.
      llvm::SmallVector<std::pair<uint32_t, uint32_t>, 4> needed;
      auto need = [&](const Access &a) {
        if (a.tb == NoIndex || a.tb == tb)
          return;
        for (auto &n : needed)
          if (n.first == a.tb) {
            n.second = std::max(n.second, a.pos);
            return;
          }
        needed.emplace_back(a.tb, a.pos);
      };
      auto slotKey = [&](uint16_t buf, uint32_t off) {
        return (buf == InputBuffer ? 0 : buf == OutputBuffer ? outputBase : scratchBase) + off;
      };
      // Reads: after the last write.
      if (info.readSrc)
        for (uint32_t c = 0; c < st.count; ++c)
          need(slots[slotKey(st.srcBuf, st.srcOff + c)].writer);
      // Writes: after the last write and every read since.
      if (info.writeDst)
        for (uint32_t c = 0; c < st.count; ++c) {
          SlotState &ss = slots[slotKey(st.dstBuf, st.dstOff + c)];
          need(ss.writer);
          for (const Access &r : ss.readers)
            need(r);
        }

      std::sort(needed.begin(), needed.end());
      // Drop what this threadblock already knows; merge what it learns.
      // Positions of a threadblock come here in increasing order, so its
      // waits are appended in place.
      std::vector<Dependency> deps;
      bool changed = false;
      for (auto [otherTb, otherPos] : needed) {
        auto known = clock[tb].find(otherTb);
        if (known != clock[tb].end() && known->second >= otherPos)
          continue;
        deps.push_back(Dependency{otherTb, otherPos});
        clock[tb][otherTb] = otherPos;
        if (const Clock *c = clockAt(otherTb, otherPos))
          merge(clock[tb], *c);
        changed = true;
      }
      if (changed) {
        clock[tb].erase(tb);
        history[tb].emplace_back(pos, clock[tb]);
        // Waits made redundant by a later one from the same merge.
        std::vector<Dependency> kept;
        for (const Dependency &d : deps) {
          bool implied = false;
          for (const Dependency &e : deps) {
            if (&e == &d)
              continue;
            if (const Clock *c = clockAt(e.tb, e.step)) {
              auto it = c->find(d.tb);
              implied |= it != c->end() && it->second >= d.step;
            }
          }
          if (!implied)
            kept.push_back(d);
        }
        deps = std::move(kept);
      }
      ThreadblockSchedule &own = rs.tbs[tb];
      own.depStart[pos] = uint32_t(own.depList.size());
      own.depList.insert(own.depList.end(), deps.begin(), deps.end());
      own.depStart[pos + 1] = uint32_t(own.depList.size());

      // Record this step's accesses.
      if (info.readSrc)
        for (uint32_t c = 0; c < st.count; ++c) {
          auto &readers = slots[slotKey(st.srcBuf, st.srcOff + c)].readers;
          bool found = false;
          for (Access &r : readers)
            if (r.tb == tb) {
              r.pos = pos;
              found = true;
            }
          if (!found)
            readers.push_back(Access{tb, pos});
        }
      if (info.writeDst)
        for (uint32_t c = 0; c < st.count; ++c) {
          SlotState &ss = slots[slotKey(st.dstBuf, st.dstOff + c)];
          ss.writer = Access{tb, pos};
          ss.readers.clear();
        }
    }
  });
}
