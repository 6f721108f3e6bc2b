//===- Communicator.cpp - World, Communicator and their rendezvous --------===//
//
// Each Communicator::execute() prepares its call (PreparedCall.h: the
// plan validated once, the arguments checked, the call described), deposits
// it in its rank's slot of the current round and waits. The last rank to
// arrive takes the round's calls, opens the next round, takes the verdict of
// agree() over the descriptions (plans compared by checksum; count, type,
// operator) and runs them all on LocalWorld outside the lock; then it
// publishes one outcome per rank and wakes everybody. A round's outcomes
// stay valid until the next round completes, which needs every rank to have
// come back.
//
// The round runs on the runner's own plan (equal to every other rank's once
// they agree), and reads no other rank's: a rank that gives up on a stuck
// round and frees its plan breaks nothing. Its buffers stay in use until the
// round ends, which its communicator waits for (next execute(), destructor).
//
// A bad argument does not keep a call out of the rendezvous: it arrives
// with its error, so that the other ranks fail too rather than wait.
//
//===----------------------------------------------------------------------===//

#include "coll/Runtime/Communicator.h"

#include "ExecCommon.h"
#include "coll/Runtime/PreparedCall.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <limits>
#include <map>
#include <mutex>
#include <new>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

namespace coll {

namespace {

using detail::cat;

} // namespace

/// One rank's call in a round.
struct detail::WorldCall {
  bool present = false;
  std::optional<ValidatedPlan> plan; ///< Read by the runner, of its own call only.
  CallArgs args;
  CallDescription description; ///< What the ranks compare (with any argument error).
};

namespace {

using Call = detail::WorldCall;

/// One rank's outcome of a round.
struct Outcome {
  ErrorKind kind = ErrorKind::None;
  std::string message;
};

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

  /// The call options of this world's ranks.
  CallOptions callOptions() const;
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

  // The verdict: argument errors first (the rank itself gets its
  // message, the others learn which rank failed), then agreement.
  std::vector<CallDescription> descriptions(n);
  for (size_t r = 0; r < n; ++r)
    descriptions[r] = round[r].description;
  if (CallError all = agree(descriptions.data(), uint32_t(n), uint32_t(n))) {
    for (size_t r = 0; r < n; ++r)
      out[r] = {all.kind, all.message};
    // The rank whose error it is gets its own message.
    for (size_t r = 0; r < n; ++r)
      if (descriptions[r].errorKind != 0) {
        CallError own = agree(descriptions.data(), uint32_t(n), uint32_t(r));
        out[r] = {own.kind, std::move(own.message)};
        break;
      }
    return out;
  }
  control.beatNow();

  // Only the runner's plan from here on: it stays valid while the round
  // runs, the runner being in execute() with it.
  const Call &first = round[0];
  const ValidatedPlan &plan = *round[size_t(runner)].plan;
  std::vector<const void *> sendbufs(n);
  std::vector<void *> recvbufs(n);
  for (size_t r = 0; r < n; ++r) {
    sendbufs[r] = round[r].args.sendbuf;
    recvbufs[r] = round[r].args.recvbuf;
  }
  ExecOptions exec = options.exec;
  exec.timeline = nullptr;
  Status s = detail::runLocalWorld(plan, sendbufs, recvbufs, first.args.count, first.args.type,
                                   first.args.op, exec, &control);
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

CallOptions World::State::callOptions() const {
  CallOptions o;
  o.sliceElements = options.exec.sliceElements;
  o.protocol = options.exec.protocol;
  o.worldRanks = uint32_t(nranks);
  o.worldName = "world";
  return o;
}

Status Communicator::execute(const Plan &plan, const void *sendbuf, void *recvbuf, size_t count,
                             DataType type, RedOp op) {
  // The arguments first, so that a bad one is reported as such whatever the
  // plan; then the plan, validated for this call.
  const CallArgs args{sendbuf, recvbuf, count, type, op};
  CallError error = checkCall(plan, uint32_t(myRank), args, world->state->callOptions());
  if (!error) {
    Result<ValidatedPlan> valid = ValidatedPlan::borrow(plan);
    if (valid)
      return execute(*valid, sendbuf, recvbuf, count, type, op);
    error = {ErrorKind::InvalidPlan, valid.message()};
  }
  Call call;
  call.args = args;
  call.description = describeFailedCall(error);
  return rendezvous(std::move(call));
}

Status Communicator::execute(const ValidatedPlan &plan, const void *sendbuf, void *recvbuf,
                             size_t count, DataType type, RedOp op) {
  Call call;
  call.args = {sendbuf, recvbuf, count, type, op};
  call.description =
      prepareCall(plan, uint32_t(myRank), call.args, world->state->callOptions()).description;
  call.plan = plan;
  return rendezvous(std::move(call));
}

Status Communicator::rendezvous(Call call) {
  World::State &st = *world->state;
  const size_t r = size_t(myRank);
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
      if (cancelled && now >= cancelledAt + noLife) {
        abandoned = myRound + 1;
        return finish(ErrorKind::Timeout,
                      cat("rank ", myRank, ": the running round showed no sign of life for ",
                          detail::formatSeconds(std::chrono::duration<double>(noLife).count()),
                          " s, and did not stop in as long again when cancelled"));
      }
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
