//===- ProcessGroup.h - One rank per process, over shared memory -*- C++ -*-===//
/// \file
/// The multi-process CPU executor: each rank of a plan is its own process
/// on one host, and the ranks meet by a job name (or, with the create()
/// that takes a KeyValueStore, on several hosts: ranks of one host as
/// below, connections between hosts over UCX; docs/runtime.md, "Across
/// hosts"). Every rank creates a POSIX
/// shared-memory segment of its own, `/coll-<job>.<rank>` (a header with a
/// magic number, the rank, the number of ranks, its pid and a nonce, a
/// state word, a heartbeat and a doorbell), and maps its peers' segments.
/// Each execute() adds one segment per rank for the call,
/// `/coll-<job>.<rank>.<call>`, which holds the FIFOs of the connections
/// the rank receives on and its threadblocks' progress counters, and which
/// the rank's senders map; it is unlinked when the call ends.
///
/// \code
///   // In each of the job's processes, with its own rank:
///   auto group = coll::ProcessGroup::create("myjob", rank, nranks);
///   if (!group) /* group.message() */;
///   coll::Status s = (*group)->execute(plan, send, recv, count,
///                                      coll::DataType::Float32, coll::RedOp::Sum);
/// \endcode
///
/// Semantics are LocalWorld's (Executor.h): counts, chunks, in place, Avg.
/// Every rank must call with the same plan (by checksum), count, type,
/// operator and slice size, or every rank fails with ErrorKind::Mismatch,
/// naming the first rank that differs from rank 0. A rank that dies (its
/// process exits or is killed before its part of the call is done), or that
/// fails, makes the others fail with ErrorKind::Remote within
/// ProcessGroupOptions::livenessIntervalSeconds or so; a run that stops
/// moving fails after ProcessGroupOptions::timeoutSeconds with an error
/// naming the threadblock, the step and the rank it waits for; a rank that
/// waits longer than ProcessGroupOptions::setupTimeoutSeconds for a peer to
/// call fails, and so does the peer when it calls. A failing rank publishes
/// its message, which the others report (`rank R failed: ...`). After such
/// an error the group is broken: later calls fail at once.
///
/// Every name of the job is unlinked in every case: a call's segment as
/// soon as every rank that sends to it has mapped it (and at the latest when
/// the call ends), a rank's own segment when its group is destroyed, and a
/// dead rank's segments by the ranks that notice its death. A rank that
/// finds a segment of its own name left by a dead process (a crashed earlier
/// job of the same name) replaces it; peers recognize a rank's live segment
/// by its pid, the pid's start time and its nonce, and a job's instance by
/// rank 0's nonce, so that a name reused at once never joins a rank to the
/// previous instance. What a job killed as a whole leaves is removed by the
/// next job to start on the host (removeDeadSegments()).
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_PROCESSGROUP_H
#define COLL_RUNTIME_PROCESSGROUP_H

#include "coll/Runtime/Communicator.h"
#include "coll/Runtime/DataType.h"
#include "coll/Runtime/KeyValueStore.h"
#include "coll/Runtime/Plan.h"
#include "coll/Runtime/PreparedCall.h"
#include "coll/Runtime/Status.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace coll {

