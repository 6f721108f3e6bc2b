//===- PlanLibrary.cpp - Plans for a process's calls, compiled on demand --===//

#include "coll/Runtime/PlanLibrary.h"

#include "coll/Runtime/Collective.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fcntl.h>
#include <fstream>
#include <spawn.h>
#include <sstream>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

namespace coll {

namespace {

bool exists(const std::string &path) {
  struct stat st;
  return !path.empty() && ::stat(path.c_str(), &st) == 0;
}

std::string env(const char *name) {
  const char *v = std::getenv(name);
  return v && *v ? v : "";
}

bool readFile(const std::string &path, std::string &out) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return false;
  std::ostringstream text;
  text << in.rdbuf();
  out = text.str();
  return true;
}

/// mkdir -p.
bool makeDirectories(const std::string &path) {
  for (size_t pos = 1; pos <= path.size(); ++pos) {
    if (pos != path.size() && path[pos] != '/')
      continue;
    std::string prefix = path.substr(0, pos);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST)
      return false;
  }
  return true;
}

/// 64-bit FNV-1a of \p data, from \p seed.
uint64_t fnv1a(const std::string &data, uint64_t seed) {
  uint64_t h = seed;
  for (unsigned char c : data) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)v);
  return buf;
}

/// A temporary file for a tool's output; "" (and \p errors says why) when
/// none can be made.
std::string temporaryFile(std::string &errors) {
  const std::string dir = env("TMPDIR").empty() ? "/tmp" : env("TMPDIR");
  std::string path = dir + "/collc-plans-XXXXXX";
  int fd = mkstemp(path.data());
  if (fd < 0) {
    errors = "cannot create a temporary file in " + dir + ": " + std::strerror(errno);
    return "";
  }
  ::close(fd);
  return path;
}

/// Runs \p args (args[0] looked up on PATH when it has no '/'): its stderr
/// goes to \p errors, its stdout to \p output (dropped when null). Returns
/// the exit status, -1 when it could not run (then \p errors says why).
int runTool(const std::vector<std::string> &args, std::string &errors,
            std::string *output = nullptr) {
  const std::string errPath = temporaryFile(errors);
  if (errPath.empty())
    return -1;
  const std::string outPath = output ? temporaryFile(errors) : "/dev/null";
  if (outPath.empty()) {
    ::unlink(errPath.c_str());
    return -1;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, outPath.c_str(), O_WRONLY | O_TRUNC, 0);
  posix_spawn_file_actions_addopen(&actions, 2, errPath.c_str(), O_WRONLY | O_TRUNC, 0);
  std::vector<char *> argv;
  for (const std::string &a : args)
    argv.push_back(const_cast<char *>(a.c_str()));
  argv.push_back(nullptr);
  // The compiler needs no NCCL: a preloaded NCCL library (libcollc_nccl.so,
  // which runs this code) is left out of its environment.
  std::vector<char *> envp;
  for (char **e = environ; e && *e; ++e)
    if (std::strncmp(*e, "LD_PRELOAD=", 11) != 0 || !std::strstr(*e, "collc_nccl"))
      envp.push_back(*e);
  envp.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  int status = 0;
  if (rc == 0)
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  readFile(errPath, errors);
  ::unlink(errPath.c_str());
  if (output) {
    readFile(outPath, *output);
    ::unlink(outPath.c_str());
  }
  if (rc != 0) {
    errors = "cannot run " + args[0] + ": " + std::strerror(rc);
    return -1;
  }
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  errors += args[0] + " was killed by signal " + std::to_string(WTERMSIG(status));
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/// "allreduce on 8 ranks" or "broadcast from rank 3 on 8 ranks".
std::string describeCall(const std::string &collective, uint32_t nranks, uint32_t root,
                         bool rooted) {
  return collective + (rooted ? " from rank " + std::to_string(root) : "") + " on " +
         std::to_string(nranks) + " ranks";
}

} // namespace

