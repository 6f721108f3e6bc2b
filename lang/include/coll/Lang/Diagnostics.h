//===- Diagnostics.h - Source-located diagnostics ---------------*- C++ -*-===//
/// \file
/// The diagnostic engine of the front end and compiler: `file:line:col:
/// error: message`, the source line and a caret or range underline, printed
/// through llvm::SourceMgr, with notes attached to the diagnostic before them.
//===----------------------------------------------------------------------===//
#ifndef COLL_LANG_DIAGNOSTICS_H
#define COLL_LANG_DIAGNOSTICS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/SMLoc.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace coll {

/// Severity of one diagnostic.
enum class DiagKind { Error, Warning, Note };

/// One emitted diagnostic, kept so tests can inspect what was reported.
struct Diagnostic {
  DiagKind kind;
  llvm::SMLoc loc;
  std::string message;
  unsigned line = 0;   ///< 1-based, 0 when the diagnostic has no location.
  unsigned column = 0; ///< 1-based, 0 when the diagnostic has no location.
};

/// Collects and prints diagnostics. Errors beyond the error limit are counted
/// but not printed; once the limit is reached `shouldStop()` is true and a
/// single "too many errors" line is printed.
class DiagnosticEngine {
public:
  /// Diagnostics print to \p os (llvm::errs() by default).
  explicit DiagnosticEngine(llvm::SourceMgr &srcMgr, llvm::raw_ostream &os = llvm::errs());

  /// Report an error at \p loc, underlining \p ranges.
  void error(llvm::SMLoc loc, const llvm::Twine &msg, llvm::ArrayRef<llvm::SMRange> ranges = {});
  /// Report an error underlining \p range, with the caret at its start.
  void error(llvm::SMRange range, const llvm::Twine &msg) { error(range.Start, msg, {range}); }
  /// Report a warning at \p loc.
  void warning(llvm::SMLoc loc, const llvm::Twine &msg, llvm::ArrayRef<llvm::SMRange> ranges = {});
  void warning(llvm::SMRange range, const llvm::Twine &msg) { warning(range.Start, msg, {range}); }
  /// Attach a note to the last error or warning (dropped when that one was).
  void note(llvm::SMLoc loc, const llvm::Twine &msg, llvm::ArrayRef<llvm::SMRange> ranges = {});
  void note(llvm::SMRange range, const llvm::Twine &msg) { note(range.Start, msg, {range}); }
  /// An error that belongs to no source location (`collc: error: ...`).
  void errorNoLoc(const llvm::Twine &msg);

  unsigned errorCount() const { return numErrors; }
  unsigned warningCount() const { return numWarnings; }
  bool hasErrors() const { return numErrors != 0; }

  /// Errors printed before the engine stops printing (0: no limit).
  void setErrorLimit(unsigned limit) { errorLimit = limit; }
  /// True once the error limit was reached; callers stop their work.
  bool shouldStop() const { return limitReached; }

  /// "Did you mean" guesses compare a name with every candidate: whether a
  /// guess among \p candidates may still be made, which takes them from the
  /// engine's budget (2^24 comparisons), so that a file of a great many
  /// misspellings under --error-limit=0 costs seconds, not hours. Once spent,
  /// errors come without guesses.
  bool spendOnGuess(size_t candidates) {
    if (candidates > guessBudget)
      return guessBudget = 0, false;
    guessBudget -= candidates;
    return true;
  }
  /// Whether any guess can still be made.
  bool canGuess() const { return guessBudget != 0; }

  /// Program name used for diagnostics without a location.
  void setProgramName(llvm::StringRef name) { programName = name.str(); }

  /// Every diagnostic reported so far, in order (printed or not).
  const std::vector<Diagnostic> &diagnostics() const { return all; }

  llvm::SourceMgr &getSourceMgr() { return srcMgr; }

private:
  void report(DiagKind kind, llvm::SMLoc loc, const llvm::Twine &msg,
              llvm::ArrayRef<llvm::SMRange> ranges);

  llvm::SourceMgr &srcMgr;
  llvm::raw_ostream &os;
  std::vector<Diagnostic> all;
  std::string programName = "collc";
  unsigned numErrors = 0;
  unsigned numWarnings = 0;
  unsigned errorLimit = 20;
  bool limitReached = false;
  bool lastPrinted = true;
  size_t guessBudget = size_t(1) << 24;
};

/// The closest of \p candidates to \p name by edit distance (at most a
/// third of the name's length), for "did you mean" notes; "" when none is
/// close, or for names shorter than 3 characters.
std::string closestName(llvm::StringRef name, llvm::ArrayRef<std::string> candidates);

} // namespace coll

#endif // COLL_LANG_DIAGNOSTICS_H
