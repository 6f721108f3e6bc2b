//===- ShimProbe.cpp - Load libcollc_nccl.so once, in a fresh process -----===//
//
// nccl-shim-probe SHIM: opens the library, calls ncclGetVersion and
// ncclCommAbort through it, and prints their results and
// ncclGetLastError(NULL). The library picks the real NCCL once per process,
// so each way of finding it (COLLC_NCCL_LIB, the library path, nothing)
// gets a process of its own.
//
//===----------------------------------------------------------------------===//

#include <cstdio>
#include <dlfcn.h>
#include <nccl.h>

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: nccl-shim-probe SHIM\n");
    return 2;
  }
  // Unbuffered: what it printed survives however the process ends.
  std::setvbuf(stdout, nullptr, _IONBF, 0);
  void *shim = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!shim) {
    std::fprintf(stderr, "%s\n", dlerror());
    return 2;
  }
  auto version = reinterpret_cast<decltype(&ncclGetVersion)>(dlsym(shim, "ncclGetVersion"));
  auto abort = reinterpret_cast<decltype(&ncclCommAbort)>(dlsym(shim, "ncclCommAbort"));
  auto last = reinterpret_cast<decltype(&ncclGetLastError)>(dlsym(shim, "ncclGetLastError"));
  auto text = reinterpret_cast<decltype(&ncclGetErrorString)>(dlsym(shim, "ncclGetErrorString"));
  if (!version || !abort || !last || !text) {
    std::fprintf(stderr, "the library lacks a function\n");
    return 2;
  }
  int v = -1;
  const ncclResult_t got = version(&v);
  std::printf("version: %d %d\n", int(got), v);
  std::printf("abort: %d\n", int(abort(nullptr)));
  std::printf("last error: %s\n", last(nullptr));
  std::printf("error string: %s\n", text(ncclInvalidUsage));
  return 0;
}
