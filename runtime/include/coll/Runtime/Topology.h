//===- Topology.h - A described system of ranks and links -------*- C++ -*-===//
/// \file
/// The machine a plan's time is predicted on (Predict.h): nodes of ranks,
/// each rank's port into its node's fabric, the nodes' NICs and the network
/// between them, and what a step of a threadblock costs. The text format,
/// one `key value` pair per line, `#` comments:
///
///     name              dgx-h100
///     ranks-per-node    8          # 0: every rank on one node
///     intra-bandwidth   450GB/s    # each rank's port, each direction
///     intra-latency     0.7us
///     nics-per-node     8          # rank r uses NIC (r mod ranks-per-node) mod nics
///     inter-bandwidth   400Gbit/s  # each NIC, each direction
///     inter-latency     5us
///     oversubscription  1          # the network core: NIC bandwidth / core bandwidth
///     nodes-per-leaf    0          # nodes under one leaf switch; 0: one core for all
///     rail-optimised    0          # 1: NIC i of a leaf's nodes on that leaf's switch i
///     copy-bandwidth    1500GB/s   # a threadblock's local copy or reduction; 0: free
///     threadblock-bandwidth 50GB/s # the most one threadblock moves; 0: no limit
///     node-bandwidth    0          # what all threadblocks of a node move together
///     reduce-bandwidth  0          # a threadblock's reduction, bytes of result; 0: as a copy
///     call-latency      0us        # a call's fixed cost (launch and completion)
///     direct-sends      0          # 1: a receiver reads a sent chunk where it lies
///     step-latency      1.5us      # the fixed cost of a step (Simple)
///     line-step-latency 1.2us      # the same under LL and LL128 (default: step-latency)
///     recv-reduce-latency 0us      # more for a step that reduces a receive into its buffer
///     cpus-per-node     0          # the CPUs the ranks of a node share; 0: no limit
///     switch-latency    0us        # a message's extra trip when its receiver must get a CPU
///     threads-per-rank  0          # the threads that run a rank's threadblocks; 0: one each
///     cache-bytes       0          # a node's last-level cache; 0: not described
///     cached-intra-bandwidth 0     # intra-bandwidth of calls that fit the cache; 0: the same
///     cached-threadblock-bandwidth 0 # likewise
///     cached-node-bandwidth  0     # likewise
///
/// Bandwidths take B/s, KB/s, MB/s, GB/s (powers of ten) or bit/s, Kbit/s,
/// Mbit/s, Gbit/s; latencies s, ms, us or ns; cache-bytes a size (B, KiB,
/// MiB, GiB, KB, MB, GB). Every key is optional except
/// intra-bandwidth (and inter-bandwidth when ranks-per-node is not 0).
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_TOPOLOGY_H
#define COLL_RUNTIME_TOPOLOGY_H

#include "coll/Runtime/Status.h"

#include <cstdint>
#include <string>

