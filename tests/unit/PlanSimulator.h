//===- PlanSimulator.h - Symbolic execution of a plan -----------*- C++ -*-===//
/// \file
/// Runs every threadblock of every rank of a plan on symbolic values, the
/// way the runtime will: a threadblock runs its steps in order; a step waits
/// for its dependencies, a receive for a message, a send for a free slot
/// among the connection's depth. Which runnable threadblock goes next is
/// chosen by a seeded random generator, so several seeds exercise several
/// interleavings: a missing dependency shows up as a wrong result.
///
/// Values are hash-consed expression trees over input chunks, with operand
/// order, so the result can be checked against the collective's
/// post-condition and bitwise identity across ranks can be observed.
//===----------------------------------------------------------------------===//
#ifndef COLL_TESTS_UNIT_PLANSIMULATOR_H
#define COLL_TESTS_UNIT_PLANSIMULATOR_H

#include "coll/Runtime/Plan.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace coll::test {

class PlanSimulator {
public:
  explicit PlanSimulator(const Plan &plan) : plan(plan) {}

  /// Runs the plan with interleaving \p seed. Returns "" when every rank
  /// finished and the post-condition holds, else what went wrong.
  std::string run(uint64_t seed) {
    reset();
    std::mt19937_64 rng(seed);
    std::vector<std::pair<uint32_t, uint32_t>> ready;
    for (;;) {
      ready.clear();
      bool unfinished = false;
      for (uint32_t r = 0; r < nranks(); ++r)
        for (uint32_t b = 0; b < pcs[r].size(); ++b) {
          if (pcs[r][b] >= plan.ranks[r].threadblocks[b].steps.size())
            continue;
          unfinished = true;
          if (runnable(r, b))
            ready.emplace_back(r, b);
        }
      if (!unfinished)
        break;
      if (ready.empty())
        return "deadlock: no threadblock can make progress";
      auto [r, b] = ready[rng() % ready.size()];
      if (std::string err = step(r, b); !err.empty())
        return err;
    }
    for (auto &[conn, queue] : queues)
      if (!queue.empty())
        return "connection " + connName(conn) + " ends with " + std::to_string(queue.size()) +
               " unreceived messages";
    return checkPost();
  }

  /// The value of an output chunk after run(), as a canonical string.
  std::string outputValue(uint32_t rank, uint32_t index) const {
    return describe(read(rank, BufferKind::Output, index));
  }
  /// Whether every rank's output chunk \p index is the same expression tree.
  bool sameTreeOnAllRanks(uint32_t index) const {
    uint32_t first = read(0, BufferKind::Output, index);
    for (uint32_t r = 1; r < nranks(); ++r)
      if (read(r, BufferKind::Output, index) != first)
        return false;
    return true;
  }

private:
  using ConnKey = std::tuple<uint32_t, uint32_t, uint32_t>; // from, to, channel

  uint32_t nranks() const { return plan.info.nranks; }
  std::string connName(const ConnKey &c) const {
    return "rank " + std::to_string(std::get<0>(c)) + " -> rank " + std::to_string(std::get<1>(c)) +
           " (channel " + std::to_string(std::get<2>(c)) + ")";
  }

  void reset() {
    nodes.assign(1, Node{});
    pairs.clear();
    queues.clear();
    pcs.assign(nranks(), {});
    mem.assign(nranks(), {});
    uint32_t inChunks = plan.info.inputChunks;
    for (uint32_t r = 0; r < nranks(); ++r) {
      pcs[r].assign(plan.ranks[r].threadblocks.size(), 0);
      buffer(r, BufferKind::Input).assign(plan.info.inputChunks, 0);
      buffer(r, BufferKind::Output).assign(plan.info.outputChunks, 0);
      buffer(r, BufferKind::Scratch).assign(plan.ranks[r].scratchChunks, 0);
    }
    // Every input chunk holds data where the program sees it.
    for (uint32_t r = 0; r < nranks(); ++r)
      for (uint32_t i = 0; i < inChunks; ++i) {
        Node n;
        n.leaf = true;
        n.a = r;
        n.b = i;
        nodes.push_back(n);
        write(r, BufferKind::Input, i, uint32_t(nodes.size() - 1));
      }
  }

