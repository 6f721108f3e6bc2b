//===- InsertDependencies.cpp - Minimal cross-threadblock waits -----------===//
//
// Pass 8: threadblocks of one rank run concurrently, so a step that touches a
// chunk another threadblock touched earlier (in the global key order) must
// wait for it: read-after-write, write-after-read and write-after-write on
// physical slots. Steps of one threadblock already run in order.
//
// The set is kept minimal: a wait is dropped when the step already follows
// the awaited step through its own threadblock's earlier steps and their
// waits, or through another wait of the same step. Only the latest step per
// other threadblock is kept.
//
// "Follows" is reachability in the graph of program order plus the waits
// kept so far. It is answered by a search over ancestors rather than by
// per-step vector clocks: with one threadblock per peer, those clocks hold
// N entries and change at nearly every step, which costs O(N) per step. The
// search only visits steps later in the key order than the one sought (an
// earlier step cannot follow it) and reads a threadblock's waits grouped by
// the threadblock waited for, the latest in the reached prefix only, so a
// query touches a few threadblocks.
//
// After a `fence` (a later phase of the trace), a step also waits for the
// latest step of every other threadblock of its rank in the latest earlier
// phase with steps on the rank (the order pass keys every phase after the
// earlier ones on each rank); those steps waited for the phases before.
//
//===----------------------------------------------------------------------===//

#include "Parallel.h"
#include "coll/Compiler/Lowering.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <algorithm>
#include <cassert>

using namespace coll;
using namespace coll::compiler;

namespace {

/// Ancestor queries over the steps of one rank handled so far. A step's
/// predecessors are the step before it in its threadblock and its waits.
class Ancestry {
public:
  Ancestry(const RankSchedule &rs, const std::vector<uint32_t> &keyOf)
      : rs(rs), keyOf(keyOf), waits(rs.tbs.size()), reached(rs.tbs.size(), 0),
        expanded(rs.tbs.size(), 0) {}

  /// Records that the step at \p pos of \p tb waits for \p d (positions
  /// come in increasing order per threadblock).
  void addWait(uint32_t tb, uint32_t pos, Dependency d) {
    Waits &w = waits[tb];
    auto [it, inserted] = w.groupOf.try_emplace(d.tb, uint32_t(w.groups.size()));
    if (inserted)
      w.groups.push_back(Group{d.tb, {}});
    auto &entries = w.groups[it->second].entries;
    assert((entries.empty() || entries.back().second < d.step) &&
           "a wait the threadblock already follows is dropped");
    entries.emplace_back(pos, d.step);
  }

  /// Whether \p target is one of \p from (or \p fromTb's step \p fromPos) or
  /// an ancestor of one of them.
  bool follows(uint32_t fromTb, uint32_t fromPos, llvm::ArrayRef<Dependency> from,
               Dependency target) {
    targetTb = target.tb;
    targetPos = target.step;
    targetKey = keyOf[rs.tbs[target.tb].steps[target.step]];
    bool found = false;
    if (fromTb != NoIndex)
      found = raise(fromTb, fromPos);
    for (size_t i = 0; !found && i < from.size(); ++i)
      found = raise(from[i].tb, from[i].step);
    // Expand each touched threadblock's newly reached prefix: per other
    // threadblock, its latest wait there, unless that comes before the
    // target's key (and so cannot lead to it).
    while (!found && !work.empty()) {
      uint32_t tb = work.back();
      work.pop_back();
      if (expanded[tb] >= reached[tb])
        continue;
      uint32_t lo = expanded[tb], hi = reached[tb];
      expanded[tb] = hi;
      for (const Group &g : waits[tb].groups) {
        auto it = std::partition_point(g.entries.begin(), g.entries.end(),
                                       [&](const auto &e) { return e.first < hi; });
        if (it == g.entries.begin() || std::prev(it)->first < lo)
          continue;
        if ((found = raise(g.tb, std::prev(it)->second)))
          break;
      }
    }
    for (uint32_t tb : touched)
      reached[tb] = expanded[tb] = 0;
    touched.clear();
    work.clear();
    return found;
  }

private:
  /// Marks positions 0 .. pos of \p tb reached; true when that includes the
  /// target.
  bool raise(uint32_t tb, uint32_t pos) {
    if (tb == targetTb)
      return pos >= targetPos;
    if (reached[tb] > pos)
      return false;
    if (reached[tb] == 0 && expanded[tb] == 0) {
      touched.push_back(tb);
      // Steps before the target in key order cannot follow it: skip them.
      const std::vector<uint32_t> &steps = rs.tbs[tb].steps;
      auto first = std::partition_point(steps.begin(), steps.end(),
                                        [&](uint32_t step) { return keyOf[step] < targetKey; });
      expanded[tb] = uint32_t(first - steps.begin());
    }
    reached[tb] = pos + 1;
    if (expanded[tb] < reached[tb])
      work.push_back(tb);
    return false;
  }

  /// A threadblock's waits for one other threadblock: (position, step),
  /// both increasing.
  struct Group {
    uint32_t tb;
    std::vector<std::pair<uint32_t, uint32_t>> entries;
  };
  struct Waits {
    std::vector<Group> groups;
    llvm::SmallDenseMap<uint32_t, uint32_t, 4> groupOf; ///< Other threadblock -> group.
  };