/// Options of a ProcessGroup. Every rank of a job should use the same.
struct ProcessGroupOptions {
  /// How long create() waits for every peer's segment to appear, and
  /// execute() for every peer to call.
  double setupTimeoutSeconds = 60;
  /// A worker none of whose threadblocks could move for this long fails,
  /// naming what each waits for and the state of the ranks it waits on.
  double timeoutSeconds = 30;
  /// How often a waiting rank checks that its peers are alive (and beats
  /// its own heartbeat): the delay before a dead peer is noticed.
  double livenessIntervalSeconds = 0.05;
  /// Elements of each chunk per pass of the program (ExecOptions).
  uint64_t sliceElements = 16384;
  /// The protocol of the connections on this host (ExecOptions::protocol);
  /// every rank must choose alike (a call whose ranks chose differently
  /// fails on every rank). Connections with ranks on other hosts run
  /// Simple.
  ProtocolChoice protocol;
  /// Worker threads of this rank (the calling thread is one of them); 0
  /// gives every threadblock its own.
  uint32_t workers = 1;
  /// The most memory a call of this rank may allocate besides its buffers
  /// (its scratch, its shared-memory FIFOs, a copy of its input), as
  /// ExecOptions::memoryLimitBytes: 0 is defaultMemoryLimit() of this rank's
  /// buffer bytes, noMemoryLimit no cap. A call over it fails on every rank.
  uint64_t memoryLimitBytes = 0;
  /// Data sides (shared-memory segments, scratch, threadblock runs) kept
  /// for calls of the descriptions (plan, count, type, operator) used most
  /// recently, at least 1: a call like one of them sets nothing up. Every
  /// rank must keep as many.
  uint32_t keptCalls = 8;
  /// Direct sends (docs/runtime.md, "Direct sends"): a send whose data
  /// stays as it is until the call ends leaves it where it lies, and the
  /// receiver reads it there instead of through a message slot, when the
  /// data lies in memory from allocate() (the receiver maps it: no copy
  /// but the one the step makes) and the two processes may read each
  /// other's memory (tried when a call first needs it).
  bool directReads = true;
  /// Direct sends from memory that allocate() did not make (an ordinary
  /// buffer, as a PyTorch tensor's): the receiver fetches each piece with
  /// one cross-memory-attach copy (process_vm_readv), in calls whose pieces
  /// (a chunk's slice) hold at least crossMemoryMinBytes. Off by default:
  /// on a 2-core virtual machine the kernel's copy ran at 60% of memcpy's
  /// speed, and lost to the slots (docs/performance.md).
  bool crossMemoryReads = false;
  uint64_t crossMemoryMinBytes = 32768;
  /// Copies into this rank's buffers write past the caches (non-temporal
  /// stores) in calls whose input and output bytes (in place: the larger
  /// one), times the ranks, reach this: 0 (the default) is the size of the last-level cache,
  /// noStreamingStores never (ExecOptions::streamingStoresFrom). Every rank should choose alike.
  uint64_t streamingStoresFrom = 0;
};

/// This process's rank of a job whose ranks are processes on one host.
/// One call at a time: an execute() while another runs (from another
/// thread) is refused with ErrorKind::InvalidArgument; allocate() and
/// deallocate() must not race with each other.
class ProcessGroup {
public:
  /// Joins job \p jobName (1 to 200 characters of [A-Za-z0-9_-]) as rank
  /// \p rank of \p nranks: creates this rank's segment, then waits until
  /// every rank has joined the same instance of the job
  /// (ProcessGroupOptions::setupTimeoutSeconds).
  /// \p errorKind, when given, receives the kind of the outcome.
  static Result<std::unique_ptr<ProcessGroup>>
  create(const std::string &jobName, int rank, int nranks,
         const ProcessGroupOptions &options = ProcessGroupOptions(),
         ErrorKind *errorKind = nullptr);

  /// Joins job \p jobName as rank \p rank of \p nranks whose ranks may
  /// span hosts, meeting through \p store (used during the call only; a
  /// job name once per store). Ranks on this host work over shared memory
  /// as above; a connection to a rank on another host (another
  /// host identity: the COLL_HOST environment variable, else the host
  /// name, the boot, the /dev/shm directory and the network namespace)
  /// runs over the network (UCX).
  /// The same plans run across any mix (docs/runtime.md, "Across hosts").
  static Result<std::unique_ptr<ProcessGroup>>
  create(const std::string &jobName, int rank, int nranks, KeyValueStore &store,
         const ProcessGroupOptions &options = ProcessGroupOptions(),
         ErrorKind *errorKind = nullptr);

  /// Whether rank \p q is on another host than this rank.
  bool isRemote(int q) const;
  /// Whether this build can reach ranks on other hosts (it has UCX).
  static bool networkAvailable();
  /// This process's host as the store-based create() tells hosts apart:
  /// ranks of equal identities share memory.
  static std::string hostIdentity();