  std::vector<uint32_t> &buffer(uint32_t rank, BufferKind buf) { return mem[rank][unsigned(buf)]; }
  const std::vector<uint32_t> &buffer(uint32_t rank, BufferKind buf) const {
    return mem[rank][unsigned(buf)];
  }
  /// Units (of C chunks) per rank of the input (\p output false) or output.
  uint32_t unitChunks(bool output) const {
    const PlanInfo &info = plan.info;
    return uint32_t((output ? info.outputChunks : info.inputChunks) /
                    bufferUnits(info.collective, output, nranks()));
  }

  /// In-place plans address one buffer: the collective's alias. The other
  /// buffer is one unit, block inPlaceBlock() of it (allgather's input[r] is
  /// output[r][r * C ..], reducescatter's output[r] is input[r][r * C ..]).
  std::pair<BufferKind, uint32_t> resolve(uint32_t rank, BufferKind buf, uint32_t off) const {
    if (buf == BufferKind::Scratch || !plan.info.inplace)
      return {buf, off};
    CollectiveKind kind = plan.info.collective;
    BufferKind both = collectiveInfo(kind).inPlace == InPlaceAlias::InputInOutput
                          ? BufferKind::Output
                          : BufferKind::Input;
    if (buf == both)
      return {both, off};
    return {both, uint32_t(inPlaceBlock(kind, rank)) * unitChunks(buf == BufferKind::Output) + off};
  }
  uint32_t read(uint32_t rank, BufferKind buf, uint32_t off) const {
    auto [b, o] = resolve(rank, buf, off);
    const std::vector<uint32_t> &m = buffer(rank, b);
    return o < m.size() ? m[o] : 0;
  }
  void write(uint32_t rank, BufferKind buf, uint32_t off, uint32_t v) {
    auto [b, o] = resolve(rank, buf, off);
    std::vector<uint32_t> &m = buffer(rank, b);
    if (o < m.size())
      m[o] = v;
  }
  uint32_t reduce(uint32_t in, uint32_t local) {
    auto [it, inserted] = pairs.try_emplace({in, local}, uint32_t(nodes.size()));
    if (inserted) {
      Node n;
      n.a = in;
      n.b = local;
      nodes.push_back(n);
    }
    return it->second;
  }

  ConnKey sendConn(uint32_t r, const Threadblock &tb) const {
    return {r, uint32_t(tb.sendPeer), tb.channel};
  }
  ConnKey recvConn(uint32_t r, const Threadblock &tb) const {
    return {uint32_t(tb.recvPeer), r, tb.channel};
  }

  bool runnable(uint32_t r, uint32_t b) {
    const Threadblock &tb = plan.ranks[r].threadblocks[b];
    const Instruction &in = tb.steps[pcs[r][b]];
    for (uint32_t d = 0; d < in.depCount; ++d) {
      const Dependency &dep = tb.deps[in.depBegin + d];
      if (pcs[r][dep.tb] <= dep.step)
        return false;
    }
    const OpcodeInfo &info = opcodeInfo(in.op);
    if (info.recv && queues[recvConn(r, tb)].empty())
      return false;
    if (info.send && queues[sendConn(r, tb)].size() >= plan.info.connectionDepth)
      return false;
    return true;
  }

  std::string where(uint32_t r, uint32_t b) const {
    return "rank " + std::to_string(r) + " tb " + std::to_string(b) + " step " +
           std::to_string(pcs[r][b]);
  }

  std::string step(uint32_t r, uint32_t b) {
    const Threadblock &tb = plan.ranks[r].threadblocks[b];
    const Instruction &in = tb.steps[pcs[r][b]];
    const OpcodeInfo &info = opcodeInfo(in.op);
    std::vector<uint32_t> incoming, src(in.count, 0), result(in.count, 0);
    if (info.recv) {
      auto &q = queues[recvConn(r, tb)];
      incoming = std::move(q.front());
      q.pop_front();
      if (incoming.size() != in.count)
        return where(r, b) + ": receives " + std::to_string(incoming.size()) + " chunks, expects " +
               std::to_string(in.count);
    }
    if (info.readSrc)
      for (uint32_t c = 0; c < in.count; ++c) {
        src[c] = read(r, in.srcBuf, in.srcOff + c);
        if (src[c] == 0)
          return where(r, b) + " (" + info.mnemonic + ") reads an empty chunk " +
                 bufferKindLetter(in.srcBuf) + "[" + std::to_string(in.srcOff + c) + "]";
      }
    for (uint32_t c = 0; c < in.count; ++c) {
      switch (in.op) {
      case Opcode::Send:
      case Opcode::Copy:
        result[c] = src[c];
        break;
      case Opcode::Recv:
      case Opcode::RecvCopySend:
        result[c] = incoming[c];
        break;
      case Opcode::RecvReduceCopy:
      case Opcode::RecvReduceSend:
      case Opcode::RecvReduceCopySend:
        result[c] = reduce(incoming[c], src[c]);
        break;
      case Opcode::Reduce: {
        uint32_t local = read(r, in.dstBuf, in.dstOff + c);
        if (local == 0)
          return where(r, b) + " (re) reduces into an empty chunk";
        result[c] = reduce(src[c], local);
        break;
      }
      case Opcode::Nop:
        break;
      }
    }
    if (info.writeDst)
      for (uint32_t c = 0; c < in.count; ++c)
        write(r, in.dstBuf, in.dstOff + c, result[c]);
    if (info.send)
      queues[sendConn(r, tb)].push_back(result);
    ++pcs[r][b];
    return "";
  }

