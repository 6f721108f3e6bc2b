//===- PeerCommon.cpp - What every peer benchmark shares ------------------===//

#include "PeerCommon.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace collpeer {

const char *collName(CollKind coll) {
  switch (coll) {
  case CollKind::AllReduce:
    return "allreduce";
  case CollKind::AllGather:
    return "allgather";
  case CollKind::ReduceScatter:
    return "reducescatter";
  case CollKind::AllToAll:
    return "alltoall";
  case CollKind::Broadcast:
    return "broadcast";
  case CollKind::Reduce:
    return "reduce";
  }
  return "?";
}

const char *dtypeName(DTypeKind dtype) {
  switch (dtype) {
  case DTypeKind::F32:
    return "f32";
  case DTypeKind::F64:
    return "f64";
  case DTypeKind::I32:
    return "i32";
  }
  return "?";
}

size_t dtypeSize(DTypeKind dtype) {
  return dtype == DTypeKind::F64 ? 8 : 4;
}

const char *opName(OpKind op) {
  switch (op) {
  case OpKind::Sum:
    return "sum";
  case OpKind::Prod:
    return "prod";
  case OpKind::Min:
    return "min";
  case OpKind::Max:
    return "max";
  }
  return "?";
}

const char *placementName(PlacementKind placement) {
  return placement == PlacementKind::InPlace ? "in-place" : "out-of-place";
}

bool isReduction(CollKind coll) {
  return coll == CollKind::AllReduce || coll == CollKind::ReduceScatter || coll == CollKind::Reduce;
}

double busFactor(CollKind coll, int nranks) {
  double n = nranks;
  switch (coll) {
  case CollKind::AllReduce:
    return 2 * (n - 1) / n;
  case CollKind::AllGather:
  case CollKind::ReduceScatter:
  case CollKind::AllToAll:
    return (n - 1) / n;
  case CollKind::Broadcast:
  case CollKind::Reduce:
    return 1;
  }
  return 1;
}

//===----------------------------------------------------------------------===//
// Command line
//===----------------------------------------------------------------------===//

namespace {

const CollKind kAllColls[] = {CollKind::AllReduce, CollKind::AllGather, CollKind::ReduceScatter,
                              CollKind::AllToAll,  CollKind::Broadcast, CollKind::Reduce};

bool parseColl(const std::string &name, CollKind &coll) {
  for (CollKind c : kAllColls)
    if (name == collName(c)) {
      coll = c;
      return true;
    }
  if (name == "bcast")
    coll = CollKind::Broadcast;
  else if (name == "reduce_scatter")
    coll = CollKind::ReduceScatter;
  else
    return false;
  return true;
}

bool parseInt(const std::string &text, long min, long max, long &value) {
  char *end = nullptr;
  errno = 0;
  long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || v < min || v > max)
    return false;
  value = v;
  return true;
}

void printUsage(const PeerSpec &spec) {
  std::printf("usage: %s [options]\n\n", spec.program);
  std::printf("  --coll NAME[,NAME...]  collectives (all:");
  for (CollKind c : spec.colls)
    std::printf(" %s", collName(c));
  std::printf(")\n");
  if (!spec.algorithms.empty()) {
    std::printf("  --algorithm NAME       allreduce algorithm:");
    for (const std::string &a : spec.algorithms)
      std::printf(" %s", a.c_str());
    std::printf(" (default %s)\n", spec.algorithms.front().c_str());
  }
  if (spec.forksRanks) {
    std::printf("  --nranks N             ranks, each a forked process (default 2)\n");
    std::printf("  --bind, --no-bind      pin rank r to CPU r mod the CPU count, or not (%s)\n",
                spec.bindByDefault ? "pinned" : "not pinned");
    std::printf("  --timeout S            kill every rank after S seconds (default 120)\n");
  }
  std::printf("  -b, -e BYTES           smallest and largest size (K, M, G suffixes; 32M)\n"
              "  -f FACTOR              size step factor (2)\n"
              "  -n N, -w N             timed and warm-up iterations (20, 5)\n"
              "  -c 0|1                 check the results (1)\n"
              "  -d f32|f64|i32         data type (f32)\n"
              "  -o sum|prod|min|max    reduction operator (sum)\n"
              "  -r ROOT                root of broadcast and reduce (0)\n"
              "  --csv                  print CSV rows instead of a table\n");
  if (spec.notes[0] != '\0')
    std::printf("\n%s\n", spec.notes);
}

} // namespace

