//===- CApi.cpp - The C API (coll/coll.h) over World and Communicator -----===//
//
// Thin wrappers: every pointer is checked, every exception (allocation)
// becomes collSystemError, and each failure leaves its message where
// collGetLastError() finds it: in the communicator for collExecute(), and
// in a thread-local string for every call.
//
//===----------------------------------------------------------------------===//

#include "coll/Runtime/Communicator.h"
#include "coll/Runtime/PlanIO.h"
#include "coll/coll.h"

#include <exception>
#include <memory>
#include <new>
#include <string>

using namespace coll;

struct collPlan {
  Plan plan;
};

struct collWorld {
  std::shared_ptr<World> world;
};

struct collComm {
  std::unique_ptr<Communicator> comm;
};

namespace {

thread_local std::string lastThreadError;

collResult_t fail(collResult_t result, const std::string &message) {
  try {
    lastThreadError = message;
  } catch (...) {
  }
  return result;
}

collResult_t nullArgument(const char *function, const char *argument) {
  return fail(collInvalidArgument, std::string(function) + ": " + argument + " is a null pointer");
}

collResult_t toResult(ErrorKind kind) {
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
  case ErrorKind::Internal:
    break;
  }
  return collInternalError;
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

/// Loading errors: a file that cannot be read is a system error, anything
/// else about its bytes an invalid plan.
collResult_t planLoaded(Result<Plan> &p, collPlan_t *plan, const char *function) {
  if (!p) {
    const std::string &m = p.message();
    bool io = m.rfind("cannot open", 0) == 0 || m.rfind("cannot read", 0) == 0;
    return fail(io ? collSystemError : collInvalidPlan, std::string(function) + ": " + m);
  }
  *plan = new collPlan{std::move(*p)};
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
  case collNumResults:
    break;
  }
  return "unknown result code";
}

const char *collGetLastError(collComm_t comm) {
  if (comm)
    return comm->comm->lastErrorMessage().c_str();
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
  delete plan;
  return collSuccess;
}

collResult_t collPlanGetInfo(collPlan_t plan, collPlanInfo_t *info) {
  if (!plan)
    return nullArgument("collPlanGetInfo", "plan");
  if (!info)
    return nullArgument("collPlanGetInfo", "info");
  const PlanInfo &i = plan->plan.info;
  info->collective = collCollective_t(i.collective);
  info->nranks = int(i.nranks);
  info->root = int(i.root);
  info->inplace = i.inplace ? 1 : 0;
  info->name = i.name.c_str();
  return collSuccess;
}

collResult_t collWorldCreate(int nranks, collWorld_t *world) {
  if (!world)
    return nullArgument("collWorldCreate", "world");
  *world = nullptr;
  return guarded("collWorldCreate", [&] {
    Result<std::shared_ptr<World>> w = World::create(nranks);
    if (!w)
      return fail(collInvalidArgument, "collWorldCreate: " + w.message());
    *world = new collWorld{std::move(*w)};
    return collSuccess;
  });
}

collResult_t collWorldDestroy(collWorld_t world) {
  delete world;
  return collSuccess;
}

collResult_t collCommInitRank(collWorld_t world, int rank, collComm_t *comm) {
  if (!world)
    return nullArgument("collCommInitRank", "world");
  if (!comm)
    return nullArgument("collCommInitRank", "comm");
  *comm = nullptr;
  return guarded("collCommInitRank", [&] {
    Result<std::unique_ptr<Communicator>> c = world->world->communicator(rank);
    if (!c)
      return fail(collInvalidArgument, "collCommInitRank: " + c.message());
    *comm = new collComm{std::move(*c)};
    return collSuccess;
  });
}

collResult_t collCommDestroy(collComm_t comm) {
  delete comm;
  return collSuccess;
}

collResult_t collCommUserRank(collComm_t comm, int *rank) {
  if (!comm)
    return nullArgument("collCommUserRank", "comm");
  if (!rank)
    return nullArgument("collCommUserRank", "rank");
  *rank = comm->comm->rank();
  return collSuccess;
}

collResult_t collCommCount(collComm_t comm, int *count) {
  if (!comm)
    return nullArgument("collCommCount", "comm");
  if (!count)
    return nullArgument("collCommCount", "count");
  *count = comm->comm->size();
  return collSuccess;
}

collResult_t collExecute(const void *sendbuf, void *recvbuf, size_t count, collDataType_t datatype,
                         collRedOp_t op, collPlan_t plan, collComm_t comm) {
  // A null plan or communicator cannot join the rendezvous; null buffers
  // can, and Communicator::execute() reports them on every rank.
  if (!comm)
    return nullArgument("collExecute", "comm");
  if (!plan)
    return nullArgument("collExecute", "plan");
  return guarded("collExecute", [&] {
    // Out-of-range values stay out of range (saturated at 255) for execute()
    // to report.
    auto clip = [](int v) { return uint8_t(v >= 0 && v < 255 ? v : 255); };
    Status s = comm->comm->execute(plan->plan, sendbuf, recvbuf, count,
                                   DataType(clip(int(datatype))), RedOp(clip(int(op))));
    if (s)
      return collSuccess;
    return fail(toResult(comm->comm->lastErrorKind()), s.message());
  });
}

} // extern "C"
