//===- ParserImpl.h - Internals shared by the parser driver and builder ---===//
/// \file
/// Private to lang/lib: the glue between ANTLR's tokens and our source
/// locations, and the typed builder from the parse tree to the AST.
//===----------------------------------------------------------------------===//
#ifndef COLL_LANG_LIB_PARSERIMPL_H
#define COLL_LANG_LIB_PARSERIMPL_H

#include "CollParser.h"
#include "coll/Lang/AST.h"
#include "coll/Lang/Diagnostics.h"

namespace coll::detail {

/// Maps ANTLR character indices (one per byte: the input stream holds one
/// code point per source byte) to locations in the source buffer.
class SourceMap {
public:
  explicit SourceMap(const char *bufStart) : bufStart(bufStart) {}
  llvm::SMLoc loc(size_t index) const { return llvm::SMLoc::getFromPointer(bufStart + index); }
  llvm::SMRange range(const antlr4::Token *tok) const {
    return {loc(tok->getStartIndex()), loc(tok->getStopIndex() + 1)};
  }
  /// The location just past \p tok (where a missing ';' belongs).
  llvm::SMLoc after(const antlr4::Token *tok) const { return loc(tok->getStopIndex() + 1); }
  llvm::SMRange range(antlr4::ParserRuleContext *ctx) const {
    const antlr4::Token *start = ctx->getStart();
    const antlr4::Token *stop = ctx->getStop();
    if (!stop || stop->getStopIndex() + 1 < start->getStartIndex())
      stop = start;
    return {loc(start->getStartIndex()), loc(stop->getStopIndex() + 1)};
  }
  /// The source bytes of \p tok, exactly as in the file.
  llvm::StringRef text(const antlr4::Token *tok) const {
    return llvm::StringRef(bufStart + tok->getStartIndex(),
                           tok->getStopIndex() + 1 - tok->getStartIndex());
  }

private:
  const char *bufStart;
};

/// Builds the owned AST of a syntactically valid parse tree. Errors that the
/// builder can see locally (malformed literals, unknown functions, wrong
/// arguments to copy/reduce) are reported to \p diag.
std::unique_ptr<ast::Module> buildModule(collgrammar::CollParser::ProgramContext &program,
                                         const SourceMap &map, DiagnosticEngine &diag);

} // namespace coll::detail

#endif // COLL_LANG_LIB_PARSERIMPL_H
