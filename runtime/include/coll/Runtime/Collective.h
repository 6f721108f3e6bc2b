//===- Collective.h - The facts of every collective -------------*- C++ -*-===//
/// \file
/// CollectiveKind and the columns of Collectives.def as constexpr lookups.
/// Header-only and free of dependencies, so that lang/ and the compiler read
/// the same table as the runtime without linking it.
///
/// Units follow NCCL's counts: a rank's unit is C chunks (C is the plan's
/// chunks per unit, count elements at run time); buffers marked "by N" hold
/// N units.
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_COLLECTIVE_H
#define COLL_RUNTIME_COLLECTIVE_H

#include <cstdint>
#include <string_view>
#include <vector>

namespace coll {

/// How a collective's in-place form aliases its buffers (Collectives.def).
enum class InPlaceAlias : uint8_t {
  None,          ///< No in-place form.
  Same,          ///< Input and output are the same unit.
  InputInOutput, ///< The input is block `rank` of the output (allgather).
  OutputInInput, ///< The output is block `rank` of the input (reducescatter).
};

/// The collective a plan implements: the rows of Collectives.def, then
/// Custom (a user-declared collective). The values are the plan format's.
enum class CollectiveKind : uint8_t {
#define COLL_COLLECTIVE(Id, Name, Rooted, InByN, OutByN, Reduces, RootOutput, InPlace) Id,
#include "coll/Runtime/Collectives.def"
  Custom, ///< A user-declared collective.
};

/// The facts of one collective (a row of Collectives.def).
struct CollectiveInfo {
  CollectiveKind kind;
  const char *name;
  bool rooted;     ///< Takes a root.
  bool inputByN;   ///< The input holds N units per rank.
  bool outputByN;  ///< The output holds N units per rank.
  bool reduces;    ///< Combines values with the operator.
  bool rootOutput; ///< Only the root's output is defined.
  InPlaceAlias inPlace;
};

namespace detail {
inline constexpr CollectiveInfo collectiveTable[] = {
#define COLL_COLLECTIVE(Id, Name, Rooted, InByN, OutByN, Reduces, RootOutput, InPlace)             \
  {CollectiveKind::Id, Name, Rooted, InByN, OutByN, Reduces, RootOutput, InPlaceAlias::InPlace},
#include "coll/Runtime/Collectives.def"
    {CollectiveKind::Custom, "custom", false, false, false, false, false, InPlaceAlias::None},
};
} // namespace detail

/// Number of built-in collectives (CollectiveKind::Custom is the next value).
constexpr unsigned numBuiltinCollectives() {
  return unsigned(CollectiveKind::Custom);
}
static_assert(sizeof(detail::collectiveTable) / sizeof(detail::collectiveTable[0]) ==
                  numBuiltinCollectives() + 1,
              "one table row per collective, and Custom");

/// Whether \p kind is a value of CollectiveKind (built-in or Custom).
constexpr bool isValidCollective(CollectiveKind kind) {
  return unsigned(kind) <= unsigned(CollectiveKind::Custom);
}

/// The facts of \p kind; Custom's (no root, no reduction, no in-place
/// form) for Custom and for an invalid value.
constexpr const CollectiveInfo &collectiveInfo(CollectiveKind kind) {
  return detail::collectiveTable[isValidCollective(kind) ? unsigned(kind)
                                                         : unsigned(CollectiveKind::Custom)];
}

/// "allreduce", ...; "custom" for Custom and "unknown" for an invalid value.
constexpr const char *collectiveName(CollectiveKind kind) {
  return isValidCollective(kind) ? collectiveInfo(kind).name : "unknown";
}

/// The built-in collective named \p name, or null.
constexpr const CollectiveInfo *findCollective(std::string_view name) {
  for (unsigned i = 0; i < numBuiltinCollectives(); ++i)
    if (name == detail::collectiveTable[i].name)
      return &detail::collectiveTable[i];
  return nullptr;
}

/// Whether \p kind has an in-place form.
constexpr bool hasInPlaceForm(CollectiveKind kind) {
  return collectiveInfo(kind).inPlace != InPlaceAlias::None;
}

/// The units of one rank's input (\p output false) or output buffer on
/// \p nranks ranks: 1, or nranks for a buffer "by N".
constexpr uint64_t bufferUnits(CollectiveKind kind, bool output, uint64_t nranks) {
  const CollectiveInfo &c = collectiveInfo(kind);
  return (output ? c.outputByN : c.inputByN) ? nranks : 1;
}

/// Where an in-place call of \p kind on rank \p rank keeps its input inside
/// its output (\p inputInOutput) or its output inside its input, in units:
/// the offset that aliasing adds. 0 for Same; only meaningful when the
/// alias puts that buffer inside the other.
constexpr uint64_t inPlaceBlock(CollectiveKind kind, uint32_t rank) {
  InPlaceAlias a = collectiveInfo(kind).inPlace;
  return a == InPlaceAlias::InputInOutput || a == InPlaceAlias::OutputInInput ? rank : 0;
}

/// Whether \p rank's output holds a defined result after \p kind on
/// \p root: every rank's, except where only the root's is (reduce, gather).
constexpr bool collectiveDefinesOutput(CollectiveKind kind, uint32_t root, uint32_t rank) {
  return !collectiveInfo(kind).rootOutput || rank == root;
}

/// Whether \p kind combines values with the operator.
constexpr bool collectiveReduces(CollectiveKind kind) {
  return collectiveInfo(kind).reduces;
}

/// nccl-tests' bus bandwidth factor of \p kind on \p nranks ranks:
/// busbw = algbw * factor (1 for every collective without one of its own,
/// user-declared ones included).
constexpr double busBandwidthFactor(CollectiveKind kind, uint32_t nranks) {
  const double n = nranks ? nranks : 1;
  switch (kind) {
  case CollectiveKind::AllReduce:
    return 2 * (n - 1) / n;
  case CollectiveKind::AllGather:
  case CollectiveKind::ReduceScatter:
  case CollectiveKind::AllToAll:
    return (n - 1) / n;
  default:
    return 1;
  }
}

/// Where the value of one unit of a rank's output comes from: one unit of
/// the inputs, of every rank (combined with the operator) or of one.
struct UnitSource {
  bool everyRank = false; ///< Combined over every rank's input.
  uint32_t rank = 0;      ///< The one rank, when not everyRank.
  uint32_t block = 0;     ///< The unit of that input (0 unless it is by N).
};

/// The post-condition of every built-in collective in one rule: unit
/// \p block of rank \p rank's output after \p kind on \p root holds the
/// inputs' unit `inputByN ? rank : 0`, combined over every rank when the
/// collective reduces, else of rank `outputByN ? block : root`. (Where only
/// the root's output is defined, collectiveDefinesOutput() says so.)
///   allreduce out[r][0] = sum_q in[q][0]   reducescatter out[r][0] = sum_q in[q][r]
///   allgather out[r][j] = in[j][0]         alltoall      out[r][j] = in[j][r]
///   broadcast out[r][0] = in[root][0]      scatter       out[r][0] = in[root][r]
constexpr UnitSource unitSource(CollectiveKind kind, uint32_t root, uint32_t rank, uint32_t block) {
  const CollectiveInfo &c = collectiveInfo(kind);
  UnitSource s;
  s.everyRank = c.reduces;
  s.rank = c.reduces ? 0 : c.outputByN ? block : root;
  s.block = c.inputByN ? rank : 0;
  return s;
}

/// One unit of one rank's output.
struct OutputUnit {
  uint32_t rank = 0;
  uint32_t block = 0;
};

/// Calls visit(unit, source, sameAs) for every defined output unit of
/// \p kind on \p nranks ranks with root \p root, rank by rank, with its
/// unitSource(). \p sameAs is an earlier unit that holds the same
/// combination over every rank (so that a reduction is computed once, then
/// copied: allreduce), or null.
template <class Visit>
void forEachOutputUnit(CollectiveKind kind, uint32_t nranks, uint32_t root, Visit visit) {
  const uint64_t inUnits = bufferUnits(kind, /*output=*/false, nranks);
  const uint64_t outUnits = bufferUnits(kind, /*output=*/true, nranks);
  std::vector<OutputUnit> first(inUnits);
  std::vector<bool> seen(inUnits, false);
  for (uint32_t r = 0; r < nranks; ++r) {
    if (!collectiveDefinesOutput(kind, root, r))
      continue;
    for (uint32_t b = 0; b < outUnits; ++b) {
      const UnitSource s = unitSource(kind, root, r, b);
      const OutputUnit unit{r, b};
      const bool shared = s.everyRank && seen[s.block];
      visit(unit, s, shared ? &first[s.block] : static_cast<const OutputUnit *>(nullptr));
      if (s.everyRank && !shared) {
        first[s.block] = unit;
        seen[s.block] = true;
      }
    }
  }
}

/// Whether rank \p rank's buffers are \p kind's in-place alias for a unit
/// of \p unitBytes: Same: send == recv; InputInOutput: send == recv +
/// rank * unit; OutputInInput: recv == send + rank * unit; never without an
/// in-place form.
inline bool isInPlaceCall(CollectiveKind kind, uint32_t rank, const void *sendbuf,
                          const void *recvbuf, uint64_t unitBytes) {
  const char *in = static_cast<const char *>(sendbuf);
  const char *out = static_cast<const char *>(recvbuf);
  switch (collectiveInfo(kind).inPlace) {
  case InPlaceAlias::Same:
    return in == out;
  case InPlaceAlias::InputInOutput:
    return in == out + rank * unitBytes;
  case InPlaceAlias::OutputInInput:
    return out == in + rank * unitBytes;
  case InPlaceAlias::None:
    break;
  }
  return false;
}

} // namespace coll

#endif // COLL_RUNTIME_COLLECTIVE_H
