//===- WorkerPool.h - Threads kept from one run to the next -----*- C++ -*-===//
/// \file
/// The worker threads of the CPU executors' runs, started once and reused:
/// a run takes as many idle threads as it has workers (starting more when
/// there are too few), gives each one worker, and waits until all are done,
/// so that a small call does not pay for starting and joining threads.
/// Every worker of a run has a thread of its own, as the executors need:
/// their workers wait for each other. Private to the runtime library.
///
/// After fork() the child starts with a pool of its own (its parent's
/// threads do not exist there), whatever state the parent's pool was in.
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_LIB_WORKERPOOL_H
#define COLL_RUNTIME_LIB_WORKERPOOL_H

#include <cstddef>
#include <functional>
#include <string>

namespace coll {
namespace detail {

/// One run's workers on pool threads.
class WorkerBatch {
public:
  /// Starts task(w) for w in [first, n), each on a pool thread of its own.
  /// Stops at the first thread that cannot start, with its reason in
  /// \p error; returns how many started.
  size_t start(size_t first, size_t n, const std::function<void(size_t)> &task, std::string &error);
  /// Waits until every task started has returned.
  void wait();
  ~WorkerBatch() { wait(); }

  /// Threads idle in this process's pool (for tests).
  static size_t idleThreads();

  /// The count of a batch's running tasks (WorkerPool.cpp).
  struct Done;

private:
  Done *done = nullptr;
  size_t started = 0;
};

} // namespace detail
} // namespace coll

#endif // COLL_RUNTIME_LIB_WORKERPOOL_H
