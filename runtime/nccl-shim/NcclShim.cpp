//===- NcclShim.cpp - libcollc_nccl.so: NCCL's API, forwarded -------------===//
//
// A library with NCCL's ABI that a job loads in place of NCCL (LD_PRELOAD,
// or first on the library path as libnccl.so.2). It exports every function
// of nccl.h (NcclApi.def) and its profiling twin (pNAME), loads the real
// NCCL at the first call, and hands each call to it, but for the calls a
// selection names, which Collc runs (ShimPlans.h):
//
//  - COLLC_NCCL_LIB names the real library; otherwise the libnccl.so.2
//    the process has loaded already (PyTorch's, when this library is
//    preloaded), else the first one on LD_LIBRARY_PATH, then in the usual
//    system and CUDA directories, that is not this library;
//  - COLLC_NCCL_DEBUG=1 prints which library was loaded, once, to stderr;
//  - when none can be loaded, every call fails with ncclSystemError, and
//    ncclGetLastError() and ncclGetErrorString() say why; the reason is
//    printed once to stderr.
//
// Built without the CUDA kernels, the library needs no CUDA library
// (nccl.h's types only) and forwards every call.
//
//===----------------------------------------------------------------------===//

#include "RealNccl.h"
#include "ShimPlans.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <link.h>
#include <mutex>
#include <nccl.h>
#include <string>
#include <sys/stat.h>

