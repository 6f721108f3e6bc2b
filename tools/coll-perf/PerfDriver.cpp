//===- PerfDriver.cpp - coll-perf's sweep over sizes ----------------------===//

#include "PerfDriver.h"

#include "coll/Runtime/Collective.h"
#include "coll/Runtime/Executor.h"
#include "coll/Runtime/PlanIO.h"
#include "coll/Runtime/Predict.h"
#include "coll/Runtime/ProcessGroup.h"
#include "coll/Runtime/Reference.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <new>
#include <sched.h>
#include <unistd.h>
#include <vector>

using namespace coll;
using namespace coll::tools;

namespace coll::perf {

const char *shortTypeName(DataType type) {
  switch (type) {
  case DataType::Int8:
    return "i8";
  case DataType::Uint8:
    return "u8";
  case DataType::Int32:
    return "i32";
  case DataType::Uint32:
    return "u32";
  case DataType::Int64:
    return "i64";
  case DataType::Uint64:
    return "u64";
  case DataType::Float16:
    return "f16";
  case DataType::BFloat16:
    return "bf16";
  case DataType::Float32:
    return "f32";
  case DataType::Float64:
    return "f64";
  }
  return "?";
}

namespace {

/// Whether a call of \p plan combines values: a built-in collective that
/// reduces, or a user-declared one whose contract has a term of several
/// operands.
bool planReduces(const Plan &plan) {
  if (plan.info.collective != CollectiveKind::Custom)
    return collectiveReduces(plan.info.collective);
  if (!plan.contract)
    return false;
  const std::vector<uint32_t> &begin = plan.contract->termBegin;
  for (size_t t = 0; t + 1 < begin.size(); ++t)
    if (begin[t + 1] - begin[t] > 1)
      return true;
  return false;
}

/// One measurement of the sweep: a size in one placement.
struct Step {
  size_t sizeIndex = 0; ///< Steps of one size are adjacent.
  uint64_t count = 0;
  bool inPlace = false;
  const ValidatedPlan *plan = nullptr; ///< The plan that runs it.
};

/// What a step measured.
struct Measured {
  double timeUs = 0;
  uint64_t wrong = 0;
};

/// Prints the sweep: CSV rows as they come, or nccl-tests' table, one line
/// per size, and its summary.
class Reporter {
public:
  Reporter(const ValidatedPlan &plan, const PerfOptions &opts)
      : info(plan.info()), opts(opts), op(planReduces(plan.plan()) ? redOpName(opts.op) : "none"),
        factor(busBandwidthFactor(info.collective, info.nranks)),
        root(collectiveInfo(info.collective).rooted ? int(info.root) : -1) {}

  void begin(const std::vector<SweepPlan> &plans) {
    const ValidatedPlan &plan = *plans.front().plan;
    std::string names = printablePlanName(info.name);
    if (plans.size() > 1) {
      names.clear();
      for (size_t i = 0; i < plans.size(); ++i) {
        names += (i ? ", " : "") + printablePlanName(plans[i].plan->info().name);
        if (i + 1 < plans.size())
          names += " up to " + std::to_string(plans[i].maxBytes) + " B";
      }
    }
    if (opts.csv) {
      std::printf("collective,algorithm,nranks,ranks_as,size_bytes,count,dtype,op,placement,"
                  "time_us,algbw_GBps,busbw_GBps,wrong%s\n",
                  opts.predict ? ",predicted_us" : "");
    } else {
      std::printf("# coll-perf: plan%s %s, %s, %u ranks as %s%s, %u chunks per rank unit, "
                  "slice %" PRIu64 " elements, protocol %s\n",
                  plans.size() > 1 ? "s" : "", names.c_str(),
                  info.collective == CollectiveKind::Custom ? "a user-declared collective"
                                                            : collectiveName(info.collective),
                  info.nranks, ranksAs(), boundNote(), plan.chunksPerUnit(), opts.run.sliceElements,
                  opts.run.protocol == ProtocolChoice()
                      ? protocolName(info.protocol)
                      : formatProtocolChoice(opts.run.protocol).c_str());
      std::printf("# iters: %" PRIu64 "  warmup: %" PRIu64 "  check: %d  dtype: %s  op: %s\n#\n",
                  opts.iters, opts.warmup, opts.check ? 1 : 0, shortTypeName(opts.type), op);
      std::printf("# %10s  %12s  %6s  %6s  %6s  %-33s  %s\n", "", "", "", "", "",
                  "           out-of-place", "             in-place");
      std::printf("# %10s  %12s  %6s  %6s  %6s  %10s %7s %7s %6s  %10s %7s %7s %6s%s\n", "size",
                  "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
                  "algbw", "busbw", "#wrong", opts.predict ? "   predicted  meas/pred" : "");
      std::printf("# %10s  %12s  %6s  %6s  %6s  %10s %7s %7s %6s  %10s %7s %7s%s\n", "(B)",
                  "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
                  "(GB/s)", opts.predict ? "         (us)" : "");
      if (opts.predict)
        std::printf("# predicted on '%s' (collc --emit=predict's model)\n",
                    opts.predict->name.c_str());
    }
    std::fflush(stdout);
  }

