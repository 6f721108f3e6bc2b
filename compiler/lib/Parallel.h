//===- Parallel.h - Per-rank work on several cores --------------*- C++ -*-===//
/// \file
/// Most lowering passes treat each rank on its own. parallelForEach runs such
/// a loop body on a few threads; each index writes only its own rank's state,
/// so the result is the same as a sequential loop's, byte for byte.
//===----------------------------------------------------------------------===//
#ifndef COLL_COMPILER_LIB_PARALLEL_H
#define COLL_COMPILER_LIB_PARALLEL_H

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

namespace coll::compiler {

/// Calls body(i) for every i in [0, n), on up to hardware_concurrency()
/// threads (at most 8). Small loops run on the calling thread.
template <typename Body> void parallelForEach(size_t n, const Body &body) {
  unsigned threads = std::min(8u, std::max(1u, std::thread::hardware_concurrency()));
  if (n < 64 || threads == 1) {
    for (size_t i = 0; i < n; ++i)
      body(i);
    return;
  }
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < n;)
      body(i);
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t)
    pool.emplace_back(worker);
  worker();
  for (std::thread &t : pool)
    t.join();
}

} // namespace coll::compiler

#endif // COLL_COMPILER_LIB_PARALLEL_H
