//===- ProcessRendezvous.cpp - The ranks of a process call meet -----------===//
//
// A rank's descriptions of calls k and k+1 live in two slots of its control
// block: a rank cannot publish call k+2 before every rank published call
// k+1, which each does only after reading everybody's call k.
//
//===----------------------------------------------------------------------===//

#include "ProcessRendezvous.h"

#include "ExecCommon.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <string>
#include <thread>

namespace coll {
namespace detail {

namespace {

/// The bytes of a CallDescription before its plan name: what every call
/// compares. The name and the error message matter only when the calls
/// differ or one failed, and are 9 of its 10 cache lines.
constexpr size_t descriptionHead = offsetof(CallDescription, planName);

} // namespace

void publishCall(JobControl &jc, uint64_t seq, const CallDescription &description,
                 uint64_t reuses) {
  ControlBlock &me = jc.me();
  PublishedCall &mine = me.calls[seq % 2];
  mine.seq = seq;
  mine.reuses = reuses;
  // Only what changed: the peers read these lines at the end of each call,
  // and each line written is one more the peers miss.
  CallDescription &d = mine.description;
  std::memcpy(static_cast<void *>(&d), &description, descriptionHead);
  if (std::memcmp(d.planName, description.planName, sizeof d.planName) != 0)
    std::memcpy(d.planName, description.planName, sizeof d.planName);
  if (description.errorKind != 0)
    std::memcpy(d.error, description.error, sizeof d.error);
  // Release: a peer that sees callSeq >= seq sees the description and our
  // data segment's header.
  me.callSeq.store(seq, std::memory_order_release);
  jc.beat();
  jc.ringPeers();
}

bool sameCall(const CallDescription &a, const CallDescription &b) {
  return a.errorKind == 0 && b.errorKind == 0 && a.planChecksum == b.planChecksum &&
         a.count == b.count && a.sliceElements == b.sliceElements && a.type == b.type &&
         a.op == b.op && a.collective == b.collective && a.planRanks == b.planRanks &&
         a.protocol == b.protocol;
}

bool peerDisagrees(const JobControl &jc, uint64_t seq, const PublishedCall &ours) {
  for (uint32_t q = 0; q < jc.nranks; ++q) {
    if (q == jc.rank || jc.ctl[q]->callSeq.load(std::memory_order_acquire) < seq)
      continue;
    // Slot seq % 2 holds call seq until the peer publishes call seq + 2,
    // which it cannot before this rank has published call seq + 1.
    const PublishedCall &c = jc.ctl[q]->calls[seq % 2];
    if (c.seq == seq && (c.reuses != ours.reuses || !sameCall(c.description, ours.description)))
      return true;
  }
  return false;
}

CallFailure awaitCalls(JobControl &jc, uint64_t seq, std::vector<CallDescription> &calls,
                       bool &sameReuse) {
  const uint32_t n = jc.nranks;
  ControlBlock &me = jc.me();
  // Spin first when every rank has a CPU of its own: between calls of a
  // running job the peers then publish within microseconds, and a sleep
  // costs a system call on each side. Ranks that share CPUs sleep at once,
  // for spinning would hold up the peers they wait for.
  auto allPublished = [&] {
    for (uint32_t q = 0; q < n; ++q)
      if (q != jc.rank && jc.ctl[q]->callSeq.load(std::memory_order_acquire) < seq)
        return false;
    return true;
  };
  SpinBudget spin(jc.pinnedApart ? spinTime(1) : spinTime(n), !jc.pinnedApart);
  // Publications of remote peers come over the network: drive it while
  // spinning (the engine's thread takes over when we sleep).
  while (!allPublished() && spin.spinning())
    if (jc.net)
      jc.net->poll();
  // Ranks that share CPUs yield theirs to the peers for a while instead.
  if (const Clock::duration yield = jc.pinnedApart ? Clock::duration::zero() : yieldTime(n);
      yield != Clock::duration::zero()) {
    const Clock::time_point until = Clock::now() + yield;
    while (!allPublished() && Clock::now() < until) {
      std::this_thread::yield();
      if (jc.net)
        jc.net->poll();
    }
  }
  const Clock::time_point deadline = Clock::now() + seconds(jc.options.setupTimeoutSeconds);
  // The peers' liveness (a look at /proc for each) is checked after a
  // millisecond of waiting at the earliest, not on every call.
  Clock::time_point nextCheck =
      Clock::now() + std::min(seconds(jc.options.livenessIntervalSeconds),
                              Clock::duration(std::chrono::milliseconds(1)));
  for (;;) {
    uint32_t seen = me.bell.seq.load(std::memory_order_seq_cst);
    std::vector<uint32_t> missing;
    for (uint32_t q = 0; q < n; ++q)
      if (q != jc.rank && jc.ctl[q]->callSeq.load(std::memory_order_acquire) < seq)
        missing.push_back(q);
    if (missing.empty())
      break;
    Clock::time_point now = Clock::now();
    if (now >= nextCheck) {
      jc.beat();
      nextCheck = now + seconds(jc.options.livenessIntervalSeconds);
      for (uint32_t q : missing) {
        const ControlBlock &c = *jc.ctl[q];
        // The list is from before the pause: a rank that has called
        // since (and perhaps finished and left) is not missing.
        if (c.callSeq.load(std::memory_order_acquire) >= seq)
          continue;
        if (c.failed.load(std::memory_order_acquire))
          return {{ErrorKind::Remote,
                   cat("rank ", q,
                       " failed: ", std::string(c.failure, strnlen(c.failure, sizeof c.failure)))},
                  false};
        if (jc.peerGone(q)) {
          // A rank calls before it closes: read callSeq again after seeing
          // it gone, or one that called, finished and left in between
          // (a quick call: count 0) looks as if it never called.
          if (c.callSeq.load(std::memory_order_acquire) >= seq)
            continue;
          jc.cleanUpPeer(q);
          return {{ErrorKind::Remote,
                   cat("rank ", q, " (pid ", c.pid, ") ", c.closed.load() ? "left the job" : "died",
                       " before calling execute() for call ", seq)},
                  false};
        }
      }
    }
    if (now >= deadline) {
      std::string list;
      for (size_t i = 0; i < missing.size() && i < 8; ++i)
        list += cat(i ? ", " : "", missing[i]);
      if (missing.size() > 8)
        list += cat(" and ", missing.size() - 8, " more");
      // Published: a rank that calls later fails at once with this.
      return {{ErrorKind::Timeout,
               cat("rank ", jc.rank, ": timed out after ",
                   formatSeconds(jc.options.setupTimeoutSeconds), " s waiting for rank",
                   missing.size() > 1 ? "s " : " ", list, " to call execute() (call ", seq, ")")},
              true};
    }
    Clock::time_point until = std::min(nextCheck, deadline);
    int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(until - now).count();
    // The network is the engine's thread's while we sleep.
    if (jc.net)
      jc.net->pollerLeave();
    me.bell.sleepers.fetch_add(1, std::memory_order_seq_cst);
    if (me.bell.seq.load(std::memory_order_seq_cst) == seen)
      futexWait(&me.bell.seq, seen, std::max<int64_t>(ns, 1000));
    me.bell.sleepers.fetch_sub(1, std::memory_order_seq_cst);
    if (jc.net)
      jc.net->pollerEnter();
  }

  // A peer that published this call and failed since (a setup timeout, a
  // run error) has given up on it.
  if (CallError e = jc.failedPeer())
    return {e, true};

  // The heads first; the names and messages only where agree() will read
  // them (an error, or a difference).
  calls.resize(n);
  sameReuse = true;
  bool alike = true;
  const uint64_t ours = me.calls[seq % 2].reuses;
  for (uint32_t q = 0; q < n; ++q) {
    const PublishedCall &c = jc.ctl[q]->calls[seq % 2];
    sameReuse &= c.reuses == ours;
    if (c.seq != seq)
      return {{ErrorKind::Internal,
               cat("rank ", q, " published call ", c.seq, " where call ", seq, " was expected")},
              true};
    std::memcpy(static_cast<void *>(&calls[q]), &c.description, descriptionHead);
    alike &= calls[q].errorKind == 0 && std::memcmp(&calls[q], &calls[0], descriptionHead) == 0;
  }
  if (!alike)
    for (uint32_t q = 0; q < n; ++q)
      calls[q] = jc.ctl[q]->calls[seq % 2].description;
  return {};
}

} // namespace detail
} // namespace coll
