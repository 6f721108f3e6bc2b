//===- UcxSupport.h - What both users of UCX make alike ---------*- C++ -*-===//
//
// The UCX setup that NetEngine (a ProcessGroup's connections across hosts)
// and NetPeers (point-to-point messages across hosts) share: a context and
// a worker that can wake a thread, with an eventfd and an epoll set over
// both, and endpoints with UCX's peer error handling. Only for builds with
// UCX. Private to the runtime library.
//
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_LIB_UCXSUPPORT_H
#define COLL_RUNTIME_LIB_UCXSUPPORT_H

#ifdef COLL_HAVE_UCX

#include "coll/Runtime/Status.h"

#include <chrono>
#include <memory>
#include <string>
#include <ucp/api/ucp.h>
#include <vector>

namespace coll {
namespace detail {

/// A UCX context (tag matching, wake-ups) and worker, the worker's
/// address, and an epoll set over the worker's descriptor and an eventfd
/// (which wakes the set's waiter). The owner destroys them.
struct UcxWorker {
  ucp_context_h context = nullptr;
  ucp_worker_h worker = nullptr;
  std::string address;
  int wakeFd = -1;
  int epollFd = -1;
};

/// Opens \p out with a worker of thread mode \p mode, after tuneUcx(); with
/// \p eagerUpTo, UCX's rendezvous threshold unless UCX_RNDV_THRESH is set.
Status openUcxWorker(ucs_thread_mode_t mode, const char *eagerUpTo, UcxWorker &out);

/// Closes \p eps in flush mode (what UCX still holds of ours reaches the
/// peer) and progresses \p w's worker until they are closed and none of
/// \p requests is in progress, or \p until passes (a peer that is gone
/// never answers). True when all are done: the close requests are freed,
/// and the caller may free its requests and release the worker.
bool closeEndpoints(UcxWorker &w, const std::vector<ucp_ep_h> &eps,
                    const std::vector<void *> &requests,
                    std::chrono::steady_clock::time_point until);

/// Destroys \p w's worker and context, unless \p inUse (UCX may still use
/// them, or memory of ours): then they are parked (parkForever()). Closes
/// the descriptors either way.
void releaseUcxWorker(UcxWorker &w, bool inUse);

/// Keeps \p what alive, and reachable, for the rest of the process: what
/// UCX may still use when closing did not finish in time (a worker whose
/// peer never answered, memory a request may still write into). Leaked on
/// purpose, never freed under UCX.
void parkForever(std::shared_ptr<void> what);

/// parkForever() of a handle of UCX's (kept as is, never destroyed).
inline void parkHandle(void *handle) {
  parkForever(std::shared_ptr<void>(handle, [](void *) {}));
}

/// Connects \p worker to the worker at \p address, with peer error
/// handling: \p onError(arg, ...) when the connection breaks.
Status connectUcx(ucp_worker_h worker, const std::string &address, ucp_err_handler_cb_t onError,
                  void *arg, ucp_ep_h &ep);

} // namespace detail
} // namespace coll

#endif // COLL_HAVE_UCX

#endif // COLL_RUNTIME_LIB_UCXSUPPORT_H
