//===- PreparedCall.cpp - Validated plans, prepared calls, agreement ------===//
//
// The host side every executor shares (PreparedCall.h): a plan is checked
// once into a ValidatedPlan, each rank's call is prepared by one pure
// function, and the ranks' descriptions are compared by one agree().
//
//===----------------------------------------------------------------------===//

#include "coll/Runtime/PreparedCall.h"

#include "PlanFormat.h"
#include "Text.h"
#include "coll/Runtime/PlanIO.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <sstream>

namespace coll {

using detail::cat;
using detail::copyText;

namespace {

std::string text(const char *field, size_t size) {
  return std::string(field, strnlen(field, size));
}

bool overlaps(uint64_t a, uint64_t aBytes, uint64_t b, uint64_t bBytes) {
  return aBytes && bBytes && a < b + bBytes && b < a + aBytes;
}

} // namespace

const char *errorKindName(ErrorKind kind) {
  switch (kind) {
  case ErrorKind::None:
    return "success";
  case ErrorKind::InvalidArgument:
    return "invalid argument";
  case ErrorKind::InvalidPlan:
    return "invalid plan";
  case ErrorKind::SystemError:
    return "system error";
  case ErrorKind::Timeout:
    return "timeout";
  case ErrorKind::Mismatch:
    return "mismatch";
  case ErrorKind::Internal:
    return "internal error";
  case ErrorKind::Remote:
    return "remote error";
  }
  return "unknown error";
}

std::string formatChecksum(uint64_t checksum) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(checksum));
  return buf;
}

//===----------------------------------------------------------------------===//
// ValidatedPlan
//===----------------------------------------------------------------------===//

Result<ValidatedPlan> ValidatedPlan::check(std::shared_ptr<const Plan> plan,
                                           const uint64_t *knownSum) {
  if (!knownSum)
    if (Status s = validatePlan(*plan); !s)
      return Status::error("invalid plan: " + s.message());
  Result<uint32_t> chunks = planChunksPerUnit(plan->info);
  if (!chunks)
    return Status::error("invalid plan: " + chunks.message());
  ValidatedPlan v;
  v.chunks = *chunks;
  if (knownSum) {
    v.sum = *knownSum;
  } else {
    // The checksum a file of this plan stores (over the bytes after the
    // header), so that a plan made in memory and the same plan loaded from
    // a file have one identity. A section parsed for one rank is named by
    // its file's checksum, which every rank's load shares, as long as it is
    // as it was parsed; a changed or hand-built one by its own bytes.
    std::vector<uint8_t> bytes = serializePlan(*plan);
    v.sum = planformat::storedChecksum(bytes.data(), bytes.size());
    if (plan->loadedRank >= 0 && plan->sourceChecksum && v.sum == plan->parsedChecksum)
      v.sum = plan->sourceChecksum;
  }
  v.thePlan = std::move(plan);
  return v;
}

Result<ValidatedPlan> ValidatedPlan::make(Plan plan) {
  return check(std::make_shared<const Plan>(std::move(plan)), nullptr);
}

Result<ValidatedPlan> ValidatedPlan::borrow(const Plan &plan) {
  // Shares no ownership: the caller keeps the plan alive.
  return check(std::shared_ptr<const Plan>(std::shared_ptr<const Plan>(), &plan), nullptr);
}

Result<ValidatedPlan> ValidatedPlan::parse(const uint8_t *data, size_t size, int rank) {
  Result<Plan> plan = parsePlan(data, size, rank);
  if (!plan)
    return plan.getStatus();
  // parsePlan() validated the plan and its bytes against the stored
  // checksum, which is the identity of every rank's load of the file.
  const uint64_t sum = planformat::storedChecksum(data, size);
  return check(std::make_shared<const Plan>(std::move(*plan)), &sum);
}

Result<ValidatedPlan> ValidatedPlan::load(const std::string &path, int rank) {
  Result<std::vector<uint8_t>> bytes = planformat::readPlanBytes(path);
  if (!bytes)
    return bytes.getStatus();
  Result<ValidatedPlan> v = parse(bytes->data(), bytes->size(), rank);
  if (!v)
    return Status::error(path + ": " + v.message());
  return v;
}

