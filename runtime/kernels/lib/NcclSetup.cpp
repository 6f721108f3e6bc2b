//===- NcclSetup.cpp - What NcclCommunicator's ranks exchange -------------===//

#include "NcclSetup.h"

#include "MemoryDemand.h"
#include "coll/Runtime/Executor.h"
#include "coll/Runtime/PreparedCall.h"

#include <cstdio>
#include <map>
#include <tuple>

namespace coll::kernels {

namespace {

/// \p one for a single rank, else \p many.
const char *verb(const std::vector<uint32_t> &ranks, const char *one, const char *many) {
  return ranks.size() == 1 ? one : many;
}

} // namespace

std::string formatRanks(const std::vector<uint32_t> &ranks) {
  if (ranks.size() == 1)
    return cat("rank ", ranks[0]);
  std::string s = "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i)
      s += i + 1 == ranks.size() ? " and " : ", ";
    s += std::to_string(ranks[i]);
  }
  return s;
}

Status checkHellos(const std::vector<PeerHello> &hellos) {
  const uint32_t n = uint32_t(hellos.size());
  std::vector<uint32_t> bad;
  for (uint32_t r = 0; r < n; ++r)
    if (hellos[r].magic != PeerHello::kMagic || hellos[r].rank != r)
      bad.push_back(r);
  if (!bad.empty())
    return Status::error(cat("the setup records of ", formatRanks(bad),
                             " are garbled (not every rank is creating a communicator?)"));
  for (uint32_t r = 0; r < n; ++r)
    if (hellos[r].failed)
      bad.push_back(r);
  if (!bad.empty())
    return Status::error(cat(formatRanks(bad), " could not prepare ", verb(bad, "its", "their"),
                             " part of the communicator (see ",
                             verb(bad, "its error", "their errors"), ")"));
  auto differ = [&](auto field) {
    std::vector<uint32_t> out;
    for (uint32_t r = 1; r < n; ++r)
      if (field(hellos[r]) != field(hellos[0]))
        out.push_back(r);
    return out;
  };
  if (!(bad = differ([](const PeerHello &h) { return h.nranks; })).empty())
    return Status::error(
        cat("the ranks hold different plans: ", formatRanks(bad), " ", verb(bad, "holds", "hold"),
            " a plan of another number of ranks than rank 0's ", hellos[0].nranks));
  if (!(bad = differ([](const PeerHello &h) { return h.plan; })).empty())
    return Status::error(
        cat("the ranks hold different plans: ", formatRanks(bad), " ", verb(bad, "holds", "hold"),
            " a plan that differs from rank 0's (checksum ", formatChecksum(hellos[bad[0]].plan),
            " on rank ", bad[0], ", ", formatChecksum(hellos[0].plan), " on rank 0)"));
  if (!(bad = differ([](const PeerHello &h) { return h.sliceBytes; })).empty())
    return Status::error(cat(formatRanks(bad), " ", verb(bad, "uses", "use"),
                             " another slice size than rank 0's ", hellos[0].sliceBytes, " bytes"));
  return Status::success();
}