namespace coll {

/// One direction of a link.
struct LinkSpec {
  double bandwidth = 0; ///< Bytes per second.
  double latency = 0;   ///< Seconds.
};

/// A described system (see the file comment).
struct Topology {
  std::string name;
  uint32_t ranksPerNode = 0; ///< 0: every rank on one node.
  LinkSpec intra;            ///< A rank's port into its node's fabric.
  uint32_t nicsPerNode = 1;
  LinkSpec inter;              ///< One NIC.
  double oversubscription = 1; ///< Above 1: a shared core of that much less bandwidth.
  /// Nodes under one leaf switch (a scalable unit). With oversubscription
  /// above 1, a message between leaves crosses the sender's leaf's uplink
  /// and the receiver's leaf's downlink, each its leaf's ports' bandwidth
  /// divided by the oversubscription; a message within a leaf crosses
  /// neither. 0: every message between nodes crosses one core of all the
  /// NICs' bandwidth divided by the oversubscription.
  uint32_t nodesPerLeaf = 0;
  /// With nodesPerLeaf: the fabric is rail-optimised, NIC i of each node of
  /// a leaf on that leaf's switch i (its ports: the leaf's nodes), so a
  /// message stays under its leaf only between NICs of one index.
  bool railOptimised = false;
  double copyBandwidth = 0;        ///< Bytes per second of a local copy or reduction; 0: free.
  double threadblockBandwidth = 0; ///< The most one threadblock moves per second; 0: no limit.
  double nodeBandwidth = 0; ///< The most all threadblocks of a node move per second; 0: no limit.
  /// Bytes of result per second of one threadblock's local reduction
  /// (dst = src op dst: two reads and a write where a copy makes one of
  /// each); 0: a reduction costs what a copy does. See reduceCost().
  double reduceBandwidth = 0;
  /// The threads that run each rank's threadblocks (the CPU executors'
  /// workers: one by default, ProcessGroupOptions::workers and
  /// ExecOptions::workersPerRank); 0: a thread each. All threadblocks of a
  /// rank then move at most this many times threadblockBandwidth together.
  uint32_t threadsPerRank = 0;
  double callLatency = 0; ///< Seconds every call costs besides its steps.
  /// Seconds a call costs for each rank beyond the first that one host
  /// thread of a node prepares: the one-device mode's (DeviceWorld prepares
  /// every rank's call on the host before its launch); 0 where each rank
  /// prepares its own (threads, processes, a GPU each).
  double callRankLatency = 0;
  /// A chunk sent as it lies is read there by its receiver (LocalWorld's
  /// direct sends): the send moves no bytes, the receiver's copy does.
  bool directSends = false;
  double stepLatency = 0;      ///< Seconds per step (Simple).
  double lineStepLatency = -1; ///< Seconds per step under LL and LL128; < 0: stepLatency.
  /// Seconds a step costs for each chunk it moves beyond its first: the
  /// GPU kernel moves each chunk of a step as a copy of its own, with a
  /// barrier of the CTA (a send that leaves its chunks where they lie, for
  /// direct sends, moves none); 0: a step costs the same whatever its
  /// chunks.
  double pieceLatency = 0;
  /// Seconds a step that waits for a step of another threadblock of its
  /// rank (a cross-threadblock dependency) starts after that step is done:
  /// the GPU kernel's progress counter, published to global memory and
  /// polled there; 0: at once (the CPU executors' shared counters).
  double dependencyLatency = 0;
  /// Seconds a step that reduces a received chunk into a buffer of its
  /// own (rrc, rrcs) costs beyond step-latency: on a GPU, the receiver
  /// reads the sender's data and its own before it writes (coll-calibrate:
  /// the ping-pong received by rrc against r); 0: what any step costs.
  double recvReduceLatency = 0;
  /// The CPUs that run a node's ranks (the CPU executors: each rank's
  /// threads do its steps and copies); 0: as many as they need. With fewer
  /// CPUs than ranks, a call takes at least the node's CPU work (its steps'
  /// fixed costs, its copies at threadblock-bandwidth and its calls' fixed
  /// costs) divided by its CPUs.
  uint32_t cpusPerNode = 0;
  /// What a message's trip gains when its receiver is not running and must
  /// first be given a CPU (coll-calibrate: the trip between two processes
  /// that share one CPU, less the trip between two that do not). With R
  /// ranks on a node of C < R CPUs, the waiting ranks keep yielding their
  /// CPUs, a receiver gets one after the R / C - 1 others queued on it, and
  /// every trip there gains that many switches.
  double switchLatency = 0;
  /// Bytes of the last-level cache of a node's CPUs (the CPU executors);
  /// 0: not described. A call whose buffers on its fullest node (each
  /// rank's input and output; an in-place call's one buffer once) take
  /// less runs at the cached figures below, where they are given: its
  /// data stays in the cache from call to call, and its copies into the
  /// buffers do not stream past it (docs/performance.md, "Streaming
  /// stores").
  uint64_t cacheBytes = 0;
  double cachedIntraBandwidth = 0;       ///< intra.bandwidth in the cache; 0: the same.
  double cachedThreadblockBandwidth = 0; ///< threadblockBandwidth in the cache; 0: the same.
  double cachedNodeBandwidth = 0;        ///< nodeBandwidth in the cache; 0: the same.

