//===- Pipeline.cpp - The whole of collc as one call ----------------------===//

#include "coll/Compiler/Pipeline.h"

#include "coll/Runtime/PlanIO.h"

#include "llvm/Support/Format.h"

#include <chrono>

using namespace coll;
using namespace coll::compiler;

namespace {
struct PassRow {
  PassId id;
  llvm::StringRef name;
  llvm::StringRef description;
};
const PassRow passRows[] = {
#define COLL_PASS(Id, Name, Description) {PassId::Id, Name, Description},
#include "coll/Compiler/PassList.def"
};
const PassId passIds[] = {
#define COLL_PASS(Id, Name, Description) PassId::Id,
#include "coll/Compiler/PassList.def"
};
} // namespace

llvm::ArrayRef<PassId> compiler::allPasses() {
  return passIds;
}

llvm::StringRef compiler::passName(PassId pass) {
  return passRows[size_t(pass)].name;
}

llvm::StringRef compiler::passDescription(PassId pass) {
  return passRows[size_t(pass)].description;
}

std::optional<PassId> compiler::passNamed(llvm::StringRef name) {
  for (const PassRow &row : passRows)
    if (row.name == name)
      return row.id;
  return std::nullopt;
}

std::unique_ptr<Compilation> compiler::compile(const ast::Module &module,
                                               const ast::AlgorithmDecl &algorithm,
                                               const PipelineOptions &opts,
                                               DiagnosticEngine &diag) {
  auto c = std::make_unique<Compilation>();
  llvm::raw_ostream &os = opts.printStream ? *opts.printStream : llvm::outs();
  // Prints after `pass` when asked; says whether to stop there.
  auto last = std::chrono::steady_clock::now();
  auto after = [&](PassId pass, const std::function<void()> &print) {
    if (opts.timeStream) {
      auto now = std::chrono::steady_clock::now();
      *opts.timeStream << llvm::format("  %-20s %9.3f s\n", passName(pass).str().c_str(),
                                       std::chrono::duration<double>(now - last).count());
      last = now;
    }
    if (opts.printAfter && opts.printAfter(pass)) {
      os << "// -----// IR after " << passName(pass) << " //----- //\n";
      print();
    }
    return opts.stopAfter == pass;
  };

  std::optional<Trace> trace = instantiate(module, algorithm, opts.instantiate, diag);
  if (!trace)
    return nullptr;
  c->trace = std::make_unique<Trace>(std::move(*trace));
  const Trace &t = *c->trace;
  if (after(PassId::Instantiate, [&] { printTrace(t, os); }))
    return c;

  std::optional<VerifyReport> report = verify(t, diag);
  if (!report)
    return nullptr;
  c->report = *report;
  if (after(PassId::Verify, [&] { printVerifyReport(t, c->report, os); }))
    return c;

  Dag dag = buildDag(t);
  if (after(PassId::Dag, [&] { printDag(t, dag, os); })) {
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
  if (after(PassId::SplitTransfers, print))
    return c;
  if (!assignThreadblocks(sched, diag))
    return nullptr;
  if (after(PassId::AssignThreadblocks, print))
    return c;
  // Passes 5-9. The order pairs receives with their forwards (for fusion)
  // unless --fuse=never. Forwarding holds a received slot while waiting to
  // send, which the connection depth cannot always afford, and sending all
  // a threadblock holds before receiving can fill a connection too: where
  // the order can deadlock, lower again without pairs, then in an order
  // found by running the plan with the depth; the last try reports.
  enum class Try { Paired, Unpaired, BySlots };
  Try attempt = opts.fuse != PipelineOptions::Fuse::Never ? Try::Paired : Try::Unpaired;
  for (;;) {
    orderSteps(sched, attempt == Try::Paired);
    // Where no such order is found, the order stays the unpaired one, whose
    // deadlock is reported.
    if (attempt == Try::BySlots)
      orderStepsBySlots(sched);
    if (after(PassId::Order, print))
      return c;
    fuseSteps(sched, opts.fuse != PipelineOptions::Fuse::Never);
    if (after(PassId::Fuse, print))
      return c;
    allocateScratch(sched);
    if (after(PassId::AllocateScratch, print))
      return c;
    insertDependencies(sched);
    if (after(PassId::Dependencies, print))
      return c;
    bool last = attempt == Try::BySlots ||
                (attempt == Try::Paired && opts.fuse == PipelineOptions::Fuse::Always);
    if (checkDeadlock(sched, diag, /*quiet=*/!last))
      break;
    if (last)
      return nullptr;
    // Lower again (the same steps and threadblocks as before,
    // deterministically) for the next try.
    Dag kept = std::move(sched.dag);
    std::optional<Schedule> again = splitTransfers(t, std::move(kept), opts.connectionDepth, diag);
    if (!again)
      return nullptr;
    sched = std::move(*again);
    if (!assignThreadblocks(sched, diag))
      return nullptr;
    attempt = attempt == Try::Paired ? Try::Unpaired : Try::BySlots;
  }
  if (after(PassId::DeadlockCheck,
            [&] { os << "no deadlock with depth " << sched.connectionDepth << "\n"; }))
    return c;
  if (!replicateInstances(sched, diag))
    return nullptr;
  if (after(PassId::Instances, print))
    return c;
  c->plan = emitPlan(sched);
  // The runtime will check every plan it loads; a plan the compiler emits
  // that fails those checks is the compiler's bug, reported as such.
  if (Status st = validatePlan(c->plan); !st.ok()) {
    diag.error(t.algorithm->nameRange,
               "internal error: the emitted plan is invalid: " + st.message());
    return nullptr;
  }
  after(PassId::Emit, [&] { printSchedule(sched, os); });
  c->complete = true;
  return c;
}
