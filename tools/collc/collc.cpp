//===- collc.cpp - The Collc compiler driver ------------------------------===//
//
// collc prog.coll [--emit=ast|summary] [-D name=value] [--algorithm=name]
//
//===----------------------------------------------------------------------===//

#include "OutOfMemory.h"
#include "coll/Compiler/MscclXml.h"
#include "coll/Compiler/Pipeline.h"
#include "coll/Compiler/PlanPage.h"
#include "coll/Compiler/SelectPrograms.h"
#include "coll/Lang/ASTDump.h"
#include "coll/Lang/Frontend.h"
#include "coll/Lang/IntArith.h"
#include "coll/Runtime/Collective.h"
#include "coll/Runtime/Executor.h"
#include "coll/Runtime/PlanIO.h"
#include "coll/Runtime/PlanSimulator.h"
#include "coll/Runtime/Predict.h"
#include "coll/Runtime/Selection.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <tuple>
#include <unistd.h>

using namespace coll;
using namespace coll::ast;
namespace cl = llvm::cl;

namespace {

cl::OptionCategory collcCategory("collc options");

cl::opt<std::string> inputFile(cl::Positional, cl::desc("<input.coll>"), cl::cat(collcCategory));

enum class EmitKind {
  Check,
  Summary,
  Ast,
  Trace,
  VerifyReport,
  Ir,
  PlanText,
  Plan,
  Dot,
  DotDag,
  MscclXml,
  Predict,
  PredictTrace,
  Html
};
cl::opt<EmitKind>
    emit("emit", cl::desc("What to print (default: nothing; compile and check only)"),
         cl::values(clEnumValN(EmitKind::Check, "check", "nothing: compile and check the program"),
                    clEnumValN(EmitKind::Summary, "summary",
                               "what the front end found: algorithms, collectives, parameters"),
                    clEnumValN(EmitKind::Ast, "ast", "the checked AST, one node per line"),
                    clEnumValN(EmitKind::Trace, "trace",
                               "the chunk operations of the program instantiated for N ranks"),
                    clEnumValN(EmitKind::VerifyReport, "verify-report",
                               "what verification proved, including bitwise identity across ranks"),
                    clEnumValN(EmitKind::Ir, "ir", "per-rank, per-threadblock instruction streams"),
                    clEnumValN(EmitKind::PlanText, "plan-text", "the plan as stable text"),
                    clEnumValN(EmitKind::Plan, "plan", "the binary plan (to -o, default plan.bin)"),
                    clEnumValN(EmitKind::Dot, "dot", "the per-threadblock schedule as Graphviz"),
                    clEnumValN(EmitKind::DotDag, "dot-dag", "the dependence DAG as Graphviz"),
                    clEnumValN(EmitKind::Predict, "predict",
                               "predicted time per size on --topology (nccl-tests' columns)"),
                    clEnumValN(EmitKind::PredictTrace, "predict-trace",
                               "the steps of one predicted call of -b bytes on --topology as "
                               "Chrome trace JSON (coll-run --trace's format), to -o or stdout"),
                    clEnumValN(EmitKind::MscclXml, "msccl-xml",
                               "the plan as MSCCL-IR XML (to -o, or standard output)"),
                    clEnumValN(EmitKind::Html, "html",
                               "a self-contained page of the plan: ranks and links, timeline, "
                               "step slider, link use, and with --topology the predicted table "
                               "(to -o, or standard output)")),
         cl::init(EmitKind::Check), cl::cat(collcCategory));

cl::opt<int64_t> nranks("nranks", cl::value_desc("N"),
                        cl::desc("Number of ranks (default: the algorithm's 'with nranks = N')"),
                        cl::cat(collcCategory));

cl::list<std::string> printAfter("print-after", cl::value_desc("pass"), cl::CommaSeparated,
                                 cl::desc("Print the IR after the named pass (see --list-passes)"),
                                 cl::cat(collcCategory));
cl::opt<bool> printAfterAll("print-after-all", cl::desc("Print the IR after every pass"),
                            cl::cat(collcCategory));
cl::opt<bool> listPasses("list-passes", cl::desc("List the passes in pipeline order and exit"),
                         cl::cat(collcCategory));

cl::opt<std::string> outputFile("o", cl::value_desc("file"),
                                cl::desc("Write the binary plan to file ('-': standard output)"),
                                cl::cat(collcCategory));

cl::opt<unsigned> connectionDepth(
    "connection-depth", cl::value_desc("slots"),
    cl::desc("Slots per connection the plan is proven deadlock-free with (default 4)"), cl::init(4),
    cl::cat(collcCategory));

cl::opt<compiler::PipelineOptions::Fuse>
    fuse("fuse", cl::desc("Receive-and-forward fusion (rcs, rrs, rrcs)"),
         cl::values(clEnumValN(compiler::PipelineOptions::Fuse::Auto, "auto",
                               "fuse unless the plan could then deadlock (default)"),
                    clEnumValN(compiler::PipelineOptions::Fuse::Always, "always",
                               "fuse, and reject a plan that could then deadlock"),
                    clEnumValN(compiler::PipelineOptions::Fuse::Never, "never",
                               "do not fuse (neither forwarding nor local chains)")),
         cl::init(compiler::PipelineOptions::Fuse::Auto), cl::cat(collcCategory));

cl::opt<bool> timePasses("time-passes", cl::desc("Print the wall time of each pass"),
                         cl::cat(collcCategory));

cl::list<std::string> defines("D", cl::Prefix, cl::value_desc("name=value"),
                              cl::desc("Override the default of parameter 'name'"),
                              cl::cat(collcCategory));

cl::opt<std::string> algorithmName("algorithm", cl::value_desc("name"),
                                   cl::desc("The algorithm to use when the file declares several"),
                                   cl::cat(collcCategory));

cl::opt<bool> importMscclXml(
    "import-msccl-xml",
    cl::desc("The input is MSCCL-IR XML (msccl-tools, the MSCCL executor, RCCL): import it as "
             "the plan, and check what it computes"),
    cl::cat(collcCategory));

cl::opt<bool> verifyOnly("verify-only",
                         cl::desc("With --import-msccl-xml: report every problem the simulation "
                                  "finds, write nothing"),
                         cl::cat(collcCategory));

cl::opt<std::string> mscclLimits(
    "msccl-limits", cl::value_desc("runtime"),
    cl::desc("--emit=msccl-xml: the limits of executor (default), rccl, legacy or none"),
    cl::init("executor"), cl::cat(collcCategory));

cl::opt<std::string> topologyFile("topology", cl::value_desc("file"),
                                  cl::desc("--emit=predict: the system to predict on"),
                                  cl::cat(collcCategory));
cl::opt<std::string> minBytes("b", cl::value_desc("size"),
                              cl::desc("--emit=predict: the smallest size (default 1K)"),
                              cl::init("1K"), cl::cat(collcCategory));
cl::opt<std::string> maxBytes("e", cl::value_desc("size"),
                              cl::desc("--emit=predict: the largest size (default 1G)"),
                              cl::init("1G"), cl::cat(collcCategory));
cl::opt<unsigned> sizeFactor("f", cl::value_desc("n"),
                             cl::desc("--emit=predict: the factor between sizes (default 2)"),
                             cl::init(2), cl::cat(collcCategory));
cl::opt<std::string>
    timelineSize("timeline-size", cl::value_desc("bytes"), cl::init("1M"),
                 cl::desc("--emit=html: the size of the call on the timeline (default 1M)"),
                 cl::cat(collcCategory));

cl::opt<std::string> predictSlice(
    "slice-bytes", cl::value_desc("bytes"), cl::init(""),
    cl::desc("--emit=predict, html: the bytes of a chunk a step moves at most (default: the "
             "runtime's 16384 elements)"),
    cl::cat(collcCategory));

cl::opt<std::string> predictType("dtype", cl::value_desc("type"),
                                 cl::desc("--emit=predict: the data type (default f32)"),
                                 cl::init("f32"), cl::cat(collcCategory));
cl::opt<std::string>
    predictProtocol("protocol", cl::value_desc("name"),
                    cl::desc("--emit=predict: Simple, LL or LL128 (default: the plan's)"),
                    cl::cat(collcCategory));

cl::opt<unsigned> predictJobs(
    "predict-jobs", cl::value_desc("n"),
    cl::desc("--emit=predict and select: simulate up to n sizes (and programs) at once, each "
             "with its own memory (default 0: the machine's CPUs, at most 8)"),
    cl::init(0), cl::cat(collcCategory));
cl::opt<bool> predictOutOfPlace(
    "out-of-place",
    cl::desc("--emit=predict: predict out-of-place calls, with the copies the executors make "
             "around the plan (default: the plan alone, as an in-place call runs it)"),
    cl::cat(collcCategory));

cl::opt<std::string>
    selectRanks("select-ranks", cl::value_desc("list"),
                cl::desc("collc select: the rank counts to choose for (default 2,4,8)"),
                cl::init("2,4,8"), cl::cat(collcCategory));
cl::opt<std::string> stdlibDir(
    "stdlib", cl::value_desc("dir"),
    cl::desc("collc select: the programs to choose from (default: $COLLC_STDLIB, else the "
             "standard library collc was built with)"),
    cl::cat(collcCategory));

cl::opt<unsigned> errorLimit("error-limit", cl::value_desc("n"),
                             cl::desc("Stop after n errors (0: no limit; default 20)"),
                             cl::init(20), cl::cat(collcCategory));

/// The source text of \p e, for the summary.
llvm::StringRef sourceText(const Expr *e) {
  llvm::SMRange r = e->getRange();
  return llvm::StringRef(r.Start.getPointer(), r.End.getPointer() - r.Start.getPointer());
}

/// Counts what an algorithm body does, for the summary.
struct BodyStats {
  unsigned copies = 0, reduces = 0, loops = 0, requires_ = 0, maxLoopDepth = 0;