  /// Records \p m of \p step; \p lastOfSize prints the size's table line.
  void measured(const Step &step, const Measured &m, bool lastOfSize) {
    const uint64_t sizeBytes = step.count * dataTypeSize(opts.type) * sizeFactor(info);
    double predicted = -1;
    if (opts.predict) {
      PredictOptions po;
      po.sliceElements = opts.run.sliceElements;
      po.outOfPlace = !step.inPlace;
      po.protocol = step.plan->info().protocol;
      if (opts.run.protocol.force || opts.run.protocol.llMaxBytes ||
          opts.run.protocol.ll128MaxBytes) {
        po.forceProtocol = true;
        po.protocol = chooseProtocol(step.plan->info().protocol, opts.run.protocol, sizeBytes);
      }
      Result<Prediction> p =
          predictPlan(step.plan->plan(), *opts.predict, step.count, opts.type, po);
      if (p && std::isfinite(p->seconds))
        predicted = p->seconds * 1e6;
      else if (!predictionFailed) {
        // Once: the cells say "-" for every size it fails at.
        predictionFailed = true;
        std::fprintf(stderr, "coll-perf: warning: no prediction on '%s': %s\n",
                     opts.predict->name.c_str(),
                     p ? "the predicted time overflows" : p.message().c_str());
      }
    }
    const uint64_t count = sizeBytes / dataTypeSize(opts.type);
    const double algbw = m.timeUs > 0 ? double(sizeBytes) / m.timeUs / 1e3 : 0;
    const double busbw = algbw * factor;
    totalWrong += m.wrong;
    busbwSum += busbw;
    ++rows;
    if (opts.csv) {
      std::printf("%s,%s,%u,%s,%" PRIu64 ",%" PRIu64 ",%s,%s,%s,%.3f,%.4f,%.4f,%" PRIu64,
                  collectiveName(info.collective),
                  printablePlanName(step.plan->info().name).c_str(), info.nranks, ranksAs(),
                  sizeBytes, count, shortTypeName(opts.type), op,
                  step.inPlace ? "in-place" : "out-of-place", m.timeUs, algbw, busbw, m.wrong);
      if (opts.predict && predicted >= 0)
        std::printf(",%.3f", predicted);
      else if (opts.predict)
        std::printf(",");
      std::printf("\n");
      std::fflush(stdout);
      return;
    }
    char cells[64];
    std::snprintf(cells, sizeof cells, "  %10.2f %7.3f %7.3f %6s", m.timeUs, algbw, busbw,
                  opts.check ? std::to_string(m.wrong).c_str() : "N/A");
    (step.inPlace ? inPlaceCells : outOfPlaceCells) = cells;
    if (!step.inPlace || firstTime < 0) {
      firstTime = m.timeUs;
      firstPredicted = predicted;
    }
    if (!lastOfSize)
      return;
    char prediction[64] = "";
    if (opts.predict && firstPredicted >= 0 && firstPredicted < 1e15)
      std::snprintf(prediction, sizeof prediction, "  %10.2f %9.2f", firstPredicted,
                    firstPredicted > 0 ? firstTime / firstPredicted : 0.0);
    else if (opts.predict)
      std::snprintf(prediction, sizeof prediction, "  %10s %9s", "-", "-");
    firstTime = -1;
    char none[64];
    std::snprintf(none, sizeof none, "  %10s %7s %7s %6s", "-", "-", "-", "-");
    std::printf("  %10" PRIu64 "  %12" PRIu64 "  %6s  %6s  %6d%s%s%s\n", sizeBytes, count,
                shortTypeName(opts.type), op, root,
                outOfPlaceCells.empty() ? none : outOfPlaceCells.c_str(),
                inPlaceCells.empty() ? none : inPlaceCells.c_str(), prediction);
    outOfPlaceCells.clear();
    inPlaceCells.clear();
    std::fflush(stdout);
  }

