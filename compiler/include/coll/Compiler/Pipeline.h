//===- Pipeline.h - The whole of collc as one call --------------*- C++ -*-===//
/// \file
/// Runs every pass of PassList.def in order on one algorithm, printing the IR
/// after the passes the caller asks for. Tools and tests use this rather
/// than calling passes one by one.
//===----------------------------------------------------------------------===//
#ifndef COLL_COMPILER_PIPELINE_H
#define COLL_COMPILER_PIPELINE_H

#include "coll/Compiler/Lowering.h"
#include "coll/Compiler/Passes.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <functional>
#include <memory>
#include <optional>

namespace coll::compiler {

/// The passes of collc, in pipeline order (PassList.def).
enum class PassId {
#define COLL_PASS(Id, Name, Description) Id,
#include "coll/Compiler/PassList.def"
};

/// Every pass, in pipeline order.
llvm::ArrayRef<PassId> allPasses();
/// The pass's name, as --print-after takes it: "split-transfers".
llvm::StringRef passName(PassId pass);
/// What the pass does, for --list-passes.
llvm::StringRef passDescription(PassId pass);
/// The pass called \p name, if there is one.
std::optional<PassId> passNamed(llvm::StringRef name);

/// Options of a compilation.
struct PipelineOptions {
  InstantiateOptions instantiate;
  /// Slots per connection FIFO the plan is proven deadlock-free with.
  uint32_t connectionDepth = 4;
  /// Fusion: Auto fuses receive-and-forward steps unless that makes the
  /// plan able to deadlock at the connection depth (then it does without);
  /// Always fuses and rejects such a plan; Never does not fuse.
  enum class Fuse { Auto, Always, Never } fuse = Fuse::Auto;
  /// Stop after this pass; none runs everything.
  std::optional<PassId> stopAfter;
  /// Whether to print the IR after the pass.
  std::function<bool(PassId)> printAfter;
  llvm::raw_ostream *printStream = nullptr;
  /// Print each pass's wall time to this stream (--time-passes).
  llvm::raw_ostream *timeStream = nullptr;
};

/// Everything a compilation produced.
struct Compilation {
  std::unique_ptr<Trace> trace;
  VerifyReport report;
  Schedule schedule;
  Plan plan;
  bool complete = false; ///< Ran to the end (not stopped early).
};

/// Compiles \p algorithm. Returns null after reporting an error.
std::unique_ptr<Compilation> compile(const ast::Module &module, const ast::AlgorithmDecl &algorithm,
                                     const PipelineOptions &opts, DiagnosticEngine &diag);

} // namespace coll::compiler

#endif // COLL_COMPILER_PIPELINE_H
