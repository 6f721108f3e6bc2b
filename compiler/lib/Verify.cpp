//===- Verify.cpp - Symbolic check of the post-condition ------------------===//
//
// Pass 2: execute the trace on symbolic values. Every buffer slot holds the
// expression it computes: an input chunk of some rank, or a reduction node
// whose operands are ordered (the incoming value on the left). Nodes are
// hash-consed, so two slots hold the same node exactly when they compute the
// same expression tree, which is what "bitwise identical across ranks" needs.
//
// Each node also carries a summary of the multiset of input chunks it
// combines: their count, saturating (any count above the number of inputs is
// already a double count), and a sum of 64-bit hashes. The summary is only a
// filter: a slot whose summary differs from the expected one is wrong, but
// one whose summary matches is accepted only after an exact comparison of the
// multiset of leaves, computed on the DAG (paths counted as numbers, never by
// expanding the tree) and memoised per distinct node and expected result.
// Explaining a wrong slot walks the DAG the same way, so every diagnostic
// costs time polynomial in the size of the trace.
//
//===----------------------------------------------------------------------===//

#include "MixedKey.h"
#include "coll/Compiler/Passes.h"

#include "llvm/ADT/DenseMap.h"

#include <algorithm>
#include <functional>
#include <map>

using namespace coll;
using namespace coll::compiler;
using llvm::Twine;

namespace {

/// A symbolic value: a leaf (an input chunk) or a reduction of two values.
struct Node {
  uint32_t lhs = 0;     ///< Leaf: input rank. Reduction: left operand node.
  uint32_t rhs = 0;     ///< Leaf: input index. Reduction: right operand node.
  uint64_t count = 0;   ///< Input chunks combined (with repetition, saturating).
  uint64_t hash = 0;    ///< Sum of the leaves' hashes (a filter only).
  uint32_t op = 0;      ///< Trace operation that created it (reductions).
  uint32_t holders = 0; ///< Slots that hold it now.
  bool read = false;    ///< Whether an operation read it.
  bool leaf = false;
};

/// A count that stands for "this many or more": counts saturate instead of
/// wrapping, so no number of doublings can bring one back to a small value.
constexpr uint64_t SaturatedCount = UINT64_MAX;

uint64_t addCounts(uint64_t a, uint64_t b) {
  uint64_t sum;
  return __builtin_add_overflow(a, b, &sum) ? SaturatedCount : sum;
}

std::string countText(uint64_t n) {
  return n == SaturatedCount ? "2^64 - 1 or more" : std::to_string(n);
}

/// The leaves of a value with how many times each is combined, by leaf.
using LeafCounts = std::vector<std::pair<uint32_t, uint64_t>>;

/// splitmix64: well-mixed 64-bit hashes of leaf numbers.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// What an output slot must hold.
struct Expected {
  enum Kind { Free, Leaf, Set } kind = Free;
  uint32_t leaf = 0;  ///< Leaf: node id.
  uint64_t count = 0; ///< Set: number of contributions.
  uint64_t hash = 0;  ///< Set: sum of their hashes.
  /// Set: names the expected result. Equal keys mean equal multisets, so
  /// exact checks are memoised and bitwise identity is compared by it.
  uint32_t key = 0;
  /// Set of a built-in collective: every rank's input chunk `column`
  /// (`members` is filled only when it is needed).
  uint32_t column = UINT32_MAX;
  /// Set: the contributions (a user collective's may repeat).
  std::vector<uint32_t> members;
};

/// A value overwritten before anything read it.
struct Lost {
  uint32_t op;
  uint32_t node;
  uint64_t slot;
};

class Verifier {
public:
  Verifier(const Trace &t, DiagnosticEngine &diag) : t(t), diag(diag) {}
  std::optional<VerifyReport> run();

private:
  // Slots.
  uint64_t slotId(uint16_t buffer, uint32_t rank, uint32_t index) const {
    return base[buffer] + uint64_t(rank) * t.bufferChunks(buffer) + index;
  }
  void describeSlot(uint64_t slot, llvm::raw_ostream &os) const;
  uint32_t leafId(uint32_t rank, uint32_t index) const { return 1 + rank * t.inputChunks + index; }
  uint32_t reduceNode(uint32_t lhs, uint32_t rhs, uint32_t op);

