//===- Selection.h - Which program runs a call ------------------*- C++ -*-===//
/// \file
/// A selection table says which program (a `.coll` file or a compiled plan)
/// runs a collective on N ranks at a message size. It is text, one row per
/// line, the first row that fits a call winning:
///
/// \code
///   # collective  ranks  max-bytes  program                        [NAME=VALUE ...]
///   allreduce     1-2    any        twoshot_allreduce.coll
///   allreduce     3-     16K        recursive_doubling_allreduce.coll
///   allreduce     any    any        ring_allreduce.coll
///   broadcast     any    any        my_plans/bcast8.bin
/// \endcode
///
/// `ranks` is `N`, `A-B`, `A-` or `any`; `max-bytes` is a size (K, M, G
/// suffixes: binary multiples) or `any`, compared with nccl-tests' size of
/// the call (the larger per-rank buffer); a program's path is relative to
/// the table's directory; the NAME=VALUE words are the program's parameters
/// (collc's -D). `#` starts a comment. The standard library's table is
/// stdlib/default.select; coll-perf --coll and the PyTorch backend read it.
//===----------------------------------------------------------------------===//
#ifndef COLL_RUNTIME_SELECTION_H
#define COLL_RUNTIME_SELECTION_H

#include "coll/Runtime/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace coll {

/// Parses "64M", "1K", "4096", "1G", "32MiB" (binary multiples; a trailing B
/// is fine).
bool parseByteSize(const std::string &text, uint64_t &out);
/// "1 MiB", "4 KiB", "100 B", "1536 B": the largest binary unit that
/// divides \p bytes.
std::string formatByteSize(uint64_t bytes);

/// One row of a selection table.
struct SelectionRow {
  static constexpr uint64_t anyBytes = ~uint64_t(0);
  static constexpr uint32_t anyRanks = ~uint32_t(0);
  std::string collective; ///< "allreduce", or a user-declared collective's name.
  uint32_t minRanks = 1, maxRanks = anyRanks;
  uint64_t maxBytes = anyBytes;
  std::string program;              ///< As the row wrote it.
  std::string path;                 ///< The program resolved against the table's directory.
  std::vector<std::string> defines; ///< NAME=VALUE.
  std::string where;                ///< "file:line", for messages.

  /// Whether the row admits \p nranks ranks.
  bool admits(uint32_t nranks) const { return minRanks <= nranks && nranks <= maxRanks; }
  /// Whether the program is a `.coll` program (else a compiled plan).
  bool isProgram() const;
};

/// A selection table: rows in order of preference.
class SelectionTable {
public:
  /// Parses \p text; \p name names it in errors ("file:line: ..."), and
  /// relative program paths are resolved against \p baseDir.
  static Result<SelectionTable> parse(const std::string &text, const std::string &name,
                                      const std::string &baseDir);
  /// parse() of the file at \p path, relative to its directory.
  static Result<SelectionTable> load(const std::string &path);

  /// The rows of \p collective that admit \p nranks, in order.
  std::vector<const SelectionRow *> candidates(const std::string &collective,
                                               uint32_t nranks) const;
  /// The collectives the table names, in order of first appearance.
  std::vector<std::string> collectives() const;
  const std::vector<SelectionRow> &rows() const { return theRows; }
  /// Puts \p first's rows before this table's.
  void prepend(const SelectionTable &first);
  /// Drops the rows of \p collective (every row for ""); returns how many.
  size_t removeRows(const std::string &collective);

private:
  std::vector<SelectionRow> theRows;
};

} // namespace coll

#endif // COLL_RUNTIME_SELECTION_H
