//===- Predictor.cpp - Plans in simulated time on a topology --------------===//
///
/// A discrete-event simulation (Predict.h). Threadblocks run the shared
/// interpreter over SimPlatform, which moves no data and never waits: a
/// step whose message, slot or dependency is not there yet returns
/// WouldBlock, and the threadblock is woken when the event it waits for
/// gets a time. A threadblock in the middle of a step (its flow draining,
/// its copies running) refuses its next step the same way, at checkAbort().
//===----------------------------------------------------------------------===//

#include "OutOfPlace.h"
#include "coll/Runtime/ChunkLayout.h"
#include "coll/Runtime/Collective.h"
#include "coll/Runtime/Interpreter.h"
#include "coll/Runtime/Parallel.h"
#include "coll/Runtime/Predict.h"
#include "coll/Runtime/PreparedCall.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <tuple>
#include <unordered_map>

namespace coll {

namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

/// Fake addresses: the simulation never touches memory, but tells a step's
/// writes into its send slot from its other writes by address.
char *const kBufferBase = reinterpret_cast<char *>(uintptr_t(1) << 40);
char *const kSendSlot = reinterpret_cast<char *>(uintptr_t(1) << 44);
char *const kRecvSlot = reinterpret_cast<char *>(uintptr_t(1) << 45);
constexpr uintptr_t kSlotSpan = uintptr_t(1) << 43;

bool inSendSlot(const char *p) {
  return uintptr_t(p) >= uintptr_t(kSendSlot) && uintptr_t(p) < uintptr_t(kSendSlot) + kSlotSpan;
}

/// A path: at most five links (the sending threadblock, its node, port or
/// NIC out, core, port or NIC in).
struct Path {
  uint32_t ids[5] = {0, 0, 0, 0, 0};
  uint8_t n = 0;
  const uint32_t *begin() const { return ids; }
  const uint32_t *end() const { return ids + n; }
  bool empty() const { return n == 0; }
  void push_back(uint32_t id) { ids[n++] = id; }
};

/// A chain of events up to a moment (Predict.h's CriticalPath), carried by
/// every event that can start a step.
using PathSum = CriticalPath;

PathSum hop(PathSum p, double latency, bool betweenNodes) {
  p.latency += latency;
  ++p.hops;
  p.betweenNodes += betweenNodes;
  return p;
}

/// An event that can start a step: when it happens, and the chain that
/// led to it.
struct TimedPath {
  double at = 0;
  PathSum path;
};

/// A connection's events of one kind in order (message m there for the
/// receiver, or its slot free for the sender), from message `base` on:
/// those no longer asked for are dropped.
struct EventWindow {
  std::deque<TimedPath> events;
  uint64_t base = 0;
  bool waiting = false; ///< Its threadblock waits for the next event.
  /// Event \p m, or null when it has not happened yet.
  const TimedPath *find(uint64_t m) const {
    return m - base < events.size() ? &events[m - base] : nullptr;
  }
  void dropBefore(uint64_t m) {
    for (; base < m && !events.empty(); ++base)
      events.pop_front();
  }
};

/// One connection: a sender's threadblock to a receiver's on a channel.
struct Connection {
  uint32_t senderTb = 0, receiverTb = 0; ///< Global threadblock indices.
  Path links;                            ///< The flow's path.
  double latency = 0;
  bool betweenNodes = false;
  EventWindow arrivals; ///< For the receiver.
  EventWindow freed;    ///< For the sender.
  /// Messages whose sending step started (their index), and the next one
  /// to arrive, with those that finished crossing ahead of it.
  uint64_t issued = 0, nextArrival = 0;
  std::map<uint64_t, TimedPath> early;
};

/// A message in flight.
struct Flow {
  Path links;
  double remaining = 0; ///< Bytes left at `since`.
  double rate = 0;      ///< Bytes per second since `since`.
  double since = 0;
  uint32_t tb = 0;      ///< The sending threadblock.
  uint32_t version = 0; ///< Bumped whenever its end event is replaced (stale end events).
  bool active = false;
  /// A message between nodes, which its sending step does not wait for
  /// (the network engine, or a GIN put, moves it): when it ends it arrives
  /// as message `message` of connection `conn`; `chain` is the path to
  /// its start.
  bool detached = false;
  uint32_t conn = 0;
  uint64_t message = 0;
  PathSum chain;
  double chainAt = 0;
  uint32_t mark = 0; ///< Component search scratch.
  /// When its pending end event fires (kNever: none); it may fire before
  /// the flow ends, when a reshare slowed the flow down since.
  double scheduledEnd = 0;
  /// A rank's staging copies (PreparedCall's before or after), which no
  /// step waits for: when it ends the rank starts (gateAfter false) or is
  /// done; -1 for a step's flow.
  int32_t gate = -1;
  bool gateAfter = false;
};

struct Link {
  LinkUsage use;
  std::vector<uint32_t> flows; ///< Active flows crossing it.
  double busySince = 0;
  double residual = 0; ///< Rate computation scratch.
  uint32_t unfrozen = 0;
  uint32_t mark = 0;
  uint32_t pos = 0;   ///< Its index in the component (reshare() scratch).
  uint32_t stamp = 0; ///< Bumped when its share changes (reshare() scratch).
  /// The most one flow across it can get elsewhere (0: unknown): while its
  /// flows times this fits its capacity it cannot bind, and is left out of
  /// the rates (the network core, which every flow between nodes crosses).
  double flowBound = 0;
  bool slack = false;
};

class Simulation;

/// Interpreter.h's Platform for one simulated threadblock.
class SimPlatform {
public:
  SimPlatform(Simulation &sim, uint32_t tb) : sim(sim), tb(tb) {}

  MemPiece piece(BufferKind buf, uint32_t chunk, uint64_t slice) const;
  char *slotPiece(char *slot, uint32_t j) const { return slot + j; }
  const char *recvPiece(char *slot, uint32_t j, uint64_t) const { return slot + j; }
  void recvCopy(char *, char *, uint32_t, uint64_t n) { local += n; }
  /// A send of data as it lies: with direct sends the receiver reads it
  /// there, and only its own copy costs.
  void sendPiece(char *, uint32_t, const char *, uint64_t n);
  bool sendsResult() const { return false; }

  WaitResult checkAbort() const;
  WaitResult waitDependency(uint32_t otherTb, uint32_t step, uint64_t slice);
  WaitResult waitRecv(char *&slot, uint32_t count, uint64_t slice);
  WaitResult waitSend(char *&slot, uint32_t count, uint64_t slice);
  /// Whether event \p e has happened by now: if not, its threadblock is
  /// woken then; if so, the step's chain may start from it.
  WaitResult reached(const TimedPath &e);
  /// reached() of event \p m of \p w; a threadblock waits for one not yet
  /// known.
  WaitResult waitFor(EventWindow &w, uint64_t m);
  void releaseRecv() { releases = true; }
  void publishSend() { publishes = true; }
  void markProgress(uint64_t, uint32_t) {}