Result<ConnectionMatch> matchConnections(const std::vector<std::vector<ConnectionEntry>> &entries,
                                         uint32_t self) {
  const uint32_t n = uint32_t(entries.size());
  // (rank, kind, peer, channel) -> the entry.
  std::map<std::tuple<uint32_t, uint32_t, uint32_t, uint32_t>, const ConnectionEntry *> all;
  for (uint32_t r = 0; r < n; ++r)
    for (const ConnectionEntry &e : entries[r]) {
      const char *dir = e.kind == ConnectionEntry::Send ? " sends to" : " receives from";
      if (e.peer >= n || e.peer == r)
        return Status::error(
            cat("rank ", r, dir, " rank ", e.peer, ", which is not a peer of ", n, " ranks"));
      if (!all.emplace(std::make_tuple(r, e.kind, e.peer, e.channel), &e).second)
        return Status::error(
            cat("rank ", r, dir, " rank ", e.peer, " on channel ", e.channel, " twice"));
    }
  ConnectionMatch m;
  for (uint32_t r = 0; r < n; ++r)
    for (const ConnectionEntry &e : entries[r]) {
      bool send = e.kind == ConnectionEntry::Send;
      uint32_t otherKind = send ? ConnectionEntry::Receive : ConnectionEntry::Send;
      auto it = all.find({e.peer, otherKind, r, e.channel});
      if (it == all.end())
        return Status::error(cat("rank ", r, send ? " sends to" : " receives from", " rank ",
                                 e.peer, " on channel ", e.channel, ", but rank ", e.peer,
                                 " has no threadblock that ", send ? "receives from" : "sends to",
                                 " rank ", r, " on that channel"));
      const ConnectionEntry &o = *it->second;
      const ConnectionEntry &s = send ? e : o, &rv = send ? o : e;
      const uint32_t sender = send ? r : e.peer, receiver = send ? e.peer : r;
      if (send) {
        if (s.network != rv.network)
          return Status::error(cat("ranks ", sender, " and ", receiver,
                                   " disagree on whether they reach each other over the "
                                   "network (their LSA teams differ)"));
        if (s.messagesPerSlice != rv.messagesPerSlice)
          return Status::error(cat("rank ", sender, " sends ", s.messagesPerSlice,
                                   " messages per pass to rank ", receiver, " on channel ",
                                   e.channel, ", but rank ", receiver, " receives ",
                                   rv.messagesPerSlice));
        if (s.maxCount > rv.maxCount)
          return Status::error(cat("rank ", sender, " sends messages of up to ", s.maxCount,
                                   " chunks to rank ", receiver, " on channel ", e.channel,
                                   ", but rank ", receiver, " receives at most ", rv.maxCount));
        if (s.depth != rv.depth)
          return Status::error(cat("ranks ", sender, " and ", receiver,
                                   " disagree on the connection depth (", s.depth, " and ",
                                   rv.depth, ")"));
      }
      if (r == self)
        (send ? m.sendTo : m.recvFrom).push_back(o);
    }
  return m;
}

