//===- NcclCommunicator.h - One rank per GPU over an NCCL comm --*- C++ -*-===//
/// \file
/// NcclCommunicator runs this process's rank of a plan on its GPU, one rank
/// per GPU, any number of processes on one node. It bootstraps from an
/// existing ncclComm_t (the one a PyTorch or MPI job already has): the
/// plan's ranks are the communicator's ranks.
///
/// Each rank keeps its receive FIFOs (slots and tail counters) and the head
/// counters of its sends in one allocation of its GPU's memory, which its
/// peers map with CUDA IPC (or use directly, for ranks of one process with
/// peer access); the ranks exchange the handles and the layout of their
/// connections with ncclAllGather. A launch runs this rank's threadblocks,
/// one CTA each, on the caller's stream, with system-scope synchronisation
/// (DeviceSync.cuh); scratch and staging memory are this rank's own.
///
/// Every rank must make the same sequence of calls: create() and the
/// destructor are collective, and the launches of all ranks must pair up,
/// with the same count and data type. The connection counters never go back,
/// and each launch starts them where the slices of the launches before it
/// left them, so ranks that launched different counts would wait for
/// messages that never come (a device-side timeout, not a hang).
//===----------------------------------------------------------------------===//
#ifndef COLL_KERNELS_NCCLCOMMUNICATOR_H
#define COLL_KERNELS_NCCLCOMMUNICATOR_H

#include "coll/Runtime/DataType.h"
#include "coll/Runtime/Plan.h"
#include "coll/Runtime/PreparedCall.h"
#include "coll/Runtime/Status.h"

#include <cstdint>
#include <cuda_runtime_api.h>
#include <memory>
#include <nccl.h>

namespace coll {

/// How the ranks reach each other's connection memory.
enum class NcclTransport : uint32_t {
  /// Symmetric when some rank has a peer outside its LSA team (another
  /// node), else Ipc.
  Auto = 0,
  /// cudaMalloc'd memory shared with CUDA IPC (peer access for ranks of one
  /// process): every peer on this node.
  Ipc = 1,
  /// NCCL symmetric memory (ncclMemAlloc, ncclCommWindowRegister): peers in
  /// the LSA team through the pointers of the device API (ncclGetPeerPointer),
  /// peers on other nodes through GIN puts and signals.
  Symmetric = 2,
};

/// Options of NcclCommunicator; every rank must use the same sliceBytes
/// and transport.
struct NcclOptions {
  /// Bytes of each chunk processed per pass of the program (a slice);
  /// sizes the connection FIFOs, which are allocated once.
  uint64_t sliceBytes = 256 << 10;
  /// Threads per CTA (a multiple of 32, at most 512).
  uint32_t threadsPerBlock = 512;
  /// A wait that does not succeed for this long stops the run with an
  /// error. Ranks start their launches at different times, so this also
  /// bounds how far apart they may call.
  double timeoutSeconds = 30;
  /// Launch as a cooperative grid (all CTAs resident at once, or an error).
  bool cooperative = true;
  NcclTransport transport = NcclTransport::Auto;
  /// The most device memory this rank may take besides the user's buffers,
  /// as ExecOptions::memoryLimitBytes (noMemoryLimit removes the cap). At
  /// setup, its connection memory (FIFO slots and counters, sized for the
  /// largest slice) is held against it, 0 meaning defaultMemoryLimit(0)
  /// (256 MiB); at each launch, the connection memory, scratch and a
  /// private copy of the input together, 0 meaning defaultMemoryLimit() of
  /// the launch's buffer bytes. Either fails, on every rank, before
  /// anything is allocated, naming the plan field that asks for the memory.
  uint64_t memoryLimitBytes = 0;
};

struct NcclCommunicatorState;

/// This process's rank of a plan over an NCCL communicator. Not thread-safe;
/// serves one stream at a time (order the streams otherwise).
class NcclCommunicator {
public:
  /// Collective over \p comm: every rank calls it with the same plan, whole
  /// or loaded for that rank (ValidatedPlan::load(path, rank)). Checks that
  /// the plan has ncclCommCount() ranks and that every rank holds the same
  /// plan (the same ValidatedPlan::checksum(); the error names the ranks
  /// that differ), allocates this rank's connection memory and maps its
  /// peers'. Runs on \p comm's device; the caller's current device is left
  /// as it was. The communicator keeps \p plan (shared; a borrowed plan
  /// must outlive it).
  static Result<std::unique_ptr<NcclCommunicator>>
  create(const ValidatedPlan &plan, ncclComm_t comm, const NcclOptions &options = {});
  /// create() of a validated copy of \p plan, whole or loaded for this rank
  /// (loadPlanFile(path, rank)): a section left as it was parsed keeps its
  /// file's identity; a changed one differs from the other ranks' plans.
  static Result<std::unique_ptr<NcclCommunicator>> create(const Plan &plan, ncclComm_t comm,
                                                          const NcclOptions &options = {});
  /// Collective: waits until every rank has finished its runs (peers write
  /// this rank's counters up to their last step), then unmaps the peers'
  /// memory and frees this rank's.
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator &) = delete;
  NcclCommunicator &operator=(const NcclCommunicator &) = delete;