  // Checks.
  bool execute();
  Expected expectedFor(uint32_t rank, uint32_t index);
  uint64_t outputSlot(uint32_t rank, uint32_t index) const;
  bool checkOutputs(VerifyReport &report);
  void explainWrong(uint32_t rank, uint32_t index, uint64_t slot, const Expected &exp);

  /// Whether \p have computes exactly the multiset \p exp expects.
  bool holdsExpected(uint32_t have, const Expected &exp);
  /// Fills `members` of a built-in collective's expected set.
  void listMembers(Expected &exp) const;

  // Describing values.
  /// The leaves under \p node with their multiplicities: a walk of the DAG.
  LeafCounts leafCounts(uint32_t node) const;
  /// For every node, how many times it combines \p leaf: 0, 1 or 2 (for
  /// two or more).
  std::vector<uint8_t> timesCombined(uint32_t leaf) const;
  std::string describe(uint32_t node) const;
  std::string describeExpected(const Expected &exp) const;
  std::string leafName(uint32_t leaf) const;
  llvm::SMRange siteRange(uint32_t op) const { return t.sites[t.ops[op].site]->getRange(); }
  const char *opName(uint32_t op) const {
    return t.ops[op].kind == OpKind::Copy ? "copy" : "reduce";
  }
  std::string forN() const { return " for N = " + std::to_string(t.nranks); }
  /// The first reduction under \p node that combines a leaf twice, given
  /// the leaf's timesCombined().
  uint32_t findDoubleCount(uint32_t node, const std::vector<uint8_t> &times) const;

  const Trace &t;
  DiagnosticEngine &diag;
  std::vector<Node> nodes;
  llvm::DenseMap<uint64_t, uint32_t, MixedKeyInfo> reductions;
  std::vector<uint64_t> base;
  std::vector<uint32_t> slots;      ///< Node held by each slot (0: nothing).
  std::vector<uint32_t> lastWriter; ///< Operation that last wrote each slot.
  std::vector<Lost> lost;
  std::vector<uint64_t> columnHash; ///< Sum over ranks of leaf hashes, per input index.
  /// Exact verdicts, by (node, expected key).
  llvm::DenseMap<uint64_t, bool, MixedKeyInfo> exactVerdicts;
};

} // namespace

uint32_t Verifier::reduceNode(uint32_t lhs, uint32_t rhs, uint32_t op) {
  uint64_t key = (uint64_t(lhs) << 32) | rhs;
  auto [it, inserted] = reductions.try_emplace(key, uint32_t(nodes.size()));
  if (inserted) {
    Node n;
    n.lhs = lhs;
    n.rhs = rhs;
    const Node &a = nodes[lhs], &b = nodes[rhs];
    n.count = addCounts(a.count, b.count);
    n.hash = a.hash + b.hash;
    n.op = op;
    nodes.push_back(n);
  }
  return it->second;
}

void Verifier::describeSlot(uint64_t slot, llvm::raw_ostream &os) const {
  uint16_t buffer = 0;
  while (size_t(buffer) + 1 < base.size() && slot >= base[buffer + 1])
    ++buffer;
  uint64_t off = slot - base[buffer];
  uint32_t size = t.bufferChunks(buffer);
  printSlotRange(t, SlotRange{uint32_t(off / size), buffer, uint32_t(off % size), 1}, os);
}

bool Verifier::execute() {
  for (uint32_t k = 0; k < t.ops.size(); ++k) {
    const ChunkOp &op = t.ops[k];
    for (uint32_t c = 0; c < op.src.count; ++c) {
      uint64_t src = slotId(op.src.buffer, op.src.rank, op.src.index + c);
      uint64_t dst = slotId(op.dst.buffer, op.dst.rank, op.dst.index + c);
      uint32_t value = slots[src];
      if (value == 0) {
        std::string where;
        llvm::raw_string_ostream os(where);
        describeSlot(src, os);
        diag.error(siteRange(k), Twine(opName(k)) + " reads " + os.str() +
                                     ", which holds nothing at this point" + forN());
        return false;
      }
      uint32_t old = slots[dst];
      nodes[value].read = true;
      if (op.kind == OpKind::Reduce) {
        if (old == 0) {
          std::string where;
          llvm::raw_string_ostream os(where);
          describeSlot(dst, os);
          diag.error(siteRange(k),
                     "reduce into " + os.str() + ", which holds nothing at this point" + forN());
          return false;
        }
        nodes[old].read = true;
        value = reduceNode(value, old, k);
      }
      if (old != 0 && --nodes[old].holders == 0 && !nodes[old].read)
        lost.push_back(Lost{k, old, dst});
      ++nodes[value].holders;
      slots[dst] = value;
      lastWriter[dst] = k;
    }
  }
  return true;
}