  /// Prints the summary; returns the wrong elements of the whole sweep.
  uint64_t end() {
    if (!opts.csv) {
      std::printf("# Out of bounds values : %" PRIu64 " %s\n", totalWrong,
                  totalWrong ? "FAILED" : "OK");
      std::printf("# Avg bus bandwidth    : %.4f\n#\n", rows ? busbwSum / double(rows) : 0.0);
    }
    std::fflush(stdout);
    return totalWrong;
  }

private:
  const char *ranksAs() const {
    return opts.boot ? "processes met through a store" : opts.processes ? "processes" : "threads";
  }
  /// Whether the rank processes are bound, as the sweep will do it.
  const char *boundNote() const {
    if (!opts.processes)
      return "";
    cpu_set_t set;
    CPU_ZERO(&set);
    const bool bound = opts.bind && sched_getaffinity(0, sizeof set, &set) == 0 &&
                       uint32_t(CPU_COUNT(&set)) >= info.nranks;
    return bound ? " (bound to CPUs)" : " (not bound)";
  }

  const PlanInfo &info;
  const PerfOptions &opts;
  const char *op;
  double factor;
  int root;
  std::string outOfPlaceCells, inPlaceCells;
  double firstTime = -1;         ///< The size's out-of-place time, else its in-place one.
  double firstPredicted = -1;    ///< The prediction of the call firstTime measured.
  bool predictionFailed = false; ///< Its error was printed.
  uint64_t totalWrong = 0;
  double busbwSum = 0;
  uint64_t rows = 0;
};

/// Progress on stderr, when it is a terminal.
class Progress {
public:
  explicit Progress(size_t steps) : steps(steps), shown(isatty(STDERR_FILENO)) {}
  ~Progress() {
    if (shown)
      std::fprintf(stderr, "\r\033[K");
  }
  void at(size_t step, uint64_t bytes, bool inPlace) {
    if (shown)
      std::fprintf(stderr, "\r\033[Kcoll-perf: %zu/%zu: %" PRIu64 " bytes %s", step + 1, steps,
                   bytes, inPlace ? "in place" : "out of place");
  }

private:
  size_t steps;
  bool shown;
};

int fail(const std::string &msg) {
  std::fprintf(stderr, "coll-perf: error: %s\n", msg.c_str());
  return 2;
}

/// The sweep of one plan: its steps, every rank's memory (shared with the
/// rank processes), and the two ways of running it.
class Sweep {
public:
  Sweep(const std::vector<SweepPlan> &plans, const PerfOptions &opts)
      : plans(plans), plan(*plans.front().plan), info(plan.info()), opts(opts), nranks(info.nranks),
        es(dataTypeSize(opts.type)), reporter(plan, opts) {}

  /// Lists the steps and maps the memory; "" or an error.
  std::string prepare();
  /// Runs every step; the exit status.
  int run();

private:
  int runThreads();
  int runProcesses();
  int runBootstrapped();
  /// --bootstrap: this process's rank.
  bool mine(uint32_t r) const { return !opts.boot || r == uint32_t(opts.boot->rank); }
  /// Rank \p r's buffers for \p step.
  RankPointers pointers(const Step &step, uint32_t r) const;
  /// Gives rank \p r fresh inputs and poisons its output before a checked run.
  void resetRank(const Step &step, uint32_t r) const;
  /// Compares every rank's output after a checked run of \p step.
  Result<CheckOutcome> check(const Step &step) const;
  /// Records and prints step \p i.
  void report(size_t i, const Measured &m);
  /// The checked run of \p step by \p call (after the inputs were reset):
  /// the wrong elements of the outputs this process checks.
  Result<uint64_t> checkedRun(const Step &step, const std::function<Status()> &call);
  /// The warm-up runs, then the mean time in µs of the timed ones.
  Result<double> timedRuns(const std::function<Status()> &call) const;

