//===- coll-perf.cpp - nccl-tests for plans -------------------------------===//
//
// coll-perf PROGRAM.coll|PLAN.bin [--nranks N] [--ranks-as threads|processes]
// coll-perf --coll allreduce [--nranks N] ...
//           [-b min] [-e max] [-f factor] [-n iters] [-w warmup] [-c 0|1]
//           [-d f32] [-o sum] [-r root] [--placement out-of-place|in-place|both]
//           [--slice elements] [--protocol choice] [--no-direct]
//           [--cross-memory] [--streaming-stores auto|off|bytes] [-R 0|1]
//           [--timeout seconds] [--csv]
//           [-D name=value]
//           [--collc path] [--stdlib dir]
//
// Sweeps a plan over message sizes as nccl-tests does: at each size it
// checks a first run against the reference on test data distinct per
// (rank, element), times -n runs after -w warm-up runs, and prints the
// time, algorithm and bus bandwidth and the wrong elements, out of place
// and in place, as a table or as CSV rows (the format of bench/peers).
// A .coll program is compiled first by running collc; --coll names a
// collective and takes the standard library's default program for it.
// Exits 1 when an element is wrong, 2 on a bad flag or an error.
//
//===----------------------------------------------------------------------===//

#include "OutOfMemory.h"
#include "PerfDriver.h"
#include "coll/Runtime/Collective.h"
#include "coll/Runtime/PreparedCall.h"
#include "coll/Runtime/Selection.h"
#include "coll/Runtime/Topology.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using namespace coll;
using namespace coll::perf;

