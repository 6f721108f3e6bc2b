//===- ProcessControl.cpp - A process rank's control segment --------------===//
//
// Liveness, failures and cleanup of a ProcessGroup's ranks, through their
// control segments (ProcessControl.h), and the removal of segments that
// jobs killed as a whole left behind.
//
//===----------------------------------------------------------------------===//

#include "ProcessControl.h"

#include "ExecCommon.h"
#include "ProcessData.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <random>
#include <sys/stat.h>
#include <unistd.h>

#ifdef __linux__
#include <dirent.h>
#endif

namespace coll {
namespace detail {

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

std::string controlName(const std::string &job, uint32_t rank) {
  return cat("/coll-", job, ".", rank);
}

std::string dataName(const std::string &job, uint32_t rank, uint64_t seq) {
  return cat("/coll-", job, ".", rank, ".", seq);
}

std::string allocName(const std::string &job, uint32_t rank, uint64_t id) {
  return cat("/coll-", job, ".", rank, ".m", id);
}

uint64_t makeNonce() {
  std::random_device rd;
  uint64_t v = (uint64_t(rd()) << 32) ^ rd();
  v = (v ^ uint64_t(nowNs()) ^ (uint64_t(getpid()) << 20)) & ~uint64_t(1);
  return v ? v : 2;
}

uint64_t pidNamespaceId() {
  struct stat st;
  if (stat("/proc/self/ns/pid", &st) != 0)
    return 0;
  return uint64_t(st.st_ino);
}

namespace {

/// Whether the owner of a segment (\p pid started at \p startTime in pid
/// namespace \p ns, last seen alive at \p lastSeenNs) is dead, and has been
/// silent long enough that nobody is still busy with its segments.
bool ownerLongDead(int64_t pid, uint64_t startTime, uint64_t ns, int64_t lastSeenNs) {
  static const uint64_t ourNs = pidNamespaceId();
  return ns != 0 && ns == ourNs && nowNs() - lastSeenNs > deadSegmentGraceNs &&
         !processAlive(pid, startTime);
}

/// Whether \p n (without the leading '/') is a control or data segment's
/// name: "coll-J.<rank>" or "coll-J.<rank>.<call>".
bool segmentNamePattern(const std::string &n) {
  if (n.compare(0, 5, "coll-") != 0)
    return false;
  size_t dot = n.find('.', 5);
  if (dot == std::string::npos || !validJobName(n.substr(5, dot - 5)))
    return false;
  int numbers = 0;
  for (size_t at = dot; at != std::string::npos && at < n.size(); ++numbers) {
    size_t next = n.find('.', at + 1);
    std::string part = n.substr(at + 1, next == std::string::npos ? next : next - at - 1);
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos)
      return false;
    at = next;
  }
  return numbers == 1 || numbers == 2;
}

} // namespace

bool otherPidNamespace(uint64_t ns) {
  static const uint64_t ourNs = pidNamespaceId();
  return ns != ourNs;
}

bool otherVersion(uint32_t version) {
  return version != 0 && version != controlVersion;
}

std::string otherLayout(const std::string &name, uint32_t version) {
  return cat("shared memory ", name, " is a control segment of layout version ", version,
             " (this is version ", controlVersion,
             "): a job of another Collc version uses the name, or left it behind (remove it "
             "once no such job runs)");
}

bool validJobName(const std::string &job) {
  if (job.empty() || job.size() > maxJobName)
    return false;
  for (char c : job)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '-'))
      return false;
  return true;
}

//===----------------------------------------------------------------------===//
// JobControl
//===----------------------------------------------------------------------===//

void JobControl::ringPeers() const {
  for (uint32_t q = 0; q < nranks; ++q)
    if (q != rank && ctl[q] && !isRemote(q))
      ctl[q]->bell.ring();
  if (net)
    net->controlChanged();
}

bool JobControl::peerAlive(uint32_t q) const {
  if (isRemote(q))
    return !(net && net->lost(q));
  const ControlBlock &c = *ctl[q];
  return processAlive(c.pid, c.startTime);
}

std::string JobControl::pidOf(uint32_t q) const {
  return isRemote(q) ? cat("pid ", ctl[q]->pid, " on another host") : cat("pid ", ctl[q]->pid);
}