  /// Bytes per second one threadblock copies: its cap
  /// (threadblock-bandwidth), else the private rate (copy-bandwidth); 0
  /// when neither is given.
  double threadblockCopyRate() const {
    return threadblockBandwidth > 0 ? threadblockBandwidth : copyBandwidth;
  }

  /// What a byte of a reduction's local result costs in bytes of a copy:
  /// threadblockCopyRate() over reduce-bandwidth; 1 when either is not
  /// given. The simulator moves each local reduction as that many times
  /// its bytes over the threadblock's and the node's caps.
  double reduceCost() const {
    const double copy = threadblockCopyRate();
    return reduceBandwidth > 0 && copy > 0 ? copy / reduceBandwidth : 1;
  }

  /// This topology for a call whose buffers take \p footprint bytes on
  /// its fullest node: with the cached figures when it fits the cache.
  Topology forFootprint(uint64_t footprint) const {
    Topology t = *this;
    if (cacheBytes == 0 || footprint >= cacheBytes)
      return t;
    if (cachedIntraBandwidth > 0)
      t.intra.bandwidth = cachedIntraBandwidth;
    if (cachedThreadblockBandwidth > 0) {
      // A reduction keeps its cost against a copy (reduceCost()).
      const double copy = threadblockCopyRate();
      if (reduceBandwidth > 0 && copy > 0)
        t.reduceBandwidth = reduceBandwidth * cachedThreadblockBandwidth / copy;
      t.threadblockBandwidth = cachedThreadblockBandwidth;
    }
    if (cachedNodeBandwidth > 0)
      t.nodeBandwidth = cachedNodeBandwidth;
    return t;
  }

  /// The node of \p rank.
  uint32_t nodeOf(uint32_t rank) const { return ranksPerNode ? rank / ranksPerNode : 0; }
  /// The leaf switch of NIC \p nic of node \p node (nodesPerLeaf above 0).
  uint64_t leafOf(uint32_t node, uint32_t nic) const {
    const uint64_t leaf = node / nodesPerLeaf;
    return railOptimised ? leaf * nicsPerNode + nic : leaf;
  }
  /// The NIC of \p rank within its node.
  uint32_t nicOf(uint32_t rank) const {
    const uint32_t local = ranksPerNode ? rank % ranksPerNode : rank;
    return nicsPerNode ? local % nicsPerNode : 0;
  }
};

/// Parses the text format of the file comment, or NCCL's topology XML
/// (NCCL_TOPO_DUMP_FILE; a text that starts with '<') for one node: its
/// GPUs are the node's ranks, a GPU's port the sum of its NVLinks at
/// NCCL's rate per link for its compute capability (else its PCIe link),
/// the NICs its <net> elements; the step and threadblock figures are the
/// GPU executor's. Errors name \p source and the line ("topo.txt:3:
/// unknown key 'bandwith'").
Status parseTopology(const std::string &text, const std::string &source, Topology &out);
/// parseTopology() of the file at \p path.
Result<Topology> loadTopology(const std::string &path);
/// The text format of \p topo (parseTopology() reads it back).
std::string formatTopology(const Topology &topo);
/// What a call of \p nranks ranks costs on \p topo besides its steps:
/// call-latency, and call-rank-latency for each rank beyond the first on
/// the fullest node.
double callSeconds(const Topology &topo, uint32_t nranks);

} // namespace coll

#endif // COLL_RUNTIME_TOPOLOGY_H