bool parseBytes(const std::string &text, uint64_t &bytes) {
  if (text.empty())
    return false;
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9')
    ++digits;
  if (digits == 0 || digits > 15)
    return false;
  uint64_t value = std::strtoull(text.substr(0, digits).c_str(), nullptr, 10);
  std::string suffix = text.substr(digits);
  int shift = 0;
  if (suffix == "K" || suffix == "k")
    shift = 10;
  else if (suffix == "M" || suffix == "m")
    shift = 20;
  else if (suffix == "G" || suffix == "g")
    shift = 30;
  else if (!suffix.empty() && suffix != "B" && suffix != "b")
    return false;
  bytes = value << shift;
  return true;
}

std::string parseOptions(int argc, char **argv, const PeerSpec &spec, Options &opts,
                         bool &helpShown) {
  helpShown = false;
  if (!spec.algorithms.empty())
    opts.algorithm = spec.algorithms.front();
  opts.bind = spec.bindByDefault;
  bool collsGiven = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](std::string &out) {
      if (i + 1 >= argc)
        return false;
      out = argv[++i];
      return true;
    };
    std::string v;
    long n = 0;
    if (arg == "-h" || arg == "--help") {
      printUsage(spec);
      helpShown = true;
      return "";
    }
    if (arg == "--csv") {
      opts.csv = true;
      continue;
    }
    if ((arg == "--bind" || arg == "--no-bind") && spec.forksRanks) {
      opts.bind = arg == "--bind";
      continue;
    }
    if (!value(v))
      return "unknown option or missing value: " + arg;
    if (arg == "--coll") {
      opts.colls.clear();
      collsGiven = true;
      if (v == "all") {
        opts.colls = spec.colls;
        continue;
      }
      size_t start = 0;
      while (start <= v.size()) {
        size_t comma = v.find(',', start);
        std::string name = v.substr(start, comma == std::string::npos ? comma : comma - start);
        CollKind coll;
        if (!parseColl(name, coll))
          return "unknown collective '" + name + "'";
        if (std::find(spec.colls.begin(), spec.colls.end(), coll) == spec.colls.end())
          return std::string(spec.program) + " does not implement " + collName(coll);
        opts.colls.push_back(coll);
        if (comma == std::string::npos)
          break;
        start = comma + 1;
      }
    } else if (arg == "--algorithm" && !spec.algorithms.empty()) {
      if (std::find(spec.algorithms.begin(), spec.algorithms.end(), v) == spec.algorithms.end())
        return "unknown algorithm '" + v + "'";
      opts.algorithm = v;
    } else if (arg == "--nranks" && spec.forksRanks) {
      if (!parseInt(v, 1, 256, n))
        return "--nranks takes 1 to 256";
      opts.nranks = static_cast<int>(n);
    } else if (arg == "--timeout" && spec.forksRanks) {
      if (!parseInt(v, 1, 86400, n))
        return "--timeout takes 1 to 86400 seconds";
      opts.timeoutSeconds = static_cast<int>(n);
    } else if (arg == "-b" || arg == "--minbytes") {
      if (!parseBytes(v, opts.minBytes))
        return "bad size '" + v + "'";
    } else if (arg == "-e" || arg == "--maxbytes") {
      if (!parseBytes(v, opts.maxBytes))
        return "bad size '" + v + "'";
    } else if (arg == "-f" || arg == "--stepfactor") {
      if (!parseInt(v, 2, 1024, n))
        return "-f takes an integer factor from 2 to 1024";
      opts.stepFactor = static_cast<uint64_t>(n);
    } else if (arg == "-n" || arg == "--iters") {
      if (!parseInt(v, 1, 100000000, n))
        return "-n takes a positive count";
      opts.iters = static_cast<int>(n);
    } else if (arg == "-w" || arg == "--warmup_iters") {
      if (!parseInt(v, 0, 100000000, n))
        return "-w takes a count";
      opts.warmup = static_cast<int>(n);
    } else if (arg == "-c" || arg == "--check") {
      if (!parseInt(v, 0, 1, n))
        return "-c takes 0 or 1";
      opts.check = n != 0;
    } else if (arg == "-d" || arg == "--datatype") {
      if (v == "f32" || v == "float")
        opts.dtype = DTypeKind::F32;
      else if (v == "f64" || v == "double")
        opts.dtype = DTypeKind::F64;
      else if (v == "i32" || v == "int32" || v == "int")
        opts.dtype = DTypeKind::I32;
      else
        return "unknown data type '" + v + "' (f32, f64, i32)";
    } else if (arg == "-o" || arg == "--op") {
      if (v == "sum")
        opts.op = OpKind::Sum;
      else if (v == "prod")
        opts.op = OpKind::Prod;
      else if (v == "min")
        opts.op = OpKind::Min;
      else if (v == "max")
        opts.op = OpKind::Max;
      else
        return "unknown operator '" + v + "' (sum, prod, min, max)";
    } else if (arg == "-r" || arg == "--root") {
      if (!parseInt(v, 0, 1 << 20, n))
        return "-r takes a rank";
      opts.root = static_cast<int>(n);
    } else {
      return "unknown option: " + arg;
    }
  }
  if (!collsGiven)
    opts.colls = {spec.colls.front()};
  if (opts.minBytes == 0 || opts.maxBytes < opts.minBytes)
    return "sizes must satisfy 0 < -b <= -e";
  if (opts.maxBytes > (64ull << 30))
    return "-e is capped at 64G";
  return "";
}

