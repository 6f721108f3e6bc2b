//===- PlanSimulator.cpp - What a plan computes, without running it -------===//

#include "coll/Runtime/PlanSimulator.h"

#include "coll/Runtime/Collective.h"
#include "coll/Runtime/Executor.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <random>
#include <tuple>
#include <unordered_map>

namespace coll {

namespace {

/// The most chunks (over every buffer of every rank) a simulation holds.
constexpr uint64_t maxSimulatedChunks = uint64_t(1) << 23;
/// The chunks all steps of a plan move or combine together: the time of a
/// simulation, and the messages in flight (a value per chunk), grow with
/// them.
constexpr uint64_t maxSimulatedChunkSteps = uint64_t(1) << 24;
/// The operands the explicit terms of a derived contract may hold in all
/// (every reduction makes a term of its own).
constexpr uint64_t maxDerivedOperands = uint64_t(1) << 24;

/// A symbolic chunk: a multiset of input chunks, summarised.
struct Term {
  uint64_t h1 = 0, h2 = 0;
  /// Operands, saturating: the key sums wrap modulo 2^64, so a count that
  /// wrapped too would let a chunk counted 2^64 extra times pass.
  uint64_t count = 0;
  bool defined = false;
  /// When a contract is derived: 1 + the index of the term's operands in
  /// the simulator's table of explicit terms (0: none).
  uint32_t id = 0;
  /// 1 + the position within its unit of the chunks it came from, which
  /// fixes its size at every count (ChunkLayout.h); kMixedSizes for a
  /// reduction of chunks of different positions; 0: not tracked.
  uint32_t sizeClass = 0;
  /// The summary alone decides.
  bool operator==(const Term &o) const {
    return defined == o.defined && count == o.count && h1 == o.h1 && h2 == o.h2;
  }
};

constexpr uint32_t kMixedSizes = ~uint32_t(0);

Term reduceTerms(const Term &a, const Term &b) {
  Term t;
  t.sizeClass = !a.sizeClass || a.sizeClass == b.sizeClass ? b.sizeClass
                : !b.sizeClass                             ? a.sizeClass
                                                           : kMixedSizes;
  t.defined = a.defined && b.defined;
  t.count = a.count > UINT64_MAX - b.count ? UINT64_MAX : a.count + b.count;
  t.h1 = a.h1 + b.h1;
  t.h2 = a.h2 + b.h2;
  return t;
}

struct Message {
  std::vector<Term> chunks;
  uint32_t tb = 0, step = 0; ///< The sender's.
  /// The sender's vector clock after the send (race checking only).
  std::vector<uint32_t> clock;
};

/// The last accesses of one buffer chunk, for race checking: threadblock
/// (global index, -1: none) and its clock at the access (the step is the
/// clock - 1).
struct Access {
  int32_t writer = -1;
  uint32_t writeClock = 0;
  int32_t reader = -1;
  uint32_t readClock = 0;
};

/// Who wrote a chunk last.
struct Writer {
  int32_t tb = -1;
  uint32_t step = 0;
};

std::string placeName(uint32_t rank, uint32_t tb, uint32_t step) {
  return "gpu " + std::to_string(rank) + " tb " + std::to_string(tb) + " step " +
         std::to_string(step);
}

const char *bufferName(BufferKind k) {
  switch (k) {
  case BufferKind::Input:
    return "input";
  case BufferKind::Output:
    return "output";
  case BufferKind::Scratch:
    return "scratch";
  }
  return "?";
}

class Simulator {
public:
  Simulator(const Plan &plan, const SimulateOptions &options) : plan(plan), options(options) {}

