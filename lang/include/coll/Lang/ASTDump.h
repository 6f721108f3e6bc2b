//===- ASTDump.h - Stable textual dump of the AST ---------------*- C++ -*-===//
/// \file
/// `collc --emit=ast`: one node per line, indented by depth, with its source
/// range as <line:col-line:col> and, after Sema, each expression's kind and
/// folded constant. The format is stable; lit tests pin it.
//===----------------------------------------------------------------------===//
#ifndef COLL_LANG_ASTDUMP_H
#define COLL_LANG_ASTDUMP_H

#include "coll/Lang/AST.h"

#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

namespace coll {

/// Prints \p module to \p os; locations are resolved through \p srcMgr.
void dumpModule(const ast::Module &module, const llvm::SourceMgr &srcMgr, llvm::raw_ostream &os);

} // namespace coll

#endif // COLL_LANG_ASTDUMP_H