//===----------------------------------------------------------------------===//
// Sizes
//===----------------------------------------------------------------------===//

SizeInfo sizeFor(CollKind coll, uint64_t bytes, DTypeKind dtype, int nranks) {
  SizeInfo s;
  uint64_t elems = bytes / dtypeSize(dtype);
  uint64_t n = static_cast<uint64_t>(nranks);
  switch (coll) {
  case CollKind::AllReduce:
  case CollKind::Broadcast:
  case CollKind::Reduce:
    s.count = s.sendCount = s.recvCount = s.blockCount = elems;
    break;
  case CollKind::AllGather:
    s.blockCount = elems / n;
    s.count = s.recvCount = s.blockCount * n;
    s.sendCount = s.blockCount;
    break;
  case CollKind::ReduceScatter:
    s.blockCount = elems / n;
    s.count = s.sendCount = s.blockCount * n;
    s.recvCount = s.blockCount;
    break;
  case CollKind::AllToAll:
    s.blockCount = elems / n;
    s.count = s.sendCount = s.recvCount = s.blockCount * n;
    break;
  }
  if (s.blockCount == 0)
    s = SizeInfo();
  s.sizeBytes = s.count * dtypeSize(dtype);
  return s;
}

std::vector<uint64_t> sizeList(const Options &opts) {
  std::vector<uint64_t> sizes;
  for (uint64_t b = opts.minBytes; b <= opts.maxBytes; b *= opts.stepFactor) {
    sizes.push_back(b);
    if (b > opts.maxBytes / opts.stepFactor)
      break;
  }
  return sizes;
}

uint64_t maxBufferBytes(const Options &opts, int nranks) {
  uint64_t most = 0;
  for (CollKind coll : opts.colls)
    for (uint64_t b : sizeList(opts)) {
      SizeInfo s = sizeFor(coll, b, opts.dtype, nranks);
      most = std::max({most, s.sendCount, s.recvCount});
    }
  return most * dtypeSize(opts.dtype);
}

