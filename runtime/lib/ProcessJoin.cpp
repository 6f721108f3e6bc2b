//===- ProcessJoin.cpp - A process rank joins its job ---------------------===//
//
// A job name may be reused at once (a job that ends and starts again), so a
// segment of the right name may belong to the previous instance, still
// alive for a moment. Rank 0's nonce names the instance: every other rank
// asks to join it (ControlBlock::member = the nonce) and rank 0 admits each
// asking segment with a compare-and-swap (member = the nonce | 1), one
// segment per rank. A rank has joined once it is admitted and has found
// every other rank's admitted segment (segments of any other instance never
// carry that mark); joinJob() returns once every rank has joined
// (ControlBlock::joined), so that no rank leaves while a peer still looks
// for its segment.
//
//===----------------------------------------------------------------------===//

#include "ProcessJoin.h"

#include "ExecCommon.h"
#include "NetEngine.h"

#include <algorithm>
#include <chrono>
#include <new>
#include <sched.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace coll {
namespace detail {

namespace {

/// The one CPU this process may run on, or -1 (none, or several).
int32_t onlyCpu() {
#ifdef __linux__
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) == 1)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set))
        return c;
#endif
  return -1;
}

} // namespace

/// Unlinks the data segments of \p jc's rank that an earlier job of its
/// name left.
static void removeStaleDataSegments(const JobControl &jc) {
#ifdef __linux__
  const std::string prefix = cat("coll-", jc.job, ".", jc.rank, ".");
  for (const std::string &n : ProcessGroup::listJobSegments(jc.job))
    if (n.compare(0, prefix.size(), prefix) == 0)
      unlinkSegment("/" + n);
#else
  (void)jc;
#endif
}

/// Claims the control segment of \p jc's rank (replacing a stale one of
/// its name) and writes its block, ready.
static CallError claimControl(JobControl &jc, Clock::time_point deadline) {
  const int rank = int(jc.rank);
  const std::string &jobName = jc.job;
  auto fail = [](ErrorKind kind, std::string msg) { return CallError{kind, std::move(msg)}; };
  const std::string ownName = controlName(jobName, jc.rank);

  // Our own segment. A segment of our name is stale when its owner is dead
  // (or closed it); one with a live owner means the rank is taken. One
  // without a header yet is being created: stale only when that has taken
  // a second. The stale one is judged again and unlinked under its lock
  // (ShmOps::unlinkIfStale), as every other judge of it does: a peer that
  // judged the old segment never unlinks the new one.
  auto staleControl = [](const ShmMapping &m, const struct stat &sb) {
    const ControlBlock *p = reinterpret_cast<const ControlBlock *>(m.data());
    if (m.size() >= controlPrefixBytes && p->magic == controlMagic && otherVersion(p->version))
      return false; // Not ours to judge.
    if (m.size() >= sizeof(ControlBlock)) {
      const ControlBlock &c = *p;
      if (c.magic == controlMagic && c.ready.load(std::memory_order_acquire))
        return c.closed.load(std::memory_order_acquire) ||
               (!otherPidNamespace(c.pidNamespace) && !processAlive(c.pid, c.startTime));
    }
    return segmentAgeNs(sb) > 1'000'000'000;
  };
  for (;;) {
    ShmOpenResult r;
    if (Status s = ShmOps::create(ownName, sizeof(ControlBlock), jc.own, r); !s)
      return fail(ErrorKind::SystemError, s.message());
    if (r == ShmOpenResult::Mapped)
      break;
    // Magic and version first (another layout may be smaller), then
    // liveness.
    ShmMapping old;
    if (Status s = ShmOps::open(ownName, controlPrefixBytes, old, r); !s)
      return fail(ErrorKind::SystemError, s.message());
    if (r == ShmOpenResult::Mapped) {
      const ControlBlock &c = *reinterpret_cast<const ControlBlock *>(old.data());
      if (c.magic == controlMagic && otherVersion(c.version))
        return fail(ErrorKind::Mismatch, otherLayout(ownName, c.version));
      if (old.size() >= sizeof(ControlBlock) && c.magic == controlMagic &&
          c.ready.load(std::memory_order_acquire) && !c.closed.load(std::memory_order_acquire) &&
          (otherPidNamespace(c.pidNamespace) || processAlive(c.pid, c.startTime)))
        return fail(ErrorKind::InvalidArgument,
                    cat("rank ", rank, " of job '", jobName, "' is taken by process ", c.pid,
                        otherPidNamespace(c.pidNamespace) ? " of another pid namespace" : "",
                        " (shared memory ", ownName, ")"));
    }
    old.reset();
    if (!ShmOps::unlinkIfStale(ownName, staleControl))
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (Clock::now() > deadline)
      return fail(ErrorKind::Timeout, cat("cannot claim rank ", rank, " of job '", jobName,
                                          "': shared memory ", ownName, " stays in the way"));
  }
  ControlBlock *me = new (jc.own.data()) ControlBlock();
  jc.ctl[jc.rank] = me;
  me->magic = controlMagic;
  me->version = controlVersion;
  me->bytes = uint32_t(sizeof(ControlBlock));
  me->nranks = jc.nranks;
  me->rank = jc.rank;
  me->pid = getpid();
  me->startTime = processStartTime(me->pid);
  me->nonce = makeNonce();
  me->pidNamespace = pidNamespaceId();
  me->cpu = onlyCpu();
  jc.probeWord = ~me->nonce;
  me->probeAddress = uint64_t(uintptr_t(&jc.probeWord));
  if (jc.rank == 0)
    me->member.store(me->nonce | 1, std::memory_order_relaxed);
  me->heartbeatNs.store(nowNs(), std::memory_order_relaxed);
  // Release: peers that see `ready` see every field above.
  me->ready.store(1, std::memory_order_release);
  return {};
}