const RankPlan *ValidatedPlan::section(uint32_t rank) const {
  const Plan &p = *thePlan;
  if (p.loadedRank >= 0)
    return uint32_t(p.loadedRank) == rank && !p.ranks.empty() ? &p.ranks[0] : nullptr;
  return rank < p.ranks.size() ? &p.ranks[rank] : nullptr;
}

std::string describePlan(const std::string &name, CollectiveKind kind, uint32_t nranks,
                         uint64_t checksum, uint32_t root) {
  const bool rooted = isValidCollective(kind) && collectiveInfo(kind).rooted;
  return cat("'", name, "' (", collectiveName(kind), rooted ? cat(", root ", root) : "", ", ",
             nranks, " ranks, checksum ", formatChecksum(checksum), ")");
}

//===----------------------------------------------------------------------===//
// Agreement
//===----------------------------------------------------------------------===//

CallDescription describeFailedCall(const CallError &error) {
  CallDescription d;
  d.errorKind = unsigned(error ? error.kind : ErrorKind::Internal);
  copyText(d.error, sizeof d.error, error.message);
  return d;
}

CallError agree(const CallDescription *calls, uint32_t n, uint32_t me) {
  // Argument errors first: the rank itself gets its message.
  for (uint32_t q = 0; q < n; ++q) {
    if (calls[q].errorKind == 0)
      continue;
    std::string msg = text(calls[q].error, sizeof calls[q].error);
    return {ErrorKind(calls[q].errorKind), q == me ? msg : cat("rank ", q, " failed: ", msg)};
  }
  auto describe = [](const CallDescription &c) {
    return describePlan(text(c.planName, sizeof c.planName), CollectiveKind(c.collective),
                        c.planRanks, c.planChecksum, c.planRoot);
  };
  // The operator is named for a collective that reduces (a user-declared
  // one may), or where the ranks' differ.
  const bool opsDiffer = [&] {
    for (uint32_t q = 1; q < n; ++q)
      if (calls[q].op != calls[0].op)
        return true;
    return false;
  }();
  auto args = [&](const CallDescription &c, bool slice) {
    const CollectiveKind kind = CollectiveKind(c.collective);
    const bool reduces = !isValidCollective(kind) || kind == CollectiveKind::Custom ||
                         collectiveInfo(kind).reduces || opsDiffer;
    return cat("count ", c.count, ", ", dataTypeName(DataType(c.type)),
               reduces ? cat(", ", redOpName(RedOp(c.op))) : std::string(),
               slice ? cat(", slice ", c.sliceElements) : std::string());
  };
  auto protocol = [](const CallDescription &c) {
    return c.protocol <= unsigned(ProtocolKind::LL128) ? protocolName(ProtocolKind(c.protocol))
                                                       : "an unknown protocol";
  };
  for (uint32_t q = 1; q < n; ++q) {
    const CallDescription &a = calls[0], &b = calls[q];
    if (a.planChecksum != b.planChecksum)
      return {ErrorKind::Mismatch, cat("the ranks called with different plans: rank 0 with ",
                                       describe(a), ", rank ", q, " with ", describe(b))};
    if (a.count != b.count || a.type != b.type || a.op != b.op ||
        a.sliceElements != b.sliceElements) {
      // The slice size is named only where it differs.
      bool slice = a.sliceElements != b.sliceElements;
      return {ErrorKind::Mismatch, cat("the ranks called with different arguments: rank 0 with ",
                                       args(a, slice), "; rank ", q, " with ", args(b, slice))};
    }
    if (a.protocol != b.protocol)
      return {ErrorKind::Mismatch,
              cat("the ranks chose different protocols: rank 0 ", protocol(a), ", rank ", q, " ",
                  protocol(b), " (give every rank the same protocol choice)")};
  }
  return {};
}

//===----------------------------------------------------------------------===//
// Preparing a call
//===----------------------------------------------------------------------===//

bool writesInput(const RankPlan &rp) {
  for (const Threadblock &tb : rp.threadblocks)
    for (const Instruction &in : tb.steps)
      if (opcodeInfo(in.op).writeDst && in.dstBuf == BufferKind::Input)
        return true;
  return false;
}