  void stmt(const Stmt &s, unsigned loopDepth) {
    if (auto *b = llvm::dyn_cast<BlockStmt>(&s)) {
      for (const auto &c : b->body)
        stmt(*c, loopDepth);
    } else if (auto *f = llvm::dyn_cast<ForStmt>(&s)) {
      ++loops;
      maxLoopDepth = std::max(maxLoopDepth, loopDepth + 1);
      stmt(*f->body, loopDepth + 1);
    } else if (auto *i = llvm::dyn_cast<IfStmt>(&s)) {
      stmt(*i->thenBlock, loopDepth);
      if (i->elseStmt)
        stmt(*i->elseStmt, loopDepth);
    } else if (llvm::isa<RequireStmt>(&s)) {
      ++requires_;
    } else if (auto *l = llvm::dyn_cast<LetStmt>(&s)) {
      expr(*l->value);
    } else if (auto *a = llvm::dyn_cast<AssignStmt>(&s)) {
      expr(*a->value);
    } else if (auto *e = llvm::dyn_cast<ExprStmt>(&s)) {
      expr(*e->expr);
    }
  }
  void expr(const Expr &e) {
    if (auto *t = llvm::dyn_cast<TransferExpr>(&e)) {
      ++(llvm::isa<CopyExpr>(&e) ? copies : reduces);
      expr(*t->src);
    } else if (auto *c = llvm::dyn_cast<CondExpr>(&e)) {
      expr(*c->thenExpr);
      expr(*c->elseExpr);
    }
  }
};

void printSummary(const Module &m, const std::vector<std::pair<std::string, int64_t>> &overrides,
                  llvm::raw_ostream &os) {
  os << m.fileName << ": front end OK\n";
  for (ParamDecl *p : m.params()) {
    os << "  param " << p->name << " = " << sourceText(p->defaultValue.get());
    for (const auto &[name, value] : overrides)
      if (name == p->name)
        os << " (-D " << value << ")";
    os << "\n";
  }
  for (CollectiveDecl *c : m.collectives()) {
    unsigned pre = 0, post = 0;
    for (const auto &item : c->items) {
      pre += llvm::isa<PreStmt>(item.get());
      post += llvm::isa<PostStmt>(item.get());
    }
    os << "  collective " << c->name << ": input[" << sourceText(c->inputSize->size.get())
       << "], output[" << sourceText(c->outputSize->size.get()) << "], " << pre << " pre-condition"
       << (pre == 1 ? "" : "s") << ", " << post << " post-condition" << (post == 1 ? "" : "s")
       << "\n";
  }
  for (AlgorithmDecl *a : m.algorithms()) {
    os << "  algorithm " << a->name << " implements " << a->collectiveName << "(";
    for (size_t i = 0; i < a->collParamNames.size(); ++i) {
      os << (i ? ", " : "") << a->collParamNames[i] << " = ";
      if (const Expr *v = a->collParamValues[i])
        os << sourceText(v);
      else
        os << "1";
    }
    os << ")\n";
    os << "    "
       << (a->inplaceExpr ? ("in-place if " + sourceText(a->inplaceExpr)).str()
           : a->inplace   ? "in-place"
                          : "out-of-place")
       << ", protocol " << protocolName(a->protocol) << ", instances "
       << (a->instances ? sourceText(a->instances) : llvm::StringRef("1")) << ", default ranks ";
    if (a->nranksDefault)
      os << *a->nranksDefault->getConstant();
    else
      os << "(none)";
    os << "\n";
    for (const ScratchStmt *s : a->scratch)
      os << "    scratch " << s->buffer->name << "[" << sourceText(s->size.get()) << "]\n";
    BodyStats stats;
    stats.stmt(*a->body, 0);
    os << "    " << stats.copies << " copy, " << stats.reduces << " reduce, " << stats.loops
       << " loop" << (stats.loops == 1 ? "" : "s") << " (nested " << stats.maxLoopDepth
       << " deep), " << stats.requires_ << " require, " << a->numSlots << " variable"
       << (a->numSlots == 1 ? "" : "s") << "\n";
  }
}

} // namespace