std::string objectDirectory(const void *address) {
  Dl_info info;
  if (!dladdr(address, &info) || !info.dli_fname)
    return "";
  std::string path = info.dli_fname;
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

PlanLibraryPaths
PlanLibraryPaths::fromEnvironment(const std::vector<std::string> &collcCandidates,
                                  const std::vector<std::string> &stdlibCandidates) {
  PlanLibraryPaths p;
  p.collc = env("COLLC");
  for (const std::string &c : collcCandidates)
    if (p.collc.empty() && exists(c))
      p.collc = c;
  if (p.collc.empty())
    p.collc = "collc";
  p.stdlib = env("COLLC_STDLIB");
  for (const std::string &c : stdlibCandidates)
    if (p.stdlib.empty() && exists(c + "/default.select"))
      p.stdlib = c;
  p.cacheDir = env("COLLC_CACHE_DIR");
  if (p.cacheDir.empty() && !env("XDG_CACHE_HOME").empty())
    p.cacheDir = env("XDG_CACHE_HOME") + "/collc/plans";
  if (p.cacheDir.empty() && !env("HOME").empty())
    p.cacheDir = env("HOME") + "/.cache/collc/plans";
  if (p.cacheDir.empty())
    p.cacheDir = "/tmp/collc-plans-" + std::to_string(::getuid());
  p.hostTable = env("COLLC_HOST_SELECT");
  if (p.hostTable.empty() && exists(hostTableFile()))
    p.hostTable = hostTableFile();
  return p;
}

std::string PlanLibraryPaths::hostTableFile() {
  std::string root = env("XDG_CACHE_HOME");
  if (root.empty() && !env("HOME").empty())
    root = env("HOME") + "/.cache";
  return root.empty() ? "" : root + "/collc/host.select";
}

std::unique_ptr<PlanLibrary> PlanLibrary::fromEnvironment(PlanLibraryPaths paths,
                                                          bool standardTables) {
  auto lib = std::make_unique<PlanLibrary>(std::move(paths), standardTables);
  if (std::string dir = env("COLLC_PLANS"); !dir.empty()) {
    // An unreadable table is reported by the first call that selects.
    Status s = lib->setUserTable(dir + "/collc.select");
    if (!s)
      lib->userTableError = s.message();
  }
  return lib;
}

PlanLibrary::PlanLibrary(PlanLibraryPaths paths, bool standardTables)
    : thePaths(std::move(paths)), standardTables(standardTables) {}

Status PlanLibrary::setUserTable(const std::string &path) {
  std::lock_guard<std::mutex> lock(mu);
  userTableError.clear();
  if (path.empty()) {
    userTable = SelectionTable();
  } else {
    Result<SelectionTable> t = SelectionTable::load(path);
    if (!t)
      return t.getStatus();
    userTable = std::move(*t);
  }
  merged[0].reset();
  merged[1].reset();
  gen.fetch_add(1, std::memory_order_acq_rel);
  return Status::success();
}

Status PlanLibrary::setHostTable(const std::string &path) {
  if (path != "none" && !path.empty()) {
    // Read now, so that a bad table is this call's error.
    Result<SelectionTable> t = SelectionTable::load(path);
    if (!t)
      return t.getStatus();
  }
  std::lock_guard<std::mutex> lock(mu);
  thePaths.hostTable = path;
  merged[0].reset();
  merged[1].reset();
  gen.fetch_add(1, std::memory_order_acq_rel);
  return Status::success();
}

std::string PlanLibrary::hostTablePath() {
  if (thePaths.hostTable == "none")
    return "";
  if (!thePaths.hostTable.empty())
    return thePaths.hostTable;
  std::string shipped = thePaths.stdlib + "/host.select";
  return !thePaths.stdlib.empty() && exists(shipped) ? shipped : "";
}

std::string PlanLibrary::hostTable() {
  std::lock_guard<std::mutex> lock(mu);
  return standardTables ? hostTablePath() : "";
}

Status PlanLibrary::addUserRow(const std::string &collective, const std::string &program,
                               uint32_t minRanks, uint32_t maxRanks, uint64_t maxBytes,
                               const std::vector<std::string> &defines) {
  std::string line = collective + " " + std::to_string(minRanks) + "-" +
                     (maxRanks == SelectionRow::anyRanks ? "" : std::to_string(maxRanks)) + " " +
                     (maxBytes == SelectionRow::anyBytes ? "any" : std::to_string(maxBytes)) + " " +
                     program;
  for (const std::string &d : defines)
    line += " " + d;
  if (program.empty() || program.find_first_of(" \t#") != std::string::npos)
    return Status::error("the program's path '" + program + "' is empty or has a space or '#'");
  Result<SelectionTable> row = SelectionTable::parse(line, "use_program()", ".");
  if (!row)
    return row.getStatus();
  std::lock_guard<std::mutex> lock(mu);
  userRows.prepend(*row);
  merged[0].reset();
  merged[1].reset();
  gen.fetch_add(1, std::memory_order_acq_rel);
  return Status::success();
}

size_t PlanLibrary::removeUserRows(const std::string &collective) {
  std::lock_guard<std::mutex> lock(mu);
  const size_t removed = userRows.removeRows(collective);
  if (removed) {
    merged[0].reset();
    merged[1].reset();
    gen.fetch_add(1, std::memory_order_acq_rel);
  }
  return removed;
}

Result<const SelectionTable *> PlanLibrary::table(bool acrossHosts) {
  if (!userTableError.empty())
    return Status::error("COLLC_PLANS: " + userTableError);
  std::unique_ptr<SelectionTable> &m = merged[acrossHosts ? 1 : 0];
  if (!m) {
    auto t = std::make_unique<SelectionTable>();
    if (standardTables) {
      Result<SelectionTable> stdlib = SelectionTable::load(
          thePaths.stdlib + (acrossHosts ? "/network.select" : "/default.select"));
      if (!stdlib)
        return Status::error(stdlib.message() + " (set COLLC_STDLIB to the standard library)");
      *t = std::move(*stdlib);
      // Within one host, the host's table comes first; its rank counts
      // and sizes fall through to default.select's where it has none.
      if (std::string host = hostTablePath(); !acrossHosts && !host.empty()) {
        Result<SelectionTable> hostRows = SelectionTable::load(host);
        if (!hostRows)
          return Status::error("the host's selection table: " + hostRows.message() +
                               " (COLLC_HOST_SELECT=none goes without it)");
        t->prepend(*hostRows);
      }
    }
    t->prepend(userTable);
    t->prepend(userRows);
    userRowCount = unsigned(userRows.rows().size() + userTable.rows().size());
    m = std::move(t);
  }
  return m.get();
}

Result<std::string> PlanLibrary::compilerVersion() {
  if (!version.empty())
    return version;
  if (!versionError.empty())
    return Status::error(versionError);
  std::string errors, out;
  const int rc = runTool({thePaths.collc, "--version"}, errors, &out);
  if (rc != 0 || out.empty()) {
    versionError = "cannot run the compiler " + thePaths.collc +
                   (errors.empty() ? "" : ": " + errors) + " (set COLLC to the collc compiler)";
    return Status::error(versionError);
  }
  // The version and the binary's identity: a rebuilt compiler of the same
  // version makes new plans too.
  struct stat st;
  if (::stat(thePaths.collc.c_str(), &st) == 0)
    out += "|" + std::to_string(st.st_size) + "|" + std::to_string(st.st_mtime);
  version = out;
  return version;
}

Result<std::string> PlanLibrary::compiled(const SelectionRow &row, uint32_t nranks,
                                          const std::vector<std::string> &defines) {
  std::string text;
  if (!readFile(row.path, text))
    return Status::error(row.where + ": cannot read the program " + row.path);
  Result<std::string> v = compilerVersion();
  if (!v)
    return v.getStatus();
  std::vector<std::string> sorted = defines;
  std::sort(sorted.begin(), sorted.end());
  std::string keyText = *v + '\0' + text + '\0' + std::to_string(nranks);
  for (const std::string &d : sorted)
    keyText += '\0' + d;
  const std::string key =
      hex(fnv1a(keyText, 0xcbf29ce484222325ull)) + hex(fnv1a(keyText, 0x84222325cbf29ce4ull));
  std::string stem = row.path.substr(row.path.rfind('/') + 1);
  stem = stem.substr(0, stem.size() - 5); // Without ".coll".
  if (!makeDirectories(thePaths.cacheDir))
    return Status::error("cannot create the plan cache " + thePaths.cacheDir + ": " +
                         std::strerror(errno) + " (set COLLC_CACHE_DIR)");
  const std::string base =
      thePaths.cacheDir + "/" + stem + "-n" + std::to_string(nranks) + "-" + key;
  const std::string planPath = base + ".bin";
  if (exists(planPath))
    return planPath;
  // One process compiles; the others wait for it and find the plan.
  int lockFd = ::open((base + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lockFd < 0)
    return Status::error("cannot create " + base + ".lock: " + std::strerror(errno));
  while (::flock(lockFd, LOCK_EX) != 0 && errno == EINTR) {
  }
  if (exists(planPath)) {
    ::close(lockFd);
    return planPath;
  }
  const std::string tmp = base + ".tmp" + std::to_string(::getpid());
  std::vector<std::string> args = {thePaths.collc, row.path, "--nranks", std::to_string(nranks)};
  for (const std::string &d : defines)
    args.insert(args.end(), {"-D", d});
  args.insert(args.end(), {"-o", tmp});
  std::string errors;
  int rc = runTool(args, errors);
  Status result = Status::success();
  if (rc != 0) {
    ::unlink(tmp.c_str());
    while (!errors.empty() && errors.back() == '\n')
      errors.pop_back();
    result =
        Status::error(row.where + ": collc could not compile " + row.path + " for " +
                      std::to_string(nranks) + " ranks" + (errors.empty() ? "" : ":\n" + errors));
  } else if (::rename(tmp.c_str(), planPath.c_str()) != 0) {
    result = Status::error("cannot write " + planPath + ": " + std::strerror(errno));
    ::unlink(tmp.c_str());
  }
  ::unlink((base + ".lock").c_str());
  ::close(lockFd);
  if (!result)
    return result;
  return planPath;
}

Result<std::shared_ptr<const ValidatedPlan>>
PlanLibrary::planOf(const SelectionRow &row, uint32_t nranks, uint32_t root, bool rooted) {
  std::vector<std::string> defines = row.defines;
  bool rootGiven = false;
  for (const std::string &d : defines)
    rootGiven |= d.rfind("root=", 0) == 0;
  if (rooted && row.isProgram() && !rootGiven)
    defines.push_back("root=" + std::to_string(root));
  std::string key =
      row.path + "|" + std::to_string(nranks) + "|" + (rooted ? std::to_string(root) : "");
  for (const std::string &d : defines)
    key += "|" + d;
  if (auto it = plans.find(key); it != plans.end())
    return it->second;
  auto remember = [&](Result<std::shared_ptr<const ValidatedPlan>> r) {
    plans.emplace(key, r);
    return r;
  };
  std::string path = row.path;
  if (row.isProgram()) {
    Result<std::string> p = compiled(row, nranks, defines);
    if (!p)
      return remember(p.getStatus());
    path = *p;
  }
  Result<ValidatedPlan> loaded = ValidatedPlan::load(path);
  if (!loaded)
    return remember(Status::error(row.where + ": " + loaded.message()));
  auto shared = std::make_shared<const ValidatedPlan>(std::move(*loaded));
  planFiles[shared.get()] = path;
  return remember(std::move(shared));
}

std::string PlanLibrary::fileOf(const ValidatedPlan *plan) {
  std::lock_guard<std::mutex> lock(mu);
  auto it = planFiles.find(plan);
  return it == planFiles.end() ? std::string() : it->second;
}

Result<std::shared_ptr<const ValidatedPlan>> PlanLibrary::plan(const std::string &collective,
                                                               uint32_t nranks, uint32_t root,
                                                               uint64_t bytes, bool acrossHosts) {
  std::lock_guard<std::mutex> lock(mu);
  Result<const SelectionTable *> t = table(acrossHosts);
  if (!t)
    return t.getStatus();
  const CollectiveInfo *builtin = findCollective(collective);
  const bool rooted = builtin && builtin->rooted;
  const std::string call = describeCall(collective, nranks, root, rooted);
  std::vector<const SelectionRow *> rows = (*t)->candidates(collective, nranks);
  if (rows.empty())
    return Status::error("no program in the selection tables runs " + call);
  std::string passedOver;
  // Without a compiler no program row can serve, but a compiled plan's row
  // still can: the compiler's error is given once, if nothing else serves.
  Status noCompiler = Status::success();
  bool compilerChecked = false;
  for (size_t i = 0; i < rows.size(); ++i) {
    const SelectionRow &row = *rows[i];
    // The standard tables' last row serves every size; without them a
    // row serves only up to its max-bytes.
    const bool last = standardTables && i + 1 == rows.size();
    if (!last && bytes > row.maxBytes)
      continue;
    const bool users = size_t(&row - (*t)->rows().data()) < userRowCount;
    if (row.isProgram()) {
      if (!compilerChecked) {
        compilerChecked = true;
        if (Result<std::string> v = compilerVersion(); !v)
          noCompiler = v.getStatus();
      }
      if (!noCompiler) {
        if (users)
          return Status::error(row.where + ": " + noCompiler.message());
        continue;
      }
    }
    Result<std::shared_ptr<const ValidatedPlan>> p = planOf(row, nranks, root, rooted);
    if (!p) {
      // A standard row whose program does not take this N (its `require`)
      // gives way to the next; a user's row is what the user asked for.
      if (users || i + 1 == rows.size())
        return Status::error(p.message() + passedOver);
      passedOver += "\n(passed over " + row.where + ": " + p.message() + ")";
      continue;
    }
    const PlanInfo &info = (*p)->info();
    const std::string planCall = describeCall(
        info.collective == CollectiveKind::Custom ? info.name : collectiveName(info.collective),
        info.nranks, info.root, collectiveInfo(info.collective).rooted);
    const bool fits =
        info.nranks == nranks &&
        (builtin ? info.collective == builtin->kind : info.collective == CollectiveKind::Custom);
    if (!fits)
      return Status::error(row.where + ": the plan of " + row.program + " runs " + planCall +
                           ", not " + call);
    if (rooted && info.root != root) {
      // A compiled plan has its root: a table lists one per root, and the
      // call takes the first whose root is its own.
      passedOver += "\n(passed over " + row.where + ": the plan of " + row.program + " runs " +
                    planCall + ")";
      continue;
    }
    return p;
  }
  if (!noCompiler)
    return noCompiler;
  return Status::error("no program in the selection tables runs " + call + passedOver);
}

bool PlanLibrary::selects(const std::string &collective, uint32_t nranks, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu);
  Result<const SelectionTable *> t = table(false);
  if (!t)
    return false;
  std::vector<const SelectionRow *> rows = (*t)->candidates(collective, nranks);
  if (rows.empty())
    return false;
  if (standardTables)
    return true; // The last row takes every size.
  for (const SelectionRow *row : rows)
    if (bytes <= row->maxBytes)
      return true;
  return false;
}

std::vector<SelectionRow> PlanLibrary::rowsFor(uint32_t nranks) {
  std::lock_guard<std::mutex> lock(mu);
  std::vector<SelectionRow> out;
  Result<const SelectionTable *> t = table(false);
  if (!t)
    return out;
  for (const SelectionRow &row : (*t)->rows())
    if (row.admits(nranks))
      out.push_back(row);
  return out;
}

} // namespace coll
