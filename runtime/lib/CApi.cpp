//===- CApi.cpp - The C API (coll/coll.h) over World and Communicator -----===//
//
// Thin wrappers: every pointer is checked, every exception (allocation)
// becomes collSystemError, and each failure leaves its message where
// collGetLastError() finds it: in the communicator for collExecute(), and
// in a thread-local string for every call.
//
//===----------------------------------------------------------------------===//

#include "CApiHandles.h"
#include "coll/Runtime/Communicator.h"
#include "coll/Runtime/PlanIO.h"
#include "coll/Runtime/ProcessGroup.h"
#include "coll/Runtime/TcpStore.h"
#include "coll/coll.h"

#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>

using namespace coll;
using namespace coll::capi;

struct collWorld {
  std::shared_ptr<World> world;
};

namespace {

thread_local std::string lastThreadError;

/// The live handles. Never destroyed, so that calls made while the program
/// exits still find it.
struct HandleRegistry {
  std::mutex mutex;
  std::map<const void *, HandleKind> live;
};

HandleRegistry &handles() {
  static HandleRegistry *registry = new HandleRegistry();
  return *registry;
}

const char *handleNoun(HandleKind kind) {
  switch (kind) {
  case HandleKind::Plan:
    return "plan";
  case HandleKind::World:
    return "world";
  case HandleKind::Comm:
    return "communicator";
  case HandleKind::StoreServer:
    return "store server";
  }
  return "handle";
}

/// Returns \p handle, registered as live; deletes it when registering
/// fails (out of memory), and rethrows.
template <typename T> T *adopt(T *handle, HandleKind kind) {
  try {
    registerHandle(handle, kind);
  } catch (...) {
    delete handle;
    throw;
  }
  return handle;
}

/// Frees \p handle of \p kind, given to \p function as \p argument: null
/// is ignored, a handle that is not live is an error (deadHandle()).
template <typename T>
collResult_t destroyHandle(const char *function, const char *argument, T *handle, HandleKind kind) {
  if (!handle)
    return collSuccess;
  if (!unregisterHandle(handle, kind))
    return deadHandle(function, argument, kind);
  delete handle;
  return collSuccess;
}

} // namespace

void coll::capi::registerHandle(const void *handle, HandleKind kind) {
  HandleRegistry &h = handles();
  std::lock_guard<std::mutex> lock(h.mutex);
  h.live[handle] = kind;
}

bool coll::capi::unregisterHandle(const void *handle, HandleKind kind) {
  HandleRegistry &h = handles();
  std::lock_guard<std::mutex> lock(h.mutex);
  auto it = h.live.find(handle);
  if (it == h.live.end() || it->second != kind)
    return false;
  h.live.erase(it);
  return true;
}

bool coll::capi::isLiveHandle(const void *handle, HandleKind kind) {
  HandleRegistry &h = handles();
  std::lock_guard<std::mutex> lock(h.mutex);
  auto it = h.live.find(handle);
  return it != h.live.end() && it->second == kind;
}

collResult_t coll::capi::deadHandle(const char *function, const char *argument, HandleKind kind) {
  return fail(collInvalidArgument, std::string(function) + ": " + argument + " is not a live " +
                                       handleNoun(kind) + " (destroyed, or never created)");
}

collResult_t coll::capi::fail(collResult_t result, const std::string &message) {
  try {
    lastThreadError = message;
  } catch (...) {
  }
  return result;
}

collResult_t coll::capi::toResult(ErrorKind kind) {
  switch (kind) {
  case ErrorKind::None:
    return collSuccess;
  case ErrorKind::InvalidArgument:
    return collInvalidArgument;
  case ErrorKind::InvalidPlan:
    return collInvalidPlan;
  case ErrorKind::SystemError:
    return collSystemError;
  case ErrorKind::Timeout:
    return collTimeout;
  case ErrorKind::Mismatch:
    return collMismatch;
  case ErrorKind::Remote:
    return collRemoteError;
  case ErrorKind::Internal:
    break;
  }
  return collInternalError;
}

namespace {

/// Loading errors: a file that cannot be read is a system error, anything
/// else about its bytes an invalid plan.
collResult_t planLoaded(Result<Plan> &p, collPlan_t *plan, const char *function) {
  if (!p) {
    const std::string &m = p.message();
    bool io = m.rfind("cannot open", 0) == 0 || m.rfind("cannot read", 0) == 0;
    return fail(io ? collSystemError : collInvalidPlan, std::string(function) + ": " + m);
  }
  *plan = adopt(new collPlan{std::move(*p)}, HandleKind::Plan);
  return collSuccess;
}

} // namespace

