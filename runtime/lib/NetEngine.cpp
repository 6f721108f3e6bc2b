//===- NetEngine.cpp - A process rank's connections across hosts ----------===//
//
// NetEngine over UCX (NetEngine.h); without UCX, create() says so.
//
//===----------------------------------------------------------------------===//

#include "NetEngine.h"

#include "ExecCommon.h"
#include "ProcessControl.h"
#include "UcxSupport.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <mutex>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

#ifdef COLL_HAVE_UCX
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <ucp/api/ucp.h>
#endif

namespace coll {
namespace detail {

namespace {

constexpr uint64_t controlTag = uint64_t(1) << 63;
constexpr uint64_t messageBits = 20;
constexpr uint64_t messageMask = (uint64_t(1) << messageBits) - 1;

std::string readLink(const char *path) {
  char buf[256];
  ssize_t n = readlink(path, buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, size_t(n)) : std::string();
}

} // namespace

uint64_t netTagBase(uint64_t side, uint32_t sender, uint32_t channel) {
  // [62..41] data side, [40..25] sender, [24..20] channel, [19..0]
  // message. Message numbers wrap, which is harmless: UCX matches the
  // messages of one tag from one sender in the order they were sent.
  return ((side & ((uint64_t(1) << 22) - 1)) << 41) | (uint64_t(sender & 0xffff) << 25) |
         (uint64_t(channel & 31) << 20);
}

NetLink::NetLink(bool sending, uint32_t peer, uint64_t tagBase, uint32_t depth, uint64_t slotBytes)
    : sending(sending), peer(peer), tagBase(tagBase), storage(depth, slotBytes),
      lengths(new uint64_t[depth]()), slots(new Slot[depth]()) {
  // Never direct: the peer cannot read this process's memory.
  storage.fifo.direct = nullptr;
  if (sending)
    storage.fifo.lengths = lengths.get();
}

std::string hostIdentity() {
  if (const char *h = std::getenv("COLL_HOST"); h && *h)
    return h;
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  std::string boot;
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::getline(in, boot);
  // Shared memory is shared where /dev/shm is the same directory (a mount
  // namespace of its own may still have it: `ip netns exec` makes one).
  struct stat sb {};
  stat("/dev/shm", &sb);
  return cat(name, "/", boot, "/shm:", uint64_t(sb.st_dev), ":", uint64_t(sb.st_ino), "/",
             readLink("/proc/self/ns/net"));
}

void tuneUcx() {
  // setenv without overwriting: a value the user set stays.
  setenv("UCX_TCP_TX_SEG_SIZE", "256k", 0);
  setenv("UCX_TCP_RX_SEG_SIZE", "256k", 0);
}

#ifndef COLL_HAVE_UCX

bool netAvailable() {
  return false;
}

Result<std::unique_ptr<NetEngine>> NetEngine::create(JobControl &) {
  return Status::error("this build of Collc has no network transport (it was built without UCX: "
                       "install libucx-dev and rebuild)");
}

#else

bool netAvailable() {
  return true;
}

namespace {

/// What a rank sends its remote peers of its control block.
struct ControlUpdate {
  uint64_t magic = 0;
  uint32_t rank = 0;
  uint32_t flags = 0; ///< failedFlag, closedFlag.
  uint64_t update = 0;
  uint64_t callSeq = 0;
  uint64_t doneSeq = 0;
  /// Both publication slots: a peer that reads call s after the owner
  /// has published s + 1 finds s in its slot still.
  PublishedCall calls[2];
  uint32_t failureOrigin = 0;
  uint32_t failureBytes = 0;
  char failure[sizeof(ControlBlock::failure)] = {};
};
constexpr uint64_t updateMagic = 0x31445055434c4f43ull; ///< "COLCUPD1"
constexpr uint32_t failedFlag = 1, closedFlag = 2;
constexpr size_t updateHead = offsetof(ControlUpdate, failure);

using Slot = NetLink::Slot;

void sendDone(void *, ucs_status_t status, void *user) {
  auto *c = static_cast<Slot *>(user);
  c->status = status;
  c->done = status == UCS_OK ? 1 : 2;
}

void recvDone(void *, ucs_status_t status, const ucp_tag_recv_info_t *info, void *user) {
  auto *c = static_cast<Slot *>(user);
  c->status = status;
  if (status == UCS_OK)
    c->length = info->length;
  c->done = status == UCS_OK ? 1 : 2;
}

class UcxEngine;

/// What the error handler of a peer's endpoint needs.
struct PeerContext {
  UcxEngine *engine = nullptr;
  uint32_t rank = 0;
};

void endpointFailed(void *arg, ucp_ep_h, ucs_status_t status);

/// Request parameters with a completion callback into \p slot, never
/// completed in place (one path for every completion).
ucp_request_param_t withCallback(Slot &slot, bool send) {
  ucp_request_param_t rp{};
  rp.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  if (send)
    rp.cb.send = sendDone;
  else
    rp.cb.recv = recvDone;
  rp.user_data = &slot;
  return rp;
}

class UcxEngine final : public NetEngine {
public:
  explicit UcxEngine(JobControl &jc) : jc(jc) {}
  ~UcxEngine() override;