  const RankSchedule &rs;
  const std::vector<uint32_t> &keyOf;
  std::vector<Waits> waits;
  /// Per threadblock, during a query: positions below reached[tb] are
  /// ancestors; the waits of those below expanded[tb] have been followed or
  /// cannot lead to the target.
  std::vector<uint32_t> reached, expanded;
  std::vector<uint32_t> touched, work;
  uint32_t targetTb = NoIndex, targetPos = 0, targetKey = 0;
};

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
    std::vector<uint32_t> keyOf(rs.steps.size(), NoIndex);
    for (uint32_t k = 0; k < order.size(); ++k)
      keyOf[order[k]] = k;

    struct Access {
      uint32_t tb = NoIndex, pos = 0;
    };
    struct SlotState {
      Access writer;
      llvm::SmallVector<Access, 2> readers; ///< Since the write.
    };
    // One state per physical chunk: input, then output, then scratch.
    const Trace &t = *s.trace;
    uint32_t outputBase = t.inputChunks, scratchBase = t.inputChunks + t.outputChunks;
    std::vector<SlotState> slots(size_t(scratchBase) + rs.scratchChunks);
    Ancestry ancestry(rs, keyOf);
    // Per threadblock: its index in `needed`, while a step is handled.
    std::vector<uint32_t> neededAt(ntb, NoIndex);
    // Fences: the phase of the steps being handled; the latest step of
    // each threadblock that has steps in it, and the same for the latest
    // earlier phase with steps on this rank (which waited for the phases
    // before it, so they need no waits of their own).
    uint32_t phase = 0;
    llvm::SmallVector<Access, 4> inPhase, inPreviousPhase;
    std::vector<uint32_t> inPhaseAt(ntb, NoIndex);

    for (uint32_t i : order) {
      const Step &st = rs.steps[i];
      uint32_t tb = st.tb, pos = position[i];
      assert((pos == 0 || keyOf[rs.tbs[tb].steps[pos - 1]] < keyOf[i]) &&
             "steps of a threadblock come in key order");
      const OpcodeInfo &info = opcodeInfo(st.op);
      // Other threadblock -> latest step needed; sorted by threadblock
      // below so the result is deterministic.
      llvm::SmallVector<std::pair<uint32_t, uint32_t>, 4> needed;
      auto need = [&](const Access &a) {
        if (a.tb == NoIndex || a.tb == tb)
          return;
        uint32_t &at = neededAt[a.tb];
        if (at != NoIndex) {
          needed[at].second = std::max(needed[at].second, a.pos);
          return;
        }
        at = uint32_t(needed.size());
        needed.emplace_back(a.tb, a.pos);
      };
      const uint32_t stepPhase = t.ops[st.traceOp].phase;
      assert(stepPhase >= phase && "the order pass keys the phases in order");
      if (stepPhase > phase) {
        if (!inPhase.empty()) {
          for (const Access &a : inPhase)
            inPhaseAt[a.tb] = NoIndex;
          inPreviousPhase = std::move(inPhase);
          inPhase.clear();
        }
        phase = stepPhase;
      }
      for (const Access &a : inPreviousPhase)
        need(a);
      if (inPhaseAt[tb] == NoIndex) {
        inPhaseAt[tb] = uint32_t(inPhase.size());
        inPhase.push_back(Access{tb, pos});
      } else {
        inPhase[inPhaseAt[tb]].pos = pos;
      }
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
      for (auto &n : needed)
        neededAt[n.first] = NoIndex;

      std::sort(needed.begin(), needed.end());
      // Drop what this threadblock already follows: through its previous
      // step, or through a wait taken earlier in this loop.
      llvm::SmallVector<Dependency, 4> deps;
      for (auto [otherTb, otherPos] : needed) {
        Dependency target{otherTb, otherPos};
        if (!ancestry.follows(pos == 0 ? NoIndex : tb, pos - 1, deps, target))
          deps.push_back(target);
      }
      // Waits made redundant by another one of the same step.
      if (deps.size() > 1) {
        llvm::SmallVector<Dependency, 4> kept, others;
        for (size_t d = 0; d < deps.size(); ++d) {
          others.clear();
          for (size_t e = 0; e < deps.size(); ++e)
            if (e != d)
              others.push_back(deps[e]);
          if (!ancestry.follows(NoIndex, 0, others, deps[d]))
            kept.push_back(deps[d]);
        }
        deps = std::move(kept);
      }
      ThreadblockSchedule &own = rs.tbs[tb];
      own.depStart[pos] = uint32_t(own.depList.size());
      own.depList.insert(own.depList.end(), deps.begin(), deps.end());
      own.depStart[pos + 1] = uint32_t(own.depList.size());
      for (const Dependency &d : deps)
        ancestry.addWait(tb, pos, d);

      // Record this step's accesses.
      if (info.readSrc)
        for (uint32_t c = 0; c < st.count; ++c) {
          // A threadblock may appear more than once (read, another's read,
          // read again); `need` keeps the latest. Looking only at the last
          // entry keeps a read O(1) where many threadblocks read one slot.
          auto &readers = slots[slotKey(st.srcBuf, st.srcOff + c)].readers;
          if (!readers.empty() && readers.back().tb == tb)
            readers.back().pos = pos;
          else
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
