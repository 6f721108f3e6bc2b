//===- ProcessGroup.cpp - One rank per process over POSIX shared memory ---===//
//
// Segments of job J (every name starts with "/coll-J."):
//  - "/coll-J.<rank>", the rank's control block (ProcessControl.h): who
//    owns it (pid, the pid's start time, a nonce), which instance of the job
//    it belongs to, whether it is ready, failed or closed, its heartbeat,
//    its doorbell, and its last two calls' descriptions, for the other
//    ranks to check;
//  - "/coll-J.<rank>.<call>", the rank's data for one call and the later
//    calls of the same description (ProcessData.h): its threadblocks'
//    progress counters and the FIFOs of the connections it receives on,
//    found by its senders through a table.
//
// Joining (ProcessJoin.h): every rank claims its control segment and joins
// the instance of the job that rank 0 names.
//
// A call: every rank prepares it (PreparedCall.h), creates its data
// segment, publishes the call's description and waits until every peer
// has published the same call (ProcessRendezvous.h). All ranks then hold
// the same N descriptions and reach the same verdict (agree()): an argument
// error or a mismatch fails the call everywhere (the group stays usable),
// anything else runs. Senders map their receivers' data segments; each
// rank's threadblocks run on its workers (ProcessRun.h) until done. A data
// segment's name goes as soon as its last sender has mapped it (at once
// when it has none), and in any case when its owner's call ends: a job
// killed as a whole in the middle of a run leaves no call data behind.
//
// A call with the same description as one of the last successful ones
// that made a data segment (same plan, count, slices, type and operator)
// runs on that call's data side again (CachedCall): no segment to create or
// map, no scratch to allocate, no runs to build. A rank keeps the data
// sides of up to ProcessGroupOptions::keptCalls descriptions, the most
// recently used (a job that alternates sizes or collectives, as a training
// step's buckets do, reuses them all). Each rank says in its publication
// which call's segments it reuses; since every rank sees the same
// successful calls and keeps and drops data sides by the same rule, all
// reuse or none. Such a call runs as soon as it is
// published, and checks the peers' publications after its run (usually all
// there by then): a rendezvous at the end instead of the start, which
// keeps a rank from running more than one call ahead of any peer (the two
// publication slots suffice). A peer that called differently never sends
// into the kept FIFOs; a rank waiting for it sees its publication and
// stops, and every rank reports the same mismatch and drops its kept data
// side.
// Control segments stay named while their group lives (a process that
// claims a live rank must find it taken); the next job to start on the
// host (its rank 0) removes those whose owners have been dead for a while
// (removeDeadSegments).
//
//===----------------------------------------------------------------------===//

#include "coll/Runtime/ProcessGroup.h"

#include "DirectSends.h"
#include "ExecCommon.h"
#include "OutOfPlace.h"
#include "ProcessControl.h"
#include "ProcessData.h"
#include "ProcessJoin.h"
#include "ProcessRendezvous.h"
#include "ProcessRun.h"
#include "ShmSegment.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <utility>

namespace coll {

using namespace detail;

/// The data side of a successful call, kept for the next calls of the same
/// description: its data segment, the peers' segments mapped and the FIFOs
/// found in them, its scratch and its threadblocks' runs. Every rank keeps
/// the one of the same call (the last successful one that did not reuse;
/// a failed call drops it everywhere), so all reuse, or none. The FIFOs'
/// counters go on from call to call, so a peer may send the next call's
/// messages while this rank still takes the last call's.
struct CachedCall {
  explicit CachedCall(std::string name) : own(std::move(name)) {}
  /// Whether a call of \p d can run on this one's data side: the same
  /// plan, count, slices, type and operator (so the same layout and
  /// kernels); buffers and placement may differ.
  bool serves(const CallDescription &d) const { return sameCall(d, description); }