  Status init();
  const std::string &address() const override { return ucx.address; }
  Status connect(uint32_t q, const std::string &address, ControlBlock *mirror) override;
  void start() override;
  void flush(double seconds) override;
  void controlChanged() override {
    dirty.store(true, std::memory_order_release);
    // Sent by this thread when it may drive UCX now; else the engine's
    // thread is told.
    if (thread.joinable()) {
      std::unique_lock<std::mutex> lock(ucxMutex, std::try_to_lock);
      if (lock.owns_lock()) {
        step();
        return;
      }
    }
    wakeEventFd(ucx.wakeFd);
  }
  bool poll() override;
  void pollerEnter() override;
  void pollerLeave() override;
  bool lost(uint32_t q, std::string *why) const override;
  Doorbell &bell() override { return doorbell; }
  void attach(const std::vector<std::shared_ptr<NetLink>> &links) override;
  void detach(const std::vector<std::shared_ptr<NetLink>> &links) override;
  std::string linkFailure() const override {
    std::lock_guard<std::mutex> lock(mutex);
    return failure;
  }

  void markLost(uint32_t q, const std::string &why);

private:
  struct Peer {
    ucp_ep_h ep = nullptr;
    ControlBlock *mirror = nullptr;
    PeerContext context;
    uint64_t applied = 0;          ///< The last update applied.
    int64_t heardNs = 0;           ///< When the last update came.
    std::atomic<bool> lost{false}; ///< Set once, with why.
    std::string why;               ///< Under the engine's mutex.
  };
  /// An update in flight, with its memory.
  struct Outgoing {
    std::unique_ptr<ControlUpdate> update;
    Slot slot;
  };

  void loop();
  /// One pass over everything (under ucxMutex): true when anything
  /// happened; \p moved, when given, is set when a link's message did.
  bool step(bool *moved = nullptr);
  bool serviceLink(NetLink &l);
  void sendUpdates();
  bool reapOutgoing();
  void postControlReceive();
  bool applyControl();
  void linkFailed(const NetLink &l, int32_t status, uint64_t message);
  bool pending(void *request) const {
    return request && ucp_request_check_status(request) == UCS_INPROGRESS;
  }

  JobControl &jc;
  UcxWorker ucx;
  std::vector<std::unique_ptr<Peer>> peers; ///< By rank; null: not remote.
  std::thread thread;
  std::atomic<bool> stopping{false};
  std::atomic<bool> dirty{false};
  Doorbell doorbell;
  int64_t beatNs = 0, silenceNs = 0;
  uint64_t updates = 0;
  int64_t nextBeat = 0;
  std::atomic<uint32_t> pollers{0};
  /// Held by whoever drives UCX: the engine's thread, or a worker in poll().
  std::mutex ucxMutex;