  struct RankMemory {
    char *in = nullptr, *out = nullptr, *both = nullptr;
    uint64_t inBytes = 0, outBytes = 0, bothBytes = 0;
    std::vector<char> original; ///< Test input for the largest count.
  };

  const std::vector<SweepPlan> &plans;
  const ValidatedPlan &plan; ///< The first: the sweep's collective and ranks.
  const PlanInfo &info;
  const PerfOptions &opts;
  const uint32_t nranks;
  const size_t es;
  Reporter reporter;
  std::vector<Step> steps;
  std::vector<RankMemory> ranks;
  std::vector<const void *> originals;
  SharedArena arena;
  double *times = nullptr; ///< Processes: [step * nranks + rank], a rank's mean time.
  bool firstMismatchShown = false;
};

std::string Sweep::prepare() {
  const bool hasInPlace = hasInPlaceForm(info.collective);
  if (opts.placement == PlacementKind::InPlace && !hasInPlace)
    return std::string(collectiveName(info.collective)) + " has no in-place form";
  uint64_t previous = 0, largest = 0;
  for (uint64_t b = opts.minBytes; b <= opts.maxBytes; b *= opts.stepFactor) {
    uint64_t count = countForBytes(plan, opts.type, b);
    if (count && count != previous) {
      size_t sizeIndex = steps.empty() ? 0 : steps.back().sizeIndex + 1;
      const uint64_t sizeBytes = count * es * sizeFactor(info);
      const ValidatedPlan *runs = plans.back().plan;
      for (const SweepPlan &p : plans)
        if (sizeBytes <= p.maxBytes) {
          runs = p.plan;
          break;
        }
      if (opts.placement != PlacementKind::InPlace)
        steps.push_back({sizeIndex, count, false, runs});
      if (opts.placement != PlacementKind::OutOfPlace && hasInPlace)
        steps.push_back({sizeIndex, count, true, runs});
      previous = largest = count;
    }
    if (b > opts.maxBytes / opts.stepFactor)
      break;
  }
  if (steps.empty()) {
    const uint64_t perUnit = info.collective == CollectiveKind::Custom ? plan.chunksPerUnit() : 1;
    return "no size from -b " + std::to_string(opts.minBytes) + " to -e " +
           std::to_string(opts.maxBytes) + " holds a call of this plan (the smallest takes " +
           std::to_string(es * sizeFactor(info) * perUnit) + " bytes)";
  }

  // Every rank's buffers for the largest count, used from their start by
  // the smaller ones; in shared memory so that rank processes write them.
  const BufferElements most = planBufferElements(info, largest);
  const uint64_t inBytes = most.input * es, outBytes = most.output * es;
  const uint64_t bothBytes = std::max(inBytes, outBytes);
  const uint64_t perRank = SharedArena::footprint(inBytes) + SharedArena::footprint(outBytes) +
                           SharedArena::footprint(bothBytes);
  const uint64_t shared = perRank * nranks + SharedArena::footprint(sizeof(SharedBarrier)) +
                          SharedArena::footprint(sizeof(double) * steps.size() * nranks) +
                          RankProcesses::arenaBytes(nranks);
  // --bootstrap: this rank's buffers only, but every rank's input (the
  // reference needs them).
  const uint64_t reserve = opts.boot
                               ? perRank + SharedArena::footprint(sizeof(SharedBarrier)) +
                                     SharedArena::footprint(sizeof(double) * steps.size() * nranks)
                               : shared;
  if (!arena.reserve(reserve))
    return std::string("cannot map ") + std::to_string(reserve) +
           " bytes of shared memory: " + std::strerror(errno);
  ranks.resize(nranks);
  originals.resize(nranks);
  for (uint32_t r = 0; r < nranks; ++r) {
    RankMemory &m = ranks[r];
    m.original.resize(inBytes);
    fillTestInput(opts.type, opts.op, nranks, r, most.input, m.original.data(),
                  testInputOperands(plan.plan()));
    originals[r] = m.original.data();
    if (!mine(r))
      continue;
    m.in = arena.take(inBytes);
    m.out = arena.take(outBytes);
    m.both = arena.take(bothBytes);
    m.inBytes = inBytes;
    m.outBytes = outBytes;
    m.bothBytes = bothBytes;
    // (Element e of a rank's test input does not depend on the count.)
  }
  times = reinterpret_cast<double *>(arena.take(sizeof(double) * steps.size() * nranks));
  return "";
}

RankPointers Sweep::pointers(const Step &step, uint32_t r) const {
  if (step.inPlace)
    return inPlacePointers(info.collective, r, step.count * es, ranks[r].both);
  RankPointers p;
  p.send = ranks[r].in;
  p.recv = ranks[r].out;
  return p;
}

void Sweep::resetRank(const Step &step, uint32_t r) const {
  const BufferElements e = planBufferElements(info, step.count);
  RankPointers p = pointers(step, r);
  if (step.inPlace)
    std::memset(ranks[r].both, 0xff, std::max(e.input, e.output) * es);
  else
    std::memset(p.recv, 0xff, e.output * es);
  std::memcpy(const_cast<void *>(p.send), ranks[r].original.data(), e.input * es);
}

Result<CheckOutcome> Sweep::check(const Step &step) const {
  std::vector<const void *> outputs(nranks);
  for (uint32_t r = 0; r < nranks; ++r)
    outputs[r] = mine(r) ? pointers(step, r).recv : nullptr;
  return checkOutputs(step.plan->plan(), step.count, opts.type, opts.op, originals, outputs,
                      opts.boot ? opts.boot->rank : -1);
}

Result<uint64_t> Sweep::checkedRun(const Step &step, const std::function<Status()> &call) {
  if (Status s = call(); !s)
    return s;
  Result<CheckOutcome> outcome = check(step);
  if (!outcome)
    return outcome.getStatus();
  if (outcome->wrong && !firstMismatchShown) {
    std::fprintf(stderr, "coll-perf: %s\n", outcome->firstMismatch.c_str());
    firstMismatchShown = true;
  }
  return outcome->wrong;
}

Result<double> Sweep::timedRuns(const std::function<Status()> &call) const {
  for (uint64_t w = 0; w < opts.warmup; ++w)
    if (Status s = call(); !s)
      return s;
  auto start = std::chrono::steady_clock::now();
  for (uint64_t n = 0; n < opts.iters; ++n)
    if (Status s = call(); !s)
      return s;
  double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  return opts.iters ? us / double(opts.iters) : 0.0;
}

void Sweep::report(size_t i, const Measured &m) {
  const bool last = i + 1 == steps.size() || steps[i + 1].sizeIndex != steps[i].sizeIndex;
  reporter.measured(steps[i], m, last);
}

int Sweep::run() {
  if (opts.boot)
    return runBootstrapped();
  reporter.begin(plans);
  int rc = opts.processes ? runProcesses() : runThreads();
  uint64_t wrong = reporter.end();
  return rc ? rc : wrong ? 1 : 0;
}

int Sweep::runThreads() {
  LocalWorld world;
  const ExecOptions eo = opts.run.execOptions(ExecMode::Threads);
  std::vector<const void *> sendbufs(nranks);
  std::vector<void *> recvbufs(nranks);
  Progress progress(steps.size());
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step &step = steps[i];
    progress.at(i, step.count * es * sizeFactor(info), step.inPlace);
    for (uint32_t r = 0; r < nranks; ++r) {
      RankPointers p = pointers(step, r);
      sendbufs[r] = p.send;
      recvbufs[r] = p.recv;
    }
    auto call = [&] {
      return world.run(*step.plan, sendbufs, recvbufs, step.count, opts.type, opts.op, eo);
    };
    Measured m;
    if (opts.check) {
      for (uint32_t r = 0; r < nranks; ++r)
        resetRank(step, r);
      Result<uint64_t> wrong = checkedRun(step, call);
      if (!wrong)
        return fail(wrong.message());
      m.wrong = *wrong;
    }
    Result<double> us = timedRuns(call);
    if (!us)
      return fail(us.message());
    m.timeUs = *us;
    report(i, m);
  }
  return 0;
}

// Processes: each rank's process joins the job once and runs every step
// itself; the launcher meets the ranks at a barrier after each checked run
// (it checks every output while they wait), before each timed loop, and
// after it (it reads their times and prints the step).
int Sweep::runProcesses() {
  SharedBarrier *barrier = new (arena.take(sizeof(SharedBarrier))) SharedBarrier(nranks + 1);
  const std::string job = uniqueJobName("coll-perf");
  const ProcessGroupOptions po = opts.run.processGroupOptions();
  const char *stopped = "stopped: another rank or the launcher failed";
  RankProcesses processes;
  // Bound ranks (--bind): each to a CPU of its own, when there are enough.
  std::vector<int> cpus;
  {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (opts.bind && sched_getaffinity(0, sizeof set, &set) == 0)
      for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set))
          cpus.push_back(c);
    if (cpus.size() < nranks)
      cpus.clear();
  }
  processes.start(nranks, arena, [&](uint32_t r) -> std::string {
    if (!cpus.empty()) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpus[r], &one);
      if (sched_setaffinity(0, sizeof one, &one) != 0)
        return std::string("cannot bind rank ") + std::to_string(r) + " to CPU " +
               std::to_string(cpus[r]) + ": " + std::strerror(errno);
    }
    auto group = ProcessGroup::create(job, int(r), int(nranks), po);
    if (!group)
      return group.message();
    // -R 1: the calls run on memory from allocate(), a copy of the rank's
    // part of the arena, which its checked runs copy in and out.
    const RankMemory &m = ranks[r];
    struct Region {
      char *arena;
      uint64_t bytes;
      char *own = nullptr;
    } regions[] = {{m.in, m.inBytes}, {m.out, m.outBytes}, {m.both, m.bothBytes}};
    if (opts.registered)
      for (Region &g : regions) {
        std::string why;
        if (g.bytes && !(g.own = static_cast<char *>((*group)->allocate(g.bytes, &why))))
          return "cannot allocate registered buffers: " + why;
      }
    auto registered = [&](const void *ptr) -> char * {
      char *q = static_cast<char *>(const_cast<void *>(ptr));
      for (const Region &g : regions)
        if (g.own && q >= g.arena && q < g.arena + g.bytes)
          return g.own + (q - g.arena);
      return q;
    };
    for (size_t i = 0; i < steps.size(); ++i) {
      const Step &step = steps[i];
      RankPointers p = pointers(step, r);
      const void *send = registered(p.send);
      void *recv = registered(p.recv);
      auto call = [&] {
        return (*group)->execute(*step.plan, send, recv, step.count, opts.type, opts.op);
      };
      if (opts.check) {
        resetRank(step, r);
        for (const Region &g : regions)
          if (g.own)
            std::memcpy(g.own, g.arena, g.bytes);
        if (Status s = call(); !s)
          return s.message();
        for (const Region &g : regions)
          if (g.own)
            std::memcpy(g.arena, g.own, g.bytes);
        if (!barrier->wait() || !barrier->wait())
          return stopped;
      }
      for (uint64_t w = 0; w < opts.warmup; ++w)
        if (Status s = call(); !s)
          return s.message();
      if (!barrier->wait())
        return stopped;
      auto start = std::chrono::steady_clock::now();
      for (uint64_t n = 0; n < opts.iters; ++n)
        if (Status s = call(); !s)
          return s.message();
      double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
              .count();
      times[i * nranks + r] = opts.iters ? us / double(opts.iters) : 0;
      if (!barrier->wait())
        return stopped;
    }
    return "";
  });

  auto ranksRun = [&] { return processes.healthy(); };
  Progress progress(steps.size());
  std::string error;
  for (size_t i = 0; i < steps.size() && error.empty(); ++i) {
    const Step &step = steps[i];
    progress.at(i, step.count * es * sizeFactor(info), step.inPlace);
    Measured m;
    if (opts.check) {
      if (!barrier->wait(ranksRun))
        break;
      Result<CheckOutcome> outcome = check(step);
      if (!outcome) {
        error = outcome.message();
        barrier->abort();
        break;
      }
      if (outcome->wrong && !firstMismatchShown) {
        std::fprintf(stderr, "coll-perf: %s\n", outcome->firstMismatch.c_str());
        firstMismatchShown = true;
      }
      m.wrong = outcome->wrong;
      if (!barrier->wait(ranksRun))
        break;
    }
    if (!barrier->wait(ranksRun) || !barrier->wait(ranksRun))
      break;
    // The time of a step is the slowest rank's mean, as in nccl-tests.
    for (uint32_t r = 0; r < nranks; ++r)
      m.timeUs = std::max(m.timeUs, times[i * nranks + r]);
    report(i, m);
  }
  std::string errors = processes.finish("coll-perf");
  if (!error.empty())
    errors = error + (errors.empty() ? "" : "\ncoll-perf: error: " + errors);
  return errors.empty() ? 0 : fail(errors);
}