  /// The input chunks a value combines, sorted, as (rank, index).
  std::vector<std::pair<uint32_t, uint32_t>> leaves(uint32_t v) const {
    std::vector<std::pair<uint32_t, uint32_t>> out;
    std::vector<uint32_t> stack = {v};
    while (!stack.empty()) {
      uint32_t n = stack.back();
      stack.pop_back();
      if (n == 0)
        continue;
      if (nodes[n].leaf) {
        out.emplace_back(nodes[n].a, nodes[n].b);
      } else {
        stack.push_back(nodes[n].a);
        stack.push_back(nodes[n].b);
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  std::string describe(uint32_t v) const {
    if (v == 0)
      return "nothing";
    if (nodes[v].leaf)
      return "in[" + std::to_string(nodes[v].a) + "][" + std::to_string(nodes[v].b) + "]";
    return "(" + describe(nodes[v].a) + " + " + describe(nodes[v].b) + ")";
  }

  std::string checkPost() const {
    const PlanInfo &info = plan.info;
    uint32_t n = nranks();
    auto expectLeaf = [&](uint32_t r, uint32_t i, uint32_t jr, uint32_t ji) -> std::string {
      uint32_t v = read(r, BufferKind::Output, i);
      auto got = leaves(v);
      if (got.size() == 1 && got[0] == std::make_pair(jr, ji) && nodes[v].leaf)
        return "";
      return "output[" + std::to_string(r) + "][" + std::to_string(i) + "] is " + describe(v) +
             ", expected in[" + std::to_string(jr) + "][" + std::to_string(ji) + "]";
    };
    auto expectColumn = [&](uint32_t r, uint32_t i, uint32_t column) -> std::string {
      uint32_t v = read(r, BufferKind::Output, i);
      std::vector<std::pair<uint32_t, uint32_t>> want;
      for (uint32_t j = 0; j < n; ++j)
        want.emplace_back(j, column);
      if (leaves(v) == want)
        return "";
      return "output[" + std::to_string(r) + "][" + std::to_string(i) + "] is " + describe(v) +
             ", expected the reduction of column " + std::to_string(column);
    };
    if (info.collective == CollectiveKind::Custom)
      return "";
    // Output chunk i is chunk i % U of unit i / U; unitSource() names the
    // input unit (of one rank, or of every rank combined) it must hold.
    const uint32_t unit = unitChunks(/*output=*/true);
    for (uint32_t r = 0; r < n; ++r) {
      if (!collectiveDefinesOutput(info.collective, info.root, r))
        continue;
      for (uint32_t i = 0; i < info.outputChunks; ++i) {
        UnitSource s = unitSource(info.collective, info.root, r, i / unit);
        uint32_t in = s.block * unit + i % unit;
        std::string err = s.everyRank ? expectColumn(r, i, in) : expectLeaf(r, i, s.rank, in);
        if (!err.empty())
          return err;
      }
    }
    return "";
  }

  struct Node {
    bool leaf = false;
    uint32_t a = 0, b = 0; ///< Leaf: rank, index. Reduction: incoming, local.
  };

  const Plan &plan;
  std::vector<Node> nodes;
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> pairs;
  std::map<ConnKey, std::deque<std::vector<uint32_t>>> queues;
  std::vector<std::vector<uint32_t>> pcs;
  std::vector<std::array<std::vector<uint32_t>, numBufferKinds()>> mem;
};

} // namespace coll::test

#endif // COLL_TESTS_UNIT_PLANSIMULATOR_H
