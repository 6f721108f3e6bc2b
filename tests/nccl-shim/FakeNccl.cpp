//===- FakeNccl.cpp - An NCCL that records its calls ----------------------===//
//
// libfake_nccl.so.2: every function of nccl.h (NcclApi.def) and its
// profiling twin, each appending formatCall() of its name and arguments to
// the file FAKE_NCCL_LOG names ("pNAME" for the twin). It never follows a
// pointer, but for the answers of ncclCommCount, ncclCommUserRank and
// ncclCommCuDevice where FAKE_NCCL_NRANKS, FAKE_NCCL_RANK and
// FAKE_NCCL_DEVICE give them (a communicator of that size). Results: ncclSuccess, but
// ncclInvalidUsage from ncclCommAbort and ncclInProgress from ncclCommFinalize, so that the tests
// see results pass through; the functions that return text return "fake NAME".
//
//===----------------------------------------------------------------------===//

#include "FakeNcclLog.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

void record(const std::string &line) {
  const char *path = std::getenv("FAKE_NCCL_LOG");
  if (!path || !*path)
    return;
  if (FILE *f = std::fopen(path, "a")) {
    std::fprintf(f, "%s\n", line.c_str());
    std::fclose(f);
  }
}

/// Nothing, for every function but the three queries of a communicator.
template <class... A> void answer(const std::string &, A...) {}
void answer(const std::string &name, ncclComm_t, int *out) {
  const char *var = name == "ncclCommCount"      ? "FAKE_NCCL_NRANKS"
                    : name == "ncclCommUserRank" ? "FAKE_NCCL_RANK"
                    : name == "ncclCommCuDevice" ? "FAKE_NCCL_DEVICE"
                                                 : nullptr;
  const char *value = var ? std::getenv(var) : nullptr;
  if (value && *value)
    *out = std::atoi(value);
}

template <class... A> ncclResult_t logged(const std::string &name, A... args) {
  record(fake::formatCall(name.c_str(), args...));
  answer(name[0] == 'p' ? name.substr(1) : name, args...);
  const std::string n = name[0] == 'p' ? name.substr(1) : name;
  return n == "ncclCommAbort"      ? ncclInvalidUsage
         : n == "ncclCommFinalize" ? ncclInProgress
                                   : ncclSuccess;
}

} // namespace

#define FAKE_EXPORT __attribute__((visibility("default")))

extern "C" {

// Each body calls a generic lambda with the function's argument list.
#define NCCL_RESULT(Name, Params, Args)                                                            \
  FAKE_EXPORT ncclResult_t Name Params {                                                           \
    return [&](auto... a) { return logged(#Name, a...); } Args;                                    \
  }                                                                                                \
  FAKE_EXPORT ncclResult_t p##Name Params {                                                        \
    return [&](auto... a) { return logged("p" #Name, a...); } Args;                                \
  }
#define NCCL_STRING(Name, Params, Args)                                                            \
  FAKE_EXPORT const char *Name Params {                                                            \
    [&](auto... a) { logged(#Name, a...); } Args;                                                  \
    return "fake " #Name;                                                                          \
  }                                                                                                \
  FAKE_EXPORT const char *p##Name Params {                                                         \
    [&](auto... a) { logged("p" #Name, a...); } Args;                                              \
    return "fake p" #Name;                                                                         \
  }
#define NCCL_VOID(Name, Params, Args)                                                              \
  FAKE_EXPORT void Name Params {                                                                   \
    [&](auto... a) { logged(#Name, a...); } Args;                                                  \
  }                                                                                                \
  FAKE_EXPORT void p##Name Params {                                                                \
    [&](auto... a) { logged("p" #Name, a...); } Args;                                              \
  }
#include "NcclApi.def"

} // extern "C"
