//===- NcclSymmetric.cu - NCCL symmetric memory and GIN -------------------===//
//
// The GIN network of the interpreter kernel (DevicePlatform's Net):
//  - a message to a peer on another node is staged in this rank's window,
//    then one put (by thread 0, after the CTA's barrier) carries it into
//    the receiver's slot, at the same offset in the receiver's window, and
//    adds one to the receiver's tail signal once the data has landed
//    (GIN orders the signal after the put's payload);
//  - the receiver waits on that signal, as it would on a tail counter in
//    memory (a relaxed poll, then the acquire fence), reads the slot, and
//    signals the sender's head signal, which the sender waits on before it
//    reuses the slot;
//  - signals only ever count up by one (SignalInc), from zero (set at
//    setup: NCCL does not clear a range of signals it hands out), as the
//    counters in memory do; before the signals go back to NCCL, each rank
//    waits for those its peers still owe it (drainSignals).
// The payload's stores were made by every thread of the CTA; the barrier
// orders them before thread 0, and the put's release (GIN fences at the
// scope the NIC needs before it posts) makes them visible to the network.
//
//===----------------------------------------------------------------------===//

#include "NcclSymmetric.h"

#include <cstring>
#include <nccl_device.h>

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 7)
#define COLL_HAVE_GIN 1
#else
#define COLL_HAVE_GIN 0
#endif

namespace coll::kernels {

namespace {

std::string ncclText(ncclResult_t r) {
  return cat("NCCL error ", int(r), ": ", ncclGetErrorString(r));
}

#if COLL_HAVE_GIN

/// What the GIN kernels read (device memory).
struct GinParams {
  ncclDevComm comm;
  ncclWindow_t window;
};

/// DevicePlatform's network over GIN context 0 of the device communicator.
class GinNetwork {
public:
  static constexpr bool kEnabled = true;

  __device__ explicit GinNetwork(const KernelParams &k)
      : params(static_cast<const GinParams *>(k.network)), gin(params->comm, 0) {}

  __device__ uint64_t readSignal(uint32_t id, bool acquire) const {
    return gin.readSignal(id, 64,
                          acquire ? cuda::memory_order_acquire : cuda::memory_order_relaxed);
  }
  __device__ void put(uint32_t peer, uint64_t remoteOffset, uint64_t localOffset, uint64_t bytes,
                      uint32_t signal) const {
    if (bytes)
      gin.put(ncclTeamWorld(params->comm), int(peer), params->window, remoteOffset, params->window,
              localOffset, bytes, ncclGin_SignalInc{signal});
    else
      gin.signal(ncclTeamWorld(params->comm), int(peer), ncclGin_SignalInc{signal});
  }
  __device__ void signal(uint32_t peer, uint32_t id) const {
    gin.signal(ncclTeamWorld(params->comm), int(peer), ncclGin_SignalInc{id});
  }

private:
  const GinParams *params;
  ncclGin gin;
};

/// Sets this rank's first \p n signals (of context 0) to zero.
__global__ void resetGinSignals(const GinParams *params, uint32_t n) {
  ncclGin gin(params->comm, 0);
  for (uint32_t i = threadIdx.x; i < n; i += blockDim.x)
    gin.resetSignal(i);
}

/// A signal and the value it must reach.
struct SignalWait {
  uint32_t signal;
  uint64_t value;
};

/// Thread i waits for waits[i] (and every 32nd after it), up to timeoutNs
/// each; counts those that never got there in *late.
__global__ void waitGinSignals(const GinParams *params, const SignalWait *waits, uint32_t n,
                               uint64_t timeoutNs, uint32_t *late) {
  ncclGin gin(params->comm, 0);
  for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) {
    const uint64_t start = globalTimerNs();
    while (gin.readSignal(waits[i].signal) < waits[i].value)
      if (globalTimerNs() - start > timeoutNs) {
        atomicAdd(late, 1u);
        break;
      }
  }
}

#endif // COLL_HAVE_GIN

/// One pointer to resolve: an offset in the window of an LSA peer.
struct LsaReference {
  uint64_t offset;
  int32_t lsaPeer;
};

__global__ void resolveLsaPointers(ncclWindow_t window, const LsaReference *refs, uint32_t n,
                                   char **out) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    out[i] = static_cast<char *>(ncclGetLsaPointer(window, refs[i].offset, refs[i].lsaPeer));
}

} // namespace

bool haveGin() {
  return COLL_HAVE_GIN != 0;
}

Result<std::vector<int32_t>> queryLsaRanks(ncclComm_t comm) {
  ncclTeam_t world = ncclTeamWorld(comm), lsa = ncclTeamLsa(comm);
  if (world.nRanks <= 0 || lsa.nRanks <= 0 || lsa.stride <= 0)
    return Status::error("NCCL reports no LSA team for this communicator");
  std::vector<int32_t> out(uint32_t(world.nRanks), -1);
  for (int p = 0; p < world.nRanks; ++p)
    if (ncclTeamRankIsMember(lsa, world, p))
      out[p] = ncclTeamRankToTeam(lsa, world, p);
  return out;
}