  OwnDataSegment own;
  CallFifos fifos;
  std::vector<char> scratch;
  CallDescription description;
  uint64_t madeBy = 0; ///< The call that made it.
  ChunkLayout layout;
  HostKernels kernels;
  RankRun run;
  /// The rank's program for out-of-place calls of an in-place plan
  /// (OutOfPlace.h); empty when it has none.
  OutOfPlaceProgram outOfPlace;
  /// The rank's direct sends (DirectSends.h) on its own program and on
  /// outOfPlace; used on the connections whose receivers read us.
  RankDirectSends direct;
};

struct ProcessGroup::State {
  JobControl control;
  uint64_t seq = 0; ///< Calls made.
  CallError broken; ///< A run failed: the group is unusable.
  /// Guards allocations and allocationsMade: allocate() and deallocate()
  /// may run on one thread while execute() runs on another.
  std::mutex allocationsMutex;
  /// Memory from allocate(): its mapping, and its entry in our control
  /// block's table of allocations the peers may map (-1: none was free).
  struct Allocation {
    ShmMapping map;
    int slot = -1;
  };
  /// Withdraws \p a from the peers (before its memory goes).
  void withdraw(const Allocation &a) {
    if (a.slot >= 0)
      control.me().allocations[a.slot].id.store(0, std::memory_order_release);
  }
  std::map<char *, Allocation> allocations;
  uint64_t allocationsMade = 0;
  std::atomic<bool> inCall{false}; ///< An execute() runs.
  const char *phase = "";          ///< What the running execute() does, for errors.
  /// The memory of this rank's private input copies (ExecCommon.h).
  KeptCopy copy;
  /// The data sides kept for reuse, the most recently used first
  /// (destroyed before `control`).
  std::vector<std::unique_ptr<CachedCall>> cached;
};

ProcessGroup::ProcessGroup() : state(std::make_unique<State>()) {}

int ProcessGroup::rank() const {
  return int(state->control.rank);
}

int ProcessGroup::size() const {
  return int(state->control.nranks);
}

const std::string &ProcessGroup::jobName() const {
  return state->control.job;
}

Result<std::unique_ptr<ProcessGroup>> ProcessGroup::create(const std::string &jobName, int rank,
                                                           int nranks,
                                                           const ProcessGroupOptions &options,
                                                           ErrorKind *errorKind) {
  return createGroup(jobName, rank, nranks, nullptr, options, errorKind);
}

Result<std::unique_ptr<ProcessGroup>> ProcessGroup::create(const std::string &jobName, int rank,
                                                           int nranks, KeyValueStore &store,
                                                           const ProcessGroupOptions &options,
                                                           ErrorKind *errorKind) {
  return createGroup(jobName, rank, nranks, &store, options, errorKind);
}

bool ProcessGroup::isRemote(int q) const {
  return q >= 0 && state->control.isRemote(uint32_t(q));
}

bool ProcessGroup::networkAvailable() {
  return netAvailable();
}

std::string ProcessGroup::hostIdentity() {
  return detail::hostIdentity();
}

Result<std::unique_ptr<ProcessGroup>>
ProcessGroup::createGroup(const std::string &jobName, int rank, int nranks, KeyValueStore *store,
                          const ProcessGroupOptions &options, ErrorKind *errorKind) {
  auto fail = [&](ErrorKind kind, std::string msg) -> Result<std::unique_ptr<ProcessGroup>> {
    if (errorKind)
      *errorKind = kind;
    return Status::error(std::move(msg));
  };
  if (errorKind)
    *errorKind = ErrorKind::None;
  if (!validJobName(jobName))
    return fail(ErrorKind::InvalidArgument,
                cat("invalid job name '", jobName, "': 1 to ", maxJobName,
                    " characters of A-Z, a-z, 0-9, '_' and '-'"));
  if (nranks < 1 || uint64_t(nranks) > PlanLimits::maxRanks)
    return fail(ErrorKind::InvalidArgument, cat("the number of ranks must be in [1, ",
                                                PlanLimits::maxRanks, "], not ", nranks));
  if (rank < 0 || rank >= nranks)
    return fail(ErrorKind::InvalidArgument,
                cat("rank ", rank, " is out of range: the job has ", nranks, " ranks"));
  auto badSeconds = [](double s) { return !(s > 0) || s > 1e9; };
  if (badSeconds(options.setupTimeoutSeconds) || badSeconds(options.timeoutSeconds) ||
      badSeconds(options.livenessIntervalSeconds))
    return fail(ErrorKind::InvalidArgument,
                cat("the setup timeout, timeout and liveness interval must be in (0, 1e9] "
                    "seconds, not ",
                    formatSeconds(options.setupTimeoutSeconds), ", ",
                    formatSeconds(options.timeoutSeconds), ", ",
                    formatSeconds(options.livenessIntervalSeconds)));
  if (options.sliceElements == 0)
    return fail(ErrorKind::InvalidArgument, "the slice size must be at least 1 element");

  // A good moment to remove what jobs killed as a whole left: once per job.
  // Our own job's names are left to their ranks, which replace them.
  if (rank == 0)
    removeDeadSegments(jobName);

  std::unique_ptr<ProcessGroup> group(new ProcessGroup());
  JobControl &jc = group->state->control;
  jc.job = jobName;
  jc.rank = uint32_t(rank);
  jc.nranks = uint32_t(nranks);
  jc.options = options;
  jc.peers.resize(jc.nranks);
  jc.ctl.assign(jc.nranks, nullptr);
  jc.cleaned.reset(new std::atomic<bool>[jc.nranks]());
  if (CallError e = store ? joinJobThroughStore(jc, *store) : joinJob(jc))
    return fail(e.kind, e.message);
  return group;
}

ProcessGroup::~ProcessGroup() {
  State &st = *state;
  st.cached.clear();
  for (const auto &[p, a] : st.allocations)
    st.withdraw(a);
  st.allocations.clear();
  JobControl &jc = st.control;
  if (!jc.own.mapped())
    return;
  jc.me().closed.store(1, std::memory_order_release);
  jc.ringPeers();
  // The remote peers learn it from an update: sent before the group goes.
  if (jc.net)
    jc.net->flush(1.0);
  jc.cleanUpDeadPeers();
  ShmOps::unlinkIfStale(controlName(jc.job, jc.rank),
                        [&](const ShmMapping &, const struct stat &sb) {
                          return sb.st_dev == jc.own.device() && sb.st_ino == jc.own.inode();
                        });
}

void *ProcessGroup::allocate(size_t bytes, std::string *error) {
  State &st = *state;
  if (bytes == 0) {
    if (error)
      *error = "the size is 0";
    return nullptr;
  }
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(st.allocationsMutex);
    id = ++st.allocationsMade;
  }
  std::string name = allocName(st.control.job, st.control.rank, id);
  State::Allocation a;
  ShmOpenResult r;
  unlinkSegment(name);
  // Nobody opens it by name: the name goes at once (before the memory is
  // reserved, which may take a while), and the memory with the last
  // mapping. The descriptor stays open, for the peers to map the memory
  // through it (their direct reads of our messages).
  Status s = ShmOps::create(name, bytes, a.map, r, /*keepName=*/false, {}, 0, /*keepFd=*/true);
  if (!s || r != ShmOpenResult::Mapped) {
    if (error)
      *error = s ? cat("shared memory ", name, " exists") : s.message();
    return nullptr;
  }
  char *p = a.map.data();
  std::lock_guard<std::mutex> lock(st.allocationsMutex);
  // Published in a free entry of our table, the id last.
  ControlBlock &me = st.control.me();
  for (size_t i = 0; i < maxSharedAllocations; ++i) {
    SharedAllocation &e = me.allocations[i];
    if (e.id.load(std::memory_order_relaxed) != 0)
      continue;
    e.base.store(uint64_t(uintptr_t(p)), std::memory_order_relaxed);
    e.bytes.store(bytes, std::memory_order_relaxed);
    e.fd.store(a.map.fd(), std::memory_order_relaxed);
    e.id.store(id, std::memory_order_release);
    a.slot = int(i);
    break;
  }
  // Not in the table: the peers never map it, and the descriptor goes.
  if (a.slot < 0)
    a.map.closeFd();
  st.allocations.emplace(p, std::move(a));
  return p;
}