  SimulateReport run() {
    depth = options.depth ? options.depth : plan.info.connectionDepth;
    if (depth == 0)
      depth = 1;
    // Memory goes with the chunks of every buffer of every rank (about 40
    // bytes each): a plan beyond the limit is refused, not simulated.
    uint64_t slots = 0;
    for (const RankPlan &rp : plan.ranks)
      slots += uint64_t(plan.info.inputChunks) + plan.info.outputChunks + rp.scratchChunks;
    if (slots > maxSimulatedChunks) {
      problem("the plan is too large to simulate: its buffers hold " + std::to_string(slots) +
              " chunks over all ranks (at most " + std::to_string(maxSimulatedChunks) + ")");
      return std::move(report);
    }
    uint64_t chunkSteps = 0;
    for (const RankPlan &rp : plan.ranks)
      for (const Threadblock &tb : rp.threadblocks)
        for (const Instruction &in : tb.steps)
          chunkSteps += in.count;
    if (chunkSteps > maxSimulatedChunkSteps) {
      problem("the plan is too large to simulate: its steps move " + std::to_string(chunkSteps) +
              " chunks in all (at most " + std::to_string(maxSimulatedChunkSteps) + ")");
      return std::move(report);
    }
    if (plan.info.collective != CollectiveKind::Custom) {
      // A built-in collective's buffers must have its shape before anything
      // is simulated (a wrong one is reported at once, not after the run).
      Result<uint32_t> c = planChunksPerUnit(plan.info);
      if (!c) {
        problem(c.message());
        return std::move(report);
      }
      // Its count need not be a multiple of its unit's chunks: chunks then
      // differ in size by one element, by their position within a unit, and
      // a step moves only as much as the smaller holds. (A user-declared
      // collective's count is a whole number of chunks.)
      if (*c > 1)
        unitChunks = *c;
    }
    deriving =
        options.derivedContract && plan.info.collective == CollectiveKind::Custom && !plan.contract;
    makeKeys();
    makeBuffers();
    if (!makeConnections())
      return std::move(report);
    execute();
    if (deriving && report.ok() && !checkRaces)
      problem("a contract is not derived from a plan this large: its threadblocks are not "
              "checked for races, so another order of them might compute something else" +
              raceCheckSize());
    else if (options.requireRaceCheck && report.ok() && !checkRaces)
      problem("the plan is too large to check for races, so another order of its "
              "threadblocks might compute something else: it is refused rather than run "
              "unchecked" +
              raceCheckSize());
    if (report.ok())
      deriving ? deriveContract() : checkOutputs();
    // A plan that computes the collective with chunks of one size may still
    // move a chunk into a place of another size: said after what it
    // computes, which names a plain mistake better.
    for (const std::string &m : sizeMismatches)
      if (!problem(m))
        break;
    return std::move(report);
  }

private:
  /// A step as problems name it (SimulateOptions::position).
  std::string where(uint32_t rank, uint32_t tb, uint32_t step) const {
    return placeName(rank, tb, options.position ? options.position(rank, tb, step) : step);
  }

  bool problem(const std::string &text) {
    if (report.problems.size() < std::max<size_t>(1, options.maxProblems))
      report.problems.push_back(text);
    return report.problems.size() < std::max<size_t>(1, options.maxProblems);
  }

  void makeKeys() {
    std::random_device random;
    std::mt19937_64 gen((uint64_t(random()) << 32) ^ random());
    const uint32_t n = plan.info.nranks, c = plan.info.inputChunks;
    keys.resize(size_t(n) * c);
    for (size_t i = 0; i < keys.size(); ++i) {
      keys[i] = {gen() | 1, gen()};
      leafOf[keys[i].first] = uint32_t(i);
      if (deriving)
        explicitTerms.push_back({uint32_t(i)});
    }
    explicitOperands = explicitTerms.size();
  }

  Term leaf(uint32_t rank, uint32_t chunk) const {
    const size_t i = size_t(rank) * plan.info.inputChunks + chunk;
    const auto &k = keys[i];
    return Term{k.first,
                k.second,
                1,
                true,
                deriving ? uint32_t(i + 1) : 0,
                unitChunks ? chunk % unitChunks + 1 : 0};
  }

  /// The reduction of \p a and \p b, with its operands when deriving.
  Term combine(const Term &a, const Term &b) {
    Term t = reduceTerms(a, b);
    if (!deriving || !a.id || !b.id)
      return t;
    const std::vector<uint32_t> &x = explicitTerms[a.id - 1], &y = explicitTerms[b.id - 1];
    if (explicitOperands + x.size() + y.size() > maxDerivedOperands) {
      deriving = false;
      problem("the plan reduces too much to derive its contract: its reductions hold more than " +
              std::to_string(maxDerivedOperands) + " operands in all");
      return t;
    }
    std::vector<uint32_t> merged(x.size() + y.size());
    std::merge(x.begin(), x.end(), y.begin(), y.end(), merged.begin());
    explicitOperands += merged.size();
    explicitTerms.push_back(std::move(merged));
    t.id = uint32_t(explicitTerms.size());
    return t;
  }

  Term &slot(uint32_t rank, BufferKind b, uint32_t chunk) {
    auto [kind, index] = aliasedChunk(plan.info, rank, b, chunk);
    return buffers[rank][unsigned(kind)][index];
  }
  Writer &writer(uint32_t rank, BufferKind b, uint32_t chunk) {
    auto [kind, index] = aliasedChunk(plan.info, rank, b, chunk);
    return writers[rank][unsigned(kind)][index];
  }