extern "C" {

const char *collGetErrorString(collResult_t result) {
  switch (result) {
  case collSuccess:
    return "success";
  case collInvalidArgument:
    return "invalid argument";
  case collInvalidPlan:
    return "invalid plan";
  case collSystemError:
    return "system error";
  case collTimeout:
    return "timeout";
  case collMismatch:
    return "mismatch between ranks";
  case collInternalError:
    return "internal error";
  case collRemoteError:
    return "remote process failed";
  case collNumResults:
    break;
  }
  return "unknown result code";
}

const char *collGetLastError(collComm_t comm) {
  if (comm && !isLiveHandle(comm, HandleKind::Comm))
    return "collGetLastError: comm is not a live communicator (destroyed, or never created)";
  if (comm)
    return comm->lastError().c_str();
  return lastThreadError.c_str();
}

collResult_t collPlanLoad(const char *path, collPlan_t *plan) {
  if (!path)
    return nullArgument("collPlanLoad", "path");
  if (!plan)
    return nullArgument("collPlanLoad", "plan");
  *plan = nullptr;
  return guarded("collPlanLoad", [&] {
    Result<Plan> p = loadPlanFile(path);
    return planLoaded(p, plan, "collPlanLoad");
  });
}

collResult_t collPlanLoadMemory(const void *data, size_t size, collPlan_t *plan) {
  if (!data)
    return nullArgument("collPlanLoadMemory", "data");
  if (!plan)
    return nullArgument("collPlanLoadMemory", "plan");
  *plan = nullptr;
  return guarded("collPlanLoadMemory", [&] {
    Result<Plan> p = parsePlan(static_cast<const uint8_t *>(data), size);
    return planLoaded(p, plan, "collPlanLoadMemory");
  });
}

collResult_t collPlanFree(collPlan_t plan) {
  return destroyHandle("collPlanFree", "plan", plan, HandleKind::Plan);
}

collResult_t collPlanGetInfo(collPlan_t plan, collPlanInfo_t *info) {
  if (collResult_t r = checkHandle("collPlanGetInfo", "plan", plan, HandleKind::Plan))
    return r;
  if (!info)
    return nullArgument("collPlanGetInfo", "info");
  const PlanInfo &i = plan->plan.info;
  info->collective = collCollective_t(i.collective);
  info->nranks = int(i.nranks);
  info->root = int(i.root);
  info->inplace = i.inplace ? 1 : 0;
  info->name = i.name.c_str();
  const BufferElements units = planBufferElements(i, 1);
  info->inputUnits = size_t(units.input);
  info->outputUnits = size_t(units.output);
  return collSuccess;
}

collResult_t collWorldConfigInit(collWorldConfig_t *config) {
  if (!config)
    return nullArgument("collWorldConfigInit", "config");
  WorldOptions o;
  config->rendezvousTimeoutSeconds = o.rendezvousTimeoutSeconds;
  config->timeoutSeconds = o.exec.timeoutSeconds;
  config->sliceElements = size_t(o.exec.sliceElements);
  config->workersPerRank = int(o.exec.workersPerRank);
  config->memoryLimitBytes = size_t(o.exec.memoryLimitBytes);
  config->protocol = nullptr;
  return collSuccess;
}

collResult_t collWorldCreate(int nranks, collWorld_t *world) {
  return collWorldCreateConfig(nranks, nullptr, world);
}

collResult_t collWorldCreateConfig(int nranks, const collWorldConfig_t *config,
                                   collWorld_t *world) {
  const char *function = config ? "collWorldCreateConfig" : "collWorldCreate";
  if (!world)
    return nullArgument(function, "world");
  *world = nullptr;
  WorldOptions o;
  if (config) {
    if (config->workersPerRank < 0)
      return fail(collInvalidArgument,
                  "collWorldCreateConfig: workersPerRank must not be negative, not " +
                      std::to_string(config->workersPerRank));
    if (config->sliceElements == 0)
      return fail(collInvalidArgument, "collWorldCreateConfig: sliceElements must be at least 1");
    if (!(config->timeoutSeconds > 0) || config->timeoutSeconds > 1e9)
      return fail(collInvalidArgument,
                  "collWorldCreateConfig: timeoutSeconds must be in (0, 1e9], not " +
                      std::to_string(config->timeoutSeconds));
    o.rendezvousTimeoutSeconds = config->rendezvousTimeoutSeconds;
    o.exec.timeoutSeconds = config->timeoutSeconds;
    o.exec.sliceElements = config->sliceElements;
    o.exec.workersPerRank = uint32_t(config->workersPerRank);
    o.exec.memoryLimitBytes = config->memoryLimitBytes == collNoMemoryLimit
                                  ? noMemoryLimit
                                  : uint64_t(config->memoryLimitBytes);
    if (config->protocol)
      if (Status s = parseProtocolChoice(config->protocol, o.exec.protocol); !s)
        return fail(collInvalidArgument, std::string(function) + ": " + s.message());
  }
  return guarded(function, [&] {
    Result<std::shared_ptr<World>> w = World::create(nranks, o);
    if (!w)
      return fail(collInvalidArgument, std::string(function) + ": " + w.message());
    *world = adopt(new collWorld{std::move(*w)}, HandleKind::World);
    return collSuccess;
  });
}

collResult_t collWorldDestroy(collWorld_t world) {
  return destroyHandle("collWorldDestroy", "world", world, HandleKind::World);
}

collResult_t collCommInitRank(collWorld_t world, int rank, collComm_t *comm) {
  if (collResult_t r = checkHandle("collCommInitRank", "world", world, HandleKind::World))
    return r;
  if (!comm)
    return nullArgument("collCommInitRank", "comm");
  *comm = nullptr;
  return guarded("collCommInitRank", [&] {
    Result<std::unique_ptr<Communicator>> c = world->world->communicator(rank);
    if (!c)
      return fail(collInvalidArgument, "collCommInitRank: " + c.message());
    *comm = adopt(new collComm{std::move(*c), nullptr, nullptr}, HandleKind::Comm);
    return collSuccess;
  });
}

collResult_t collShmConfigInit(collShmConfig_t *config) {
  if (!config)
    return nullArgument("collShmConfigInit", "config");
  ProcessGroupOptions o;
  config->setupTimeoutSeconds = o.setupTimeoutSeconds;
  config->timeoutSeconds = o.timeoutSeconds;
  config->livenessIntervalSeconds = o.livenessIntervalSeconds;
  config->sliceElements = size_t(o.sliceElements);
  config->workers = int(o.workers);
  config->memoryLimitBytes = size_t(o.memoryLimitBytes);
  config->protocol = nullptr;
  return collSuccess;
}

namespace {

/// A process communicator's options from \p config (NULL: the defaults).
collResult_t groupOptions(const char *fn, const collShmConfig_t *config, ProcessGroupOptions &o) {
  if (!config)
    return collSuccess;
  if (config->workers < 0)
    return fail(collInvalidArgument, std::string(fn) + ": workers must not be negative, not " +
                                         std::to_string(config->workers));
  o.setupTimeoutSeconds = config->setupTimeoutSeconds;
  o.timeoutSeconds = config->timeoutSeconds;
  o.livenessIntervalSeconds = config->livenessIntervalSeconds;
  o.sliceElements = config->sliceElements;
  o.workers = uint32_t(config->workers);
  o.memoryLimitBytes = config->memoryLimitBytes == collNoMemoryLimit
                           ? noMemoryLimit
                           : uint64_t(config->memoryLimitBytes);
  if (config->protocol)
    if (Status s = parseProtocolChoice(config->protocol, o.protocol); !s)
      return fail(collInvalidArgument, std::string(fn) + ": " + s.message());
  return collSuccess;
}

} // namespace

collResult_t collCommInitRankShm(const char *jobName, int nranks, int rank,
                                 const collShmConfig_t *config, collComm_t *comm) {
  if (!jobName)
    return nullArgument("collCommInitRankShm", "jobName");
  if (!comm)
    return nullArgument("collCommInitRankShm", "comm");
  *comm = nullptr;
  ProcessGroupOptions o;
  if (collResult_t r = groupOptions("collCommInitRankShm", config, o))
    return r;
  return guarded("collCommInitRankShm", [&] {
    ErrorKind kind = ErrorKind::None;
    Result<std::unique_ptr<ProcessGroup>> g = ProcessGroup::create(jobName, rank, nranks, o, &kind);
    if (!g)
      return fail(toResult(kind), "collCommInitRankShm: " + g.message());
    *comm = adopt(new collComm{nullptr, std::move(*g), nullptr}, HandleKind::Comm);
    return collSuccess;
  });
}

struct collStoreServer {
  std::unique_ptr<coll::TcpStoreServer> server;
};

collResult_t collStoreServerStart(int port, collStoreServer_t *server, int *boundPort) {
  if (!server)
    return nullArgument("collStoreServerStart", "server");
  *server = nullptr;
  if (port < 0 || port > 65535)
    return fail(collInvalidArgument,
                "collStoreServerStart: port must be in [0, 65535], not " + std::to_string(port));
  return guarded("collStoreServerStart", [&] {
    auto s = TcpStoreServer::start("0.0.0.0", uint16_t(port));
    if (!s)
      return fail(collSystemError, "collStoreServerStart: " + s.message());
    if (boundPort)
      *boundPort = int((*s)->port());
    *server = adopt(new collStoreServer{std::move(*s)}, HandleKind::StoreServer);
    return collSuccess;
  });
}

collResult_t collStoreServerStop(collStoreServer_t server) {
  return destroyHandle("collStoreServerStop", "server", server, HandleKind::StoreServer);
}

collResult_t collCommInitRankStore(const char *jobName, const char *storeAddress, int nranks,
                                   int rank, const collShmConfig_t *config, collComm_t *comm) {
  const char *fn = "collCommInitRankStore";
  if (!jobName)
    return nullArgument(fn, "jobName");
  if (!storeAddress)
    return nullArgument(fn, "storeAddress");
  if (!comm)
    return nullArgument(fn, "comm");
  *comm = nullptr;
  ProcessGroupOptions o;
  if (collResult_t r = groupOptions(fn, config, o))
    return r;
  std::string where = storeAddress;
  size_t colon = where.rfind(':');
  char *end = nullptr;
  unsigned long port =
      colon == std::string::npos ? 0 : std::strtoul(where.c_str() + colon + 1, &end, 10);
  if (colon == std::string::npos || colon == 0 || !end || *end || port == 0 || port > 65535)
    return fail(collInvalidArgument,
                std::string(fn) + ": the store address must be host:port, not '" + where + "'");
  return guarded(fn, [&] {
    if (!(o.setupTimeoutSeconds > 0) || o.setupTimeoutSeconds > 1e9)
      return fail(collInvalidArgument, std::string(fn) + ": the setup timeout must be positive");
    auto store = TcpStore::connect(where.substr(0, colon), uint16_t(port), o.setupTimeoutSeconds);
    if (!store)
      return fail(collSystemError, std::string(fn) + ": " + store.message());
    ErrorKind kind = ErrorKind::None;
    Result<std::unique_ptr<ProcessGroup>> g =
        ProcessGroup::create(jobName, rank, nranks, **store, o, &kind);
    if (!g)
      return fail(toResult(kind), std::string(fn) + ": " + g.message());
    *comm = adopt(new collComm{nullptr, std::move(*g), nullptr}, HandleKind::Comm);
    return collSuccess;
  });
}

collResult_t collMemAlloc(collComm_t comm, size_t size, void **ptr) {
  if (collResult_t r = checkHandle("collMemAlloc", "comm", comm, HandleKind::Comm))
    return r;
  if (!ptr)
    return nullArgument("collMemAlloc", "ptr");
  *ptr = nullptr;
  if (!comm->group)
    return fail(collInvalidArgument,
                "collMemAlloc: the communicator is not one of processes (collCommInitRankShm, "
                "collCommInitRankStore)");
  if (size == 0)
    return fail(collInvalidArgument, "collMemAlloc: size is 0");
  return guarded("collMemAlloc", [&] {
    std::string why;
    *ptr = comm->group->allocate(size, &why);
    if (!*ptr)
      return fail(collSystemError, "collMemAlloc: " + why);
    return collSuccess;
  });
}

collResult_t collMemFree(collComm_t comm, void *ptr) {
  if (collResult_t r = checkHandle("collMemFree", "comm", comm, HandleKind::Comm))
    return r;
  if (comm->group)
    comm->group->deallocate(ptr);
  return collSuccess;
}

collResult_t collCommDestroy(collComm_t comm) {
  return destroyHandle("collCommDestroy", "comm", comm, HandleKind::Comm);
}

collResult_t collCommUserRank(collComm_t comm, int *rank) {
  if (collResult_t r = checkHandle("collCommUserRank", "comm", comm, HandleKind::Comm))
    return r;
  if (!rank)
    return nullArgument("collCommUserRank", "rank");
  *rank = comm->comm    ? comm->comm->rank()
          : comm->group ? comm->group->rank()
                        : comm->device->rank();
  return collSuccess;
}

collResult_t collCommCount(collComm_t comm, int *count) {
  if (collResult_t r = checkHandle("collCommCount", "comm", comm, HandleKind::Comm))
    return r;
  if (!count)
    return nullArgument("collCommCount", "count");
  *count = comm->comm    ? comm->comm->size()
           : comm->group ? comm->group->size()
                         : comm->device->size();
  return collSuccess;
}

collResult_t collExecute(const void *sendbuf, void *recvbuf, size_t count, collDataType_t datatype,
                         collRedOp_t op, collPlan_t plan, collComm_t comm) {
  // A null plan or communicator cannot join the rendezvous; null buffers
  // can, and Communicator::execute() reports them on every rank.
  if (collResult_t r = checkHandle("collExecute", "comm", comm, HandleKind::Comm))
    return r;
  if (collResult_t r = checkHandle("collExecute", "plan", plan, HandleKind::Plan))
    return r;
  return guarded("collExecute", [&] {
    // Out-of-range values stay out of range (saturated at 255) for execute()
    // to report.
    auto clip = [](int v) { return uint8_t(v >= 0 && v < 255 ? v : 255); };
    DataType type = DataType(clip(int(datatype)));
    RedOp redOp = RedOp(clip(int(op)));
    if (comm->device) {
      // A device communicator runs the plan it was created with, on the
      // default stream, and waits.
      DeviceCommunicatorBase &d = *comm->device;
      if (!plan->valid || !d.runsPlan(plan->valid->checksum()))
        return fail(collMismatch, d.record(Status::error("collExecute: the plan is not the one "
                                                         "the communicator was created with"),
                                           ErrorKind::Mismatch)
                                      .message());
      Status s = d.executeAsync(sendbuf, recvbuf, count, type, redOp, nullptr);
      if (s)
        s = d.wait(nullptr);
      if (s)
        return collSuccess;
      return fail(toResult(comm->lastKind()), s.message());
    }
    // A process group reports each call's kind itself: a call refused
    // because another runs leaves the group's last error alone.
    ErrorKind kind = ErrorKind::None;
    Status s = Status::success();
    if (comm->comm)
      s = plan->valid ? comm->comm->execute(*plan->valid, sendbuf, recvbuf, count, type, redOp)
                      : comm->comm->execute(plan->plan, sendbuf, recvbuf, count, type, redOp);
    else
      s = plan->valid
              ? comm->group->execute(*plan->valid, sendbuf, recvbuf, count, type, redOp, &kind)
              : comm->group->execute(plan->plan, sendbuf, recvbuf, count, type, redOp, &kind);
    if (s)
      return collSuccess;
    return fail(toResult(comm->comm ? comm->lastKind() : kind), s.message());
  });
}

collResult_t collExecuteAsync(const void *sendbuf, void *recvbuf, size_t count,
                              collDataType_t datatype, collRedOp_t op, collComm_t comm,
                              struct CUstream_st *stream) {
  if (collResult_t r = checkHandle("collExecuteAsync", "comm", comm, HandleKind::Comm))
    return r;
  if (!comm->device)
    return fail(collInvalidArgument, "collExecuteAsync: the communicator does not run on GPUs "
                                     "(collCommInitNccl)");
  return guarded("collExecuteAsync", [&] {
    auto clip = [](int v) { return uint8_t(v >= 0 && v < 255 ? v : 255); };
    Status s = comm->device->executeAsync(sendbuf, recvbuf, count, DataType(clip(int(datatype))),
                                          RedOp(clip(int(op))), stream);
    if (s)
      return collSuccess;
    return fail(toResult(comm->lastKind()), s.message());
  });
}

collResult_t collCommStreamWait(collComm_t comm, struct CUstream_st *stream) {
  if (collResult_t r = checkHandle("collCommStreamWait", "comm", comm, HandleKind::Comm))
    return r;
  if (!comm->device)
    return fail(collInvalidArgument, "collCommStreamWait: the communicator does not run on GPUs "
                                     "(collCommInitNccl)");
  return guarded("collCommStreamWait", [&] {
    Status s = comm->device->wait(stream);
    if (s)
      return collSuccess;
    return fail(toResult(comm->lastKind()), s.message());
  });
}

collResult_t collCommGetAsyncError(collComm_t comm, collResult_t *asyncError) {
  if (collResult_t r = checkHandle("collCommGetAsyncError", "comm", comm, HandleKind::Comm))
    return r;
  if (!asyncError)
    return nullArgument("collCommGetAsyncError", "asyncError");
  *asyncError = collSuccess;
  if (!comm->device)
    return collSuccess;
  return guarded("collCommGetAsyncError", [&] {
    if (Status s = comm->device->check(); !s) {
      *asyncError = toResult(comm->lastKind());
      fail(*asyncError, s.message());
    }
    return collSuccess;
  });
}

} // extern "C"