void JobControl::beat() const {
  me().heartbeatNs.store(nowNs(), std::memory_order_relaxed);
}

bool JobControl::peerGone(uint32_t q) const {
  const ControlBlock &c = *ctl[q];
  return c.closed.load(std::memory_order_acquire) || !peerAlive(q);
}

namespace {

/// The peers' allocations this process has mapped (JobControl::windows):
/// found in their control blocks' tables, mapped through /proc/<pid>/fd,
/// and dropped once their owner withdraws them. Shared by the rank's
/// workers, under a lock; each platform keeps the window it used last.
class JobWindows : public PeerWindows {
public:
  explicit JobWindows(JobControl &jc) : jc(jc), peers(jc.nranks) {}

  bool find(uint32_t q, const char *remote, uint64_t n, PeerWindow &out) override {
    if (q >= peers.size() || q == jc.rank)
      return false;
    std::lock_guard<std::mutex> lock(mutex);
    std::vector<Mapped> &mapped = peers[q];
    // Those withdrawn are retired: another worker of this run may still
    // hold one it checked a moment ago, so they are unmapped between calls
    // (collect()).
    for (auto it = mapped.begin(); it != mapped.end();)
      if (it->window.idNow->load(std::memory_order_acquire) != it->window.id) {
        retired.push_back(std::move(*it));
        it = mapped.erase(it);
      } else {
        ++it;
      }
    for (const Mapped &m : mapped)
      if (m.window.covers(remote, n)) {
        out = m.window;
        return true;
      }
    const ControlBlock &c = *jc.ctl[q];
    const uint64_t a = uint64_t(uintptr_t(remote));
    for (const SharedAllocation &s : c.allocations) {
      const uint64_t id = s.id.load(std::memory_order_acquire);
      if (id == 0)
        continue;
      const uint64_t base = s.base.load(std::memory_order_relaxed);
      const uint64_t bytes = s.bytes.load(std::memory_order_relaxed);
      const int64_t fd = s.fd.load(std::memory_order_relaxed);
      if (s.id.load(std::memory_order_acquire) != id || !rangeHolds(base, bytes, a, n))
        continue;
      if (std::find(unmappable.begin(), unmappable.end(), std::make_pair(q, id)) !=
          unmappable.end())
        return false;
      Mapped m;
      if (fd < 0 || fd > INT32_MAX || !ShmOps::openPeerFd(c.pid, int(fd), size_t(bytes), m.map)) {
        // Read with readPeerMemory() instead; no second try.
        unmappable.emplace_back(q, id);
        return false;
      }
      // The descriptor we opened was the allocation's only if the owner
      // still publishes it.
      if (s.id.load(std::memory_order_acquire) != id)
        return false;
      m.window.remoteBase = base;
      m.window.bytes = bytes;
      m.window.local = m.map.data();
      m.window.idNow = &s.id;
      m.window.id = id;
      out = m.window;
      mapped.push_back(std::move(m));
      return true;
    }
    return false;
  }

  void collect() override {
    std::lock_guard<std::mutex> lock(mutex);
    retired.clear();
  }

private:
  struct Mapped {
    ShmMapping map;
    PeerWindow window;
  };
  JobControl &jc;
  std::mutex mutex;
  std::vector<std::vector<Mapped>> peers;
  std::vector<Mapped> retired;
  std::vector<std::pair<uint32_t, uint64_t>> unmappable;
};

} // namespace

PeerWindows &JobControl::peerWindows() {
  if (!windows)
    windows = std::make_unique<JobWindows>(*this);
  return *windows;
}

bool JobControl::peerReadable(uint32_t q) {
  if (readable.size() != nranks)
    readable.assign(nranks, -1);
  if (readable[q] < 0) {
    const ControlBlock &c = *ctl[q];
    readable[q] = q != rank && !isRemote(q) && !otherPidNamespace(c.pidNamespace) &&
                  canReadPeerMemory(c.pid, c.probeAddress, ~c.nonce);
  }
  return readable[q] == 1;
}

