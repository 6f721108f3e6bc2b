//===- NcclSymmetric.h - NCCL symmetric memory and GIN --------*- C++ -*-===//
/// \file
/// What NcclCommunicator's symmetric transport needs from NCCL's device API
/// (nccl_device.h), behind plain host functions so that the communicator
/// itself includes none of it:
///  - which peers share this rank's LSA team (loads and stores reach them);
///  - the connection memory as one window of NCCL symmetric memory
///    (ncclMemAlloc, ncclCommWindowRegister), and a device communicator
///    with GIN signals when some connection crosses the network;
///  - the pointers into LSA peers' windows (ncclGetLsaPointer, resolved by
///    a small kernel at setup);
///  - the interpreter kernels whose network is GIN (puts into the peer's
///    window with a signal, GIN signals as the FIFO counters).
/// GIN needs NCCL 2.28.7 or newer at build time (haveGin()); LSA pointers
/// work with any NCCL that has the device API.
//===----------------------------------------------------------------------===//
#ifndef COLL_KERNELS_LIB_NCCLSYMMETRIC_H
#define COLL_KERNELS_LIB_NCCLSYMMETRIC_H

#include "DeviceKernel.h"
#include "NcclSetup.h"
#include "coll/Runtime/Status.h"

#include <cstdint>
#include <cuda_runtime_api.h>
#include <memory>
#include <nccl.h>
#include <utility>
#include <vector>

namespace coll::kernels {

/// Whether this build's NCCL headers have GIN (the device-initiated network).
bool haveGin();

/// For each rank of \p comm, its rank in this rank's LSA team, or -1 when
/// loads and stores do not reach it (another node).
Result<std::vector<int32_t>> queryLsaRanks(ncclComm_t comm);

/// The interpreter kernel of \p type and \p op whose network is GIN; null
/// when invalid or without GIN.
KernelFn selectGinKernel(DataType type, RedOp op);

/// Where offset 0 of \p window lies in each of \p lsaPeers (ranks in this
/// rank's LSA team, queryLsaRanks()), in this rank's address space.
Result<std::vector<char *>>
lsaWindowBases(ncclWindow_t window, const std::vector<int32_t> &lsaPeers, cudaStream_t stream);

/// Symmetric memory of one rank: an ncclMemAlloc allocation registered as
/// a window over the communicator, and a device communicator (with GIN
/// signals when asked for). Creating the device communicator and
/// registering the window are collective: every rank calls them in the
/// same order, with an agreement on the outcome after each.
class SymmetricMemory {
public:
  /// Allocates and zeroes \p bytes (on \p stream, then waits); local.
  static Result<std::unique_ptr<SymmetricMemory>> allocate(ncclComm_t comm, uint64_t bytes,
                                                           cudaStream_t stream);
  /// Deregisters and frees; local.
  ~SymmetricMemory();
  SymmetricMemory(const SymmetricMemory &) = delete;
  SymmetricMemory &operator=(const SymmetricMemory &) = delete;

  /// Collective: the device communicator, with \p signals GIN signals
  /// (none when 0). It also tells whether the communicator supports
  /// symmetric memory at all (an error, the same on every rank, if not).
  Status createDeviceComm(uint32_t signals);
  /// Collective: the window over the whole allocation; then, with GIN
  /// signals, sets them to zero (NCCL does not clear a range it hands out)
  /// and uploads the GIN kernels' parameters. The ranks must agree that
  /// every rank got here before any kernel signals a peer.
  Status registerWindow(cudaStream_t stream);

  /// The allocation, in this rank's address space.
  char *base() const { return base_; }
  /// The GIN kernels' network parameters (device memory); null without GIN
  /// signals.
  const void *networkParams() const { return params_; }

  /// Pointers into the LSA peers' windows: for each reference, the peer's
  /// connection memory at its offset; \p lsaRanks from queryLsaRanks().
  Result<std::vector<char *>> resolve(const std::vector<PeerReference> &refs,
                                      const std::vector<int32_t> &lsaRanks, cudaStream_t stream);

  /// Waits until each signal (id, value) of this rank has reached its value
  /// or \p timeoutSeconds have passed: the signals peers still owe this rank
  /// (the slots freed after this rank's last sends), so that none lands
  /// after the signals have gone back to NCCL.
  Status drainSignals(const std::vector<std::pair<uint32_t, uint64_t>> &waits,
                      double timeoutSeconds, cudaStream_t stream);

  struct Impl;

private:
  SymmetricMemory() = default;
  ncclComm_t comm_ = nullptr;
  char *base_ = nullptr;
  uint64_t bytes_ = 0;
  uint32_t signals_ = 0;
  void *params_ = nullptr;
  std::unique_ptr<Impl> impl_;
};

} // namespace coll::kernels

#endif // COLL_KERNELS_LIB_NCCLSYMMETRIC_H
