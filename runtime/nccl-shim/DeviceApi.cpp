//===- DeviceApi.cpp - The host functions of NCCL's device API ------------===//
//
// The Collc kernels linked into libcollc_nccl.so call the host functions of
// NCCL's device API (nccl_device/core.h), which nccl.h does not declare.
// They are forwarded to the real NCCL like the rest; a job that preloads the
// library, or loads it as libnccl.so.2, finds them too.
//
//===----------------------------------------------------------------------===//

#include "RealNccl.h"

#include <dlfcn.h>
#include <nccl.h>
#include <nccl_device.h>

namespace {

/// The real library's \p name, or null.
void *realSymbol(const char *name) {
  collcshim::RealNccl &r = collcshim::real();
  return r.handle ? dlsym(r.handle, name) : nullptr;
}

template <class F> F realFunction(const char *name) {
  return reinterpret_cast<F>(realSymbol(name));
}

} // namespace

#define COLLC_EXPORT __attribute__((visibility("default")))

extern "C" {

COLLC_EXPORT ncclResult_t ncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const *reqs,
                                            ncclDevComm_t *outDevComm) {
  static auto fn = realFunction<decltype(&ncclDevCommCreate)>("ncclDevCommCreate");
  return fn ? fn(comm, reqs, outDevComm) : collcshim::unavailable("ncclDevCommCreate");
}

COLLC_EXPORT ncclResult_t ncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const *devComm) {
  static auto fn = realFunction<decltype(&ncclDevCommDestroy)>("ncclDevCommDestroy");
  return fn ? fn(comm, devComm) : collcshim::unavailable("ncclDevCommDestroy");
}

COLLC_EXPORT ncclTeam_t ncclTeamWorld(ncclComm_t comm) {
  static auto fn = realFunction<ncclTeam_t (*)(ncclComm_t)>("ncclTeamWorld");
  return fn ? fn(comm) : ncclTeam_t{};
}

COLLC_EXPORT ncclTeam_t ncclTeamLsa(ncclComm_t comm) {
  static auto fn = realFunction<ncclTeam_t (*)(ncclComm_t)>("ncclTeamLsa");
  return fn ? fn(comm) : ncclTeam_t{};
}

} // extern "C"