Result<ConnectionLayout> layoutConnections(const LaunchTables &tables, const RankPlan &plan,
                                           uint32_t self, uint64_t slotStride,
                                           const std::vector<bool> &network) {
  ConnectionLayout l;
  const uint32_t numRecv = tables.numRecvFifos;
  const uint64_t line = kCounterStride * sizeof(uint64_t);
  l.fifos.resize(tables.fifos.size());
  detail::MemoryDemand demand;
  // Adds \p bytes of \p what, rounded up to 256, at the end; returns where.
  auto reserve = [&](const std::string &what, Result<uint64_t> bytes) -> Result<uint64_t> {
    if (bytes)
      bytes = detail::checkedRoundUp(what, *bytes, 256);
    if (!bytes)
      return bytes.getStatus();
    const uint64_t at = demand.total;
    if (Status s = demand.add(what, *bytes); !s)
      return s;
    return at;
  };
  const std::string counters = cat("rank ", self, "'s connection counters");
  if (Result<uint64_t> at = reserve(
          counters, detail::checkedBytes(
                        counters, 2 * uint64_t(numRecv) + tables.remoteSends.size(), line, 1));
      !at)
    return at.getStatus();
  // One slot holds the largest message of slices of slotStride bytes.
  auto slots = [&](const std::string &what, uint32_t depth, uint32_t maxCount,
                   uint64_t &slotBytes) {
    Result<uint64_t> one = detail::checkedBytes(what, maxCount, slotStride, 1);
    slotBytes = one ? *one : 0;
    return reserve(what, one ? detail::checkedBytes(what, depth, *one, 1) : one);
  };
  auto isNetwork = [&](uint32_t peer) { return peer < network.size() && network[peer]; };
  for (uint32_t i = 0; i < numRecv; ++i) {
    FifoOffsets &f = l.fifos[i];
    const TbDesc &d = tables.tbs[tables.fifoBlock[i]];
    f.tail = 2 * i * line;
    f.head = (2 * i + 1) * line;
    f.ownsTail = f.ownsSlots = true;
    Result<uint64_t> at = slots(
        detail::fifoWhat(self, d.tb, tables.fifos[i].depth, tables.fifoMaxCount[i], slotStride),
        tables.fifos[i].depth, tables.fifoMaxCount[i], f.slotBytes);
    if (!at)
      return at.getStatus();
    f.slots = *at;
    const Threadblock &tb = plan.threadblocks[d.tb];
    if (!isNetwork(uint32_t(tb.recvPeer))) {
      // A word per slot, which a sender by loads and stores writes.
      const std::string marks = cat("the slot marks of rank ", self, " threadblock ", d.tb);
      Result<uint64_t> m =
          reserve(marks, detail::checkedBytes(marks, tables.fifos[i].depth, sizeof(uint32_t), 1));
      if (!m)
        return m.getStatus();
      f.marks = *m;
      f.ownsMarks = true;
    }
    if (uint32_t(tb.recvPeer) == self) {
      f.ownsHead = true; // The sender is this rank: a FIFO of its own.
      continue;
    }
    ConnectionEntry e;
    e.kind = ConnectionEntry::Receive;
    e.peer = uint32_t(tb.recvPeer);
    e.channel = tb.channel;
    e.messagesPerSlice = d.recvsPerSlice;
    e.maxCount = tables.fifoMaxCount[i];
    e.depth = tables.fifos[i].depth;
    e.counter = f.tail;
    e.slots = f.slots;
    e.slotBytes = f.slotBytes;
    e.marks = f.marks;
    if (isNetwork(e.peer)) {
      e.network = 1;
      e.signal = l.signals++;
    }
    l.entries.push_back(e);
    l.entryFifo.push_back(i);
  }
  for (uint32_t j = 0; j < tables.remoteSends.size(); ++j) {
    const RemoteSend &rs = tables.remoteSends[j];
    FifoOffsets &f = l.fifos[rs.fifo];
    f.head = (2 * uint64_t(numRecv) + j) * line;
    f.ownsHead = true;
    ConnectionEntry e;
    e.kind = ConnectionEntry::Send;
    e.peer = rs.peer;
    e.channel = rs.channel;
    e.messagesPerSlice = tables.tbs[rs.block].sendsPerSlice;
    e.maxCount = rs.maxCount;
    e.depth = tables.fifos[rs.fifo].depth;
    e.counter = f.head;
    const std::string what =
        cat("the staging slots of rank ", self, " threadblock ", tables.tbs[rs.block].tb,
            " (connectionDepth ", e.depth, " x ", rs.maxCount, " chunks per message x ", slotStride,
            " bytes per slice)");
    if (isNetwork(rs.peer)) {
      e.network = 1;
      e.signal = l.signals++;
      f.ownsSlots = true;
      Result<uint64_t> at = slots(what, e.depth, rs.maxCount, e.slotBytes);
      if (!at)
        return at.getStatus();
      f.slots = e.slots = *at;
      f.slotBytes = e.slotBytes;
    } else if (Result<uint64_t> one = detail::checkedBytes(what, rs.maxCount, slotStride, 1);
               !one) {
      return one.getStatus();
    } else {
      e.slotBytes = *one;
    }
    l.entries.push_back(e);
    l.entryFifo.push_back(rs.fifo);
  }
  l.bytes = demand.total;
  l.largestBytes = demand.largestBytes;
  l.largest = demand.largest;
  return l;
}

Status checkConnectionMemory(const ConnectionLayout &layout, uint32_t self, uint64_t limitBytes) {
  const uint64_t limit = limitBytes ? limitBytes : defaultMemoryLimit(0);
  if (layout.bytes <= limit)
    return Status::success();
  return Status::error(cat("rank ", self, " needs ", layout.bytes,
                           " bytes of connection memory, more than the memory limit of ", limit,
                           " bytes", limitBytes ? "" : " (the default at setup: 256 MiB)", ": ",
                           layout.largestBytes, " bytes for ", layout.largest,
                           "; raise the limit with NcclOptions::memoryLimitBytes"));
}

