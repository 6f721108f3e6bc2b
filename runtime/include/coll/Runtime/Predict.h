//===- Predict.h - How long a plan takes on a described system --*- C++ -*-===//
/// \file
/// predictPlan() runs a plan in simulated time on a Topology. It is the
/// executors' interpreter core (Interpreter.h) over a platform that moves
/// no data: every threadblock steps through its program slice by slice
/// with the runtime's semantics (connection depth, cross-threadblock
/// dependencies, the protocol's line geometry), and the platform turns
/// each step into time:
///
///  - a step costs the topology's step latency, plus its local copies and
///    reductions at copy bandwidth;
///  - a message is a flow over the links between its ranks (the sender's
///    port and the receiver's within a node; the two NICs, and the core
///    when oversubscribed, between nodes), and over its threadblock when
///    the topology caps what one threadblock sends. Flows that share a link share
///    its bandwidth max-min fairly, recomputed whenever a flow starts or
///    ends. The sending step ends when its flow has drained; the message
///    is there for the receiver one link latency later, and the slot it
///    frees is free for the sender one latency after the receiving step;
///  - LL carries 8 data bytes per 16-byte line, LL128 120 per 128;
///  - an out-of-place call (PredictOptions::outOfPlace) adds the staging
///    copies the executors make around the plan (PreparedCall.h).
///
/// Events at the same time run in a fixed order: the same plan, topology
/// and size give the same prediction, to the bit.
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_PREDICT_H
#define COLL_RUNTIME_PREDICT_H

#include "coll/Runtime/DataType.h"
#include "coll/Runtime/Plan.h"
#include "coll/Runtime/Protocol.h"
#include "coll/Runtime/Status.h"
#include "coll/Runtime/Topology.h"

#include <cstdint>
#include <string>
#include <vector>

namespace coll {

/// How predictPlan() runs a call.
struct PredictOptions {
  /// Elements of a chunk per slice, as ExecOptions::sliceElements.
  uint64_t sliceElements = 16384;
  /// The protocol: the plan's unless forced.
  bool forceProtocol = false;
  ProtocolKind protocol = ProtocolKind::Simple;
  /// Record when every step ran (Prediction::spans).
  bool recordSpans = false;
  /// The call is out of place (the send and receive buffers apart): the
  /// executors' staging copies around the plan are part of its time, as
  /// flows of each rank over its threadblock's and its node's caps, before
  /// the rank's first step and after its last. For an in-place plan of
  /// allgather, say, a rank first copies its input into its block of the
  /// output.
  bool outOfPlace = false;
};

/// When one step of one threadblock ran, in a prediction: from its start to
/// the end of its data movement, in seconds from the call's first step.
struct StepSpan {
  uint32_t rank = 0, tb = 0;
  uint32_t step = 0;  ///< The step's index in its threadblock.
  uint64_t slice = 0; ///< The slice it worked on.
  double start = 0, end = 0;
};

/// What one link carried.
struct LinkUsage {
  std::string name;    ///< "rank 3 out", "node 1 nic 0 in", "core".
  double bytes = 0;    ///< Bytes that crossed it.
  double busy = 0;     ///< Seconds during which some flow crossed it.
  double capacity = 0; ///< Bytes per second.
};

/// The longest chain of events that ends the run: what its time went to.
struct CriticalPath {
  double fixed = 0;          ///< Seconds of the steps' fixed cost.
  double moving = 0;         ///< Seconds of the steps' data movement (flows, copies).
  double latency = 0;        ///< Seconds of link latency (messages, freed slots).
  double waiting = 0;        ///< Seconds of slack along the chain.
  uint32_t steps = 0;        ///< Steps on the chain.
  uint32_t hops = 0;         ///< Messages and freed slots on the chain ...
  uint32_t betweenNodes = 0; ///< ... of which between nodes.
};

/// The predicted run of one call.
struct Prediction {
  /// From the call's start to the last rank's end: its last step, or the
  /// copies after it of an out-of-place call (PredictOptions::outOfPlace),
  /// plus the topology's call latency; at least cpuSeconds.
  double seconds = 0;
  /// The busiest node's CPU work over its CPUs (Topology::cpusPerNode; 0
  /// without a limit): the call takes at least this, however its steps
  /// overlap.
  double cpuSeconds = 0;
  uint32_t cpuNode = 0;   ///< That node.
  uint64_t sizeBytes = 0; ///< nccl-tests' size: the larger per-rank buffer.
  double algbw = 0;       ///< Bytes per second: sizeBytes / seconds.
  double busbw = 0;       ///< algbw times the collective's bus factor.
  ProtocolKind protocol = ProtocolKind::Simple;
  uint64_t slices = 0;          ///< Slices of the run.
  uint64_t steps = 0;           ///< Steps executed, over every threadblock.
  uint64_t messages = 0;        ///< Messages sent.
  uint64_t events = 0;          ///< Simulation events (the simulator's own cost).
  uint32_t lastRank = 0;        ///< The rank of the threadblock that finished last ...
  uint32_t lastTb = 0;          ///< ... and its index in the rank.
  std::vector<LinkUsage> links; ///< Every link some message crossed.
  /// Up to the end of the last rank (its last threadblock, and the copies
  /// after it of an out-of-place call), the call's fixed cost aside.
  CriticalPath critical;
  /// Every step's span, in the order they ended, with PredictOptions::recordSpans.
  std::vector<StepSpan> spans;
};

/// Predicts a call of \p count elements of \p type per rank (the
/// executors' count) of \p plan on \p topo. An error when the plan is
/// invalid, the topology has fewer ranks than the plan needs links for, or
/// the simulated run cannot finish (a threadblock waits for ever).
Result<Prediction> predictPlan(const Plan &plan, const Topology &topo, uint64_t count,
                               DataType type, const PredictOptions &options = {});

/// The sizes of a sweep: \p minBytes, then each \p factor times the last,
/// up to \p maxBytes (none past it, and none that would overflow); only
/// \p minBytes when \p factor is below 2, none when it exceeds maxBytes.
std::vector<uint64_t> sweepSizes(uint64_t minBytes, uint64_t maxBytes, unsigned factor);

/// One call of predictPlans(): \p plan (which must outlive the call) with
/// \p count elements per rank.
struct PredictCall {
  const Plan *plan = nullptr;
  uint64_t count = 0;
};

/// predictPlan() of each of \p calls on \p topo, on up to \p threads
/// threads at once (0: the machine's CPUs, at most 8): the results in the
/// order of \p calls, each the same as a predictPlan() of its own. Every
/// simulation in flight holds its own memory.
std::vector<Result<Prediction>> predictPlans(const std::vector<PredictCall> &calls,
                                             const Topology &topo, DataType type,
                                             const PredictOptions &options = {},
                                             unsigned threads = 0);

} // namespace coll

#endif // COLL_RUNTIME_PREDICT_H