KernelFn selectGinKernel(DataType type, RedOp op) {
#if COLL_HAVE_GIN
  return selectInterpreter<GinNetwork>(type, op);
#else
  (void)type;
  (void)op;
  return nullptr;
#endif
}

struct SymmetricMemory::Impl {
  ncclWindow_t window = nullptr;
  ncclDevComm devComm = {};
  bool haveDevComm = false;
};

Result<std::unique_ptr<SymmetricMemory>> SymmetricMemory::allocate(ncclComm_t comm, uint64_t bytes,
                                                                   cudaStream_t stream) {
  std::unique_ptr<SymmetricMemory> m(new SymmetricMemory);
  m->comm_ = comm;
  m->impl_ = std::make_unique<Impl>();
  // Window registration wants whole pages.
  bytes = roundUp(bytes ? bytes : 1, NCCL_WIN_REQUIRED_ALIGNMENT);
  void *p = nullptr;
  if (ncclResult_t r = ncclMemAlloc(&p, bytes))
    return Status::error(
        cat("cannot allocate ", bytes, " bytes of NCCL symmetric memory: ", ncclText(r)));
  m->base_ = static_cast<char *>(p);
  m->bytes_ = bytes;
  cudaError_t err;
  if ((err = cudaMemsetAsync(p, 0, bytes, stream)) || (err = cudaStreamSynchronize(stream))) {
    cudaGetLastError();
    return Status::error("cannot clear the symmetric memory: " + cudaText(err));
  }
  return Result<std::unique_ptr<SymmetricMemory>>(std::move(m));
}

SymmetricMemory::~SymmetricMemory() {
  if (params_)
    cudaFree(params_);
  if (impl_ && impl_->window)
    ncclCommWindowDeregister(comm_, impl_->window);
  if (impl_ && impl_->haveDevComm)
    ncclDevCommDestroy(comm_, &impl_->devComm);
  if (base_)
    ncclMemFree(base_);
}

Status SymmetricMemory::createDeviceComm(uint32_t signals) {
#ifdef NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
#else
  ncclDevCommRequirements reqs;
  std::memset(&reqs, 0, sizeof reqs);
#endif
  if (signals) {
#if COLL_HAVE_GIN
    reqs.ginForceEnable = true;
    reqs.ginContextCount = 1; // A hint; the kernels use context 0.
    reqs.ginSignalCount = int(signals);
#else
    return Status::error(cat("peers on other nodes need GIN, which this build's NCCL ", NCCL_MAJOR,
                             ".", NCCL_MINOR, ".", NCCL_PATCH,
                             " lacks (it needs 2.28.7 or newer)"));
#endif
  }
  // NCCL checks first, before any exchange, that the communicator supports
  // symmetric memory: the same verdict on every rank.
  if (ncclResult_t r = ncclDevCommCreate(comm_, &reqs, &impl_->devComm))
    return Status::error("cannot create NCCL's device communicator (does this communicator "
                         "support symmetric memory?): " +
                         ncclText(r));
  impl_->haveDevComm = true;
  signals_ = signals;
#if COLL_HAVE_GIN
  if (signals && impl_->devComm.ginContextCount == 0)
    return Status::error("NCCL enabled no GIN context on this communicator, which the peers on "
                         "other nodes need (no network with device-initiated transfers?)");
#endif
  return Status::success();
}

Status SymmetricMemory::registerWindow(cudaStream_t stream) {
  if (ncclResult_t r =
          ncclCommWindowRegister(comm_, base_, bytes_, &impl_->window, NCCL_WIN_COLL_SYMMETRIC))
    return Status::error("cannot register the connection memory as a symmetric window: " +
                         ncclText(r));
  if (!impl_->window)
    return Status::error("NCCL registered no window for the connection memory");
#if COLL_HAVE_GIN
  if (signals_) {
    GinParams host;
    std::memset(&host, 0, sizeof host);
    host.comm = impl_->devComm;
    host.window = impl_->window;
    cudaError_t err;
    if ((err = cudaMalloc(&params_, sizeof host)) ||
        (err = cudaMemcpyAsync(params_, &host, sizeof host, cudaMemcpyHostToDevice, stream)))
      return Status::error("cannot upload the GIN parameters: " + cudaText(err));
    resetGinSignals<<<1, 256, 0, stream>>>(static_cast<const GinParams *>(params_), signals_);
    if ((err = cudaGetLastError()) || (err = cudaStreamSynchronize(stream))) {
      cudaGetLastError();
      return Status::error("cannot reset the GIN signals: " + cudaText(err));
    }
  }
#else
  (void)stream;
#endif
  return Status::success();
}