//===----------------------------------------------------------------------===//
// Test data
//===----------------------------------------------------------------------===//

namespace {

/// Rank \p rank's value at global index \p i: small integers, so that a sum
/// over up to thousands of ranks is exact in f32, and for products only 1
/// and 2, so that a product over 24 ranks is exact too.
int64_t inputValue(int rank, uint64_t i, OpKind op) {
  uint64_t r = static_cast<uint64_t>(rank);
  if (op == OpKind::Prod)
    return (i * 7 + r * 5) % 3 == 0 ? 2 : 1;
  return static_cast<int64_t>((i * 13 + r * 29) % 23) - 11;
}

int64_t combine(OpKind op, int64_t a, int64_t b) {
  switch (op) {
  case OpKind::Sum:
    return a + b;
  case OpKind::Prod:
    return a * b;
  case OpKind::Min:
    return std::min(a, b);
  case OpKind::Max:
    return std::max(a, b);
  }
  return a;
}

int64_t reduced(int nranks, uint64_t i, OpKind op) {
  int64_t acc = inputValue(0, i, op);
  for (int r = 1; r < nranks; ++r)
    acc = combine(op, acc, inputValue(r, i, op));
  return acc;
}

template <typename F> void withType(DTypeKind dtype, F &&f) {
  switch (dtype) {
  case DTypeKind::F32:
    f(float{});
    break;
  case DTypeKind::F64:
    f(double{});
    break;
  case DTypeKind::I32:
    f(int32_t{});
    break;
  }
}

} // namespace

void fillInput(const Options &opts, CollKind coll, const SizeInfo &size, int rank, int nranks,
               void *send) {
  (void)nranks;
  OpKind op = isReduction(coll) ? opts.op : OpKind::Sum;
  // The global index of each element: allgather's block lands at rank *
  // block in every output, so its values are taken from there.
  uint64_t base = coll == CollKind::AllGather ? static_cast<uint64_t>(rank) * size.blockCount : 0;
  withType(opts.dtype, [&](auto zero) {
    using T = decltype(zero);
    T *p = static_cast<T *>(send);
    for (uint64_t i = 0; i < size.sendCount; ++i)
      p[i] = static_cast<T>(inputValue(rank, base + i, op));
  });
}

void poison(DTypeKind dtype, void *buf, uint64_t count) {
  withType(dtype, [&](auto zero) {
    using T = decltype(zero);
    std::fill_n(static_cast<T *>(buf), count, static_cast<T>(-77777));
  });
}

uint64_t countWrong(const Options &opts, CollKind coll, const SizeInfo &size, int rank, int nranks,
                    const void *recv) {
  uint64_t wrong = 0;
  uint64_t block = size.blockCount;
  uint64_t r = static_cast<uint64_t>(rank);
  withType(opts.dtype, [&](auto zero) {
    using T = decltype(zero);
    const T *p = static_cast<const T *>(recv);
    auto expect = [&](uint64_t i, int64_t value) {
      if (!(p[i] == static_cast<T>(value)))
        ++wrong;
    };
    switch (coll) {
    case CollKind::AllReduce:
      for (uint64_t i = 0; i < size.recvCount; ++i)
        expect(i, reduced(nranks, i, opts.op));
      break;
    case CollKind::Reduce:
      if (rank == opts.root)
        for (uint64_t i = 0; i < size.recvCount; ++i)
          expect(i, reduced(nranks, i, opts.op));
      break;
    case CollKind::Broadcast:
      for (uint64_t i = 0; i < size.recvCount; ++i)
        expect(i, inputValue(opts.root, i, OpKind::Sum));
      break;
    case CollKind::AllGather:
      for (uint64_t i = 0; i < size.recvCount; ++i)
        expect(i, inputValue(static_cast<int>(i / block), i, OpKind::Sum));
      break;
    case CollKind::ReduceScatter:
      for (uint64_t i = 0; i < size.recvCount; ++i)
        expect(i, reduced(nranks, r * block + i, opts.op));
      break;
    case CollKind::AllToAll:
      // Block s of the output is block `rank` of rank s's input.
      for (uint64_t i = 0; i < size.recvCount; ++i)
        expect(i, inputValue(static_cast<int>(i / block), r * block + i % block, OpKind::Sum));
      break;
    }
  });
  return wrong;
}

