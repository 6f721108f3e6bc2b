//===- Communicator.cpp - World, Communicator and their rendezvous --------===//
//
// Each Communicator::execute() deposits its call in its rank's slot of the
// current round and waits. The last rank to arrive takes the round's calls,
// opens the next round, checks that the calls agree (plans compared by
// object, then by the checksum of their bytes; count, type, operator) and
// runs them all on LocalWorld outside the lock; then it publishes one
// outcome per rank and wakes everybody. A round's outcomes stay valid until
// the next round completes, which needs every rank to have come back.
//
// The round runs on the runner's own plan (equal to every other rank's once
// they agree): a rank that gives up on a stuck round and frees its plan
// breaks nothing. Its buffers stay in use until the round ends, which its
// communicator waits for (next execute(), destructor).
//
// A bad argument does not keep a call out of the rendezvous: it arrives
// with its error, so that the other ranks fail too rather than wait.
//
//===----------------------------------------------------------------------===//

#include "coll/Runtime/Communicator.h"

#include "ExecCommon.h"
#include "coll/Runtime/PlanIO.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <limits>
#include <map>
#include <mutex>
#include <new>
#include <sstream>
#include <utility>
#include <vector>

namespace coll {

namespace {

using detail::cat;

/// One rank's call in a round.
struct Call {
  bool present = false;
  const Plan *plan = nullptr;
  const void *sendbuf = nullptr;
  void *recvbuf = nullptr;
  uint64_t count = 0;
  DataType type = DataType::Float32;
  RedOp op = RedOp::Sum;
  ErrorKind argKind = ErrorKind::None; ///< The call's own argument error, if any.
  std::string argError;
};

/// One rank's outcome of a round.
struct Outcome {
  ErrorKind kind = ErrorKind::None;
  std::string message;
};

std::string describePlan(const Plan &p, uint64_t checksum) {
  char hex[24];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(checksum));
  return cat("'", p.info.name, "' (", collectiveName(p.info.collective), ", ", p.info.nranks,
             " ranks, checksum ", hex, ")");
}

uint64_t checksumOf(const Plan &p) {
  std::vector<uint8_t> bytes = serializePlan(p);
  return planChecksum(bytes.data(), bytes.size());
}

} // namespace

struct World::State {
  int nranks = 0;
  WorldOptions options;
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<bool> claimed;     ///< Ranks that have a communicator.
  uint64_t round = 0;            ///< The round now collecting calls.
  uint64_t completed = 0;        ///< Rounds whose outcomes are published.
  int arrived = 0;               ///< Calls in the collecting round.
  std::vector<Call> calls;       ///< The collecting round's calls.
  std::vector<Outcome> outcomes; ///< The last completed round's outcomes.
  /// The running round's signs of life, and its stop (one round runs at a
  /// time: the next needs every rank back).
  detail::RunControl control;
  /// The running round still reads the ranks' plans (agreement): no rank
  /// may leave it yet, since its plan may go as soon as it has.
  bool comparingPlans = false;

  /// Checks and runs one complete round on \p runner's plan; returns every
  /// rank's outcome.
  std::vector<Outcome> runRound(const std::vector<Call> &calls, int runner);
  /// runRound(), with any exception an error of every rank.
  std::vector<Outcome> runRoundGuarded(const std::vector<Call> &calls, int runner);
};