namespace {

constexpr uint64_t anySize = SelectionRow::anyBytes;

/// The selection table --coll reads: --select's, else the standard
/// library's (stdlib/default.select, coll/Runtime/Selection.h). For a sweep
/// on N ranks the rows of the collective that admit N are taken in order,
/// each for the sizes up to its max-bytes that an earlier one does not
/// take; the last row for N takes the rest. A row before that whose program
/// does not compile for N (its `require`) is skipped.
Result<SelectionTable> selectionTable(const std::string &select, const std::string &stdlib) {
  return SelectionTable::load(select.empty() ? stdlib + "/default.select" : select);
}

/// The collectives of \p table, separated by spaces.
std::string knownCollectives(const SelectionTable &table) {
  std::string known;
  for (const std::string &c : table.collectives())
    known += (known.empty() ? "" : " ") + c;
  return known;
}

/// Ranks for --ranks-as processes at most: one process each.
constexpr uint32_t maxProcesses = 256;

void usage(FILE *out) {
  std::fprintf(out, "usage: coll-perf PROGRAM.coll|PLAN.bin [options]\n"
                    "       coll-perf --coll NAME [options]\n\n"
                    "  --coll NAME            the standard library's program for NAME:");
  Result<SelectionTable> table = selectionTable("", COLL_STDLIB_DIR);
  std::fprintf(out, " %s",
               table ? knownCollectives(*table).c_str() : "(see stdlib/default.select)");
  std::fprintf(
      out,
      "\n"
      "  --nranks N             ranks (a .bin plan: its own; --coll: 2)\n"
      "  --ranks-as threads|processes   LocalWorld threads, or one process per rank (threads)\n"
      "  --bootstrap tcp://host:port --rank r [--job name]\n"
      "                         one rank of a job across hosts, met in a store that rank 0\n"
      "                         serves there; rank 0 prints (the slowest rank's times)\n"
      "  --bind core|none       processes: each rank on a CPU of its own when there are\n"
      "                         enough, as mpirun binds (core)\n"
      "  -b, -e BYTES           smallest and largest size (K, M, G suffixes; 32M)\n"
      "  -f FACTOR              size step factor (2)\n"
      "  -n N, -w N             timed and warm-up iterations (20, 5)\n"
      "  -c 0|1                 check the first run of each size (1)\n"
      "  -d TYPE                data type: i8 u8 i32 u32 i64 u64 f16 bf16 f32 f64 (f32)\n"
      "  -o OP                  reduction operator: sum prod max min avg (sum)\n"
      "  -r ROOT                root of a rooted collective (--coll: -D root=ROOT)\n"
      "  --placement out-of-place|in-place|both   (both, where there is an in-place form)\n"
      "  --slice ELEMENTS       elements of a chunk per pass of the program\n"
      "  --protocol CHOICE      auto (the plan's), Simple, LL, LL128, or size thresholds\n"
      "                         such as LL:4K,LL128:256K (calls up to 4 KiB per rank run LL)\n"
      "  --no-direct            every message through the FIFO slots (no direct sends\n"
      "                         between threads, no reads of another rank's process)\n"
      "                         (by default a send whose source stays put is read in place)\n"
      "  --cross-memory         processes: also read buffers the runtime did not allocate\n"
      "                         in the sender's process (process_vm_readv)\n"
      "  --streaming-stores auto|off|BYTES\n"
      "                         copies into the buffers bypass the caches in calls whose\n"
      "                         buffers (all ranks) take at least BYTES (auto: the size\n"
      "                         of the last-level cache)\n"
      "  -R 0|1                 processes: buffers from ProcessGroup::allocate(), which\n"
      "                         peers map and read in place (registered) (0)\n"
      "  --timeout SECONDS      a run that stops moving fails after this long\n"
      "  --csv                  CSV rows instead of a table\n"
      "  -D NAME=VALUE          a parameter of the program, for collc\n"
      "  --collc PATH           the compiler (default: beside coll-perf in the build tree)\n"
      "  --stdlib DIR           the standard library (default: the source tree's)\n"
      "  --select FILE          --coll's selection table (default: DIR/default.select)\n"
      "  --predict TOPOLOGY     beside each size, its predicted time on TOPOLOGY (collc\n"
      "                         --emit=predict's model) and measured / predicted\n");
}

int fail(const std::string &msg) {
  std::fprintf(stderr, "coll-perf: error: %s\n", msg.c_str());
  return 2;
}

struct Options {
  PerfOptions perf;
  std::string input;      ///< A .coll program or a plan.
  std::string collective; ///< --coll.
  uint32_t nranks = 0;    ///< 0: not given.
  int64_t root = -1;      ///< -r; -1: not given.
  std::vector<std::string> defines;
  std::string collc, stdlib = COLL_STDLIB_DIR, select;
  tools::Bootstrap boot; ///< --bootstrap, --rank, --job.
  Topology topology;     ///< --predict.
};

bool endsWith(const std::string &s, const char *suffix) {
  size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

/// Parses the command line; returns -1 to go on, else the exit status.
int parseArgs(int argc, char **argv, Options &o) {
  using tools::parseSize;
  using tools::parseUnsigned;
  PerfOptions &p = o.perf;
  auto define = [&](const std::string &d) {
    if (d.find('=') == std::string::npos || d[0] == '=')
      return false;
    o.defines.push_back(d);
    return true;
  };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i], v;
    auto value = [&] {
      if (i + 1 >= argc)
        return false;
      v = argv[++i];
      return true;
    };
    uint64_t n = 0;
    if (a == "-h" || a == "--help") {
      usage(stdout);
      return 0;
    }
    if (a == "--csv") {
      p.csv = true;
      continue;
    }
    if (a == "--no-direct") {
      p.run.directSends = false;
      continue;
    }
    if (a == "--cross-memory") {
      p.run.crossMemoryReads = true;
      continue;
    }
    if (a.size() > 2 && a.compare(0, 2, "-D") == 0) { // -Dname=value
      if (!define(a.substr(2)))
        return fail("-D takes name=value");
      continue;
    }
    if (a.empty() || a[0] != '-') {
      if (!o.input.empty())
        return fail("one program or plan at a time ('" + o.input + "' and '" + a + "')");
      o.input = a;
      continue;
    }
    static const char *const valued[] = {"--coll",
                                         "--nranks",
                                         "--ranks-as",
                                         "--bind",
                                         "-b",
                                         "--minbytes",
                                         "-e",
                                         "--maxbytes",
                                         "-f",
                                         "--stepfactor",
                                         "-n",
                                         "--iters",
                                         "-w",
                                         "--warmup_iters",
                                         "-c",
                                         "--check",
                                         "-R",
                                         "--local_register",
                                         "-d",
                                         "--datatype",
                                         "-o",
                                         "--op",
                                         "-r",
                                         "--root",
                                         "--placement",
                                         "--slice",
                                         "--protocol",
                                         "--timeout",
                                         "-D",
                                         "--collc",
                                         "--stdlib",
                                         "--select",
                                         "--bootstrap",
                                         "--rank",
                                         "--job",
                                         "--predict",
                                         "--streaming-stores"};
    if (std::find(std::begin(valued), std::end(valued), a) == std::end(valued))
      return fail("unknown option: " + a);
    if (!value())
      return fail(a + " needs a value");
    if (a == "--streaming-stores") {
      if (!tools::parseStreamingStores(v, p.run.streamingStoresFrom))
        return fail("--streaming-stores takes auto, off or a size");
    } else if (a == "--bootstrap") {
      if (!o.boot.parse(v))
        return fail("--bootstrap takes tcp://host:port");
    } else if (a == "--rank") {
      if (!parseUnsigned(v, n) || n >= 65536)
        return fail("--rank takes a rank number");
      o.boot.rank = int(n);
    } else if (a == "--job") {
      o.boot.job = v;
    } else if (a == "--coll") {
      o.collective = v;
    } else if (a == "--nranks") {
      if (!parseUnsigned(v, n) || n == 0 || n > 65536)
        return fail("--nranks takes 1 to 65536");
      o.nranks = uint32_t(n);
    } else if (a == "--ranks-as") {
      if (v != "threads" && v != "processes")
        return fail("--ranks-as takes 'threads' or 'processes'");
      p.processes = v == "processes";
    } else if (a == "--bind") {
      if (v != "core" && v != "none")
        return fail("--bind takes 'core' or 'none'");
      p.bind = v == "core";
    } else if (a == "-b" || a == "--minbytes") {
      if (!parseSize(v, p.minBytes))
        return fail("-b takes a byte count such as 4096, 64K, 64M or 1G");
    } else if (a == "-e" || a == "--maxbytes") {
      if (!parseSize(v, p.maxBytes))
        return fail("-e takes a byte count such as 4096, 64K, 64M or 1G");
    } else if (a == "-f" || a == "--stepfactor") {
      if (!parseUnsigned(v, p.stepFactor) || p.stepFactor < 2 || p.stepFactor > 1024)
        return fail("-f takes an integer factor from 2 to 1024");
    } else if (a == "-n" || a == "--iters") {
      if (!parseUnsigned(v, p.iters) || p.iters == 0)
        return fail("-n takes a positive number of iterations");
    } else if (a == "-w" || a == "--warmup_iters") {
      if (!parseUnsigned(v, p.warmup))
        return fail("-w takes a number of iterations");
    } else if (a == "-c" || a == "--check") {
      if (v != "0" && v != "1")
        return fail("-c takes 0 or 1");
      p.check = v == "1";
    } else if (a == "-R" || a == "--local_register") {
      if (v != "0" && v != "1")
        return fail("-R takes 0 or 1");
      p.registered = v == "1";
    } else if (a == "-d" || a == "--datatype") {
      if (!parseDataType(v.c_str(), p.type))
        return fail("unknown data type '" + v + "' (i8 u8 i32 u32 i64 u64 f16 bf16 f32 f64)");
    } else if (a == "-o" || a == "--op") {
      if (!parseRedOp(v.c_str(), p.op))
        return fail("unknown operator '" + v + "' (sum prod max min avg)");
    } else if (a == "-r" || a == "--root") {
      if (!parseUnsigned(v, n) || n >= 65536)
        return fail("-r takes a rank");
      o.root = int64_t(n);
    } else if (a == "--placement") {
      if (v == "out-of-place")
        p.placement = PlacementKind::OutOfPlace;
      else if (v == "in-place")
        p.placement = PlacementKind::InPlace;
      else if (v == "both")
        p.placement = PlacementKind::Both;
      else
        return fail("--placement takes 'out-of-place', 'in-place' or 'both'");
    } else if (a == "--protocol") {
      if (Status s = parseProtocolChoice(v, p.run.protocol); !s)
        return fail(s.message());
    } else if (a == "--slice") {
      if (!parseUnsigned(v, p.run.sliceElements) || p.run.sliceElements == 0)
        return fail("--slice takes a positive number of elements");
    } else if (a == "--timeout") {
      if (!tools::parseSeconds(v, p.run.timeoutSeconds))
        return fail("--timeout takes a positive number of seconds");
    } else if (a == "-D") {
      if (!define(v))
        return fail("-D takes name=value");
    } else if (a == "--collc") {
      o.collc = v;
    } else if (a == "--stdlib") {
      o.stdlib = v;
    } else if (a == "--select") {
      o.select = v;
    } else if (a == "--predict") {
      Result<Topology> t = loadTopology(v);
      if (!t)
        return fail(t.message());
      o.topology = std::move(*t);
      p.predict = &o.topology;
    }
  }
  if (o.input.empty() == o.collective.empty())
    return fail(o.input.empty() ? "give a program (.coll), a plan (.bin) or --coll NAME"
                                : "give a program or plan, or --coll, not both");
  if (p.minBytes == 0 || p.maxBytes < p.minBytes)
    return fail("sizes must satisfy 0 < -b <= -e");
  if (!o.input.empty() && !endsWith(o.input, ".coll") && !o.defines.empty())
    return fail("-D sets a parameter of a .coll program; '" + o.input + "' is a plan");
  return -1;
}

