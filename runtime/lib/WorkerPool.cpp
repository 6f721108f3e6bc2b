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

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <unistd.h>
#include <vector>

#ifdef __linux__
#include <sys/prctl.h>
#endif

namespace coll {
namespace detail {

/// A batch's count of tasks still running, and the waiter's wake-up.
struct WorkerBatch::Done {
  std::mutex mutex;
  std::condition_variable cv;
  size_t running = 0;
};

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
  bool hasTask = false;
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
      {
        std::unique_lock<std::mutex> lock(s->mutex);
        s->cv.wait(lock, [s] { return s->hasTask; });
        task = std::move(s->task);
        index = s->index;
        done = s->done;
        s->hasTask = false;
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
        if (--done->running == 0)
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
    {
      std::lock_guard<std::mutex> lock(done->mutex);
      ++done->running;
    }
    {
      std::lock_guard<std::mutex> lock(s->mutex);
      s->task = std::move(own);
      s->index = w;
      s->done = done;
      s->hasTask = true;
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
  {
    std::unique_lock<std::mutex> lock(done->mutex);
    done->cv.wait(lock, [this] { return done->running == 0; });
  }
  delete done;
  done = nullptr;
}

size_t WorkerBatch::idleThreads() {
  return pool().idleCount();
}

} // namespace detail
} // namespace coll