CallError checkCall(const Plan &plan, uint32_t rank, const CallArgs &a, const CallOptions &o) {
  const PlanInfo &info = plan.info;
  const bool holdsRank = plan.loadedRank < 0
                             ? rank < plan.ranks.size()
                             : uint32_t(plan.loadedRank) == rank && !plan.ranks.empty();
  auto bad = [&](ErrorKind kind, const std::string &msg) {
    return CallError{kind, cat("rank ", rank, ": ", msg)};
  };
  if (o.worldRanks && info.nranks != o.worldRanks)
    return bad(ErrorKind::InvalidPlan, cat("the plan '", info.name, "' is for ", info.nranks,
                                           " ranks, but the ", o.worldName, " has ", o.worldRanks));
  if (rank >= info.nranks)
    return bad(ErrorKind::InvalidArgument,
               cat("not a rank of the plan, which has ", info.nranks, " ranks"));
  if (!holdsRank)
    return bad(ErrorKind::InvalidPlan,
               o.ownSectionSuffices
                   ? cat("the plan '", info.name, "' was loaded for rank ", plan.loadedRank,
                         ", not for this rank")
                   : cat("the plan '", info.name, "' does not hold every rank (loaded for rank ",
                         plan.loadedRank, " only); load it whole"));
  if (!o.ownSectionSuffices && plan.loadedRank >= 0)
    return bad(ErrorKind::InvalidPlan,
               cat("the plan '", info.name, "' does not hold every rank (loaded for rank ",
                   plan.loadedRank, " only); load it whole"));
  if (unsigned(a.type) >= numDataTypes())
    return bad(ErrorKind::InvalidArgument, cat("invalid data type ", unsigned(a.type)));
  if (unsigned(a.op) >= numRedOps())
    return bad(ErrorKind::InvalidArgument, cat("invalid reduction operator ", unsigned(a.op)));
  if (o.sliceElements == 0)
    return bad(ErrorKind::InvalidArgument, "the slice size must be at least 1 element");
  if (info.collective == CollectiveKind::Custom) {
    // A user-declared collective's reductions have no rank count to divide
    // by, and its chunks move between positions of a unit, so they must all
    // be the same size.
    if (a.op == RedOp::Avg)
      return bad(ErrorKind::InvalidArgument,
                 cat("avg is defined for the built-in collectives only; the plan '", info.name,
                     "' implements a user-declared collective (use sum, then divide)"));
    const uint64_t c = userCollectiveUnit(info);
    if (c > 1 && a.count % c != 0)
      return bad(ErrorKind::InvalidArgument,
                 cat("count ", a.count, " is not a multiple of ", c,
                     ", the chunks per unit of the plan '", info.name,
                     "' (a user-declared collective's chunks must all be the same size)"));
  }
  const size_t es = dataTypeSize(a.type);
  // The bytes of N units, with the executor's headroom, stay in range.
  if (a.count > std::numeric_limits<uint64_t>::max() / es / info.nranks /
                    std::max<uint32_t>(1, o.countHeadroom))
    return bad(ErrorKind::InvalidArgument, cat("count ", a.count, " is too large"));
  if ((a.sendBlocks || a.recvBlocks) && !o.bufferBlocks)
    return bad(ErrorKind::InvalidArgument,
               cat("the ", o.worldName,
                   " takes its buffers whole, not in blocks (CallArgs::sendBlocks, recvBlocks)"));
  if (a.count > 0 && (a.sendBlocks || a.recvBlocks)) {
    const BufferElements e = planBufferElements(info, a.count);
    const uint64_t bytes = a.count * es;
    for (bool send : {true, false}) {
      const void *const *blocks =
          send ? a.sendBlocks : const_cast<const void *const *>(a.recvBlocks);
      if (!blocks)
        continue;
      const char *which = send ? "send" : "receive";
      const uint64_t given = send ? a.numSendBlocks : a.numRecvBlocks;
      const uint64_t elements = send ? e.input : e.output;
      const uint64_t units = elements / a.count;
      if (given != units || elements % a.count != 0)
        return bad(ErrorKind::InvalidArgument,
                   cat("the ", which, " buffer is given as ", given, " blocks, but ",
                       collectiveName(info.collective), " of ", info.nranks, " ranks ",
                       send ? "sends " : "receives ", units, " units of count ", a.count));
      for (uint64_t i = 0; i < units; ++i)
        if (!blocks[i])
          return bad(ErrorKind::InvalidArgument,
                     cat("block ", i, " of the ", which, " buffer is null (count is not 0)"));
      if (send)
        continue; // Read only: one tensor may be sent to every rank.
      // Each receive block its own: a plan may forward what it received
      // from its output, which another block over it would have changed.
      std::vector<std::pair<uintptr_t, uint64_t>> at(units);
      for (uint64_t i = 0; i < units; ++i)
        at[i] = {reinterpret_cast<uintptr_t>(blocks[i]), i};
      std::sort(at.begin(), at.end());
      for (uint64_t i = 1; i < units; ++i)
        if (at[i].first - at[i - 1].first < bytes)
          return bad(ErrorKind::InvalidArgument,
                     cat("blocks ", std::min(at[i - 1].second, at[i].second), " and ",
                         std::max(at[i - 1].second, at[i].second),
                         " of the receive buffer overlap"));
    }
  }
  if (a.count > 0 && !a.sendBlocks && !a.sendbuf)
    return bad(ErrorKind::InvalidArgument, "the send buffer is null (count is not 0)");
  if (a.count > 0 && !a.recvBlocks && !a.recvbuf)
    return bad(ErrorKind::InvalidArgument, "the receive buffer is null (count is not 0)");
  if (o.alignedBuffers && a.count > 0) {
    bool sendOff = reinterpret_cast<uintptr_t>(a.sendbuf) % es != 0;
    if (sendOff || reinterpret_cast<uintptr_t>(a.recvbuf) % es != 0)
      return bad(ErrorKind::InvalidArgument,
                 cat("the ", sendOff ? "send" : "receive", " buffer is not aligned to its ", es,
                     "-byte elements"));
  }
  return {};
}