/// collc beside this executable in the build tree (tools/coll-perf/ and
/// tools/collc/), unless --collc says otherwise.
std::string findCollc(const Options &o) {
  if (!o.collc.empty())
    return o.collc;
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0)
    return "collc";
  std::string dir(self, size_t(n));
  dir.erase(dir.rfind('/'));
  return dir + "/../collc/collc";
}

/// Compiles \p program with collc into a temporary plan file; returns its
/// path, or "" after reporting why not (collc's diagnostics go to stderr).
/// With \p quiet, a program whose `require` refuses the ranks is passed
/// over without a word (\p refused set); any other failure is reported.
std::string compile(const Options &o, const std::string &program,
                    const std::vector<std::string> &defines, bool quiet = false,
                    bool *refused = nullptr) {
  const char *tmp = std::getenv("TMPDIR");
  std::string path = std::string(tmp && *tmp ? tmp : "/tmp") + "/coll-perf-XXXXXX.bin";
  int fd = mkstemps(path.data(), 4);
  if (fd < 0) {
    fail("cannot create a temporary file " + path + ": " + std::strerror(errno));
    return "";
  }
  close(fd);
  const std::string collc = findCollc(o);
  std::vector<std::string> args = {collc, program};
  if (o.nranks)
    args.insert(args.end(), {"--nranks", std::to_string(o.nranks)});
  for (const std::string &d : defines)
    args.insert(args.end(), {"-D", d});
  args.insert(args.end(), {"-o", path});
  std::vector<char *> argv;
  for (std::string &a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  // Quiet: collc's diagnostics into a file, shown unless only a
  // requirement refused the ranks.
  std::string errPath;
  int errFd = -1;
  if (quiet) {
    errPath = std::string(tmp && *tmp ? tmp : "/tmp") + "/coll-perf-XXXXXX.err";
    errFd = mkstemps(errPath.data(), 4);
  }
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    if (quiet && errFd >= 0)
      dup2(errFd, 2);
    execv(collc.c_str(), argv.data());
    std::fprintf(stderr, "coll-perf: error: cannot run %s: %s (give --collc PATH)\n", collc.c_str(),
                 std::strerror(errno));
    _exit(127);
  }
  int st = 0;
  while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  std::string errors;
  if (errFd >= 0) {
    char buf[4096];
    ssize_t got;
    lseek(errFd, 0, SEEK_SET);
    while (errors.size() < (1u << 20) && (got = read(errFd, buf, sizeof buf)) > 0)
      errors.append(buf, size_t(got));
    close(errFd);
    std::remove(errPath.c_str());
  }
  if (pid < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    std::remove(path.c_str());
    if (quiet) {
      // Every error a refused requirement: the row does not take N.
      size_t errorsSeen = 0, refusals = 0;
      for (size_t at = errors.find("error: "); at != std::string::npos;
           at = errors.find("error: ", at + 7)) {
        ++errorsSeen;
        refusals += errors.compare(at + 7, 18, "requirement failed") == 0;
      }
      if (errorsSeen && errorsSeen == refusals) {
        if (refused)
          *refused = true;
        return "";
      }
      std::fputs(errors.c_str(), stderr);
    }
    if (pid < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 127)
      fail("collc could not compile " + program);
    return "";
  }
  return path;
}

