//===- Parallel.h - Per-rank work on several cores --------------*- C++ -*-===//
/// \file
/// Most lowering passes treat each rank on its own. parallelForEach runs such
/// a loop body on a few threads; each index writes only its own rank's state,
/// so the result is the same as a sequential loop's, byte for byte.
//===----------------------------------------------------------------------===//
#ifndef COLL_COMPILER_LIB_PARALLEL_H
#define COLL_COMPILER_LIB_PARALLEL_H

#include "coll/Runtime/Parallel.h"

#include <cstddef>

namespace coll::compiler {

/// Calls body(i) for every i in [0, n), on up to hardware_concurrency()
/// threads (at most 8). Small loops run on the calling thread.
template <typename Body> void parallelForEach(size_t n, const Body &body) {
  if (n < 64) {
    for (size_t i = 0; i < n; ++i)
      body(i);
    return;
  }
  parallelFor(n, 0, body);
}

} // namespace coll::compiler

#endif // COLL_COMPILER_LIB_PARALLEL_H