  void copy(char *dst, const char *, uint64_t n) { note(dst, n); }
  void copy2(char *dst0, char *dst1, const char *, uint64_t n) {
    note(dst0, n);
    note(dst1, n);
  }
  void reduce(char *dst, const char *, const char *, uint64_t n) { noteReduced(dst, n); }
  void reduce2(char *dst0, char *dst1, const char *, const char *, uint64_t n) {
    noteReduced(dst0, n);
    note(dst1, n); // The second destination is a copy of the first's result.
  }

  void stepBegin(uint64_t, uint32_t) {
    local = sent = sentInPlace = reducedLocal = 0;
    releases = publishes = false;
  }
  void stepEnd(uint64_t slice, uint32_t step, const Instruction &);

  uint64_t local = 0, sent = 0; ///< Elements of the step.
  uint64_t reducedLocal = 0;    ///< Of `local`, those a reduction wrote.
  uint64_t sentInPlace = 0;     ///< Sent where they lie (direct sends).
  bool releases = false, publishes = false;
  uint64_t received = 0, posted = 0; ///< Messages taken and sent so far.

private:
  /// A write of \p n elements to \p dst: into the send slot it is the
  /// message (its bytes travel as the flow), elsewhere a local copy.
  void note(const char *dst, uint64_t n) {
    if (inSendSlot(dst))
      sent += n;
    else
      local += n;
  }
  /// The same for a reduction's result: a local one costs more than a copy
  /// where the topology says so (reduce-bandwidth).
  void noteReduced(const char *dst, uint64_t n) {
    if (!inSendSlot(dst))
      reducedLocal += n;
    note(dst, n);
  }
  Simulation &sim;
  uint32_t tb;
};

/// One threadblock's state.
struct SimTb {
  uint32_t rank = 0, index = 0; ///< Its rank and its index there.
  uint32_t numSteps = 0;
  int32_t sendConn = -1, recvConn = -1;
  bool busy = false;        ///< In a step.
  bool blocked = false;     ///< Its next step waited for something (a switch, oversubscribed).
  uint32_t flowsLeft = 0;   ///< Its step's flows still draining.
  double computeEnd = 0;    ///< Its step's private copies end.
  Path local;               ///< The links its local copies cross (none: private).
  uint64_t linear = 0;      ///< Steps completed (slice * numSteps + step).
  uint64_t runSlice = 0;    ///< The running step's slice ...
  uint32_t runStep = 0;     ///< ... and index.
  uint64_t runMessage = 0;  ///< The message its running step sends ...
  bool runDetached = false; ///< ... when a detached flow carries it.
  /// Completion times of its steps, when another threadblock waits on them.
  std::vector<TimedPath> done;
  bool tracked = false;
  PathSum path;                     ///< The chain up to its last step's end.
  PathSum enabler;                  ///< The latest event its next step waited for ...
  double enablerAt = 0;             ///< ... and when it happened.
  PathSum stepBase;                 ///< The chain its running step started from ...
  double stepStart = 0;             ///< ... at this time.
  double stepFixed = 0;             ///< Its fixed cost (stepLatency() of its chunks).
  std::vector<uint32_t> depWaiters; ///< Threadblocks waiting on a step of it.
  bool finished = false;
  double finishTime = 0;
  ExecStatus stopped; ///< Where its interpreter last stopped.
  std::unique_ptr<SimPlatform> platform;
  std::unique_ptr<Interpreter<SimPlatform>> interp;
};

/// A rank's staging copies around the plan (an out-of-place call).
struct Staging {
  double before = 0, after = 0; ///< Bytes copied before and after the plan.
};

class Simulation {
public:
  Simulation(const Plan &plan, const Topology &topo, const ChunkLayout &layout, uint64_t es,
             ProtocolKind protocol, bool recordSpans, std::vector<Staging> staging)
      : plan(plan), topo(topo), layout(layout), es(es), protocol(protocol),
        recordSpans(recordSpans), staging(std::move(staging)) {}

  Status setUp();
  Status run(Prediction &out);

  // For SimPlatform.
  double now = 0;
  const Plan &plan;
  const Topology &topo;
  const ChunkLayout &layout;
  uint64_t es;
  ProtocolKind protocol;
  std::vector<SimTb> tbs;
  std::vector<Connection> conns;