  void makeBuffers() {
    const PlanInfo &info = plan.info;
    buffers.resize(info.nranks);
    writers.resize(info.nranks);
    for (uint32_t r = 0; r < info.nranks; ++r) {
      const uint32_t sizes[3] = {info.inputChunks, info.outputChunks, plan.ranks[r].scratchChunks};
      for (unsigned k = 0; k < 3; ++k) {
        buffers[r][k].assign(sizes[k], Term());
        writers[r][k].assign(sizes[k], Writer());
      }
      for (uint32_t c = 0; c < info.inputChunks; ++c)
        slot(r, BufferKind::Input, c) = leaf(r, c);
    }
  }

  bool makeConnections() {
    bool ok = true;
    std::map<std::tuple<uint32_t, uint32_t, uint32_t>, std::pair<uint32_t, uint32_t>> senders,
        receivers;
    for (uint32_t r = 0; r < plan.ranks.size(); ++r) {
      const auto &tbs = plan.ranks[r].threadblocks;
      for (uint32_t t = 0; t < tbs.size(); ++t) {
        const Threadblock &tb = tbs[t];
        if (tb.sendPeer >= 0) {
          auto key = std::make_tuple(r, uint32_t(tb.sendPeer), tb.channel);
          auto [it, fresh] = senders.emplace(key, std::make_pair(r, t));
          if (!fresh) {
            problem("gpu " + std::to_string(r) + " tb " + std::to_string(t) + " and tb " +
                    std::to_string(it->second.second) + " both send to gpu " +
                    std::to_string(tb.sendPeer) + " on channel " + std::to_string(tb.channel));
            ok = false;
          }
        }
        if (tb.recvPeer >= 0) {
          auto key = std::make_tuple(uint32_t(tb.recvPeer), r, tb.channel);
          auto [it, fresh] = receivers.emplace(key, std::make_pair(r, t));
          if (!fresh) {
            problem("gpu " + std::to_string(r) + " tb " + std::to_string(t) + " and tb " +
                    std::to_string(it->second.second) + " both receive from gpu " +
                    std::to_string(tb.recvPeer) + " on channel " + std::to_string(tb.channel));
            ok = false;
          }
        }
      }
    }
    if (!ok)
      return false;
    for (const auto &[key, tb] : senders)
      connectionOf[key] = uint32_t(connectionOf.size());
    for (const auto &[key, tb] : receivers)
      if (!connectionOf.count(key))
        connectionOf[key] = uint32_t(connectionOf.size());
    fifos.resize(connectionOf.size());
    return true;
  }

  uint32_t connection(uint32_t from, uint32_t to, uint32_t channel) const {
    return connectionOf.at(std::make_tuple(from, to, channel));
  }