  mutable std::mutex mutex; ///< Guards what follows, and Peer::why.
  std::vector<std::shared_ptr<NetLink>> toAttach, toDetach;
  std::string failure;
  std::atomic<uint64_t> flushAsked{0}, flushDone{0};

  // The engine thread's own.
  std::vector<std::shared_ptr<NetLink>> links;
  std::deque<Outgoing> outgoing;
  std::unique_ptr<ControlUpdate> incoming{new ControlUpdate()};
  Slot control;
};

void endpointFailed(void *arg, ucp_ep_h, ucs_status_t status) {
  auto *p = static_cast<PeerContext *>(arg);
  p->engine->markLost(p->rank, cat("its connection broke (", ucs_status_string(status), ")"));
}

Status UcxEngine::init() {
  // A slot's message goes eagerly, in one trip: the receive for it is
  // always posted, and UCX's rendezvous (a request and a reply before the
  // data) cost a round trip of thread wake-ups per message over TCP, half
  // the bandwidth at 1-16 MiB (docs/performance.md, "Across hosts").
  // Serialized: the engine's thread and a run's workers take turns
  // (ucxMutex).
  if (Status s = openUcxWorker(UCS_THREAD_MODE_SERIALIZED, "512k", ucx); !s)
    return s;
  doorbell.wakeFd = ucx.wakeFd + 1;
  peers.resize(jc.nranks);
  const double beat = std::max(jc.options.livenessIntervalSeconds, 0.1);
  beatNs = int64_t(beat * 1e9);
  silenceNs = std::max<int64_t>(int64_t(2e9), 20 * beatNs);
  return Status::success();
}

UcxEngine::~UcxEngine() {
  if (thread.joinable()) {
    stopping.store(true, std::memory_order_release);
    wakeEventFd(ucx.wakeFd);
    thread.join();
  }
  if (ucx.worker) {
    // Hand UCX what the threadblocks published last, then cancel the
    // receives.
    step();
    if (control.request)
      ucp_request_cancel(ucx.worker, control.request);
    for (auto &l : links)
      if (!l->sending)
        for (uint32_t i = 0; i < l->fifo().depth; ++i)
          if (l->slots[i].request)
            ucp_request_cancel(ucx.worker, l->slots[i].request);
    // What we sent must reach the peers before the connections go; after
    // a failure (messages may wait for receives their peers cancelled)
    // the bound is short. Requests still in flight then keep their memory,
    // and the worker stays: leaked rather than freed under UCX.
    bool failed = jc.me().failed.load(std::memory_order_acquire);
    std::vector<ucp_ep_h> eps;
    for (auto &p : peers)
      if (p) {
        failed |= p->lost.load(std::memory_order_acquire);
        if (p->ep)
          eps.push_back(p->ep);
      }
    std::vector<void *> requests = {control.request};
    for (auto &l : links)
      for (uint32_t i = 0; i < l->fifo().depth; ++i)
        requests.push_back(l->slots[i].request);
    for (Outgoing &o : outgoing)
      requests.push_back(o.slot.request);
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(failed ? 300 : 5000);
    bool busy = !closeEndpoints(ucx, eps, requests, until);
    // Messages that came for nobody (the peers' last updates, after our
    // receive was cancelled): taken, so that UCX has nothing to complain of.
    for (int drained = 0; !busy && drained < 4096; ++drained) {
      ucp_tag_recv_info_t info{};
      ucp_tag_message_h msg = ucp_tag_probe_nb(ucx.worker, 0, 0, 1, &info);
      if (!msg)
        break;
      std::vector<char> sink(info.length ? info.length : 1);
      ucp_request_param_t rp{};
      void *r = ucp_tag_msg_recv_nbx(ucx.worker, sink.data(), info.length, msg, &rp);
      if (UCS_PTR_IS_PTR(r)) {
        while (pending(r) && std::chrono::steady_clock::now() < until)
          ucp_worker_progress(ucx.worker);
        if (pending(r)) {
          busy = true; // UCX still writes into sink: leave everything.
          parkForever(std::make_shared<std::vector<char>>(std::move(sink)));
          break;
        }
        ucp_request_free(r);
      }
    }
    if (!busy) {
      for (void *r : requests)
        if (r)
          ucp_request_free(r);
      links.clear();
      outgoing.clear();
    } else {
      // Never freed: UCX may still write there.
      for (auto &l : links)
        parkForever(l);
      parkForever(std::shared_ptr<ControlUpdate>(std::move(incoming)));
      for (Outgoing &o : outgoing)
        parkForever(std::shared_ptr<ControlUpdate>(std::move(o.update)));
    }
    releaseUcxWorker(ucx, busy);
  } else {
    releaseUcxWorker(ucx, false); // What a failed init() made.
  }
}

Status UcxEngine::connect(uint32_t q, const std::string &address, ControlBlock *mirror) {
  auto p = std::make_unique<Peer>();
  p->mirror = mirror;
  p->context.engine = this;
  p->context.rank = q;
  p->heardNs = nowNs();
  if (Status s = connectUcx(ucx.worker, address, endpointFailed, &p->context, p->ep); !s)
    return Status::error(cat("rank ", jc.rank, " cannot connect to rank ", q, ": ", s.message()));
  peers[q] = std::move(p);
  return Status::success();
}

void UcxEngine::start() {
  postControlReceive();
  thread = std::thread([this] { loop(); });
}

void UcxEngine::flush(double seconds) {
  const uint64_t ticket = flushAsked.fetch_add(1, std::memory_order_acq_rel) + 1;
  controlChanged();
  const int64_t until = nowNs() + int64_t(seconds * 1e9);
  while (thread.joinable() && flushDone.load(std::memory_order_acquire) < ticket && nowNs() < until)
    std::this_thread::sleep_for(std::chrono::microseconds(200));
}

bool UcxEngine::lost(uint32_t q, std::string *why) const {
  if (q >= peers.size() || !peers[q] || !peers[q]->lost.load(std::memory_order_acquire))
    return false;
  if (why) {
    std::lock_guard<std::mutex> lock(mutex);
    *why = peers[q]->why;
  }
  return true;
}

void UcxEngine::markLost(uint32_t q, const std::string &why) {
  if (q >= peers.size() || !peers[q])
    return;
  Peer &p = *peers[q];
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (p.lost.load(std::memory_order_relaxed))
      return;
    p.why = why;
  }
  p.lost.store(true, std::memory_order_release);
  jc.me().bell.ring();
}

void UcxEngine::linkFailed(const NetLink &l, int32_t status, uint64_t message) {
  const ucs_status_t s = ucs_status_t(status);
  if (s == UCS_ERR_CANCELED)
    return;
  std::string what =
      s == UCS_ERR_MESSAGE_TRUNCATED
          ? cat("message ", message, " from rank ", l.peer, " is longer than its slot (",
                l.storage.fifo.slotBytes, " bytes): the ranks run different plans")
          : cat("message ", message, l.sending ? " to" : " from", " rank ", l.peer,
                " failed: ", ucs_status_string(s));
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (failure.empty())
      failure = cat("rank ", jc.rank, ": ", what);
  }
  if (s != UCS_ERR_MESSAGE_TRUNCATED)
    markLost(l.peer, cat("its connection broke (", ucs_status_string(s), ")"));
  jc.me().bell.ring();
}

void UcxEngine::attach(const std::vector<std::shared_ptr<NetLink>> &add) {
  if (add.empty())
    return;
  {
    std::lock_guard<std::mutex> lock(mutex);
    toAttach.insert(toAttach.end(), add.begin(), add.end());
  }
  wakeEventFd(ucx.wakeFd);
}

void UcxEngine::detach(const std::vector<std::shared_ptr<NetLink>> &gone) {
  if (gone.empty())
    return;
  for (const auto &l : gone)
    l->detached.store(true, std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(mutex);
    toDetach.insert(toDetach.end(), gone.begin(), gone.end());
  }
  wakeEventFd(ucx.wakeFd);
}

void UcxEngine::postControlReceive() {
  control = Slot();
  ucp_request_param_t rp = withCallback(control, false);
  void *r = ucp_tag_recv_nbx(ucx.worker, incoming.get(), sizeof(ControlUpdate), controlTag,
                             controlTag, &rp);
  control.request = UCS_PTR_IS_PTR(r) ? r : nullptr;
}

bool UcxEngine::applyControl() {
  if (!control.request || !control.done)
    return false;
  ucp_request_free(control.request);
  control.request = nullptr;
  const ControlUpdate &u = *incoming;
  if (control.done == 1 && control.length >= updateHead && u.magic == updateMagic &&
      u.rank < peers.size() && peers[u.rank] && u.failureBytes <= sizeof u.failure &&
      control.length >= updateHead + u.failureBytes) {
    Peer &p = *peers[u.rank];
    p.heardNs = nowNs();
    ControlBlock &m = *p.mirror;
    m.heartbeatNs.store(p.heardNs, std::memory_order_relaxed);
    if (u.update > p.applied) {
      p.applied = u.update;
      // In the order the owner wrote them: the publication before callSeq,
      // the message before `failed`.
      // A slot the owner was writing (a call it has not published yet)
      // may come torn; it is whole in the update that publishes it.
      for (int i = 0; i < 2; ++i)
        if (u.calls[i].seq >= m.calls[i].seq)
          m.calls[i] = u.calls[i];
      if (u.callSeq > m.callSeq.load(std::memory_order_relaxed))
        m.callSeq.store(u.callSeq, std::memory_order_release);
      if (u.doneSeq > m.doneSeq.load(std::memory_order_relaxed))
        m.doneSeq.store(u.doneSeq, std::memory_order_release);
      if ((u.flags & failedFlag) && !m.failed.load(std::memory_order_relaxed)) {
        m.failureOrigin = u.failureOrigin;
        std::memset(m.failure, 0, sizeof m.failure);
        std::memcpy(m.failure, u.failure, std::min<size_t>(u.failureBytes, sizeof m.failure - 1));
        m.failed.store(1, std::memory_order_release);
      }
      if (u.flags & closedFlag)
        m.closed.store(1, std::memory_order_release);
      jc.me().bell.ring();
    }
  }
  postControlReceive();
  return true;
}

void UcxEngine::sendUpdates() {
  const ControlBlock &me = jc.me();
  ControlUpdate u;
  u.magic = updateMagic;
  u.rank = jc.rank;
  u.update = ++updates;
  // The owner's writes read in reverse order: callSeq before its
  // publication, `failed` before the message.
  u.callSeq = me.callSeq.load(std::memory_order_acquire);
  u.calls[0] = me.calls[0];
  u.calls[1] = me.calls[1];
  u.doneSeq = me.doneSeq.load(std::memory_order_acquire);
  if (me.failed.load(std::memory_order_acquire)) {
    u.flags |= failedFlag;
    u.failureOrigin = me.failureOrigin;
    u.failureBytes = uint32_t(strnlen(me.failure, sizeof me.failure));
    std::memcpy(u.failure, me.failure, u.failureBytes);
  }
  if (me.closed.load(std::memory_order_acquire))
    u.flags |= closedFlag;
  const size_t bytes = updateHead + u.failureBytes;
  for (uint32_t q = 0; q < peers.size(); ++q) {
    if (!peers[q] || peers[q]->lost.load(std::memory_order_relaxed))
      continue;
    outgoing.emplace_back();
    Outgoing &o = outgoing.back();
    o.update = std::make_unique<ControlUpdate>();
    std::memcpy(static_cast<void *>(o.update.get()), &u, bytes);
    ucp_request_param_t rp = withCallback(o.slot, true);
    void *r = ucp_tag_send_nbx(peers[q]->ep, o.update.get(), bytes, controlTag | jc.rank, &rp);
    if (UCS_PTR_IS_ERR(r)) {
      markLost(q, cat("its connection broke (", ucs_status_string(UCS_PTR_STATUS(r)), ")"));
      outgoing.pop_back();
    } else {
      o.slot.request = r;
    }
  }
}

bool UcxEngine::reapOutgoing() {
  bool any = false;
  // Completed updates leave from the front only: a deque keeps the others
  // where UCX knows them.
  while (!outgoing.empty() && (!outgoing.front().slot.request || outgoing.front().slot.done)) {
    if (outgoing.front().slot.request)
      ucp_request_free(outgoing.front().slot.request);
    outgoing.pop_front();
    any = true;
  }
  return any;
}

bool UcxEngine::serviceLink(NetLink &l) {
  Fifo &f = l.fifo();
  bool any = false;
  const bool detached = l.detached.load(std::memory_order_acquire);
  // A detached receiving end posts nothing more; a sending end still sends
  // what its threadblock published (the last messages of the last call),
  // unless its peer is lost. A receiving end keeps receiving from a lost
  // peer: what it sent before it went may still be on its way.
  if (l.sending ? !peers[l.peer]->lost.load(std::memory_order_relaxed) : !detached) {
    // Hand UCX what the threadblock published (sender), or a receive for
    // every free slot (receiver).
    const uint64_t limit = l.sending ? f.tail->load(std::memory_order_acquire)
                                     : f.head->load(std::memory_order_acquire) + f.depth;
    while (l.issued < limit) {
      const uint64_t m = l.issued;
      Slot &slot = l.slots[m % f.depth];
      slot = Slot();
      ucp_request_param_t rp = withCallback(slot, l.sending);
      const uint64_t tag = l.tagBase | (m & messageMask);
      void *r =
          l.sending
              ? ucp_tag_send_nbx(peers[l.peer]->ep, f.slot(m), l.lengths[m % f.depth], tag, &rp)
              : ucp_tag_recv_nbx(ucx.worker, f.slot(m), f.slotBytes, tag, ~uint64_t(0), &rp);
      if (UCS_PTR_IS_ERR(r)) {
        slot.status = UCS_PTR_STATUS(r);
        slot.done = 2;
      } else {
        slot.request = r;
      }
      ++l.issued;
      any = true;
    }
  }
  // Retire what completed, in order: free the sender's slot, or publish
  // the receiver's message.
  const uint64_t before = l.completed;
  while (l.completed < l.issued) {
    Slot &slot = l.slots[l.completed % f.depth];
    if (!slot.done)
      break;
    if (slot.done == 2 && !detached)
      linkFailed(l, slot.status, l.completed);
    if (slot.request)
      ucp_request_free(slot.request);
    slot = Slot();
    ++l.completed;
  }
  if (l.completed != before && !detached) {
    if (l.sending)
      f.head->store(l.completed, std::memory_order_release);
    else
      f.tail->store(l.completed, std::memory_order_release);
    jc.me().bell.ring();
    any = true;
  }
  return any;
}

bool UcxEngine::step(bool *moved) {
  bool busy = false;
  while (ucp_worker_progress(ucx.worker))
    busy = true;
  {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto &l : toAttach)
      links.push_back(std::move(l));
    toAttach.clear();
    for (auto &l : toDetach)
      if (!l->sending)
        for (uint32_t i = 0; i < l->fifo().depth; ++i)
          if (l->slots[i].request && !l->slots[i].done)
            ucp_request_cancel(ucx.worker, l->slots[i].request);
    toDetach.clear();
  }
  for (size_t i = 0; i < links.size();) {
    NetLink &l = *links[i];
    if (serviceLink(l)) {
      busy = true;
      if (moved)
        *moved = true;
    }
    // A detached link goes once UCX is done with its memory.
    if (l.detached.load(std::memory_order_acquire) && l.completed == l.issued) {
      links[i] = std::move(links.back());
      links.pop_back();
    } else {
      ++i;
    }
  }
  busy |= applyControl();
  busy |= reapOutgoing();
  const int64_t now = nowNs();
  const uint64_t asked = flushAsked.load(std::memory_order_acquire);
  if (dirty.exchange(false, std::memory_order_acq_rel) || now >= nextBeat) {
    sendUpdates();
    nextBeat = now + beatNs;
    busy = true;
  }
  // A flush is done once the updates sent after it was asked for are.
  if (asked > flushDone.load(std::memory_order_relaxed) && outgoing.empty())
    flushDone.store(asked, std::memory_order_release);
  for (uint32_t q = 0; q < peers.size(); ++q)
    if (peers[q] && !peers[q]->lost.load(std::memory_order_relaxed) &&
        now - peers[q]->heardNs > silenceNs)
      markLost(q, cat("it has been silent for ", formatSeconds(double(silenceNs) / 1e9),
                      " s (no update or heartbeat over the network)"));
  return busy;
}