void JobControl::cleanUpPeer(uint32_t q) {
  // A remote rank's names are on its host, for its neighbours there.
  if (q == rank || isRemote(q) || cleaned[q].exchange(true, std::memory_order_relaxed))
    return;
  const ControlBlock &c = *ctl[q];
  std::string name = controlName(job, q);
  uint64_t last = c.callSeq.load(std::memory_order_acquire);
  for (uint64_t s = last; s <= last + 1; ++s) {
    if (s == 0)
      continue;
    ShmOps::unlinkIfStale(dataName(job, q, s), [&](const ShmMapping &m, const struct stat &) {
      const DataHeader *h =
          m.size() >= sizeof(DataHeader) ? reinterpret_cast<const DataHeader *>(m.data()) : nullptr;
      if (h && h->nonce == c.nonce)
        return true;
      // No header yet: the peer died between creating the segment and
      // writing it. While its control segment is still the one we
      // mapped, no new process has claimed rank q, so the segment is the
      // dead peer's.
      return (!h || h->magic != dataMagic) && segmentIs(name, peers[q].device(), peers[q].inode());
    });
  }
  ShmOps::unlinkIfStale(name, [&](const ShmMapping &, const struct stat &sb) {
    return sb.st_dev == peers[q].device() && sb.st_ino == peers[q].inode();
  });
}

void JobControl::cleanUpDeadPeers() {
  for (uint32_t q = 0; q < nranks; ++q)
    if (q != rank && ctl[q] && !isRemote(q) && !cleaned[q].load(std::memory_order_relaxed) &&
        !processAlive(ctl[q]->pid, ctl[q]->startTime))
      cleanUpPeer(q);
}

void JobControl::publishFailure(const std::string &message, uint32_t origin) {
  ControlBlock &c = me();
  if (c.failing.exchange(1, std::memory_order_acq_rel) == 0) {
    c.failureOrigin = origin;
    copyText(c.failure, sizeof c.failure, message);
    c.failed.store(1, std::memory_order_release);
  }
  ringPeers();
}

void JobControl::publishFixedFailure(const char *message) {
  ControlBlock &c = me();
  if (c.failing.exchange(1, std::memory_order_acq_rel) == 0) {
    c.failureOrigin = rank;
    std::memcpy(c.failure, message, std::min(std::strlen(message) + 1, sizeof c.failure));
    c.failed.store(1, std::memory_order_release);
  }
  ringPeers();
}

CallError JobControl::failedPeer() const {
  int failedRank = -1;
  for (uint32_t q = 0; q < nranks; ++q) {
    const ControlBlock &c = *ctl[q];
    if (q != rank && c.failed.load(std::memory_order_acquire) &&
        (failedRank < 0 || (c.failureOrigin == q &&
                            ctl[uint32_t(failedRank)]->failureOrigin != uint32_t(failedRank))))
      failedRank = int(q);
  }
  if (failedRank < 0)
    return {};
  const ControlBlock &c = *ctl[uint32_t(failedRank)];
  std::string msg(c.failure, strnlen(c.failure, sizeof c.failure));
  return {ErrorKind::Remote, cat("rank ", failedRank, " failed: ", msg)};
}

CallError JobControl::checkPeers(uint64_t seq) {
  CallError found;
  int failedRank = -1;
  for (uint32_t q = 0; q < nranks; ++q) {
    if (q == rank)
      continue;
    const ControlBlock &c = *ctl[q];
    // A failed rank matters even when it finished this call's setup:
    // doneSeq only counts calls that ended without breaking the group.
    if (c.failed.load(std::memory_order_acquire)) {
      failedRank = int(q);
      continue;
    }
    if (c.doneSeq.load(std::memory_order_acquire) >= seq)
      continue;
    // A rank finishes a call before it closes: read doneSeq again after
    // seeing it closed, or a rank that finished meanwhile looks departed.
    if (c.closed.load(std::memory_order_acquire) &&
        c.doneSeq.load(std::memory_order_acquire) < seq) {
      found = {ErrorKind::Remote,
               cat("rank ", q, " (", pidOf(q), ") left the job during call ", seq)};
      return found;
    }
    if (!peerAlive(q)) {
      // A rank publishes its failure before it exits: read `failed` again
      // after seeing it gone, or a rank that failed and left meanwhile
      // looks like the culprit.
      if (c.failed.load(std::memory_order_acquire)) {
        failedRank = int(q);
        continue;
      }
      cleanUpPeer(q);
      std::string why;
      if (isRemote(q) && net && net->lost(q, &why))
        found = {ErrorKind::Remote,
                 cat("rank ", q, " (", pidOf(q), ") was lost during call ", seq, ": ", why)};
      else
        found = {ErrorKind::Remote, cat("rank ", q, " (pid ", c.pid, ") died during call ", seq)};
      return found;
    }
  }
  if (net && failedRank < 0) {
    std::string f = net->linkFailure();
    if (!f.empty())
      return {ErrorKind::SystemError, f};
  }
  if (failedRank >= 0)
    found = failedPeer();
  return found;
}

