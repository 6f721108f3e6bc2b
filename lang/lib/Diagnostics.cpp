//===- Diagnostics.cpp - Source-located diagnostics -----------------------===//

#include "coll/Lang/Diagnostics.h"

using namespace coll;

DiagnosticEngine::DiagnosticEngine(llvm::SourceMgr &srcMgr, llvm::raw_ostream &os)
    : srcMgr(srcMgr), os(os) {}

void DiagnosticEngine::report(DiagKind kind, llvm::SMLoc loc, const llvm::Twine &msg,
                              llvm::ArrayRef<llvm::SMRange> ranges) {
  Diagnostic d{kind, loc, msg.str()};
  if (loc.isValid()) {
    auto lc = srcMgr.getLineAndColumn(loc);
    d.line = lc.first;
    d.column = lc.second;
  }
  all.push_back(d);

  bool print = true;
  if (kind == DiagKind::Note) {
    print = lastPrinted;
  } else {
    if (kind == DiagKind::Error)
      ++numErrors;
    else
      ++numWarnings;
    if (limitReached) {
      print = false;
    } else if (kind == DiagKind::Error && errorLimit != 0 && numErrors > errorLimit) {
      limitReached = true;
      print = false;
      os << programName << ": fatal error: too many errors emitted, stopping now\n";
    }
    lastPrinted = print;
  }
  if (!print)
    return;

  if (!loc.isValid()) {
    const char *label = kind == DiagKind::Error     ? "error"
                        : kind == DiagKind::Warning ? "warning"
                                                    : "note";
    os << programName << ": " << label << ": " << d.message << "\n";
    return;
  }
  llvm::SourceMgr::DiagKind smKind = kind == DiagKind::Error     ? llvm::SourceMgr::DK_Error
                                     : kind == DiagKind::Warning ? llvm::SourceMgr::DK_Warning
                                                                 : llvm::SourceMgr::DK_Note;
  // SourceMgr clips each range to the caret's line; ranges from another
  // buffer would be meaningless there.
  llvm::SmallVector<llvm::SMRange, 2> inBuffer;
  unsigned bufId = srcMgr.FindBufferContainingLoc(loc);
  for (llvm::SMRange r : ranges)
    if (r.isValid() && srcMgr.FindBufferContainingLoc(r.Start) == bufId)
      inBuffer.push_back(r);
  srcMgr.PrintMessage(os, loc, smKind, d.message, inBuffer);
}

void DiagnosticEngine::error(llvm::SMLoc loc, const llvm::Twine &msg,
                             llvm::ArrayRef<llvm::SMRange> ranges) {
  report(DiagKind::Error, loc, msg, ranges);
}

void DiagnosticEngine::warning(llvm::SMLoc loc, const llvm::Twine &msg,
                               llvm::ArrayRef<llvm::SMRange> ranges) {
  report(DiagKind::Warning, loc, msg, ranges);
}

void DiagnosticEngine::note(llvm::SMLoc loc, const llvm::Twine &msg,
                            llvm::ArrayRef<llvm::SMRange> ranges) {
  report(DiagKind::Note, loc, msg, ranges);
}

void DiagnosticEngine::errorNoLoc(const llvm::Twine &msg) {
  report(DiagKind::Error, llvm::SMLoc(), msg, {});
}