  /// Runs one step of (rank, tb) if it can; returns whether it did.
  bool tryStep(uint32_t r, uint32_t t) {
    const Threadblock &tb = plan.ranks[r].threadblocks[t];
    uint32_t &pc = pcs[r][t];
    if (pc >= tb.steps.size())
      return false;
    const Instruction &in = tb.steps[pc];
    const uint32_t self = tbBase[r] + t;
    for (uint32_t d = 0; d < in.depCount; ++d) {
      const Dependency &dep = tb.deps[in.depBegin + d];
      if (pcs[r][dep.tb] <= dep.step) {
        progressWaiters[tbBase[r] + dep.tb].push_back(self);
        return false;
      }
    }
    const OpcodeInfo &oi = opcodeInfo(in.op);
    uint32_t recvConn = 0, sendConn = 0;
    if (oi.recv) {
      recvConn = connection(uint32_t(tb.recvPeer), r, tb.channel);
      if (fifos[recvConn].empty()) {
        dataWaiters[recvConn].push_back(self);
        return false;
      }
    }
    if (oi.send) {
      sendConn = connection(r, uint32_t(tb.sendPeer), tb.channel);
      if (fifos[sendConn].size() >= depth) {
        spaceWaiters[sendConn].push_back(self);
        return false;
      }
    }
    Message incoming;
    if (oi.recv) {
      incoming = std::move(fifos[recvConn].front());
      fifos[recvConn].pop_front();
      wake(spaceWaiters[recvConn]);
      if (incoming.chunks.size() != in.count)
        problem(where(r, t, pc) + " (" + oi.mnemonic + ") receives " + std::to_string(in.count) +
                " chunk(s), but the message it pairs with, from " +
                where(uint32_t(tb.recvPeer), incoming.tb, incoming.step) + ", carries " +
                std::to_string(incoming.chunks.size()));
      incoming.chunks.resize(in.count);
    }
    Message outgoing;
    outgoing.tb = t;
    outgoing.step = pc;
    if (checkRaces)
      orderStep(r, t, in, oi, incoming, sendConn);
    for (uint32_t j = 0; j < in.count; ++j) {
      Term v;
      switch (in.op) {
      case Opcode::Nop:
        continue;
      case Opcode::Send:
        v = slot(r, in.srcBuf, in.srcOff + j);
        break;
      case Opcode::Recv:
      case Opcode::RecvCopySend:
        v = incoming.chunks[j];
        break;
      case Opcode::Copy:
        v = slot(r, in.srcBuf, in.srcOff + j);
        break;
      case Opcode::Reduce:
        v = combine(slot(r, in.srcBuf, in.srcOff + j), slot(r, in.dstBuf, in.dstOff + j));
        break;
      case Opcode::RecvReduceCopy:
      case Opcode::RecvReduceSend:
      case Opcode::RecvReduceCopySend:
        v = combine(incoming.chunks[j], slot(r, in.srcBuf, in.srcOff + j));
        break;
      }
      if (oi.writeDst && unitChunks && v.defined && v.sizeClass &&
          in.dstBuf != BufferKind::Scratch && sizeMismatches.size() < maxSizeMismatches) {
        const uint32_t index = aliasedChunk(plan.info, r, in.dstBuf, in.dstOff + j).second;
        if (v.sizeClass != index % unitChunks + 1) {
          sizeMismatches.push_back(
              where(r, t, pc) + " (" + oi.mnemonic + ") writes " + bufferName(in.dstBuf) +
              " chunk " + std::to_string(in.dstOff + j) +
              (v.sizeClass == kMixedSizes
                   ? " with a reduction of chunks of different sizes"
                   : " with " + describe(v) + ", chunk " + std::to_string(v.sizeClass - 1) +
                         " of a unit where it is chunk " + std::to_string(index % unitChunks)) +
              ": chunks differ in size by their place in a unit of " + std::to_string(unitChunks) +
              " when the count is not a multiple of it, and the executors move only as much "
              "as the smaller holds");
        }
      }
      if (oi.writeDst) {
        slot(r, in.dstBuf, in.dstOff + j) = v;
        writer(r, in.dstBuf, in.dstOff + j) = Writer{int32_t(t), pc};
      }
      if (oi.send)
        outgoing.chunks.push_back(v);
    }
    if (checkRaces)
      finishStep(r, t, pc, oi, outgoing, recvConn);
    if (oi.send) {
      fifos[sendConn].push_back(std::move(outgoing));
      wake(dataWaiters[sendConn]);
    }
    ++pc;
    ++report.stepsRun;
    wake(progressWaiters[self]);
    return true;
  }

  //===--------------------------------------------------------------------===//
  // Races between the threadblocks of a rank
  //===--------------------------------------------------------------------===//
  //
  // The run above is one order of many: the executors run a rank's
  // threadblocks concurrently, ordered only by dependencies, messages (a
  // send before its receive) and slots (the receive that frees a slot
  // before the send that reuses it, `depth` sends later). Two steps of one
  // rank that touch the same chunk, one of them writing, must be ordered
  // so, or the result depends on timing. Vector clocks over every
  // threadblock carry that order (happens-before); each chunk keeps its
  // last write and its last reads.

  /// After execute() numbered the threadblocks (tbBase).
  void setUpRaceChecks() {
    const uint64_t total = tbBase.back();
    uint64_t steps = 0, waitedFor = 0;
    for (const RankPlan &rp : plan.ranks)
      for (const Threadblock &tb : rp.threadblocks) {
        steps += tb.steps.size();
        waitedFor += tb.deps.size();
      }
    // A clock has a word per threadblock with steps (one without touches
    // nothing and waits for nothing). Each step joins clocks of that many
    // words, and every step waited for, message in flight and freed slot
    // keeps one: bounded in time and memory, or not checked.
    lane.assign(total, 0);
    uint32_t lanes = 0;
    for (uint32_t r = 0; r < plan.ranks.size(); ++r)
      for (uint32_t t = 0; t < plan.ranks[r].threadblocks.size(); ++t)
        lane[tbBase[r] + t] = plan.ranks[r].threadblocks[t].steps.empty() ? 0 : lanes++;
    const uint64_t budget = uint64_t(1) << 28;
    checkRaces = lanes <= maxRaceCheckedThreadblocks && steps * lanes <= budget &&
                 (waitedFor + uint64_t(fifos.size()) * depth * 2) * lanes <= budget / 4;
    report.racesChecked = checkRaces;
    if (!checkRaces)
      return;
    clocks.assign(lanes, std::vector<uint32_t>(lanes, 0));
    for (uint32_t r = 0; r < plan.ranks.size(); ++r)
      for (const Threadblock &tb : plan.ranks[r].threadblocks)
        for (const Dependency &d : tb.deps)
          depClocks.emplace(clockKey(tbBase[r] + d.tb, d.step), std::vector<uint32_t>());
    freed.assign(fifos.size(), {});
    sends.assign(fifos.size(), 0);
    accesses.resize(plan.info.nranks);
    for (uint32_t r = 0; r < plan.info.nranks; ++r) {
      const uint32_t sizes[3] = {plan.info.inputChunks, plan.info.outputChunks,
                                 plan.ranks[r].scratchChunks};
      for (unsigned k = 0; k < 3; ++k)
        accesses[r][k].assign(sizes[k], Access());
    }
  }

