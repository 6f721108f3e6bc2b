//===- GroupPattern.cpp - Send/recv groups that are collectives -----------===//

#include "GroupPattern.h"

#include <sstream>

namespace collcshim {

GroupPatterns GroupPatterns::parse(const std::string &list, std::string &error) {
  GroupPatterns p;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    // Trim spaces around each name.
    const size_t b = item.find_first_not_of(" \t");
    const size_t e = item.find_last_not_of(" \t");
    item = b == std::string::npos ? "" : item.substr(b, e - b + 1);
    if (item.empty())
      continue;
    if (item == "alltoall")
      p.allToAll = true;
    else if (item == "gather")
      p.gather = true;
    else if (item == "scatter")
      p.scatter = true;
    else if (item == "all")
      p.allToAll = p.gather = p.scatter = true;
    else if (error.empty())
      error = "'" + item + "' is not a group pattern (alltoall, gather, scatter or all)";
  }
  return p;
}

const char *groupKindName(GroupKind kind) {
  switch (kind) {
  case GroupKind::AllToAll:
    return "alltoall";
  case GroupKind::Gather:
    return "gather";
  case GroupKind::Scatter:
    return "scatter";
  case GroupKind::None:
    break;
  }
  return "none";
}

namespace {

GroupCall none(const std::string &why) {
  GroupCall c;
  c.why = why;
  return c;
}

} // namespace

GroupCall classifyGroup(const std::vector<P2pOp> &ops, uint32_t nranks, uint32_t rank,
                        const GroupPatterns &patterns) {
  if (ops.empty())
    return none("the group has no send or receive");
  if (rank >= nranks)
    return none("the rank is not one of the communicator's");
  const P2pOp &first = ops.front();
  std::vector<const void *> sendFrom(nranks, nullptr);
  std::vector<void *> recvInto(nranks, nullptr);
  std::vector<uint32_t> sendsTo(nranks, 0), recvsFrom(nranks, 0);
  uint32_t sends = 0, recvs = 0;
  for (const P2pOp &op : ops) {
    if (op.comm != first.comm || op.stream != first.stream)
      return none("the group's sends and receives are on more than one communicator or stream");
    if (op.type != first.type || op.count != first.count)
      return none("the group's sends and receives differ in count or type");
    if (op.peer < 0 || uint32_t(op.peer) >= nranks)
      return none("a peer is not a rank of the communicator");
    if (op.count == 0)
      return none("the group moves no data");
    const uint32_t peer = uint32_t(op.peer);
    if (op.send) {
      ++sends;
      if (sendsTo[peer]++)
        return none("the group sends to a rank twice");
      sendFrom[peer] = op.buffer;
    } else {
      ++recvs;
      if (recvsFrom[peer]++)
        return none("the group receives from a rank twice");
      recvInto[peer] = op.buffer;
    }
  }
  // A send to itself and a receive from itself are a local copy, which
  // pairs with no peer: the shape is that of the rest.
  const bool selfPair = sendsTo[rank] && recvsFrom[rank];
  if (sendsTo[rank] != recvsFrom[rank])
    return none(sendsTo[rank] ? "the group sends to its own rank without receiving from it"
                              : "the group receives from its own rank without sending to it");
  const uint32_t out = sends - selfPair, in = recvs - selfPair; // With the other ranks.
  GroupCall call;
  call.count = first.count;
  call.type = first.type;
  call.selfCopy = selfPair;
  const bool two = nranks == 2;
  if (out == nranks - 1 && in == nranks - 1) {
    // Every other rank once each way: an all-to-all.
    if (!patterns.allToAll)
      return none("an all-to-all group, which is not asked for");
    call.kind = GroupKind::AllToAll;
  } else if (nranks >= 2 && out == 0 && in == nranks - 1 && patterns.gather) {
    call.kind = GroupKind::Gather; // The root receives from every other rank.
    call.root = int(rank);
  } else if (nranks >= 2 && in == 0 && out == nranks - 1 && patterns.scatter &&
             !(two && patterns.gather)) {
    // The root sends to every other rank (with two ranks and gather asked
    // for, a lone send is a gather's, below).
    call.kind = GroupKind::Scatter;
    call.root = int(rank);
  } else if (nranks >= 2 && out == 1 && in == 0 && patterns.gather) {
    call.kind = GroupKind::Gather; // A lone send, to the root.
    for (const P2pOp &op : ops)
      if (op.send && uint32_t(op.peer) != rank)
        call.root = op.peer;
  } else if (nranks >= 2 && in == 1 && out == 0 && patterns.scatter && !(two && patterns.gather)) {
    call.kind = GroupKind::Scatter; // A lone receive, from the root.
    for (const P2pOp &op : ops)
      if (!op.send && uint32_t(op.peer) != rank)
        call.root = op.peer;
  } else {
    return none("the group is not the part of a rank of any pattern asked for (" +
                std::to_string(out) + " sends to and " + std::to_string(in) +
                " receives from other ranks, of " + std::to_string(nranks) + ")");
  }
  call.sendFrom = std::move(sendFrom);
  call.recvInto = std::move(recvInto);
  return call;
}

} // namespace collcshim