  /// Leaves the job: unlinks this rank's segment, and those of peers that
  /// died.
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup &) = delete;
  ProcessGroup &operator=(const ProcessGroup &) = delete;

  /// Runs this rank's part of \p plan (all ranks loaded; info.nranks must
  /// be size()) with this rank's buffers, sized as collectiveBufferElements()
  /// says for \p count. In place when the buffers are the collective's
  /// in-place alias. Blocks until every rank has called and this rank's
  /// results are in \p recvbuf. See the file comment for errors; the kind
  /// of the last call's outcome is lastErrorKind(), and \p errorKind, when
  /// given, receives this call's (also when it was refused because another
  /// call runs, which leaves lastErrorKind() alone).
  Status execute(const Plan &plan, const void *sendbuf, void *recvbuf, size_t count, DataType type,
                 RedOp op, ErrorKind *errorKind = nullptr);
  /// execute() of a plan validated once (and its checksum computed once):
  /// for a plan run many times.
  Status execute(const ValidatedPlan &plan, const void *sendbuf, void *recvbuf, size_t count,
                 DataType type, RedOp op, ErrorKind *errorKind = nullptr);
  /// execute() of the call \p args, also with its buffers in blocks of one
  /// unit each (CallArgs::sendBlocks, recvBlocks): a list of tensors
  /// (all_gather's outputs, all_to_all's inputs and outputs) sent from and
  /// received into where they lie, with no copy through one buffer.
  Status execute(const ValidatedPlan &plan, const CallArgs &args, ErrorKind *errorKind = nullptr);

  /// Memory in a shared-memory segment of this rank, for buffers (page
  /// aligned, zeroed, reserved: no SIGBUS when /dev/shm is short), which
  /// the peers may map to read what this rank sends from it where it lies
  /// (ProcessGroupOptions::directReads; registered memory); null
  /// with \p bytes == 0 or when it cannot be had, and then \p error, when
  /// given, says why (how many bytes, for which segment, where). Free it
  /// with deallocate(); what is left is unmapped when the group is
  /// destroyed.
  void *allocate(size_t bytes, std::string *error = nullptr);
  /// Frees what allocate() returned; null is ignored.
  void deallocate(void *ptr);

  /// This process's rank.
  int rank() const;
  /// The number of ranks.
  int size() const;
  /// The job name.
  const std::string &jobName() const;
  /// The kind of the last execute()'s outcome (None after a success).
  ErrorKind lastErrorKind() const { return lastKind; }
  /// The message of the last execute()'s error ("" after a success).
  const std::string &lastErrorMessage() const { return lastMessage; }
  /// How many messages this rank read where their sender left them in the
  /// last execute() (ProcessGroupOptions::directReads, crossMemoryReads),
  /// rather than through a message slot.
  uint64_t lastDirectMessages() const { return lastDirect; }

  /// The shared-memory names (without the leading '/') of job \p jobName
  /// that exist now, sorted; empty where shared memory is not a directory
  /// (Linux: /dev/shm). For tests and cleanup tools.
  static std::vector<std::string> listJobSegments(const std::string &jobName);

  /// Unlinks the segments of any job on this host (and pid namespace) whose
  /// owners are dead and have been silent for 5 s: what jobs killed as a
  /// whole left, but those of job \p exceptJob (when not empty). create()
  /// calls it for rank 0, sparing its own job, whose ranks replace their
  /// stale segments themselves. Returns how many it removed.
  static size_t removeDeadSegments(const std::string &exceptJob = "");

  struct State; ///< lib/ProcessGroup.cpp.

private:
  ProcessGroup();
  static Result<std::unique_ptr<ProcessGroup>> createGroup(const std::string &jobName, int rank,
                                                           int nranks, KeyValueStore *store,
                                                           const ProcessGroupOptions &options,
                                                           ErrorKind *errorKind);
  /// One call at a time, and no exception leaves: \p plan is validated
  /// here, unless \p validated is given instead.
  Status enter(const Plan *plan, const ValidatedPlan *validated, const CallArgs &args,
               ErrorKind *errorKind);
  Status executeCall(const Plan *plan, const ValidatedPlan *validated, const CallArgs &args);
  std::unique_ptr<State> state;
  ErrorKind lastKind = ErrorKind::None;
  std::string lastMessage;
  uint64_t lastDirect = 0;
};

} // namespace coll

#endif // COLL_RUNTIME_PROCESSGROUP_H
