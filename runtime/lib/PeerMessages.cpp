//===- PeerMessages.cpp - Tagged point-to-point messages over shm ---------===//
//
// Segment of rank r: a header (page 0), then one control block per source
// (the ring's head, written by the source, and tail, written by r, each on
// a cache line of its own), then one ring per source. A message in a ring
// is a 16-byte record (tag, length) and the payload, both possibly wrapping.
// A source publishes its head (release) after writing, then bumps r's bell
// and wakes r's progress thread if it sleeps; r publishes its tail after
// consuming and wakes a source that waits for room.
//
//===----------------------------------------------------------------------===//

#include "coll/Runtime/PeerMessages.h"

#include "Futex.h"
#include "NetPeers.h"
#include "ProcessControl.h"
#include "ShmSegment.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <new>
#include <random>
#include <thread>
#include <unistd.h>
#include <vector>

namespace coll {

using namespace detail;

namespace {

constexpr uint64_t segmentMagic = 0x3270703263636c43ull; // "Cllcc2p2"
constexpr uint32_t segmentVersion = 1;
constexpr uint64_t pageBytes = 4096;
constexpr uint64_t recordBytes = 16;

struct SegmentHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t nranks;
  uint32_t rank;
  uint32_t pad0;
  int64_t pid;
  uint64_t startTime;
  uint64_t nonce;
  uint64_t channelBytes;
  std::atomic<uint32_t> mappedBy;       ///< Peers that mapped this segment.
  std::atomic<uint32_t> bell;           ///< Bumped by senders (data) and receivers (room).
  std::atomic<uint32_t> sleeping;       ///< The progress thread sleeps on the bell.
  std::atomic<uint32_t> waitingForRoom; ///< A sender of this rank sleeps on the bell.
  std::atomic<uint32_t> ready;          ///< The header is complete (written last).
};
static_assert(sizeof(SegmentHeader) <= pageBytes, "the header fits its page");

struct alignas(64) ChannelControl {
  std::atomic<uint64_t> head;   ///< Bytes the source wrote, ever.
  std::atomic<uint32_t> mapped; ///< The source mapped this segment.
  char pad0[52];
  std::atomic<uint64_t> tail; ///< Bytes this rank consumed, ever.
  char pad1[56];
};
static_assert(sizeof(ChannelControl) == 128, "two cache lines");

uint64_t controlOffset() {
  return pageBytes;
}
uint64_t ringsOffset(uint32_t nranks) {
  uint64_t b = controlOffset() + uint64_t(nranks) * sizeof(ChannelControl);
  return (b + pageBytes - 1) / pageBytes * pageBytes;
}
uint64_t segmentBytes(uint32_t nranks, uint64_t channel) {
  return ringsOffset(nranks) + uint64_t(nranks) * channel;
}

std::string segmentName(const std::string &job, int rank) {
  return "/collp2p-" + job + "." + std::to_string(rank);
}

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

/// A posted receive.
struct PostedRecv {
  int src;
  int64_t tag;
  char *data;
  uint64_t bytes;
  bool matched = false;   ///< A message is being delivered to it.
  bool abandoned = false; ///< Its caller gave up: deliver nothing more to it.
  bool done = false;
  Status status = Status::success();
  int from = -1;
  std::chrono::steady_clock::time_point deadline;
  std::function<void(const Status &, int)> callback;
};

/// A message that arrived before its receive.
struct Unexpected {
  int src;
  int64_t tag;
  std::vector<char> data;
  bool complete = false;
  bool dropped = false;                  ///< There was no memory for it, or its sender died.
  std::shared_ptr<PostedRecv> claimedBy; ///< Posted while still arriving.
};

/// What this rank's progress thread is reading from one source.
struct Inbound {
  bool inMessage = false;
  int64_t tag = 0;
  uint64_t total = 0, got = 0;
  char *dest = nullptr; ///< Null: consumed and dropped.
  std::shared_ptr<PostedRecv> recv;
  std::shared_ptr<Unexpected> unexpected;
};

} // namespace

struct PeerMessages::State {
  int rank = 0, nranks = 0;
  PeerMessagesOptions options;
  uint64_t channel = 0;
  std::vector<ShmMapping> segments; ///< Every rank's, this one's included.
  std::vector<int64_t> pids;
  std::vector<uint64_t> startTimes;