CallError joinJob(JobControl &jc) {
  const int rank = int(jc.rank), nranks = int(jc.nranks);
  const std::string &jobName = jc.job;
  const ProcessGroupOptions &options = jc.options;
  auto fail = [](ErrorKind kind, std::string msg) { return CallError{kind, std::move(msg)}; };
  const Clock::time_point deadline = Clock::now() + seconds(options.setupTimeoutSeconds);
  const std::string ownName = controlName(jobName, jc.rank);
  if (CallError e = claimControl(jc, deadline))
    return e;
  ControlBlock *me = jc.ctl[jc.rank];

  // Join the instance of the job that rank 0 names (see the file comment).
  uint32_t sleepUs = 50;
  // Sleeps a little; fails when our name no longer names our segment (a
  // process of another job, or a cleanup tool, removed it): no peer could
  // find us any more.
  auto pause = [&]() -> CallError {
    jc.beat();
    std::this_thread::sleep_for(std::chrono::microseconds(sleepUs));
    sleepUs = std::min<uint32_t>(sleepUs * 2, 10000);
    if (!segmentIs(ownName, jc.own.device(), jc.own.inode()))
      return {ErrorKind::SystemError,
              cat("rank ", rank, " of job '", jobName, "': its shared memory ", ownName,
                  " was removed by another process while the job was being set up")};
    return {};
  };
  // Maps rank q's segment when it is there and ready (else c is null);
  // `gone` when its owner closed it or died. A live segment of another
  // layout or shape is a mismatch.
  auto openPeer = [&](uint32_t q, ControlBlock *&c, bool &gone) -> CallError {
    c = nullptr;
    gone = false;
    ShmOpenResult r;
    if (Status s = ShmOps::open(controlName(jobName, q), controlPrefixBytes, jc.peers[q], r); !s)
      return {ErrorKind::SystemError, s.message()};
    if (r != ShmOpenResult::Mapped)
      return {};
    ControlBlock *b = reinterpret_cast<ControlBlock *>(jc.peers[q].data());
    // The version first: another layout may be smaller than ours.
    if (b->magic == controlMagic && otherVersion(b->version))
      return {ErrorKind::Mismatch,
              cat("rank ", q, " of job '", jobName, "' uses shared-memory layout version ",
                  b->version, ", rank ", rank, " version ", controlVersion)};
    if (jc.peers[q].size() < sizeof(ControlBlock) || b->magic != controlMagic ||
        !b->ready.load(std::memory_order_acquire)) {
      jc.peers[q].reset();
      return {};
    }
    // Pids (liveness, cleanup) mean nothing across pid namespaces: a job
    // must run in one.
    if (otherPidNamespace(b->pidNamespace) && !b->closed.load(std::memory_order_acquire)) {
      // Ask rank 0 to join all the same: it learns at once that we left.
      if (q == 0)
        me->member.store(b->nonce, std::memory_order_release);
      return {ErrorKind::InvalidArgument,
              cat("rank ", q, " of job '", jobName, "' (process ", b->pid,
                  ") runs in another pid namespace than rank ", rank,
                  ": the ranks of a job must share one pid namespace (in containers: "
                  "docker run --pid=host, or one container)")};
    }
    gone = b->closed.load(std::memory_order_acquire) || !processAlive(b->pid, b->startTime);
    if (!gone && (b->nranks != jc.nranks || b->rank != q))
      return {ErrorKind::Mismatch,
              cat("rank ", q, " of job '", jobName, "' joined as rank ", b->rank, " of ", b->nranks,
                  " ranks, rank ", rank, " as rank ", rank, " of ", nranks)};
    c = b;
    return {};
  };
  auto notJoined = [&](uint32_t q, int64_t stalePid, const std::string &note) {
    return fail(
        ErrorKind::Timeout,
        cat("rank ", q, " of job '", jobName, "' did not join within ",
            formatSeconds(options.setupTimeoutSeconds), " s (rank ", rank,
            " waited for shared memory ", controlName(jobName, q),
            stalePid ? cat("; a segment of dead process ", stalePid, " is there") : std::string(),
            note, ")"));
  };

  if (jc.rank == 0) {
    // Admit one live segment per rank that asks to join our instance. One
    // that asks for another instance is a previous job's, about to go.
    const uint64_t instance = me->nonce;
    for (uint32_t q = 1; q < jc.nranks; ++q) {
      int64_t stalePid = 0;
      bool foreign = false;
      for (;;) {
        ControlBlock *c = nullptr;
        bool gone = false;
        if (CallError f = openPeer(q, c, gone))
          return f;
        if (c && gone && c->member.load(std::memory_order_acquire) == instance) {
          // It asked to join us, then died or left: it will not come back.
          // (Ours to clean up when it died, as the group goes.)
          jc.ctl[q] = c;
          return fail(ErrorKind::Remote,
                      cat("rank ", q, " (pid ", c->pid,
                          otherPidNamespace(c->pidNamespace) ? " of another pid namespace" : "",
                          ") of job '", jobName, "' ", c->closed.load() ? "left" : "died",
                          " while joining"));
        } else if (c && gone) {
          stalePid = c->pid; // Left by an earlier job: its owner will replace it.
        } else if (c) {
          uint64_t asked = instance;
          if (c->member.compare_exchange_strong(asked, instance | 1, std::memory_order_acq_rel)) {
            jc.ctl[q] = c;
            break;
          }
          foreign = asked != 0;
        }
        jc.peers[q].reset();
        if (Clock::now() > deadline)
          return notJoined(q, stalePid,
                           foreign ? "; the segment there belongs to another instance of the job"
                                   : "");
        if (CallError f = pause())
          return f;
      }
    }
  } else {
    // Rank 0 first: ask to join its instance until it admits us. When the
    // rank 0 we asked goes (a previous instance ending), ask the next.
    const std::string zeroName = controlName(jobName, 0);
    ControlBlock *zero = nullptr;
    int64_t stalePid = 0;
    for (;;) {
      if (!zero) {
        bool gone = false;
        if (CallError f = openPeer(0, zero, gone))
          return f;
        if (zero && gone) {
          stalePid = zero->pid;
          zero = nullptr;
          jc.peers[0].reset();
        }
        if (zero)
          me->member.store(zero->nonce, std::memory_order_release);
      }
      if (zero) {
        if (me->member.load(std::memory_order_acquire) == (zero->nonce | 1))
          break;
        if (zero->closed.load(std::memory_order_acquire) ||
            !processAlive(zero->pid, zero->startTime) ||
            !segmentIs(zeroName, jc.peers[0].device(), jc.peers[0].inode())) {
          uint64_t asked = zero->nonce;
          if (!me->member.compare_exchange_strong(asked, 0, std::memory_order_acq_rel))
            continue; // Admitted meanwhile.
          zero = nullptr;
          jc.peers[0].reset();
        }
      }
      if (Clock::now() > deadline)
        return zero ? fail(ErrorKind::Timeout,
                           cat("rank 0 of job '", jobName, "' did not admit rank ", rank,
                               " within ", formatSeconds(options.setupTimeoutSeconds),
                               " s (rank 0 is process ", zero->pid, ")"))
                    : notJoined(0, stalePid, "");
      if (CallError f = pause())
        return f;
    }
    jc.ctl[0] = zero;
    // Then every other rank: the segment of its name that rank 0 admitted.
    const uint64_t admitted = zero->nonce | 1;
    for (uint32_t q = 1; q < jc.nranks; ++q) {
      if (q == jc.rank)
        continue;
      stalePid = 0;
      for (;;) {
        ControlBlock *c = nullptr;
        bool gone = false;
        if (CallError f = openPeer(q, c, gone))
          return f;
        if (c && c->member.load(std::memory_order_acquire) == admitted) {
          jc.ctl[q] = c; // Even when gone: execute() reports it.
          break;
        }
        if (c && gone && c->member.load(std::memory_order_acquire) == zero->nonce) {
          jc.ctl[q] = c;
          return fail(ErrorKind::Remote,
                      cat("rank ", q, " (pid ", c->pid, ") of job '", jobName, "' ",
                          c->closed.load() ? "left" : "died", " while joining"));
        }
        if (c && gone)
          stalePid = c->pid;
        jc.peers[q].reset();
        if (zero->closed.load(std::memory_order_acquire) ||
            !processAlive(zero->pid, zero->startTime))
          return fail(ErrorKind::Remote,
                      cat("rank 0 (pid ", zero->pid, ") of job '", jobName, "' ",
                          zero->closed.load() ? "left the job" : "died", " while rank ", rank,
                          " waited for rank ", q, " to join"));
        if (Clock::now() > deadline)
          return notJoined(q, stalePid, "");
        if (CallError f = pause())
          return f;
      }
    }
  }

  // Wait until every rank has joined: then each has mapped every segment,
  // and a rank may leave at once without stranding a peer that is still
  // looking for its segment.
  sleepUs = 50;
  me->joined.store(1, std::memory_order_release);
  for (uint32_t q = 0; q < jc.nranks; ++q) {
    const ControlBlock &c = *jc.ctl[q];
    while (!c.joined.load(std::memory_order_acquire)) {
      if (c.closed.load(std::memory_order_acquire) || !processAlive(c.pid, c.startTime)) {
        if (c.joined.load(std::memory_order_acquire))
          break;
        return fail(ErrorKind::Remote, cat("rank ", q, " (pid ", c.pid, ") of job '", jobName, "' ",
                                           c.closed.load() ? "left the job" : "died",
                                           " before every rank had joined"));
      }
      if (Clock::now() > deadline)
        return fail(ErrorKind::Timeout,
                    cat("rank ", q, " of job '", jobName, "' did not finish joining within ",
                        formatSeconds(options.setupTimeoutSeconds), " s"));
      if (CallError f = pause())
        return f;
    }
  }

  std::vector<int32_t> cpus;
  for (uint32_t q = 0; q < jc.nranks; ++q)
    cpus.push_back(jc.ctl[q]->cpu);
  std::sort(cpus.begin(), cpus.end());
  jc.pinnedApart = cpus.front() >= 0 && std::adjacent_find(cpus.begin(), cpus.end()) == cpus.end();

  removeStaleDataSegments(jc);
  return {};
}