/// Large programs spend much of their time in page faults and TLB misses
/// (a ring allreduce for 1024 ranks touches about half a gigabyte). glibc's
/// malloc backs its memory with transparent huge pages when asked through
/// GLIBC_TUNABLES, which it reads only at start-up, so collc restarts itself
/// once with that set, unless the caller set GLIBC_TUNABLES already.
static void restartWithHugePages(char **argv);

/// See main: the compilation, kept reachable until exit.
coll::compiler::Compilation *retainedCompilation = nullptr;

static void restartWithHugePages(char **argv) {
  if (getenv("GLIBC_TUNABLES") || getenv("COLLC_NO_HUGEPAGES"))
    return;
  setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=1", 1);
  execv("/proc/self/exe", argv);
  unsetenv("GLIBC_TUNABLES"); // could not restart: go on as we are
}

/// Writes \p bytes to \p out ('-': standard output); false after an error.
bool writeOutput(llvm::StringRef bytes, const std::string &out, DiagnosticEngine &diag) {
  if (out == "-") {
    llvm::outs() << bytes;
    return true;
  }
  std::error_code ec;
  llvm::raw_fd_ostream file(out, ec, llvm::sys::fs::OF_None);
  if (ec) {
    diag.errorNoLoc("cannot write '" + out + "': " + ec.message());
    return false;
  }
  file << bytes;
  file.close();
  if (file.has_error()) {
    diag.errorNoLoc("cannot write '" + out + "': " + file.error().message());
    file.clear_error();
    return false;
  }
  return true;
}

/// Writes \p plan to \p out ('-': standard output); false after an error.
bool writePlanTo(const Plan &plan, const std::string &out, DiagnosticEngine &diag) {
  std::vector<uint8_t> bytes = serializePlan(plan);
  return writeOutput(llvm::StringRef(reinterpret_cast<const char *>(bytes.data()), bytes.size()),
                     out, diag);
}

/// -b and -e into \p lo and \p hi, --dtype into \p type, and -f checked;
/// false after reporting what is wrong.
bool parseSweep(DiagnosticEngine &diag, uint64_t &lo, uint64_t &hi, DataType &type) {
  if (!parseByteSize(minBytes, lo) || !parseByteSize(maxBytes, hi) || lo == 0 || hi < lo) {
    diag.errorNoLoc("-b and -e take sizes such as 1K and 1G, the first at most the second");
    return false;
  }
  if (sizeFactor < 2) {
    diag.errorNoLoc("-f takes a factor of at least 2");
    return false;
  }
  if (!parseDataType(predictType.c_str(), type)) {
    diag.errorNoLoc("unknown --dtype '" + llvm::Twine(predictType) + "'");
    return false;
  }
  return true;
}

/// --slice-bytes into \p options (elements of \p type); false after
/// reporting a bad size.
bool parseSlice(DiagnosticEngine &diag, DataType type, PredictOptions &options) {
  if (predictSlice.empty())
    return true;
  uint64_t bytes = 0;
  if (!parseByteSize(predictSlice, bytes) || bytes < dataTypeSize(type)) {
    diag.errorNoLoc("--slice-bytes takes a size of at least one element, such as 64K");
    return false;
  }
  options.sliceElements = bytes / dataTypeSize(type);
  return true;
}