  std::mutex mu;
  std::deque<std::shared_ptr<PostedRecv>> posted;
  std::deque<std::shared_ptr<Unexpected>> unexpected;
  std::vector<Inbound> inbound;
  std::vector<std::mutex> sendLocks;
  bool stopping = false;
  std::thread progress;

  SegmentHeader *header(int r) const {
    return reinterpret_cast<SegmentHeader *>(segments[size_t(r)].data());
  }
  /// The control block of the channel \p src -> \p dst (in dst's segment).
  ChannelControl *control(int dst, int src) const {
    return reinterpret_cast<ChannelControl *>(segments[size_t(dst)].data() + controlOffset()) + src;
  }
  char *ring(int dst, int src) const {
    return segments[size_t(dst)].data() + ringsOffset(uint32_t(nranks)) + uint64_t(src) * channel;
  }
  bool alive(int r) const { return processAlive(pids[size_t(r)], startTimes[size_t(r)]); }

  /// Rings \p r's bell, waking its progress thread or its waiting sender.
  void ring(int r) {
    SegmentHeader *h = header(r);
    h->bell.fetch_add(1, std::memory_order_seq_cst);
    if (h->sleeping.load(std::memory_order_seq_cst) || h->waitingForRoom.load())
      futexWakeAll(&h->bell);
  }

  /// Receives finished under `mu` whose callbacks are still to be called.
  std::vector<std::shared_ptr<PostedRecv>> toNotify;
  /// Calls the callbacks of toNotify's receives; `mu` must not be held.
  void notify();

  void progressLoop();
  /// Fails the receives whose sender died or whose time is up; `mu` held.
  void checkPosted(std::chrono::steady_clock::time_point now);
  void removePosted(const std::shared_ptr<PostedRecv> &r);
  void removeUnexpected(const std::shared_ptr<Unexpected> &u);
  bool drain(int src);
  void deliver(const std::shared_ptr<PostedRecv> &recv, const Unexpected &msg);
  void finish(const std::shared_ptr<PostedRecv> &recv, Status status);
};

/// Copies \p n bytes out of a ring of \p size bytes at stream position
/// \p pos (or into it, \p out false).
static void ringCopy(char *ring, uint64_t size, uint64_t pos, char *buf, uint64_t n, bool out) {
  uint64_t at = pos % size;
  uint64_t first = std::min(n, size - at);
  if (out) {
    std::memcpy(buf, ring + at, first);
    std::memcpy(buf + first, ring, n - first);
  } else {
    std::memcpy(ring + at, buf, first);
    std::memcpy(ring, buf + first, n - first);
  }
}

void PeerMessages::State::finish(const std::shared_ptr<PostedRecv> &recv, Status status) {
  if (recv->done)
    return;
  recv->status = std::move(status);
  recv->done = true;
  toNotify.push_back(recv);
}

void PeerMessages::State::notify() {
  std::vector<std::shared_ptr<PostedRecv>> list;
  {
    std::lock_guard<std::mutex> lock(mu);
    list.swap(toNotify);
  }
  for (const std::shared_ptr<PostedRecv> &r : list)
    if (r->callback) {
      std::function<void(const Status &, int)> f = std::move(r->callback);
      r->callback = nullptr;
      f(r->status, r->from);
    }
}

void PeerMessages::State::deliver(const std::shared_ptr<PostedRecv> &recv, const Unexpected &msg) {
  recv->from = msg.src;
  if (msg.dropped) {
    finish(recv, Status::error("the message with tag " + std::to_string(msg.tag) + " from rank " +
                               std::to_string(msg.src) +
                               " was lost (no memory to hold it, or its sender died while "
                               "sending it)"));
    return;
  }
  if (msg.data.size() != recv->bytes) {
    finish(recv, Status::error("rank " + std::to_string(msg.src) + " sent " +
                               std::to_string(msg.data.size()) + " bytes with tag " +
                               std::to_string(msg.tag) + ", the receive takes " +
                               std::to_string(recv->bytes)));
    return;
  }
  if (!msg.data.empty())
    std::memcpy(recv->data, msg.data.data(), msg.data.size());
  finish(recv, Status::success());
}