Status SymmetricMemory::drainSignals(const std::vector<std::pair<uint32_t, uint64_t>> &waits,
                                     double timeoutSeconds, cudaStream_t stream) {
  if (waits.empty())
    return Status::success();
#if COLL_HAVE_GIN
  if (!params_)
    return Status::error("no GIN signals to wait for");
  std::vector<SignalWait> host;
  for (const auto &w : waits)
    host.push_back({w.first, w.second});
  DeviceBuffer in, late;
  cudaError_t err;
  const uint32_t n = uint32_t(host.size());
  if ((err = in.reserve(n * sizeof(SignalWait))) || (err = late.reserve(sizeof(uint32_t))) ||
      (err = cudaMemcpyAsync(in.ptr, host.data(), n * sizeof(SignalWait), cudaMemcpyHostToDevice,
                             stream)) ||
      (err = cudaMemsetAsync(late.ptr, 0, sizeof(uint32_t), stream))) {
    cudaGetLastError();
    return Status::error("cannot stage the signals to wait for: " + cudaText(err));
  }
  waitGinSignals<<<1, 32, 0, stream>>>(static_cast<const GinParams *>(params_), in.as<SignalWait>(),
                                       n, uint64_t(timeoutSeconds * 1e9), late.as<uint32_t>());
  uint32_t missing = 0;
  if ((err = cudaGetLastError()) ||
      (err = cudaMemcpyAsync(&missing, late.ptr, sizeof missing, cudaMemcpyDeviceToHost, stream)) ||
      (err = cudaStreamSynchronize(stream))) {
    cudaGetLastError();
    return Status::error("cannot wait for the GIN signals: " + cudaText(err));
  }
  if (missing)
    return Status::error(cat(missing, " GIN signals never reached the value their peers owe"));
  return Status::success();
#else
  (void)timeoutSeconds;
  (void)stream;
  return Status::error("no GIN signals to wait for");
#endif
}

namespace {

/// resolveLsaPointers() of \p refs in \p window.
Result<std::vector<char *>>
resolveInWindow(ncclWindow_t window, const std::vector<LsaReference> &host, cudaStream_t stream) {
  std::vector<char *> out(host.size(), nullptr);
  if (host.empty())
    return out;
  DeviceBuffer in, result;
  cudaError_t err;
  const uint32_t n = uint32_t(host.size());
  if ((err = in.reserve(n * sizeof(LsaReference))) || (err = result.reserve(n * sizeof(char *))) ||
      (err = cudaMemcpyAsync(in.ptr, host.data(), n * sizeof(LsaReference), cudaMemcpyHostToDevice,
                             stream))) {
    cudaGetLastError();
    return Status::error("cannot stage the LSA references: " + cudaText(err));
  }
  resolveLsaPointers<<<1, 256, 0, stream>>>(window, in.as<LsaReference>(), n, result.as<char *>());
  if ((err = cudaGetLastError()) ||
      (err = cudaMemcpyAsync(out.data(), result.ptr, n * sizeof(char *), cudaMemcpyDeviceToHost,
                             stream)) ||
      (err = cudaStreamSynchronize(stream))) {
    cudaGetLastError();
    return Status::error("cannot resolve the LSA peers' pointers: " + cudaText(err));
  }
  return out;
}

} // namespace

Result<std::vector<char *>>
lsaWindowBases(ncclWindow_t window, const std::vector<int32_t> &lsaPeers, cudaStream_t stream) {
  if (!window)
    return Status::error("the window is null");
  std::vector<LsaReference> host(lsaPeers.size());
  for (size_t i = 0; i < lsaPeers.size(); ++i)
    host[i] = {0, lsaPeers[i]};
  return resolveInWindow(window, host, stream);
}

Result<std::vector<char *>> SymmetricMemory::resolve(const std::vector<PeerReference> &refs,
                                                     const std::vector<int32_t> &lsaRanks,
                                                     cudaStream_t stream) {
  std::vector<char *> out(refs.size(), nullptr);
  if (refs.empty())
    return out;
  if (!impl_->window)
    return Status::error("the symmetric window is not registered");
  std::vector<LsaReference> host(refs.size());
  for (size_t i = 0; i < refs.size(); ++i) {
    const PeerReference &r = refs[i];
    if (r.peer >= lsaRanks.size() || lsaRanks[r.peer] < 0)
      return Status::error(cat("rank ", r.peer,
                               " is outside this rank's LSA team, so loads and "
                               "stores cannot reach it"));
    if (r.offset >= bytes_)
      return Status::error(cat("an offset of ", r.offset, " lies outside rank ", r.peer,
                               "'s window of ", bytes_, " bytes"));
    host[i] = {r.offset, lsaRanks[r.peer]};
  }
  return resolveInWindow(impl_->window, host, stream);
}

} // namespace coll::kernels