/// --topology's file, or null after reporting why not. An XML error
/// already reads "file:line:col: error: ..." and is printed as it is.
Result<Topology> loadTopologyFile(DiagnosticEngine &diag) {
  Result<Topology> topo = loadTopology(topologyFile);
  if (!topo) {
    if (topo.message().find(": error: ") != std::string::npos)
      llvm::errs() << topo.message() << "\n";
    else
      diag.errorNoLoc(topo.message());
  }
  return topo;
}

/// The options of --emit=predict and predict-trace: --slice-bytes,
/// --protocol and --out-of-place for calls of \p type; false after a
/// diagnostic.
bool parsePredictOptions(DiagnosticEngine &diag, DataType type, PredictOptions &options) {
  if (!parseSlice(diag, type, options))
    return false;
  if (!predictProtocol.empty()) {
    if (!parseProtocol(predictProtocol.c_str(), options.protocol)) {
      diag.errorNoLoc("--protocol takes Simple, LL or LL128, not '" + llvm::Twine(predictProtocol) +
                      "'");
      return false;
    }
    options.forceProtocol = true;
  }
  options.outOfPlace = predictOutOfPlace;
  return true;
}

/// What --emit=predict and predict-trace share: the topology, the sizes
/// (-b, -e), the data type and the options, and a size's elements per
/// count (the larger buffer's units).
struct PredictSetup {
  Topology topo;
  uint64_t lo = 0, hi = 0;
  DataType type = DataType::Float32;
  uint64_t es = 4, perCount = 1;
  PredictOptions options;
};

/// PredictSetup of --emit=\p emitName for \p plan; nothing after a
/// diagnostic.
std::optional<PredictSetup> predictSetup(const Plan &plan, DiagnosticEngine &diag,
                                         const char *emitName) {
  if (topologyFile.empty()) {
    diag.errorNoLoc("--emit=" + llvm::Twine(emitName) + " needs --topology <file>");
    return std::nullopt;
  }
  Result<Topology> topo = loadTopologyFile(diag);
  if (!topo)
    return std::nullopt;
  PredictSetup s;
  s.topo = std::move(*topo);
  if (!parseSweep(diag, s.lo, s.hi, s.type) || !parsePredictOptions(diag, s.type, s.options))
    return std::nullopt;
  const BufferElements unit = planBufferElements(plan.info, 1);
  s.perCount = std::max<uint64_t>(1, std::max(unit.input, unit.output));
  s.es = dataTypeSize(s.type);
  return s;
}

/// --emit=predict-trace: the steps of one predicted call of -b bytes of
/// \p plan on --topology as Chrome trace JSON, the format in which
/// coll-run --trace writes a measured run (one process per rank, one track
/// per threadblock, times from the call's first step), to -o or standard
/// output: the two open side by side, and bench/compare-trace.py sets them
/// step by step against each other.
int writePredictedTrace(const Plan &plan, DiagnosticEngine &diag) {
  std::optional<PredictSetup> setup = predictSetup(plan, diag, "predict-trace");
  if (!setup)
    return 1;
  PredictOptions options = setup->options;
  options.recordSpans = true;
  Result<Prediction> p =
      predictPlan(plan, setup->topo, setup->lo / setup->es / setup->perCount, setup->type, options);
  if (!p) {
    diag.errorNoLoc(p.message());
    return 1;
  }
  Timeline timeline;
  timeline.protocol = p->protocol;
  for (const StepSpan &s : p->spans) {
    const Instruction &in = plan.ranks[s.rank].threadblocks[s.tb].steps[s.step];
    TraceEvent e;
    e.rank = s.rank;
    e.tb = s.tb;
    e.slice = s.slice;
    e.step = s.step;
    e.op = in.op;
    e.count = in.count;
    e.beginUs = s.start * 1e6;
    e.endUs = s.end * 1e6;
    timeline.events.push_back(e);
  }
  std::sort(timeline.events.begin(), timeline.events.end(),
            [](const TraceEvent &a, const TraceEvent &b) {
              return std::tie(a.rank, a.tb, a.beginUs, a.slice, a.step) <
                     std::tie(b.rank, b.tb, b.beginUs, b.slice, b.step);
            });
  std::ostringstream json;
  timeline.writeChromeTrace(json, plan);
  return writeOutput(json.str(), outputFile.empty() ? "-" : std::string(outputFile), diag) ? 0 : 1;
}

