//===- NcclCApi.cpp - collCommInitNccl (coll/coll.h) ----------------------===//
//
// The C API's part that needs NCCL: an NcclCommunicator behind a collComm_t.
// The other calls on such a communicator (collExecuteAsync, ...) reach it
// through DeviceCommunicatorBase, in CApi.cpp.
//
//===----------------------------------------------------------------------===//

#include "CApiHandles.h"
#include "coll/Kernels/NcclCommunicator.h"
#include "coll/coll.h"

using namespace coll;
using namespace coll::capi;

namespace {

/// Kinds of the setup's errors, from their messages.
ErrorKind setupKind(const std::string &m) {
  if (m.find("differ") != std::string::npos || m.find("disagree") != std::string::npos ||
      m.find("but rank") != std::string::npos)
    return ErrorKind::Mismatch;
  if (m.rfind("invalid plan", 0) == 0 || m.rfind("the plan", 0) == 0)
    return ErrorKind::InvalidPlan;
  if (m.rfind("threads per block", 0) == 0 || m.rfind("the slice", 0) == 0 ||
      m.rfind("the timeout", 0) == 0)
    return ErrorKind::InvalidArgument;
  return ErrorKind::SystemError;
}

/// Kinds of a run's errors: timeouts on the device, refusals of CUDA, and
/// \p otherwise.
ErrorKind runKind(const std::string &m, ErrorKind otherwise) {
  if (m.find("timed out") != std::string::npos)
    return ErrorKind::Timeout;
  if (m.rfind("cannot ", 0) == 0 || m.find("failed") != std::string::npos)
    return ErrorKind::SystemError;
  return otherwise;
}

class NcclDeviceComm final : public DeviceCommunicatorBase {
public:
  explicit NcclDeviceComm(std::unique_ptr<NcclCommunicator> c) : c(std::move(c)) {}
  int rank() const override { return int(c->rank()); }
  int size() const override { return int(c->size()); }
  bool runsPlan(uint64_t checksum) const override { return checksum == c->planChecksum(); }
  Status executeAsync(const void *sendbuf, void *recvbuf, size_t count, DataType type, RedOp op,
                      void *stream) override {
    Status s = c->launch(sendbuf, recvbuf, count, type, op, static_cast<cudaStream_t>(stream));
    ErrorKind kind = runKind(s.message(), ErrorKind::InvalidArgument);
    return record(std::move(s), kind);
  }
  Status wait(void *stream) override {
    Status s = c->wait(static_cast<cudaStream_t>(stream));
    ErrorKind kind = runKind(s.message(), ErrorKind::SystemError);
    return record(std::move(s), kind);
  }
  Status check() override {
    Status s = c->check();
    ErrorKind kind = runKind(s.message(), ErrorKind::SystemError);
    return record(std::move(s), kind);
  }

private:
  std::unique_ptr<NcclCommunicator> c;
};

} // namespace

extern "C" collResult_t collCommInitNccl(collComm_t *comm, collPlan_t plan,
                                         struct ncclComm *ncclComm) {
  if (!comm)
    return nullArgument("collCommInitNccl", "comm");
  *comm = nullptr;
  if (collResult_t r = checkHandle("collCommInitNccl", "plan", plan, HandleKind::Plan))
    return r;
  if (!ncclComm)
    return nullArgument("collCommInitNccl", "ncclComm");
  return guarded("collCommInitNccl", [&] {
    Result<std::unique_ptr<NcclCommunicator>> c = NcclCommunicator::create(plan->plan, ncclComm);
    if (!c)
      return fail(toResult(setupKind(c.message())), "collCommInitNccl: " + c.message());
    auto handle = std::make_unique<collComm>();
    handle->device = std::make_unique<NcclDeviceComm>(std::move(*c));
    registerHandle(handle.get(), HandleKind::Comm);
    *comm = handle.release();
    return collSuccess;
  });
}
