//===- ShmSegment.h - POSIX shared memory and process liveness -*- C++ -*-===//
//
// Small wrappers for ProcessGroup: a mapped POSIX shared-memory segment
// (created exclusively, or opened), and whether a process still runs. A
// process is identified by its pid and the start time the kernel records
// for it, so that a pid reused by another process does not pass for the
// one that died; a zombie (dead, not yet reaped) counts as dead. Private to
// the runtime library.
//
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_LIB_SHMSEGMENT_H
#define COLL_RUNTIME_LIB_SHMSEGMENT_H

#include "coll/Runtime/Status.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <sys/stat.h>
#include <sys/types.h>

namespace coll {
namespace detail {

/// Where POSIX shared memory lives (Linux: a tmpfs whose size limits every
/// job on the host, or in the container).
constexpr const char *shmDirectory = "/dev/shm";

/// A shared-memory segment mapped read-write into this process. Unmapped
/// on destruction; the name is left alone (unlink it with unlinkSegment).
class ShmMapping {
public:
  ShmMapping() = default;
  ~ShmMapping() { reset(); }
  ShmMapping(ShmMapping &&o) noexcept { *this = std::move(o); }
  ShmMapping &operator=(ShmMapping &&o) noexcept;
  ShmMapping(const ShmMapping &) = delete;
  ShmMapping &operator=(const ShmMapping &) = delete;

  char *data() const { return static_cast<char *>(addr); }
  size_t size() const { return bytes; }
  bool mapped() const { return addr != nullptr; }
  /// The segment's identity when it was mapped.
  dev_t device() const { return dev; }
  ino_t inode() const { return ino; }
  /// The segment's file descriptor, when it was kept open (ShmOps::create's
  /// keepFd), else -1: another process of the user may map the segment
  /// through /proc/<pid>/fd/<fd> (ShmOps::openPeerFd).
  int fd() const { return keptFd; }
  /// Closes the kept descriptor (the mapping stays).
  void closeFd();
  /// Unmaps the segment, and closes its kept descriptor.
  void reset();

private:
  friend struct ShmOps;
  void *addr = nullptr;
  size_t bytes = 0;
  dev_t dev = 0;
  ino_t ino = 0;
  int keptFd = -1;
};

/// How opening a segment went.
enum class ShmOpenResult : uint8_t {
  Mapped,  ///< Opened and mapped.
  Exists,  ///< createSegment: the name is taken.
  Absent,  ///< openSegment: no such name.
  TooSmall ///< openSegment: smaller than asked (still being created?).
};

struct ShmOps {
  /// Creates \p name (exclusively, mode 0600) with \p bytes zero bytes,
  /// all reserved (an error that says how many bytes were needed when
  /// shared memory is short, rather than SIGBUS at the first touch beyond
  /// it), and maps it. With \p keepName false the name is unlinked as
  /// soon as the segment is open: memory nobody else opens, which no
  /// crash can leave behind.
  ///
  /// With \p writeHeader, the segment first holds \p headerBytes only, and
  /// writeHeader fills them before the rest is reserved: a header that
  /// others may read from the moment the name exists should be published
  /// by writeHeader's last store (release), so that a reader that sees it
  /// (acquire) sees the whole header.
  static Status create(const std::string &name, size_t bytes, ShmMapping &out,
                       ShmOpenResult &result, bool keepName = true,
                       const std::function<void(char *)> &writeHeader = {}, size_t headerBytes = 0,
                       bool keepFd = false);
  /// Maps, read-only, the segment that process \p pid holds open as file
  /// descriptor \p fd (through /proc/<pid>/fd/<fd>, which needs the same
  /// permission as reading its memory), when it holds exactly \p bytes.
  static Status openPeerFd(int64_t pid, int fd, size_t bytes, ShmMapping &out);
  /// Opens \p name and maps all of it when it holds at least \p minBytes.
  static Status open(const std::string &name, size_t minBytes, ShmMapping &out,
                     ShmOpenResult &result);
  /// Unlinks \p name when \p stale says so, judging the segment the name
  /// now names (mapped whole, or unmapped when empty) while holding an
  /// exclusive flock on it and while the name still names it. Whoever
  /// judges a segment and unlinks it goes through here, so that two
  /// judges never act on different segments of one name: a segment judged
  /// stale that its owner has meanwhile replaced is left alone. Returns
  /// whether it unlinked the name (not when the lock stays taken for 2 s).
  static bool
  unlinkIfStale(const std::string &name,
                const std::function<bool(const ShmMapping &, const struct stat &)> &stale);

private:
  /// Maps \p bytes of open descriptor \p fd (of \p st; \p what names it in
  /// errors) with \p prot into \p out, and closes the descriptor.
  static Status mapAndClose(int fd, const struct stat &st, size_t bytes, int prot,
                            const std::string &what, ShmMapping &out);
};

/// shm_unlink(\p name); a missing name is not an error.
void unlinkSegment(const std::string &name);

/// Whether \p name now names the segment of device \p dev and inode \p ino.
bool segmentIs(const std::string &name, dev_t dev, ino_t ino);

/// How long ago (nanoseconds, wall clock) the segment of \p st changed
/// status last (its creation, for a segment created and sized at once).
int64_t segmentAgeNs(const struct stat &st);

/// The start time of process \p pid (clock ticks since boot, from
/// /proc/<pid>/stat), or 0 where unknown.
uint64_t processStartTime(int64_t pid);

/// Whether process \p pid runs and, when \p startTime is not 0, started at
/// \p startTime. Zombies are dead.
bool processAlive(int64_t pid, uint64_t startTime);

/// "strerror(errno)" of \p err.
std::string errnoText(int err);

} // namespace detail
} // namespace coll

#endif // COLL_RUNTIME_LIB_SHMSEGMENT_H