void ProcessGroup::deallocate(void *ptr) {
  if (!ptr)
    return;
  ShmMapping gone; // Unmapped after the lock is released.
  std::lock_guard<std::mutex> lock(state->allocationsMutex);
  auto it = state->allocations.find(static_cast<char *>(ptr));
  if (it != state->allocations.end()) {
    state->withdraw(it->second);
    gone = std::move(it->second.map);
    state->allocations.erase(it);
  }
}

Status ProcessGroup::execute(const Plan &plan, const void *sendbuf, void *recvbuf, size_t count,
                             DataType type, RedOp op, ErrorKind *errorKind) {
  return enter(&plan, nullptr, CallArgs{sendbuf, recvbuf, count, type, op}, errorKind);
}

Status ProcessGroup::execute(const ValidatedPlan &plan, const void *sendbuf, void *recvbuf,
                             size_t count, DataType type, RedOp op, ErrorKind *errorKind) {
  return enter(nullptr, &plan, CallArgs{sendbuf, recvbuf, count, type, op}, errorKind);
}

Status ProcessGroup::execute(const ValidatedPlan &plan, const CallArgs &args,
                             ErrorKind *errorKind) {
  return enter(nullptr, &plan, args, errorKind);
}

Status ProcessGroup::enter(const Plan *plan, const ValidatedPlan *validated, const CallArgs &args,
                           ErrorKind *errorKind) {
  State &st = *state;
  // One call at a time: a second one from another thread is refused, and
  // leaves the running call's state (lastErrorKind() included) alone.
  // Serializing them instead could pair the calls differently on different
  // ranks.
  if (st.inCall.exchange(true, std::memory_order_acq_rel)) {
    if (errorKind)
      *errorKind = ErrorKind::InvalidArgument;
    return Status::error(cat("rank ", st.control.rank,
                             ": execute() was called while another call of this process group is "
                             "in progress (one call at a time)"));
  }
  struct Leave {
    std::atomic<bool> &inCall;
    ~Leave() { inCall.store(false, std::memory_order_release); }
  } leave{st.inCall};
  Status s = Status::success();
  try {
    s = executeCall(plan, validated, args);
  } catch (...) {
    // Out of memory, most likely: fail this rank, and tell the peers at
    // once rather than leave them waiting for the timeout.
    ErrorKind kind = ErrorKind::SystemError;
    try {
      auto [what, k] = currentException();
      kind = k;
      std::string msg =
          cat("rank ", st.control.rank, ": ", what, " while ", st.phase, " (call ", st.seq, ")");
      st.control.publishFailure(msg, st.control.rank);
      st.broken = {kind, msg};
      st.control.cleanUpDeadPeers();
      lastKind = kind;
      lastMessage = msg;
      s = Status::error(msg);
    } catch (...) {
      // Not even the message fits: a fixed one for the peers, and this
      // rank's group is unusable all the same.
      static const char fixed[] = "out of memory while handling an error";
      st.control.publishFixedFailure(fixed);
      st.broken.kind = kind;
      lastKind = kind;
      lastMessage.clear();
      s = Status::error(fixed);
    }
  }
  if (errorKind)
    *errorKind = lastKind;
  return s;
}

