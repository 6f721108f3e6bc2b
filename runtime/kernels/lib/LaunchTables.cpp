//===- LaunchTables.cpp - Host pieces shared by the CUDA executors --------===//

#include "LaunchTables.h"

#include "DirectSends.h"
#include "KernelAbi.h"
#include "MemoryDemand.h"
#include "StepOrder.h"
#include "coll/Runtime/Executor.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <tuple>

namespace coll::kernels {

LaunchTables buildLaunchTables(const PlanInfo &info, const std::vector<RankSection> &sections) {
  LaunchTables t;
  // Receive FIFOs by (receiver, sender, channel), in the order of their
  // receiving threadblocks.
  std::map<std::tuple<uint32_t, int32_t, uint32_t>, int32_t> recvFifo;
  std::map<uint32_t, uint32_t> sectionOf;
  uint32_t maxSteps = 0;
  for (uint32_t s = 0; s < sections.size(); ++s) {
    const RankPlan &rp = *sections[s].plan;
    sectionOf[sections[s].rank] = s;
    // The GPU runs a rank's own steps, Input and Output the in-place alias
    // of each other exactly when the plan is in place (PreparedCall.h).
    const detail::DirectSteps direct = detail::directSendSteps(
        info, sections[s].rank, rp, detail::stepOrder(rp), nullptr, info.inplace);
    uint32_t first = uint32_t(t.tbs.size());
    for (uint32_t b = 0; b < rp.threadblocks.size(); ++b) {
      const Threadblock &tb = rp.threadblocks[b];
      TbDesc d;
      d.rank = s;
      d.tb = b;
      d.rankFirst = first;
      d.numSteps = uint32_t(tb.steps.size());
      d.stepsBegin = t.steps.size();
      d.depsBegin = t.deps.size();
      uint32_t maxRecv = 0;
      for (const Instruction &in : tb.steps) {
        OpcodeFlags f = opcodeFlags(in.op);
        d.sendsPerSlice += f.send;
        d.recvsPerSlice += f.recv;
        if (f.recv)
          maxRecv = std::max(maxRecv, in.count);
      }
      if (tb.recvPeer >= 0 && d.recvsPerSlice > 0) {
        d.recvFifo = int32_t(t.fifos.size());
        recvFifo[{sections[s].rank, tb.recvPeer, tb.channel}] = d.recvFifo;
        FifoDesc f;
        f.depth = info.connectionDepth;
        f.peer = uint32_t(tb.recvPeer);
        t.fifos.push_back(f);
        t.fifoMaxCount.push_back(std::max<uint32_t>(maxRecv, 1));
        t.fifoBlock.push_back(uint32_t(t.tbs.size()));
      }
      maxSteps = std::max(maxSteps, d.numSteps);
      t.steps.insert(t.steps.end(), tb.steps.begin(), tb.steps.end());
      if (b < direct.size() && direct[b].size() == tb.steps.size())
        t.directSteps.insert(t.directSteps.end(), direct[b].begin(), direct[b].end());
      else
        t.directSteps.resize(t.steps.size(), 0);
      t.deps.insert(t.deps.end(), tb.deps.begin(), tb.deps.end());
      t.tbs.push_back(d);
    }
    // Progress that some threadblock of the rank waits for.
    for (const Threadblock &tb : rp.threadblocks)
      for (const Dependency &dep : tb.deps)
        if (dep.tb < rp.threadblocks.size()) {
          TbDesc &waited = t.tbs[first + dep.tb];
          waited.progressSteps = std::max(waited.progressSteps, dep.step + 1);
        }
  }
  t.numRecvFifos = uint32_t(t.fifos.size());

  // Senders: the receiver's FIFO when it is in the launch, else a FIFO of
  // their own to be mapped onto the peer's memory.
  for (uint32_t block = 0; block < t.tbs.size(); ++block) {
    TbDesc &d = t.tbs[block];
    const RankSection &sec = sections[d.rank];
    const Threadblock &tb = sec.plan->threadblocks[d.tb];
    if (tb.sendPeer < 0 || d.sendsPerSlice == 0)
      continue;
    if (sectionOf.count(uint32_t(tb.sendPeer))) {
      auto it = recvFifo.find({uint32_t(tb.sendPeer), int32_t(sec.rank), tb.channel});
      if (it != recvFifo.end())
        d.sendFifo = it->second;
      continue;
    }
    RemoteSend rs;
    rs.fifo = uint32_t(t.fifos.size());
    rs.block = block;
    rs.peer = uint32_t(tb.sendPeer);
    rs.channel = tb.channel;
    for (const Instruction &in : tb.steps)
      if (opcodeFlags(in.op).send)
        rs.maxCount = std::max(rs.maxCount, in.count);
    FifoDesc f;
    f.depth = info.connectionDepth;
    f.peer = rs.peer;
    t.fifos.push_back(f);
    t.fifoMaxCount.push_back(rs.maxCount);
    d.sendFifo = int32_t(rs.fifo);
    t.remoteSends.push_back(rs);
  }
  t.sharedSteps = std::min(maxSteps, kMaxSharedSteps);
  return t;
}

SliceShape sliceShape(uint64_t count, uint32_t chunks, uint64_t sliceBytes, uint64_t elementBytes) {
  SliceShape s;
  ChunkLayout layout = ChunkLayout::make(count, chunks, 1);
  uint64_t sliceElems = std::max<uint64_t>(1, sliceBytes / elementBytes);
  s.layout = ChunkLayout::make(count, chunks, std::min(sliceElems, layout.maxChunk));
  s.pieceStride = roundUp(s.layout.sliceElements * elementBytes, 16);
  return s;
}

uint64_t maxPieceStride(uint64_t sliceBytes) {
  // A slice holds at least one element (at most 8 bytes), and never more
  // than sliceBytes once that is at least one element.
  return roundUp(std::max<uint64_t>(sliceBytes, 8), 16);
}

CallOptions launchCallOptions(uint64_t sliceBytes, DataType type) {
  CallOptions o;
  // An invalid type is prepareCall()'s error; any slice size does until then.
  const uint64_t es = unsigned(type) < numDataTypes() ? dataTypeSize(type) : 1;
  // sliceShape()'s slice: both layouts cap it at the largest chunk.
  o.sliceElements = std::max<uint64_t>(1, sliceBytes / es);
  o.alignedBuffers = true;
  o.countHeadroom = 4;
  return o;
}

Result<LaunchMemory> layoutLaunchMemory(const LaunchTables &tables,
                                        const std::vector<RankSection> &sections,
                                        const ChunkLayout &layout, uint64_t pieceStride, size_t es,
                                        bool slots, const std::vector<uint64_t> &copyBytes,
                                        const MemoryCap &cap, ProtocolKind protocol) {
  using detail::checkedBytes;
  using detail::checkedRoundUp;
  LaunchMemory m;
  detail::MemoryDemand d;
  if (cap.heldBytes)
    if (Status s = d.add(cap.heldWhat, cap.heldBytes); !s)
      return s;
  // FIFO slots: depth x the largest message's chunks x the piece stride.
  for (size_t i = 0; slots && i < tables.fifos.size(); ++i) {
    const uint32_t block = i < tables.numRecvFifos
                               ? tables.fifoBlock[i]
                               : tables.remoteSends[i - tables.numRecvFifos].block;
    const TbDesc &tb = tables.tbs[block];
    // A connection to a rank reached over the network (a remote send)
    // runs Simple whatever the launch's protocol.
    const ProtocolKind p = i < tables.numRecvFifos ? protocol : ProtocolKind::Simple;
    auto what = [&] {
      return detail::fifoWhat(sections[tb.rank].rank, tb.tb, tables.fifos[i].depth,
                              tables.fifoMaxCount[i], pieceStride, p);
    };
    Result<uint64_t> data = checkedBytes(what, 1, tables.fifoMaxCount[i], pieceStride);
    if (!data)
      return data.getStatus();
    Result<uint64_t> bytes = detail::checkedSlotBytes(what, tables.fifos[i].depth, *data, p);
    if (!bytes)
      return bytes.getStatus();
    if (Status s = d.add(what, *bytes); !s)
      return s;
    m.slotBytes += *bytes; // Within d.total, which did not overflow.
    if (p != ProtocolKind::Simple)
      m.stageBytes = std::max(m.stageBytes, stageBytesFor(p, *data));
  }
  if (m.stageBytes) {
    auto what = [&] {
      return cat("the ", protocolName(protocol), " staging copies of ", tables.tbs.size(), " CTAs");
    };
    Result<uint64_t> bytes = checkedBytes(what, tables.tbs.size(), 2, m.stageBytes);
    if (!bytes)
      return bytes.getStatus();
    if (Status s = d.add(what, *bytes); !s)
      return s;
    m.stagesBytes = *bytes;
  }
  // Scratch and private copies, each 256-byte aligned.
  const uint64_t kAlign = 256;
  m.scratchOffset.resize(sections.size());
  m.copyOffset.resize(sections.size());
  for (size_t s = 0; s < sections.size(); ++s) {
    const uint32_t rank = sections[s].rank, chunks = sections[s].plan->scratchChunks;
    auto what = [&] { return detail::scratchWhat(rank, chunks, layout, es); };
    Result<uint64_t> bytes = detail::scratchBytes(rank, chunks, layout, es);
    if (bytes)
      bytes = checkedRoundUp(what, *bytes, kAlign);
    if (!bytes)
      return bytes.getStatus();
    if (Status st = d.add(what, *bytes); !st)
      return st;
    m.scratchOffset[s] = m.scratchBytes;
    m.scratchBytes += *bytes;
    m.copyOffset[s] = m.copyBytes;
    if (s < copyBytes.size() && copyBytes[s]) {
      auto copyWhat = [&] { return cat("a copy of rank ", rank, "'s input"); };
      Result<uint64_t> copy = checkedRoundUp(copyWhat, copyBytes[s], kAlign);
      if (!copy)
        return copy.getStatus();
      if (Status st = d.add(copyWhat, *copy); !st)
        return st;
      m.copyBytes += *copy;
    }
  }
  if (Status s = detail::checkMemoryLimit(d, cap.limitBytes, cap.bufferBytes, cap.option); !s)
    return s;
  return m;
}

DeviceBinding bindCall(const PreparedCall &call, char *copy) {
  DeviceBinding b;
  const void *send = call.args.sendbuf;
  void *recv = call.args.recvbuf;
  b.input = resolve(call.input, send, recv, copy);
  b.output = resolve(call.output, send, recv, copy);
  auto device = [&](const coll::StagingCopy &c) {
    return StagingCopy{resolve(c.to, send, recv, copy), resolve(c.from, send, recv, copy), c.bytes};
  };
  for (const coll::StagingCopy &c : call.before)
    b.before.push_back(device(c));
  for (const coll::StagingCopy &c : call.after)
    b.after.push_back(device(c));
  return b;
}

Status checkThreadsPerBlock(uint32_t threads) {
  if (threads == 0 || threads % 32 || threads > kMaxThreadsPerBlock)
    return Status::error(cat("threads per block must be a multiple of 32 in [32, ",
                             kMaxThreadsPerBlock, "], not ", threads));
  return Status::success();
}

Status describeDeviceFailure(const DeviceError &e, const LaunchTables &tables,
                             const std::vector<RankSection> &sections, uint32_t depth,
                             double timeoutSeconds) {
  if (e.block >= tables.tbs.size() || tables.tbs[e.block].rank >= sections.size())
    return Status::error("the device reported a failure of an unknown threadblock");
  const TbDesc &d = tables.tbs[e.block];
  const RankSection &sec = sections[d.rank];
  const Threadblock &tb = sec.plan->threadblocks[d.tb];
  const char *mnemonic = e.step < tb.steps.size() ? opcodeInfo(tb.steps[e.step].op).mnemonic : "?";
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%g", timeoutSeconds);
  std::string what;
  switch (WaitKind(e.waitKind)) {
  case WaitKind::Dependency:
    what = cat("threadblock ", e.depTb, " to finish step ", e.depStep);
    break;
  case WaitKind::RecvMessage:
    what = cat("message ", e.expected - e.sliceBase * d.recvsPerSlice, " from rank ", tb.recvPeer,
               " on channel ", tb.channel);
    break;
  case WaitKind::SendSlot: {
    uint64_t base = e.sliceBase * d.sendsPerSlice;
    what = cat("a free slot to rank ", tb.sendPeer, " on channel ", tb.channel, " (all ", depth,
               " slots full: ", e.expected + depth - 1 - base, " messages sent, ",
               e.observed >= base ? e.observed - base : 0, " taken)");
    break;
  }
  case WaitKind::DirectRead: {
    // Its last step ran; messages it sent direct still lie in its buffers.
    const uint64_t base = e.sliceBase * d.sendsPerSlice;
    what = cat("rank ", tb.sendPeer, " to read the messages sent to it direct on channel ",
               tb.channel, " (", e.expected >= base ? e.expected - base : 0, " sent, ",
               e.observed >= base ? e.observed - base : 0, " read)");
    break;
  }
  case WaitKind::None:
    what = "nothing";
    break;
  }
  std::string msg = WaitKind(e.waitKind) == WaitKind::DirectRead
                        ? cat("rank ", sec.rank, " threadblock ", d.tb,
                              " (after its last step): timed out after ", seconds,
                              " s on the GPU waiting for ", what)
                        : cat("rank ", sec.rank, " threadblock ", d.tb, " step ", e.step, " (",
                              mnemonic, ", slice ", e.slice, "): timed out after ", seconds,
                              " s on the GPU waiting for ", what);
  if (e.failedCtas > 1)
    msg += cat("; ", e.failedCtas - 1, " more threadblocks timed out");
  if (e.abortedCtas)
    msg += cat("; ", e.abortedCtas, " stopped with it");
  return Status::error(msg);
}

Status decodeTrace(const std::vector<char> &raw, uint32_t traceSteps, const LaunchTables &tables,
                   const std::vector<RankSection> &sections, DeviceTrace &out) {
  out = DeviceTrace();
  const uint64_t perCta = traceBytesPerCta(traceSteps);
  const size_t ctas = tables.tbs.size();
  if (raw.size() < ctas * perCta)
    return Status::error(cat("the trace holds ", raw.size(), " bytes, not the ", ctas * perCta,
                             " of ", ctas, " threadblocks"));
  std::vector<TraceHeader> headers(ctas);
  uint64_t origin = std::numeric_limits<uint64_t>::max();
  for (size_t b = 0; b < ctas; ++b) {
    std::memcpy(&headers[b], raw.data() + b * perCta, sizeof(TraceHeader));
    const TraceHeader &h = headers[b];
    if (h.startNs == 0 || h.endNs < h.startNs)
      return Status::error(cat("threadblock ", tables.tbs[b].tb, " of rank ",
                               sections[tables.tbs[b].rank].rank, " left no trace"));
    origin = std::min(origin, h.startNs);
  }
  auto us = [&](uint64_t ns) { return double(ns - std::min(ns, origin)) / 1e3; };
  for (size_t b = 0; b < ctas; ++b) {
    const TraceHeader &h = headers[b];
    const TbDesc &d = tables.tbs[b];
    out.ctaBeginUs.push_back(us(h.startNs));
    out.ctaEndUs.push_back(us(h.endNs));
    if (h.protocol <= uint64_t(ProtocolKind::LL128))
      out.timeline.protocol = ProtocolKind(h.protocol);
    const uint64_t recorded = std::min<uint64_t>(h.steps, traceSteps);
    out.unrecorded += h.steps - recorded;
    for (uint64_t i = 0; i < recorded; ++i) {
      TraceRecord r;
      std::memcpy(&r, raw.data() + b * perCta + sizeof(TraceHeader) + i * sizeof(TraceRecord),
                  sizeof r);
      if (r.step >= d.numSteps)
        return Status::error(cat("threadblock ", d.tb, " of rank ", sections[d.rank].rank,
                                 ": trace record ", i, " is not a step it has"));
      const Instruction &in = tables.steps[d.stepsBegin + r.step];
      TraceEvent e;
      e.rank = sections[d.rank].rank;
      e.tb = d.tb;
      e.slice = r.slice;
      e.step = r.step;
      e.op = in.op;
      e.count = in.count;
      e.beginUs = us(r.beginNs);
      e.endUs = std::max(e.beginUs, us(r.endNs)); // A timer that stepped back.
      out.timeline.events.push_back(e);
    }
  }
  // A CTA's records are in program order; CTAs by rank and threadblock.
  std::stable_sort(out.timeline.events.begin(), out.timeline.events.end(),
                   [](const TraceEvent &a, const TraceEvent &b) {
                     return std::tie(a.rank, a.tb) < std::tie(b.rank, b.tb);
                   });
  return Status::success();
}

} // namespace coll::kernels
