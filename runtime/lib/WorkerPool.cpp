//===- WorkerPool.cpp - Threads kept from one run to the next -------------===//
//
// Each pool thread owns a slot: a task to run, with a mutex and condition
// variable of its own, so that handing a task to one thread wakes only it.
// A thread that finishes its task counts the batch down and goes back to
// the idle list (or ends, when the list is full). The pool belongs to the
// process that made it: a forked child, which has none of its parent's
// threads, makes a new one and never touches the old one (whose mutexes
// another thread of the parent may have held at the fork).
//
//===----------------------------------------------------------------------===//

#include "WorkerPool.h"

#include "CpuPlatform.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <unistd.h>
#include <vector>

#ifdef __linux__
#include <sched.h>
#include <sys/prctl.h>
#endif

namespace coll {
namespace detail {

/// A batch's count of tasks still running, and the waiter's wake-up. A
/// task counts down under the mutex, so that a waiter that saw the count
/// reach 0 while it spun takes the mutex once before the batch goes: the
/// last task has let go of it by then.
struct WorkerBatch::Done {
  std::mutex mutex;
  std::condition_variable cv;
  std::atomic<size_t> running{0};
};

uint32_t usableCpus() {
  static const uint32_t cpus = [] {
#ifdef __linux__
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
      return uint32_t(CPU_COUNT(&set));
#endif
    unsigned n = std::thread::hardware_concurrency();
    return n ? uint32_t(n) : 1u;
  }();
  return cpus;
}

namespace {

/// Idle threads kept at most; more end after their task.
constexpr size_t maxIdle = 256;

class Pool;

/// One pool thread and the task it is given.
struct Slot {
  std::mutex mutex;
  std::condition_variable cv;
  std::function<void(size_t)> task; ///< Copied in: the batch outlives it.
  size_t index = 0;
  WorkerBatch::Done *done = nullptr;
  /// Set (release, under the mutex) when a task is given; an idle thread
  /// spins on it for a while before it sleeps on the condition variable.
  std::atomic<bool> hasTask{false};
};

class Pool {
public:
  explicit Pool(pid_t owner) : owner(owner) {}
  pid_t owner;

  /// An idle slot, or a new thread's (which may throw std::system_error
  /// or std::bad_alloc).
  Slot *acquire() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (!idle.empty()) {
        Slot *s = idle.back();
        idle.pop_back();
        return s;
      }
    }
    auto slot = std::make_unique<Slot>();
    Slot *s = slot.get();
    std::thread([this, s] { loop(s); }).detach();
    slot.release(); // The thread owns it now.
    return s;
  }

  size_t idleCount() {
    std::lock_guard<std::mutex> lock(mutex);
    return idle.size();
  }

private:
  void loop(Slot *s) {
#ifdef __linux__
    // Short sleeps of the executors' pacing stay short.
    prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
#endif
    for (;;) {
      std::function<void(size_t)> task;
      size_t index;
      WorkerBatch::Done *done;
      // A run often follows the last one at once (a loop of calls): wait
      // for it spinning while a CPU is free for it, for a wake-up costs
      // tens of microseconds.
      if (spinners.fetch_add(1, std::memory_order_relaxed) + 2 <= usableCpus()) {
        SpinBudget spin(std::chrono::microseconds(200));
        while (!s->hasTask.load(std::memory_order_acquire) && spin.spinning()) {
        }
      }
      spinners.fetch_sub(1, std::memory_order_relaxed);
      {
        std::unique_lock<std::mutex> lock(s->mutex);
        s->cv.wait(lock, [s] { return s->hasTask.load(std::memory_order_relaxed); });
        task = std::move(s->task);
        index = s->index;
        done = s->done;
        s->hasTask.store(false, std::memory_order_relaxed);
      }
      task(index);
      task = nullptr;
      // Back to the idle list before the batch ends, so that the next run
      // finds this thread.
      bool keep;
      {
        std::lock_guard<std::mutex> lock(mutex);
        keep = idle.size() < maxIdle;
        if (keep)
          idle.push_back(s);
      }
      {
        std::lock_guard<std::mutex> lock(done->mutex);
        if (done->running.fetch_sub(1, std::memory_order_acq_rel) == 1)
          done->cv.notify_all();
      }
      if (!keep) {
        delete s;
        return;
      }
    }
  }

  std::mutex mutex;
  std::vector<Slot *> idle;
  std::atomic<uint32_t> spinners{0}; ///< Idle threads spinning for a task.
};

/// This process's pool: made on first use, and again in a forked child.
Pool &pool() {
  static std::atomic<Pool *> current{nullptr};
  const pid_t me = getpid();
  Pool *p = current.load(std::memory_order_acquire);
  while (!p || p->owner != me) {
    Pool *fresh = new Pool(me);
    if (current.compare_exchange_strong(p, fresh, std::memory_order_acq_rel))
      return *fresh; // The parent's pool, if any, is left alone.
    delete fresh;    // Another thread of this process made one: use it.
  }
  return *p;
}

} // namespace

size_t WorkerBatch::start(size_t first, size_t n, const std::function<void(size_t)> &task,
                          std::string &error) {
  if (!done)
    done = new Done;
  size_t count = 0;
  for (size_t w = first; w < n; ++w) {
    Slot *s;
    std::function<void(size_t)> own;
    try {
      own = task;
      s = pool().acquire();
    } catch (const std::exception &e) {
      error = e.what();
      break;
    } catch (...) {
      error = "unknown error";
      break;
    }
    done->running.fetch_add(1, std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lock(s->mutex);
      s->task = std::move(own);
      s->index = w;
      s->done = done;
      s->hasTask.store(true, std::memory_order_release);
    }
    s->cv.notify_one();
    ++count;
  }
  started += count;
  return count;
}

void WorkerBatch::wait() {
  if (!done)
    return;
  // The tasks often end within microseconds of each other: spin first
  // when every task has a CPU besides ours.
  if (started + 1 <= usableCpus()) {
    SpinBudget spin(std::chrono::microseconds(200));
    while (done->running.load(std::memory_order_acquire) != 0 && spin.spinning()) {
    }
  }
  {
    std::unique_lock<std::mutex> lock(done->mutex);
    done->cv.wait(lock, [this] { return done->running.load(std::memory_order_acquire) == 0; });
  }
  delete done;
  done = nullptr;
}

size_t WorkerBatch::idleThreads() {
  return pool().idleCount();
}

} // namespace detail
} // namespace coll
