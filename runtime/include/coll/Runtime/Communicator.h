//===- Communicator.h - The runtime's C++ API ---------------------*- C++ -*-===//
/// \file
/// The public C++ API of the runtime: a World of N ranks in this process,
/// one Communicator per rank, and Communicator::execute(), which every
/// rank's thread calls with the same plan and its own buffers. The N calls
/// meet at a rendezvous; the last to arrive checks that all ranks agree
/// (the plan's checksum, count, data type, operator) and runs every rank at
/// once on LocalWorld (Executor.h); then each call returns the outcome of
/// its rank. Mismatched calls fail on every rank instead of hanging.
///
/// \code
///   auto world = coll::World::create(8);          // Result<shared_ptr<World>>
///   // In rank r's thread:
///   auto comm = (*world)->communicator(r);         // Result<unique_ptr<Communicator>>
///   coll::Status s = (*comm)->execute(plan, send, recv, count,
///                                     coll::DataType::Float32, coll::RedOp::Sum);
/// \endcode
///
/// docs/runtime.md has complete programs, in C++ and in C (coll/coll.h).
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_COMMUNICATOR_H
#define COLL_RUNTIME_COMMUNICATOR_H

#include "coll/Runtime/DataType.h"
#include "coll/Runtime/Executor.h"
#include "coll/Runtime/Plan.h"
#include "coll/Runtime/Status.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace coll {

/// Options of a World.
struct WorldOptions {
  /// How each run executes (ExecOptions::timeline is ignored). The progress
  /// timeout, ExecOptions::timeoutSeconds, applies once every rank arrived.
  ExecOptions exec;
  /// How long a call waits for the other ranks to arrive before it gives up
  /// with ErrorKind::Timeout (and leaves the rendezvous as if never called).
  double rendezvousTimeoutSeconds = 300;
};

class Communicator;
class ValidatedPlan;
namespace detail {
struct WorldCall;
} // namespace detail

/// N ranks in this process. Shared by its communicators, which keep it
/// alive; thread-safe.
class World : public std::enable_shared_from_this<World> {
public:
  /// A world of \p nranks ranks (1 to PlanLimits::maxRanks).
  static Result<std::shared_ptr<World>> create(int nranks,
                                               const WorldOptions &options = WorldOptions());

  /// The communicator of \p rank, in [0, size()). A rank has at most one
  /// communicator at a time; destroying it frees the rank again.
  Result<std::unique_ptr<Communicator>> communicator(int rank);

  /// The number of ranks.
  int size() const;

  ~World();
  World(const World &) = delete;
  World &operator=(const World &) = delete;

  struct State; ///< The rendezvous (lib/Communicator.cpp).

private:
  World() = default;
  std::unique_ptr<State> state;
  friend class Communicator;
};

/// One rank of a World. Each rank's thread uses its own communicator; one
/// communicator runs one call at a time.
class Communicator {
public:
  ~Communicator();
  Communicator(const Communicator &) = delete;
  Communicator &operator=(const Communicator &) = delete;

  /// This communicator's rank.
  int rank() const { return myRank; }
  /// The number of ranks of its world.
  int size() const;

  /// Runs this rank's part of \p plan, whose info.nranks must be size(),
  /// with this rank's buffers, sized as planBufferElements() says for
  /// \p count (NCCL's counts; see Executor.h). The call is in place when
  /// the buffers are the collective's in-place alias (allreduce, broadcast,
  /// reduce: sendbuf == recvbuf). Blocks until every rank has called and
  /// this rank's results are in \p recvbuf. Every rank must pass the same
  /// plan (by checksum, not necessarily the same object), \p count,
  /// \p type and \p op, or every rank fails with ErrorKind::Mismatch; a bad
  /// argument on one rank fails that rank with ErrorKind::InvalidArgument
  /// and the others with the same message, prefixed by the rank. The error
  /// kind of the last call is lastErrorKind().
  ///
  /// A call that gives up on a running round that does not stop when
  /// cancelled (ErrorKind::Timeout, "did not stop in as long again") leaves
  /// it running on this rank's buffers: they must stay valid until the
  /// round ends. Until then, execute() fails at once (ErrorKind::Timeout)
  /// and the destructor waits for the round to end.
  Status execute(const Plan &plan, const void *sendbuf, void *recvbuf, size_t count, DataType type,
                 RedOp op);
  /// execute() of a plan validated once (PreparedCall.h), for callers that
  /// run one plan many times: no validation or checksum per call.
  Status execute(const ValidatedPlan &plan, const void *sendbuf, void *recvbuf, size_t count,
                 DataType type, RedOp op);

  /// The kind of the last execute()'s outcome (None after a success).
  ErrorKind lastErrorKind() const { return lastKind; }
  /// The message of the last execute()'s error ("" after a success).
  const std::string &lastErrorMessage() const { return lastMessage; }

private:
  /// Deposits \p call in this rank's slot and waits for the round's outcome.
  Status rendezvous(detail::WorldCall call);
  Communicator(std::shared_ptr<World> world, int rank) : world(std::move(world)), myRank(rank) {}
  std::shared_ptr<World> world;
  int myRank;
  /// The round a call gave up on while it still ran (none: 0), plus 1.
  uint64_t abandoned = 0;
  ErrorKind lastKind = ErrorKind::None;
  std::string lastMessage;
  friend class World;
};

} // namespace coll

#endif // COLL_RUNTIME_COMMUNICATOR_H
