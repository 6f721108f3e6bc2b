//===- Futex.h - Sleeping on a 32-bit word, across processes ---*- C++ -*-===//
//
// futexWait() sleeps while a 32-bit word holds a value, at most a given time;
// futexWakeAll() wakes every sleeper of a word. On Linux they are the futex
// system call, shared (not FUTEX_PRIVATE) so that they work on a word in
// shared memory mapped by several processes. Elsewhere a wait is a short
// sleep and a wake does nothing: correct, only slower to react. Private to
// the runtime library.
//
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_LIB_FUTEX_H
#define COLL_RUNTIME_LIB_FUTEX_H

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#ifdef __linux__
#include <climits>
#include <ctime>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace coll {
namespace detail {

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) &&
                  std::atomic<uint32_t>::is_always_lock_free,
              "a futex word must be a plain, lock-free 32-bit word");

/// Sleeps while *word == expected, at most \p timeoutNs nanoseconds; may
/// return early (a wake-up, a signal, a changed word).
inline void futexWait(std::atomic<uint32_t> *word, uint32_t expected, int64_t timeoutNs) {
#ifdef __linux__
  timespec ts;
  ts.tv_sec = time_t(timeoutNs / 1000000000);
  ts.tv_nsec = long(timeoutNs % 1000000000);
  syscall(SYS_futex, reinterpret_cast<uint32_t *>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
#else
  if (word->load(std::memory_order_relaxed) == expected)
    std::this_thread::sleep_for(
        std::chrono::nanoseconds(timeoutNs < 100000 ? timeoutNs : int64_t(100000)));
#endif
}

/// Wakes every thread, of any process, asleep in futexWait() on \p word.
inline void futexWakeAll(std::atomic<uint32_t> *word) {
#ifdef __linux__
  syscall(SYS_futex, reinterpret_cast<uint32_t *>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
#else
  (void)word;
#endif
}

} // namespace detail
} // namespace coll

#endif // COLL_RUNTIME_LIB_FUTEX_H
