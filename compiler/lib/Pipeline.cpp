//===- Pipeline.cpp - The whole of collc as one call ----------------------===//

#include "coll/Compiler/Pipeline.h"

#include "coll/Runtime/PlanIO.h"

#include "llvm/Support/Format.h"

#include <chrono>

using namespace coll;
using namespace coll::compiler;

std::unique_ptr<Compilation> compiler::compile(const ast::Module &module,
                                               const ast::AlgorithmDecl &algorithm,
                                               const PipelineOptions &opts,
                                               DiagnosticEngine &diag) {
  auto c = std::make_unique<Compilation>();
  llvm::raw_ostream &os = opts.printStream ? *opts.printStream : llvm::outs();
  // Prints after `pass` when asked; says whether to stop there.
  auto last = std::chrono::steady_clock::now();
  auto after = [&](llvm::StringRef pass, const std::function<void()> &print) {
    if (opts.timeStream) {
      auto now = std::chrono::steady_clock::now();
      *opts.timeStream << llvm::format("  %-20s %9.3f s\n", pass.str().c_str(),
                                       std::chrono::duration<double>(now - last).count());
      last = now;
    }
    if (opts.printAfter && opts.printAfter(pass)) {
      os << "// -----// IR after " << pass << " //----- //\n";
      print();
    }
    return opts.stopAfter == pass;
  };

  std::optional<Trace> trace = instantiate(module, algorithm, opts.instantiate, diag);
  if (!trace)
    return nullptr;
  c->trace = std::make_unique<Trace>(std::move(*trace));
  const Trace &t = *c->trace;
  if (after("instantiate", [&] { printTrace(t, os); }))
    return c;

  std::optional<VerifyReport> report = verify(t, diag);
  if (!report)
    return nullptr;
  c->report = *report;
  if (after("verify", [&] { printVerifyReport(t, c->report, os); }))
    return c;

  Dag dag = buildDag(t);
  if (after("dag", [&] { printDag(t, dag, os); })) {
    c->schedule.dag = std::move(dag);
    c->schedule.trace = &t;
    return c;
  }

  std::optional<Schedule> s = splitTransfers(t, std::move(dag), opts.connectionDepth, diag);
  if (!s)
    return nullptr;
  c->schedule = std::move(*s);
  Schedule &sched = c->schedule;
  auto print = [&] { printSchedule(sched, os); };
  if (after("split-transfers", print))
    return c;
  if (!assignThreadblocks(sched, diag))
    return nullptr;
  if (after("assign-threadblocks", print))
    return c;
  // Passes 5-9, with or without moving receives next to their forwards.
  bool pair = opts.fuse != PipelineOptions::Fuse::Never;
  for (;;) {
    orderSteps(sched, pair);
    if (after("order", print))
      return c;
    fuseSteps(sched, opts.fuse != PipelineOptions::Fuse::Never);
    if (after("fuse", print))
      return c;
    allocateScratch(sched);
    if (after("allocate-scratch", print))
      return c;
    insertDependencies(sched);
    if (after("dependencies", print))
      return c;
    bool retry = pair && opts.fuse == PipelineOptions::Fuse::Auto;
    if (checkDeadlock(sched, diag, /*quiet=*/retry))
      break;
    if (!retry)
      return nullptr;
    // Forwarding holds a received slot while waiting to send, which the
    // connection depth cannot always afford: lower again without it (the
    // same steps and threadblocks as before, deterministically).
    Dag kept = std::move(sched.dag);
    std::optional<Schedule> again = splitTransfers(t, std::move(kept), opts.connectionDepth, diag);
    if (!again)
      return nullptr;
    sched = std::move(*again);
    if (!assignThreadblocks(sched, diag))
      return nullptr;
    pair = false;
  }
  if (after("deadlock-check",
            [&] { os << "no deadlock with depth " << sched.connectionDepth << "\n"; }))
    return c;
  if (!replicateInstances(sched, diag))
    return nullptr;
  if (after("instances", print))
    return c;
  c->plan = emitPlan(sched);
  // The runtime will check every plan it loads; a plan the compiler emits
  // that fails those checks is the compiler's bug, reported as such.
  if (Status st = validatePlan(c->plan); !st.ok()) {
    diag.error(t.algorithm->nameRange,
               "internal error: the emitted plan is invalid: " + st.message());
    return nullptr;
  }
  after("emit", [&] { printSchedule(sched, os); });
  c->complete = true;
  return c;
}
