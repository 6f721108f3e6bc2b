//===- CApiHandles.h - The C API's handles, for its other parts -*- C++ -*-===//
/// \file
/// What coll.h's opaque handles hold, and the C API's error helpers, shared
/// by CApi.cpp and the parts of the C API that live in other libraries (the
/// NCCL communicator's collCommInitNccl). A communicator of such a library
/// reaches the C API through DeviceCommunicatorBase, so that this library
/// needs neither CUDA nor NCCL.
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_LIB_CAPIHANDLES_H
#define COLL_RUNTIME_LIB_CAPIHANDLES_H

#include "coll/Runtime/Communicator.h"
#include "coll/Runtime/DataType.h"
#include "coll/Runtime/Plan.h"
#include "coll/Runtime/PreparedCall.h"
#include "coll/Runtime/ProcessGroup.h"
#include "coll/Runtime/Status.h"
#include "coll/coll.h"

#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <string>

namespace coll {

/// A communicator of one rank per GPU whose runs are enqueued on a CUDA
/// stream (given as an opaque pointer), bound to one plan at creation.
class DeviceCommunicatorBase {
public:
  virtual ~DeviceCommunicatorBase() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Whether the plan of identity \p checksum (ValidatedPlan::checksum()) is
  /// the plan the communicator runs.
  virtual bool runsPlan(uint64_t checksum) const = 0;
  /// Enqueues one run on \p stream.
  virtual Status executeAsync(const void *sendbuf, void *recvbuf, size_t count, DataType type,
                              RedOp op, void *stream) = 0;
  /// Waits for \p stream and reports a device-side failure.
  virtual Status wait(void *stream) = 0;
  /// Reports a device-side failure of the finished runs without waiting.
  virtual Status check() = 0;

  /// The last failure's message and kind, for collGetLastError().
  const std::string &lastErrorMessage() const { return lastMessage; }
  ErrorKind lastErrorKind() const { return lastKind; }
  /// Records \p st (a failure of \p kind) and returns it.
  Status record(Status st, ErrorKind kind) {
    if (!st) {
      lastMessage = st.message();
      lastKind = kind;
    }
    return st;
  }

private:
  std::string lastMessage;
  ErrorKind lastKind = ErrorKind::None;
};

} // namespace coll

struct collPlan {
  explicit collPlan(coll::Plan p) : plan(std::move(p)) {
    // Validated once, here: a plan that fits no executor (a custom
    // collective) still loads, and each execute() reports why.
    coll::Result<coll::ValidatedPlan> v = coll::ValidatedPlan::borrow(plan);
    if (v)
      valid = std::move(*v);
  }
  collPlan(const collPlan &) = delete;
  collPlan &operator=(const collPlan &) = delete;
  coll::Plan plan;
  /// `plan` validated (refers to it), when it is valid.
  std::optional<coll::ValidatedPlan> valid;
};

/// A rank of a World (comm), of a job of processes (group), or of a
/// device communicator (device).
struct collComm {
  std::unique_ptr<coll::Communicator> comm;
  std::unique_ptr<coll::ProcessGroup> group;
  std::unique_ptr<coll::DeviceCommunicatorBase> device;

  const std::string &lastError() const {
    return comm    ? comm->lastErrorMessage()
           : group ? group->lastErrorMessage()
                   : device->lastErrorMessage();
  }
  coll::ErrorKind lastKind() const {
    return comm ? comm->lastErrorKind() : group ? group->lastErrorKind() : device->lastErrorKind();
  }
};

namespace coll::capi {

/// Leaves \p message for collGetLastError(NULL) in this thread; returns
/// \p result.
collResult_t fail(collResult_t result, const std::string &message);

inline collResult_t nullArgument(const char *function, const char *argument) {
  return fail(collInvalidArgument, std::string(function) + ": " + argument + " is a null pointer");
}

/// The C result of an error kind.
collResult_t toResult(ErrorKind kind);

/// What a handle of the C API is.
enum class HandleKind : uint8_t { Plan, World, Comm, StoreServer };

/// Records \p handle as a live handle of \p kind, until unregisterHandle();
/// every function that takes a handle checks that it is live, so that a
/// destroyed (or never created) handle is an error, not a use of freed
/// memory. Thread-safe.
void registerHandle(const void *handle, HandleKind kind);
/// Forgets \p handle; false when it was not a live handle of \p kind.
bool unregisterHandle(const void *handle, HandleKind kind);
/// Whether \p handle is a live handle of \p kind.
bool isLiveHandle(const void *handle, HandleKind kind);

/// collInvalidArgument with "FUNCTION: ARGUMENT is not a live communicator
/// (destroyed, or never created)" and the like.
collResult_t deadHandle(const char *function, const char *argument, HandleKind kind);

/// collSuccess when \p handle is a live handle of \p kind; otherwise
/// nullArgument() or deadHandle().
inline collResult_t checkHandle(const char *function, const char *argument, const void *handle,
                                HandleKind kind) {
  if (!handle)
    return nullArgument(function, argument);
  if (!isLiveHandle(handle, kind))
    return deadHandle(function, argument, kind);
  return collSuccess;
}

/// Runs \p body, turning exceptions into collSystemError (out of memory) or
/// collInternalError.
template <typename F> collResult_t guarded(const char *function, F &&body) {
  try {
    return body();
  } catch (const std::bad_alloc &) {
    return fail(collSystemError, std::string(function) + ": out of memory");
  } catch (const std::exception &e) {
    return fail(collInternalError, std::string(function) + ": " + e.what());
  } catch (...) {
    return fail(collInternalError, std::string(function) + ": unknown exception");
  }
}

} // namespace coll::capi

#endif // COLL_RUNTIME_LIB_CAPIHANDLES_H
