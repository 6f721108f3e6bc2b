//===- NetPeers.cpp - Point-to-point messages over the network ------------===//
//
// NetPeers.h over UCX; without UCX, createNetPeers() says so.
//
//===----------------------------------------------------------------------===//

#include "NetPeers.h"

#include "ExecCommon.h"
#include "NetEngine.h"
#include "Text.h"
#include "UcxSupport.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#ifdef COLL_HAVE_UCX
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <ucp/api/ucp.h>
#include <unistd.h>
#endif

namespace coll {

using detail::cat;
using detail::formatSeconds;

#ifndef COLL_HAVE_UCX

Result<std::unique_ptr<PeerMessages::Net>>
createNetPeers(const std::string &, int, int, KeyValueStore &, const PeerMessagesOptions &) {
  return Status::error("point-to-point messages across hosts need the network transport, and "
                       "this build of Collc has none (it was built without UCX)");
}
int netRank(const PeerMessages::Net &) {
  return 0;
}
int netSize(const PeerMessages::Net &) {
  return 1;
}
Status netSend(PeerMessages::Net &, int, int64_t, const void *, uint64_t) {
  return Status::error("no network transport");
}
Status netPostRecv(PeerMessages::Net &, int, int64_t, void *, uint64_t,
                   std::function<void(const Status &, int)>) {
  return Status::error("no network transport");
}

#else

namespace {

using Clock = std::chrono::steady_clock;
constexpr int tagBits = 48;
constexpr uint64_t tagMask = (uint64_t(1) << tagBits) - 1;
/// At most this many bytes of sends in flight; a send beyond waits.
constexpr uint64_t maxBufferedBytes = uint64_t(256) << 20;

/// A send in flight: its copy of the message.
struct Sending {
  std::vector<char> data;
  void *request = nullptr;
  std::atomic<int> done{0}; ///< 1 done, 2 failed.
  ucs_status_t status = UCS_OK;
  int dst = 0;
  int64_t tag = 0;
};

/// A receive posted.
struct Receiving {
  int src = -1; ///< Or anySource.
  int64_t tag = 0;
  uint64_t bytes = 0;
  void *request = nullptr;
  std::function<void(const Status &, int)> done;
  Clock::time_point deadline;
  bool completed = false; ///< UCX completed it (callback ran).
  ucs_status_t status = UCS_OK;
  uint64_t length = 0;
  uint64_t senderTag = 0;
  std::string failure; ///< Set: fail it with this (timeout, lost peer).
};

class UcxPeers;

struct EndpointContext {
  UcxPeers *owner = nullptr;
  int rank = 0;
};

class UcxPeers final : public PeerMessages::Net {
public:
  UcxPeers(int rank, int nranks, const PeerMessagesOptions &options)
      : rank(rank), nranks(nranks), options(options), eps(size_t(nranks), nullptr),
        contexts(size_t(nranks)), lostWhy(size_t(nranks)) {}
  ~UcxPeers() override;

  Status init(const std::string &job, KeyValueStore &store);
  Status send(int dst, int64_t tag, const void *data, uint64_t bytes);
  Status postRecv(int src, int64_t tag, void *data, uint64_t bytes,
                  std::function<void(const Status &, int)> done);
  void peerLost(int q, ucs_status_t status) {
    // On the thread that progresses (under ucxMutex).
    if (lostWhy[size_t(q)].empty())
      lostWhy[size_t(q)] = cat("its connection broke (", ucs_status_string(status), ")");
  }

  const int rank, nranks;

private:
  void loop();
  /// One pass (under ucxMutex): progress, retire sends, collect finished
  /// receives into \p finished.
  void pass(std::vector<std::shared_ptr<Receiving>> &finished);
  void wake() {
    uint64_t one = 1;
    ssize_t n = write(ucx.wakeFd, &one, sizeof one);
    (void)n;
  }