/// --emit=predict: \p plan's predicted time per size on --topology, as
/// nccl-tests prints measurements.
int printPrediction(const Plan &plan, DiagnosticEngine &diag) {
  std::optional<PredictSetup> setup = predictSetup(plan, diag, "predict");
  if (!setup)
    return 1;
  const Topology *topo = &setup->topo;
  const uint64_t lo = setup->lo, hi = setup->hi, perCount = setup->perCount, es = setup->es;
  const DataType type = setup->type;
  const PredictOptions &options = setup->options;
  llvm::outs() << "# " << printablePlanName(plan.info.name) << " ("
               << collectiveName(plan.info.collective) << "), " << plan.info.nranks
               << " ranks, predicted on '" << topo->name << "', " << dataTypeName(type)
               << ", protocol "
               << protocolName(options.forceProtocol ? options.protocol : plan.info.protocol)
               << (options.outOfPlace ? ", out of place" : "") << "\n";
  llvm::outs() << "# " << (topo->ranksPerNode ? std::to_string(topo->ranksPerNode) : "all")
               << " ranks per node, ports of " << llvm::format("%.6g", topo->intra.bandwidth / 1e9)
               << " GB/s";
  if (topo->ranksPerNode)
    llvm::outs() << ", " << topo->nicsPerNode << " NICs of "
                 << llvm::format("%.6g", topo->inter.bandwidth / 1e9) << " GB/s per node";
  if (topo->cpusPerNode)
    llvm::outs() << ", " << topo->cpusPerNode << " CPUs per node";
  llvm::outs() << "\n";
  // Ranks that outnumber their node's CPUs: what each trip waits for.
  const uint32_t onNode =
      topo->ranksPerNode ? std::min(topo->ranksPerNode, plan.info.nranks) : plan.info.nranks;
  if (topo->cpusPerNode && onNode > topo->cpusPerNode && topo->switchLatency > 0)
    llvm::outs() << llvm::format(
        "# %u ranks on %u CPUs: each trip waits for %.3g switches of %.3g us (switch-latency)\n",
        onNode, topo->cpusPerNode, double(onNode) / topo->cpusPerNode - 1,
        topo->switchLatency * 1e6);
  llvm::outs()
      << "#     size (B)          count    time (us)      algbw      busbw  last to finish\n"
      << "#                                              (GB/s)     (GB/s)\n";
  // The sizes, simulated side by side; their rows in order.
  std::vector<PredictCall> calls;
  for (uint64_t bytes : sweepSizes(lo, hi, sizeFactor))
    calls.push_back(PredictCall{&plan, bytes / es / perCount});
  std::vector<Result<Prediction>> results = predictPlans(calls, *topo, type, options, predictJobs);
  for (size_t i = 0; i < calls.size(); ++i) {
    const uint64_t count = calls[i].count;
    Result<Prediction> &p = results[i];
    if (!p) {
      diag.errorNoLoc(p.message());
      return 1;
    }
    // A call bound by its node's CPUs ends when their work does.
    const bool cpuBound = p->cpuSeconds > 0 && p->cpuSeconds >= p->seconds;
    llvm::outs() << llvm::format(
        "  %12llu %14llu %12.2f %10.2f %10.2f  ", (unsigned long long)(count * es * perCount),
        (unsigned long long)count, p->seconds * 1e6, p->algbw / 1e9, p->busbw / 1e9);
    if (cpuBound)
      llvm::outs() << "the CPUs of node " << p->cpuNode << "\n";
    else
      llvm::outs() << "rank " << p->lastRank << " tb " << p->lastTb << "\n";
    if (i + 1 == calls.size()) {
      // The largest size: where its time went, by the busiest links.
      std::vector<LinkUsage> links = p->links;
      std::stable_sort(links.begin(), links.end(),
                       [](const LinkUsage &a, const LinkUsage &b) { return a.busy > b.busy; });
      llvm::outs() << "# busiest links at " << count * es * perCount
                   << " B (busy: share of the run; load: bytes / capacity / run):\n";
      for (size_t k = 0; k < links.size() && k < 5; ++k) {
        const LinkUsage &l = links[k];
        const double run = p->seconds > 0 ? p->seconds : 1;
        llvm::outs() << llvm::format("#   %-24s busy %5.1f%%  load %5.1f%%  %.6g GB/s\n",
                                     l.name.c_str(), 100 * l.busy / run,
                                     100 * l.bytes / l.capacity / run, l.capacity / 1e9);
      }
      const CriticalPath &cp = p->critical;
      llvm::outs() << llvm::format(
          "# critical path at %llu B, to rank %u tb %u: %u steps, %u hops (messages and freed "
          "slots; %u between nodes): steps' fixed cost %.2f us, moving data %.2f us, link latency "
          "%.2f us, "
          "waiting %.2f us\n",
          (unsigned long long)(count * es * perCount), p->lastRank, p->lastTb, cp.steps, cp.hops,
          cp.betweenNodes, cp.fixed * 1e6, cp.moving * 1e6, cp.latency * 1e6, cp.waiting * 1e6);
      if (p->cpuSeconds > 0)
        llvm::outs() << llvm::format(
            "# the CPUs of node %u: %.2f us of steps, copies and calls per CPU (%u CPUs)%s\n",
            p->cpuNode, p->cpuSeconds * 1e6, topo->cpusPerNode,
            cpuBound ? ", longer than the steps' own chain: the call takes that" : "");
    }
  }
  return 0;
}

/// `collc select --topology T`: the selection table of the standard
/// library's programs predicted fastest on T, to -o or standard output.
int runSelect(DiagnosticEngine &diag) {
  if (topologyFile.empty()) {
    diag.errorNoLoc("collc select needs --topology <file>");
    return 1;
  }
  Result<Topology> topo = loadTopologyFile(diag);
  if (!topo)
    return 1;
  compiler::SelectOptions options;
  options.programDir = stdlibDir;
  if (options.programDir.empty())
    if (const char *env = std::getenv("COLLC_STDLIB"))
      options.programDir = env;
#ifdef COLLC_SOURCE_STDLIB
  if (options.programDir.empty())
    options.programDir = COLLC_SOURCE_STDLIB;
#endif
  if (options.programDir.empty()) {
    diag.errorNoLoc("collc select: no standard library; pass --stdlib <dir>");
    return 1;
  }
  for (llvm::StringRef rest = selectRanks; !rest.empty();) {
    auto [word, tail] = rest.split(',');
    unsigned n = 0;
    if (word.getAsInteger(10, n) || n < 1 || n > 1u << 20) {
      diag.errorNoLoc("--select-ranks takes rank counts such as 2,4,8, not '" +
                      llvm::Twine(selectRanks) + "'");
      return 1;
    }
    options.ranks.push_back(n);
    rest = tail;
  }
  if (!parseSweep(diag, options.minBytes, options.maxBytes, options.type))
    return 1;
  options.factor = sizeFactor;
  options.threads = predictJobs;
  if (!outputFile.empty()) {
    llvm::SmallString<256> dir(outputFile);
    llvm::sys::fs::make_absolute(dir);
    llvm::sys::path::remove_filename(dir);
    options.tableDir = std::string(dir);
    llvm::SmallString<256> lib(options.programDir);
    llvm::sys::fs::make_absolute(lib);
    options.programDir = std::string(lib);
  }
  Result<std::string> table = compiler::selectPrograms(*topo, options);
  if (!table) {
    diag.errorNoLoc(table.message());
    return 1;
  }
  return writeOutput(*table, outputFile.empty() ? "-" : std::string(outputFile), diag) ? 0 : 1;
}

