//===- WorkerPoolTest.cpp - Threads kept from one run to the next ---------===//
//
// The pool behind the executors' worker threads: every task of a batch runs
// at once on a thread of its own (the executors' workers wait for each
// other), the next batch reuses those threads, and a forked child, which
// has none of its parent's threads, gets a pool of its own.
//
//===----------------------------------------------------------------------===//

#include "WorkerPool.h"

#include <atomic>
#include <chrono>
#include <gtest/gtest.h>
#include <mutex>
#include <set>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace coll::detail;

namespace {

/// Runs \p n tasks that each wait until all \p n have started (at most
/// 20 s); returns how many saw all the others, and the threads they ran on.
size_t rendezvous(size_t n, std::set<std::thread::id> *threads = nullptr) {
  std::atomic<size_t> arrived{0}, together{0};
  std::mutex m;
  WorkerBatch batch;
  std::string error;
  size_t started = batch.start(
      0, n,
      [&](size_t) {
        arrived.fetch_add(1);
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (arrived.load() < n && std::chrono::steady_clock::now() < deadline)
          std::this_thread::yield();
        if (arrived.load() == n)
          together.fetch_add(1);
        if (threads) {
          std::lock_guard<std::mutex> lock(m);
          threads->insert(std::this_thread::get_id());
        }
      },
      error);
  EXPECT_EQ(started, n) << error;
  batch.wait();
  return together.load();
}

TEST(WorkerPool, EveryTaskOfABatchRunsAtOnce) {
  EXPECT_EQ(rendezvous(6), 6u);
  EXPECT_GE(WorkerBatch::idleThreads(), 6u);
  // Tasks numbered from `first`, one call per number.
  std::atomic<size_t> sum{0};
  WorkerBatch batch;
  std::string error;
  EXPECT_EQ(batch.start(
                2, 5, [&](size_t w) { sum.fetch_add(w); }, error),
            3u);
  batch.wait();
  EXPECT_EQ(sum.load(), 2u + 3u + 4u);
}

TEST(WorkerPool, TheNextBatchReusesTheThreads) {
  std::set<std::thread::id> first, second;
  EXPECT_EQ(rendezvous(4, &first), 4u);
  EXPECT_EQ(rendezvous(4, &second), 4u);
  EXPECT_EQ(first.size(), 4u);
  EXPECT_EQ(first, second);
  EXPECT_EQ(first.count(std::this_thread::get_id()), 0u);
}

TEST(WorkerPool, AForkedChildGetsAPoolOfItsOwn) {
  EXPECT_EQ(rendezvous(3), 3u); // The parent's pool has idle threads now.
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    alarm(30); // A child waiting on its parent's threads would hang.
    _exit(rendezvous(3) == 3 && rendezvous(5) == 5 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child was killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // The parent's pool still works.
  EXPECT_EQ(rendezvous(3), 3u);
}

} // namespace