bool PeerMessages::State::drain(int src) {
  ChannelControl *ctl = control(rank, src);
  char *buf = ring(rank, src);
  Inbound &in = inbound[size_t(src)];
  const uint64_t head = ctl->head.load(std::memory_order_acquire);
  uint64_t tail = ctl->tail.load(std::memory_order_relaxed);
  bool moved = false;
  while (tail < head) {
    if (!in.inMessage) {
      if (head - tail < recordBytes)
        break; // A sender writes a record whole: not yet published.
      uint64_t record[2];
      ringCopy(buf, channel, tail, reinterpret_cast<char *>(record), recordBytes, true);
      tail += recordBytes;
      in = Inbound();
      in.inMessage = true;
      in.tag = int64_t(record[0]);
      in.total = record[1];
      std::lock_guard<std::mutex> lock(mu);
      for (const std::shared_ptr<PostedRecv> &r : posted) {
        if (r->matched || r->tag != in.tag || (r->src != anySource && r->src != src))
          continue;
        r->matched = true;
        r->from = src;
        in.recv = r;
        if (r->bytes != in.total)
          r->status =
              Status::error("rank " + std::to_string(src) + " sent " + std::to_string(in.total) +
                            " bytes with tag " + std::to_string(in.tag) + ", the receive takes " +
                            std::to_string(r->bytes));
        else
          in.dest = r->data;
        break;
      }
      if (!in.recv) {
        auto u = std::make_shared<Unexpected>();
        u->src = src;
        u->tag = in.tag;
        try {
          u->data.resize(in.total);
          in.dest = u->data.data();
        } catch (const std::bad_alloc &) {
          // Dropped: the receive that asks for it fails.
          u->data.clear();
          u->dropped = true;
          in.dest = nullptr;
        }
        in.unexpected = u;
        unexpected.push_back(u);
      }
    }
    const uint64_t n = std::min(head - tail, in.total - in.got);
    if (n && in.recv) {
      // The receive's buffer is the caller's: written only while it waits.
      std::lock_guard<std::mutex> lock(mu);
      if (in.recv->abandoned)
        in.dest = nullptr;
      if (in.dest)
        ringCopy(buf, channel, tail, in.dest + in.got, n, true);
    } else if (n && in.dest) {
      ringCopy(buf, channel, tail, in.dest + in.got, n, true);
    }
    tail += n;
    in.got += n;
    if (in.got == in.total) {
      std::lock_guard<std::mutex> lock(mu);
      if (in.recv) {
        for (auto it = posted.begin(); it != posted.end(); ++it)
          if (*it == in.recv) {
            posted.erase(it);
            break;
          }
        Status s = in.recv->status;
        finish(in.recv, std::move(s));
      } else if (in.unexpected) {
        in.unexpected->complete = true;
        if (std::shared_ptr<PostedRecv> r = in.unexpected->claimedBy) {
          for (auto it = unexpected.begin(); it != unexpected.end(); ++it)
            if (*it == in.unexpected) {
              unexpected.erase(it);
              break;
            }
          for (auto it = posted.begin(); it != posted.end(); ++it)
            if (*it == r) {
              posted.erase(it);
              break;
            }
          deliver(r, *in.unexpected);
        }
      }
      in = Inbound();
    }
    moved = true;
  }
  if (moved) {
    ctl->tail.store(tail, std::memory_order_release);
    ring(src);
  }
  return moved;
}

void PeerMessages::State::progressLoop() {
  SegmentHeader *self = header(rank);
  auto lastCheck = Clock::now();
  auto lastMove = Clock::now();
  for (;;) {
    const uint32_t seen = self->bell.load(std::memory_order_seq_cst);
    bool moved = false;
    for (int s = 0; s < nranks; ++s)
      if (s != rank)
        moved |= drain(s);
    bool waiting = false;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (stopping)
        return;
      waiting = !posted.empty();
      if (waiting && secondsSince(lastCheck) > 0.01)
        checkPosted(lastCheck = Clock::now());
    }
    notify();
    if (moved) {
      lastMove = Clock::now();
      continue;
    }
    // Spin a little while a receive waits (a reply is likely soon), then
    // sleep on the bell.
    if (waiting && secondsSince(lastMove) < 50e-6) {
      std::this_thread::yield();
      continue;
    }
    self->sleeping.store(1, std::memory_order_seq_cst);
    if (self->bell.load(std::memory_order_seq_cst) == seen)
      futexWait(&self->bell, seen, waiting ? 10000000 : 100000000);
    self->sleeping.store(0, std::memory_order_relaxed);
  }
}

