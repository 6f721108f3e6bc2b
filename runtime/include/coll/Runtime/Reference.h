//===- Reference.h - Straightforward collectives for checking ---*- C++ -*-===//
/// \file
/// A plain implementation of every built-in collective (docs/language.md
/// lists their post-conditions) on host buffers, and test data for which any order of
/// combining is exact, so that executors' results can be compared with it
/// element for element. Counts follow Executor.h.
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_REFERENCE_H
#define COLL_RUNTIME_REFERENCE_H

#include "coll/Runtime/DataType.h"
#include "coll/Runtime/Plan.h"
#include "coll/Runtime/Status.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace coll {

/// Computes every rank's output of \p kind from every rank's input: reduces
/// in rank order (dst = in[j] (op) acc) and applies Avg's final division.
/// Outputs the collective leaves undefined (reduce and gather off the root)
/// are not written. Buffers are sized by collectiveBufferElements().
Status referenceCollective(CollectiveKind kind, uint32_t nranks, uint32_t root, uint64_t count,
                           DataType type, RedOp op, const std::vector<const void *> &inputs,
                           const std::vector<void *> &outputs);

/// The reference result of a run of \p plan, every rank's buffers sized by
/// planBufferElements(): referenceCollective() for a built-in collective; for
/// a user-declared one, every output chunk its contract constrains, from the
/// contract (an error when the plan carries none, or \p count does not
/// divide into its chunks). Elements the plan leaves undefined are not
/// written.
Status referencePlan(const Plan &plan, uint64_t count, DataType type, RedOp op,
                     const std::vector<const void *> &inputs, const std::vector<void *> &outputs);

/// Elements [begin, end) of an output buffer, in a list of such ranges.
using ElementRanges = std::vector<std::pair<uint64_t, uint64_t>>;

/// The elements of rank \p rank's output that a run of \p plan with
/// \p count defines (what referencePlan() writes), in order and merged:
/// the whole output, none (reduce and gather off the root), or the chunks a
/// user-declared collective's contract constrains.
ElementRanges definedOutputElements(const Plan &plan, uint32_t rank, uint64_t count);

/// Number of elements in \p ranges where \p got and \p want differ, as
/// countMismatches(); *firstIndex receives the first one (from the start of
/// the buffer).
uint64_t countMismatchesIn(DataType type, const void *got, const void *want,
                           const ElementRanges &ranges, uint64_t *firstIndex = nullptr);

/// Fills \p buf with \p n elements of rank \p rank's test input. Integers are
/// distinct per (rank, element) as far as the type's width allows (sums and
/// products wrap, so any order gives the same bits). Floating-point values
/// are small integers for Sum and Avg, and +-2^-1, +-1, +-2 for Prod, so
/// every partial result of \p nranks ranks is exact in any order; any
/// integers for Max and Min.
/// \p operands: the most operands a reduction of the plan has, when more
/// than nranks (testInputOperands()).
void fillTestInput(DataType type, RedOp op, uint32_t nranks, uint32_t rank, uint64_t n, void *buf,
                   uint32_t operands = 0);

/// The most operands one output element of \p plan reduces: nranks for the
/// built-in collectives, the largest term of a user-declared collective's
/// contract (or nranks, when that is more). For fillTestInput().
uint32_t testInputOperands(const Plan &plan);

/// Number of the \p n elements where \p got and \p want differ (floating
/// point: by value, NaN equal to NaN). *firstIndex receives the first one.
uint64_t countMismatches(DataType type, const void *got, const void *want, uint64_t n,
                         uint64_t *firstIndex = nullptr);

/// Element \p index of \p buf as text.
std::string formatElement(DataType type, const void *buf, uint64_t index);

} // namespace coll

#endif // COLL_RUNTIME_REFERENCE_H
