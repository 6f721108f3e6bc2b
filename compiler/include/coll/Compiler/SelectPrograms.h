//===- SelectPrograms.h - A selection table from predictions ----*- C++ -*-===//
/// \file
/// `collc select`: compiles every program of a directory (the standard
/// library) for each rank count, predicts each on a topology at each size
/// (coll/Runtime/Predict.h), and writes the selection table
/// (coll/Runtime/Selection.h) that picks, per collective, rank count and
/// size range, the program predicted fastest.
//===----------------------------------------------------------------------===//
#ifndef COLL_COMPILER_SELECTPROGRAMS_H
#define COLL_COMPILER_SELECTPROGRAMS_H

#include "coll/Runtime/DataType.h"
#include "coll/Runtime/Status.h"
#include "coll/Runtime/Topology.h"

#include <cstdint>
#include <string>
#include <vector>

namespace coll::compiler {

/// What selectPrograms() tries.
struct SelectOptions {
  std::string programDir;           ///< The `.coll` programs to choose from.
  std::vector<uint32_t> ranks;      ///< Rank counts, one block of rows each.
  uint64_t minBytes = 1024;         ///< Sizes from minBytes ...
  uint64_t maxBytes = 256ull << 20; ///< ... to maxBytes ...
  unsigned factor = 2;              ///< ... by this factor.
  DataType type = DataType::Float32;
  /// Simulations at once (predictPlans()); 0: the machine's CPUs, at most 8.
  unsigned threads = 0;
  /// Programs' paths in the table are relative to this directory (the
  /// table's); "" writes them as found.
  std::string tableDir;
};

/// The table, as text with a header that says how it was made; an error
/// when no program compiles or a prediction fails.
Result<std::string> selectPrograms(const Topology &topo, const SelectOptions &options);

} // namespace coll::compiler

#endif // COLL_COMPILER_SELECTPROGRAMS_H