namespace {

/// Prepares rank \p st's call of \p plan (or of \p validated, which is
/// set to \p borrowed when the plan is validated here) with \p args, and
/// selects its kernels. The arguments are checked before a plan is
/// validated, so that a bad argument is reported as such whatever the
/// plan; buffers from allocate() must hold what the call reads and writes.
PreparedCall prepare(ProcessGroup::State &st, const Plan *plan, const ValidatedPlan *&validated,
                     std::optional<ValidatedPlan> &borrowed, const CallArgs &args,
                     HostKernels &kernels);

/// Checks the memory of a call that reuses \p cc but needs a private copy
/// of its input, which the call that made \p cc may not have.
CallError checkReuseMemory(ProcessGroup::State &st, const ValidatedPlan &plan,
                           const PreparedCall &call, const CachedCall &cc);

/// The buffers (bits 1 << BufferKind) of \p call, bound in \p binding,
/// whose direct sends this rank makes (ProcessGroupOptions::directReads,
/// crossMemoryReads).
uint8_t directBuffers(ProcessGroup::State &st, const PreparedCall &call,
                      const HostBinding &binding);

/// Lays out and creates rank \p st's data segment \p own of call \p seq,
/// after checking the memory the call needs against the cap.
CallError createData(ProcessGroup::State &st, uint64_t seq, const ValidatedPlan &plan,
                     const PreparedCall &call, OwnDataSegment &own);

} // namespace