/// --emit=html: \p plan's page, to -o or standard output.
int writePlanPage(const Plan &plan, DiagnosticEngine &diag) {
  compiler::PlanPageOptions options;
  std::optional<Topology> topo;
  if (!topologyFile.empty()) {
    Result<Topology> t = loadTopologyFile(diag);
    if (!t)
      return 1;
    topo = std::move(*t);
    options.topology = &*topo;
  }
  uint64_t lo = 0, hi = 0;
  DataType type;
  if (!parseSweep(diag, lo, hi, type))
    return 1;
  if (!parseByteSize(timelineSize, options.timelineBytes) || options.timelineBytes == 0) {
    diag.errorNoLoc("--timeline-size takes a size such as 64K or 1M");
    return 1;
  }
  PredictOptions slice;
  if (!parseSlice(diag, type, slice))
    return 1;
  options.sliceElements = slice.sliceElements;
  options.minBytes = lo;
  options.maxBytes = hi;
  options.factor = sizeFactor;
  options.threads = predictJobs;
  options.type = type;
  options.source = inputFile == "-" ? "" : llvm::sys::path::filename(inputFile).str();
  Result<std::string> page = compiler::renderPlanPage(plan, options);
  if (!page) {
    diag.errorNoLoc(page.message());
    return 1;
  }
  return writeOutput(*page, outputFile.empty() ? "-" : std::string(outputFile), diag) ? 0 : 1;
}

/// --emit=msccl-xml: \p plan as MSCCL-IR XML, to -o or standard output.
int writeMscclXml(const Plan &plan, DiagnosticEngine &diag) {
  const compiler::MscclLimits *limits = compiler::MscclLimits::named(mscclLimits);
  if (!limits) {
    diag.errorNoLoc("--msccl-limits: '" + mscclLimits + "' is not executor, rccl, legacy or none");
    return 1;
  }
  std::string xml;
  if (Status s = compiler::exportMscclXml(plan, *limits, xml); !s) {
    diag.errorNoLoc(s.message());
    return 1;
  }
  return writeOutput(xml, outputFile.empty() ? "-" : std::string(outputFile), diag) ? 0 : 1;
}

/// The largest MSCCL XML file read (256 MiB, some 2 GiB of memory to
/// import): a device or a larger file is
/// refused after that much, not read until memory runs out.
constexpr uint64_t maxMscclXmlBytes = uint64_t(1) << 28;

/// collc --import-msccl-xml: read the XML as a plan, simulate it against
/// its collective, print or write it.
int importXml(DiagnosticEngine &diag) {
  std::string text, error;
  if (!readFileBounded(inputFile, maxMscclXmlBytes, text, error)) {
    diag.errorNoLoc(error);
    return 1;
  }
  compiler::MscclImportOptions options;
  options.connectionDepth = connectionDepth;
  compiler::MscclAlgoInfo algo;
  Result<Plan> plan = compiler::importMscclXml(text, inputFile, options, &algo);
  // Warnings stop at --error-limit too (0: all of them).
  const size_t shownWarnings =
      errorLimit ? std::min<size_t>(errorLimit, algo.warnings.size()) : algo.warnings.size();
  for (size_t i = 0; i < shownWarnings; ++i)
    llvm::errs() << algo.warnings[i] << "\n";
  if (shownWarnings < algo.warnings.size())
    llvm::errs() << inputFile << ": note: " << algo.warnings.size() - shownWarnings
                 << " more warnings not shown (--error-limit=0 shows all)\n";
  if (!plan) {
    llvm::errs() << plan.message() << "\n";
    return 1;
  }
  SimulateOptions sim;
  sim.depth = connectionDepth;
  sim.requireRaceCheck = true;
  // Problems name the file's step numbers (nops included).
  sim.position = [&algo](uint32_t rank, uint32_t tb, uint32_t step) {
    return algo.positions[rank][tb][step];
  };
  sim.maxProblems = verifyOnly ? (errorLimit ? errorLimit : ~size_t(0)) : 1;
  // A custom collective's contract is what it computes.
  const bool custom = plan->info.collective == CollectiveKind::Custom;
  PlanContract derived;
  if (custom)
    sim.derivedContract = &derived;
  SimulateReport report = simulatePlan(*plan, sim);
  for (const std::string &p : report.problems)
    llvm::errs() << compiler::mscclProblem(algo, inputFile, p) << "\n";
  if (!report.ok())
    return 1;
  if (custom) {
    plan->contract = std::move(derived);
    if (Status s = validatePlan(*plan); !s) {
      llvm::errs() << compiler::mscclProblem(algo, inputFile, s.message(), /*folded=*/true) << "\n";
      return 1;
    }
  }
  if (verifyOnly) {
    llvm::outs() << inputFile << ": " << printablePlanName(plan->info.name) << " ("
                 << collectiveName(plan->info.collective) << ", " << plan->info.nranks << " gpus"
                 << (plan->info.inplace ? ", in place" : "") << "): ";
    if (custom) {
      const PlanContract &c = *plan->contract;
      const size_t defined =
          c.outputs.size() - size_t(std::count(c.outputs.begin(), c.outputs.end(), 0u));
      llvm::outs() << "its contract is what it computes (" << defined << " of " << c.outputs.size()
                   << " output chunks defined, " << c.numTerms()
                   << (c.numTerms() == 1 ? " term" : " terms") << "), and it finishes with ";
    } else {
      llvm::outs() << "computes its collective and finishes with ";
    }
    llvm::outs() << sim.depth << (sim.depth == 1 ? " slot" : " slots") << " per connection ("
                 << report.stepsRun << " steps)\n";
    return 0;
  }
  if (emit == EmitKind::PlanText) {
    std::ostringstream text;
    printPlanText(*plan, text);
    llvm::outs() << text.str();
  } else if (emit == EmitKind::MscclXml) {
    return writeMscclXml(*plan, diag);
  } else if (emit == EmitKind::Html) {
    return writePlanPage(*plan, diag);
  } else if (emit != EmitKind::Check && emit != EmitKind::Plan) {
    diag.errorNoLoc("--import-msccl-xml emits the plan (--emit=plan, plan-text, html or -o), "
                    "nothing else");
    return 1;
  }
  std::string out = outputFile;
  if (out.empty() && emit == EmitKind::Plan)
    out = "plan.bin";
  if (out.empty())
    return 0;
  return writePlanTo(*plan, out, diag) ? 0 : 1;
}