  /// What the race check's limits measure, in parentheses.
  std::string raceCheckSize() const {
    uint64_t steps = 0, waitedFor = 0;
    for (const RankPlan &rp : plan.ranks)
      for (const Threadblock &tb : rp.threadblocks) {
        steps += tb.steps.size();
        waitedFor += tb.deps.size();
      }
    uint64_t busy = 0;
    for (const RankPlan &rp : plan.ranks)
      for (const Threadblock &tb : rp.threadblocks)
        busy += !tb.steps.empty();
    return " (" + std::to_string(busy) + " threadblocks with steps, " + std::to_string(steps) +
           " steps, " + std::to_string(waitedFor) + " dependencies; the check takes at most " +
           std::to_string(maxRaceCheckedThreadblocks) +
           " threadblocks with steps, steps times those up to 2^28, and dependencies and slots " +
           "times threadblocks up to 2^26)";
  }

  static uint64_t clockKey(uint32_t tb, uint32_t step) { return uint64_t(tb) << 32 | step; }

  static void join(std::vector<uint32_t> &into, const std::vector<uint32_t> &from) {
    for (size_t i = 0; i < from.size(); ++i)
      into[i] = std::max(into[i], from[i]);
  }

  /// Before step pc of (r, t) runs: what it waited for happened before it;
  /// then its reads and writes are checked against the chunks' last ones.
  void orderStep(uint32_t r, uint32_t t, const Instruction &in, const OpcodeInfo &oi,
                 const Message &incoming, uint32_t sendConn) {
    const uint32_t self = tbBase[r] + t;
    std::vector<uint32_t> &v = clocks[lane[self]];
    const Threadblock &tb = plan.ranks[r].threadblocks[t];
    for (uint32_t d = 0; d < in.depCount; ++d) {
      const Dependency &dep = tb.deps[in.depBegin + d];
      join(v, depClocks[clockKey(tbBase[r] + dep.tb, dep.step)]);
    }
    if (oi.recv)
      join(v, incoming.clock);
    if (oi.send && sends[sendConn]++ >= depth) {
      join(v, freed[sendConn].front());
      freed[sendConn].pop_front();
    }
    const uint32_t c = ++v[lane[self]];
    for (uint32_t j = 0; j < in.count && racesFound < maxRaceProblems; ++j) {
      if (oi.readSrc)
        readChunk(r, self, c, in.srcBuf, in.srcOff + j);
      if (in.op == Opcode::Reduce)
        readChunk(r, self, c, in.dstBuf, in.dstOff + j);
      if (oi.writeDst)
        writeChunk(r, self, c, in.dstBuf, in.dstOff + j);
    }
  }

  /// After step pc of (r, t): what waits for it learns its clock.
  void finishStep(uint32_t r, uint32_t t, uint32_t pc, const OpcodeInfo &oi, Message &outgoing,
                  uint32_t recvConn) {
    const uint32_t self = tbBase[r] + t;
    const std::vector<uint32_t> &v = clocks[lane[self]];
    if (auto it = depClocks.find(clockKey(self, pc)); it != depClocks.end())
      it->second = v;
    if (oi.send)
      outgoing.clock = v;
    if (oi.recv)
      freed[recvConn].push_back(v);
  }

  /// "gpu R tb T step S" of global threadblock \p g at clock \p c.
  std::string stepAt(uint32_t r, int32_t g, uint32_t c) const {
    return where(r, uint32_t(g) - tbBase[r], c - 1);
  }

  void race(uint32_t r, BufferKind kind, uint32_t index, int32_t g1, uint32_t c1, const char *did1,
            uint32_t g2, uint32_t c2, const char *did2) {
    ++racesFound;
    problem(stepAt(r, g1, c1) + " " + did1 + " " + bufferName(kind) + " chunk " +
            std::to_string(index) + " and " + stepAt(r, int32_t(g2), c2) + " " + did2 +
            " it, with nothing that orders them (no dependency, message or slot between "
            "them): the result depends on which runs first");
  }

