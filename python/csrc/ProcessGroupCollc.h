//===- ProcessGroupCollc.h - torch.distributed's face of Collc -*- C++ -*-===//
/// \file
/// The torch.distributed backend that runs every operation on Collc plans:
/// the thin torch-facing layer over GroupEngine (which knows nothing of
/// PyTorch). It maps tensors and reduction operators onto the runtime's
/// buffers, types and operators, and wraps each operation's task in a
/// c10d::Work with a future. PyTorch 1.x backends subclass
/// c10d::ProcessGroup, 2.x backends c10d::Backend (which 2.x's ProcessGroup
/// dispatches to); the two declare these operations alike, so one class
/// serves both over TorchBackendBase (COLLC_TORCH_MAJOR is torch's major
/// version, from the build).
//===----------------------------------------------------------------------===//
#ifndef COLLC_TORCH_PROCESSGROUPCOLLC_H
#define COLLC_TORCH_PROCESSGROUPCOLLC_H

#include "GroupEngine.h"
#include "coll/Runtime/PeerMessages.h"

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>
#if COLLC_TORCH_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif

namespace coll::torchext {

/// What a backend of this PyTorch subclasses.
#if COLLC_TORCH_MAJOR >= 2
using TorchBackendBase = c10d::Backend;
#else
using TorchBackendBase = c10d::ProcessGroup;
#endif

/// This rank of a torch.distributed group.
class ProcessGroupCollc : public TorchBackendBase {
public:
  /// Meets the group's other ranks through \p store (rank 0 names the
  /// shared-memory job; every rank checks that all run on one host) and
  /// joins the job. \p timeout bounds every wait for a peer.
  /// \p globalRanks: a subgroup's ranks in the default group, which
  /// messages name beside the group's own (empty: none given).
  ProcessGroupCollc(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
                    std::chrono::milliseconds timeout, std::vector<int64_t> globalRanks = {});
  ~ProcessGroupCollc() override;

  const std::string getBackendName() const override { return "collc"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor> &tensors,
                                           const c10d::BroadcastOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> &tensors,
                                           const c10d::AllreduceOptions &opts) override;
  c10::intrusive_ptr<c10d::Work>
  allreduce_coalesced(std::vector<at::Tensor> &tensors,
                      const c10d::AllreduceCoalescedOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor> &tensors,
                                        const c10d::ReduceOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>> &outputs,
                                           std::vector<at::Tensor> &inputs,
                                           const c10d::AllgatherOptions &opts) override;
  c10::intrusive_ptr<c10d::Work>
  allgather_coalesced(std::vector<std::vector<at::Tensor>> &outputLists,
                      std::vector<at::Tensor> &inputs, const c10d::AllgatherOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor &output, at::Tensor &input,
                                                 const c10d::AllgatherOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>> &outputs,
                                        std::vector<at::Tensor> &inputs,
                                        const c10d::GatherOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor> &outputs,
                                         std::vector<std::vector<at::Tensor>> &inputs,
                                         const c10d::ScatterOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor> &outputs,
                                                std::vector<std::vector<at::Tensor>> &inputs,
                                                const c10d::ReduceScatterOptions &opts) override;
  c10::intrusive_ptr<c10d::Work>
  _reduce_scatter_base(at::Tensor &output, at::Tensor &input,
                       const c10d::ReduceScatterOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor &output, at::Tensor &input,
                                               std::vector<int64_t> &outputSplits,
                                               std::vector<int64_t> &inputSplits,
                                               const c10d::AllToAllOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor> &outputs,
                                          std::vector<at::Tensor> &inputs,
                                          const c10d::AllToAllOptions &opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &tensors, int dstRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &tensors, int srcRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor> &tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions &opts) override;
  void monitoredBarrier(const c10d::BarrierOptions &opts, bool waitAllRanks) override;
  /// The number of operations issued on the group (every rank issues the
  /// same), as torch's sequence numbers of a group count them.
  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override { return issued; }

  /// A tensor of \p bytes bytes (uint8) in the group's registered memory
  /// (GroupEngine::allocate()): what this rank sends from it, its peers
  /// read where it lies. It keeps the group's engine alive while it lives.
  /// Throws std::runtime_error when the memory is not there.
  at::Tensor registeredBytes(int64_t bytes);
  /// ProcessGroup::lastDirectMessages() of the group's last call.
  uint64_t lastDirectMessages() const { return engine->lastDirectMessages(); }

private:
  /// Queues \p body as an operation of type \p type whose result is
  /// \p outputs (the future's value).
  c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType type, std::vector<at::Tensor> outputs,
                                         std::function<Status()> body);
  /// enqueue() of an operation that its body starts and that completes
  /// later: the body finishes the given task (an error it returns does).
  c10::intrusive_ptr<c10d::Work>
  enqueueStarted(c10d::OpType type, std::vector<at::Tensor> outputs,
                 std::function<Status(std::shared_ptr<Task> completion,
                                      std::shared_ptr<std::atomic<int>> source)>
                     body);
  /// A receive from \p src (or PeerMessages::anySource) into \p tensors.
  c10::intrusive_ptr<c10d::Work> receive(std::vector<at::Tensor> &tensors, int src, int tag);
  /// Gathers every rank's \p in into \p outs (all_gather's list form);
  /// runs in a task.
  Status gatherList(const at::Tensor &in, std::vector<at::Tensor> &outs);
  /// \p numel elements of \p like's type in memory kept from call to call
  /// (no allocation, no page faults), for a task's staging: tasks run one
  /// at a time, and none keeps it beyond its end. Registered memory where
  /// it can be had (the gathered buffer of the list forms is sent on from
  /// there).
  at::Tensor scratch(int64_t numel, const at::Tensor &like);
  at::Tensor scratchBytes;
  std::atomic<uint64_t> issued{0}; ///< Operations enqueued.
  std::shared_ptr<GroupEngine> engine;
  std::shared_ptr<PeerMessages> peers;
  std::chrono::milliseconds timeout;
  /// A subgroup's ranks in the default group (null: none given).
  std::shared_ptr<const std::vector<int64_t>> globalRanks;
};

} // namespace coll::torchext

#endif // COLLC_TORCH_PROCESSGROUPCOLLC_H