void bindLocalConnections(LaunchTables &tables, const ConnectionLayout &layout, char *base) {
  for (size_t i = 0; i < layout.fifos.size(); ++i) {
    const FifoOffsets &o = layout.fifos[i];
    FifoDesc &f = tables.fifos[i];
    if (o.ownsTail)
      f.tail = reinterpret_cast<uint64_t *>(base + o.tail);
    if (o.ownsHead)
      f.head = reinterpret_cast<uint64_t *>(base + o.head);
    if (o.ownsSlots) {
      f.slots = base + o.slots;
      f.slotBytes = o.slotBytes;
      f.localSlots = o.slots;
    }
    if (o.ownsMarks)
      f.marks = reinterpret_cast<uint32_t *>(base + o.marks);
  }
}

std::vector<PeerReference> resolveConnections(LaunchTables &tables, const ConnectionLayout &layout,
                                              const ConnectionMatch &match) {
  std::vector<PeerReference> refs;
  size_t nextRecv = 0, nextSend = 0;
  for (size_t k = 0; k < layout.entries.size(); ++k) {
    const ConnectionEntry &e = layout.entries[k];
    const uint32_t i = layout.entryFifo[k];
    FifoDesc &f = tables.fifos[i];
    if (e.kind == ConnectionEntry::Receive) {
      // The sender keeps the head counter (or its signal).
      const ConnectionEntry &other = match.recvFrom[nextRecv++];
      if (e.network) {
        f.netPeer = e.peer;
        f.tailSignal = e.signal;
        f.headSignal = other.signal;
      } else {
        refs.push_back({i, PeerReference::Head, e.peer, other.counter});
      }
      continue;
    }
    // The receiver keeps the slots and the tail counter (or its signal).
    const ConnectionEntry &other = match.sendTo[nextSend++];
    if (e.network) {
      f.netPeer = e.peer;
      f.tailSignal = other.signal;
      f.headSignal = e.signal;
      f.remoteSlots = other.slots;
      f.remoteSlotBytes = other.slotBytes;
    } else {
      f.slotBytes = other.slotBytes;
      refs.push_back({i, PeerReference::Slots, e.peer, other.slots});
      refs.push_back({i, PeerReference::Tail, e.peer, other.counter});
      refs.push_back({i, PeerReference::Marks, e.peer, other.marks});
    }
  }
  return refs;
}

void applyPeerPointers(LaunchTables &tables, const std::vector<PeerReference> &refs,
                       const std::vector<char *> &pointers) {
  for (size_t k = 0; k < refs.size(); ++k) {
    FifoDesc &f = tables.fifos[refs[k].fifo];
    switch (refs[k].field) {
    case PeerReference::Tail:
      f.tail = reinterpret_cast<uint64_t *>(pointers[k]);
      break;
    case PeerReference::Head:
      f.head = reinterpret_cast<uint64_t *>(pointers[k]);
      break;
    case PeerReference::Slots:
      f.slots = pointers[k];
      break;
    case PeerReference::Marks:
      f.marks = reinterpret_cast<uint32_t *>(pointers[k]);
      break;
    }
  }
}

Result<NcclTransport> chooseTransport(const std::vector<PeerHello> &hellos) {
  std::vector<uint32_t> bad, off;
  for (uint32_t r = 0; r < hellos.size(); ++r) {
    if (hellos[r].transport != hellos[0].transport)
      bad.push_back(r);
    if (hellos[r].offNode)
      off.push_back(r);
  }
  if (!bad.empty())
    return Status::error(
        cat(formatRanks(bad), " ", verb(bad, "asks", "ask"), " for another transport than rank 0"));
  switch (NcclTransport(hellos.empty() ? 0 : hellos[0].transport)) {
  case NcclTransport::Auto:
    return off.empty() ? NcclTransport::Ipc : NcclTransport::Symmetric;
  case NcclTransport::Ipc:
    if (!off.empty())
      return Status::error(cat(formatRanks(off), " ", verb(off, "talks", "talk"),
                               " to peers outside ", verb(off, "its", "their"),
                               " LSA team (another node), which CUDA IPC cannot reach; use the "
                               "symmetric transport"));
    return NcclTransport::Ipc;
  case NcclTransport::Symmetric:
    return NcclTransport::Symmetric;
  }
  return Status::error(cat("unknown transport ", hellos[0].transport));
}

} // namespace coll::kernels