std::vector<Outcome> World::State::runRound(const std::vector<Call> &round, int runner) {
  const size_t n = round.size();
  std::vector<Outcome> out(n);
  auto failAll = [&](ErrorKind kind, const std::string &msg) {
    for (Outcome &o : out)
      o = {kind, msg};
    return out;
  };

  // Argument errors: the rank itself gets its message, the others learn
  // which rank failed.
  for (size_t r = 0; r < n; ++r) {
    if (round[r].argKind == ErrorKind::None)
      continue;
    for (size_t q = 0; q < n; ++q)
      out[q] = {round[r].argKind,
                q == r ? round[r].argError : cat("rank ", r, " failed: ", round[r].argError)};
    return out;
  }

  // Agreement: the same plan (same object, or the same bytes), count, type
  // and operator on every rank. Each plan object is checked once (checksum
  // first, then the deep comparison), and the round beats after each:
  // with many ranks and plan objects, this takes a while, and the waiters
  // must not take it for a stuck round.
  const Call &first = round[0];
  uint64_t firstSum = 0;
  bool haveFirstSum = false;
  std::map<const Plan *, uint64_t> agreed; ///< Plan objects equal to rank 0's.
  for (size_t r = 1; r < n; ++r) {
    const Call &c = round[r];
    if (c.plan != first.plan && !agreed.count(c.plan)) {
      if (!haveFirstSum) {
        firstSum = checksumOf(*first.plan);
        haveFirstSum = true;
        control.beatNow();
      }
      uint64_t sum = checksumOf(*c.plan);
      control.beatNow();
      if (sum != firstSum || !(*c.plan == *first.plan))
        return failAll(ErrorKind::Mismatch,
                       cat("the ranks called with different plans: rank 0 with ",
                           describePlan(*first.plan, firstSum), ", rank ", r, " with ",
                           describePlan(*c.plan, sum)));
      agreed.emplace(c.plan, sum);
      control.beatNow();
    }
    if (c.count != first.count || c.type != first.type || c.op != first.op)
      return failAll(ErrorKind::Mismatch,
                     cat("the ranks called with different arguments: rank 0 with count ",
                         first.count, ", ", dataTypeName(first.type), ", ", redOpName(first.op),
                         "; rank ", r, " with count ", c.count, ", ", dataTypeName(c.type), ", ",
                         redOpName(c.op)));
  }

  // From here on, only the runner's plan: it stays valid while the round
  // runs, the runner being in execute() with it. A rank may now leave a
  // stuck round (and free its plan).
  {
    std::lock_guard<std::mutex> lock(mutex);
    comparingPlans = false;
  }
  cv.notify_all();
  const Plan &plan = *round[size_t(runner)].plan;
  if (Status s = validatePlan(plan); !s)
    return failAll(ErrorKind::InvalidPlan, "invalid plan: " + s.message());
  if (Result<uint32_t> chunks = planChunksPerUnit(plan.info); !chunks)
    return failAll(ErrorKind::InvalidPlan, "invalid plan: " + chunks.message());
  control.beatNow();

  std::vector<const void *> sendbufs(n);
  std::vector<void *> recvbufs(n);
  for (size_t r = 0; r < n; ++r) {
    sendbufs[r] = round[r].sendbuf;
    recvbufs[r] = round[r].recvbuf;
  }
  ExecOptions exec = options.exec;
  exec.timeline = nullptr;
  Status s = detail::runLocalWorld(plan, sendbufs, recvbufs, first.count, first.type, first.op,
                                   exec, &control);
  if (s)
    return out;
  return failAll(control.kind, s.message());
}

std::vector<Outcome> World::State::runRoundGuarded(const std::vector<Call> &round, int runner) {
  try {
    return runRound(round, runner);
  } catch (...) {
    std::string what = "an unknown exception";
    ErrorKind kind = ErrorKind::Internal;
    try {
      throw;
    } catch (const std::bad_alloc &) {
      what = "out of memory";
      kind = ErrorKind::SystemError;
    } catch (const std::exception &e) {
      what = e.what();
    } catch (...) {
    }
    // Every rank gets an outcome, however short of memory: an empty
    // message is better than a rank that waits forever.
    std::vector<Outcome> out(round.size());
    for (Outcome &o : out) {
      o.kind = kind;
      try {
        o.message = cat("rank ", runner, " failed running the round: ", what);
      } catch (...) {
      }
    }
    return out;
  }
}

