//===- OutOfMemory.h - A clean exit when memory runs out --------*- C++ -*-===//
/// \file
/// The tools refuse inputs over their limits, but an input within them can
/// still need more memory than the machine gives (a program of millions of
/// operations, a plan of thousands of ranks). Then the tool prints one error
/// line and exits with status 1, instead of aborting on an uncaught
/// std::bad_alloc or LLVM's "out of memory" crash report.
//===----------------------------------------------------------------------===//
#ifndef COLL_TOOLS_OUTOFMEMORY_H
#define COLL_TOOLS_OUTOFMEMORY_H

#include <cstring>
#include <new>
#include <unistd.h>

namespace coll::tools {

namespace detail {
inline const char *&outOfMemoryTool() {
  static const char *tool = "coll";
  return tool;
}

/// Writes the error without allocating, and exits.
[[noreturn]] inline void outOfMemoryExit() {
  const char *tool = outOfMemoryTool();
  const char *rest = ": error: out of memory (the input needs more memory than this "
                     "machine gives)\n";
  ssize_t ignored = ::write(2, tool, std::strlen(tool));
  ignored = ::write(2, rest, std::strlen(rest));
  (void)ignored;
  ::_exit(1);
}
} // namespace detail

/// Makes a failed operator new print "TOOL: error: out of memory ..." and
/// exit with status 1. \p tool must outlive the process.
inline void exitCleanlyWhenOutOfMemory(const char *tool) {
  detail::outOfMemoryTool() = tool;
  std::set_new_handler([] { detail::outOfMemoryExit(); });
}

} // namespace coll::tools

#endif // COLL_TOOLS_OUTOFMEMORY_H
