//===- Frontend.cpp - Source file to checked AST --------------------------===//

#include "coll/Lang/Frontend.h"

#include "coll/Lang/Sema.h"

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
  if (llvm::sys::fs::is_directory(status)) {
    diag.errorNoLoc("cannot read '" + path + "': it is a directory");
    return 0;
  }
  if (status.getSize() > limits.maxSourceBytes) {
    diag.errorNoLoc("'" + path + "' is too large: " + llvm::Twine(status.getSize()) +
                    " bytes; the limit is " + llvm::Twine(limits.maxSourceBytes) + " bytes");
    return 0;
  }
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/true);
  if (!buffer) {
    diag.errorNoLoc("cannot read '" + path + "': " + buffer.getError().message());
    return 0;
  }
  return diag.getSourceMgr().AddNewSourceBuffer(std::move(*buffer), llvm::SMLoc());
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
