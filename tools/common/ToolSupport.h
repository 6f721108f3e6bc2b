//===- ToolSupport.h - What coll-run and coll-perf share --------*- C++ -*-===//
/// \file
/// The pieces of a tool that runs plans on local ranks and checks them:
/// option values, the per-rank size of a call, buffers in memory shared
/// with forked rank processes, launching those processes and collecting
/// what they report, a barrier between them and the launcher, and the
/// comparison of every rank's output with the reference.
//===----------------------------------------------------------------------===//
#ifndef COLL_TOOLS_COMMON_TOOLSUPPORT_H
#define COLL_TOOLS_COMMON_TOOLSUPPORT_H

#include "coll/Runtime/DataType.h"
#include "coll/Runtime/Executor.h"
#include "coll/Runtime/Plan.h"
#include "coll/Runtime/PreparedCall.h"
#include "coll/Runtime/ProcessGroup.h"
#include "coll/Runtime/Status.h"
#include "coll/Runtime/TcpStore.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <sys/types.h>
#include <vector>

namespace coll::tools {

//===----------------------------------------------------------------------===//
// Option values
//===----------------------------------------------------------------------===//

/// Parses "64M", "1K", "4096", "1G" (binary multiples; a trailing B is fine).
bool parseSize(const std::string &text, uint64_t &out);
/// Parses a non-negative decimal integer, nothing after it.
bool parseUnsigned(const std::string &text, uint64_t &out);
/// Parses --streaming-stores' value: auto (0), off (noStreamingStores),
/// or a size (at least 1 byte).
bool parseStreamingStores(const std::string &text, uint64_t &out);
/// Parses a positive number of seconds.
bool parseSeconds(const std::string &text, double &out);

/// How the ranks of a run execute, whichever executor runs them.
struct RunSettings {
  uint64_t sliceElements = ExecOptions().sliceElements;
  uint32_t workers = ExecOptions().workersPerRank;
  double timeoutSeconds = ExecOptions().timeoutSeconds;
  uint64_t memoryLimitBytes = ExecOptions().memoryLimitBytes; ///< 0: the default cap.
  /// Direct sends (ExecOptions::directSends, ProcessGroupOptions::directReads).
  bool directSends = ExecOptions().directSends;
  /// ProcessGroupOptions::crossMemoryReads.
  bool crossMemoryReads = ProcessGroupOptions().crossMemoryReads;
  /// --protocol: ExecOptions::protocol, ProcessGroupOptions::protocol.
  ProtocolChoice protocol;
  /// --streaming-stores: ExecOptions::streamingStoresFrom,
  /// ProcessGroupOptions::streamingStoresFrom.
  uint64_t streamingStoresFrom = ExecOptions().streamingStoresFrom;

  /// LocalWorld's options in \p mode.
  ExecOptions execOptions(ExecMode mode) const;
  /// A ProcessGroup's options.
  ProcessGroupOptions processGroupOptions() const;
};

//===----------------------------------------------------------------------===//
// Sizes and buffers
//===----------------------------------------------------------------------===//

/// How many per-rank units the larger buffer of a call of \p info holds.
uint64_t sizeFactor(const PlanInfo &info);

/// The count of a call of \p plan whose larger per-rank buffer takes at most
/// \p bytes of \p type, as nccl-tests measures size (the output of
/// allgather and gather, the input of reducescatter and scatter, either of
/// alltoall, the only one of the others); a user-declared collective's
/// count is rounded down to a whole number of its chunks per unit.
uint64_t countForBytes(const ValidatedPlan &plan, DataType type, uint64_t bytes);

/// A rank's send and receive buffers for one call.
struct RankPointers {
  const void *send = nullptr;
  void *recv = nullptr;
};

/// Rank \p rank's buffers for an in-place call of \p kind in the one
/// buffer \p buffer: the collective's alias, where one buffer holds the
/// other at block inPlaceBlock() of \p unitBytes (allgather's input,
/// reducescatter's output).
RankPointers inPlacePointers(CollectiveKind kind, uint32_t rank, uint64_t unitBytes, char *buffer);

/// Memory shared with the processes this one forks (MAP_SHARED), handed
/// out in 64-byte aligned pieces.
class SharedArena {
public:
  SharedArena() = default;
  SharedArena(const SharedArena &) = delete;
  SharedArena &operator=(const SharedArena &) = delete;
  ~SharedArena();
  /// Maps \p n bytes; false when the system refuses.
  bool reserve(uint64_t n);
  /// The next \p n bytes (within what reserve() mapped).
  char *take(uint64_t n);
  /// What take(\p n) uses of the arena, alignment included.
  static uint64_t footprint(uint64_t n) { return (n + 63) & ~uint64_t(63); }

private:
  char *base = nullptr;
  uint64_t bytes = 0, used = 0;
};

//===----------------------------------------------------------------------===//
// Ranks as processes
//===----------------------------------------------------------------------===//

/// A job name for ProcessGroup::create() unique to this run on this host:
/// \p prefix, the pid and the time.
std::string uniqueJobName(const std::string &prefix);

/// `--bootstrap tcp://host:port --rank r`: a rank of a job that may span
/// hosts, meeting its peers through a TcpStore at host:port, which rank 0
/// serves (on every interface).
struct Bootstrap {
  std::string host;
  uint16_t port = 0;
  int rank = -1;
  int64_t nranks = -1; ///< --nranks, or -1 (the plan's).
  std::string job;     ///< --job, or "" (one made from the port).
  std::shared_ptr<TcpStoreServer> server;
  std::shared_ptr<TcpStore> store;