  void wake(uint32_t tb, double at) { push(at, tb); }
  /// Adds \p e to \p w, waking \p waiter if it waits for it.
  void post(EventWindow &w, uint32_t waiter, TimedPath e) {
    if (w.waiting) {
      w.waiting = false;
      wake(waiter, e.at);
    }
    w.events.push_back(std::move(e));
  }
  /// \p tb's next step waited for an event of \p at, reached by \p path.
  void enabledBy(uint32_t tb, double at, const PathSum &path) {
    SimTb &t = tbs[tb];
    if (at > t.enablerAt) {
      t.enablerAt = at;
      t.enabler = path;
    }
  }
  void startStep(uint32_t tb, uint64_t sentElems, uint64_t localElems, uint64_t reducedElems,
                 bool publishes, uint32_t chunks, bool reducesReceived);
  /// A flow of \p bytes over \p path for \p tb's step, from \p start;
  /// its index. A detached flow is not waited for by the step.
  uint32_t addFlow(uint32_t tb, const Path &path, double bytes, double start, bool detached = false,
                   int32_t gate = -1, bool gateAfter = false);
  /// Message \p m of connection \p c is there for the receiver as \p e;
  /// messages arrive in order.
  void deliver(uint32_t c, uint64_t m, TimedPath e);
  /// The fixed cost of a step that moves \p chunks chunks: the step's,
  /// and piece-latency for each chunk beyond the first.
  double stepLatency(uint32_t chunks = 1) const {
    const double step = protocol != ProtocolKind::Simple && topo.lineStepLatency >= 0
                            ? topo.lineStepLatency
                            : topo.stepLatency;
    return chunks > 1 ? step + double(chunks - 1) * topo.pieceLatency : step;
  }

private:
  enum class EventKind : uint32_t { Wake, FlowStart, FlowEnd };
  /// 24 bytes: the queue moves them on every push and pop (a quarter less
  /// than with the kind and a 64-bit version apart).
  struct Event {
    double time;
    uint64_t seq;
    uint32_t idKind;      ///< The threadblock or the flow, and the kind in the top 2 bits.
    uint32_t version = 0; ///< FlowEnd: the flow's version when scheduled.
    Event(double time, uint64_t seq, EventKind kind, uint32_t id, uint32_t version = 0)
        : time(time), seq(seq), idKind(id | uint32_t(kind) << 30), version(version) {}
    EventKind kind() const { return EventKind(idKind >> 30); }
    uint32_t id() const { return idKind & ((1u << 30) - 1); }
    bool operator>(const Event &o) const { return std::tie(time, seq) > std::tie(o.time, o.seq); }
  };
  void push(double at, uint32_t tb) { schedule(Event{at, seq++, EventKind::Wake, tb}); }
  /// Queues \p e: an event of this very moment goes behind the others of
  /// it without the heap. Those in the heap for now were queued before
  /// now came (an event is never queued for the past), so the order is
  /// the heap's own: by time, then by when queued.
  void schedule(const Event &e) {
    if (e.time == now)
      current.push_back(e);
    else
      events.push(e);
  }
  uint32_t linkOf(const std::string &name, double capacity);
  /// Starts flow \p id now and reshares its component.
  void startFlow(uint32_t id);
  /// Whether link \p l can bind now (Link::flowBound); a change reshares
  /// its flows.
  void updateSlack(uint32_t l);
  /// Ends flow \p id now and reshares what it shared links with.
  void endFlow(uint32_t id);
  /// Max-min fair rates for the flows connected to \p seeds through
  /// shared links (progressive filling), each then scheduled to end.
  void reshare(const uint32_t *seeds, size_t n);
  /// \p tb's step is complete: its effects become events.
  void completeStep(uint32_t tb);
  void runTb(uint32_t tb);

  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events;
  std::deque<Event> current; ///< Events of now, queued at now (schedule()).
  uint64_t seq = 0, eventCount = 0;
  std::vector<Link> links;
  std::map<std::string, uint32_t> linkByName;
  std::vector<Flow> flows;
  std::vector<uint32_t> freeFlows;
  uint32_t markGen = 0;
  std::vector<uint32_t> compFlows, compLinks, stack; ///< reshare() scratch.
  /// A link's share when it was last changed, and its index in the
  /// component, which breaks ties as a scan in component order would.
  struct Share {
    double share;
    uint32_t pos, link, stamp;
    bool operator>(const Share &o) const { return std::tie(share, pos) > std::tie(o.share, o.pos); }
  };
  std::vector<Share> shares;        ///< reshare() scratch: a min-heap.
  std::vector<uint32_t> neighbours; ///< endFlow() scratch.
  uint64_t stepCount = 0, messageCount = 0;
  bool recordSpans = false;
  std::vector<StepSpan> spans;
  /// Per rank: its staging copies; its first threadblock's id and count;
  /// threadblocks not yet finished; when it was done (its last
  /// threadblock, then its copies after), and the chain to then.
  std::vector<Staging> staging;
  std::vector<uint32_t> rankFirstTb, rankTbs, rankLeft;
  std::vector<double> rankEnd;
  std::vector<PathSum> rankPath;
  std::vector<uint32_t> rankLastTb;
  /// Per node: the CPU seconds its steps and copies take
  /// (Topology::cpusPerNode), and its ranks.
  std::vector<double> nodeCpu;
  std::vector<uint32_t> nodeRanks;
  /// Charges \p bytes of a copy by rank \p r to its node's CPUs, at the
  /// rate one CPU copies (a threadblock's cap, else the private rate).
  void chargeCopy(uint32_t r, double bytes) {
    const double rate = topo.threadblockCopyRate();
    if (rate > 0)
      nodeCpu[topo.nodeOf(r)] += bytes / rate;
  }
  /// Starts rank \p r's staging copies (\p after: those after the plan)
  /// at \p at, or at once what follows them when there are none.
  void startStaging(uint32_t r, bool after, const PathSum &chain, double at);
  /// Rank \p r's staging copies ended at \p at.
  void stagingEnded(uint32_t r, bool after, const PathSum &chain, double at);
  /// The links a rank's staging copies cross (none: a private rate).
  Path stagingPath(uint32_t r);
  /// Appends to \p path the link of rank \p r's worker threads, which all
  /// of its threadblocks' work crosses (Topology::threadsPerRank), where
  /// the topology has one.
  void addRankThreads(Path &path, uint32_t r);
};

// SimPlatform, which needs Simulation.

MemPiece SimPlatform::piece(BufferKind buf, uint32_t chunk, uint64_t slice) const {
  PieceRange r = buf == BufferKind::Scratch ? sim.layout.scratchPiece(chunk, slice)
                                            : sim.layout.userPiece(chunk, slice);
  return MemPiece{kBufferBase, r.length};
}

void SimPlatform::sendPiece(char *, uint32_t, const char *, uint64_t n) {
  // A chunk sent as it lies is read by its receiver (direct sends), but
  // never across nodes: there every byte travels over the network.
  const SimTb &t = sim.tbs[tb];
  const bool direct =
      sim.topo.directSends && t.sendConn >= 0 && !sim.conns[size_t(t.sendConn)].betweenNodes;
  (direct ? sentInPlace : sent) += n;
}

WaitResult SimPlatform::checkAbort() const {
  return sim.tbs[tb].busy ? WaitResult::WouldBlock : WaitResult::Ready;
}

WaitResult SimPlatform::waitDependency(uint32_t otherTb, uint32_t step, uint64_t slice) {
  const SimTb &me = sim.tbs[tb];
  SimTb &other = sim.tbs[tb - me.index + otherTb];
  const uint64_t target = slice * other.numSteps + step;
  if (other.linear <= target) {
    other.depWaiters.push_back(tb);
    sim.tbs[tb].blocked = true;
    return WaitResult::WouldBlock;
  }
  // Seen dependencyLatency after the step is done (its own hop of the
  // chain; none on the CPU executors).
  TimedPath seen = other.done[target];
  if (sim.topo.dependencyLatency > 0) {
    seen.at += sim.topo.dependencyLatency;
    seen.path = hop(seen.path, sim.topo.dependencyLatency, false);
  }
  return reached(seen);
}

WaitResult SimPlatform::reached(const TimedPath &e) {
  if (e.at > sim.now) {
    sim.wake(tb, e.at);
    sim.tbs[tb].blocked = true;
    return WaitResult::WouldBlock;
  }
  sim.enabledBy(tb, e.at, e.path);
  return WaitResult::Ready;
}

WaitResult SimPlatform::waitFor(EventWindow &w, uint64_t m) {
  const TimedPath *e = w.find(m);
  if (!e) {
    w.waiting = true;
    sim.tbs[tb].blocked = true;
    return WaitResult::WouldBlock;
  }
  return reached(*e);
}

WaitResult SimPlatform::waitRecv(char *&slot, uint32_t, uint64_t) {
  slot = kRecvSlot;
  return waitFor(sim.conns[sim.tbs[tb].recvConn].arrivals, received);
}

WaitResult SimPlatform::waitSend(char *&slot, uint32_t, uint64_t) {
  slot = kSendSlot;
  const uint64_t depth = std::max<uint32_t>(1, sim.plan.info.connectionDepth);
  if (posted < depth)
    return WaitResult::Ready;
  return waitFor(sim.conns[sim.tbs[tb].sendConn].freed, posted - depth);
}

void SimPlatform::stepEnd(uint64_t slice, uint32_t step, const Instruction &in) {
  sim.tbs[tb].runSlice = slice;
  sim.tbs[tb].runStep = step;
  // Each chunk a step moves is a copy of its own on a GPU (piece-latency);
  // a send that leaves its chunks where they lie moves none.
  // A step that reduces what it receives into a buffer of its own costs
  // more (recv-reduce-latency).
  const bool reducesReceived =
      in.op == Opcode::RecvReduceCopy || in.op == Opcode::RecvReduceCopySend;
  sim.startStep(tb, sent, local, reducedLocal, publishes, local + sent > 0 ? in.count : 1,
                reducesReceived);
}

// Simulation.

uint32_t Simulation::linkOf(const std::string &name, double capacity) {
  auto [it, fresh] = linkByName.emplace(name, uint32_t(links.size()));
  if (fresh) {
    Link l;
    l.use.name = name;
    l.use.capacity = capacity;
    links.push_back(l);
  }
  return it->second;
}

Status Simulation::setUp() {
  const uint32_t n = plan.info.nranks;
  nodeCpu.assign(n ? topo.nodeOf(n - 1) + 1 : 0, 0.0);
  nodeRanks.assign(nodeCpu.size(), 0);
  for (uint32_t r = 0; r < n; ++r)
    ++nodeRanks[topo.nodeOf(r)];
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>, uint32_t> senders, receivers;
  for (uint32_t r = 0; r < n; ++r)
    for (uint32_t t = 0; t < plan.ranks[r].threadblocks.size(); ++t) {
      const Threadblock &b = plan.ranks[r].threadblocks[t];
      SimTb s;
      s.rank = r;
      s.index = t;
      s.numSteps = uint32_t(b.steps.size());
      const uint32_t id = uint32_t(tbs.size());
      if (b.sendPeer >= 0)
        senders[{r, uint32_t(b.sendPeer), b.channel}] = id;
      if (b.recvPeer >= 0)
        receivers[{uint32_t(b.recvPeer), r, b.channel}] = id;
      tbs.push_back(std::move(s));
    }
  // Events name a threadblock or a flow in 30 bits, and a threadblock has
  // a few flows at a time at most.
  if (tbs.size() >= (size_t(1) << 28))
    return Status::error("the plan has " + std::to_string(tbs.size()) +
                         " threadblocks, more than the simulator can follow (2^28)");
  // Threadblocks that others wait on keep their steps' completion times.
  for (uint32_t id = 0; id < tbs.size(); ++id) {
    const Threadblock &b = plan.ranks[tbs[id].rank].threadblocks[tbs[id].index];
    for (const Dependency &d : b.deps)
      if (d.tb < plan.ranks[tbs[id].rank].threadblocks.size())
        tbs[id - tbs[id].index + d.tb].tracked = true;
  }
  // A threadblock's work crosses its own cap and its node's, where the
  // topology has them.
  // With a few threads per rank, all of its threadblocks share them.
  for (SimTb &t : tbs) {
    if (topo.threadblockBandwidth > 0)
      t.local.push_back(linkOf("rank " + std::to_string(t.rank) + " tb " + std::to_string(t.index),
                               topo.threadblockBandwidth));
    addRankThreads(t.local, t.rank);
    if (topo.nodeBandwidth > 0)
      t.local.push_back(linkOf("node " + std::to_string(topo.nodeOf(t.rank)), topo.nodeBandwidth));
  }
  for (auto &[key, sender] : senders) {
    auto it = receivers.find(key);
    if (it == receivers.end())
      return Status::error("rank " + std::to_string(std::get<0>(key)) + " sends to rank " +
                           std::to_string(std::get<1>(key)) + " on channel " +
                           std::to_string(std::get<2>(key)) + ", which never receives it");
    const auto [from, to, channel] = key;
    // On a node of R ranks and C < R CPUs, the ranks that wait keep
    // yielding their CPUs, and a receiver gets one after the R / C - 1
    // others queued on it have had it: a trip there gains as many switches
    // (one between two ranks on one CPU, as calibrated).
    const uint32_t ranks = nodeRanks[topo.nodeOf(to)];
    const double switchShare = topo.cpusPerNode && ranks > topo.cpusPerNode
                                   ? double(ranks) / double(topo.cpusPerNode) - 1
                                   : 0;
    Connection c;
    c.senderTb = sender;
    c.receiverTb = it->second;
    if (from != to)
      c.links = tbs[sender].local; // What the sender's own work crosses.
    if (from == to) {
      c.latency = 0;
    } else if (topo.nodeOf(from) == topo.nodeOf(to)) {
      c.latency = topo.intra.latency + switchShare * topo.switchLatency;
      c.links.push_back(linkOf("rank " + std::to_string(from) + " out", topo.intra.bandwidth));
      c.links.push_back(linkOf("rank " + std::to_string(to) + " in", topo.intra.bandwidth));
    } else {
      c.latency = topo.inter.latency + switchShare * topo.switchLatency;
      c.betweenNodes = true;
      const std::string a = "node " + std::to_string(topo.nodeOf(from)) + " nic " +
                            std::to_string(topo.nicOf(from)) + " out";
      const std::string b = "node " + std::to_string(topo.nodeOf(to)) + " nic " +
                            std::to_string(topo.nicOf(to)) + " in";
      c.links.push_back(linkOf(a, topo.inter.bandwidth));
      const uint32_t nodes =
          topo.ranksPerNode ? (n + topo.ranksPerNode - 1) / topo.ranksPerNode : 1;
      if (topo.oversubscription > 1 && !topo.nodesPerLeaf) {
        const uint32_t core = linkOf("core", double(nodes) * topo.nicsPerNode *
                                                 topo.inter.bandwidth / topo.oversubscription);
        links[core].flowBound = topo.inter.bandwidth; // Each flow crosses a NIC.
        c.links.push_back(core);
      } else if (topo.oversubscription > 1) {
        // Between leaf switches: the sender's leaf's uplink and the
        // receiver's leaf's downlink, each of its ports' bandwidth over the
        // oversubscription (a last leaf that is not full has fewer ports).
        const uint64_t leafFrom = topo.leafOf(topo.nodeOf(from), topo.nicOf(from));
        const uint64_t leafTo = topo.leafOf(topo.nodeOf(to), topo.nicOf(to));
        if (leafFrom != leafTo) {
          auto leafLink = [&](uint64_t leaf, uint32_t node, const char *way) {
            const uint32_t first = node / topo.nodesPerLeaf * topo.nodesPerLeaf;
            const uint32_t ports = std::min(topo.nodesPerLeaf, nodes - first) *
                                   (topo.railOptimised ? 1 : topo.nicsPerNode);
            const uint32_t l = linkOf("leaf " + std::to_string(leaf) + " " + way,
                                      double(ports) * topo.inter.bandwidth / topo.oversubscription);
            links[l].flowBound = topo.inter.bandwidth; // Each flow crosses a NIC.
            return l;
          };
          c.links.push_back(leafLink(leafFrom, topo.nodeOf(from), "up"));
          c.links.push_back(leafLink(leafTo, topo.nodeOf(to), "down"));
        }
      }
      c.links.push_back(linkOf(b, topo.inter.bandwidth));
    }
    tbs[sender].sendConn = int32_t(conns.size());
    tbs[it->second].recvConn = int32_t(conns.size());
    conns.push_back(std::move(c));
  }
  for (auto &[key, receiver] : receivers)
    if (!senders.count(key))
      return Status::error("rank " + std::to_string(std::get<1>(key)) + " receives from rank " +
                           std::to_string(std::get<0>(key)) + " on channel " +
                           std::to_string(std::get<2>(key)) + ", which never sends");
  for (uint32_t id = 0; id < tbs.size(); ++id) {
    const Threadblock &b = plan.ranks[tbs[id].rank].threadblocks[tbs[id].index];
    tbs[id].platform = std::make_unique<SimPlatform>(*this, id);
    tbs[id].interp = std::make_unique<Interpreter<SimPlatform>>(
        *tbs[id].platform, ProgramView{b.steps.data(), uint32_t(b.steps.size()), b.deps.data()},
        layout.numSlices);
  }
  // Each rank starts with its staging copies, if any.
  staging.resize(n);
  rankFirstTb.assign(n, 0);
  rankTbs.assign(n, 0);
  rankEnd.assign(n, 0);
  rankPath.assign(n, PathSum{});
  rankLastTb.assign(n, 0);
  for (uint32_t id = uint32_t(tbs.size()); id-- > 0;) {
    rankFirstTb[tbs[id].rank] = id;
    ++rankTbs[tbs[id].rank];
  }
  rankLeft = rankTbs;
  for (uint32_t r = 0; r < n; ++r)
    startStaging(r, false, PathSum{}, now);
  return Status::success();
}

Path Simulation::stagingPath(uint32_t r) {
  Path p;
  if (topo.threadblockBandwidth > 0)
    p.push_back(linkOf("rank " + std::to_string(r) + " staging", topo.threadblockBandwidth));
  addRankThreads(p, r);
  if (topo.nodeBandwidth > 0)
    p.push_back(linkOf("node " + std::to_string(topo.nodeOf(r)), topo.nodeBandwidth));
  return p;
}

void Simulation::addRankThreads(Path &path, uint32_t r) {
  if (topo.threadblockBandwidth > 0 && topo.threadsPerRank > 0)
    path.push_back(linkOf("rank " + std::to_string(r) + " threads",
                          topo.threadblockBandwidth * topo.threadsPerRank));
}

void Simulation::startStaging(uint32_t r, bool after, const PathSum &chain, double at) {
  const double bytes = after ? staging[r].after : staging[r].before;
  if (bytes > 0) {
    const Path path = stagingPath(r);
    if (!path.empty()) {
      const uint32_t id = addFlow(0, path, bytes, at, /*detached=*/false, int32_t(r), after);
      flows[id].chain = chain;
      flows[id].chainAt = at;
      return;
    }
    if (topo.copyBandwidth > 0) {
      // A private rate: the copies end after their time.
      PathSum q = chain;
      q.moving += bytes / topo.copyBandwidth;
      stagingEnded(r, after, q, at + bytes / topo.copyBandwidth);
      return;
    }
  }
  stagingEnded(r, after, chain, at);
}

void Simulation::stagingEnded(uint32_t r, bool after, const PathSum &chain, double at) {
  if (after || rankTbs[r] == 0) {
    // A rank without threadblocks: its copies before and after are its run.
    if (!after && staging[r].after > 0) {
      startStaging(r, true, chain, at);
      return;
    }
    rankEnd[r] = at;
    rankPath[r] = chain;
    return;
  }
  for (uint32_t id = rankFirstTb[r]; id < rankFirstTb[r] + rankTbs[r]; ++id) {
    tbs[id].enabler = chain;
    tbs[id].enablerAt = at;
    tbs[id].path = chain;
    push(at, id);
  }
}

void Simulation::startStep(uint32_t tb, uint64_t sentElems, uint64_t localElems,
                           uint64_t reducedElems, bool publishes, uint32_t chunks,
                           bool reducesReceived) {
  SimTb &t = tbs[tb];
  ++stepCount;
  t.busy = true;
  // The chain to this step: the latest event it waited for (its own last
  // step's end, at least), and any slack up to now.
  t.stepBase = t.enabler;
  t.stepBase.waiting += now - t.enablerAt;
  t.stepStart = now;
  t.stepFixed = stepLatency(chunks) + (reducesReceived ? topo.recvReduceLatency : 0);
  const double start = now + t.stepFixed;
  nodeCpu[topo.nodeOf(t.rank)] += t.stepFixed;
  // A step that waited, on a node whose ranks outnumber its CPUs: its rank
  // gave up its CPU while it waited (the executors yield, then sleep) and
  // takes one back, a switch of the node's CPU time.
  if (t.blocked && topo.cpusPerNode && nodeRanks[topo.nodeOf(t.rank)] > topo.cpusPerNode)
    nodeCpu[topo.nodeOf(t.rank)] += topo.switchLatency;
  t.blocked = false;
  t.flowsLeft = 0;
  t.computeEnd = start;
  // Local copies: a flow over the threadblock's and the node's caps, or a
  // private rate.
  if (localElems) {
    // A reduction's result weighs reduceCost() bytes of a copy's.
    const double bytes =
        double(localElems * es) + double(reducedElems * es) * (topo.reduceCost() - 1);
    if (!t.local.empty())
      addFlow(tb, t.local, bytes, start);
    else if (topo.copyBandwidth > 0) {
      t.computeEnd += bytes / topo.copyBandwidth;
      chargeCopy(t.rank, bytes); // No threadblock cap here: at the private rate.
    }
  }
  t.runDetached = false;
  if (publishes) {
    ++messageCount;
    Connection &c = conns[t.sendConn];
    t.runMessage = c.issued++;
    double bytes = double(sentElems * es);
    if (protocol != ProtocolKind::Simple) {
      const uint64_t lines = messageLines(protocol, sentElems * es);
      bytes = double(lines * lineBytes(protocol));
    }
    if (!c.links.empty() && bytes > 0) {
      // Between nodes the step hands the message to the network and goes
      // on; within a node it moves the data itself.
      t.runDetached = c.betweenNodes;
      const uint32_t id = addFlow(tb, c.links, bytes, start, t.runDetached);
      if (t.runDetached) {
        Flow &f = flows[id];
        f.conn = uint32_t(t.sendConn);
        f.message = t.runMessage;
        // The chain to the message: to its step's start, the step's fixed
        // cost (the step itself), then the flow's moving time (endFlow()).
        f.chain = t.stepBase;
        f.chain.fixed += t.stepFixed;
        ++f.chain.steps;
        f.chainAt = start;
      }
    }
  }
  if (t.flowsLeft == 0)
    wake(tb, t.computeEnd);
}

uint32_t Simulation::addFlow(uint32_t tb, const Path &path, double bytes, double start,
                             bool detached, int32_t gate, bool gateAfter) {
  uint32_t id;
  if (!freeFlows.empty()) {
    id = freeFlows.back();
    freeFlows.pop_back();
  } else {
    id = uint32_t(flows.size());
    assert(id < (1u << 30) && "an event names a flow in 30 bits");
    flows.emplace_back();
  }
  Flow &f = flows[id];
  f.links = path;
  f.remaining = bytes;
  f.rate = 0;
  f.tb = tb;
  f.active = false;
  f.scheduledEnd = kNever;
  f.detached = detached;
  f.gate = gate;
  f.gateAfter = gateAfter;
  for (uint32_t l : f.links)
    links[l].use.bytes += bytes;
  // The copy a rank's CPU makes (a staging flow names its rank in gate); a
  // detached flow is the network's.
  if (!detached)
    chargeCopy(gate >= 0 ? uint32_t(gate) : tbs[tb].rank, bytes);
  if (!detached && gate < 0)
    ++tbs[tb].flowsLeft;
  if (start > now)
    schedule(Event{start, seq++, EventKind::FlowStart, id});
  else
    startFlow(id);
  return id;
}

void Simulation::deliver(uint32_t c, uint64_t m, TimedPath e) {
  Connection &conn = conns[c];
  conn.early.emplace(m, std::move(e));
  for (auto it = conn.early.find(conn.nextArrival); it != conn.early.end();
       it = conn.early.find(conn.nextArrival)) {
    post(conn.arrivals, conn.receiverTb, std::move(it->second));
    conn.early.erase(it);
    ++conn.nextArrival;
  }
}

void Simulation::startFlow(uint32_t id) {
  Flow &f = flows[id];
  f.active = true;
  f.since = now;
  // On every link before any is looked at: a link that stops being slack
  // reshares its flows, this one among them, over all its links.
  for (uint32_t l : f.links) {
    if (links[l].flows.empty())
      links[l].busySince = now;
    links[l].flows.push_back(id);
  }
  for (uint32_t l : f.links)
    updateSlack(l);
  reshare(&id, 1);
}

void Simulation::updateSlack(uint32_t l) {
  Link &link = links[l];
  if (link.flowBound <= 0)
    return;
  const bool slack = double(link.flows.size()) * link.flowBound <= link.use.capacity;
  if (slack == link.slack)
    return;
  link.slack = slack;
  // Its flows' rates change with it: reshare them all.
  if (!link.flows.empty()) {
    std::vector<uint32_t> on = link.flows;
    reshare(on.data(), on.size());
  }
}

void Simulation::endFlow(uint32_t id) {
  Flow &f = flows[id];
  f.active = false;
  ++f.version;
  neighbours.clear();
  for (uint32_t l : f.links) {
    std::vector<uint32_t> &on = links[l].flows;
    on.erase(std::find(on.begin(), on.end(), id));
    if (on.empty())
      links[l].use.busy += now - links[l].busySince;
    if (!links[l].slack)
      neighbours.insert(neighbours.end(), on.begin(), on.end());
  }
  for (uint32_t l : f.links)
    updateSlack(l);
  freeFlows.push_back(id);
  if (f.gate >= 0) {
    PathSum q = f.chain;
    q.moving += now - f.chainAt;
    stagingEnded(uint32_t(f.gate), f.gateAfter, q, now);
  } else if (f.detached) {
    const Connection &c = conns[f.conn];
    PathSum q = f.chain;
    q.moving += now - f.chainAt;
    deliver(f.conn, f.message, TimedPath{now + c.latency, hop(q, c.latency, c.betweenNodes)});
  } else {
    SimTb &t = tbs[f.tb];
    if (--t.flowsLeft == 0)
      wake(f.tb, std::max(now, t.computeEnd));
  }
  if (!neighbours.empty())
    reshare(neighbours.data(), neighbours.size());
}

void Simulation::reshare(const uint32_t *seeds, size_t n) {
  // The component: every active flow reachable through shared links.
  ++markGen;
  compFlows.clear();
  compLinks.clear();
  stack.clear();
  for (size_t i = 0; i < n; ++i)
    if (flows[seeds[i]].active && flows[seeds[i]].mark != markGen) {
      flows[seeds[i]].mark = markGen;
      stack.push_back(seeds[i]);
    }
  while (!stack.empty()) {
    const uint32_t id = stack.back();
    stack.pop_back();
    compFlows.push_back(id);
    for (uint32_t l : flows[id].links) {
      if (links[l].mark == markGen || links[l].slack)
        continue;
      links[l].mark = markGen;
      compLinks.push_back(l);
      for (uint32_t other : links[l].flows)
        if (flows[other].mark != markGen) {
          flows[other].mark = markGen;
          stack.push_back(other);
        }
    }
  }
  // Settle each flow's bytes at its old rate, then fill progressively: the
  // most constrained link fixes the rate of its unfrozen flows, which then
  // leave the other links' shares.
  for (uint32_t id : compFlows) {
    Flow &f = flows[id];
    f.remaining = std::max(0.0, f.remaining - f.rate * (now - f.since));
    f.since = now;
    f.rate = -1;
  }
  // The most constrained link is the least share of a min-heap of the
  // links' shares: the same link a scan of the component would pick,
  // without scanning it once per link that binds. A link's share only
  // grows as flows freeze (a frozen flow takes at most the least share, so
  // what it leaves the others is at least theirs before): an entry whose
  // link changed since is too low, and goes back in at the link's share
  // when it comes out, rather than on every change (one entry per link).
  const auto later = std::greater<Share>();
  shares.clear();
  for (uint32_t i = 0; i < compLinks.size(); ++i) {
    Link &link = links[compLinks[i]];
    link.residual = link.use.capacity;
    link.unfrozen = uint32_t(link.flows.size());
    link.pos = i;
    ++link.stamp;
    if (link.unfrozen)
      shares.push_back(Share{link.residual / link.unfrozen, i, compLinks[i], link.stamp});
  }
  std::make_heap(shares.begin(), shares.end(), later);
  size_t left = compFlows.size();
  while (left && !shares.empty()) {
    std::pop_heap(shares.begin(), shares.end(), later);
    const Share top = shares.back();
    shares.pop_back();
    Link &bound = links[top.link];
    if (!bound.unfrozen)
      continue;
    if (bound.stamp != top.stamp) {
      shares.push_back(Share{bound.residual / bound.unfrozen, bound.pos, top.link, bound.stamp});
      std::push_heap(shares.begin(), shares.end(), later);
      continue;
    }
    const double share = top.share;
    for (uint32_t id : links[top.link].flows) {
      Flow &f = flows[id];
      if (f.rate >= 0)
        continue;
      f.rate = share;
      --left;
      for (uint32_t l : f.links) {
        Link &link = links[l];
        if (link.slack || !link.unfrozen)
          continue;
        link.residual -= share;
        --link.unfrozen;
        ++link.stamp;
      }
    }
  }
  // A flow whose end comes sooner than its pending event gets a new one;
  // one whose end moved later keeps it, and is scheduled again when it
  // fires (run()): most reshares slow flows down, and the queue then holds
  // one event per flow instead of one per reshare. Flows that end at the
  // same moment then end in the order of their events, not of their last
  // reshares: another order of simultaneous events, as deterministic.
  for (uint32_t id : compFlows) {
    Flow &f = flows[id];
    const double end = f.rate > 0 ? now + f.remaining / f.rate : kNever;
    if (end < f.scheduledEnd) {
      ++f.version;
      f.scheduledEnd = end;
      schedule(Event{end, seq++, EventKind::FlowEnd, id, f.version});
    }
  }
}

void Simulation::completeStep(uint32_t tb) {
  SimTb &t = tbs[tb];
  SimPlatform &p = *t.platform;
  const double fixed = std::min(t.stepFixed, now - t.stepStart);
  t.path = t.stepBase;
  t.path.fixed += fixed;
  t.path.moving += now - t.stepStart - fixed;
  ++t.path.steps;
  t.enabler = t.path;
  t.enablerAt = now;
  if (recordSpans)
    spans.push_back(StepSpan{t.rank, t.index, t.runStep, t.runSlice, t.stepStart, now});
  if (p.publishes) {
    Connection &c = conns[t.sendConn];
    // A detached message arrives when its flow ends (endFlow()).
    if (!t.runDetached)
      deliver(uint32_t(t.sendConn), t.runMessage,
              TimedPath{now + c.latency, hop(t.path, c.latency, c.betweenNodes)});
    ++p.posted;
    // The slots of messages before posted - depth will not be asked for again.
    const uint64_t depth = std::max<uint32_t>(1, plan.info.connectionDepth);
    if (p.posted > depth)
      c.freed.dropBefore(p.posted - depth);
  }
  if (p.releases) {
    Connection &c = conns[t.recvConn];
    post(c.freed, c.senderTb, TimedPath{now + c.latency, hop(t.path, c.latency, c.betweenNodes)});
    ++p.received;
    c.arrivals.dropBefore(p.received); // Taken.
  }
  p.publishes = p.releases = false;
  if (t.tracked)
    t.done.push_back(TimedPath{now, t.path});
  ++t.linear;
  for (uint32_t w : t.depWaiters)
    wake(w, now);
  t.depWaiters.clear();
  t.busy = false;
}

void Simulation::runTb(uint32_t tb) {
  SimTb &t = tbs[tb];
  if (t.finished)
    return;
  if (t.busy) {
    if (t.flowsLeft || now < t.computeEnd)
      return; // Woken early: its step is still running.
    completeStep(tb);
  }
  ExecStatus st = t.interp->run();
  t.stopped = st;
  if (st.result == WaitResult::Ready && !t.busy) {
    t.finished = true;
    t.finishTime = now;
    // The rank's last threadblock: then its copies after the plan. Of
    // those that finished at the same time, the highest index names it.
    if (--rankLeft[t.rank] == 0) {
      uint32_t last = rankFirstTb[t.rank];
      for (uint32_t id = last + 1; id < rankFirstTb[t.rank] + rankTbs[t.rank]; ++id)
        if (tbs[id].finishTime >= tbs[last].finishTime)
          last = id;
      rankLastTb[t.rank] = tbs[last].index;
      startStaging(t.rank, true, tbs[last].path, now);
    }
  }
}

Status Simulation::run(Prediction &out) {
  for (;;) {
    // Now's events in the heap first (queued before now came), then
    // those queued at now.
    Event e(0, 0, EventKind::Wake, 0);
    if (!events.empty() && (current.empty() || events.top().time <= now)) {
      e = events.top();
      events.pop();
    } else if (!current.empty()) {
      e = current.front();
      current.pop_front();
    } else {
      break;
    }
    ++eventCount;
    now = e.time;
    if (e.kind() == EventKind::FlowStart) {
      startFlow(e.id());
      continue;
    }
    if (e.kind() == EventKind::FlowEnd) {
      Flow &f = flows[e.id()];
      if (!f.active || f.version != e.version)
        continue;
      // Slowed down since it was scheduled: it ends later.
      const double end = f.rate > 0 ? f.since + f.remaining / f.rate : kNever;
      if (end > now) {
        f.scheduledEnd = end;
        if (end < kNever)
          schedule(Event{end, seq++, EventKind::FlowEnd, e.id(), f.version});
        continue;
      }
      endFlow(e.id());
      continue;
    }
    runTb(e.id());
  }
  out.seconds = 0;
  for (uint32_t id = 0; id < tbs.size(); ++id) {
    const SimTb &t = tbs[id];
    if (!t.finished) {
      const Threadblock &b = plan.ranks[t.rank].threadblocks[t.index];
      std::string what = "waiting";
      switch (t.stopped.waitKind) {
      case WaitKind::RecvMessage:
        what = "waiting for a message from rank " + std::to_string(b.recvPeer);
        break;
      case WaitKind::SendSlot:
        what = "waiting for a free slot to send to rank " + std::to_string(b.sendPeer);
        break;
      case WaitKind::Dependency:
        what = "waiting for threadblock " + std::to_string(t.stopped.depTb) + " step " +
               std::to_string(t.stopped.depStep);
        break;
      default:
        break;
      }
      return Status::error("the simulated run cannot finish: rank " + std::to_string(t.rank) +
                           " threadblock " + std::to_string(t.index) + " step " +
                           std::to_string(t.interp->currentStep()) + " of slice " +
                           std::to_string(t.interp->currentSlice()) + " is " + what +
                           " for ever (a deadlock at connection depth " +
                           std::to_string(plan.info.connectionDepth) + ")");
    }
  }
  // A rank is done when its last threadblock is, and its copies after.
  for (uint32_t r = 0; r < plan.info.nranks; ++r)
    if (rankEnd[r] >= out.seconds) {
      out.seconds = rankEnd[r];
      out.lastRank = r;
      out.lastTb = rankLastTb[r];
      out.critical = rankPath[r];
    }
  // With fewer CPUs than ranks on a node, its CPU work, its calls' fixed
  // costs included, spread over its CPUs bounds the call from below.
  if (topo.cpusPerNode)
    for (uint32_t node = 0; node < nodeCpu.size(); ++node) {
      const double bound =
          (nodeCpu[node] + nodeRanks[node] * topo.callLatency) / double(topo.cpusPerNode);
      if (bound > out.cpuSeconds) {
        out.cpuSeconds = bound;
        out.cpuNode = node;
      }
    }
  out.steps = stepCount;
  out.messages = messageCount;
  out.events = eventCount;
  out.spans = std::move(spans);
  for (const Link &l : links)
    out.links.push_back(l.use);
  return Status::success();
}

} // namespace