int main(int argc, char **argv) {
  restartWithHugePages(argv);
  llvm::InitLLVM init(argc, argv);
  coll::tools::exitCleanlyWhenOutOfMemory("collc");
  // LLVM's containers report a failed allocation through their own hook.
  llvm::install_bad_alloc_error_handler(
      [](void *, const char *, bool) { coll::tools::detail::outOfMemoryExit(); });
  cl::HideUnrelatedOptions(collcCategory);
  cl::SetVersionPrinter([](llvm::raw_ostream &os) { os << "collc 0.1\n"; });
  cl::ParseCommandLineOptions(
      argc, argv,
      "collc: the compiler of .coll collective-communication programs\n\n"
      "  collc prog.coll --nranks 8 -o plan.bin   compile, verify and write the plan\n"
      "  collc prog.coll --emit=verify-report     what verification proved\n"
      "  collc prog.coll --emit=plan-text         the plan as text\n"
      "  collc prog.coll --emit=ast               the checked AST\n"
      "  collc prog.coll --emit=predict --topology T   predicted time per size on T\n"
      "  collc select --topology T -o t.select    the fastest program per size on T\n");

  if (listPasses) {
    for (compiler::PassId pass : compiler::allPasses())
      llvm::outs() << llvm::left_justify(compiler::passName(pass), 14) << " "
                   << compiler::passDescription(pass) << "\n";
    return 0;
  }

  llvm::SourceMgr srcMgr;
  DiagnosticEngine diag(srcMgr);
  if (inputFile.empty()) {
    diag.errorNoLoc("no input file; usage: collc <input.coll> [options] (see --help)");
    return 1;
  }
  if (connectionDepth < 1 || connectionDepth > PlanLimits::maxConnectionDepth) {
    diag.errorNoLoc("--connection-depth " + llvm::Twine(connectionDepth) + " is out of range [1, " +
                    llvm::Twine(PlanLimits::maxConnectionDepth) + "]");
    return 1;
  }
  if (importMscclXml)
    return importXml(diag);
  if (inputFile == "select")
    return runSelect(diag);
  if (verifyOnly) {
    diag.errorNoLoc("--verify-only goes with --import-msccl-xml");
    return 1;
  }
  std::vector<compiler::PassId> printAfterPasses;
  for (const std::string &p : printAfter) {
    std::optional<compiler::PassId> pass = compiler::passNamed(p);
    if (!pass) {
      diag.errorNoLoc("--print-after: unknown pass '" + p + "'; --list-passes lists them");
      return 1;
    }
    printAfterPasses.push_back(*pass);
  }
  diag.setErrorLimit(errorLimit);

  std::vector<std::pair<std::string, int64_t>> overrides;
  for (const std::string &d : defines) {
    auto [name, value] = llvm::StringRef(d).split('=');
    std::optional<int64_t> v = parseIntLiteral(std::string_view(value.data(), value.size()),
                                               /*allowSign=*/true);
    if (name.empty() || !v) {
      diag.errorNoLoc("bad -D '" + d + "': expected name=integer");
      return 1;
    }
    for (const auto &[prev, unused] : overrides)
      if (prev == name) {
        diag.errorNoLoc("-D " + name + " is given twice");
        return 1;
      }
    overrides.emplace_back(name.str(), *v);
  }

  unsigned bufferId = loadSourceFile(inputFile, diag);
  if (!bufferId)
    return 1;
  std::unique_ptr<Module> module = parseAndAnalyze(bufferId, diag);
  if (!module)
    return 1;

  // -D names must be parameters of the file.
  std::vector<std::string> paramNames;
  for (ParamDecl *p : module->params())
    paramNames.push_back(p->name);
  for (const auto &[name, value] : overrides)
    if (std::find(paramNames.begin(), paramNames.end(), name) == paramNames.end()) {
      // A near miss by spelling, else the names there are.
      const std::string guess = closestName(name, paramNames);
      std::string known;
      for (const std::string &p : paramNames)
        known += (known.empty() ? "'" : ", '") + p + "'";
      diag.errorNoLoc("-D " + name + ": '" + inputFile + "' declares no parameter '" + name + "'" +
                      (!guess.empty()  ? "; did you mean '" + guess + "'?"
                       : known.empty() ? " (it declares none)"
                                       : "; it declares " + known));
    }

  std::vector<AlgorithmDecl *> algorithms = module->algorithms();
  AlgorithmDecl *algorithm = algorithms.empty() ? nullptr : algorithms.front();
  if (algorithms.empty()) {
    diag.errorNoLoc("'" + inputFile + "' declares no algorithm");
  } else if (!algorithmName.empty()) {
    algorithm = nullptr;
    for (AlgorithmDecl *a : algorithms)
      if (a->name == algorithmName)
        algorithm = a;
    if (!algorithm) {
      std::string names;
      for (AlgorithmDecl *a : algorithms)
        names += (names.empty() ? "'" : ", '") + a->name + "'";
      diag.errorNoLoc("'" + inputFile + "' declares no algorithm '" + algorithmName +
                      "'; it declares " + names);
    }
  } else if (algorithms.size() > 1 && emit != EmitKind::Summary && emit != EmitKind::Ast) {
    std::string names;
    for (AlgorithmDecl *a : algorithms)
      names += (names.empty() ? "'" : ", '") + a->name + "'";
    diag.errorNoLoc("'" + inputFile + "' declares several algorithms (" + names +
                    "); choose one with --algorithm=name");
  }
  if (diag.hasErrors())
    return 1;

  // Front-end outputs.
  if (emit == EmitKind::Summary) {
    printSummary(*module, overrides, llvm::outs());
    return 0;
  }
  if (emit == EmitKind::Ast) {
    dumpModule(*module, srcMgr, llvm::outs());
    return 0;
  }

  // The rank count: --nranks, else the algorithm's default.
  compiler::InstantiateOptions opts;
  if (nranks.getNumOccurrences()) {
    if (nranks < 1 || nranks > int64_t(opts.maxRanks)) {
      diag.errorNoLoc("--nranks " + llvm::Twine(nranks) + " is out of range [1, " +
                      llvm::Twine(opts.maxRanks) + "]");
      return 1;
    }
    opts.nranks = uint32_t(nranks);
  } else if (algorithm->nranksDefault) {
    opts.nranks = uint32_t(*algorithm->nranksDefault->getConstant());
  } else {
    diag.error(algorithm->nameRange, "no rank count for algorithm '" + algorithm->name +
                                         "': pass --nranks N, or declare a default with "
                                         "'with nranks = N'");
    return 1;
  }
  for (const auto &[name, value] : overrides)
    opts.defines[name] = value;

  compiler::PipelineOptions popts;
  popts.instantiate = opts;
  popts.connectionDepth = connectionDepth;
  popts.fuse = fuse;
  if (timePasses)
    popts.timeStream = &llvm::errs();
  popts.printAfter = [&](compiler::PassId pass) {
    return printAfterAll || llvm::is_contained(printAfterPasses, pass);
  };
  if (!outputFile.empty() &&
      (emit == EmitKind::Trace || emit == EmitKind::VerifyReport || emit == EmitKind::DotDag)) {
    const char *kind = emit == EmitKind::Trace    ? "trace"
                       : emit == EmitKind::DotDag ? "dot-dag"
                                                  : "verify-report";
    diag.errorNoLoc("-o writes a plan, but --emit=" + llvm::Twine(kind) +
                    " stops before the plan is made");
    return 1;
  }
  if (emit == EmitKind::Trace)
    popts.stopAfter = compiler::PassId::Instantiate;
  else if (emit == EmitKind::VerifyReport)
    popts.stopAfter = compiler::PassId::Verify;
  else if (emit == EmitKind::DotDag)
    popts.stopAfter = compiler::PassId::Dag;
  std::unique_ptr<compiler::Compilation> owned =
      compiler::compile(*module, *algorithm, popts, diag);
  if (!owned)
    return 1;
  // The compilation lives until the process exits: freeing half a gigabyte
  // page by page only to exit costs measurable time (clang's -disable-free).
  // A global keeps it reachable, so leak checkers do not report it.
  retainedCompilation = owned.release();
  compiler::Compilation *c = retainedCompilation;

  switch (emit) {
  case EmitKind::Trace:
    compiler::printTrace(*c->trace, llvm::outs());
    return 0;
  case EmitKind::VerifyReport:
    compiler::printVerifyReport(*c->trace, c->report, llvm::outs());
    return 0;
  case EmitKind::DotDag:
    compiler::printDot(*c->trace, c->schedule.dag, nullptr, llvm::outs());
    return 0;
  case EmitKind::Ir:
    compiler::printSchedule(c->schedule, llvm::outs());
    break;
  case EmitKind::Dot:
    compiler::printDot(*c->trace, c->schedule.dag, &c->schedule, llvm::outs());
    break;
  case EmitKind::PlanText: {
    std::ostringstream text;
    printPlanText(c->plan, text);
    llvm::outs() << text.str();
    break;
  }
  case EmitKind::MscclXml:
    return writeMscclXml(c->plan, diag);
  case EmitKind::Html:
    return writePlanPage(c->plan, diag);
  case EmitKind::PredictTrace:
    return writePredictedTrace(c->plan, diag);
  case EmitKind::Predict:
    if (int rc = printPrediction(c->plan, diag))
      return rc;
    break;
  default:
    break;
  }

  // The binary plan: to -o, or plan.bin for --emit=plan.
  std::string out = outputFile;
  if (out.empty() && emit == EmitKind::Plan)
    out = "plan.bin";
  if (out.empty())
    return 0;
  return writePlanTo(c->plan, out, diag) ? 0 : 1;
}