//===----------------------------------------------------------------------===//
// Output
//===----------------------------------------------------------------------===//

void Reporter::begin(CollKind coll, const std::string &algorithm) {
  if (opts.csv) {
    if (!headerDone)
      std::printf("collective,algorithm,nranks,ranks_as,size_bytes,count,dtype,op,placement,"
                  "time_us,algbw_GBps,busbw_GBps,wrong\n");
    headerDone = true;
    std::fflush(stdout);
    return;
  }
  std::printf("# %s  algorithm: %s  nranks: %d (processes)  dtype: %s  op: %s  iters: %d  "
              "warmup: %d  check: %d\n#\n",
              collName(coll), algorithm.c_str(), nranks, dtypeName(opts.dtype),
              isReduction(coll) ? opName(opts.op) : "none", opts.iters, opts.warmup,
              opts.check ? 1 : 0);
  std::printf("# %10s  %12s  %6s  %6s  %6s  %31s  %31s\n", "", "", "", "", "",
              "out-of-place          ", "in-place          ");
  std::printf("# %10s  %12s  %6s  %6s  %6s  %9s %7s %7s %6s  %9s %7s %7s %6s\n", "size", "count",
              "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
              "#wrong");
  std::printf("# %10s  %12s  %6s  %6s  %6s  %9s %7s %7s %6s  %9s %7s %7s %6s\n", "(B)",
              "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
              "");
  std::fflush(stdout);
}

void Reporter::size(CollKind coll, const std::string &algorithm, const SizeInfo &size,
                    const std::vector<Measurement> &results) {
  const char *op = isReduction(coll) ? opName(opts.op) : "none";
  auto bandwidths = [&](const Measurement &m, double &algbw, double &busbw) {
    algbw = m.timeUs > 0 ? static_cast<double>(size.sizeBytes) / m.timeUs / 1e3 : 0;
    busbw = algbw * busFactor(coll, nranks);
  };
  for (const Measurement &m : results) {
    double algbw, busbw;
    bandwidths(m, algbw, busbw);
    totalWrong += m.wrong;
    busbwSum += busbw;
    ++busbwRows;
    if (opts.csv)
      std::printf(
          "%s,%s,%d,processes,%" PRIu64 ",%" PRIu64 ",%s,%s,%s,%.3f,%.4f,%.4f,%" PRIu64 "\n",
          collName(coll), algorithm.c_str(), nranks, size.sizeBytes, size.count,
          dtypeName(opts.dtype), op, placementName(m.placement), m.timeUs, algbw, busbw, m.wrong);
  }
  if (!opts.csv) {
    int root = coll == CollKind::Broadcast || coll == CollKind::Reduce ? opts.root : -1;
    std::printf("  %10" PRIu64 "  %12" PRIu64 "  %6s  %6s  %6d", size.sizeBytes, size.count,
                dtypeName(opts.dtype), op, root);
    for (PlacementKind p : {PlacementKind::OutOfPlace, PlacementKind::InPlace}) {
      auto it = std::find_if(results.begin(), results.end(),
                             [&](const Measurement &m) { return m.placement == p; });
      if (it == results.end()) {
        std::printf("  %9s %7s %7s %6s", "-", "-", "-", "-");
        continue;
      }
      double algbw, busbw;
      bandwidths(*it, algbw, busbw);
      std::printf("  %9.2f %7.2f %7.2f %6" PRIu64, it->timeUs, algbw, busbw, it->wrong);
    }
    std::printf("\n");
  }
  std::fflush(stdout);
}

