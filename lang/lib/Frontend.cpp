//===- Frontend.cpp - Source file to checked AST --------------------------===//

#include "coll/Lang/Frontend.h"

#include "coll/Lang/Sema.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace coll;

unsigned coll::loadSourceFile(llvm::StringRef path, DiagnosticEngine &diag,
                              const ParserLimits &limits) {
  llvm::sys::fs::file_status status;
  if (std::error_code ec = llvm::sys::fs::status(path, status)) {
    diag.errorNoLoc("cannot open '" + path + "': " + ec.message());
    return 0;
  }
  if (status.getSize() > limits.maxSourceBytes) {
    diag.errorNoLoc("'" + path + "' is too large: " + llvm::Twine(status.getSize()) +
                    " bytes; the limit is " + llvm::Twine(limits.maxSourceBytes) + " bytes");
    return 0;
  }
  // Read with the limit as well: a device or a pipe has no size to check.
  std::string text, error;
  if (!readFileBounded(path, limits.maxSourceBytes, text, error)) {
    diag.errorNoLoc(error);
    return 0;
  }
  return diag.getSourceMgr().AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(text, path),
                                                llvm::SMLoc());
}

bool coll::readFileBounded(llvm::StringRef path, uint64_t limit, std::string &out,
                           std::string &error) {
  out.clear();
  llvm::Expected<llvm::sys::fs::file_t> file =
      path == "-" ? llvm::Expected<llvm::sys::fs::file_t>(llvm::sys::fs::getStdinHandle())
                  : llvm::sys::fs::openNativeFileForRead(path);
  if (!file) {
    error = ("cannot open '" + path + "': " + llvm::toString(file.takeError())).str();
    return false;
  }
  llvm::sys::fs::file_status status;
  if (!llvm::sys::fs::status(*file, status) && llvm::sys::fs::is_directory(status)) {
    if (path != "-")
      llvm::sys::fs::closeFile(*file);
    error = ("cannot read '" + path + "': it is a directory").str();
    return false;
  }
  // A regular file says its size: one too large is refused unread.
  if (path != "-" && llvm::sys::fs::is_regular_file(status) && status.getSize() > limit) {
    llvm::sys::fs::closeFile(*file);
    error = ("'" + path + "' is too large: more than the limit of " + llvm::Twine(limit) + " bytes")
                .str();
    return false;
  }
  char chunk[1 << 16];
  bool ok = true;
  for (;;) {
    llvm::Expected<size_t> got = llvm::sys::fs::readNativeFile(*file, chunk);
    if (!got) {
      error = ("cannot read '" + path + "': " + llvm::toString(got.takeError())).str();
      ok = false;
      break;
    }
    if (*got == 0)
      break;
    if (out.size() + *got > limit) {
      error =
          ("'" + path + "' is too large: more than the limit of " + llvm::Twine(limit) + " bytes")
              .str();
      ok = false;
      break;
    }
    out.append(chunk, *got);
  }
  if (path != "-")
    llvm::sys::fs::closeFile(*file);
  if (!ok)
    out.clear();
  return ok;
}

unsigned coll::addSourceString(llvm::StringRef text, llvm::StringRef name, DiagnosticEngine &diag) {
  return diag.getSourceMgr().AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(text, name),
                                                llvm::SMLoc());
}

std::unique_ptr<ast::Module> coll::parseAndAnalyze(unsigned bufferId, DiagnosticEngine &diag,
                                                   const ParserLimits &limits) {
  unsigned errorsBefore = diag.errorCount();
  std::unique_ptr<ast::Module> module = parseModule(bufferId, diag, limits);
  if (!module || diag.shouldStop())
    return nullptr;
  analyzeModule(*module, diag);
  if (diag.errorCount() != errorsBefore)
    return nullptr;
  return module;
}