bool UcxEngine::poll() {
  std::unique_lock<std::mutex> lock(ucxMutex, std::try_to_lock);
  bool moved = false;
  if (lock.owns_lock())
    step(&moved);
  return moved;
}

void UcxEngine::pollerEnter() {
  pollers.fetch_add(1, std::memory_order_acq_rel);
}

void UcxEngine::pollerLeave() {
  // The last poller to go hands the network back to the engine's thread.
  if (pollers.fetch_sub(1, std::memory_order_acq_rel) == 1)
    wakeEventFd(ucx.wakeFd);
}

void UcxEngine::loop() {
  for (;;) {
    bool busy;
    {
      std::lock_guard<std::mutex> lock(ucxMutex);
      busy = step();
    }
    if (stopping.load(std::memory_order_acquire))
      return;
    if (busy)
      continue;
    int waitMs = int(std::clamp<int64_t>((nextBeat - nowNs()) / 1'000'000 + 1, 1, 1000));
    uint64_t drained;
    if (pollers.load(std::memory_order_acquire) > 0) {
      // A run's workers drive the network (poll()): wake for the next beat,
      // or when told (the last of them leaves, an update to send). The
      // doorbell stays unregistered: a threadblock's publication costs no
      // wake-up here.
      pollfd p{ucx.wakeFd, POLLIN, 0};
      ::poll(&p, 1, waitMs);
      while (read(ucx.wakeFd, &drained, sizeof drained) > 0) {
      }
      continue;
    }
    // Sleep until the network, a threadblock of ours or the next beat
    // wakes us.
    const uint32_t seen = doorbell.seq.load(std::memory_order_seq_cst);
    doorbell.sleepers.store(1, std::memory_order_seq_cst);
    if (doorbell.seq.load(std::memory_order_seq_cst) == seen &&
        !dirty.load(std::memory_order_acquire) && pollers.load(std::memory_order_acquire) == 0) {
      ucs_status_t armed;
      {
        std::lock_guard<std::mutex> lock(ucxMutex);
        armed = ucp_worker_arm(ucx.worker);
      }
      if (armed == UCS_OK) {
        epoll_event ev[4];
        epoll_wait(ucx.epollFd, ev, 4, waitMs);
      }
    }
    doorbell.sleepers.store(0, std::memory_order_seq_cst);
    while (read(ucx.wakeFd, &drained, sizeof drained) > 0) {
    }
  }
}

} // namespace