Result<std::shared_ptr<World>> World::create(int nranks, const WorldOptions &options) {
  if (nranks < 1 || uint64_t(nranks) > PlanLimits::maxRanks)
    return Status::error(
        cat("the number of ranks must be in [1, ", PlanLimits::maxRanks, "], not ", nranks));
  if (!(options.rendezvousTimeoutSeconds > 0) || options.rendezvousTimeoutSeconds > 1e9)
    return Status::error(cat("the rendezvous timeout must be in (0, 1e9] seconds, not ",
                             options.rendezvousTimeoutSeconds));
  std::shared_ptr<World> world(new World());
  world->state = std::make_unique<State>();
  State &st = *world->state;
  st.nranks = nranks;
  st.options = options;
  st.claimed.assign(size_t(nranks), false);
  st.calls.assign(size_t(nranks), Call());
  st.outcomes.assign(size_t(nranks), Outcome());
  return world;
}

World::~World() = default;

int World::size() const {
  return state->nranks;
}

Result<std::unique_ptr<Communicator>> World::communicator(int rank) {
  State &st = *state;
  if (rank < 0 || rank >= st.nranks)
    return Status::error(
        cat("rank ", rank, " is out of range: the world has ", st.nranks, " ranks"));
  std::lock_guard<std::mutex> lock(st.mutex);
  if (st.claimed[size_t(rank)])
    return Status::error(cat("rank ", rank, " already has a communicator"));
  st.claimed[size_t(rank)] = true;
  return std::unique_ptr<Communicator>(new Communicator(shared_from_this(), rank));
}

Communicator::~Communicator() {
  World::State &st = *world->state;
  std::unique_lock<std::mutex> lock(st.mutex);
  // A round this rank gave up on still runs on its buffers: the caller may
  // free them once we return.
  st.cv.wait(lock, [&] { return st.completed >= abandoned; });
  st.claimed[size_t(myRank)] = false;
}

int Communicator::size() const {
  return world->size();
}

