//===- PeerMessages.h - Tagged point-to-point messages over shm -*- C++ -*-===//
/// \file
/// Point-to-point messages between the ranks of a job whose ranks are
/// processes on one host: send(dst, tag, bytes) and recv(src or any, tag,
/// bytes), as torch.distributed's send/recv and MPI's. Unlike a plan, a
/// message involves its two ranks only.
///
/// Every rank creates one shared-memory segment, `/collp2p-<job>.<rank>`,
/// holding one channel per source: a ring of bytes that the source writes
/// (messages: a tag and a length, then the payload) and this rank reads.
/// create() is collective: it returns once every rank has mapped every
/// other's segment, and then unlinks its own name (a crash leaves nothing
/// behind after that). A progress thread of each rank drains its channels
/// as data arrives: into a receive posted for it (the first posted whose
/// source and tag match, in posting order), else into a buffer of its own
/// until a receive asks for it. So a send never waits for its receive to be
/// posted, only for room in the channel: any pattern of sends and receives
/// that MPI completes with buffered sends completes here (a ring of sends
/// followed by receives, for one). Messages from one source with one tag
/// arrive in the order they were sent.
///
/// A send to, or a receive from, a rank whose process dies fails with an
/// error naming it (a receive: once everything it sent is consumed); a
/// receive from any source, or any wait, fails after
/// PeerMessagesOptions::timeoutSeconds.
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_PEERMESSAGES_H
#define COLL_RUNTIME_PEERMESSAGES_H

#include "coll/Runtime/KeyValueStore.h"
#include "coll/Runtime/Status.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace coll {

/// Options of PeerMessages; every rank of a job should use the same.
struct PeerMessagesOptions {
  /// How long create() waits for the other ranks.
  double setupTimeoutSeconds = 60;
  /// How long a send waits for room, and a receive for its message.
  double timeoutSeconds = 1800;
  /// Bytes of each channel's ring (rounded up to 4 KiB); 0: 1 MiB over
  /// the number of ranks, at least 64 KiB.
  uint64_t channelBytes = 0;
};

/// This rank's end of a job's point-to-point messages. send() and recv()
/// may be called from any threads, concurrently.
class PeerMessages {
public:
  /// recv()'s source: any rank.
  static constexpr int anySource = -1;

  /// Joins the messages of job \p job (1 to 200 characters of
  /// [A-Za-z0-9_-]) as \p rank of \p nranks; collective.
  static Result<std::unique_ptr<PeerMessages>>
  create(const std::string &job, int rank, int nranks,
         const PeerMessagesOptions &options = PeerMessagesOptions());
  /// Stops the progress thread; receives still waiting fail.
  ~PeerMessages();
  PeerMessages(const PeerMessages &) = delete;
  PeerMessages &operator=(const PeerMessages &) = delete;

  /// Sends \p bytes at \p data to rank \p dst with \p tag; returns once
  /// they are all in \p dst's channel (not necessarily received).
  Status send(int dst, int64_t tag, const void *data, uint64_t bytes);
  /// Receives the next message with \p tag from \p src (or anySource) into
  /// \p data, which takes exactly \p bytes: a message of another length is
  /// an error (and is consumed). \p from, when given, receives the source.
  Status recv(int src, int64_t tag, void *data, uint64_t bytes, int *from = nullptr);
  /// recv() without waiting: \p done is called with the outcome and the
  /// source once the message is in \p data (or the receive failed), on the
  /// progress thread or, for a message already here, on this one; \p data
  /// must stay valid until then. An error here means \p done is never called.
  Status postRecv(int src, int64_t tag, void *data, uint64_t bytes,
                  std::function<void(const Status &, int)> done);

  int rank() const;
  int size() const;

  /// create() for a job whose ranks may be on several hosts, meeting
  /// through \p store (used during the call only): every message then
  /// travels over the network (UCX tagged messages; ranks of one host
  /// included), with the same semantics: a send is buffered (it returns
  /// once the message is copied, whether or not a receive is posted) and
  /// messages of one source and tag arrive in order. Tags must lie in
  /// [0, 2^48).
  static Result<std::unique_ptr<PeerMessages>>
  create(const std::string &job, int rank, int nranks, KeyValueStore &store,
         const PeerMessagesOptions &options = PeerMessagesOptions());

  struct State; ///< lib/PeerMessages.cpp.
  struct Net;   ///< lib/NetPeers.cpp.

private:
  PeerMessages();
  std::unique_ptr<State> state;
  std::unique_ptr<Net> net;
};

} // namespace coll

#endif // COLL_RUNTIME_PEERMESSAGES_H