Status ProcessGroup::executeCall(const Plan *rawPlan, const ValidatedPlan *validated,
                                 const CallArgs &args) {
  State &st = *state;
  JobControl &jc = st.control;
  st.phase = "setting up";
  auto finish = [&](ErrorKind kind, std::string msg) {
    lastKind = kind;
    lastMessage = std::move(msg);
    return kind == ErrorKind::None ? Status::success() : Status::error(lastMessage);
  };
  if (st.broken)
    return finish(st.broken.kind,
                  "the process group failed in an earlier call: " + st.broken.message);
  const uint64_t seq = ++st.seq;
  const uint32_t me = jc.rank, n = jc.nranks;
  lastDirect = 0;
  // This thread drives the network for the whole call (NetEngine::poll),
  // but while it sleeps: what peers send us between our steps needs no
  // thread of its own to wake.
  struct Polling {
    NetEngine *net;
    explicit Polling(NetEngine *n) : net(n) {
      if (net)
        net->pollerEnter();
    }
    ~Polling() {
      if (net)
        net->pollerLeave();
    }
  } polling(jc.net.get());
  // No run is in progress: the peers' freed memory can be unmapped here.
  if (jc.windows)
    jc.windows->collect();
  // Ends the call. An error that breaks the group (one during the run) is
  // published for the peers, with the rank it comes from (none: it is
  // another rank's); any other outcome counts the call as done.
  auto endCall = [&](CallFailure f) {
    // A failed call may leave messages in the kept FIFOs (a rank that ran
    // early): every rank sees the failure, and drops its kept data side.
    if (f)
      st.cached.clear();
    if (f.breaks) {
      jc.publishFailure(f.error.message, f.error.kind == ErrorKind::Remote ? n : me);
      st.broken = f.error;
      jc.cleanUpDeadPeers();
    } else {
      // Remote peers learn it with our next update (a heartbeat at the
      // latest); they only read it once we are gone.
      jc.me().doneSeq.store(seq, std::memory_order_release);
    }
    return finish(f.error.kind, f.error.message);
  };

  // Prepare this rank's call. An error is published like a call, so that
  // every rank fails instead of waiting.
  std::optional<ValidatedPlan> borrowed;
  HostKernels kernels;
  PreparedCall call = prepare(st, rawPlan, validated, borrowed, args, kernels);

  // The data side: the last call's, when this one has the same
  // description, else a new data segment, whose name goes when the call
  // ends, however it ends.
  CachedCall *reuse = nullptr;
  std::unique_ptr<CachedCall> fresh;
  if (!call.error && !call.empty()) {
    for (const std::unique_ptr<CachedCall> &kept : st.cached)
      if (kept->serves(call.description)) {
        reuse = kept.get();
        break;
      }
    if (reuse) {
      if (call.copyBytes)
        if (CallError e = checkReuseMemory(st, *validated, call, *reuse))
          call.fail(std::move(e));
    } else {
      fresh = std::make_unique<CachedCall>(dataName(jc.job, me, seq));
      if (CallError e = createData(st, seq, *validated, call, fresh->own))
        call.fail(std::move(e));
    }
  }

  // Publish the call. A call on a kept data side runs at once and checks
  // the peers' publications after its run: a peer that called differently
  // never sends into the kept FIFOs, and the run stops when it sees that
  // peer's publication (RankRun::run's `watch`). Any other call waits for
  // every peer's publication before it runs: its peers map its new
  // segment.
  const bool early = reuse && !call.error;
  publishCall(jc, seq, call.description, early ? reuse->madeBy : 0);
  std::vector<CallDescription> calls;
  bool sameReuse = true;
  // Every rank holds the same descriptions: the same verdict everywhere.
  auto agreeOnCall = [&]() -> CallFailure {
    if (CallFailure f = awaitCalls(jc, seq, calls, sameReuse))
      return f;
    if (CallError verdict = agree(calls.data(), n, me))
      return {verdict, false};
    // Same descriptions, same kept data sides (each made by the same
    // successful call on every rank): every rank reuses, or none. Anything
    // else is a peer that does not follow this protocol.
    if (!sameReuse && !call.empty())
      return {{ErrorKind::Internal,
               cat("rank ", me, ": the ranks disagree on which call's data segments call ", seq,
                   " reuses")},
              true};
    return {};
  };
  if (!early)
    if (CallFailure f = agreeOnCall())
      return endCall(f);

  // An in-place plan called out of place runs without staging the input
  // where the rank's program allows it (OutOfPlace.h).
  CachedCall *cc = reuse ? reuse : fresh.get();
  const Plan &plan = validated->plan();
  if (fresh)
    fresh->outOfPlace = outOfPlaceProgram(plan.info, *validated->section(me));
  const bool outOfPlace = cc && !cc->outOfPlace.empty() && runOutOfPlace(call, plan.info);

  // Bind our buffers (LocalWorld's rules).
  HostBinding binding;
  if (Status s = bindHost(call, binding, true, &st.copy); !s)
    return endCall({{ErrorKind::SystemError, s.message()}, true});
  if (call.empty()) {
    finishHost(call, binding, n, kernels);
    return endCall({});
  }
  const RankPlan &rp = *validated->section(me);
  if (fresh) {
    const size_t es = call.elementSize;
    if (Status s = allocateZeroed(cc->scratch, *scratchBytes(plan, me, call.layout, es),
                                  scratchWhat(plan, me, call.layout, es));
        !s)
      return endCall({{ErrorKind::SystemError, cat("rank ", me, ": ", s.message())}, true});
    // Map the data segments of the ranks we send to, and find our FIFOs.
    if (CallError e =
            connectFifos(jc, seq, rp, plan.info.connectionDepth, call.layout.sliceElements * es,
                         cc->own, cc->fifos, call.protocol))
      return endCall({e, true});
    cc->description = call.description;
    cc->madeBy = seq;
    cc->layout = call.layout;
    cc->kernels = kernels;
    cc->run.build(jc, rp, cc->layout, cc->kernels, cc->fifos, cc->own);
    if (jc.options.directReads || jc.options.crossMemoryReads)
      cc->direct = rankDirectSends(plan.info, me, rp, cc->outOfPlace);
  }

  // Run our threadblocks. A rank without any (a plan of one rank, or one in
  // which this rank does nothing) is done.
  CallError stopped; // The early run stopped for a peer that called differently.
  if (!cc->run.empty()) {
    st.phase = "running";
    // The bytes every rank's buffers take, as far as this rank can tell.
    uint64_t footprint;
    if (__builtin_mul_overflow(bufferFootprint(call), uint64_t(jc.nranks), &footprint))
      footprint = ~uint64_t(0);
    cc->run.setStores(streamsStores(footprint, jc.options.streamingStoresFrom), cc->scratch.size());
    CallError e = cc->run.run(
        jc, seq, rp, outOfPlace ? &cc->outOfPlace.steps : nullptr, cc->direct.of(outOfPlace),
        directBuffers(st, call, binding), binding.input, binding.output, binding.inputBlocks,
        binding.outputBlocks, cc->scratch.data(), early ? &jc.me().calls[seq % 2] : nullptr);
    lastDirect = cc->run.directReceived();
    if (e) {
      if (!early || e.kind != ErrorKind::Mismatch)
        return endCall({e, true});
      stopped = std::move(e);
    }
  }
  if (early) {
    st.phase = "checking the peers' calls";
    if (CallFailure f = agreeOnCall())
      return endCall(f);
    if (stopped)
      return endCall({{ErrorKind::Internal, stopped.message + ", but all agree"}, true});
  }
  finishHost(call, binding, n, kernels);
  if (fresh) {
    // Every sender has mapped it (each sent us every message): the name
    // can go, and the segment serves the next calls of this description.
    // The least recently used data side beyond the limit goes (on every
    // rank at this call).
    fresh->own.unlinkName();
    st.cached.insert(st.cached.begin(), std::move(fresh));
    const size_t keep = std::max<uint32_t>(1, jc.options.keptCalls);
    if (st.cached.size() > keep)
      st.cached.resize(keep);
  } else if (reuse && st.cached.front().get() != reuse) {
    for (size_t i = 1; i < st.cached.size(); ++i)
      if (st.cached[i].get() == reuse) {
        std::rotate(st.cached.begin(), st.cached.begin() + i, st.cached.begin() + i + 1);
        break;
      }
  }
  return endCall({});
}