/// The plans to sweep (SweepPlan::plan set by the caller): a program's or
/// a plan file's, or for --coll the standard library's for each size
/// (the selection table); an error is reported.
Result<std::vector<std::pair<ValidatedPlan, uint64_t>>> loadPlans(const Options &o) {
  std::vector<std::pair<ValidatedPlan, uint64_t>> plans;
  auto loadOne = [&](const std::string &program, const std::vector<std::string> &defines,
                     uint64_t maxBytes, bool optional) -> Status {
    if (!endsWith(program, ".coll")) {
      Result<ValidatedPlan> plan = ValidatedPlan::load(program);
      if (!plan)
        return plan.getStatus();
      plans.emplace_back(std::move(*plan), maxBytes);
      return Status::success();
    }
    // --coll runs 2 ranks unless told otherwise.
    Options withRanks = o;
    if (!o.collective.empty() && !o.nranks)
      withRanks.nranks = 2;
    bool refused = false;
    std::string path = compile(withRanks, program, defines, optional, &refused);
    if (path.empty())
      return refused ? Status::success() : Status::error("");
    Result<ValidatedPlan> plan = ValidatedPlan::load(path);
    std::remove(path.c_str());
    if (!plan)
      return plan.getStatus();
    plans.emplace_back(std::move(*plan), maxBytes);
    return Status::success();
  };
  if (o.collective.empty()) {
    if (Status s = loadOne(o.input, o.defines, anySize, false); !s)
      return s;
    return plans;
  }
  Result<SelectionTable> table = selectionTable(o.select, o.stdlib);
  if (!table)
    return table.getStatus();
  const uint32_t n = o.nranks ? o.nranks : 2;
  std::vector<const SelectionRow *> rows = table->candidates(o.collective, n);
  if (rows.empty()) {
    std::vector<std::string> known = table->collectives();
    if (std::find(known.begin(), known.end(), o.collective) == known.end())
      return Status::error("unknown collective '" + o.collective + "' (" +
                           knownCollectives(*table) + ")");
    return Status::error("the selection table has no program for " + o.collective + " on " +
                         std::to_string(n) + " ranks");
  }
  // A rooted collective's programs take their root as the parameter `root`.
  std::vector<std::string> defines = o.defines;
  const CollectiveInfo *c = findCollective(o.collective);
  bool rootDefined = false;
  for (const std::string &def : defines)
    rootDefined |= def.rfind("root=", 0) == 0;
  if (c && c->rooted && o.root >= 0 && !rootDefined)
    defines.push_back("root=" + std::to_string(o.root));
  // Only the rows that take a size of the sweep are compiled.
  uint64_t taken = 0; // Sizes up to this are taken by an earlier row.
  for (size_t i = 0; i < rows.size(); ++i) {
    const bool last = i + 1 == rows.size();
    const uint64_t maxBytes = last ? anySize : rows[i]->maxBytes;
    if (!last && (maxBytes < o.perf.minBytes || taken >= o.perf.maxBytes))
      continue;
    std::vector<std::string> rowDefines = rows[i]->defines;
    rowDefines.insert(rowDefines.end(), defines.begin(), defines.end());
    const size_t before = plans.size();
    if (Status s = loadOne(rows[i]->path, rowDefines, maxBytes, !last); !s)
      return s;
    if (plans.size() == before)
      continue; // Its program's `require` refuses these ranks.
    // The row's plan must run the collective asked for, on N ranks.
    const PlanInfo &info = plans.back().first.info();
    const bool custom = info.collective == CollectiveKind::Custom;
    const std::string runs = custom ? info.name : collectiveName(info.collective);
    const bool fits = c ? info.collective == c->kind : custom;
    if (!fits || info.nranks != n)
      return Status::error(rows[i]->where + ": the plan of " + rows[i]->program + " runs " + runs +
                           " on " + std::to_string(info.nranks) + " ranks, not " + o.collective +
                           " on " + std::to_string(n) + " ranks");
    taken = std::max(taken, maxBytes);
    if (taken >= o.perf.maxBytes)
      break;
  }
  // A row whose program does not compile for these ranks is skipped (its
  // `require` may refuse them); a sweep that none compiles for is an error.
  if (plans.empty())
    return Status::error("none of the selection table's programs for " + o.collective + " on " +
                         std::to_string(n) + " ranks that the sizes take compiled (the first: " +
                         rows.front()->path + "); give it alone to see why");
  return plans;
}

} // namespace