  /// Whether threadblock \p g's access at \p clock (g < 0: none) is not
  /// ordered before what \p self knows now.
  bool unordered(uint32_t self, int32_t g, uint32_t clock) const {
    return g >= 0 && uint32_t(g) != self && clocks[lane[self]][lane[uint32_t(g)]] < clock;
  }

  void readChunk(uint32_t r, uint32_t self, uint32_t c, BufferKind b, uint32_t chunk) {
    auto [kind, index] = aliasedChunk(plan.info, r, b, chunk);
    Access &a = accesses[r][unsigned(kind)][index];
    if (unordered(self, a.writer, a.writeClock))
      return race(r, kind, index, a.writer, a.writeClock, "writes", self, c, "reads");
    // A read ordered after the last one stands for both (a write ordered
    // after it is ordered after the other); concurrent ones are all kept.
    if (!unordered(self, a.reader, a.readClock)) {
      a.reader = int32_t(self);
      a.readClock = c;
    } else {
      otherReads[accessKey(r, kind, index)].push_back({self, c});
    }
  }

  void writeChunk(uint32_t r, uint32_t self, uint32_t c, BufferKind b, uint32_t chunk) {
    auto [kind, index] = aliasedChunk(plan.info, r, b, chunk);
    Access &a = accesses[r][unsigned(kind)][index];
    if (unordered(self, a.writer, a.writeClock))
      return race(r, kind, index, a.writer, a.writeClock, "writes", self, c, "writes");
    if (unordered(self, a.reader, a.readClock))
      return race(r, kind, index, a.reader, a.readClock, "reads", self, c, "writes");
    if (!otherReads.empty())
      if (auto it = otherReads.find(accessKey(r, kind, index)); it != otherReads.end()) {
        for (auto [g, rc] : it->second)
          if (unordered(self, int32_t(g), rc))
            return race(r, kind, index, int32_t(g), rc, "reads", self, c, "writes");
        otherReads.erase(it);
      }
    a.writer = int32_t(self);
    a.writeClock = c;
    a.reader = -1;
  }

  uint64_t accessKey(uint32_t r, BufferKind kind, uint32_t index) const {
    return (uint64_t(r) << 34) | (uint64_t(kind) << 32) | index;
  }

  /// Puts \p waiters back on the work list.
  void wake(std::vector<uint32_t> &waiters) {
    for (uint32_t g : waiters)
      work.push_back(g);
    waiters.clear();
  }

  void execute() {
    pcs.resize(plan.ranks.size());
    tbBase.assign(plan.ranks.size() + 1, 0);
    for (uint32_t r = 0; r < plan.ranks.size(); ++r) {
      pcs[r].assign(plan.ranks[r].threadblocks.size(), 0);
      tbBase[r + 1] = tbBase[r] + uint32_t(plan.ranks[r].threadblocks.size());
    }
    std::vector<uint32_t> rankOf(tbBase.back());
    for (uint32_t r = 0; r < plan.ranks.size(); ++r)
      for (uint32_t g = tbBase[r]; g < tbBase[r + 1]; ++g)
        rankOf[g] = r;
    progressWaiters.assign(tbBase.back(), {});
    setUpRaceChecks();
    dataWaiters.assign(fifos.size(), {});
    spaceWaiters.assign(fifos.size(), {});
    // Event driven: a threadblock runs until it blocks, then waits on the
    // one thing it needs (a step of another threadblock, a message, a free
    // slot) and goes back on the work list when that changes.
    for (uint32_t g = 0; g < tbBase.back(); ++g)
      work.push_back(g);
    while (!work.empty()) {
      const uint32_t g = work.back();
      work.pop_back();
      const uint32_t r = rankOf[g];
      while (tryStep(r, g - tbBase[r])) {
      }
    }
    // Whatever did not finish waits for something that never comes.
    bool stuck = false;
    for (uint32_t r = 0; r < plan.ranks.size(); ++r)
      for (uint32_t t = 0; t < plan.ranks[r].threadblocks.size(); ++t) {
        const Threadblock &tb = plan.ranks[r].threadblocks[t];
        const uint32_t pc = pcs[r][t];
        if (pc >= tb.steps.size())
          continue;
        const Instruction &in = tb.steps[pc];
        const OpcodeInfo &oi = opcodeInfo(in.op);
        std::string why;
        for (uint32_t d = 0; d < in.depCount && why.empty(); ++d) {
          const Dependency &dep = tb.deps[in.depBegin + d];
          if (pcs[r][dep.tb] <= dep.step)
            why = "waits for " + where(r, dep.tb, dep.step) + " (its dependency)";
        }
        if (why.empty() && oi.recv)
          if (fifos[connection(uint32_t(tb.recvPeer), r, tb.channel)].empty())
            why = "waits for a message from gpu " + std::to_string(tb.recvPeer) + " on channel " +
                  std::to_string(tb.channel);
        if (why.empty() && oi.send)
          why = "waits for a free slot to gpu " + std::to_string(tb.sendPeer) + " on channel " +
                std::to_string(tb.channel) + " (all " + std::to_string(depth) + " are full)";
        stuck = true;
        if (!problem(where(r, t, pc) + " (" + oi.mnemonic + ") never runs: it " + why))
          return;
      }
    if (stuck) {
      problem("the plan does not finish: the steps above wait for each other or for messages "
              "nobody sends (a deadlock with " +
              std::to_string(depth) + (depth == 1 ? " slot" : " slots") +
              " per connection, or unmatched steps)");
      return;
    }
    for (const auto &[key, id] : connectionOf)
      if (!fifos[id].empty()) {
        const Message &m = fifos[id].front();
        problem(where(std::get<0>(key), m.tb, m.step) + " sends a message to gpu " +
                std::to_string(std::get<1>(key)) + " on channel " +
                std::to_string(std::get<2>(key)) + " that no step receives (" +
                std::to_string(fifos[id].size()) + " left)");
      }
  }

