//===- StepOrder.cpp - A rank's steps in an order of their dependencies ---===//

#include "StepOrder.h"

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

} // namespace detail
} // namespace coll
