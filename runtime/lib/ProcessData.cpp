//===- ProcessData.cpp - A process rank's data segment of one call --------===//
//
// Laying out, creating and connecting the data segments of a ProcessGroup
// call (ProcessData.h).
//
//===----------------------------------------------------------------------===//

#include "ProcessData.h"

#include "ExecCommon.h"

#include <algorithm>
#include <cstring>
#include <new>

namespace coll {
namespace detail {

namespace {

constexpr uint64_t align64(uint64_t n) {
  return (n + 63) & ~uint64_t(63);
}

} // namespace

Result<DataLayout> layOutData(const RankPlan &rp, uint32_t r, uint32_t depth, uint64_t pieceBytes,
                              const std::vector<uint8_t> &directFrom,
                              const std::vector<uint8_t> &remote, ProtocolKind protocol) {
  DataLayout d;
  constexpr uint64_t limit = uint64_t(1) << 40;
  for (uint32_t b = 0; b < rp.threadblocks.size(); ++b) {
    const Threadblock &tb = rp.threadblocks[b];
    uint32_t maxCount = tb.recvPeer >= 0 ? maxMessageChunks(tb, /*recv=*/true) : 0;
    if (maxCount == 0 || (size_t(tb.recvPeer) < remote.size() && remote[size_t(tb.recvPeer)]))
      continue;
    FifoEntry e;
    e.peer = tb.recvPeer;
    e.channel = tb.channel;
    e.depth = depth;
    e.tb = b;
    if (pieceBytes > limit / maxCount)
      return Status::error(cat("the FIFO of rank ", r, " threadblock ", b, " would need slots of ",
                               maxCount, " x ", pieceBytes, " bytes"));
    e.dataBytes = uint64_t(maxCount) * pieceBytes;
    e.slotBytes = slotBytesFor(protocol, e.dataBytes);
    e.protocol = uint32_t(protocol);
    e.peerReads = protocol == ProtocolKind::Simple && size_t(tb.recvPeer) < directFrom.size() &&
                  directFrom[size_t(tb.recvPeer)];
    d.fifos.push_back(e);
  }
  d.tableOffset = align64(sizeof(DataHeader));
  d.progressOffset = align64(d.tableOffset + d.fifos.size() * sizeof(FifoEntry));
  uint64_t at = d.progressOffset + rp.threadblocks.size() * sizeof(PaddedCounter);
  for (FifoEntry &e : d.fifos) {
    e.countersOffset = align64(at);
    e.directOffset = e.countersOffset + 2 * sizeof(PaddedCounter);
    e.slotsOffset = e.peerReads ? align64(e.directOffset + e.depth) : e.directOffset;
    if (e.slotBytes > limit / e.depth)
      return Status::error(cat("the FIFO of rank ", r, " threadblock ", e.tb, " would need ",
                               e.depth, " slots of ", e.slotBytes, " bytes"));
    at = e.slotsOffset + e.depth * e.slotBytes;
    if (at > limit)
      return Status::error(cat("rank ", r, "'s connections would need more than ", limit,
                               " bytes of shared memory"));
  }
  d.bytes = align64(at);
  return d;
}

OwnDataSegment::~OwnDataSegment() {
  if (m.mapped()) {
    if (segmentIs(segName, m.device(), m.inode()))
      unlinkSegment(segName);
    m.reset();
  }
}

void OwnDataSegment::unlinkName() {
  if (m.mapped() && segmentIs(segName, m.device(), m.inode()))
    unlinkSegment(segName);
}

Status OwnDataSegment::create(const ControlBlock &owner, uint64_t seq, const RankPlan &rp,
                              DataLayout layout) {
  data = std::move(layout);
  std::vector<int32_t> senders; // The ranks that send to us, once each.
  for (const FifoEntry &e : data.fifos)
    senders.push_back(e.peer);
  std::sort(senders.begin(), senders.end());
  senders.erase(std::unique(senders.begin(), senders.end()), senders.end());

  // The header first, published by its magic: whoever finds the
  // segment (another job's removeDeadSegments) can tell whose it is
  // from the start, even while its memory is being reserved.
  auto writeHeader = [&](char *p) {
    DataHeader *h = new (p) DataHeader();
    h->nonce = owner.nonce;
    h->seq = seq;
    h->bytes = data.bytes;
    h->rank = owner.rank;
    h->numTbs = uint32_t(rp.threadblocks.size());
    h->numFifos = uint32_t(data.fifos.size());
    h->pid = owner.pid;
    h->startTime = owner.startTime;
    h->pidNamespace = owner.pidNamespace;
    h->createdNs = nowNs();
    h->unmappedSenders.store(uint32_t(senders.size()), std::memory_order_relaxed);
    h->magic.store(dataMagic, std::memory_order_release);
  };
  ShmOpenResult r;
  Status s =
      ShmOps::create(segName, data.bytes, m, r, /*keepName=*/true, writeHeader, sizeof(DataHeader));
  if (s && r == ShmOpenResult::Exists) {
    // Left by an earlier job of this name (this rank's names are ours).
    unlinkSegment(segName);
    s = ShmOps::create(segName, data.bytes, m, r, /*keepName=*/true, writeHeader,
                       sizeof(DataHeader));
    if (s && r == ShmOpenResult::Exists)
      s = Status::error(cat("shared memory ", segName, " exists"));
  }
  if (!s)
    return s;

  // The header is written; the FIFO table and counters (zero, as created).
  char *base = m.data();
  if (!data.fifos.empty()) // A rank may receive nothing (a broadcast's root).
    std::memcpy(base + data.tableOffset, data.fifos.data(), data.fifos.size() * sizeof(FifoEntry));
  for (uint32_t b = 0; b < rp.threadblocks.size(); ++b)
    new (base + data.progressOffset + b * sizeof(PaddedCounter)) PaddedCounter();
  for (const FifoEntry &e : data.fifos) {
    new (base + e.countersOffset) PaddedCounter();
    new (base + e.countersOffset + sizeof(PaddedCounter)) PaddedCounter();
  }
  // Nobody sends to us: nobody maps the segment, and the name can go now.
  if (senders.empty())
    unlinkSegment(segName);
  return Status::success();
}

CallFifos::~CallFifos() {
  if (engine)
    engine->detach(links);
}

CallError connectFifos(JobControl &jc, uint64_t seq, const RankPlan &rp, uint32_t depth,
                       uint64_t pieceBytes, const OwnDataSegment &own, CallFifos &fifos,
                       ProtocolKind protocol) {
  const uint32_t me = jc.rank;
  const size_t ntb = rp.threadblocks.size();
  fifos.peerData.resize(jc.nranks);
  fifos.send.assign(ntb, Fifo());
  fifos.recv.assign(ntb, Fifo());
  fifos.hasSend.assign(ntb, false);
  fifos.hasRecv.assign(ntb, false);
  for (uint32_t b = 0; b < rp.threadblocks.size(); ++b) {
    const Threadblock &tb = rp.threadblocks[b];
    uint32_t maxSend = tb.sendPeer >= 0 ? maxMessageChunks(tb, /*recv=*/false) : 0;
    if (maxSend == 0)
      continue;
    const uint32_t q = uint32_t(tb.sendPeer);
    if (jc.isRemote(q)) {
      auto link = std::make_shared<NetLink>(true, q, netTagBase(seq, me, tb.channel), depth,
                                            uint64_t(maxSend) * pieceBytes);
      fifos.send[b] = link->fifo();
      fifos.send[b].receiverBell = &jc.net->bell();
      fifos.links.push_back(std::move(link));
      fifos.hasSend[b] = true;
      continue;
    }
    if (!fifos.peerData[q].mapped()) {
      ShmOpenResult r = ShmOpenResult::Absent;
      std::string name = dataName(jc.job, q, seq);
      Status s = ShmOps::open(name, sizeof(DataHeader), fifos.peerData[q], r);
      const DataHeader *h = reinterpret_cast<const DataHeader *>(fifos.peerData[q].data());
      if (!s)
        return {ErrorKind::SystemError, s.message()};
      if (r != ShmOpenResult::Mapped || h->magic != dataMagic || h->nonce != jc.ctl[q]->nonce ||
          h->seq != seq || h->bytes > fifos.peerData[q].size()) {
        if (CallError e = jc.checkPeers(seq))
          return e;
        return {ErrorKind::Internal, cat("rank ", me, ": the shared memory ", name, " of rank ", q,
                                         " for call ", seq, " is missing or not rank ", q, "'s")};
      }
      // The last of its senders to map it unlinks its name.
      DataHeader *mh = reinterpret_cast<DataHeader *>(fifos.peerData[q].data());
      if (mh->unmappedSenders.fetch_sub(1, std::memory_order_acq_rel) == 1 &&
          segmentIs(name, fifos.peerData[q].device(), fifos.peerData[q].inode()))
        unlinkSegment(name);
    }
    const char *base = fifos.peerData[q].data();
    const DataHeader *h = reinterpret_cast<const DataHeader *>(base);
    const FifoEntry *table =
        reinterpret_cast<const FifoEntry *>(base + align64(sizeof(DataHeader)));
    const FifoEntry *found = nullptr;
    for (uint32_t i = 0; i < h->numFifos; ++i)
      if (table[i].peer == int32_t(me) && table[i].channel == tb.channel)
        found = &table[i];
    if (!found || found->depth != depth || found->protocol != uint32_t(protocol) ||
        found->dataBytes < uint64_t(maxSend) * pieceBytes ||
        found->slotBytes < slotBytesFor(protocol, found->dataBytes) ||
        found->slotsOffset + found->depth * found->slotBytes > h->bytes)
      return {ErrorKind::Internal,
              cat("rank ", me, " threadblock ", b, ": rank ", q,
                  " has no fitting FIFO for channel ", tb.channel, " in call ", seq)};
    Fifo &f = fifos.send[b];
    char *mbase = fifos.peerData[q].data();
    f.depth = found->depth;
    f.slotBytes = found->slotBytes;
    f.dataBytes = found->dataBytes;
    f.protocol = protocol;
    f.memory = mbase + found->slotsOffset;
    f.tail = &reinterpret_cast<PaddedCounter *>(mbase + found->countersOffset)[0].value;
    f.head = &reinterpret_cast<PaddedCounter *>(mbase + found->countersOffset)[1].value;
    f.receiverBell = &jc.ctl[q]->bell;
    if (found->peerReads && protocol == ProtocolKind::Simple &&
        found->directOffset + found->depth <= found->slotsOffset)
      f.direct = reinterpret_cast<uint8_t *>(mbase + found->directOffset);
    fifos.hasSend[b] = true;
  }
  for (uint32_t b = 0; b < rp.threadblocks.size(); ++b) {
    const Threadblock &tb = rp.threadblocks[b];
    uint32_t maxRecv = tb.recvPeer >= 0 ? maxMessageChunks(tb, /*recv=*/true) : 0;
    if (maxRecv == 0 || !jc.isRemote(uint32_t(tb.recvPeer)))
      continue;
    auto link = std::make_shared<NetLink>(false, uint32_t(tb.recvPeer),
                                          netTagBase(seq, uint32_t(tb.recvPeer), tb.channel), depth,
                                          uint64_t(maxRecv) * pieceBytes);
    fifos.recv[b] = link->fifo();
    fifos.recv[b].senderBell = &jc.net->bell();
    fifos.links.push_back(std::move(link));
    fifos.hasRecv[b] = true;
  }
  if (!fifos.links.empty()) {
    fifos.engine = jc.net.get();
    jc.net->attach(fifos.links);
  }
  char *base = own.base();
  for (const FifoEntry &e : own.layout().fifos) {
    Fifo &f = fifos.recv[e.tb];
    f.depth = e.depth;
    f.slotBytes = e.slotBytes;
    f.dataBytes = e.dataBytes;
    f.protocol = ProtocolKind(e.protocol);
    f.memory = base + e.slotsOffset;
    f.tail = &reinterpret_cast<PaddedCounter *>(base + e.countersOffset)[0].value;
    f.head = &reinterpret_cast<PaddedCounter *>(base + e.countersOffset)[1].value;
    f.senderBell = &jc.ctl[uint32_t(e.peer)]->bell;
    if (e.peerReads) {
      f.direct = reinterpret_cast<uint8_t *>(base + e.directOffset);
      f.senderPid = jc.ctl[uint32_t(e.peer)]->pid;
      f.senderRank = uint32_t(e.peer);
      f.windows = &jc.peerWindows();
    }
    fifos.hasRecv[e.tb] = true;
  }
  return {};
}

} // namespace detail
} // namespace coll