namespace {

PreparedCall prepare(ProcessGroup::State &st, const Plan *plan, const ValidatedPlan *&validated,
                     std::optional<ValidatedPlan> &borrowed, const CallArgs &args,
                     HostKernels &kernels) {
  const uint32_t me = st.control.rank;
  CallOptions options;
  options.sliceElements = st.control.options.sliceElements;
  options.protocol = st.control.options.protocol;
  options.worldRanks = st.control.nranks;
  options.worldName = "job";
  options.bufferBlocks = true;
  PreparedCall call;
  // The arguments first, buffers from allocate() included, whatever the
  // plan: they need its info only.
  const Plan &raw = validated ? validated->plan() : *plan;
  CallError error = checkCall(raw, me, args, options);
  if (!error && args.count > 0) {
    const BufferElements e = planBufferElements(raw.info, args.count);
    const uint64_t es = dataTypeSize(args.type);
    auto size = [](const ProcessGroup::State::Allocation &a) { return uint64_t(a.map.size()); };
    std::string sendOver, recvOver;
    {
      // A buffer in blocks: each block of one unit.
      auto overrun = [&](const char *which, const void *whole, uint64_t bytes,
                         const void *const *blocks, uint64_t n) {
        if (!blocks)
          return allocationOverrun(which, whole, bytes, st.allocations, size);
        std::string over;
        for (uint64_t i = 0; i < n && over.empty(); ++i)
          over = allocationOverrun(cat(which, " block ", i).c_str(), blocks[i], args.count * es,
                                   st.allocations, size);
        return over;
      };
      std::lock_guard<std::mutex> lock(st.allocationsMutex);
      sendOver = overrun("send", args.sendbuf, e.input * es, args.sendBlocks, args.numSendBlocks);
      recvOver = overrun("receive", args.recvbuf, e.output * es,
                         const_cast<const void *const *>(args.recvBlocks), args.numRecvBlocks);
    }
    for (const std::string *over : {&sendOver, &recvOver})
      if (!over->empty()) {
        error = {ErrorKind::InvalidArgument, cat("rank ", me, ": ", *over)};
        break;
      }
  }
  if (error) {
    call.fail(std::move(error));
    return call;
  }
  if (!validated) {
    Result<ValidatedPlan> v = ValidatedPlan::borrow(*plan);
    if (!v) {
      call.fail({ErrorKind::InvalidPlan, cat("rank ", me, ": ", v.message())});
      return call;
    }
    validated = &borrowed.emplace(std::move(*v));
  }
  call = prepareCall(*validated, me, args, options);
  if (!call.error && !selectHostKernels(args.type, args.op, kernels))
    call.fail({ErrorKind::Internal, cat("rank ", me, ": no host kernel for ",
                                        dataTypeName(args.type), " and ", redOpName(args.op))});
  return call;
}

CallError checkReuseMemory(ProcessGroup::State &st, const ValidatedPlan &plan,
                           const PreparedCall &call, const CachedCall &cc) {
  ErrorKind memoryKind = ErrorKind::SystemError;
  if (Status s =
          checkRankMemory(plan, call, cc.own.layout().bytes, st.control.options.memoryLimitBytes,
                          "ProcessGroupOptions::memoryLimitBytes", &memoryKind);
      !s)
    return {memoryKind, cat("rank ", call.rank, ": ", s.message())};
  return {};
}

uint8_t directBuffers(ProcessGroup::State &st, const PreparedCall &call,
                      const HostBinding &binding) {
  const ProcessGroupOptions &o = st.control.options;
  if (o.crossMemoryReads && call.layout.sliceElements * call.elementSize >= o.crossMemoryMinBytes)
    return 0xff;
  if (!o.directReads)
    return 0;
  // Our peers map what our table lists.
  auto shared = [&](const char *p, uint64_t bytes) {
    auto it = allocationAtOrBefore(st.allocations, p);
    return p && it != st.allocations.end() && it->second.slot >= 0 &&
           rangeHolds(uint64_t(uintptr_t(it->first)), it->second.map.size(), uint64_t(uintptr_t(p)),
                      bytes);
  };
  // A buffer in blocks is shared when every block is.
  auto sharedBuffer = [&](const char *whole, uint64_t bytes, void *const *blocks, uint64_t n) {
    if (!blocks)
      return shared(whole, bytes);
    for (uint64_t i = 0; i < n; ++i)
      if (!shared(static_cast<const char *>(blocks[i]), call.unitBytes))
        return false;
    return true;
  };
  std::lock_guard<std::mutex> lock(st.allocationsMutex);
  uint8_t bits = 0;
  if (sharedBuffer(binding.input, call.inputBytes, binding.inputBlocks, call.args.numSendBlocks))
    bits |= 1u << unsigned(BufferKind::Input);
  if (sharedBuffer(binding.output, call.outputBytes, binding.outputBlocks, call.args.numRecvBlocks))
    bits |= 1u << unsigned(BufferKind::Output);
  return bits;
}

CallError createData(ProcessGroup::State &st, uint64_t seq, const ValidatedPlan &plan,
                     const PreparedCall &call, OwnDataSegment &own) {
  const uint32_t me = call.rank;
  const RankPlan &rp = *plan.section(me);
  // Direct messages from the senders whose memory we can read (each
  // decides which it sends: directBuffers()), when a piece holds an
  // address.
  const uint64_t pieceBytes = call.layout.sliceElements * call.elementSize;
  JobControl &jc = st.control;
  std::vector<uint8_t> directFrom(jc.nranks, 0);
  if ((jc.options.directReads || jc.options.crossMemoryReads) && pieceBytes >= sizeof(char *))
    for (const Threadblock &tb : rp.threadblocks)
      if (tb.recvPeer >= 0 && uint32_t(tb.recvPeer) < jc.nranks)
        directFrom[uint32_t(tb.recvPeer)] = jc.peerReadable(uint32_t(tb.recvPeer));
  Result<DataLayout> d = layOutData(rp, me, plan.info().connectionDepth, pieceBytes, directFrom,
                                    jc.remote, call.protocol);
  if (!d)
    return {ErrorKind::InvalidArgument, cat("rank ", me, ": ", d.message())};
  ErrorKind memoryKind = ErrorKind::SystemError;
  if (Status s = checkRankMemory(plan, call, d->bytes, st.control.options.memoryLimitBytes,
                                 "ProcessGroupOptions::memoryLimitBytes", &memoryKind);
      !s)
    return {memoryKind, cat("rank ", me, ": ", s.message())};
  if (Status s = own.create(st.control.me(), seq, rp, std::move(*d)); !s)
    return {ErrorKind::SystemError, cat("rank ", me, ": ", s.message())};
  return {};
}

} // namespace

} // namespace coll