uint64_t Verifier::outputSlot(uint32_t rank, uint32_t index) const {
  // In-place programs hold the output where the collective's alias puts it.
  if (!t.inplace || t.inPlaceBuffer() == OutputBuffer)
    return slotId(OutputBuffer, rank, index);
  return slotId(InputBuffer, rank, t.inPlaceOffset(rank) + index);
}

Expected Verifier::expectedFor(uint32_t rank, uint32_t index) {
  Expected e;
  CollectiveKind kind = t.collective();
  if (!collectiveDefinesOutput(kind, t.root, rank))
    return e;
  // Output chunk `index` is chunk index % C of unit index / C; unitSource()
  // names the input unit (of one rank, or of every rank combined) it holds.
  uint32_t C = t.chunks;
  UnitSource s = unitSource(kind, t.root, rank, index / C);
  uint32_t i = s.block * C + index % C;
  if (s.everyRank) {
    e.kind = Expected::Set;
    e.count = t.nranks;
    e.hash = columnHash[i];
    e.column = i;
    e.key = i;
  } else {
    e.kind = Expected::Leaf;
    e.leaf = leafId(s.rank, i);
  }
  return e;
}

LeafCounts Verifier::leafCounts(uint32_t node) const {
  // The DAG under the node, then the number of paths from the node to each
  // of them, parents first: a reduction's operands are older nodes, so
  // descending ids are a topological order.
  // Leaf ids of one column differ by multiples of the chunk count, which
  // the default integer hash maps to one bucket chain: mix every bit.
  llvm::DenseMap<uint64_t, uint64_t, MixedKeyInfo> paths;
  std::vector<uint32_t> order, stack = {node};
  paths[node] = 1;
  while (!stack.empty()) {
    uint32_t n = stack.back();
    stack.pop_back();
    order.push_back(n);
    if (nodes[n].leaf)
      continue;
    for (uint32_t child : {nodes[n].lhs, nodes[n].rhs})
      if (paths.try_emplace(child, 0).second)
        stack.push_back(child);
  }
  std::sort(order.begin(), order.end(), std::greater<uint32_t>());
  LeafCounts out;
  for (uint32_t n : order) {
    uint64_t p = paths[n];
    if (nodes[n].leaf) {
      out.emplace_back(n, p);
      continue;
    }
    // Operands may be one node (t + t): it is then reached twice.
    paths[nodes[n].lhs] = addCounts(paths[nodes[n].lhs], p);
    paths[nodes[n].rhs] = addCounts(paths[nodes[n].rhs], p);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<uint8_t> Verifier::timesCombined(uint32_t leaf) const {
  // Node ids are a topological order: operands come first.
  std::vector<uint8_t> times(nodes.size());
  times[leaf] = 1;
  for (size_t n = leaf + 1; n < nodes.size(); ++n)
    if (!nodes[n].leaf)
      times[n] = std::min(2, times[nodes[n].lhs] + times[nodes[n].rhs]);
  return times;
}

void Verifier::listMembers(Expected &exp) const {
  if (exp.kind != Expected::Set || exp.column == UINT32_MAX || !exp.members.empty())
    return;
  for (uint32_t j = 0; j < t.nranks; ++j)
    exp.members.push_back(leafId(j, exp.column));
}

bool Verifier::holdsExpected(uint32_t have, const Expected &exp) {
  if (exp.kind == Expected::Leaf)
    return have == exp.leaf;
  // The summary filters: a different count or hash is a different multiset.
  if (have == 0 || nodes[have].count != exp.count || nodes[have].hash != exp.hash)
    return false;
  auto memo = exactVerdicts.find((uint64_t(have) << 32) | exp.key);
  if (memo != exactVerdicts.end())
    return memo->second;
  // Equal summaries prove nothing: compare the multisets themselves.
  Expected full = exp;
  listMembers(full);
  std::sort(full.members.begin(), full.members.end());
  LeafCounts want;
  for (uint32_t m : full.members) {
    if (!want.empty() && want.back().first == m)
      ++want.back().second;
    else
      want.emplace_back(m, 1);
  }
  bool same = leafCounts(have) == want;
  exactVerdicts[(uint64_t(have) << 32) | exp.key] = same;
  return same;
}

std::string Verifier::leafName(uint32_t leaf) const {
  return "in[" + std::to_string(nodes[leaf].lhs) + "][" + std::to_string(nodes[leaf].rhs) + "]";
}

std::string Verifier::describe(uint32_t node) const {
  if (node == 0)
    return "nothing";
  if (nodes[node].leaf)
    return leafName(node);
  if (nodes[node].count <= 6) {
    // Small trees print in full, operand order included.
    std::function<std::string(uint32_t, bool)> rec = [&](uint32_t n, bool top) -> std::string {
      if (nodes[n].leaf)
        return leafName(n);
      std::string s = rec(nodes[n].lhs, false) + " + " + rec(nodes[n].rhs, false);
      return top ? s : "(" + s + ")";
    };
    return rec(node, true);
  }
  return "a reduction of " + countText(nodes[node].count) + " chunks";
}

std::string Verifier::describeExpected(const Expected &exp) const {
  if (exp.kind == Expected::Leaf)
    return leafName(exp.leaf);
  if (exp.members.size() <= 6) {
    std::string s;
    for (uint32_t m : exp.members)
      s += (s.empty() ? "" : " + ") + leafName(m);
    return "the reduction of " + s;
  }
  return "the reduction of " + std::to_string(exp.count) + " chunks (" + leafName(exp.members[0]) +
         " ... " + leafName(exp.members.back()) + ")";
}

uint32_t Verifier::findDoubleCount(uint32_t node, const std::vector<uint8_t> &times) const {
  // Descend while one operand alone combines the leaf twice; below that, each
  // operand holds it once.
  while (!nodes[node].leaf) {
    if (times[nodes[node].lhs] == 2)
      node = nodes[node].lhs;
    else if (times[nodes[node].rhs] == 2)
      node = nodes[node].rhs;
    else
      return node;
  }
  return 0;
}

void Verifier::explainWrong(uint32_t rank, uint32_t index, uint64_t slot, const Expected &given) {
  Expected exp = given;
  listMembers(exp);
  uint32_t have = slots[slot];
  std::string outName = "output[" + std::to_string(rank) + "][" + std::to_string(index) + "]";
  std::string should = describeExpected(exp);

  LeafCounts got;
  if (have)
    got = leafCounts(have);
  auto holds = [&](uint32_t leaf) {
    auto it = std::lower_bound(got.begin(), got.end(), std::make_pair(leaf, uint64_t(0)));
    return it != got.end() && it->first == leaf;
  };
  std::vector<uint32_t> expectedLeaves =
      exp.kind == Expected::Leaf ? std::vector<uint32_t>{exp.leaf} : exp.members;

  // A needed value destroyed before anything read it.
  for (uint32_t leaf : expectedLeaves) {
    if (holds(leaf))
      continue;
    std::vector<uint8_t> times = timesCombined(leaf);
    for (const Lost &l : lost) {
      if (!times[l.node])
        continue;
      std::string where;
      llvm::raw_string_ostream os(where);
      describeSlot(l.slot, os);
      diag.error(siteRange(l.op), Twine(opName(l.op)) + " overwrites " + os.str() +
                                      ", which holds " + describe(l.node) +
                                      ", before anything reads it" + forN() +
                                      "; the result needs it");
      if (lastWriter[slot] != UINT32_MAX)
        diag.note(siteRange(lastWriter[slot]),
                  outName + " ends holding " + describe(have) + "; it should hold " + should);
      return;
    }
    break;
  }
  // A contribution counted more often than the result needs: blame the
  // reduce that combined it again.
  for (auto [leaf, times] : got) {
    uint64_t allowed = uint64_t(std::count(expectedLeaves.begin(), expectedLeaves.end(), leaf));
    if (times < 2 || times <= allowed)
      continue;
    uint32_t node = findDoubleCount(have, timesCombined(leaf));
    uint32_t op = node ? nodes[node].op : lastWriter[slot];
    diag.error(siteRange(op),
               "contribution " + leafName(leaf) + " is counted " +
                   (times == 2 ? std::string("twice") : countText(times) + " times") + forN());
    diag.note(siteRange(lastWriter[slot]),
              outName + " ends holding " + describe(have) + "; it should hold " + should);
    return;
  }
  if (lastWriter[slot] == UINT32_MAX) {
    // In place, an output chunk no step writes is the input it aliases.
    diag.error(t.algorithm->nameRange,
               outName + " is never written" + forN() +
                   (have ? ", so it still holds " + describe(have) + " (in place, its input)"
                         : std::string()) +
                   "; it should hold " + should);
    return;
  }
  std::string detail;
  if (exp.kind == Expected::Set && have) {
    std::vector<std::string> missing, extra;
    for (uint32_t leaf : expectedLeaves)
      if (!holds(leaf))
        missing.push_back(leafName(leaf));
    for (auto [leaf, times] : got)
      if (std::find(expectedLeaves.begin(), expectedLeaves.end(), leaf) == expectedLeaves.end())
        extra.push_back(leafName(leaf));
    auto list = [](const std::vector<std::string> &v) {
      std::string s;
      for (size_t k = 0; k < v.size() && k < 4; ++k)
        s += (k ? ", " : "") + v[k];
      if (v.size() > 4)
        s += " and " + std::to_string(v.size() - 4) + " more";
      return s;
    };
    if (!missing.empty())
      detail += "; missing " + list(missing);
    if (!extra.empty())
      detail += "; not expected: " + list(extra);
  }
  diag.error(siteRange(lastWriter[slot]), outName + " ends holding " + describe(have) + forN() +
                                              "; it should hold " + should + detail);
}

bool Verifier::checkOutputs(VerifyReport &report) {
  unsigned wrong = 0;
  // Bitwise identity: every output chunk that must hold a given reduction
  // (on whichever rank) holds the same expression tree.
  llvm::DenseMap<uint32_t, uint32_t> treeOfResult;
  auto check = [&](uint32_t rank, uint32_t index, const Expected &exp) {
    if (exp.kind == Expected::Free)
      return;
    ++report.checkedSlots;
    uint64_t slot = outputSlot(rank, index);
    uint32_t have = slots[slot];
    if (!holdsExpected(have, exp)) {
      if (wrong++ == 0)
        explainWrong(rank, index, slot, exp);
      return;
    }
    if (exp.kind != Expected::Set)
      return;
    auto [it, inserted] = treeOfResult.try_emplace(exp.key, have);
    if (!inserted && it->second != have) {
      report.identicalAcrossRanks = false;
      if (report.differingIndices.size() < 8 &&
          std::find(report.differingIndices.begin(), report.differingIndices.end(), index) ==
              report.differingIndices.end())
        report.differingIndices.push_back(index);
    }
  };

  if (t.builtin) {
    for (uint32_t r = 0; r < t.nranks; ++r)
      for (uint32_t i = 0; i < t.outputChunks; ++i)
        check(r, i, expectedFor(r, i));
  } else {
    // Equal expected multisets share a key.
    std::map<std::vector<uint32_t>, uint32_t> keyOfSet;
    for (const PostFact &f : t.userPost) {
      Expected e;
      if (f.rank >= t.nranks || f.index >= t.outputChunks)
        continue;
      bool inputsOk = true;
      for (auto [r, i] : f.inputs)
        inputsOk &= r < t.nranks && i < t.inputChunks;
      if (!inputsOk)
        continue;
      if (!f.isReduction) {
        e.kind = Expected::Leaf;
        e.leaf = leafId(f.inputs[0].first, f.inputs[0].second);
      } else {
        e.kind = Expected::Set;
        for (auto [r, i] : f.inputs) {
          uint32_t leaf = leafId(r, i);
          e.members.push_back(leaf);
          e.hash += nodes[leaf].hash;
        }
        e.count = e.members.size();
        std::vector<uint32_t> sorted = e.members;
        std::sort(sorted.begin(), sorted.end());
        e.key = keyOfSet.try_emplace(std::move(sorted), uint32_t(keyOfSet.size())).first->second;
      }
      check(f.rank, f.index, e);
    }
  }
  if (wrong > 1)
    diag.note(t.algorithm->nameRange,
              Twine(wrong - 1) + " more output chunk" + (wrong == 2 ? " is" : "s are") + " wrong");
  if (wrong)
    return false;

  return true;
}

std::optional<VerifyReport> Verifier::run() {
  // Slot storage for every buffer of every rank.
  uint16_t numBuffers = FirstScratchBuffer + t.scratchChunks.size();
  base.assign(numBuffers + 1, 0);
  for (uint16_t b = 0; b < numBuffers; ++b)
    base[b + 1] = base[b] + uint64_t(t.nranks) * t.bufferChunks(b);
  slots.assign(base[numBuffers], 0);
  lastWriter.assign(base[numBuffers], UINT32_MAX);

  // Node 0 is "nothing"; leaves follow, one per input chunk of every rank.
  nodes.resize(1 + uint64_t(t.nranks) * t.inputChunks);
  for (uint32_t r = 0; r < t.nranks; ++r)
    for (uint32_t i = 0; i < t.inputChunks; ++i) {
      Node &n = nodes[leafId(r, i)];
      n.leaf = true;
      n.lhs = r;
      n.rhs = i;
      n.count = 1;
      n.hash = mix(leafId(r, i));
    }
  columnHash.assign(t.inputChunks, 0);
  for (uint32_t r = 0; r < t.nranks; ++r)
    for (uint32_t i = 0; i < t.inputChunks; ++i)
      columnHash[i] += nodes[leafId(r, i)].hash;

  // Initial state: input chunks where the program sees them.
  auto place = [&](uint32_t r, uint32_t i) {
    uint64_t slot = t.inplace && t.inPlaceBuffer() == OutputBuffer
                        ? slotId(OutputBuffer, r, t.inPlaceOffset(r) + i)
                        : slotId(InputBuffer, r, i);
    slots[slot] = leafId(r, i);
    ++nodes[leafId(r, i)].holders;
  };
  if (t.hasUserPre) {
    for (auto [r, i] : t.userPre)
      if (r < t.nranks && i < t.inputChunks && slots[slotId(InputBuffer, r, i)] == 0)
        place(r, i);
  } else {
    for (uint32_t r = 0; r < t.nranks; ++r)
      for (uint32_t i = 0; i < t.inputChunks; ++i)
        place(r, i);
  }

  if (!execute())
    return std::nullopt;
  VerifyReport report;
  if (!checkOutputs(report))
    return std::nullopt;
  report.reductions = reductions.size();
  return report;
}

std::optional<VerifyReport> compiler::verify(const Trace &trace, DiagnosticEngine &diag) {
  return Verifier(trace, diag).run();
}

void compiler::printVerifyReport(const Trace &trace, const VerifyReport &report,
                                 llvm::raw_ostream &os) {
  os << "verified: " << trace.name << " implements " << trace.collectiveName
     << " for N = " << trace.nranks << "\n";
  auto plural = [](uint64_t n, const char *word) {
    return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
  };
  os << "  " << plural(trace.ops.size(), "chunk operation") << ", "
     << plural(report.reductions, "distinct reduction") << ", "
     << plural(report.checkedSlots, "output chunk") << " checked\n";
  if (report.reductions == 0) {
    os << "  results are copies of input chunks; no reduction order to compare\n";
  } else if (report.identicalAcrossRanks) {
    os << "  bitwise identical: every rank combines every output chunk in the same order\n";
  } else {
    os << "  not bitwise identical: ranks combine output chunk";
    for (size_t k = 0; k < report.differingIndices.size(); ++k)
      os << (k ? ", " : " ") << report.differingIndices[k];
    os << " in different orders\n";
  }
}