  /// Enqueues this rank's part of one run on \p stream: \p sendbuf and
  /// \p recvbuf are device buffers of this rank's GPU, sized by
  /// planBufferElements(); the call is prepared as every executor's
  /// is (prepareCall(), PreparedCall.h): in-place rules and Avg as
  /// LocalWorld (Executor.h), buffers aligned to their elements. Errors
  /// found on the host are returned here, naming the rank; errors on
  /// the device (a wait that timed out) by wait() or check().
  Status launch(const void *sendbuf, void *recvbuf, uint64_t count, DataType type, RedOp op,
                cudaStream_t stream);
  /// Waits for \p stream, then check().
  Status wait(cudaStream_t stream);
  /// Reports the first device-side failure of this rank's finished runs
  /// without waiting (runs still in flight are not looked at). A failure
  /// leaves the communicator unusable: peers may be anywhere in their runs,
  /// so launch() refuses from then on; make a new communicator.
  Status check();
  /// launch() then wait().
  Status run(const void *sendbuf, void *recvbuf, uint64_t count, DataType type, RedOp op,
             cudaStream_t stream);

  /// Registered buffers read in place. Collective (every rank calls it in
  /// the same order as its other collective calls, as NCCL's
  /// ncclCommWindowRegister): \p buff, \p bytes long, which every rank
  /// has registered with NCCL as \p window, becomes memory its peers in
  /// the LSA team read where it lies. A launch whose Input or Output lies in
  /// one of this rank's windows sends from it direct (the steps
  /// DirectSends.h allows): its receivers read the data through NCCL's
  /// mapping of the window, one copy where the slots take two. Waits for
  /// this communicator's launches first. An error (a rank that could not
  /// resolve its peers' mappings) is every rank's, and the window is then
  /// not used; the communicator stays usable.
  Status registerWindow(void *buff, uint64_t bytes, ncclWindow_t window);
  /// Before ncclCommWindowDeregister, on every rank where that is called
  /// (no exchange; the ranks stay in step because NCCL's deregistration is
  /// collective): stops reading \p window in place (waits for this
  /// communicator's launches; a captured launch that uses it must not
  /// replay after). Unknown windows are ignored.
  Status deregisterWindow(ncclWindow_t window);
  /// The windows registerWindow() added and deregisterWindow() has not removed.
  uint32_t windows() const;
  /// Messages this rank's finished launches read in place (registered
  /// windows of its peers).
  uint64_t directMessages() const;

  /// This rank.
  uint32_t rank() const;
  /// The ranks of the communicator and the plan.
  uint32_t size() const;
  /// The CUDA device of this rank.
  int device() const;
  /// CTAs of one launch: this rank's threadblocks.
  uint32_t numBlocks() const;
  /// The plan: this rank's section only (Plan::loadedRank is rank()).
  const Plan &plan() const;
  /// The identity of the plan the ranks agreed on (ValidatedPlan::checksum()).
  uint64_t planChecksum() const;
  /// How many peers were mapped with CUDA IPC (the others share this
  /// process and are reached through peer access).
  uint32_t ipcPeers() const;
  /// The transport the ranks chose (never Auto).
  NcclTransport transport() const;
  /// How many peers this rank reaches over the network (GIN).
  uint32_t networkPeers() const;

private:
  explicit NcclCommunicator(std::unique_ptr<NcclCommunicatorState> state);
  /// create() of \p plan; a rank whose plan is an error joins the setup
  /// to fail it on every rank.
  static Result<std::unique_ptr<NcclCommunicator>>
  join(const Result<ValidatedPlan> &plan, ncclComm_t comm, const NcclOptions &options);
  std::unique_ptr<NcclCommunicatorState> s;
};

} // namespace coll

#endif // COLL_KERNELS_NCCLCOMMUNICATOR_H