Result<Prediction> predictPlan(const Plan &plan, const Topology &topo, uint64_t count,
                               DataType type, const PredictOptions &options) {
  Result<ValidatedPlan> vp = ValidatedPlan::borrow(plan);
  if (!vp)
    return vp.getStatus();
  if (unsigned(type) >= numDataTypes())
    return Status::error("predict: invalid data type");
  if (topo.intra.bandwidth <= 0 || (topo.ranksPerNode && topo.inter.bandwidth <= 0))
    return Status::error("predict: the topology '" + topo.name + "' has a link without bandwidth");
  const uint64_t es = dataTypeSize(type);
  const uint64_t chunks = vp->chunksPerUnit();
  const ChunkLayout whole = ChunkLayout::make(count, chunks, 1);
  const ChunkLayout layout = ChunkLayout::make(
      count, chunks,
      std::max<uint64_t>(1, std::min<uint64_t>(std::max<uint64_t>(1, options.sliceElements),
                                               std::max<uint64_t>(1, whole.maxChunk))));
  Prediction out;
  out.protocol = options.forceProtocol ? options.protocol : plan.info.protocol;
  const BufferElements elems = planBufferElements(plan.info, count);
  out.sizeBytes = std::max(elems.input, elems.output) * es;
  out.slices = layout.numSlices;
  if (count == 0)
    return out;
  // An out-of-place call stages what the executors stage: per rank, the
  // copies prepareCall() asks for before and after the plan (an in-place
  // plan's input put where it works), less those an out-of-place program
  // of the rank makes unnecessary (OutOfPlace.h).
  std::vector<Staging> staging(plan.info.nranks);
  if (options.outOfPlace) {
    CallOptions co;
    co.sliceElements = std::max<uint64_t>(1, options.sliceElements);
    // Addresses that are never followed: apart, and aligned for any type.
    const uint64_t apart = (std::max(elems.input, elems.output) * es + 4095) / 4096 * 4096;
    char *send = reinterpret_cast<char *>(uintptr_t(1) << 40);
    char *recv = send + apart;
    for (uint32_t r = 0; r < plan.info.nranks; ++r) {
      PreparedCall c = prepareCall(*vp, r, CallArgs{send, recv, count, type, RedOp::Sum}, co);
      if (c.error)
        return Status::error("predict: " + c.error.status().message());
      if (!detail::outOfPlaceProgram(plan.info, plan.ranks[r]).empty())
        detail::runOutOfPlace(c, plan.info);
      for (const StagingCopy &b : c.before)
        staging[r].before += double(b.bytes);
      for (const StagingCopy &a : c.after)
        staging[r].after += double(a.bytes);
    }
  }
  // The buffers of the fullest node: each rank's input and output, or the
  // one buffer of an in-place call (Topology::forFootprint()).
  const uint32_t nranks = plan.info.nranks;
  const uint64_t perRank = plan.info.inplace && !options.outOfPlace
                               ? std::max(elems.input, elems.output) * es
                               : (elems.input + elems.output) * es;
  const uint32_t onNode = topo.ranksPerNode ? std::min(topo.ranksPerNode, nranks) : nranks;
  const Topology sized = topo.forFootprint(perRank * onNode);
  Simulation sim(plan, sized, layout, es, out.protocol, options.recordSpans, std::move(staging));
  if (Status s = sim.setUp(); !s)
    return s;
  if (Status s = sim.run(out); !s)
    return s;
  out.seconds = std::max(out.seconds + callSeconds(sized, nranks), out.cpuSeconds);
  if (out.seconds > 0) {
    out.algbw = double(out.sizeBytes) / out.seconds;
    out.busbw = out.algbw * busBandwidthFactor(plan.info.collective, plan.info.nranks);
  }
  return out;
}

std::vector<uint64_t> sweepSizes(uint64_t minBytes, uint64_t maxBytes, unsigned factor) {
  std::vector<uint64_t> sizes;
  for (uint64_t bytes = minBytes; bytes <= maxBytes; bytes *= factor) {
    sizes.push_back(bytes);
    if (factor < 2 || bytes > maxBytes / factor)
      break;
  }
  return sizes;
}

std::vector<Result<Prediction>> predictPlans(const std::vector<PredictCall> &calls,
                                             const Topology &topo, DataType type,
                                             const PredictOptions &options, unsigned threads) {
  std::vector<std::optional<Result<Prediction>>> done(calls.size());
  // The largest calls first (they take longest), so that none is left to
  // run alone at the end.
  std::vector<size_t> order(calls.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return calls[a].count > calls[b].count; });
  parallelFor(order.size(), threads, [&](size_t k) {
    const PredictCall &c = calls[order[k]];
    done[order[k]].emplace(predictPlan(*c.plan, topo, c.count, type, options));
  });
  std::vector<Result<Prediction>> out;
  out.reserve(calls.size());
  for (std::optional<Result<Prediction>> &r : done)
    out.push_back(std::move(*r));
  return out;
}

} // namespace coll