Status Communicator::execute(const Plan &plan, const void *sendbuf, void *recvbuf, size_t count,
                             DataType type, RedOp op) {
  World::State &st = *world->state;
  const size_t r = size_t(myRank);

  // This rank's own arguments.
  Call call;
  call.plan = &plan;
  call.sendbuf = sendbuf;
  call.recvbuf = recvbuf;
  call.count = count;
  call.type = type;
  call.op = op;
  auto bad = [&](ErrorKind kind, std::string msg) {
    call.argKind = kind;
    call.argError = cat("rank ", myRank, ": ", msg);
  };
  if (plan.info.nranks != uint32_t(st.nranks))
    bad(ErrorKind::InvalidPlan, cat("the plan '", plan.info.name, "' is for ", plan.info.nranks,
                                    " ranks, but the world has ", st.nranks));
  else if (plan.loadedRank >= 0 || plan.ranks.size() != plan.info.nranks)
    bad(ErrorKind::InvalidPlan,
        cat("the plan '", plan.info.name, "' does not hold every rank (loaded for rank ",
            plan.loadedRank, " only); load it whole"));
  else if (unsigned(type) >= numDataTypes())
    bad(ErrorKind::InvalidArgument, cat("invalid data type ", unsigned(type)));
  else if (unsigned(op) >= numRedOps())
    bad(ErrorKind::InvalidArgument, cat("invalid reduction operator ", unsigned(op)));
  else if (count > std::numeric_limits<uint64_t>::max() / dataTypeSize(type) / st.nranks)
    bad(ErrorKind::InvalidArgument, cat("count ", count, " is too large"));
  else if (count > 0 && !sendbuf)
    bad(ErrorKind::InvalidArgument, "the send buffer is null (count is not 0)");
  else if (count > 0 && !recvbuf)
    bad(ErrorKind::InvalidArgument, "the receive buffer is null (count is not 0)");

  auto finish = [&](ErrorKind kind, std::string msg) {
    lastKind = kind;
    lastMessage = std::move(msg);
    return kind == ErrorKind::None ? Status::success() : Status::error(lastMessage);
  };

  std::unique_lock<std::mutex> lock(st.mutex);
  if (st.calls[r].present)
    return finish(ErrorKind::InvalidArgument,
                  cat("rank ", myRank, " already has a call in progress on this communicator"));
  if (st.completed < abandoned)
    return finish(ErrorKind::Timeout,
                  cat("rank ", myRank, ": round ", abandoned - 1,
                      ", which an earlier call gave up on, is still running on this rank's "
                      "buffers; call again once it has ended"));
  const uint64_t myRound = st.round;
  call.present = true;
  st.calls[r] = std::move(call);
  if (++st.arrived == st.nranks) {
    // The last to arrive runs the round; the next round opens at once.
    std::vector<Call> calls(size_t(st.nranks));
    calls.swap(st.calls);
    st.arrived = 0;
    ++st.round;
    st.control.cancel.store(false, std::memory_order_relaxed);
    st.control.beatNow();
    st.comparingPlans = true;
    lock.unlock();
    st.cv.notify_all(); // The waiters now watch the run.
    std::vector<Outcome> outcomes = st.runRoundGuarded(calls, myRank);
    lock.lock();
    if (st.control.cancel.load(std::memory_order_relaxed)) {
      // Some rank gave up on this round: none may see it succeed.
      for (Outcome &o : outcomes)
        if (o.kind == ErrorKind::None)
          o = {ErrorKind::Timeout, cat("rank ", myRank, ": the round was cancelled after ",
                                       "another rank saw no progress in it")};
    }
    st.outcomes = std::move(outcomes);
    st.comparingPlans = false;
    st.completed = myRound + 1;
    Outcome mine = st.outcomes[r];
    lock.unlock();
    st.cv.notify_all();
    return finish(mine.kind, std::move(mine.message));
  }

  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                      std::chrono::duration<double>(st.options.rendezvousTimeoutSeconds));
  // Once the round runs, its workers fail on their own after
  // exec.timeoutSeconds without progress; a run that shows no sign of life
  // for twice that (plus a second) is stuck: cancel it, give it as long
  // again to stop, then leave.
  const auto noLife = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(2 * st.options.exec.timeoutSeconds + 1));
  bool cancelled = false;
  auto cancelledAt = std::chrono::steady_clock::time_point();
  while (st.completed <= myRound) {
    if (st.round != myRound) {
      auto now = std::chrono::steady_clock::now();
      auto lastBeat = std::chrono::steady_clock::time_point(
          std::chrono::steady_clock::duration(st.control.beat.load(std::memory_order_relaxed)));
      if (!cancelled && now >= lastBeat + noLife) {
        st.control.cancel.store(true, std::memory_order_relaxed);
        cancelled = true;
        cancelledAt = now;
      }
      if (cancelled && now >= cancelledAt + noLife && !st.comparingPlans) {
        abandoned = myRound + 1;
        return finish(ErrorKind::Timeout,
                      cat("rank ", myRank, ": the running round showed no sign of life for ",
                          detail::formatSeconds(std::chrono::duration<double>(noLife).count()),
                          " s, and did not stop in as long again when cancelled"));
      }
      if (cancelled && now >= cancelledAt + noLife)
        st.cv.wait(lock); // Until the round stops reading the plans (or ends).
      else
        st.cv.wait_until(lock, cancelled ? cancelledAt + noLife : lastBeat + noLife);
      continue;
    }
    if (st.cv.wait_until(lock, deadline) == std::cv_status::timeout && st.round == myRound) {
      // Nobody has started the round: leave it as if never called.
      st.calls[r] = Call();
      --st.arrived;
      return finish(ErrorKind::Timeout,
                    cat("rank ", myRank, ": timed out after ", st.options.rendezvousTimeoutSeconds,
                        " s waiting for ", st.nranks - st.arrived - 1, " of ", st.nranks,
                        " ranks to call execute()"));
    }
  }
  Outcome mine = st.outcomes[r];
  return finish(mine.kind, std::move(mine.message));
}

} // namespace coll
