//===- Reference.cpp - Straightforward collectives for checking -----------===//
//
// Every collective is its post-condition (docs/language.md, built-in
// collectives; unitSource() in Collective.h) written as loops over ranks and
// units with memcpy and the shared element kernels, nothing more, so that it
// is easy to trust.
//
//===----------------------------------------------------------------------===//

#include "coll/Runtime/Reference.h"

#include "HostKernels.h"
#include "coll/Runtime/ChunkLayout.h"
#include "coll/Runtime/Elementwise.h"
#include "coll/Runtime/Executor.h"
#include "coll/Runtime/TestData.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <type_traits>

namespace coll {

using namespace detail;

Status referenceCollective(CollectiveKind kind, uint32_t nranks, uint32_t root, uint64_t count,
                           DataType type, RedOp op, const std::vector<const void *> &inputs,
                           const std::vector<void *> &outputs) {
  HostKernels k;
  if (!selectHostKernels(type, op, k))
    return Status::error("invalid data type or operator");
  if (nranks == 0 || inputs.size() != nranks || outputs.size() != nranks)
    return Status::error("one input and one output buffer per rank are needed");
  if (root >= nranks)
    return Status::error("root " + std::to_string(root) + " is not a rank");
  if (kind == CollectiveKind::Custom)
    return Status::error("custom collectives have no reference");
  if (count == 0)
    return Status::success();
  const uint64_t es = k.elementSize, unit = count * es;
  auto in = [&](uint32_t rank, uint64_t block) {
    return static_cast<const char *>(inputs[rank]) + block * unit;
  };
  auto out = [&](uint32_t rank, uint64_t block) {
    return static_cast<char *>(outputs[rank]) + block * unit;
  };
  // dst = in[N-1] (op) (... (in[1] (op) in[0])), block `block` of each input.
  auto reduceInto = [&](char *dst, uint64_t block) {
    std::memcpy(dst, in(0, block), unit);
    for (uint32_t j = 1; j < nranks; ++j)
      k.reduce(dst, in(j, block), dst, count);
    if (op == RedOp::Avg)
      k.divide(dst, count, nranks);
  };

  // Every defined output unit from the input unit(s) unitSource() names; a
  // reduction is computed once and copied to the other units that hold it.
  forEachOutputUnit(kind, nranks, root, [&](OutputUnit u, UnitSource s, const OutputUnit *same) {
    if (same)
      std::memcpy(out(u.rank, u.block), out(same->rank, same->block), unit);
    else if (s.everyRank)
      reduceInto(out(u.rank, u.block), s.block);
    else
      std::memcpy(out(u.rank, u.block), in(s.rank, s.block), unit);
  });
  return Status::success();
}

namespace {

/// The chunk layout of a user-declared collective's call.
ChunkLayout customLayout(const PlanInfo &info, uint64_t count) {
  uint64_t c = userCollectiveUnit(info);
  return ChunkLayout::make(count, c ? c : 1, 1);
}

/// A user-declared collective from its contract: each constrained output
/// chunk is its term's operand, or their reduction in operand order.
Status referenceContract(const Plan &plan, uint64_t count, const HostKernels &k,
                         const std::vector<const void *> &inputs,
                         const std::vector<void *> &outputs) {
  const PlanInfo &info = plan.info;
  if (!plan.contract)
    return Status::error("the plan '" + info.name +
                         "' implements a user-declared collective but carries no contract, "
                         "so its result cannot be checked");
  const PlanContract &c = *plan.contract;
  const ChunkLayout l = customLayout(info, count);
  if (count % l.chunksPerUnit != 0)
    return Status::error("count " + std::to_string(count) + " is not a multiple of " +
                         std::to_string(l.chunksPerUnit) + ", the plan's chunks per unit");
  const uint64_t es = k.elementSize, n = l.quotient;
  // Each term is reduced once, into the first output chunk that holds it,
  // and copied to the others; a contract whose terms would take more than
  // 2^34 element operations at this size is refused rather than checked
  // for hours (a term of millions of operands, which no plan computes).
  std::vector<const char *> done(c.numTerms(), nullptr);
  {
    std::vector<bool> used(c.numTerms(), false);
    uint64_t work = 0;
    for (uint32_t e : c.outputs)
      if (e != 0 && e <= c.numTerms() && !used[e - 1]) {
        used[e - 1] = true;
        work += uint64_t(c.termBegin[e] - c.termBegin[e - 1]) * n;
      }
    if (work > (uint64_t(1) << 34))
      return Status::error("checking the contract of '" + info.name + "' takes " +
                           std::to_string(work) +
                           " element operations at this size, more than the limit of 2^34");
  }
  for (uint32_t r = 0; r < info.nranks; ++r)
    for (uint32_t i = 0; i < info.outputChunks; ++i) {
      uint32_t e = c.outputs[uint64_t(r) * info.outputChunks + i];
      if (e == 0 || n == 0)
        continue;
      char *dst = static_cast<char *>(outputs[r]) + l.chunkBegin(i) * es;
      if (done[e - 1]) {
        std::memcpy(dst, done[e - 1], n * es);
        continue;
      }
      done[e - 1] = dst;
      for (uint32_t o = c.termBegin[e - 1]; o < c.termBegin[e]; ++o) {
        const PlanContract::Operand &src = c.operands[o];
        const char *from =
            static_cast<const char *>(inputs[src.rank]) + l.chunkBegin(src.chunk) * es;
        if (o == c.termBegin[e - 1])
          std::memcpy(dst, from, n * es);
        else
          k.reduce(dst, from, dst, n);
      }
    }
  return Status::success();
}

} // namespace

Status referencePlan(const Plan &plan, uint64_t count, DataType type, RedOp op,
                     const std::vector<const void *> &inputs, const std::vector<void *> &outputs) {
  const PlanInfo &info = plan.info;
  if (info.collective != CollectiveKind::Custom)
    return referenceCollective(info.collective, info.nranks, info.root, count, type, op, inputs,
                               outputs);
  HostKernels k;
  if (!selectHostKernels(type, op, k))
    return Status::error("invalid data type or operator");
  if (op == RedOp::Avg)
    return Status::error("avg is defined for the built-in collectives only");
  if (info.nranks == 0 || inputs.size() != info.nranks || outputs.size() != info.nranks)
    return Status::error("one input and one output buffer per rank are needed");
  return referenceContract(plan, count, k, inputs, outputs);
}

ElementRanges definedOutputElements(const Plan &plan, uint32_t rank, uint64_t count) {
  const PlanInfo &info = plan.info;
  ElementRanges ranges;
  if (info.collective != CollectiveKind::Custom) {
    uint64_t n = collectiveBufferElements(info.collective, info.nranks, count).output;
    if (n && collectiveDefinesOutput(info.collective, info.root, rank))
      ranges.push_back({0, n});
    return ranges;
  }
  if (!plan.contract || rank >= info.nranks)
    return ranges;
  const ChunkLayout l = customLayout(info, count);
  for (uint32_t i = 0; i < info.outputChunks; ++i) {
    if (plan.contract->outputs[uint64_t(rank) * info.outputChunks + i] == 0)
      continue;
    uint64_t begin = l.chunkBegin(i), end = begin + l.chunkSize(i);
    if (begin == end)
      continue;
    if (!ranges.empty() && ranges.back().second == begin)
      ranges.back().second = end;
    else
      ranges.push_back({begin, end});
  }
  return ranges;
}

uint64_t countMismatchesIn(DataType type, const void *got, const void *want,
                           const ElementRanges &ranges, uint64_t *firstIndex) {
  const uint64_t es = dataTypeSize(type);
  uint64_t wrong = 0;
  for (auto [begin, end] : ranges) {
    uint64_t first = 0;
    uint64_t w = countMismatches(type, static_cast<const char *>(got) + begin * es,
                                 static_cast<const char *>(want) + begin * es, end - begin, &first);
    if (w && wrong == 0 && firstIndex)
      *firstIndex = begin + first;
    wrong += w;
  }
  return wrong;
}

uint32_t testInputOperands(const Plan &plan) {
  uint64_t most = plan.info.nranks;
  if (plan.contract)
    for (size_t t = 0; t + 1 < plan.contract->termBegin.size(); ++t)
      most =
          std::max<uint64_t>(most, plan.contract->termBegin[t + 1] - plan.contract->termBegin[t]);
  return uint32_t(std::min<uint64_t>(most, UINT32_MAX));
}

void fillTestInput(DataType type, RedOp op, uint32_t nranks, uint32_t rank, uint64_t n, void *buf,
                   uint32_t operands) {
  nranks = nranks ? nranks : 1;
  visitDataType(type, [&](auto traits) {
    using Traits = decltype(traits);
    constexpr DataType D = Traits::type;
    auto *p = static_cast<typename Traits::Storage *>(buf);
    for (uint64_t e = 0; e < n; ++e)
      p[e] = testInputElement<D>(op, nranks, rank, e, operands);
  });
}

uint64_t countMismatches(DataType type, const void *got, const void *want, uint64_t n,
                         uint64_t *firstIndex) {
  uint64_t wrong = 0;
  visitDataType(type, [&](auto traits) {
    using Traits = decltype(traits);
    using S = typename Traits::Storage;
    constexpr DataType D = Traits::type;
    const S *a = static_cast<const S *>(got);
    const S *b = static_cast<const S *>(want);
    for (uint64_t i = 0; i < n; ++i) {
      bool same;
      if constexpr (isFloatType(D)) {
        auto x = loadElement<D>(a[i]), y = loadElement<D>(b[i]);
        same = x == y || (x != x && y != y);
      } else {
        same = a[i] == b[i];
      }
      if (!same && wrong++ == 0 && firstIndex)
        *firstIndex = i;
    }
  });
  return wrong;
}

std::string formatElement(DataType type, const void *buf, uint64_t index) {
  char text[64] = "?";
  visitDataType(type, [&](auto traits) {
    using Traits = decltype(traits);
    using S = typename Traits::Storage;
    constexpr DataType D = Traits::type;
    S s = static_cast<const S *>(buf)[index];
    if constexpr (isFloatType(D))
      std::snprintf(text, sizeof text, "%.17g", double(loadElement<D>(s)));
    else if constexpr (std::is_signed_v<S>)
      std::snprintf(text, sizeof text, "%" PRId64, int64_t(s));
    else
      std::snprintf(text, sizeof text, "%" PRIu64, uint64_t(s));
  });
  return text;
}

} // namespace coll