// --bootstrap: this process runs its rank through a group met in the store;
// after each step every rank publishes its time and wrong elements there,
// and rank 0 reports the slowest time and the sum.
int Sweep::runBootstrapped() {
  tools::Bootstrap &boot = *opts.boot;
  const uint32_t r = uint32_t(boot.rank);
  const ProcessGroupOptions po = opts.run.processGroupOptions();
  if (std::string err = boot.connect(po.setupTimeoutSeconds); !err.empty())
    return fail("rank " + std::to_string(r) + ": " + err);
  auto group = ProcessGroup::create(boot.jobName(), int(r), int(nranks), *boot.store, po);
  if (!group)
    return fail(group.message());
  const bool lead = r == 0;
  if (lead)
    reporter.begin(plans);
  const std::string key = "coll-perf/" + boot.jobName() + "/step/";
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step &step = steps[i];
    RankPointers p = pointers(step, r);
    auto call = [&] {
      return (*group)->execute(*step.plan, p.send, p.recv, step.count, opts.type, opts.op);
    };
    uint64_t wrong = 0;
    if (opts.check) {
      resetRank(step, r);
      Result<uint64_t> w = checkedRun(step, call);
      if (!w)
        return fail(w.message());
      wrong = *w;
    }
    Result<double> us = timedRuns(call);
    if (!us)
      return fail(us.message());
    char mine[64];
    std::snprintf(mine, sizeof mine, "%.3f %llu", *us, static_cast<unsigned long long>(wrong));
    if (Status s = boot.store->set(key + std::to_string(i) + "/" + std::to_string(r), mine); !s)
      return fail(s.message());
    if (!lead)
      continue;
    Measured m;
    for (uint32_t q = 0; q < nranks; ++q) {
      Result<std::string> v = boot.store->get(key + std::to_string(i) + "/" + std::to_string(q));
      double t = 0;
      unsigned long long w = 0;
      if (!v || std::sscanf(v->c_str(), "%lf %llu", &t, &w) != 2)
        return fail("rank " + std::to_string(q) + " did not report step " + std::to_string(i) +
                    (v ? " ('" + *v + "')" : ": " + v.message()));
      m.timeUs = std::max(m.timeUs, t);
      m.wrong += w;
    }
    report(i, m);
  }
  if (!lead)
    return firstMismatchShown ? 1 : 0;
  return reporter.end() ? 1 : 0;
}

} // namespace

int runSweep(const ValidatedPlan &plan, const PerfOptions &opts) {
  return runSweep({SweepPlan{&plan, ~uint64_t(0)}}, opts);
}

int runSweep(const std::vector<SweepPlan> &plans, const PerfOptions &opts) {
  Sweep sweep(plans, opts);
  if (std::string err = sweep.prepare(); !err.empty())
    return fail(err);
  return sweep.run();
}

} // namespace coll::perf