Status openUcxWorker(ucs_thread_mode_t mode, const char *eagerUpTo, UcxWorker &out) {
  tuneUcx();
  ucp_params_t p{};
  p.field_mask = UCP_PARAM_FIELD_FEATURES;
  p.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  ucp_config_t *config = nullptr;
  if (ucs_status_t s = ucp_config_read(nullptr, nullptr, &config); s != UCS_OK)
    return Status::error(cat("UCX: cannot read its configuration: ", ucs_status_string(s)));
  // (The transport's settings come from the environment only: tuneUcx().)
  if (eagerUpTo && !std::getenv("UCX_RNDV_THRESH"))
    ucp_config_modify(config, "RNDV_THRESH", eagerUpTo);
  ucs_status_t s = ucp_init(&p, config, &out.context);
  ucp_config_release(config);
  if (s != UCS_OK)
    return Status::error(cat("UCX: cannot initialize: ", ucs_status_string(s)));
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = mode;
  if (s = ucp_worker_create(out.context, &wp, &out.worker); s != UCS_OK)
    return Status::error(cat("UCX: cannot create a worker: ", ucs_status_string(s)));
  ucp_address_t *addr = nullptr;
  size_t len = 0;
  if (s = ucp_worker_get_address(out.worker, &addr, &len); s != UCS_OK)
    return Status::error(cat("UCX: the worker has no address: ", ucs_status_string(s)));
  out.address.assign(reinterpret_cast<const char *>(addr), len);
  ucp_worker_release_address(out.worker, addr);
  int efd = -1;
  if (s = ucp_worker_get_efd(out.worker, &efd); s != UCS_OK)
    return Status::error(cat("UCX: the worker cannot wake a thread: ", ucs_status_string(s)));
  out.wakeFd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  out.epollFd = epoll_create1(EPOLL_CLOEXEC);
  if (out.wakeFd < 0 || out.epollFd < 0)
    return Status::error(cat("cannot create an eventfd or epoll set: ", std::strerror(errno)));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = efd;
  epoll_ctl(out.epollFd, EPOLL_CTL_ADD, efd, &ev);
  ev.data.fd = out.wakeFd;
  epoll_ctl(out.epollFd, EPOLL_CTL_ADD, out.wakeFd, &ev);
  return Status::success();
}

