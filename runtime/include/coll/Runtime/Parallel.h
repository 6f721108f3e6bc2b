//===- Parallel.h - Independent work on several cores -----------*- C++ -*-===//
/// \file
/// parallelFor runs a loop whose iterations are independent on a few
/// threads: each index writes only its own results, so the outcome is the
/// same as a sequential loop's, byte for byte.
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_PARALLEL_H
#define COLL_RUNTIME_PARALLEL_H

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

namespace coll {

/// Calls body(i) for every i in [0, n), in order of i as threads come
/// free, on up to \p threads threads (0: hardware_concurrency(), at most
/// 8), the calling thread among them.
template <typename Body> void parallelFor(size_t n, unsigned threads, const Body &body) {
  if (threads == 0)
    threads = std::min(8u, std::max(1u, std::thread::hardware_concurrency()));
  threads = unsigned(std::min<size_t>(threads, n));
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

} // namespace coll

#endif // COLL_RUNTIME_PARALLEL_H
