//===- ShimPlans.h - The calls libcollc_nccl.so may run on Collc -*- C++ -*-===//
//
// The hooks of the NCCL_HOOKED entries of NcclApi.def: each takes the call
// (twin: it came in as the profiling twin pNAME, and goes out as it) and
// either runs it on Collc or hands it to the real NCCL.
//
// Which calls Collc runs: a selection table (coll/Runtime/Selection.h, the
// format the PyTorch backend reads) named by COLLC_NCCL_SELECT, else
// COLLC_PLANS=DIR's DIR/collc.select. Without one every call is forwarded.
// A call runs on Collc when a row names its collective, the communicator's
// size and a max-bytes the call's size fits (nccl-tests' size: the larger
// per-rank buffer), with a data type and operator Collc has. Its program is
// compiled for the communicator's size at the first such call and cached
// (PlanLibrary.h); a coll::NcclCommunicator over the communicator is made
// then too, one per plan, and kept until ncclCommDestroy/Finalize.
//
// A plan that cannot be made or set up (no compiler, a program that does
// not take N, no GPU) makes the call go to NCCL, said once on stderr; with
// COLLC_NCCL_STRICT=1 it fails with the reason in ncclGetLastError(). The
// set-up is collective and fails on every rank alike, so the ranks stay
// together. Set-up waits for the first call outside a group
// (ncclGroupStart/End) and outside a stream capture: calls before it go to
// NCCL. After it, a call in a CUDA graph capture is captured as Collc's
// launch (NcclCommunicator keeps the slice base in device memory, and
// each captured launch its own buffer table), and replays run on Collc.
//
// Registered windows (ncclCommWindowRegister): after NCCL registers one,
// every Collc communicator over the NCCL communicator (and every one made
// later) reads it in place (NcclCommunicator::registerWindow), collective
// as the registration is; before NCCL deregisters it, they stop.
//
// Send/recv groups: with COLLC_NCCL_GROUPS naming patterns (alltoall,
// gather, scatter: GroupPattern.h), a group's ncclSend/ncclRecv calls are
// held back until its ncclGroupEnd; when they are one rank's part of a
// pattern named and the selection names that collective, Collc runs them
// as it (their pieces copied into and out of contiguous buffers where they
// lie apart), else they go to NCCL in a group of their own after the
// caller's.
//
// Private to libcollc_nccl.so.
//
//===----------------------------------------------------------------------===//
#ifndef COLLC_NCCL_SHIM_SHIMPLANS_H
#define COLLC_NCCL_SHIM_SHIMPLANS_H

#include <nccl.h>

namespace collcshim::hook {

ncclResult_t ncclCommFinalize(bool twin, ncclComm_t comm);
ncclResult_t ncclCommDestroy(bool twin, ncclComm_t comm);
ncclResult_t ncclCommAbort(bool twin, ncclComm_t comm);
ncclResult_t ncclCommRevoke(bool twin, ncclComm_t comm, int revokeFlags);
ncclResult_t ncclCommGetAsyncError(bool twin, ncclComm_t comm, ncclResult_t *asyncError);
ncclResult_t ncclCommWindowRegister(bool twin, ncclComm_t comm, void *buff, size_t size,
                                    ncclWindow_t *win, int winFlags);
ncclResult_t ncclCommWindowDeregister(bool twin, ncclComm_t comm, ncclWindow_t win);
ncclResult_t ncclReduce(bool twin, const void *sendbuff, void *recvbuff, size_t count,
                        ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                        cudaStream_t stream);
ncclResult_t ncclBcast(bool twin, void *buff, size_t count, ncclDataType_t datatype, int root,
                       ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBroadcast(bool twin, const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAllReduce(bool twin, const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t ncclReduceScatter(bool twin, const void *sendbuff, void *recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream);
ncclResult_t ncclAllGather(bool twin, const void *sendbuff, void *recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAlltoAll(bool twin, const void *sendbuff, void *recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclGather(bool twin, const void *sendbuff, void *recvbuff, size_t count,
                        ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclScatter(bool twin, const void *sendbuff, void *recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclSend(bool twin, const void *sendbuff, size_t count, ncclDataType_t datatype,
                      int peer, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclRecv(bool twin, void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclGroupStart(bool twin);
ncclResult_t ncclGroupEnd(bool twin);
ncclResult_t ncclGroupSimulateEnd(bool twin, ncclSimInfo_t *simInfo);

} // namespace collcshim::hook

#endif // COLLC_NCCL_SHIM_SHIMPLANS_H
