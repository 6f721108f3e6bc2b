//===- ShmSegment.cpp - POSIX shared memory and process liveness ----------===//

#include "ShmSegment.h"

#include "Text.h"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <signal.h>
#include <sstream>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <utility>

namespace coll {
namespace detail {

std::string errnoText(int err) {
  return std::strerror(err);
}

ShmMapping &ShmMapping::operator=(ShmMapping &&o) noexcept {
  if (this != &o) {
    reset();
    std::swap(addr, o.addr);
    std::swap(bytes, o.bytes);
    std::swap(keptFd, o.keptFd);
    dev = o.dev;
    ino = o.ino;
  }
  return *this;
}

void ShmMapping::closeFd() {
  if (keptFd >= 0)
    close(keptFd);
  keptFd = -1;
}

void ShmMapping::reset() {
  if (addr)
    munmap(addr, bytes);
  if (keptFd >= 0)
    close(keptFd);
  addr = nullptr;
  bytes = 0;
  keptFd = -1;
}

Status ShmOps::create(const std::string &name, size_t bytes, ShmMapping &out, ShmOpenResult &result,
                      bool keepName, const std::function<void(char *)> &writeHeader,
                      size_t headerBytes, bool keepFd) {
  out.reset();
  int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) {
    if (errno == EEXIST) {
      result = ShmOpenResult::Exists;
      return Status::success();
    }
    return Status::error("cannot create shared memory " + name + ": " + errnoText(errno));
  }
  if (!keepName)
    shm_unlink(name.c_str());
  int err = 0;
  if (writeHeader) {
    // The header first, at once: reserving the whole segment may take a
    // while, and a segment without a header can only be judged by its age.
    void *h = MAP_FAILED;
    if (ftruncate(fd, off_t(headerBytes)) == 0)
      h = mmap(nullptr, headerBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (h == MAP_FAILED) {
      err = errno;
      close(fd);
      shm_unlink(name.c_str());
      return Status::error("cannot size shared memory " + name + ": " + errnoText(err));
    }
    writeHeader(static_cast<char *>(h));
    munmap(h, headerBytes);
  }
  // Reserve the memory now: a segment only sized (ftruncate) gets its pages
  // at the first touch, and a touch beyond what /dev/shm holds is SIGBUS.
  // posix_fallocate returns its error instead of setting errno.
  do
    err = posix_fallocate(fd, 0, off_t(bytes));
  while (err == EINTR);
  if (err != 0) {
    std::string why = cat("cannot reserve ", bytes, " bytes of shared memory for ", name, " in ",
                          shmDirectory, ": ", errnoText(err));
    struct statvfs vfs;
    if (fstatvfs(fd, &vfs) == 0)
      why += cat(" (", uint64_t(vfs.f_bavail) * vfs.f_frsize, " bytes free of ",
                 uint64_t(vfs.f_blocks) * vfs.f_frsize,
                 "; in a container, give it a larger /dev/shm, e.g. docker run --shm-size)");
    close(fd);
    shm_unlink(name.c_str());
    return Status::error(why);
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    err = errno;
    close(fd);
    shm_unlink(name.c_str());
    return Status::error("cannot inspect shared memory " + name + ": " + errnoText(err));
  }
  void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  err = errno;
  if (p == MAP_FAILED || !keepFd)
    close(fd);
  if (p == MAP_FAILED) {
    shm_unlink(name.c_str());
    return Status::error("cannot map shared memory " + name + ": " + errnoText(err));
  }
  out.addr = p;
  out.bytes = bytes;
  out.dev = st.st_dev;
  out.ino = st.st_ino;
  out.keptFd = keepFd ? fd : -1;
  result = ShmOpenResult::Mapped;
  return Status::success();
}

Status ShmOps::mapAndClose(int fd, const struct stat &st, size_t bytes, int prot,
                           const std::string &what, ShmMapping &out) {
  void *p = mmap(nullptr, bytes, prot, MAP_SHARED, fd, 0);
  int err = errno;
  close(fd);
  if (p == MAP_FAILED)
    return Status::error("cannot map " + what + ": " + errnoText(err));
  out.addr = p;
  out.bytes = bytes;
  out.dev = st.st_dev;
  out.ino = st.st_ino;
  return Status::success();
}

Status ShmOps::openPeerFd(int64_t pid, int peerFd, size_t bytes, ShmMapping &out) {
  out.reset();
  const std::string path = cat("/proc/", pid, "/fd/", peerFd);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Status::error("cannot open " + path + ": " + errnoText(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || uint64_t(st.st_size) != bytes || bytes == 0) {
    close(fd);
    return Status::error(cat(path, " is not a segment of ", bytes, " bytes"));
  }
  return mapAndClose(fd, st, bytes, PROT_READ, path, out);
}

Status ShmOps::open(const std::string &name, size_t minBytes, ShmMapping &out,
                    ShmOpenResult &result) {
  out.reset();
  int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) {
    if (errno == ENOENT) {
      result = ShmOpenResult::Absent;
      return Status::success();
    }
    return Status::error("cannot open shared memory " + name + ": " + errnoText(errno));
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return Status::error("cannot inspect shared memory " + name + ": " + errnoText(err));
  }
  if (uint64_t(st.st_size) < minBytes || st.st_size == 0) {
    close(fd);
    result = ShmOpenResult::TooSmall;
    return Status::success();
  }
  Status s =
      mapAndClose(fd, st, size_t(st.st_size), PROT_READ | PROT_WRITE, "shared memory " + name, out);
  if (s)
    result = ShmOpenResult::Mapped;
  return s;
}

bool ShmOps::unlinkIfStale(
    const std::string &name,
    const std::function<bool(const ShmMapping &, const struct stat &)> &stale) {
  int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0)
    return false;
  bool removed = false;
  // Judges hold the lock for microseconds; one that holds it much longer is
  // stopped (SIGSTOP): give up on this segment rather than wait for it.
  int rc;
  for (int tries = 0; (rc = flock(fd, LOCK_EX | LOCK_NB)) != 0 && tries < 2000; ++tries) {
    if (errno != EWOULDBLOCK && errno != EINTR)
      break;
    usleep(1000);
  }
  struct stat st;
  // Judged under the lock, and only while the name still names what we
  // opened: a judge that held the lock before us may have unlinked it,
  // and its owner may have made a new one since.
  if (rc == 0 && fstat(fd, &st) == 0 && segmentIs(name, st.st_dev, st.st_ino)) {
    ShmMapping m;
    if (st.st_size > 0) {
      void *p = mmap(nullptr, size_t(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (p != MAP_FAILED) {
        m.addr = p;
        m.bytes = size_t(st.st_size);
        m.dev = st.st_dev;
        m.ino = st.st_ino;
      }
    }
    if ((st.st_size == 0 || m.mapped()) && stale(m, st)) {
      shm_unlink(name.c_str());
      removed = true;
    }
  }
  if (rc == 0)
    flock(fd, LOCK_UN);
  close(fd);
  return removed;
}

int64_t segmentAgeNs(const struct stat &st) {
  int64_t changed = int64_t(st.st_ctim.tv_sec) * 1'000'000'000 + st.st_ctim.tv_nsec;
  int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  return now - changed;
}

void unlinkSegment(const std::string &name) {
  shm_unlink(name.c_str());
}

bool segmentIs(const std::string &name, dev_t dev, ino_t ino) {
  int fd = shm_open(name.c_str(), O_RDONLY, 0);
  if (fd < 0)
    return false;
  struct stat st;
  bool same = fstat(fd, &st) == 0 && st.st_dev == dev && st.st_ino == ino;
  close(fd);
  return same;
}

namespace {

/// The state letter and start time of \p pid from /proc/<pid>/stat; false
/// when the file cannot be read (no such process, or no /proc).
bool readProcStat(int64_t pid, char &state, uint64_t &startTime) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%lld/stat", static_cast<long long>(pid));
  FILE *f = std::fopen(path, "r");
  if (!f)
    return false;
  char buf[1024];
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = 0;
  // "pid (comm) S ppid ...": comm may hold spaces and parentheses, so
  // fields are counted from the last ')'. The state is field 3, the start
  // time field 22.
  const char *p = std::strrchr(buf, ')');
  if (!p || p[1] != ' ' || !p[2])
    return false;
  state = p[2];
  p += 2;
  for (int field = 3; field < 22; ++field) {
    p = std::strchr(p, ' ');
    if (!p)
      return false;
    ++p;
  }
  startTime = std::strtoull(p, nullptr, 10);
  return true;
}

} // namespace

uint64_t processStartTime(int64_t pid) {
  char state = 0;
  uint64_t start = 0;
  return readProcStat(pid, state, start) ? start : 0;
}

bool processAlive(int64_t pid, uint64_t startTime) {
  if (pid <= 0)
    return false;
  char state = 0;
  uint64_t start = 0;
  if (readProcStat(pid, state, start))
    return state != 'Z' && state != 'X' && (startTime == 0 || start == startTime);
  // No /proc entry: the process is gone, or /proc is not there to ask.
  return kill(pid_t(pid), 0) == 0 || errno == EPERM;
}

} // namespace detail
} // namespace coll