std::string JobControl::describePeer(uint32_t q) const {
  const ControlBlock &c = *ctl[q];
  double ago = double(nowNs() - c.heartbeatNs.load(std::memory_order_relaxed)) / 1e9;
  char beat[32];
  std::snprintf(beat, sizeof beat, "%.3g", ago < 0 ? 0.0 : ago);
  return cat("rank ", q, " (", pidOf(q), ") is ",
             peerAlive(q)  ? "alive"
             : isRemote(q) ? "lost"
                           : "dead",
             ", has published call ", c.callSeq.load(std::memory_order_acquire),
             " and finished call ", c.doneSeq.load(std::memory_order_acquire), ", last heartbeat ",
             beat, " s ago");
}

} // namespace detail

using namespace detail;

//===----------------------------------------------------------------------===//
// Segments of a job, and what dead jobs left
//===----------------------------------------------------------------------===//

std::vector<std::string> ProcessGroup::listJobSegments(const std::string &jobName) {
  std::vector<std::string> names;
#ifdef __linux__
  if (!validJobName(jobName))
    return names;
  std::string prefix = "coll-" + jobName + ".";
  if (DIR *d = opendir(shmDirectory)) {
    while (dirent *e = readdir(d))
      if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0)
        names.push_back(e->d_name);
    closedir(d);
  }
  std::sort(names.begin(), names.end());
#else
  (void)jobName;
#endif
  return names;
}

size_t ProcessGroup::removeDeadSegments(const std::string &exceptJob) {
  size_t removed = 0;
#ifdef __linux__
  std::vector<std::string> names;
  if (DIR *d = opendir(shmDirectory)) {
    while (dirent *e = readdir(d))
      if (std::strncmp(e->d_name, "coll-", 5) == 0)
        names.push_back(e->d_name);
    closedir(d);
  }
  const std::string skip = exceptJob.empty() ? std::string() : "coll-" + exceptJob + ".";
  // Another user's segment does not open (mode 0600); one with a header
  // that is not ours is not ours to judge. One of our names without a
  // header yet (its owner was killed between creating it and writing it,
  // which takes microseconds) is judged by its age.
  auto dead = [](const std::string &n, const ShmMapping &m, const struct stat &sb) {
    uint64_t magic = 0;
    if (m.size() >= sizeof(uint64_t))
      magic = reinterpret_cast<const std::atomic<uint64_t> *>(m.data())->load(
          std::memory_order_acquire);
    if (magic == controlMagic) {
      // Not ready yet: judged by its age, like a segment without a header.
      const ControlBlock &c = *reinterpret_cast<const ControlBlock *>(m.data());
      if (m.size() < sizeof(ControlBlock) || otherVersion(c.version))
        return false;
      if (c.ready.load(std::memory_order_acquire))
        return ownerLongDead(c.pid, c.startTime, c.pidNamespace,
                             c.heartbeatNs.load(std::memory_order_relaxed));
    } else if (magic == dataMagic) {
      const DataHeader &h = *reinterpret_cast<const DataHeader *>(m.data());
      return m.size() >= sizeof(DataHeader) &&
             ownerLongDead(h.pid, h.startTime, h.pidNamespace, h.createdNs);
    } else if (magic != 0) {
      return false;
    }
    return segmentNamePattern(n) && segmentAgeNs(sb) > deadSegmentGraceNs;
  };
  for (const std::string &n : names)
    if ((skip.empty() || n.compare(0, skip.size(), skip) != 0) &&
        ShmOps::unlinkIfStale(
            "/" + n, [&](const ShmMapping &m, const struct stat &sb) { return dead(n, m, sb); }))
      ++removed;
#endif
  return removed;
}

} // namespace coll