void PreparedCall::fail(CallError e) {
  error = std::move(e);
  description.errorKind = unsigned(error.kind);
  copyText(description.error, sizeof description.error, error.message);
}

PreparedCall prepareCall(const ValidatedPlan &vp, uint32_t rank, const CallArgs &args,
                         const CallOptions &options) {
  PreparedCall c;
  c.rank = rank;
  c.args = args;
  const PlanInfo &info = vp.info();
  CallDescription &d = c.description;
  d.planChecksum = vp.checksum();
  d.count = args.count;
  d.sliceElements = options.sliceElements;
  d.type = unsigned(args.type);
  d.op = unsigned(args.op);
  d.collective = unsigned(info.collective);
  d.planRanks = info.nranks;
  d.planRoot = info.root;
  copyText(d.planName, sizeof d.planName, info.name);
  if (CallError e = checkCall(vp.plan(), rank, args, options)) {
    c.fail(std::move(e));
    return c;
  }

  const CollectiveKind kind = info.collective;
  const size_t es = dataTypeSize(args.type);
  c.elementSize = es;
  c.elements = planBufferElements(info, args.count);
  c.inputBytes = c.elements.input * es;
  c.outputBytes = c.elements.output * es;
  c.unitBytes = args.count * es;
  c.protocol =
      chooseProtocol(info.protocol, options.protocol, std::max(c.inputBytes, c.outputBytes));
  d.protocol = unsigned(c.protocol);
  {
    ChunkLayout whole = ChunkLayout::make(args.count, vp.chunksPerUnit(), 1);
    c.layout =
        ChunkLayout::make(args.count, vp.chunksPerUnit(),
                          std::max<uint64_t>(1, std::min(options.sliceElements, whole.maxChunk)));
  }
  c.divideByRanks = args.op == RedOp::Avg && args.count > 0 && collectiveReduces(kind) &&
                    collectiveDefinesOutput(kind, info.root, rank);
  c.input = {CallMemory::Send, 0};
  c.output = {CallMemory::Recv, 0};
  if (args.count == 0)
    return c;

  const uint64_t unit = c.unitBytes;
  bool overlap = false;
  if (!args.sendBlocks && !args.recvBlocks) {
    const uint64_t sendAt = reinterpret_cast<uintptr_t>(args.sendbuf);
    const uint64_t recvAt = reinterpret_cast<uintptr_t>(args.recvbuf);
    c.inPlace = isInPlaceCall(kind, rank, args.sendbuf, args.recvbuf, unit);
    overlap = overlaps(sendAt, c.inputBytes, recvAt, c.outputBytes);
  } else {
    // In blocks: in place when every unit of the input is its alias unit
    // of the output, and overlapping when any unit of one overlaps any of
    // the other (then the input is copied first).
    const uint64_t inUnits = c.elements.input / args.count,
                   outUnits = c.elements.output / args.count;
    auto sendUnit = [&](uint64_t k) { return sendAddress(args, unit, k * unit); };
    auto recvUnit = [&](uint64_t k) { return recvAddress(args, unit, k * unit); };
    switch (collectiveInfo(kind).inPlace) {
    case InPlaceAlias::Same:
      c.inPlace = inUnits == outUnits;
      for (uint64_t k = 0; k < inUnits && c.inPlace; ++k)
        c.inPlace = sendUnit(k) == recvUnit(k);
      break;
    case InPlaceAlias::InputInOutput:
      c.inPlace = inUnits == 1 && inPlaceBlock(kind, rank) < outUnits &&
                  sendUnit(0) == recvUnit(inPlaceBlock(kind, rank));
      break;
    case InPlaceAlias::OutputInInput:
      // An in-place plan works in its whole input: never in the caller's
      // send blocks, whose other units are the caller's own tensors (and
      // may alias the output). Called so, it runs on a copy.
      c.inPlace = !args.sendBlocks && outUnits == 1 && inPlaceBlock(kind, rank) < inUnits &&
                  recvUnit(0) == sendUnit(inPlaceBlock(kind, rank));
      break;
    case InPlaceAlias::None:
      break;
    }
    // Sorted by start: a unit overlaps one of the other side when it
    // starts before the farthest end of the other side's units so far.
    struct Span {
      uintptr_t begin, end;
      bool send;
    };
    std::vector<Span> spans;
    for (uint64_t k = 0; k < inUnits; ++k) {
      const uintptr_t at = reinterpret_cast<uintptr_t>(sendUnit(k));
      spans.push_back({at, at + unit, true});
    }
    for (uint64_t k = 0; k < outUnits; ++k) {
      const uintptr_t at = reinterpret_cast<uintptr_t>(recvUnit(k));
      spans.push_back({at, at + unit, false});
    }
    std::sort(spans.begin(), spans.end(),
              [](const Span &a, const Span &b) { return a.begin < b.begin; });
    uintptr_t farthest[2] = {0, 0}; // Of receive units, of send units.
    for (const Span &sp : spans) {
      if (sp.begin < farthest[sp.send ? 0 : 1])
        overlap = true;
      farthest[sp.send ? 1 : 0] = std::max(farthest[sp.send ? 1 : 0], sp.end);
    }
  }
  const CallBuffer copy{CallMemory::Copy, 0};
  auto snapshot = [&] {
    c.copyBytes = c.inputBytes;
    if (!args.sendBlocks) {
      c.before.push_back({copy, {CallMemory::Send, 0}, c.inputBytes});
    } else {
      for (uint64_t at = 0; at < c.inputBytes; at += unit) // A copy per block.
        c.before.push_back({{CallMemory::Copy, at}, {CallMemory::Send, at}, unit});
    }
    return copy;
  };

  if (!info.inplace) {
    // An out-of-place plan must not see its output change under its input,
    // and must not write the user's (const) input.
    if (overlap || writesInput(*vp.section(rank)))
      c.input = snapshot();
    return c;
  }
  if (c.inPlace)
    return c; // The plan's one buffer is the user's.

  // An in-place plan called out of place: the input goes where the plan
  // expects it, and sendbuf stays untouched.
  const CallBuffer src = overlap ? snapshot() : CallBuffer{CallMemory::Send, 0};
  switch (collectiveInfo(kind).inPlace) {
  case InPlaceAlias::InputInOutput: {
    // The input is block `rank` of the output.
    const CallBuffer block{CallMemory::Recv, inPlaceBlock(kind, rank) * unit};
    c.before.push_back({block, src, unit});
    c.input = block;
    break;
  }
  case InPlaceAlias::OutputInInput: {
    // The plan works in the whole input and leaves the result in block
    // `rank`: run on a copy and copy that block out.
    if (!overlap)
      snapshot();
    c.input = copy;
    c.output = {CallMemory::Copy, inPlaceBlock(kind, rank) * unit};
    c.after.push_back({{CallMemory::Recv, 0}, c.output, unit});
    break;
  }
  case InPlaceAlias::Same:
    c.before.push_back({{CallMemory::Recv, 0}, src, unit});
    c.input = {CallMemory::Recv, 0};
    break;
  case InPlaceAlias::None:
    break; // Rejected by planChunksPerUnit().
  }
  return c;
}

} // namespace coll