void PeerMessages::State::checkPosted(Clock::time_point now) {
  // A sender that died in the middle of a message: what it left is lost.
  for (int s = 0; s < nranks; ++s) {
    Inbound &in = inbound[size_t(s)];
    if (s == rank || !in.inMessage || alive(s) ||
        control(rank, s)->head.load(std::memory_order_acquire) !=
            control(rank, s)->tail.load(std::memory_order_relaxed))
      continue;
    if (in.recv) {
      removePosted(in.recv);
      finish(in.recv, Status::error(
                          "rank " + std::to_string(s) + " (pid " + std::to_string(pids[size_t(s)]) +
                          ") died while sending the message with tag " + std::to_string(in.tag)));
    } else if (in.unexpected) {
      in.unexpected->dropped = in.unexpected->complete = true;
      if (std::shared_ptr<PostedRecv> r = in.unexpected->claimedBy) {
        removePosted(r);
        removeUnexpected(in.unexpected);
        deliver(r, *in.unexpected);
      }
    }
    in = Inbound();
  }
  for (auto it = posted.begin(); it != posted.end();) {
    const std::shared_ptr<PostedRecv> &r = *it;
    if (!r->matched && r->src != anySource && !alive(r->src) &&
        control(rank, r->src)->head.load(std::memory_order_acquire) ==
            control(rank, r->src)->tail.load(std::memory_order_relaxed)) {
      // A receive from a rank that died, with nothing left from it.
      finish(r,
             Status::error("rank " + std::to_string(r->src) + " (pid " +
                           std::to_string(pids[size_t(r->src)]) +
                           ") died before sending the message with tag " + std::to_string(r->tag)));
      it = posted.erase(it);
    } else if (now > r->deadline) {
      // Out of time. A message still arriving for it is dropped from here.
      r->abandoned = true;
      for (const std::shared_ptr<Unexpected> &u : unexpected)
        if (u->claimedBy == r)
          u->claimedBy = nullptr;
      const int seconds = int(options.timeoutSeconds);
      if (r->matched)
        finish(r, Status::error("a message with tag " + std::to_string(r->tag) + " from rank " +
                                std::to_string(r->from) + " did not arrive whole within " +
                                std::to_string(seconds) + " s"));
      else
        finish(r, Status::error("no message with tag " + std::to_string(r->tag) + " from " +
                                (r->src == anySource ? std::string("any rank")
                                                     : "rank " + std::to_string(r->src)) +
                                " arrived within " + std::to_string(seconds) + " s"));
      it = posted.erase(it);
    } else {
      ++it;
    }
  }
}

void PeerMessages::State::removePosted(const std::shared_ptr<PostedRecv> &r) {
  for (auto it = posted.begin(); it != posted.end(); ++it)
    if (*it == r) {
      posted.erase(it);
      return;
    }
}

void PeerMessages::State::removeUnexpected(const std::shared_ptr<Unexpected> &u) {
  for (auto it = unexpected.begin(); it != unexpected.end(); ++it)
    if (*it == u) {
      unexpected.erase(it);
      return;
    }
}

PeerMessages::PeerMessages() : state(std::make_unique<State>()) {}

PeerMessages::~PeerMessages() {
  if (net) {
    net.reset();
    return;
  }
  if (!state)
    return;
  {
    std::lock_guard<std::mutex> lock(state->mu);
    state->stopping = true;
    // Abandoned first: the progress thread writes nothing more into their
    // buffers, which their callers may free once told.
    for (const std::shared_ptr<PostedRecv> &r : state->posted) {
      r->abandoned = true;
      state->finish(r, Status::error("the point-to-point messages were shut down"));
    }
    state->posted.clear();
  }
  state->notify();
  if (state->progress.joinable()) {
    SegmentHeader *self = state->header(state->rank);
    self->bell.fetch_add(1);
    futexWakeAll(&self->bell);
    state->progress.join();
  }
}