namespace {

/// What a rank of a job that spans hosts publishes in the store.
struct StoreRecord {
  std::string host;    ///< hostIdentity().
  std::string address; ///< Its NetEngine's, or empty.
  uint64_t nonce = 0;
  int64_t pid = 0;
  uint32_t nranks = 0;
};

/// Fields separated by '\n', the address (binary) last.
std::string encode(const StoreRecord &r) {
  return cat("coll-join-1\n", r.nranks, "\n", r.nonce, "\n", r.pid, "\n", r.host.size(), "\n",
             r.host, r.address.size(), "\n", r.address);
}

bool decode(const std::string &text, StoreRecord &r) {
  size_t at = 0;
  auto field = [&](std::string &out) {
    size_t nl = text.find('\n', at);
    if (nl == std::string::npos)
      return false;
    out = text.substr(at, nl - at);
    at = nl + 1;
    return true;
  };
  auto number = [&](uint64_t &out) {
    std::string f;
    if (!field(f) || f.empty() || f.size() > 20)
      return false;
    char *end = nullptr;
    out = std::strtoull(f.c_str(), &end, 10);
    return end && *end == 0;
  };
  auto bytes = [&](std::string &out) {
    uint64_t n = 0;
    if (!number(n) || n > text.size() - at)
      return false;
    out = text.substr(at, size_t(n));
    at += size_t(n);
    return true;
  };
  std::string magic;
  uint64_t nranks = 0, nonce = 0, pid = 0;
  if (!field(magic) || magic != "coll-join-1" || !number(nranks) || !number(nonce) ||
      !number(pid) || !bytes(r.host) || !bytes(r.address) || at != text.size())
    return false;
  r.nranks = uint32_t(nranks);
  r.nonce = nonce;
  r.pid = int64_t(pid);
  return nranks <= PlanLimits::maxRanks;
}

} // namespace