bool closeEndpoints(UcxWorker &w, const std::vector<ucp_ep_h> &eps,
                    const std::vector<void *> &requests,
                    std::chrono::steady_clock::time_point until) {
  std::vector<void *> closing;
  for (ucp_ep_h ep : eps) {
    ucp_request_param_t rp{};
    void *r = ucp_ep_close_nbx(ep, &rp);
    if (UCS_PTR_IS_PTR(r))
      closing.push_back(r);
  }
  auto pending = [](void *r) { return r && ucp_request_check_status(r) == UCS_INPROGRESS; };
  auto busy = [&] {
    return std::any_of(closing.begin(), closing.end(), pending) ||
           std::any_of(requests.begin(), requests.end(), pending);
  };
  while (busy() && std::chrono::steady_clock::now() < until)
    ucp_worker_progress(w.worker);
  if (busy())
    return false;
  for (void *r : closing)
    ucp_request_free(r);
  return true;
}

void releaseUcxWorker(UcxWorker &w, bool inUse) {
  if (inUse) {
    parkHandle(w.worker);
    parkHandle(w.context);
  } else {
    if (w.worker)
      ucp_worker_destroy(w.worker);
    if (w.context)
      ucp_cleanup(w.context);
  }
  w.worker = nullptr;
  w.context = nullptr;
  if (w.wakeFd >= 0)
    close(w.wakeFd);
  if (w.epollFd >= 0)
    close(w.epollFd);
  w.wakeFd = w.epollFd = -1;
}

void parkForever(std::shared_ptr<void> what) {
  static std::mutex mutex;
  static auto *parked = new std::vector<std::shared_ptr<void>>();
  std::lock_guard<std::mutex> lock(mutex);
  parked->push_back(std::move(what));
}

Status connectUcx(ucp_worker_h worker, const std::string &address, ucp_err_handler_cb_t onError,
                  void *arg, ucp_ep_h &ep) {
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address = reinterpret_cast<const ucp_address_t *>(address.data());
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = onError;
  params.err_handler.arg = arg;
  if (ucs_status_t s = ucp_ep_create(worker, &params, &ep); s != UCS_OK)
    return Status::error(cat("UCX: ", ucs_status_string(s)));
  return Status::success();
}

Result<std::unique_ptr<NetEngine>> NetEngine::create(JobControl &jc) {
  auto e = std::make_unique<UcxEngine>(jc);
  if (Status s = e->init(); !s)
    return s;
  return std::unique_ptr<NetEngine>(std::move(e));
}

#endif // COLL_HAVE_UCX

} // namespace detail
} // namespace coll
