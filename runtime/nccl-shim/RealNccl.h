//===- RealNccl.h - The NCCL that libcollc_nccl.so stands in for -*- C++ -*-===//
//
// The real NCCL library, loaded at the first call (NcclShim.cpp), and the
// library's own last error. Private to libcollc_nccl.so.
//
//===----------------------------------------------------------------------===//
#ifndef COLLC_NCCL_SHIM_REALNCCL_H
#define COLLC_NCCL_SHIM_REALNCCL_H

#include <nccl.h>
#include <string>

namespace collcshim {

/// The real NCCL: its handle and its functions, or why it is missing.
struct RealNccl {
  void *handle = nullptr;
  std::string path;
  std::string error; ///< Set when no library could be loaded.
#define NCCL_RESULT(Name, Params, Args)                                                            \
  ncclResult_t(*Name) Params = nullptr;                                                            \
  ncclResult_t(*p##Name) Params = nullptr;
#define NCCL_STRING(Name, Params, Args)                                                            \
  const char *(*Name)Params = nullptr;                                                             \
  const char *(*p##Name)Params = nullptr;
#define NCCL_VOID(Name, Params, Args)                                                              \
  void(*Name) Params = nullptr;                                                                    \
  void(*p##Name) Params = nullptr;
#include "NcclApi.def"
};

/// The real library, loaded once.
RealNccl &real();

/// The result of a call of \p name that cannot be forwarded: the real
/// library is missing, or lacks the function; ncclGetLastError() says why.
ncclResult_t unavailable(const char *name);

/// Makes \p message (prefixed "collc-nccl: ") this thread's last error,
/// which ncclGetLastError() returns until clearError().
void setError(const std::string &message);
/// Forgets this thread's last error of the library's own.
void clearError();

/// Whether \p name is set to something other than "" and "0".
bool envFlag(const char *name);

} // namespace collcshim

#endif // COLLC_NCCL_SHIM_REALNCCL_H