  PeerMessagesOptions options;
  detail::UcxWorker ucx;
  std::vector<ucp_ep_h> eps;
  std::vector<EndpointContext> contexts;
  std::vector<std::string> lostWhy; ///< Per rank, under ucxMutex.
  std::mutex ucxMutex;
  std::deque<std::unique_ptr<Sending>> sends;       ///< Under ucxMutex.
  std::vector<std::shared_ptr<Receiving>> receives; ///< Under ucxMutex.
  uint64_t buffered = 0;                            ///< Bytes of sends in flight.
  std::condition_variable_any roomFreed;
  std::thread thread;
  std::atomic<bool> stopping{false};
};

void endpointFailed(void *arg, ucp_ep_h, ucs_status_t status) {
  auto *c = static_cast<EndpointContext *>(arg);
  c->owner->peerLost(c->rank, status);
}

void sendDone(void *, ucs_status_t status, void *user) {
  auto *s = static_cast<Sending *>(user);
  s->status = status;
  s->done.store(status == UCS_OK ? 1 : 2, std::memory_order_release);
}

void recvDone(void *, ucs_status_t status, const ucp_tag_recv_info_t *info, void *user) {
  auto *r = static_cast<Receiving *>(user);
  r->status = status;
  if (status == UCS_OK) {
    r->length = info->length;
    r->senderTag = info->sender_tag;
  }
  r->completed = true;
}

Status UcxPeers::init(const std::string &job, KeyValueStore &store) {
  if (Status s = detail::openUcxWorker(UCS_THREAD_MODE_SERIALIZED, nullptr, ucx); !s)
    return s;

  const std::string prefix = cat("collp2p/", job, "/");
  if (Status st = store.set(cat(prefix, rank), ucx.address); !st)
    return st;
  for (int q = 0; q < nranks; ++q) {
    if (q == rank)
      continue;
    Result<std::string> a = store.get(cat(prefix, q));
    if (!a)
      return Status::error(cat("rank ", q,
                               " did not publish its address for point-to-point "
                               "messages: ",
                               a.message()));
    contexts[size_t(q)] = EndpointContext{this, q};
    if (Status st = detail::connectUcx(ucx.worker, *a, endpointFailed, &contexts[size_t(q)],
                                       eps[size_t(q)]);
        !st)
      return Status::error(cat("rank ", rank, " cannot connect to rank ", q, ": ", st.message()));
  }
  thread = std::thread([this] { loop(); });
  return Status::success();
}

UcxPeers::~UcxPeers() {
  if (thread.joinable()) {
    stopping.store(true, std::memory_order_release);
    wake();
    thread.join();
  }
  if (ucx.worker) {
    std::vector<std::shared_ptr<Receiving>> finished;
    {
      std::lock_guard<std::mutex> lock(ucxMutex);
      for (auto &r : receives)
        if (r->request && !r->completed)
          ucp_request_cancel(ucx.worker, r->request);
      // Buffered sends reach their peers before the connections go
      // (closeEndpoints()), within 5 s.
      std::vector<ucp_ep_h> open;
      for (ucp_ep_h ep : eps)
        if (ep)
          open.push_back(ep);
      std::vector<void *> requests;
      for (auto &snd : sends)
        requests.push_back(snd->request);
      for (auto &r : receives)
        requests.push_back(r->request);
      const bool busy = !detail::closeEndpoints(
          ucx, open, requests, std::chrono::steady_clock::now() + std::chrono::seconds(5));
      if (busy) {
        // UCX still holds some of our memory: leave it all.
        for (auto &snd : sends)
          detail::parkForever(std::shared_ptr<Sending>(std::move(snd)));
        for (auto &r : receives)
          detail::parkForever(r);
      } else {
        for (void *r : requests)
          if (r)
            ucp_request_free(r);
      }
      detail::releaseUcxWorker(ucx, busy);
      finished.swap(receives);
    }
    for (auto &r : finished)
      if (r->done)
        r->done(Status::error("the point-to-point messages were shut down"), -1);
  } else {
    detail::releaseUcxWorker(ucx, false); // What a failed init() made.
  }
}

Status UcxPeers::send(int dst, int64_t tag, const void *data, uint64_t bytes) {
  if (dst < 0 || dst >= nranks || dst == rank)
    return Status::error(
        cat("send to rank ", dst, ": not a peer of rank ", rank, " among ", nranks));
  if (tag < 0 || uint64_t(tag) > tagMask)
    return Status::error(cat("send with tag ", tag, ": tags across hosts lie in [0, 2^48)"));
  auto s = std::make_unique<Sending>();
  s->data.assign(static_cast<const char *>(data), static_cast<const char *>(data) + bytes);
  s->dst = dst;
  s->tag = tag;
  std::unique_lock<std::mutex> lock(ucxMutex);
  const auto deadline = Clock::now() + std::chrono::duration<double>(options.timeoutSeconds);
  while (buffered > 0 && buffered + bytes > maxBufferedBytes && lostWhy[size_t(dst)].empty()) {
    if (roomFreed.wait_until(lock, deadline) == std::cv_status::timeout)
      return Status::error(cat("rank ", dst, " took none of rank ", rank,
                               "'s buffered messages for ", formatSeconds(options.timeoutSeconds),
                               " s"));
  }
  if (!lostWhy[size_t(dst)].empty())
    return Status::error(cat("rank ", dst, " is lost (", lostWhy[size_t(dst)], "): rank ", rank,
                             " cannot send it a message with tag ", tag));
  ucp_request_param_t rp{};
  rp.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  rp.cb.send = sendDone;
  rp.user_data = s.get();
  void *r = ucp_tag_send_nbx(eps[size_t(dst)], s->data.data(), bytes,
                             (uint64_t(rank) << tagBits) | uint64_t(tag), &rp);
  if (UCS_PTR_IS_ERR(r))
    return Status::error(
        cat("UCX: a message to rank ", dst, " failed: ", ucs_status_string(UCS_PTR_STATUS(r))));
  s->request = r;
  buffered += bytes;
  sends.push_back(std::move(s));
  lock.unlock();
  wake();
  return Status::success();
}

Status UcxPeers::postRecv(int src, int64_t tag, void *data, uint64_t bytes,
                          std::function<void(const Status &, int)> done) {
  if (src != PeerMessages::anySource && (src < 0 || src >= nranks || src == rank))
    return Status::error(
        cat("receive from rank ", src, ": not a peer of rank ", rank, " among ", nranks));
  if (tag < 0 || uint64_t(tag) > tagMask)
    return Status::error(cat("receive with tag ", tag, ": tags across hosts lie in [0, 2^48)"));
  auto r = std::make_shared<Receiving>();
  r->src = src;
  r->tag = tag;
  r->bytes = bytes;
  r->done = std::move(done);
  r->deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(options.timeoutSeconds));
  std::lock_guard<std::mutex> lock(ucxMutex);
  if (stopping.load(std::memory_order_acquire))
    return Status::error("the point-to-point messages were shut down");
  ucp_request_param_t rp{};
  rp.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  rp.cb.recv = recvDone;
  rp.user_data = r.get();
  const bool any = src == PeerMessages::anySource;
  const uint64_t want = (any ? 0 : uint64_t(src) << tagBits) | uint64_t(tag);
  const uint64_t mask = any ? tagMask : ~uint64_t(0);
  void *q = ucp_tag_recv_nbx(ucx.worker, data, bytes, want, mask, &rp);
  if (UCS_PTR_IS_ERR(q))
    return Status::error(
        cat("UCX: a receive from rank ", src, " failed: ", ucs_status_string(UCS_PTR_STATUS(q))));
  r->request = q;
  receives.push_back(std::move(r));
  wake();
  return Status::success();
}

void UcxPeers::pass(std::vector<std::shared_ptr<Receiving>> &finished) {
  while (ucp_worker_progress(ucx.worker)) {
  }
  bool freed = false;
  while (!sends.empty() && sends.front()->done.load(std::memory_order_acquire)) {
    buffered -= sends.front()->data.size();
    ucp_request_free(sends.front()->request);
    sends.pop_front();
    freed = true;
  }
  // A send stuck behind a failed one is retired with it when its peer is
  // lost: its request completes with an error too.
  if (freed)
    roomFreed.notify_all();
  const auto now = Clock::now();
  for (auto it = receives.begin(); it != receives.end();) {
    Receiving &r = **it;
    if (!r.completed && r.failure.empty()) {
      if (r.src != PeerMessages::anySource && !lostWhy[size_t(r.src)].empty())
        r.failure = cat("rank ", r.src, " is lost (", lostWhy[size_t(r.src)], ") while rank ", rank,
                        " waited for its message with tag ", r.tag);
      else if (now > r.deadline)
        r.failure =
            cat("no message with tag ", r.tag, " came from ",
                r.src == PeerMessages::anySource ? std::string("any rank") : cat("rank ", r.src),
                " to rank ", rank, " within ", formatSeconds(options.timeoutSeconds), " s");
      if (!r.failure.empty())
        ucp_request_cancel(ucx.worker, r.request);
    }
    if (r.completed) {
      ucp_request_free(r.request);
      r.request = nullptr;
      finished.push_back(std::move(*it));
      it = receives.erase(it);
    } else {
      ++it;
    }
  }
}

void UcxPeers::loop() {
  std::vector<std::shared_ptr<Receiving>> finished;
  while (!stopping.load(std::memory_order_acquire)) {
    bool idle = false;
    {
      std::lock_guard<std::mutex> lock(ucxMutex);
      pass(finished);
      idle = finished.empty() && ucp_worker_arm(ucx.worker) == UCS_OK;
    }
    // Callbacks outside the lock: they may send or post.
    for (auto &r : finished) {
      const int from = int(r->senderTag >> tagBits);
      Status s = Status::success();
      if (!r->failure.empty())
        s = Status::error(r->failure);
      else if (r->status == UCS_ERR_MESSAGE_TRUNCATED)
        s = Status::error(cat("a message with tag ", r->tag, " for rank ", rank,
                              " is longer than the ", r->bytes, " bytes received"));
      else if (r->status != UCS_OK)
        s = Status::error(
            cat("a receive of rank ", rank, " failed: ", ucs_status_string(r->status)));
      else if (r->length != r->bytes)
        s = Status::error(cat("rank ", from, " sent ", r->length, " bytes with tag ", r->tag,
                              " where rank ", rank, " receives ", r->bytes));
      r->done(s, s ? from : r->src);
    }
    finished.clear();
    if (idle) {
      epoll_event ev[4];
      epoll_wait(ucx.epollFd, ev, 4, 50);
      uint64_t drained;
      while (read(ucx.wakeFd, &drained, sizeof drained) > 0) {
      }
    }
  }
}

} // namespace

Result<std::unique_ptr<PeerMessages::Net>> createNetPeers(const std::string &job, int rank,
                                                          int nranks, KeyValueStore &store,
                                                          const PeerMessagesOptions &options) {
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return Status::error(cat("rank ", rank, " is out of range for ", nranks, " ranks"));
  auto p = std::make_unique<UcxPeers>(rank, nranks, options);
  if (Status s = p->init(job, store); !s)
    return s;
  return std::unique_ptr<PeerMessages::Net>(std::move(p));
}

int netRank(const PeerMessages::Net &n) {
  return static_cast<const UcxPeers &>(n).rank;
}
int netSize(const PeerMessages::Net &n) {
  return static_cast<const UcxPeers &>(n).nranks;
}
Status netSend(PeerMessages::Net &n, int dst, int64_t tag, const void *data, uint64_t bytes) {
  return static_cast<UcxPeers &>(n).send(dst, tag, data, bytes);
}
Status netPostRecv(PeerMessages::Net &n, int src, int64_t tag, void *data, uint64_t bytes,
                   std::function<void(const Status &, int)> done) {
  return static_cast<UcxPeers &>(n).postRecv(src, tag, data, bytes, std::move(done));
}

#endif // COLL_HAVE_UCX

} // namespace coll
