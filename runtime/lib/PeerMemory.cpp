//===- PeerMemory.cpp - Reading another rank's process memory -------------===//
//
// ProcessGroup's receivers of direct messages (DirectSends.h) read the
// sender's memory with one cross-memory-attach copy (process_vm_readv): the
// kernel copies from the sender's pages into ours, where a message through
// a FIFO slot costs a copy on each side. Linux lets a process read another
// of the same user unless a security module (Yama's ptrace scope, a
// seccomp filter) says no: canReadPeerMemory() tries before any message
// depends on it.
//
//===----------------------------------------------------------------------===//

#include "CpuPlatform.h"
#include "Text.h"

#include <cerrno>
#include <cstring>

#if defined(__linux__)
#include <sys/uio.h>
#include <unistd.h>
#endif

namespace coll {
namespace detail {

namespace {

/// process_vm_readv of \p bytes, to the end or the first error; the bytes
/// read, and errno in \p error when short.
uint64_t readFrom(int64_t pid, char *dst, const char *src, uint64_t bytes, int &error) {
  uint64_t done = 0;
  error = 0;
#if defined(__linux__)
  while (done < bytes) {
    struct iovec local {
      dst + done, size_t(bytes - done)
    };
    struct iovec remote {
      const_cast<char *>(src + done), size_t(bytes - done)
    };
    ssize_t got = process_vm_readv(pid_t(pid), &local, 1, &remote, 1, 0);
    if (got < 0) {
      if (errno == EINTR)
        continue;
      error = errno;
      break;
    }
    if (got == 0) {
      error = EFAULT;
      break;
    }
    done += uint64_t(got);
  }
#else
  (void)pid;
  (void)dst;
  (void)src;
  error = ENOSYS;
#endif
  return done;
}

} // namespace

void readPeerMemory(int64_t pid, uint32_t peer, char *dst, const char *src, uint64_t bytes) {
  int error = 0;
  uint64_t done = readFrom(pid, dst, src, bytes, error);
  if (done < bytes)
    throw PeerReadError(peer, error,
                        cat("cannot read ", bytes, " bytes of a message from rank ", peer, " (pid ",
                            pid, ") at offset ", done, ": ", std::strerror(error)));
}

void wakeEventFd(int fd) {
#if defined(__linux__)
  uint64_t one = 1;
  // Fails only when the counter is about to overflow: it is awake anyway.
  ssize_t n = write(fd, &one, sizeof one);
  (void)n;
#else
  (void)fd;
#endif
}

bool canReadPeerMemory(int64_t pid, uint64_t address, uint64_t expected) {
  uint64_t word = 0;
  int error = 0;
  return pid > 0 && address != 0 &&
         readFrom(pid, reinterpret_cast<char *>(&word),
                  reinterpret_cast<const char *>(uintptr_t(address)), sizeof word,
                  error) == sizeof word &&
         word == expected;
}

} // namespace detail
} // namespace coll