  std::string describe(const Term &t) const {
    if (!t.defined)
      return t.count ? "a reduction involving a chunk nobody wrote" : "nothing (never written)";
    if (t.count == 1)
      if (auto it = leafOf.find(t.h1); it != leafOf.end() && keys[it->second].second == t.h2)
        return "input chunk " + std::to_string(it->second % plan.info.inputChunks) + " of gpu " +
               std::to_string(it->second / plan.info.inputChunks);
    if (t.count == UINT64_MAX)
      return "a reduction of 2^64 - 1 or more input chunks";
    return "a reduction of " + std::to_string(t.count) + " input chunks";
  }

  void expectOutput(uint32_t r, uint32_t chunk, const Term &want, const std::string &wantText) {
    Term &have = slot(r, BufferKind::Output, chunk);
    if (have == want)
      return;
    auto [kind, index] = aliasedChunk(plan.info, r, BufferKind::Output, chunk);
    const Writer &w = writers[r][unsigned(kind)][index];
    std::string by = w.tb < 0 ? std::string(kind == BufferKind::Input && have.defined
                                                ? " (its input, never overwritten)"
                                                : " (no step writes it)")
                              : ", written last by " + where(r, uint32_t(w.tb), w.step);
    problem("gpu " + std::to_string(r) + " output chunk " + std::to_string(chunk) +
            (kind == BufferKind::Output ? std::string()
                                        : std::string(" (") + bufferName(kind) + " chunk " +
                                              std::to_string(index) + " in place)") +
            " holds " + describe(have) + by + "; it must hold " + wantText);
  }

  /// SimulateOptions::derivedContract: what every output chunk holds now.
  void deriveContract() {
    const PlanInfo &info = plan.info;
    PlanContract c;
    c.outputs.assign(size_t(info.nranks) * info.outputChunks, 0);
    std::map<std::vector<uint32_t>, uint32_t> termOf; // Operands -> 1 + term.
    for (uint32_t r = 0; r < info.nranks; ++r)
      for (uint32_t i = 0; i < info.outputChunks; ++i) {
        const Term &t = slot(r, BufferKind::Output, i);
        const Writer &w = writer(r, BufferKind::Output, i);
        if (!t.defined && w.tb < 0)
          continue; // Never written: free.
        if (!t.defined || !t.id) {
          if (!problem("gpu " + std::to_string(r) + " output chunk " + std::to_string(i) +
                       " is written last by " + where(r, uint32_t(w.tb), w.step) +
                       " with a value made from chunks nobody wrote: what it holds is not a "
                       "function of the inputs"))
            return;
          continue;
        }
        const std::vector<uint32_t> &ops = explicitTerms[t.id - 1];
        auto [it, fresh] = termOf.emplace(ops, c.numTerms() + 1);
        if (fresh) {
          for (uint32_t leafIndex : ops)
            c.operands.push_back({leafIndex / info.inputChunks, leafIndex % info.inputChunks});
          c.termBegin.push_back(uint32_t(c.operands.size()));
        }
        c.outputs[size_t(r) * info.outputChunks + i] = it->second;
      }
    if (report.ok())
      *options.derivedContract = std::move(c);
  }

