//===- NetPeers.h - Point-to-point messages over the network ---*- C++ -*-===//
//
// PeerMessages of a job whose ranks may span hosts (PeerMessages::create()
// with a store): every message is one UCX tagged message, its tag the
// source rank and the caller's tag, so that UCX's tag matching (in order
// per source and tag, any source by a mask) is the receive side's. A send
// copies the message and returns; a progress thread drives the worker and
// runs the receives' callbacks. Private to the runtime library.
//
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_LIB_NETPEERS_H
#define COLL_RUNTIME_LIB_NETPEERS_H

#include "coll/Runtime/KeyValueStore.h"
#include "coll/Runtime/PeerMessages.h"

#include <functional>
#include <memory>
#include <string>

namespace coll {

/// The network side of a PeerMessages (NetPeers.cpp).
struct PeerMessages::Net {
  virtual ~Net() = default;
};

Result<std::unique_ptr<PeerMessages::Net>> createNetPeers(const std::string &job, int rank,
                                                          int nranks, KeyValueStore &store,
                                                          const PeerMessagesOptions &options);
int netRank(const PeerMessages::Net &n);
int netSize(const PeerMessages::Net &n);
Status netSend(PeerMessages::Net &n, int dst, int64_t tag, const void *data, uint64_t bytes);
Status netPostRecv(PeerMessages::Net &n, int src, int64_t tag, void *data, uint64_t bytes,
                   std::function<void(const Status &, int)> done);

} // namespace coll

#endif // COLL_RUNTIME_LIB_NETPEERS_H
