//===- ShimCalls.cpp - Collective calls through libcollc_nccl.so ----------===//
//
// nccl-shim-calls SHIM CALL...: opens the library and makes each CALL on
// one communicator and stream (fake handles, for the fake NCCL), printing
// "CALL: RESULT" and, for a result other than ncclSuccess, "last error:
// TEXT". CALLs:
//
//   allreduce COUNT | allgather COUNT | reducescatter COUNT | alltoall COUNT
//   broadcast COUNT ROOT | reduce COUNT ROOT | gather COUNT ROOT
//   scatter COUNT ROOT | group-start | group-end | async-error | destroy
//   window-register BYTES (the receive buffer) | window-deregister
//   fp8-allreduce COUNT | avg-allreduce COUNT
//   send COUNT PEER | recv COUNT PEER   (PEER's piece of the send or
//                                        receive buffer: COUNT floats
//                                        at PEER * COUNT)
//
// Buffers are fake device addresses: a call that reaches the real library
// is logged by the fake NCCL with them.
//
//===----------------------------------------------------------------------===//

#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <nccl.h>
#include <string>

namespace {

void *shim = nullptr;

template <class F> F fn(const char *name) {
  auto f = reinterpret_cast<F>(dlsym(shim, name));
  if (!f) {
    std::fprintf(stderr, "the library lacks %s\n", name);
    std::exit(2);
  }
  return f;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: nccl-shim-calls SHIM CALL...\n");
    return 2;
  }
  std::setvbuf(stdout, nullptr, _IONBF, 0);
  shim = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!shim) {
    std::fprintf(stderr, "%s\n", dlerror());
    return 2;
  }
  auto comm = reinterpret_cast<ncclComm_t>(uintptr_t(0xc0ffee00));
  auto stream = reinterpret_cast<cudaStream_t>(uintptr_t(0x5000));
  auto *send = reinterpret_cast<void *>(uintptr_t(0x7f0000100000));
  auto *recv = reinterpret_cast<void *>(uintptr_t(0x7f0000200000));
  auto lastError = fn<decltype(&ncclGetLastError)>("ncclGetLastError");
  ncclWindow_t window = nullptr;
  for (int i = 2; i < argc; ++i) {
    const std::string call = argv[i];
    auto number = [&] {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a number\n", call.c_str());
        std::exit(2);
      }
      return size_t(std::strtoull(argv[++i], nullptr, 10));
    };
    std::string shown = call;
    ncclResult_t r = ncclSuccess;
    if (call == "allreduce" || call == "fp8-allreduce" || call == "avg-allreduce") {
      size_t count = number();
      shown += " " + std::to_string(count);
      r = fn<decltype(&ncclAllReduce)>("ncclAllReduce")(
          send, recv, count, call == "fp8-allreduce" ? ncclFloat8e4m3 : ncclFloat32,
          call == "avg-allreduce" ? ncclAvg : ncclSum, comm, stream);
    } else if (call == "allgather" || call == "reducescatter" || call == "alltoall") {
      size_t count = number();
      shown += " " + std::to_string(count);
      if (call == "allgather")
        r = fn<decltype(&ncclAllGather)>("ncclAllGather")(send, recv, count, ncclFloat32, comm,
                                                          stream);
      else if (call == "reducescatter")
        r = fn<decltype(&ncclReduceScatter)>("ncclReduceScatter")(send, recv, count, ncclFloat32,
                                                                  ncclSum, comm, stream);
      else
        r = fn<decltype(&ncclAlltoAll)>("ncclAlltoAll")(send, recv, count, ncclFloat32, comm,
                                                        stream);
    } else if (call == "broadcast" || call == "reduce" || call == "gather" || call == "scatter") {
      size_t count = number();
      int root = int(number());
      shown += " " + std::to_string(count) + " " + std::to_string(root);
      if (call == "broadcast")
        r = fn<decltype(&ncclBroadcast)>("ncclBroadcast")(send, recv, count, ncclFloat32, root,
                                                          comm, stream);
      else if (call == "reduce")
        r = fn<decltype(&ncclReduce)>("ncclReduce")(send, recv, count, ncclFloat32, ncclSum, root,
                                                    comm, stream);
      else if (call == "gather")
        r = fn<decltype(&ncclGather)>("ncclGather")(send, recv, count, ncclFloat32, root, comm,
                                                    stream);
      else
        r = fn<decltype(&ncclScatter)>("ncclScatter")(send, recv, count, ncclFloat32, root, comm,
                                                      stream);
    } else if (call == "send" || call == "recv") {
      size_t count = number();
      int peer = int(number());
      shown += " " + std::to_string(count) + " " + std::to_string(peer);
      const size_t offset = size_t(peer) * count * sizeof(float);
      if (call == "send")
        r = fn<decltype(&ncclSend)>("ncclSend")(static_cast<char *>(send) + offset, count,
                                                ncclFloat32, peer, comm, stream);
      else
        r = fn<decltype(&ncclRecv)>("ncclRecv")(static_cast<char *>(recv) + offset, count,
                                                ncclFloat32, peer, comm, stream);
    } else if (call == "group-start") {
      r = fn<decltype(&ncclGroupStart)>("ncclGroupStart")();
    } else if (call == "group-end") {
      r = fn<decltype(&ncclGroupEnd)>("ncclGroupEnd")();
    } else if (call == "async-error") {
      ncclResult_t async = ncclSuccess;
      r = fn<decltype(&ncclCommGetAsyncError)>("ncclCommGetAsyncError")(comm, &async);
      shown += " (" + std::to_string(int(async)) + ")";
    } else if (call == "window-register") {
      // The receive buffer, COUNT bytes; the fake leaves the handle as set.
      size_t bytes = number();
      shown += " " + std::to_string(bytes);
      window = reinterpret_cast<ncclWindow_t>(uintptr_t(0xa11ce00));
      r = fn<decltype(&ncclCommWindowRegister)>("ncclCommWindowRegister")(comm, recv, bytes,
                                                                          &window, 0);
    } else if (call == "window-deregister") {
      r = fn<decltype(&ncclCommWindowDeregister)>("ncclCommWindowDeregister")(comm, window);
    } else if (call == "destroy") {
      r = fn<decltype(&ncclCommDestroy)>("ncclCommDestroy")(comm);
    } else {
      std::fprintf(stderr, "unknown call %s\n", call.c_str());
      return 2;
    }
    std::printf("%s: %d\n", shown.c_str(), int(r));
    if (r != ncclSuccess)
      std::printf("last error: %s\n", lastError(comm));
  }
  return 0;
}
