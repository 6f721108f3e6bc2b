//===- GroupPattern.h - Send/recv groups that are collectives ---*- C++ -*-===//
//
// PyTorch issues the list form of all_to_all, gather and scatter (and
// all_to_all_single against an NCCL older than 2.28) as groups of
// ncclSend/ncclRecv between ncclGroupStart and ncclGroupEnd. A rank sees
// only its own part of such a group; classifyGroup() says which collective
// that part is a rank's share of, when its shape says so alone:
//
//  - alltoall: one send to and one receive from every other rank, all of
//    one count and type;
//  - gather: at the root, one receive from every other rank and no send;
//    elsewhere one send, to the root;
//  - scatter: at the root, one send to every other rank and no receive;
//    elsewhere one receive, from the root.
//
// A send to a rank's own rank with a receive from it (PyTorch's list
// all_to_all has one) is a local copy, which no peer sees: it may come with
// any of these, and the shape is that of the rest.
//
// Only the patterns asked for are recognised. With two ranks a lone send
// and a lone receive are a gather's (the root receives) when gather is
// asked for, else a scatter's (the root sends): both ends decide alike.
//
// A shape is not a proof: a rank of an uneven all-to-all whose own counts
// happen to be equal, or a pipeline stage's lone send in a group, look the
// same. libcollc_nccl.so therefore recognises groups only where the user
// asks for it (COLLC_NCCL_GROUPS), asserting that the job's groups of these
// shapes are these collectives on every rank.
//
// Private to libcollc_nccl.so; plain C++ (nccl.h's types only).
//
//===----------------------------------------------------------------------===//
#ifndef COLLC_NCCL_SHIM_GROUPPATTERN_H
#define COLLC_NCCL_SHIM_GROUPPATTERN_H

#include <cstddef>
#include <cstdint>
#include <nccl.h>
#include <string>
#include <vector>

namespace collcshim {

/// One ncclSend or ncclRecv of a group.
struct P2pOp {
  bool send = false;
  void *buffer = nullptr; ///< The send's source or the receive's destination.
  size_t count = 0;
  ncclDataType_t type = ncclFloat32;
  int peer = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  bool twin = false; ///< It came in as the profiling twin (pncclSend, pncclRecv).
};

enum class GroupKind { None, AllToAll, Gather, Scatter };

/// Which group patterns to recognise.
struct GroupPatterns {
  bool allToAll = false, gather = false, scatter = false;
  bool any() const { return allToAll || gather || scatter; }
  /// From a comma-separated list of alltoall, gather and scatter ("all"
  /// for the three); \p error names what is not one of them.
  static GroupPatterns parse(const std::string &list, std::string &error);
};

/// A rank's part of a group, as a collective.
struct GroupCall {
  GroupKind kind = GroupKind::None;
  int root = 0;
  size_t count = 0; ///< Elements per rank's piece.
  ncclDataType_t type = ncclFloat32;
  /// Per rank, where this rank's piece for it comes from (sends) and where
  /// its piece from it goes (receives); null where the group has none (the
  /// root's own piece of a gather or scatter, which PyTorch copies itself).
  std::vector<const void *> sendFrom;
  std::vector<void *> recvInto;
  /// The group sends to this rank and receives from it: a copy of
  /// sendFrom[rank] into recvInto[rank].
  bool selfCopy = false;
  /// With kind None: why the group is none of the patterns asked for.
  std::string why;
};

/// What \p ops (one communicator's part of one group, on one stream) are on
/// rank \p rank of \p nranks.
GroupCall classifyGroup(const std::vector<P2pOp> &ops, uint32_t nranks, uint32_t rank,
                        const GroupPatterns &patterns);

/// The name of \p kind as the selection table spells it ("alltoall", ...).
const char *groupKindName(GroupKind kind);

} // namespace collcshim

#endif // COLLC_NCCL_SHIM_GROUPPATTERN_H