CallError joinJobThroughStore(JobControl &jc, KeyValueStore &store) {
  const uint32_t rank = jc.rank, nranks = jc.nranks;
  const std::string &jobName = jc.job;
  auto fail = [](ErrorKind kind, std::string msg) { return CallError{kind, std::move(msg)}; };
  const Clock::time_point deadline = Clock::now() + seconds(jc.options.setupTimeoutSeconds);
  if (CallError e = claimControl(jc, deadline))
    return e;
  ControlBlock *me = jc.ctl[rank];
  const std::string prefix = cat("coll/", jobName, "/");

  // Our network side, when this build has one: whether a peer is on
  // another host is known only once every rank has published.
  StoreRecord mine;
  mine.host = hostIdentity();
  mine.nonce = me->nonce;
  mine.pid = me->pid;
  mine.nranks = nranks;
  std::string noNet;
  if (netAvailable() && nranks > 1) {
    Result<std::unique_ptr<NetEngine>> e = NetEngine::create(jc);
    if (e) {
      jc.net = std::move(*e);
      mine.address = jc.net->address();
    } else {
      noNet = e.message();
    }
  } else {
    Result<std::unique_ptr<NetEngine>> e = NetEngine::create(jc);
    noNet = e ? std::string() : e.message();
  }
  if (Status s = store.set(cat(prefix, "rank/", rank), encode(mine)); !s)
    return fail(ErrorKind::SystemError,
                cat("rank ", rank, " of job '", jobName, "': the store: ", s.message()));
  std::vector<StoreRecord> records(nranks);
  records[rank] = mine;
  for (uint32_t q = 0; q < nranks; ++q) {
    if (q == rank)
      continue;
    Result<std::string> v = store.get(cat(prefix, "rank/", q));
    if (!v)
      return fail(ErrorKind::Timeout,
                  cat("rank ", q, " of job '", jobName, "' did not join (rank ", rank,
                      " waited for it in the "
                      "store: ",
                      v.message(), ")"));
    if (!decode(*v, records[q]))
      return fail(ErrorKind::Mismatch, cat("rank ", q, " of job '", jobName,
                                           "' published something else than a Collc rank in the "
                                           "store (another version, or another program)"));
    if (records[q].nranks != nranks)
      return fail(ErrorKind::Mismatch,
                  cat("rank ", q, " of job '", jobName, "' joined a job of ", records[q].nranks,
                      " ranks, rank ", rank, " one of ", nranks));
  }

  // Peers on our host: their control segments, which must be the ones
  // they published. Peers elsewhere: a mirror each, and a connection.
  jc.remote.assign(nranks, 0);
  jc.mirrors.resize(nranks);
  bool anyRemote = false;
  for (uint32_t q = 0; q < nranks; ++q)
    if (q != rank && records[q].host != mine.host) {
      jc.remote[q] = 1;
      anyRemote = true;
    }
  if (anyRemote && !jc.net)
    for (uint32_t q = 0; q < nranks; ++q)
      if (jc.remote[q])
        return fail(ErrorKind::SystemError,
                    cat("rank ", q, " of job '", jobName, "' is on another host than rank ", rank,
                        " (", records[q].host, ", not ", mine.host, "), and rank ", rank,
                        " cannot reach it: ", noNet));
  for (uint32_t q = 0; q < nranks; ++q) {
    if (q == rank)
      continue;
    if (jc.remote[q]) {
      if (records[q].address.empty())
        return fail(ErrorKind::SystemError,
                    cat("rank ", q, " of job '", jobName, "' is on another host than rank ", rank,
                        " and has no network transport (it was built without UCX, or UCX "
                        "failed there)"));
      auto m = std::make_unique<ControlBlock>();
      m->magic = controlMagic;
      m->version = controlVersion;
      m->nranks = nranks;
      m->rank = q;
      m->pid = records[q].pid;
      m->nonce = records[q].nonce;
      m->heartbeatNs.store(nowNs(), std::memory_order_relaxed);
      m->member.store(records[0].nonce | 1, std::memory_order_relaxed);
      m->joined.store(1, std::memory_order_relaxed);
      m->ready.store(1, std::memory_order_release);
      if (Status s = jc.net->connect(q, records[q].address, m.get()); !s)
        return fail(ErrorKind::SystemError, s.message());
      jc.ctl[q] = m.get();
      jc.mirrors[q] = std::move(m);
      continue;
    }
    const std::string name = controlName(jobName, q);
    uint32_t sleepUs = 50;
    for (;;) {
      ShmOpenResult r;
      if (Status s = ShmOps::open(name, controlPrefixBytes, jc.peers[q], r); !s)
        return fail(ErrorKind::SystemError, s.message());
      if (r == ShmOpenResult::Mapped) {
        ControlBlock *b = reinterpret_cast<ControlBlock *>(jc.peers[q].data());
        if (b->magic == controlMagic && otherVersion(b->version))
          return fail(ErrorKind::Mismatch, otherLayout(name, b->version));
        if (jc.peers[q].size() >= sizeof(ControlBlock) && b->magic == controlMagic &&
            b->ready.load(std::memory_order_acquire) && b->nonce == records[q].nonce) {
          if (b->nranks != nranks || b->rank != q)
            return fail(ErrorKind::Mismatch,
                        cat("rank ", q, " of job '", jobName, "' has a control segment of rank ",
                            b->rank, " of ", b->nranks));
          jc.ctl[q] = b;
          break;
        }
      }
      jc.peers[q].reset();
      if (!processAlive(records[q].pid, 0))
        return fail(ErrorKind::Remote, cat("rank ", q, " (pid ", records[q].pid, ") of job '",
                                           jobName, "' died while joining"));
      if (Clock::now() > deadline)
        return fail(ErrorKind::Timeout,
                    cat("rank ", q, " of job '", jobName, "' published itself in the store but ",
                        "rank ", rank, " did not find its shared memory ", name, " within ",
                        formatSeconds(jc.options.setupTimeoutSeconds),
                        " s (ranks of one host must share /dev/shm; COLL_HOST tells hosts apart)"));
      jc.beat();
      std::this_thread::sleep_for(std::chrono::microseconds(sleepUs));
      sleepUs = std::min<uint32_t>(sleepUs * 2, 10000);
    }
  }
  if (anyRemote)
    jc.net->start();
  else
    jc.net.reset();

  // Every rank has found every other: then none leaves while a peer still
  // looks for it.
  if (Status s = store.set(cat(prefix, "joined/", rank), "1"); !s)
    return fail(ErrorKind::SystemError,
                cat("rank ", rank, " of job '", jobName, "': the store: ", s.message()));
  for (uint32_t q = 0; q < nranks; ++q)
    if (q != rank)
      if (Result<std::string> v = store.get(cat(prefix, "joined/", q)); !v)
        return fail(ErrorKind::Timeout, cat("rank ", q, " of job '", jobName,
                                            "' did not finish joining (", v.message(), ")"));
  me->member.store(records[0].nonce | 1, std::memory_order_release);
  me->joined.store(1, std::memory_order_release);
  jc.pinnedApart = false;
  removeStaleDataSegments(jc);
  return {};
}

} // namespace detail
} // namespace coll
