//===- PlanLibrary.h - Plans for a process's calls, compiled on demand -*- C++ -*-===//
/// \file
/// Where a job gets the plan of a call, for the PyTorch backend and the
/// NCCL library alike: a selection table (coll/Runtime/Selection.h) says
/// which program runs a collective on N ranks at a size; the user's table
/// (COLLC_PLANS=DIR holds DIR/collc.select, or setUserTable()) comes before
/// the host's table (`collc select`'s choices from a calibration of the
/// host: COLLC_HOST_SELECT, else one made for this host in the cache, else
/// stdlib/host.select), and that before the standard library's
/// (stdlib/default.select), unless the library was made without the
/// standard tables (then only the user's rows select). A
/// `.coll` program is compiled by `collc` for the call's N (and root) the
/// first time it is needed and cached on disk under a name made of a hash
/// of the compiler's version, the program's text, N and its parameters, so
/// that a later process loads it. Ranks on one host that need the same plan
/// at once compile it once (a lock file).
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_PLANLIBRARY_H
#define COLL_RUNTIME_PLANLIBRARY_H

#include "coll/Runtime/PreparedCall.h"
#include "coll/Runtime/Selection.h"
#include "coll/Runtime/Status.h"

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace coll {

/// The directory of the shared object or executable that holds \p address
/// ("" when the loader cannot say): where a library finds what is
/// installed beside it.
std::string objectDirectory(const void *address);

/// Where the library finds its tools and keeps its plans.
struct PlanLibraryPaths {
  std::string collc;    ///< The compiler.
  std::string stdlib;   ///< The standard library (default.select and its programs).
  std::string cacheDir; ///< Compiled plans.
  /// The host's selection table, between the user's rows and
  /// default.select for groups within one host: a path, "none" for no
  /// host table, or "" for the standard library's host.select where it
  /// has one.
  std::string hostTable;

  /// COLLC, COLLC_STDLIB and COLLC_CACHE_DIR from the environment; else the
  /// first of \p collcCandidates that exists (else `collc` on PATH), the
  /// first of \p stdlibCandidates that holds default.select, and a cache
  /// under $XDG_CACHE_HOME, $HOME/.cache or /tmp. The host table is
  /// COLLC_HOST_SELECT (a path or "none"), else hostTableFile() where it
  /// exists, else "".
  static PlanLibraryPaths fromEnvironment(const std::vector<std::string> &collcCandidates,
                                          const std::vector<std::string> &stdlibCandidates);
  /// Where a table made for this host is kept ($XDG_CACHE_HOME or
  /// $HOME/.cache, then collc/host.select; "" without either).
  static std::string hostTableFile();
};

/// The process's plans. Thread-safe.
class PlanLibrary {
public:
  /// \p standardTables: whether the standard library's tables follow the
  /// user's rows (the PyTorch backend); without them only the user's rows
  /// select, and a call larger than a row's max-bytes is not the row's
  /// even when the row is the last (the NCCL library, which hands every
  /// call no row names to NCCL).
  explicit PlanLibrary(PlanLibraryPaths paths, bool standardTables = true);

  /// A library with \p paths whose user table is COLLC_PLANS's
  /// DIR/collc.select when that is set (an unreadable one is the error of
  /// every later plan()).
  static std::unique_ptr<PlanLibrary> fromEnvironment(PlanLibraryPaths paths,
                                                      bool standardTables = true);

  /// The plan that runs \p collective on \p nranks ranks for a call whose
  /// larger per-rank buffer takes \p bytes (nccl-tests' size), with root
  /// \p root for a rooted collective (else ignored). \p acrossHosts: the
  /// group's ranks span hosts, and the standard library's rows come from
  /// stdlib/network.select instead of default.select (the user's rows
  /// first either way).
  Result<std::shared_ptr<const ValidatedPlan>> plan(const std::string &collective, uint32_t nranks,
                                                    uint32_t root, uint64_t bytes,
                                                    bool acrossHosts = false);

  /// Puts the table at \p path before the standard library's, replacing
  /// an earlier user table; "" removes it.
  Status setUserTable(const std::string &path);
  /// Takes the host table at \p path ("none": no host table, "": the
  /// standard library's host.select) for later selections.
  Status setHostTable(const std::string &path);
  /// The host table in use ("" when there is none).
  std::string hostTable();
  /// Adds one row before every other: \p program runs \p collective on
  /// \p minRanks to \p maxRanks ranks up to \p maxBytes.
  Status addUserRow(const std::string &collective, const std::string &program, uint32_t minRanks,
                    uint32_t maxRanks, uint64_t maxBytes, const std::vector<std::string> &defines);
  /// Drops the rows addUserRow() added for \p collective (all of them for
  /// ""); returns how many.
  size_t removeUserRows(const std::string &collective);

  /// Whether some row of the table serves \p collective on \p nranks
  /// ranks at \p bytes (plan() may still fail to make its plan); an
  /// unreadable table serves nothing.
  bool selects(const std::string &collective, uint32_t nranks, uint64_t bytes);
  /// The rows that admit \p nranks ranks, in order: the user's first.
  std::vector<SelectionRow> rowsFor(uint32_t nranks);

  /// The file \p plan (one plan() returned) was loaded from: a compiled
  /// program's in the plan cache, or a table's plan file; "" for a plan
  /// this library did not load.
  std::string fileOf(const ValidatedPlan *plan);

  const PlanLibraryPaths &paths() const { return thePaths; }
  /// Bumped by every change of the user's selection: a plan chosen under
  /// an older generation is chosen again.
  uint64_t generation() const { return gen.load(std::memory_order_acquire); }

private:
  /// The table to select from: the user's rows, then the host table and
  /// default.select, or network.select when \p acrossHosts.
  Result<const SelectionTable *> table(bool acrossHosts);
  /// The host table's path, resolved ("" for none). Call with mu held.
  std::string hostTablePath();
  /// The plan of \p row for N and root, compiled or loaded once.
  Result<std::shared_ptr<const ValidatedPlan>> planOf(const SelectionRow &row, uint32_t nranks,
                                                      uint32_t root, bool rooted);
  /// Compiles \p row's program for N with \p defines into the cache, or
  /// finds it there; returns the plan file's path.
  Result<std::string> compiled(const SelectionRow &row, uint32_t nranks,
                               const std::vector<std::string> &defines);
  /// `collc --version`, once.
  Result<std::string> compilerVersion();

  std::mutex mu;
  PlanLibraryPaths thePaths;
  SelectionTable userRows;  ///< addUserRow()'s, newest first.
  SelectionTable userTable; ///< setUserTable()'s or COLLC_PLANS's.
  /// User rows, then the host table and default.select [0], or
  /// network.select [1];
  /// null: to build.
  std::unique_ptr<SelectionTable> merged[2];
  std::string version;
  std::string versionError;   ///< Why `collc --version` failed (it is not run again).
  std::string userTableError; ///< COLLC_PLANS's table could not be read.
  /// Plans by "path|N|root|defines"; a failure is kept as its message.
  std::map<std::string, Result<std::shared_ptr<const ValidatedPlan>>> plans;
  /// The file each loaded plan came from (plans are kept: never dangling).
  std::map<const ValidatedPlan *, std::string> planFiles;
  unsigned userRowCount = 0; ///< The first rows of `merged` that are the user's.
  std::atomic<uint64_t> gen{0};
  bool standardTables = true;
};

} // namespace coll

#endif // COLL_RUNTIME_PLANLIBRARY_H