  void checkOutputs() {
    const PlanInfo &info = plan.info;
    if (info.collective == CollectiveKind::Custom) {
      if (!plan.contract)
        return;
      const PlanContract &c = *plan.contract;
      for (uint32_t r = 0; r < info.nranks; ++r)
        for (uint32_t i = 0; i < info.outputChunks; ++i) {
          const uint32_t term = c.outputs[size_t(r) * info.outputChunks + i];
          if (term == 0)
            continue;
          Term want;
          want.defined = true;
          for (uint32_t k = c.termBegin[term - 1]; k < c.termBegin[term]; ++k)
            want = k == c.termBegin[term - 1]
                       ? leaf(c.operands[k].rank, c.operands[k].chunk)
                       : reduceTerms(want, leaf(c.operands[k].rank, c.operands[k].chunk));
          expectOutput(r, i, want, "term " + std::to_string(term - 1) + " of the contract");
        }
      return;
    }
    Result<uint32_t> perUnit = planChunksPerUnit(info);
    if (!perUnit) {
      problem(perUnit.message());
      return;
    }
    const uint32_t C = *perUnit;
    const uint32_t outUnits = info.outputChunks / C;
    for (uint32_t r = 0; r < info.nranks; ++r) {
      if (!collectiveDefinesOutput(info.collective, info.root, r))
        continue;
      for (uint32_t b = 0; b < outUnits; ++b) {
        const UnitSource s = unitSource(info.collective, info.root, r, b);
        for (uint32_t k = 0; k < C; ++k) {
          const uint32_t inChunk = s.block * C + k;
          Term want;
          std::string text;
          if (s.everyRank) {
            for (uint32_t q = 0; q < info.nranks; ++q)
              want = q == 0 ? leaf(q, inChunk) : reduceTerms(want, leaf(q, inChunk));
            text = "the reduction of input chunk " + std::to_string(inChunk) + " of every gpu";
          } else {
            want = leaf(s.rank, inChunk);
            text = "input chunk " + std::to_string(inChunk) + " of gpu " + std::to_string(s.rank);
          }
          expectOutput(r, b * C + k, want, text);
          if (report.problems.size() >= options.maxProblems)
            return;
        }
      }
    }
  }

  const Plan &plan;
  SimulateOptions options;
  SimulateReport report;
  uint32_t depth = 1;
  std::vector<std::pair<uint64_t, uint64_t>> keys;
  std::unordered_map<uint64_t, uint32_t> leafOf;
  /// SimulateOptions::derivedContract: whether the run derives it, and
  /// every term's operands (leaf indices, sorted; Term::id); the first ones
  /// are the input chunks themselves.
  bool deriving = false;
  /// The chunks of a unit whose sizes Term::sizeClass tracks (0: none).
  uint32_t unitChunks = 0;
  /// Values written into chunks of another size (at most the first
  /// maxSizeMismatches), reported after the outputs.
  static constexpr size_t maxSizeMismatches = 5;
  std::vector<std::string> sizeMismatches;
  std::vector<std::vector<uint32_t>> explicitTerms;
  uint64_t explicitOperands = 0;
  std::vector<std::array<std::vector<Term>, 3>> buffers;
  std::vector<std::array<std::vector<Writer>, 3>> writers;
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>, uint32_t> connectionOf;
  std::vector<std::deque<Message>> fifos;
  std::vector<std::vector<uint32_t>> pcs;
  std::vector<uint32_t> tbBase; ///< Each rank's first global threadblock.
  std::vector<uint32_t> work;   ///< Threadblocks to run.
  /// Who waits on a threadblock's progress, a connection's data, its room.
  std::vector<std::vector<uint32_t>> progressWaiters, dataWaiters, spaceWaiters;

  // Race checking (setUpRaceChecks()).
  static constexpr uint32_t maxRaceProblems = 5;
  bool checkRaces = false;
  uint32_t racesFound = 0;
  /// Each global threadblock's word in a clock (threadblocks with steps
  /// only).
  std::vector<uint32_t> lane;
  std::vector<std::vector<uint32_t>> clocks; ///< Per lane.
  /// The clock of each step another waits for, once it ran.
  std::unordered_map<uint64_t, std::vector<uint32_t>> depClocks;
  /// Per connection: the clocks of the receives that freed slots, not yet
  /// taken by a send; and the sends so far.
  std::vector<std::deque<std::vector<uint32_t>>> freed;
  std::vector<uint64_t> sends;
  std::vector<std::array<std::vector<Access>, 3>> accesses;
  /// Reads concurrent with the chunk's last read (accessKey()).
  std::unordered_map<uint64_t, std::vector<std::pair<uint32_t, uint32_t>>> otherReads;
};

} // namespace

SimulateReport simulatePlan(const Plan &plan, const SimulateOptions &options) {
  return Simulator(plan, options).run();
}

} // namespace coll
