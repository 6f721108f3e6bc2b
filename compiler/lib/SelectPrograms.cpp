//===- SelectPrograms.cpp - A selection table from predictions ------------===//

#include "coll/Compiler/SelectPrograms.h"

#include "coll/Compiler/Pipeline.h"
#include "coll/Lang/Diagnostics.h"
#include "coll/Lang/Frontend.h"
#include "coll/Runtime/Collective.h"
#include "coll/Runtime/Executor.h"
#include "coll/Runtime/PlanIO.h"
#include "coll/Runtime/Predict.h"

#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <sstream>

namespace coll::compiler {

namespace {

/// One program compiled for one rank count.
struct Candidate {
  std::string program; ///< As the table names it.
  Plan plan;
};

std::string sizeText(uint64_t bytes) {
  if (bytes % (1ull << 30) == 0)
    return std::to_string(bytes >> 30) + "G";
  if (bytes % (1ull << 20) == 0)
    return std::to_string(bytes >> 20) + "M";
  if (bytes % (1ull << 10) == 0)
    return std::to_string(bytes >> 10) + "K";
  return std::to_string(bytes);
}

/// \p path compiled for \p nranks, or nothing (the program's `require`
/// refuses N, or it does not compile: either way it is not a candidate).
std::unique_ptr<Compilation> compileFor(const std::string &path, uint32_t nranks) {
  llvm::SourceMgr srcMgr;
  DiagnosticEngine diag(srcMgr, llvm::nulls());
  unsigned buffer = loadSourceFile(path, diag);
  if (!buffer)
    return nullptr;
  std::unique_ptr<ast::Module> module = parseAndAnalyze(buffer, diag);
  if (!module || module->algorithms().size() != 1)
    return nullptr;
  PipelineOptions opts;
  opts.instantiate.nranks = nranks;
  return compile(*module, *module->algorithms().front(), opts, diag);
}

} // namespace

Result<std::string> selectPrograms(const Topology &topo, const SelectOptions &options) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<std::string> files;
  for (const fs::directory_entry &e : fs::directory_iterator(options.programDir, ec))
    if (e.path().extension() == ".coll")
      files.push_back(e.path().string());
  if (ec)
    return Status::error("cannot read '" + options.programDir + "': " + ec.message());
  std::sort(files.begin(), files.end());
  if (options.ranks.empty() || options.minBytes == 0 || options.maxBytes < options.minBytes ||
      options.factor < 2)
    return Status::error("select: rank counts, and sizes from at least 1 byte, are needed");

  // collective -> N -> candidates, in file order.
  std::map<std::string, std::map<uint32_t, std::vector<Candidate>>> byCollective;
  for (const std::string &file : files) {
    std::string name = file;
    if (!options.tableDir.empty()) {
      fs::path rel = fs::path(file).lexically_proximate(options.tableDir);
      if (!rel.empty())
        name = rel.string();
    }
    for (uint32_t n : options.ranks) {
      std::unique_ptr<Compilation> c = compileFor(file, n);
      if (!c || !c->complete || c->plan.info.collective == CollectiveKind::Custom)
        continue;
      byCollective[collectiveName(c->plan.info.collective)][n].push_back(
          Candidate{name, std::move(c->plan)});
    }
  }
  if (byCollective.empty())
    return Status::error("select: no program of '" + options.programDir +
                         "' compiles for the rank counts asked for");

  std::ostringstream out;
  // The name may be a path with any byte in it: one line, printable.
  out << "# Made by collc select on the topology '" << printablePlanName(topo.name)
      << "': per collective and\n"
      << "# rank count, the program predicted fastest at each size from "
      << sizeText(options.minBytes) << " to " << sizeText(options.maxBytes) << " ("
      << dataTypeName(options.type) << ").\n"
      << "# Format: coll/Runtime/Selection.h. Rank counts not listed fall through to\n"
      << "# the next table (the standard library's).\n#\n"
      << "# collective   ranks  max-bytes  program\n";
  const uint64_t es = dataTypeSize(options.type);
  for (const auto &[collective, byRanks] : byCollective)
    for (const auto &[n, candidates] : byRanks) {
      // Every candidate at every size, simulated side by side.
      const std::vector<uint64_t> sizes =
          sweepSizes(options.minBytes, options.maxBytes, options.factor);
      std::vector<PredictCall> calls;
      for (uint64_t bytes : sizes)
        for (const Candidate &c : candidates) {
          const BufferElements unit = planBufferElements(c.plan.info, 1);
          const uint64_t perCount = std::max<uint64_t>(1, std::max(unit.input, unit.output));
          calls.push_back(PredictCall{&c.plan, bytes / es / perCount});
        }
      std::vector<Result<Prediction>> results =
          predictPlans(calls, topo, options.type, PredictOptions(), options.threads);
      // The winner at each size; runs of one winner become one row.
      std::vector<std::pair<uint64_t, size_t>> winners;
      for (size_t s = 0; s < sizes.size(); ++s) {
        size_t best = 0;
        double bestTime = -1;
        for (size_t i = 0; i < candidates.size(); ++i) {
          Result<Prediction> &p = results[s * candidates.size() + i];
          if (!p)
            return Status::error("select: " + candidates[i].program +
                                 " at N = " + std::to_string(n) + ": " + p.message());
          if (bestTime < 0 || p->seconds < bestTime) {
            bestTime = p->seconds;
            best = i;
          }
        }
        if (!winners.empty() && winners.back().second == best)
          winners.back().first = sizes[s];
        else
          winners.emplace_back(sizes[s], best);
      }
      for (size_t w = 0; w < winners.size(); ++w) {
        const bool last = w + 1 == winners.size();
        char line[512];
        std::snprintf(line, sizeof line, "%-14s %-6u %-10s %s\n", collective.c_str(), n,
                      last ? "any" : sizeText(winners[w].first).c_str(),
                      candidates[winners[w].second].program.c_str());
        out << line;
      }
    }
  return out.str();
}

} // namespace coll::compiler