int PeerMessages::rank() const {
  return net ? netRank(*net) : state->rank;
}
int PeerMessages::size() const {
  return net ? netSize(*net) : state->nranks;
}

Result<std::unique_ptr<PeerMessages>> PeerMessages::create(const std::string &job, int rank,
                                                           int nranks, KeyValueStore &store,
                                                           const PeerMessagesOptions &options) {
  Result<std::unique_ptr<PeerMessages::Net>> n = createNetPeers(job, rank, nranks, store, options);
  if (!n)
    return n.getStatus();
  std::unique_ptr<PeerMessages> pm(new PeerMessages());
  pm->net = std::move(*n);
  return pm;
}

Result<std::unique_ptr<PeerMessages>> PeerMessages::create(const std::string &job, int rank,
                                                           int nranks,
                                                           const PeerMessagesOptions &options) {
  if (!validJobName(job))
    return Status::error("the job name '" + job + "' is not 1 to " + std::to_string(maxJobName) +
                         " characters of [A-Za-z0-9_-]");
  if (nranks < 1 || nranks > 65536 || rank < 0 || rank >= nranks)
    return Status::error("rank " + std::to_string(rank) + " of " + std::to_string(nranks) +
                         " is not a rank of a job");
  std::unique_ptr<PeerMessages> pm(new PeerMessages());
  State &st = *pm->state;
  st.rank = rank;
  st.nranks = nranks;
  st.options = options;
  uint64_t channel = options.channelBytes
                         ? options.channelBytes
                         : std::clamp<uint64_t>((4ull << 20) / uint64_t(nranks), 64 << 10, 1 << 20);
  channel = std::max<uint64_t>((channel + pageBytes - 1) / pageBytes * pageBytes, pageBytes);
  st.channel = channel;
  st.segments.resize(size_t(nranks));
  st.pids.assign(size_t(nranks), 0);
  st.startTimes.assign(size_t(nranks), 0);
  st.inbound.resize(size_t(nranks));
  st.sendLocks = std::vector<std::mutex>(size_t(nranks));

  const int64_t pid = ::getpid();
  const uint64_t start = processStartTime(pid);
  std::random_device random;
  const uint64_t nonce = (uint64_t(random()) << 32) ^ random();
  const uint64_t bytes = segmentBytes(uint32_t(nranks), channel);
  ShmOpenResult result;
  const std::string own = segmentName(job, rank);
  Status s = ShmOps::create(
      own, bytes, st.segments[size_t(rank)], result, true,
      [&](char *p) {
        auto *h = new (p) SegmentHeader();
        h->magic = segmentMagic;
        h->version = segmentVersion;
        h->nranks = uint32_t(nranks);
        h->rank = uint32_t(rank);
        h->pid = pid;
        h->startTime = start;
        h->nonce = nonce;
        h->channelBytes = channel;
        h->ready.store(1, std::memory_order_release);
      },
      sizeof(SegmentHeader));
  if (!s)
    return Status::error("point-to-point messages of rank " + std::to_string(rank) + ": " +
                         s.message());
  if (result == ShmOpenResult::Exists)
    return Status::error("point-to-point messages: the shared-memory name " + own +
                         " is taken (another job of the name '" + job + "'?)");
  st.pids[size_t(rank)] = pid;
  st.startTimes[size_t(rank)] = start;

  // Map every peer's segment, then wait until every peer mapped ours.
  const auto begin = Clock::now();
  auto unlinkOwn = [&] { unlinkSegment(own); };
  for (int r = 0; r < nranks; ++r) {
    if (r == rank)
      continue;
    for (;;) {
      ShmOpenResult res;
      Status o = ShmOps::open(segmentName(job, r), bytes, st.segments[size_t(r)], res);
      if (!o) {
        unlinkOwn();
        return Status::error("point-to-point messages: " + o.message());
      }
      if (res == ShmOpenResult::Mapped) {
        SegmentHeader *h = st.header(r);
        const bool ready = h->ready.load(std::memory_order_acquire);
        if (ready && !processAlive(h->pid, h->startTime)) {
          // Left behind by a dead process of an earlier job of this name:
          // not this job's rank r. Its name goes, so that rank r can make
          // its own; wait for that one.
          const std::string name = segmentName(job, r);
          st.segments[size_t(r)].reset();
          ShmOps::unlinkIfStale(name, [](const ShmMapping &m, const struct stat &) {
            if (m.size() < sizeof(SegmentHeader))
              return false;
            const auto *old = reinterpret_cast<const SegmentHeader *>(m.data());
            return old->ready.load(std::memory_order_acquire) &&
                   !processAlive(old->pid, old->startTime);
          });
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
          continue;
        }
        if (ready && h->magic == segmentMagic && h->version == segmentVersion &&
            h->nranks == uint32_t(nranks) && h->rank == uint32_t(r) && h->channelBytes == channel)
          break;
        if (ready) {
          unlinkOwn();
          return Status::error("point-to-point messages: rank " + std::to_string(r) +
                               "'s segment is for " + std::to_string(h->nranks) +
                               " ranks with channels of " + std::to_string(h->channelBytes) +
                               " bytes, not " + std::to_string(nranks) + " and " +
                               std::to_string(channel));
        }
        st.segments[size_t(r)].reset();
      }
      if (secondsSince(begin) > options.setupTimeoutSeconds) {
        unlinkOwn();
        return Status::error("point-to-point messages: rank " + std::to_string(r) +
                             " did not join job '" + job + "' within " +
                             std::to_string(int(options.setupTimeoutSeconds)) + " s");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    st.pids[size_t(r)] = st.header(r)->pid;
    st.startTimes[size_t(r)] = st.header(r)->startTime;
    st.control(r, rank)->mapped.store(1, std::memory_order_release);
    st.header(r)->mappedBy.fetch_add(1, std::memory_order_acq_rel);
  }
  SegmentHeader *self = st.header(rank);
  while (self->mappedBy.load(std::memory_order_acquire) < uint32_t(nranks - 1)) {
    // A peer that mapped this segment may be done and gone already.
    for (int r = 0; r < nranks; ++r)
      if (r != rank && !st.control(rank, r)->mapped.load(std::memory_order_acquire) &&
          !st.alive(r)) {
        unlinkOwn();
        return Status::error("point-to-point messages: rank " + std::to_string(r) +
                             " died while the job was being set up");
      }
    if (secondsSince(begin) > options.setupTimeoutSeconds) {
      unlinkOwn();
      return Status::error("point-to-point messages: not every rank mapped rank " +
                           std::to_string(rank) + "'s segment within " +
                           std::to_string(int(options.setupTimeoutSeconds)) + " s");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  unlinkOwn();
  st.progress = std::thread([&st] { st.progressLoop(); });
  return pm;
}

Status PeerMessages::send(int dst, int64_t tag, const void *data, uint64_t bytes) {
  if (net)
    return netSend(*net, dst, tag, data, bytes);
  State &st = *state;
  if (dst < 0 || dst >= st.nranks || dst == st.rank)
    return Status::error("send to rank " + std::to_string(dst) + ": not a peer of rank " +
                         std::to_string(st.rank) + " among " + std::to_string(st.nranks));
  std::lock_guard<std::mutex> order(st.sendLocks[size_t(dst)]);
  ChannelControl *ctl = st.control(dst, st.rank);
  char *buf = st.ring(dst, st.rank);
  SegmentHeader *self = st.header(st.rank);
  uint64_t head = ctl->head.load(std::memory_order_relaxed);
  const char *src = static_cast<const char *>(data);
  uint64_t sent = 0;
  bool recordSent = false;
  auto lastProgress = Clock::now();
  auto lastLiveness = lastProgress;
  while (!recordSent || sent < bytes) {
    const uint64_t tail = ctl->tail.load(std::memory_order_acquire);
    uint64_t room = st.channel - (head - tail);
    bool wrote = false;
    if (!recordSent && room >= recordBytes) {
      uint64_t record[2] = {uint64_t(tag), bytes};
      ringCopy(buf, st.channel, head, reinterpret_cast<char *>(record), recordBytes, false);
      head += recordBytes;
      room -= recordBytes;
      recordSent = wrote = true;
    }
    if (recordSent && room && sent < bytes) {
      const uint64_t n = std::min(room, bytes - sent);
      ringCopy(buf, st.channel, head, const_cast<char *>(src + sent), n, false);
      head += n;
      sent += n;
      wrote = true;
    }
    if (wrote) {
      ctl->head.store(head, std::memory_order_release);
      st.ring(dst);
      lastProgress = Clock::now();
      continue;
    }
    // No room: sleep until the receiver consumes (it rings our bell).
    if (secondsSince(lastLiveness) > 0.05) {
      lastLiveness = Clock::now();
      if (!st.alive(dst))
        return Status::error("rank " + std::to_string(dst) + " (pid " +
                             std::to_string(st.pids[size_t(dst)]) + ") died while rank " +
                             std::to_string(st.rank) + " sent it a message with tag " +
                             std::to_string(tag));
    }
    if (secondsSince(lastProgress) > st.options.timeoutSeconds)
      return Status::error("rank " + std::to_string(dst) + " took no data of a message with tag " +
                           std::to_string(tag) + " from rank " + std::to_string(st.rank) + " for " +
                           std::to_string(int(st.options.timeoutSeconds)) + " s");
    const uint32_t seen = self->bell.load(std::memory_order_seq_cst);
    self->waitingForRoom.store(1, std::memory_order_seq_cst);
    if (ctl->tail.load(std::memory_order_acquire) == tail)
      futexWait(&self->bell, seen, 1000000);
    self->waitingForRoom.store(0, std::memory_order_relaxed);
  }
  return Status::success();
}

Status PeerMessages::postRecv(int src, int64_t tag, void *data, uint64_t bytes,
                              std::function<void(const Status &, int)> done) {
  if (net)
    return netPostRecv(*net, src, tag, data, bytes, std::move(done));
  State &st = *state;
  if (src != anySource && (src < 0 || src >= st.nranks || src == st.rank))
    return Status::error("receive from rank " + std::to_string(src) + ": not a peer of rank " +
                         std::to_string(st.rank) + " among " + std::to_string(st.nranks));
  auto r = std::make_shared<PostedRecv>();
  r->src = src;
  r->tag = tag;
  r->data = static_cast<char *>(data);
  r->bytes = bytes;
  r->callback = std::move(done);
  r->deadline = Clock::now() + seconds(st.options.timeoutSeconds);
  {
    std::lock_guard<std::mutex> lock(st.mu);
    if (st.stopping)
      return Status::error("the point-to-point messages were shut down");
    // A message that already arrived (whole or in part) comes first.
    bool taken = false;
    for (auto it = st.unexpected.begin(); it != st.unexpected.end(); ++it) {
      Unexpected &u = **it;
      if (u.claimedBy || u.tag != tag || (src != anySource && u.src != src))
        continue;
      if (u.complete) {
        std::shared_ptr<Unexpected> keep = *it;
        st.unexpected.erase(it);
        st.deliver(r, *keep);
        taken = true;
      } else {
        u.claimedBy = r;
        r->matched = true;
        r->from = u.src;
      }
      break;
    }
    if (!taken)
      st.posted.push_back(r);
  }
  st.notify();
  // Wake the progress thread: it may be asleep with nothing to wait for.
  st.ring(st.rank);
  return Status::success();
}

Status PeerMessages::recv(int src, int64_t tag, void *data, uint64_t bytes, int *from) {
  struct Outcome {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    Status status = Status::success();
    int from = -1;
  };
  auto outcome = std::make_shared<Outcome>();
  Status posted = postRecv(src, tag, data, bytes, [outcome](const Status &s, int source) {
    std::lock_guard<std::mutex> lock(outcome->mu);
    outcome->status = s;
    outcome->from = source;
    outcome->done = true;
    outcome->cv.notify_all();
  });
  if (!posted)
    return posted;
  std::unique_lock<std::mutex> lock(outcome->mu);
  outcome->cv.wait(lock, [&] { return outcome->done; });
  if (from)
    *from = outcome->from;
  return outcome->status;
}

} // namespace coll