int main(int argc, char **argv) {
  coll::tools::exitCleanlyWhenOutOfMemory("coll-perf");
  Options o;
  if (int rc = parseArgs(argc, argv, o); rc >= 0)
    return rc;
  Result<std::vector<std::pair<ValidatedPlan, uint64_t>>> loaded = loadPlans(o);
  if (!loaded)
    return loaded.message().empty() ? 2 : fail(loaded.message());
  std::vector<SweepPlan> plans;
  for (const auto &[plan, maxBytes] : *loaded)
    plans.push_back({&plan, maxBytes});
  const PlanInfo &info = plans.front().plan->info();
  if (o.nranks && o.nranks != info.nranks)
    return fail("the plan has " + std::to_string(info.nranks) + " ranks, not --nranks " +
                std::to_string(o.nranks));
  if (o.root >= 0 && collectiveInfo(info.collective).rooted && uint32_t(o.root) != info.root)
    return fail("the plan's root is rank " + std::to_string(info.root) + ", not -r " +
                std::to_string(o.root) + " (compile it with -D root=" + std::to_string(o.root) +
                ")");
  if (o.boot.given() != (o.boot.rank >= 0))
    return fail("--bootstrap and --rank go together");
  if (o.boot.given()) {
    if (o.perf.processes)
      return fail("--bootstrap runs one rank in this process: no --ranks-as processes");
    if (uint32_t(o.boot.rank) >= info.nranks)
      return fail("--rank " + std::to_string(o.boot.rank) + " is out of range: the plan has " +
                  std::to_string(info.nranks) + " ranks");
    o.perf.boot = &o.boot;
  }
  if (o.perf.processes && info.nranks > maxProcesses)
    return fail("the plan has " + std::to_string(info.nranks) +
                " ranks, and --ranks-as processes starts a process for each: more than " +
                std::to_string(maxProcesses));
  return runSweep(plans, o.perf);
}
