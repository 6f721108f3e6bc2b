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
//  - signals only ever count up by one (SignalInc), from zero at the device
//    communicator's creation, as the counters in memory do.
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
  switch (type) {
#define COLL_DATA_TYPE(Id, Name, Storage, Compute)                                                 \
  case DataType::Id:                                                                               \
    switch (op) {                                                                                  \
    case RedOp::Sum:                                                                               \
    case RedOp::Avg:                                                                               \
      return interpretPlan<DataType::Id, RedOp::Sum, GinNetwork>;                                  \
    case RedOp::Prod:                                                                              \
      return interpretPlan<DataType::Id, RedOp::Prod, GinNetwork>;                                 \
    case RedOp::Max:                                                                               \
      return interpretPlan<DataType::Id, RedOp::Max, GinNetwork>;                                  \
    case RedOp::Min:                                                                               \
      return interpretPlan<DataType::Id, RedOp::Min, GinNetwork>;                                  \
    }                                                                                              \
    return nullptr;
#include "coll/Runtime/DataTypes.def"
  }
#else
  (void)type;
  (void)op;
#endif
  return nullptr;
}

struct SymmetricMemory::Impl {
  ncclWindow_t window = nullptr;
#if COLL_HAVE_GIN
  ncclDevComm devComm = {};
#endif
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
#if COLL_HAVE_GIN
  if (impl_ && impl_->haveDevComm)
    ncclDevCommDestroy(comm_, &impl_->devComm);
#endif
  if (base_)
    ncclMemFree(base_);
}

Status SymmetricMemory::registerWindow(uint32_t signals, cudaStream_t stream) {
  if (signals) {
#if COLL_HAVE_GIN
    // GIN first, so that the window is registered with it too.
    ncclDevCommRequirements reqs;
    std::memset(&reqs, 0, sizeof reqs);
    reqs.ginForceEnable = true;
    reqs.ginSignalCount = int(signals);
    if (ncclResult_t r = ncclDevCommCreate(comm_, &reqs, &impl_->devComm))
      return Status::error("cannot create NCCL's device communicator with GIN: " + ncclText(r));
    impl_->haveDevComm = true;
    if (impl_->devComm.ginContextCount == 0)
      return Status::error("NCCL enabled no GIN context on this communicator, which the peers on "
                           "other nodes need (no network with device-initiated transfers?)");
#else
    return Status::error(cat("peers on other nodes need GIN, which this build's NCCL ", NCCL_MAJOR,
                             ".", NCCL_MINOR, ".", NCCL_PATCH,
                             " lacks (it needs 2.28.7 or newer)"));
#endif
  }
  if (ncclResult_t r =
          ncclCommWindowRegister(comm_, base_, bytes_, &impl_->window, NCCL_WIN_COLL_SYMMETRIC))
    return Status::error("cannot register the connection memory as a symmetric window: " +
                         ncclText(r));
#if COLL_HAVE_GIN
  if (impl_->haveDevComm) {
    GinParams host;
    std::memset(&host, 0, sizeof host);
    host.comm = impl_->devComm;
    host.window = impl_->window;
    cudaError_t err;
    if ((err = cudaMalloc(&params_, sizeof host)) ||
        (err = cudaMemcpyAsync(params_, &host, sizeof host, cudaMemcpyHostToDevice, stream)) ||
        (err = cudaStreamSynchronize(stream))) {
      cudaGetLastError();
      return Status::error("cannot upload the GIN parameters: " + cudaText(err));
    }
  }
#else
  (void)stream;
#endif
  return Status::success();
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
  DeviceBuffer in, result;
  cudaError_t err;
  const uint32_t n = uint32_t(refs.size());
  if ((err = in.reserve(n * sizeof(LsaReference))) || (err = result.reserve(n * sizeof(char *))) ||
      (err = cudaMemcpyAsync(in.ptr, host.data(), n * sizeof(LsaReference), cudaMemcpyHostToDevice,
                             stream))) {
    cudaGetLastError();
    return Status::error("cannot stage the LSA references: " + cudaText(err));
  }
  resolveLsaPointers<<<1, 256, 0, stream>>>(impl_->window, in.as<LsaReference>(), n,
                                            result.as<char *>());
  if ((err = cudaGetLastError()) ||
      (err = cudaMemcpyAsync(out.data(), result.ptr, n * sizeof(char *), cudaMemcpyDeviceToHost,
                             stream)) ||
      (err = cudaStreamSynchronize(stream))) {
    cudaGetLastError();
    return Status::error("cannot resolve the LSA peers' pointers: " + cudaText(err));
  }
  return out;
}

} // namespace coll::kernels
