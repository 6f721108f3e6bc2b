//===- NcclShimTest.cpp - libcollc_nccl.so against nccl.h and a fake NCCL -===//
//
// Host-side tests of the NCCL-compatible library, without a GPU:
//  - it exports every function that the nccl.h of the build declares, and
//    the profiling twin (pNAME) of each;
//  - with the fake NCCL as the real one (COLLC_NCCL_LIB), every call reaches
//    it with the same arguments, and its result comes back;
//  - it finds the real library on the library path, skipping itself, and
//    fails every call with a reason when there is none;
//  - with a selection, it says per communicator which calls Collc runs,
//    compiles their plans on first use, and, where Collc cannot set them up
//    (no GPU here), hands them to NCCL with the reason, or fails them with
//    it under COLLC_NCCL_STRICT; calls the selection does not name go to
//    NCCL untouched.
//
//===----------------------------------------------------------------------===//

#include "FakeNcclLog.h"

#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <fstream>
#include <gtest/gtest.h>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

std::string readFile(const std::string &path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

/// The functions nccl.h declares (nccl*, pnccl*), from the header itself.
std::set<std::string> headerFunctions() {
  std::string h = readFile(COLL_NCCL_HEADER);
  // Comments out, then every "name(" after a return type at a line start.
  h = std::regex_replace(h, std::regex(R"(/\*[\s\S]*?\*/)"), " ");
  h = std::regex_replace(h, std::regex(R"(//[^\n]*)"), " ");
  std::set<std::string> names;
  std::regex decl(R"((?:^|\n)\s*(?:const\s+)?\w+\s*\*?\s*(p?nccl[A-Z]\w*)\s*\()");
  for (std::sregex_iterator it(h.begin(), h.end(), decl), end; it != end; ++it)
    names.insert((*it)[1]);
  return names;
}

void *openShim() {
  static void *shim = [] {
    setenv("COLLC_NCCL_LIB", COLL_FAKE_NCCL, 1);
    return dlopen(COLL_NCCL_SHIM, RTLD_NOW | RTLD_LOCAL);
  }();
  return shim;
}

TEST(NcclShim, ExportsEveryFunctionOfTheHeader) {
  std::set<std::string> names = headerFunctions();
  // nccl.h 2.28 declares 41 functions, each with its profiling twin.
  ASSERT_GE(names.size(), 82u) << "nccl.h at " << COLL_NCCL_HEADER << " was not read";
  void *shim = openShim();
  ASSERT_NE(shim, nullptr) << dlerror();
  std::vector<std::string> missing;
  for (const std::string &n : names)
    if (!dlsym(shim, n.c_str()))
      missing.push_back(n);
  EXPECT_TRUE(missing.empty()) << missing.size() << " functions of nccl.h are not exported, "
                               << "the first " << missing.front();
  // And NcclApi.def, the source of the exports, lists exactly the header's.
  std::set<std::string> listed;
#define NCCL_RESULT(Name, Params, Args)                                                            \
  listed.insert(#Name);                                                                            \
  listed.insert("p" #Name);
#define NCCL_STRING(Name, Params, Args) NCCL_RESULT(Name, Params, Args)
#define NCCL_VOID(Name, Params, Args) NCCL_RESULT(Name, Params, Args)
#include "NcclApi.def"
  EXPECT_EQ(listed, names);
}

TEST(NcclShim, ForwardsEveryCallWithItsArguments) {
  const std::string log = ::testing::TempDir() + "fake_nccl_" + std::to_string(getpid()) + ".log";
  std::remove(log.c_str());
  setenv("FAKE_NCCL_LOG", log.c_str(), 1);
  void *shim = openShim();
  ASSERT_NE(shim, nullptr) << dlerror();
  std::vector<std::string> want;
  std::vector<std::string> wrongResults;
  int seed = 0;
  auto expectResult = [&](const std::string &name, ncclResult_t got) {
    const std::string n = name[0] == 'p' ? name.substr(1) : name;
    ncclResult_t expected = n == "ncclCommAbort"      ? ncclInvalidUsage
                            : n == "ncclCommFinalize" ? ncclInProgress
                                                      : ncclSuccess;
    if (got != expected)
      wrongResults.push_back(name + " returned " + std::to_string(int(got)));
  };
  // Each function and its twin, through dlsym on the shim, with distinct
  // arguments per call.
#define CALL(Name, Ret)                                                                            \
  for (const std::string name : {std::string(#Name), std::string("p" #Name)}) {                    \
    auto fn = reinterpret_cast<decltype(&::Name)>(dlsym(shim, name.c_str()));                      \
    ASSERT_NE(fn, nullptr) << name;                                                                \
    Ret result{};                                                                                  \
    want.push_back(                                                                                \
        fake::callWithArgs(fn, name.c_str(), ++seed, &result,                                      \
                           std::make_index_sequence<fake::Arity<decltype(&::Name)>::value>()));    \
    CHECK_##Ret(name, result);                                                                     \
  }
#define CHECK_ncclResult_t(name, r) expectResult(name, r)
#define NCCL_RESULT(Name, Params, Args) CALL(Name, ncclResult_t)
#include "NcclApi.def"
  // The functions that return text: the fake's text comes back.
  for (const char *name : {"ncclGetErrorString", "pncclGetErrorString"}) {
    auto fn = reinterpret_cast<decltype(&::ncclGetErrorString)>(dlsym(shim, name));
    ASSERT_NE(fn, nullptr);
    EXPECT_EQ(std::string(fn(ncclInternalError)), std::string("fake ") + name);
    want.push_back(fake::formatCall(name, ncclInternalError));
  }
  for (const char *name : {"ncclGetLastError", "pncclGetLastError"}) {
    auto fn = reinterpret_cast<decltype(&::ncclGetLastError)>(dlsym(shim, name));
    ASSERT_NE(fn, nullptr);
    ncclComm_t comm = fake::makeArg<ncclComm_t>(77, 0);
    EXPECT_EQ(std::string(fn(comm)), std::string("fake ") + name);
    want.push_back(fake::formatCall(name, comm));
  }
  for (const char *name : {"ncclResetDebugInit", "pncclResetDebugInit"}) {
    // Deprecated in nccl.h, and still exported.
    auto fn = reinterpret_cast<void (*)()>(dlsym(shim, name));
    ASSERT_NE(fn, nullptr);
    fn();
    want.push_back(name);
  }
  EXPECT_TRUE(wrongResults.empty()) << wrongResults.front();
  std::vector<std::string> got;
  std::istringstream in(readFile(log));
  for (std::string line; std::getline(in, line);)
    got.push_back(line);
  EXPECT_EQ(got, want);
  std::remove(log.c_str());
}

/// Runs the probe on \p shim with \p env before it; its output. Without
/// leak checking (sanitizer builds): the probe leaves the libraries it
/// opened loaded on purpose.
/// The output and stderr of \p command, run with the shim's and the
/// fake's variables of this process unset.
std::string probeCommand(const std::string &command) {
  std::string cmd = "env -u COLLC_NCCL_LIB -u COLLC_NCCL_SELECT -u COLLC_PLANS -u FAKE_NCCL_LOG "
                    "ASAN_OPTIONS=detect_leaks=0 " +
                    command + " 2>&1";
  FILE *p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[512];
  while (p && fgets(buf, sizeof buf, p))
    out += buf;
  if (p)
    pclose(p);
  return out;
}

std::string probe(const std::string &env, const std::string &shim) {
  return probeCommand(env + " " + COLL_SHIM_PROBE + " " + shim);
}

TEST(NcclShim, FindsTheRealLibraryOrSaysWhy) {
  // A directory holding the fake as libnccl.so.2, after one holding the
  // shim under that name: the search skips the shim itself.
  const std::string dir = ::testing::TempDir() + "ncclshim" + std::to_string(getpid());
  ASSERT_EQ(system(("rm -rf " + dir + " && mkdir -p " + dir + "/self " + dir + "/real").c_str()),
            0);
  ASSERT_EQ(symlink(COLL_NCCL_SHIM, (dir + "/self/libnccl.so.2").c_str()), 0);
  ASSERT_EQ(symlink(COLL_FAKE_NCCL, (dir + "/real/libnccl.so.2").c_str()), 0);
  std::string out = probe("LD_LIBRARY_PATH=" + dir + "/self:" + dir + "/real COLLC_NCCL_DEBUG=1",
                          dir + "/self/libnccl.so.2");
  EXPECT_NE(out.find("collc-nccl: forwarding to " + dir + "/real/libnccl.so.2"), std::string::npos)
      << out;
  EXPECT_NE(out.find("abort: " + std::to_string(int(ncclInvalidUsage))), std::string::npos) << out;
  EXPECT_NE(out.find("error string: fake ncclGetErrorString"), std::string::npos) << out;

  // Named, but it is the shim itself: every call fails, and says why.
  out = probe("COLLC_NCCL_LIB=" + dir + "/self/libnccl.so.2", COLL_NCCL_SHIM);
  EXPECT_NE(out.find("is this library (libcollc_nccl), not NCCL"), std::string::npos) << out;
  EXPECT_NE(out.find("version: " + std::to_string(int(ncclSystemError)) + " -1"), std::string::npos)
      << out;
  EXPECT_NE(out.find("abort: " + std::to_string(int(ncclSystemError))), std::string::npos) << out;
  EXPECT_NE(out.find("last error: collc-nccl: COLLC_NCCL_LIB="), std::string::npos) << out;

  // Named, and missing.
  out = probe("COLLC_NCCL_LIB=" + dir + "/none.so", COLL_NCCL_SHIM);
  EXPECT_NE(out.find("collc-nccl: cannot load NCCL: COLLC_NCCL_LIB=" + dir + "/none.so"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("error string: collc-nccl: COLLC_NCCL_LIB="), std::string::npos) << out;

  // Not an NCCL library at all.
  out = probe("COLLC_NCCL_LIB=libm.so.6", COLL_NCCL_SHIM);
  EXPECT_NE(out.find("does not export ncclGetVersion: not an NCCL library"), std::string::npos)
      << out;
  ASSERT_EQ(system(("rm -rf " + dir).c_str()), 0);
}

TEST(NcclShim, ForwardsToTheInstalledNccl) {
  // The library as libnccl.so.2, first on the library path: it finds the
  // real NCCL behind itself (in the CUDA or system directories) and its
  // version comes back. Needs no GPU.
  const char *candidates[] = {"/usr/local/cuda/lib64/libnccl.so.2",
                              "/usr/lib/x86_64-linux-gnu/libnccl.so.2", "/usr/lib64/libnccl.so.2"};
  std::string real;
  for (const char *c : candidates)
    if (access(c, R_OK) == 0) {
      real = c;
      break;
    }
  if (real.empty())
    GTEST_SKIP() << "no NCCL installed";
  const std::string dir = ::testing::TempDir() + "ncclshimreal" + std::to_string(getpid());
  ASSERT_EQ(system(("rm -rf " + dir + " && mkdir -p " + dir).c_str()), 0);
  ASSERT_EQ(symlink(COLL_NCCL_SHIM, (dir + "/libnccl.so.2").c_str()), 0);
  std::string out = probe("LD_LIBRARY_PATH=" + dir + " COLLC_NCCL_DEBUG=1", dir + "/libnccl.so.2");
  EXPECT_NE(out.find("collc-nccl: forwarding to "), std::string::npos) << out;
  EXPECT_EQ(out.find("forwarding to " + dir), std::string::npos) << out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex("version: 0 (\\d+)"))) << out;
  EXPECT_GE(std::stoi(m[1]), 22800) << out; // NCCL 2.28 or later.
  EXPECT_NE(out.find("error string: invalid usage"), std::string::npos) << out; // NCCL's text.
  ASSERT_EQ(system(("rm -rf " + dir).c_str()), 0);
}

#if defined(COLL_SHIM_RUNS_PLANS) && defined(COLL_COLLC)
/// Runs nccl-shim-calls with \p env and \p calls against the fake NCCL (a
/// communicator of 2 ranks, this one rank 0): its output and stderr, and
/// the fake's log.
struct CallsRun {
  std::string out, log;
};
CallsRun runCalls(const std::string &dir, const std::string &env, const std::string &calls) {
  const std::string log = dir + "/fake.log";
  std::remove(log.c_str());
  CallsRun r;
  r.out = probeCommand(
      std::string("COLLC_NCCL_LIB=") + COLL_FAKE_NCCL + " FAKE_NCCL_LOG=" + log +
      " FAKE_NCCL_NRANKS=2 FAKE_NCCL_RANK=0 FAKE_NCCL_DEVICE=0 COLLC_CACHE_DIR=" + dir + "/cache " +
      env + " " + COLL_SHIM_CALLS + " " + COLL_NCCL_SHIM + " " + calls);
  r.log = readFile(log);
  return r;
}

size_t count(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

#endif

TEST(NcclShim, RunsSelectedCallsOrSaysWhyNot) {
#if !defined(COLL_SHIM_RUNS_PLANS) || !defined(COLL_COLLC)
  GTEST_SKIP() << "the library was built without the CUDA kernels, or collc was not built";
#else
  const std::string dir = ::testing::TempDir() + "ncclshimsel" + std::to_string(getpid());
  ASSERT_EQ(system(("rm -rf " + dir + " && mkdir -p " + dir).c_str()), 0);
  {
    std::ofstream t(dir + "/collc.select");
    t << "# collective ranks max-bytes program\n"
      << "allreduce 2 64K " << COLL_STDLIB_DIR << "/ring_allreduce.coll\n"
      << "allgather 2-4 any " << COLL_STDLIB_DIR << "/ring_allgather.coll\n"
      << "broadcast 8 any " << COLL_STDLIB_DIR << "/ring_allgather.coll\n";
  }
  const std::string env =
      "COLLC=" + std::string(COLL_COLLC) + " COLLC_NCCL_SELECT=" + dir + "/collc.select";
  // Selected (4 KiB), selected again, too large (4 MiB), in a group,
  // selected allgather, unselected reducescatter, fp8, average.
  CallsRun r = runCalls(dir, env,
                        "allreduce 1024 allreduce 1024 allreduce 1048576 group-start allreduce 256 "
                        "group-end allgather 16 reducescatter 16 fp8-allreduce 64 avg-allreduce 64 "
                        "async-error destroy");
  // One line for the communicator, naming what Collc runs.
  EXPECT_EQ(count(r.out, "collc-nccl: communicator of 2 ranks (rank 0, device 0): Collc runs "
                         "allreduce up to 64 KiB (ring_allreduce.coll), allgather of any size "
                         "(ring_allgather.coll) (" +
                             dir + "/collc.select); every other call goes to NCCL"),
            1u)
      << r.out;
  // Without a GPU the set-up fails: said once per plan, and the calls go on
  // to NCCL.
  EXPECT_EQ(
      count(r.out,
            "collc-nccl: rank 0 of 2: cannot set up allreduce (plan ring_allreduce) on Collc: "),
      1u)
      << r.out;
  EXPECT_EQ(
      count(r.out,
            "collc-nccl: rank 0 of 2: cannot set up allgather (plan ring_allgather) on Collc: "),
      1u)
      << r.out;
  EXPECT_EQ(count(r.out, "; the call goes to NCCL"), 2u) << r.out;
  for (const char *call : {"allreduce 1024: 0", "allreduce 1048576: 0", "allreduce 256: 0",
                           "allgather 16: 0", "reducescatter 16: 0", "fp8-allreduce 64: 0",
                           "avg-allreduce 64: 0", "async-error (0): 0", "destroy: 0"})
    EXPECT_NE(r.out.find(call), std::string::npos) << call << "\n" << r.out;
  // Every call reached NCCL with its own arguments.
  const std::string comm = " p:" + std::to_string(0xc0ffee00u);
  const std::string stream = " p:" + std::to_string(0x5000u);
  const std::string send = "ncclAllReduce p:" + std::to_string(0x7f0000100000ull) +
                           " p:" + std::to_string(0x7f0000200000ull);
  EXPECT_EQ(count(r.log, send + " i:1024 e:7 e:0" + comm + stream), 2u) << r.log;
  EXPECT_EQ(count(r.log, send + " i:1048576 e:7 e:0" + comm + stream), 1u) << r.log;
  EXPECT_EQ(count(r.log, send + " i:256 e:7 e:0" + comm + stream), 1u) << r.log;
  EXPECT_EQ(count(r.log, send + " i:64 e:10 e:0" + comm + stream), 1u) << r.log;
  EXPECT_EQ(count(r.log, send + " i:64 e:7 e:4" + comm + stream), 1u) << r.log;
  EXPECT_EQ(count(r.log, "ncclAllGather "), 1u) << r.log;
  EXPECT_EQ(count(r.log, "ncclReduceScatter "), 1u) << r.log;
  EXPECT_EQ(count(r.log, "ncclGroupStart"), 1u) << r.log;
  EXPECT_EQ(count(r.log, "ncclCommDestroy" + comm), 1u) << r.log;
  // A window registered and deregistered with a selection in force: both
  // reach NCCL with their arguments, and the library keeps the window for
  // the communicators it makes (none here: no GPU).
  r = runCalls(dir, env, "window-register 65536 allreduce 1024 window-deregister destroy");
  for (const char *call :
       {"window-register 65536: 0", "allreduce 1024: 0", "window-deregister: 0", "destroy: 0"})
    EXPECT_NE(r.out.find(call), std::string::npos) << call << "\n" << r.out;
  EXPECT_EQ(count(r.log, "ncclCommWindowRegister" + comm +
                             " p:" + std::to_string(0x7f0000200000ull) + " i:65536 p:"),
            1u)
      << r.log;
  EXPECT_EQ(count(r.log, "ncclCommWindowDeregister" + comm + " p:" + std::to_string(0xa11ce00u)),
            1u)
      << r.log;
  // Inside a group: taken up at the group's end, when NCCL has filled the
  // handle.
  r = runCalls(dir, env, "group-start window-register 4096 group-end window-deregister destroy");
  for (const char *call :
       {"window-register 4096: 0", "group-end: 0", "window-deregister: 0", "destroy: 0"})
    EXPECT_NE(r.out.find(call), std::string::npos) << call << "\n" << r.out;
  EXPECT_EQ(count(r.log, "ncclCommWindowRegister" + comm), 1u) << r.log;
  EXPECT_EQ(count(r.log, "ncclGroupEnd"), 1u) << r.log;
  // The plans were compiled for 2 ranks, into the cache; the plan of the
  // call too large for its row was not.
  std::string cached = probeCommand("ls " + dir + "/cache");
  EXPECT_EQ(count(cached, "ring_allreduce-n2-"), 1u) << cached;
  EXPECT_EQ(count(cached, "ring_allgather-n2-"), 1u) << cached;

  // Strict: the call fails with the reason instead, and NCCL never sees it.
  r = runCalls(dir, env + " COLLC_NCCL_STRICT=1", "allreduce 1024 allreduce 2048");
  EXPECT_NE(
      r.out.find(
          "allreduce 1024: " + std::to_string(int(ncclSystemError)) +
          "\nlast error: collc-nccl: cannot set up allreduce (plan ring_allreduce) on Collc: "),
      std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("allreduce 2048: " + std::to_string(int(ncclSystemError))),
            std::string::npos)
      << r.out;
  EXPECT_EQ(count(r.log, "ncclAllReduce "), 0u) << r.log;

  // A row whose program is another collective: an error naming both (the
  // broadcast row of the first table named 8 ranks, and was not taken).
  {
    std::ofstream t(dir + "/wrong.select");
    t << "allreduce 2 any " << COLL_STDLIB_DIR << "/ring_allgather.coll\n";
  }
  r = runCalls(dir,
               "COLLC=" + std::string(COLL_COLLC) +
                   " COLLC_NCCL_STRICT=1 COLLC_NCCL_SELECT=" + dir + "/wrong.select",
               "allreduce 64");
  EXPECT_NE(r.out.find("allreduce 64: " + std::to_string(int(ncclInvalidUsage)) +
                       "\nlast error: collc-nccl: cannot run allreduce on Collc: "),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("runs allgather on 2 ranks, not allreduce on 2 ranks"), std::string::npos)
      << r.out;

  // A table that cannot be read: said once, and every call goes to NCCL.
  r = runCalls(dir, "COLLC_NCCL_SELECT=" + dir + "/none.select", "allreduce 1024");
  EXPECT_NE(r.out.find("collc-nccl: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("none.select"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("; every call goes to NCCL"), std::string::npos) << r.out;
  EXPECT_EQ(count(r.log, "ncclAllReduce "), 1u) << r.log;
  ASSERT_EQ(system(("rm -rf " + dir).c_str()), 0);
#endif
}

TEST(NcclShim, SendRecvGroupsAsCollectives) {
#if !defined(COLL_SHIM_RUNS_PLANS) || !defined(COLL_COLLC)
  GTEST_SKIP() << "the library was built without the CUDA kernels, or collc was not built";
#else
  const std::string dir = ::testing::TempDir() + "ncclshimgrp" + std::to_string(getpid());
  ASSERT_EQ(system(("rm -rf " + dir + " && mkdir -p " + dir).c_str()), 0);
  {
    std::ofstream t(dir + "/collc.select");
    t << "alltoall 2 any " << COLL_STDLIB_DIR << "/pairwise_alltoall.coll\n"
      << "gather 2 any " << COLL_STDLIB_DIR << "/direct_gather.coll\n";
  }
  const std::string select =
      "COLLC=" + std::string(COLL_COLLC) + " COLLC_NCCL_SELECT=" + dir + "/collc.select";
  const std::string allToAll = "group-start send 16 0 recv 16 0 send 16 1 recv 16 1 group-end";
  const std::string comm = " p:" + std::to_string(0xc0ffee00u);
  const std::string stream = " p:" + std::to_string(0x5000u);
  auto sendLine = [&](int peer) {
    return "ncclSend p:" + std::to_string(0x7f0000100000ull + uint64_t(peer) * 64) +
           " i:16 e:7 i:" + std::to_string(peer) + comm + stream;
  };
  auto recvLine = [&](int peer) {
    return "ncclRecv p:" + std::to_string(0x7f0000200000ull + uint64_t(peer) * 64) +
           " i:16 e:7 i:" + std::to_string(peer) + comm + stream;
  };

  // Without COLLC_NCCL_GROUPS the sends and receives go to NCCL as they
  // come, inside the caller's group.
  CallsRun r = runCalls(dir, select, allToAll);
  EXPECT_EQ(count(r.log, "ncclGroupStart"), 1u) << r.log;
  EXPECT_LT(r.log.find("ncclGroupStart"), r.log.find(sendLine(0))) << r.log;
  EXPECT_LT(r.log.find(recvLine(1)), r.log.find("ncclGroupEnd")) << r.log;

  // With it, the group is recognised as an all-to-all and its set-up tried
  // (no GPU here): said once, and the calls go to NCCL, in a group of
  // their own after the caller's, each with its own arguments.
  const std::string groups = select + " COLLC_NCCL_GROUPS=alltoall,gather";
  r = runCalls(dir, groups, allToAll + " " + allToAll);
  EXPECT_EQ(count(r.out, "collc-nccl: rank 0 of 2: cannot set up alltoall (plan "
                         "pairwise_alltoall) on Collc: "),
            1u)
      << r.out;
  EXPECT_NE(r.out.find("group-end: 0"), std::string::npos) << r.out;
  EXPECT_EQ(count(r.log, "ncclGroupStart"), 4u) << r.log;
  EXPECT_EQ(count(r.log, "ncclGroupEnd"), 4u) << r.log;
  for (int peer : {0, 1}) {
    EXPECT_EQ(count(r.log, sendLine(peer)), 2u) << r.log;
    EXPECT_EQ(count(r.log, recvLine(peer)), 2u) << r.log;
  }
  // The caller's (empty) group ends before its held calls go out.
  const size_t firstEnd = r.log.find("ncclGroupEnd");
  EXPECT_LT(firstEnd, r.log.find(sendLine(0))) << r.log;
  EXPECT_LT(r.log.find("ncclGroupStart", r.log.find("ncclGroupStart") + 1), r.log.find(sendLine(0)))
      << r.log;

  // Strict: the group's end fails with the reason, and NCCL sees none of
  // its sends and receives.
  r = runCalls(dir, groups + " COLLC_NCCL_STRICT=1", allToAll);
  EXPECT_NE(r.out.find("group-end: " + std::to_string(int(ncclSystemError)) +
                       "\nlast error: collc-nccl: cannot set up alltoall (plan "
                       "pairwise_alltoall) on Collc: "),
            std::string::npos)
      << r.out;
  EXPECT_EQ(count(r.log, "ncclSend "), 0u) << r.log;
  EXPECT_EQ(count(r.log, "ncclRecv "), 0u) << r.log;

  // A lone send to rank 1 is this rank's part of a gather to rank 1.
  r = runCalls(dir, groups + " COLLC_NCCL_STRICT=1", "group-start send 16 1 group-end");
  EXPECT_NE(r.out.find("cannot set up gather (plan direct_gather) on Collc"), std::string::npos)
      << r.out;
  EXPECT_EQ(count(r.log, "ncclSend "), 0u) << r.log;

  // A shape of no pattern goes to NCCL, strict or not: a send to itself
  // without a receive.
  r = runCalls(dir, groups + " COLLC_NCCL_STRICT=1 COLLC_NCCL_DEBUG=1",
               "group-start send 16 0 send 16 1 group-end");
  EXPECT_NE(r.out.find("group-end: 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("a send/recv group goes to NCCL: the group sends to its own rank without "
                       "receiving from it"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(count(r.log, sendLine(0)), 1u) << r.log;
  EXPECT_EQ(count(r.log, sendLine(1)), 1u) << r.log;
  // Patterns without a row are not held: scatter here.
  r = runCalls(dir, select + " COLLC_NCCL_GROUPS=scatter COLLC_NCCL_STRICT=1",
               "group-start recv 16 1 group-end");
  EXPECT_NE(r.out.find("group-end: 0"), std::string::npos) << r.out;
  EXPECT_LT(r.log.find(recvLine(1)), r.log.find("ncclGroupEnd")) << r.log;

  // Sends outside a group are never held.
  r = runCalls(dir, groups + " COLLC_NCCL_STRICT=1", "send 16 1 recv 16 1");
  EXPECT_EQ(count(r.log, sendLine(1)), 1u) << r.log;
  EXPECT_EQ(count(r.log, "ncclGroupStart"), 0u) << r.log;

  // A list that names something else: said, and groups go to NCCL.
  r = runCalls(dir, select + " COLLC_NCCL_GROUPS=alltoall,bogus COLLC_NCCL_STRICT=1", allToAll);
  EXPECT_NE(r.out.find("collc-nccl: COLLC_NCCL_GROUPS=alltoall,bogus: 'bogus' is not a group "
                       "pattern (alltoall, gather, scatter or all); send/recv groups go to NCCL"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(count(r.log, "ncclSend "), 2u) << r.log;
  ASSERT_EQ(system(("rm -rf " + dir).c_str()), 0);
#endif
}

TEST(NcclShim, OneRankPlansOfTheGpuRunLoad) {
  // The selection that run-torch-one-rank.sh gives the library on a GPU:
  // every row's plan loads and fits its collective on one rank, so that
  // here, without a GPU, each call gets as far as the set-up.
#if !defined(COLL_SHIM_RUNS_PLANS) || !defined(COLL_COLLC)
  GTEST_SKIP() << "the library was built without the CUDA kernels, or collc was not built";
#else
  const std::string dir = ::testing::TempDir() + "ncclshimone" + std::to_string(getpid());
  ASSERT_EQ(system(("rm -rf " + dir).c_str()), 0);
  ASSERT_EQ(system(("bash " COLL_STDLIB_DIR "/../tests/nccl-shim/make-one-rank-plans.sh " +
                    std::string(COLL_COLLC) + " " + dir + "/plans >/dev/null")
                       .c_str()),
            0);
  CallsRun r = runCalls(dir,
                        "FAKE_NCCL_NRANKS=1 COLLC_NCCL_STRICT=1 COLLC_NCCL_SELECT=" + dir +
                            "/plans/collc.select",
                        "allreduce 1024 allgather 16 reducescatter 16 broadcast 64 0 reduce 64 0 "
                        "gather 64 0 scatter 64 0 alltoall 16");
  for (const char *want :
       {"allreduce (plan one_rank_allreduce)", "allgather (plan direct_allgather)",
        "reducescatter (plan direct_reducescatter)", "broadcast (plan binomial_broadcast)",
        "reduce (plan binomial_reduce)", "gather (plan direct_gather)",
        "scatter (plan direct_scatter)", "alltoall (plan alltoall_allpairs)"})
    EXPECT_NE(
        r.out.find("last error: collc-nccl: cannot set up " + std::string(want) + " on Collc: "),
        std::string::npos)
        << want << "\n"
        << r.out;
  EXPECT_EQ(count(r.log, "ncclAllReduce "), 0u) << r.log;
  ASSERT_EQ(system(("rm -rf " + dir).c_str()), 0);
#endif
}

} // namespace
