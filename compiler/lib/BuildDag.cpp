//===- BuildDag.cpp - Dependence DAG of a trace ---------------------------===//
//
// Pass 3a: for every operation, the earlier operations it must follow:
// read-after-write on its sources, write-after-read and write-after-write on
// its destinations (a reduce also reads its destination). One walk over the
// trace with, per slot, its last writer and the readers since; depth is the
// longest path from a source, which the ordering pass uses as its key.
// After a `fence`, an operation also follows every operation of the latest
// earlier phase on each rank it touches (and through them, all earlier
// ones), so that on every rank the phases come in order.
//
//===----------------------------------------------------------------------===//

#include "coll/Compiler/Lowering.h"

using namespace coll;
using namespace coll::compiler;

Dag compiler::buildDag(const Trace &t) {
  // Slot numbering, as in the verifier.
  uint16_t numBuffers = FirstScratchBuffer + t.scratchChunks.size();
  std::vector<uint64_t> base(numBuffers + 1, 0);
  for (uint16_t b = 0; b < numBuffers; ++b)
    base[b + 1] = base[b] + uint64_t(t.nranks) * t.bufferChunks(b);
  auto slotOf = [&](const SlotRange &r, uint32_t k) {
    return base[r.buffer] + uint64_t(r.rank) * t.bufferChunks(r.buffer) + r.index + k;
  };

  std::vector<uint32_t> lastWriter(base[numBuffers], NoIndex);
  // Readers of each slot since its last write: a linked list per slot in one
  // pool, dropped (not freed) on every write, so the work is linear in the
  // slot accesses and there is one allocation, not one per slot.
  struct Reader {
    uint32_t op, next;
  };
  std::vector<Reader> pool;
  std::vector<uint32_t> readers(base[numBuffers], NoIndex); // head of each list

  Dag dag;
  size_t n = t.ops.size();
  dag.depth.assign(n, 1);
  dag.predBegin.assign(n + 1, 0);
  std::vector<uint32_t> preds;
  std::vector<Dag::EdgeKind> kinds;
  preds.reserve(n * 2);
  kinds.reserve(n * 2);

  constexpr uint32_t Several = NoIndex - 1;
  dag.srcWriter.assign(n, NoIndex);
  dag.soleReader.assign(n, NoIndex);
  dag.overwritten.assign(n, 0);
  std::vector<uint32_t> overwrittenChunks(n, 0);
  auto noteRead = [&](uint32_t writer, uint32_t reader) {
    if (writer == NoIndex)
      return;
    uint32_t &r = dag.soleReader[writer];
    r = r == NoIndex || r == reader ? reader : Several;
  };

  // Per rank: the phase of its latest operations, those operations, and
  // the operations of the latest earlier phase that had any. Phases grow in
  // trace order, so a trace without a fence ends in phase 0 and needs none
  // of this.
  const bool fenced = n > 0 && t.ops[n - 1].phase > 0;
  std::vector<uint32_t> phaseOf(fenced ? t.nranks : 0, 0);
  std::vector<std::vector<uint32_t>> current(phaseOf.size()), previous(phaseOf.size());

  std::vector<std::pair<uint32_t, Dag::EdgeKind>> local;
  for (uint32_t k = 0; k < n; ++k) {
    const ChunkOp &op = t.ops[k];
    local.clear();
    for (uint32_t rank : {op.src.rank, op.dst.rank}) {
      if (!fenced)
        break;
      if (op.phase > phaseOf[rank]) {
        if (!current[rank].empty())
          previous[rank] = std::move(current[rank]);
        current[rank].clear();
        phaseOf[rank] = op.phase;
      }
      for (uint32_t p : previous[rank])
        local.emplace_back(p, Dag::Fence);
      current[rank].push_back(k);
      if (op.src.rank == op.dst.rank)
        break;
    }
    bool reduces = op.kind == OpKind::Reduce;
    for (uint32_t c = 0; c < op.src.count; ++c) {
      uint64_t s = slotOf(op.src, c), d = slotOf(op.dst, c);
      if (lastWriter[s] != NoIndex)
        local.emplace_back(lastWriter[s], Dag::Raw);
      if (lastWriter[d] != NoIndex)
        local.emplace_back(lastWriter[d], reduces ? Dag::Raw : Dag::Waw);
      for (uint32_t r = readers[d]; r != NoIndex; r = pool[r].next)
        local.emplace_back(pool[r].op, Dag::War);
    }
    // Keep one edge per predecessor (the strongest kind: RAW; a data edge
    // over Fence).
    std::sort(local.begin(), local.end());
    uint32_t depth = 1;
    for (size_t i = 0; i < local.size(); ++i) {
      if (i && local[i].first == local[i - 1].first)
        continue;
      if (local[i].first == k)
        continue;
      preds.push_back(local[i].first);
      kinds.push_back(local[i].second);
      depth = std::max(depth, dag.depth[local[i].first] + 1);
    }
    dag.depth[k] = depth;
    dag.predBegin[k + 1] = preds.size();

    for (uint32_t c = 0; c < op.src.count; ++c) {
      uint64_t s = slotOf(op.src, c), d = slotOf(op.dst, c);
      uint32_t w = lastWriter[s];
      if (c == 0)
        dag.srcWriter[k] = w;
      else if (dag.srcWriter[k] != w)
        dag.srcWriter[k] = NoIndex;
      noteRead(w, k);
      if (reduces)
        noteRead(lastWriter[d], k);
      if (lastWriter[d] != NoIndex &&
          ++overwrittenChunks[lastWriter[d]] == t.ops[lastWriter[d]].dst.count)
        dag.overwritten[lastWriter[d]] = 1;
      if (readers[s] == NoIndex || pool[readers[s]].op != k) {
        pool.push_back(Reader{k, readers[s]});
        readers[s] = uint32_t(pool.size() - 1);
      }
      lastWriter[d] = k;
      readers[d] = NoIndex;
    }
  }
  for (uint32_t &r : dag.soleReader)
    if (r == Several)
      r = NoIndex;
  dag.preds = std::move(preds);
  dag.predKinds = std::move(kinds);
  return dag;
}