namespace collcshim {

namespace {

/// Whether \p path is the file this library was loaded from.
bool isThisLibrary(const char *path) {
  Dl_info self;
  struct stat a, b;
  if (!dladdr(reinterpret_cast<void *>(&isThisLibrary), &self) || !self.dli_fname)
    return false;
  return stat(path, &a) == 0 && stat(self.dli_fname, &b) == 0 && a.st_dev == b.st_dev &&
         a.st_ino == b.st_ino;
}

/// Opens \p path when it is a library other than this one; false with
/// \p why set otherwise.
bool openReal(RealNccl &r, const std::string &path, std::string &why) {
  if (isThisLibrary(path.c_str())) {
    why = path + " is this library (libcollc_nccl), not NCCL";
    return false;
  }
  void *h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    why = e ? e : "cannot open " + path;
    return false;
  }
  // A library without ncclGetVersion is not NCCL.
  if (!dlsym(h, "ncclGetVersion")) {
    dlclose(h);
    why = path + " does not export ncclGetVersion: not an NCCL library";
    return false;
  }
  r.handle = h;
  r.path = path;
  return true;
}

/// The directories searched for libnccl.so.2 without COLLC_NCCL_LIB.
std::string searchPath() {
  std::string dirs;
  if (const char *ld = std::getenv("LD_LIBRARY_PATH"))
    dirs = ld;
  for (const char *d : {"/usr/local/cuda/lib64", "/usr/local/cuda/lib", "/usr/lib/x86_64-linux-gnu",
                        "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/lib64", "/lib"})
    dirs += std::string(dirs.empty() ? "" : ":") + d;
  return dirs;
}

/// Takes the libnccl.so.2 the process has loaded already, when that is
/// not this library.
bool loadedAlready(RealNccl &r) {
  void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
  if (!h)
    return false;
  struct link_map *map = nullptr;
  if (dlinfo(h, RTLD_DI_LINKMAP, &map) != 0 || !map || !map->l_name || !*map->l_name ||
      isThisLibrary(map->l_name) || !dlsym(h, "ncclGetVersion")) {
    dlclose(h);
    return false;
  }
  r.handle = h;
  r.path = map->l_name;
  return true;
}

void load(RealNccl &r) {
  std::string why;
  const char *named = std::getenv("COLLC_NCCL_LIB");
  if (named && *named) {
    if (!openReal(r, named, why))
      r.error = "COLLC_NCCL_LIB=" + std::string(named) + ": " + why;
  } else if (loadedAlready(r)) {
    // An NCCL the process loaded itself (PyTorch's wheel, through its
    // RPATH), behind this preloaded library.
  } else {
    const std::string dirs = searchPath();
    std::string tried;
    for (size_t at = 0; at <= dirs.size() && !r.handle;) {
      size_t colon = dirs.find(':', at);
      std::string dir =
          dirs.substr(at, colon == std::string::npos ? std::string::npos : colon - at);
      at = colon == std::string::npos ? dirs.size() + 1 : colon + 1;
      if (dir.empty())
        continue;
      std::string path = dir + "/libnccl.so.2";
      struct stat st;
      if (stat(path.c_str(), &st) != 0 || isThisLibrary(path.c_str()))
        continue;
      if (!openReal(r, path, why))
        tried += (tried.empty() ? "" : "; ") + why;
    }
    if (!r.handle)
      r.error = "no libnccl.so.2 other than this library on LD_LIBRARY_PATH or in the system "
                "directories" +
                (tried.empty() ? std::string() : " (" + tried + ")") +
                "; set COLLC_NCCL_LIB to the real NCCL";
  }
  if (!r.handle) {
    std::fprintf(stderr, "collc-nccl: cannot load NCCL: %s\n", r.error.c_str());
    return;
  }
#define NCCL_RESULT(Name, Params, Args)                                                            \
  r.Name = reinterpret_cast<decltype(r.Name)>(dlsym(r.handle, #Name));                             \
  r.p##Name = reinterpret_cast<decltype(r.p##Name)>(dlsym(r.handle, "p" #Name));
#define NCCL_STRING(Name, Params, Args) NCCL_RESULT(Name, Params, Args)
#define NCCL_VOID(Name, Params, Args) NCCL_RESULT(Name, Params, Args)
#include "NcclApi.def"
  if (envFlag("COLLC_NCCL_DEBUG"))
    std::fprintf(stderr, "collc-nccl: forwarding to %s\n", r.path.c_str());
}

} // namespace

RealNccl &real() {
  static RealNccl r;
  static std::once_flag once;
  std::call_once(once, [] { load(r); });
  return r;
}

namespace {

/// What a call of a function the real library lacks says.
std::string missing(const char *name) {
  RealNccl &r = real();
  return r.handle ? r.path + " has no " + name : r.error;
}

thread_local std::string lastError;
/// The last error of a call Collc took (setError()), until clearError().
thread_local std::string ownError;

} // namespace

ncclResult_t unavailable(const char *name) {
  lastError = ownError = "collc-nccl: " + missing(name);
  return ncclSystemError;
}

void setError(const std::string &message) {
  ownError = "collc-nccl: " + message;
}

void clearError() {
  ownError.clear();
}

bool envFlag(const char *name) {
  const char *v = std::getenv(name);
  return v && *v && std::strcmp(v, "0") != 0;
}

} // namespace collcshim

using namespace collcshim;

extern "C" {

// Every call starts with no error of the library's own (ncclGetLastError()
// then gives NCCL's).
#define NCCL_RESULT(Name, Params, Args)                                                            \
  __attribute__((visibility("default"))) ncclResult_t Name Params {                                \
    RealNccl &r = real();                                                                          \
    clearError();                                                                                  \
    return r.Name ? r.Name Args : unavailable(#Name);                                              \
  }                                                                                                \
  __attribute__((visibility("default"))) ncclResult_t p##Name Params {                             \
    RealNccl &r = real();                                                                          \
    clearError();                                                                                  \
    return r.p##Name ? r.p##Name Args : unavailable("p" #Name);                                    \
  }
// The calls Collc may run (ShimPlans.h): each and its twin go to the hook,
// which runs it or forwards it.
#define NCCL_HOOKED(Name, Params, Args)                                                            \
  __attribute__((visibility("default"))) ncclResult_t Name Params {                                \
    clearError();                                                                                  \
    return [&](auto... a) { return hook::Name(false, a...); } Args;                                \
  }                                                                                                \
  __attribute__((visibility("default"))) ncclResult_t p##Name Params {                             \
    clearError();                                                                                  \
    return [&](auto... a) { return hook::Name(true, a...); } Args;                                 \
  }
#define NCCL_VOID(Name, Params, Args)                                                              \
  __attribute__((visibility("default"))) void Name Params {                                        \
    RealNccl &r = real();                                                                          \
    if (r.Name)                                                                                    \
      r.Name Args;                                                                                 \
  }                                                                                                \
  __attribute__((visibility("default"))) void p##Name Params {                                     \
    RealNccl &r = real();                                                                          \
    if (r.p##Name)                                                                                 \
      r.p##Name Args;                                                                              \
  }
#include "NcclApi.def"

// The two functions that return text say why the real library is missing
// when it is.
static const char *errorText(const char *(*fn)(ncclResult_t), ncclResult_t result) {
  if (fn)
    return fn(result);
  lastError = "collc-nccl: " + missing("ncclGetErrorString");
  return lastError.c_str();
}
static const char *lastErrorText(const char *(*fn)(ncclComm_t), ncclComm_t comm) {
  if (!ownError.empty())
    return ownError.c_str();
  if (fn)
    return fn(comm);
  if (lastError.empty())
    lastError = "collc-nccl: " + missing("ncclGetLastError");
  return lastError.c_str();
}

__attribute__((visibility("default"))) const char *ncclGetErrorString(ncclResult_t result) {
  return errorText(real().ncclGetErrorString, result);
}
__attribute__((visibility("default"))) const char *pncclGetErrorString(ncclResult_t result) {
  return errorText(real().pncclGetErrorString, result);
}
__attribute__((visibility("default"))) const char *ncclGetLastError(ncclComm_t comm) {
  return lastErrorText(real().ncclGetLastError, comm);
}
__attribute__((visibility("default"))) const char *pncclGetLastError(ncclComm_t comm) {
  return lastErrorText(real().pncclGetLastError, comm);
}

} // extern "C"