  bool given() const { return !host.empty(); }
  /// Parses "tcp://host:port" into host and port; false when malformed.
  bool parse(const std::string &url);
  /// Rank 0 starts the server; every rank connects (waiting up to
  /// \p timeoutSeconds). Returns "" or the error.
  std::string connect(double timeoutSeconds);
  /// The job name every rank uses.
  std::string jobName() const;
};

/// One process per rank, forked by this one, each reporting its outcome in
/// a SharedArena.
class RankProcesses {
public:
  /// What start() takes of the arena for \p nranks ranks.
  static uint64_t arenaBytes(uint32_t nranks);

  /// Forks \p nranks processes; rank r runs \p body(r), which returns ""
  /// or the rank's error, and exits. A rank never outlives this process.
  /// Returns false when a process cannot be started (finish() says why).
  bool start(uint32_t nranks, SharedArena &arena,
             const std::function<std::string(uint32_t rank)> &body);
  /// False once a rank has failed, died or exited with an error (it reaps
  /// what has ended, without waiting).
  bool healthy();
  /// Waits for every rank; returns "" or the errors, one per failed rank
  /// ("rank R: why"), joined by "\n<tool>: error: ".
  std::string finish(const char *tool);

private:
  struct Report;
  Report *reports = nullptr;
  std::vector<pid_t> pids;
  std::vector<int> exitStatus; ///< waitpid()'s status; -1 while running.
  std::string startError;
};

/// A barrier among the rank processes and their launcher, in a SharedArena
/// (placement new before the fork). Any party may abort it, after which
/// every wait returns false at once.
class SharedBarrier {
public:
  explicit SharedBarrier(uint32_t parties) : parties(parties) {}
  /// Waits until every party has arrived: true, or false when the barrier
  /// is (or gets) aborted or \p stillOk, polled while it waits, says no
  /// (which aborts it).
  bool wait(const std::function<bool()> &stillOk = {});
  /// Releases every waiter with false, now and for good.
  void abort() { stopped.store(1, std::memory_order_release); }

private:
  // Arrivals of the current generation; the last to arrive resets them
  // and publishes the next generation (release), which the waiters acquire.
  std::atomic<uint32_t> arrived{0};
  std::atomic<uint32_t> generation{0};
  std::atomic<uint32_t> stopped{0};
  uint32_t parties;
};

//===----------------------------------------------------------------------===//
// Checking
//===----------------------------------------------------------------------===//

/// The outcome of checkOutputs().
struct CheckOutcome {
  uint64_t wrong = 0;        ///< Wrong elements over every rank.
  std::string firstMismatch; ///< "rank R output element I is X, expected Y", or "".
};

/// Compares every defined element of every rank's output in \p outputs
/// (sized by planBufferElements()) with the reference result of \p plan on
/// \p inputs (the inputs the call was given); with \p onlyRank, that
/// rank's only (the others' outputs may be null).
Result<CheckOutcome> checkOutputs(const Plan &plan, uint64_t count, DataType type, RedOp op,
                                  const std::vector<const void *> &inputs,
                                  const std::vector<const void *> &outputs, int onlyRank = -1);

} // namespace coll::tools

#endif // COLL_TOOLS_COMMON_TOOLSUPPORT_H