uint64_t Reporter::end() {
  if (!opts.csv) {
    std::printf("# Out of bounds values : %" PRIu64 " %s\n", totalWrong,
                totalWrong == 0 ? "OK" : "FAILED");
    std::printf("# Avg bus bandwidth    : %g\n#\n", busbwRows ? busbwSum / busbwRows : 0.0);
    busbwSum = 0;
    busbwRows = 0;
  }
  std::fflush(stdout);
  return totalWrong;
}

//===----------------------------------------------------------------------===//
// Ranks as forked processes
//===----------------------------------------------------------------------===//

int runForked(const char *program, int nranks, bool bind, int timeoutSeconds,
              const std::function<int(int rank)> &body) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids(static_cast<size_t>(nranks), -1);
  pid_t parent = getpid();
  for (int rank = 0; rank < nranks; ++rank) {
    pid_t pid = fork();
    if (pid < 0) {
      std::fprintf(stderr, "%s: fork: %s\n", program, std::strerror(errno));
      for (int r = 0; r < rank; ++r)
        kill(pids[static_cast<size_t>(r)], SIGKILL);
      for (int r = 0; r < rank; ++r)
        waitpid(pids[static_cast<size_t>(r)], nullptr, 0);
      return 2;
    }
    if (pid == 0) {
      // A rank never outlives its parent (a killed benchmark leaves nothing).
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent)
        _exit(2);
      if (bind) {
        cpu_set_t set;
        CPU_ZERO(&set);
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        CPU_SET(static_cast<int>(rank % (cpus > 0 ? cpus : 1)), &set);
        if (sched_setaffinity(0, sizeof(set), &set) != 0)
          std::fprintf(stderr, "%s: rank %d: sched_setaffinity: %s\n", program, rank,
                       std::strerror(errno));
      }
      int rc = 2;
      try {
        rc = body(rank);
      } catch (const std::exception &e) {
        std::fprintf(stderr, "%s: rank %d: error: %s\n", program, rank, e.what());
        rc = 2;
      }
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(rc);
    }
    pids[static_cast<size_t>(rank)] = pid;
  }

  // Reap the ranks; the first that fails (or the deadline) ends the others,
  // which would otherwise wait for it forever.
  int worst = 0;
  int alive = nranks;
  bool killed = false;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeoutSeconds);
  auto killRest = [&]() {
    if (killed)
      return;
    killed = true;
    for (pid_t pid : pids)
      if (pid > 0)
        kill(pid, SIGKILL);
  };
  while (alive > 0) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid < 0) {
      if (errno == EINTR)
        continue;
      std::fprintf(stderr, "%s: waitpid: %s\n", program, std::strerror(errno));
      killRest();
      return 2;
    }
    if (pid == 0) {
      if (std::chrono::steady_clock::now() > deadline && !killed) {
        std::fprintf(stderr, "%s: timed out after %d s; killing every rank\n", program,
                     timeoutSeconds);
        killRest();
        worst = 2;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    auto it = std::find(pids.begin(), pids.end(), pid);
    if (it == pids.end())
      continue;
    int rank = static_cast<int>(it - pids.begin());
    *it = -1;
    --alive;
    int rc = 0;
    if (WIFEXITED(status)) {
      rc = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
      if (!killed)
        std::fprintf(stderr, "%s: rank %d killed by signal %d (%s)\n", program, rank,
                     WTERMSIG(status), strsignal(WTERMSIG(status)));
      rc = 2;
    }
    if (rc >= 2 && !killed) {
      std::fprintf(stderr, "%s: rank %d failed; stopping the other ranks\n", program, rank);
      killRest();
    }
    worst = std::max(worst, std::min(rc, 2));
  }
  return worst;
}

double nowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

} // namespace collpeer
